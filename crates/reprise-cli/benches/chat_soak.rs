//! The chat's kill soak with many kills (`REPRISE_SOAK_KILLS`, default 300): the
//! plain chat SIGKILLed at random moments around its tool calls and continued after
//! every kill, with the rules of `tests/it/chat_soak.rs` checked after each. Prints
//! what it did and where the kills fell; a broken rule panics. Data goes under
//! `target/bench-tmp/chat-soak`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic here is a failed bench run

#[path = "../tests/it/chat_soak.rs"]
mod chat_soak;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let kills: usize = std::env::var("REPRISE_SOAK_KILLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-tmp/chat-soak");
    let _ = std::fs::remove_dir_all(&root);
    let started = std::time::Instant::now();
    // Conversations of a few prompts each, so that every kill lands in a
    // conversation of about the same size, however many kills there are.
    let (mut killed, mut conversations) = (0, 0);
    let mut moments = [0; chat_soak::MOMENTS.len()];
    while killed < kills {
        let dir = root.join(conversations.to_string());
        let mut soak = runtime.block_on(chat_soak::Soak::new(&dir));
        killed += runtime.block_on(soak.run(10.min(kills - killed)));
        for (total, count) in moments.iter_mut().zip(soak.moments) {
            *total += count;
        }
        conversations += 1;
    }
    println!(
        "chat soak: {killed} chats killed mid-run in {conversations} conversations of {} \
         prompts, every rule held ({:.1} s)",
        chat_soak::TURNS,
        started.elapsed().as_secs_f64()
    );
    for (moment, count) in chat_soak::MOMENTS.iter().zip(moments) {
        println!("  {count:>4} kills {moment}");
    }
}
