//! Retrieval figures: each variant's hits and recall over a set of questions, overall, on arc
//! questions and per kind.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Found, QuestionRow, distinct, ratio};
use crate::eval::bank::QuestionKind;

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
    pub(super) fn over(rows: &[&QuestionRow], variant: &str) -> VariantScore {
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

/// A variant overall, on arc questions alone, and per kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantReport {
    pub name: String,
    pub overall: VariantScore,
    pub arc: VariantScore,
    pub by_kind: BTreeMap<QuestionKind, VariantScore>,
}

#[cfg(test)]
mod tests {
    use crate::eval::bank::QuestionKind;
    use crate::eval::score::tests::{found, row, strings};
    use crate::eval::score::{EvalReport, FUSION_ONLY, RunInfo};

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
}
