//! Campaign time for the table: an entity's timeline (`oraculo timeline`,
//! `/cronologia`) and a session's recap to open the night (`oraculo recap`, `/resumen`).
//!
//! Both read only what the audience may read: sessions and mentions through the visibility
//! filter in their queries, texts through [`Store::fragments_checked`](crate::index::Store::fragments_checked).
//! The recap is an answer like any other, through [`Oracle::answer`]: the session's own
//! fragments are the pool it is given ([`AnswerOptions::prepared_as`]), and it is written from
//! them as any answer is (structured, free, or the notes' own sentences when no model writes),
//! so its citations are checked the same way.

use std::collections::HashMap;

use serde::Serialize;

use crate::answer::AnswerMode;
use crate::answer::passages::{EXCERPT_MAX_CHARS, recap_excerpts, render_extractive, sentences};
use crate::corpus::{FragmentId, Label, LabelLanguage, SessionNumber};
use crate::index::IndexError;
use crate::llm::chat::TokenSink;
use crate::oracle::{Answer, AnswerEvent, AnswerOptions, AskError, AskRequest, Oracle, Pipeline, Preparation};
use crate::prompt::ANNOTATE_PROMPT_VERSION;
use crate::retrieve::time::{SessionFragments, TimeDiagnostics, TimeReference, entity_session_fragments};
use crate::retrieve::{Audience, Candidate, CompendiumIndex, PathRanks, SearchResult, SearchTimings};
use crate::text::shorten;

/// Names offered when the one asked for is not in the compendium.
const MAX_SUGGESTIONS: usize = 5;

/// What stops a timeline or a recap; each reads as a message the asker can act on.
#[derive(Debug, thiserror::Error)]
pub enum TimeError {
    #[error(transparent)]
    Ask(#[from] AskError),
    #[error("the index cannot be read: {0}")]
    Index(#[from] IndexError),
    #[error("no one and nothing called «{name}» in the compendium{}", suggest(.suggestions))]
    UnknownEntity { name: String, suggestions: Vec<String> },
    #[error(
        "this campaign has no numbered sessions (only character sheets and world documents): there is no timeline or recap to make"
    )]
    NoSessions,
    #[error("session {asked} is not in the notes: the last session there is {highest}")]
    MissingSession { asked: u32, highest: SessionNumber },
}

fn suggest(suggestions: &[String]) -> String {
    if suggestions.is_empty() { String::new() } else { format!(" (did you mean: {}?)", suggestions.join(", ")) }
}

/// Where a timeline line comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LineSource {
    /// The fragment's cached annotation.
    Annotation,
    /// The first sentence of the session that mentions the entity.
    Sentence,
}

/// One session where the entity appears.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineEntry {
    pub session: SessionNumber,
    /// The label the line cites (`Sesión 12`).
    pub label: Label,
    pub fragment_id: FragmentId,
    pub line: String,
    pub source: LineSource,
    pub first: bool,
    pub last: bool,
}

/// An entity's sessions, in story order. `oraculo timeline --json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    pub entity: String,
    pub kind: String,
    pub aliases: Vec<String>,
    pub entries: Vec<TimelineEntry>,
    /// Sheets and world documents that mention it too (no place in time).
    pub other_labels: Vec<String>,
    /// The highest session the asker may read.
    pub highest_session: Option<SessionNumber>,
}

/// A recap of one session.
#[derive(Debug, Clone, Serialize)]
pub struct Recap {
    pub session: SessionNumber,
    /// Whether the session was the last one (asked for by default).
    pub is_last: bool,
    pub answer: Answer,
}

/// Every session where the entity named `name` (name or alias, accents and case ignored)
/// appears, in order, each with one cited line: its annotation when cached, otherwise the
/// sentence that mentions it.
#[tracing::instrument(name = "timeline", skip_all, fields(?audience))]
pub async fn timeline(oracle: &Oracle, name: &str, audience: Audience) -> Result<Timeline, TimeError> {
    let started = std::time::Instant::now();
    let index = oracle.notes().open_index().await?;
    let visibility = audience.visibility_filter();
    let sessions = SessionFragments::load(&index.store, visibility)?;
    if sessions.sessions.is_empty() {
        return Err(TimeError::NoSessions);
    }
    let compendium = oracle.notes().compendium(&index, audience)?;
    let position = compendium.compendium.find_typed(name.trim()).or_else(|| {
        let (id, _) = compendium.detect(name).into_iter().next()?;
        compendium.entity_ids.iter().position(|known| *known == id)
    });
    let Some(position) = position else {
        return Err(TimeError::UnknownEntity {
            name: name.trim().to_string(),
            suggestions: suggestions(&compendium, name),
        });
    };
    let (Some(entity), Some(&entity_id)) =
        (compendium.compendium.entities.get(position), compendium.entity_ids.get(position))
    else {
        return Err(TimeError::UnknownEntity { name: name.trim().to_string(), suggestions: Vec::new() });
    };
    let mentions = entity_session_fragments(&index.store, entity_id, visibility)?;
    // One fragment per session: the first part that mentions it.
    let mut per_session: Vec<(FragmentId, SessionNumber, Label, String)> = Vec::new();
    for mention in mentions {
        if per_session.last().is_none_or(|last| last.1 != mention.1) {
            per_session.push(mention);
        }
    }
    let wanted: Vec<(FragmentId, &str)> = per_session.iter().map(|(id, _, _, hash)| (*id, hash.as_str())).collect();
    let texts: HashMap<FragmentId, String> = index
        .store
        .fragments_checked(&wanted, visibility)?
        .into_iter()
        .map(|stored| (stored.id, stored.fragment.text))
        .collect();
    let hashes: Vec<&str> = per_session.iter().map(|(_, _, _, hash)| hash.as_str()).collect();
    let annotations = index.store.annotations(&hashes, oracle.chat().id(), ANNOTATE_PROMPT_VERSION)?;
    let mut entries: Vec<TimelineEntry> = Vec::new();
    for (id, session, label, hash) in &per_session {
        // Fetched only while it still holds what was listed, for this audience.
        let Some(text) = texts.get(id) else { continue };
        let (line, source) = match annotations.get(hash).map(|a| a.trim()).filter(|a| !a.is_empty()) {
            Some(annotation) => (shorten(annotation, EXCERPT_MAX_CHARS), LineSource::Annotation),
            None => (mentioning_sentence(&compendium, entity_id, text), LineSource::Sentence),
        };
        entries.push(TimelineEntry {
            session: *session,
            label: label.clone(),
            fragment_id: *id,
            line,
            source,
            first: false,
            last: false,
        });
    }
    if let Some(first) = entries.first_mut() {
        first.first = true;
    }
    if let Some(last) = entries.last_mut() {
        last.last = true;
    }
    let other_labels = index
        .store
        .compendium_listing(visibility)?
        .into_iter()
        .find(|listing| listing.name == entity.name)
        .map(|listing| listing.other_labels)
        .unwrap_or_default();
    tracing::info!(
        entity = %entity.name,
        n_sessions = entries.len(),
        ms = started.elapsed().as_secs_f64() * 1000.0,
        "timeline"
    );
    Ok(Timeline {
        entity: entity.name.clone(),
        kind: entity.kind.as_str().to_string(),
        aliases: entity.aliases.clone(),
        entries,
        other_labels,
        highest_session: sessions.sessions.last().copied(),
    })
}

fn suggestions(compendium: &CompendiumIndex, name: &str) -> Vec<String> {
    let mut found = compendium.names_matching(name, MAX_SUGGESTIONS);
    if found.is_empty() {
        // The first word typed, for «Tejedora del puerto» → «La Tejedora».
        if let Some(word) = name.split_whitespace().max_by_key(|word| word.chars().count()) {
            found = compendium.names_matching(word, MAX_SUGGESTIONS);
        }
    }
    found
}

/// The first sentence of `text` that names the entity (whole words, any alias), else its
/// first sentence.
fn mentioning_sentence(compendium: &CompendiumIndex, entity_id: i64, text: &str) -> String {
    let all = sentences(text);
    let found = all
        .iter()
        .find(|sentence| compendium.detect(sentence).iter().any(|(id, _)| *id == entity_id))
        .or_else(|| all.first())
        .cloned()
        .unwrap_or_default();
    shorten(&found, EXCERPT_MAX_CHARS)
}

/// A cited recap of session `asked` (default: the last one the audience may read), for the
/// start of a game night, in `language`. `on_token` receives it as it streams.
#[tracing::instrument(name = "recap", skip_all, fields(?audience, asked))]
pub async fn recap(
    oracle: &Oracle,
    asked: Option<u32>,
    audience: Audience,
    language: LabelLanguage,
    on_token: Option<TokenSink<'_>>,
) -> Result<Recap, TimeError> {
    let index = oracle.notes().open_index().await?;
    let visibility = audience.visibility_filter();
    let sessions = SessionFragments::load(&index.store, visibility)?;
    let Some(&highest) = sessions.sessions.last() else {
        return Err(TimeError::NoSessions);
    };
    let session = match asked {
        None => highest,
        Some(number) if sessions.fragments.contains_key(&SessionNumber(number)) => SessionNumber(number),
        Some(number) => return Err(TimeError::MissingSession { asked: number, highest }),
    };
    let ids = sessions.fragments.get(&session).cloned().unwrap_or_default();
    let candidates: Vec<Candidate> = index
        .store
        .fragment_heads(&ids)?
        .into_iter()
        .map(|head| Candidate::from_head(head, PathRanks { time: Some(1), ..PathRanks::default() }, 0.0, None))
        .collect();
    let question = match language {
        LabelLanguage::Es => {
            format!("Resume la sesión {session}: qué pasó, en orden, para empezar la partida de esta noche.")
        }
        LabelLanguage::En => format!("Recap session {session}: what happened, in order, to open tonight's game."),
    };
    let search = SearchResult {
        question: question.clone(),
        search_query: question.clone(),
        followup_expanded: false,
        entities: Vec::new(),
        candidates,
        timings: SearchTimings::default(),
        missing_paths: Vec::new(),
        // No search ran: the recap's fragments are the session's own.
        diagnostics: crate::retrieve::SearchDiagnostics {
            followup: crate::retrieve::followup::FollowupDecision {
                expanded: false,
                reason: "a recap reads its session directly".to_string(),
            },
            entity_path: None,
            path_lengths: crate::retrieve::PathLengths::default(),
            bm25_terms: crate::retrieve::Bm25Terms::default(),
            lists: Vec::new(),
        },
        time: TimeDiagnostics {
            references: vec![TimeReference::Session { number: session.0 }],
            highest_session: Some(highest),
            sessions: vec![session],
            named_sessions: vec![session],
            ..TimeDiagnostics::default()
        },
        dense_hits: Vec::new(),
    };
    let request = AskRequest { question: &question, history: &[], audience };
    // Through the one entry, the session's fragments as the pool, in fusion order (they were
    // not searched: the rerank has nothing to choose between).
    let preparation = Preparation { pipeline: Pipeline { rerank: false, ..Pipeline::default() }, pool: Some(search) };
    let prepared = std::sync::Mutex::new(None);
    let on_event = |event: AnswerEvent<'_>| match event {
        AnswerEvent::Prepared(made) => {
            if let Ok(mut prepared) = prepared.lock() {
                *prepared = Some(made.clone());
            }
        }
        AnswerEvent::Text(piece) => {
            if let Some(on_token) = on_token {
                on_token(piece);
            }
        }
        AnswerEvent::Stage(_) | AnswerEvent::Instant(_) => {}
    };
    let settled = oracle.answer(&request, AnswerOptions::new(&on_event).prepared_as(preparation)).await?;
    // The model's own recap, as it wrote it (nothing of the notes added under it); the notes'
    // sentences where no model wrote, or it failed.
    let mut answer = settled.model.unwrap_or(settled.answer);
    // Every answer that settles was prepared first; none read leaves nothing to tell.
    let chosen = prepared.into_inner().ok().flatten().map(|prepared| prepared.chosen).unwrap_or_default();
    if answer.mode == AnswerMode::Extractive {
        // No model answered: the session told from beginning to end in its own sentences.
        let texts = index.store.fragments_checked(
            &chosen.iter().map(|c| (c.fragment_id, c.content_hash.as_str())).collect::<Vec<_>>(),
            visibility,
        )?;
        let fragments: Vec<(&str, &str)> =
            texts.iter().map(|stored| (stored.fragment.label.as_str(), stored.fragment.text.as_str())).collect();
        let excerpts = recap_excerpts(&fragments);
        if !excerpts.is_empty() {
            answer.text = render_extractive(&excerpts, language, answer.fallback.is_some());
        }
    }
    Ok(Recap { session, is_last: session == highest, answer })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_entity_messages_suggest_names() {
        let error = TimeError::UnknownEntity { name: "Tejedor".into(), suggestions: vec!["La Tejedora".into()] };
        assert_eq!(
            error.to_string(),
            "no one and nothing called «Tejedor» in the compendium (did you mean: La Tejedora?)"
        );
        let error = TimeError::MissingSession { asked: 400, highest: SessionNumber(40) };
        assert_eq!(error.to_string(), "session 400 is not in the notes: the last session there is 40");
    }
}
