//! Evaluation: a question bank (see `eval/README.md`) scored against one campaign's index.
//!
//! - [`eval_retrieval`]: no chat model. Per question, runs [`crate::retrieve::search`] as a
//!   player and scores recall of the expected labels in the fused pool and in its first `k`
//!   (the set the model would see without a rerank).
//! - [`eval_answers`]: the whole oracle. Scores the rerank's choice (expected labels among the
//!   fragments shown in full), whether the answer cites an expected note, invented citations,
//!   uncited answers and time per answer.
//!
//! Recall is micro-averaged: found expected labels over all expected labels, so an arc
//! question with three sessions weighs three times a single fact. The scoring is pure
//! functions over rows, tested below without an index.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::oracle::{Answer, AskRequest, Oracle};
use crate::retrieve::{Audience, SearchRequest, Turn};

/// What a question tests (see `eval/README.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuestionKind {
    /// One note answers it.
    Fact,
    /// Several sessions together answer it.
    Arc,
    /// It leans on `history`.
    Followup,
}

impl QuestionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionKind::Fact => "fact",
            QuestionKind::Arc => "arc",
            QuestionKind::Followup => "followup",
        }
    }
}

/// One question of a bank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalQuestion {
    pub question: String,
    /// Labels, exactly as `oraculo sources` prints them, of the notes that hold the answer.
    pub expected: Vec<String>,
    pub kind: QuestionKind,
    /// Earlier turns, for follow-ups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Turn>,
}

/// Reads and checks a bank: a JSON list of [`EvalQuestion`].
pub fn load_bank(path: impl AsRef<Path>) -> anyhow::Result<Vec<EvalQuestion>> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the bank {}", path.display()))?;
    let bank: Vec<EvalQuestion> =
        serde_json::from_str(&text).with_context(|| format!("parsing the bank {}", path.display()))?;
    check_bank(&bank).with_context(|| format!("checking the bank {}", path.display()))?;
    Ok(bank)
}

/// A bank must have questions, each non-empty with at least one expected label, and every
/// follow-up must carry history.
fn check_bank(bank: &[EvalQuestion]) -> anyhow::Result<()> {
    anyhow::ensure!(!bank.is_empty(), "the bank has no questions");
    for (n, question) in bank.iter().enumerate() {
        let n = n + 1;
        anyhow::ensure!(!question.question.trim().is_empty(), "question {n} is empty");
        anyhow::ensure!(!question.expected.is_empty(), "question {n} lists no expected label");
        anyhow::ensure!(
            question.expected.iter().all(|label| !label.trim().is_empty()),
            "question {n} has an empty expected label"
        );
        if question.kind == QuestionKind::Followup {
            anyhow::ensure!(!question.history.is_empty(), "question {n} is a follow-up without history");
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Scoring: pure.

/// The expected labels that occur among `labels`, in the bank's order, without repeats.
pub fn labels_found<'a>(expected: &[String], labels: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let present: BTreeSet<&str> = labels.into_iter().collect();
    let mut found: Vec<String> = Vec::new();
    for label in expected {
        if present.contains(label.as_str()) && !found.contains(label) {
            found.push(label.clone());
        }
    }
    found
}

/// `part / whole`, and 0 when there is no whole.
pub fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 / whole as f64 }
}

/// Micro-averaged recall over rows: found labels over expected labels, repeats ignored.
fn micro_recall<'a>(rows: impl IntoIterator<Item = (&'a [String], &'a [String])>) -> f64 {
    let (found, expected) = rows.into_iter().fold((0, 0), |(found, expected), (e, f)| {
        (found + f.len(), expected + e.iter().collect::<BTreeSet<_>>().len())
    });
    ratio(found, expected)
}

/// Recall of one kind of question (or of all of them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievalScore {
    pub questions: usize,
    pub expected_labels: usize,
    pub pool_recall: f64,
    pub top_k_recall: f64,
    /// Questions with every expected label in the pool.
    pub complete_in_pool: usize,
}

/// One question's retrieval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievalRow {
    pub question: String,
    pub kind: QuestionKind,
    pub expected: Vec<String>,
    pub found_in_pool: Vec<String>,
    pub found_in_top_k: Vec<String>,
    pub pool_size: usize,
    /// Expected labels the index does not hold at all: a typo in the bank, or a note not ingested.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unknown_labels: Vec<String>,
    pub search_query: String,
    pub followup_expanded: bool,
}

/// What `oraculo eval` prints (as a table, or as JSON).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RetrievalReport {
    pub k: usize,
    pub overall: RetrievalScore,
    pub by_kind: BTreeMap<QuestionKind, RetrievalScore>,
    pub rows: Vec<RetrievalRow>,
}

fn retrieval_score(rows: &[&RetrievalRow]) -> RetrievalScore {
    RetrievalScore {
        questions: rows.len(),
        expected_labels: rows.iter().map(|row| row.expected.iter().collect::<BTreeSet<_>>().len()).sum(),
        pool_recall: micro_recall(rows.iter().map(|row| (row.expected.as_slice(), row.found_in_pool.as_slice()))),
        top_k_recall: micro_recall(rows.iter().map(|row| (row.expected.as_slice(), row.found_in_top_k.as_slice()))),
        complete_in_pool: rows
            .iter()
            .filter(|row| row.found_in_pool.len() == row.expected.iter().collect::<BTreeSet<_>>().len())
            .count(),
    }
}

impl RetrievalReport {
    /// Scores the rows, overall and per kind.
    pub fn from_rows(k: usize, rows: Vec<RetrievalRow>) -> RetrievalReport {
        let all: Vec<&RetrievalRow> = rows.iter().collect();
        let mut kinds: BTreeMap<QuestionKind, Vec<&RetrievalRow>> = BTreeMap::new();
        for row in &rows {
            kinds.entry(row.kind).or_default().push(row);
        }
        let by_kind = kinds.into_iter().map(|(kind, rows)| (kind, retrieval_score(&rows))).collect();
        RetrievalReport { k, overall: retrieval_score(&all), by_kind, rows }
    }

    /// A table for a terminal: one line per question, then the totals.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ =
            writeln!(out, "{:>3}  {:8}  {:>5}  {:>6}  {:>4}  question / missing", "#", "kind", "pool", "top-k", "size");
        for (n, row) in self.rows.iter().enumerate() {
            let expected = row.expected.iter().collect::<BTreeSet<_>>().len();
            let _ = writeln!(
                out,
                "{:>3}  {:8}  {:>5}  {:>6}  {:>4}  {}",
                n + 1,
                row.kind.as_str(),
                format!("{}/{}", row.found_in_pool.len(), expected),
                format!("{}/{}", row.found_in_top_k.len(), expected),
                row.pool_size,
                truncate(&row.question, 70),
            );
            let missing_pool: Vec<&str> =
                row.expected.iter().filter(|l| !row.found_in_pool.contains(l)).map(String::as_str).collect();
            let missing_top: Vec<&str> = row
                .expected
                .iter()
                .filter(|l| row.found_in_pool.contains(l) && !row.found_in_top_k.contains(l))
                .map(String::as_str)
                .collect();
            if !missing_pool.is_empty() {
                let _ = writeln!(out, "{:38}not in pool: {}", "", missing_pool.join("; "));
            }
            if !missing_top.is_empty() {
                let _ = writeln!(out, "{:38}pool, not top-{}: {}", "", self.k, missing_top.join("; "));
            }
            if !row.unknown_labels.is_empty() {
                let _ = writeln!(out, "{:38}NOT IN THE INDEX: {}", "", row.unknown_labels.join("; "));
            }
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:10}  {:>9}  {:>8}  {:>11}  {:>11}  {:>8}",
            "", "questions", "expected", "pool recall", "top-k recall", "complete"
        );
        let mut line = |name: &str, score: &RetrievalScore| {
            let _ = writeln!(
                out,
                "{:10}  {:>9}  {:>8}  {:>10.1}%  {:>11.1}%  {:>8}",
                name,
                score.questions,
                score.expected_labels,
                score.pool_recall * 100.0,
                score.top_k_recall * 100.0,
                score.complete_in_pool,
            );
        };
        for (kind, score) in &self.by_kind {
            line(kind.as_str(), score);
        }
        line("all", &self.overall);
        let _ = writeln!(out, "(top-k: the first {} of the fusion order, before any rerank)", self.k);
        out
    }
}

/// One question's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerRow {
    pub question: String,
    pub kind: QuestionKind,
    pub expected: Vec<String>,
    /// Expected labels among the fragments shown in full (the rerank's choice).
    pub found_in_shown: Vec<String>,
    /// Labels the answer cites that were shown (valid citations).
    pub valid_citations: Vec<String>,
    pub invented_citations: Vec<String>,
    pub seconds: f64,
    pub pool_size: usize,
    /// Set when the oracle failed on this question; such a row scores nothing but time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl AnswerRow {
    /// Whether a valid citation names an expected note.
    pub fn supported(&self) -> bool {
        self.valid_citations.iter().any(|label| self.expected.contains(label))
    }
}

/// What `oraculo eval --answers` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerReport {
    pub questions: usize,
    /// Questions the oracle failed on (not counted in the ratios below).
    pub errors: usize,
    /// Expected labels among the fragments shown in full, micro-averaged.
    pub shown_recall: f64,
    pub shown_recall_by_kind: BTreeMap<QuestionKind, f64>,
    /// Share of answers whose valid citations include at least one expected label.
    pub citation_support: f64,
    /// Invented citations (labels cited but not shown), per answer.
    pub invented_per_answer: f64,
    /// Answers with no valid citation (none at all, or only invented ones).
    pub uncited_answers: usize,
    pub mean_seconds: f64,
    pub rows: Vec<AnswerRow>,
}

impl AnswerReport {
    pub fn from_rows(rows: Vec<AnswerRow>) -> AnswerReport {
        let answered: Vec<&AnswerRow> = rows.iter().filter(|row| row.error.is_none()).collect();
        let mut kinds: BTreeMap<QuestionKind, Vec<&AnswerRow>> = BTreeMap::new();
        for row in &answered {
            kinds.entry(row.kind).or_default().push(row);
        }
        let invented: usize = answered.iter().map(|row| row.invented_citations.len()).sum();
        AnswerReport {
            questions: rows.len(),
            errors: rows.len() - answered.len(),
            shown_recall: shown_recall(&answered),
            shown_recall_by_kind: kinds.iter().map(|(kind, rows)| (*kind, shown_recall(rows))).collect(),
            citation_support: ratio(answered.iter().filter(|row| row.supported()).count(), answered.len()),
            invented_per_answer: ratio(invented, answered.len()),
            uncited_answers: answered.iter().filter(|row| row.valid_citations.is_empty()).count(),
            mean_seconds: if rows.is_empty() {
                0.0
            } else {
                rows.iter().map(|row| row.seconds).sum::<f64>() / rows.len() as f64
            },
            rows,
        }
    }

    /// A table for a terminal: one line per question, then the totals.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:>3}  {:8}  {:>5}  {:>5}  {:>8}  {:>6}  question",
            "#", "kind", "shown", "cites", "invented", "secs"
        );
        for (n, row) in self.rows.iter().enumerate() {
            if let Some(error) = &row.error {
                let _ = writeln!(
                    out,
                    "{:>3}  {:8}  ERROR {}  {}",
                    n + 1,
                    row.kind.as_str(),
                    truncate(error, 60),
                    truncate(&row.question, 50)
                );
                continue;
            }
            let expected = row.expected.iter().collect::<BTreeSet<_>>().len();
            let cites = if row.supported() {
                "yes"
            } else if row.valid_citations.is_empty() {
                "none"
            } else {
                "other"
            };
            let _ = writeln!(
                out,
                "{:>3}  {:8}  {:>5}  {:>5}  {:>8}  {:>6.1}  {}",
                n + 1,
                row.kind.as_str(),
                format!("{}/{}", row.found_in_shown.len(), expected),
                cites,
                row.invented_citations.len(),
                row.seconds,
                truncate(&row.question, 70),
            );
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "questions            {} ({} failed)", self.questions, self.errors);
        let _ = writeln!(
            out,
            "shown recall         {:.1}% (expected labels among the fragments shown in full)",
            self.shown_recall * 100.0
        );
        for (kind, recall) in &self.shown_recall_by_kind {
            let _ = writeln!(out, "  {:18} {:.1}%", kind.as_str(), recall * 100.0);
        }
        let _ = writeln!(
            out,
            "citation support     {:.1}% (answers citing an expected note)",
            self.citation_support * 100.0
        );
        let _ = writeln!(out, "invented per answer  {:.2}", self.invented_per_answer);
        let _ = writeln!(out, "uncited answers      {}", self.uncited_answers);
        let _ = writeln!(out, "mean seconds         {:.1}", self.mean_seconds);
        out
    }
}

/// Micro-averaged recall of the expected labels among the fragments shown in full.
fn shown_recall(rows: &[&AnswerRow]) -> f64 {
    micro_recall(rows.iter().map(|row| (row.expected.as_slice(), row.found_in_shown.as_slice())))
}

/// At most `max` characters, with an ellipsis when cut.
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

// ---------------------------------------------------------------------------------------------
// Running: I/O.

/// Searches every question as a player and scores the pools. `k` is the answer-set size the
/// pool is built for, and the size of the "top-k" cut of the fusion order.
pub async fn eval_retrieval(
    index: &crate::index::Index,
    compendium: &crate::retrieve::CompendiumIndex,
    embedder: &dyn crate::llm::Embedder,
    bank: &[EvalQuestion],
    k: usize,
) -> anyhow::Result<RetrievalReport> {
    let known: BTreeSet<String> = index.store.sources()?.into_iter().map(|source| source.label).collect();
    let mut rows = Vec::with_capacity(bank.len());
    for (n, question) in bank.iter().enumerate() {
        let request =
            SearchRequest { question: &question.question, history: &question.history, audience: Audience::Player, k };
        let result = crate::retrieve::search(index, compendium, embedder, &request)
            .await
            .with_context(|| format!("searching question {}: {}", n + 1, question.question))?;
        let labels = || result.candidates.iter().map(|candidate| candidate.label.as_str());
        rows.push(RetrievalRow {
            question: question.question.clone(),
            kind: question.kind,
            expected: question.expected.clone(),
            found_in_pool: labels_found(&question.expected, labels()),
            found_in_top_k: labels_found(&question.expected, labels().take(k)),
            pool_size: result.candidates.len(),
            unknown_labels: question.expected.iter().filter(|label| !known.contains(*label)).cloned().collect(),
            search_query: result.search_query.clone(),
            followup_expanded: result.followup_expanded,
        });
    }
    Ok(RetrievalReport::from_rows(k, rows))
}

/// Asks the oracle every question as a player, one at a time, and scores the answers. A
/// question the oracle fails on becomes an error row; the run goes on.
pub async fn eval_answers(oracle: &Oracle, bank: &[EvalQuestion]) -> anyhow::Result<AnswerReport> {
    // Fail fast when there is no index at all, rather than with one error row per question.
    oracle.open_index().await?;
    let mut rows = Vec::with_capacity(bank.len());
    for (n, question) in bank.iter().enumerate() {
        let request =
            AskRequest { question: &question.question, history: &question.history, audience: Audience::Player };
        let started = Instant::now();
        let result = oracle.ask(&request, None).await;
        let seconds = started.elapsed().as_secs_f64();
        let row = match result {
            Ok(answer) => answer_row(question, &answer, seconds),
            Err(error) => {
                tracing::warn!(question = n + 1, %error, "eval: the oracle failed");
                AnswerRow {
                    question: question.question.clone(),
                    kind: question.kind,
                    expected: question.expected.clone(),
                    found_in_shown: Vec::new(),
                    valid_citations: Vec::new(),
                    invented_citations: Vec::new(),
                    seconds,
                    pool_size: 0,
                    error: Some(error.to_string()),
                }
            }
        };
        tracing::info!(question = n + 1, of = bank.len(), seconds, "eval: answered");
        rows.push(row);
    }
    Ok(AnswerReport::from_rows(rows))
}

/// Scores one answer against its question.
pub fn answer_row(question: &EvalQuestion, answer: &Answer, seconds: f64) -> AnswerRow {
    let mut valid_citations: Vec<String> = Vec::new();
    for citation in answer.citations.iter().filter(|citation| citation.valid) {
        if !valid_citations.contains(&citation.label) {
            valid_citations.push(citation.label.clone());
        }
    }
    AnswerRow {
        question: question.question.clone(),
        kind: question.kind,
        expected: question.expected.clone(),
        found_in_shown: labels_found(&question.expected, answer.fragments_shown.iter().map(|s| s.label.as_str())),
        valid_citations,
        invented_citations: answer.invented_citations.clone(),
        seconds,
        pool_size: answer.pool_size,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn retrieval_row(kind: QuestionKind, expected: &[&str], pool: &[&str], top: &[&str]) -> RetrievalRow {
        RetrievalRow {
            question: "q".into(),
            kind,
            expected: strings(expected),
            found_in_pool: strings(pool),
            found_in_top_k: strings(top),
            pool_size: 40,
            unknown_labels: Vec::new(),
            search_query: "q".into(),
            followup_expanded: false,
        }
    }

    fn answer(expected: &[&str], shown: &[&str], valid: &[&str], invented: &[&str], seconds: f64) -> AnswerRow {
        AnswerRow {
            question: "q".into(),
            kind: QuestionKind::Fact,
            expected: strings(expected),
            found_in_shown: strings(shown),
            valid_citations: strings(valid),
            invented_citations: strings(invented),
            seconds,
            pool_size: 40,
            error: None,
        }
    }

    #[test]
    fn labels_found_keeps_bank_order_and_drops_repeats() {
        let expected = strings(&["Sesión 7", "Sesión 6", "Sesión 8"]);
        // A session cut in parts appears several times in a pool.
        let pool = ["Sesión 6", "Ficha: Madre Ulva", "Sesión 6", "Sesión 7"];
        assert_eq!(labels_found(&expected, pool), strings(&["Sesión 7", "Sesión 6"]));
        assert_eq!(labels_found(&expected, pool.into_iter().take(2)), strings(&["Sesión 6"]));
        assert!(labels_found(&expected, [] as [&str; 0]).is_empty());
        // Exact match only: a prefix is not the label.
        assert!(labels_found(&strings(&["Sesión 1"]), ["Sesión 12"]).is_empty());
    }

    #[test]
    fn ratio_of_nothing_is_zero() {
        assert_eq!(ratio(0, 0), 0.0);
        assert_eq!(ratio(3, 4), 0.75);
    }

    #[test]
    fn retrieval_recall_is_micro_averaged_and_split_by_kind() {
        let rows = vec![
            retrieval_row(QuestionKind::Fact, &["Sesión 1"], &["Sesión 1"], &["Sesión 1"]),
            retrieval_row(QuestionKind::Fact, &["Sesión 2"], &[], &[]),
            retrieval_row(
                QuestionKind::Arc,
                &["Sesión 6", "Sesión 7", "Sesión 8"],
                &["Sesión 6", "Sesión 7"],
                &["Sesión 6"],
            ),
        ];
        let report = RetrievalReport::from_rows(8, rows);
        // 1 + 0 + 2 of 1 + 1 + 3 in the pool; 1 + 0 + 1 of 5 in the top k.
        assert_eq!(report.overall.questions, 3);
        assert_eq!(report.overall.expected_labels, 5);
        assert!((report.overall.pool_recall - 0.6).abs() < 1e-9);
        assert!((report.overall.top_k_recall - 0.4).abs() < 1e-9);
        assert_eq!(report.overall.complete_in_pool, 1);
        let fact = &report.by_kind[&QuestionKind::Fact];
        assert_eq!((fact.questions, fact.pool_recall, fact.top_k_recall), (2, 0.5, 0.5));
        let arc = &report.by_kind[&QuestionKind::Arc];
        assert!((arc.pool_recall - 2.0 / 3.0).abs() < 1e-9);
        assert!((arc.top_k_recall - 1.0 / 3.0).abs() < 1e-9);
        assert!(!report.by_kind.contains_key(&QuestionKind::Followup));
        let table = report.render();
        assert!(table.contains("not in pool: Sesión 8"), "{table}");
        assert!(table.contains("pool, not top-8: Sesión 7"), "{table}");
        assert!(table.contains("60.0%"), "{table}");
    }

    #[test]
    fn a_repeated_expected_label_counts_once() {
        let report = RetrievalReport::from_rows(
            8,
            vec![retrieval_row(QuestionKind::Fact, &["Sesión 1", "Sesión 1"], &["Sesión 1"], &[])],
        );
        assert_eq!(report.overall.expected_labels, 1);
        assert_eq!(report.overall.pool_recall, 1.0);
        assert_eq!(report.overall.complete_in_pool, 1);
    }

    #[test]
    fn answer_scores_support_inventions_and_time() {
        let mut failed = answer(&["Sesión 3"], &[], &[], &[], 2.0);
        failed.error = Some("the language model failed".into());
        let rows = vec![
            // Shown and cited.
            answer(&["Sesión 6", "Sesión 7"], &["Sesión 6", "Sesión 7"], &["Sesión 7"], &[], 10.0),
            // Shown, but it cites another note and invents one.
            answer(&["Sesión 2"], &["Sesión 2"], &["Sesión 1"], &["Sesión 9"], 20.0),
            // Not shown; only invented citations: uncited.
            answer(&["Mundo: Villaescarcha"], &[], &[], &["Sesión 10", "Sesión 11"], 30.0),
            failed,
        ];
        let report = AnswerReport::from_rows(rows);
        assert_eq!(report.questions, 4);
        assert_eq!(report.errors, 1);
        // 2 + 1 + 0 of 2 + 1 + 1 expected labels, over the three answered questions.
        assert!((report.shown_recall - 0.75).abs() < 1e-9);
        assert!((report.citation_support - 1.0 / 3.0).abs() < 1e-9);
        assert!((report.invented_per_answer - 1.0).abs() < 1e-9);
        assert_eq!(report.uncited_answers, 1);
        // Time counts every question asked, failures included.
        assert!((report.mean_seconds - 15.5).abs() < 1e-9);
        assert_eq!(report.shown_recall_by_kind[&QuestionKind::Fact], report.shown_recall);
        let table = report.render();
        assert!(table.contains("ERROR"), "{table}");
        assert!(table.contains("33.3%"), "{table}");
    }

    #[test]
    fn an_empty_answer_report_is_zeros() {
        let report = AnswerReport::from_rows(Vec::new());
        assert_eq!(
            (report.shown_recall, report.citation_support, report.invented_per_answer, report.mean_seconds),
            (0.0, 0.0, 0.0, 0.0)
        );
    }

    #[test]
    fn bank_checks() {
        let parse = |json: &str| serde_json::from_str::<Vec<EvalQuestion>>(json);
        let ok = parse(
            r#"[{"question": "¿y luego?", "expected": ["Sesión 7"], "kind": "followup",
                 "history": [{"role": "user", "content": "¿Qué pasó en el lago?"}, {"role": "assistant", "content": "Cantaba."}]}]"#,
        )
        .unwrap();
        assert_eq!(ok[0].history.len(), 2);
        check_bank(&ok).unwrap();
        // A typo in a field name is an error, not a silently empty field.
        assert!(parse(r#"[{"question": "q", "expect": ["Sesión 1"], "kind": "fact"}]"#).is_err());
        assert!(parse(r#"[{"question": "q", "expected": ["Sesión 1"], "kind": "trivia"}]"#).is_err());
        let no_history = parse(r#"[{"question": "¿y?", "expected": ["Sesión 1"], "kind": "followup"}]"#).unwrap();
        assert!(check_bank(&no_history).is_err());
        let no_label = parse(r#"[{"question": "q", "expected": [], "kind": "fact"}]"#).unwrap();
        assert!(check_bank(&no_label).is_err());
        assert!(check_bank(&[]).is_err());
    }

    #[test]
    fn the_sample_bank_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/sample.json");
        let bank = load_bank(&path).unwrap();
        assert_eq!(bank.len(), 16);
        let count = |kind: QuestionKind| bank.iter().filter(|q| q.kind == kind).count();
        assert_eq!((count(QuestionKind::Arc), count(QuestionKind::Followup)), (2, 2));
    }
}
