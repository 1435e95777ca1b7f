//! The search as a reader outside Oráculo reads it (`oraculo mcp`'s `search` tool): every
//! fragment of the fused pool, in the pool's order, with the passage of it that matters for
//! the question. The pool is [`Notes::search`]'s, unchanged; only the texts are added, read
//! through [`Store::fragments_checked`](crate::index::Store::fragments_checked) with the
//! asker's visibility, as the context is.

use std::collections::HashMap;

use serde::Serialize;

use crate::answer::passages::select_passages;
use crate::answer::terms::QueryTerms;
use crate::corpus::{FragmentId, Label, NoteKind, SessionNumber};
use crate::index::StoredFragment;
use crate::retrieve::{PathRanks, SearchResult};

use super::{AskError, AskRequest, Notes};

/// Words of passage for each of the first `k` fragments found (the ones an answer is written
/// from): about a fifth of a session, enough to answer from; the whole note is one read away.
pub const PASSAGE_WORDS: usize = 200;
/// Words for each fragment after the first `k`: enough to tell whether it is worth reading.
pub const GLIMPSE_WORDS: usize = 50;

/// One fragment the search found, with the passage of it that matters for the question.
#[derive(Debug, Clone, Serialize)]
pub struct FoundPassage {
    /// 1-based place in the fused pool.
    pub rank: usize,
    /// The label to cite (`Sesión 9`, `Ficha: Odo`).
    pub label: Label,
    pub kind: NoteKind,
    pub session: Option<SessionNumber>,
    /// The note's path in the campaign folder.
    pub source_path: String,
    /// 0-based part among the fragments of one label (a long note is several).
    pub part: u32,
    /// The fragment's paragraphs that matter for the question, under their headings, `(…)`
    /// where some were left out; the whole fragment when it is short.
    pub passage: String,
    /// Where each path ranked it, and the fused score: why it is where it is.
    pub ranks: PathRanks,
    pub rrf_score: f64,
}

impl Notes {
    /// [`Notes::search`], each candidate with its passage: the first `k` with up to
    /// [`PASSAGE_WORDS`] words, the rest with [`GLIMPSE_WORDS`]. A candidate whose text changed
    /// or left the asker's view since the search (a reingest in between) is left out.
    pub async fn search_passages(
        &self,
        request: &AskRequest<'_>,
    ) -> Result<(SearchResult, Vec<FoundPassage>), AskError> {
        let search = self.search(request).await?;
        let index = self.open_index().await?;
        let texts: HashMap<FragmentId, StoredFragment> =
            super::checked_texts(&index, &search.candidates, request.audience)?;
        let entity_names: Vec<&str> =
            search.entities.iter().flat_map(|entity| [entity.name.as_str(), entity.alias.as_str()]).collect();
        let terms = QueryTerms::new(request.question.trim(), &entity_names);
        let count_words = |text: &str| text.split_whitespace().count();
        let window_words = self.embedder().window_words();
        let found = search
            .candidates
            .iter()
            .filter_map(|candidate| {
                let stored = texts.get(&candidate.fragment_id)?;
                Some((candidate, stored))
            })
            .enumerate()
            .map(|(position, (candidate, stored))| {
                let budget = if position < self.k { PASSAGE_WORDS } else { GLIMPSE_WORDS };
                let dense_match = candidate
                    .dense_window
                    .map(|window| crate::corpus::windows::window_word_range(window, window_words));
                FoundPassage {
                    rank: position + 1,
                    label: candidate.label.clone(),
                    kind: candidate.kind,
                    session: candidate.session,
                    source_path: candidate.source_path.clone(),
                    part: candidate.part,
                    passage: select_passages(&stored.fragment.text, &terms, dense_match, budget, &count_words),
                    ranks: candidate.ranks,
                    rrf_score: candidate.rrf_score,
                }
            })
            .collect();
        Ok((search, found))
    }
}
