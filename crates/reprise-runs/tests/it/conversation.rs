//! read_conversation: what is redrawn when a run is resumed.

use std::fs;

use reprise_runs::CONVERSATION_JSONL;
use reprise_runs::{
    Conversation, mark_command_expansion, read_conversation, read_conversation_with_warnings,
    stream_conversation,
};
use reprise_session::{Entry, Message, Role, ToolCall};

fn line(entry: &Entry) -> String {
    serde_json::to_string(entry).unwrap() + "\n"
}

/// The conversation as read, checked to be what streaming it hands over.
fn read_both_ways(dir: &std::path::Path) -> Conversation {
    let read = read_conversation_with_warnings(dir).unwrap();
    let mut streamed = Vec::new();
    let warnings = stream_conversation(dir, &mut |message| streamed.push(message)).unwrap();
    assert_eq!(streamed, read.messages);
    assert_eq!(warnings, read.warnings);
    assert_eq!(read_conversation(dir).unwrap(), read.messages);
    read
}

fn said(dir: &std::path::Path) -> Vec<(Role, String)> {
    read_both_ways(dir)
        .messages
        .into_iter()
        .map(|message| (message.role, message.text))
        .collect()
}

#[test]
fn only_the_persons_messages_and_the_agents_text_replies_come_back() {
    let tmp = tempfile::tempdir().unwrap();
    let mut expansion = Entry::message(Message::user("Review the diff below carefully…"));
    mark_command_expansion(&mut expansion);
    let mut meta_on_message = Message::user("<command-name>/init</command-name>");
    meta_on_message
        .extra
        .insert("isMeta".into(), serde_json::Value::Bool(true));
    let entries = [
        Entry::message(Message::system("You are helpful.")),
        Entry::message(Message::user("hi")),
        Entry::message(Message::assistant_tool_calls(
            None,
            vec![ToolCall::function("c1", "look", "{}")],
        )),
        Entry::message(Message::tool("c1", "tool output")),
        Entry::message(Message::assistant_tool_calls(
            Some("Let me check.".into()),
            vec![ToolCall::function("c2", "look", "{}")],
        )),
        Entry::message(Message::tool("c2", "more output")),
        Entry::message(Message::assistant("Here it is.")),
        Entry::message(Message::user("/review")),
        expansion,
        Entry::message(meta_on_message),
        Entry::other("compaction", serde_json::Map::new()),
        Entry::message(Message::assistant("   ")),
        Entry::message(Message::user("bye")),
    ];
    let text: String = entries.iter().map(line).collect();
    fs::write(tmp.path().join(CONVERSATION_JSONL), text).unwrap();
    assert_eq!(
        said(tmp.path()),
        [
            (Role::User, "hi".to_owned()),
            (Role::Assistant, "Let me check.".to_owned()),
            (Role::Assistant, "Here it is.".to_owned()),
            (Role::User, "/review".to_owned()),
            (Role::User, "bye".to_owned()),
        ]
    );
}

#[test]
fn content_parts_bare_lines_and_duplicate_uuids_are_handled() {
    let tmp = tempfile::tempdir().unwrap();
    let parts = Entry::message(
        serde_json::from_value(serde_json::json!({
            "role": "user",
            "content": [
                {"type": "text", "text": "look at "},
                {"type": "image_url", "image_url": {"url": "data:…"}},
                {"type": "text", "text": "this"}
            ]
        }))
        .unwrap(),
    );
    let reply = Entry::message(Message::assistant("a picture"));
    let mut text = String::new();
    text += &line(&parts);
    text += &line(&reply);
    text += &line(&reply); // a retried append that slipped through
    text += "{\"role\":\"user\",\"content\":\"bare message\"}\n";
    text += "{\"role\":\"assistant\",\"content\":\"bare reply\"}\n";
    fs::write(tmp.path().join(CONVERSATION_JSONL), text).unwrap();
    assert_eq!(
        said(tmp.path()),
        [
            (Role::User, "look at this".to_owned()),
            (Role::Assistant, "a picture".to_owned()),
            (Role::User, "bare message".to_owned()),
            (Role::Assistant, "bare reply".to_owned()),
        ]
    );
}

#[test]
fn corrupt_lines_are_skipped_with_a_warning_and_a_torn_tail_is_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let mut text = String::new();
    text += &line(&Entry::message(Message::user("one")));
    text += "{this is not json\n";
    text += "[1,2,3]\n";
    text += &line(&Entry::message(Message::assistant("two")));
    text += "{\"uuid\":\"0193c0de-0000-7000-8000-0000000000";
    fs::write(tmp.path().join(CONVERSATION_JSONL), text).unwrap();
    let conversation = read_both_ways(tmp.path());
    let texts: Vec<_> = conversation
        .messages
        .iter()
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(texts, ["one", "two"]);
    let lines: Vec<_> = conversation.warnings.iter().map(|w| w.line).collect();
    assert_eq!(lines, [2, 3, 5]);
    assert!(conversation.warnings[2].message.contains("torn"));
    assert!(
        conversation.warnings[0]
            .file
            .ends_with("conversation.jsonl")
    );
}

#[test]
fn a_run_without_a_conversation_reads_as_empty() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(read_conversation(tmp.path()).unwrap().is_empty());
}

#[tokio::test]
async fn a_command_expansion_is_not_the_persons_last_message() {
    use reprise_runs::{create_run_store, list_runs};
    use reprise_session::{SessionKey, SessionStore};
    let runs = tempfile::tempdir().unwrap();
    let dir = runs.path().join("2026-11-30T09-38-04-123Z");
    let store = create_run_store(&dir);
    let key = SessionKey::session("s1").unwrap();
    let mut expansion = Entry::message(Message::user("Expanded text of /review: check everything"));
    mark_command_expansion(&mut expansion);
    store
        .append(&key, &[Entry::message(Message::user("/review")), expansion])
        .await
        .unwrap();
    let listed = list_runs(runs.path()).unwrap();
    assert_eq!(listed.runs.len(), 1);
    assert_eq!(listed.runs[0].last_message.as_deref(), Some("/review"));
}

#[test]
fn every_message_comes_back_with_a_marker_where_each_compaction_happened() {
    let tmp = tempfile::tempdir().unwrap();
    let mut entries: Vec<Entry> = (0..6)
        .map(|i| {
            Entry::message(if i % 2 == 0 {
                Message::user(format!("q{i}"))
            } else {
                Message::assistant(format!("a{i}"))
            })
        })
        .collect();
    let first = reprise_session::Compaction {
        summary: "s1".into(),
        through: entries[2].uuid,
        tokens_before: 7_100,
        tokens_after: 912,
    };
    entries.insert(4, first.to_entry());
    let second = reprise_session::Compaction {
        summary: "s2".into(),
        through: entries[5].uuid,
        tokens_before: 2_000,
        tokens_after: 50,
    };
    entries.push(second.to_entry());
    // One whose `through` is unknown is not shown.
    entries.push(
        reprise_session::Compaction {
            summary: "s3".into(),
            through: uuid::Uuid::now_v7(),
            tokens_before: 1,
            tokens_after: 1,
        }
        .to_entry(),
    );
    let text: String = entries.iter().map(line).collect();
    fs::write(tmp.path().join(CONVERSATION_JSONL), text).unwrap();
    let shown = said(tmp.path());
    let expected: Vec<(Role, String)> = vec![
        (Role::User, "q0".into()),
        (Role::Assistant, "a1".into()),
        (Role::User, "q2".into()),
        (Role::Assistant, "a3".into()),
        (
            Role::System,
            "(compacted 3 messages: 7.1k → 0.9k tokens)".into(),
        ),
        (Role::User, "q4".into()),
        (Role::Assistant, "a5".into()),
        (
            Role::System,
            "(compacted 2 messages: 2.0k → 50 tokens)".into(),
        ),
    ];
    assert_eq!(shown, expected);
}

#[test]
fn a_long_conversation_streams_as_it_reads() {
    // Past the size that is parsed on several threads, with a compaction, a corrupt
    // line and a repeated uuid on the way.
    let tmp = tempfile::tempdir().unwrap();
    let mut text = String::new();
    let mut entries = Vec::new();
    for i in 0..6_000 {
        let entry = Entry::message(if i % 2 == 0 {
            Message::user(format!("question {i} {}", "x".repeat(300)))
        } else {
            Message::assistant(format!("answer {i} {}", "y".repeat(300)))
        });
        text += &line(&entry);
        if i == 3_000 {
            text += "{not json\n";
            text += &line(&entries[10]);
            let compaction = reprise_session::Compaction {
                summary: "s".into(),
                through: entries[2_000].uuid,
                tokens_before: 5_000,
                tokens_after: 100,
            };
            text += &line(&compaction.to_entry());
        }
        entries.push(entry);
    }
    assert!(text.len() > 2 << 20);
    fs::write(tmp.path().join(CONVERSATION_JSONL), text).unwrap();
    let read = read_both_ways(tmp.path());
    assert_eq!(read.messages.len(), 6_001);
    assert_eq!(read.messages[3_001].role, Role::System);
    assert_eq!(
        read.messages[3_001].text,
        "(compacted 2001 messages: 5.0k → 0.1k tokens)"
    );
    assert_eq!(read.warnings.len(), 2, "{:?}", read.warnings);
}

/// A catalog of run folders hands a long conversation over as it reads it, on a
/// current-thread runtime: the messages and warnings of reading it whole, in order;
/// a stream left after its first message still ends with the warnings.
#[tokio::test(flavor = "current_thread")]
async fn the_catalog_hands_a_long_conversation_over_as_it_reads() {
    use reprise_runs::{FolderCatalog, RunCatalog, RunFolder};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    fs::create_dir(&dir).unwrap();
    let mut text = String::new();
    for i in 0..3_000 {
        let message = match i % 3 {
            0 => Message::user(format!("question {i}")),
            // Some long enough to fill a batch alone.
            1 => Message::assistant(format!("answer {i} {}", "y".repeat(i * 20))),
            _ => Message::assistant(format!("answer {i}")),
        };
        text += &line(&Entry::message(message));
        if i == 1_500 {
            text += "{not json\n";
        }
    }
    fs::write(dir.join(CONVERSATION_JSONL), text).unwrap();
    let whole = read_conversation_with_warnings(&dir).unwrap();
    assert_eq!(whole.messages.len(), 3_000);
    assert_eq!(whole.warnings.len(), 1);
    let catalog = FolderCatalog::new(tmp.path());
    let folder = RunFolder {
        dir: dir.clone(),
        session_id: None,
        warnings: Vec::new(),
    };
    let mut stream = catalog.stream_conversation(&folder).await.unwrap();
    let mut streamed = Vec::new();
    while let Some(message) = stream.next().await {
        streamed.push(message);
    }
    assert_eq!(streamed, whole.messages);
    assert_eq!(stream.finish().await.unwrap(), whole.warnings);

    let mut stream = catalog.stream_conversation(&folder).await.unwrap();
    assert_eq!(stream.next().await.as_ref(), whole.messages.first());
    assert_eq!(stream.finish().await.unwrap(), whole.warnings);
}

/// A damaged conversation: many compactions that each name an entry it does not
/// hold, after many messages, then one that names the tenth message. One pass over
/// it takes a fraction of a second; a scan to the start per compaction, billions of
/// comparisons.
#[test]
fn many_compactions_naming_no_entry_cost_one_pass() {
    let compaction = |through| {
        reprise_session::Compaction {
            summary: "they talked".into(),
            through,
            tokens_before: 7_100,
            tokens_after: 900,
        }
        .to_entry()
    };
    let mut entries: Vec<Entry> = (0..200_000)
        .map(|_| Entry::message(Message::user("m")))
        .collect();
    entries.extend((0..100_000).map(|_| compaction(uuid::Uuid::now_v7())));
    entries.push(compaction(entries[9].uuid));
    let loaded = reprise_session::Loaded {
        entries,
        warnings: Vec::new(),
    };
    let conversation =
        reprise_testkit::ends_within_a_minute(move || reprise_runs::conversation_of(loaded));
    let last = conversation.messages.last().unwrap();
    assert_eq!(last.role, Role::System);
    assert_eq!(last.text, "(compacted 10 messages: 7.1k → 0.9k tokens)");
    assert_eq!(conversation.messages.len(), 200_001);
}
