//! Reciprocal rank fusion: positions, never scores, from each path.
//!
//! `score(fragment) = Σ over paths 1 / (RRF_K + rank_in_that_path)`, ranks from 1. A fragment
//! two paths agree on rises above the top of either list alone: cross-path confidence.

use crate::corpus::FragmentId;
use std::collections::HashMap;

use super::{PathRanks, RetrievalPath};

/// RRF damping; 60 is the standard value and the one measured in the design.
pub const RRF_K: f64 = 60.0;
/// The fused pool never holds more than this (about 27 in practice): the rerank picks the
/// final eight from it, so its recall matters more than its order.
pub const MAX_POOL: usize = 40;

/// One fused entry: a fragment id with its rank per path and its RRF score.
#[derive(Debug, Clone, PartialEq)]
pub struct Fused {
    pub fragment_id: FragmentId,
    pub ranks: PathRanks,
    pub score: f64,
}

/// Fuses ranked lists of fragment ids (best first, no duplicates within a list). Ties break
/// deterministically: higher score, then the best single rank, then the lower fragment id.
pub fn fuse_candidates(lists: &[(RetrievalPath, Vec<FragmentId>)], max_pool: usize) -> Vec<Fused> {
    let weighted: Vec<(RetrievalPath, f64, Vec<FragmentId>)> =
        lists.iter().map(|(path, ids)| (*path, 1.0, ids.clone())).collect();
    fuse_weighted(&weighted, max_pool)
}

/// [`fuse_candidates`] with a weight per list: a position is worth `weight / (RRF_K + rank)`.
/// The entity path's weight is the rarity of the entities the question names; the
/// others weigh 1.
pub fn fuse_weighted(lists: &[(RetrievalPath, f64, Vec<FragmentId>)], max_pool: usize) -> Vec<Fused> {
    let _span = tracing::info_span!("retrieve.fuse", n_lists = lists.len()).entered();
    let mut by_fragment: HashMap<FragmentId, Fused> = HashMap::new();
    for (path, weight, ids) in lists {
        for (position, &fragment_id) in ids.iter().enumerate() {
            let rank = position + 1;
            let entry = by_fragment.entry(fragment_id).or_insert_with(|| Fused {
                fragment_id,
                ranks: PathRanks::default(),
                score: 0.0,
            });
            // A list repeating an id counts its best position only.
            if entry.ranks.get(*path).is_none() {
                entry.ranks.set(*path, rank);
                entry.score += weight / (RRF_K + rank as f64);
            }
        }
    }
    let mut fused: Vec<Fused> = by_fragment.into_values().collect();
    fused.sort_by(|a, b| {
        b.score.total_cmp(&a.score).then(a.ranks.best().cmp(&b.ranks.best())).then(a.fragment_id.cmp(&b.fragment_id))
    });
    fused.truncate(max_pool);
    fused
}

/// Parts of one note the fused order keeps before the other notes' candidates. A long session
/// is split into parts (`SESSION_MAX_WORDS`), and its parts share its words: without a bound they
/// fill the first eight with one session. Measured on the CRD3 bank, «How did
/// Mollymauk Tealeaf die?» had Sesión 1001 three times in the fused top 8 and the session that
/// answers it ninth.
pub const MAX_PARTS_PER_NOTE: usize = 2;

/// The fused order with each note's parts beyond the first [`MAX_PARTS_PER_NOTE`] moved after
/// every other candidate (in their own fused order); nothing leaves the pool. A part the time
/// path found is never moved: a question about one session («resume la sesión 33») needs all of
/// it.
pub fn spread_notes<T>(fused: Vec<T>, note: impl Fn(&T) -> &str, from_time_path: impl Fn(&T) -> bool) -> Vec<T> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let (mut kept, mut moved) = (Vec::with_capacity(fused.len()), Vec::new());
    for candidate in fused {
        let parts = seen.entry(note(&candidate).to_string()).or_default();
        *parts += 1;
        if *parts > MAX_PARTS_PER_NOTE && !from_time_path(&candidate) {
            moved.push(candidate);
        } else {
            kept.push(candidate);
        }
    }
    kept.extend(moved);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use RetrievalPath::{Bm25, Dense, Entity};

    #[test]
    fn a_note_keeps_two_parts_ahead_and_the_rest_follow_unless_the_time_path_asked() {
        // (note, part, found by the time path)
        let fused = vec![
            ("Sesión 1001", 1, false),
            ("Sesión 1027", 1, false),
            ("Sesión 1001", 2, false),
            ("Sesión 1005", 1, false),
            ("Sesión 1001", 3, false),
            ("Sesión 1026", 1, false),
            ("Sesión 1001", 4, false),
        ];
        let spread = spread_notes(fused, |c| c.0, |c| c.2);
        let order: Vec<(&str, i32)> = spread.iter().map(|c| (c.0, c.1)).collect();
        assert_eq!(
            order,
            [
                ("Sesión 1001", 1),
                ("Sesión 1027", 1),
                ("Sesión 1001", 2),
                ("Sesión 1005", 1),
                ("Sesión 1026", 1),
                ("Sesión 1001", 3),
                ("Sesión 1001", 4)
            ]
        );
        // A session asked for by number keeps every part where the fusion put it.
        let asked =
            vec![("Sesión 33", 1, true), ("Sesión 33", 2, true), ("Sesión 33", 3, true), ("Sesión 2", 1, false)];
        let spread = spread_notes(asked.clone(), |c| c.0, |c| c.2);
        assert_eq!(spread, asked);
    }

    fn ids(raw: &[i64]) -> Vec<FragmentId> {
        raw.iter().copied().map(FragmentId).collect()
    }

    fn check(lists: &[(RetrievalPath, Vec<FragmentId>)], max_pool: usize, expected: &[(i64, f64)]) {
        let fused = fuse_candidates(lists, max_pool);
        let got: Vec<(i64, f64)> = fused.iter().map(|f| (f.fragment_id.0, f.score)).collect();
        assert_eq!(got.len(), expected.len(), "{got:?}");
        for ((id, score), (expected_id, expected_score)) in got.iter().zip(expected) {
            assert_eq!(id, expected_id, "{got:?}");
            assert!((score - expected_score).abs() < 1e-12, "{got:?}");
        }
    }

    #[test]
    fn scores_are_sums_of_reciprocal_ranks() {
        check(
            &[(Dense, ids(&[10, 20, 30])), (Bm25, ids(&[30, 40]))],
            40,
            &[
                // 30: dense rank 3 + bm25 rank 1.
                (30, 1.0 / 63.0 + 1.0 / 61.0),
                (10, 1.0 / 61.0),
                (20, 1.0 / 62.0),
                (40, 1.0 / 62.0),
            ],
        );
    }

    #[test]
    fn agreement_beats_the_top_of_a_single_list() {
        let fused = fuse_candidates(&[(Dense, ids(&[1, 2])), (Bm25, ids(&[3, 2])), (Entity, ids(&[4]))], 40);
        assert_eq!(fused[0].fragment_id, FragmentId(2));
        assert_eq!(fused[0].ranks, PathRanks { dense: Some(2), bm25: Some(2), entity: None, time: None });
    }

    #[test]
    fn ties_break_by_best_rank_then_id() {
        // 5 and 7 both score 1/61 + 1/62 (ranks 1+2 and 2+1): a tie on score and best rank.
        let fused = fuse_candidates(&[(Dense, ids(&[7, 5])), (Bm25, ids(&[5, 7])), (Entity, ids(&[9]))], 40);
        let order: Vec<i64> = fused.iter().map(|f| f.fragment_id.0).collect();
        assert_eq!(order, [5, 7, 9]);
        // The same lists in another order give the same result.
        let again = fuse_candidates(&[(Entity, ids(&[9])), (Bm25, ids(&[5, 7])), (Dense, ids(&[7, 5]))], 40);
        assert_eq!(again, fused);
    }

    #[test]
    fn a_weak_path_only_breaks_ties() {
        // The entity path at the floor weight of a ubiquitous PC: its first place (7) no
        // longer beats the other paths' agreement, but it still orders 3 above 4.
        let fused = fuse_weighted(
            &[(Dense, 1.0, ids(&[3, 4, 9])), (Bm25, 1.0, ids(&[4, 3, 8])), (Entity, 0.05, ids(&[7, 3]))],
            40,
        );
        let order: Vec<i64> = fused.iter().map(|f| f.fragment_id.0).collect();
        assert_eq!(order, [3, 4, 8, 9, 7]);
        assert!((fused[0].score - (1.0 / 61.0 + 1.0 / 62.0 + 0.05 / 62.0)).abs() < 1e-12);
        // Weight 1 everywhere is plain RRF.
        let plain = fuse_weighted(&[(Dense, 1.0, ids(&[10, 20])), (Bm25, 1.0, ids(&[20]))], 40);
        assert_eq!(plain, fuse_candidates(&[(Dense, ids(&[10, 20])), (Bm25, ids(&[20]))], 40));
    }

    #[test]
    fn pool_is_capped() {
        let long = ids(&(0..100).collect::<Vec<i64>>());
        let other = ids(&(100..200).collect::<Vec<i64>>());
        let fused = fuse_candidates(&[(Dense, long), (Bm25, other)], MAX_POOL);
        assert_eq!(fused.len(), MAX_POOL);
    }

    #[test]
    fn empty_lists_fuse_to_what_the_others_found() {
        check(&[(Dense, ids(&[1])), (Bm25, ids(&[])), (Entity, ids(&[]))], 40, &[(1, 1.0 / 61.0)]);
        check(&[(Dense, ids(&[])), (Bm25, ids(&[])), (Entity, ids(&[]))], 40, &[]);
    }
}
