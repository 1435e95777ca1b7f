//! Annotation passes: the extractive headline of every new fragment (no model), and a chat
//! model's annotations and entity extractions, cached by content hash.

use std::collections::HashSet;
use std::time::Instant;

use serde::Serialize;
use tracing::{Instrument, debug, info_span, warn};

use super::{IngestError, IngestProgress};
use crate::answer::passages::central_sentences;
use crate::compendium::{EntityMatcher, ExtractedEntity};
use crate::corpus::{NoteKind, Visibility};
use crate::index::Index;
use crate::llm::chat::{ChatModel, ChatRequest};

/// Gives every fragment without one its extractive annotation (its most central sentences,
/// `answer::passages::central_sentences`), all in one transaction: no model, a few
/// milliseconds for a campaign. Returns how many were made.
pub(super) fn annotate_extractively(index: &mut Index, matcher: &EntityMatcher) -> Result<usize, IngestError> {
    use crate::index::store::{EXTRACTIVE_ANNOTATION_VERSION, EXTRACTIVE_ANNOTATOR};
    let _span = info_span!("ingest.annotate_extractively").entered();
    let pending = index.store.fragments_missing_annotation(EXTRACTIVE_ANNOTATOR, EXTRACTIVE_ANNOTATION_VERSION)?;
    let names_in = |sentence: &str| matcher.count_mentions(sentence).iter().map(|(_, n)| *n as usize).sum();
    let made: Vec<(String, String)> = pending
        .iter()
        .map(|stored| (stored.fragment.content_hash.clone(), central_sentences(&stored.fragment.text, &names_in)))
        .filter(|(_, annotation)| !annotation.is_empty())
        .collect();
    index.store.put_annotations(&made, EXTRACTIVE_ANNOTATOR, EXTRACTIVE_ANNOTATION_VERSION)?;
    debug!(n_made = made.len(), "extractive annotations");
    Ok(made.len())
}

/// Tokens for a one-or-two-sentence annotation (~40 words) with room to finish the sentence.
const ANNOTATION_MAX_TOKENS: usize = 120;
/// Tokens for a session's entity list as JSON.
const ENTITIES_MAX_TOKENS: usize = 512;
/// An annotation longer than this is cut: it is a headline, not a second copy of the fragment.
const ANNOTATION_MAX_CHARS: usize = 400;

/// What an annotation pass did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AnnotationReport {
    /// The chat model that wrote them (part of the cache key), if one was reachable.
    pub model: Option<String>,
    pub made: usize,
    /// Fragments still without an annotation: the rerank stays off for pools holding them.
    pub missing: usize,
    /// Session fragments whose named entities were extracted (merged by the next ingest).
    pub extractions_made: usize,
    /// Why the pass stopped early, if it did.
    pub error: Option<String>,
    pub seconds: f64,
}

/// Annotates every fragment that has no cached annotation by `chat` under the current
/// prompt version. Each annotation is committed as soon as it is made; a failure stops the
/// pass (the rest stays missing, to be filled by the next ingest or `oraculo annotate`)
/// but is never an ingest error.
pub async fn annotate_fragments(
    index: &Index,
    chat: &dyn ChatModel,
    progress: &dyn IngestProgress,
) -> AnnotationReport {
    annotate_pending(index, chat, progress, None).await
}

/// Annotates, and extracts the entities of, only the fragments whose content hash is in
/// `new`: what a watched vault's last saves made. It takes no ingest lock, so that the next
/// save's ingest (or a `/reingest`) never waits behind it; the few fragments it covers could
/// at worst be annotated twice by a full pass running at the same time.
pub async fn annotate_new_fragments(
    index: &Index,
    chat: &dyn ChatModel,
    new: &HashSet<String>,
    progress: &dyn IngestProgress,
) -> AnnotationReport {
    annotate_pending(index, chat, progress, Some(new)).await
}

async fn annotate_pending(
    index: &Index,
    chat: &dyn ChatModel,
    progress: &dyn IngestProgress,
    only: Option<&HashSet<String>>,
) -> AnnotationReport {
    use crate::prompt::{ANNOTATE_PROMPT_VERSION, annotate_messages};
    let span = info_span!("ingest.annotate", model = chat.id(), scoped = only.is_some());
    let started = Instant::now();
    async move {
        let mut report = AnnotationReport { model: Some(chat.id().to_string()), ..Default::default() };
        // The ingest lock for a full pass: two at once would pay the model twice for the same
        // fragments.
        let _lock = match only {
            Some(_) => None,
            None => match index.lock_for_ingest() {
                Ok(lock) => Some(lock),
                Err(err) => {
                    report.error = Some(err.to_string());
                    return report;
                }
            },
        };
        let in_scope = |hash: &str| only.is_none_or(|only| only.contains(hash));
        let pending = match index.store.fragments_missing_annotation(chat.id(), ANNOTATE_PROMPT_VERSION) {
            Ok(pending) => pending.into_iter().filter(|s| in_scope(&s.fragment.content_hash)).collect::<Vec<_>>(),
            Err(err) => {
                report.error = Some(err.to_string());
                return report;
            }
        };
        report.missing = pending.len();
        progress.annotating_started(pending.len());
        for stored in &pending {
            let fragment = &stored.fragment;
            let request = ChatRequest {
                messages: annotate_messages(&fragment.label, &fragment.text),
                json_schema: None,
                max_tokens: ANNOTATION_MAX_TOKENS,
                temperature: 0.0,
            };
            let text = match chat.chat(&request, None).await {
                Ok(response) => clean_annotation(&response.text),
                Err(err) => {
                    warn!(error = %err, label = %fragment.label, "annotation stopped; the rest stays missing");
                    report.error = Some(err.to_string());
                    break;
                }
            };
            if text.is_empty() {
                warn!(label = %fragment.label, "the model returned an empty annotation");
                continue;
            }
            if let Err(err) =
                index.store.put_annotation(&fragment.content_hash, chat.id(), ANNOTATE_PROMPT_VERSION, &text)
            {
                report.error = Some(err.to_string());
                break;
            }
            report.made += 1;
            report.missing -= 1;
            progress.annotated(1);
        }
        if report.error.is_none() {
            extract_entities(index, chat, &in_scope, &mut report).await;
        }
        report.seconds = started.elapsed().as_secs_f64();
        report
    }
    .instrument(span)
    .await
}

/// The compendium's LLM source: named entities of each player-visible session fragment, cached
/// by content hash + model + prompt version like the annotations. The next ingest merges them.
async fn extract_entities(
    index: &Index,
    chat: &dyn ChatModel,
    in_scope: &dyn Fn(&str) -> bool,
    report: &mut AnnotationReport,
) {
    use crate::prompt::{ENTITIES_PROMPT_VERSION, entities_messages, entities_schema};
    #[derive(serde::Deserialize)]
    struct Extraction {
        entities: Vec<ExtractedEntity>,
    }
    let pending = match index.store.fragments_missing_annotation(chat.id(), ENTITIES_PROMPT_VERSION) {
        Ok(pending) => pending,
        Err(err) => {
            report.error = Some(err.to_string());
            return;
        }
    };
    let sessions = pending.iter().filter(|s| {
        s.fragment.kind == NoteKind::Session
            && s.fragment.visibility == Visibility::Player
            && in_scope(&s.fragment.content_hash)
    });
    for stored in sessions {
        let fragment = &stored.fragment;
        let request = ChatRequest {
            messages: entities_messages(&fragment.label, &fragment.text),
            json_schema: Some(entities_schema()),
            max_tokens: ENTITIES_MAX_TOKENS,
            temperature: 0.0,
        };
        let text = match chat.chat(&request, None).await {
            Ok(response) => response.text,
            Err(err) => {
                warn!(error = %err, label = %fragment.label, "entity extraction stopped");
                report.error = Some(err.to_string());
                return;
            }
        };
        let entities: Vec<ExtractedEntity> = match serde_json::from_str::<Extraction>(text.trim()) {
            Ok(extraction) => extraction.entities.into_iter().filter(|e| !e.name.trim().is_empty()).collect(),
            Err(err) => {
                // Cached as "nothing found": unchanged text is never sent again (a small model
                // that runs out of tokens would otherwise cost every ingest the same calls).
                warn!(error = %err, label = %fragment.label, "entity extraction is not valid JSON; recorded as empty");
                Vec::new()
            }
        };
        let json = serde_json::to_string(&entities).unwrap_or_else(|_| "[]".into());
        if let Err(err) = index.store.put_annotation(&fragment.content_hash, chat.id(), ENTITIES_PROMPT_VERSION, &json)
        {
            report.error = Some(err.to_string());
            return;
        }
        report.extractions_made += 1;
    }
}

/// One line, no surrounding quotes, at most `ANNOTATION_MAX_CHARS`.
fn clean_annotation(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = one_line.trim_matches(|c: char| c == '"' || c == '\'' || c == '`').trim();
    match trimmed.char_indices().nth(ANNOTATION_MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &trimmed[..cut]),
        None => trimmed.to_string(),
    }
}
