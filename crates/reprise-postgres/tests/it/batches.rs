//! Appends that wait for one another share a transaction, and each is still fenced,
//! counted and ordered on its own.

use std::time::Duration;

use reprise_session::{Entry, Message, SessionKey, SessionStore, StoreError};

use crate::support::{StoreOn, TestDb};

fn key(id: &str) -> SessionKey {
    SessionKey::session(id).unwrap()
}

fn entries(count: usize, text: &str) -> Vec<Entry> {
    (0..count)
        .map(|n| Entry::message(Message::user(format!("{text} {n}"))))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_share_transactions_and_each_is_fenced_on_its_own() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    // Another store (another worker) holds the lease of one of the sessions.
    let other = db.store(Duration::from_secs(30)).await;
    let _held = other.lock("s-7").await.unwrap();

    const SESSIONS: usize = 32;
    const ROUNDS: usize = 5;
    let tasks: Vec<_> = (0..SESSIONS)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                let id = format!("s-{n}");
                let mut outcomes = Vec::new();
                for round in 0..ROUNDS {
                    let batch = entries(3, &format!("{id} round {round}"));
                    outcomes.push((batch.clone(), store.append(&key(&id), &batch).await));
                }
                (id, outcomes)
            })
        })
        .collect();

    for task in tasks {
        let (id, outcomes) = task.await.unwrap();
        let loaded = store.load(&key(&id)).await.unwrap();
        if id == "s-7" {
            for (_, outcome) in outcomes {
                assert!(
                    matches!(outcome, Err(StoreError::Locked { ref session, .. }) if session == "s-7"),
                    "{outcome:?}"
                );
            }
            assert!(loaded.is_none(), "a refused call wrote: {loaded:?}");
            continue;
        }
        let mut expected = Vec::new();
        for (batch, outcome) in outcomes {
            let report = outcome.unwrap();
            assert_eq!((report.written, report.skipped), (3, 0), "{id}");
            expected.extend(batch);
        }
        assert_eq!(loaded.unwrap().entries, expected, "{id}");
        let summary = store.summary(&id).await.unwrap().unwrap();
        assert_eq!(summary.message_count, (3 * ROUNDS) as u64);
        assert_eq!(
            summary.first_message.as_deref(),
            Some(format!("{id} round 0 0").as_str())
        );
        assert_eq!(
            summary.last_message.as_deref(),
            Some(format!("{id} round {} 2", ROUNDS - 1).as_str())
        );
    }

    // The rows of one transaction carry its id: fewer transactions than calls means
    // calls were sent together.
    let mut connection = db.connection().await;
    let transactions: i64 =
        sqlx::query_scalar("SELECT count(DISTINCT xmin::text) FROM reprise_entries")
            .fetch_one(&mut connection)
            .await
            .unwrap();
    let calls = ((SESSIONS - 1) * ROUNDS) as i64;
    assert!(
        transactions < calls,
        "{transactions} transactions for {calls} calls"
    );
    crate::support::assert_listing_times_agree(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_server_rejects_fails_alone_and_the_others_of_its_batch_are_written() {
    let db = TestDb::fresh().await;
    let store = db.store(Duration::from_secs(30)).await;
    // The server refuses rows of one session only.
    let mut connection = db.connection().await;
    sqlx::raw_sql("ALTER TABLE reprise_entries ADD CONSTRAINT no_bad CHECK (session_id <> 'bad')")
        .execute(&mut connection)
        .await
        .unwrap();

    let ids: Vec<String> = (0..16)
        .map(|n| match n {
            5 => "bad".to_owned(),
            n => format!("good-{n}"),
        })
        .collect();
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let store = store.clone();
            let id = id.clone();
            tokio::spawn(async move {
                let batch = entries(2, &id);
                let outcome = store.append(&key(&id), &batch).await;
                (id, batch, outcome)
            })
        })
        .collect();
    for task in tasks {
        let (id, batch, outcome) = task.await.unwrap();
        if id == "bad" {
            let error = outcome.unwrap_err();
            assert!(matches!(error, StoreError::Backend { .. }), "{error:?}");
            assert!(error.to_string().contains("appending to bad"), "{error}");
            assert!(store.load(&key("bad")).await.unwrap().is_none());
        } else {
            assert_eq!(outcome.unwrap().written, 2, "{id}");
            assert_eq!(store.load(&key(&id)).await.unwrap().unwrap().entries, batch);
        }
    }
}
