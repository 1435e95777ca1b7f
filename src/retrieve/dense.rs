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

/// Fragments, nearest first. `query_vector` comes from the index's own embedder.
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
    // Hits arrive nearest first: the first time a hash is seen is its best window.
    let mut seen = HashSet::new();
    let best_windows: Vec<(&str, u32)> = hits
        .iter()
        .filter(|hit| seen.insert(hit.content_hash.as_str()))
        .map(|hit| (hit.content_hash.as_str(), u32::try_from(hit.window).unwrap_or(0)))
        .collect();
    let ordered_hashes: Vec<&str> = best_windows.iter().map(|(hash, _)| *hash).collect();
    let ids_by_hash = index.store.fragment_ids_by_hash(&ordered_hashes, visibility)?;
    let mut ids = Vec::new();
    for (hash, window) in best_windows {
        // Only hashes SQLite has committed reach a query: orphan vectors stay invisible.
        if let Some(fragment_ids) = ids_by_hash.get(hash) {
            ids.extend(fragment_ids.iter().map(|&fragment_id| DenseHit { fragment_id, window }));
        }
        if ids.len() >= depth {
            break;
        }
    }
    ids.truncate(depth);
    Ok(ids)
}
