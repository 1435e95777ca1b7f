//! Annotations: the cached output of a model (or of the extractive rule) for a fragment's
//! text, keyed by content hash, model and prompt version.

use std::collections::HashMap;

use rusqlite::{OptionalExtension, params};

use super::fragments::read_fragment;
use super::{Store, StoredFragment};
use crate::index::IndexError;

/// Who made an extractive annotation: no model, the fragment's own most central sentences,
/// made at ingest for every fragment (`answer::passages::central_sentences`). Stored beside
/// the model's annotations; the summaries read it where no model annotation exists, the
/// rerank never (it reads what a model wrote).
pub const EXTRACTIVE_ANNOTATOR: &str = "extractive";
/// The version of the extractive annotation's rule, part of its cache key.
pub const EXTRACTIVE_ANNOTATION_VERSION: &str = "central-sentences.v1";

/// Orphaned model annotations (of a text no fragment holds any more) kept, at least: an edit
/// undone or a note moved back finds the annotation a CPU spent a minute on. The cache keeps
/// as many orphans as the campaign has fragments, and never fewer than this.
pub const ORPHANED_ANNOTATIONS_KEPT: usize = 64;

impl Store {
    /// Removes the annotations of texts no fragment holds any more, so a note saved a thousand
    /// times does not leave a thousand annotations behind: every orphaned extractive one (made
    /// again in milliseconds should its text come back), and the oldest orphaned model ones
    /// beyond as many as the campaign has fragments (at least [`ORPHANED_ANNOTATIONS_KEPT`]).
    /// How many were removed.
    pub fn prune_orphaned_annotations(&mut self) -> Result<usize, IndexError> {
        let transaction = self.connection.transaction()?;
        let orphaned = "NOT EXISTS (SELECT 1 FROM fragments f WHERE f.content_hash = annotations.content_hash)";
        let extractive = transaction.execute(
            &format!("DELETE FROM annotations WHERE model = ?1 AND {orphaned}"),
            params![EXTRACTIVE_ANNOTATOR],
        )?;
        let fragments: i64 = transaction.query_row("SELECT count(*) FROM fragments", [], |row| row.get(0))?;
        let kept = fragments.max(ORPHANED_ANNOTATIONS_KEPT as i64);
        let by_model = transaction.execute(
            &format!(
                "DELETE FROM annotations WHERE {orphaned} AND rowid NOT IN (
                     SELECT rowid FROM annotations WHERE {orphaned} ORDER BY rowid DESC LIMIT ?1)"
            ),
            params![kept],
        )?;
        transaction.commit()?;
        Ok(extractive + by_model)
    }

    /// Cached annotations of `hashes` by `model` under `prompt_version` (for the extractive
    /// ones, [`EXTRACTIVE_ANNOTATOR`] and [`EXTRACTIVE_ANNOTATION_VERSION`]): hash → text.
    pub fn annotations(
        &self,
        hashes: &[&str],
        model: &str,
        prompt_version: &str,
    ) -> Result<HashMap<String, String>, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT text FROM annotations WHERE content_hash = ?1 AND model = ?2 AND prompt_version = ?3",
        )?;
        let mut found = HashMap::new();
        for hash in hashes {
            if let Some(text) =
                statement.query_row(params![hash, model, prompt_version], |row| row.get::<_, String>(0)).optional()?
            {
                found.insert(hash.to_string(), text);
            }
        }
        Ok(found)
    }

    /// Stores one annotation (committed at once: an interrupted annotation run keeps its work).
    pub fn put_annotation(&self, hash: &str, model: &str, prompt_version: &str, text: &str) -> Result<(), IndexError> {
        self.connection.execute(
            "INSERT INTO annotations (content_hash, model, prompt_version, text) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (content_hash, model, prompt_version) DO UPDATE SET text = excluded.text",
            params![hash, model, prompt_version, text],
        )?;
        Ok(())
    }

    /// Stores many annotations by `model` under `prompt_version` in one transaction.
    pub fn put_annotations(
        &mut self,
        annotations: &[(String, String)],
        model: &str,
        prompt_version: &str,
    ) -> Result<(), IndexError> {
        let transaction = self.connection.transaction()?;
        {
            let mut statement = transaction.prepare_cached(
                "INSERT INTO annotations (content_hash, model, prompt_version, text) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (content_hash, model, prompt_version) DO UPDATE SET text = excluded.text",
            )?;
            for (hash, text) in annotations {
                statement.execute(params![hash, model, prompt_version, text])?;
            }
        }
        transaction.commit()?;
        Ok(())
    }

    /// One fragment per content hash that has no annotation by `model` under `prompt_version`,
    /// in source order.
    pub fn fragments_missing_annotation(
        &self,
        model: &str,
        prompt_version: &str,
    ) -> Result<Vec<StoredFragment>, IndexError> {
        let mut statement = self.connection.prepare(
            "SELECT id, label, kind, source_path, session, part, heading_path, text, word_count,
                    line_start, line_end, visibility, content_hash
             FROM fragments f
             WHERE NOT EXISTS (SELECT 1 FROM annotations a WHERE a.content_hash = f.content_hash
                               AND a.model = ?1 AND a.prompt_version = ?2)
               AND f.id = (SELECT MIN(g.id) FROM fragments g WHERE g.content_hash = f.content_hash)
             ORDER BY source_path, line_start, part",
        )?;
        let rows = statement.query_map(params![model, prompt_version], read_fragment)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The latest cached output under `prompt_version` for each of `hashes`, whichever model
    /// wrote it (entity extractions outlive a change of chat model).
    pub fn cached_outputs_any_model(&self, hashes: &[&str], prompt_version: &str) -> Result<Vec<String>, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT text FROM annotations WHERE content_hash = ?1 AND prompt_version = ?2 ORDER BY rowid DESC LIMIT 1",
        )?;
        let mut found = Vec::new();
        for hash in hashes {
            if let Some(text) =
                statement.query_row(params![hash, prompt_version], |row| row.get::<_, String>(0)).optional()?
            {
                found.push(text);
            }
        }
        Ok(found)
    }
}
