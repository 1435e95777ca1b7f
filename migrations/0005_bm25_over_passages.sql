-- BM25 over passages: every fragment cut into overlapping windows of about 300 words (the
-- retrieve::bm25 constants), each indexed by FTS5. A fragment is scored by its best
-- passages, not by its whole text: a session of 1,200 words, a stats page listing every
-- session, a welcome page, otherwise win on words they merely contain.
-- The windows are written with their fragment (index::store), and a store opened on an older
-- index cuts the windows of the fragments it already holds.

CREATE TABLE fragment_windows (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    fragment_id   INTEGER NOT NULL REFERENCES fragments(id) ON DELETE CASCADE,
    window        INTEGER NOT NULL,          -- 0-based place among the fragment's windows
    text          TEXT NOT NULL
);
CREATE INDEX fragment_windows_by_fragment ON fragment_windows (fragment_id);

CREATE VIRTUAL TABLE fragment_windows_fts USING fts5 (
    text,
    content = 'fragment_windows',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER fragment_windows_fts_insert AFTER INSERT ON fragment_windows BEGIN
    INSERT INTO fragment_windows_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER fragment_windows_fts_delete AFTER DELETE ON fragment_windows BEGIN
    INSERT INTO fragment_windows_fts (fragment_windows_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
