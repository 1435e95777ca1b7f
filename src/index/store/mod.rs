//! The SQLite file: schema migrations, fragments, FTS5, files, links, meta.
//!
//! Writes of one ingest happen in one transaction ([`Store::apply_ingest`]): a reader sees
//! the previous campaign or the new one, never a mix.

mod annotations;
mod compendium;
mod fragments;
mod shared;
mod write;

use write::insert_windows;

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use tracing::{debug, info_span};

use super::IndexError;
use crate::compendium::{Compendium, EntityKind};
use crate::corpus::{Diagnostic, Fragment, FragmentId, Label, Link, NoteKind, SessionNumber, Visibility};

pub use annotations::{EXTRACTIVE_ANNOTATION_VERSION, EXTRACTIVE_ANNOTATOR, ORPHANED_ANNOTATIONS_KEPT};
pub use shared::SharedStore;

/// The schema, in order. Each is applied once and recorded in `schema_migrations`.
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_index", include_str!("../../../migrations/0001_index.sql")),
    ("0002_room_for_retrieval", include_str!("../../../migrations/0002_room_for_retrieval.sql")),
    ("0003_fragment_ids_never_reused", include_str!("../../../migrations/0003_fragment_ids_never_reused.sql")),
    (
        "0004_conversation_turns_know_their_audience",
        include_str!("../../../migrations/0004_conversation_turns_know_their_audience.sql"),
    ),
    ("0005_bm25_over_passages", include_str!("../../../migrations/0005_bm25_over_passages.sql")),
    ("0006_compendium_knows_its_audience", include_str!("../../../migrations/0006_compendium_knows_its_audience.sql")),
    ("0007_questions_survive_a_restart", include_str!("../../../migrations/0007_questions_survive_a_restart.sql")),
    ("0008_what_the_players_asked", include_str!("../../../migrations/0008_what_the_players_asked.sql")),
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

/// What a BM25 query scores ([`Store::match_fts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bm25Unit {
    /// A fragment's whole text, one document.
    Fragment,
    /// Its BM25 windows (`BM25_WINDOW_WORDS` words each): one row a window, several a fragment.
    Window,
}

/// What one file contributes to the index.
#[derive(Debug, Clone)]
pub struct FileRecord {
    /// Relative to the campaign folder, `/`-separated: the file's key in the index.
    pub path: String,
    /// sha256 of the file's bytes, as read.
    pub content_hash: String,
    pub kind: NoteKind,
    /// The note's title (front matter, first heading, else the file name).
    pub title: String,
    /// Other names from the front matter, for the compendium.
    pub aliases: Vec<String>,
    pub tags: Vec<String>,
    pub n_bytes: u64,
    /// What the file was cut into, labelled.
    pub fragments: Vec<Fragment>,
    /// Its wikilinks, as written.
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
    pub id: FragmentId,
    #[serde(flatten)]
    pub fragment: Fragment,
}

/// One entity's mentions in one fragment, with what the entity path ranks by.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityMention {
    pub entity_id: i64,
    pub fragment_id: FragmentId,
    pub n_mentions: i64,
    pub word_count: i64,
    pub session: Option<SessionNumber>,
}

/// A fragment without its text: what a candidate list needs.
#[derive(Debug, Clone)]
pub struct FragmentHead {
    pub id: FragmentId,
    pub label: Label,
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
    pub label: Label,
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
    pub label: Label,
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

/// A fragment's id is its row id in SQLite, read and bound as such.
impl rusqlite::ToSql for FragmentId {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(rusqlite::types::ToSqlOutput::from(self.0))
    }
}

impl rusqlite::types::FromSql for FragmentId {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<FragmentId> {
        i64::column_result(value).map(FragmentId)
    }
}

/// A label is stored as its text.
impl rusqlite::ToSql for Label {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        Ok(rusqlite::types::ToSqlOutput::from(self.as_str()))
    }
}

impl rusqlite::types::FromSql for Label {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Label> {
        String::column_result(value).map(Label::from)
    }
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
        // SQLite answers «busy» at once, without waiting out the busy timeout, where waiting
        // could deadlock: two openers of a fresh file switching it to WAL, or a reader's
        // transaction upgrading to write. The whole opening is tried again after a pause then.
        let mut attempt = 0;
        loop {
            match Store::open_once(path) {
                Err(error) if is_busy(&error) && attempt < OPEN_BUSY_RETRIES => {
                    attempt += 1;
                    std::thread::sleep(std::time::Duration::from_millis(20 * attempt as u64));
                }
                result => return result.map_err(sqlite),
            }
        }
    }

    fn open_once(path: &Path) -> rusqlite::Result<Store> {
        let connection = Connection::open(path)?;
        // The busy timeout first, so that switching to WAL waits for another opener too.
        // WAL: readers (the bot answering) never block on a reingest's writer.
        connection.execute_batch("PRAGMA busy_timeout = 5000; PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON;")?;
        let mut store = Store { connection };
        store.migrate()?;
        store.cut_missing_windows()?;
        Ok(store)
    }

    /// The BM25 passages of every fragment that has none: the fragments an index held before
    /// it had passages (new fragments get theirs as they are written). One transaction; none
    /// to cut is one query.
    fn cut_missing_windows(&mut self) -> rusqlite::Result<()> {
        let missing: Vec<(FragmentId, String)> = {
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
        let transaction = self.connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
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
            // Immediate: the write lock up front, waited for (busy timeout), so two processes
            // opening one store never deadlock upgrading a read; then asked again under it,
            // as the other may have applied this migration meanwhile.
            let transaction = self.connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let applied_now: i64 =
                transaction
                    .query_row("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", [], |row| row.get(0))?;
            if version <= applied_now {
                continue;
            }
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

    /// Every content hash a stored fragment has: the vectors that must exist.
    pub fn content_hashes(&self) -> Result<Vec<String>, IndexError> {
        let mut statement = self.connection.prepare("SELECT DISTINCT content_hash FROM fragments")?;
        let rows = statement.query_map([], |row| row.get(0))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Raw access for the stages built on this store (retrieval, compendium).
    pub fn connection(&self) -> &Connection {
        &self.connection
    }
}
/// How many times opening a store is tried again when SQLite answers «busy» without waiting
/// (20 ms, 40 ms… between tries: about 4 s in all, under the busy timeout's 5 s).
const OPEN_BUSY_RETRIES: usize = 20;

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(error.sqlite_error_code(), Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked))
}
