//! The dense path: the query's embedding against the window vectors in LanceDB, windows
//! collapsed to their fragment by best score. Understands paraphrase ("¿quién murió?" finds
//! "cayó en combate"); scatters invented names, which the other paths catch.

use std::collections::HashSet;

use crate::corpus::{FragmentId, Visibility};
use crate::index::{Index, IndexError};

/// Windows asked per fragment wanted: a session-sized fragment has up to ~6 windows of an
/// e5-sized model, and several of them can be near the query.
const WINDOWS_PER_FRAGMENT: usize = 3;

/// One fragment the dense path found, with the window of it nearest the query (its best
/// dense match: the passages shown for the fragment include it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenseHit {
    pub fragment_id: FragmentId,
    /// 0-based window index, as `corpus::windows::embedding_windows` cut the fragment.
    pub window: u32,
}

/// Every window hit, nearest first, as the fragments holding its text (a fragment appears
/// once per window hit; [`best_per_fragment`] collapses them). `query_vector` comes from the
/// index's own embedder.
pub async fn search_dense(
    index: &Index,
    query_vector: &[f32],
    visibility: Option<Visibility>,
    depth: usize,
) -> Result<Vec<DenseHit>, IndexError> {
    let Some(table) = index.vector_table()? else {
        return Ok(Vec::new());
    };
    let hits = index.vectors.search(&table, query_vector, visibility, depth * WINDOWS_PER_FRAGMENT).await?;
    let mut seen = HashSet::new();
    let hashes: Vec<&str> =
        hits.iter().map(|hit| hit.content_hash.as_str()).filter(|hash| seen.insert(*hash)).collect();
    let ids_by_hash = index.store.fragment_ids_by_hash(&hashes, visibility)?;
    let mut windows = Vec::new();
    for hit in &hits {
        // Only hashes SQLite has committed reach a query: orphan vectors stay invisible.
        if let Some(fragment_ids) = ids_by_hash.get(hit.content_hash.as_str()) {
            let window = u32::try_from(hit.window).unwrap_or(0);
            windows.extend(fragment_ids.iter().map(|&fragment_id| DenseHit { fragment_id, window }));
        }
    }
    Ok(windows)
}

/// Fragments, nearest first, each with its best window: the first hit of each in `windows`
/// (nearest first), at most `depth`.
pub fn best_per_fragment(windows: &[DenseHit], depth: usize) -> Vec<DenseHit> {
    let mut seen = HashSet::new();
    windows.iter().filter(|hit| seen.insert(hit.fragment_id)).take(depth).copied().collect()
}
