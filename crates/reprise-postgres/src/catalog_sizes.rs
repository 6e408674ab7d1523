//! The space the runs kept in PostgreSQL take, for `reprise du`.

use std::collections::HashMap;

use reprise_session::StoreError;

use crate::PgSessionStore;
use crate::store::OrFailed;

/// Each session's bytes: what its entries (subagents' included) take as stored, each
/// body as `pg_column_size` counts it (compressed where PostgreSQL compressed it).
pub(crate) async fn session_bytes(
    store: &PgSessionStore,
) -> Result<HashMap<String, u64>, StoreError> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT session_id, sum(pg_column_size(body))::int8 FROM reprise_entries \
         GROUP BY session_id",
    )
    .fetch_all(store.pool())
    .await
    .or_failed(store, "measuring runs")
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, bytes)| (id, u64::try_from(bytes).unwrap_or(0)))
        .collect())
}

/// What the session tables take on the server: each with its indexes and the
/// out-of-line storage of its large values (`pg_total_relation_size`).
pub(crate) async fn total_bytes(store: &PgSessionStore) -> Result<u64, StoreError> {
    let total: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t.name))), 0)::int8 \
         FROM unnest(ARRAY['reprise_sessions', 'reprise_transcripts', 'reprise_entries', \
                           'reprise_leases']) AS t (name) \
         WHERE to_regclass(t.name) IS NOT NULL",
    )
    .fetch_one(store.pool())
    .await
    .or_failed(store, "measuring runs")
    .await?;
    Ok(u64::try_from(total).unwrap_or(0))
}
