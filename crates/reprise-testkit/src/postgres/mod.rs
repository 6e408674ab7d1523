//! The PostgreSQL server tests use, and a fresh schema per test.
//!
//! `REPRISE_TEST_DATABASE_URL`, when set, names a server the tests may create schemas
//! on; each schema is dropped when the last handle to it goes. Otherwise the first
//! test starts a throwaway [`cluster::Cluster`] shared by the whole test process and
//! stopped (and removed) when it exits.
// Test support: a server or schema that cannot be set up is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod cluster;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use cluster::Cluster;

/// The variable naming an external test server.
pub const TEST_DATABASE_URL: &str = "REPRISE_TEST_DATABASE_URL";

/// The test server, and whether it is an external one (whose schemas are dropped).
fn server() -> &'static (String, bool) {
    static SERVER: OnceLock<(String, bool)> = OnceLock::new();
    SERVER.get_or_init(|| match std::env::var(TEST_DATABASE_URL) {
        Ok(url) if !url.is_empty() => (url, true),
        _ => {
            let cluster = Cluster::start();
            let url = cluster.url();
            cluster.stop_when_process_exits(std::process::id());
            (url, false)
        }
    })
}

/// The server of this test process, as a URL.
pub fn server_url() -> &'static str {
    &server().0
}

/// A schema of its own on a test server. Clones share it; on an external server it is
/// dropped (with everything in it) when the last clone made by [`TestDb::fresh`] goes.
#[derive(Clone, Debug)]
pub struct TestDb {
    /// The server.
    pub url: String,
    /// The schema every connection of the test uses.
    pub schema: String,
    _dropped: Option<Arc<DropSchema>>,
}

impl TestDb {
    /// A new, empty schema on the test server.
    pub async fn fresh() -> TestDb {
        let (url, external) = server();
        let db = Self::fresh_on(url).await;
        if *external { db.dropped_at_end() } else { db }
    }

    /// This schema, dropped with everything in it when the last clone goes.
    pub fn dropped_at_end(mut self) -> TestDb {
        self._dropped = Some(Arc::new(DropSchema {
            url: self.url.clone(),
            schema: self.schema.clone(),
        }));
        self
    }

    /// A new, empty schema on the server at `url` (left in place: a server the caller
    /// started and removes).
    pub async fn fresh_on(url: &str) -> TestDb {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let schema = format!(
            "t_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = PgConnection::connect(url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.unwrap();
        TestDb {
            url: url.to_owned(),
            schema,
            _dropped: None,
        }
    }

    /// The schema named in the environment of a child process (see [`Self::env`]).
    /// The child never drops it.
    pub fn from_env() -> TestDb {
        TestDb {
            url: std::env::var("REPRISE_TEST_CHILD_URL").unwrap(),
            schema: std::env::var("REPRISE_TEST_CHILD_SCHEMA").unwrap(),
            _dropped: None,
        }
    }

    /// The environment that [`Self::from_env`] reads.
    pub fn env(&self) -> [(&'static str, String); 2] {
        [
            ("REPRISE_TEST_CHILD_URL", self.url.clone()),
            ("REPRISE_TEST_CHILD_SCHEMA", self.schema.clone()),
        ]
    }

    /// Connection options with the schema as the search path.
    pub fn connect_options(&self) -> PgConnectOptions {
        let options: PgConnectOptions = self.url.parse().unwrap();
        options.options([("search_path", self.schema.as_str())])
    }

    /// A URL whose connections use the schema (for programs that take a URL).
    pub fn url_with_schema(&self) -> String {
        let joint = if self.url.contains('?') { '&' } else { '?' };
        format!(
            "{}{joint}options=-c%20search_path%3D{}",
            self.url, self.schema
        )
    }

    /// A connection of the test's own (to look at or break things).
    pub async fn connection(&self) -> PgConnection {
        PgConnection::connect_with(&self.connect_options())
            .await
            .unwrap()
    }
}

/// Drops a schema on drop. A drop cannot await, so it runs on a thread of its own
/// with a runtime of its own, and is waited for: the next test run starts clean.
#[derive(Debug)]
struct DropSchema {
    url: String,
    schema: String,
}

impl Drop for DropSchema {
    fn drop(&mut self) {
        let url = self.url.clone();
        let statement = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema);
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let mut admin = PgConnection::connect(&url).await.ok()?;
                sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                    .execute(&mut admin)
                    .await
                    .ok()?;
                admin.close().await.ok()
            })
        })
        .join();
        if !matches!(dropped, Ok(Some(()))) {
            eprintln!("test schema {} was not dropped", self.schema);
        }
    }
}
