-- A fork is listed like its source: its message count and the person's first and
-- last messages. And the schema says which binaries may read and write it, so that a
-- binary older than the schema still reads (and, when allowed, writes) during a
-- rolling upgrade.

-- Which binaries may use this schema: a binary whose newest migration is at least
-- min_reader may read it, at least min_writer may write it. A migration that older
-- binaries can live with (a new table, column or function; a function replaced with
-- the same arguments and meaning) leaves them; one that changes what older binaries
-- rely on raises them to its own version. One row.
CREATE TABLE reprise_schema (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    min_reader bigint  NOT NULL,
    min_writer bigint  NOT NULL
);
INSERT INTO reprise_schema (one, min_reader, min_writer) VALUES (true, 1, 1);

-- Copies a session into a new one (all of it, or its main transcript up to an entry;
-- subagent transcripts whole) with its origin recorded, in one transaction, with the
-- listing fields: a whole copy takes its source's, a copy up to an entry the ones
-- given (the caller counts them from the entries it copies: p_message_count messages,
-- the person's first and last messages). Returns 'ok', 'exists', 'not-found' or
-- 'no-entry'.
CREATE FUNCTION reprise_fork_listed(
    p_source text, p_target text, p_up_to uuid,
    p_message_count bigint, p_first_message text, p_last_message text
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    cut bigint;
    source reprise_sessions%ROWTYPE;
BEGIN
    -- Both sessions, in a fixed order so that two forks cannot deadlock.
    PERFORM reprise_serialise(least(p_source, p_target));
    PERFORM reprise_serialise(greatest(p_source, p_target));
    IF EXISTS (SELECT 1 FROM reprise_sessions WHERE id = p_target) THEN
        RETURN 'exists';
    END IF;
    SELECT * INTO source FROM reprise_sessions WHERE id = p_source;
    IF NOT FOUND THEN
        RETURN 'not-found';
    END IF;
    IF p_up_to IS NOT NULL THEN
        SELECT e.seq INTO cut FROM reprise_entries e
        WHERE e.session_id = p_source AND e.subagent = '' AND e.uuid = p_up_to;
        IF NOT FOUND THEN
            RETURN 'no-entry';
        END IF;
        INSERT INTO reprise_sessions (id, forked_from, forked_from_entry, message_count,
            first_message, last_message)
        VALUES (p_target, p_source, p_up_to, coalesce(p_message_count, 0),
            p_first_message, p_last_message);
    ELSE
        INSERT INTO reprise_sessions (id, forked_from, forked_from_entry, message_count,
            first_message, last_message)
        VALUES (p_target, p_source, NULL, source.message_count,
            source.first_message, source.last_message);
    END IF;
    INSERT INTO reprise_transcripts (session_id, subagent)
    SELECT p_target, t.subagent FROM reprise_transcripts t WHERE t.session_id = p_source;
    INSERT INTO reprise_entries (session_id, subagent, seq, uuid, body)
    SELECT p_target, e.subagent, e.seq, e.uuid, e.body FROM reprise_entries e
    WHERE e.session_id = p_source AND (cut IS NULL OR e.subagent <> '' OR e.seq <= cut);
    RETURN 'ok';
END;
$$;

-- The fork of migration 0001, as binaries of earlier releases call it: a whole copy
-- gets its source's listing fields; a copy up to an entry is counted from 0.
CREATE OR REPLACE FUNCTION reprise_fork(p_source text, p_target text, p_up_to uuid)
RETURNS text
LANGUAGE sql AS $$
    SELECT reprise_fork_listed(p_source, p_target, p_up_to, 0, NULL, NULL);
$$;
