//! Asking a server how large its model's context window is.
//!
//! There is no standard endpoint; each local server has its own:
//!
//! | server    | request                | where the window is                                  |
//! |-----------|------------------------|------------------------------------------------------|
//! | llama.cpp | `GET /props`           | `default_generation_settings.n_ctx`                  |
//! | Ollama    | `POST /api/show`       | `model_info.*.context_length`, capped by `num_ctx`   |
//! | vLLM      | `GET /v1/models`       | `max_model_len` of the model                          |
//! | LM Studio | `GET /api/v0/models`   | `max_context_length` of the model                    |
//!
//! All four are asked at once, each with a short timeout; the first in that order
//! that answers wins. Any failure is only "unknown".

use std::time::Duration;

use serde_json::{Value, json};

/// The `num_ctx` Ollama uses when the model's parameters set none.
pub const OLLAMA_DEFAULT_NUM_CTX: u32 = 4_096;

/// A window found on the server, and which endpoint said so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveredWindow {
    /// The window in tokens.
    pub tokens: u32,
    /// `llama.cpp /props`, `ollama /api/show`, `vllm /v1/models` or
    /// `lm-studio /api/v0/models`.
    pub source: &'static str,
}

/// Asks the server behind `base_url` (the API root, such as
/// `http://localhost:8080/v1`) for the context window of `model`. Each request
/// gives up after `timeout`; `None` when no endpoint answered with a window.
pub async fn discover_context_window(
    base_url: &str,
    model: &str,
    api_key: Option<&str>,
    timeout: Duration,
) -> Option<DiscoveredWindow> {
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .build()
        .ok()?;
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let get = |url: String| {
        let mut request = client.get(url);
        if let Some(key) = api_key {
            request = request.bearer_auth(key);
        }
        async move { json_of(request).await }
    };
    let mut show = client
        .post(format!("{root}/api/show"))
        .json(&json!({"model": model}));
    if let Some(key) = api_key {
        show = show.bearer_auth(key);
    }
    let (props, ollama, models, lm_studio) = tokio::join!(
        get(format!("{root}/props")),
        json_of(show),
        get(format!("{base}/models")),
        get(format!("{root}/api/v0/models")),
    );
    let found = [
        (
            props.as_ref().and_then(llama_cpp_window),
            "llama.cpp /props",
        ),
        (ollama.as_ref().and_then(ollama_window), "ollama /api/show"),
        (
            models.as_ref().and_then(|v| vllm_window(v, model)),
            "vllm /v1/models",
        ),
        (
            lm_studio.as_ref().and_then(|v| lm_studio_window(v, model)),
            "lm-studio /api/v0/models",
        ),
    ];
    found
        .into_iter()
        .find_map(|(tokens, source)| tokens.map(|tokens| DiscoveredWindow { tokens, source }))
}

async fn json_of(request: reqwest::RequestBuilder) -> Option<Value> {
    let response = request.send().await.ok()?;
    if !response.status().is_success() {
        return None;
    }
    response.json().await.ok()
}

fn as_window(value: &Value) -> Option<u32> {
    value
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0)
}

/// llama.cpp's `/props`: `default_generation_settings.n_ctx` (older builds put
/// `n_ctx` at the top).
pub fn llama_cpp_window(props: &Value) -> Option<u32> {
    as_window(&props["default_generation_settings"]["n_ctx"]).or_else(|| as_window(&props["n_ctx"]))
}

/// Ollama's `/api/show`: the model's `*.context_length`, capped by the `num_ctx`
/// it really runs with (its parameters', else [`OLLAMA_DEFAULT_NUM_CTX`]).
pub fn ollama_window(show: &Value) -> Option<u32> {
    let trained = show["model_info"].as_object().and_then(|info| {
        info.iter()
            .find(|(key, _)| key.ends_with(".context_length"))
            .and_then(|(_, value)| as_window(value))
    })?;
    let num_ctx = show["parameters"]
        .as_str()
        .and_then(|parameters| {
            parameters.lines().find_map(|line| {
                let mut words = line.split_whitespace();
                (words.next() == Some("num_ctx"))
                    .then(|| words.next()?.parse::<u32>().ok())
                    .flatten()
            })
        })
        .unwrap_or(OLLAMA_DEFAULT_NUM_CTX);
    Some(trained.min(num_ctx))
}

/// The entry of `model` in a `{"data": [...]}` listing (or the only one).
fn model_entry<'a>(listing: &'a Value, model: &str) -> Option<&'a Value> {
    let data = listing["data"].as_array()?;
    data.iter()
        .find(|entry| entry["id"].as_str() == Some(model))
        .or_else(|| (data.len() == 1).then(|| &data[0]))
}

/// vLLM's `/v1/models`: `max_model_len` of the model.
pub fn vllm_window(models: &Value, model: &str) -> Option<u32> {
    as_window(&model_entry(models, model)?["max_model_len"])
}

/// LM Studio's `/api/v0/models`: `max_context_length` of the model.
pub fn lm_studio_window(models: &Value, model: &str) -> Option<u32> {
    as_window(&model_entry(models, model)?["max_context_length"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_servers_answer_is_read() {
        assert_eq!(
            llama_cpp_window(&json!({"default_generation_settings": {"n_ctx": 2048}})),
            Some(2048)
        );
        assert_eq!(llama_cpp_window(&json!({"n_ctx": 4096})), Some(4096));
        assert_eq!(llama_cpp_window(&json!({"error": "x"})), None);
        let show = json!({
            "model_info": {"qwen2.context_length": 32768, "general.architecture": "qwen2"},
            "parameters": "stop \"<|im_end|>\"\nnum_ctx 8192",
        });
        assert_eq!(ollama_window(&show), Some(8192));
        let bare = json!({"model_info": {"llama.context_length": 131072}});
        assert_eq!(ollama_window(&bare), Some(OLLAMA_DEFAULT_NUM_CTX));
        let vllm = json!({"data": [{"id": "a", "max_model_len": 1000}, {"id": "b", "max_model_len": 2000}]});
        assert_eq!(vllm_window(&vllm, "b"), Some(2000));
        assert_eq!(vllm_window(&vllm, "c"), None);
        let lms = json!({"data": [{"id": "m", "max_context_length": 32768}]});
        assert_eq!(lm_studio_window(&lms, "other"), Some(32768));
    }
}
