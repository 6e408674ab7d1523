//! How a store connects and how long its leases last.

use std::time::Duration;

/// Settings of a [`PgSessionStore`](crate::PgSessionStore).
#[derive(Clone, Debug)]
pub struct PgStoreOptions {
    /// How long a writer's lease lasts without renewal: a writer that crashed or
    /// stalled this long can be taken over. Renewed every third of it. Default 30 s.
    pub lease: Duration,
    /// Run the embedded migrations on connect. Default on; turn off when the schema is
    /// managed elsewhere (see [`MIGRATOR`](crate::MIGRATOR)).
    pub run_migrations: bool,
    /// Connections in the pool. Default 8. With two or more, appends keep one of them
    /// from one append to the next.
    pub max_connections: u32,
    /// How long an operation waits for a connection (a server that is down fails after
    /// this, not never). Default 10 s.
    pub acquire_timeout: Duration,
    /// The host name recorded in leases, shown to writers that are refused. Default:
    /// this machine's name.
    pub host_name: String,
}

impl Default for PgStoreOptions {
    fn default() -> Self {
        PgStoreOptions {
            lease: Duration::from_secs(30),
            run_migrations: true,
            max_connections: 8,
            acquire_timeout: Duration::from_secs(10),
            host_name: this_host(),
        }
    }
}

impl PgStoreOptions {
    /// Sets the lease duration.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
}

/// This machine's name (uname's nodename).
fn this_host() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}
