//! The instant answer: the notes' own sentences, each cited, shown the moment the search and
//! the context are done, while the model writes its answer; and what is shown once the
//! model is done: its answer, or the instant one with why the model's is not there.
//!
//! The fragments are chosen without the chat model (the fusion order, the sessions the
//! question names first), so a question waiting for the model gets its instant answer at
//! once; the rerank, a call to the chat model, runs when the model is free
//! ([`Oracle::choose_with_model`]), and the model answers from what it chose.

use std::time::Instant;

use serde::Serialize;
use tracing::Instrument;

use crate::answer::AnswerMode;
use crate::corpus::LabelLanguage;
use crate::retrieve::PathSet;

use super::generate::MadeAnswer;
use super::{Answer, AskError, AskRequest, Oracle, Pipeline, Prepared, check_question};

/// Why the instant answer stays where the model's answer would have gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InstantKept {
    /// The model failed: a server down, a reply that never fitted its schema.
    ModelFailed,
    /// The model had not written a checked sentence by its deadline.
    ModelOutOfTime,
    /// The model's answer cites no note: it found nothing it could say from them.
    ModelAbstained,
}

/// What is shown once the model is done.
#[derive(Debug, Clone)]
pub struct Settled {
    /// The model's answer, or the instant one when `instant_kept` says why.
    pub answer: Answer,
    pub instant_kept: Option<InstantKept>,
}

impl Oracle {
    /// Whether the notes' own sentences are shown before the model's answer
    /// (`chat.instant_answer`).
    pub fn instant_enabled(&self) -> bool {
        self.settings.instant
    }

    /// Everything before the model, with no call to the chat model: the search, the
    /// fragments in fusion order (the sessions the question names first) and the context.
    /// Nothing here waits for a generation that is running.
    pub async fn prepare_without_model(&self, request: &AskRequest<'_>) -> Result<Prepared, AskError> {
        let question = check_question(request.question)?;
        let index = self.open_index().await?;
        let compendium = self.compendium(&index)?;
        let pipeline = Pipeline { paths: PathSet::ALL, rerank: false };
        self.prepare_checked(&index, &compendium, question, request, pipeline).await
    }

    /// The fragments chosen again by the rerank over the same search (one call to the chat
    /// model, so run with the model's turn); `prepared` as it is when the rerank is off.
    pub async fn choose_with_model(&self, request: &AskRequest<'_>, prepared: Prepared) -> Result<Prepared, AskError> {
        if !Pipeline::default().rerank {
            return Ok(prepared);
        }
        let question = check_question(request.question)?;
        let index = self.open_index().await?;
        let compendium = self.compendium(&index)?;
        async move {
            let choice = self.choose(&index, &prepared.search, true).await?;
            // The rerank kept the fragments already prepared (always so when the notes have no
            // annotations), and each still holds the text searched and may be shown to this
            // audience (an ingest may have run while the question waited): the context, story
            // and plan stand; only the decision is new.
            let same_fragments = choice.chosen.len() == prepared.chosen.len()
                && choice.chosen.iter().zip(&prepared.chosen).all(|(a, b)| a.fragment_id == b.fragment_id);
            let still_as_searched = || -> Result<bool, AskError> {
                let wanted: Vec<(i64, &str)> =
                    prepared.chosen.iter().map(|c| (c.fragment_id, c.content_hash.as_str())).collect();
                let checked = index.store.fragments_checked(&wanted, request.audience.visibility_filter())?;
                Ok(checked.len() == wanted.len())
            };
            if same_fragments && still_as_searched()? {
                return Ok(Prepared {
                    rerank: choice.rerank,
                    rerank_ms: choice.rerank_ms,
                    rerank_prompt_tokens: choice.rerank_prompt_tokens,
                    ..prepared
                });
            }
            let started = prepared.started;
            self.prepare_from_choice(&index, &compendium, question, request, prepared.search, choice, started).await
        }
        .instrument(tracing::info_span!("answer.choose_with_model"))
        .await
    }

    /// The notes' own sentences for what was prepared, cited and checked like any answer;
    /// `None` when the chosen notes hold no sentence for the question, or when the
    /// answer needs no model at all (only sessions that are not there were asked about).
    pub fn instant_answer(&self, prepared: &Prepared) -> Option<Answer> {
        let started = Instant::now();
        if prepared.search.time.answers_alone() || self.extractive_excerpts(prepared).is_empty() {
            return None;
        }
        let mut made: MadeAnswer = self.extract(prepared, None);
        let english = crate::lexicon::language_of(&prepared.question) == LabelLanguage::En;
        if let Some(notice) = prepared.search.time.notice(english) {
            made.text = format!("{notice}\n\n{}", made.text);
        }
        let answer = self.answer_from(prepared, made, started.elapsed().as_secs_f64() * 1000.0);
        tracing::debug!(
            n_citations = answer.citations.len(),
            ms = started.elapsed().as_secs_f64() * 1000.0,
            "instant answer made"
        );
        Some(answer)
    }
}

/// The language `question` is written in: its answer's, and the instant answer's.
pub fn question_language(question: &str) -> LabelLanguage {
    crate::lexicon::language_of(question)
}

/// What stays once the model is done: the model's answer, unless it failed, ran out of time
/// or cited nothing while the instant answer had the notes' sentences; then the instant
/// answer, with why.
pub fn settle(instant: Option<Answer>, model: Answer) -> Settled {
    let Some(instant) = instant else {
        return Settled { answer: model, instant_kept: None };
    };
    let kept = if model.out_of_time {
        Some(InstantKept::ModelOutOfTime)
    } else if model.fallback.is_some() {
        Some(InstantKept::ModelFailed)
    } else if model.mode != AnswerMode::Extractive && !model.citations.iter().any(|citation| citation.valid) {
        Some(InstantKept::ModelAbstained)
    } else {
        None
    };
    match kept {
        Some(why) => {
            tracing::info!(?why, "the model's answer is not used; the notes' own sentences stay");
            Settled { answer: instant, instant_kept: Some(why) }
        }
        None => Settled { answer: model, instant_kept: None },
    }
}

impl Settled {
    /// Whether this exchange becomes a turn of the conversation: only the model's own answer
    /// (a kept instant answer is the notes' words, not an answer to follow up on).
    pub fn joins_history(&self) -> bool {
        self.instant_kept.is_none() && self.answer.joins_history()
    }
}

impl Oracle {
    /// [`Oracle::ask_in_stages`] with the notes' own sentences first: `on_instant` gets them
    /// as soon as the search and the context are done, then the model answers (the rerank
    /// first, when it runs). The instant answer and the model's, for [`settle`] to decide
    /// what stays.
    pub async fn ask_instant_first(
        &self,
        request: &AskRequest<'_>,
        on_stage: &(dyn Fn(super::Stage) + Send + Sync),
        on_instant: &(dyn Fn(&Answer) + Send + Sync),
        on_token: Option<crate::llm::chat::TokenSink<'_>>,
    ) -> Result<(Option<Answer>, Answer), AskError> {
        let span = tracing::info_span!("answer", audience = ?request.audience, instant = true);
        async move {
            on_stage(super::Stage::Searching);
            let prepared = self.prepare_without_model(request).await?;
            let instant = self.instant_answer(&prepared);
            if let Some(instant) = &instant {
                on_instant(instant);
            }
            let answer = self.answer_prepared(request, prepared, on_stage, on_token).await?;
            Ok((instant, answer))
        }
        .instrument(span)
        .await
    }

    /// The model's answer to a question prepared without it: the rerank (when it runs), then
    /// the generation.
    pub async fn answer_prepared(
        &self,
        request: &AskRequest<'_>,
        prepared: Prepared,
        on_stage: &(dyn Fn(super::Stage) + Send + Sync),
        on_token: Option<crate::llm::chat::TokenSink<'_>>,
    ) -> Result<Answer, AskError> {
        let prepared = self.choose_with_model(request, prepared).await?;
        on_stage(super::Stage::Writing { notes: prepared.context.shown_labels.len() });
        self.generate(&prepared, on_token).await
    }
}
