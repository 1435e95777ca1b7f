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
use crate::answer::passages::{Excerpt, not_said_as_such, render_with_notes_also, sentences};
use crate::answer::structured::Repeats;
use crate::answer::terms::QueryTerms;
use crate::corpus::{FragmentId, LabelLanguage};

use super::generate::MadeAnswer;
use super::{Answer, AskError, AskRequest, Oracle, Preparation, Prepared, check_question};
use crate::retrieve::choose::choose;

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

/// What is shown once the model is done: what [`Oracle::answer`] ends with, and what the CLI
/// prints, the bot posts, the evaluation scores and the MCP server returns.
#[derive(Debug, Clone)]
pub struct Settled {
    /// The model's answer (with the notes' sentences it did not say under it), or the
    /// instant one when `instant_kept` says why.
    pub answer: Answer,
    pub instant_kept: Option<InstantKept>,
    /// The instant answer's sentences kept under the model's answer: it did not say them.
    pub notes_added: Vec<Excerpt>,
    /// The notes' own sentences shown before the model's turn, when there were any.
    pub instant: Option<Answer>,
    /// The model's own answer as it came back; `None` when it failed (`model_failure`).
    pub model: Option<Answer>,
    /// Why the model gave no answer, when it failed and the notes' sentences stand for it.
    pub model_failure: Option<String>,
    /// The model's own answer, without the sentences added under it: what a follow-up
    /// builds on.
    turn_text: String,
}

impl Settled {
    /// The model's answer as it is, with no instant answer beside it.
    pub fn model_alone(answer: Answer) -> Settled {
        Settled {
            turn_text: answer.text.clone(),
            model: Some(answer.clone()),
            answer,
            instant_kept: None,
            notes_added: Vec::new(),
            instant: None,
            model_failure: None,
        }
    }

    /// The notes' own sentences as the answer (`chat.answer_style = "quotes"`): no model was
    /// asked, so nothing is kept instead of its answer; the quotes are the turn a follow-up
    /// builds on.
    pub fn quoted(answer: Answer) -> Settled {
        Settled {
            turn_text: answer.text.clone(),
            answer,
            instant_kept: None,
            notes_added: Vec::new(),
            instant: None,
            model: None,
            model_failure: None,
        }
    }

    /// The instant answer stays where the model's would have gone, because the model failed
    /// for `failure` (a server down, a worker gone).
    pub fn model_failed(instant: Answer, failure: String) -> Settled {
        Settled {
            turn_text: instant.text.clone(),
            answer: instant.clone(),
            instant_kept: Some(InstantKept::ModelFailed),
            notes_added: Vec::new(),
            instant: Some(instant),
            model: None,
            model_failure: Some(failure),
        }
    }

    /// Whether this exchange becomes a turn of the conversation: only the model's own answer
    /// (a kept instant answer is the notes' words, not an answer to follow up on).
    pub fn joins_history(&self) -> bool {
        self.instant_kept.is_none() && self.answer.joins_history()
    }

    /// What joins the conversation: the model's own answer, without the notes' sentences
    /// kept under it.
    pub fn turn_text(&self) -> &str {
        &self.turn_text
    }

    /// Whether the notes held no answer: the model cited none of them (its answer is not
    /// used), what stays cites no note at all (nothing was found), or it quotes only the
    /// nearest sentences. What the DM's report of unanswered questions counts (`feedback`).
    pub fn not_in_the_notes(&self) -> bool {
        self.instant_kept == Some(InstantKept::ModelAbstained)
            || self.answer.nearest_only
            || !self.answer.citations.iter().any(|citation| citation.valid)
    }
}

impl Oracle {
    /// Everything before the model writes, read as `preparation` says ([`Oracle::prepare`])
    /// and, when no model writes the answer, the quotable sentences weighed by the embedder.
    /// With the rerank off nothing here calls the chat model: the fragments come in fusion
    /// order (the sessions the question names first), and nothing waits for a generation that
    /// is running.
    pub(super) async fn prepare_to_answer(
        &self,
        request: &AskRequest<'_>,
        preparation: Preparation,
    ) -> Result<Prepared, AskError> {
        let mut prepared = self.prepare(request, preparation).await?;
        // Where the quotes are the answer; before a model's prose they rank by words alone
        // (the model's answer replaces them), and the embedder is asked nothing more.
        if self.settings.mode_for(self.chat.as_ref()) == AnswerMode::Extractive {
            self.weigh_quotes(&mut prepared).await;
        }
        Ok(prepared)
    }

    /// The fragments chosen again by the rerank over the same search (one call to the chat
    /// model, so run with the model's turn); `prepared` as it is when the rerank is off.
    pub(super) async fn choose_with_model(
        &self,
        request: &AskRequest<'_>,
        prepared: Prepared,
    ) -> Result<Prepared, AskError> {
        let question = check_question(request.question)?;
        let index = self.notes.open_index().await?;
        let compendium = self.notes.compendium(&index, request.audience)?;
        async move {
            let choice =
                choose(&index, &prepared.search, &self.settings.choosing(self.notes.k(), true, self.chat.as_ref()))
                    .await?;
            // The rerank kept the fragments already prepared (always so when the notes have no
            // annotations), and each still holds the text searched and may be shown to this
            // audience (an ingest may have run while the question waited): the context, story
            // and plan stand; only the decision is new.
            let same_fragments = choice.chosen.len() == prepared.chosen.len()
                && choice.chosen.iter().zip(&prepared.chosen).all(|(a, b)| a.fragment_id == b.fragment_id);
            let still_as_searched = || -> Result<bool, AskError> {
                let wanted: Vec<(FragmentId, &str)> =
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
            let asked = super::InFlight { index: &index, compendium: &compendium, question, request, started };
            self.build_prepared(&asked, prepared.search, choice).await
        }
        .instrument(tracing::info_span!("answer.choose_with_model"))
        .await
    }

    /// The notes' own sentences for what was prepared, cited and checked like any answer;
    /// `None` when the chosen notes hold no sentence for the question, or when the
    /// answer needs no model at all (only sessions that are not there were asked about).
    pub(super) fn instant_answer(&self, prepared: &Prepared) -> Option<Answer> {
        let started = Instant::now();
        if prepared.search.time.answers_alone() || prepared.extractive_excerpts().excerpts().is_empty() {
            return None;
        }
        let mut made: MadeAnswer = prepared.extract(None);
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

/// What stays once the model is done. The instant answer, with why, when the model failed,
/// ran out of time or cited nothing (then headed by a line saying the notes do not say the
/// answer as such). Otherwise the model's answer, and under it the instant answer's
/// sentences it did not say, quoted and cited: a player who read the notes' sentences first
/// never loses one when the model's answer replaces them (a 1.5B on a CPU writes one or two
/// sentences and leaves an arc's last session out).
pub(super) fn settle(instant: Option<Answer>, model: Answer) -> Settled {
    let Some(mut instant) = instant else {
        return Settled::model_alone(model);
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
    let language = question_language(&model.question);
    match kept {
        Some(why) => {
            tracing::info!(?why, "the model's answer is not used; the notes' own sentences stay");
            let shown_first = instant.clone();
            if why == InstantKept::ModelAbstained {
                instant.text = format!("{}\n\n{}", not_said_as_such(language), instant.text);
            }
            Settled {
                turn_text: instant.text.clone(),
                answer: instant,
                instant_kept: Some(why),
                notes_added: Vec::new(),
                instant: Some(shown_first),
                model: Some(model),
                model_failure: None,
            }
        }
        None => {
            // An extractive answer is the notes' own sentences already (`ask --extractive`, or
            // no model to ask): nothing of the instant answer is missing from it. After an arc
            // question, a line per session of the story stays; after any other, only a line that
            // holds what the question asks beyond the names it asks about. A follow-up («¿Y
            // después?») is read as it was searched, with what it follows.
            let about_a_story =
                !model.story_shown.is_empty() || crate::retrieve::entity::is_arc_question(&model.search_query);
            let asked = (!about_a_story).then(|| asked_terms(&model));
            let also = if model.mode == AnswerMode::Extractive {
                Vec::new()
            } else {
                unsaid(&instant.quoted, &model.text, asked.as_ref())
            };
            let turn_text = model.text.clone();
            let mut answer = model.clone();
            if !also.is_empty() {
                tracing::debug!(
                    n_added = also.len(),
                    "the notes' sentences the model did not say stay under its answer"
                );
                answer.text = render_with_notes_also(&answer.text, &also, language);
                for excerpt in &also {
                    let cited = answer.citations.iter().any(|c| c.valid && c.label == excerpt.label);
                    let source = instant.citations.iter().find(|c| c.valid && c.label == excerpt.label);
                    if let (false, Some(source)) = (cited, source) {
                        answer.citations.push(source.clone());
                    }
                }
            }
            Settled {
                answer,
                instant_kept: None,
                notes_added: also,
                instant: Some(instant),
                model: Some(model),
                model_failure: None,
                turn_text,
            }
        }
    }
}

/// Lines kept under a model's answer to a question that is not about someone's story: the
/// one that holds most of what the question asks. Five lines that name the archduke under
/// «300 coronas» answered nothing (1 of 10 such lines was relevant after fact questions).
pub const KEPT_AFTER_FACT: usize = 1;

/// What `answer`'s question (as searched: a follow-up with what it follows) asks beyond the
/// names of the entities it names («¿Cuánto ofreció el archiduque…?» asks «ofreció»,
/// «caravanas»…, not «archiduque»).
fn asked_terms(answer: &Answer) -> QueryTerms {
    let mut names: Vec<&str> = Vec::new();
    for entity in &answer.entities {
        names.push(entity.name.as_str());
        names.push(entity.alias.as_str());
    }
    QueryTerms::new(&answer.search_query, &[]).without_words_of(&names)
}

/// The lines of `quoted` that `said` (the model's answer) does not already say, by words
/// ([`Repeats`]): a line any of whose sentences repeats one of the answer or of a line kept
/// before it is left out, and so is a line with no words. With `asked` (a question not about
/// someone's story), only lines holding one of its terms, the best [`KEPT_AFTER_FACT`].
fn unsaid(quoted: &[Excerpt], said: &str, asked: Option<&QueryTerms>) -> Vec<Excerpt> {
    let mut kept = unsaid_lines(quoted, said);
    if let Some(asked) = asked {
        let mut scored: Vec<(u32, usize)> =
            kept.iter().enumerate().map(|(at, excerpt)| (asked.score(&excerpt.text), at)).collect();
        scored.retain(|(score, _)| *score > 0);
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut best: Vec<usize> = scored.into_iter().take(KEPT_AFTER_FACT).map(|(_, at)| at).collect();
        best.sort_unstable();
        kept = best.into_iter().map(|at| kept[at].clone()).collect();
    }
    kept
}

fn unsaid_lines(quoted: &[Excerpt], said: &str) -> Vec<Excerpt> {
    let mut repeats = Repeats::default();
    for sentence in sentences(said) {
        repeats.admit(&sentence);
    }
    let mut kept = Vec::new();
    for excerpt in quoted {
        let own = sentences(&excerpt.text);
        let has_words = own.iter().any(|sentence| sentence.chars().any(char::is_alphanumeric));
        if has_words && !own.iter().any(|sentence| repeats.says_again(sentence)) {
            for sentence in &own {
                repeats.admit(sentence);
            }
            kept.push(excerpt.clone());
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::Label;

    fn excerpt(label: &str, text: &str) -> Excerpt {
        Excerpt { label: Label::new(label), text: text.to_string() }
    }

    #[test]
    fn only_the_notes_sentences_the_answer_did_not_say_are_kept() {
        let quoted = [
            excerpt("Sesión 9", "Durante la Fiesta de las Mareas, Leandro desaparece del salón sin dejar rastro."),
            excerpt("Sesión 9", "La guardia busca a Leandro por todo el palacio hasta el alba."),
            excerpt(
                "Sesión 30",
                "El Heraldo de la Marea Baja sube a la tarima. Es Leandro, cambiado, con la piel cubierta de sal.",
            ),
            excerpt("Sesión 31", "El Heraldo de la Marea Baja sube a la tarima ante la multitud."),
            excerpt("Sesión 39", "…"),
        ];
        // The model said the first, in its own order of words, and half of the third.
        let said = "Leandro desaparece sin dejar rastro del salón durante la Fiesta de las Mareas [Sesión 9]. \
                    Es Leandro, cambiado, con la piel cubierta de sal [Sesión 30].";
        let kept: Vec<String> = unsaid(&quoted, said, None).into_iter().map(|e| e.text).collect();
        assert_eq!(
            kept,
            [
                "La guardia busca a Leandro por todo el palacio hasta el alba.",
                "El Heraldo de la Marea Baja sube a la tarima ante la multitud.",
            ],
            "a line that repeats the answer, in whole or in part, goes; a line of no words goes"
        );
        // Two lines that say the same: the second is not kept either.
        let twice =
            [quoted[3].clone(), excerpt("Sesión 32", "El Heraldo de la Marea Baja sube a la tarima ante la multitud.")];
        assert_eq!(unsaid(&twice, "", None).len(), 1);
        assert_eq!(unsaid(&[], said, None), Vec::new());
    }

    #[test]
    fn after_a_fact_question_only_a_line_that_holds_what_it_asks_stays() {
        let quoted = [
            excerpt("Sesión 1", "El archiduque baja de la Colina con escolta y habla desde la escalinata."),
            excerpt("Sesión 5", "El archiduque Leandro los recibe en su despacho."),
            excerpt("Sesión 9", "Las caravanas del Camino Blanco llevaban sal y nunca llegaron."),
        ];
        let said = "El archiduque ofreció 300 coronas [Sesión 1].";
        let asked = QueryTerms::new("¿Cuánto ofreció el archiduque por las caravanas?", &[])
            .without_words_of(&["archiduque", "Leandro de Valdemora"]);
        let kept: Vec<Label> = unsaid(&quoted, said, Some(&asked)).into_iter().map(|e| e.label).collect();
        assert_eq!(kept, ["Sesión 9"], "the lines that only name the archduke go");
        let nothing_asked = QueryTerms::new("¿Quién es el archiduque?", &[]).without_words_of(&["archiduque"]);
        assert!(unsaid(&quoted, said, Some(&nothing_asked)).is_empty());
        assert_eq!(unsaid(&quoted, said, None).len(), 3, "after an arc question every unsaid line stays");
    }
}
