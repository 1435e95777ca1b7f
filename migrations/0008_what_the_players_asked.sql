-- What the players asked, kept for the DM: each question the bot answered, what it
-- answered and from which notes, whether the notes held an answer, and the players' verdicts
-- on it. Written by `feedback`; read by `oraculo asked` and `/oraculo_informe`. Rows older than
-- `[feedback] keep_days` are deleted at each start (a verdict goes with its question).
--
-- `audience` is who the answer was made for: 'gm' (a GM channel, the DM's direct messages)
-- is listed only to the GM's view. `asker` is the Discord user id only with
-- `[feedback] keep_askers = true`; NULL otherwise. Lists (labels, entities, sessions) are
-- JSON arrays of text.
CREATE TABLE asked_questions (
    id INTEGER PRIMARY KEY,
    asked_at INTEGER NOT NULL,
    audience TEXT NOT NULL CHECK (audience IN ('player', 'gm')),
    front_end TEXT NOT NULL,
    question TEXT NOT NULL,
    search_query TEXT,
    answer_text TEXT NOT NULL,
    cited_labels TEXT NOT NULL DEFAULT '[]',
    shown_labels TEXT NOT NULL DEFAULT '[]',
    entities TEXT NOT NULL DEFAULT '[]',
    sessions TEXT NOT NULL DEFAULT '[]',
    not_in_notes INTEGER NOT NULL CHECK (not_in_notes IN (0, 1)),
    asker TEXT
);
CREATE INDEX asked_questions_by_time ON asked_questions (asked_at);

-- One verdict per player per answer: `voter` is a keyed hash of the player's id (the key is
-- this file's `feedback_key` meta row, made here), so a second press replaces the first and no
-- user id is stored; `voter_id` holds the id only with `keep_askers = true`.
CREATE TABLE answer_verdicts (
    question_id INTEGER NOT NULL REFERENCES asked_questions (id) ON DELETE CASCADE,
    voter TEXT NOT NULL,
    voter_id TEXT,
    verdict TEXT NOT NULL CHECK (verdict IN ('up', 'down')),
    reason TEXT CHECK (reason IN ('wrong', 'incomplete', 'in_the_notes')),
    given_at INTEGER NOT NULL,
    PRIMARY KEY (question_id, voter)
);

INSERT OR IGNORE INTO meta (key, value) VALUES ('feedback_key', lower(hex(randomblob(16))));
