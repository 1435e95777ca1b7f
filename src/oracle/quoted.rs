//! The quoted answer (`chat.answer_style = "quotes"`, the default on a CPU): the notes' own
//! sentences that answer the question, ranked sentence by sentence (`answer::quotes`), are
//! the answer, at once. No rerank, no generation: the chat model is never asked.
//!
//! The ranking's meaning signal is the embedder's: the quotable sentences and the question
//! are embedded here ([`Oracle::weigh_quotes`]) and their similarities kept in [`Prepared`];
//! the instant answer and the extractive answer rank with them too.

use std::collections::HashMap;
use std::time::Instant;

use tracing::Instrument;

use crate::answer::quotes::quote_candidates;
use crate::llm::{EmbedRole, cosine};

use super::ask::{AnswerEvent, AnswerEvents, ModelTurn};
use super::generate::quotable_fragments;
use super::{AskError, AskRequest, Oracle, Preparation, Prepared, Settled, Stage};

impl Oracle {
    /// [`Oracle::answer`] with the notes' own sentences as the answer: the search and the
    /// context without the chat model, then the quotes, settled at once. `model_turn` is
    /// waited for all the same (the bot's queue keeps one order of answers; with no model
    /// work each turn is over in a moment), but nothing runs in it.
    pub(super) async fn answer_with_quotes(
        &self,
        request: &AskRequest<'_>,
        events: AnswerEvents<'_>,
        model_turn: Option<ModelTurn<'_>>,
        preparation: Preparation,
    ) -> Result<Settled, AskError> {
        events(AnswerEvent::Stage(Stage::Searching));
        let prepared = self.prepare_to_answer(request, preparation.without_rerank()).await?;
        events(AnswerEvent::Prepared(&prepared));
        // An extractive generation: the quotes, or the time notice when only sessions that are
        // not there were asked about; no model is asked ([`Oracle::answer_mode`]).
        let answer = self.generate(&prepared, None).await?;
        if let Some(turn) = model_turn {
            turn.await;
        }
        tracing::info!(n_citations = answer.citations.len(), "the notes' own sentences are the answer");
        Ok(Settled::quoted(answer))
    }

    /// Embeds the quotable sentences of the chosen fragments (the lexically best,
    /// `answer::quotes::EMBEDDED_QUOTES_MAX`) and the question, and keeps each sentence's
    /// similarity in `prepared` for the ranking. Nothing to do for an arc question (its story
    /// is its answer) or a question with no words; an embedding that fails leaves the ranking
    /// without meaning, with a warning.
    pub(super) async fn weigh_quotes(&self, prepared: &mut Prepared) {
        let arc = prepared.context.arc.as_ref().is_some_and(|arc| !arc.lines.is_empty());
        if arc || prepared.terms.is_empty() {
            return;
        }
        let candidates = quote_candidates(&quotable_fragments(prepared), &prepared.terms);
        if candidates.is_empty() {
            return;
        }
        let started = Instant::now();
        let span = tracing::info_span!("answer.weigh_quotes", n_sentences = candidates.len());
        let embedded = async {
            let question =
                self.notes.embedder().embed(std::slice::from_ref(&prepared.question), EmbedRole::Query).await?;
            let sentences = self.notes.embedder().embed(&candidates, EmbedRole::Passage).await?;
            Ok::<_, crate::llm::LlmError>((question, sentences))
        }
        .instrument(span)
        .await;
        match embedded {
            Ok((question, sentences)) if question.len() == 1 && sentences.len() == candidates.len() => {
                let similarity: HashMap<String, f32> = candidates
                    .into_iter()
                    .zip(&sentences)
                    .map(|(text, vector)| {
                        let near = cosine(&question[0], vector);
                        (text, near)
                    })
                    .collect();
                tracing::debug!(
                    n_sentences = similarity.len(),
                    best = similarity.values().copied().fold(f32::MIN, f32::max),
                    ms = started.elapsed().as_secs_f64() * 1000.0,
                    "quotable sentences weighed by meaning"
                );
                prepared.quote_similarity = similarity;
            }
            Ok((question, sentences)) => tracing::warn!(
                expected = candidates.len() + 1,
                got = question.len() + sentences.len(),
                "the quotes are ranked without meaning: the embedder returned the wrong number of vectors"
            ),
            Err(err) => {
                tracing::warn!(%err, "the quotes are ranked without meaning: the sentences could not be embedded");
            }
        }
    }
}
