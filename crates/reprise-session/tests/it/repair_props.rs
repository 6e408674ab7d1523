//! Property tests of resume repair: whatever a history holds, the view sent to a
//! model is one that OpenAI-compatible servers accept.

use std::collections::HashMap;

use proptest::prelude::*;
use reprise_session::{Entry, Message, Role, ToolCall};
use reprise_session::{inspect, model_view, model_view_messages, repair_entries, repair_messages};

/// One generated message; ids come from a small pool so they collide and repeat.
#[derive(Clone, Debug)]
enum Op {
    User,
    System,
    Text,
    Calls(Vec<u8>),
    Result(u8),
    ResultWithoutId,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::User),
        1 => Just(Op::System),
        2 => Just(Op::Text),
        3 => prop::collection::vec(0u8..5, 1..4).prop_map(Op::Calls),
        4 => (0u8..5).prop_map(Op::Result),
        1 => Just(Op::ResultWithoutId),
    ]
}

/// A well-formed history (each call answered, results shuffled within the turn),
/// then damaged: entries deleted, some results moved later, some duplicated.
fn damaged() -> impl Strategy<Value = Vec<Op>> {
    let round = (prop::collection::vec(0u8..5, 1..4), any::<u64>());
    let turn = prop::collection::vec(round, 0..3);
    (
        prop::collection::vec(turn, 0..5),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(turns, noise)| {
            let mut ops = Vec::new();
            for rounds in turns {
                ops.push(Op::User);
                for (ids, seed) in rounds {
                    ops.push(Op::Calls(ids.clone()));
                    let mut results: Vec<u8> = ids;
                    let len = results.len();
                    results.rotate_left((seed as usize) % len);
                    ops.extend(results.into_iter().map(Op::Result));
                }
                ops.push(Op::Text);
            }
            let mut noise = noise.into_iter();
            let mut out = Vec::new();
            let mut late = Vec::new();
            for op in ops {
                match noise.next().unwrap_or(0) % 10 {
                    0 => {} // deleted
                    1 if matches!(op, Op::Result(_)) => late.push(op),
                    2 if matches!(op, Op::Result(_)) => {
                        out.push(op.clone());
                        out.push(op);
                    }
                    _ => out.push(op),
                }
                if noise.next().unwrap_or(1) % 7 == 0 {
                    out.append(&mut late);
                }
            }
            out.extend(late);
            out
        })
}

fn history() -> impl Strategy<Value = Vec<Op>> {
    prop_oneof![prop::collection::vec(op(), 0..40), damaged()]
}

fn to_messages(ops: &[Op]) -> Vec<Message> {
    ops.iter()
        .enumerate()
        .map(|(n, op)| match op {
            Op::User => Message::user(format!("u{n}")),
            Op::System => Message::system(format!("s{n}")),
            Op::Text => Message::assistant(format!("a{n}")),
            Op::Calls(ids) => Message::assistant_tool_calls(
                None,
                ids.iter()
                    .map(|id| ToolCall::function(format!("c{id}"), format!("tool{n}"), "{}"))
                    .collect(),
            ),
            Op::Result(id) => Message::tool(format!("c{id}"), format!("r{n}")),
            Op::ResultWithoutId => {
                let mut message = Message::tool("x", format!("r{n}"));
                message.tool_call_id = None;
                message
            }
        })
        .collect()
}

fn is_interrupted(message: &Message) -> bool {
    message
        .text()
        .contains("was interrupted before it returned")
}

/// The invariant servers enforce, plus: nothing but tool results is added, moved or
/// lost, and each real result is sent at most once.
fn check_view(input: &[Message], view: &[Message]) -> Result<(), TestCaseError> {
    let mut i = 0;
    let mut sent_results = HashMap::new();
    while i < view.len() {
        let message = &view[i];
        prop_assert!(
            message.role != Role::Tool,
            "tool message without its call at {i}"
        );
        i += 1;
        let calls = message.calls();
        if calls.is_empty() {
            continue;
        }
        let mut wanted: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        let mut answered = Vec::new();
        while i < view.len() && view[i].role == Role::Tool {
            answered.push(view[i].tool_call_id.as_deref().unwrap_or("<none>"));
            if !is_interrupted(&view[i]) {
                *sent_results.entry(view[i].text()).or_insert(0) += 1;
            }
            i += 1;
        }
        wanted.sort();
        answered.sort();
        prop_assert_eq!(wanted, answered, "calls not answered exactly once");
    }
    prop_assert!(sent_results.values().all(|&count| count == 1));
    let inputs: Vec<String> = input
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(Message::text)
        .collect();
    for result in sent_results.keys() {
        prop_assert!(inputs.contains(result), "invented result {result}");
    }
    let kept = |messages: &[Message]| -> Vec<Message> {
        messages
            .iter()
            .filter(|m| m.role != Role::Tool)
            .cloned()
            .collect()
    };
    prop_assert_eq!(kept(input), kept(view));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_view_of_any_history_is_valid(ops in history()) {
        let messages = to_messages(&ops);
        let entries: Vec<Entry> = messages.iter().cloned().map(Entry::message).collect();
        check_view(&messages, &model_view(&entries))?;
        check_view(&messages, &model_view_messages(&messages))?;
        prop_assert_eq!(model_view(&entries), model_view_messages(&messages));
    }

    #[test]
    fn appending_the_repair_changes_nothing_the_model_sees(ops in history()) {
        let messages = to_messages(&ops);
        let entries: Vec<Entry> = messages.iter().cloned().map(Entry::message).collect();
        let repairs = repair_entries(&entries);
        prop_assert_eq!(repairs.len(), inspect(&entries).dangling.len());
        let mut repaired = entries.clone();
        repaired.extend(repairs);
        prop_assert!(repair_entries(&repaired).is_empty(), "repair is not idempotent");
        prop_assert!(inspect(&repaired).dangling.is_empty());
        prop_assert_eq!(model_view(&repaired), model_view(&entries));

        let mut repaired_messages = messages.clone();
        repaired_messages.extend(repair_messages(&messages));
        prop_assert!(repair_messages(&repaired_messages).is_empty());
        prop_assert_eq!(model_view_messages(&repaired_messages), model_view_messages(&messages));
    }

    #[test]
    fn a_history_with_every_result_in_place_is_sent_unchanged(
        turns in prop::collection::vec(prop::collection::vec(1usize..4, 0..3), 0..6)
    ) {
        let mut messages = Vec::new();
        let mut next = 0;
        for rounds in turns {
            messages.push(Message::user("q"));
            for calls in rounds {
                let ids: Vec<String> = (0..calls).map(|k| format!("id{}", next + k)).collect();
                next += calls;
                messages.push(Message::assistant_tool_calls(
                    None,
                    ids.iter().map(|id| ToolCall::function(id.clone(), "t", "{}")).collect(),
                ));
                messages.extend(ids.iter().map(|id| Message::tool(id.clone(), "ok")));
            }
            messages.push(Message::assistant("done"));
        }
        prop_assert!(repair_messages(&messages).is_empty());
        prop_assert_eq!(model_view_messages(&messages), messages);
    }
}
