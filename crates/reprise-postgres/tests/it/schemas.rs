//! Test schemas on a server the tests did not start are dropped afterwards.

use reprise_session::SessionStore;

use crate::support::TestDb;
use crate::support::cluster::Cluster;

async fn schema_exists(url: &str, schema: &str) -> bool {
    use sqlx::Connection;
    let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
        .bind(schema)
        .fetch_one(&mut connection)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_made_on_an_external_server_is_dropped_with_its_last_handle() {
    let cluster = Cluster::start();
    let url = cluster.url();
    let db = TestDb::fresh_on(&url).await.dropped_at_end();
    let schema = db.schema.clone();
    let store = crate::support::StoreOn::store(&db, std::time::Duration::from_secs(30)).await;
    store.close().await.unwrap();
    let clone = db.clone();
    drop(db);
    assert!(schema_exists(&url, &schema).await, "a clone still holds it");
    drop(clone);
    assert!(!schema_exists(&url, &schema).await);

    // A schema made without it is left to whoever owns the server.
    let kept = TestDb::fresh_on(&url).await;
    let kept_schema = kept.schema.clone();
    drop(kept);
    assert!(schema_exists(&url, &kept_schema).await);
}
