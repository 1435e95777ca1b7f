//! The SQLite file: schema migrations, fragments, FTS5, files, links, meta.
//!
//! Writes of one ingest happen in one transaction ([`Store::apply_ingest`]): a reader sees
//! the previous campaign or the new one, never a mix.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use tracing::{debug, info_span};

use super::IndexError;
use crate::compendium::{Compendium, Entity, EntityKind, EntitySource};
use crate::corpus::{Diagnostic, Fragment, Link, NoteKind, SessionNumber, Visibility, fold};

/// Who made an extractive annotation: no model, the fragment's own most central sentences,
/// made at ingest for every fragment (`answer::passages::central_sentences`). Stored beside
/// the model's annotations; the summaries read it where no model annotation exists, the
/// rerank never (it reads what a model wrote).
pub const EXTRACTIVE_ANNOTATOR: &str = "extractive";
/// The version of the extractive annotation's rule, part of its cache key.
pub const EXTRACTIVE_ANNOTATION_VERSION: &str = "central-sentences.v1";

/// The schema, in order. Each is applied once and recorded in `schema_migrations`.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_index", include_str!("../../migrations/0001_index.sql")),
    ("0002_room_for_retrieval", include_str!("../../migrations/0002_room_for_retrieval.sql")),
    ("0003_fragment_ids_never_reused", include_str!("../../migrations/0003_fragment_ids_never_reused.sql")),
    (
        "0004_conversation_turns_know_their_audience",
        include_str!("../../migrations/0004_conversation_turns_know_their_audience.sql"),
    ),
    ("0005_bm25_over_passages", include_str!("../../migrations/0005_bm25_over_passages.sql")),
];

/// Words of one BM25 passage (`fragment_windows`): about what the naive baseline's windows
/// hold, a scene of a session, short enough that a long note does not win on words it merely
/// contains somewhere.
pub const BM25_WINDOW_WORDS: usize = 300;
/// Words from one BM25 passage to the next: half a window, so a scene cut by one window is
/// whole in the next.
pub const BM25_WINDOW_STEP: usize = 150;

/// The meta key naming the live LanceDB table.
pub const META_VECTOR_TABLE: &str = "vector_table";
/// The meta key naming the embedder that made the live table.
pub const META_EMBEDDER: &str = "embedder";
/// The meta key recording which compendium rules built the stored entities.
pub const META_COMPENDIUM_VERSION: &str = "compendium_version";
/// The meta key recording how many cached entity extractions the stored compendium merged.
pub const META_COMPENDIUM_EXTRACTIONS: &str = "compendium_extractions";
/// The meta key counting committed ingests: a reader that kept something built from the index
/// (the oracle's compendium matcher) rebuilds it when this changes.
pub const META_GENERATION: &str = "generation";
/// The meta key giving the live table's vector dimension.
pub const META_DIMENSION: &str = "embedder_dimension";

/// What one file contributes to the index.
#[derive(Debug, Clone)]
pub struct FileRecord {
    pub path: String,
    pub content_hash: String,
    pub kind: NoteKind,
    pub title: String,
    pub aliases: Vec<String>,
    pub tags: Vec<String>,
    pub n_bytes: u64,
    pub fragments: Vec<Fragment>,
    pub links: Vec<Link>,
}

impl FileRecord {
    /// sha256 over everything stored for this file: equal fingerprints mean nothing to write.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        let stored = serde_json::json!({
            "hash": self.content_hash,
            "kind": self.kind,
            "title": self.title,
            "aliases": self.aliases,
            "tags": self.tags,
            "fragments": self.fragments,
            "links": self.links,
        });
        hasher.update(stored.to_string().as_bytes());
        hex::encode(hasher.finalize())
    }
}

/// A fragment as stored, with its row id.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StoredFragment {
    pub id: i64,
    #[serde(flatten)]
    pub fragment: Fragment,
}

/// One entity's mentions in one fragment, with what the entity path ranks by.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityMention {
    pub entity_id: i64,
    pub fragment_id: i64,
    pub n_mentions: i64,
    pub word_count: i64,
    pub session: Option<SessionNumber>,
}

/// A fragment without its text: what a candidate list needs.
#[derive(Debug, Clone)]
pub struct FragmentHead {
    pub id: i64,
    pub label: String,
    pub kind: NoteKind,
    pub source_path: String,
    pub session: Option<SessionNumber>,
    pub part: u32,
    pub visibility: Visibility,
    pub content_hash: String,
}

/// One label with what `oraculo sources` shows for it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SourceSummary {
    pub label: String,
    pub kind: NoteKind,
    pub source_path: String,
    pub session: Option<SessionNumber>,
    pub n_fragments: u32,
    pub n_dm_only: u32,
    pub n_words: u64,
}

/// What an ingest changes, computed before anything is written.
#[derive(Debug, Default)]
pub struct IngestChanges {
    /// New or changed files: their fragments replace whatever the path had.
    pub upserts: Vec<FileRecord>,
    /// Files that are gone from the campaign.
    pub removals: Vec<String>,
    pub diagnostics: Vec<Diagnostic>,
    /// Meta keys to set in the same transaction (the live vector table, the embedder).
    pub meta: Vec<(String, String)>,
    /// The whole compendium, rebuilt (`None`: keep the stored one).
    pub compendium: Option<CompendiumRecords>,
}

/// The compendium as the ingest computed it, with mentions keyed by fragment label and part
/// (row ids are only known inside the transaction).
#[derive(Debug, Default)]
pub struct CompendiumRecords {
    pub compendium: Compendium,
    pub mentions: Vec<MentionRecord>,
}

#[derive(Debug, Clone)]
pub struct MentionRecord {
    /// Index into `compendium.entities`.
    pub entity: usize,
    pub label: String,
    pub part: u32,
    pub count: u32,
}

/// One entity as `oraculo compendium` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EntityListing {
    pub name: String,
    pub kind: EntityKind,
    pub aliases: Vec<String>,
    pub description: String,
    pub note_path: Option<String>,
    /// Sessions whose fragments mention it, ascending.
    pub sessions: Vec<SessionNumber>,
    /// Labels of the other fragments (sheets, world documents) that mention it.
    pub other_labels: Vec<String>,
}

/// The SQLite side of the index.
pub struct Store {
    connection: Connection,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (or creates) the file and applies pending migrations.
    pub fn open(path: &Path) -> Result<Store, IndexError> {
        let sqlite = |source| IndexError::Sqlite { path: path.display().to_string(), source };
        // Private before SQLite writes a byte: the file holds the GM's secrets.
        super::create_private_file(path)
            .map_err(|source| IndexError::Io { path: path.display().to_string(), source })?;
        let connection = Connection::open(path).map_err(sqlite)?;
        // WAL: readers (the bot answering) never block on a reingest's writer.
        connection
            .execute_batch("PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;")
            .map_err(sqlite)?;
        let mut store = Store { connection };
        store.migrate().map_err(sqlite)?;
        store.cut_missing_windows().map_err(sqlite)?;
        Ok(store)
    }

    /// The BM25 passages of every fragment that has none: the fragments an index held before
    /// it had passages (new fragments get theirs as they are written). One transaction; none
    /// to cut is one query.
    fn cut_missing_windows(&mut self) -> rusqlite::Result<()> {
        let missing: Vec<(i64, String)> = {
            let mut statement = self.connection.prepare(
                "SELECT id, text FROM fragments f
                 WHERE NOT EXISTS (SELECT 1 FROM fragment_windows w WHERE w.fragment_id = f.id)",
            )?;
            let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        if missing.is_empty() {
            return Ok(());
        }
        let _span = info_span!("index.cut_windows", n_fragments = missing.len()).entered();
        let transaction = self.connection.transaction()?;
        for (fragment_id, text) in &missing {
            insert_windows(&transaction, *fragment_id, text)?;
        }
        transaction.commit()
    }

    fn migrate(&mut self) -> rusqlite::Result<()> {
        self.connection.execute_batch(
            "CREATE TABLE IF NOT EXISTS schema_migrations (
                version INTEGER PRIMARY KEY, name TEXT NOT NULL,
                applied_at TEXT NOT NULL DEFAULT (datetime('now')))",
        )?;
        let applied: i64 =
            self.connection
                .query_row("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", [], |row| row.get(0))?;
        for (index, (name, sql)) in MIGRATIONS.iter().enumerate() {
            let version = index as i64 + 1;
            if version <= applied {
                continue;
            }
            let transaction = self.connection.transaction()?;
            transaction.execute_batch(sql)?;
            transaction
                .execute("INSERT INTO schema_migrations (version, name) VALUES (?1, ?2)", params![version, name])?;
            transaction.commit()?;
            debug!(version, name, "applied migration");
        }
        Ok(())
    }

    /// The schema version (the number of migrations applied).
    pub fn schema_version(&self) -> Result<i64, IndexError> {
        Ok(self.connection.query_row("SELECT MAX(version) FROM schema_migrations", [], |row| row.get(0))?)
    }

    /// path → fingerprint of every file the last complete ingest stored.
    pub fn file_fingerprints(&self) -> Result<HashMap<String, String>, IndexError> {
        let mut statement = self.connection.prepare("SELECT path, fingerprint FROM files")?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// path → sha256 of the bytes of every file the last complete ingest stored: what a note
    /// on disk is compared with to tell whether it changed since.
    pub fn file_hashes(&self) -> Result<HashMap<String, String>, IndexError> {
        let mut statement = self.connection.prepare("SELECT path, content_hash FROM files")?;
        let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// How many fragments the index holds, GM-only ones included.
    pub fn n_fragments(&self) -> Result<usize, IndexError> {
        let count: i64 = self.connection.query_row("SELECT COUNT(*) FROM fragments", [], |row| row.get(0))?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    pub fn meta(&self, key: &str) -> Result<Option<String>, IndexError> {
        Ok(self.connection.query_row("SELECT value FROM meta WHERE key = ?1", [key], |row| row.get(0)).optional()?)
    }

    /// Writes one ingest's changes in a single transaction.
    pub fn apply_ingest(&mut self, changes: &IngestChanges) -> Result<(), IndexError> {
        let _span =
            info_span!("index.write_sqlite", n_upserts = changes.upserts.len(), n_removals = changes.removals.len())
                .entered();
        let transaction = self.connection.transaction()?;
        // Removals first, so a label moving from one file to another never collides.
        for path in changes.removals.iter().chain(changes.upserts.iter().map(|file| &file.path)) {
            transaction.execute("DELETE FROM files WHERE path = ?1", [path])?;
        }
        for file in &changes.upserts {
            insert_file(&transaction, file)?;
        }
        transaction.execute("DELETE FROM diagnostics", [])?;
        for diagnostic in &changes.diagnostics {
            transaction.execute(
                "INSERT INTO diagnostics (path, line, message) VALUES (?1, ?2, ?3)",
                params![diagnostic.path, diagnostic.line, diagnostic.message],
            )?;
        }
        if let Some(records) = &changes.compendium {
            write_compendium(&transaction, records)?;
        }
        for (key, value) in &changes.meta {
            transaction.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )?;
        }
        transaction.execute(
            "INSERT INTO meta (key, value) VALUES (?1, '1') \
             ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)",
            [META_GENERATION],
        )?;
        transaction.commit()?;
        Ok(())
    }

    /// Every content hash a stored fragment has: the vectors that must exist.
    pub fn content_hashes(&self) -> Result<Vec<String>, IndexError> {
        let mut statement = self.connection.prepare("SELECT DISTINCT content_hash FROM fragments")?;
        let rows = statement.query_map([], |row| row.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Labels with their kind, source, session and fragment counts, sessions first by number.
    pub fn sources(&self) -> Result<Vec<SourceSummary>, IndexError> {
        self.sources_visible(None)
    }

    /// [`Store::sources`] counting only the fragments `visibility` allows: a label with no
    /// fragment a player may read (a secret note's, which may name the secret) is not listed.
    pub fn sources_visible(&self, visibility: Option<Visibility>) -> Result<Vec<SourceSummary>, IndexError> {
        let mut statement = self.connection.prepare(
            "SELECT label, kind, source_path, session, COUNT(*),
                    SUM(visibility = 'dm_only'), SUM(word_count)
             FROM fragments WHERE ?1 IS NULL OR visibility = ?1 GROUP BY label, source_path
             ORDER BY CASE kind WHEN 'session' THEN 0 WHEN 'sheet' THEN 1 ELSE 2 END,
                      session, label",
        )?;
        let rows = statement.query_map([visibility.map(Visibility::as_str)], |row| {
            let kind: String = row.get(1)?;
            Ok(SourceSummary {
                label: row.get(0)?,
                kind: NoteKind::parse(&kind).unwrap_or(NoteKind::World),
                source_path: row.get(2)?,
                session: row.get::<_, Option<u32>>(3)?.map(SessionNumber),
                n_fragments: row.get(4)?,
                n_dm_only: row.get(5)?,
                n_words: row.get::<_, i64>(6)? as u64,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The diagnostics the last complete ingest recorded.
    pub fn diagnostics(&self) -> Result<Vec<Diagnostic>, IndexError> {
        let mut statement =
            self.connection.prepare("SELECT path, line, message FROM diagnostics ORDER BY path, line")?;
        let rows = statement
            .query_map([], |row| Ok(Diagnostic { path: row.get(0)?, line: row.get(1)?, message: row.get(2)? }))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// All stored fragments, in label order; `visibility` None means every fragment.
    pub fn fragments(&self, visibility: Option<Visibility>) -> Result<Vec<StoredFragment>, IndexError> {
        let mut statement = self.connection.prepare(
            "SELECT id, label, kind, source_path, session, part, heading_path, text, word_count,
                    line_start, line_end, visibility, content_hash
             FROM fragments WHERE ?1 IS NULL OR visibility = ?1 ORDER BY source_path, line_start, part",
        )?;
        let rows = statement.query_map([visibility.map(Visibility::as_str)], read_fragment)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Every fragment of `label` that `visibility` allows, in part order (a source shown whole).
    pub fn fragments_of_label(
        &self,
        label: &str,
        visibility: Option<Visibility>,
    ) -> Result<Vec<StoredFragment>, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT id, label, kind, source_path, session, part, heading_path, text, word_count,
                    line_start, line_end, visibility, content_hash
             FROM fragments WHERE label = ?1 AND (?2 IS NULL OR visibility = ?2) ORDER BY part, id",
        )?;
        let rows = statement.query_map(params![label, visibility.map(Visibility::as_str)], read_fragment)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Fragment ids whose text matches `fts_query` (already an FTS5 expression), best
    /// BM25 first. The caller owns turning user text into a safe expression.
    pub fn match_fts(
        &self,
        fts_query: &str,
        visibility: Option<Visibility>,
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, IndexError> {
        let mut statement = self.connection.prepare(
            "SELECT f.id, bm25(fragments_fts) AS score
             FROM fragments_fts JOIN fragments f ON f.id = fragments_fts.rowid
             WHERE fragments_fts MATCH ?1 AND (?2 IS NULL OR f.visibility = ?2)
             ORDER BY score, f.id LIMIT ?3",
        )?;
        let rows = statement
            .query_map(params![fts_query, visibility.map(Visibility::as_str), limit as i64], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The BM25 passages that match `fts_query` (already an FTS5 expression), best first, at
    /// most `limit`: `(fragment id, bm25 score)`, lower is better, as FTS5 scores.
    pub fn match_fts_windows(
        &self,
        fts_query: &str,
        visibility: Option<Visibility>,
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT w.fragment_id, bm25(fragment_windows_fts) AS score
             FROM fragment_windows_fts JOIN fragment_windows w ON w.id = fragment_windows_fts.rowid
                  JOIN fragments f ON f.id = w.fragment_id
             WHERE fragment_windows_fts MATCH ?1 AND (?2 IS NULL OR f.visibility = ?2)
             ORDER BY score, w.id LIMIT ?3",
        )?;
        let rows = statement
            .query_map(params![fts_query, visibility.map(Visibility::as_str), limit as i64], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Whether some fragment `visibility` allows matches the FTS5 expression `fts_query`.
    pub fn fts_has_term(&self, fts_query: &str, visibility: Option<Visibility>) -> Result<bool, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM fragments_fts JOIN fragments f ON f.id = fragments_fts.rowid
                            WHERE fragments_fts MATCH ?1 AND (?2 IS NULL OR f.visibility = ?2))",
        )?;
        Ok(statement.query_row(params![fts_query, visibility.map(Visibility::as_str)], |row| row.get(0))?)
    }

    /// content hash → ids of the fragments with that text and an allowed visibility.
    pub fn fragment_ids_by_hash(
        &self,
        hashes: &[&str],
        visibility: Option<Visibility>,
    ) -> Result<HashMap<String, Vec<i64>>, IndexError> {
        let mut rows = Vec::new();
        let mut statement = self.connection.prepare_cached(
            "SELECT content_hash, id FROM fragments WHERE content_hash = ?1 AND (?2 IS NULL OR visibility = ?2)",
        )?;
        for hash in hashes {
            let found = statement
                .query_map(params![hash, visibility.map(Visibility::as_str)], |row| Ok((row.get(0)?, row.get(1)?)))?;
            for row in found {
                rows.push(row?);
            }
        }
        let mut grouped: HashMap<String, Vec<i64>> = HashMap::new();
        for (hash, id) in rows {
            grouped.entry(hash).or_default().push(id);
        }
        for ids in grouped.values_mut() {
            ids.sort_unstable();
        }
        Ok(grouped)
    }

    /// Every mention of `entity_ids` in a fragment `visibility` allows: which entity, which
    /// fragment, how often, the fragment's length and session. Unordered: the entity path ranks.
    pub fn entity_mentions(
        &self,
        entity_ids: &[i64],
        visibility: Option<Visibility>,
    ) -> Result<Vec<EntityMention>, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT m.entity_id, f.id, m.n_mentions, f.word_count, f.session
             FROM entity_mentions m JOIN fragments f ON f.id = m.fragment_id
             WHERE m.entity_id = ?1 AND (?2 IS NULL OR f.visibility = ?2)",
        )?;
        let mut mentions = Vec::new();
        for entity_id in entity_ids {
            let rows = statement.query_map(params![entity_id, visibility.map(Visibility::as_str)], |row| {
                Ok(EntityMention {
                    entity_id: row.get(0)?,
                    fragment_id: row.get(1)?,
                    n_mentions: row.get(2)?,
                    word_count: row.get(3)?,
                    session: row.get::<_, Option<u32>>(4)?.map(SessionNumber),
                })
            })?;
            for row in rows {
                mentions.push(row?);
            }
        }
        Ok(mentions)
    }

    /// How many distinct sessions hold a fragment `visibility` allows: the denominator of an
    /// entity's session share.
    pub fn n_sessions(&self, visibility: Option<Visibility>) -> Result<usize, IndexError> {
        let n: i64 = self.connection.query_row(
            "SELECT COUNT(DISTINCT session) FROM fragments WHERE session IS NOT NULL AND (?1 IS NULL OR visibility = ?1)",
            params![visibility.map(Visibility::as_str)],
            |row| row.get(0),
        )?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// What retrieval shows of a fragment without its text, in the order of `ids`
    /// (ids that no longer exist are skipped).
    pub fn fragment_heads(&self, ids: &[i64]) -> Result<Vec<FragmentHead>, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT id, label, kind, source_path, session, part, visibility, content_hash FROM fragments WHERE id = ?1",
        )?;
        let mut heads = Vec::with_capacity(ids.len());
        for id in ids {
            let found = statement
                .query_row([id], |row| {
                    let kind: String = row.get(2)?;
                    let visibility: String = row.get(6)?;
                    Ok(FragmentHead {
                        id: row.get(0)?,
                        label: row.get(1)?,
                        kind: NoteKind::parse(&kind).unwrap_or(NoteKind::World),
                        source_path: row.get(3)?,
                        session: row.get::<_, Option<u32>>(4)?.map(SessionNumber),
                        part: row.get(5)?,
                        visibility: Visibility::parse(&visibility).unwrap_or(Visibility::DmOnly),
                        content_hash: row.get(7)?,
                    })
                })
                .optional()?;
            heads.extend(found);
        }
        Ok(heads)
    }

    /// The fragments `wanted` names, each only while it still holds the text that was
    /// searched (`(id, content_hash)`) and `visibility` allows it, in the order asked.
    /// One query. Anything fetched by id for a reader goes through here: an id found by one
    /// search must never hand over text the search did not see.
    pub fn fragments_checked(
        &self,
        wanted: &[(i64, &str)],
        visibility: Option<Visibility>,
    ) -> Result<Vec<StoredFragment>, IndexError> {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let wanted_json = serde_json::Value::Array(
            wanted.iter().map(|(id, hash)| serde_json::json!({ "id": id, "hash": hash })).collect(),
        )
        .to_string();
        let mut statement = self.connection.prepare_cached(
            "SELECT f.id, f.label, f.kind, f.source_path, f.session, f.part, f.heading_path, f.text, f.word_count,
                    f.line_start, f.line_end, f.visibility, f.content_hash
             FROM json_each(?1) AS w
             JOIN fragments f ON f.id = json_extract(w.value, '$.id')
                             AND f.content_hash = json_extract(w.value, '$.hash')
             WHERE ?2 IS NULL OR f.visibility = ?2
             ORDER BY w.key",
        )?;
        let rows = statement.query_map(params![wanted_json, visibility.map(Visibility::as_str)], read_fragment)?;
        let mut checked: Vec<StoredFragment> = Vec::with_capacity(wanted.len());
        for row in rows {
            let stored = row?;
            // Belt and braces: the query's filter, restated where a reader can see it.
            let allowed = visibility.is_none_or(|visibility| stored.fragment.visibility == visibility);
            if allowed && !checked.iter().any(|seen| seen.id == stored.id) {
                checked.push(stored);
            }
        }
        Ok(checked)
    }

    /// The stored compendium, entities in store order, with each entity's store id.
    pub fn load_compendium(&self) -> Result<(Compendium, Vec<i64>), IndexError> {
        let mut statement = self
            .connection
            .prepare("SELECT id, name, kind, description, sources, note_path FROM entities ORDER BY id")?;
        let rows = statement.query_map([], |row| {
            let kind: String = row.get(2)?;
            let sources: String = row.get(4)?;
            Ok((
                row.get::<_, i64>(0)?,
                Entity {
                    name: row.get(1)?,
                    kind: EntityKind::parse(&kind).unwrap_or(EntityKind::Other),
                    aliases: Vec::new(),
                    description: row.get(3)?,
                    sources: serde_json::from_str::<Vec<String>>(&sources)
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|s| EntitySource::parse(s))
                        .collect(),
                    note_path: row.get(5)?,
                },
            ))
        })?;
        let (ids, mut entities): (Vec<i64>, Vec<Entity>) =
            rows.collect::<rusqlite::Result<Vec<_>>>()?.into_iter().unzip();
        let position: HashMap<i64, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let mut aliases = self.connection.prepare("SELECT entity_id, alias FROM entity_aliases ORDER BY rowid")?;
        let rows = aliases.query_map([], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)))?;
        for row in rows {
            let (entity_id, alias) = row?;
            if let Some(entity) = position.get(&entity_id).and_then(|&i| entities.get_mut(i))
                && alias != entity.name
            {
                entity.aliases.push(alias);
            }
        }
        Ok((Compendium { entities }, ids))
    }

    /// Every entity with its aliases and where it is mentioned (`visibility` filters the
    /// fragments counted).
    pub fn compendium_listing(&self, visibility: Option<Visibility>) -> Result<Vec<EntityListing>, IndexError> {
        let (compendium, ids) = self.load_compendium()?;
        let mut statement = self.connection.prepare_cached(
            "SELECT DISTINCT f.session, f.label FROM entity_mentions m JOIN fragments f ON f.id = m.fragment_id
             WHERE m.entity_id = ?1 AND (?2 IS NULL OR f.visibility = ?2) ORDER BY f.session, f.label",
        )?;
        let mut listings = Vec::with_capacity(ids.len());
        for (entity, id) in compendium.entities.into_iter().zip(ids) {
            let mut sessions = Vec::new();
            let mut other_labels = Vec::new();
            let rows = statement.query_map(params![id, visibility.map(Visibility::as_str)], |row| {
                Ok((row.get::<_, Option<u32>>(0)?, row.get::<_, String>(1)?))
            })?;
            for row in rows {
                match row? {
                    (Some(session), _) => {
                        if sessions.last() != Some(&SessionNumber(session)) {
                            sessions.push(SessionNumber(session));
                        }
                    }
                    (None, label) => other_labels.push(label),
                }
            }
            listings.push(EntityListing {
                name: entity.name,
                kind: entity.kind,
                aliases: entity.aliases,
                description: entity.description,
                note_path: entity.note_path,
                sessions,
                other_labels,
            });
        }
        listings.sort_by_cached_key(|listing| fold(&listing.name));
        Ok(listings)
    }

    /// Whether an ingest has written a compendium with `version`'s rules.
    pub fn compendium_version(&self) -> Result<Option<String>, IndexError> {
        self.meta(META_COMPENDIUM_VERSION)
    }

    /// Cached annotations of `hashes` by `model` under `prompt_version` (for the extractive
    /// ones, [`EXTRACTIVE_ANNOTATOR`] and [`EXTRACTIVE_ANNOTATION_VERSION`]): hash → text.
    pub fn annotations(
        &self,
        hashes: &[&str],
        model: &str,
        prompt_version: &str,
    ) -> Result<HashMap<String, String>, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT text FROM annotations WHERE content_hash = ?1 AND model = ?2 AND prompt_version = ?3",
        )?;
        let mut found = HashMap::new();
        for hash in hashes {
            if let Some(text) =
                statement.query_row(params![hash, model, prompt_version], |row| row.get::<_, String>(0)).optional()?
            {
                found.insert(hash.to_string(), text);
            }
        }
        Ok(found)
    }

    /// Stores one annotation (committed at once: an interrupted annotation run keeps its work).
    pub fn put_annotation(&self, hash: &str, model: &str, prompt_version: &str, text: &str) -> Result<(), IndexError> {
        self.connection.execute(
            "INSERT INTO annotations (content_hash, model, prompt_version, text) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (content_hash, model, prompt_version) DO UPDATE SET text = excluded.text",
            params![hash, model, prompt_version, text],
        )?;
        Ok(())
    }

    /// Stores many annotations by `model` under `prompt_version` in one transaction.
    pub fn put_annotations(
        &mut self,
        annotations: &[(String, String)],
        model: &str,
        prompt_version: &str,
    ) -> Result<(), IndexError> {
        let transaction = self.connection.transaction()?;
        {
            let mut statement = transaction.prepare_cached(
                "INSERT INTO annotations (content_hash, model, prompt_version, text) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (content_hash, model, prompt_version) DO UPDATE SET text = excluded.text",
            )?;
            for (hash, text) in annotations {
                statement.execute(params![hash, model, prompt_version, text])?;
            }
        }
        transaction.commit()?;
        Ok(())
    }

    /// One fragment per content hash that has no annotation by `model` under `prompt_version`,
    /// in source order.
    pub fn fragments_missing_annotation(
        &self,
        model: &str,
        prompt_version: &str,
    ) -> Result<Vec<StoredFragment>, IndexError> {
        let mut statement = self.connection.prepare(
            "SELECT id, label, kind, source_path, session, part, heading_path, text, word_count,
                    line_start, line_end, visibility, content_hash
             FROM fragments f
             WHERE NOT EXISTS (SELECT 1 FROM annotations a WHERE a.content_hash = f.content_hash
                               AND a.model = ?1 AND a.prompt_version = ?2)
               AND f.id = (SELECT MIN(g.id) FROM fragments g WHERE g.content_hash = f.content_hash)
             ORDER BY source_path, line_start, part",
        )?;
        let rows = statement.query_map(params![model, prompt_version], read_fragment)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The latest cached output under `prompt_version` for each of `hashes`, whichever model
    /// wrote it (entity extractions outlive a change of chat model).
    pub fn cached_outputs_any_model(&self, hashes: &[&str], prompt_version: &str) -> Result<Vec<String>, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT text FROM annotations WHERE content_hash = ?1 AND prompt_version = ?2 ORDER BY rowid DESC LIMIT 1",
        )?;
        let mut found = Vec::new();
        for hash in hashes {
            if let Some(text) =
                statement.query_row(params![hash, prompt_version], |row| row.get::<_, String>(0)).optional()?
            {
                found.push(text);
            }
        }
        Ok(found)
    }

    /// Raw access for the stages built on this store (retrieval, compendium).
    pub fn connection(&self) -> &Connection {
        &self.connection
    }
}

/// A fragment's BM25 passages ([`BM25_WINDOW_WORDS`] every [`BM25_WINDOW_STEP`]).
fn insert_windows(connection: &Connection, fragment_id: i64, text: &str) -> rusqlite::Result<()> {
    let mut insert =
        connection.prepare_cached("INSERT INTO fragment_windows (fragment_id, window, text) VALUES (?1, ?2, ?3)")?;
    for (window, passage) in
        crate::corpus::text::word_windows(text, BM25_WINDOW_WORDS, BM25_WINDOW_STEP).iter().enumerate()
    {
        insert.execute(params![fragment_id, window as i64, passage])?;
    }
    Ok(())
}

fn insert_file(transaction: &Transaction<'_>, file: &FileRecord) -> rusqlite::Result<()> {
    transaction.execute(
        "INSERT INTO files (path, content_hash, kind, title, aliases, tags, fingerprint, n_bytes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            file.path,
            file.content_hash,
            file.kind.as_str(),
            file.title,
            serde_json::to_string(&file.aliases).unwrap_or_else(|_| "[]".into()),
            serde_json::to_string(&file.tags).unwrap_or_else(|_| "[]".into()),
            file.fingerprint(),
            file.n_bytes as i64,
        ],
    )?;
    let mut insert_fragment = transaction.prepare_cached(
        "INSERT INTO fragments (label, kind, source_path, session, part, heading_path, text, word_count,
                                line_start, line_end, visibility, content_hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    for fragment in &file.fragments {
        let fragment_id = insert_fragment.insert(params![
            fragment.label,
            fragment.kind.as_str(),
            file.path,
            fragment.session.map(|s| s.0),
            fragment.part,
            serde_json::to_string(&fragment.heading_path).unwrap_or_else(|_| "[]".into()),
            fragment.text,
            fragment.word_count as i64,
            fragment.line_start,
            fragment.line_end,
            fragment.visibility.as_str(),
            fragment.content_hash,
        ])?;
        insert_windows(transaction, fragment_id, &fragment.text)?;
    }
    let mut insert_link =
        transaction.prepare_cached("INSERT INTO links (source_path, target, shown, embed) VALUES (?1, ?2, ?3, ?4)")?;
    for link in &file.links {
        insert_link.execute(params![file.path, link.target, link.shown, link.embed])?;
    }
    Ok(())
}

fn write_compendium(transaction: &Transaction<'_>, records: &CompendiumRecords) -> rusqlite::Result<()> {
    // Cascades to aliases and mentions.
    transaction.execute("DELETE FROM entities", [])?;
    let mut insert_entity = transaction.prepare_cached(
        "INSERT INTO entities (name, kind, description, sources, note_path) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut insert_alias =
        transaction.prepare_cached("INSERT INTO entity_aliases (entity_id, alias, folded) VALUES (?1, ?2, ?3)")?;
    let mut ids = Vec::with_capacity(records.compendium.entities.len());
    for entity in &records.compendium.entities {
        let sources: Vec<&str> = entity.sources.iter().map(|s| s.as_str()).collect();
        insert_entity.execute(params![
            entity.name,
            entity.kind.as_str(),
            entity.description,
            serde_json::to_string(&sources).unwrap_or_else(|_| "[]".into()),
            entity.note_path,
        ])?;
        let id = transaction.last_insert_rowid();
        ids.push(id);
        for alias in std::iter::once(&entity.name).chain(entity.aliases.iter()) {
            insert_alias.execute(params![id, alias, fold(alias)])?;
        }
    }
    let mut fragment_id = transaction.prepare_cached("SELECT id FROM fragments WHERE label = ?1 AND part = ?2")?;
    let mut insert_mention = transaction.prepare_cached(
        "INSERT INTO entity_mentions (entity_id, fragment_id, n_mentions) VALUES (?1, ?2, ?3)
         ON CONFLICT (entity_id, fragment_id) DO UPDATE SET n_mentions = n_mentions + excluded.n_mentions",
    )?;
    for mention in &records.mentions {
        let (Some(&entity_id), Some(id)) = (
            ids.get(mention.entity),
            fragment_id.query_row(params![mention.label, mention.part], |row| row.get::<_, i64>(0)).optional()?,
        ) else {
            continue;
        };
        insert_mention.execute(params![entity_id, id, mention.count])?;
    }
    Ok(())
}

fn read_fragment(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredFragment> {
    let kind: String = row.get(2)?;
    let heading_path: String = row.get(6)?;
    let visibility: String = row.get(11)?;
    Ok(StoredFragment {
        id: row.get(0)?,
        fragment: Fragment {
            label: row.get(1)?,
            kind: NoteKind::parse(&kind).unwrap_or(NoteKind::World),
            source_path: row.get(3)?,
            session: row.get::<_, Option<u32>>(4)?.map(SessionNumber),
            part: row.get(5)?,
            heading_path: serde_json::from_str(&heading_path).unwrap_or_default(),
            text: row.get(7)?,
            word_count: row.get::<_, i64>(8)? as usize,
            line_start: row.get(9)?,
            line_end: row.get(10)?,
            // Unknown values read as DM-only: fail closed, never leak.
            visibility: Visibility::parse(&visibility).unwrap_or(Visibility::DmOnly),
            content_hash: row.get(12)?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::content_hash;

    /// One file `s.md` whose fragments are `(label, text, visibility)`.
    fn file(fragments: &[(&str, &str, Visibility)]) -> FileRecord {
        let fragments = fragments
            .iter()
            .map(|&(label, text, visibility)| Fragment {
                label: label.to_string(),
                kind: NoteKind::Session,
                source_path: "s.md".to_string(),
                session: None,
                part: 0,
                heading_path: Vec::new(),
                text: text.to_string(),
                word_count: text.split_whitespace().count(),
                line_start: 1,
                line_end: 1,
                visibility,
                content_hash: content_hash(visibility, text),
            })
            .collect();
        FileRecord {
            path: "s.md".to_string(),
            content_hash: content_hash(Visibility::Player, "file"),
            kind: NoteKind::Session,
            title: "s".to_string(),
            aliases: Vec::new(),
            tags: Vec::new(),
            n_bytes: 1,
            fragments,
            links: Vec::new(),
        }
    }

    fn ingest(store: &mut Store, record: FileRecord) {
        store.apply_ingest(&IngestChanges { upserts: vec![record], ..IngestChanges::default() }).unwrap();
    }

    /// Ingests `before`, searches it as a player (ids and hashes), checks the checked fetch
    /// hands all of that back, re-ingests the file as `after`, and checks that no id came back
    /// and that the earlier search now fetches nothing.
    fn check(before: &[(&str, &str, Visibility)], after: &[(&str, &str, Visibility)]) {
        let dir = tempfile::TempDir::new().unwrap();
        let mut store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        ingest(&mut store, file(before));
        let searched: Vec<(i64, String)> = store
            .fragments(Some(Visibility::Player))
            .unwrap()
            .into_iter()
            .map(|stored| (stored.id, stored.fragment.content_hash))
            .collect();
        let wanted: Vec<(i64, &str)> = searched.iter().map(|(id, hash)| (*id, hash.as_str())).collect();
        assert_eq!(store.fragments_checked(&wanted, Some(Visibility::Player)).unwrap().len(), wanted.len());
        let old_ids: Vec<i64> = store.fragments(None).unwrap().iter().map(|stored| stored.id).collect();
        ingest(&mut store, file(after));
        let new_ids: Vec<i64> = store.fragments(None).unwrap().iter().map(|stored| stored.id).collect();
        assert!(new_ids.iter().all(|id| !old_ids.contains(id)), "ids reused: {old_ids:?} → {new_ids:?}");
        let shown: Vec<String> = store
            .fragments_checked(&wanted, Some(Visibility::Player))
            .unwrap()
            .into_iter()
            .map(|stored| format!("{}: {}", stored.fragment.label, stored.fragment.text))
            .collect();
        assert!(shown.is_empty(), "{shown:?}");
    }

    const PLAYER: Visibility = Visibility::Player;
    const GM: Visibility = Visibility::DmOnly;

    #[test]
    fn a_source_is_read_by_label_in_part_order_within_the_audience() {
        let dir = tempfile::TempDir::new().unwrap();
        let mut store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        let mut record = file(&[
            ("Sesión 3", "la segunda parte", PLAYER),
            ("Sesión 3", "el secreto", GM),
            ("Sesión 3", "la primera parte", PLAYER),
            ("Sesión 4", "otra sesión", PLAYER),
        ]);
        for (fragment, part) in record.fragments.iter_mut().zip([1, 2, 0, 0]) {
            fragment.part = part;
        }
        ingest(&mut store, record);
        let texts = |visibility| -> Vec<String> {
            store.fragments_of_label("Sesión 3", visibility).unwrap().into_iter().map(|f| f.fragment.text).collect()
        };
        assert_eq!(texts(Some(PLAYER)), ["la primera parte", "la segunda parte"]);
        assert_eq!(texts(None), ["la primera parte", "la segunda parte", "el secreto"]);
    }

    #[test]
    fn a_word_only_a_secret_holds_is_absent_for_a_player() {
        // The BM25 path weighs its list by the question's words the notes hold: a word only a
        // GM-only note holds must not count for a player (it would tell them it exists).
        let dir = tempfile::TempDir::new().unwrap();
        let mut store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        ingest(&mut store, file(&[("Sesión 1", "el puerto de Galerna", PLAYER), ("Sesión 2", "el traidor Ardo", GM)]));
        let has = |term: &str, visibility| store.fts_has_term(&format!("\"{term}\""), visibility).unwrap();
        assert!(has("galerna", Some(PLAYER)) && has("galerna", None));
        assert!(!has("traidor", Some(PLAYER)), "a secret word counted for a player");
        assert!(has("traidor", Some(GM)) && has("traidor", None));
        assert!(!has("dragon", None));
    }

    #[test]
    fn ids_are_never_reused_and_fetches_recheck_what_was_searched() {
        // The same label now holds a GM-only part.
        check(&[("Sesión 1", "uno", PLAYER)], &[("Sesión 1", "el traidor", GM)]);
        // The last id deleted (the one a plain rowid hands out again) comes back with GM text.
        check(
            &[("Sesión 1", "uno", PLAYER), ("Sesión 2", "dos", PLAYER)],
            &[("Sesión 1", "uno", PLAYER), ("Sesión 3", "el traidor", GM)],
        );
        // Same text, now secret: same words, other hash.
        check(&[("Sesión 1", "uno", PLAYER)], &[("Sesión 1", "uno", GM)]);
    }

    #[test]
    fn a_row_changed_under_a_kept_id_is_dropped() {
        let dir = tempfile::TempDir::new().unwrap();
        let mut store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        ingest(&mut store, file(&[("Sesión 1", "uno", PLAYER), ("Sesión 2", "dos", PLAYER)]));
        let stored = store.fragments(None).unwrap();
        let wanted: Vec<(i64, &str)> =
            stored.iter().map(|stored| (stored.id, stored.fragment.content_hash.as_str())).collect();
        // Whatever writes rows in the future: same id, other visibility; same id, other text.
        store.connection.execute("UPDATE fragments SET visibility = 'dm_only' WHERE id = ?1", [wanted[0].0]).unwrap();
        store.connection.execute("UPDATE fragments SET text = 'el traidor' WHERE id = ?1", [wanted[1].0]).unwrap();
        store.connection.execute("UPDATE fragments SET content_hash = 'x' WHERE id = ?1", [wanted[1].0]).unwrap();
        assert!(store.fragments_checked(&wanted, Some(Visibility::Player)).unwrap().is_empty());
        let gm: Vec<i64> =
            store.fragments_checked(&wanted, None).unwrap().into_iter().map(|stored| stored.id).collect();
        assert_eq!(gm, [wanted[0].0], "a GM still reads the row whose hash matches");
    }
}
