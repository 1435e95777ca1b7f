//! The stored compendium: its entities, their aliases and mentions, and the version of the
//! rules that built it.

use std::collections::HashMap;

use rusqlite::params;

use super::{EntityListing, META_COMPENDIUM_VERSION, Store};
use crate::compendium::{Compendium, Entity, EntityKind, EntitySource};
use crate::corpus::{SessionNumber, Visibility};
use crate::index::IndexError;
use crate::text::fold;

impl Store {
    /// The stored compendium as `visibility` may read it (`None`: the GM, everything),
    /// entities in store order, with each entity's store id. For players, a GM-only entity is
    /// left out and a GM-only alias is not an alias; for the GM, GM-only aliases are aliases.
    pub fn load_compendium(&self, visibility: Option<Visibility>) -> Result<(Compendium, Vec<i64>), IndexError> {
        let audience = visibility.map(Visibility::as_str);
        let mut statement = self.connection.prepare(
            "SELECT id, name, kind, description, sources, note_path, visibility FROM entities
             WHERE ?1 IS NULL OR visibility = ?1 ORDER BY id",
        )?;
        let rows = statement.query_map([audience], |row| {
            let kind: String = row.get(2)?;
            let sources: String = row.get(4)?;
            Ok((
                row.get::<_, i64>(0)?,
                Entity {
                    name: row.get(1)?,
                    kind: EntityKind::parse(&kind).unwrap_or(EntityKind::Other),
                    aliases: Vec::new(),
                    description: row.get(3)?,
                    sources: serde_json::from_str::<Vec<String>>(&sources)
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|s| EntitySource::parse(s))
                        .collect(),
                    note_path: row.get(5)?,
                    gm_only: row.get::<_, String>(6)? == Visibility::DmOnly.as_str(),
                    gm_aliases: Vec::new(),
                },
            ))
        })?;
        let (ids, mut entities): (Vec<i64>, Vec<Entity>) =
            rows.collect::<rusqlite::Result<Vec<_>>>()?.into_iter().unzip();
        let position: HashMap<i64, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let mut aliases = self.connection.prepare(
            "SELECT entity_id, alias FROM entity_aliases WHERE ?1 IS NULL OR visibility = ?1 ORDER BY rowid",
        )?;
        let rows = aliases.query_map([audience], |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)))?;
        for row in rows {
            let (entity_id, alias) = row?;
            if let Some(entity) = position.get(&entity_id).and_then(|&i| entities.get_mut(i))
                && alias != entity.name
            {
                entity.aliases.push(alias);
            }
        }
        Ok((Compendium { entities }, ids))
    }

    /// Every entity with its aliases and where it is mentioned (`visibility` filters the
    /// fragments counted).
    pub fn compendium_listing(&self, visibility: Option<Visibility>) -> Result<Vec<EntityListing>, IndexError> {
        let (compendium, ids) = self.load_compendium(visibility)?;
        let mut statement = self.connection.prepare_cached(
            "SELECT DISTINCT f.session, f.label FROM entity_mentions m JOIN fragments f ON f.id = m.fragment_id
             WHERE m.entity_id = ?1 AND (?2 IS NULL OR f.visibility = ?2) ORDER BY f.session, f.label",
        )?;
        let mut listings = Vec::with_capacity(ids.len());
        for (entity, id) in compendium.entities.into_iter().zip(ids) {
            let mut sessions = Vec::new();
            let mut other_labels = Vec::new();
            let rows = statement.query_map(params![id, visibility.map(Visibility::as_str)], |row| {
                Ok((row.get::<_, Option<u32>>(0)?, row.get::<_, String>(1)?))
            })?;
            for row in rows {
                match row? {
                    (Some(session), _) => {
                        if sessions.last() != Some(&SessionNumber(session)) {
                            sessions.push(SessionNumber(session));
                        }
                    }
                    (None, label) => other_labels.push(label),
                }
            }
            listings.push(EntityListing {
                name: entity.name,
                kind: entity.kind,
                aliases: entity.aliases,
                description: entity.description,
                note_path: entity.note_path,
                sessions,
                other_labels,
            });
        }
        listings.sort_by_cached_key(|listing| fold(&listing.name));
        Ok(listings)
    }

    /// Whether an ingest has written a compendium with `version`'s rules.
    pub fn compendium_version(&self) -> Result<Option<String>, IndexError> {
        self.meta(META_COMPENDIUM_VERSION)
    }
}
