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
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-tmp/crash-soak");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let program = std::env::current_exe().unwrap();
    let started = std::time::Instant::now();
    // Enough turns that no child finishes before the last kill.
    let killed = runtime.block_on(crash_soak::soak(&program, &[], &dir, kills, kills * 20));
    println!(
        "crash soak: {killed} processes killed mid-run, every rule held ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
}
