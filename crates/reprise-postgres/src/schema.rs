//! Which schema versions this library reads and writes, and the migrations it runs.
//!
//! The schema's version is the newest migration applied to it; this library's is the
//! newest it embeds. A database migrated by a newer release has migrations this one
//! does not know: it runs its own (all applied already) and leaves those, and the
//! `reprise_schema` row says whether it may still read and write (see
//! `docs/postgres.md`, "Schema versions and rolling upgrades").

use sqlx::PgPool;
use sqlx::migrate::Migrator;

use crate::error::DriverError;

/// What this library may do with a database's schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compatibility {
    /// Read and write.
    Writable,
    /// Read only: the schema (version `schema`) is written only by releases that know
    /// version `needed`.
    ReadOnly { schema: i64, needed: i64 },
    /// Neither: the schema is read only by releases that know version `needed`.
    TooNew { schema: i64, needed: i64 },
}

/// The newest migration this library embeds.
pub(crate) fn known_version() -> i64 {
    crate::MIGRATOR
        .iter()
        .map(|migration| migration.version)
        .max()
        .unwrap_or(0)
}

/// Runs the embedded migrations that the database lacks, leaving those a newer
/// release applied that this one does not know.
pub(crate) async fn migrate(pool: &PgPool) -> Result<(), DriverError> {
    let mut migrator = Migrator::with_migrations(crate::MIGRATOR.iter().cloned().collect());
    migrator.set_ignore_missing(true);
    migrator.run(pool).await.map_err(DriverError::from)
}

/// What the database's schema lets this library do. A database without the
/// `reprise_schema` row (a schema managed elsewhere, not yet migrated) is taken as
/// writable: its operations fail on their own if the schema is missing.
pub(crate) async fn compatibility(pool: &PgPool) -> Result<Compatibility, sqlx::Error> {
    let row: Option<(i64, i64, Option<i64>)> = sqlx::query_as(
        "SELECT s.min_reader, s.min_writer, \
             (SELECT max(m.version) FROM _sqlx_migrations m WHERE m.success) \
         FROM reprise_schema s",
    )
    .fetch_optional(pool)
    .await
    .or_else(|error| match &error {
        // No such table (42P01): a schema from before the row, or not migrated.
        sqlx::Error::Database(database) if database.code().as_deref() == Some("42P01") => Ok(None),
        _ => Err(error),
    })?;
    let Some((min_reader, min_writer, schema)) = row else {
        return Ok(Compatibility::Writable);
    };
    let known = known_version();
    let schema = schema.unwrap_or(known);
    Ok(if min_reader > known {
        Compatibility::TooNew {
            schema,
            needed: min_reader,
        }
    } else if min_writer > known {
        Compatibility::ReadOnly {
            schema,
            needed: min_writer,
        }
    } else {
        Compatibility::Writable
    })
}
