//! The index's SQLite store for what is kept beside the index between ingests (a channel's
//! history, the questions players asked): opened on first use once an ingest has made it,
//! shared by every clone, used on a blocking thread.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::Store;
use crate::index::IndexError;

/// A campaign's store, opened lazily: before the first ingest there is none, and the bot
/// still answers (with nothing kept).
pub struct SharedStore {
    index_dir: PathBuf,
    /// What it keeps, for error messages («history», «kept questions»).
    what: &'static str,
    store: Mutex<Option<Store>>,
}

impl std::fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedStore").field("index_dir", &self.index_dir).field("what", &self.what).finish()
    }
}

impl SharedStore {
    /// The store of the index at `index_dir`, for keeping `what`.
    pub fn new(index_dir: &Path, what: &'static str) -> Arc<SharedStore> {
        Arc::new(SharedStore { index_dir: index_dir.to_path_buf(), what, store: Mutex::new(None) })
    }

    pub fn index_dir(&self) -> &Path {
        &self.index_dir
    }

    /// Runs `work` on the store, on a blocking thread; `Ok(None)` while no index exists.
    pub async fn with<T: Send + 'static>(
        self: &Arc<Self>,
        work: impl FnOnce(&Store) -> Result<T, IndexError> + Send + 'static,
    ) -> Result<Option<T>, IndexError> {
        let shared = Arc::clone(self);
        let worker = |detail: String| IndexError::Worker { what: self.what, detail };
        tokio::task::spawn_blocking(move || -> Result<Option<T>, IndexError> {
            let mut guard = shared.store.lock().map_err(|_| IndexError::Worker {
                what: shared.what,
                detail: "the store's lock was poisoned by a panic".to_string(),
            })?;
            if guard.is_none() {
                let path = shared.index_dir.join("index.sqlite");
                if !path.is_file() {
                    return Ok(None);
                }
                *guard = Some(Store::open(&path)?);
            }
            match guard.as_ref() {
                Some(store) => Ok(Some(work(store)?)),
                None => Ok(None),
            }
        })
        .await
        .map_err(|err| worker(err.to_string()))?
    }
}
