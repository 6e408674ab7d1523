//! Kills of rewinds and of the chat's checkpoints (`REPRISE_REWIND_KILLS`, default
//! 120): `reprise rewind` SIGKILLed at random moments of a files rewind of a
//! folder of 1,500 files and 8 MB, then the chat SIGKILLed while its turns
//! checkpoint that folder, with the rules of `tests/it/rewind_kills.rs` checked
//! after each kill. Two kills of three are of rewinds; runs that finish before
//! their kill are not counted. Prints where the kills fell;
//! a broken rule panics. Data goes under `target/bench-tmp/rewind-kills`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed bench run

#[path = "../tests/it/rewind_kills.rs"]
mod rewind_kills;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let kills: usize = std::env::var("REPRISE_REWIND_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(120);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/bench-tmp/rewind-kills");
    let _ = std::fs::remove_dir_all(&root);
    let started = std::time::Instant::now();
    let rewinds = kills.div_ceil(3) * 2;
    let chats = kills.saturating_sub(rewinds);
    let mut soak = runtime.block_on(rewind_kills::RewindSoak::new(&root));
    // Until that many kills landed: a command that finishes first is not counted.
    let (mut rewinds_killed, mut rewind_runs) = (0, 0);
    while rewinds_killed < rewinds {
        rewinds_killed += usize::from(runtime.block_on(soak.kill_rewind()));
        rewind_runs += 1;
    }
    let (mut chats_killed, mut chat_runs) = (0, 0);
    while chats_killed < chats {
        chats_killed += usize::from(runtime.block_on(soak.kill_chat()));
        chat_runs += 1;
    }
    println!(
        "rewind kills: {rewinds_killed} rewinds killed (of {rewind_runs} run) and \
         {chats_killed} chats killed (of {chat_runs} run), {} checkpoints walked, every rule \
         held ({:.1} s)",
        soak.walked,
        started.elapsed().as_secs_f64()
    );
    for (moment, count) in rewind_kills::REWIND_MOMENTS.iter().zip(soak.rewind_moments) {
        println!("  {count:>4} rewind kills {moment}");
    }
    for (moment, count) in rewind_kills::CHAT_MOMENTS.iter().zip(soak.chat_moments) {
        println!("  {count:>4} chat kills {moment}");
    }
}
