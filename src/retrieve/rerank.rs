//! The rerank: one extra call to the same chat model, over the cached annotations of the
//! fused pool, choosing the `k` fragments the model will see in full.
//!
//! Measured in the design: the pool held the right source for 30 of 30 questions, the fused
//! top 8 for only 25. Shown the annotations (not the text), the rerank raised recall to 0.93;
//! raw text dropped it to 0.73, text plus annotation gave 0.87.
//!
//! Architecture invariant: the rerank switches itself off (no configuration) and returns the
//! fusion order untouched when any candidate lacks an annotation, when the model does not
//! answer or times out, or when its output does not parse or validate. It never fails the
//! search and never returns fewer candidates than asked.

use crate::corpus::FragmentId;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Serialize;
use tracing::{Instrument, debug, info_span, warn};

use super::Candidate;
use crate::llm::chat::{ChatModel, ChatRequest};
use crate::prompt::{rerank_messages, rerank_schema};

/// Whether this process has said that the rerank waits for annotations.
static MISSING_ANNOTATIONS_SAID: AtomicBool = AtomicBool::new(false);

/// Tokens for `{"ids": [..8 ids..]}` with room to spare.
const RERANK_MAX_TOKENS: usize = 128;

/// The share of `chat.answer_seconds` the rerank's reading may take on a backend that reports
/// its speed (the embedded model on a CPU): the rerank reads every candidate's annotation
/// before the answer reads anything, so past this share the answer would lose the time its
/// plan counted on. On a server (no speed reported) the rerank's timeout is the only limit.
pub const RERANK_SHARE: f64 = 0.25;

/// The rerank's timeout when it is measured without its time limit (`oraculo eval
/// --rerank-without-time-limit`): the embedded 1.5B reading a 40-candidate pool's annotations
/// on 2 busy cores took over the usual 60 s, and a cut rerank measures nothing.
pub const RERANK_MEASURE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Which annotations the rerank reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RerankReads {
    /// The chat model's own annotations (`oraculo annotate`); without them the rerank is off.
    #[default]
    ModelAnnotations,
    /// The model's annotations, else the extractive ones every ingest makes (a fragment's
    /// most central sentences), so the rerank runs on an index no model annotated.
    ExtractiveToo,
}

/// Why the rerank left the fusion order as it was.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum RerankSkip {
    /// The pool is no bigger than the set asked for: nothing to choose.
    PoolFits,
    /// Switched off by the caller (the evaluation's "rerank off" column).
    Disabled,
    MissingAnnotation {
        fragment_id: FragmentId,
    },
    BackendUnavailable {
        detail: String,
    },
    Timeout {
        seconds: u64,
    },
    /// Reading the annotations at the backend's measured speed would take more than
    /// [`RERANK_SHARE`] of the answer's time.
    NoTime {
        needed_seconds: f64,
        allowed_seconds: f64,
    },
    UnparsableJson {
        detail: String,
    },
    NoValidIds,
}

/// What the rerank did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RerankDecision {
    /// `from_model` of the chosen came from the model's answer; the rest filled from fusion.
    Applied {
        from_model: usize,
    },
    Skipped(RerankSkip),
}

#[derive(serde::Deserialize)]
struct RerankOutput {
    ids: Vec<serde_json::Value>,
}

/// Chooses `k` candidates from `pool` (fusion order). `annotations`: fragment id → annotation.
pub async fn rerank_by_annotation(
    question: &str,
    pool: &[Candidate],
    annotations: &HashMap<FragmentId, String>,
    chat: &dyn ChatModel,
    k: usize,
    timeout: Duration,
) -> (Vec<Candidate>, RerankDecision) {
    let span = info_span!("retrieve.rerank", n_candidates = pool.len(), k);
    async move {
        let fusion_order = || pool.iter().take(k).cloned().collect::<Vec<_>>();
        let skip = |reason: RerankSkip| {
            match reason {
                // Not a failure but a state: the campaign was never annotated. Said once per
                // process, with the fix, not once per question.
                RerankSkip::MissingAnnotation { .. } if MISSING_ANNOTATIONS_SAID.swap(true, Ordering::Relaxed) => {
                    debug!(?reason, "rerank skipped: fusion order kept")
                }
                // A plain field, not the enum's debug form: the demo prints this line.
                RerankSkip::MissingAnnotation { fragment_id } => warn!(
                    first_fragment_without_annotation = fragment_id.0,
                    "rerank skipped: the pool has fragments without annotations, so the fusion order is kept \
                     (run `oraculo annotate` to rerank; said once)"
                ),
                // The model's reply (the annotations it read, GM ones in a GM's rerank): at debug.
                RerankSkip::UnparsableJson { .. } => {
                    warn!("rerank skipped: the model's reply is not the JSON asked for; fusion order kept");
                    debug!(?reason, "the reply the rerank could not read");
                }
                _ => warn!(?reason, "rerank skipped: fusion order kept"),
            }
            (fusion_order(), RerankDecision::Skipped(reason))
        };
        if pool.len() <= k {
            return (fusion_order(), RerankDecision::Skipped(RerankSkip::PoolFits));
        }
        let mut listed = Vec::with_capacity(pool.len());
        for candidate in pool {
            match annotations.get(&candidate.fragment_id) {
                Some(annotation) => listed.push((candidate.fragment_id, annotation.as_str())),
                None => return skip(RerankSkip::MissingAnnotation { fragment_id: candidate.fragment_id }),
            }
        }
        let request = ChatRequest {
            messages: rerank_messages(question, &listed, k),
            json_schema: Some(rerank_schema(k)),
            max_tokens: RERANK_MAX_TOKENS,
            temperature: 0.0,
        };
        let response = match tokio::time::timeout(timeout, chat.chat(&request, None)).await {
            Err(_) => return skip(RerankSkip::Timeout { seconds: timeout.as_secs() }),
            Ok(Err(err)) => return skip(RerankSkip::BackendUnavailable { detail: err.to_string() }),
            Ok(Ok(response)) => response,
        };
        let ids = match parse_ids(&response.text) {
            Ok(ids) => ids,
            Err(detail) => return skip(RerankSkip::UnparsableJson { detail }),
        };
        let (chosen, from_model) = choose(pool, &ids, k);
        if from_model == 0 {
            return skip(RerankSkip::NoValidIds);
        }
        (chosen, RerankDecision::Applied { from_model })
    }
    .instrument(span)
    .await
}

/// The ids in the model's answer, in its order. Tolerates ids written as strings.
fn parse_ids(text: &str) -> Result<Vec<FragmentId>, String> {
    let trimmed = text.trim().trim_start_matches("```json").trim_start_matches("```").trim_end_matches("```").trim();
    let output: RerankOutput =
        serde_json::from_str(trimmed).map_err(|err| format!("{err}: {}", crate::text::shorten(text, 200)))?;
    Ok(output
        .ids
        .iter()
        .filter_map(|id| match id {
            serde_json::Value::Number(n) => n.as_i64(),
            serde_json::Value::String(s) => s.trim().parse().ok(),
            _ => None,
        })
        .map(FragmentId)
        .collect())
}

/// The model's valid, distinct ids first (unknown and repeated ones dropped), then the
/// fusion order fills the set to `k`.
fn choose(pool: &[Candidate], ids: &[FragmentId], k: usize) -> (Vec<Candidate>, usize) {
    let by_id: HashMap<FragmentId, &Candidate> = pool.iter().map(|c| (c.fragment_id, c)).collect();
    let mut seen = HashSet::new();
    let mut chosen: Vec<Candidate> = ids
        .iter()
        .filter(|id| by_id.contains_key(id) && seen.insert(**id))
        .take(k)
        .map(|id| by_id[id].clone())
        .collect();
    let from_model = chosen.len();
    for candidate in pool {
        if chosen.len() >= k {
            break;
        }
        if seen.insert(candidate.fragment_id) {
            chosen.push(candidate.clone());
        }
    }
    (chosen, from_model)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::{Label, NoteKind, Visibility};
    use crate::retrieve::PathRanks;

    fn pool(ids: &[i64]) -> Vec<Candidate> {
        ids.iter()
            .map(|&id| Candidate {
                fragment_id: FragmentId(id),
                label: Label::new(format!("F{id}")),
                kind: NoteKind::Session,
                source_path: String::new(),
                session: None,
                part: 0,
                visibility: Visibility::Player,
                content_hash: String::new(),
                ranks: PathRanks::default(),
                rrf_score: 0.0,
                dense_window: None,
            })
            .collect()
    }

    fn check(model_ids: &[i64], k: usize, expected: &[i64], expected_from_model: usize) {
        let model_ids: Vec<FragmentId> = model_ids.iter().copied().map(FragmentId).collect();
        let (chosen, from_model) = choose(&pool(&[1, 2, 3, 4, 5, 6]), &model_ids, k);
        assert_eq!(chosen.iter().map(|c| c.fragment_id.0).collect::<Vec<_>>(), expected);
        assert_eq!(from_model, expected_from_model);
    }

    #[test]
    fn the_model_order_comes_first_and_fusion_fills_the_rest() {
        check(&[5, 3], 4, &[5, 3, 1, 2], 2);
        check(&[6, 5, 4, 3], 4, &[6, 5, 4, 3], 4);
    }

    #[test]
    fn unknown_and_duplicate_ids_are_dropped() {
        check(&[99, 5, 5, -1, 3, 5], 4, &[5, 3, 1, 2], 2);
        check(&[99, 100], 3, &[1, 2, 3], 0);
    }

    #[test]
    fn too_many_ids_are_cut_to_k() {
        check(&[6, 5, 4, 3, 2, 1], 3, &[6, 5, 4], 3);
    }

    #[test]
    fn ids_parse_from_json_with_fences_and_strings() {
        assert_eq!(parse_ids("{\"ids\": [3, \"7\", 2]}").unwrap(), [3, 7, 2].map(FragmentId));
        assert_eq!(parse_ids("```json\n{\"ids\": [1]}\n```").unwrap(), [FragmentId(1)]);
        assert!(parse_ids("the best are 1 and 2").is_err());
        assert!(parse_ids("{\"ids\": [1, 2").is_err());
    }
}
