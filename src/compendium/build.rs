//! Building the compendium from the notes: character sheets, named world documents, front
//! matter aliases and wikilinks; and merging what a language model extracted.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::matching::{NameIndex, alias_key, is_meaningful_alias};
use super::{
    Compendium, DESCRIPTION_MAX_CHARS, Entity, EntityKind, EntitySource, ExtractedEntity, MIN_ALIAS_CHARS,
    MIN_LINKING_NOTES,
};
use crate::corpus::{CorpusConfig, Note, NoteKind, SecretNotes, Visibility, session_from_file_name};
use crate::lexicon::is_stopword;
use crate::text::fold;

impl Compendium {
    /// The entities the notes themselves declare: sheets, named world documents, link
    /// aliases and linked names. Entities with the same folded name are merged. The result
    /// is sorted by folded name, whatever the order of `notes`.
    /// `corpus` says which paths are secret: a link into one adds nothing, whether or not
    /// the note it names exists.
    pub fn build(notes: &[Note], corpus: &CorpusConfig) -> Compendium {
        let _span = tracing::info_span!("compendium.build", n_notes = notes.len()).entered();
        let mut builder = Builder::default();
        let player_notes: Vec<&Note> = notes.iter().filter(|note| !is_secret_note(note)).collect();
        let secret_notes = SecretNotes::new(notes.iter().map(|note| {
            let visibility = if is_secret_note(note) { Visibility::DmOnly } else { Visibility::Player };
            (note.path.as_str(), visibility)
        }));
        for note in &player_notes {
            match note.kind {
                NoteKind::Sheet => builder.add(sheet_entity(note)),
                NoteKind::World if looks_like_proper_name(&note.title) => builder.add(world_entity(note)),
                NoteKind::World | NoteKind::Session => {}
            }
        }
        builder.add_first_names();
        builder.add_links(&player_notes, &secret_notes, corpus);
        // The GM's own: GM-only sheets and world documents, after every player entity, so a
        // name both declare stays the players' entity (its GM-only aliases gated below).
        for note in notes.iter().filter(|note| is_secret_note(note)) {
            let entity = match note.kind {
                NoteKind::Sheet => sheet_entity(note),
                NoteKind::World if looks_like_proper_name(&note.title) => world_entity(note),
                NoteKind::World | NoteKind::Session => continue,
            };
            builder.add(Entity { gm_only: true, ..entity });
        }
        let player_text = player_text(&player_notes);
        for entity in builder.entities.iter_mut().filter(|entity| !entity.gm_only) {
            gate_aliases(entity, &player_text);
        }
        let mut entities = builder.entities;
        entities.sort_by_cached_key(|entity| (alias_key(&entity.name), entity.name.clone()));
        tracing::debug!(n_entities = entities.len(), "compendium built");
        Compendium { entities }
    }

    /// Merges what a language model extracted: into the entity whose folded name or alias
    /// equals the extracted name or one of its aliases, else as a new entity at the end, so
    /// that existing indices stay valid. The notes win: an extracted kind only replaces
    /// `Other`, and an extracted description only fills an empty one.
    pub fn merge_extracted(&mut self, extracted: Vec<ExtractedEntity>) {
        let _span = tracing::info_span!("compendium.merge_extracted", n_extracted = extracted.len()).entered();
        let mut index = NameIndex::new(&self.entities);
        for item in extracted {
            let name = item.name.trim();
            if alias_key(name).is_empty() {
                continue;
            }
            // The name always identifies; an alias only when it means something ("él" does not).
            let alias_keys = item.aliases.iter().map(|alias| (alias, alias_key(alias)));
            let meaningful_alias_keys =
                alias_keys.filter(|(alias, key)| is_meaningful_alias(alias, key, false)).map(|(_, key)| key);
            let keys: Vec<String> = std::iter::once(alias_key(name)).chain(meaningful_alias_keys).collect();
            let description = first_sentences(&item.description);
            match index.find(&keys) {
                Some(entity_idx) => {
                    let entity = &mut self.entities[entity_idx];
                    add_alias(entity, name);
                    for alias in &item.aliases {
                        add_alias(entity, alias);
                    }
                    add_source(entity, EntitySource::Llm);
                    if entity.kind == EntityKind::Other && !entity.sources.contains(&EntitySource::Sheet) {
                        entity.kind = item.kind;
                    }
                    if entity.description.is_empty() {
                        entity.description = description;
                    }
                    index.insert(&self.entities[entity_idx], entity_idx);
                }
                None => {
                    let mut entity = new_entity(name, item.kind, EntitySource::Llm);
                    entity.description = description;
                    for alias in &item.aliases {
                        add_alias(&mut entity, alias);
                    }
                    index.insert(&entity, self.entities.len());
                    self.entities.push(entity);
                }
            }
        }
    }
}

/// Entities under construction, merged by folded name.
#[derive(Default)]
struct Builder {
    entities: Vec<Entity>,
    by_name: HashMap<String, usize>,
}

impl Builder {
    /// Adds `entity`, or merges it into the one with the same folded name.
    fn add(&mut self, entity: Entity) {
        let key = alias_key(&entity.name);
        let Some(&entity_idx) = self.by_name.get(&key) else {
            self.by_name.insert(key, self.entities.len());
            self.entities.push(entity);
            return;
        };
        let existing = &mut self.entities[entity_idx];
        for alias in &entity.aliases {
            add_alias(existing, alias);
        }
        // A GM-only note's sources, kind, description and path are GM facts: a players' entity
        // takes none of them (its GM-only aliases are gated after the build).
        if existing.gm_only || !entity.gm_only {
            for &source in &entity.sources {
                add_source(existing, source);
            }
            if existing.kind == EntityKind::Other {
                existing.kind = entity.kind;
            }
            if existing.description.is_empty() {
                existing.description = entity.description;
            }
            if existing.note_path.is_none() {
                existing.note_path = entity.note_path;
            }
        }
        existing.gm_only &= entity.gm_only;
    }

    /// Link aliases and linked names. A link to a note that is an entity adds its shown
    /// text as an alias; a link to a note that is not (a session, a generic document) adds
    /// nothing. A target with no note joins the entity it names, or becomes one. A target
    /// under a secret path, or naming a note that exists only as a secret, adds nothing: its
    /// name is the secret (`[[Secretos/El Traidor|el capitán]]`).
    fn add_links(&mut self, player_notes: &[&Note], secret_notes: &SecretNotes, corpus: &CorpusConfig) {
        let mut notes_by_stem: HashMap<String, usize> = HashMap::new();
        let mut notes_by_path: HashMap<String, usize> = HashMap::new();
        for (note_idx, note) in player_notes.iter().enumerate() {
            let path = note.path.strip_suffix(".md").unwrap_or(&note.path);
            notes_by_path.entry(alias_key(path)).or_insert(note_idx);
            notes_by_stem.entry(alias_key(last_component(path))).or_insert(note_idx);
        }
        let entity_by_note: HashMap<&str, usize> = self
            .entities
            .iter()
            .enumerate()
            .filter_map(|(entity_idx, entity)| Some((entity.note_path.as_deref()?, entity_idx)))
            .collect();

        let mut linked_aliases: Vec<(usize, String)> = Vec::new();
        // Folded target → (target as first written, shown aliases, linking notes).
        let mut unresolved: BTreeMap<String, (String, Vec<String>, BTreeSet<usize>)> = BTreeMap::new();
        for (note_idx, note) in player_notes.iter().enumerate() {
            for link in note.links.iter().filter(|link| !link.embed) {
                let target = link.target.trim();
                let target = target.strip_suffix(".md").unwrap_or(target);
                if target.is_empty() || is_attachment(target) {
                    continue;
                }
                let shown = link.shown.as_deref().map(str::trim).filter(|shown| alias_key(shown) != alias_key(target));
                let linked_note = notes_by_path
                    .get(&alias_key(target))
                    .or_else(|| notes_by_stem.get(&alias_key(last_component(target))));
                if secret_notes.is_secret_target(target, &note.path, corpus) {
                    continue;
                }
                if let Some(&linked_idx) = linked_note {
                    let linked = player_notes[linked_idx];
                    if let (Some(&entity_idx), Some(shown)) = (entity_by_note.get(linked.path.as_str()), shown) {
                        linked_aliases.push((entity_idx, shown.to_string()));
                    }
                    continue;
                }
                if session_from_file_name(target).is_some() {
                    continue;
                }
                let name = last_component(target).trim();
                let entry = unresolved
                    .entry(alias_key(name))
                    .or_insert_with(|| (name.to_string(), Vec::new(), BTreeSet::new()));
                entry.1.extend(shown.map(str::to_string));
                entry.2.insert(note_idx);
            }
        }
        for (entity_idx, alias) in linked_aliases {
            let entity = &mut self.entities[entity_idx];
            if add_alias(entity, &alias) {
                add_source(entity, EntitySource::Link);
            }
        }
        let mut index = NameIndex::new(&self.entities);
        for (key, (name, shown_aliases, linking_notes)) in unresolved {
            if let Some(entity_idx) = index.find(&[key]) {
                let entity = &mut self.entities[entity_idx];
                for alias in &shown_aliases {
                    if add_alias(entity, alias) {
                        add_source(entity, EntitySource::Link);
                    }
                }
            } else if !shown_aliases.is_empty() || linking_notes.len() >= MIN_LINKING_NOTES {
                let mut entity = new_entity(&name, EntityKind::Other, EntitySource::Link);
                for alias in &shown_aliases {
                    add_alias(&mut entity, alias);
                }
                // Its name is new (`find` failed), so `add` appends it.
                index.insert(&entity, self.entities.len());
                self.add(entity);
            }
        }
    }

    /// A character is mostly called by their first name: "Nerea" for the sheet "Nerea
    /// Albaluz". Added for PC and NPC sheets when the first word is a name (not an article or
    /// a title like "Madre") and no other entity answers to it.
    fn add_first_names(&mut self) {
        let mut candidates: Vec<(usize, String)> = Vec::new();
        for (entity_idx, entity) in self.entities.iter().enumerate() {
            let is_character = matches!(entity.kind, EntityKind::Pc | EntityKind::Npc);
            let mut words = entity.name.split(|c: char| c.is_whitespace() || c == '_').filter(|word| !word.is_empty());
            if let (true, Some(first), Some(_)) = (is_character, words.next(), words.next()) {
                let key = alias_key(first);
                let is_name = first.chars().next().is_some_and(char::is_uppercase)
                    && key.chars().count() >= MIN_ALIAS_CHARS
                    && !is_stopword(&key)
                    && !HONORIFICS.contains(&key.as_str());
                if is_name {
                    candidates.push((entity_idx, first.to_string()));
                }
            }
        }
        let mut n_claims: HashMap<String, usize> = HashMap::new();
        for (_, first) in &candidates {
            *n_claims.entry(alias_key(first)).or_default() += 1;
        }
        let mut owners: HashMap<String, BTreeSet<usize>> = HashMap::new();
        for (entity_idx, entity) in self.entities.iter().enumerate() {
            for name in std::iter::once(&entity.name).chain(&entity.aliases) {
                owners.entry(alias_key(name)).or_default().insert(entity_idx);
            }
        }
        for (entity_idx, first) in candidates {
            let key = alias_key(&first);
            let claimed_elsewhere =
                owners.get(&key).is_some_and(|owners| owners.iter().any(|&owner| owner != entity_idx));
            if n_claims[&key] == 1 && !claimed_elsewhere {
                add_alias(&mut self.entities[entity_idx], &first);
            }
        }
    }
}

/// Titles, honorifics and kinship words that open a character's name without being it.
#[rustfmt::skip]
const HONORIFICS: &[&str] = &[
    "madre", "padre", "hermano", "hermana", "fray", "sor", "don", "dona", "senor", "senora", "sr", "sra", "maese",
    "maestro", "maestra", "capitan", "capitana", "sargento", "general", "rey", "reina", "principe", "princesa",
    "conde", "condesa", "duque", "duquesa", "baron", "baronesa", "alcalde", "alcaldesa", "tio", "tia", "abuelo",
    "abuela", "doctor", "doctora", "dr", "san", "santa", "santo", "gran", "viejo", "vieja", "sir", "lord", "lady",
    "dame", "king", "queen", "prince", "princess", "captain", "father", "mother", "brother", "sister", "uncle",
    "aunt", "saint", "mr", "mrs", "ms", "miss", "master",
];

/// Folded titles (or first words of titles) of world documents that are about the campaign,
/// not about one named thing.
#[rustfmt::skip]
const GENERIC_TITLES: &[&str] = &[
    "reglas", "regla", "rules", "cronologia", "timeline", "indice", "index", "notas", "nota", "notes", "note",
    "resumen", "resumenes", "summary", "inicio", "home", "readme", "portada", "mapa", "mapas", "map", "maps",
    "glosario", "glossary", "lore", "mundo", "world", "ideas", "idea", "pendientes", "todo", "tareas", "tasks",
    "calendario", "calendar", "historia", "history", "bestiario", "bestiary", "trasfondo", "background", "apuntes",
    "personajes", "characters", "lugares", "places", "objetos", "items", "facciones", "factions", "ambientacion",
    "setting", "campana", "campaign", "sesion", "sesiones", "session", "sessions", "recursos", "resources", "tablas",
    "tables", "botin", "loot", "tesoro", "treasure", "encuentros", "encounters", "misiones", "mision", "quests",
    "quest", "dioses", "gods", "deidades", "panteon", "pantheon", "plantilla", "template", "borrador", "draft",
    "misc", "miscelanea", "referencia", "reference", "guia", "guide", "capitulo", "chapter", "prologo", "prologue",
    "epilogo", "epilogue", "cronica", "chronicle", "diario", "journal", "bitacora", "log", "agenda", "preparacion",
    "prep", "planes", "plan", "rumores", "rumors", "rumours", "ganchos", "hooks", "pnjs", "npcs", "pjs", "pcs",
    "jugadores", "players", "introduccion", "introduction", "faq", "changelog",
];

/// Folder (folded) → the kind of the sheets inside it. Sheets elsewhere are NPCs.
const SHEET_FOLDERS: &[(&str, EntityKind)] = &[
    ("pjs", EntityKind::Pc),
    ("pcs", EntityKind::Pc),
    ("jugadores", EntityKind::Pc),
    ("players", EntityKind::Pc),
    ("pnjs", EntityKind::Npc),
    ("npcs", EntityKind::Npc),
    ("aliados", EntityKind::Npc),
    ("enemigos", EntityKind::Npc),
    ("muertos", EntityKind::Npc),
    ("personajes", EntityKind::Npc),
    ("deidades", EntityKind::God),
    ("dioses", EntityKind::God),
    ("gods", EntityKind::God),
    ("deities", EntityKind::God),
];

/// Folder (folded) → the kind of the world documents inside it. Others are `Other`.
const WORLD_FOLDERS: &[(&str, EntityKind)] = &[
    ("lugares", EntityKind::Place),
    ("places", EntityKind::Place),
    ("locations", EntityKind::Place),
    ("ciudades", EntityKind::Place),
    ("cities", EntityKind::Place),
    ("regiones", EntityKind::Place),
    ("regions", EntityKind::Place),
    ("facciones", EntityKind::Faction),
    ("gremios", EntityKind::Faction),
    ("factions", EntityKind::Faction),
    ("organizaciones", EntityKind::Faction),
    ("organizations", EntityKind::Faction),
    ("guilds", EntityKind::Faction),
    ("objetos", EntityKind::Item),
    ("items", EntityKind::Item),
    ("artefactos", EntityKind::Item),
    ("artifacts", EntityKind::Item),
    ("deidades", EntityKind::God),
    ("dioses", EntityKind::God),
    ("gods", EntityKind::God),
    ("deities", EntityKind::God),
];

/// Attachment extensions: a link to one of these is not a link to an entity.
#[rustfmt::skip]
const ATTACHMENT_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "webp", "svg", "bmp", "avif", "pdf", "mp3", "wav", "ogg", "m4a", "flac", "mp4",
    "webm", "mov", "mkv", "canvas", "excalidraw", "base", "csv", "txt", "json",
];

fn sheet_entity(note: &Note) -> Entity {
    let mut entity = new_entity(&note.title, sheet_kind(note), EntitySource::Sheet);
    entity.note_path = Some(note.path.clone());
    entity.description = note_description(note);
    add_note_aliases(&mut entity, note);
    entity
}

fn world_entity(note: &Note) -> Entity {
    let kind = kind_from_folders(&note.path, WORLD_FOLDERS).unwrap_or(EntityKind::Other);
    let mut entity = new_entity(&note.title, kind, EntitySource::World);
    entity.note_path = Some(note.path.clone());
    entity.description = note_description(note);
    add_note_aliases(&mut entity, note);
    entity
}

/// Front matter aliases, and the file stem when the front matter `title` replaced it
/// (links name the file).
fn add_note_aliases(entity: &mut Entity, note: &Note) {
    for alias in &note.aliases {
        if add_alias(entity, alias) {
            add_source(entity, EntitySource::FrontMatter);
        }
    }
    let path = note.path.strip_suffix(".md").unwrap_or(&note.path);
    add_alias(entity, last_component(path));
}

/// Front matter `type: pj` (or `npc`, `dios`…) first, then `#PC`/`#PJ` and `#NPC`/`#PNJ`
/// tags (a god tag too), then the deepest recognised folder, else NPC.
fn sheet_kind(note: &Note) -> EntityKind {
    let from_word = |word: &str| match fold(word.trim()).as_str() {
        "pc" | "pj" => Some(EntityKind::Pc),
        "npc" | "pnj" => Some(EntityKind::Npc),
        "deidad" | "dios" | "diosa" | "god" | "deity" => Some(EntityKind::God),
        _ => None,
    };
    let declared = note.declared_type.as_deref().and_then(from_word);
    let tagged = || note.tags.iter().find_map(|tag| from_word(tag.split('/').next().unwrap_or(tag)));
    declared.or_else(tagged).or_else(|| kind_from_folders(&note.path, SHEET_FOLDERS)).unwrap_or(EntityKind::Npc)
}

/// The kind the deepest listed folder of `path` gives.
fn kind_from_folders(path: &str, folders: &[(&str, EntityKind)]) -> Option<EntityKind> {
    let components: Vec<&str> = path.split('/').collect();
    let parent_folders = &components[..components.len().saturating_sub(1)];
    parent_folders.iter().rev().find_map(|folder| {
        let folder = fold(folder.trim());
        folders.iter().find(|(name, _)| *name == folder).map(|&(_, kind)| kind)
    })
}

/// Whether a world document's title names one thing: every word that is not a stopword is
/// capitalised ("Puerto Galerna", "La Orden de Umbravela"; not "Notas sueltas"), and the
/// title is not a generic one ("Reglas", "Cronología", "Índice de PNJs").
fn looks_like_proper_name(title: &str) -> bool {
    let key = alias_key(title);
    let first_word = key.split(' ').next().unwrap_or("");
    if GENERIC_TITLES.contains(&key.as_str()) || GENERIC_TITLES.contains(&first_word) {
        return false;
    }
    let mut n_name_words = 0;
    for word in title.split_whitespace() {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric());
        let Some(first_char) = word.chars().next() else { continue };
        if is_stopword(&fold(word)) {
            continue;
        }
        if first_char.is_lowercase() {
            return false;
        }
        n_name_words += 1;
    }
    n_name_words > 0
}

/// A note under a secret path: the note says so, and all its blocks are DM-only.
fn is_secret_note(note: &Note) -> bool {
    note.visibility == Visibility::DmOnly || note.blocks.iter().any(|block| block.visibility == Visibility::DmOnly)
}

/// Whether a link target is a file that is not a note (`mapa.png`).
fn is_attachment(target: &str) -> bool {
    let file_name = last_component(target);
    file_name
        .rsplit_once('.')
        .is_some_and(|(_, extension)| ATTACHMENT_EXTENSIONS.contains(&extension.to_ascii_lowercase().as_str()))
}

fn last_component(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The description of a note's entity: the first sentences of its first paragraph.
fn note_description(note: &Note) -> String {
    note.blocks.first().map(|block| first_sentences(&first_paragraph(&block.text))).unwrap_or_default()
}

/// The first run of text lines, skipping headings, rules and blank lines, with list and
/// quote markers and emphasis removed, joined into one line.
fn first_paragraph(markdown: &str) -> String {
    let mut paragraph: Vec<&str> = Vec::new();
    for line in markdown.lines() {
        let line = line.trim();
        let is_text = line.chars().any(char::is_alphanumeric) && !line.starts_with('#') && !line.starts_with('|');
        if !is_text {
            if paragraph.is_empty() {
                continue;
            }
            break;
        }
        let line = line.trim_start_matches(['>', ' ']);
        let line = ["- ", "* ", "+ "].iter().find_map(|marker| line.strip_prefix(marker)).unwrap_or(line);
        // A callout's `[!note]` marker.
        let line = match line.strip_prefix("[!").and_then(|rest| rest.split_once(']')) {
            Some((_, title)) => title.trim_start_matches(['-', '+', ' ']),
            None => line,
        };
        paragraph.push(line);
    }
    let joined = paragraph.join(" ").replace(['*', '`'], "").replace("__", "");
    joined.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first sentence, plus the second when both fit in `DESCRIPTION_MAX_CHARS`; a first
/// sentence longer than that is cut before a word (not after a stopword) and ends in "…".
fn first_sentences(text: &str) -> String {
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let sentence_ends = crate::text::sentence_ends(&text);
    let fits = |end: usize| text[..end].chars().count() <= DESCRIPTION_MAX_CHARS;
    let end = match sentence_ends.as_slice() {
        [_, second, ..] if fits(*second) => *second,
        [first, ..] if fits(*first) => *first,
        [] if fits(text.len()) => text.len(),
        _ => {
            let limit = text.char_indices().nth(DESCRIPTION_MAX_CHARS - 1).map_or(text.len(), |(offset, _)| offset);
            let mut words: Vec<&str> = text[..limit].split(' ').collect();
            if words.len() > 1 {
                words.pop();
            }
            while words.len() > 1 && words.last().is_some_and(|word| is_stopword(&fold(word))) {
                words.pop();
            }
            return format!("{}…", words.join(" ").trim_end_matches([',', ';', ':']));
        }
    };
    text[..end].to_string()
}

pub(super) fn new_entity(name: &str, kind: EntityKind, source: EntitySource) -> Entity {
    Entity {
        name: name.trim().to_string(),
        kind,
        aliases: Vec::new(),
        description: String::new(),
        sources: vec![source],
        note_path: None,
        gm_only: false,
        gm_aliases: Vec::new(),
    }
}

/// What players may read, folded, for [`gate_aliases`]: every player-visible block, and each
/// player note's title and path (a citation shows the path).
fn player_text(player_notes: &[&Note]) -> String {
    let mut text = String::new();
    for note in player_notes {
        text.push_str(&note.title);
        text.push('\n');
        text.push_str(&note.path.replace('/', "\n"));
        text.push('\n');
        for block in note.blocks.iter().filter(|block| block.visibility == Visibility::Player) {
            text.push_str(&block.text);
            text.push('\n');
        }
    }
    super::matching::fold_for_search(&text)
}

/// Moves each alias of a players' entity that no player-visible text uses into its
/// `gm_aliases`: a name players never saw stays the GM's.
fn gate_aliases(entity: &mut Entity, player_text: &str) {
    let (seen, unseen): (Vec<String>, Vec<String>) =
        std::mem::take(&mut entity.aliases).into_iter().partition(|alias| super::matching::used_in(player_text, alias));
    entity.aliases = seen;
    entity.gm_aliases.extend(unseen);
}

/// Adds `alias` unless it is empty or already the entity's name or alias (compared folded).
/// Returns whether it was added.
/// An alias only the GM could read until now (`gm_aliases`) becomes an alias: it was found in
/// player-visible text (what a language model extracted from a player's fragment).
pub(super) fn add_alias(entity: &mut Entity, alias: &str) -> bool {
    let alias = alias.trim();
    let key = alias_key(alias);
    let known = key == alias_key(&entity.name) || entity.aliases.iter().any(|existing| alias_key(existing) == key);
    if key.is_empty() || known {
        return false;
    }
    match entity.gm_aliases.iter().position(|existing| alias_key(existing) == key) {
        // As the GM wrote it.
        Some(at) => {
            let written = entity.gm_aliases.remove(at);
            entity.aliases.push(written);
        }
        None => entity.aliases.push(alias.to_string()),
    }
    true
}

fn add_source(entity: &mut Entity, source: EntitySource) {
    if let Err(position) = entity.sources.binary_search(&source) {
        entity.sources.insert(position, source);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{config, read_notes, render_compendium};
    use super::*;

    /// Builds the compendium of `sources` and compares its rendering with `expect`.
    fn check_build(sources: &[(&str, &str)], expect: &str) {
        let (notes, _) = read_notes(sources);
        let actual = render_compendium(&Compendium::build(&notes, &config()));
        assert_eq!(actual.trim(), expect.trim(), "\n--- actual ---\n{actual}");
    }

    #[test]
    fn build_from_notes() {
        // Front matter aliases and link text land on the same entity; the file stem too.
        check_build(
            &[
                (
                    "PNJs/baika.md",
                    "---\ntitle: Baika\naliases: [La Tejedora]\ntags: [NPC]\n---\n# Baika\n\nTeje redes. Vive en el puerto. Es vieja.",
                ),
                ("Sesiones/Sesión 1.md", "Vimos a [[baika|la vieja de las redes]] y a [[Baika]]."),
            ],
            // «La Tejedora» is in no player-visible text: the GM's alias only.
            "Baika (npc) [la vieja de las redes] gm[La Tejedora] sheet+frontmatter+link PNJs/baika.md: Teje redes. Vive en el puerto.",
        );
        // Kinds: tags first, then folders; PCs get their first name.
        check_build(
            &[
                ("PJs/Ayla Brasaluna.md", "---\ntype: pc\n---\nPícara."),
                ("Fichas/Irek.md", "---\ntags: [PJ]\n---\nMago."),
                ("Aliados/Madre Ulva.md", "Curandera."),
                ("Deidades/Norkiel.md", "Dios de las tormentas."),
                ("Lugares/Puerto Galerna.md", "![[mapa.png]]\n\nPueblo pesquero."),
                ("Gremios/La Cofradía.md", "Pescadores."),
                ("Objetos/La Guardiana.md", "Un hacha."),
                ("Mundo/Villaescarcha.md", "Pueblo."),
            ],
            "
Ayla Brasaluna (pc) [Ayla] sheet PJs/Ayla Brasaluna.md: Pícara.
Irek (pc) [] sheet Fichas/Irek.md: Mago.
La Cofradía (faction) [] world Gremios/La Cofradía.md: Pescadores.
La Guardiana (item) [] world Objetos/La Guardiana.md: Un hacha.
Madre Ulva (npc) [] sheet Aliados/Madre Ulva.md: Curandera.
Norkiel (god) [] sheet Deidades/Norkiel.md: Dios de las tormentas.
Puerto Galerna (place) [] world Lugares/Puerto Galerna.md: Pueblo pesquero.
Villaescarcha (other) [] world Mundo/Villaescarcha.md: Pueblo.",
        );
        // A first name two characters share, or another entity's name, is nobody's alias.
        check_build(
            &[
                ("PJs/Tomás Quebrahierro.md", "Enano."),
                ("PNJs/Tomás el Viejo.md", "Pescador."),
                ("PNJs/Brisa Salobre.md", "Arponera."),
                ("PNJs/Brisa.md", "Otra."),
            ],
            "
Brisa (npc) [] sheet PNJs/Brisa.md: Otra.
Brisa Salobre (npc) [] sheet PNJs/Brisa Salobre.md: Arponera.
Tomás el Viejo (npc) [] sheet PNJs/Tomás el Viejo.md: Pescador.
Tomás Quebrahierro (pc) [] sheet PJs/Tomás Quebrahierro.md: Enano.",
        );
        // Generic and lowercase world titles are not entities; a secret note is the GM's
        // entity alone, and its links add nothing.
        check_build(
            &[
                ("Reglas.md", "Reglas de la casa."),
                ("Cronología.md", "Año 1."),
                ("Índice de PNJs.md", "Lista."),
                ("Timeline.md", "Year 1."),
                ("notas sueltas.md", "Ideas."),
                ("Secretos/La Orden de Umbravela.md", "Culto. Ver [[Vaskrith|el durmiente]] y [[Mendaña]]."),
                ("Sesiones/Sesion 2.md", "Nada, ni [[Umbravela]]."),
            ],
            "La Orden de Umbravela (other) [] gm-only world Secretos/La Orden de Umbravela.md: Culto. Ver el durmiente y Mendaña.",
        );
        // Links: to sessions never make entities (by note or by name); an unresolved target
        // needs a shown alias or two linking notes; a target that names an entity joins it.
        check_build(
            &[
                ("PJs/Ayla Brasaluna.md", "Pícara."),
                ("Sesiones/Sesion_05.md", "El puente."),
                (
                    "Sesiones/Sesion 6.md",
                    "Resumen de [[Sesion_05|la sesión anterior]] y [[Sesión 4|la otra]]. Vimos a [[Vaskrith|el dragón blanco]], a [[Mendaña]] y a [[Brisa]]. [[Ayla|la pícara]].",
                ),
                ("Lugares/Puerto Galerna.md", "Pueblo. Dicen que [[Vaskrith]] vuela. [[Mendaña]] vino. ![[Tomás]]"),
            ],
            "
Ayla Brasaluna (pc) [Ayla, la pícara] sheet+link PJs/Ayla Brasaluna.md: Pícara.
Mendaña (other) [] link
Puerto Galerna (place) [] world Lugares/Puerto Galerna.md: Pueblo. Dicen que Vaskrith vuela.
Vaskrith (other) [el dragón blanco] link",
        );
        // Descriptions: headings and blank lines skipped, markup removed, long text cut.
        check_build(
            &[(
                "PNJs/Brisa.md",
                "# Brisa\n\n> **Arponera** joven, de la costa. Conoce a Baika desde niña y dice que la vieja tejedora no es lo que parece, aunque nadie la cree en el puerto ni en la cofradía ni en ningún otro sitio de la bahía de Galerna ni de más allá del cabo.\n\nOtro párrafo.",
            )],
            "Brisa (npc) [] sheet PNJs/Brisa.md: Arponera joven, de la costa.",
        );
        check_build(
            &[(
                "PNJs/Brisa.md",
                "- Arponera joven de la costa que conoce a Baika desde niña y dice que la vieja tejedora no es lo que parece aunque nadie la cree en el puerto ni en la cofradía ni en ningún otro sitio de la bahía de Galerna ni de más allá del cabo",
            )],
            "Brisa (npc) [] sheet PNJs/Brisa.md: Arponera joven de la costa que conoce a Baika desde niña y dice que la vieja tejedora no es lo que parece aunque nadie la cree en el puerto ni en la cofradía ni en ningún otro sitio de la bahía…",
        );
    }

    #[test]
    fn secret_notes_are_the_gm_s_entities_and_links_into_them_add_nothing() {
        let (notes, _) = read_notes(&[("Secretos/El Traidor.md", "---\naliases: [el capitán]\n---\nEl capitán.")]);
        assert!(Compendium::build(&notes, &config()).for_players().entities.is_empty());
        check_build(
            &[
                // Empty, or front matter only: no blocks, but still secret notes.
                ("Secretos/El Traidor.md", "---\ntitle: El Traidor\naliases: [el capitán, Mendaña]\n---\n"),
                ("PNJs/Secretos/Villano Oculto.md", ""),
                // Links into them, by path or by name, from player notes: nothing either,
                // nor a link into a secret folder whose note does not exist yet.
                (
                    "Sesiones/Sesion 3.md",
                    "Hablamos con [[Secretos/El Traidor|el capitán]], con [[El Traidor]] y con [[Villano Oculto|el encapuchado]]. [[Secretos/Nadie Aún|alguien]].",
                ),
                ("Sesiones/Sesion 4.md", "Otra vez [[El Traidor]] y [[PNJs/Secretos/Villano Oculto]]."),
            ],
            "
El Traidor (other) [el capitán, Mendaña] gm-only frontmatter+world Secretos/El Traidor.md
Villano Oculto (npc) [] gm-only sheet PNJs/Secretos/Villano Oculto.md",
        );
        // A player note with the same name as a secret one is still linked normally.
        check_build(
            &[
                ("Secretos/Baika.md", "La verdad sobre Baika."),
                ("PNJs/Baika.md", "Tejedora."),
                ("Sesiones/Sesion 1.md", "Vimos a [[Baika|la tejedora]]."),
            ],
            "Baika (npc) [la tejedora] sheet+link PNJs/Baika.md: Tejedora.",
        );
    }

    /// Builds the compendium of `sources`, merges `extracted` and compares the rendering.
    fn check_merge(sources: &[(&str, &str)], extracted: &[(&str, EntityKind, &[&str], &str)], expect: &str) {
        let (notes, _) = read_notes(sources);
        let mut compendium = Compendium::build(&notes, &config());
        let extracted = extracted
            .iter()
            .map(|&(name, kind, aliases, description)| ExtractedEntity {
                name: name.to_string(),
                kind,
                aliases: aliases.iter().map(|alias| alias.to_string()).collect(),
                description: description.to_string(),
            })
            .collect();
        compendium.merge_extracted(extracted);
        let actual = render_compendium(&compendium);
        assert_eq!(actual.trim(), expect.trim(), "\n--- actual ---\n{actual}");
    }

    #[test]
    fn merge_extracted_entities() {
        check_merge(
            &[
                ("PNJs/Baika.md", "---\naliases: [La Tejedora, ella]\n---\nTeje."),
                ("Sesiones/Sesion 1.md", "[[Vaskrith|el dragón blanco]]"),
            ],
            &[
                // By alias: joins Baika, adds the new name, keeps the sheet's kind and text.
                ("la tejedora", EntityKind::Place, &["Abuela Baika"], "Una anciana."),
                // By name: an `Other` link entity takes the extracted kind and description.
                ("VASKRITH", EntityKind::Npc, &[], "Dragón blanco del norte."),
                // New.
                ("Ulrico Mendaña", EntityKind::Npc, &["el coleccionista"], "Falso coleccionista."),
                // A meaningless alias ("ella") does not identify anyone.
                ("Irek", EntityKind::Pc, &["ella"], ""),
                ("  ", EntityKind::Other, &[], ""),
            ],
            "
Baika (npc) [La Tejedora, Abuela Baika] gm[ella] sheet+frontmatter+llm PNJs/Baika.md: Teje.
Vaskrith (npc) [el dragón blanco] link+llm: Dragón blanco del norte.
Ulrico Mendaña (npc) [el coleccionista] llm: Falso coleccionista.
Irek (pc) [ella] llm",
        );
    }
}
