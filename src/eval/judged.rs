//! The citation checker measured against sentences judged by reading
//! (`eval/citations-judged.jsonl`, see `eval/README.md`).
//!
//! Each line pairs a model sentence with a label it cites or was shown, and a reader's verdict:
//! `backed`, `partly` or `not`. The checker (`answer::provenance`, then the letter checks of
//! `answer::grounding`, then the meaning check of `answer::support` when the embedder has a
//! calibrated floor) is run on each sentence over the labels paired with it, as the answer
//! stage runs it over the labels shown; a pair is the checker's «backs» when its label is among
//! the labels the sentence keeps. Precision and recall of «backs» against `backed` are reported
//! per split: the thresholds are chosen on `tune`, the figures that count are `report`'s.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::score::ratio;
use crate::answer::grounding::{CitedNotes, NameBook};
use crate::answer::support::{SupportWindows, support_windows};
use crate::llm::EmbedRole;
use crate::oracle::Oracle;
use crate::retrieve::Audience;

/// A reader's verdict on one sentence × label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The note says what the sentence says.
    Backed,
    /// Some of its claims, not all.
    Partly,
    /// The note does not say it (a changed number, name or negation included).
    Not,
}

/// One judged pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JudgedPair {
    pub id: String,
    /// Which campaign's answers: `sample`, `crd3`…
    pub bank: String,
    pub question_id: String,
    pub sentence: String,
    /// The labels the model cited for the sentence.
    pub cited: Vec<String>,
    /// The label judged.
    pub label: String,
    pub verdict: Verdict,
    #[serde(default)]
    pub evidence: String,
    /// `tune` or `report`.
    pub split: String,
}

/// Reads a judged set: JSON Lines, `//` and blank lines skipped.
pub fn load_judged(path: &Path) -> anyhow::Result<Vec<JudgedPair>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut pairs = Vec::new();
    for (at, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        let pair: JudgedPair =
            serde_json::from_str(line).with_context(|| format!("{}:{}: not a judged pair", path.display(), at + 1))?;
        pairs.push(pair);
    }
    Ok(pairs)
}

/// The checker's agreement with the reader on one split.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Agreement {
    pub pairs: usize,
    /// The checker keeps the label; the reader says backed.
    pub kept_backed: usize,
    /// The checker keeps the label; the reader says partly.
    pub kept_partly: usize,
    /// The checker keeps the label; the reader says not.
    pub kept_not: usize,
    /// The checker drops a label the reader says backs the sentence.
    pub dropped_backed: usize,
    pub dropped_partly: usize,
    pub dropped_not: usize,
    /// Cited labels the reader says are backed, before the checker: the model's own precision.
    pub cited: usize,
    pub cited_backed: usize,
    /// Cited labels the checker keeps, and of those the reader's backed.
    pub cited_kept: usize,
    pub cited_kept_backed: usize,
}

impl Agreement {
    /// Of the labels the checker keeps, the share the reader says are backed.
    pub fn precision(&self) -> f64 {
        ratio(self.kept_backed, self.kept_backed + self.kept_partly + self.kept_not)
    }

    /// Of the labels the reader says are backed, the share the checker keeps.
    pub fn recall(&self) -> f64 {
        ratio(self.kept_backed, self.kept_backed + self.dropped_backed)
    }

    fn count(&mut self, pair: &JudgedPair, kept: bool) {
        self.pairs += 1;
        let slot = match (kept, pair.verdict) {
            (true, Verdict::Backed) => &mut self.kept_backed,
            (true, Verdict::Partly) => &mut self.kept_partly,
            (true, Verdict::Not) => &mut self.kept_not,
            (false, Verdict::Backed) => &mut self.dropped_backed,
            (false, Verdict::Partly) => &mut self.dropped_partly,
            (false, Verdict::Not) => &mut self.dropped_not,
        };
        *slot += 1;
        if pair.cited.contains(&pair.label) {
            self.cited += 1;
            self.cited_backed += usize::from(pair.verdict == Verdict::Backed);
            if kept {
                self.cited_kept += 1;
                self.cited_kept_backed += usize::from(pair.verdict == Verdict::Backed);
            }
        }
    }
}

/// The checker's agreement by split, for the pairs of `bank`, over `oracle`'s index (which
/// must hold the campaign the bank's answers were made on).
pub async fn judge(oracle: &Oracle, pairs: &[JudgedPair], bank: &str) -> anyhow::Result<BTreeMap<String, Agreement>> {
    let index = oracle.notes().open_index().await?;
    let compendium = oracle.notes().compendium(&index, Audience::Gm)?;
    let names = crate::oracle::name_book(&compendium);
    drop(index);
    // The sentences, each with its judged pairs, in file order.
    let mut sentences: Vec<(&str, &str, Vec<&JudgedPair>)> = Vec::new();
    for pair in pairs.iter().filter(|pair| pair.bank == bank) {
        match sentences.iter_mut().find(|(q, s, _)| *q == pair.question_id && *s == pair.sentence) {
            Some((_, _, judged)) => judged.push(pair),
            None => sentences.push((&pair.question_id, &pair.sentence, vec![pair])),
        }
    }
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    // Each label's support passages, embedded once.
    let mut windows: BTreeMap<String, Vec<Vec<f32>>> = BTreeMap::new();
    let mut by_split: BTreeMap<String, Agreement> = BTreeMap::new();
    for (_, sentence, judged) in sentences {
        let mut shown: Vec<String> = judged[0].cited.clone();
        for pair in &judged {
            if !shown.contains(&pair.label) {
                shown.push(pair.label.clone());
            }
        }
        for label in &shown {
            if !texts.contains_key(label) {
                let fragments = oracle.notes().read_source(label, Audience::Gm).await?;
                let text: Vec<&str> = fragments.iter().map(|stored| stored.fragment.text.as_str()).collect();
                texts.insert(label.clone(), text.join("\n"));
            }
        }
        let notes = CitedNotes::new(
            shown.iter().filter_map(|label| texts.get(label).map(|text| (label.as_str(), text.as_str()))),
            &shown,
        );
        let mut kept = checked_labels(&notes, sentence, &judged[0].cited, &names);
        if !kept.is_empty()
            && let Some(floor) = oracle.notes().embedder().support_floor()
        {
            // The meaning check, as the answer stage runs it on what the letter kept.
            for label in &kept {
                if !windows.contains_key(label) {
                    let cut = support_windows(texts.get(label).map_or("", String::as_str));
                    let vectors = oracle.notes().embedder().embed(&cut, EmbedRole::Query).await?;
                    windows.insert(label.clone(), vectors);
                }
            }
            let labels: Vec<String> = kept.iter().flat_map(|label| vec![label.clone(); windows[label].len()]).collect();
            let vectors: Vec<Vec<f32>> = kept.iter().flat_map(|label| windows[label].clone()).collect();
            let support = SupportWindows::new(&labels, vectors);
            let sentence_vector = oracle.notes().embedder().embed(&[sentence.to_string()], EmbedRole::Query).await?;
            let same_language = notes.all_in_language(&kept, crate::oracle::question_language(sentence));
            let verdict =
                support.verdict(&sentence_vector[0], same_language, &kept, floor.same_language, floor.other_language);
            if verdict.is_err() {
                kept.clear();
            }
        }
        for pair in judged {
            by_split.entry(pair.split.clone()).or_default().count(pair, kept.contains(&pair.label));
        }
    }
    Ok(by_split)
}

/// The labels a sentence keeps through the answer stage's checks by words and by the letter
/// (the meaning check follows, in [`judge`], when the embedder has a calibrated floor).
pub fn checked_labels(notes: &CitedNotes, sentence: &str, cited: &[String], names: &NameBook) -> Vec<String> {
    let sources = match notes.provenance(sentence, cited, crate::oracle::question_language(sentence)) {
        Ok(sources) => sources.labels(),
        Err(_) => return Vec::new(),
    };
    notes.attribute(sentence, &sources, names).unwrap_or_default()
}

/// The agreement as the eval prints it.
pub fn render(bank: &str, by_split: &BTreeMap<String, Agreement>) -> String {
    let mut out = format!("Citation checker against eval/citations-judged.jsonl ({bank})\n");
    out.push_str("split    pairs  kept(b/p/n)   dropped(b/p/n)  precision  recall  cited backed: model → checked\n");
    for (split, a) in by_split {
        out.push_str(&format!(
            "{split:<8} {:>5}  {:>3}/{:>3}/{:>3}   {:>3}/{:>3}/{:>3}      {:>5.2}   {:>5.2}   {}/{} → {}/{}\n",
            a.pairs,
            a.kept_backed,
            a.kept_partly,
            a.kept_not,
            a.dropped_backed,
            a.dropped_partly,
            a.dropped_not,
            a.precision(),
            a.recall(),
            a.cited_backed,
            a.cited,
            a.cited_kept_backed,
            a.cited_kept,
        ));
    }
    out
}
