//! Answer figures: one answer scored against its question (citations, abstention, key facts,
//! leaks), the key facts of the material it was written from, and both summed over a run.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{QuestionRow, percentile};
use crate::eval::bank::{EvalQuestion, QuestionKind, abstains, contains_fact};

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
    /// The key facts the model's own sentences hold, when the answer scored is what stays
    /// once the model is done (`oracle::settle`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_key_facts_found: Option<Vec<String>>,
    /// How what stays was made from the model's answer and the instant one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settled: Option<SettledAs>,
    /// The model's structured sentences: kept as it cited them, kept re-cited to the notes
    /// they rest on (a miscitation mended), dropped as backed by no note shown.
    pub model_sentences: usize,
    pub recited: usize,
    pub dropped: usize,
    /// The answer says the notes do not hold it while a note that does was shown in full.
    pub abstained_with_answer_shown: bool,
    /// A quoted answer's sentences are only the nearest: it says the notes do not say it in
    /// the question's words (neither an answer nor «not in the notes»).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nearest_only: bool,
    /// For an answer that quotes the notes: the key facts in every sentence it chose from
    /// (`Prepared::quotable_text`), the most a perfect choice could have quoted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_facts_in_candidates: Option<Vec<String>>,
    /// For an answer that quotes the notes: its quotes, and those not found word for word in
    /// the fragment their label names (links as their text, spaces as one; a quote cut short
    /// by its last words).
    #[serde(default)]
    pub quotes: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub misquoted: Vec<String>,
}

/// How a player's final answer was made from the model's and the instant one
/// (`oracle::settle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SettledAs {
    /// The model's answer alone: no instant answer, or it said all the instant one did.
    Model,
    /// The model's answer with the instant answer's sentences it did not say under it.
    ModelAndNotes,
    /// The instant answer: the model failed, ran out of time or cited nothing.
    Notes,
}

impl SettledAs {
    pub fn of(settled: &crate::oracle::Settled) -> SettledAs {
        match (settled.instant_kept, settled.notes_added.is_empty()) {
            (Some(_), _) => SettledAs::Notes,
            (None, false) => SettledAs::ModelAndNotes,
            (None, true) => SettledAs::Model,
        }
    }
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
            model_key_facts_found: None,
            settled: None,
            model_sentences: 0,
            recited: 0,
            dropped: 0,
            abstained_with_answer_shown: false,
            nearest_only: false,
            key_facts_in_candidates: None,
            quotes: 0,
            misquoted: Vec::new(),
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
pub fn key_facts_in(question: &EvalQuestion, text: &str) -> (Vec<String>, Vec<String>) {
    question.key_facts.iter().cloned().partition(|fact| contains_fact(text, fact))
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
    /// Of the key facts found, those the model's own sentences hold (overall and in arcs),
    /// when the answers scored are what stays once the model is done.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_key_facts_found: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arc_model_key_facts_found: Option<usize>,
    /// Answers that kept the instant answer's sentences under the model's, and those that
    /// were the instant answer alone.
    pub with_notes_added: usize,
    pub notes_alone: usize,
    /// Sentences that repeat an earlier one of their answer, over all answers.
    pub repeated_sentences: usize,
    /// The model's structured sentences over all answers, those re-cited and those dropped.
    pub model_sentences: usize,
    pub recited: usize,
    pub dropped: usize,
    /// Answerable questions answered «not in the notes» with an answering note shown in full.
    pub abstained_with_answer_shown: usize,
    /// Answers quoting only the nearest sentences, saying so: of answerable questions, and of
    /// unanswerable ones.
    #[serde(default)]
    pub nearest_only_answerable: usize,
    #[serde(default)]
    pub nearest_only_unanswerable: usize,
    /// Quoted answers: the key facts in every sentence they chose from (`None`: no answer quoted).
    pub key_facts_in_candidates: Option<usize>,
    /// Quotes over all answers, and those not word for word in the fragment their label names.
    #[serde(default)]
    pub quotes: usize,
    #[serde(default)]
    pub misquoted: usize,
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
    pub(super) fn over(rows: &[QuestionRow]) -> Option<AnswerSummary> {
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
            model_key_facts_found: with_facts
                .iter()
                .map(|(_, a)| a.model_key_facts_found.as_ref().map(Vec::len))
                .sum::<Option<usize>>(),
            arc_model_key_facts_found: arcs
                .iter()
                .map(|(_, a)| a.model_key_facts_found.as_ref().map(Vec::len))
                .sum::<Option<usize>>(),
            with_notes_added: answered.iter().filter(|(_, a)| a.settled == Some(SettledAs::ModelAndNotes)).count(),
            notes_alone: answered.iter().filter(|(_, a)| a.settled == Some(SettledAs::Notes)).count(),
            repeated_sentences: answered.iter().map(|(_, answer)| answer.repeated_sentences).sum(),
            model_sentences: answered.iter().map(|(_, answer)| answer.model_sentences).sum(),
            recited: answered.iter().map(|(_, answer)| answer.recited).sum(),
            dropped: answered.iter().map(|(_, answer)| answer.dropped).sum(),
            abstained_with_answer_shown: answered.iter().filter(|(_, a)| a.abstained_with_answer_shown).count(),
            nearest_only_answerable: answerable.iter().filter(|(_, a)| a.nearest_only).count(),
            nearest_only_unanswerable: unanswerable.iter().filter(|(_, a)| a.nearest_only).count(),
            key_facts_in_candidates: with_facts
                .iter()
                .map(|(_, a)| a.key_facts_in_candidates.as_ref().map(Vec::len))
                .sum::<Option<usize>>(),
            quotes: answered.iter().map(|(_, answer)| answer.quotes).sum(),
            misquoted: answered.iter().map(|(_, answer)| answer.misquoted.len()).sum(),
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
    /// Found in naive RAG's windows given the same budgets (`None`: not measured), in all and
    /// by kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub naive_found: Option<usize>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub naive_by_kind: BTreeMap<QuestionKind, usize>,
}

impl MaterialSummary {
    pub(super) fn over(rows: &[QuestionRow]) -> Option<MaterialSummary> {
        let measured: Vec<(&QuestionRow, &MaterialFacts)> = rows
            .iter()
            .filter(|row| row.answerable() && row.error.is_none())
            .filter_map(|row| row.material.as_ref().map(|material| (row, material)))
            .collect();
        if measured.is_empty() {
            return None;
        }
        let mut by_kind: BTreeMap<QuestionKind, (usize, usize, usize)> = BTreeMap::new();
        let mut naive_by_kind: BTreeMap<QuestionKind, usize> = BTreeMap::new();
        for (row, material) in &measured {
            let entry = by_kind.entry(row.kind).or_default();
            entry.0 += 1;
            entry.1 += material.found.len() + material.missing.len();
            entry.2 += material.found.len();
            if let Some(naive) = &row.naive_material {
                *naive_by_kind.entry(row.kind).or_default() += naive.found.len();
            }
        }
        let naive_found =
            measured.iter().any(|(row, _)| row.naive_material.is_some()).then(|| naive_by_kind.values().sum());
        Some(MaterialSummary {
            questions: measured.len(),
            key_facts: measured.iter().map(|(_, m)| m.found.len() + m.missing.len()).sum(),
            found: measured.iter().map(|(_, m)| m.found.len()).sum(),
            complete: measured.iter().filter(|(_, m)| m.missing.is_empty()).count(),
            limited_by_time: measured.iter().filter(|(_, m)| m.limited_by == "time").count(),
            mean_material_tokens: measured.iter().map(|(_, m)| m.material_tokens as f64).sum::<f64>()
                / measured.len() as f64,
            by_kind,
            naive_found,
            naive_by_kind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::score::tests::{question, row, strings};
    use crate::eval::score::{EvalReport, RunInfo};

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
}
