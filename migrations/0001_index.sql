-- Oráculo's index: the notes of one campaign, cut into labelled fragments.
-- Applied in order by src/index/store.rs and recorded in schema_migrations; never by hand.

-- Every Markdown file the last complete ingest read.
CREATE TABLE files (
    path          TEXT PRIMARY KEY,          -- relative to the campaign root, '/'-separated
    content_hash  TEXT NOT NULL,             -- sha256 of the file's bytes
    kind          TEXT NOT NULL CHECK (kind IN ('session', 'sheet', 'world')),
    title         TEXT NOT NULL,
    aliases       TEXT NOT NULL DEFAULT '[]', -- JSON list, from front matter
    tags          TEXT NOT NULL DEFAULT '[]', -- JSON list
    fingerprint   TEXT NOT NULL,             -- sha256 over the file's fragments as stored
    n_bytes       INTEGER NOT NULL
);

-- The retrievable units. One session is one fragment unless it exceeds SESSION_MAX_WORDS.
CREATE TABLE fragments (
    id            INTEGER PRIMARY KEY,
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
CREATE INDEX fragments_by_source ON fragments (source_path);
CREATE INDEX fragments_by_hash ON fragments (content_hash);
CREATE INDEX fragments_by_session ON fragments (session);

-- BM25 over fragment text. remove_diacritics 2 so "sesion" finds "sesión".
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

-- Wikilinks seen in each file: [[target|shown]]. The compendium reads link aliases here.
CREATE TABLE links (
    source_path   TEXT NOT NULL REFERENCES files(path) ON DELETE CASCADE,
    target        TEXT NOT NULL,
    shown         TEXT,
    embed         INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX links_by_source ON links (source_path);
CREATE INDEX links_by_target ON links (target);

-- Index-wide facts: which vector table is live, which embedder made it.
CREATE TABLE meta (
    key           TEXT PRIMARY KEY,
    value         TEXT NOT NULL
);

-- Diagnostics of the last complete ingest, so `sources` can show them later.
CREATE TABLE diagnostics (
    path          TEXT NOT NULL,
    line          INTEGER,
    message       TEXT NOT NULL
);
