//! Import of a 100 MB Claude Code transcript: converted and written into a new run
//! folder (synced), as `reprise import` does. Prints the figures.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fmt::Write as _;
use std::time::Instant;

use serde_json::json;

const TARGET_BYTES: usize = 100 * 1024 * 1024;

/// A transcript in Claude Code's current shape: turns of a prompt, an assistant
/// message streamed as thinking, text and a tool call (three lines with one message
/// id), and a tool result whose output is repeated in `toolUseResult`, as the real
/// files do.
fn transcript() -> (String, usize) {
    let mut out = String::with_capacity(TARGET_BYTES + (1 << 20));
    let mut parent: Option<String> = None;
    let mut n = 0usize;
    let mut turns = 0usize;
    let body: String = (0..60)
        .map(|i| {
            format!("    let value_{i} = compute(\"line {i}\", {i}); // a line of a source file\n")
        })
        .collect();
    while out.len() < TARGET_BYTES {
        turns += 1;
        let mut line = |kind: &str, message: serde_json::Value, extra: serde_json::Value| {
            n += 1;
            let uuid = format!("00000000-0000-4000-8000-{n:012}");
            let mut record = json!({
                "parentUuid": parent, "isSidechain": false, "userType": "external",
                "cwd": "/home/me/project", "sessionId": "11111111-2222-4333-8444-555555555555",
                "version": "2.1.114", "gitBranch": "main", "type": kind, "message": message,
                "uuid": uuid, "timestamp": format!("2026-04-18T13:{:02}:{:02}.000Z", (n / 60) % 60, n % 60),
            });
            if let (Some(record), Some(extra)) = (record.as_object_mut(), extra.as_object()) {
                record.extend(extra.clone());
            }
            writeln!(out, "{record}").unwrap();
            parent = Some(uuid);
        };
        line(
            "user",
            json!({"role": "user", "content": format!("Please look at src/module_{turns}.rs and fix the bug in it.")}),
            json!({}),
        );
        let id = format!("msg_{turns:08}");
        let call = format!("toolu_{turns:08}");
        line(
            "assistant",
            json!({"id": id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "thinking", "thinking": "The person wants the module read first; then I can see the bug.", "signature": "EqQBCkYIBxgCKkB".repeat(8)}]}),
            json!({"requestId": "req_1"}),
        );
        line(
            "assistant",
            json!({"id": id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "I will read the file first."}]}),
            json!({"requestId": "req_1"}),
        );
        line(
            "assistant",
            json!({"id": id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": call, "name": "Read", "input": {"file_path": format!("/home/me/project/src/module_{turns}.rs")}}]}),
            json!({"requestId": "req_1"}),
        );
        line(
            "user",
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call, "content": body}]}),
            json!({"toolUseResult": {"type": "text", "file": {"filePath": "src/module.rs", "content": body, "numLines": 60}}}),
        );
        line(
            "assistant",
            json!({"id": format!("{id}b"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "text", "text": "The bug is on line 12: the value is computed twice. Fixed."}]}),
            json!({}),
        );
    }
    (out, n)
}

/// The CPU time this process has used (user and system, every thread), from
/// `/proc/self/stat`; `None` where there is no such file.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // The kernel's USER_HZ is 100 on every Linux that ships.
    Some(ticks / 100.0)
}

fn main() {
    let (text, lines) = transcript();
    // On the disk the runs live on (target/), not a tmpfs /tmp.
    let parent = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-tmp");
    std::fs::create_dir_all(&parent).unwrap();
    let dir = tempfile::tempdir_in(&parent).unwrap();
    let file = dir
        .path()
        .join("11111111-2222-4333-8444-555555555555.jsonl");
    std::fs::write(&file, &text).unwrap();
    let mb = text.len() as f64 / (1024.0 * 1024.0);
    drop(text);
    // Warm the page cache, as a person's disk would be after Claude Code wrote it.
    let _ = std::fs::read(&file).unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("import: Claude Code transcript {mb:.1} MB, {lines} lines, {cores} cores");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut best_convert = f64::MAX;
    let mut best_import = f64::MAX;
    for round in 1..=3 {
        let started = Instant::now();
        let converted = reprise_import::convert_file(&file).unwrap();
        let convert_secs = started.elapsed().as_secs_f64();
        let messages = converted.report.messages;
        drop(converted);

        let runs = dir.path().join(format!("runs-{round}"));
        let cpu_before = cpu_seconds();
        let started = Instant::now();
        let imported = runtime.block_on(async {
            let mut importer = reprise_import::Importer::new(&runs).unwrap();
            importer.import_file(&file, false).await.unwrap()
        });
        let import_secs = started.elapsed().as_secs_f64();
        let cpu = cpu_before.zip(cpu_seconds()).map(|(a, b)| b - a);
        assert!(matches!(
            imported.outcome,
            reprise_import::Outcome::Created { .. }
        ));
        println!(
            "import: round {round}: convert only {convert_secs:.3} s; convert + write run (synced) {import_secs:.3} s, {} CPU s; {messages} messages",
            cpu.map_or("?".to_owned(), |cpu| format!("{cpu:.2}"))
        );
        best_convert = best_convert.min(convert_secs);
        best_import = best_import.min(import_secs);
        std::fs::remove_dir_all(&runs).unwrap();
    }
    println!(
        "import: best of 3: convert only {best_convert:.3} s ({:.0} MB/s); convert + write run {best_import:.3} s ({:.0} MB/s) (target: under 2 s)",
        mb / best_convert,
        mb / best_import
    );
}
