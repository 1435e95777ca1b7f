//! The naive baseline the design is measured against: what a three-step RAG tutorial builds.
//! Every note's player-visible text cut blindly into fixed windows of
//! [`BASELINE_WINDOW_WORDS`] words (across session boundaries, headers ignored), embedded with
//! the same embedder and indexed by BM25 (FTS5, in memory), the two window lists fused by
//! reciprocal rank (K = [`crate::retrieve::RRF_K`]), top `k` windows.
//!
//! A window that straddles two sessions carries both labels, which flatters the baseline:
//! its hits are an upper bound.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;

use crate::corpus::{FragmentId, Label, Visibility, content_hash};
use crate::index::Index;
use crate::llm::{EmbedRole, Embedder, cosine};
use crate::retrieve::{RetrievalPath, bm25::fts_query, fuse_weighted};

/// "Fixed 300-word windows": the tutorial's chunk size, no overlap.
pub const BASELINE_WINDOW_WORDS: usize = 300;

/// One blind window with the labels of the notes its words came from.
#[derive(Debug, Clone)]
struct Window {
    labels: Vec<String>,
    vector: Vec<f32>,
    text: String,
}

/// The baseline's in-memory "index": brute-force cosine over every window, and an FTS5
/// table of the same windows (rowid = the window's place).
pub struct Baseline {
    windows: Vec<Window>,
    bm25: rusqlite::Connection,
}

impl std::fmt::Debug for Baseline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Baseline").field("windows", &self.windows.len()).finish_non_exhaustive()
    }
}

/// The windows' BM25 table, with the index's own tokenizer (accents folded).
fn bm25_table(texts: &[&str]) -> anyhow::Result<rusqlite::Connection> {
    let connection = rusqlite::Connection::open_in_memory().context("opening the baseline's BM25 table")?;
    connection
        .execute_batch("CREATE VIRTUAL TABLE windows USING fts5 (text, tokenize = 'unicode61 remove_diacritics 2');")?;
    {
        let mut insert = connection.prepare("INSERT INTO windows (rowid, text) VALUES (?1, ?2)")?;
        for (n, text) in texts.iter().enumerate() {
            insert.execute(rusqlite::params![n as i64, text])?;
        }
    }
    Ok(connection)
}

/// What the naive baseline finds for a question: the labels of its top `k` windows, fused
/// (what a tutorial builds today), and by cosine alone (what it built before hybrid search).
#[derive(Debug, Clone, PartialEq)]
pub struct BaselineHits {
    pub hybrid: Vec<String>,
    pub dense: Vec<String>,
    /// The texts of the windows the two lists fuse first, best first, as deep as each list
    /// goes: what a naive RAG pipeline shows its model, taken until its budget is spent
    /// ([`material_within`]).
    pub hybrid_windows: Vec<String>,
}

/// `windows` (best first) as a model's material within `max_tokens` (`count_tokens`): whole
/// windows while they fit, then the words of the next that fit. What naive RAG shows a
/// model given the same budget as Oráculo's plan.
pub fn material_within(windows: &[String], max_tokens: usize, count_tokens: &dyn Fn(&str) -> usize) -> String {
    let mut material = String::new();
    for window in windows {
        let joined = if material.is_empty() { window.clone() } else { format!("{material}\n\n{window}") };
        if count_tokens(&joined) <= max_tokens {
            material = joined;
            continue;
        }
        // The most words of this window that fit (the count grows with the words).
        let words: Vec<&str> = window.split_whitespace().collect();
        let with = |n: usize| {
            let part = words[..n].join(" ");
            if material.is_empty() { part } else { format!("{material}\n\n{part}") }
        };
        let (mut fits, mut over) = (0, words.len());
        while fits + 1 < over {
            let middle = (fits + over) / 2;
            if count_tokens(&with(middle)) <= max_tokens { fits = middle } else { over = middle }
        }
        if fits > 0 {
            material = with(fits);
        }
        break;
    }
    material
}

/// A fragment's text with where it sits in its file and the label it carries.
#[derive(Debug, Clone)]
pub struct PlacedText {
    pub source_path: String,
    pub line_start: u32,
    pub part: u32,
    pub label: Label,
    pub text: String,
}

/// Cuts each file's player-visible text, in file order, into windows of `words` words and
/// returns (labels, text) per window.
pub fn blind_windows(fragments: &[PlacedText], words: usize) -> Vec<(Vec<String>, String)> {
    let mut by_file: BTreeMap<&str, Vec<&PlacedText>> = BTreeMap::new();
    for fragment in fragments {
        by_file.entry(fragment.source_path.as_str()).or_default().push(fragment);
    }
    let mut windows = Vec::new();
    for (_, mut parts) in by_file {
        parts.sort_by_key(|placed| (placed.line_start, placed.part));
        let labelled: Vec<(&str, &str)> = parts
            .iter()
            .flat_map(|placed| placed.text.split_whitespace().map(move |word| (placed.label.as_str(), word)))
            .collect();
        for chunk in labelled.chunks(words.max(1)) {
            let mut labels: Vec<String> = Vec::new();
            for (label, _) in chunk {
                if !labels.iter().any(|seen| seen == label) {
                    labels.push(label.to_string());
                }
            }
            let text = chunk.iter().map(|(_, word)| *word).collect::<Vec<_>>().join(" ");
            windows.push((labels, text));
        }
    }
    windows
}

impl Baseline {
    /// Embeds every blind window of the index's player-visible fragments, or reads their
    /// vectors from `cache_dir` when an earlier run embedded exactly these windows with this
    /// embedder (a cache that cannot be read or written only costs the embedding).
    pub async fn build(
        index: &Index,
        embedder: &dyn Embedder,
        batch_size: usize,
        cache_dir: Option<&Path>,
    ) -> anyhow::Result<Baseline> {
        let fragments: Vec<PlacedText> = index
            .store
            .fragments(Some(Visibility::Player))?
            .into_iter()
            .map(|stored| {
                let f = stored.fragment;
                PlacedText {
                    source_path: f.source_path,
                    line_start: f.line_start,
                    part: f.part,
                    label: f.label,
                    text: f.text,
                }
            })
            .collect();
        let cut = blind_windows(&fragments, BASELINE_WINDOW_WORDS);
        let texts: Vec<&str> = cut.iter().map(|(_, text)| text.as_str()).collect();
        let key = content_hash(Visibility::Player, &format!("{}\n{}", embedder.id(), texts.join("\n\u{1e}\n")));
        // BM25 reads the windows' text: its table is built whether the vectors come cached or not.
        let bm25 = bm25_table(&texts)?;
        let cache_file = cache_dir.map(|dir| dir.join(format!("{key}.json")));
        if let Some(vectors) = cache_file.as_deref().and_then(read_cached_vectors)
            && vectors.len() == cut.len()
        {
            tracing::info!(windows = vectors.len(), "eval: baseline vectors from the cache");
            let windows =
                cut.into_iter().zip(vectors).map(|((labels, text), vector)| Window { labels, vector, text }).collect();
            return Ok(Baseline { windows, bm25 });
        }
        let mut windows = Vec::with_capacity(cut.len());
        for batch in cut.chunks(batch_size.max(1)) {
            let texts: Vec<String> = batch.iter().map(|(_, text)| text.clone()).collect();
            let vectors =
                embedder.embed(&texts, EmbedRole::Passage).await.context("embedding the baseline's windows")?;
            anyhow::ensure!(
                vectors.len() == batch.len(),
                "the embedder returned {} vectors for {}",
                vectors.len(),
                batch.len()
            );
            for ((labels, text), vector) in batch.iter().zip(vectors) {
                windows.push(Window { labels: labels.clone(), vector, text: text.clone() });
            }
        }
        if let Some(cache_file) = &cache_file {
            let vectors: Vec<&Vec<f32>> = windows.iter().map(|window| &window.vector).collect();
            let written = cache_file
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::write(cache_file, serde_json::to_vec(&vectors).unwrap_or_default()));
            if let Err(err) = written {
                tracing::warn!(error = %err, path = %cache_file.display(), "the baseline's vectors were not cached");
            }
        }
        Ok(Baseline { windows, bm25 })
    }

    pub fn windows(&self) -> usize {
        self.windows.len()
    }

    /// The labels of the `k` windows the two lists fuse first, and of the `k` nearest by
    /// cosine alone (each best first, each label once).
    pub async fn search(&self, embedder: &dyn Embedder, question: &str, k: usize) -> anyhow::Result<BaselineHits> {
        let query = embedder
            .embed(&[question.to_string()], EmbedRole::Query)
            .await
            .context("embedding the question for the baseline")?
            .pop()
            .unwrap_or_default();
        let depth = crate::retrieve::path_depth(k);
        let mut scored: Vec<(f32, usize)> =
            self.windows.iter().enumerate().map(|(n, window)| (cosine(&window.vector, &query), n)).collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let dense: Vec<FragmentId> = scored.iter().take(depth).map(|(_, n)| FragmentId(*n as i64)).collect();
        let bm25 = self.bm25_windows(question, depth).context("the baseline's BM25 search")?;
        let lists = [(RetrievalPath::Dense, 1.0, dense), (RetrievalPath::Bm25, 1.0, bm25)];
        let fused = fuse_weighted(&lists, depth);
        let hybrid = self.labels_of(fused.iter().take(k).map(|entry| entry.fragment_id.0 as usize));
        let dense = self.labels_of(scored.iter().take(k).map(|(_, n)| *n));
        let hybrid_windows =
            fused.iter().map(|entry| self.windows[entry.fragment_id.0 as usize].text.clone()).collect();
        Ok(BaselineHits { hybrid, dense, hybrid_windows })
    }

    /// The labels of `windows` (their places), in order, each once.
    fn labels_of(&self, windows: impl Iterator<Item = usize>) -> Vec<String> {
        let mut labels: Vec<String> = Vec::new();
        for n in windows {
            for label in &self.windows[n].labels {
                if !labels.contains(label) {
                    labels.push(label.clone());
                }
            }
        }
        labels
    }

    /// The windows BM25 ranks first for `question` (as ids: their places), at most `depth`.
    fn bm25_windows(&self, question: &str, depth: usize) -> anyhow::Result<Vec<FragmentId>> {
        let Some(query) = fts_query(question) else { return Ok(Vec::new()) };
        let mut statement = self.bm25.prepare_cached(
            "SELECT rowid FROM windows WHERE windows MATCH ?1 ORDER BY bm25(windows), rowid LIMIT ?2",
        )?;
        let rows = statement.query_map(rusqlite::params![query, depth as i64], |row| row.get::<_, i64>(0))?;
        Ok(rows.collect::<rusqlite::Result<Vec<i64>>>()?.into_iter().map(FragmentId).collect())
    }
}

/// The vectors a cache file holds, or `None` when it is missing or unreadable.
fn read_cached_vectors(path: &Path) -> Option<Vec<Vec<f32>>> {
    let bytes = std::fs::read(path).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fragment(path: &str, line: u32, part: u32, label: &str, words: usize) -> PlacedText {
        let stem = label.replace(' ', "_");
        let text = (0..words).map(|n| format!("{stem}-{n}")).collect::<Vec<_>>().join(" ");
        PlacedText { source_path: path.into(), line_start: line, part, label: label.into(), text }
    }

    #[test]
    fn naive_material_takes_whole_windows_then_the_words_that_fit() {
        let windows: Vec<String> = ["uno dos tres", "cuatro cinco seis", "siete"].map(String::from).to_vec();
        let words = |text: &str| text.split_whitespace().count();
        assert_eq!(material_within(&windows, 100, &words), "uno dos tres\n\ncuatro cinco seis\n\nsiete");
        assert_eq!(material_within(&windows, 5, &words), "uno dos tres\n\ncuatro cinco");
        assert_eq!(material_within(&windows, 3, &words), "uno dos tres");
        assert_eq!(material_within(&windows, 2, &words), "uno dos");
        assert_eq!(material_within(&windows, 0, &words), "");
    }

    #[test]
    fn windows_cut_blindly_across_sessions_in_file_order() {
        let fragments = vec![
            // Given out of order: the file's line order decides.
            fragment("Crónica.md", 40, 0, "Sesión 2", 250),
            fragment("Crónica.md", 1, 0, "Sesión 1", 400),
            fragment("Sesiones/Sesión 3.md", 1, 0, "Sesión 3", 100),
        ];
        let windows = blind_windows(&fragments, 300);
        let labels: Vec<Vec<String>> = windows.iter().map(|(labels, _)| labels.clone()).collect();
        assert_eq!(
            labels,
            vec![
                vec!["Sesión 1".to_string()],
                // 100 words of session 1, 200 of session 2: a straddling window.
                vec!["Sesión 1".to_string(), "Sesión 2".to_string()],
                vec!["Sesión 2".to_string()],
                // A new file starts a new window.
                vec!["Sesión 3".to_string()],
            ]
        );
        assert_eq!(windows[0].1.split_whitespace().count(), 300);
        assert!(windows[1].1.starts_with("Sesión_1-300 "));
        assert_eq!(windows[2].1.split_whitespace().count(), 50);
    }
}
