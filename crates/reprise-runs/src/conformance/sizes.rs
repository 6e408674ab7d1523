//! The checks of [`RunCatalog::sizes`].

use std::sync::Arc;

use reprise_session::{Entry, Message};

use super::{Factory, start_run, start_run_with};
use crate::RunCatalog;

pub(super) async fn run_all(make: Factory<'_>) {
    sizes_put_the_largest_run_first_and_total_at_least_their_sum(make().await).await;
}

async fn sizes_put_the_largest_run_first_and_total_at_least_their_sum(
    catalog: Arc<dyn RunCatalog>,
) {
    let check = "sizes put the largest run first, and total at least their sum";
    let empty = catalog.sizes().await.unwrap();
    assert!(empty.runs.is_empty(), "{check}: {:?}", empty.runs);

    let small = start_run(&*catalog, &["a short question"]).await;
    // Most of the larger run is in a subagent's transcript, which counts with it.
    let chatter: Vec<Entry> = (0..40)
        .map(|n| {
            let line: String = (0..60).map(|word| format!("w{n}x{word} ")).collect();
            Entry::message(Message::assistant(line))
        })
        .collect();
    let large = start_run_with(
        &*catalog,
        &[Entry::message(Message::user("go and look"))],
        &[("scout", chatter)],
    )
    .await;
    let sizes = catalog.sizes().await.unwrap();
    let names: Vec<&str> = sizes.runs.iter().map(|(run, _)| run.name()).collect();
    assert_eq!(names, [large.name(), small.name()], "{check}");
    let (large_bytes, small_bytes) = (sizes.runs[0].1, sizes.runs[1].1);
    assert!(
        large_bytes > small_bytes && small_bytes > 0,
        "{check}: {large_bytes} and {small_bytes}"
    );
    // Forty messages of some six hundred characters each.
    assert!(large_bytes > 20_000, "{check}: {large_bytes}");
    let sum: u64 = sizes.runs.iter().map(|(_, bytes)| bytes).sum();
    assert!(sizes.total >= sum, "{check}: {} < {sum}", sizes.total);
    catalog.close().await;
}
