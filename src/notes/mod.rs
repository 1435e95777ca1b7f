//! The campaign's notes as a reader reads them: the index, the compendium as an audience may
//! read it, the sources, the search and its passages. Read-only and cheap to clone: what the
//! oracle answers from, and all that MCP's search tools, `/fuente`, the bot's autocomplete,
//! `oraculo search` and the timeline hold.
//!
//! Nothing here asks a chat model: [`crate::oracle`] is the half that answers.

mod found;
mod story;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crate::corpus::FragmentId;
use crate::index::store::{EntityListing, SourceSummary};
use crate::index::{Index, IndexError, StoredFragment};
use crate::llm::{Embedder, LlmError};
use crate::retrieve::{
    Audience, Candidate, CompendiumIndex, DEFAULT_K, PathSet, RetrieveError, SearchRequest, SearchResult, Turn,
};

pub use found::{FoundPassage, GLIMPSE_WORDS, PASSAGE_WORDS};
pub use story::ArcStory;

/// A question longer than this is refused: it is a paste, not a question, and it would
/// crowd the notes out of the context window.
pub const MAX_QUESTION_CHARS: usize = 1000;
/// Opened indexes kept between questions (the bot answers at memory speed, not re-opening
/// SQLite and LanceDB per question): one per question answered at once, which the bot's
/// `concurrency` bounds; more are opened on demand and closed when returned.
const OPEN_INDEXES_KEPT: usize = 4;

/// One question.
#[derive(Debug, Clone)]
pub struct AskRequest<'a> {
    pub question: &'a str,
    /// Earlier turns of this conversation (one Discord channel or thread, one CLI chat).
    pub history: &'a [Turn],
    pub audience: Audience,
}

/// What can stop an answer. Each reads as a message a player can act on; details go to logs.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("the question is empty")]
    EmptyQuestion,
    #[error("the question is too long ({chars} characters; at most {max})")]
    QuestionTooLong { chars: usize, max: usize },
    #[error("the campaign has not been indexed yet: the DM must run an ingest first")]
    NotBuilt,
    #[error("the index cannot be read: {0}")]
    Index(#[from] IndexError),
    #[error("searching the notes failed: {0}")]
    Retrieve(#[from] RetrieveError),
    #[error("the language model failed: {0}")]
    Llm(#[from] LlmError),
}

/// One campaign's notes, read through its index with its embedder. Clones share the open
/// indexes and the compendium matchers.
#[derive(Clone)]
pub struct Notes {
    shared: Arc<Shared>,
    /// Fragments shown in full: the search reads its paths this deep
    /// ([`crate::retrieve::path_depth`]), and `search_passages` gives these the longer passage.
    k: usize,
}

/// A compendium matcher and the index generation it was built from.
type BuiltCompendium = (String, Arc<CompendiumIndex>);

/// What every clone of one campaign's [`Notes`] reads and keeps.
struct Shared {
    index_dir: PathBuf,
    embedder: Arc<dyn Embedder>,
    /// The compendium matcher of the index generation it was built from (built once
    /// per ingest, not once per question); rebuilt when an ingest commits a new generation.
    /// Per audience (players first, the GM second): the generation it was built from.
    compendium: Mutex<[Option<BuiltCompendium>; 2]>,
    /// Indexes opened for earlier questions, lent to the next ones ([`IndexLease`]). An ingest
    /// writes in place, in transactions, so an open index reads each committed generation.
    open_indexes: Mutex<Vec<Index>>,
}

/// An open index lent by [`Notes`] for one question; returned to it when dropped.
pub struct IndexLease<'a> {
    index: Option<Index>,
    pool: &'a Mutex<Vec<Index>>,
}

impl std::ops::Deref for IndexLease<'_> {
    type Target = Index;

    fn deref(&self) -> &Index {
        self.index.as_ref().expect("an index lease holds its index until dropped")
    }
}

impl Drop for IndexLease<'_> {
    fn drop(&mut self) {
        if let Some(index) = self.index.take() {
            let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
            if pool.len() < OPEN_INDEXES_KEPT {
                pool.push(index);
            }
        }
    }
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notes")
            .field("index_dir", &self.shared.index_dir)
            .field("embedder", &self.shared.embedder.id())
            .field("k", &self.k)
            .finish()
    }
}

impl Notes {
    /// The notes indexed in `index_dir`, searched with `embedder` (the one that built the
    /// index), [`DEFAULT_K`] fragments shown in full.
    pub fn new(index_dir: &Path, embedder: Arc<dyn Embedder>) -> Notes {
        Notes {
            shared: Arc::new(Shared {
                index_dir: index_dir.to_path_buf(),
                // An answer embeds its question's story and quotable sentences, and the next
                // question about the same entity embeds them again: remembered, not remade.
                embedder: Arc::new(crate::llm::embed::remembered::Remembered::new(embedder)),
                compendium: Mutex::new([None, None]),
                open_indexes: Mutex::new(Vec::new()),
            }),
            k: DEFAULT_K,
        }
    }

    /// The same notes with `k` fragments shown in full (at least one).
    pub fn with_k(&self, k: usize) -> Notes {
        Notes { shared: Arc::clone(&self.shared), k: k.max(1) }
    }

    /// Fragments shown in full.
    pub fn k(&self) -> usize {
        self.k
    }

    pub fn index_dir(&self) -> &Path {
        &self.shared.index_dir
    }

    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.shared.embedder
    }

    /// The campaign's index, open: one kept from an earlier question, or opened now. It reads
    /// the index as it is now (a reingest that commits later is seen by the next read).
    pub async fn open_index(&self) -> Result<IndexLease<'_>, AskError> {
        let pool = &self.shared.open_indexes;
        let kept = pool.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let index = match kept {
            // Kept, but the index folder is gone (deleted by hand): open afresh, which says so.
            Some(index) if index.dir().join("index.sqlite").is_file() => index,
            _ => match Index::open_existing(&self.shared.index_dir).await {
                Err(IndexError::NotBuilt { .. }) => return Err(AskError::NotBuilt),
                other => other?,
            },
        };
        Ok(IndexLease { index: Some(index), pool })
    }

    /// Every source the audience may read, sessions first by number (the bot's label
    /// autocomplete).
    pub async fn sources(&self, audience: Audience) -> Result<Vec<SourceSummary>, AskError> {
        let index = self.open_index().await?;
        // The visibility filter is in the query: a label with nothing the audience may read is
        // not listed (a secret note's label may name the secret).
        Ok(index.store.sources_visible(audience.visibility_filter())?)
    }

    /// Up to `limit` compendium names that match what was typed (the bot's entity
    /// autocomplete), as `audience` may read them.
    pub async fn entity_names_matching(
        &self,
        typed: &str,
        limit: usize,
        audience: Audience,
    ) -> Result<Vec<String>, AskError> {
        let index = self.open_index().await?;
        let compendium = self.compendium(&index, audience)?;
        Ok(compendium.names_matching(typed, limit))
    }

    /// The compendium matcher of `index`'s current generation as `audience` may read it
    /// (players: no GM-only entity or alias): loaded and compiled once per committed ingest and
    /// audience, then shared by every question until the next one.
    pub fn compendium(&self, index: &Index, audience: Audience) -> Result<Arc<CompendiumIndex>, AskError> {
        let generation = index.store.meta(crate::index::store::META_GENERATION)?.unwrap_or_default();
        let slot = match audience {
            Audience::Player => 0,
            Audience::Gm => 1,
        };
        let mut cached = self.shared.compendium.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((built_from, compendium)) = cached[slot].as_ref()
            && *built_from == generation
        {
            return Ok(Arc::clone(compendium));
        }
        let started = Instant::now();
        let compendium = Arc::new(CompendiumIndex::load(&index.store, audience)?);
        tracing::debug!(%generation, ?audience, ms = started.elapsed().as_secs_f64() * 1000.0, "compendium matcher built");
        cached[slot] = Some((generation, Arc::clone(&compendium)));
        Ok(compendium)
    }

    /// The search alone (three paths + fusion, the time path), with an open index and the
    /// compendium: what `search` shows and what a warm bot does before the rerank.
    pub async fn search(&self, request: &AskRequest<'_>) -> Result<SearchResult, AskError> {
        let question = check_question(request.question)?;
        let index = self.open_index().await?;
        let compendium = self.compendium(&index, request.audience)?;
        self.search_in(&index, &compendium, question, request, PathSet::ALL).await
    }

    /// The search of a checked `question` in `index`, with the request's history and audience,
    /// over `paths`, its paths read as deep as `k` needs.
    pub async fn search_in(
        &self,
        index: &Index,
        compendium: &CompendiumIndex,
        question: &str,
        request: &AskRequest<'_>,
        paths: PathSet,
    ) -> Result<SearchResult, AskError> {
        let search_request =
            SearchRequest { question, history: request.history, audience: request.audience, k: self.k, paths };
        Ok(crate::retrieve::search(index, compendium, self.embedder().as_ref(), &search_request).await?)
    }

    /// Every fragment of `label` the audience may read, in part order (for "show me the source").
    pub async fn read_source(&self, label: &str, audience: Audience) -> Result<Vec<StoredFragment>, AskError> {
        let index = self.open_index().await?;
        Ok(index.store.fragments_of_label(label, audience.visibility_filter())?)
    }

    /// The compendium as `audience` may read it: each entity with its aliases and the
    /// sessions and other notes that mention it (players: no GM-only entity, alias or
    /// mention). What `oraculo compendium` lists.
    pub async fn compendium_listing(&self, audience: Audience) -> Result<Vec<EntityListing>, AskError> {
        let index = self.open_index().await?;
        Ok(index.store.compendium_listing(audience.visibility_filter())?)
    }
}

/// The stored fragments of `candidates` by id, each only while it still holds the text that
/// was searched (its content hash) and `audience` may see it.
pub fn checked_texts(
    index: &Index,
    candidates: &[Candidate],
    audience: Audience,
) -> Result<HashMap<FragmentId, StoredFragment>, IndexError> {
    let wanted: Vec<(FragmentId, &str)> = candidates.iter().map(|c| (c.fragment_id, c.content_hash.as_str())).collect();
    Ok(index
        .store
        .fragments_checked(&wanted, audience.visibility_filter())?
        .into_iter()
        .map(|stored| (stored.id, stored))
        .collect())
}

/// The question, trimmed, when it can be asked at all: the one rule, which the bot also applies
/// before queueing. Each public entry checks once; what it calls takes the checked question.
pub fn check_question(question: &str) -> Result<&str, AskError> {
    let question = question.trim();
    if question.is_empty() {
        return Err(AskError::EmptyQuestion);
    }
    let chars = question.chars().count();
    if chars > MAX_QUESTION_CHARS {
        return Err(AskError::QuestionTooLong { chars, max: MAX_QUESTION_CHARS });
    }
    Ok(question)
}
