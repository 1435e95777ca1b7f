//! Scoring: pure functions from per-question rows to the report's tables.
//!
//! Two kinds of retrieval figure, because the design reports both:
//! - a **hit** is a question with at least one expected label in the set (the design's "the
//!   union holds the right source in 30 of 30, the fused top 8 in 25");
//! - a **recall** counts expected labels, micro-averaged (the design's arc coverage: "the pool
//!   covered 0.88 of an arc's sessions, the chosen eight 0.67").
//!
//! Unanswerable questions have no expected labels and count in neither; they are scored by
//! the answers (abstention).
//!
//! This file holds the rows and the report; `retrieval.rs` scores each variant's sets,
//! `answers.rs` the answers and the material shown to the model, and `render.rs` prints the
//! report's tables.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::bank::{EvalQuestion, QuestionKind};
use crate::oracle::AnswerTimings;

mod answers;
mod render;
mod retrieval;

pub use answers::{
    AnswerScore, AnswerSummary, MaterialFacts, MaterialSummary, SettledAs, cited_in_story_order, key_facts_in,
    repeated_sentences,
};
pub use retrieval::{Coverage, VariantReport, VariantScore};

/// The variant every product search runs: three paths, fused, then the rerank.
pub const FULL_PIPELINE: &str = "dense+bm25+entity+rerank";
/// The three paths fused, rerank off.
pub const FUSION_ONLY: &str = "dense+bm25+entity";
/// The full pipeline without the time path: what the time path adds.
pub const WITHOUT_TIME: &str = "dense+bm25+entity+rerank, no time path";
/// What a RAG tutorial builds today (LangChain's ensemble retriever, LlamaIndex's hybrid
/// search): fixed 300-word windows, dense and BM25 fused by reciprocal rank, top 8.
pub const NAIVE_BASELINE: &str = "naive: 300-word windows, dense + BM25 by RRF, top 8";
/// The tutorial of a few years ago: the same windows, dense only (the name reports before
/// the hybrid baseline gave the naive baseline, so they still compare).
pub const NAIVE_DENSE: &str = "baseline: 300-word windows, dense, top 8";

/// The design's measurements, printed beside ours as the bar to beat.
pub const DESIGN_BAR: &str = "design (30-36 questions, qwen2.5:14b, bge-m3): union 30/30, fusion top-8 25/30, \
rerank over annotations 0.93, arc coverage 0.88 pool vs 0.67 chosen eight, uncited answers 3/36";

/// The expected labels that occur among `labels`, in the bank's order, without repeats.
pub fn labels_found<'a>(expected: &[&str], labels: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let present: BTreeSet<&str> = labels.into_iter().collect();
    expected.iter().filter(|label| present.contains(*label)).map(|label| label.to_string()).collect()
}

/// `part / whole`, and 0 when there is no whole.
pub fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
}

fn distinct(labels: &[String]) -> usize {
    labels.iter().collect::<BTreeSet<_>>().len()
}

/// Where one question's expected labels were found by one variant of the pipeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Found {
    /// In the fused pool (for the baseline: its top k, it has no pool).
    pub pool: Vec<String>,
    /// In the k chosen: the fusion order's first k, or the rerank's choice.
    pub top: Vec<String>,
    /// Among the fragments the context shows in full (the chosen, less what the model's
    /// window could not hold).
    pub full: Vec<String>,
    /// Among the fragments shown in full or as one-line summaries.
    pub context: Vec<String>,
    pub pool_size: usize,
}

/// One question of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionRow {
    pub id: String,
    pub kind: QuestionKind,
    pub question: String,
    pub expected: Vec<String>,
    /// Expected labels the index does not hold: a typo in the bank, or a note not ingested.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_labels: Vec<String>,
    /// By variant name.
    pub variants: BTreeMap<String, Found>,
    /// What the full pipeline searched with (the question, or history + question).
    pub search_query: String,
    /// What the rerank did in the full pipeline (`applied`, or why it was skipped).
    pub rerank: Option<String>,
    pub answer: Option<AnswerScore>,
    /// Each path's list for the full pipeline's search, for trying fusion rules offline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths: Option<PathLists>,
    /// The key facts in the material the full pipeline would show the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub material: Option<MaterialFacts>,
    /// The key facts in naive RAG's windows given the same budget (with the ablations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naive_material: Option<MaterialFacts>,
    /// The full pipeline's stages (`generation_ms` is 0 when no answer was generated).
    pub timings: Option<AnswerTimings>,
    /// Set when the pipeline failed on this question; the row then scores nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl QuestionRow {
    /// The question's own fields, with nothing found, answered or timed yet.
    pub fn unscored(question: &EvalQuestion) -> QuestionRow {
        QuestionRow {
            id: question.id.clone(),
            kind: question.kind,
            question: question.question.clone(),
            expected: question.expected.clone(),
            unknown_labels: Vec::new(),
            variants: BTreeMap::new(),
            search_query: String::new(),
            rerank: None,
            answer: None,
            paths: None,
            material: None,
            naive_material: None,
            timings: None,
            error: None,
        }
    }

    fn answerable(&self) -> bool {
        self.kind != QuestionKind::Unanswerable && !self.expected.is_empty()
    }
}

/// Each path's ranked list for one question (`label#part`, best first), the fusion weight
/// each got, the sessions the question names, whether it asks an arc, and the fused pool.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PathLists {
    pub lists: BTreeMap<String, Vec<String>>,
    pub weights: BTreeMap<String, f64>,
    pub named_sessions: Vec<u32>,
    pub arc: bool,
    pub pool: Vec<String>,
}

/// p50 and p95 (nearest rank) of one stage.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Percentiles {
    pub n: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

/// Nearest-rank percentile `p` (0–1] of `values`; `None` when there are none.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn percentiles(values: &[f64]) -> Option<Percentiles> {
    Some(Percentiles { n: values.len(), p50_ms: percentile(values, 0.5)?, p95_ms: percentile(values, 0.95)? })
}

/// What the run was: the models and the bank.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunInfo {
    pub campaign: String,
    pub questions_file: String,
    pub embedder: String,
    pub chat_model: String,
    pub k: usize,
    /// Seconds since the Unix epoch.
    pub started_at: u64,
    pub seconds: f64,
}

/// What `oraculo eval` prints and saves.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    pub run: RunInfo,
    pub questions: usize,
    pub questions_by_kind: BTreeMap<QuestionKind, usize>,
    pub errors: usize,
    /// Every variant run, the full pipeline first, then fusion, each path and pair, the baseline.
    pub variants: Vec<VariantReport>,
    pub answers: Option<AnswerSummary>,
    /// Key facts in the material shown to the model, answered or not.
    pub material: Option<MaterialSummary>,
    /// By stage name, over the full pipeline's questions.
    pub latency: BTreeMap<String, Percentiles>,
    pub design_bar: String,
    pub rows: Vec<QuestionRow>,
}

impl EvalReport {
    /// Scores `rows` for the variants named in `variant_order`.
    pub fn from_rows(run: RunInfo, variant_order: &[String], rows: Vec<QuestionRow>) -> EvalReport {
        let all: Vec<&QuestionRow> = rows.iter().collect();
        let variants = variant_order
            .iter()
            .map(|name| {
                let arc: Vec<&QuestionRow> = rows.iter().filter(|row| row.kind == QuestionKind::Arc).collect();
                let by_kind = QuestionKind::ALL
                    .into_iter()
                    .filter(|kind| *kind != QuestionKind::Unanswerable)
                    .filter_map(|kind| {
                        let of_kind: Vec<&QuestionRow> = rows.iter().filter(|row| row.kind == kind).collect();
                        (!of_kind.is_empty()).then(|| (kind, VariantScore::over(&of_kind, name)))
                    })
                    .collect();
                VariantReport {
                    name: name.clone(),
                    overall: VariantScore::over(&all, name),
                    arc: VariantScore::over(&arc, name),
                    by_kind,
                }
            })
            .collect();
        let mut questions_by_kind = BTreeMap::new();
        for row in &rows {
            *questions_by_kind.entry(row.kind).or_insert(0) += 1;
        }
        let timed: Vec<(&AnswerTimings, bool)> =
            rows.iter().filter_map(|row| row.timings.as_ref().map(|t| (t, row.answer.is_some()))).collect();
        type Stage = fn(&AnswerTimings) -> f64;
        let stages: [(&str, Stage); 9] = [
            ("embed_query", |t| t.search.embed_query_ms),
            ("dense", |t| t.search.dense_ms),
            ("bm25", |t| t.search.bm25_ms),
            ("entity", |t| t.search.entity_ms),
            ("time", |t| t.search.time_ms),
            ("fuse", |t| t.search.fuse_ms),
            ("rerank", |t| t.rerank_ms),
            ("generation", |t| t.generation_ms),
            ("total", |t| t.total_ms),
        ];
        let latency = stages
            .iter()
            .filter_map(|(name, stage)| {
                // Generation only where an answer was generated.
                let values: Vec<f64> = timed
                    .iter()
                    .filter(|(_, answered)| *answered || *name != "generation")
                    .map(|(t, _)| stage(t))
                    .collect();
                percentiles(&values).map(|p| (name.to_string(), p))
            })
            .collect();
        EvalReport {
            run,
            questions: rows.len(),
            questions_by_kind,
            errors: rows.iter().filter(|row| row.error.is_some()).count(),
            variants,
            answers: AnswerSummary::over(&rows),
            material: MaterialSummary::over(&rows),
            latency,
            design_bar: DESIGN_BAR.to_string(),
            rows,
        }
    }

    pub fn variant(&self, name: &str) -> Option<&VariantReport> {
        self.variants.iter().find(|variant| variant.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    pub(super) fn found(pool: &[&str], top: &[&str], context: &[&str]) -> Found {
        Found { pool: strings(pool), top: strings(top), full: strings(top), context: strings(context), pool_size: 30 }
    }

    pub(super) fn row(id: &str, kind: QuestionKind, expected: &[&str], variants: &[(&str, Found)]) -> QuestionRow {
        QuestionRow {
            id: id.into(),
            question: format!("question {id}"),
            variants: variants.iter().map(|(name, found)| (name.to_string(), found.clone())).collect(),
            ..QuestionRow::unscored(&question(kind, expected, &[]))
        }
    }

    pub(super) fn question(kind: QuestionKind, expected: &[&str], key_facts: &[&str]) -> EvalQuestion {
        EvalQuestion {
            id: "q".into(),
            question: "q".into(),
            kind,
            expected: strings(expected),
            key_facts: strings(key_facts),
            forbidden: Vec::new(),
            history: Vec::new(),
            from_play: None,
        }
    }

    #[test]
    fn labels_found_keep_bank_order_exact_matches_only() {
        let expected = ["Sesión 7", "Sesión 6", "Sesión 8"];
        let pool = ["Sesión 6", "Ficha: Mirela Saavedra", "Sesión 6", "Sesión 7"];
        assert_eq!(labels_found(&expected, pool), strings(&["Sesión 7", "Sesión 6"]));
        assert!(labels_found(&["Sesión 1"], ["Sesión 12"]).is_empty());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.5), Some(10.0));
        assert_eq!(percentile(&values, 0.95), Some(19.0));
        assert_eq!(percentile(&[7.0], 0.95), Some(7.0));
        assert_eq!(percentile(&[], 0.5), None);
        let mut timed = row("a", QuestionKind::Fact, &["Sesión 1"], &[]);
        timed.timings = Some(AnswerTimings { total_ms: 5.0, ..Default::default() });
        let report = EvalReport::from_rows(RunInfo::default(), &[], vec![timed]);
        assert_eq!(report.latency["total"].p50_ms, 5.0);
        // No answers generated: no generation stage.
        assert!(!report.latency.contains_key("generation"));
    }
}
