-- Sessions, their transcripts (the main one and subagents'), entries and writer leases.
-- The store calls the functions below, each as one statement: the check and the write of
-- an append are one transaction, and a client that stalls between statements never holds
-- a lock on the server.

CREATE TABLE reprise_sessions (
    id                text        PRIMARY KEY,
    created_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    forked_from       text,
    forked_from_entry uuid
);

-- list_sessions pages through this index, newest first, without reading entries.
CREATE INDEX reprise_sessions_by_update ON reprise_sessions (updated_at DESC, id DESC);

-- One row per transcript: '' is the main transcript, any other name a subagent's.
CREATE TABLE reprise_transcripts (
    session_id text NOT NULL REFERENCES reprise_sessions (id) ON DELETE CASCADE,
    subagent   text NOT NULL,
    PRIMARY KEY (session_id, subagent)
);

CREATE TABLE reprise_entries (
    session_id text   NOT NULL,
    subagent   text   NOT NULL,
    seq        bigint NOT NULL,
    uuid       uuid   NOT NULL,
    -- The entry's JSON line as the library wrote it, kept verbatim.
    body       text   NOT NULL,
    PRIMARY KEY (session_id, subagent, seq),
    UNIQUE (session_id, subagent, uuid),
    FOREIGN KEY (session_id, subagent)
        REFERENCES reprise_transcripts (session_id, subagent) ON DELETE CASCADE
);

-- The writer lease of a session. Not tied to reprise_sessions: a lease is taken before
-- the first entry, and outlives a delete so that epochs only grow.
CREATE TABLE reprise_leases (
    session_id text        PRIMARY KEY,
    epoch      bigint      NOT NULL,
    holder     uuid        NOT NULL,
    host       text        NOT NULL,
    pid        integer     NOT NULL,
    expires_at timestamptz NOT NULL
);

-- Serialises the appends, lease takeovers and forks of one session for the rest of the
-- transaction (released at commit, so pooled connections never carry it over).
CREATE FUNCTION reprise_serialise(p_session text) RETURNS void
LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || '/' || p_session, 7));
$$;

-- Takes the lease of a session: a new one, or one that expired or whose holder let it go
-- (p_released). Returns the new epoch, or NULL and the live holder.
CREATE FUNCTION reprise_lock(
    p_session text, p_holder uuid, p_host text, p_pid integer, p_ttl_ms bigint,
    p_released uuid[]
) RETURNS TABLE (granted_epoch bigint, holder_host text, holder_pid integer)
LANGUAGE plpgsql AS $$
DECLARE
    got bigint;
BEGIN
    PERFORM reprise_serialise(p_session);
    INSERT INTO reprise_leases AS l (session_id, epoch, holder, host, pid, expires_at)
    VALUES (p_session, 1, p_holder, p_host, p_pid,
            clock_timestamp() + p_ttl_ms * interval '1 millisecond')
    ON CONFLICT (session_id) DO UPDATE
        SET epoch = l.epoch + 1, holder = excluded.holder, host = excluded.host,
            pid = excluded.pid, expires_at = excluded.expires_at
        WHERE l.expires_at <= clock_timestamp() OR l.holder = ANY (p_released)
    RETURNING l.epoch INTO got;
    IF got IS NOT NULL THEN
        RETURN QUERY SELECT got, p_host, p_pid;
    ELSE
        RETURN QUERY SELECT NULL::bigint, l.host, l.pid
            FROM reprise_leases l WHERE l.session_id = p_session;
    END IF;
END;
$$;

-- Extends a lease its holder still has; false when it was taken over.
CREATE FUNCTION reprise_renew(p_session text, p_epoch bigint, p_ttl_ms bigint)
RETURNS boolean
LANGUAGE sql AS $$
    WITH renewed AS (
        UPDATE reprise_leases
        SET expires_at = clock_timestamp() + p_ttl_ms * interval '1 millisecond'
        WHERE session_id = p_session AND epoch = p_epoch
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM renewed);
$$;

-- Lets a lease go at once (the epoch stays, so the next holder's is higher).
CREATE FUNCTION reprise_release(p_session text, p_epoch bigint) RETURNS void
LANGUAGE sql AS $$
    UPDATE reprise_leases SET expires_at = clock_timestamp()
    WHERE session_id = p_session AND epoch = p_epoch AND expires_at > clock_timestamp();
$$;

-- Appends entries to a transcript, fenced: a writer with a lease (p_epoch set) writes only
-- while its epoch is the session's current one; a writer without one only while nobody
-- holds a live lease. Returns the rows written, or NULL and the holder when refused.
CREATE FUNCTION reprise_append(
    p_session text, p_subagent text, p_epoch bigint, p_released uuid[],
    p_uuids uuid[], p_bodies text[]
) RETURNS TABLE (written integer, holder_host text, holder_pid integer)
LANGUAGE plpgsql AS $$
DECLARE
    lease reprise_leases%ROWTYPE;
    base bigint;
    n integer;
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

    INSERT INTO reprise_sessions AS s (id) VALUES (p_session)
    ON CONFLICT (id) DO UPDATE SET updated_at = clock_timestamp();
    INSERT INTO reprise_transcripts (session_id, subagent) VALUES (p_session, '')
    ON CONFLICT DO NOTHING;
    IF p_subagent <> '' THEN
        INSERT INTO reprise_transcripts (session_id, subagent) VALUES (p_session, p_subagent)
        ON CONFLICT DO NOTHING;
    END IF;

    SELECT coalesce(max(e.seq), 0) INTO base
    FROM reprise_entries e WHERE e.session_id = p_session AND e.subagent = p_subagent;
    INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body)
    SELECT p_session, p_subagent, base + t.ord, t.u, t.b
    FROM unnest(p_uuids, p_bodies) WITH ORDINALITY AS t (u, b, ord)
    ON CONFLICT (session_id, subagent, uuid) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN QUERY SELECT n, NULL::text, NULL::integer;
END;
$$;

-- Copies a session (all of it, or its main transcript up to an entry; subagent
-- transcripts whole) into a new one with its origin recorded, in one transaction.
-- Returns 'ok', 'exists', 'not-found' or 'no-entry'.
CREATE FUNCTION reprise_fork(p_source text, p_target text, p_up_to uuid) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    cut bigint;
BEGIN
    -- Both sessions, in a fixed order so that two forks cannot deadlock.
    PERFORM reprise_serialise(least(p_source, p_target));
    PERFORM reprise_serialise(greatest(p_source, p_target));
    IF EXISTS (SELECT 1 FROM reprise_sessions WHERE id = p_target) THEN
        RETURN 'exists';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM reprise_sessions WHERE id = p_source) THEN
        RETURN 'not-found';
    END IF;
    IF p_up_to IS NOT NULL THEN
        SELECT e.seq INTO cut FROM reprise_entries e
        WHERE e.session_id = p_source AND e.subagent = '' AND e.uuid = p_up_to;
        IF NOT FOUND THEN
            RETURN 'no-entry';
        END IF;
    END IF;
    INSERT INTO reprise_sessions (id, forked_from, forked_from_entry)
    VALUES (p_target, p_source, p_up_to);
    INSERT INTO reprise_transcripts (session_id, subagent)
    SELECT p_target, t.subagent FROM reprise_transcripts t WHERE t.session_id = p_source;
    INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body)
    SELECT p_target, e.subagent, e.seq, e.uuid, e.body FROM reprise_entries e
    WHERE e.session_id = p_source AND (cut IS NULL OR e.subagent <> '' OR e.seq <= cut);
    RETURN 'ok';
END;
$$;
