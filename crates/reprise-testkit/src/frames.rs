//! Turns a scripted completion into the bytes a real server would send.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::reply::{Body, Reply, ScriptedCompletion};

/// The id every scripted completion carries.
const COMPLETION_ID: &str = "chatcmpl-scripted";
/// A fixed creation time, so bodies are reproducible.
const CREATED: u64 = 1_764_460_800;

/// A response body ready to send: its content type and its frames in order.
pub(crate) struct Rendered {
    pub(crate) content_type: String,
    pub(crate) frames: Vec<Bytes>,
}

/// Renders a reply for a request with the given `stream` flag and `model`.
pub(crate) fn render(reply: &Reply, stream: bool, model: &str) -> Rendered {
    match &reply.body {
        Body::Completion(completion) if stream => sse(
            completion_chunks(completion, model, reply.chunk_chars),
            reply.done,
        ),
        Body::Completion(completion) => Rendered {
            content_type: "application/json".to_owned(),
            frames: vec![Bytes::from(completion_json(completion, model).to_string())],
        },
        Body::SseData(data) => sse(data.clone(), reply.done),
        Body::Raw {
            bytes,
            content_type,
        } => Rendered {
            content_type: content_type.clone(),
            frames: split_events(bytes),
        },
        Body::Json(value) => Rendered {
            content_type: "application/json".to_owned(),
            frames: vec![Bytes::from(value.to_string())],
        },
        Body::Text(text) => Rendered {
            content_type: "text/plain; charset=utf-8".to_owned(),
            frames: vec![Bytes::from(text.clone())],
        },
    }
}

fn sse(data: Vec<String>, done: bool) -> Rendered {
    let mut frames: Vec<Bytes> = data
        .into_iter()
        .map(|payload| Bytes::from(format!("data: {payload}\n\n")))
        .collect();
    if done {
        frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }
    Rendered {
        content_type: "text/event-stream".to_owned(),
        frames,
    }
}

/// Splits raw bytes after each blank line (`\n\n`), keeping every byte.
fn split_events(bytes: &Bytes) -> Vec<Bytes> {
    let mut frames = Vec::new();
    let mut start = 0;
    let mut index = 0;
    while index + 1 < bytes.len() {
        if bytes[index] == b'\n' && bytes[index + 1] == b'\n' {
            frames.push(bytes.slice(start..index + 2));
            start = index + 2;
            index += 2;
        } else {
            index += 1;
        }
    }
    if start < bytes.len() {
        frames.push(bytes.slice(start..));
    }
    frames
}

fn pieces(text: &str, chars: usize) -> Vec<String> {
    let all: Vec<char> = text.chars().collect();
    all.chunks(chars.max(1))
        .map(|piece| piece.iter().collect())
        .collect()
}

fn chunk(model: &str, delta: Value, finish_reason: Option<&str>) -> String {
    json!({
        "id": COMPLETION_ID,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    })
    .to_string()
}

fn usage_json(prompt: u64, completion: u64, cached: Option<u64>) -> Value {
    let mut usage = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    });
    if let Some(cached) = cached {
        usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
    }
    usage
}

/// The SSE `data:` payloads of a streamed completion, in OpenAI's shapes.
pub(crate) fn completion_chunks(
    completion: &ScriptedCompletion,
    model: &str,
    chars: usize,
) -> Vec<String> {
    let mut out = vec![chunk(
        model,
        json!({"role": "assistant", "content": null}),
        None,
    )];
    if let Some(reasoning) = &completion.reasoning {
        for piece in pieces(reasoning, chars) {
            out.push(chunk(model, json!({"reasoning_content": piece}), None));
        }
    }
    if let Some(text) = &completion.text {
        for piece in pieces(text, chars) {
            out.push(chunk(model, json!({"content": piece}), None));
        }
    }
    for (index, call) in completion.calls.iter().enumerate() {
        out.push(chunk(
            model,
            json!({"tool_calls": [{
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}),
            None,
        ));
        for piece in pieces(&call.arguments, chars) {
            out.push(chunk(
                model,
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                None,
            ));
        }
    }
    out.push(chunk(model, json!({}), completion.finish_reason.as_deref()));
    if let Some((prompt, generated)) = completion.usage {
        out.push(
            json!({
                "id": COMPLETION_ID,
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": model,
                "choices": [],
                "usage": usage_json(prompt, generated, completion.cached_tokens),
            })
            .to_string(),
        );
    }
    out
}

/// The body of a non-streaming answer.
pub(crate) fn completion_json(completion: &ScriptedCompletion, model: &str) -> Value {
    let mut message = json!({
        "role": "assistant",
        "content": completion.text,
    });
    if let Some(reasoning) = &completion.reasoning {
        message["reasoning_content"] = json!(reasoning);
    }
    if !completion.calls.is_empty() {
        message["tool_calls"] = completion
            .calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                })
            })
            .collect();
    }
    let mut body = json!({
        "id": COMPLETION_ID,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": completion.finish_reason}],
    });
    if let Some((prompt, generated)) = completion.usage {
        body["usage"] = usage_json(prompt, generated, completion.cached_tokens);
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_events_keeps_every_byte_and_splits_at_blank_lines() {
        let bytes = Bytes::from_static(b"data: a\n\ndata: b\n\ntrailing");
        let frames = split_events(&bytes);
        assert_eq!(frames.len(), 3);
        assert_eq!(frames.concat(), bytes.to_vec());
        assert_eq!(&frames[1][..], b"data: b\n\n");
    }

    #[test]
    fn pieces_respect_char_boundaries() {
        assert_eq!(pieces("héllo", 2), vec!["hé", "ll", "o"]);
    }
}
