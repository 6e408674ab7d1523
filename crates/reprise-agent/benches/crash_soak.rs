//! The crash soak with many kills (`REPRISE_SOAK_KILLS`, default 300): an agent
//! process SIGKILLed at random moments around its tool calls, resumed after every
//! kill, with the rules of `tests/it/crash_soak.rs` checked after each. Prints what
//! it did; a broken rule panics. Data goes under `target/bench-tmp/crash-soak`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed bench run

#[path = "../tests/it/crash_soak.rs"]
mod crash_soak;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    if let Some(dir) = std::env::var_os(crash_soak::SOAK_DIR) {
        runtime.block_on(crash_soak::child(std::path::Path::new(&dir)));
        return;
    }
    let kills: usize = std::env::var("REPRISE_SOAK_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-tmp/crash-soak");
    let _ = std::fs::remove_dir_all(&root);
    let program = std::env::current_exe().unwrap();
    let started = std::time::Instant::now();
    // Sessions of a few dozen turns each, so that every kill lands in a session of
    // the same size, however many kills there are.
    let (mut killed, mut sessions) = (0, 0);
    while killed < kills {
        let dir = root.join(sessions.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        killed += runtime.block_on(crash_soak::soak(
            &program,
            &[],
            &dir,
            10.min(kills - killed),
            crash_soak::TURNS,
        ));
        sessions += 1;
    }
    println!(
        "crash soak: {killed} processes killed mid-run in {sessions} sessions of {} turns, \
         every rule held ({:.1} s)",
        crash_soak::TURNS,
        started.elapsed().as_secs_f64()
    );
}
