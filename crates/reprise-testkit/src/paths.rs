//! Where the files tests need are: the repository's `testdata/`, the reference MCP
//! server installed by `scripts/install-test-deps.sh`, and testkit's own fixtures.
//!
//! Every path is found from this crate's manifest directory, so a test finds the same
//! files whichever crate it belongs to and wherever the repository was cloned. A
//! missing file fails the test with the path it looked for (never skips it).

use std::path::{Path, PathBuf};

/// The repository root (the Cargo workspace directory).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // crates/reprise-testkit → the workspace root, two levels up.
    match manifest.parent().and_then(Path::parent) {
        Some(root) => root.to_path_buf(),
        None => panic!(
            "reprise-testkit's manifest directory {} is not inside crates/ of a workspace",
            manifest.display()
        ),
    }
}

/// A file or folder of the repository's `testdata/`, e.g. `testdata("sse/x.sse")`.
///
/// Panics, naming the full path, when it does not exist.
pub fn testdata(rel: &str) -> PathBuf {
    existing(
        workspace_root().join("testdata").join(rel),
        "the test data",
        "see testdata/SOURCES.md",
    )
}

/// The entry point of the reference MCP server
/// (`@modelcontextprotocol/server-everything`, run as `node <path> stdio`).
///
/// Panics, naming the path, when `scripts/install-test-deps.sh` has not installed it.
pub fn mcp_everything_server() -> PathBuf {
    existing(
        workspace_root()
            .join(".test-deps/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        "the reference MCP server",
        "run scripts/install-test-deps.sh",
    )
}

/// `crashy-proxy.mjs`: run as `node <proxy> <server> stdio`, it forwards MCP over
/// stdio to `<server>` and exits with status 7 as soon as a message from the client
/// contains the text `CRASH`, so a call crashes mid-flight.
pub fn mcp_crashy_proxy() -> PathBuf {
    existing(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/crashy-proxy.mjs"),
        "the crashing MCP proxy",
        "it belongs to crates/reprise-testkit/fixtures",
    )
}

/// `counting-server.mjs`: run as `node <server> <log file>`, an MCP server over
/// stdio whose tools `charge` (effects), `deploy` (`idempotentHint`) and `lookup`
/// (`readOnlyHint`) append a line to the log as they start and as they end,
/// `{"phase","tool","key","arguments"}` (`key`: the request's
/// `_meta["reprise/idempotencyKey"]`), and sleep `sleep_ms` in between. It uses
/// the MCP SDK installed with the reference server.
pub fn mcp_counting_server() -> PathBuf {
    existing(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/counting-server.mjs"),
        "the counting MCP server",
        "it belongs to crates/reprise-testkit/fixtures",
    )
}

/// `path` made absolute, or a panic that says what is missing and what to do.
fn existing(path: PathBuf, what: &str, hint: &str) -> PathBuf {
    match path.canonicalize() {
        Ok(found) => found,
        Err(error) => panic!("{what} is missing at {} ({error}): {hint}", path.display()),
    }
}
