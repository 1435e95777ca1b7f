//! Embedding what is new: the windows of every fragment whose content hash has no vector yet,
//! committed to LanceDB batch by batch so that an interrupted run keeps what it paid for.

use std::collections::BTreeMap;

use tracing::{Instrument, info_span};

use super::{IngestError, IngestProgress};
use crate::corpus::Fragment;
use crate::corpus::windows::embedding_windows;
use crate::index::{FileRecord, Index, VectorRow};
use crate::llm::{EmbedRole, Embedder, LlmError};

/// Embeds every fragment of `records` whose content hash has no vector in `table` yet.
/// Returns the embedding calls made and the windows embedded.
pub(super) async fn embed_missing(
    index: &Index,
    table: &str,
    embedder: &dyn Embedder,
    records: &[FileRecord],
    batch_size: usize,
    progress: &dyn IngestProgress,
) -> Result<(usize, usize), IngestError> {
    let embedded = index.vectors.embedded_hashes(table).await?;
    let mut pending: BTreeMap<&str, &Fragment> = BTreeMap::new();
    for fragment in records.iter().flat_map(|r| r.fragments.iter()) {
        if !embedded.contains(&fragment.content_hash) {
            pending.insert(&fragment.content_hash, fragment);
        }
    }
    embed_fragments(index, table, embedder, pending.values().copied(), batch_size, progress).await
}

/// Embeds the fragments' windows, committing a batch of whole fragments at a time.
async fn embed_fragments<'a>(
    index: &Index,
    table: &str,
    embedder: &dyn Embedder,
    fragments: impl Iterator<Item = &'a Fragment>,
    batch_size: usize,
    progress: &dyn IngestProgress,
) -> Result<(usize, usize), IngestError> {
    let windowed: Vec<(&Fragment, Vec<String>)> =
        fragments.map(|f| (f, embedding_windows(&f.text, embedder.window_words()))).collect();
    let total: usize = windowed.iter().map(|(_, w)| w.len()).sum();
    let span = info_span!("ingest.embed", n_fragments = windowed.len(), n_windows = total);
    async move {
        if total == 0 {
            return Ok((0, 0));
        }
        progress.embedding_started(total);
        let (mut calls, mut done) = (0, 0);
        let mut batch: Vec<(&Fragment, usize, String)> = Vec::new();
        let mut windowed = windowed.into_iter().peekable();
        while let Some((fragment, windows)) = windowed.next() {
            // A fragment's windows stay in one commit: a hash present in LanceDB is complete.
            for (window, text) in windows.into_iter().enumerate() {
                batch.push((fragment, window, text));
            }
            if batch.len() >= batch_size || windowed.peek().is_none() {
                let texts: Vec<String> = batch.iter().map(|(_, _, text)| text.clone()).collect();
                let vectors = embedder.embed(&texts, EmbedRole::Passage).await?;
                calls += 1;
                if vectors.len() != texts.len() {
                    return Err(IngestError::Embed(LlmError::BadResponse {
                        backend: embedder.id().to_string(),
                        detail: format!("{} vectors for {} texts", vectors.len(), texts.len()),
                    }));
                }
                let rows: Vec<VectorRow> = batch
                    .drain(..)
                    .zip(vectors)
                    .map(|((fragment, window, _), vector)| VectorRow {
                        content_hash: fragment.content_hash.clone(),
                        window: window as i32,
                        visibility: fragment.visibility,
                        vector,
                    })
                    .collect();
                index.vectors.add(table, embedder.dimension(), &rows).await?;
                done += rows.len();
                progress.embedded(rows.len());
            }
        }
        Ok((calls, done))
    }
    .instrument(span)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::windows::window_word_range;

    fn check_windows(n_words: usize, window: usize, expected: &[(usize, usize)]) {
        let text: Vec<String> = (0..n_words).map(|i| format!("w{i}")).collect();
        let windows = embedding_windows(&text.join(" "), window);
        let spans: Vec<(usize, usize)> = windows
            .iter()
            .map(|w| {
                let words: Vec<&str> = w.split_whitespace().collect();
                let first = words[0][1..].parse().unwrap();
                (first, first + words.len())
            })
            .collect();
        assert_eq!(spans, expected);
        // `window_word_range` names the same words as the windows (clipped at the text's end).
        for (idx, &(first, end)) in expected.iter().enumerate() {
            let range = window_word_range(idx as u32, window);
            assert_eq!((range.start, range.end.min(n_words)), (first, end), "window {idx}");
        }
    }

    #[test]
    fn short_text_is_one_window() {
        check_windows(10, 250, &[(0, 10)]);
        check_windows(250, 250, &[(0, 250)]);
    }

    #[test]
    fn long_text_windows_overlap_by_a_fifth_and_cover_everything() {
        check_windows(251, 250, &[(0, 250), (200, 251)]);
        check_windows(600, 250, &[(0, 250), (200, 450), (400, 600)]);
    }
}
