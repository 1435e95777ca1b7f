//! Answer: reranked candidates → what the model sees → the prompt → checked citations.
//!
//! The pure half of the answer stage; the glue that calls the chat model lives with the
//! callers. In reading order:
//! - `context`: [`build_context`] puts the chosen fragments in full and up to sixteen
//!   one-line summaries of the leftovers (one per session) in separate blocks, within a
//!   token budget that never cuts a fragment.
//! - `prompt`: the versioned prompt files under `prompts/` and the messages built from
//!   them: the answer, a fragment's annotation, the rerank over annotations.
//! - `citations`: [`validate_citations`] checks every bracketed label of an answer against
//!   the labels shown, maps near misses to the real label and removes invented ones.
//!
//! Architecture invariant: this module knows fragments only as [`ContextFragment`]s and
//! messages only as [`PromptMessage`]s; it depends on `corpus` alone, and does no IO.

pub mod citations;
pub mod context;
pub mod prompt;

pub use citations::{Citation, CitationSpan, INVENTED_MARK, ValidatedAnswer, parse_citations, validate_citations};
pub use context::{
    Context, ContextBudget, ContextFragment, FULL_FRAGMENTS, MAX_SUMMARIES, ShownFragment, ShownSummary, build_context,
};
pub use prompt::{
    ANNOTATE_PROMPT_VERSION, ANSWER_PROMPT_VERSION, MAX_HISTORY_MESSAGES, PROMPT_FILES, PromptMessage,
    RERANK_PROMPT_VERSION, annotate_messages, answer_messages, bounded_history, rerank_messages, rerank_schema,
};
