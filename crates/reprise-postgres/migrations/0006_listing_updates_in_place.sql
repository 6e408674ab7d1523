-- Appends rewrite their session's row (the listing fields) on every call. While
-- updated_at was in an index, every such update wrote the row's new version wherever
-- there was room and added an entry to each of the table's indexes. Listings are now
-- served by an index on updated_cs, the hundredth of a second of updated_at, which
-- changes far less often: an update within the same hundredth changes no indexed
-- column, so PostgreSQL writes the new version on the row's own page and touches no
-- index (a heap-only update). Rows that share a hundredth are put in order by
-- updated_at once the index has found them.
--
-- updated_cs is always reprise_centiseconds(updated_at). The functions that update a
-- session's row set both (the two below are replaced for that, so that workers of an
-- earlier release, which call them during a rolling upgrade, keep it too); a row
-- inserted without it gets it from a trigger. Neither a generated column nor a
-- trigger on UPDATE keeps it on the append's path: measured, each cost an append more
-- than the heap-only update saved.
--
-- And reprise_append_one, the append of one entry, returns an integer rather than a
-- row: the lease's holder is read only when an append is refused.

-- Whole hundredths of a second since 1970, rounded down (from the interval, which is
-- the same in every time zone, so that the function is immutable).
CREATE FUNCTION reprise_centiseconds(t timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT floor(extract(epoch FROM t - timestamptz '1970-01-01 00:00:00+00') * 100)::bigint
$$;

ALTER TABLE reprise_sessions ADD COLUMN updated_cs bigint;
UPDATE reprise_sessions SET updated_cs = reprise_centiseconds(updated_at);
ALTER TABLE reprise_sessions ALTER COLUMN updated_cs SET NOT NULL;
-- Room on each page for the next version of its rows.
ALTER TABLE reprise_sessions SET (fillfactor = 90);

CREATE FUNCTION reprise_set_updated_cs() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.updated_cs := reprise_centiseconds(NEW.updated_at);
    RETURN NEW;
END;
$$;

CREATE TRIGGER reprise_sessions_updated_cs
    BEFORE INSERT ON reprise_sessions FOR EACH ROW
    WHEN (NEW.updated_cs IS DISTINCT FROM reprise_centiseconds(NEW.updated_at))
    EXECUTE FUNCTION reprise_set_updated_cs();

CREATE INDEX reprise_sessions_by_update_cs ON reprise_sessions (updated_cs DESC);
DROP INDEX reprise_sessions_by_update;

-- Appends one entry to one transcript (p_subagent '' for the main one), fenced as
-- reprise_append_entry is, with the same arguments. Returns 1 when the entry was
-- written, 0 when the transcript held its uuid, NULL when refused.
CREATE FUNCTION reprise_append_one(
    p_session text, p_subagent text, p_epoch bigint, p_released uuid[],
    p_uuid uuid, p_body text, p_message boolean, p_person_message text
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    lease reprise_leases%ROWTYPE;
    written integer;
    now_at timestamptz;
BEGIN
    -- reprise_serialise, in place.
    PERFORM pg_advisory_xact_lock(hashtextextended(current_schema() || '/' || p_session, 7));
    SELECT * INTO lease FROM reprise_leases WHERE session_id = p_session;
    IF p_epoch IS NOT NULL THEN
        IF NOT FOUND OR lease.epoch <> p_epoch THEN
            RETURN NULL;
        END IF;
    ELSIF FOUND AND lease.expires_at > clock_timestamp()
            AND NOT (lease.holder = ANY (p_released)) THEN
        RETURN NULL;
    END IF;

    INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body)
    VALUES (p_session, p_subagent, nextval('reprise_entry_seq'), p_uuid, p_body)
    ON CONFLICT (session_id, subagent, uuid) DO NOTHING;
    GET DIAGNOSTICS written = ROW_COUNT;

    now_at := clock_timestamp();
    -- The listing fields change only with what the main transcript gained.
    IF written = 1 AND p_subagent = '' THEN
        UPDATE reprise_sessions SET
            updated_at = now_at,
            updated_cs = reprise_centiseconds(now_at),
            message_count = message_count + CASE WHEN p_message THEN 1 ELSE 0 END,
            first_message = coalesce(first_message, p_person_message),
            last_message = coalesce(p_person_message, last_message)
        WHERE id = p_session;
    ELSE
        UPDATE reprise_sessions SET updated_at = now_at, updated_cs = reprise_centiseconds(now_at)
        WHERE id = p_session;
    END IF;
    IF NOT FOUND THEN
        INSERT INTO reprise_sessions (id, created_at, updated_at, updated_cs, message_count,
            first_message, last_message)
        VALUES (p_session, now_at, now_at, reprise_centiseconds(now_at),
            CASE WHEN written = 1 AND p_subagent = '' AND p_message THEN 1 ELSE 0 END,
            CASE WHEN written = 1 AND p_subagent = '' THEN p_person_message END,
            CASE WHEN written = 1 AND p_subagent = '' THEN p_person_message END);
        INSERT INTO reprise_transcripts (session_id, subagent) VALUES (p_session, '')
        ON CONFLICT DO NOTHING;
    END IF;
    IF p_subagent <> '' THEN
        INSERT INTO reprise_transcripts (session_id, subagent) VALUES (p_session, p_subagent)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN written;
END;
$$;

-- The append of one entry of migration 0005, now reprise_append_one with the holder
-- read when refused.
CREATE OR REPLACE FUNCTION reprise_append_entry(
    p_session text, p_subagent text, p_epoch bigint, p_released uuid[],
    p_uuid uuid, p_body text, p_message boolean, p_person_message text,
    OUT written integer, OUT holder_host text, OUT holder_pid integer
)
LANGUAGE plpgsql AS $$
BEGIN
    written := reprise_append_one(p_session, p_subagent, p_epoch, p_released,
        p_uuid, p_body, p_message, p_person_message);
    IF written IS NULL THEN
        SELECT l.host, l.pid INTO holder_host, holder_pid
        FROM reprise_leases l WHERE l.session_id = p_session;
    END IF;
END;
$$;

-- The appends of migration 0003, setting updated_cs with updated_at (one time for
-- the whole call, taken once its sessions are serialised).
CREATE OR REPLACE FUNCTION reprise_append_calls(
    p_sessions text[], p_subagents text[], p_epochs bigint[],
    p_first_messages text[], p_last_messages text[], p_released uuid[],
    p_calls integer[], p_uuids uuid[], p_bodies text[], p_messages boolean[]
) RETURNS TABLE (written integer, holder_host text, holder_pid integer)
LANGUAGE plpgsql AS $$
DECLARE
    lease reprise_leases%ROWTYPE;
    s text := p_sessions[1];
    a text := p_subagents[1];
    got uuid[];
    counted bigint;
    refused boolean;
    now_at timestamptz;
BEGIN
    IF cardinality(p_sessions) > 1 THEN
        -- In one order, so that two transactions sharing sessions cannot deadlock.
        PERFORM reprise_serialise(q.s)
        FROM (SELECT DISTINCT u.s FROM unnest(p_sessions) AS u (s) ORDER BY u.s) AS q;
        now_at := clock_timestamp();
        -- Many calls: the same steps as one call below, each as one statement over
        -- all of them, so that a call adds rows to the work, not statements.
        RETURN QUERY
        WITH calls AS MATERIALIZED (
            SELECT c.ord::integer AS call, c.s, c.a, c.f, c.m, l.host, l.pid,
                CASE WHEN c.e IS NOT NULL THEN l.epoch IS DISTINCT FROM c.e
                     ELSE l.expires_at > clock_timestamp()
                         AND NOT (l.holder = ANY (p_released))
                END IS TRUE AS refused
            FROM unnest(p_sessions, p_subagents, p_epochs, p_first_messages, p_last_messages)
                WITH ORDINALITY AS c (s, a, e, f, m, ord)
            LEFT JOIN reprise_leases l ON l.session_id = c.s
        ), batch AS MATERIALIZED (
            -- nextval is evaluated after the sort: in the order of the entries.
            SELECT b.call, calls.s, calls.a, b.u, b.body, b.m,
                nextval('reprise_entry_seq') AS seq
            FROM unnest(p_calls, p_uuids, p_bodies, p_messages)
                WITH ORDINALITY AS b (call, u, body, m, ord)
            JOIN calls ON calls.call = b.call
            WHERE NOT calls.refused
            ORDER BY b.ord
        ), inserted AS (
            INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body)
            SELECT batch.s, batch.a, batch.seq, batch.u, batch.body FROM batch
            ON CONFLICT (session_id, subagent, uuid) DO NOTHING
            RETURNING seq
        ), per_call AS (
            SELECT batch.call, count(inserted.seq)::integer AS written,
                count(inserted.seq) FILTER (WHERE batch.m AND batch.a = '') AS counted
            FROM batch LEFT JOIN inserted ON inserted.seq = batch.seq
            GROUP BY batch.call
        ), per_session AS (
            SELECT calls.s, coalesce(sum(per_call.counted), 0)::bigint AS counted,
                (array_agg(calls.f ORDER BY calls.call) FILTER (
                    WHERE calls.f IS NOT NULL AND calls.a = '' AND per_call.written > 0
                ))[1] AS first,
                (array_agg(calls.m ORDER BY calls.call DESC) FILTER (
                    WHERE calls.m IS NOT NULL AND calls.a = '' AND per_call.written > 0
                ))[1] AS last
            FROM calls LEFT JOIN per_call ON per_call.call = calls.call
            WHERE NOT calls.refused
            GROUP BY calls.s
        ), sessions AS (
            INSERT INTO reprise_sessions AS r (id, created_at, updated_at, updated_cs,
                message_count, first_message, last_message)
            SELECT per_session.s, now_at, now_at, reprise_centiseconds(now_at), per_session.counted,
                per_session.first, per_session.last
            FROM per_session
            ON CONFLICT (id) DO UPDATE SET
                updated_at = excluded.updated_at,
                updated_cs = excluded.updated_cs,
                message_count = r.message_count + excluded.message_count,
                first_message = coalesce(r.first_message, excluded.first_message),
                last_message = coalesce(excluded.last_message, r.last_message)
            RETURNING r.id, r.xmax = 0 AS created
        ), transcripts AS (
            INSERT INTO reprise_transcripts (session_id, subagent)
            SELECT sessions.id, '' FROM sessions WHERE sessions.created
            UNION
            SELECT calls.s, calls.a FROM calls WHERE calls.a <> '' AND NOT calls.refused
            ON CONFLICT DO NOTHING
        )
        SELECT
            CASE WHEN calls.refused THEN NULL ELSE coalesce(per_call.written, 0) END,
            CASE WHEN calls.refused THEN calls.host END,
            CASE WHEN calls.refused THEN calls.pid END
        FROM calls LEFT JOIN per_call ON per_call.call = calls.call
        ORDER BY calls.call;
        RETURN;
    END IF;

    -- One call, as separate statements: for one call they cost the server less than
    -- the statement above.
    PERFORM reprise_serialise(s);
    now_at := clock_timestamp();
    SELECT * INTO lease FROM reprise_leases WHERE session_id = s;
    IF p_epochs[1] IS NOT NULL THEN
        refused := NOT FOUND OR lease.epoch <> p_epochs[1];
    ELSE
        refused := FOUND AND lease.expires_at > clock_timestamp()
            AND NOT (lease.holder = ANY (p_released));
    END IF;
    IF refused THEN
        holder_host := lease.host;
        holder_pid := lease.pid;
        RETURN NEXT;
        RETURN;
    END IF;

    WITH inserted AS (
        INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body)
        SELECT s, a, nextval('reprise_entry_seq'), t.u, t.b
        FROM unnest(p_uuids, p_bodies) AS t (u, b)
        ON CONFLICT (session_id, subagent, uuid) DO NOTHING
        RETURNING uuid
    )
    SELECT array_agg(inserted.uuid) INTO got FROM inserted;
    written := coalesce(cardinality(got), 0);
    IF a <> '' THEN
        counted := 0;
    ELSIF written = cardinality(p_uuids) THEN
        counted := cardinality(array_positions(p_messages, true));
    ELSE
        -- Only a retry skips entries: count the messages among those written.
        SELECT count(*) INTO counted
        FROM unnest(p_uuids, p_messages) AS t (u, m)
        WHERE t.m AND t.u = ANY (got);
    END IF;

    UPDATE reprise_sessions SET
        updated_at = now_at,
        updated_cs = reprise_centiseconds(now_at),
        message_count = message_count + counted,
        first_message = CASE
            WHEN first_message IS NULL AND written > 0 AND a = ''
            THEN p_first_messages[1] ELSE first_message END,
        last_message = CASE
            WHEN written > 0 AND a = '' AND p_last_messages[1] IS NOT NULL
            THEN p_last_messages[1] ELSE last_message END
    WHERE id = s;
    IF NOT FOUND THEN
        INSERT INTO reprise_sessions (id, created_at, updated_at, updated_cs, message_count,
            first_message, last_message)
        VALUES (s, now_at, now_at, reprise_centiseconds(now_at), counted,
            CASE WHEN written > 0 AND a = '' THEN p_first_messages[1] END,
            CASE WHEN written > 0 AND a = '' THEN p_last_messages[1] END);
        INSERT INTO reprise_transcripts (session_id, subagent) VALUES (s, '')
        ON CONFLICT DO NOTHING;
    END IF;
    IF a <> '' THEN
        INSERT INTO reprise_transcripts (session_id, subagent) VALUES (s, a)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NEXT;
END;
$$;
