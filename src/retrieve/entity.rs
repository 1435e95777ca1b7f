//! The entity path: a question that names a compendium entity (by name or alias) brings the
//! fragments of every session where that entity appears, most central first.
//!
//! Measured in the design: asking about someone who appears in six sessions returned
//! fragments from only two or three with the dense and BM25 paths; this path raised that
//! coverage from 70% to 91%. The trade-off the design accepted (an entity that appears
//! everywhere floods the pool) broke on a 99-session campaign, so an entity's
//! evidence now scales with its rarity, a question naming two entities prefers the sessions
//! where they meet, and an arc question about one entity still gets all of its sessions.

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use tokio::sync::OnceCell;
use tracing::Instrument as _;

use super::MAX_POOL;
use crate::compendium::{Compendium, EntityMatcher, TranslatableName};
use crate::corpus::{FragmentId, LabelLanguage, SessionNumber, Visibility};
use crate::index::{EntityMention, IndexError, Store};
use crate::lexicon::{article_language, is_stopword};
use crate::llm::{EmbedRole, Embedder, LlmError, NameFloor, cosine};
use crate::text::fold;

/// An entity the question names.
#[derive(Debug, Clone, Serialize)]
pub struct DetectedEntity {
    pub name: String,
    pub kind: String,
    /// The name or alias of the notes the question matched.
    pub alias: String,
    /// For a title named in another language: the question's words («the archduke» for
    /// «el Archiduque»).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asked_as: Option<String>,
    /// For a title named in another language: the cosine between those words and the title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f32>,
}

/// The compendium as the index stores it, ready to match questions against.
pub struct CompendiumIndex {
    pub compendium: Compendium,
    /// Store id of `compendium.entities[i]`.
    pub entity_ids: Vec<i64>,
    matcher: EntityMatcher,
    /// The names a question may translate ([`Compendium::translatable_names`]).
    translatable: Vec<TranslatableName>,
    /// Their vectors, embedded as queries the first time a question could name one, with the
    /// id of the embedder that made them.
    translatable_vectors: OnceCell<(String, Vec<Vec<f32>>)>,
    /// Who may read what it names: a players' search refuses a compendium loaded for the GM.
    pub audience: super::Audience,
}

/// The words after an article that a phrase may hold: «the Salt Flats of Oruel» is four with
/// its «of», and a title is rarely longer.
pub const MAX_PHRASE_WORDS: usize = 4;

/// A definite article and the words that follow it in a question, up to a stopword: the
/// phrase that may name a title in translation ("the archduke").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArticlePhrase {
    pub text: String,
    pub language: LabelLanguage,
}

/// Every phrase of `question` that opens with a definite article, each article giving its
/// phrases of one to [`MAX_PHRASE_WORDS`] words ("the archduke", "the archduke pay"): which one
/// names the title is for the embedder to tell. A stopword ends a phrase, except «de»/"of"
/// between two words of it («the Salt Flats of Oruel»).
pub fn article_phrases(question: &str) -> Vec<ArticlePhrase> {
    let words: Vec<&str> = question.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let mut phrases = Vec::new();
    for (at, article) in words.iter().enumerate() {
        let Some(language) = article_language(&fold(article)) else {
            continue;
        };
        let mut taken: Vec<&str> = Vec::new();
        for word in words.iter().skip(at + 1).take(MAX_PHRASE_WORDS) {
            let folded = fold(word);
            let joins_words = matches!(folded.as_str(), "de" | "of") && !taken.is_empty();
            let is_content_word = !is_stopword(&folded);
            if !is_content_word && !joins_words {
                break;
            }
            taken.push(word);
            if is_content_word {
                phrases.push(ArticlePhrase { text: format!("{article} {}", taken.join(" ")), language });
            }
        }
    }
    phrases
}

/// The translatable name `phrase` (one vector per name, all from one embedder) names, with its
/// cosine: the nearest name in another language than the phrase's, when it reaches
/// `floor.least` and the nearest name of any other entity stays `floor.margin` below it.
pub fn nearest_name(
    phrase: &[f32],
    language: LabelLanguage,
    names: &[TranslatableName],
    vectors: &[Vec<f32>],
    floor: NameFloor,
) -> Option<(usize, f32)> {
    let scored: Vec<(usize, f32)> = names
        .iter()
        .zip(vectors)
        .enumerate()
        .filter(|(_, (name, _))| name.language != language)
        .map(|(at, (_, vector))| (at, cosine(phrase, vector)))
        .collect();
    let &(best, best_cosine) = scored.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let runner_up = scored
        .iter()
        .filter(|(at, _)| names[*at].entity != names[best].entity)
        .map(|(_, cosine)| *cosine)
        .fold(f32::MIN, f32::max);
    (best_cosine >= floor.least && best_cosine - runner_up >= floor.margin).then_some((best, best_cosine))
}

impl CompendiumIndex {
    /// The stored compendium as `audience` may read it: for players, no GM-only entity and no
    /// alias only GM text uses, so no path matches, lists or shows one.
    pub fn load(store: &Store, audience: super::Audience) -> Result<CompendiumIndex, IndexError> {
        let (compendium, entity_ids) = store.load_compendium(audience.visibility_filter())?;
        Ok(CompendiumIndex { audience, ..CompendiumIndex::new(compendium, entity_ids) })
    }

    /// `compendium` with the store id of each of its entities, in order; read as the GM's
    /// when it holds anything GM-only.
    pub fn new(compendium: Compendium, entity_ids: Vec<i64>) -> CompendiumIndex {
        let matcher = EntityMatcher::new(&compendium);
        let translatable = compendium.translatable_names();
        let holds_gm_only = compendium.entities.iter().any(|entity| entity.gm_only || !entity.gm_aliases.is_empty());
        let audience = if holds_gm_only { super::Audience::Gm } else { super::Audience::Player };
        CompendiumIndex {
            compendium,
            entity_ids,
            matcher,
            translatable,
            translatable_vectors: OnceCell::new(),
            audience,
        }
    }

    /// The titles `question` names in another language than the notes write them («How much
    /// did the archduke pay…?» over «el Archiduque»), besides the entities in `named` (what
    /// [`CompendiumIndex::detect`] found). Only where the embedder has a calibrated
    /// [`NameFloor`]; an embedding that fails leaves the question to the lexical matcher.
    pub async fn detect_translated(
        &self,
        question: &str,
        embedder: &dyn Embedder,
        named: &[(i64, DetectedEntity)],
    ) -> Vec<(i64, DetectedEntity)> {
        let Some(floor) = embedder.name_floor() else {
            return Vec::new();
        };
        let phrases: Vec<ArticlePhrase> = article_phrases(question)
            .into_iter()
            .filter(|phrase| self.translatable.iter().any(|name| name.language != phrase.language))
            .collect();
        if phrases.is_empty() {
            return Vec::new();
        }
        let span = tracing::info_span!("retrieve.entity.translated", n_phrases = phrases.len());
        self.match_phrases(&phrases, embedder, floor, named).instrument(span).await
    }

    /// [`CompendiumIndex::detect_translated`] once the question has phrases worth embedding.
    async fn match_phrases(
        &self,
        phrases: &[ArticlePhrase],
        embedder: &dyn Embedder,
        floor: NameFloor,
        named: &[(i64, DetectedEntity)],
    ) -> Vec<(i64, DetectedEntity)> {
        let vectors = match self.translatable_vectors(embedder).await {
            Ok(vectors) => vectors,
            Err(error) => {
                tracing::warn!(%error, "titles not embedded; names matched by spelling only");
                return Vec::new();
            }
        };
        let texts: Vec<String> = phrases.iter().map(|phrase| phrase.text.clone()).collect();
        let phrase_vectors = match embedder.embed(&texts, EmbedRole::Query).await {
            Ok(phrase_vectors) => phrase_vectors,
            Err(error) => {
                tracing::warn!(%error, "question phrases not embedded; names matched by spelling only");
                return Vec::new();
            }
        };
        let mut found: Vec<(i64, DetectedEntity)> = Vec::new();
        for (phrase, vector) in phrases.iter().zip(&phrase_vectors) {
            let Some((at, similarity)) = nearest_name(vector, phrase.language, &self.translatable, vectors, floor)
            else {
                continue;
            };
            let name = &self.translatable[at];
            let (Some(&id), Some(entity)) =
                (self.entity_ids.get(name.entity), self.compendium.entities.get(name.entity))
            else {
                continue;
            };
            if named.iter().chain(&found).any(|(known, _)| *known == id) {
                continue;
            }
            tracing::debug!(phrase = %phrase.text, title = %name.written, similarity, "title named in another language");
            found.push((
                id,
                DetectedEntity {
                    name: entity.name.clone(),
                    kind: entity.kind.as_str().to_string(),
                    alias: name.written.clone(),
                    asked_as: Some(phrase.text.clone()),
                    similarity: Some(similarity),
                },
            ));
        }
        found
    }

    /// The translatable names' vectors from `embedder`: made once per compendium (one call),
    /// again only for another embedder than the one that made them.
    async fn translatable_vectors(&self, embedder: &dyn Embedder) -> Result<&Vec<Vec<f32>>, LlmError> {
        let (made_by, vectors) = self
            .translatable_vectors
            .get_or_try_init(|| async {
                let texts: Vec<String> = self.translatable.iter().map(|name| name.written.clone()).collect();
                let vectors = embedder.embed(&texts, EmbedRole::Query).await?;
                Ok::<_, LlmError>((embedder.id().to_string(), vectors))
            })
            .await?;
        if made_by != embedder.id() || vectors.len() != self.translatable.len() {
            return Err(LlmError::Worker(format!("titles were embedded by {made_by}, not {}", embedder.id())));
        }
        Ok(vectors)
    }

    /// Entity names and aliases containing what was typed (accents and case ignored), names
    /// first: an autocomplete, or a suggestion for a name the compendium does not know.
    pub fn names_matching(&self, typed: &str, limit: usize) -> Vec<String> {
        let typed = crate::text::fold(typed.trim());
        let mut names: Vec<String> = Vec::new();
        for entity in &self.compendium.entities {
            if crate::text::fold(&entity.name).contains(&typed) && !names.contains(&entity.name) {
                names.push(entity.name.clone());
            }
        }
        for entity in &self.compendium.entities {
            for alias in &entity.aliases {
                if crate::text::fold(alias).contains(&typed) && !names.contains(alias) {
                    names.push(alias.clone());
                }
            }
        }
        names.truncate(limit);
        names
    }

    /// The byte spans of `text` that name the entity `entity_id`, by any of its names.
    pub fn mentions_of(&self, text: &str, entity_id: i64) -> Vec<(usize, usize)> {
        match self.entity_ids.iter().position(|id| *id == entity_id) {
            Some(entity_idx) => self.matcher.spans_of(text, entity_idx),
            None => Vec::new(),
        }
    }

    /// `text` with every mention of the entity `entity_id` (by any of its names) written as
    /// `written`, or `None` when `text` does not name it: sentences about one entity compared
    /// by what they say of it, not by which of its names they use.
    pub fn with_entity_written_as(&self, text: &str, entity_id: i64, written: &str) -> Option<String> {
        let spans = self.mentions_of(text, entity_id);
        if spans.is_empty() {
            return None;
        }
        let mut rewritten = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in spans {
            // Two names side by side («el archiduque Leandro de Valdemora») are one mention.
            let adjacent = at > 0 && text[at..start].trim().is_empty();
            if !adjacent {
                rewritten.push_str(&text[at..start]);
                rewritten.push_str(written);
            }
            at = end;
        }
        rewritten.push_str(&text[at..]);
        Some(rewritten)
    }

    /// The entities `question` names, longest alias first, with their store ids.
    pub fn detect(&self, question: &str) -> Vec<(i64, DetectedEntity)> {
        self.matcher
            .match_question(question)
            .into_iter()
            .filter_map(|found| {
                let id = *self.entity_ids.get(found.entity)?;
                let entity = self.compendium.entities.get(found.entity)?;
                Some((
                    id,
                    DetectedEntity {
                        name: entity.name.clone(),
                        kind: entity.kind.as_str().to_string(),
                        alias: found.alias,
                        asked_as: None,
                        similarity: None,
                    },
                ))
            })
            .collect()
    }
}

/// An entity's evidence is `1 − its share of the sessions` (a PC in 90% of them says little
/// about which one the question means; an NPC in two says a lot), never below this floor, so
/// the path still breaks ties between the other paths' candidates.
pub const ENTITY_MIN_WEIGHT: f64 = 0.05;

/// Folded phrases that ask about an entity's whole story («¿qué ha hecho X en la campaña?»,
/// "what has X done?"): such a question gets every session of the entity at full weight.
const ARC_PHRASES: &[&str] = &[
    "que ha hecho",
    "que ha pasado con",
    "que paso con",
    "que fue de",
    "que ha sido de",
    "a lo largo",
    "en la campana",
    "en toda la campana",
    "historia de",
    "papel de",
    "que papel",
    "evolucion de",
    "de principio a fin",
    "hasta el final",
    "durante la campana",
    "que le ha ocurrido",
    "que les ha ocurrido",
    "ha cambiado",
    "what has",
    "what have",
    "what happened to",
    "what happened with",
    "what became of",
    "throughout",
    "over the campaign",
    "across the campaign",
    "in the campaign",
    "whole campaign",
    "story of",
    "role of",
    "what role",
    "from start to finish",
    "has changed",
];

/// One named entity's spread over the campaign, as `search --json` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityShare {
    pub name: String,
    /// Sessions where the entity is mentioned (in fragments the audience may see).
    pub n_sessions: usize,
    /// `n_sessions` over the campaign's sessions (0 when the campaign has none).
    pub session_share: f64,
    /// Its evidence: `max(1 − session_share, ENTITY_MIN_WEIGHT)`, 1 for an arc question.
    pub weight: f64,
}

/// What the entity path found and how much the fusion should trust it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EntityEvidence {
    /// Fragment ids, best first: most named entities together, then rarity-weighted centrality.
    #[serde(skip)]
    pub ranked: Vec<FragmentId>,
    /// The path's weight in the fusion: the rarity of the named entities together.
    pub weight: f64,
    /// The question asks about the entity's whole story: full weight, one fragment per session first.
    pub arc: bool,
    /// Sessions in the campaign (the share's denominator).
    pub n_sessions: usize,
    /// With two or more entities: the sessions where all of them appear.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub joint_sessions: Option<usize>,
    pub entities: Vec<EntityShare>,
}

/// Whether `question` asks about an entity's whole story (see [`ARC_PHRASES`]).
pub fn is_arc_question(question: &str) -> bool {
    let folded: String =
        crate::text::fold(question).chars().map(|c| if c.is_alphanumeric() { c } else { ' ' }).collect();
    let joined = format!(" {} ", folded.split_whitespace().collect::<Vec<_>>().join(" "));
    ARC_PHRASES.iter().any(|phrase| joined.contains(&format!(" {phrase} ")))
}

/// The entity path: fragments mentioning the entities the question names, from the index,
/// ranked by [`rank_by_entities`].
pub fn search_entities(
    store: &Store,
    entities: &[(i64, String)],
    visibility: Option<Visibility>,
    depth: usize,
    arc: bool,
) -> Result<EntityEvidence, IndexError> {
    let _span = tracing::info_span!("retrieve.entity", n_entities = entities.len(), depth, arc).entered();
    if entities.is_empty() {
        return Ok(rank_by_entities(&[], entities, 0, arc, depth));
    }
    let entity_ids: Vec<i64> = entities.iter().map(|(id, _)| *id).collect();
    let mentions = store.entity_mentions(&entity_ids, visibility)?;
    let n_sessions = store.n_sessions(visibility)?;
    let evidence = rank_by_entities(&mentions, entities, n_sessions, arc, depth);
    tracing::debug!(weight = evidence.weight, n_ranked = evidence.ranked.len(), "entity evidence");
    Ok(evidence)
}

/// Ranks the fragments that mention the named `entities` (`(store id, name)`), pure.
///
/// - Each entity's evidence is its rarity, `max(1 − share, ENTITY_MIN_WEIGHT)`, where share is
///   the fraction of the campaign's `n_sessions` it appears in; a campaign without sessions
///   gives every entity full weight.
/// - A fragment naming more of the entities comes first (two entities: the sessions where they
///   meet), then by the sum of each entity's weight × its centrality there (mentions over the
///   square root of the fragment's length: a short note naming it ten times is about it).
/// - The path's weight is the rarity of the entities together: the share of sessions where
///   all of them appear (the rarest one's when they never meet).
/// - An arc question keeps full weight and lists the most central fragment of every session
///   before any second fragment of a session, up to `MAX_POOL`, so the whole story reaches the pool.
pub fn rank_by_entities(
    mentions: &[EntityMention],
    entities: &[(i64, String)],
    n_sessions: usize,
    arc: bool,
    depth: usize,
) -> EntityEvidence {
    let mut sessions_of: HashMap<i64, BTreeSet<SessionNumber>> = HashMap::new();
    for mention in mentions {
        let sessions = sessions_of.entry(mention.entity_id).or_default();
        sessions.extend(mention.session);
    }
    let share_of = |n: usize| if n_sessions == 0 { 0.0 } else { (n as f64 / n_sessions as f64).min(1.0) };
    let rarity = |share: f64| if arc { 1.0 } else { (1.0 - share).max(ENTITY_MIN_WEIGHT) };

    let shares: Vec<EntityShare> = entities
        .iter()
        .map(|(entity_id, name)| {
            let n = sessions_of.get(entity_id).map_or(0, BTreeSet::len);
            EntityShare { name: name.clone(), n_sessions: n, session_share: share_of(n), weight: rarity(share_of(n)) }
        })
        .collect();
    let weight_of: HashMap<i64, f64> =
        entities.iter().zip(&shares).map(|((entity_id, _), share)| (*entity_id, share.weight)).collect();

    let joint_sessions = (entities.len() > 1).then(|| {
        let mut sets = entities.iter().map(|(entity_id, _)| sessions_of.get(entity_id).cloned().unwrap_or_default());
        let first = sets.next().unwrap_or_default();
        sets.fold(first, |together, set| together.intersection(&set).copied().collect()).len()
    });
    let path_share = match joint_sessions {
        Some(0) => shares.iter().map(|share| share.session_share).fold(1.0, f64::min),
        Some(n) => share_of(n),
        None => shares.first().map_or(0.0, |share| share.session_share),
    };

    // Per fragment: which named entities it mentions, its weighted centrality, its session.
    let mut by_fragment: HashMap<FragmentId, (BTreeSet<i64>, f64, Option<SessionNumber>)> = HashMap::new();
    // Only the named entities' mentions count: another entity in the same fragment is not
    // evidence for this question.
    for mention in mentions {
        let Some(weight) = weight_of.get(&mention.entity_id).copied() else {
            continue;
        };
        let centrality = mention.n_mentions as f64 / (mention.word_count.max(1) as f64).sqrt();
        let entry = by_fragment.entry(mention.fragment_id).or_insert_with(|| (BTreeSet::new(), 0.0, mention.session));
        entry.0.insert(mention.entity_id);
        entry.1 += weight * centrality;
    }
    let mut ranked: Vec<(FragmentId, usize, f64, Option<SessionNumber>)> =
        by_fragment.into_iter().map(|(id, (named, score, session))| (id, named.len(), score, session)).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(b.2.total_cmp(&a.2)).then(a.0.cmp(&b.0)));
    let (ranked, depth) = if arc {
        // Every session's best fragment first, then the rest in the same order.
        let mut seen_sessions = BTreeSet::new();
        let (firsts, rest): (Vec<_>, Vec<_>) = ranked
            .into_iter()
            .partition(|(_, _, _, session)| session.is_none_or(|session| seen_sessions.insert(session)));
        (firsts.into_iter().chain(rest).collect(), depth.max(MAX_POOL))
    } else {
        (ranked, depth)
    };
    EntityEvidence {
        ranked: ranked.into_iter().take(depth).map(|(id, ..)| id).collect(),
        weight: rarity(path_share),
        arc,
        n_sessions,
        joint_sessions,
        entities: shares,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VEX: i64 = 1;
    const SAUNDOR: i64 = 2;
    const BAIKA: i64 = 3;

    #[test]
    fn article_phrases_are_the_words_after_each_article_up_to_a_stopword() {
        let texts = |question: &str| -> Vec<(String, LabelLanguage)> {
            article_phrases(question).into_iter().map(|phrase| (phrase.text, phrase.language)).collect()
        };
        let en = |text: &str| (text.to_string(), LabelLanguage::En);
        let es = |text: &str| (text.to_string(), LabelLanguage::Es);
        let cases: Vec<(&str, Vec<(String, LabelLanguage)>)> = vec![
            (
                "How much did the archduke pay the party in advance?",
                vec![en("the archduke"), en("the archduke pay"), en("the party")],
            ),
            (
                "Where are the Salt Flats of Oruel?",
                vec![en("the Salt"), en("the Salt Flats"), en("the Salt Flats of Oruel")],
            ),
            // «de» ends a phrase that has no word yet; a stopword ends it anywhere else.
            (
                "¿Qué dijo la Abadesa de Piedraluz sobre el mapa?",
                vec![es("la Abadesa"), es("la Abadesa de Piedraluz"), es("el mapa")],
            ),
            // Never more than MAX_PHRASE_WORDS words after the article.
            (
                "What did the old grey salt merchant sell?",
                vec![en("the old"), en("the old grey"), en("the old grey salt"), en("the old grey salt merchant")],
            ),
            ("Who is Leandro?", vec![]),
            ("the", vec![]),
            ("", vec![]),
        ];
        for (question, expected) in cases {
            assert_eq!(texts(question), expected, "{question}");
        }
    }

    #[test]
    fn a_title_is_named_across_languages_only_above_the_floor_and_clear_of_other_entities() {
        let name =
            |entity: usize, written: &str, language| TranslatableName { entity, written: written.into(), language };
        let names = vec![
            name(0, "el Archiduque", LabelLanguage::Es),
            name(0, "el Heraldo", LabelLanguage::Es),
            name(1, "la Regente", LabelLanguage::Es),
            name(2, "the Thunderlord", LabelLanguage::En),
        ];
        // Unit vectors along one axis each; a phrase's cosine to name i is its i-th coordinate.
        let vectors: Vec<Vec<f32>> =
            (0..names.len()).map(|i| (0..names.len()).map(|j| if i == j { 1.0 } else { 0.0 }).collect()).collect();
        let floor = NameFloor { least: 0.90, margin: 0.04 };
        let check = |phrase: [f32; 4], language, expected: Option<usize>| {
            let found = nearest_name(&phrase, language, &names, &vectors, floor).map(|(at, _)| at);
            assert_eq!(found, expected, "{phrase:?} in {language:?}");
        };
        check([0.93, 0.0, 0.85, 0.0], LabelLanguage::En, Some(0));
        // Below the floor.
        check([0.89, 0.0, 0.80, 0.0], LabelLanguage::En, None);
        // As near another entity's title (within the margin): neither.
        check([0.93, 0.0, 0.91, 0.0], LabelLanguage::En, None);
        // Two titles of the same entity close together are no ambiguity.
        check([0.93, 0.92, 0.80, 0.0], LabelLanguage::En, Some(0));
        // A phrase is never compared with a title in its own language: spelling is the
        // lexical matcher's job, and a near-spelling there is another word.
        check([0.99, 0.0, 0.0, 0.0], LabelLanguage::Es, None);
        check([0.0, 0.0, 0.0, 0.95], LabelLanguage::Es, Some(3));
        check([0.0, 0.0, 0.0, 0.95], LabelLanguage::En, None);
    }

    /// An embedder with e5's name floor whose vectors are looked up by text (unknown texts get
    /// a vector of their own), counting its calls; it fails every call when told to.
    struct TableEmbedder {
        vectors: Vec<(&'static str, [f32; 3])>,
        floor: Option<NameFloor>,
        fail: bool,
        calls: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl Embedder for TableEmbedder {
        fn id(&self) -> &str {
            "table"
        }
        fn dimension(&self) -> usize {
            3
        }
        fn window_words(&self) -> usize {
            250
        }
        async fn embed(&self, texts: &[String], _role: EmbedRole) -> Result<Vec<Vec<f32>>, LlmError> {
            self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if self.fail {
                return Err(LlmError::Worker("injected failure".into()));
            }
            let lookup = |text: &String| self.vectors.iter().find(|(known, _)| known == text).map(|(_, v)| v.to_vec());
            Ok(texts.iter().map(|text| lookup(text).unwrap_or_else(|| vec![0.0, 0.0, 1.0])).collect())
        }
        fn name_floor(&self) -> Option<NameFloor> {
            self.floor
        }
    }

    fn titled_compendium() -> CompendiumIndex {
        let leandro = crate::compendium::Entity {
            name: "Leandro de Valdemora".into(),
            kind: crate::compendium::EntityKind::Npc,
            aliases: vec!["el Archiduque".into()],
            description: String::new(),
            sources: vec![crate::compendium::EntitySource::Sheet],
            note_path: None,
            gm_only: false,
            gm_aliases: Vec::new(),
        };
        let celia = crate::compendium::Entity {
            name: "Celia Urquijo".into(),
            aliases: vec!["la Abadesa".into()],
            ..leandro.clone()
        };
        CompendiumIndex::new(Compendium { entities: vec![leandro, celia] }, vec![11, 12])
    }

    #[test]
    fn sentences_about_an_entity_are_compared_under_one_name() {
        let compendium = titled_compendium();
        let written = |text: &str, id: i64| compendium.with_entity_written_as(text, id, "LEANDRO");
        assert_eq!(
            written("Era el archiduque Leandro de Valdemora, cambiado.", 11).as_deref(),
            Some("Era LEANDRO, cambiado."),
            "a title beside the name is one mention"
        );
        assert_eq!(
            written("El archiduque habla; Leandro de Valdemora calla y el ARCHIDUQUE sale.", 11).as_deref(),
            Some("LEANDRO habla; LEANDRO calla y LEANDRO sale.")
        );
        assert_eq!(written("La abadesa reza.", 11), None, "another entity's sentence does not name him");
        assert_eq!(written("La abadesa reza.", 12).as_deref(), Some("LEANDRO reza."));
        assert_eq!(written("Los archiduques de antaño.", 11), None, "whole words only");
        assert_eq!(written("Nadie.", 99), None, "an unknown entity names nothing");
    }

    fn table_embedder(floor: Option<NameFloor>, fail: bool) -> TableEmbedder {
        TableEmbedder {
            vectors: vec![
                ("el Archiduque", [1.0, 0.0, 0.0]),
                ("la Abadesa", [0.0, 1.0, 0.0]),
                ("the archduke", [0.96, 0.28, 0.0]),
            ],
            floor,
            fail,
            calls: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    #[tokio::test]
    async fn titles_are_embedded_once_per_compendium_and_a_failure_only_loses_the_translation() {
        let compendium = titled_compendium();
        let floor = Some(NameFloor { least: 0.90, margin: 0.04 });
        let embedder = table_embedder(floor, false);
        let found = compendium.detect_translated("How much did the archduke pay?", &embedder, &[]).await;
        let named: Vec<(i64, &str, Option<&str>)> =
            found.iter().map(|(id, e)| (*id, e.alias.as_str(), e.asked_as.as_deref())).collect();
        assert_eq!(named, [(11, "el Archiduque", Some("the archduke"))]);
        assert_eq!(embedder.calls.load(std::sync::atomic::Ordering::SeqCst), 2, "the titles, then the phrases");
        // The next question embeds its phrases only; one the lexical matcher already named is not repeated.
        let already = compendium.detect_translated("Did the archduke pay?", &embedder, &found).await;
        assert!(already.is_empty(), "{already:?}");
        assert_eq!(embedder.calls.load(std::sync::atomic::Ordering::SeqCst), 3);
        // No article-led phrase, or one in the titles' own language: nothing to embed.
        for question in ["Who is Leandro?", "¿Qué pagó el archiduque?"] {
            assert!(compendium.detect_translated(question, &embedder, &[]).await.is_empty());
        }
        assert_eq!(embedder.calls.load(std::sync::atomic::Ordering::SeqCst), 3);

        // An embedder without a floor leaves titles to spelling, and calls nothing.
        let uncalibrated = table_embedder(None, false);
        assert!(
            titled_compendium()
                .detect_translated("How much did the archduke pay?", &uncalibrated, &[])
                .await
                .is_empty()
        );
        assert_eq!(uncalibrated.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
        // A failing embedder loses the translation, not the search.
        let failing = table_embedder(floor, true);
        assert!(
            titled_compendium().detect_translated("How much did the archduke pay?", &failing, &[]).await.is_empty()
        );
    }

    /// A ten-session campaign: fragment `n` is session `n`. Vex (a PC) is in sessions 1–9,
    /// named three times in each; Saundor in 5 and 10; Baika in 3 and 7, once each; session 8
    /// has a second fragment (id 18) that names Vex once.
    fn campaign() -> Vec<EntityMention> {
        let mention = |entity_id, fragment_id: i64, n_mentions, session| EntityMention {
            entity_id,
            fragment_id: FragmentId(fragment_id),
            n_mentions,
            word_count: 900,
            session: Some(SessionNumber(session)),
        };
        let mut mentions: Vec<EntityMention> = (1..=9).map(|n| mention(VEX, n, 3 + (n % 2), n as u32)).collect();
        mentions.push(mention(VEX, 18, 1, 8));
        mentions.extend([mention(SAUNDOR, 5, 1, 5), mention(SAUNDOR, 10, 2, 10)]);
        mentions.extend([mention(BAIKA, 3, 1, 3), mention(BAIKA, 7, 1, 7)]);
        mentions
    }

    /// Runs the entity path on `question` naming `named`, and checks the path's weight and
    /// its first fragment ids.
    fn check(question: &str, named: &[(i64, &str)], weight: f64, first: &[i64]) {
        let entities: Vec<(i64, String)> = named.iter().map(|(id, name)| (*id, name.to_string())).collect();
        let evidence = rank_by_entities(&campaign(), &entities, 10, is_arc_question(question), 16);
        assert!((evidence.weight - weight).abs() < 1e-9, "{question}: weight {}", evidence.weight);
        let ranked: Vec<i64> = evidence.ranked.iter().map(|id| id.0).collect();
        assert_eq!(&ranked[..first.len()], first, "{question}: {ranked:?}");
    }

    #[test]
    fn evidence_scales_with_rarity_and_prefers_entities_together() {
        let vex = (VEX, "Vex'ahlia");
        let saundor = (SAUNDOR, "Saundor");
        let baika = (BAIKA, "Baika");
        // A PC in 9 of 10 sessions: weight 0.1, a tie-breaker; most central first (odd
        // sessions name her four times).
        check("What did Vex call the horse she bought?", &[vex], 0.1, &[1, 3, 5, 7, 9, 2]);
        check("¿Cómo llamó Vex al caballo que compró?", &[vex], 0.1, &[1, 3, 5, 7, 9, 2]);
        // A rare NPC: weight 0.8.
        check("Who is Saundor?", &[saundor], 0.8, &[10, 5]);
        check("¿Quién es Saundor?", &[saundor], 0.8, &[10, 5]);
        // Two entities: the sessions where they meet first, weighted by how rare meeting is.
        check("What did Vex and Baika trade?", &[vex, baika], 0.8, &[3, 7]);
        check("¿Qué se dijeron Baika y Vex?", &[baika, vex], 0.8, &[3, 7]);
        check("When did Vex meet Saundor?", &[vex, saundor], 0.9, &[5, 10]);
        // Two entities that never meet: the rarer one's share decides the weight.
        check("¿Conoce Saundor a Baika?", &[saundor, baika], 0.8, &[10]);
    }

    #[test]
    fn an_arc_question_gets_every_session_at_full_weight() {
        let vex = (VEX, "Vex'ahlia");
        for question in [
            "What has Vex done in the campaign?",
            "What happened to Vex?",
            "¿Qué ha hecho Vex en la campaña?",
            "¿Qué pasó con Vex a lo largo de la historia?",
            "¿Qué papel ha tenido Vex en la historia, de principio a fin?",
            "What role has Vex played from start to finish?",
        ] {
            let entities = vec![(vex.0, vex.1.to_string())];
            assert!(is_arc_question(question), "{question}");
            let evidence = rank_by_entities(&campaign(), &entities, 10, true, 4);
            assert_eq!(evidence.weight, 1.0);
            // One fragment per session before session 8's second fragment, past `depth`.
            let ranked: Vec<i64> = evidence.ranked.iter().map(|id| id.0).collect();
            assert_eq!(ranked, vec![1, 3, 5, 7, 9, 2, 4, 6, 8, 18], "{question}");
            assert_eq!(evidence.entities[0].weight, 1.0);
        }
        for question in
            ["What did Vex buy in Vasselheim?", "¿Qué compró Vex en el mercado?", "¿Qué hizo Vex en la sesión 3?"]
        {
            assert!(!is_arc_question(question), "{question}");
        }
    }

    #[test]
    fn shares_are_reported_per_entity() {
        let entities = vec![(VEX, "Vex'ahlia".to_string()), (SAUNDOR, "Saundor".to_string())];
        let evidence = rank_by_entities(&campaign(), &entities, 10, false, 16);
        let shares: Vec<(&str, usize, f64)> =
            evidence.entities.iter().map(|e| (e.name.as_str(), e.n_sessions, e.weight)).collect();
        assert_eq!(shares.len(), 2);
        assert_eq!((shares[0].0, shares[0].1), ("Vex'ahlia", 9));
        assert!((shares[0].2 - 0.1).abs() < 1e-9 && (shares[1].2 - 0.8).abs() < 1e-9, "{shares:?}");
        assert_eq!(evidence.joint_sessions, Some(1));
        // In every session, the floor; no sessions at all (world documents only), full weight.
        let everywhere = rank_by_entities(&campaign(), &entities[..1], 9, false, 16);
        assert_eq!(everywhere.weight, ENTITY_MIN_WEIGHT);
        assert_eq!(rank_by_entities(&[], &entities[..1], 0, false, 16).weight, 1.0);
    }
}
