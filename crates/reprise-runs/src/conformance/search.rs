//! The checks of [`RunCatalog::search`]: the same hits, snippets and order wherever
//! the runs are kept.

use std::sync::Arc;

use reprise_redact::Redactor;
use reprise_session::{Entry, Message, ToolCall};
use uuid::Uuid;

use super::{Factory, start_run_with};
use crate::{RunCatalog, RunFolder, RunSearch, RunSummary, SearchQuery, SearchRole};

pub(super) async fn run_all(make: Factory<'_>) {
    searches_find_the_same_messages_in_the_same_order(make().await).await;
    notes_summaries_and_long_literals_are_searched_alike(make().await).await;
    the_runs_with_a_text_of_the_person_are_found_newest_first(make().await).await;
}

/// A hit as the checks compare it: the run's name, the subagent, the entry, the role,
/// the snippet and how many matches the message holds.
type Seen = (String, Option<String>, Uuid, String, String, usize);

fn query(pattern: &str) -> SearchQuery {
    SearchQuery {
        pattern: pattern.to_owned(),
        regex: false,
        ignore_case: false,
        role: None,
        max_per_run: None,
        redactor: Redactor::new(),
    }
}

async fn seen(catalog: &dyn RunCatalog, runs: &[RunSummary], query: &SearchQuery) -> Vec<Seen> {
    catalog
        .search(RunSearch { runs, query })
        .await
        .unwrap_or_else(|error| panic!("searching {query:?}: {error}"))
        .into_iter()
        .map(|hit| {
            (
                runs[hit.run].name().to_owned(),
                hit.agent,
                hit.entry,
                hit.role,
                hit.snippet,
                hit.matches,
            )
        })
        .collect()
}

/// Whether each hit of a case-blind search for `key`, at most `max_per_run` a run,
/// says its run had more.
async fn more_in_run(
    catalog: &dyn RunCatalog,
    runs: &[RunSummary],
    max_per_run: usize,
) -> Vec<bool> {
    let query = SearchQuery {
        max_per_run: Some(max_per_run),
        ignore_case: true,
        ..query("key")
    };
    catalog
        .search(RunSearch {
            runs,
            query: &query,
        })
        .await
        .unwrap_or_else(|error| panic!("searching {query:?}: {error}"))
        .iter()
        .map(|hit| hit.more_in_run)
        .collect()
}

async fn searches_find_the_same_messages_in_the_same_order(catalog: Arc<dyn RunCatalog>) {
    let check = "searches find the same messages in the same order";
    let asked = Entry::message(Message::user("Where is the Silver Key?"));
    let answered = Entry::message(Message::assistant("The silver key is under the mat."));
    let called = Entry::message(Message::assistant_tool_calls(
        None,
        vec![ToolCall::function(
            "call_1",
            "read_file",
            r#"{"path":"/tmp/key.txt"}"#,
        )],
    ));
    let read = Entry::message(Message::tool("call_1", "key: 42, key: 43"));
    let system = Entry::message(Message::system("You hold the key."));
    let found = Entry::message(Message::assistant("Scout found a KEY in the cave"));
    let pastry = Entry::message(Message::user("Café ÉCLAIR"));
    let older = start_run_with(
        &*catalog,
        &[
            asked.clone(),
            answered.clone(),
            called.clone(),
            read.clone(),
            system,
        ],
        &[("scout", vec![found.clone(), pastry.clone()])],
    )
    .await;
    // Listings order by the time of the last message, in milliseconds at best.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let idle = Entry::message(Message::user("nothing here"));
    let quoted = Entry::message(Message::assistant("Say \"hi\"\nto the key-maker"));
    let newer = start_run_with(&*catalog, &[idle, quoted.clone()], &[]).await;
    let runs = catalog.list().await.unwrap().runs;
    let names: Vec<&str> = runs.iter().map(|run| run.name()).collect();
    assert_eq!(names, [newer.name(), older.name()], "{check}");

    // Where a hit is: the run, and the subagent.
    let (newer_main, older_main) = ((&newer, None), (&older, None));
    let older_scout = (&older, Some("scout"));
    let hit =
        |(run, agent): (&RunFolder, Option<&str>), entry: &Entry, snippet: &str, matches: usize| {
            let role = entry.as_message().unwrap().role.as_str().to_owned();
            let agent = agent.map(str::to_owned);
            let snippet = snippet.to_owned();
            (
                run.name().to_owned(),
                agent,
                entry.uuid,
                role,
                snippet,
                matches,
            )
        };
    let key_maker = hit(newer_main, &quoted, "Say \"hi\" to the key-maker", 1);
    let silver_key = hit(older_main, &asked, "Where is the Silver Key?", 1);
    let under_the_mat = hit(older_main, &answered, "The silver key is under the mat.", 1);
    let read_file = hit(older_main, &called, "read_file /tmp/key.txt", 1);
    let result = hit(older_main, &read, "key: 42, key: 43", 2);
    let scout = hit(older_scout, &found, "Scout found a KEY in the cave", 1);
    let eclair = hit(older_scout, &pastry, "Café ÉCLAIR", 1);

    // A literal, case and all; system messages are never searched.
    assert_eq!(
        seen(&*catalog, &runs, &query("key")).await,
        [
            key_maker.clone(),
            under_the_mat.clone(),
            read_file.clone(),
            result.clone()
        ],
        "{check}: literal"
    );
    // Ignoring case, subagents' transcripts after the main one.
    let ignoring_case = |pattern: &str| SearchQuery {
        ignore_case: true,
        ..query(pattern)
    };
    assert_eq!(
        seen(&*catalog, &runs, &ignoring_case("KEY")).await,
        [
            key_maker.clone(),
            silver_key.clone(),
            under_the_mat.clone(),
            read_file.clone(),
            result.clone(),
            scout.clone()
        ],
        "{check}: ignoring case"
    );
    assert_eq!(
        seen(&*catalog, &runs, &ignoring_case("éclair")).await,
        std::slice::from_ref(&eclair),
        "{check}: ignoring the case of a non-ASCII letter"
    );
    assert!(
        seen(&*catalog, &runs, &query("éclair")).await.is_empty(),
        "{check}: a non-ASCII letter in another case"
    );
    // Quotes and newlines, stored escaped.
    assert_eq!(
        seen(&*catalog, &runs, &query("\"hi\"\nto")).await,
        std::slice::from_ref(&key_maker),
        "{check}: quotes and a newline"
    );
    // Roles.
    let of_role = |pattern: &str, role: SearchRole| SearchQuery {
        role: Some(role),
        ..ignoring_case(pattern)
    };
    assert_eq!(
        seen(&*catalog, &runs, &of_role("key", SearchRole::User)).await,
        std::slice::from_ref(&silver_key),
        "{check}: the person's messages"
    );
    assert_eq!(
        seen(&*catalog, &runs, &of_role("key", SearchRole::Tool)).await,
        std::slice::from_ref(&result),
        "{check}: tool results"
    );
    assert_eq!(
        seen(&*catalog, &runs, &of_role("key", SearchRole::Assistant)).await,
        [
            key_maker.clone(),
            under_the_mat.clone(),
            read_file.clone(),
            scout.clone()
        ],
        "{check}: the model's messages"
    );
    // Regular expressions, in Rust's syntax.
    let regex = |pattern: &str| SearchQuery {
        regex: true,
        ..query(pattern)
    };
    assert_eq!(
        seen(&*catalog, &runs, &regex(r"key-\w+")).await,
        std::slice::from_ref(&key_maker),
        "{check}: a regular expression"
    );
    assert_eq!(
        seen(&*catalog, &runs, &regex(r"\d{2}, key|KEY\s+in")).await,
        [hit(older_main, &read, "key: 42, key: 43", 1), scout.clone()],
        "{check}: a regular expression with classes"
    );
    assert_eq!(
        seen(
            &*catalog,
            &runs,
            &SearchQuery {
                ignore_case: true,
                ..regex(r"^where\b")
            }
        )
        .await,
        std::slice::from_ref(&silver_key),
        "{check}: a regular expression ignoring case"
    );
    assert!(
        catalog
            .search(RunSearch {
                runs: &runs,
                query: &regex("(")
            })
            .await
            .is_err(),
        "{check}: an invalid regular expression"
    );
    // No match.
    assert!(
        seen(&*catalog, &runs, &query("dragon")).await.is_empty(),
        "{check}: no match"
    );
    assert!(
        seen(&*catalog, &runs, &regex("dragon|wyvern"))
            .await
            .is_empty(),
        "{check}: no match of a regular expression"
    );
    // One hit per run, and only the runs given.
    assert_eq!(
        seen(
            &*catalog,
            &runs,
            &SearchQuery {
                max_per_run: Some(1),
                ..ignoring_case("key")
            }
        )
        .await,
        [key_maker.clone(), silver_key.clone()],
        "{check}: the first hit of each run"
    );
    assert_eq!(
        seen(
            &*catalog,
            &runs,
            &SearchQuery {
                max_per_run: Some(2),
                ..ignoring_case("key")
            }
        )
        .await,
        [key_maker.clone(), silver_key.clone(), under_the_mat.clone()],
        "{check}: the first two hits of each run"
    );
    // The last hit kept of a run that had more says so; a run within its limit not.
    let more = more_in_run(&*catalog, &runs, 2).await;
    assert_eq!(more, [false, false, true], "{check}: runs with more hits");
    // The older run's only hit past four is a subagent's.
    let more = more_in_run(&*catalog, &runs, 4).await;
    assert_eq!(
        more,
        [false, false, false, false, true],
        "{check}: more hits in a subagent's transcript"
    );
    // A run's limit counts its subagents' hits after its own.
    assert_eq!(
        seen(
            &*catalog,
            &runs,
            &SearchQuery {
                max_per_run: Some(4),
                ..ignoring_case("key")
            }
        )
        .await,
        [
            key_maker.clone(),
            silver_key.clone(),
            under_the_mat.clone(),
            read_file.clone(),
            result.clone()
        ],
        "{check}: the first four hits of each run, subagents after the main transcript"
    );
    assert!(
        seen(
            &*catalog,
            &runs,
            &SearchQuery {
                max_per_run: Some(0),
                ..ignoring_case("key")
            }
        )
        .await
        .is_empty(),
        "{check}: no hit at all"
    );
    assert_eq!(
        seen(&*catalog, &runs[1..], &query("key")).await,
        [under_the_mat, read_file, result],
        "{check}: only the runs given"
    );
    assert!(
        seen(&*catalog, &[], &query("key")).await.is_empty(),
        "{check}: no runs"
    );
    catalog.close().await;
}

async fn notes_summaries_and_long_literals_are_searched_alike(catalog: Arc<dyn RunCatalog>) {
    let check = "notes, compaction summaries and long literals are searched alike";
    let object = |value: serde_json::Value| value.as_object().cloned().unwrap_or_default();
    let note = Entry::other(
        "note",
        object(serde_json::json!({"from": "system lines", "text": "The lantern was lit"})),
    );
    let summary = Entry::other(
        "compaction",
        object(
            serde_json::json!({"summary": "They carried the lantern north",
                                  "through": null, "tokens_before": 900, "tokens_after": 40}),
        ),
    );
    let long = format!("{}b", "a".repeat(3_000));
    let haystack = Entry::message(Message::user(format!("{}b", "a".repeat(100_000))));
    let kelvin = Entry::message(Message::assistant("It is 300 \u{212a} outside"));
    let run = start_run_with(
        &*catalog,
        &[
            Entry::message(Message::user("light it")),
            note.clone(),
            summary.clone(),
            haystack.clone(),
            kelvin.clone(),
        ],
        &[],
    )
    .await;
    let runs = catalog.list().await.unwrap().runs;
    let hits = async |query: &SearchQuery| -> Vec<(Uuid, String, usize)> {
        seen(&*catalog, &runs, query)
            .await
            .into_iter()
            .map(|(_, _, entry, role, _, matches)| (entry, role, matches))
            .collect()
    };
    assert_eq!(
        hits(&query("lantern")).await,
        [
            (note.uuid, "note".to_owned(), 1),
            (summary.uuid, "compaction".to_owned(), 1)
        ],
        "{check}: a note and a summary in {}",
        run.name()
    );
    assert!(
        hits(&SearchQuery {
            role: Some(SearchRole::User),
            ..query("lantern")
        })
        .await
        .is_empty(),
        "{check}: a role leaves notes out"
    );
    assert_eq!(
        hits(&query(&long)).await,
        [(haystack.uuid, "user".to_owned(), 1)],
        "{check}: a long literal"
    );
    let snippets = seen(&*catalog, &runs, &query(&long)).await;
    assert!(
        // The context before the match, the bounded match, and the marks of cuts.
        snippets[0].4.chars().count() <= 50 + crate::MATCH_CHARS + 2,
        "{check}: a long match's snippet is bounded"
    );
    assert_eq!(
        hits(&SearchQuery {
            ignore_case: true,
            ..query("300 k")
        })
        .await,
        [(kelvin.uuid, "assistant".to_owned(), 1)],
        "{check}: the Kelvin sign is a k ignoring case"
    );
    catalog.close().await;
}

async fn the_runs_with_a_text_of_the_person_are_found_newest_first(catalog: Arc<dyn RunCatalog>) {
    let check = "the runs with a text of the person are found, newest first";
    let bread = start_run_with(
        &*catalog,
        &[
            Entry::message(Message::user("a Sourdough starter")),
            Entry::message(Message::assistant("the answer to it")),
            Entry::message(Message::user("how warm?")),
        ],
        &[],
    )
    .await;
    // Listings order by the time of the last message, in milliseconds at best.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let starter = start_run_with(
        &*catalog,
        &[Entry::message(Message::user(
            "a starter motor, twice: starter",
        ))],
        &[],
    )
    .await;
    let found = async |text: &str| catalog.runs_with_user_text(text).await.unwrap();
    // Any message of the person, not only the last, ignoring case.
    assert_eq!(found("SOURDOUGH").await, [bread.name()], "{check}");
    // Each run once, the newest first.
    assert_eq!(
        found("starter").await,
        [starter.name(), bread.name()],
        "{check}"
    );
    // The replies are not the person's messages; a blank text finds nothing.
    assert!(found("answer to").await.is_empty(), "{check}");
    assert!(found("  ").await.is_empty(), "{check}");
    catalog.close().await;
}
