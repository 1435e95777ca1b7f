//! The LanceDB side of the index: one table of window vectors per embedder.
//!
//! Rows are keyed by the fragment's content hash (and the window's index within it), not by
//! the SQLite row id: a vector depends only on the text, so an unchanged fragment keeps its
//! vectors across re-ingests, and a row whose hash no SQLite fragment has is an orphan that a
//! query never reaches (the dense path maps hashes through SQLite) and the next ingest drops.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use futures::TryStreamExt;
use lancedb::arrow::arrow_array::{Array, FixedSizeListArray, Float32Array, Int32Array, RecordBatch, StringArray};
use lancedb::arrow::arrow_schema::{DataType, Field, Schema};
use lancedb::query::{ExecutableQuery, QueryBase, Select};
use lancedb::{Connection, DistanceType};
use tracing::{Instrument, debug, info_span};

use super::IndexError;
use crate::corpus::Visibility;

/// Prefix of every vector table; the rest names the embedder and the dimension.
const VECTOR_TABLE_PREFIX: &str = "vectors_";
/// Most hashes per `IN (...)` delete predicate.
const DELETE_BATCH: usize = 500;
/// An ingest compacts the table once it lies in more than this many LanceDB fragments (data
/// files): every ingest adds one per embedding batch and deletes only by marking rows, so a
/// vault saved all session long would be read from hundreds of small files. Compacting
/// rewrites the table, so it is not done on every save: at most one save in this many pays it.
pub const COMPACT_AFTER_FRAGMENTS: usize = 16;
/// Table versions younger than this survive the cleanup after an ingest: a question's vector
/// search reads the version it opened for milliseconds, and a version pruned under it would
/// fail that search. Every older version (each ingest makes a few) is removed with its files.
pub const VERSION_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// What a cleanup after an ingest did to a vector table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Compaction {
    /// LanceDB fragments (data files) the table lay in before.
    pub fragments_before: usize,
    /// Whether they were rewritten into fewer.
    pub compacted: bool,
    /// Old versions removed, and the bytes their files held.
    pub versions_removed: u64,
    pub bytes_removed: u64,
}

/// One embedded window of one fragment's text.
#[derive(Debug, Clone)]
pub struct VectorRow {
    pub content_hash: String,
    /// 0-based window index within the fragment.
    pub window: i32,
    pub visibility: Visibility,
    pub vector: Vec<f32>,
}

/// One hit of a vector search: a window, by cosine distance (0 = same direction).
#[derive(Debug, Clone)]
pub struct VectorHit {
    pub content_hash: String,
    pub window: i32,
    pub distance: f32,
}

/// The LanceDB database folder of one campaign.
#[derive(Clone)]
pub struct VectorStore {
    connection: Connection,
    path: String,
    /// [`VERSION_GRACE`]; a test that counts versions sets it to zero.
    version_grace: std::time::Duration,
}

impl std::fmt::Debug for VectorStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorStore").field("path", &self.path).finish()
    }
}

/// The table that holds `embedder_id`'s vectors of `dimension` floats.
pub fn vector_table_name(embedder_id: &str, dimension: usize) -> String {
    let slug: String =
        embedder_id.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).collect();
    format!("{VECTOR_TABLE_PREFIX}{slug}_{dimension}")
}

fn schema(dimension: usize) -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("content_hash", DataType::Utf8, false),
        Field::new("window", DataType::Int32, false),
        Field::new("visibility", DataType::Utf8, false),
        Field::new(
            "vector",
            DataType::FixedSizeList(Arc::new(Field::new("item", DataType::Float32, true)), dimension as i32),
            false,
        ),
    ]))
}

impl VectorStore {
    pub async fn open(path: &Path) -> Result<VectorStore, IndexError> {
        let path_text = path.display().to_string();
        let connection = lancedb::connect(&path_text)
            .execute()
            .await
            .map_err(|source| IndexError::Lance { path: path_text.clone(), source })?;
        Ok(VectorStore { connection, path: path_text, version_grace: VERSION_GRACE })
    }

    /// How young a version must be to survive [`VectorStore::compact`] ([`VERSION_GRACE`]).
    pub fn set_version_grace(&mut self, grace: std::time::Duration) {
        self.version_grace = grace;
    }

    /// Cleans `table` up after an ingest, with LanceDB's own optimize: its small files
    /// compacted once there are more than [`COMPACT_AFTER_FRAGMENTS`], then every version
    /// older than the grace removed with the files only it used. Run under the ingest lock
    /// (the only writer); a reader keeps the version it opened for the grace.
    pub async fn compact(&self, table: &str) -> Result<Compaction, IndexError> {
        use lancedb::table::{CompactionOptions, OptimizeAction};
        let Some(lance_table) = self.open_table(table).await? else {
            return Ok(Compaction::default());
        };
        let span = info_span!("index.compact_vectors", table);
        async {
            let stats = lance_table.stats().await.map_err(self.lance())?;
            let fragments_before = stats.fragment_stats.num_fragments;
            let compacted = fragments_before > COMPACT_AFTER_FRAGMENTS;
            if compacted {
                let compact = OptimizeAction::Compact { options: CompactionOptions::default(), remap_options: None };
                lance_table.optimize(compact).await.map_err(self.lance())?;
            }
            let older_than = lancedb::table::optimize::Duration::from_std(self.version_grace)
                .unwrap_or_else(|_| lancedb::table::optimize::Duration::zero());
            let prune = OptimizeAction::Prune {
                older_than: Some(older_than),
                delete_unverified: Some(false),
                error_if_tagged_old_versions: Some(false),
            };
            let pruned = lance_table.optimize(prune).await.map_err(self.lance())?.prune;
            let (versions_removed, bytes_removed) =
                pruned.map(|stats| (stats.old_versions, stats.bytes_removed)).unwrap_or_default();
            debug!(fragments_before, compacted, versions_removed, bytes_removed, "vector table cleaned up");
            Ok(Compaction { fragments_before, compacted, versions_removed, bytes_removed })
        }
        .instrument(span)
        .await
    }

    /// The versions `table` keeps on disk (0 when it does not exist yet).
    pub async fn n_versions(&self, table: &str) -> Result<usize, IndexError> {
        match self.open_table(table).await? {
            Some(table) => Ok(table.list_versions().await.map_err(self.lance())?.len()),
            None => Ok(0),
        }
    }

    fn lance(&self) -> impl Fn(lancedb::Error) -> IndexError + '_ {
        move |source| IndexError::Lance { path: self.path.clone(), source }
    }

    async fn table_names(&self) -> Result<Vec<String>, IndexError> {
        self.connection.table_names().execute().await.map_err(self.lance())
    }

    async fn open_table(&self, name: &str) -> Result<Option<lancedb::Table>, IndexError> {
        if !self.table_names().await?.iter().any(|existing| existing == name) {
            return Ok(None);
        }
        Ok(Some(self.connection.open_table(name).execute().await.map_err(self.lance())?))
    }

    /// Content hashes that have at least their first window in `table`.
    pub async fn embedded_hashes(&self, table: &str) -> Result<HashSet<String>, IndexError> {
        let Some(table) = self.open_table(table).await? else {
            return Ok(HashSet::new());
        };
        let batches: Vec<RecordBatch> = table
            .query()
            .select(Select::columns(&["content_hash"]))
            .execute()
            .await
            .map_err(self.lance())?
            .try_collect()
            .await
            .map_err(self.lance())?;
        let mut hashes = HashSet::new();
        for batch in &batches {
            let column = string_column(batch, "content_hash", &self.path)?;
            hashes.extend(column.iter().flatten().map(str::to_string));
        }
        Ok(hashes)
    }

    /// Appends rows, creating the table on first use. Each call is one atomic Lance commit.
    pub async fn add(&self, table: &str, dimension: usize, rows: &[VectorRow]) -> Result<(), IndexError> {
        if rows.is_empty() {
            return Ok(());
        }
        let span = info_span!("index.write_vectors", table, n_rows = rows.len());
        async {
            let batch = to_record_batch(rows, dimension)
                .map_err(|detail| IndexError::Vectors { path: self.path.clone(), detail })?;
            match self.open_table(table).await? {
                Some(existing) => {
                    existing.add(batch).execute().await.map_err(self.lance())?;
                }
                None => {
                    self.connection.create_table(table, batch).execute().await.map_err(self.lance())?;
                }
            }
            Ok(())
        }
        .instrument(span)
        .await
    }

    /// Deletes every row of `table` whose hash is not in `keep`; returns how many hashes went.
    pub async fn drop_orphans(&self, table: &str, keep: &HashSet<String>) -> Result<usize, IndexError> {
        let Some(lance_table) = self.open_table(table).await? else {
            return Ok(0);
        };
        let orphans: Vec<String> =
            self.embedded_hashes(table).await?.into_iter().filter(|hash| !keep.contains(hash)).collect();
        for batch in orphans.chunks(DELETE_BATCH) {
            // Hashes are lowercase hex, produced by us: safe inside a quoted SQL literal.
            let list: Vec<String> =
                batch.iter().filter(|h| h.chars().all(|c| c.is_ascii_hexdigit())).map(|h| format!("'{h}'")).collect();
            if list.is_empty() {
                continue;
            }
            lance_table
                .delete(format!("content_hash IN ({})", list.join(", ")).as_str())
                .await
                .map_err(self.lance())?;
        }
        debug!(table, n_orphans = orphans.len(), "dropped orphan vectors");
        Ok(orphans.len())
    }

    /// Drops every vector table but `keep` (the vectors of a previous embedder).
    pub async fn drop_other_tables(&self, keep: &str) -> Result<Vec<String>, IndexError> {
        let mut dropped = Vec::new();
        for name in self.table_names().await? {
            if name.starts_with(VECTOR_TABLE_PREFIX) && name != keep {
                self.connection.drop_table(&name, &[]).await.map_err(self.lance())?;
                dropped.push(name);
            }
        }
        Ok(dropped)
    }

    /// Rows in `table` (0 when it does not exist yet).
    pub async fn count_rows(&self, table: &str) -> Result<usize, IndexError> {
        match self.open_table(table).await? {
            Some(table) => table.count_rows(None).await.map_err(self.lance()),
            None => Ok(0),
        }
    }

    /// Nearest windows to `query` by cosine distance; `visibility` restricts the rows searched
    /// (player requests pass `Some(Player)`, so DM-only vectors are never even scored).
    pub async fn search(
        &self,
        table: &str,
        query: &[f32],
        visibility: Option<Visibility>,
        limit: usize,
    ) -> Result<Vec<VectorHit>, IndexError> {
        let Some(table) = self.open_table(table).await? else {
            return Ok(Vec::new());
        };
        let mut search = table
            .query()
            .nearest_to(query)
            .map_err(self.lance())?
            .distance_type(DistanceType::Cosine)
            .select(Select::columns(&["content_hash", "window"]))
            .limit(limit);
        if let Some(visibility) = visibility {
            search = search.only_if(format!("visibility = '{}'", visibility.as_str()));
        }
        let batches: Vec<RecordBatch> =
            search.execute().await.map_err(self.lance())?.try_collect().await.map_err(self.lance())?;
        let mut hits = Vec::new();
        for batch in &batches {
            let hashes = string_column(batch, "content_hash", &self.path)?;
            let windows = batch
                .column_by_name("window")
                .and_then(|c| c.as_any().downcast_ref::<Int32Array>())
                .ok_or_else(|| IndexError::Vectors { path: self.path.clone(), detail: "no window column".into() })?;
            let distances =
                batch.column_by_name("_distance").and_then(|c| c.as_any().downcast_ref::<Float32Array>()).ok_or_else(
                    || IndexError::Vectors { path: self.path.clone(), detail: "no _distance column".into() },
                )?;
            for row in 0..batch.num_rows() {
                hits.push(VectorHit {
                    content_hash: hashes.value(row).to_string(),
                    window: windows.value(row),
                    distance: distances.value(row),
                });
            }
        }
        Ok(hits)
    }
}

fn string_column<'a>(batch: &'a RecordBatch, name: &str, path: &str) -> Result<&'a StringArray, IndexError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| IndexError::Vectors { path: path.to_string(), detail: format!("no {name} column") })
}

fn to_record_batch(rows: &[VectorRow], dimension: usize) -> Result<RecordBatch, String> {
    if let Some(bad) = rows.iter().find(|row| row.vector.len() != dimension) {
        return Err(format!("vector of {} dimensions for a {dimension}-dimension table", bad.vector.len()));
    }
    let hashes = StringArray::from_iter_values(rows.iter().map(|row| row.content_hash.as_str()));
    let windows = Int32Array::from_iter_values(rows.iter().map(|row| row.window));
    let visibility = StringArray::from_iter_values(rows.iter().map(|row| row.visibility.as_str()));
    let values = Float32Array::from_iter_values(rows.iter().flat_map(|row| row.vector.iter().copied()));
    let vectors = FixedSizeListArray::try_new(
        Arc::new(Field::new("item", DataType::Float32, true)),
        dimension as i32,
        Arc::new(values),
        None,
    )
    .map_err(|err| err.to_string())?;
    RecordBatch::try_new(
        schema(dimension),
        vec![Arc::new(hashes), Arc::new(windows), Arc::new(visibility), Arc::new(vectors)],
    )
    .map_err(|err| err.to_string())
}
