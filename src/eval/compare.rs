//! Ordering rules chosen across banks: every fusion rule tried on the saved path lists of
//! several eval reports (one per bank), each scored per bank, and a leave-one-bank-out
//! selection that says whether a rule wins on banks it was not chosen on.
//!
//! A rule chosen on one bank flattered the code written beside it: on two vaults nobody tuned
//! on, the shipped fusion (entity weights, parts spread, named sessions first) scored two below
//! plain RRF over its own lists. So a rule is judged here the only honest way: for each bank,
//! the rule with the best total over the *other* banks is picked, and its score on the bank
//! left out is what counts. Plain RRF (K = 60, every path weighing 1) is the first rule and
//! wins every tie: a rule stays only if it beats it where it was not chosen.
//!
//! Pure over the reports' rows ([`super::score::PathLists`]): no index, no model.

use crate::corpus::FragmentId;
use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

use super::score::{FULL_PIPELINE, NAIVE_BASELINE};
use crate::retrieve::{RetrievalPath, fuse_weighted};

/// A fusion rule over a question's path lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub name: &'static str,
    /// The BM25 list fused: `bm25` (by fragment, the product's) or `bm25 by best passage`.
    pub bm25_list: &'static str,
    /// The entity path weighs the rarity of the entities named, BM25 its matched share.
    pub weights: bool,
    /// A note's parts beyond the first two follow every other candidate.
    pub spread: bool,
    /// The sessions the question names lead.
    pub lead: bool,
}

/// The rules tried, simplest first (a tie goes to the earlier one).
pub const RULES: [Rule; 8] = [
    Rule { name: "plain RRF", bm25_list: "bm25", weights: false, spread: false, lead: false },
    Rule { name: "plain RRF, named sessions first", bm25_list: "bm25", weights: false, spread: false, lead: true },
    Rule { name: "plain RRF, parts spread", bm25_list: "bm25", weights: false, spread: true, lead: false },
    Rule { name: "plain RRF, named first, parts spread", bm25_list: "bm25", weights: false, spread: true, lead: true },
    Rule { name: "weighted, named first, parts spread", bm25_list: "bm25", weights: true, spread: true, lead: true },
    Rule { name: "best passage", bm25_list: "bm25 by best passage", weights: false, spread: false, lead: false },
    Rule {
        name: "best passage, named sessions first",
        bm25_list: "bm25 by best passage",
        weights: false,
        spread: false,
        lead: true,
    },
    Rule {
        name: "best passage, named first, parts spread",
        bm25_list: "bm25 by best passage",
        weights: false,
        spread: true,
        lead: true,
    },
];

/// One bank's report, as much of it as the comparison reads.
#[derive(Debug, Clone)]
pub struct BankRows {
    pub bank: String,
    pub k: usize,
    pub rows: Vec<Row>,
}

/// One answerable question of a report.
#[derive(Debug, Clone)]
pub struct Row {
    pub expected: Vec<String>,
    /// Path name → `label#part` best first.
    pub lists: BTreeMap<String, Vec<String>>,
    pub weights: BTreeMap<String, f64>,
    pub named_sessions: Vec<u32>,
    /// The shipped pipeline's top k held an expected label (the report's own verdict).
    pub shipped_hit: bool,
    /// The naive baseline's, when the report ran it.
    pub naive_hit: Option<bool>,
}

/// Reads an eval report saved by `oraculo eval` (JSON); the bank is named after the file, up to
/// `-e5-` where the name has it.
pub fn load_report(path: &Path) -> anyhow::Result<BankRows> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let report: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not an eval report", path.display()))?;
    // `results/crd3-e5-retrieval-release.json` is the bank `crd3`: the name before the embedder's.
    let stem = path.file_stem().map_or_else(|| path.display().to_string(), |stem| stem.to_string_lossy().into_owned());
    let bank = stem.split("-e5-").next().unwrap_or(&stem).to_string();
    let k = report["run"]["k"].as_u64().unwrap_or(8) as usize;
    let strings = |value: &serde_json::Value| -> Vec<String> {
        value
            .as_array()
            .map(|items| items.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    let mut rows = Vec::new();
    for row in report["rows"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let expected = strings(&row["expected"]);
        let paths = &row["paths"];
        if expected.is_empty() || paths.is_null() || row["error"].is_string() {
            continue;
        }
        let lists = paths["lists"]
            .as_object()
            .map(|lists| lists.iter().map(|(name, list)| (name.clone(), strings(list))).collect())
            .unwrap_or_default();
        let weights = paths["weights"]
            .as_object()
            .map(|weights| weights.iter().filter_map(|(name, w)| Some((name.clone(), w.as_f64()?))).collect())
            .unwrap_or_default();
        let named_sessions = paths["named_sessions"]
            .as_array()
            .map(|sessions| sessions.iter().filter_map(|s| s.as_u64().map(|n| n as u32)).collect())
            .unwrap_or_default();
        let hit = |variant: &str| row["variants"][variant]["top"].as_array().map(|top| !top.is_empty());
        rows.push(Row {
            expected,
            lists,
            weights,
            named_sessions,
            shipped_hit: hit(FULL_PIPELINE).unwrap_or(false),
            naive_hit: hit(NAIVE_BASELINE),
        });
    }
    if rows.is_empty() {
        anyhow::bail!("{} holds no answerable question with its path lists (run `oraculo eval` again)", path.display());
    }
    Ok(BankRows { bank, k, rows })
}

/// The first `k` labels `rule` orders `row`'s lists into.
pub fn top_labels(rule: &Rule, row: &Row, k: usize) -> Vec<String> {
    // Fragments as ids (their places in `names`), in first-seen order.
    let mut names: Vec<&str> = Vec::new();
    let mut lists: Vec<(RetrievalPath, f64, Vec<FragmentId>)> = Vec::new();
    for (path, list_name) in [
        (RetrievalPath::Dense, "dense"),
        (RetrievalPath::Bm25, rule.bm25_list),
        (RetrievalPath::Entity, "entity"),
        (RetrievalPath::Time, "time"),
    ] {
        let Some(list) = row.lists.get(list_name) else { continue };
        let weight_key = if path == RetrievalPath::Bm25 { "bm25" } else { list_name };
        let weight = if rule.weights { row.weights.get(weight_key).copied().unwrap_or(1.0) } else { 1.0 };
        let ids = list
            .iter()
            .map(|fragment| match names.iter().position(|name| name == fragment) {
                Some(at) => FragmentId(at as i64),
                None => {
                    names.push(fragment);
                    FragmentId((names.len() - 1) as i64)
                }
            })
            .collect();
        lists.push((path, weight, ids));
    }
    let time_ids: Vec<FragmentId> =
        lists.iter().filter(|(path, ..)| *path == RetrievalPath::Time).flat_map(|(.., ids)| ids.clone()).collect();
    let mut order: Vec<&str> = fuse_weighted(&lists, crate::retrieve::MAX_POOL)
        .iter()
        .map(|fused| names[fused.fragment_id.0 as usize])
        .collect();
    if rule.spread {
        order = crate::retrieve::spread_notes(
            order,
            |fragment| label_of(fragment),
            |fragment| {
                names
                    .iter()
                    .position(|name| name == fragment)
                    .is_some_and(|at| time_ids.contains(&FragmentId(at as i64)))
            },
        );
    }
    if rule.lead && !row.named_sessions.is_empty() {
        let mut leading: Vec<&str> = Vec::new();
        for session in &row.named_sessions {
            let mut parts: Vec<&str> = order.iter().copied().filter(|f| session_of(f) == Some(*session)).collect();
            parts.sort_by_key(|fragment| part_of(fragment));
            leading.extend(parts);
        }
        order.retain(|fragment| !leading.contains(fragment));
        leading.extend(order);
        order = leading;
    }
    order.into_iter().take(k).map(|fragment| label_of(fragment).to_string()).collect()
}

/// `Sesión 12#1` → `Sesión 12`.
fn label_of(fragment: &str) -> &str {
    fragment.rsplit_once('#').map_or(fragment, |(label, _)| label)
}

fn part_of(fragment: &str) -> u32 {
    fragment.rsplit_once('#').and_then(|(_, part)| part.parse().ok()).unwrap_or(0)
}

/// The session number of a session's label, in either label language.
fn session_of(fragment: &str) -> Option<u32> {
    let label = label_of(fragment);
    let number = label.strip_prefix("Sesión ").or_else(|| label.strip_prefix("Session "))?;
    number.parse().ok()
}

/// Whether `rule` puts an expected label of `row` in its top `k`.
pub fn hits(rule: &Rule, row: &Row, k: usize) -> bool {
    let top = top_labels(rule, row, k);
    row.expected.iter().any(|label| top.contains(label))
}

/// Each rule's hits per bank, the report's own shipped and naive figures, and the
/// leave-one-bank-out choice.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub banks: Vec<String>,
    /// Answerable questions per bank.
    pub questions: Vec<usize>,
    /// Rule name → hits per bank (in `banks` order).
    pub rules: Vec<(String, Vec<usize>)>,
    pub shipped: Vec<usize>,
    /// `None` for a bank whose report ran no baseline.
    pub naive: Vec<Option<usize>>,
    /// Per bank left out: the rule chosen on the others, and its hits on the one left out.
    pub left_out: Vec<(String, usize)>,
}

/// Scores every rule on every bank and chooses, for each bank, on the others.
pub fn compare(banks: &[BankRows]) -> Comparison {
    let rules: Vec<(String, Vec<usize>)> = RULES
        .iter()
        .map(|rule| {
            let per_bank =
                banks.iter().map(|bank| bank.rows.iter().filter(|row| hits(rule, row, bank.k)).count()).collect();
            (rule.name.to_string(), per_bank)
        })
        .collect();
    let left_out = (0..banks.len())
        .map(|out| {
            let others = |scores: &Vec<usize>| -> usize {
                scores.iter().enumerate().filter(|(at, _)| *at != out).map(|(_, n)| n).sum()
            };
            // The first rule with the best total elsewhere: plain RRF wins ties.
            let mut best = 0;
            for (at, (_, scores)) in rules.iter().enumerate() {
                if others(scores) > others(&rules[best].1) {
                    best = at;
                }
            }
            (rules[best].0.clone(), rules[best].1[out])
        })
        .collect();
    Comparison {
        banks: banks.iter().map(|bank| bank.bank.clone()).collect(),
        questions: banks.iter().map(|bank| bank.rows.len()).collect(),
        shipped: banks.iter().map(|bank| bank.rows.iter().filter(|row| row.shipped_hit).count()).collect(),
        naive: banks
            .iter()
            .map(|bank| {
                let verdicts: Option<Vec<bool>> = bank.rows.iter().map(|row| row.naive_hit).collect();
                verdicts.map(|verdicts| verdicts.into_iter().filter(|hit| *hit).count())
            })
            .collect(),
        rules,
        left_out,
    }
}

impl Comparison {
    /// The table: each rule's hits per bank, its total, and its worst bank against plain RRF
    /// and (where every report ran it) against the naive baseline, the floor no rule may fall
    /// below; then the leave-one-bank-out choices.
    pub fn render(&self) -> String {
        let width = self.banks.iter().map(|bank| bank.chars().count()).max().unwrap_or(4).max(6);
        let naive: Option<Vec<usize>> = self.naive.iter().copied().collect();
        let mut out = format!("{:<44}", "top-8 hits");
        for bank in &self.banks {
            out.push_str(&format!(" {bank:>width$}"));
        }
        out.push_str("  total  worst vs plain");
        out.push_str(if naive.is_some() { "  worst vs naive\n" } else { "\n" });
        out.push_str(&format!("{:<44}", "answerable questions"));
        for n in &self.questions {
            out.push_str(&format!(" {n:>width$}"));
        }
        out.push_str(&format!("  {:>5}\n", self.questions.iter().sum::<usize>()));
        let plain = &self.rules[0].1;
        let worst = |scores: &[usize], against: &[usize]| {
            scores.iter().zip(against).map(|(a, b)| *a as i64 - *b as i64).min().unwrap_or(0)
        };
        let mut line = |name: &str, scores: &[usize]| {
            out.push_str(&format!("{name:<44}"));
            for n in scores {
                out.push_str(&format!(" {n:>width$}"));
            }
            out.push_str(&format!("  {:>5}  {:>+14}", scores.iter().sum::<usize>(), worst(scores, plain)));
            if let Some(naive) = &naive {
                out.push_str(&format!("  {:>+14}", worst(scores, naive)));
            }
            out.push('\n');
        };
        for (name, scores) in &self.rules {
            line(name, scores);
        }
        line("shipped (the report's full pipeline)", &self.shipped);
        if let Some(naive) = &naive {
            line("naive (the report's baseline)", naive);
        }
        out.push_str(
            "\nLeave one bank out: the rule with the best total on the other banks, scored on the one left out\n",
        );
        for ((bank, (rule, score)), plain) in self.banks.iter().zip(&self.left_out).zip(plain) {
            out.push_str(&format!("  {bank:<width$}  {rule:<44} {score:>4}  (plain RRF {plain})\n"));
        }
        let chosen: usize = self.left_out.iter().map(|(_, score)| score).sum();
        out.push_str(&format!(
            "  total of the choices on the banks left out: {chosen} (plain RRF {})\n",
            plain.iter().sum::<usize>()
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(expected: &str, lists: &[(&str, &[&str])], named: &[u32]) -> Row {
        Row {
            expected: vec![expected.to_string()],
            lists: lists
                .iter()
                .map(|(name, list)| (name.to_string(), list.iter().map(|s| s.to_string()).collect()))
                .collect(),
            weights: [("entity".to_string(), 0.2)].into_iter().collect(),
            named_sessions: named.to_vec(),
            shipped_hit: true,
            naive_hit: None,
        }
    }

    #[test]
    fn plain_rrf_fuses_positions_and_the_named_session_leads_when_the_rule_says() {
        let question = row(
            "Sesión 9",
            &[
                ("dense", &["Sesión 1#0", "Sesión 2#0"]),
                ("bm25", &["Sesión 2#0", "Sesión 1#0"]),
                ("time", &["Sesión 9#0"]),
            ],
            &[9],
        );
        let plain = top_labels(&RULES[0], &question, 2);
        assert_eq!(plain, ["Sesión 1", "Sesión 2"], "two paths agree on 1 and 2; 9 is in one list");
        assert!(!hits(&RULES[0], &question, 2));
        assert!(hits(&RULES[1], &question, 2), "named sessions first");
        assert_eq!(top_labels(&RULES[1], &question, 1), ["Sesión 9"]);
    }

    #[test]
    fn a_rule_is_judged_on_the_bank_it_was_not_chosen_on() {
        // Bank a: the lead rule wins one question; bank b: no named session, both tie.
        let lead_wins = row("Sesión 9", &[("dense", &["Sesión 1#0"]), ("time", &["Sesión 9#0"])], &[9]);
        let tie = row("Sesión 1", &[("dense", &["Sesión 1#0"])], &[]);
        let banks = [
            BankRows { bank: "a".into(), k: 1, rows: vec![lead_wins.clone(), tie.clone()] },
            BankRows { bank: "b".into(), k: 1, rows: vec![tie.clone()] },
        ];
        let comparison = compare(&banks);
        assert_eq!(comparison.rules[0].1, [1, 1], "plain RRF");
        assert_eq!(comparison.rules[1].1, [2, 1], "named sessions first");
        // Left out a: chosen on b, where all tie: plain RRF, which scores 1 on a.
        assert_eq!(comparison.left_out[0], ("plain RRF".to_string(), 1));
        // Left out b: chosen on a: the lead rule, which scores 1 on b.
        assert_eq!(comparison.left_out[1], ("plain RRF, named sessions first".to_string(), 1));
        assert!(comparison.render().contains("total of the choices on the banks left out: 2"));
    }
}
