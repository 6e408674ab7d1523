//! The fixture finders and `assert_contains!`.

use std::panic::catch_unwind;

use reprise_testkit::{assert_contains, mcp_crashy_proxy, testdata, workspace_root};

/// The message of a panic caught from `f`.
fn panic_message(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let payload = catch_unwind(f).expect_err("it panics");
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

#[test]
fn testdata_finds_a_file_inside_the_repository() {
    let path = testdata("sse/scripted_parallel-tool-calls_whole_no-usage_no-done.sse");
    assert!(path.is_file(), "{}", path.display());
    assert!(path.starts_with(workspace_root().canonicalize().unwrap()));
    assert!(workspace_root().join("Cargo.toml").is_file());
    assert!(workspace_root().join("testdata/SOURCES.md").is_file());
}

#[test]
fn a_missing_fixture_fails_naming_the_path() {
    let message = panic_message(|| {
        testdata("sse/no-such-capture.sse");
    });
    assert!(
        message.contains("testdata/sse/no-such-capture.sse"),
        "{message}"
    );
    assert_contains!(message, "SOURCES.md");
}

#[test]
fn the_crashy_proxy_is_found() {
    assert!(mcp_crashy_proxy().is_file());
}

#[test]
fn assert_contains_passes_and_shows_both_texts_when_it_fails() {
    assert_contains!("the chat answered", "answered");
    assert_contains!(String::from("abc"), String::from("bc"));
    let message = panic_message(|| assert_contains!("the chat answered", "refused"));
    assert_contains!(message, "\"refused\"");
    assert_contains!(message, "the chat answered");
    let message = panic_message(|| assert_contains!("abc", "z", "in screen {}", 3));
    assert_contains!(message, "in screen 3");
}
