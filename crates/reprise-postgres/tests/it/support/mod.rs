//! The PostgreSQL server the tests use, and a fresh schema per test.
//!
//! `REPRISE_TEST_DATABASE_URL`, when set, names a server the tests may create schemas
//! on; otherwise the first test starts a throwaway cluster shared by the whole test
//! process and stopped when it exits. Each test works in its own schema.

pub mod cluster;

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use reprise_postgres::{PgSessionStore, PgStoreOptions};
use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use cluster::Cluster;

/// The server of this test process, as a URL.
pub fn server_url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| match std::env::var("REPRISE_TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            let cluster = Cluster::start();
            let url = cluster.url();
            cluster.stop_when_process_exits(std::process::id());
            url
        }
    })
}

/// A schema of its own on `url`'s database.
#[derive(Clone, Debug)]
pub struct TestDb {
    /// The server.
    pub url: String,
    /// The schema every connection of the test uses.
    pub schema: String,
}

impl TestDb {
    /// A new, empty schema on the test server.
    pub async fn fresh() -> TestDb {
        Self::fresh_on(server_url()).await
    }

    /// A new, empty schema on the server at `url`.
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
        }
    }

    /// The schema named in the environment of a child process (see [`Self::env`]).
    pub fn from_env() -> TestDb {
        TestDb {
            url: std::env::var("REPRISE_TEST_CHILD_URL").unwrap(),
            schema: std::env::var("REPRISE_TEST_CHILD_SCHEMA").unwrap(),
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

    /// A connection of the test's own (to look at or break things).
    pub async fn connection(&self) -> PgConnection {
        PgConnection::connect_with(&self.connect_options())
            .await
            .unwrap()
    }

    /// A store on this schema with leases of `lease`.
    pub async fn store(&self, lease: Duration) -> PgSessionStore {
        PgSessionStore::connect_with(self.connect_options(), options(lease))
            .await
            .unwrap()
    }
}

/// Store options for tests: short leases, a short wait for connections.
pub fn options(lease: Duration) -> PgStoreOptions {
    PgStoreOptions {
        acquire_timeout: Duration::from_secs(3),
        ..PgStoreOptions::default().with_lease(lease)
    }
}
