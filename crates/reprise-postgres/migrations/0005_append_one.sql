-- One append by itself, as one statement that costs the server less than
-- reprise_append_calls with a single call (which stays for batches, and for clients
-- from before this migration): a scalar result rather than a set, the advisory lock
-- taken in place, and a lone entry inserted from its values.
--
-- Appends entries to one transcript (p_subagent '' for the main one), fenced: a
-- writer with a lease (p_epoch set) writes only while its epoch is the session's
-- current one, a writer without one only while nobody else holds a live lease
-- (p_released: holder tokens the caller let go of). p_messages marks the entries
-- that are messages (counted for listings); p_first_message and p_last_message are
-- the person's first and last messages in the call (kept for listings: the first
-- while the session has none, the last when set). Returns the rows written, or NULL
-- and the holder when refused.
CREATE FUNCTION reprise_append_one(
    p_session text, p_subagent text, p_epoch bigint,
    p_first_message text, p_last_message text, p_released uuid[],
    p_uuids uuid[], p_bodies text[], p_messages boolean[],
    OUT written integer, OUT holder_host text, OUT holder_pid integer
)
LANGUAGE plpgsql AS $$
DECLARE
    lease reprise_leases%ROWTYPE;
    got uuid[];
    counted bigint;
    refused boolean;
BEGIN
    -- reprise_serialise, in place.
    PERFORM pg_advisory_xact_lock(hashtextextended(current_schema() || '/' || p_session, 7));
    SELECT * INTO lease FROM reprise_leases WHERE session_id = p_session;
    IF p_epoch IS NOT NULL THEN
        refused := NOT FOUND OR lease.epoch <> p_epoch;
    ELSE
        refused := FOUND AND lease.expires_at > clock_timestamp()
            AND NOT (lease.holder = ANY (p_released));
    END IF;
    IF refused THEN
        holder_host := lease.host;
        holder_pid := lease.pid;
        RETURN;
    END IF;

    IF cardinality(p_uuids) = 1 THEN
        INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body)
        VALUES (p_session, p_subagent, nextval('reprise_entry_seq'), p_uuids[1], p_bodies[1])
        ON CONFLICT (session_id, subagent, uuid) DO NOTHING;
        GET DIAGNOSTICS written = ROW_COUNT;
        counted := CASE WHEN written = 1 AND p_subagent = '' AND p_messages[1] THEN 1 ELSE 0 END;
    ELSE
        WITH inserted AS (
            INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body)
            SELECT p_session, p_subagent, nextval('reprise_entry_seq'), t.u, t.b
            FROM unnest(p_uuids, p_bodies) AS t (u, b)
            ON CONFLICT (session_id, subagent, uuid) DO NOTHING
            RETURNING uuid
        )
        SELECT array_agg(inserted.uuid) INTO got FROM inserted;
        written := coalesce(cardinality(got), 0);
        IF p_subagent <> '' THEN
            counted := 0;
        ELSIF written = cardinality(p_uuids) THEN
            counted := cardinality(array_positions(p_messages, true));
        ELSE
            SELECT count(*) INTO counted
            FROM unnest(p_uuids, p_messages) AS t (u, m)
            WHERE t.m AND t.u = ANY (got);
        END IF;
    END IF;

    -- The listing fields change only with what the main transcript gained.
    IF written > 0 AND p_subagent = '' THEN
        UPDATE reprise_sessions SET
            updated_at = clock_timestamp(),
            message_count = message_count + counted,
            first_message = coalesce(first_message, p_first_message),
            last_message = coalesce(p_last_message, last_message)
        WHERE id = p_session;
    ELSE
        UPDATE reprise_sessions SET updated_at = clock_timestamp() WHERE id = p_session;
    END IF;
    IF NOT FOUND THEN
        INSERT INTO reprise_sessions (id, message_count, first_message, last_message)
        VALUES (p_session, counted,
            CASE WHEN written > 0 AND p_subagent = '' THEN p_first_message END,
            CASE WHEN written > 0 AND p_subagent = '' THEN p_last_message END);
        INSERT INTO reprise_transcripts (session_id, subagent) VALUES (p_session, '')
        ON CONFLICT DO NOTHING;
    END IF;
    IF p_subagent <> '' THEN
        INSERT INTO reprise_transcripts (session_id, subagent) VALUES (p_session, p_subagent)
        ON CONFLICT DO NOTHING;
    END IF;
END;
$$;
