//! Index: where a campaign's fragments live between ingests.
//!
//! Two stores, one campaign folder under the data dir:
//! - `index.sqlite`: files, fragments, FTS5 (BM25), links, meta; schema from `migrations/`.
//! - `vectors/`: a LanceDB database with one table of window vectors per embedder.
//!
//! Architecture invariant: SQLite is the source of truth and is committed last. Vectors are
//! written first, keyed by content hash; a query reaches a vector only through a fragment that
//! SQLite has committed, so a crash between the two writes is invisible to readers, and the next
//! ingest reuses what was written and drops what is orphaned.

pub mod store;
pub mod vectors;

use std::fs::File;
use std::path::{Path, PathBuf};

pub use store::{
    Bm25Unit, CompendiumRecords, EntityListing, EntityMention, FileRecord, FragmentHead, IngestChanges, MentionRecord,
    SharedStore, SourceSummary, Store, StoredFragment,
};
pub use vectors::{VectorHit, VectorRow, VectorStore, vector_table_name};

/// What failed in the index. Each variant names the file or folder involved.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("sqlite index {path}: {source}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("sqlite: {0}")]
    Query(#[from] rusqlite::Error),
    #[error("vector table in {path}: {source}")]
    Lance {
        path: String,
        #[source]
        source: lancedb::Error,
    },
    #[error("vector table in {path}: {detail}")]
    Vectors { path: String, detail: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("another ingest of this campaign is running (lock {path}); wait for it to finish")]
    Busy { path: String },
    #[error("no index for this campaign yet at {path}: run `oraculo ingest` first")]
    NotBuilt { path: String },
    /// The thread that reads what is kept beside the index failed (`store::SharedStore`).
    #[error("{what}: {detail}")]
    Worker { what: &'static str, detail: String },
}

/// The index of one campaign: its SQLite store and its vector store.
#[derive(Debug)]
pub struct Index {
    pub store: Store,
    pub vectors: VectorStore,
    dir: PathBuf,
    /// The ingest lock this index was opened under ([`Index::open_for_ingest`]), held for
    /// its life.
    held: Option<IngestLock>,
}

/// Held while an ingest writes; a second ingest of the same campaign is refused, not queued.
/// `None` inside: the lock is the one the index itself holds.
#[derive(Debug)]
pub struct IngestLock {
    _file: Option<File>,
}

impl Index {
    /// Opens the index in `dir`, creating it (and its schema) when absent.
    pub async fn open(dir: &Path) -> Result<Index, IndexError> {
        create_private_dir(dir).map_err(|source| IndexError::Io { path: dir.display().to_string(), source })?;
        let store = Store::open(&dir.join("index.sqlite"))?;
        let vectors = VectorStore::open(&dir.join("vectors")).await?;
        Ok(Index { store, vectors, dir: dir.to_path_buf(), held: None })
    }

    /// Opens the index in `dir` for an ingest: the ingest lock first, then the store and its
    /// migrations, so that of two first ingests of a fresh data dir the second is told
    /// another ingest is running (`Busy`) instead of racing the first's migrations.
    pub async fn open_for_ingest(dir: &Path) -> Result<Index, IndexError> {
        create_private_dir(dir).map_err(|source| IndexError::Io { path: dir.display().to_string(), source })?;
        let lock = take_ingest_lock(dir)?;
        let mut index = Index::open(dir).await?;
        index.held = Some(lock);
        Ok(index)
    }

    /// Opens an index that an ingest has built; `NotBuilt` otherwise (never creates one).
    pub async fn open_existing(dir: &Path) -> Result<Index, IndexError> {
        if !dir.join("index.sqlite").is_file() {
            return Err(IndexError::NotBuilt { path: dir.display().to_string() });
        }
        Index::open(dir).await
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Takes the campaign's ingest lock, or `Busy` if another process holds it.
    /// An index opened with [`Index::open_for_ingest`] holds it already.
    pub fn lock_for_ingest(&self) -> Result<IngestLock, IndexError> {
        match self.held {
            Some(_) => Ok(IngestLock { _file: None }),
            None => take_ingest_lock(&self.dir),
        }
    }

    /// The live vector table's name, as the last complete ingest recorded it.
    pub fn vector_table(&self) -> Result<Option<String>, IndexError> {
        self.store.meta(store::META_VECTOR_TABLE)
    }
}

/// How long a held ingest lock is tried again before the ingest is told another runs, and
/// how often. A lock file's descriptor is copied into every child process forked while it is
/// open (closed again at the child's exec), so a process that runs commands beside its
/// ingests (the bot's watcher, the tests) can find the lock it just released still held for a
/// moment: the integration tests saw `Busy` between two ingests of one test. Another ingest
/// holds it for seconds, so a short wait still tells that apart.
const INGEST_LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);
const INGEST_LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(10);

/// Takes the ingest lock of the index in `dir`, or `Busy` if another holds it for longer than
/// [`INGEST_LOCK_PATIENCE`].
fn take_ingest_lock(dir: &Path) -> Result<IngestLock, IndexError> {
    let path = dir.join("ingest.lock");
    let io = |source| IndexError::Io { path: path.display().to_string(), source };
    let mut options = File::options();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, PRIVATE_FILE_MODE);
    let file = options.open(&path).map_err(io)?;
    make_private(&path, PRIVATE_FILE_MODE).map_err(io)?;
    let started = std::time::Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(IngestLock { _file: Some(file) }),
            Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < INGEST_LOCK_PATIENCE => {
                std::thread::sleep(INGEST_LOCK_RETRY);
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(IndexError::Busy { path: path.display().to_string() });
            }
            Err(std::fs::TryLockError::Error(source)) => return Err(io(source)),
        }
    }
}

/// An index holds the GM's secrets: its folders are its owner's alone (unix)…
const PRIVATE_DIR_MODE: u32 = 0o700;
/// …and so are its files.
const PRIVATE_FILE_MODE: u32 = 0o600;

/// Creates `dir` and its missing parents (the data dir, `campaigns/`) readable by their owner
/// only, and makes `dir` so if it already existed (an index from an older version).
pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    create_missing_dirs_private(dir)?;
    make_private(dir, PRIVATE_DIR_MODE)
}

/// Creates whichever of `dir` and its parents are missing readable by their owner only;
/// folders that exist keep their mode (a data dir may be one the user chose to share).
pub fn create_missing_dirs_private(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, PRIVATE_DIR_MODE);
    builder.create(dir)
}

/// Creates `path` if absent, empty and readable by its owner only, and makes it so if it
/// already existed; with SQLite's `-wal` and `-shm` beside it when they are there (SQLite gives
/// them the database file's mode when it creates them).
pub(crate) fn create_private_file(path: &Path) -> std::io::Result<()> {
    let mut options = File::options();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, PRIVATE_FILE_MODE);
    options.open(path)?;
    make_private(path, PRIVATE_FILE_MODE)?;
    for suffix in ["-wal", "-shm"] {
        let mut beside = path.as_os_str().to_owned();
        beside.push(suffix);
        let beside = PathBuf::from(beside);
        if beside.exists() {
            make_private(&beside, PRIVATE_FILE_MODE)?;
        }
    }
    Ok(())
}

#[cfg(unix)]
fn make_private(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn make_private(_path: &Path, _mode: u32) -> std::io::Result<()> {
    Ok(())
}

/// Where a campaign's index lives: `<data>/campaigns/<folder name>-<hash of its path>`.
/// Two campaigns with the same folder name in different places never share an index.
pub fn campaign_index_dir(data_dir: &Path, campaign_dir: &Path) -> PathBuf {
    use sha2::{Digest, Sha256};
    let absolute = std::fs::canonicalize(campaign_dir).unwrap_or_else(|_| campaign_dir.to_path_buf());
    let name: String = absolute
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| "campaign".into())
        .chars()
        .map(|c| if c.is_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .collect();
    let digest = hex::encode(Sha256::digest(absolute.to_string_lossy().as_bytes()));
    data_dir.join("campaigns").join(format!("{name}-{}", &digest[..10]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ingest_lock_released_within_the_patience_is_taken_and_one_held_on_is_busy() {
        let dir = tempfile::TempDir::new().unwrap();
        // Released a moment after (as a forked child's copy of the descriptor is, at its exec).
        let held = take_ingest_lock(dir.path()).unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(INGEST_LOCK_PATIENCE / 5);
            drop(held);
        });
        assert!(take_ingest_lock(dir.path()).is_ok(), "the lock let go of is taken");
        releaser.join().unwrap();
        // Held past the patience (another ingest): busy.
        let _held = take_ingest_lock(dir.path()).unwrap();
        let started = std::time::Instant::now();
        assert!(matches!(take_ingest_lock(dir.path()), Err(IndexError::Busy { .. })));
        assert!(started.elapsed() >= INGEST_LOCK_PATIENCE, "it waited before saying so");
    }
}
