//! Conversation history per channel and per thread, kept in the index's SQLite file
//! (`conversation_turns`), so a restart keeps it.
//!
//! A conversation is one place: a channel (slash questions there share it), a thread (its
//! follow-ups), or a direct-message channel. Keys never collide across kinds, and nothing
//! reads one place's turns into another's. Each conversation keeps only its latest turns.
//!
//! The store is opened lazily, once the campaign's index exists: before the first ingest
//! there is no history to read, and opening would create an empty index that looks built.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::index::{IndexError, Store};
use crate::retrieve::{Turn, TurnRole};

/// Where a conversation happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Place {
    /// A guild channel (text or announcement): slash questions asked there.
    Channel(u64),
    /// A thread (its parent does not matter: a thread is its own conversation).
    Thread(u64),
    /// A direct-message channel with the bot.
    Direct(u64),
}

impl Place {
    /// The `conversation_turns.conversation` key.
    pub fn key(self) -> String {
        match self {
            Place::Channel(id) => format!("discord:channel:{id}"),
            Place::Thread(id) => format!("discord:thread:{id}"),
            Place::Direct(id) => format!("discord:dm:{id}"),
        }
    }
}

/// The history of every conversation the bot takes part in.
#[derive(Clone)]
pub struct History {
    inner: Arc<Inner>,
}

struct Inner {
    index_dir: PathBuf,
    /// Turns sent with a question.
    turns: usize,
    store: Mutex<Option<Store>>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").field("index_dir", &self.inner.index_dir).field("turns", &self.inner.turns).finish()
    }
}

impl History {
    /// History in the index at `index_dir`, sending `turns` turns with each question.
    pub fn new(index_dir: &Path, turns: usize) -> History {
        History { inner: Arc::new(Inner { index_dir: index_dir.to_path_buf(), turns, store: Mutex::new(None) }) }
    }

    /// Turns stored per conversation: what is sent, and at least one exchange, so that a
    /// thread the bot opened stays recognisable even with `history_turns = 0`.
    fn kept(&self) -> usize {
        self.inner.turns.max(2)
    }

    /// The latest turns of `place`, oldest first; empty when there are none or the store
    /// cannot be read (logged: a question without history is still answered).
    pub async fn recent(&self, place: Place) -> Vec<Turn> {
        let limit = self.inner.turns;
        if limit == 0 {
            return Vec::new();
        }
        let key = place.key();
        match self.with_store(move |store| store.conversation_turns(&key, limit)).await {
            Ok(turns) => turns.unwrap_or_default(),
            Err(err) => {
                tracing::warn!(error = %err, ?place, "conversation history unreadable: answering without it");
                Vec::new()
            }
        }
    }

    /// Records one exchange in `place`.
    pub async fn record(&self, place: Place, question: &str, answer: &str) {
        let turns = vec![
            Turn { role: TurnRole::User, content: question.to_string() },
            Turn { role: TurnRole::Assistant, content: answer.to_string() },
        ];
        self.append(place, turns).await;
    }

    /// Appends `turns` to `place` (a new thread starts with the exchange it was opened on).
    pub async fn append(&self, place: Place, turns: Vec<Turn>) {
        let key = place.key();
        let keep = self.kept();
        match self.with_store(move |store| store.append_conversation_turns(&key, &turns, keep)).await {
            Ok(Some(())) => {}
            Ok(None) => tracing::warn!(?place, "no index yet: the exchange is not kept in the history"),
            Err(err) => tracing::warn!(error = %err, ?place, "conversation history not written"),
        }
    }

    /// Whether `place` has history: a thread does exactly when the bot opened it.
    pub async fn knows(&self, place: Place) -> bool {
        let key = place.key();
        match self.with_store(move |store| store.has_conversation(&key)).await {
            Ok(known) => known.unwrap_or(false),
            Err(err) => {
                tracing::warn!(error = %err, ?place, "conversation history unreadable");
                false
            }
        }
    }

    /// Runs `work` on the store, on a blocking thread; `Ok(None)` while no index exists.
    async fn with_store<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Store) -> Result<T, IndexError> + Send + 'static,
    ) -> anyhow::Result<Option<T>> {
        let inner = Arc::clone(&self.inner);
        let joined = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<T>> {
            let mut guard = inner.store.lock().map_err(|_| anyhow::anyhow!("history store lock poisoned"))?;
            if guard.is_none() {
                let path = inner.index_dir.join("index.sqlite");
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
        .await;
        joined.map_err(|err| anyhow::anyhow!("history task failed: {err}"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn check(history: &History, place: Place, expected: &[&str]) {
        let turns = history.recent(place).await;
        let contents: Vec<&str> = turns.iter().map(|t| t.content.as_str()).collect();
        assert_eq!(contents, expected, "{place:?}");
    }

    #[tokio::test]
    async fn history_never_crosses_channels_or_threads() {
        let dir = tempfile::TempDir::new().unwrap();
        Store::open(&dir.path().join("index.sqlite")).unwrap();
        let history = History::new(dir.path(), 4);
        history.record(Place::Channel(1), "¿quién es Baika?", "Una contrabandista [Ficha: Baika].").await;
        history.record(Place::Thread(1), "¿y su barco?", "El Tuerto [Sesión 2].").await;
        history.record(Place::Channel(2), "¿dónde está el faro?", "En Puerto Galerna.").await;
        history.record(Place::Direct(1), "secreto", "GM only").await;
        assert!(history.knows(Place::Thread(1)).await);
        assert!(!history.knows(Place::Thread(2)).await);
        check(&history, Place::Channel(1), &["¿quién es Baika?", "Una contrabandista [Ficha: Baika]."]).await;
        check(&history, Place::Thread(1), &["¿y su barco?", "El Tuerto [Sesión 2]."]).await;
        check(&history, Place::Channel(2), &["¿dónde está el faro?", "En Puerto Galerna."]).await;
        check(&history, Place::Direct(1), &["secreto", "GM only"]).await;
        check(&history, Place::Thread(3), &[]).await;
        assert_ne!(Place::Channel(1).key(), Place::Thread(1).key());
    }

    #[tokio::test]
    async fn history_is_bounded_and_survives_a_restart() {
        let dir = tempfile::TempDir::new().unwrap();
        Store::open(&dir.path().join("index.sqlite")).unwrap();
        let history = History::new(dir.path(), 4);
        for i in 0..10 {
            history.record(Place::Thread(7), &format!("q{i}"), &format!("a{i}")).await;
        }
        let restarted = History::new(dir.path(), 4);
        let turns = restarted.recent(Place::Thread(7)).await;
        let contents: Vec<&str> = turns.iter().map(|t| t.content.as_str()).collect();
        assert_eq!(contents, ["q8", "a8", "q9", "a9"]);
        assert_eq!(turns[0].role, TurnRole::User);
    }

    #[tokio::test]
    async fn no_index_means_no_history_and_no_index_created() {
        let dir = tempfile::TempDir::new().unwrap();
        let history = History::new(dir.path(), 4);
        history.record(Place::Channel(1), "q", "a").await;
        assert!(history.recent(Place::Channel(1)).await.is_empty());
        assert!(!dir.path().join("index.sqlite").exists(), "the history must not create an index");
    }
}
