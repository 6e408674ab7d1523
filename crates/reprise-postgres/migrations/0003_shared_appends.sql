-- Appends that cost little more than the rows they write, and that the store can send
-- several of at once:
-- * entries take their order from one sequence, so an append does not look up the
--   last entry of its transcript, and the entry table keeps one index: the uuid that
--   makes appends idempotent;
-- * no foreign key from entries to transcripts (checked on every row, and a row lock
--   on the transcript each time): the functions keep the two together under the
--   session's advisory lock;
-- * session ids and subagent names compare byte by byte (ids are ASCII letters,
--   digits, '.', '_' and '-'): keys compare with memcmp rather than the database's
--   locale, and the ids that start with a prefix are one range of the primary key;
-- * reprise_append_calls writes several appends (to any sessions) in one transaction,
--   each fenced on its own.

-- Above every seq given so far, so that new entries sort after the old ones of their
-- transcript.
CREATE SEQUENCE reprise_entry_seq AS bigint;
SELECT setval('reprise_entry_seq', coalesce((SELECT max(seq) FROM reprise_entries), 0) + 1, false);

ALTER TABLE reprise_entries
    DROP CONSTRAINT reprise_entries_session_id_subagent_fkey,
    DROP CONSTRAINT reprise_entries_pkey,
    DROP CONSTRAINT reprise_entries_session_id_subagent_uuid_key,
    ADD PRIMARY KEY (session_id, subagent, uuid);

ALTER TABLE reprise_sessions ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE reprise_transcripts
    ALTER COLUMN session_id TYPE text COLLATE "C",
    ALTER COLUMN subagent TYPE text COLLATE "C";
ALTER TABLE reprise_entries
    ALTER COLUMN session_id TYPE text COLLATE "C",
    ALTER COLUMN subagent TYPE text COLLATE "C";
ALTER TABLE reprise_leases ALTER COLUMN session_id TYPE text COLLATE "C";

-- The person's first message, for listings of sessions without a title (sessions
-- written before this migration have none; listings fall back to the last one).
ALTER TABLE reprise_sessions ADD COLUMN first_message text;

DROP FUNCTION reprise_append(text, text, bigint, uuid[], uuid[], text[], boolean[], text);

-- Appends the entries of several calls, each to one transcript and fenced on its own:
-- a call with an epoch writes only while it is its session's current one, a call
-- without one only while nobody else holds a live lease (p_released: holder tokens
-- the caller let go of). Per call: the session, the subagent ('' for the main
-- transcript), the epoch, and the person's first and last messages in it (kept for
-- listings: the first while the session has none, the last when set).
-- Per entry, in the calls' order: its call (counted from 1), uuid, body, and whether
-- it is a message (counted for listings). Returns one row per call, in order: the
-- rows written, or NULL and the holder when refused.
CREATE FUNCTION reprise_append_calls(
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
BEGIN
    IF cardinality(p_sessions) > 1 THEN
        -- In one order, so that two transactions sharing sessions cannot deadlock.
        PERFORM reprise_serialise(q.s)
        FROM (SELECT DISTINCT u.s FROM unnest(p_sessions) AS u (s) ORDER BY u.s) AS q;
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
            INSERT INTO reprise_sessions AS r (id, message_count, first_message, last_message)
            SELECT per_session.s, per_session.counted, per_session.first, per_session.last
            FROM per_session
            ON CONFLICT (id) DO UPDATE SET
                updated_at = clock_timestamp(),
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
        updated_at = clock_timestamp(),
        message_count = message_count + counted,
        first_message = CASE
            WHEN first_message IS NULL AND written > 0 AND a = ''
            THEN p_first_messages[1] ELSE first_message END,
        last_message = CASE
            WHEN written > 0 AND a = '' AND p_last_messages[1] IS NOT NULL
            THEN p_last_messages[1] ELSE last_message END
    WHERE id = s;
    IF NOT FOUND THEN
        INSERT INTO reprise_sessions (id, message_count, first_message, last_message)
        VALUES (s, counted,
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

-- Deletes a session (p_subagent NULL: its transcripts and entries too) or one
-- subagent's transcript with its entries, under the session's lock so that no append
-- lands between the two.
CREATE FUNCTION reprise_delete(p_session text, p_subagent text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM reprise_serialise(p_session);
    IF p_subagent IS NULL THEN
        DELETE FROM reprise_entries WHERE session_id = p_session;
        DELETE FROM reprise_sessions WHERE id = p_session;
    ELSE
        DELETE FROM reprise_entries WHERE session_id = p_session AND subagent = p_subagent;
        DELETE FROM reprise_transcripts
        WHERE session_id = p_session AND subagent = p_subagent;
    END IF;
END;
$$;
