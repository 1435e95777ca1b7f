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

use crate::answer::passages::shorten;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;

use super::bank::{EvalQuestion, QuestionKind, abstains, contains_fact};
use crate::oracle::AnswerTimings;

/// The variant every product search runs: three paths, fused, then the rerank.
pub const FULL_PIPELINE: &str = "dense+bm25+entity+rerank";
/// The three paths fused, rerank off.
pub const FUSION_ONLY: &str = "dense+bm25+entity";
/// The full pipeline without the time path: what the time path adds.
pub const WITHOUT_TIME: &str = "dense+bm25+entity+rerank, no time path";
/// What a three-step RAG tutorial builds: fixed 300-word windows, dense only, top 8.
pub const NAIVE_BASELINE: &str = "baseline: 300-word windows, dense, top 8";

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

/// One answer, scored.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AnswerScore {
    pub text: String,
    /// Labels cited that the model was shown, each once.
    pub valid_citations: Vec<String>,
    /// Labels cited that the model was not shown.
    pub invented_citations: Vec<String>,
    /// A valid citation names an expected note.
    pub supported: bool,
    /// The answer says the notes do not hold (all of) it.
    pub abstained: bool,
    pub key_facts_found: Vec<String>,
    pub key_facts_missing: Vec<String>,
    /// Forbidden words (GM secrets) the answer contains.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub leaked: Vec<String>,
    /// How the answer was made (structured, free, extractive), when the run says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<crate::answer::AnswerMode>,
    /// Why an answer the model was asked for is extractive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    /// For a chronology question citing two sessions or more: whether the sessions are cited
    /// in story order (each first cited no earlier in the text than a lower one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub story_order: Option<bool>,
    /// Sentences of the answer that repeat an earlier one (`answer::structured::Repeats`).
    pub repeated_sentences: usize,
    /// The model was stopped at its deadline (its checked sentences are the answer).
    pub cut_short: bool,
    /// Seconds the generation took, and the budget it was planned for (a time plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_seconds: Option<f64>,
}

/// Sentences of `text` (an answer, its citations in it) that repeat an earlier sentence of it.
pub fn repeated_sentences(text: &str) -> usize {
    let mut repeats = crate::answer::structured::Repeats::default();
    crate::answer::passages::sentences(text).iter().filter(|sentence| !repeats.admit(sentence)).count()
}

/// Whether the session labels among `cited` (label, session) first appear in `text` in
/// story order; `None` with fewer than two sessions cited. A label is found whole («Sesión 1»
/// is not the start of «Sesión 12»).
pub fn cited_in_story_order(text: &str, cited: &[(String, Option<crate::corpus::SessionNumber>)]) -> Option<bool> {
    let mut first_seen: Vec<(usize, crate::corpus::SessionNumber)> = cited
        .iter()
        .filter_map(|(label, session)| {
            let session = (*session)?;
            let position = text
                .match_indices(label.as_str())
                .map(|(at, _)| at)
                .find(|&at| !text[at + label.len()..].starts_with(|c: char| c.is_ascii_digit()))?;
            Some((position, session))
        })
        .collect();
    if first_seen.len() < 2 {
        return None;
    }
    first_seen.sort();
    Some(first_seen.windows(2).all(|pair| pair[0].1 <= pair[1].1))
}

impl AnswerScore {
    /// Scores `text` (citations already checked) against `question`.
    pub fn new(
        question: &EvalQuestion,
        text: &str,
        valid_citations: Vec<String>,
        invented_citations: Vec<String>,
    ) -> AnswerScore {
        let supported = valid_citations.iter().any(|label| question.expected.contains(label));
        let (found, missing) = key_facts_in(question, text);
        AnswerScore {
            text: text.to_string(),
            valid_citations,
            invented_citations,
            supported,
            abstained: abstains(text),
            key_facts_found: found,
            key_facts_missing: missing,
            leaked: question.forbidden.iter().filter(|word| contains_fact(text, word)).cloned().collect(),
            mode: None,
            fallback: None,
            story_order: None,
            repeated_sentences: repeated_sentences(text),
            cut_short: false,
            seconds: None,
            budget_seconds: None,
        }
    }
}

/// The key facts the material shown to the model holds: what the best answer could state.
/// Tells a fact the context lost (retrieval, passages, budget) from one the model had and
/// did not write.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MaterialFacts {
    /// What limited the material: `window` or `time` (the context plan).
    pub limited_by: String,
    /// Tokens the material could take under that plan.
    pub material_tokens: usize,
    pub found: Vec<String>,
    pub missing: Vec<String>,
    /// The material itself, kept only when it lacks a key fact (to see what was shown instead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shown: Option<String>,
}

impl MaterialFacts {
    /// `None` for a question that lists no key facts.
    pub fn new(
        question: &EvalQuestion,
        material: &str,
        limited_by: &str,
        material_tokens: usize,
    ) -> Option<MaterialFacts> {
        if question.key_facts.is_empty() {
            return None;
        }
        let (found, missing) = key_facts_in(question, material);
        let shown = (!missing.is_empty()).then(|| material.to_string());
        Some(MaterialFacts { limited_by: limited_by.to_string(), material_tokens, found, missing, shown })
    }
}

/// `question`'s key facts that `text` holds, and those it lacks: one reading for an answer
/// and for the material it was written from.
fn key_facts_in(question: &EvalQuestion, text: &str) -> (Vec<String>, Vec<String>) {
    question.key_facts.iter().cloned().partition(|fact| contains_fact(text, fact))
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

/// Recall over an arc's gold sessions at each stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Coverage {
    pub pool: f64,
    pub top: f64,
    pub full: f64,
    pub context: f64,
}

/// One variant over a set of questions.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct VariantScore {
    /// Answerable questions scored.
    pub questions: usize,
    /// Questions with an expected label in the pool / in the top k.
    pub pool_hits: usize,
    pub top_hits: usize,
    /// Expected labels found, micro-averaged.
    pub recall: Coverage,
    pub mean_pool_size: f64,
}

impl VariantScore {
    fn over(rows: &[&QuestionRow], variant: &str) -> VariantScore {
        let scored: Vec<(&QuestionRow, &Found)> = rows
            .iter()
            .filter(|row| row.answerable() && row.error.is_none())
            .filter_map(|row| row.variants.get(variant).map(|found| (*row, found)))
            .collect();
        let expected: usize = scored.iter().map(|(row, _)| distinct(&row.expected)).sum();
        let recall =
            |stage: fn(&Found) -> &Vec<String>| ratio(scored.iter().map(|(_, f)| stage(f).len()).sum(), expected);
        VariantScore {
            questions: scored.len(),
            pool_hits: scored.iter().filter(|(_, found)| !found.pool.is_empty()).count(),
            top_hits: scored.iter().filter(|(_, found)| !found.top.is_empty()).count(),
            recall: Coverage {
                pool: recall(|f| &f.pool),
                top: recall(|f| &f.top),
                full: recall(|f| &f.full),
                context: recall(|f| &f.context),
            },
            mean_pool_size: if scored.is_empty() {
                0.0
            } else {
                scored.iter().map(|(_, found)| found.pool_size as f64).sum::<f64>() / scored.len() as f64
            },
        }
    }
}

fn distinct(labels: &[String]) -> usize {
    labels.iter().collect::<BTreeSet<_>>().len()
}

/// A variant overall, on arc questions alone, and per kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantReport {
    pub name: String,
    pub overall: VariantScore,
    pub arc: VariantScore,
    pub by_kind: BTreeMap<QuestionKind, VariantScore>,
}

/// The answers of the full pipeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AnswerSummary {
    pub answered: usize,
    /// Answers with at least one valid citation, over all answers.
    pub cited: usize,
    /// Answers to answerable questions with no valid citation (the design's "3 of 36").
    pub uncited_answerable: usize,
    pub answerable: usize,
    /// Answers citing an expected note, over answerable questions.
    pub supported: usize,
    pub invented_citations: usize,
    pub answers_with_invented: usize,
    pub unanswerable: usize,
    /// Unanswerable questions whose answer says the notes do not hold it.
    pub abstained_unanswerable: usize,
    /// Answerable questions whose answer says (some of) it is not in the notes.
    pub abstained_answerable: usize,
    pub key_facts: usize,
    pub key_facts_found: usize,
    /// Answers holding every key fact, over questions that list key facts.
    pub complete_answers: usize,
    pub with_key_facts: usize,
    /// Of `key_facts`, those the material shown to the model held: the most a perfect reader
    /// of that material could have found.
    pub key_facts_in_material: usize,
    /// Answers that contain a forbidden word (a GM secret shown to a player).
    pub leaks: usize,
    /// Answers the model was asked for that fell back to the extractive answer.
    pub fallbacks: usize,
    /// Chronology answers citing two sessions or more, and those citing them in story order.
    pub chronology_cited: usize,
    pub chronology_in_story_order: usize,
    /// Key facts of the arc questions answered, and those found.
    pub arc_key_facts: usize,
    pub arc_key_facts_found: usize,
    /// Sentences that repeat an earlier one of their answer, over all answers.
    pub repeated_sentences: usize,
    /// Answers the model was stopped in at its deadline.
    pub cut_short: usize,
    /// Seconds per answer's generation, p50 and p95.
    pub seconds_p50: Option<f64>,
    pub seconds_p95: Option<f64>,
    /// Answers planned for a time budget, and those that took over it by more than a fifth.
    pub budgeted: usize,
    pub over_budget: usize,
}

impl AnswerSummary {
    fn over(rows: &[QuestionRow]) -> Option<AnswerSummary> {
        let answered: Vec<(&QuestionRow, &AnswerScore)> =
            rows.iter().filter_map(|row| row.answer.as_ref().map(|answer| (row, answer))).collect();
        if answered.is_empty() {
            return None;
        }
        let answerable: Vec<&(&QuestionRow, &AnswerScore)> =
            answered.iter().filter(|(row, _)| row.answerable()).collect();
        let unanswerable: Vec<&(&QuestionRow, &AnswerScore)> =
            answered.iter().filter(|(row, _)| !row.answerable()).collect();
        let with_facts: Vec<&(&QuestionRow, &AnswerScore)> = answered
            .iter()
            .filter(|(_, answer)| !answer.key_facts_found.is_empty() || !answer.key_facts_missing.is_empty())
            .collect();
        let arcs: Vec<&&(&QuestionRow, &AnswerScore)> =
            with_facts.iter().filter(|(row, _)| row.kind == QuestionKind::Arc).collect();
        let seconds: Vec<f64> = answered.iter().filter_map(|(_, answer)| answer.seconds).collect();
        let budgeted: Vec<(f64, f64)> =
            answered.iter().filter_map(|(_, answer)| Some((answer.seconds?, answer.budget_seconds?))).collect();
        Some(AnswerSummary {
            answered: answered.len(),
            cited: answered.iter().filter(|(_, answer)| !answer.valid_citations.is_empty()).count(),
            uncited_answerable: answerable.iter().filter(|(_, answer)| answer.valid_citations.is_empty()).count(),
            answerable: answerable.len(),
            supported: answerable.iter().filter(|(_, answer)| answer.supported).count(),
            invented_citations: answered.iter().map(|(_, answer)| answer.invented_citations.len()).sum(),
            answers_with_invented: answered.iter().filter(|(_, answer)| !answer.invented_citations.is_empty()).count(),
            unanswerable: unanswerable.len(),
            abstained_unanswerable: unanswerable.iter().filter(|(_, answer)| answer.abstained).count(),
            abstained_answerable: answerable.iter().filter(|(_, answer)| answer.abstained).count(),
            key_facts: with_facts.iter().map(|(_, a)| a.key_facts_found.len() + a.key_facts_missing.len()).sum(),
            key_facts_found: with_facts.iter().map(|(_, a)| a.key_facts_found.len()).sum(),
            complete_answers: with_facts.iter().filter(|(_, a)| a.key_facts_missing.is_empty()).count(),
            with_key_facts: with_facts.len(),
            key_facts_in_material: with_facts
                .iter()
                .filter_map(|(row, _)| row.material.as_ref())
                .map(|material| material.found.len())
                .sum(),
            leaks: answered.iter().filter(|(_, answer)| !answer.leaked.is_empty()).count(),
            fallbacks: answered.iter().filter(|(_, answer)| answer.fallback.is_some()).count(),
            chronology_cited: answered.iter().filter(|(_, answer)| answer.story_order.is_some()).count(),
            chronology_in_story_order: answered.iter().filter(|(_, answer)| answer.story_order == Some(true)).count(),
            arc_key_facts: arcs.iter().map(|(_, a)| a.key_facts_found.len() + a.key_facts_missing.len()).sum(),
            arc_key_facts_found: arcs.iter().map(|(_, a)| a.key_facts_found.len()).sum(),
            repeated_sentences: answered.iter().map(|(_, answer)| answer.repeated_sentences).sum(),
            cut_short: answered.iter().filter(|(_, answer)| answer.cut_short).count(),
            seconds_p50: percentile(&seconds, 0.5),
            seconds_p95: percentile(&seconds, 0.95),
            budgeted: budgeted.len(),
            over_budget: budgeted
                .iter()
                .filter(|(seconds, budget)| *seconds > budget * crate::oracle::DEADLINE_SLACK)
                .count(),
        })
    }
}

/// Key facts in the material the full pipeline shows the model, over every answerable
/// question that lists key facts (answered or not).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MaterialSummary {
    pub questions: usize,
    pub key_facts: usize,
    pub found: usize,
    /// Questions whose material holds every key fact.
    pub complete: usize,
    /// Questions whose material a time budget limited (the embedded model on a CPU).
    pub limited_by_time: usize,
    /// Mean tokens the material could take.
    pub mean_material_tokens: f64,
    /// (questions, key facts, found) by kind.
    pub by_kind: BTreeMap<QuestionKind, (usize, usize, usize)>,
}

impl MaterialSummary {
    fn over(rows: &[QuestionRow]) -> Option<MaterialSummary> {
        let measured: Vec<(&QuestionRow, &MaterialFacts)> = rows
            .iter()
            .filter(|row| row.answerable() && row.error.is_none())
            .filter_map(|row| row.material.as_ref().map(|material| (row, material)))
            .collect();
        if measured.is_empty() {
            return None;
        }
        let mut by_kind: BTreeMap<QuestionKind, (usize, usize, usize)> = BTreeMap::new();
        for (row, material) in &measured {
            let entry = by_kind.entry(row.kind).or_default();
            entry.0 += 1;
            entry.1 += material.found.len() + material.missing.len();
            entry.2 += material.found.len();
        }
        Some(MaterialSummary {
            questions: measured.len(),
            key_facts: measured.iter().map(|(_, m)| m.found.len() + m.missing.len()).sum(),
            found: measured.iter().map(|(_, m)| m.found.len()).sum(),
            complete: measured.iter().filter(|(_, m)| m.missing.is_empty()).count(),
            limited_by_time: measured.iter().filter(|(_, m)| m.limited_by == "time").count(),
            mean_material_tokens: measured.iter().map(|(_, m)| m.material_tokens as f64).sum::<f64>()
                / measured.len() as f64,
            by_kind,
        })
    }
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
            ("embed_query", |t| t.embed_query_ms),
            ("dense", |t| t.dense_ms),
            ("bm25", |t| t.bm25_ms),
            ("entity", |t| t.entity_ms),
            ("time", |t| t.time_ms),
            ("fuse", |t| t.fuse_ms),
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

    /// The tables for a terminal.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let run = &self.run;
        let _ = writeln!(
            out,
            "Oráculo eval: {} questions ({} failed) on {}\nembedder {}, chat model {}, k = {}, {:.0} s\n",
            self.questions, self.errors, run.campaign, run.embedder, run.chat_model, run.k, run.seconds
        );
        self.render_questions(&mut out);
        self.render_kinds(&mut out);
        self.render_ablations(&mut out);
        self.render_material(&mut out);
        self.render_answers(&mut out);
        self.render_latency(&mut out);
        let _ = writeln!(out, "\nThe bar: {}", self.design_bar);
        out
    }

    fn render_questions(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "{:5} {:12} {:>5} {:>6} {:>6}  {:14}  question / missing",
            "id", "kind", "pool", "fused", "chosen", "answer"
        );
        for row in &self.rows {
            if let Some(error) = &row.error {
                let _ = writeln!(out, "{:5} {:12} ERROR {}", row.id, row.kind.as_str(), shorten(error, 90));
                continue;
            }
            let n = distinct(&row.expected);
            let cell = |variant: &str, stage: fn(&Found) -> &Vec<String>| match row.variants.get(variant) {
                Some(found) if n > 0 => format!("{}/{}", stage(found).len(), n),
                Some(_) => "-".to_string(),
                None => "".to_string(),
            };
            let answer = match &row.answer {
                None => String::new(),
                Some(answer) => {
                    let cites = if answer.supported {
                        "cites"
                    } else if answer.valid_citations.is_empty() {
                        "uncited"
                    } else {
                        "other"
                    };
                    let facts = answer.key_facts_found.len() + answer.key_facts_missing.len();
                    let abstained = if answer.abstained { " no" } else { "" };
                    format!("{cites} {}/{facts}{abstained}", answer.key_facts_found.len())
                }
            };
            let _ = writeln!(
                out,
                "{:5} {:12} {:>5} {:>6} {:>6}  {:14}  {}",
                row.id,
                row.kind.as_str(),
                cell(FULL_PIPELINE, |f| &f.pool),
                cell(FUSION_ONLY, |f| &f.top),
                cell(FULL_PIPELINE, |f| &f.top),
                answer,
                shorten(&row.question, 70)
            );
            if let Some(found) = row.variants.get(FULL_PIPELINE) {
                let missing: Vec<&str> =
                    row.expected.iter().filter(|label| !found.top.contains(label)).map(String::as_str).collect();
                if !missing.is_empty() {
                    let _ = writeln!(out, "{:46}not chosen: {}", "", missing.join("; "));
                }
            }
            if !row.unknown_labels.is_empty() {
                let _ = writeln!(out, "{:46}NOT IN THE INDEX: {}", "", row.unknown_labels.join("; "));
            }
        }
        let _ = writeln!(
            out,
            "(pool: expected labels in the fused pool; fused: in the fusion's top k; chosen: in the rerank's k; \
answer: cites an expected note / key facts found / \"no\" = says it is not in the notes)\n"
        );
    }

    fn render_kinds(&self, out: &mut String) {
        let (Some(full), Some(fusion)) = (self.variant(FULL_PIPELINE), self.variant(FUSION_ONLY)) else { return };
        let _ = writeln!(
            out,
            "Retrieval by kind (hits: questions with an expected note in the set; recall: expected notes found)"
        );
        let _ = writeln!(
            out,
            "{:12} {:>3}  {:>7} {:>8} {:>8}  {:>7} {:>8} {:>8}",
            "kind", "n", "union", "fused@k", "rerank@k", "union", "fused@k", "rerank@k"
        );
        let line = |out: &mut String, name: &str, full: &VariantScore, fusion: &VariantScore| {
            let _ = writeln!(
                out,
                "{:12} {:>3}  {:>7} {:>8} {:>8}  {:>7.2} {:>8.2} {:>8.2}",
                name,
                full.questions,
                format!("{}/{}", full.pool_hits, full.questions),
                format!("{}/{}", fusion.top_hits, fusion.questions),
                format!("{}/{}", full.top_hits, full.questions),
                full.recall.pool,
                fusion.recall.top,
                full.recall.top,
            );
        };
        for (kind, score) in &full.by_kind {
            if let Some(fusion_score) = fusion.by_kind.get(kind) {
                line(out, kind.as_str(), score, fusion_score);
            }
        }
        line(out, "all", &full.overall, &fusion.overall);
        let _ = writeln!(out);
        self.render_time(out);
    }

    /// The time variant: hits in the final k with and without the time path.
    fn render_time(&self, out: &mut String) {
        let (Some(full), Some(untimed)) = (self.variant(FULL_PIPELINE), self.variant(WITHOUT_TIME)) else { return };
        let _ = writeln!(out, "Time path (hits in the final k and recall, with / without the time path)");
        let _ =
            writeln!(out, "{:12} {:>3}  {:>8} {:>8}  {:>6} {:>6}", "kind", "n", "with", "without", "with", "without");
        let line = |out: &mut String, name: &str, with: &VariantScore, without: &VariantScore| {
            let _ = writeln!(
                out,
                "{:12} {:>3}  {:>8} {:>8}  {:>6.2} {:>6.2}",
                name,
                with.questions,
                format!("{}/{}", with.top_hits, with.questions),
                format!("{}/{}", without.top_hits, without.questions),
                with.recall.top,
                without.recall.top,
            );
        };
        for (kind, score) in &full.by_kind {
            if let Some(without) = untimed.by_kind.get(kind) {
                line(out, kind.as_str(), score, without);
            }
        }
        line(out, "all", &full.overall, &untimed.overall);
        let _ = writeln!(out);
    }

    fn render_ablations(&self, out: &mut String) {
        let _ = writeln!(out, "Ablations (same questions, same index; arc: recall over arc questions' gold sessions)");
        let _ = writeln!(
            out,
            "{:42} {:>7} {:>7} {:>6} {:>6} {:>6} {:>7} {:>6}",
            "variant", "union", "top-k", "union", "top-k", "arc@k", "arc+sum", "pool"
        );
        for variant in &self.variants {
            let o = &variant.overall;
            let _ = writeln!(
                out,
                "{:42} {:>7} {:>7} {:>6.2} {:>6.2} {:>6.2} {:>7.2} {:>6.1}",
                shorten(&variant.name, 42),
                format!("{}/{}", o.pool_hits, o.questions),
                format!("{}/{}", o.top_hits, o.questions),
                o.recall.pool,
                o.recall.top,
                variant.arc.recall.top,
                variant.arc.recall.context,
                o.mean_pool_size,
            );
        }
        if let Some(full) = self.variant(FULL_PIPELINE) {
            let _ = writeln!(
                out,
                "arc coverage, full pipeline: pool {:.2}, chosen {:.2}, shown in full {:.2}, full + summaries {:.2}",
                full.arc.recall.pool, full.arc.recall.top, full.arc.recall.full, full.arc.recall.context
            );
        }
        let _ = writeln!(out);
    }

    fn render_material(&self, out: &mut String) {
        let Some(m) = &self.material else { return };
        let _ = writeln!(
            out,
            "Key facts in the material shown to the model ({} answerable questions; {} planned by time; \
material up to {:.0} tokens on average)",
            m.questions, m.limited_by_time, m.mean_material_tokens
        );
        for (kind, (questions, facts, found)) in &m.by_kind {
            let _ = writeln!(
                out,
                "{:12} {:>3}  {:>7}  {:>4.0}%",
                kind.as_str(),
                questions,
                format!("{found}/{facts}"),
                100.0 * ratio(*found, *facts)
            );
        }
        let _ = writeln!(
            out,
            "{:12} {:>3}  {:>7}  {:>4.0}%; {} of {} questions shown every key fact\n",
            "all",
            m.questions,
            format!("{}/{}", m.found, m.key_facts),
            100.0 * ratio(m.found, m.key_facts),
            m.complete,
            m.questions
        );
    }

    fn render_answers(&self, out: &mut String) {
        let Some(a) = &self.answers else {
            let _ = writeln!(out, "Answers: not generated (no chat model, or --retrieval-only)\n");
            return;
        };
        let _ = writeln!(out, "Answers ({} generated)", a.answered);
        let _ = writeln!(
            out,
            "  citation rate        {}/{} ({:.0}%) answers with a valid citation",
            a.cited,
            a.answered,
            100.0 * ratio(a.cited, a.answered)
        );
        let _ = writeln!(out, "  uncited answerable   {}/{}", a.uncited_answerable, a.answerable);
        let _ = writeln!(out, "  cites an expected    {}/{}", a.supported, a.answerable);
        let _ = writeln!(out, "  invented citations   {} in {} answers", a.invented_citations, a.answers_with_invented);
        let _ = writeln!(out, "  extractive fallbacks {}/{}", a.fallbacks, a.answered);
        let _ = writeln!(
            out,
            "  chronology in order  {}/{} chronology answers citing two sessions or more",
            a.chronology_in_story_order, a.chronology_cited
        );
        let _ = writeln!(
            out,
            "  abstention           {}/{} unanswerable (and {} answerable said part was missing)",
            a.abstained_unanswerable, a.unanswerable, a.abstained_answerable
        );
        let _ = writeln!(
            out,
            "  key facts            {}/{} ({:.0}%); {} of {} answers hold every key fact; the material shown \
held {}/{}",
            a.key_facts_found,
            a.key_facts,
            100.0 * ratio(a.key_facts_found, a.key_facts),
            a.complete_answers,
            a.with_key_facts,
            a.key_facts_in_material,
            a.key_facts
        );
        let _ = writeln!(
            out,
            "  arc key facts        {}/{} ({:.0}%)",
            a.arc_key_facts_found,
            a.arc_key_facts,
            100.0 * ratio(a.arc_key_facts_found, a.arc_key_facts)
        );
        let _ = writeln!(out, "  repeated sentences   {} in all answers", a.repeated_sentences);
        if let (Some(p50), Some(p95)) = (a.seconds_p50, a.seconds_p95) {
            let _ = writeln!(
                out,
                "  answer seconds       p50 {p50:.1}  p95 {p95:.1}; {} of {} planned for a time budget took over it by \
more than a fifth; {} stopped at the deadline",
                a.over_budget, a.budgeted, a.cut_short
            );
        }
        let _ = writeln!(out, "  secrets leaked       {} answers\n", a.leaks);
    }

    fn render_latency(&self, out: &mut String) {
        if self.latency.is_empty() {
            return;
        }
        let _ = writeln!(out, "Latency per stage, full pipeline (ms)");
        for (stage, p) in &self.latency {
            let _ = writeln!(out, "  {:12} p50 {:>10.1}  p95 {:>10.1}  (n = {})", stage, p.p50_ms, p.p95_ms, p.n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cited_sessions_in_story_order() {
        use crate::corpus::SessionNumber;
        let cited = |labels: &[(&str, Option<u32>)]| -> Vec<(String, Option<SessionNumber>)> {
            labels.iter().map(|(label, n)| (label.to_string(), n.map(SessionNumber))).collect()
        };
        let both = cited(&[("Sesión 12", Some(12)), ("Sesión 1", Some(1))]);
        assert_eq!(cited_in_story_order("Primero [Sesión 1], luego [Sesión 12].", &both), Some(true));
        assert_eq!(cited_in_story_order("Primero [Sesión 12], luego [Sesión 1].", &both), Some(false));
        // «Sesión 1» is not found inside «Sesión 12».
        assert_eq!(cited_in_story_order("Todo [Sesión 12]; y al final [Sesión 1].", &both), Some(false));
        assert_eq!(cited_in_story_order("Juntas [Sesión 1; Sesión 12].", &both), Some(true));
        let one = cited(&[("Sesión 3", Some(3)), ("Ficha: Baika", None)]);
        assert_eq!(cited_in_story_order("[Ficha: Baika] y [Sesión 3]", &one), None);
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn found(pool: &[&str], top: &[&str], context: &[&str]) -> Found {
        Found { pool: strings(pool), top: strings(top), full: strings(top), context: strings(context), pool_size: 30 }
    }

    fn row(id: &str, kind: QuestionKind, expected: &[&str], variants: &[(&str, Found)]) -> QuestionRow {
        QuestionRow {
            id: id.into(),
            kind,
            question: format!("question {id}"),
            expected: strings(expected),
            unknown_labels: Vec::new(),
            variants: variants.iter().map(|(name, found)| (name.to_string(), found.clone())).collect(),
            search_query: String::new(),
            rerank: None,
            answer: None,
            paths: None,
            material: None,
            timings: None,
            error: None,
        }
    }

    fn question(kind: QuestionKind, expected: &[&str], key_facts: &[&str]) -> EvalQuestion {
        EvalQuestion {
            id: "q".into(),
            question: "q".into(),
            kind,
            expected: strings(expected),
            key_facts: strings(key_facts),
            forbidden: Vec::new(),
            history: Vec::new(),
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
    fn hits_count_questions_and_recall_counts_labels() {
        let rows = vec![
            row(
                "a",
                QuestionKind::Fact,
                &["Sesión 1"],
                &[(FUSION_ONLY, found(&["Sesión 1"], &["Sesión 1"], &["Sesión 1"]))],
            ),
            row("b", QuestionKind::Fact, &["Sesión 2"], &[(FUSION_ONLY, found(&[], &[], &[]))]),
            row(
                "c",
                QuestionKind::Arc,
                &["Sesión 6", "Sesión 7", "Sesión 8", "Sesión 9"],
                &[(
                    FUSION_ONLY,
                    found(&["Sesión 6", "Sesión 7", "Sesión 8"], &["Sesión 6"], &["Sesión 6", "Sesión 7"]),
                )],
            ),
            // Unanswerable: no labels, counted in neither hits nor recall.
            row("d", QuestionKind::Unanswerable, &[], &[(FUSION_ONLY, found(&[], &[], &[]))]),
        ];
        let report = EvalReport::from_rows(RunInfo::default(), &strings(&[FUSION_ONLY]), rows);
        let fusion = report.variant(FUSION_ONLY).unwrap();
        assert_eq!(fusion.overall.questions, 3);
        assert_eq!((fusion.overall.pool_hits, fusion.overall.top_hits), (2, 2));
        // 1 + 0 + 3 of 1 + 1 + 4 labels in the pool; 1 + 0 + 1 in the top k.
        assert!((fusion.overall.recall.pool - 4.0 / 6.0).abs() < 1e-9);
        assert!((fusion.overall.recall.top - 2.0 / 6.0).abs() < 1e-9);
        assert_eq!(fusion.arc.recall.pool, 0.75);
        assert_eq!(fusion.arc.recall.top, 0.25);
        assert_eq!(fusion.arc.recall.context, 0.5);
        assert_eq!(fusion.by_kind[&QuestionKind::Fact].questions, 2);
        assert!(!fusion.by_kind.contains_key(&QuestionKind::Unanswerable));
        assert_eq!(report.questions_by_kind[&QuestionKind::Unanswerable], 1);
        let table = report.render();
        assert!(table.contains("2/3"), "{table}");
    }

    #[test]
    fn a_failed_question_scores_nothing() {
        let mut failed = row("a", QuestionKind::Fact, &["Sesión 1"], &[(FUSION_ONLY, found(&["Sesión 1"], &[], &[]))]);
        failed.error = Some("the model failed".into());
        let report = EvalReport::from_rows(RunInfo::default(), &strings(&[FUSION_ONLY]), vec![failed]);
        assert_eq!(report.errors, 1);
        assert_eq!(report.variant(FUSION_ONLY).unwrap().overall.questions, 0);
        assert!(report.render().contains("ERROR"));
    }

    #[test]
    fn answers_score_citations_abstention_and_key_facts() {
        let fact = question(QuestionKind::Fact, &["Sesión 22"], &["Gaspar", "Pósito|Posito", "Nela"]);
        let good =
            AnswerScore::new(&fact, "Gaspar cayó defendiendo el Pósito [Sesión 22].", strings(&["Sesión 22"]), vec![]);
        assert!(good.supported && !good.abstained);
        assert_eq!(good.key_facts_found, strings(&["Gaspar", "Pósito|Posito"]));
        assert_eq!(good.key_facts_missing, strings(&["Nela"]));
        let wrong = AnswerScore::new(
            &fact,
            "Lo mató un dragón [Sesión 3] [Sesión 99].",
            strings(&["Sesión 3"]),
            strings(&["Sesión 99"]),
        );
        assert!(!wrong.supported);
        let unanswerable = question(QuestionKind::Unanswerable, &[], &[]);
        let abstained = AnswerScore::new(&unanswerable, "Las notas no mencionan ningún torneo.", vec![], vec![]);
        assert!(abstained.abstained);
        let mut secret = question(QuestionKind::Unanswerable, &[], &[]);
        secret.forbidden = strings(&["Ramiro"]);
        assert_eq!(AnswerScore::new(&secret, "Su padre fue RAMIRO.", vec![], vec![]).leaked, strings(&["Ramiro"]));
        assert!(AnswerScore::new(&secret, "Las notas no lo dicen.", vec![], vec![]).leaked.is_empty());

        let mut rows = vec![
            row("a", QuestionKind::Fact, &["Sesión 22"], &[]),
            row("b", QuestionKind::Fact, &["Sesión 22"], &[]),
            row("c", QuestionKind::Unanswerable, &[], &[]),
        ];
        rows[0].answer = Some(good);
        rows[1].answer = Some(wrong);
        rows[2].answer = Some(abstained);
        let summary = EvalReport::from_rows(RunInfo::default(), &[], rows).answers.unwrap();
        assert_eq!((summary.answered, summary.cited, summary.supported, summary.answerable), (3, 2, 1, 2));
        assert_eq!((summary.uncited_answerable, summary.invented_citations, summary.answers_with_invented), (0, 1, 1));
        assert_eq!((summary.abstained_unanswerable, summary.unanswerable, summary.abstained_answerable), (1, 1, 0));
        // Key facts over the answers that list them: 2 of 3, then 0 of 3.
        assert_eq!(
            (summary.key_facts_found, summary.key_facts, summary.complete_answers, summary.with_key_facts),
            (2, 6, 0, 2)
        );
    }

    #[test]
    fn key_facts_in_the_material_tell_a_lost_fact_from_an_unwritten_one() {
        let fact = question(QuestionKind::Fact, &["Sesión 1"], &["300|trescientas", "100|cien"]);
        // The material held both amounts (one spelled out); the answer wrote one.
        let material = "## Sesión 1\nOfrece trescientas coronas, cien por adelantado.";
        let shown = MaterialFacts::new(&fact, material, "time", 1200).unwrap();
        assert_eq!((shown.found.len(), shown.missing.len()), (2, 0));
        let lost = MaterialFacts::new(&fact, "## Sesión 1\n(…) Ofrece 300 coronas (…)", "time", 600).unwrap();
        assert_eq!(lost.missing, strings(&["100|cien"]));
        // No key facts, nothing to measure.
        assert!(MaterialFacts::new(&question(QuestionKind::Fact, &["Sesión 1"], &[]), material, "window", 9).is_none());

        let mut rows = vec![
            row("a", QuestionKind::Fact, &["Sesión 1"], &[]),
            row("b", QuestionKind::Alias, &["Sesión 1"], &[]),
            row("c", QuestionKind::Unanswerable, &[], &[]),
        ];
        rows[0].material = Some(shown);
        rows[0].answer =
            Some(AnswerScore::new(&fact, "Ofreció 300 coronas [Sesión 1].", strings(&["Sesión 1"]), vec![]));
        rows[1].material = Some(lost);
        // An unanswerable question's material is never counted, whatever it holds.
        rows[2].material = MaterialFacts::new(&fact, material, "time", 1200);
        let report = EvalReport::from_rows(RunInfo::default(), &[], rows);
        let summary = report.material.clone().unwrap();
        assert_eq!((summary.questions, summary.key_facts, summary.found, summary.complete), (2, 4, 3, 1));
        assert_eq!(summary.limited_by_time, 2);
        assert_eq!(summary.by_kind[&QuestionKind::Alias], (1, 2, 1));
        // The answered question wrote 1 of the 2 facts its material held.
        let answers = report.answers.clone().unwrap();
        assert_eq!((answers.key_facts_found, answers.key_facts_in_material, answers.key_facts), (1, 2, 2));
        assert!(report.render().contains("the material shown held 2/2"), "{}", report.render());
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
