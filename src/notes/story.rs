//! An arc question's story: the sentences of every session where the entity appears that
//! name it, each scored by how well it answers the question, for the context's first block
//! (`answer::arc`). The plan then takes as many lines as its budget allows.

use crate::corpus::FragmentId;
use std::collections::HashMap;

use tracing::Instrument;

use crate::answer::arc::{ArcFragment, ArcSentence, arc_sentences};
use crate::answer::terms::QueryTerms;
use crate::index::Index;
use crate::lexicon::changes_told_of;
use crate::llm::EmbedRole;
use crate::retrieve::time::entity_session_fragments;
use crate::retrieve::{Audience, CompendiumIndex, SearchResult};

use super::{AskError, Notes};
use crate::llm::Embedder;

/// Sentences embedded at most to score one story: a recurring NPC's eight sessions hold
/// about forty that name them; a character in every session, hundreds, of which each
/// session's best by the question's words are kept. ~1 s of e5-small on two cores.
const ARC_MAX_EMBEDDED: usize = 64;
/// What the embedder's similarity to the question adds to a sentence's score, at most (the
/// nearest sentence of the story gets all of it, the farthest none): as much as three words
/// of the question, since «¿qué pasó con X?» has no word but the name to go by.
const ARC_SIMILARITY_WEIGHT: f64 = 3.0;

/// What telling a change in the entity's story adds to a sentence's score
/// (`lexicon::changes_told_of`: near a mention of it, it vanished, came back, died…, told
/// for the first time in its story: [`first_tellings`]): more than the embedder's
/// similarity can, since «¿qué pasó con X?» asks for exactly that and e5-small ranks the
/// sentence where X opens a ball beside the one where X vanishes.
const ARC_CHANGE_WEIGHT: f64 = 4.0;

/// What the story block of an arc question is chosen from.
#[derive(Debug, Clone)]
pub struct ArcStory {
    /// The entity, as the compendium names it, and its other names.
    pub entity: String,
    pub aliases: Vec<String>,
    pub sentences: Vec<ArcSentence>,
    /// One per sentence: the question's words it holds, and its similarity to the question.
    pub scores: Vec<f64>,
}

impl Notes {
    /// The story of the entity an arc question asks about («¿qué pasó con el archiduque?»):
    /// `None` when the question is not about an entity's whole story. Only sessions the
    /// audience may read, their texts fetched through the checked read.
    pub async fn arc_story(
        &self,
        index: &Index,
        compendium: &CompendiumIndex,
        question: &str,
        search: &SearchResult,
        audience: Audience,
    ) -> Result<Option<ArcStory>, AskError> {
        let is_arc = search.diagnostics.entity_path.as_ref().is_some_and(|evidence| evidence.arc);
        let Some(entity) = search.entities.first().filter(|_| is_arc) else { return Ok(None) };
        let Some(position) = compendium.compendium.find(&entity.name) else { return Ok(None) };
        let Some(&entity_id) = compendium.entity_ids.get(position) else { return Ok(None) };
        let span = tracing::info_span!("answer.arc", entity = %entity.name);
        async {
            let visibility = audience.visibility_filter();
            let mentions = entity_session_fragments(&index.store, entity_id, visibility)?;
            let wanted: Vec<(FragmentId, &str)> =
                mentions.iter().map(|(id, _, _, hash)| (*id, hash.as_str())).collect();
            let texts: HashMap<FragmentId, (String, String)> = index
                .store
                .fragments_checked(&wanted, visibility)?
                .into_iter()
                .map(|stored| (stored.id, (stored.fragment.text, stored.fragment.source_path)))
                .collect();
            let fragments: Vec<ArcFragment<'_>> = mentions
                .iter()
                .filter_map(|(id, session, label, _)| {
                    let (text, source_path) = texts.get(id)?;
                    Some(ArcFragment { session: *session, label, fragment_id: *id, source_path, text })
                })
                .collect();
            // Every sentence names the entity: its names say nothing of which one answers.
            let known = &compendium.compendium.entities[position];
            let names: Vec<&str> =
                std::iter::once(known.name.as_str()).chain(known.aliases.iter().map(String::as_str)).collect();
            let terms = QueryTerms::new(question, &[]).without_words_of(&names);
            let names_entity =
                |sentence: &str| compendium.with_entity_written_as(sentence, entity_id, &known.name).is_some();
            let mut sentences = arc_sentences(&fragments, &names_entity);
            let changes: Vec<Vec<&str>> = sentences
                .iter()
                .map(|sentence| changes_told_of(&sentence.text, &compendium.mentions_of(&sentence.text, entity_id)))
                .collect();
            let news = first_tellings(&sentences, &changes);
            let mut scores: Vec<f64> = sentences
                .iter()
                .zip(&news)
                .map(|(sentence, &news)| {
                    f64::from(terms.score(&sentence.text)) + if news { ARC_CHANGE_WEIGHT } else { 0.0 }
                })
                .collect();
            keep_the_best_of_each_session(&mut sentences, &mut scores, ARC_MAX_EMBEDDED);
            // Compared by what they say of the entity, under one name: «el archiduque» in the
            // question must not favour the sentences that call him so over «el Heraldo».
            let same_name = |text: &str| {
                compendium.with_entity_written_as(text, entity_id, &known.name).unwrap_or_else(|| text.to_string())
            };
            let texts: Vec<String> = sentences.iter().map(|sentence| same_name(&sentence.text)).collect();
            add_similarity(self.embedder().as_ref(), &same_name(question), &texts, &sentences, &mut scores).await;
            tracing::debug!(n_sessions = fragments.len(), n_sentences = sentences.len(), "story gathered");
            Ok(Some(ArcStory { entity: known.name.clone(), aliases: known.aliases.clone(), sentences, scores }))
        }
        .instrument(span)
        .await
    }
}

/// Adds each sentence's similarity to the question, scaled over the story from 0 (the
/// farthest) to [`ARC_SIMILARITY_WEIGHT`] (the nearest): a ranking within one question,
/// comparable for any embedder. An embedding failure leaves the words' scores alone.
/// `texts`: the sentences as they are compared (one per sentence).
async fn add_similarity(
    embedder: &dyn Embedder,
    question: &str,
    texts: &[String],
    sentences: &[ArcSentence],
    scores: &mut [f64],
) {
    if sentences.is_empty() {
        return;
    }
    let query = embedder.embed(&[question.to_string()], EmbedRole::Query).await;
    let passages = embedder.embed(texts, EmbedRole::Passage).await;
    let (Ok(query), Ok(passages)) = (query, passages) else {
        tracing::warn!("the story's sentences could not be embedded; they are scored by the question's words");
        return;
    };
    let (Some(query), true) = (query.first(), passages.len() == sentences.len()) else { return };
    let similarities: Vec<f64> = passages.iter().map(|vector| f64::from(crate::llm::cosine(query, vector))).collect();
    let (low, high) = similarities.iter().fold((f64::MAX, f64::MIN), |(low, high), &s| (low.min(s), high.max(s)));
    let spread = high - low;
    for ((score, similarity), (sentence, text)) in scores.iter_mut().zip(&similarities).zip(sentences.iter().zip(texts))
    {
        let scaled = if spread > 0.0 { (similarity - low) / spread } else { 0.0 };
        tracing::trace!(label = %sentence.label, words = *score, similarity, sentence = %text, "story sentence");
        *score += ARC_SIMILARITY_WEIGHT * scaled;
    }
}

/// Per sentence (in story order), whether it tells a change of the entity that no earlier
/// session's sentence told: the news of its session. «Ha pasado un año desde que el
/// archiduque desapareció» in session 30 recalls session 9's disappearance, and the session's
/// line should say what changed then (his skin turned to salt), not what every later session
/// remembers. Sentences of one session tell their changes together.
fn first_tellings(sentences: &[ArcSentence], changes: &[Vec<&'static str>]) -> Vec<bool> {
    let mut told_before: Vec<&'static str> = Vec::new();
    let mut told_this_session: Vec<&'static str> = Vec::new();
    let mut session = None;
    let mut news = Vec::with_capacity(sentences.len());
    for (sentence, changes) in sentences.iter().zip(changes) {
        if session != Some(sentence.session) {
            told_before.append(&mut told_this_session);
            session = Some(sentence.session);
        }
        news.push(changes.iter().any(|stem| !told_before.contains(stem)));
        told_this_session.extend(changes.iter().copied());
    }
    news
}

/// At most `limit` sentences, each session keeping its best by score (ties: the earlier)
/// in turn, so that every session stays in the story; the order of the rest is kept.
fn keep_the_best_of_each_session(sentences: &mut Vec<ArcSentence>, scores: &mut Vec<f64>, limit: usize) {
    if sentences.len() <= limit {
        return;
    }
    let mut by_session: Vec<Vec<usize>> = Vec::new();
    for (idx, sentence) in sentences.iter().enumerate() {
        match by_session.last_mut() {
            Some(group) if sentences[group[0]].session == sentence.session => group.push(idx),
            _ => by_session.push(vec![idx]),
        }
    }
    for group in &mut by_session {
        group.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    }
    let mut kept: Vec<usize> = Vec::new();
    for round in 0.. {
        let before = kept.len();
        for group in &by_session {
            if kept.len() == limit {
                break;
            }
            kept.extend(group.get(round));
        }
        if kept.len() == limit || kept.len() == before {
            break;
        }
    }
    kept.sort_unstable();
    *sentences = kept.iter().map(|&idx| sentences[idx].clone()).collect();
    *scores = kept.iter().map(|&idx| scores[idx]).collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::{Label, SessionNumber};

    #[test]
    fn a_long_story_keeps_every_session_and_each_ones_best_sentences() {
        // Three sessions of 4, 1 and 3 sentences; room for five.
        let sessions = [1, 1, 1, 1, 2, 3, 3, 3];
        let mut sentences: Vec<ArcSentence> = sessions
            .iter()
            .enumerate()
            .map(|(position, &session)| ArcSentence {
                session: SessionNumber(session),
                label: Label::new(format!("Sesión {session}")),
                fragment_id: FragmentId(i64::from(session)),
                source_path: format!("{session}.md"),
                text: format!("frase {position}"),
                position,
            })
            .collect();
        let mut scores = vec![0.0, 5.0, 1.0, 0.0, 0.0, 2.0, 2.0, 9.0];
        keep_the_best_of_each_session(&mut sentences, &mut scores, 5);
        let kept: Vec<&str> = sentences.iter().map(|sentence| sentence.text.as_str()).collect();
        // Round one: the best of each (1, 4, 7); round two: the next of sessions 1 and 3 (2, 5).
        assert_eq!(kept, ["frase 1", "frase 2", "frase 4", "frase 5", "frase 7"]);
        assert_eq!(scores, [5.0, 1.0, 0.0, 2.0, 9.0]);
    }

    #[test]
    fn a_change_told_in_an_earlier_session_is_no_news_and_one_told_twice_in_its_session_is() {
        let told = |session: u32, text: &str| ArcSentence {
            session: SessionNumber(session),
            label: Label::new(format!("Sesión {session}")),
            fragment_id: FragmentId(i64::from(session)),
            source_path: format!("{session}.md"),
            text: text.to_string(),
            position: 0,
        };
        let story = [
            told(9, "Leandro ha desaparecido."),
            told(9, "Nadie sabe cómo Leandro desapareció."),
            told(30, "Un año desde que Leandro desapareció."),
            told(30, "La piel de Leandro se había cristalizado en sal."),
            told(31, "Leandro destierra a su hermana."),
            told(39, "Leandro desaparece otra vez y se ha cristalizado entero."),
        ];
        let name = "Leandro";
        let changes: Vec<Vec<&'static str>> = story
            .iter()
            .map(|sentence| {
                let at = sentence.text.find(name).unwrap();
                crate::lexicon::changes_told_of(&sentence.text, &[(at, at + name.len())])
            })
            .collect();
        assert_eq!(changes[2], ["desaparec"], "a recalled disappearance is still told");
        assert_eq!(first_tellings(&story, &changes), [true, true, false, true, true, false]);
    }
}
