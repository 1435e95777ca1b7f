//! Compendium: the campaign's entities (PCs, NPCs, places, gods…), their aliases, and the
//! resolution of names written in text to entities.
//!
//! [`Compendium::build`] reads the deterministic sources, which are always there:
//! - every character sheet is an entity, with its front matter `aliases`, and the first
//!   word of a character's name ("Nerea" for "Nerea Albaluz") when no one else answers to it;
//! - a world document about one named thing (`Lugares/Puerto Galerna.md`) is an entity;
//!   generic documents (`Reglas.md`, `Cronología.md`) are not;
//! - a wikilink's shown text is an alias of its target (`[[Vaskrith|el dragón blanco]]`),
//!   and a target with no note becomes an entity of its own when it has a shown alias or
//!   is linked from two notes or more. Links to sessions never make entities.
//!
//! [`Compendium::merge_extracted`] adds what a language model extracted (wired by the
//! ingest), without overriding what the notes say.
//!
//! [`EntityMatcher`] finds names and aliases in text: whole words, case- and
//! accent-insensitive, leftmost-longest, ignoring aliases too short or too common to mean
//! anything. [`mentions`] runs it over every fragment at ingest time.
//!
//! Architecture Invariant: pure. Notes and fragments in, entities and mentions out; nothing
//! here stores, ranks or does IO.
//! Architecture Invariant: what players may read of the compendium comes only from
//! player-visible text. A GM-only note's sheet or world document is an entity marked
//! `gm_only`; an alias no player-visible text uses is a `gm_alias`; a link inside a GM secret
//! adds nothing. Every reader of the compendium (listing, matcher, timeline, autocomplete, the
//! model's context) reads it for one audience ([`Compendium::for_players`]), so a player never
//! meets a name only the GM's notes use, and the GM finds every secret note by its aliases.
//!
//! Building lives in [`build`], matching (and finding typed names) in [`matching`]; this
//! module holds the types both share.

mod build;
mod matching;

use serde::{Deserialize, Serialize};

use crate::corpus::LabelLanguage;

pub use matching::{EntityMatcher, mentions};

/// An entity's description is a glance, not a summary: the first sentence or two of its note.
pub const DESCRIPTION_MAX_CHARS: usize = 200;
/// Shorter names and aliases ("Al", "Ed") would match inside ordinary prose too often.
pub const MIN_ALIAS_CHARS: usize = 3;
/// A link target with no note and no shown alias is an entity once this many notes link it:
/// one link may be a typo or a passing idea, two mean the GM keeps referring to it.
pub const MIN_LINKING_NOTES: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntityKind {
    Pc,
    Npc,
    Place,
    God,
    Faction,
    Item,
    Other,
}

/// Where an entity, or part of it, came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntitySource {
    /// A character sheet.
    Sheet,
    /// Front matter `aliases`.
    FrontMatter,
    /// A wikilink's target or shown text.
    Link,
    /// A world document about one named thing.
    World,
    /// Extracted by a language model.
    Llm,
}

/// A PC, NPC, place, god… of the campaign.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entity {
    pub name: String,
    pub kind: EntityKind,
    /// Other names, as written in the notes; never repeats the name (compared folded).
    pub aliases: Vec<String>,
    /// The first sentence or two of the entity's note, at most `DESCRIPTION_MAX_CHARS`;
    /// empty when it has no note.
    pub description: String,
    /// Sorted, without repeats.
    pub sources: Vec<EntitySource>,
    /// The sheet or world document about it, relative to the campaign root.
    pub note_path: Option<String>,
    /// Only the GM may read of it: every note that declares it is GM-only (a sheet in
    /// `PNJs/Secretos/`). Listed, matched and shown for the GM alone.
    #[serde(default)]
    pub gm_only: bool,
    /// Names only the GM may read: aliases that no player-visible text uses (a secret true
    /// name kept as an alias of a public sheet so links resolve). Never in `aliases`.
    #[serde(default)]
    pub gm_aliases: Vec<String>,
}

/// The set of entities of one campaign. Indices into `entities` are the entity ids of
/// [`EntityMatch`] and [`Mention`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compendium {
    pub entities: Vec<Entity>,
}

impl Compendium {
    /// The compendium as players may read it: no GM-only entity, no GM-only alias.
    pub fn for_players(&self) -> Compendium {
        let entities = self
            .entities
            .iter()
            .filter(|entity| !entity.gm_only)
            .map(|entity| Entity { gm_aliases: Vec::new(), ..entity.clone() })
            .collect();
        Compendium { entities }
    }
}

impl Compendium {
    /// The compendium as the GM reads it: every entity, and every alias an alias (what the
    /// GM's matcher and the ingest's mentions read).
    pub fn for_gm(&self) -> Compendium {
        let entities = self
            .entities
            .iter()
            .map(|entity| {
                let mut aliases = entity.aliases.clone();
                aliases.extend(entity.gm_aliases.iter().cloned());
                Entity { aliases, gm_aliases: Vec::new(), ..entity.clone() }
            })
            .collect();
        Compendium { entities }
    }
}

/// An entity as a language model extracted it from a session fragment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractedEntity {
    pub name: String,
    pub kind: EntityKind,
    pub aliases: Vec<String>,
    pub description: String,
}

/// One entity named in a question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntityMatch {
    /// Index into `Compendium::entities`.
    pub entity: usize,
    /// The name or alias that matched, as written in the compendium.
    pub alias: String,
    /// Byte offsets of the match in the question.
    pub start: usize,
    pub end: usize,
}

/// How often one entity is mentioned in one fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mention {
    /// Index into `Compendium::entities`.
    pub entity: usize,
    /// Index into the fragments given to [`mentions`].
    pub fragment: usize,
    pub count: u32,
}

/// A name or alias that opens with an article, so a question in the other language may name
/// its entity by translating it (see [`Compendium::translatable_names`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranslatableName {
    /// Index into `Compendium::entities`.
    pub entity: usize,
    /// As the notes write it: «el Archiduque».
    pub written: String,
    /// The language of its article.
    pub language: LabelLanguage,
}

impl EntityKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::Pc => "pc",
            EntityKind::Npc => "npc",
            EntityKind::Place => "place",
            EntityKind::God => "god",
            EntityKind::Faction => "faction",
            EntityKind::Item => "item",
            EntityKind::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<EntityKind> {
        match s {
            "pc" => Some(EntityKind::Pc),
            "npc" => Some(EntityKind::Npc),
            "place" => Some(EntityKind::Place),
            "god" => Some(EntityKind::God),
            "faction" => Some(EntityKind::Faction),
            "item" => Some(EntityKind::Item),
            "other" => Some(EntityKind::Other),
            _ => None,
        }
    }
}

impl EntitySource {
    pub fn as_str(self) -> &'static str {
        match self {
            EntitySource::Sheet => "sheet",
            EntitySource::FrontMatter => "frontmatter",
            EntitySource::Link => "link",
            EntitySource::World => "world",
            EntitySource::Llm => "llm",
        }
    }

    pub fn parse(s: &str) -> Option<EntitySource> {
        match s {
            "sheet" => Some(EntitySource::Sheet),
            "frontmatter" => Some(EntitySource::FrontMatter),
            "link" => Some(EntitySource::Link),
            "world" => Some(EntitySource::World),
            "llm" => Some(EntitySource::Llm),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::fmt::Write;
    use std::path::PathBuf;

    use super::*;
    use crate::corpus::tests::read_campaign;
    use crate::corpus::{CorpusConfig, Fragment, Note, Visibility, fragment_campaign, parse_campaign};

    pub(super) fn config() -> CorpusConfig {
        CorpusConfig::for_tests()
    }

    /// Parses `(path, text)` notes and fragments them, as the ingest does.
    pub(super) fn read_notes(sources: &[(&str, &str)]) -> (Vec<Note>, Vec<Fragment>) {
        let config = config();
        let (notes, _) = parse_campaign(sources, &config);
        let (fragments, _) = fragment_campaign(&notes, &config);
        (notes, fragments)
    }

    /// `name (kind) [aliases]`: how an entity opens its line in the expected renderings.
    /// `name (kind) [aliases]`, then ` gm[aliases only the GM may read]` and ` gm-only` when
    /// there are.
    fn entity_head(entity: &Entity) -> String {
        let mut head = format!("{} ({}) [{}]", entity.name, entity.kind.as_str(), entity.aliases.join(", "));
        if !entity.gm_aliases.is_empty() {
            head.push_str(&format!(" gm[{}]", entity.gm_aliases.join(", ")));
        }
        if entity.gm_only {
            head.push_str(" gm-only");
        }
        head
    }

    /// One line per entity: `name (kind) [aliases] sources note_path: description`.
    pub(super) fn render_compendium(compendium: &Compendium) -> String {
        let mut rendered = String::new();
        for entity in &compendium.entities {
            let sources: Vec<&str> = entity.sources.iter().map(|source| source.as_str()).collect();
            write!(rendered, "{} {}", entity_head(entity), sources.join("+")).unwrap();
            if let Some(note_path) = &entity.note_path {
                write!(rendered, " {note_path}").unwrap();
            }
            if !entity.description.is_empty() {
                write!(rendered, ": {}", entity.description).unwrap();
            }
            rendered.push('\n');
        }
        rendered
    }

    /// `as_str`, `parse` and serde agree on each kind's and source's name.
    fn check_names(kind_names: &[(EntityKind, &str)], source_names: &[(EntitySource, &str)]) {
        for &(kind, name) in kind_names {
            assert_eq!((kind.as_str(), EntityKind::parse(name)), (name, Some(kind)));
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{name}\""));
        }
        for &(source, name) in source_names {
            assert_eq!((source.as_str(), EntitySource::parse(name)), (name, Some(source)));
            assert_eq!(serde_json::to_string(&source).unwrap(), format!("\"{name}\""));
        }
    }

    #[test]
    fn names_of_kinds_and_sources() {
        check_names(
            &[
                (EntityKind::Pc, "pc"),
                (EntityKind::Npc, "npc"),
                (EntityKind::Place, "place"),
                (EntityKind::God, "god"),
                (EntityKind::Faction, "faction"),
                (EntityKind::Item, "item"),
                (EntityKind::Other, "other"),
            ],
            &[
                (EntitySource::Sheet, "sheet"),
                (EntitySource::FrontMatter, "frontmatter"),
                (EntitySource::Link, "link"),
                (EntitySource::World, "world"),
                (EntitySource::Llm, "llm"),
            ],
        );
        assert_eq!(EntityKind::parse("PC"), None);
    }

    /// Builds the compendium of the campaign at `campaign` (relative to the crate root) and
    /// renders each entity with its kind, aliases and the sessions whose player fragments
    /// mention it: `name (kind) [aliases] sessions 1 2 3`.
    fn check_fixture(campaign: &str, expect: &str) {
        let campaign_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(campaign);
        let sources = read_campaign(&campaign_dir);
        let sources: Vec<(&str, &str)> = sources.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
        let (notes, fragments) = read_notes(&sources);
        let compendium = Compendium::build(&notes, &config());
        let matcher = EntityMatcher::new(&compendium);
        let all_mentions = mentions(&compendium, &matcher, &fragments);
        let mut actual = String::new();
        for (entity_idx, entity) in compendium.entities.iter().enumerate() {
            let sessions: BTreeSet<u32> = all_mentions
                .iter()
                .filter(|mention| mention.entity == entity_idx)
                .map(|mention| &fragments[mention.fragment])
                .filter(|fragment| fragment.visibility == Visibility::Player)
                .filter_map(|fragment| fragment.session.map(|session| session.0))
                .collect();
            let sessions: Vec<String> = sessions.iter().map(u32::to_string).collect();
            writeln!(actual, "{} sessions {}", entity_head(entity), sessions.join(" ")).unwrap();
        }
        assert_eq!(actual.trim(), expect.trim(), "{campaign}\n--- actual ---\n{actual}");
    }

    #[test]
    fn fixture_compendiums() {
        check_fixture(
            "tests/fixtures/boveda",
            "
Ayla Brasaluna (pc) [Ayla] sessions 1 3 5
Baika (npc) [La Tejedora] gm[la vieja de las redes] sessions 1 2 3 4 5 6
La Orden de Umbravela (other) [] gm-only sessions 
Norkiel (god) [] sessions 1 4 5 6
Puerto Galerna (place) [] sessions 1 3 6
Vaskrith (other) [el dragón blanco] sessions 1",
        );
        check_fixture("tests/fixtures/cronica", "");
        check_fixture("tests/fixtures/por_sesion", "");
        check_fixture("tests/fixtures/broken", "");
        check_fixture(
            "eval/campaign",
            "
Brisa Aldana (npc) [la Capitana, Brisa] sessions 18 19 20 29 36 39 40
Celia Urquijo (npc) [la Abadesa, Celia] sessions 11 36 40
Ciénaga de los Ahogados (other) [] sessions 8 13 15 16 17 19
Dorian Quesada (npc) [Dorian] gm[el capitán de La Zorra Gris] sessions 6 7 8 9 12 33 34
Gaspar Nieto (npc) [el Tuerto, Gaspar] sessions 6 19 21 22 32
Inés Carvajal (npc) [la Magistra, Inés] sessions 8 18 27 28 31 34
Iria Valcárcel (pc) [la Garza, Iria] sessions 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 36 37 38 39 40
Isla Herrumbre (other) [] sessions 6 8 9 32 33
La Corona de Sal (other) [] sessions 19 23 27 34 39 40
Las Salinas de Oruel (other) [Salinas de Oruel] sessions 3 8 23 24 25 26 28 29 39
Leandro de Valdemora (npc) [el Archiduque, el Heraldo de la Marea Baja, el Heraldo, Leandro] sessions 1 5 8 9 10 30 31 39
Mirela Saavedra (npc) [Mirela] gm[la posadera] sessions 1 5 14 25 40
Monasterio de Piedraluz (other) [Piedraluz] sessions 3 11 23 36 39 40
Nela Nieto (npc) [Nela] sessions 22 23 29 30 32 33 34 36 39 40
Odo Brezo (pc) [el Cuentacuentos, Odo] sessions 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40
Puerto Salobre (other) [] sessions 1 2 5 7 9 11 12 13 14 15 19 20 24 25 29 30 31 32 35 37 40
Rook Ashford (pc) [Rook] sessions 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40
Sor Amaranta (pc) [Amaranta] sessions 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40
Tobías Lerma (npc) [Tobi, el Penitente, Tobías, el chico] sessions 3 4 11 28 34 37 38 39 40
Verónica de Valdemora (npc) [la Regente, Verónica] sessions 5 6 9 10 20 21 22 29 30 31 40
Yusuf Benarroch (npc) [Yusuf] gm[el cartógrafo] sessions 13 14 15 16 17 18 19 23 26 27 40",
        );
    }
}
