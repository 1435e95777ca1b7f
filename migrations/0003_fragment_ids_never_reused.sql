-- Fragment ids are never reused (issue 12).
-- `INTEGER PRIMARY KEY` alone hands a deleted row's id to the next insert, and a changed file's
-- fragments are deleted and re-inserted: an id a player searched could come back holding
-- another (GM-only) text. AUTOINCREMENT never hands out an id twice.
-- SQLite cannot add AUTOINCREMENT to a table, so the table is rebuilt: same columns, same rows,
-- same ids. Dropping the old table cascades to entity_mentions, so they are kept aside and put back.

CREATE TEMP TABLE kept_entity_mentions AS SELECT entity_id, fragment_id, n_mentions FROM entity_mentions;

DROP TRIGGER fragments_fts_insert;
DROP TRIGGER fragments_fts_delete;
DROP TRIGGER fragments_fts_update;
DROP TABLE fragments_fts;

CREATE TABLE fragments_autoincrement (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    label         TEXT NOT NULL,             -- exact citation tag: 'Sesión 12', 'Ficha: Baika'
    kind          TEXT NOT NULL CHECK (kind IN ('session', 'sheet', 'world')),
    source_path   TEXT NOT NULL REFERENCES files(path) ON DELETE CASCADE,
    session       INTEGER,
    part          INTEGER NOT NULL,
    heading_path  TEXT NOT NULL DEFAULT '[]', -- JSON list, outermost first
    text          TEXT NOT NULL,
    word_count    INTEGER NOT NULL,
    line_start    INTEGER NOT NULL,
    line_end      INTEGER NOT NULL,
    visibility    TEXT NOT NULL CHECK (visibility IN ('player', 'dm_only')),
    content_hash  TEXT NOT NULL,             -- keys the vectors in LanceDB
    UNIQUE (label, part)
);
INSERT INTO fragments_autoincrement
    (id, label, kind, source_path, session, part, heading_path, text, word_count,
     line_start, line_end, visibility, content_hash)
SELECT id, label, kind, source_path, session, part, heading_path, text, word_count,
       line_start, line_end, visibility, content_hash
FROM fragments;
DROP TABLE fragments;
ALTER TABLE fragments_autoincrement RENAME TO fragments;
CREATE INDEX fragments_by_source ON fragments (source_path);
CREATE INDEX fragments_by_hash ON fragments (content_hash);
CREATE INDEX fragments_by_session ON fragments (session);

INSERT INTO entity_mentions (entity_id, fragment_id, n_mentions)
SELECT entity_id, fragment_id, n_mentions FROM kept_entity_mentions;
DROP TABLE kept_entity_mentions;

-- BM25 over fragment text, as in 0001, rebuilt over the new table.
CREATE VIRTUAL TABLE fragments_fts USING fts5 (
    text,
    content = 'fragments',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER fragments_fts_insert AFTER INSERT ON fragments BEGIN
    INSERT INTO fragments_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER fragments_fts_delete AFTER DELETE ON fragments BEGIN
    INSERT INTO fragments_fts (fragments_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER fragments_fts_update AFTER UPDATE OF text ON fragments BEGIN
    INSERT INTO fragments_fts (fragments_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO fragments_fts (rowid, text) VALUES (new.id, new.text);
END;
INSERT INTO fragments_fts (fragments_fts) VALUES ('rebuild');
