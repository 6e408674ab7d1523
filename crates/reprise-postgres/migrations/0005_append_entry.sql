-- An append of one entry (the common case: a message), as one statement that costs
-- the server less than reprise_append_calls with a single call, which stays for
-- appends of several entries and for batches: plain arguments rather than arrays, a
-- scalar result rather than a set, the advisory lock taken in place, and the entry
-- inserted from its values.
--
-- Appends the entry to one transcript (p_subagent '' for the main one), fenced: a
-- writer with a lease (p_epoch set) writes only while its epoch is the session's
-- current one, a writer without one only while nobody else holds a live lease
-- (p_released: holder tokens the caller let go of). p_message says whether the entry
-- is a message (counted for listings); p_person_message is the person's message in
-- it, when it is one (kept for listings: as the first while the session has none,
-- and as the last). Returns 1 when the entry was written, 0 when the transcript held
-- its uuid, or NULL and the holder when refused.
CREATE FUNCTION reprise_append_entry(
    p_session text, p_subagent text, p_epoch bigint, p_released uuid[],
    p_uuid uuid, p_body text, p_message boolean, p_person_message text,
    OUT written integer, OUT holder_host text, OUT holder_pid integer
)
LANGUAGE plpgsql AS $$
DECLARE
    lease reprise_leases%ROWTYPE;
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

    INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body)
    VALUES (p_session, p_subagent, nextval('reprise_entry_seq'), p_uuid, p_body)
    ON CONFLICT (session_id, subagent, uuid) DO NOTHING;
    GET DIAGNOSTICS written = ROW_COUNT;

    -- The listing fields change only with what the main transcript gained.
    IF written = 1 AND p_subagent = '' THEN
        UPDATE reprise_sessions SET
            updated_at = clock_timestamp(),
            message_count = message_count + CASE WHEN p_message THEN 1 ELSE 0 END,
            first_message = coalesce(first_message, p_person_message),
            last_message = coalesce(p_person_message, last_message)
        WHERE id = p_session;
    ELSE
        UPDATE reprise_sessions SET updated_at = clock_timestamp() WHERE id = p_session;
    END IF;
    IF NOT FOUND THEN
        INSERT INTO reprise_sessions (id, message_count, first_message, last_message)
        VALUES (p_session,
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
END;
$$;
