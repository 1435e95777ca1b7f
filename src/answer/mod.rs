//! Answer: reranked candidates → what the model sees → the prompt → checked citations.
//!
//! The pure half of the answer stage; the glue that calls the chat model lives with the
//! callers, and the prompts built from `prompts/` live in `crate::prompt`. In reading order:
//! - `arc`: for a question about someone across the campaign, the context's first block: one
//!   cited line per session where they appear, in story order, the sentence of each that best
//!   answers the question.
//! - `context`: [`build_context`] puts the chosen fragments in full and up to sixteen
//!   one-line summaries of the leftovers (one per session) in separate blocks, within a
//!   token budget that never cuts a fragment.
//! - `windows`: under a CPU's time budget, [`narrow_to_windows`] first shows the chosen
//!   fragments as the windows of their words ranked best (`retrieve::windows`) that fit,
//!   widened to whole sentences; a chosen fragment with none goes to the summaries.
//! - `passages`: the paragraphs of a fragment that matter for a question (when a CPU has
//!   no time for the whole), and the extractive answer (when no model can answer).
//! - `quotes`: the quoted answer, the notes' own sentences ranked sentence by sentence (the
//!   question's words, its names, the embedder's similarity passed in, a number when it asks
//!   how much or when, the fragment's rank), fused by reciprocal rank.
//! - `compare`: a question comparing two events in time («¿qué pasó antes: A o B?»), answered
//!   by each event's sentence in the order their sessions tell them.
//! - `structured`: the JSON schema of a structured answer, its check, its rendering as
//!   cited text, and the sentences picked out of it while it streams.
//! - `grounding`: every sentence of a structured answer backed by the notes it cites (its
//!   numbers and names); the ones that are not are dropped, and none left is an abstention.
//! - `support`: every sentence of a structured answer near, in meaning, a passage of the notes
//!   it cites (the embedder's vectors, computed by the caller); the ones that are not are
//!   dropped like the ungrounded ones.
//! - `citations`: [`validate_citations`] checks every bracketed label of an answer against
//!   the labels shown, maps near misses to the real label and removes invented ones.
//!
//! Architecture invariant: this module knows fragments only as [`ContextFragment`]s and
//! messages only as `llm::chat::ChatMessage`s (the one message type, data only); it depends
//! on `corpus` and `lexicon` for text and on nothing of `llm` but that type and the embedder's
//! calibrated `SupportFloor`, and does no IO.

pub mod arc;
pub mod citations;
pub mod compare;
pub mod context;
pub mod grounding;
pub mod passages;
pub mod provenance;
pub mod quotes;
pub mod structured;
pub mod support;
pub mod terms;
pub mod windows;

/// How the model is asked to answer (`chat.answer_mode`), and how an answer was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerMode {
    /// A JSON schema: sentences, each with labels from exactly those shown.
    Structured,
    /// Free text, citing by the prompt's rule.
    Free,
    /// No model: the notes' own sentences, each with its label.
    Extractive,
}

/// How an answer is given (`chat.answer_style`): the notes' own sentences, or the model's prose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnswerStyle {
    /// The notes' own sentences, ranked and cited ([`quotes`]): at once, no model runs.
    Quotes,
    /// The model writes the answer from the notes (`chat.answer_mode`), after the quotes.
    Prose,
}

pub use citations::{Citation, CitationSpan, INVENTED_MARK, ValidatedAnswer, parse_citations, validate_citations};
pub use context::{
    Context, ContextBudget, ContextFragment, FULL_FRAGMENTS, MAX_SUMMARIES, ShownFragment, ShownSummary, build_context,
};
pub use windows::{Narrowed, narrow_to_windows};
