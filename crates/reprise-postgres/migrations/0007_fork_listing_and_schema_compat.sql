-- A fork is listed like its source: its message count and the person's first and
-- last messages (reprise_fork_listed; reprise_fork, which earlier releases call,
-- stays as it was). And the schema says which binaries may read and write it, so
-- that a binary older than the schema still reads (and, when allowed, writes) during
-- a rolling upgrade.

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

-- Forks as reprise_fork does (all of it, or its main transcript up to an entry;
-- subagent transcripts whole), in the same transaction and under the same locks, with
-- the listing fields: a whole copy takes its source's, a copy up to an entry the ones
-- given (the caller counts them from the entries it copies: p_message_count messages,
-- the person's first and last messages). Returns what reprise_fork returns: 'ok',
-- 'exists', 'not-found' or 'no-entry'.
CREATE FUNCTION reprise_fork_listed(
    p_source text, p_target text, p_up_to uuid,
    p_message_count bigint, p_first_message text, p_last_message text
) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    outcome text;
BEGIN
    outcome := reprise_fork(p_source, p_target, p_up_to);
    IF outcome <> 'ok' THEN
        RETURN outcome;
    END IF;
    IF p_up_to IS NULL THEN
        UPDATE reprise_sessions t SET
            message_count = s.message_count,
            first_message = s.first_message,
            last_message = s.last_message
        FROM reprise_sessions s
        WHERE t.id = p_target AND s.id = p_source;
    ELSE
        UPDATE reprise_sessions SET
            message_count = coalesce(p_message_count, 0),
            first_message = p_first_message,
            last_message = p_last_message
        WHERE id = p_target;
    END IF;
    RETURN outcome;
END;
$$;
