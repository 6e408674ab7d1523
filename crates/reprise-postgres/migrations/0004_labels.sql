-- What the person named and tagged a session (`reprise rename` and `reprise tag`; the
-- run folders keep these in labels.json). Tags are kept sorted, each once.
ALTER TABLE reprise_sessions
    ADD COLUMN title text,
    ADD COLUMN tags text[] COLLATE "C" NOT NULL DEFAULT '{}';

-- Sessions are found by title among the few that have one.
CREATE INDEX reprise_sessions_titled ON reprise_sessions (id) INCLUDE (title)
    WHERE title IS NOT NULL;
