-- What a listing shows of a session without reading its entries: how many messages its
-- main transcript holds, and the person's last message as the writing client redacted it.
ALTER TABLE reprise_sessions
    ADD COLUMN message_count bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_message text;

UPDATE reprise_sessions s SET message_count = (
    SELECT count(*) FROM reprise_entries e
    WHERE e.session_id = s.id AND e.subagent = '' AND e.body::jsonb ? 'message'
);

-- The append of 0001, plus the listing fields, and fewer statements on the common path
-- (a transcript that exists): one lookup of the lease, one of the last seq, the insert,
-- one update of the session row.
DROP FUNCTION reprise_append(text, text, bigint, uuid[], uuid[], text[]);

-- Appends entries to a transcript, fenced: a writer with a lease (p_epoch set) writes only
-- while its epoch is the session's current one; a writer without one only while nobody
-- holds a live lease. p_messages marks the entries that are messages (counted for
-- listings), p_last_message is the batch's last message from the person (kept for
-- listings when set). Returns the rows written, or NULL and the holder when refused.
CREATE FUNCTION reprise_append(
    p_session text, p_subagent text, p_epoch bigint, p_released uuid[],
    p_uuids uuid[], p_bodies text[], p_messages boolean[], p_last_message text
) RETURNS TABLE (written integer, holder_host text, holder_pid integer)
LANGUAGE plpgsql AS $$
DECLARE
    lease reprise_leases%ROWTYPE;
    base bigint;
    n integer;
    counted bigint;
BEGIN
    PERFORM reprise_serialise(p_session);
    SELECT * INTO lease FROM reprise_leases WHERE session_id = p_session;
    IF p_epoch IS NOT NULL THEN
        IF NOT FOUND OR lease.epoch <> p_epoch THEN
            RETURN QUERY SELECT NULL::integer, lease.host, lease.pid;
            RETURN;
        END IF;
    ELSIF FOUND AND lease.expires_at > clock_timestamp()
            AND NOT (lease.holder = ANY (p_released)) THEN
        RETURN QUERY SELECT NULL::integer, lease.host, lease.pid;
        RETURN;
    END IF;

    -- The last seq doubles as the check that the transcript exists. Written as an
    -- ORDER BY … LIMIT 1 so that it is one step down the primary key from its end
    -- (max() may be planned over the uuid index, reading the whole transcript).
    SELECT e.seq INTO base
    FROM reprise_entries e WHERE e.session_id = p_session AND e.subagent = p_subagent
    ORDER BY e.seq DESC LIMIT 1;
    IF base IS NULL THEN
        base := 0;
        INSERT INTO reprise_sessions (id) VALUES (p_session) ON CONFLICT (id) DO NOTHING;
        INSERT INTO reprise_transcripts (session_id, subagent) VALUES (p_session, '')
        ON CONFLICT DO NOTHING;
        IF p_subagent <> '' THEN
            INSERT INTO reprise_transcripts (session_id, subagent)
            VALUES (p_session, p_subagent)
            ON CONFLICT DO NOTHING;
        END IF;
    END IF;

    WITH batch AS (
        SELECT t.u, t.b, t.m, t.ord
        FROM unnest(p_uuids, p_bodies, p_messages) WITH ORDINALITY AS t (u, b, m, ord)
    ), inserted AS (
        INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body)
        SELECT p_session, p_subagent, base + batch.ord, batch.u, batch.b FROM batch
        ON CONFLICT (session_id, subagent, uuid) DO NOTHING
        RETURNING uuid
    )
    SELECT count(*), count(*) FILTER (WHERE batch.m)
    INTO n, counted
    FROM inserted JOIN batch ON batch.u = inserted.uuid;

    IF p_subagent <> '' THEN
        counted := 0;
    END IF;
    UPDATE reprise_sessions
    SET updated_at = clock_timestamp(),
        message_count = message_count + counted,
        last_message = CASE
            WHEN n > 0 AND p_subagent = '' AND p_last_message IS NOT NULL THEN p_last_message
            ELSE last_message
        END
    WHERE id = p_session;
    RETURN QUERY SELECT n, NULL::text, NULL::integer;
END;
$$;
