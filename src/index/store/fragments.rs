//! Reading fragments: by label, by FTS5 match over fragments and their BM25 passages, by id
//! with the text searched checked again, and the sources and entity mentions they make up.

use std::collections::HashMap;

use rusqlite::{OptionalExtension, params};

use super::{Bm25Unit, EntityMention, FragmentHead, SourceSummary, Store, StoredFragment};
use crate::corpus::{Diagnostic, Fragment, FragmentId, Label, NoteKind, SessionNumber, Visibility};
use crate::index::IndexError;

impl Store {
    /// Labels with their kind, source, session and fragment counts, sessions first by number.
    pub fn sources(&self) -> Result<Vec<SourceSummary>, IndexError> {
        self.sources_visible(None)
    }

    /// [`Store::sources`] counting only the fragments `visibility` allows: a label with no
    /// fragment a player may read (a secret note's, which may name the secret) is not listed.
    pub fn sources_visible(&self, visibility: Option<Visibility>) -> Result<Vec<SourceSummary>, IndexError> {
        let mut statement = self.connection.prepare(
            "SELECT label, kind, source_path, session, COUNT(*),
                    SUM(visibility = 'dm_only'), SUM(word_count)
             FROM fragments WHERE ?1 IS NULL OR visibility = ?1 GROUP BY label, source_path
             ORDER BY CASE kind WHEN 'session' THEN 0 WHEN 'sheet' THEN 1 ELSE 2 END,
                      session, label",
        )?;
        let rows = statement.query_map([visibility.map(Visibility::as_str)], |row| {
            let kind: String = row.get(1)?;
            Ok(SourceSummary {
                label: row.get(0)?,
                kind: NoteKind::parse(&kind).unwrap_or(NoteKind::World),
                source_path: row.get(2)?,
                session: row.get::<_, Option<u32>>(3)?.map(SessionNumber),
                n_fragments: row.get(4)?,
                n_dm_only: row.get(5)?,
                n_words: row.get::<_, i64>(6)? as u64,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The distinct labels the stored fragments of each of `paths` hold, as (path, label).
    pub fn labels_of_paths(&self, paths: &[String]) -> Result<Vec<(String, Label)>, IndexError> {
        let mut statement =
            self.connection.prepare_cached("SELECT DISTINCT label FROM fragments WHERE source_path = ?1")?;
        let mut labels = Vec::new();
        for path in paths {
            let rows = statement.query_map([path], |row| row.get::<_, Label>(0))?;
            for label in rows {
                labels.push((path.clone(), label?));
            }
        }
        Ok(labels)
    }

    /// The diagnostics the last complete ingest recorded.
    pub fn diagnostics(&self) -> Result<Vec<Diagnostic>, IndexError> {
        let mut statement =
            self.connection.prepare("SELECT path, line, message FROM diagnostics ORDER BY path, line")?;
        let rows = statement
            .query_map([], |row| Ok(Diagnostic { path: row.get(0)?, line: row.get(1)?, message: row.get(2)? }))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// All stored fragments, in label order; `visibility` None means every fragment.
    pub fn fragments(&self, visibility: Option<Visibility>) -> Result<Vec<StoredFragment>, IndexError> {
        let mut statement = self.connection.prepare(
            "SELECT id, label, kind, source_path, session, part, heading_path, text, word_count,
                    line_start, line_end, visibility, content_hash
             FROM fragments WHERE ?1 IS NULL OR visibility = ?1 ORDER BY source_path, line_start, part",
        )?;
        let rows = statement.query_map([visibility.map(Visibility::as_str)], read_fragment)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Every fragment of `label` that `visibility` allows, in part order (a source shown whole).
    pub fn fragments_of_label(
        &self,
        label: &str,
        visibility: Option<Visibility>,
    ) -> Result<Vec<StoredFragment>, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT id, label, kind, source_path, session, part, heading_path, text, word_count,
                    line_start, line_end, visibility, content_hash
             FROM fragments WHERE label = ?1 AND (?2 IS NULL OR visibility = ?2) ORDER BY part, id",
        )?;
        let rows = statement.query_map(params![label, visibility.map(Visibility::as_str)], read_fragment)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// `(fragment id, bm25 score)` rows whose text matches `fts_query` (already an FTS5
    /// expression), best first (lower is better, as FTS5 scores), at most `limit`: one row a
    /// fragment, or one a window ([`Bm25Unit`]). The caller owns turning user text into a safe
    /// expression.
    pub fn match_fts(
        &self,
        unit: Bm25Unit,
        fts_query: &str,
        visibility: Option<Visibility>,
        limit: usize,
    ) -> Result<Vec<(FragmentId, f64)>, IndexError> {
        let sql = match unit {
            Bm25Unit::Fragment => {
                "SELECT f.id, bm25(fragments_fts) AS score
                 FROM fragments_fts JOIN fragments f ON f.id = fragments_fts.rowid
                 WHERE fragments_fts MATCH ?1 AND (?2 IS NULL OR f.visibility = ?2)
                 ORDER BY score, f.id LIMIT ?3"
            }
            Bm25Unit::Window => {
                "SELECT w.fragment_id, bm25(fragment_windows_fts) AS score
                 FROM fragment_windows_fts JOIN fragment_windows w ON w.id = fragment_windows_fts.rowid
                      JOIN fragments f ON f.id = w.fragment_id
                 WHERE fragment_windows_fts MATCH ?1 AND (?2 IS NULL OR f.visibility = ?2)
                 ORDER BY score, w.id LIMIT ?3"
            }
        };
        let mut statement = self.connection.prepare_cached(sql)?;
        let rows = statement
            .query_map(params![fts_query, visibility.map(Visibility::as_str), limit as i64], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// `(fragment id, window)` of the BM25 windows whose text matches `fts_query` (already an
    /// FTS5 expression), best first, among the windows of `fragments` only, at most `limit`.
    pub fn match_fts_windows(
        &self,
        fts_query: &str,
        fragments: &[FragmentId],
        limit: usize,
    ) -> Result<Vec<(FragmentId, u32)>, IndexError> {
        if fragments.is_empty() {
            return Ok(Vec::new());
        }
        // The ids are numbers of our own, never user text.
        let ids: Vec<String> = fragments.iter().map(|id| id.0.to_string()).collect();
        let sql = format!(
            "SELECT w.fragment_id, w.window
             FROM fragment_windows_fts JOIN fragment_windows w ON w.id = fragment_windows_fts.rowid
             WHERE fragment_windows_fts MATCH ?1 AND w.fragment_id IN ({})
             ORDER BY bm25(fragment_windows_fts), w.id LIMIT ?2",
            ids.join(", ")
        );
        let mut statement = self.connection.prepare(&sql)?;
        let rows = statement.query_map(params![fts_query, limit as i64], |row| Ok((row.get(0)?, row.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Whether some fragment `visibility` allows matches the FTS5 expression `fts_query`.
    pub fn fts_has_term(&self, fts_query: &str, visibility: Option<Visibility>) -> Result<bool, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM fragments_fts JOIN fragments f ON f.id = fragments_fts.rowid
                            WHERE fragments_fts MATCH ?1 AND (?2 IS NULL OR f.visibility = ?2))",
        )?;
        Ok(statement.query_row(params![fts_query, visibility.map(Visibility::as_str)], |row| row.get(0))?)
    }

    /// content hash → ids of the fragments with that text and an allowed visibility.
    pub fn fragment_ids_by_hash(
        &self,
        hashes: &[&str],
        visibility: Option<Visibility>,
    ) -> Result<HashMap<String, Vec<FragmentId>>, IndexError> {
        let mut rows = Vec::new();
        let mut statement = self.connection.prepare_cached(
            "SELECT content_hash, id FROM fragments WHERE content_hash = ?1 AND (?2 IS NULL OR visibility = ?2)",
        )?;
        for hash in hashes {
            let found = statement
                .query_map(params![hash, visibility.map(Visibility::as_str)], |row| Ok((row.get(0)?, row.get(1)?)))?;
            for row in found {
                rows.push(row?);
            }
        }
        let mut grouped: HashMap<String, Vec<FragmentId>> = HashMap::new();
        for (hash, id) in rows {
            grouped.entry(hash).or_default().push(id);
        }
        for ids in grouped.values_mut() {
            ids.sort_unstable();
        }
        Ok(grouped)
    }

    /// Every mention of `entity_ids` in a fragment `visibility` allows: which entity, which
    /// fragment, how often, the fragment's length and session. Unordered: the entity path ranks.
    pub fn entity_mentions(
        &self,
        entity_ids: &[i64],
        visibility: Option<Visibility>,
    ) -> Result<Vec<EntityMention>, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT m.entity_id, f.id, m.n_mentions, f.word_count, f.session
             FROM entity_mentions m JOIN fragments f ON f.id = m.fragment_id
             WHERE m.entity_id = ?1 AND (?2 IS NULL OR f.visibility = ?2)",
        )?;
        let mut mentions = Vec::new();
        for entity_id in entity_ids {
            let rows = statement.query_map(params![entity_id, visibility.map(Visibility::as_str)], |row| {
                Ok(EntityMention {
                    entity_id: row.get(0)?,
                    fragment_id: row.get(1)?,
                    n_mentions: row.get(2)?,
                    word_count: row.get(3)?,
                    session: row.get::<_, Option<u32>>(4)?.map(SessionNumber),
                })
            })?;
            for row in rows {
                mentions.push(row?);
            }
        }
        Ok(mentions)
    }

    /// How many distinct sessions hold a fragment `visibility` allows: the denominator of an
    /// entity's session share.
    pub fn n_sessions(&self, visibility: Option<Visibility>) -> Result<usize, IndexError> {
        let n: i64 = self.connection.query_row(
            "SELECT COUNT(DISTINCT session) FROM fragments WHERE session IS NOT NULL AND (?1 IS NULL OR visibility = ?1)",
            params![visibility.map(Visibility::as_str)],
            |row| row.get(0),
        )?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// What retrieval shows of a fragment without its text, in the order of `ids`
    /// (ids that no longer exist are skipped).
    pub fn fragment_heads(&self, ids: &[FragmentId]) -> Result<Vec<FragmentHead>, IndexError> {
        let mut statement = self.connection.prepare_cached(
            "SELECT id, label, kind, source_path, session, part, visibility, content_hash FROM fragments WHERE id = ?1",
        )?;
        let mut heads = Vec::with_capacity(ids.len());
        for id in ids {
            let found = statement
                .query_row([id], |row| {
                    let kind: String = row.get(2)?;
                    let visibility: String = row.get(6)?;
                    Ok(FragmentHead {
                        id: row.get(0)?,
                        label: row.get(1)?,
                        kind: NoteKind::parse(&kind).unwrap_or(NoteKind::World),
                        source_path: row.get(3)?,
                        session: row.get::<_, Option<u32>>(4)?.map(SessionNumber),
                        part: row.get(5)?,
                        visibility: Visibility::parse(&visibility).unwrap_or(Visibility::DmOnly),
                        content_hash: row.get(7)?,
                    })
                })
                .optional()?;
            heads.extend(found);
        }
        Ok(heads)
    }

    /// The fragments `wanted` names, each only while it still holds the text that was
    /// searched (`(id, content_hash)`) and `visibility` allows it, in the order asked.
    /// One query. Anything fetched by id for a reader goes through here: an id found by one
    /// search must never hand over text the search did not see.
    pub fn fragments_checked(
        &self,
        wanted: &[(FragmentId, &str)],
        visibility: Option<Visibility>,
    ) -> Result<Vec<StoredFragment>, IndexError> {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let wanted_json = serde_json::Value::Array(
            wanted.iter().map(|(id, hash)| serde_json::json!({ "id": id, "hash": hash })).collect(),
        )
        .to_string();
        let mut statement = self.connection.prepare_cached(
            "SELECT f.id, f.label, f.kind, f.source_path, f.session, f.part, f.heading_path, f.text, f.word_count,
                    f.line_start, f.line_end, f.visibility, f.content_hash
             FROM json_each(?1) AS w
             JOIN fragments f ON f.id = json_extract(w.value, '$.id')
                             AND f.content_hash = json_extract(w.value, '$.hash')
             WHERE ?2 IS NULL OR f.visibility = ?2
             ORDER BY w.key",
        )?;
        let rows = statement.query_map(params![wanted_json, visibility.map(Visibility::as_str)], read_fragment)?;
        let mut checked: Vec<StoredFragment> = Vec::with_capacity(wanted.len());
        for row in rows {
            let stored = row?;
            // Belt and braces: the query's filter, restated where a reader can see it.
            let allowed = visibility.is_none_or(|visibility| stored.fragment.visibility == visibility);
            if allowed && !checked.iter().any(|seen| seen.id == stored.id) {
                checked.push(stored);
            }
        }
        Ok(checked)
    }
}

pub(super) fn read_fragment(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredFragment> {
    let kind: String = row.get(2)?;
    let heading_path: String = row.get(6)?;
    let visibility: String = row.get(11)?;
    Ok(StoredFragment {
        id: row.get(0)?,
        fragment: Fragment {
            label: row.get(1)?,
            kind: NoteKind::parse(&kind).unwrap_or(NoteKind::World),
            source_path: row.get(3)?,
            session: row.get::<_, Option<u32>>(4)?.map(SessionNumber),
            part: row.get(5)?,
            heading_path: serde_json::from_str(&heading_path).unwrap_or_default(),
            text: row.get(7)?,
            word_count: row.get::<_, i64>(8)? as usize,
            line_start: row.get(9)?,
            line_end: row.get(10)?,
            // Unknown values read as DM-only: fail closed, never leak.
            visibility: Visibility::parse(&visibility).unwrap_or(Visibility::DmOnly),
            content_hash: row.get(12)?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::content_hash;
    use crate::index::store::{FileRecord, IngestChanges};

    /// One file `s.md` whose fragments are `(label, text, visibility)`.
    fn file(fragments: &[(&str, &str, Visibility)]) -> FileRecord {
        let fragments = fragments
            .iter()
            .map(|&(label, text, visibility)| Fragment {
                label: Label::new(label),
                kind: NoteKind::Session,
                source_path: "s.md".to_string(),
                session: None,
                part: 0,
                heading_path: Vec::new(),
                text: text.to_string(),
                word_count: text.split_whitespace().count(),
                line_start: 1,
                line_end: 1,
                visibility,
                content_hash: content_hash(visibility, text),
            })
            .collect();
        FileRecord {
            path: "s.md".to_string(),
            content_hash: content_hash(Visibility::Player, "file"),
            kind: NoteKind::Session,
            title: "s".to_string(),
            aliases: Vec::new(),
            tags: Vec::new(),
            n_bytes: 1,
            fragments,
            links: Vec::new(),
        }
    }

    fn ingest(store: &mut Store, record: FileRecord) {
        store.apply_ingest(&IngestChanges { upserts: vec![record], ..IngestChanges::default() }).unwrap();
    }

    /// Ingests `before`, searches it as a player (ids and hashes), checks the checked fetch
    /// hands all of that back, re-ingests the file as `after`, and checks that no id came back
    /// and that the earlier search now fetches nothing.
    fn check(before: &[(&str, &str, Visibility)], after: &[(&str, &str, Visibility)]) {
        let dir = tempfile::TempDir::new().unwrap();
        let mut store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        ingest(&mut store, file(before));
        let searched: Vec<(FragmentId, String)> = store
            .fragments(Some(Visibility::Player))
            .unwrap()
            .into_iter()
            .map(|stored| (stored.id, stored.fragment.content_hash))
            .collect();
        let wanted: Vec<(FragmentId, &str)> = searched.iter().map(|(id, hash)| (*id, hash.as_str())).collect();
        assert_eq!(store.fragments_checked(&wanted, Some(Visibility::Player)).unwrap().len(), wanted.len());
        let old_ids: Vec<FragmentId> = store.fragments(None).unwrap().iter().map(|stored| stored.id).collect();
        ingest(&mut store, file(after));
        let new_ids: Vec<FragmentId> = store.fragments(None).unwrap().iter().map(|stored| stored.id).collect();
        assert!(new_ids.iter().all(|id| !old_ids.contains(id)), "ids reused: {old_ids:?} → {new_ids:?}");
        let shown: Vec<String> = store
            .fragments_checked(&wanted, Some(Visibility::Player))
            .unwrap()
            .into_iter()
            .map(|stored| format!("{}: {}", stored.fragment.label, stored.fragment.text))
            .collect();
        assert!(shown.is_empty(), "{shown:?}");
    }

    const PLAYER: Visibility = Visibility::Player;
    const GM: Visibility = Visibility::DmOnly;

    #[test]
    fn a_source_is_read_by_label_in_part_order_within_the_audience() {
        let dir = tempfile::TempDir::new().unwrap();
        let mut store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        let mut record = file(&[
            ("Sesión 3", "la segunda parte", PLAYER),
            ("Sesión 3", "el secreto", GM),
            ("Sesión 3", "la primera parte", PLAYER),
            ("Sesión 4", "otra sesión", PLAYER),
        ]);
        for (fragment, part) in record.fragments.iter_mut().zip([1, 2, 0, 0]) {
            fragment.part = part;
        }
        ingest(&mut store, record);
        let texts = |visibility| -> Vec<String> {
            store.fragments_of_label("Sesión 3", visibility).unwrap().into_iter().map(|f| f.fragment.text).collect()
        };
        assert_eq!(texts(Some(PLAYER)), ["la primera parte", "la segunda parte"]);
        assert_eq!(texts(None), ["la primera parte", "la segunda parte", "el secreto"]);
    }

    #[test]
    fn a_word_only_a_secret_holds_is_absent_for_a_player() {
        // The BM25 path weighs its list by the question's words the notes hold: a word only a
        // GM-only note holds must not count for a player (it would tell them it exists).
        let dir = tempfile::TempDir::new().unwrap();
        let mut store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        ingest(&mut store, file(&[("Sesión 1", "el puerto de Galerna", PLAYER), ("Sesión 2", "el traidor Ardo", GM)]));
        let has = |term: &str, visibility| store.fts_has_term(&format!("\"{term}\""), visibility).unwrap();
        assert!(has("galerna", Some(PLAYER)) && has("galerna", None));
        assert!(!has("traidor", Some(PLAYER)), "a secret word counted for a player");
        assert!(has("traidor", Some(GM)) && has("traidor", None));
        assert!(!has("dragon", None));
    }

    #[test]
    fn ids_are_never_reused_and_fetches_recheck_what_was_searched() {
        // The same label now holds a GM-only part.
        check(&[("Sesión 1", "uno", PLAYER)], &[("Sesión 1", "el traidor", GM)]);
        // The last id deleted (the one a plain rowid hands out again) comes back with GM text.
        check(
            &[("Sesión 1", "uno", PLAYER), ("Sesión 2", "dos", PLAYER)],
            &[("Sesión 1", "uno", PLAYER), ("Sesión 3", "el traidor", GM)],
        );
        // Same text, now secret: same words, other hash.
        check(&[("Sesión 1", "uno", PLAYER)], &[("Sesión 1", "uno", GM)]);
    }

    #[test]
    fn a_row_changed_under_a_kept_id_is_dropped() {
        let dir = tempfile::TempDir::new().unwrap();
        let mut store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        ingest(&mut store, file(&[("Sesión 1", "uno", PLAYER), ("Sesión 2", "dos", PLAYER)]));
        let stored = store.fragments(None).unwrap();
        let wanted: Vec<(FragmentId, &str)> =
            stored.iter().map(|stored| (stored.id, stored.fragment.content_hash.as_str())).collect();
        // Whatever writes rows in the future: same id, other visibility; same id, other text.
        store.connection.execute("UPDATE fragments SET visibility = 'dm_only' WHERE id = ?1", [wanted[0].0]).unwrap();
        store.connection.execute("UPDATE fragments SET text = 'el traidor' WHERE id = ?1", [wanted[1].0]).unwrap();
        store.connection.execute("UPDATE fragments SET content_hash = 'x' WHERE id = ?1", [wanted[1].0]).unwrap();
        assert!(store.fragments_checked(&wanted, Some(Visibility::Player)).unwrap().is_empty());
        let gm: Vec<FragmentId> =
            store.fragments_checked(&wanted, None).unwrap().into_iter().map(|stored| stored.id).collect();
        assert_eq!(gm, [wanted[0].0], "a GM still reads the row whose hash matches");
    }
}
