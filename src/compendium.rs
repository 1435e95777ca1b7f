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
//! Architecture Invariant: entities come only from player-visible text. A note under a
//! secret path and a link inside a GM secret add no entity and no alias, so the compendium
//! can be listed to anyone without revealing a secret name.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use aho_corasick::AhoCorasick;
use serde::{Deserialize, Serialize};
use unicode_normalization::char::{decompose_canonical, is_combining_mark};

use crate::corpus::{
    CorpusConfig, Fragment, LabelLanguage, Note, NoteKind, SecretNotes, Visibility, fold, session_from_file_name,
};
use crate::lexicon::{article_language, is_stopword};

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
}

/// The set of entities of one campaign. Indices into `entities` are the entity ids of
/// [`EntityMatch`] and [`Mention`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compendium {
    pub entities: Vec<Entity>,
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

/// Finds the compendium's names and aliases in text. Built once per compendium: building
/// compiles every meaningful alias into one automaton.
#[derive(Debug, Clone)]
pub struct EntityMatcher {
    /// `None` when no alias is meaningful.
    automaton: Option<AhoCorasick>,
    /// Parallel to the automaton's patterns.
    patterns: Vec<AliasPattern>,
}

/// Every mention of every entity in every fragment: what the entity path of retrieval reads.
/// A sheet's or world document's own fragments count as mentions of its entity (at least
/// one) even when the body never repeats the name. Sorted by fragment, then entity.
pub fn mentions(compendium: &Compendium, matcher: &EntityMatcher, fragments: &[Fragment]) -> Vec<Mention> {
    let _span = tracing::info_span!(
        "compendium.mentions",
        n_fragments = fragments.len(),
        n_entities = compendium.entities.len()
    )
    .entered();
    let mut entities_by_note: HashMap<&str, Vec<usize>> = HashMap::new();
    for (entity_idx, entity) in compendium.entities.iter().enumerate() {
        if let Some(note_path) = &entity.note_path {
            entities_by_note.entry(note_path.as_str()).or_default().push(entity_idx);
        }
    }
    let mut all_mentions = Vec::new();
    for (fragment_idx, fragment) in fragments.iter().enumerate() {
        let mut counts: BTreeMap<usize, u32> = matcher.count_mentions(&fragment.text).into_iter().collect();
        if fragment.kind != NoteKind::Session
            && let Some(own_entities) = entities_by_note.get(fragment.source_path.as_str())
        {
            for &entity_idx in own_entities {
                let count = counts.entry(entity_idx).or_default();
                *count = (*count).max(1);
            }
        }
        all_mentions.extend(counts.into_iter().map(|(entity, count)| Mention {
            entity,
            fragment: fragment_idx,
            count,
        }));
    }
    tracing::debug!(n_mentions = all_mentions.len(), "mentions counted");
    all_mentions
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

    /// The entity whose name, else whose alias, folds to the same text as `name_or_alias`.
    pub fn find(&self, name_or_alias: &str) -> Option<usize> {
        NameIndex::new(&self.entities).find(&[alias_key(name_or_alias)])
    }

    /// The entity a person typed, as a question reads names: [`Compendium::find`] first, then
    /// with a leading article ignored on either side, so «archiduque», «Archiduque» and «the
    /// archduke's»… find «el Archiduque» the way «¿qué pasó con el archiduque?» does. An exact
    /// spelling wins over an article-less one («Heraldo» is the entity so named, if any).
    pub fn find_typed(&self, typed: &str) -> Option<usize> {
        if let Some(found) = self.find(typed) {
            return Some(found);
        }
        let typed_key = alias_key(typed);
        let wanted = without_article(&typed_key);
        if wanted.chars().count() < MIN_ALIAS_CHARS {
            return None;
        }
        let same = |written: &String| without_article(&alias_key(written)) == wanted;
        let by_name = self.entities.iter().position(|entity| same(&entity.name));
        by_name.or_else(|| self.entities.iter().position(|entity| entity.aliases.iter().any(same)))
    }

    /// The names and aliases a player may say in another language: those that open with a
    /// definite article and hold a word that is not a stopword («el Archiduque», «La Corona de
    /// Sal», "the Thunderlord"). A title or a descriptive name is translated by whoever asks in
    /// English about Spanish notes («the archduke»); a bare proper name («Leandro») is not,
    /// and the lexical matcher already finds it in any language.
    pub fn translatable_names(&self) -> Vec<TranslatableName> {
        let mut names = Vec::new();
        let mut seen: HashSet<(usize, String)> = HashSet::new();
        for (entity_idx, entity) in self.entities.iter().enumerate() {
            for written in std::iter::once(&entity.name).chain(&entity.aliases) {
                let key = alias_key(written);
                let mut words = key.split(' ');
                let Some(language) = words.next().and_then(article_language) else {
                    continue;
                };
                if key.chars().count() < MIN_ALIAS_CHARS || words.all(is_stopword) {
                    continue;
                }
                if seen.insert((entity_idx, key)) {
                    names.push(TranslatableName { entity: entity_idx, written: written.clone(), language });
                }
            }
        }
        names
    }
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

impl EntityMatcher {
    /// Compiles every meaningful name and alias of `compendium`. An alias shared by several
    /// entities matches all of them, unless it is one entity's name: then it is that
    /// entity's alone.
    pub fn new(compendium: &Compendium) -> EntityMatcher {
        let _span = tracing::info_span!("compendium.matcher", n_entities = compendium.entities.len()).entered();
        let mut patterns: Vec<AliasPattern> = Vec::new();
        let mut pattern_by_key: HashMap<String, usize> = HashMap::new();
        for names_pass in [true, false] {
            for (entity_idx, entity) in compendium.entities.iter().enumerate() {
                let from_note =
                    entity.sources.iter().any(|source| matches!(source, EntitySource::Sheet | EntitySource::World));
                let written_names: Vec<&String> =
                    if names_pass { vec![&entity.name] } else { entity.aliases.iter().collect() };
                for written in written_names {
                    let key = alias_key(written);
                    if !is_meaningful_alias(written, &key, names_pass && from_note) {
                        continue;
                    }
                    match pattern_by_key.get(&key) {
                        Some(&pattern_idx) => {
                            let pattern = &mut patterns[pattern_idx];
                            let claimed_by_other_name = pattern.is_name && !names_pass;
                            if !claimed_by_other_name && !pattern.entities.contains(&entity_idx) {
                                pattern.entities.push(entity_idx);
                            }
                        }
                        None => {
                            pattern_by_key.insert(key.clone(), patterns.len());
                            patterns.push(AliasPattern {
                                key,
                                written: written.clone(),
                                entities: vec![entity_idx],
                                is_name: names_pass,
                            });
                        }
                    }
                }
            }
        }
        // Standard semantics: overlapping search reports every occurrence, so a longest
        // match that fails the whole-word test cannot hide a shorter one that passes.
        let automaton = if patterns.is_empty() {
            None
        } else {
            let keys = patterns.iter().map(|pattern| pattern.key.as_str());
            match AhoCorasick::new(keys) {
                Ok(automaton) => Some(automaton),
                Err(error) => {
                    // Degrade, don't fail: the other retrieval paths still answer.
                    tracing::warn!(%error, n_patterns = patterns.len(), "entity matcher not built; it matches nothing");
                    None
                }
            }
        };
        tracing::debug!(n_patterns = patterns.len(), "entity matcher compiled");
        EntityMatcher { automaton, patterns }
    }

    /// The entities `question` names, each once (at its first match), in order of
    /// appearance. Longest alias first: "el dragón blanco" wins over "dragón blanco".
    pub fn match_question(&self, question: &str) -> Vec<EntityMatch> {
        let folded = FoldedText::new(question, true);
        let mut seen = BTreeSet::new();
        let mut entity_matches = Vec::new();
        for (pattern_idx, start, end) in self.find_aliases(&folded.text) {
            let pattern = &self.patterns[pattern_idx];
            let (original_start, original_end) = folded.original_span(question, start, end);
            for &entity in &pattern.entities {
                if seen.insert(entity) {
                    entity_matches.push(EntityMatch {
                        entity,
                        alias: pattern.written.clone(),
                        start: original_start,
                        end: original_end,
                    });
                }
            }
        }
        entity_matches
    }

    /// Byte spans in `text` of every whole-word mention of the entity at `entity_idx` (any of
    /// its names and aliases), in order.
    pub fn spans_of(&self, text: &str, entity_idx: usize) -> Vec<(usize, usize)> {
        let folded = FoldedText::new(text, true);
        self.find_aliases(&folded.text)
            .into_iter()
            .filter(|&(pattern_idx, _, _)| self.patterns[pattern_idx].entities.contains(&entity_idx))
            .map(|(_, start, end)| folded.original_span(text, start, end))
            .collect()
    }

    /// Whole-word mentions of every entity in `text`, sorted by entity.
    pub fn count_mentions(&self, text: &str) -> Vec<(usize, u32)> {
        let folded = FoldedText::new(text, false);
        let mut counts: BTreeMap<usize, u32> = BTreeMap::new();
        for (pattern_idx, _, _) in self.find_aliases(&folded.text) {
            for &entity in &self.patterns[pattern_idx].entities {
                *counts.entry(entity).or_default() += 1;
            }
        }
        counts.into_iter().collect()
    }

    /// `(pattern, start, end)` in folded text: whole words only, leftmost-longest,
    /// non-overlapping.
    fn find_aliases(&self, folded: &str) -> Vec<(usize, usize, usize)> {
        let Some(automaton) = &self.automaton else {
            return Vec::new();
        };
        let mut candidates: Vec<(usize, usize, usize)> = automaton
            .find_overlapping_iter(folded)
            .filter(|found| is_whole_word(folded, found.start(), found.end()))
            .map(|found| (found.pattern().as_usize(), found.start(), found.end()))
            .collect();
        candidates.sort_by_key(|&(_, start, end)| (start, std::cmp::Reverse(end)));
        let mut chosen = Vec::new();
        let mut covered_until = 0;
        for (pattern_idx, start, end) in candidates {
            if start >= covered_until {
                chosen.push((pattern_idx, start, end));
                covered_until = end;
            }
        }
        chosen
    }
}

/// One compiled name or alias.
#[derive(Debug, Clone)]
struct AliasPattern {
    /// Folded, whitespace collapsed: what is searched.
    key: String,
    /// As written in the compendium (the first spelling seen).
    written: String,
    entities: Vec<usize>,
    /// Some entity's name, not only an alias.
    is_name: bool,
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

/// Folded name → entity, names before aliases.
struct NameIndex {
    by_name: HashMap<String, usize>,
    by_alias: HashMap<String, usize>,
}

impl NameIndex {
    fn new(entities: &[Entity]) -> NameIndex {
        let mut index = NameIndex { by_name: HashMap::new(), by_alias: HashMap::new() };
        for (entity_idx, entity) in entities.iter().enumerate() {
            index.insert(entity, entity_idx);
        }
        index
    }

    /// Records `entity`'s name and aliases; earlier entries keep their key.
    fn insert(&mut self, entity: &Entity, entity_idx: usize) {
        self.by_name.entry(alias_key(&entity.name)).or_insert(entity_idx);
        for alias in &entity.aliases {
            self.by_alias.entry(alias_key(alias)).or_insert(entity_idx);
        }
    }

    /// The entity one of `keys` names: a name match first, then an alias match.
    fn find(&self, keys: &[String]) -> Option<usize> {
        let by_name = keys.iter().find_map(|key| self.by_name.get(key));
        by_name.or_else(|| keys.iter().find_map(|key| self.by_alias.get(key))).copied()
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
    let sentence_ends: Vec<usize> = text
        .char_indices()
        .filter(|&(offset, c)| {
            matches!(c, '.' | '!' | '?' | '…')
                && text[offset + c.len_utf8()..].chars().next().is_none_or(char::is_whitespace)
        })
        .map(|(offset, c)| offset + c.len_utf8())
        .collect();
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

fn new_entity(name: &str, kind: EntityKind, source: EntitySource) -> Entity {
    Entity {
        name: name.trim().to_string(),
        kind,
        aliases: Vec::new(),
        description: String::new(),
        sources: vec![source],
        note_path: None,
    }
}

/// Adds `alias` unless it is empty or already the entity's name or alias (compared folded).
/// Returns whether it was added.
fn add_alias(entity: &mut Entity, alias: &str) -> bool {
    let alias = alias.trim();
    let key = alias_key(alias);
    let known = key == alias_key(&entity.name) || entity.aliases.iter().any(|existing| alias_key(existing) == key);
    if key.is_empty() || known {
        return false;
    }
    entity.aliases.push(alias.to_string());
    true
}

fn add_source(entity: &mut Entity, source: EntitySource) {
    if let Err(position) = entity.sources.binary_search(&source) {
        entity.sources.insert(position, source);
    }
}

/// Whether a name or alias is worth matching: at least `MIN_ALIAS_CHARS` long, not made of
/// stopwords only, and not a single lowercase word ("dragón", "rey"), which is more likely
/// the common noun than the name. A note's own name is exempt from the last rule: the GM
/// named a sheet after it.
fn is_meaningful_alias(written: &str, key: &str, is_note_name: bool) -> bool {
    if key.chars().count() < MIN_ALIAS_CHARS || key.split(' ').all(is_stopword) {
        return false;
    }
    let is_single_word = !key.contains(' ');
    let is_lowercase = !written.chars().any(char::is_uppercase);
    !(is_single_word && is_lowercase && !is_note_name)
}

/// The comparison form of a name: folded, `_` read as a space, whitespace collapsed, and
/// no punctuation at either end (`«la guardiana»` → `la guardiana`).
/// A folded name without its leading definite article («el archiduque» → «archiduque»).
fn without_article(folded: &str) -> &str {
    match folded.split_once(' ') {
        Some((first, rest)) if article_language(first).is_some() => rest,
        _ => folded,
    }
}

fn alias_key(name: &str) -> String {
    FoldedText::new(name, false).text.trim_matches(|c: char| !c.is_alphanumeric()).to_string()
}

/// Whether `folded[start..end]` is whole words: no letter or digit touches either end.
fn is_whole_word(folded: &str, start: usize, end: usize) -> bool {
    let touches = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let match_text = &folded[start..end];
    let starts_inside =
        match_text.chars().next().is_some_and(char::is_alphanumeric) && touches(folded[..start].chars().next_back());
    let ends_inside =
        match_text.chars().next_back().is_some_and(char::is_alphanumeric) && touches(folded[end..].chars().next());
    !starts_inside && !ends_inside
}

/// Text folded like `corpus::fold` (lowercase, no diacritics), with `_` and runs of
/// whitespace read as one space, optionally remembering where each byte came from.
struct FoldedText {
    text: String,
    /// For each byte of `text`, the byte offset in the original of the char it came from.
    /// Empty unless asked for.
    origins: Vec<usize>,
}

impl FoldedText {
    fn new(original: &str, with_origins: bool) -> FoldedText {
        let mut folded = FoldedText { text: String::with_capacity(original.len()), origins: Vec::new() };
        let mut after_space = false;
        for (offset, c) in original.char_indices() {
            if c.is_whitespace() || c == '_' {
                if !after_space {
                    folded.text.push(' ');
                }
                after_space = true;
            } else if c.is_ascii() {
                folded.text.push(c.to_ascii_lowercase());
                after_space = false;
            } else {
                decompose_canonical(c, |part| {
                    if !is_combining_mark(part) {
                        folded.text.extend(part.to_lowercase());
                    }
                });
                after_space = false;
            }
            if with_origins {
                folded.origins.resize(folded.text.len(), offset);
            }
        }
        folded
    }

    /// The byte span in `original` that folded bytes `start..end` came from.
    fn original_span(&self, original: &str, start: usize, end: usize) -> (usize, usize) {
        let original_start = self.origins[start];
        let last = self.origins[end - 1];
        let last_len = original[last..].chars().next().map_or(0, char::len_utf8);
        (original_start, last + last_len)
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;
    use std::path::PathBuf;

    use super::*;
    use crate::corpus::tests::read_campaign;
    use crate::corpus::{CorpusConfig, LabelLanguage, default_kind_folders, fragment_campaign, parse_campaign};

    fn config() -> CorpusConfig {
        CorpusConfig {
            label_language: LabelLanguage::Es,
            kind_folders: default_kind_folders(),
            secret_paths: vec!["Secretos".to_string()],
            secret_words: crate::corpus::default_secret_words(),
            session_patterns: crate::corpus::SessionPattern::defaults(),
        }
    }

    /// Parses `(path, text)` notes and fragments them, as the ingest does.
    fn read_notes(sources: &[(&str, &str)]) -> (Vec<Note>, Vec<Fragment>) {
        let config = config();
        let (notes, _) = parse_campaign(sources, &config);
        let (fragments, _) = fragment_campaign(&notes, &config);
        (notes, fragments)
    }

    /// One line per entity: `name (kind) [aliases] sources note_path: description`.
    fn render_compendium(compendium: &Compendium) -> String {
        let mut rendered = String::new();
        for entity in &compendium.entities {
            let sources: Vec<&str> = entity.sources.iter().map(|source| source.as_str()).collect();
            write!(
                rendered,
                "{} ({}) [{}] {}",
                entity.name,
                entity.kind.as_str(),
                entity.aliases.join(", "),
                sources.join("+")
            )
            .unwrap();
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
            "Baika (npc) [La Tejedora, la vieja de las redes] sheet+frontmatter+link PNJs/baika.md: Teje redes. Vive en el puerto.",
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
        // Generic and lowercase world titles are not entities; secret notes add nothing.
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
            "",
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
    fn secret_notes_and_links_into_them_name_no_entity() {
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
            "",
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
Baika (npc) [La Tejedora, ella, Abuela Baika] sheet+frontmatter+llm PNJs/Baika.md: Teje.
Vaskrith (npc) [el dragón blanco] link+llm: Dragón blanco del norte.
Ulrico Mendaña (npc) [el coleccionista] llm: Falso coleccionista.
Irek (pc) [ella] llm",
        );
    }

    /// The compendium every matching case runs against.
    const MATCH_NOTES: &[(&str, &str)] = &[
        ("PNJs/Baika.md", "---\naliases: [La Tejedora, Al, ella, rey, la vieja, «la guardiana»]\n---\nTeje."),
        ("PJs/Katerina_Emberdusk.md", "Bruja."),
        ("PNJs/grum.md", "Orco."),
        ("Deidades/Norkiel.md", "Dios."),
        ("PJs/Tomás Quebrahierro.md", "Enano."),
        ("Mundo/El Bosque Susurrante.md", "Bosque."),
        (
            "Sesiones/Sesion 1.md",
            "[[Vaskrith|el dragón blanco]] y [[Vaskrith|dragón blanco]] y [[El Bosque Susurrante|bosque susurrante]]",
        ),
        ("Sesiones/Sesion 2.md", "[[Cryovain|Dragón]] [[Cryovain|el dragón]]"),
    ];

    /// Matches `question` against `MATCH_NOTES`; renders `alias@start..end=entity` per match.
    fn check_match(question: &str, expect: &str) {
        let (notes, _) = read_notes(MATCH_NOTES);
        let compendium = Compendium::build(&notes, &config());
        let matcher = EntityMatcher::new(&compendium);
        let rendered: Vec<String> = matcher
            .match_question(question)
            .iter()
            .map(|found| {
                assert_eq!(alias_key(&question[found.start..found.end]), alias_key(&found.alias), "{question:?}");
                format!("{}@{}..{}={}", found.alias, found.start, found.end, compendium.entities[found.entity].name)
            })
            .collect();
        assert_eq!(rendered.join(" "), expect, "{question:?}");
    }

    #[test]
    fn match_questions() {
        // Case and accents.
        check_match("¿Quién es Baika?", "Baika@12..17=Baika");
        check_match("quien es baika", "Baika@9..14=Baika");
        check_match("BAIKA y NORKIEL", "Baika@0..5=Baika Norkiel@8..15=Norkiel");
        check_match("¿Qué le pasó a Tomas Quebrahierro?", "Tomás Quebrahierro@18..36=Tomás Quebrahierro");
        check_match("y Tomás?", "Tomás@2..8=Tomás Quebrahierro");
        check_match("Katerina Emberdusk, katerina_emberdusk", "Katerina_Emberdusk@0..18=Katerina_Emberdusk");
        check_match("¿Y Katerina?", "Katerina@4..12=Katerina_Emberdusk");
        check_match("¿Dónde está Grum?", "grum@15..19=grum");
        check_match("la guardiana", "«la guardiana»@0..12=Baika");
        check_match("¿Y la TEJEDORA?", "La Tejedora@4..15=Baika");
        // Whole words only.
        check_match("el lago Baikal y Norkielas", "");
        check_match("Baika's net, (Baika), **Baika**", "Baika@0..5=Baika");
        // Longest first, one match per entity, spans in the original text.
        check_match("¿Dónde vive el dragón blanco?", "el dragón blanco@14..31=Vaskrith");
        check_match("el dragón  blanco", "el dragón blanco@0..18=Vaskrith");
        check_match("un dragón blanco", "dragón blanco@3..17=Vaskrith");
        check_match("¿Qué hay en El Bosque Susurrante?", "El Bosque Susurrante@14..34=El Bosque Susurrante");
        check_match("el bosque susurrante", "El Bosque Susurrante@0..20=El Bosque Susurrante");
        // A longest candidate that is not a whole word leaves room for a shorter one.
        check_match("el dragón blancos", "el dragón@0..10=Cryovain");
        check_match("Dragón", "Dragón@0..7=Cryovain");
        // Short, stopword-only and single lowercase common aliases are ignored;
        // multi-word lowercase aliases are kept.
        check_match("Al final ella habló con el rey", "");
        check_match("la vieja", "la vieja@0..8=Baika");
        check_match("el dragón", "el dragón@0..10=Cryovain");
    }

    /// Counts mentions per fragment of `sources`; one line per fragment with mentions:
    /// `label: entity×count, …`.
    fn check_mentions(sources: &[(&str, &str)], expect: &str) {
        let (notes, fragments) = read_notes(sources);
        let compendium = Compendium::build(&notes, &config());
        let matcher = EntityMatcher::new(&compendium);
        let mut by_fragment: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for mention in mentions(&compendium, &matcher, &fragments) {
            let name = &compendium.entities[mention.entity].name;
            by_fragment.entry(mention.fragment).or_default().push(format!("{name}×{}", mention.count));
        }
        let rendered: Vec<String> = by_fragment
            .iter()
            .map(|(fragment_idx, counts)| format!("{}: {}", fragments[*fragment_idx].label, counts.join(", ")))
            .collect();
        assert_eq!(rendered.join("\n"), expect.trim(), "\n--- actual ---\n{}", rendered.join("\n"));
    }

    #[test]
    fn translatable_names_are_the_ones_that_open_with_an_article() {
        let mut leandro = new_entity("Leandro de Valdemora", EntityKind::Npc, EntitySource::Sheet);
        for alias in ["Leandro", "el Archiduque", "el Heraldo de la Marea Baja", "la de"] {
            add_alias(&mut leandro, alias);
        }
        let crown = new_entity("La Corona de Sal", EntityKind::Item, EntitySource::World);
        let mut grog = new_entity("Grog Strongjaw", EntityKind::Pc, EntitySource::Sheet);
        add_alias(&mut grog, "the Thunderlord");
        let compendium = Compendium { entities: vec![leandro, crown, grog] };
        let translatable = compendium.translatable_names();
        let names: Vec<(usize, &str, LabelLanguage)> =
            translatable.iter().map(|name| (name.entity, name.written.as_str(), name.language)).collect();
        assert_eq!(
            names,
            [
                (0, "el Archiduque", LabelLanguage::Es),
                (0, "el Heraldo de la Marea Baja", LabelLanguage::Es),
                (1, "La Corona de Sal", LabelLanguage::Es),
                (2, "the Thunderlord", LabelLanguage::En),
            ],
            "a bare name and an article followed by stopwords only are not translatable"
        );
    }

    #[test]
    fn a_typed_name_is_found_without_its_article_and_an_exact_spelling_wins() {
        let mut leandro = new_entity("Leandro de Valdemora", EntityKind::Npc, EntitySource::Sheet);
        add_alias(&mut leandro, "el Archiduque");
        let crown = new_entity("La Corona de Sal", EntityKind::Item, EntitySource::World);
        let mut herald = new_entity("Heraldo", EntityKind::Npc, EntitySource::Sheet);
        add_alias(&mut herald, "el mensajero");
        let mut other = new_entity("Odo Brezo", EntityKind::Pc, EntitySource::Sheet);
        add_alias(&mut other, "el Heraldo");
        let compendium = Compendium { entities: vec![leandro, crown, herald, other] };
        let found = |typed: &str| compendium.find_typed(typed).map(|idx| compendium.entities[idx].name.as_str());
        assert_eq!(found("archiduque"), Some("Leandro de Valdemora"));
        assert_eq!(found("  ARCHIDUQUE "), Some("Leandro de Valdemora"));
        assert_eq!(found("el archiduque"), Some("Leandro de Valdemora"));
        assert_eq!(found("corona de sal"), Some("La Corona de Sal"));
        assert_eq!(found("the Corona de Sal"), Some("La Corona de Sal"), "either language's article");
        assert_eq!(found("mensajero"), Some("Heraldo"));
        // «Heraldo» is one entity's exact name; «el Heraldo» is another's alias.
        assert_eq!(found("Heraldo"), Some("Heraldo"));
        assert_eq!(found("el Heraldo"), Some("Odo Brezo"));
        assert_eq!(found("el"), None, "an article alone names nothing");
        assert_eq!(found("duque"), None, "a part of a word is not the word");
    }

    #[test]
    fn mentions_per_fragment() {
        check_mentions(
            &[
                ("PNJs/Baika.md", "---\naliases: [La Tejedora]\n---\nTeje redes para [[Norkiel]]."),
                ("Deidades/Norkiel.md", "Dios de las tormentas."),
                ("Sesiones/Sesion 1.md", "Baika, baika y la tejedora. Norkiel.\n%% Baika secreta %%"),
                ("Sesiones/Sesion 2.md", "Nadie."),
                ("Sesiones/Sesion 3.md", "El lago Baikal."),
            ],
            "
Ficha: Norkiel: Norkiel×1
Ficha: Baika: Baika×1, Norkiel×1
Sesión 1: Baika×3, Norkiel×1
Sesión 1: Baika×1",
        );
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
            writeln!(
                actual,
                "{} ({}) [{}] sessions {}",
                entity.name,
                entity.kind.as_str(),
                entity.aliases.join(", "),
                sessions.join(" ")
            )
            .unwrap();
        }
        assert_eq!(actual.trim(), expect.trim(), "{campaign}\n--- actual ---\n{actual}");
    }

    #[test]
    fn fixture_compendiums() {
        check_fixture(
            "tests/fixtures/boveda",
            "
Ayla Brasaluna (pc) [Ayla] sessions 1 3 5
Baika (npc) [La Tejedora, la vieja de las redes] sessions 1 2 3 4 5 6
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
Dorian Quesada (npc) [Dorian, el capitán de La Zorra Gris] sessions 6 7 8 9 12 33 34
Gaspar Nieto (npc) [el Tuerto, Gaspar] sessions 6 19 21 22 32
Inés Carvajal (npc) [la Magistra, Inés] sessions 8 18 27 28 31 34
Iria Valcárcel (pc) [la Garza, Iria] sessions 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 36 37 38 39 40
Isla Herrumbre (other) [] sessions 6 8 9 32 33
La Corona de Sal (other) [] sessions 19 23 27 34 39 40
Las Salinas de Oruel (other) [Salinas de Oruel] sessions 3 8 23 24 25 26 28 29 39
Leandro de Valdemora (npc) [el Archiduque, el Heraldo de la Marea Baja, el Heraldo, Leandro] sessions 1 5 8 9 10 30 31 39
Mirela Saavedra (npc) [Mirela, la posadera] sessions 1 5 14 25 40
Monasterio de Piedraluz (other) [Piedraluz] sessions 3 11 23 36 39 40
Nela Nieto (npc) [Nela] sessions 22 23 29 30 32 33 34 36 39 40
Odo Brezo (pc) [el Cuentacuentos, Odo] sessions 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40
Puerto Salobre (other) [] sessions 1 2 5 7 9 11 12 13 14 15 19 20 24 25 29 30 31 32 35 37 40
Rook Ashford (pc) [Rook] sessions 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40
Sor Amaranta (pc) [Amaranta] sessions 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40
Tobías Lerma (npc) [Tobi, el Penitente, Tobías, el chico] sessions 3 4 11 28 34 37 38 39 40
Verónica de Valdemora (npc) [la Regente, Verónica] sessions 5 6 9 10 20 21 22 29 30 31 40
Yusuf Benarroch (npc) [Yusuf, el cartógrafo] sessions 13 14 15 16 17 18 19 23 26 27 40",
        );
    }
}
