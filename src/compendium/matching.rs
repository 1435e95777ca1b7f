//! Finding the compendium's entities in text: names and aliases in questions and fragments,
//! and a name a person typed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use aho_corasick::AhoCorasick;
use unicode_normalization::char::{decompose_canonical, is_combining_mark};

use super::{Compendium, Entity, EntityMatch, EntitySource, MIN_ALIAS_CHARS, Mention, TranslatableName};
use crate::corpus::{Fragment, NoteKind};
use crate::lexicon::{article_language, is_stopword};

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

impl Compendium {
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

/// Folded name → entity, names before aliases.
pub(super) struct NameIndex {
    by_name: HashMap<String, usize>,
    by_alias: HashMap<String, usize>,
}

impl NameIndex {
    pub(super) fn new(entities: &[Entity]) -> NameIndex {
        let mut index = NameIndex { by_name: HashMap::new(), by_alias: HashMap::new() };
        for (entity_idx, entity) in entities.iter().enumerate() {
            index.insert(entity, entity_idx);
        }
        index
    }

    /// Records `entity`'s name and aliases; earlier entries keep their key.
    pub(super) fn insert(&mut self, entity: &Entity, entity_idx: usize) {
        self.by_name.entry(alias_key(&entity.name)).or_insert(entity_idx);
        for alias in entity.aliases.iter().chain(&entity.gm_aliases) {
            self.by_alias.entry(alias_key(alias)).or_insert(entity_idx);
        }
    }

    /// The entity one of `keys` names: a name match first, then an alias match.
    pub(super) fn find(&self, keys: &[String]) -> Option<usize> {
        let by_name = keys.iter().find_map(|key| self.by_name.get(key));
        by_name.or_else(|| keys.iter().find_map(|key| self.by_alias.get(key))).copied()
    }
}

/// Whether a name or alias is worth matching: at least `MIN_ALIAS_CHARS` long, not made of
/// stopwords only, and not a single lowercase word ("dragón", "rey"), which is more likely
/// the common noun than the name. A note's own name is exempt from the last rule: the GM
/// named a sheet after it.
pub(super) fn is_meaningful_alias(written: &str, key: &str, is_note_name: bool) -> bool {
    if key.chars().count() < MIN_ALIAS_CHARS || key.split(' ').all(is_stopword) {
        return false;
    }
    let is_single_word = !key.contains(' ');
    let is_lowercase = !written.chars().any(char::is_uppercase);
    !(is_single_word && is_lowercase && !is_note_name)
}

/// A folded name without its leading definite article («el archiduque» → «archiduque»).
fn without_article(folded: &str) -> &str {
    match folded.split_once(' ') {
        Some((first, rest)) if article_language(first).is_some() => rest,
        _ => folded,
    }
}

/// The comparison form of a name: folded, `_` read as a space, whitespace collapsed, and
/// no punctuation at either end (`«la guardiana»` → `la guardiana`).
pub(super) fn alias_key(name: &str) -> String {
    FoldedText::new(name, false).text.trim_matches(|c: char| !c.is_alphanumeric()).to_string()
}

/// `text` folded as names are compared ([`alias_key`]'s folding), for [`used_in`].
pub(super) fn fold_for_search(text: &str) -> String {
    FoldedText::new(text, false).text
}

/// Whether `alias` appears as whole words in `folded_text` ([`fold_for_search`]).
pub(super) fn used_in(folded_text: &str, alias: &str) -> bool {
    let key = alias_key(alias);
    if key.is_empty() {
        return false;
    }
    let mut from = 0;
    while let Some(at) = folded_text[from..].find(&key) {
        let start = from + at;
        if is_whole_word(folded_text, start, start + key.len()) {
            return true;
        }
        from = start + key.len();
    }
    false
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
    use super::super::EntityKind;
    use super::super::build::{add_alias, new_entity};
    use super::super::tests::{config, read_notes};
    use super::*;
    use crate::corpus::LabelLanguage;

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
        // The GM's view: front matter aliases match whether or not a player note uses them.
        let compendium = Compendium::build(&notes, &config()).for_gm();
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
}
