//! BM25 over fragment text (SQLite FTS5): nails invented proper nouns literally.
//!
//! User text never reaches `MATCH` raw: it is cut into words, stopwords (Spanish and
//! English) dropped, and each remaining word quoted as an FTS5 string, OR-ed together. No
//! question can raise an FTS5 syntax error, and an empty index simply returns nothing.

use serde::Serialize;

use crate::corpus::{FragmentId, Visibility};
use crate::index::{Bm25Unit, IndexError, Store};
use crate::lexicon::is_stopword;
use crate::text::fold;

/// The words of `question` worth matching: folded, stopwords (Spanish and English) and
/// one-letter words dropped, each once.
pub fn query_terms(question: &str) -> Vec<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in question.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let folded = fold(word);
        if folded.chars().count() < 2 || is_stopword(&folded) || terms.contains(&folded) {
            continue;
        }
        terms.push(folded);
    }
    terms
}

/// One term as an FTS5 string. Folded words are alphanumeric only: quoting them cannot break
/// out of the string.
fn quoted(term: &str) -> String {
    format!("\"{term}\"")
}

/// `terms` OR-ed together as an FTS5 expression, or `None` when there are none.
fn any_of(terms: &[String]) -> Option<String> {
    (!terms.is_empty()).then(|| terms.iter().map(|t| quoted(t)).collect::<Vec<_>>().join(" OR "))
}

/// The FTS5 expression for `question`, or `None` when nothing in it is worth matching.
pub fn fts_query(question: &str) -> Option<String> {
    any_of(&query_terms(question))
}

/// How much of a question the notes the asker may read hold, and the BM25 list's fusion
/// weight that follows from it (`search --json`: `diagnostics.bm25_terms`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bm25Terms {
    /// The question's terms that occur in some note the asker may read.
    pub in_notes: usize,
    /// The question's terms worth matching.
    pub asked: usize,
    pub weight: f64,
}

/// What the BM25 path found, and how much of the question it could match at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bm25Hits {
    /// Fragment ids, best BM25 first.
    pub ids: Vec<FragmentId>,
    pub terms: Bm25Terms,
}

/// The share of a question's words its notes must hold for the BM25 list to keep its full
/// weight. Below it the question is mostly in another language than the notes (only its names
/// match), and the list weighs by the share. Half, because one word of a question missing from
/// the notes is common (a verb form, a synonym): on the sample bank, weighing every list by its
/// share dropped two time questions whose only exact match was BM25's first («la barca sin
/// farol», «1000 de experiencia»: 3 of 4 and 4 of 5 words held).
pub const BM25_FULL_WEIGHT_SHARE: f64 = 0.5;

impl Bm25Terms {
    /// `in_notes` of `asked` terms held, with the weight of the list: full when the notes hold
    /// at least [`BM25_FULL_WEIGHT_SHARE`] of the question's terms, else that share. A question
    /// in another language than its notes (the CRD3 bank's «¿Qué ser descubrió Keyleth en el
    /// corazón de la corrupción del pantano?», 1 term of 6 in English synopses) matches only
    /// its names, and BM25 then ranks by how often a main character is named: that list must
    /// not outvote the dense path, which reads across languages.
    pub fn new(in_notes: usize, asked: usize) -> Bm25Terms {
        let share = if asked == 0 { 1.0 } else { in_notes as f64 / asked as f64 };
        let weight = if share >= BM25_FULL_WEIGHT_SHARE { 1.0 } else { share };
        Bm25Terms { in_notes, asked, weight }
    }
}

impl Default for Bm25Terms {
    /// Nothing asked: no list, and nothing to weigh down.
    fn default() -> Bm25Terms {
        Bm25Terms::new(0, 0)
    }
}

/// How the BM25 path scores a fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bm25Scoring {
    /// The fragment's whole text, as one document.
    Fragment,
    /// Its best window (`index::store::BM25_WINDOW_WORDS` words). Named «best passage» in the
    /// eval's recorded lists and JSON, which keep that name.
    #[serde(rename = "best_passage")]
    BestWindow,
    /// The sum of its two best windows.
    #[serde(rename = "best_two_passages")]
    BestTwoWindows,
}

impl Bm25Scoring {
    pub const ALL: [Bm25Scoring; 3] = [Bm25Scoring::Fragment, Bm25Scoring::BestWindow, Bm25Scoring::BestTwoWindows];

    pub fn as_str(self) -> &'static str {
        match self {
            Bm25Scoring::Fragment => "fragment",
            Bm25Scoring::BestWindow => "best passage",
            Bm25Scoring::BestTwoWindows => "best two passages",
        }
    }
}

/// How the product's BM25 path scores a fragment.
pub const BM25_SCORING: Bm25Scoring = Bm25Scoring::Fragment;

/// Windows read per fragment wanted: enough that `depth` distinct fragments come out when a
/// few long notes hold many matching windows each.
const WINDOWS_PER_FRAGMENT: usize = 6;

/// The BM25 path: fragment ids best first, with the question's term coverage. Both honour the
/// visibility filter (a term only a GM-only note holds counts as absent for a player).
pub fn search_bm25(
    store: &Store,
    question: &str,
    visibility: Option<Visibility>,
    depth: usize,
    scoring: Bm25Scoring,
) -> Result<Bm25Hits, IndexError> {
    let _span = tracing::info_span!("retrieve.bm25", depth, ?scoring).entered();
    let terms = query_terms(question);
    let Some(query) = any_of(&terms) else {
        return Ok(Bm25Hits::default());
    };
    let ids: Vec<FragmentId> = match scoring {
        Bm25Scoring::Fragment => {
            store.match_fts(Bm25Unit::Fragment, &query, visibility, depth)?.into_iter().map(|(id, _)| id).collect()
        }
        Bm25Scoring::BestWindow | Bm25Scoring::BestTwoWindows => {
            let windows = store.match_fts(Bm25Unit::Window, &query, visibility, depth * WINDOWS_PER_FRAGMENT)?;
            let best = if scoring == Bm25Scoring::BestWindow { 1 } else { 2 };
            rank_by_windows(&windows, best, depth)
        }
    };
    let mut in_notes = 0;
    for term in &terms {
        if store.fts_has_term(&quoted(term), visibility)? {
            in_notes += 1;
        }
    }
    Ok(Bm25Hits { ids, terms: Bm25Terms::new(in_notes, terms.len()) })
}

/// The BM25 windows of `fragments` (already chosen for the asker) that match `question`'s
/// terms, best first: what ranks the passages a slow machine's model reads
/// ([`super::windows`]).
pub fn search_bm25_windows(
    store: &Store,
    question: &str,
    fragments: &[FragmentId],
) -> Result<Vec<(FragmentId, u32)>, IndexError> {
    let Some(query) = fts_query(question) else {
        return Ok(Vec::new());
    };
    store.match_fts_windows(&query, fragments, fragments.len() * MAX_WINDOWS_READ_PER_FRAGMENT)
}

/// Windows of one fragment read at most when ranking its passages: a session of 4,000 words
/// has about 26.
const MAX_WINDOWS_READ_PER_FRAGMENT: usize = 32;

/// Fragments ranked by the sum of their `best` best windows' scores (`windows`: each window's
/// fragment id and FTS5 bm25 score, lower is better, best first), at most `depth`; ties by
/// first seen.
pub fn rank_by_windows(windows: &[(FragmentId, f64)], best: usize, depth: usize) -> Vec<FragmentId> {
    let mut by_fragment: Vec<(FragmentId, Vec<f64>)> = Vec::new();
    for &(fragment_id, score) in windows {
        match by_fragment.iter_mut().find(|(id, _)| *id == fragment_id) {
            Some((_, scores)) if scores.len() < best => scores.push(score),
            Some(_) => {}
            None => by_fragment.push((fragment_id, vec![score])),
        }
    }
    let mut ranked: Vec<(usize, FragmentId, f64)> =
        by_fragment.into_iter().enumerate().map(|(seen, (id, scores))| (seen, id, scores.iter().sum())).collect();
    ranked.sort_by(|a, b| a.2.total_cmp(&b.2).then(a.0.cmp(&b.0)));
    ranked.into_iter().take(depth).map(|(_, id, _)| id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fragment_is_ranked_by_its_best_windows() {
        // FTS5 scores: lower is better. Fragment 1 has one great window, 2 two good ones.
        let windows = [(1, -9.0), (2, -6.0), (2, -5.0), (3, -4.0), (1, -1.0), (2, -0.5)]
            .map(|(id, score)| (FragmentId(id), score));
        let ranked =
            |best, depth| -> Vec<i64> { rank_by_windows(&windows, best, depth).into_iter().map(|id| id.0).collect() };
        assert_eq!(ranked(1, 10), [1, 2, 3]);
        // Best two: 2 (-11) over 1 (-10).
        assert_eq!(ranked(2, 10), [2, 1, 3]);
        assert_eq!(ranked(1, 2), [1, 2]);
        assert!(rank_by_windows(&[], 1, 5).is_empty());
    }

    fn check(question: &str, expected: Option<&str>) {
        assert_eq!(fts_query(question).as_deref(), expected, "{question}");
    }

    #[test]
    fn questions_become_safe_fts_expressions() {
        check("¿Qué pasó con Norkiel?", Some("\"norkiel\""));
        check("¿Dónde está el Puerto de Galerna?", Some("\"puerto\" OR \"galerna\""));
        check("What happened to the dragon?", Some("\"dragon\""));
        // FTS5 operators and syntax characters are just text.
        check("\"Norkiel\" AND -Galerna* OR NEAR(x:y)", Some("\"norkiel\" OR \"galerna\" OR \"near\""));
        check("norkiel norkiel NORKIEL", Some("\"norkiel\""));
    }

    #[test]
    fn nothing_worth_matching_is_no_query() {
        check("", None);
        check("¿¿??", None);
        check("¿Qué es lo que pasó?", None);
        check("what is it", None);
    }

    #[test]
    fn the_weight_is_the_share_of_terms_the_notes_hold() {
        let weight = |in_notes, asked| Bm25Terms::new(in_notes, asked).weight;
        assert_eq!(weight(6, 6), 1.0);
        // A word or two the notes lack (a verb form): still the notes' language, full weight.
        assert_eq!(weight(3, 4), 1.0);
        assert_eq!(weight(1, 2), 1.0);
        // Only the names match: another language, weighed by the share.
        assert!((weight(1, 6) - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(weight(0, 3), 0.0);
        // Nothing worth matching: no list, and nothing to weigh down.
        assert_eq!(Bm25Hits::default().terms.weight, 1.0);
    }
}
