//! Writing one ingest: files, fragments, their BM25 passages, links, diagnostics, meta and the
//! compendium, all in one transaction, so that a reader never sees half an ingest.

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use tracing::info_span;

use super::{
    BM25_WINDOW_STEP, BM25_WINDOW_WORDS, CompendiumRecords, FileRecord, IngestChanges, META_GENERATION, Store,
};
use crate::corpus::{FragmentId, Visibility};
use crate::index::IndexError;
use crate::text::fold;

impl Store {
    /// Writes one ingest's changes in a single transaction.
    pub fn apply_ingest(&mut self, changes: &IngestChanges) -> Result<(), IndexError> {
        let _span =
            info_span!("index.write_sqlite", n_upserts = changes.upserts.len(), n_removals = changes.removals.len())
                .entered();
        let transaction = self.connection.transaction()?;
        // Removals first, so a label moving from one file to another never collides.
        for path in changes.removals.iter().chain(changes.upserts.iter().map(|file| &file.path)) {
            transaction.execute("DELETE FROM files WHERE path = ?1", [path])?;
        }
        for file in &changes.upserts {
            insert_file(&transaction, file)?;
        }
        transaction.execute("DELETE FROM diagnostics", [])?;
        for diagnostic in &changes.diagnostics {
            transaction.execute(
                "INSERT INTO diagnostics (path, line, message) VALUES (?1, ?2, ?3)",
                params![diagnostic.path, diagnostic.line, diagnostic.message],
            )?;
        }
        if let Some(records) = &changes.compendium {
            write_compendium(&transaction, records)?;
        }
        for (key, value) in &changes.meta {
            transaction.execute(
                "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                params![key, value],
            )?;
        }
        transaction.execute(
            "INSERT INTO meta (key, value) VALUES (?1, '1') \
             ON CONFLICT (key) DO UPDATE SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)",
            [META_GENERATION],
        )?;
        transaction.commit()?;
        Ok(())
    }
}

/// A fragment's BM25 passages ([`BM25_WINDOW_WORDS`] every [`BM25_WINDOW_STEP`]).
pub(super) fn insert_windows(connection: &Connection, fragment_id: FragmentId, text: &str) -> rusqlite::Result<()> {
    let mut insert =
        connection.prepare_cached("INSERT INTO fragment_windows (fragment_id, window, text) VALUES (?1, ?2, ?3)")?;
    for (window, passage) in crate::text::word_windows(text, BM25_WINDOW_WORDS, BM25_WINDOW_STEP).iter().enumerate() {
        insert.execute(params![fragment_id, window as i64, passage])?;
    }
    Ok(())
}

fn insert_file(transaction: &Transaction<'_>, file: &FileRecord) -> rusqlite::Result<()> {
    transaction.execute(
        "INSERT INTO files (path, content_hash, kind, title, aliases, tags, fingerprint, n_bytes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            file.path,
            file.content_hash,
            file.kind.as_str(),
            file.title,
            serde_json::to_string(&file.aliases).unwrap_or_else(|_| "[]".into()),
            serde_json::to_string(&file.tags).unwrap_or_else(|_| "[]".into()),
            file.fingerprint(),
            file.n_bytes as i64,
        ],
    )?;
    let mut insert_fragment = transaction.prepare_cached(
        "INSERT INTO fragments (label, kind, source_path, session, part, heading_path, text, word_count,
                                line_start, line_end, visibility, content_hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    for fragment in &file.fragments {
        let fragment_id = insert_fragment.insert(params![
            fragment.label,
            fragment.kind.as_str(),
            file.path,
            fragment.session.map(|s| s.0),
            fragment.part,
            serde_json::to_string(&fragment.heading_path).unwrap_or_else(|_| "[]".into()),
            fragment.text,
            fragment.word_count as i64,
            fragment.line_start,
            fragment.line_end,
            fragment.visibility.as_str(),
            fragment.content_hash,
        ])?;
        insert_windows(transaction, FragmentId(fragment_id), &fragment.text)?;
    }
    let mut insert_link =
        transaction.prepare_cached("INSERT INTO links (source_path, target, shown, embed) VALUES (?1, ?2, ?3, ?4)")?;
    for link in &file.links {
        insert_link.execute(params![file.path, link.target, link.shown, link.embed])?;
    }
    Ok(())
}

fn entity_visibility(gm_only: bool) -> Visibility {
    if gm_only { Visibility::DmOnly } else { Visibility::Player }
}

fn write_compendium(transaction: &Transaction<'_>, records: &CompendiumRecords) -> rusqlite::Result<()> {
    // Cascades to aliases and mentions.
    transaction.execute("DELETE FROM entities", [])?;
    let mut insert_entity = transaction.prepare_cached(
        "INSERT INTO entities (name, kind, description, sources, note_path, visibility)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut insert_alias = transaction
        .prepare_cached("INSERT INTO entity_aliases (entity_id, alias, folded, visibility) VALUES (?1, ?2, ?3, ?4)")?;
    let mut ids = Vec::with_capacity(records.compendium.entities.len());
    for entity in &records.compendium.entities {
        let sources: Vec<&str> = entity.sources.iter().map(|s| s.as_str()).collect();
        insert_entity.execute(params![
            entity.name,
            entity.kind.as_str(),
            entity.description,
            serde_json::to_string(&sources).unwrap_or_else(|_| "[]".into()),
            entity.note_path,
            entity_visibility(entity.gm_only).as_str(),
        ])?;
        let id = transaction.last_insert_rowid();
        ids.push(id);
        for alias in std::iter::once(&entity.name).chain(entity.aliases.iter()) {
            insert_alias.execute(params![id, alias, fold(alias), entity_visibility(entity.gm_only).as_str()])?;
        }
        for alias in &entity.gm_aliases {
            insert_alias.execute(params![id, alias, fold(alias), Visibility::DmOnly.as_str()])?;
        }
    }
    let mut fragment_id = transaction.prepare_cached("SELECT id FROM fragments WHERE label = ?1 AND part = ?2")?;
    let mut insert_mention = transaction.prepare_cached(
        "INSERT INTO entity_mentions (entity_id, fragment_id, n_mentions) VALUES (?1, ?2, ?3)
         ON CONFLICT (entity_id, fragment_id) DO UPDATE SET n_mentions = n_mentions + excluded.n_mentions",
    )?;
    for mention in &records.mentions {
        let (Some(&entity_id), Some(id)) = (
            ids.get(mention.entity),
            fragment_id
                .query_row(params![mention.label, mention.part], |row| row.get::<_, FragmentId>(0))
                .optional()?,
        ) else {
            continue;
        };
        insert_mention.execute(params![entity_id, id, mention.count])?;
    }
    Ok(())
}
