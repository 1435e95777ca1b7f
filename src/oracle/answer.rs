//! The answer object (`oraculo ask --json` prints it, the bot renders it) and the sources of
//! its citations.

use std::collections::HashMap;

use serde::Serialize;

use crate::answer::passages::{Excerpt, GAP_MARK};
use crate::answer::{AnswerMode, Context, ValidatedAnswer};
use crate::corpus::{FragmentId, Label, NoteKind, SessionNumber};
use crate::index::StoredFragment;
use crate::retrieve::rerank::RerankDecision;
use crate::retrieve::{Candidate, DetectedEntity, SearchTimings};
use crate::text::shorten;

use super::Prepared;
use super::plan::ContextPlan;

/// Characters of a cited fragment shown as its excerpt (a Discord embed field holds 1024).
pub const EXCERPT_CHARS: usize = 300;

/// A citation in the answer, checked against what the model was shown.
#[derive(Debug, Clone, Serialize)]
pub struct CitationSource {
    pub label: String,
    /// False: the label was not among those shown (invented); never presented as a source.
    pub valid: bool,
    pub source_path: Option<String>,
    pub session: Option<SessionNumber>,
    pub kind: Option<NoteKind>,
    pub fragment_id: Option<FragmentId>,
    /// What an extractive answer quoted of the note; else the start of the cited fragment
    /// (or its summary, when only the summary was shown).
    pub excerpt: Option<String>,
    /// Times the answer cites it.
    pub count: usize,
}

/// Something the model was shown.
#[derive(Debug, Clone, Serialize)]
pub struct ShownSource {
    pub fragment_id: FragmentId,
    pub label: Label,
    pub session: Option<SessionNumber>,
}

/// Milliseconds per stage: the search's, then the rerank's and the model's.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AnswerTimings {
    #[serde(flatten)]
    pub search: SearchTimings,
    pub rerank_ms: f64,
    pub generation_ms: f64,
    pub total_ms: f64,
}

impl AnswerTimings {
    /// The search's and the rerank's stages; generation and total still to come.
    pub fn before_generation(prepared: &Prepared) -> AnswerTimings {
        AnswerTimings {
            search: prepared.search.timings.clone(),
            rerank_ms: prepared.rerank_ms,
            generation_ms: 0.0,
            total_ms: 0.0,
        }
    }
}

/// The answer object: `oraculo ask --json` prints it; the bot renders it.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub question: String,
    /// The answer, with invented citations marked (see `answer::citations`).
    pub text: String,
    pub citations: Vec<CitationSource>,
    pub invented_citations: Vec<String>,
    pub fragments_shown: Vec<ShownSource>,
    pub summaries_shown: Vec<ShownSource>,
    /// The lines of the entity's story shown, an arc question's first block (one per line).
    pub story_shown: Vec<ShownSource>,
    pub dropped_for_budget: usize,
    pub rerank: RerankDecision,
    /// Tokens of the rerank prompt (question + the pool's annotations), when every candidate
    /// had an annotation.
    pub rerank_prompt_tokens: Option<usize>,
    pub search_query: String,
    pub followup_expanded: bool,
    pub entities: Vec<DetectedEntity>,
    pub pool_size: usize,
    pub timings: AnswerTimings,
    pub chat_model: String,
    pub embedder: String,
    pub prompt_tokens: Option<usize>,
    /// Of `prompt_tokens`, those the backend held from an earlier prompt and did not read again.
    pub cached_prompt_tokens: Option<usize>,
    pub completion_tokens: Option<usize>,
    /// How this answer was made: `structured`, `free` or `extractive`.
    pub mode: AnswerMode,
    /// Why the answer is extractive when the model was asked first (server down, timeout,
    /// a reply that never fitted the schema); `None` otherwise.
    pub fallback: Option<String>,
    /// Why the model was stopped before it finished (its time ran out); the sentences it had
    /// written and that passed every check are the answer. `None` otherwise.
    pub cut_short: Option<String>,
    /// The model's time ran out before it wrote a sentence that passed the checks: the
    /// answer is the notes' own sentences (`fallback` says so).
    pub out_of_time: bool,
    /// Model replies it took (a structured reply that did not fit gets one retry).
    pub attempts: usize,
    pub context_plan: ContextPlan,
    /// Retrieval paths that failed for this question (the answer comes from the others).
    pub missing_paths: Vec<crate::retrieve::MissingPath>,
    /// Sentences of the model's answer dropped because the notes they cite do not back
    /// them (a number or a name not there), each with why (`answer::grounding`).
    pub ungrounded: Vec<String>,
    /// Sentences of the model's answer dropped because they repeat an earlier one.
    pub repeated: Vec<String>,
    /// Sentences of the model's answer kept with other labels than it gave them: cited to the
    /// notes they rest on (`answer::provenance`), each with the labels the model wrote.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recited: Vec<String>,
    /// Sentences the model wrote in a structured answer, before any was dropped or re-cited.
    pub model_sentences: usize,
    /// The notes' sentences an extractive answer quotes, each with its label (empty for the
    /// model's own answer): what the oracle keeps under the model's answer once it is done (`Settled`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quoted: Vec<crate::answer::passages::Excerpt>,
    /// The quoted sentences are only the nearest the notes hold: none says what the
    /// question asks in its words (`answer::quotes::Quotes::Nearest`), and the answer says so.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub nearest_only: bool,
}

impl Answer {
    /// Whether this exchange becomes a turn of the conversation: not when the model was
    /// asked and failed (a server killed mid-stream, a timeout, a reply that never fitted):
    /// the player saw the notes' own sentences, not an answer to follow up on, and the next
    /// question should not build on a half-written one.
    pub fn joins_history(&self) -> bool {
        self.fallback.is_none()
    }
}

/// Valid citations with their source and excerpt; invented ones flagged, with nothing else.
/// A label is looked up in what the model was shown (full, then summaries), then among the
/// chosen fragments (an extractive answer quotes them directly).
pub(super) fn citation_sources(
    validated: &ValidatedAnswer,
    context: &Context,
    texts: &HashMap<FragmentId, StoredFragment>,
    pool: &[Candidate],
) -> Vec<CitationSource> {
    validated
        .citations
        .iter()
        .map(|citation| {
            let mut source = CitationSource {
                label: citation.label.clone(),
                valid: citation.valid,
                source_path: None,
                session: None,
                kind: None,
                fragment_id: None,
                excerpt: None,
                count: citation.count,
            };
            if !citation.valid {
                return source;
            }
            if let Some(full) = context.full.iter().find(|f| f.label == citation.label) {
                source.fragment_id = Some(full.fragment_id);
                source.session = full.session;
                source.excerpt = Some(excerpt(&full.text));
                if let Some(stored) = texts.get(&full.fragment_id) {
                    source.source_path = Some(stored.fragment.source_path.clone());
                    source.kind = Some(stored.fragment.kind);
                }
            } else if let Some(line) =
                context.arc.iter().flat_map(|arc| arc.lines.iter()).find(|line| line.label == citation.label)
            {
                source.fragment_id = Some(line.fragment_id);
                source.session = Some(line.session);
                source.excerpt = Some(shorten(&line.text, EXCERPT_CHARS));
                source.source_path = Some(line.source_path.clone());
                source.kind = Some(NoteKind::Session);
            } else if let Some(summary) = context.summaries.iter().find(|s| s.label == citation.label) {
                source.fragment_id = Some(summary.fragment_id);
                source.session = summary.session;
                source.excerpt = Some(summary.summary.clone());
                if let Some(candidate) = pool.iter().find(|c| c.fragment_id == summary.fragment_id) {
                    source.source_path = Some(candidate.source_path.clone());
                    source.kind = Some(candidate.kind);
                }
            } else if let Some(stored) = pool
                .iter()
                .filter(|c| c.label == citation.label)
                .find_map(|candidate| texts.get(&candidate.fragment_id))
            {
                source.fragment_id = Some(stored.id);
                source.session = stored.fragment.session;
                source.excerpt = Some(excerpt(&stored.fragment.text));
                source.source_path = Some(stored.fragment.source_path.clone());
                source.kind = Some(stored.fragment.kind);
            }
            source
        })
        .collect()
}

/// An extractive answer's sources show what it quoted of each note (two quotes of one note
/// joined by « … »): the reader checks the words cited, not the note's opening, which may
/// say something else.
pub(super) fn excerpts_from_quotes(citations: &mut [CitationSource], quoted: &[Excerpt]) {
    for source in citations.iter_mut().filter(|source| source.valid) {
        let own: Vec<&str> = quoted
            .iter()
            .filter(|quote| quote.label.as_str() == source.label)
            .map(|quote| quote.text.as_str())
            .collect();
        if !own.is_empty() {
            source.excerpt = Some(shorten(&own.join(" … "), EXCERPT_CHARS));
        }
    }
}

/// The first `EXCERPT_CHARS` characters of a fragment, cut at a word, on one line.
/// Headings and the gap marks of a fragment shown as passages are left out: the excerpt is
/// the text itself.
fn excerpt(text: &str) -> String {
    let body: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && *line != GAP_MARK && !line.starts_with('#'))
        .collect();
    shorten(&body.join(" ").split_whitespace().collect::<Vec<_>>().join(" "), EXCERPT_CHARS)
}
