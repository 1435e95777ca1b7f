//! The one way to answer: a question goes in ([`AskRequest`]: what is asked, for whom, after
//! which turns); events come out while it is answered ([`AnswerEvent`]: the stages before any
//! text, what was prepared, the notes' own sentences, the model's text as it streams); the
//! settled answer ([`Settled`]) ends it. The CLI prints it, the bot posts it, the evaluation
//! scores it and the MCP server returns it: none of them sequences the stages or decides what
//! stays.
//!
//! A front end that rations the chat model (the bot's queue) passes a [`ModelTurn`]: the
//! question is searched and its instant answer made at once, and the model's work (the rerank,
//! then the answer) starts when the turn comes.

use std::future::Future;
use std::pin::Pin;

use tracing::Instrument;

use crate::answer::AnswerStyle;
use crate::llm::chat::TokenSink;

use super::instant::settle;
use super::{Answer, AskError, AskRequest, Oracle, Preparation, Prepared, Settled, Stage, check_question};

/// What a caller sees of a question on its way, in this order: `Stage(Searching)`;
/// `Prepared` (the fusion's choice); with `chat.instant_answer`, `Instant` (the notes' own
/// sentences, or `None` when the chosen notes hold none); the model's turn; `Prepared` again
/// once the rerank has chosen; `Stage(Writing)`; `Text` as the model writes.
#[derive(Debug, Clone, Copy)]
pub enum AnswerEvent<'e> {
    /// Where the answer is before any text exists (on a CPU the model reads for a minute
    /// before it writes a word: the reader sees why).
    Stage(Stage),
    /// What the model will be shown: the pool, the choice, the context (the evaluation scores
    /// it; the front ends have no use for it).
    Prepared(&'e Prepared),
    /// The notes' own sentences, cited, before the model's turn; `None`: the notes chosen hold
    /// none for this question, and only the model's answer will come.
    Instant(Option<&'e Answer>),
    /// The next piece of the model's answer.
    Text(&'e str),
}

/// Where the events go.
pub type AnswerEvents<'e> = &'e (dyn Fn(AnswerEvent<'_>) + Send + Sync);

/// What a question waits for before the chat model works for it (the bot's queue slot).
/// Without one the model's work follows the search at once.
pub type ModelTurn<'t> = Pin<Box<dyn Future<Output = ()> + 't>>;

/// Events nobody listens to.
pub fn no_events(_: AnswerEvent<'_>) {}

/// Who writes the answer from what was prepared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Writer {
    /// As the settings say: the notes' own sentences on a CPU (`chat.answer_style = "quotes"`),
    /// the model's prose where it is configured.
    #[default]
    AsConfigured,
    /// The notes' own sentences ranked by their words, no model asked and nothing embedded:
    /// what the evaluation's retrieval variants answer with, since they score what was
    /// prepared, not what was written.
    NotesAlone,
}

/// How one question is answered, besides what is asked: where its events go, what the
/// model's work waits for, how the notes are read and who writes. A player's question is
/// answered with [`AnswerOptions::new`]; the evaluation varies the reading and records what
/// was prepared from the events, and a recap gives its session as the pool.
pub struct AnswerOptions<'a> {
    pub events: AnswerEvents<'a>,
    /// What the model's work waits for (the bot's queue slot); `None`: it follows the search.
    pub model_turn: Option<ModelTurn<'a>>,
    /// The search's paths and whether the rerank may choose, or a pool already gathered.
    pub preparation: Preparation,
    pub writer: Writer,
}

impl<'a> AnswerOptions<'a> {
    /// A player's question: every path, the rerank where the model has time for it, the
    /// writer the settings name, the model's work at once.
    pub fn new(events: AnswerEvents<'a>) -> AnswerOptions<'a> {
        AnswerOptions { events, model_turn: None, preparation: Preparation::default(), writer: Writer::AsConfigured }
    }

    /// The model's work waits for `turn`.
    pub fn in_turn(self, turn: ModelTurn<'a>) -> AnswerOptions<'a> {
        AnswerOptions { model_turn: Some(turn), ..self }
    }

    /// The notes read as `preparation` says.
    pub fn prepared_as(self, preparation: Preparation) -> AnswerOptions<'a> {
        AnswerOptions { preparation, ..self }
    }

    /// The notes' own sentences, ranked by words, are the answer; no model is asked.
    pub fn notes_alone(self) -> AnswerOptions<'a> {
        AnswerOptions { writer: Writer::NotesAlone, ..self }
    }
}

impl Oracle {
    /// Answers one question: the search and the context, the notes' own sentences (with
    /// `chat.instant_answer`), the model's turn, the rerank and the model's answer, checked;
    /// then what stays of the two ([`Settled`]). Every stage a caller may show is an event.
    /// With `chat.answer_style = "quotes"` the notes' own sentences are the answer, at once,
    /// and no model is asked (`quoted.rs`).
    ///
    /// A model that fails after the notes' sentences were shown leaves them as the answer
    /// (`InstantKept::ModelFailed`), whoever asked; with nothing shown first, its error is
    /// the result.
    pub async fn answer(&self, request: &AskRequest<'_>, options: AnswerOptions<'_>) -> Result<Settled, AskError> {
        let span = tracing::info_span!(
            "answer",
            audience = ?request.audience,
            instant = self.settings.instant,
            style = ?self.settings.style,
            writer = ?options.writer
        );
        async move {
            check_question(request.question)?;
            let AnswerOptions { events, model_turn, preparation, writer } = options;
            if writer == Writer::NotesAlone {
                return self.answer_from_notes_alone(request, events, preparation).await;
            }
            if self.settings.style == AnswerStyle::Quotes {
                return self.answer_with_quotes(request, events, model_turn, preparation).await;
            }
            let on_text = |piece: &str| events(AnswerEvent::Text(piece));
            if !self.settings.instant {
                if let Some(turn) = model_turn {
                    turn.await;
                }
                return Ok(Settled::model_alone(self.answer_alone(request, events, &on_text, preparation).await?));
            }
            events(AnswerEvent::Stage(Stage::Searching));
            let rerank = preparation.pipeline.rerank;
            let prepared = self.prepare_to_answer(request, preparation.without_rerank()).await?;
            events(AnswerEvent::Prepared(&prepared));
            let instant = self.instant_answer(&prepared);
            events(AnswerEvent::Instant(instant.as_ref()));
            if let Some(turn) = model_turn {
                turn.await;
            }
            let model = async {
                let prepared = if rerank { self.choose_with_model(request, prepared).await? } else { prepared };
                events(AnswerEvent::Prepared(&prepared));
                events(AnswerEvent::Stage(Stage::Writing { notes: prepared.context.shown_labels.len() }));
                self.generate(&prepared, Some(&on_text)).await
            };
            match (model.await, instant) {
                (Ok(model), instant) => Ok(settle(instant, model)),
                (Err(err), Some(instant)) => {
                    tracing::error!(error = %err, "the model's answer failed; the notes' own sentences stay");
                    Ok(Settled::model_failed(instant, err.to_string()))
                }
                (Err(err), None) => Err(err),
            }
        }
        .instrument(span)
        .await
    }

    /// The model's answer with no instant answer before it: search, rerank, context, model.
    async fn answer_alone(
        &self,
        request: &AskRequest<'_>,
        events: AnswerEvents<'_>,
        on_text: TokenSink<'_>,
        preparation: Preparation,
    ) -> Result<Answer, AskError> {
        events(AnswerEvent::Stage(Stage::Searching));
        let prepared = self.prepare_to_answer(request, preparation).await?;
        events(AnswerEvent::Prepared(&prepared));
        events(AnswerEvent::Stage(Stage::Writing { notes: prepared.context.shown_labels.len() }));
        self.generate(&prepared, Some(on_text)).await
    }

    /// The notes read as `preparation` says, and their own sentences, ranked by words, as
    /// the answer ([`Writer::NotesAlone`]): no model, no embedding.
    async fn answer_from_notes_alone(
        &self,
        request: &AskRequest<'_>,
        events: AnswerEvents<'_>,
        preparation: Preparation,
    ) -> Result<Settled, AskError> {
        events(AnswerEvent::Stage(Stage::Searching));
        let prepared = self.prepare(request, preparation).await?;
        events(AnswerEvent::Prepared(&prepared));
        let started = std::time::Instant::now();
        let made = prepared.extract(None);
        Ok(Settled::quoted(self.answer_from(&prepared, made, started.elapsed().as_secs_f64() * 1000.0)))
    }
}
