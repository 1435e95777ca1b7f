//! The passages a slow machine's model reads: the chosen fragments' windows, best first.
//!
//! When a CPU has no time for the chosen fragments whole, the model reads some of their
//! words. Which ones is ranked here, at the grain naive RAG reads (a window of about 300
//! words) rather than a fixed share of every fragment: spread over eight fragments, a budget
//! of two windows missed the answer that one whole window holds where players ask in their
//! own words (`eval/README.md`, the material against naive's windows).
//!
//! A window is one of the BM25 passages the index holds for its fragment
//! ([`BM25_WINDOW_WORDS`] words every [`BM25_WINDOW_STEP`]). Its score is the reciprocal rank
//! fusion of three lists: the dense path's nearest embedding windows (a hit counts for the
//! windows it mostly covers), BM25 over the windows, and its fragment's place among the chosen
//! (which carries the entity, time and rerank evidence). The sessions a question names come
//! first, as they do among the fragments.

use std::collections::HashMap;
use std::ops::Range;

use crate::corpus::FragmentId;
use crate::corpus::windows::window_word_range;
use crate::index::IndexError;
use crate::index::store::{BM25_WINDOW_STEP, BM25_WINDOW_WORDS, Store};

use super::bm25::search_bm25_windows;
use super::{RRF_K, SearchResult};

/// A fragment the windows are cut from, in the chosen order (best first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSource {
    pub fragment_id: FragmentId,
    /// Its whitespace-separated words.
    pub n_words: usize,
    /// A session the question names: its windows lead.
    pub named: bool,
}

/// What ranks the windows besides their fragment's place: each list best first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WindowEvidence {
    /// The dense path's hits, nearest first: a fragment and the words of the embedding window hit.
    pub dense: Vec<(FragmentId, Range<usize>)>,
    /// BM25 over the windows, best first: a fragment and the window's place among its windows.
    pub bm25: Vec<(FragmentId, u32)>,
}

/// One window of a chosen fragment: its words, and the fusion that ranked it.
#[derive(Debug, Clone, PartialEq)]
pub struct RankedWindow {
    pub fragment_id: FragmentId,
    pub words: Range<usize>,
    pub score: f64,
}

/// The words the BM25 window `window` of a fragment of `n_words` words covers, as
/// `index::store` cut them.
pub fn bm25_window_words(window: u32, n_words: usize) -> Range<usize> {
    let start = (window as usize * BM25_WINDOW_STEP).min(n_words);
    start..(start + BM25_WINDOW_WORDS).min(n_words)
}

/// How many BM25 windows a fragment of `n_words` words has (one at least: a short note is one).
fn bm25_window_count(n_words: usize) -> u32 {
    if n_words <= BM25_WINDOW_WORDS {
        return 1;
    }
    // Windows start every step until one reaches the last word.
    (n_words - BM25_WINDOW_WORDS).div_ceil(BM25_WINDOW_STEP) as u32 + 1
}

/// Whether a dense hit's words count for a window: they overlap by at least half of the
/// shorter of the two (a short embedding window inside a long one, or the reverse).
fn covers(hit: &Range<usize>, window: &Range<usize>) -> bool {
    let overlap = hit.end.min(window.end).saturating_sub(hit.start.max(window.start));
    let shorter = hit.len().min(window.len());
    shorter > 0 && 2 * overlap >= shorter
}

/// The evidence on the windows of the fragments `ids` for `search`'s question: its dense
/// path's window hits among them (the embedder's windows are `window_words` long) and BM25 over
/// their windows.
pub fn window_evidence(
    store: &Store,
    search: &SearchResult,
    ids: &[FragmentId],
    window_words: usize,
) -> Result<WindowEvidence, IndexError> {
    let dense = search
        .dense_hits
        .iter()
        .filter(|(fragment_id, _)| ids.contains(fragment_id))
        .map(|&(fragment_id, window)| (fragment_id, window_word_range(window, window_words)))
        .collect();
    Ok(WindowEvidence { dense, bm25: search_bm25_windows(store, &search.search_query, ids)? })
}

/// Every window of `sources`, best first: named sessions' windows first, then by the fused
/// score; ties in reading order of the chosen (fragment rank, then place in the fragment).
pub fn rank_windows(sources: &[WindowSource], evidence: &WindowEvidence) -> Vec<RankedWindow> {
    let _span = tracing::debug_span!("retrieve.windows", n_fragments = sources.len()).entered();
    let mut bm25_rank: HashMap<(FragmentId, u32), usize> = HashMap::new();
    for (position, &key) in evidence.bm25.iter().enumerate() {
        bm25_rank.entry(key).or_insert(position);
    }
    let mut ranked: Vec<(bool, f64, usize, u32, RankedWindow)> = Vec::new();
    for (fragment_rank, source) in sources.iter().enumerate() {
        for window in 0..bm25_window_count(source.n_words) {
            let words = bm25_window_words(window, source.n_words);
            let dense_rank = evidence
                .dense
                .iter()
                .position(|(fragment_id, hit)| *fragment_id == source.fragment_id && covers(hit, &words));
            let ranks = [Some(fragment_rank), bm25_rank.get(&(source.fragment_id, window)).copied(), dense_rank];
            let score: f64 = ranks.iter().flatten().map(|&position| 1.0 / (RRF_K + position as f64 + 1.0)).sum();
            ranked.push((
                source.named,
                score,
                fragment_rank,
                window,
                RankedWindow { fragment_id: source.fragment_id, words, score },
            ));
        }
    }
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)));
    ranked.into_iter().map(|(.., window)| window).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(id: i64, n_words: usize) -> WindowSource {
        WindowSource { fragment_id: FragmentId(id), n_words, named: false }
    }

    fn order(ranked: &[RankedWindow]) -> Vec<(i64, usize)> {
        ranked.iter().map(|window| (window.fragment_id.0, window.words.start)).collect()
    }

    #[test]
    fn windows_are_cut_as_the_index_cuts_them() {
        assert_eq!(bm25_window_count(10), 1);
        assert_eq!(bm25_window_words(0, 10), 0..10);
        assert_eq!(bm25_window_count(BM25_WINDOW_WORDS), 1);
        // One word more than a window: a second window starting a step in, ending at the last word.
        assert_eq!(bm25_window_count(BM25_WINDOW_WORDS + 1), 2);
        assert_eq!(bm25_window_words(1, BM25_WINDOW_WORDS + 1), BM25_WINDOW_STEP..BM25_WINDOW_WORDS + 1);
        let text: String = (0..1000).map(|i| format!("w{i} ")).collect();
        let cut = crate::text::word_windows(&text, BM25_WINDOW_WORDS, BM25_WINDOW_STEP);
        assert_eq!(cut.len() as u32, bm25_window_count(1000));
        let words: Vec<&str> = text.split_whitespace().collect();
        for (window, passage) in cut.iter().enumerate() {
            assert_eq!(&words[bm25_window_words(window as u32, 1000)].join(" "), passage);
        }
    }

    #[test]
    fn a_window_both_searches_found_leads_a_better_ranked_fragment_without_them() {
        let sources = [source(1, 900), source(2, 900)];
        let evidence = WindowEvidence {
            dense: vec![(FragmentId(2), 460..710)],
            bm25: vec![(FragmentId(2), 3), (FragmentId(1), 0)],
        };
        let ranked = rank_windows(&sources, &evidence);
        // Fragment 2's window 3 (words 450..750) holds the dense hit and BM25's best.
        assert_eq!(order(&ranked)[0], (2, 3 * BM25_WINDOW_STEP));
        // Then fragment 1's BM25 window, above the other windows of either fragment.
        assert_eq!(order(&ranked)[1], (1, 0));
        assert_eq!(ranked.len() as u32, 2 * bm25_window_count(900));
        // Without evidence, the chosen order and reading order.
        let plain = rank_windows(&sources, &WindowEvidence::default());
        assert_eq!(order(&plain)[..2], [(1, 0), (1, BM25_WINDOW_STEP)]);
    }

    #[test]
    fn a_dense_hit_counts_for_the_windows_it_mostly_covers() {
        // A 250-word embedding window over words 200..450: windows 150..450 and 300..600
        // hold at least half of it; 0..300 holds 100 words of it, not half.
        let words = |window| bm25_window_words(window, 2000);
        assert!(covers(&(200..450), &words(1)));
        assert!(covers(&(200..450), &words(2)));
        assert!(!covers(&(200..450), &words(0)));
        // A long embedding window (a big model) covers every window inside it.
        assert!(covers(&(0..4000), &words(5)));
    }

    #[test]
    fn a_named_session_leads_whatever_the_evidence() {
        let sources = [source(1, 300), WindowSource { named: true, ..source(2, 300) }];
        let evidence = WindowEvidence { dense: vec![(FragmentId(1), 0..250)], bm25: vec![(FragmentId(1), 0)] };
        assert_eq!(order(&rank_windows(&sources, &evidence)), [(2, 0), (1, 0)]);
    }
}
