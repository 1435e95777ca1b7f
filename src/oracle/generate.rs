//! Generation: the model writes the answer to what was prepared, and what it writes is
//! checked before anyone sees it.
//!
//! Three ways to answer ([`AnswerMode`]): structured (a JSON schema of cited sentences, each
//! judged while the model writes on and again at the end), free text, or extractive (the
//! notes' own sentences, no model). A model that fails, or a structured reply that never fits
//! its schema, gives way to the extractive answer; a model that runs out of time keeps the
//! sentences it wrote and that passed every check.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use tracing::Instrument;

use crate::answer::arc::other_names_quoted;
use crate::answer::grounding::{CitedNotes, Ungrounded};
use crate::answer::passages::{Excerpt, Framing, QuotedAbout, extract_excerpts, recap_excerpts, render_quotes};
use crate::answer::quotes::Quotes;
use crate::answer::quotes::rank_quotes;
use crate::answer::structured::{
    Repeats, Sentence, SentenceStream, StructuredAnswer, answer_schema, complete_sentence_text, parse_structured,
    render_sentence, render_structured,
};
use crate::answer::support::{SupportWindows, support_windows};
use crate::answer::{AnswerMode, validate_citations};
use crate::corpus::{Label, LabelLanguage};
use crate::llm::chat::{ChatMessage, ChatRequest, ChatResponse, TokenSink};
use crate::llm::{EmbedRole, Embedder, LlmError, SupportFloor};
use crate::prompt::{answer_messages, structured_answer_messages, structured_retry_message};

use super::answer::{Answer, AnswerTimings, ShownSource, citation_sources, excerpts_from_quotes};
use super::{AskError, Oracle, Prepared};

/// Structured replies tried before the answer becomes extractive: the first, and one retry
/// told what was wrong.
const STRUCTURED_ATTEMPTS: usize = 2;
/// Lines an extractive answer to an arc question gives: one per session of the story.
const ARC_EXTRACTIVE_LINES: usize = 8;
/// The outer deadline's margin over the one the structured answer keeps itself: time for it
/// to stop the model and return what was written.
const DEADLINE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// What one of the answer modes produced, before the citation check.
pub(super) struct MadeAnswer {
    pub(super) text: String,
    pub(super) mode: AnswerMode,
    pub(super) fallback: Option<String>,
    /// The model stopped before it finished (its time ran out): why, its checked sentences kept.
    pub(super) cut_short: Option<String>,
    /// The model's time ran out before it wrote a checked sentence: the answer is extractive.
    pub(super) out_of_time: bool,
    pub(super) attempts: usize,
    pub(super) prompt_tokens: Option<usize>,
    pub(super) cached_prompt_tokens: Option<usize>,
    pub(super) completion_tokens: Option<usize>,
    /// The backend refused the prompt as longer than its window: a smaller one may pass.
    pub(super) refusal: Option<LlmError>,
    /// Sentences dropped because the notes they cite do not back them, each with why.
    pub(super) ungrounded: Vec<String>,
    /// Sentences dropped because they repeat an earlier one of the answer.
    pub(super) repeated: Vec<String>,
    /// Sentences kept with other labels than the model gave them (`answer::provenance`):
    /// each as shown, with the labels the model wrote.
    pub(super) recited: Vec<String>,
    /// Sentences of the model's the checks judged (kept, re-cited or dropped).
    pub(super) judged: usize,
    /// The notes' sentences an extractive answer quotes.
    pub(super) quoted: Vec<Excerpt>,
    /// Those sentences are only the nearest, not an answer.
    pub(super) nearest_only: bool,
}

impl MadeAnswer {
    fn new(text: String, mode: AnswerMode) -> MadeAnswer {
        MadeAnswer {
            text,
            mode,
            fallback: None,
            cut_short: None,
            out_of_time: false,
            attempts: 0,
            prompt_tokens: None,
            cached_prompt_tokens: None,
            completion_tokens: None,
            refusal: None,
            ungrounded: Vec::new(),
            repeated: Vec::new(),
            recited: Vec::new(),
            judged: 0,
            quoted: Vec::new(),
            nearest_only: false,
        }
    }

    fn after_attempts(mut self, attempts: usize) -> MadeAnswer {
        self.attempts = attempts;
        self
    }

    /// Keeps `err` when it is a refusal for length, for [`Oracle::generate`] to plan again.
    fn refused_by(mut self, err: LlmError) -> MadeAnswer {
        if err.is_context_exceeded() {
            self.refusal = Some(err);
        }
        self
    }

    fn with_tokens(mut self, tokens: &Tokens) -> MadeAnswer {
        (self.prompt_tokens, self.cached_prompt_tokens, self.completion_tokens) =
            (tokens.prompt, tokens.cached, tokens.completion);
        self
    }
}

/// The tokens every attempt of one answer read and wrote.
#[derive(Debug, Default, Clone, Copy)]
struct Tokens {
    prompt: Option<usize>,
    cached: Option<usize>,
    completion: Option<usize>,
}

impl Tokens {
    fn add(&mut self, response: &ChatResponse) {
        let add = |total: &mut Option<usize>, more: Option<usize>| {
            if let Some(more) = more {
                *total = Some(total.unwrap_or(0) + more);
            }
        };
        add(&mut self.prompt, response.prompt_tokens);
        add(&mut self.cached, response.cached_prompt_tokens);
        add(&mut self.completion, response.completion_tokens);
    }
}

impl Oracle {
    /// The model writes the answer to what was prepared (structured, free, or, when no model
    /// can, the notes' own sentences); its citations are checked against the labels shown.
    /// A prompt the backend refuses as longer than its window is planned again once, for the
    /// window it reports, and tried again; a second refusal leaves the extractive answer.
    pub(super) async fn generate(
        &self,
        prepared: &Prepared,
        on_token: Option<TokenSink<'_>>,
    ) -> Result<Answer, AskError> {
        let generation_started = Instant::now();
        let english = crate::lexicon::language_of(&prepared.question) == LabelLanguage::En;
        let time_notice = prepared.search.time.notice(english);
        let deadline = Turn { oracle: self, prepared }.deadline();
        let deadline_at = tokio::time::Instant::now() + deadline;
        let generation = async {
            // Only sessions that are not there were asked about: say so, naming the last one.
            if prepared.search.time.answers_alone() {
                return (MadeAnswer::new(time_notice.clone().unwrap_or_default(), AnswerMode::Extractive), None);
            }
            let mut made = Turn { oracle: self, prepared }.answer(on_token, deadline_at).await;
            let replanned = match made.refusal.take() {
                Some(refusal) => self.planner().replan(prepared, &refusal).await,
                None => None,
            };
            if let Some(replanned) = &replanned {
                made = Turn { oracle: self, prepared: replanned }.answer(on_token, deadline_at).await;
                made.attempts += 1;
            }
            (made, replanned)
        };
        // Every attempt, a re-planned one included, within one deadline; dropping the
        // generation cancels it (a server request is closed, llama.cpp stops at its next
        // token). The structured answer keeps the deadline itself and returns what it wrote.
        let (mut made, replanned) = match tokio::time::timeout_at(deadline_at + DEADLINE_GRACE, generation).await {
            Ok(done) => done,
            Err(_) => (Turn { oracle: self, prepared }.extract_out_of_time(), None),
        };
        let prepared = replanned.as_ref().unwrap_or(prepared);
        if let Some(notice) = time_notice.filter(|_| !prepared.search.time.answers_alone()) {
            made.text = format!("{notice}\n\n{}", made.text);
        }
        let generation_ms = generation_started.elapsed().as_secs_f64() * 1000.0;
        if let Some(reason) = &made.fallback {
            // The reason names the server or the kind of reply; never the reply itself.
            tracing::warn!(%reason, "the model could not answer; the answer is extractive");
        }
        Ok(self.answer_from(prepared, made, generation_ms))
    }

    /// The answer object: `made`'s citations checked against what `prepared` showed.
    pub(super) fn answer_from(&self, prepared: &Prepared, made: MadeAnswer, generation_ms: f64) -> Answer {
        let Prepared { question, started, search, rerank, rerank_prompt_tokens, context, texts, plan, chosen, .. } =
            prepared;
        // An extractive answer cites the chosen fragments and story lines it quotes, shown
        // to the model or not.
        let citable: Vec<String> = match made.mode {
            AnswerMode::Extractive => chosen
                .iter()
                .map(|c| c.label.to_string())
                .chain(context.arc.iter().flat_map(|arc| arc.lines.iter().map(|line| line.label.to_string())))
                .collect(),
            _ => context.shown_labels.clone(),
        };
        let validated = validate_citations(&made.text, &citable);
        if !validated.invented.is_empty() {
            // Counts at warn; the labels are the model's words (a GM answer's), at debug.
            tracing::warn!(n_invented = validated.invented.len(), "the answer cited labels it was not shown");
            tracing::debug!(invented = ?validated.invented, "the labels it invented");
        }
        let mut citations = citation_sources(&validated, context, texts, &search.candidates);
        if made.mode == AnswerMode::Extractive {
            excerpts_from_quotes(&mut citations, &made.quoted);
        }
        let shown = |fragment_id, label: &Label, session| ShownSource { fragment_id, label: label.clone(), session };
        Answer {
            question: question.clone(),
            text: validated.text.clone(),
            citations,
            invented_citations: validated.invented.clone(),
            fragments_shown: context.full.iter().map(|f| shown(f.fragment_id, &f.label, f.session)).collect(),
            summaries_shown: context.summaries.iter().map(|s| shown(s.fragment_id, &s.label, s.session)).collect(),
            story_shown: context
                .arc
                .iter()
                .flat_map(|arc| arc.lines.iter().map(|line| shown(line.fragment_id, &line.label, Some(line.session))))
                .collect(),
            dropped_for_budget: context.dropped_for_budget,
            rerank: rerank.clone(),
            rerank_prompt_tokens: *rerank_prompt_tokens,
            search_query: search.search_query.clone(),
            followup_expanded: search.followup_expanded,
            entities: search.entities.clone(),
            pool_size: search.candidates.len(),
            timings: AnswerTimings {
                generation_ms,
                total_ms: started.elapsed().as_secs_f64() * 1000.0,
                ..AnswerTimings::before_generation(prepared)
            },
            chat_model: self.chat.id().to_string(),
            embedder: self.notes.embedder().id().to_string(),
            prompt_tokens: made.prompt_tokens,
            cached_prompt_tokens: made.cached_prompt_tokens,
            completion_tokens: made.completion_tokens,
            mode: made.mode,
            fallback: made.fallback,
            cut_short: made.cut_short,
            out_of_time: made.out_of_time,
            attempts: made.attempts,
            context_plan: plan.clone(),
            missing_paths: search.missing_paths.clone(),
            ungrounded: made.ungrounded,
            repeated: made.repeated,
            recited: made.recited,
            model_sentences: made.judged,
            quoted: made.quoted,
            nearest_only: made.nearest_only,
        }
    }
}

/// The model's turn over one preparation: the answer written, checked and cut at its deadline.
struct Turn<'a> {
    oracle: &'a Oracle,
    prepared: &'a Prepared,
}

impl Turn<'_> {
    /// One answer in the configured mode, the model stopped at `deadline_at`.
    async fn answer(&self, on_token: Option<TokenSink<'_>>, deadline_at: tokio::time::Instant) -> MadeAnswer {
        match self.oracle.settings.mode_for(self.oracle.chat.as_ref()) {
            AnswerMode::Extractive => self.prepared.extract(None),
            AnswerMode::Free => self.free(on_token).await,
            AnswerMode::Structured => self.structured(on_token, deadline_at).await,
        }
    }

    /// Free text, citing by the prompt's rule; extractive when the model fails.
    async fn free(&self, on_token: Option<TokenSink<'_>>) -> MadeAnswer {
        let request = ChatRequest {
            messages: answer_messages(&self.prepared.question, &self.prepared.history, &self.prepared.context),
            json_schema: None,
            max_tokens: self.prepared.plan.answer_tokens,
            temperature: self.oracle.settings.temperature,
        };
        tracing::trace!(prompt = ?request.messages, "the free answer's prompt");
        let span = tracing::info_span!("answer.generate", model = self.oracle.chat.id(), mode = "free");
        match self.oracle.chat.chat(&request, on_token).instrument(span).await {
            Ok(response) => {
                let mut tokens = Tokens::default();
                tokens.add(&response);
                MadeAnswer::new(response.text, AnswerMode::Free).after_attempts(1).with_tokens(&tokens)
            }
            Err(err) => self.prepared.extract(Some(format!("{err}"))).after_attempts(1).refused_by(err),
        }
    }

    /// Sentences in a JSON schema whose labels are exactly those shown, each streamed as it
    /// completes and passes the checks ([`SentenceJudge`]); one retry told what was wrong,
    /// when there is time for it, then extractive. At `deadline_at` the model is stopped and
    /// the sentences it had written and that passed are the answer.
    async fn structured(&self, on_token: Option<TokenSink<'_>>, deadline_at: tokio::time::Instant) -> MadeAnswer {
        let shown = &self.prepared.context.shown_labels;
        if shown.is_empty() {
            return self.prepared.extract(None);
        }
        let judge = SentenceJudge::new(self.oracle, self.prepared).await;
        let mut messages = structured_answer_messages(
            &self.prepared.question,
            &self.prepared.history,
            &self.prepared.context,
            self.prepared.plan.prompt,
        );
        let mut tokens = Tokens::default();
        let mut problem = String::new();
        for attempt in 1..=STRUCTURED_ATTEMPTS {
            if attempt > 1 && !self.has_time_to_retry(deadline_at) {
                problem = format!("{problem}; no time was left to ask again");
                break;
            }
            let request = ChatRequest {
                messages: messages.clone(),
                json_schema: Some(answer_schema(
                    shown,
                    self.prepared.plan.max_sentences,
                    self.prepared.plan.max_sentence_chars,
                )),
                max_tokens: self.prepared.plan.answer_tokens,
                temperature: self.oracle.settings.temperature,
            };
            let streamed = Mutex::new(Vec::new());
            let reply = tokio::time::timeout_at(
                deadline_at,
                self.write_checking(&request, &judge, &streamed, on_token, attempt),
            )
            .await;
            let response = match reply {
                Ok(Ok(response)) => response,
                Ok(Err(err)) => {
                    return self
                        .prepared
                        .extract(Some(format!("{err}")))
                        .after_attempts(attempt)
                        .refused_by(err)
                        .with_tokens(&tokens);
                }
                Err(_) => {
                    let written = streamed.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
                    return self.cut_short(written, attempt).with_tokens(&tokens);
                }
            };
            tokens.add(&response);
            match parse_structured(&response.text, shown) {
                Ok(answer) => return judge.judge_reply(answer).await.after_attempts(attempt).with_tokens(&tokens),
                Err(err) => {
                    tracing::warn!(attempt, reason = %err.without_reply_text(), "the structured answer cannot be used");
                    tracing::debug!(attempt, reason = %err, "why, with the reply's words");
                    // The reason kept names the kind of problem, not the reply: it is logged
                    // and shown. The model is told the whole problem.
                    problem = err.without_reply_text();
                    messages.push(ChatMessage::assistant(response.text));
                    messages.push(structured_retry_message(&err.to_string()));
                }
            }
        }
        self.prepared
            .extract(Some(format!("the model's structured answer could not be used ({problem})")))
            .after_attempts(STRUCTURED_ATTEMPTS)
            .with_tokens(&tokens)
    }

    /// One structured reply, its complete sentences judged while the model writes on: those
    /// that pass go to `on_token` and into `streamed`, as the final answer will hold them.
    async fn write_checking(
        &self,
        request: &ChatRequest,
        judge: &SentenceJudge<'_>,
        streamed: &Mutex<Vec<Sentence>>,
        on_token: Option<TokenSink<'_>>,
        attempt: usize,
    ) -> Result<ChatResponse, LlmError> {
        tracing::trace!(prompt = ?request.messages, "the structured answer's prompt");
        let stream = Mutex::new(SentenceStream::new());
        // Sentences the notes back by the letter cross to a checker that judges their meaning
        // (an embedding, so async) beside the generation.
        let (to_checker, mut checked) = tokio::sync::mpsc::unbounded_channel::<Sentence>();
        let span = tracing::info_span!("answer.generate", model = self.oracle.chat.id(), mode = "structured", attempt);
        let generate = async move {
            let sentences_sink = |piece: &str| {
                let complete = match stream.lock() {
                    Ok(mut stream) => stream.push(piece),
                    Err(_) => Vec::new(),
                };
                for sentence in complete.iter().filter_map(|sentence| judge.by_the_letter(sentence).ok()) {
                    let _ = to_checker.send(sentence);
                }
            };
            // `to_checker` goes with this block: the checker then ends.
            self.oracle.chat.chat(request, Some(&sentences_sink)).instrument(span).await
        };
        let show = async {
            let mut repeats = Repeats::default();
            while let Some(sentence) = checked.recv().await {
                if judge.by_meaning(&sentence).await.is_ok() && repeats.admit(&sentence.text) {
                    if let Some(sink) = on_token {
                        sink(&format!("{} ", render_sentence(&sentence)));
                    }
                    if let Ok(mut streamed) = streamed.lock() {
                        streamed.push(sentence);
                    }
                }
            }
        };
        let (response, ()) = tokio::join!(generate, show);
        response
    }

    /// When the model is stopped: the configured deadline, or the plan's when the time is
    /// the limit and it is sooner.
    fn deadline(&self) -> std::time::Duration {
        match self.prepared.plan.deadline_seconds {
            Some(seconds) => self.oracle.settings.deadline.min(std::time::Duration::from_secs_f64(seconds)),
            None => self.oracle.settings.deadline,
        }
    }

    /// Why an answer stopped at its deadline, naming the setting that set it.
    fn out_of_time(&self) -> String {
        let deadline = self.deadline();
        let setting = if deadline < self.oracle.settings.deadline {
            "chat.answer_seconds and a fifth more"
        } else {
            "chat.answer_deadline_secs"
        };
        format!("the model had not finished after {:.0} s ({setting})", deadline.as_secs_f64())
    }

    /// Whether a second structured reply can be written before `deadline_at`: under a time
    /// plan, its expected writing time must fit what is left.
    fn has_time_to_retry(&self, deadline_at: tokio::time::Instant) -> bool {
        let left = deadline_at.saturating_duration_since(tokio::time::Instant::now()).as_secs_f64();
        match self.prepared.plan.writing_seconds() {
            Some(writing) => left >= writing,
            None => left > 0.0,
        }
    }

    /// The answer when the model ran out of time: the sentences it wrote that passed every
    /// check, or the notes' own sentences when it had written none.
    fn cut_short(&self, written: Vec<Sentence>, attempt: usize) -> MadeAnswer {
        if written.is_empty() {
            return self.extract_out_of_time().after_attempts(attempt);
        }
        let language = crate::lexicon::language_of(&self.prepared.question);
        tracing::warn!(n_sentences = written.len(), "the model ran out of time; its checked sentences are the answer");
        let answer = StructuredAnswer { in_notes: true, sentences: written };
        let mut made = MadeAnswer::new(render_structured(&answer, language), AnswerMode::Structured);
        made.cut_short = Some(self.out_of_time());
        made.after_attempts(attempt)
    }

    /// The extractive answer given because the model's time ran out, saying so.
    fn extract_out_of_time(&self) -> MadeAnswer {
        let mut made = self.prepared.extract(Some(self.out_of_time()));
        made.out_of_time = true;
        made
    }
}

/// The chosen fragments an answer quotes from (label, text; best first). A question that
/// names sessions («¿qué pasó en la sesión 27?») is answered from those sessions when they
/// were chosen: their words, not other notes that say «sesión».
pub(super) fn quotable_fragments(prepared: &Prepared) -> Vec<(&str, &str)> {
    let named = &prepared.search.time.named_sessions;
    let names_chosen = names_chosen(prepared);
    prepared
        .chosen
        .iter()
        .filter(|candidate| !names_chosen || candidate.session.is_some_and(|session| named.contains(&session)))
        .filter_map(|candidate| {
            let stored = prepared.texts.get(&candidate.fragment_id)?;
            Some((candidate.label.as_str(), stored.fragment.text.as_str()))
        })
        .collect()
}

impl Prepared {
    /// The extractive answer: 2 to 5 sentences of the chosen fragments, each with its label;
    /// for an arc question, the story's best line of each session, in story order.
    /// `fallback`: why the model's answer is not used, when it was asked.
    pub(super) fn extract(&self, fallback: Option<String>) -> MadeAnswer {
        let _span = tracing::info_span!("answer.extract", n_chosen = self.chosen.len()).entered();
        // Two events compared in time: each one's sentence, the order said by their sessions.
        if let Some((text, quoted)) = self.compared().filter(|_| fallback.is_none()) {
            let mut made = MadeAnswer::new(text, AnswerMode::Extractive);
            made.quoted = quoted;
            return made;
        }
        let language = crate::lexicon::language_of(&self.question);
        let quotes = self.extractive_excerpts();
        let nearest_only = quotes.nearest_only();
        let excerpts = quotes.into_excerpts();
        // An arc's quotes are its story: the introduction names whose, and the other names
        // its lines call it by («el Heraldo» is the archduke).
        let story = self.context.arc.as_ref().filter(|arc| !arc.lines.is_empty() && !excerpts.is_empty());
        let other_names = story.map(|arc| {
            let texts: Vec<&str> = excerpts.iter().map(|excerpt| excerpt.text.as_str()).collect();
            other_names_quoted(arc, &texts, &self.question)
        });
        let about = story
            .zip(other_names.as_deref())
            .map(|(arc, other_names)| QuotedAbout { entity: arc.entity.as_str(), other_names });
        // The notes' language only tells where to look when nothing answers in the question's words.
        let notes_in = (excerpts.is_empty() || nearest_only).then(|| notes_language(self)).flatten();
        let framing = Framing { model_failed: fallback.is_some(), nearest_only, about, notes_in };
        let mut made = MadeAnswer::new(render_quotes(&excerpts, language, framing), AnswerMode::Extractive);
        made.fallback = fallback;
        made.quoted = excerpts;
        made.nearest_only = nearest_only;
        made
    }

    /// The sentences an extractive answer quotes: the story's best line of each session for
    /// an arc question, else the chosen fragments' sentences for the question. Empty: the
    /// notes chosen say nothing on it.
    pub(super) fn extractive_excerpts(&self) -> Quotes {
        match self.context.arc.as_ref().filter(|arc| !arc.lines.is_empty()) {
            Some(arc) => {
                let mut lines: Vec<Excerpt> = arc
                    .lines
                    .iter()
                    .filter(|line| line.best)
                    .map(|line| Excerpt { label: line.label.clone(), text: line.text.clone() })
                    .collect();
                if lines.len() > ARC_EXTRACTIVE_LINES {
                    // The first appearances and the last: where the story starts and where it stands.
                    lines.drain(ARC_EXTRACTIVE_LINES - 1..lines.len() - 1);
                }
                Quotes::Answer(lines)
            }
            None => self.excerpts_of_chosen(),
        }
    }

    /// The excerpts of the chosen fragments for the question, ranked sentence by sentence
    /// (`answer::quotes`, with the similarities [`Oracle::weigh_quotes`] kept). A question
    /// with no word to rank by («¿y qué?») gets the opening sentences of the top fragments; one
    /// asking for the sessions it names («¿Qué pasó en la sesión 27?», «Resume la sesión 33»:
    /// every sentence of them answers, though none says «pasó» or «sesión») gets sentences
    /// spread over those sessions, from the first to the last.
    fn excerpts_of_chosen(&self) -> Quotes {
        let fragments = quotable_fragments(self);
        let names_sessions = names_chosen(self);
        if self.terms.is_empty() {
            return Quotes::Answer(if names_sessions {
                recap_excerpts(&fragments)
            } else {
                extract_excerpts(&fragments, &self.terms)
            });
        }
        let similarity = |text: &str| self.quote_similarity.get(text).copied();
        let ranked = rank_quotes(&fragments, &self.terms, &similarity);
        // Sessions it names tell their story where no sentence answers in the question's words.
        let answers = matches!(&ranked, Quotes::Answer(excerpts) if !excerpts.is_empty());
        if !answers && names_sessions {
            return Quotes::Answer(recap_excerpts(&fragments));
        }
        ranked
    }

    /// Every sentence a quoted answer chooses from, as one text: an arc question's story
    /// lines, else the chosen fragments it quotes from. What the eval holds the ranking's
    /// choice against (a key fact missing here was not the ranking's to find).
    pub fn quotable_text(&self) -> String {
        match self.context.arc.as_ref().filter(|arc| !arc.lines.is_empty()) {
            Some(arc) => arc.lines.iter().map(|line| line.text.as_str()).collect::<Vec<_>>().join("\n"),
            None => quotable_fragments(self).iter().map(|(_, text)| *text).collect::<Vec<_>>().join("\n"),
        }
    }
}

/// The language most of the chosen notes are written in, each read from its first
/// [`NOTES_LANGUAGE_SAMPLE_CHARS`] characters (a vault may keep a session in another
/// language, as the sample keeps Sesión 28 in English); `None` when none was chosen or
/// the two languages tie.
fn notes_language(prepared: &Prepared) -> Option<LabelLanguage> {
    language_of_notes(quotable_fragments(prepared).into_iter().map(|(_, text)| text))
}

/// The language most of `texts` are written in (`notes_language`).
pub(super) fn language_of_notes<'a>(texts: impl Iterator<Item = &'a str>) -> Option<LabelLanguage> {
    let of =
        |text: &str| crate::lexicon::language_of(&text.chars().take(NOTES_LANGUAGE_SAMPLE_CHARS).collect::<String>());
    let languages: Vec<LabelLanguage> = texts.map(of).collect();
    let english = languages.iter().filter(|language| **language == LabelLanguage::En).count();
    let spanish = languages.len() - english;
    match english.cmp(&spanish) {
        std::cmp::Ordering::Greater => Some(LabelLanguage::En),
        std::cmp::Ordering::Less => Some(LabelLanguage::Es),
        std::cmp::Ordering::Equal => None,
    }
}

/// Characters of a chosen note read to tell its language: a paragraph or two holds dozens
/// of function words, enough for `lexicon::language_of`.
const NOTES_LANGUAGE_SAMPLE_CHARS: usize = 2000;

/// Whether the question names sessions and some of them were chosen.
fn names_chosen(prepared: &Prepared) -> bool {
    let named = &prepared.search.time.named_sessions;
    prepared.chosen.iter().any(|c| c.session.is_some_and(|session| named.contains(&session)))
}

/// Why a sentence was dropped: the kind, which names nothing of it (the logs at info), and
/// the detail, which may quote it (the answer's `ungrounded`, the logs at debug).
struct Dropped {
    kind: &'static str,
    detail: String,
}

/// The kind of a sentence copied from a passage cut mid-sentence.
const CUT_OFF: &str = "cut off mid-sentence";

impl From<&Ungrounded> for Dropped {
    fn from(reason: &Ungrounded) -> Dropped {
        Dropped { kind: reason.kind(), detail: reason.to_string() }
    }
}

/// Every check a structured sentence passes before anyone sees it, the same while the model
/// streams and at the end: complete (no ellipsis copied from a cut passage), backed by the
/// letter of the notes it cites (numbers and names, `answer::grounding`), near in meaning to
/// a passage of them (`answer::support`, when the embedder has a calibrated floor), and not
/// a repeat of an earlier sentence.
struct SentenceJudge<'a> {
    oracle: &'a Oracle,
    prepared: &'a Prepared,
    grounds: CitedNotes,
    support: Option<(SupportWindows, SupportFloor)>,
    /// Meaning verdicts by sentence text and sources: judged once while streaming, reused at the end.
    verdicts: Mutex<HashMap<String, Result<(), Ungrounded>>>,
    /// The answer's language, which is the question's.
    language: LabelLanguage,
}

impl<'a> SentenceJudge<'a> {
    async fn new(oracle: &'a Oracle, prepared: &'a Prepared) -> SentenceJudge<'a> {
        let context = &prepared.context;
        // What each sentence may rest on: the chosen fragments whole (the note, not only the
        // passages shown), the story's lines and the summaries.
        let grounds = CitedNotes::new(
            prepared
                .texts
                .values()
                .map(|stored| (stored.fragment.label.as_str(), stored.fragment.text.as_str()))
                .chain(context.full.iter().map(|f| (f.label.as_str(), f.text.as_str())))
                .chain(context.arc.iter().flat_map(|arc| arc.lines.iter().map(|l| (l.label.as_str(), l.text.as_str()))))
                .chain(context.summaries.iter().map(|s| (s.label.as_str(), s.summary.as_str()))),
            &context.shown_labels,
        )
        .for_question(&prepared.question);
        SentenceJudge {
            oracle,
            prepared,
            grounds,
            support: support_windows_embedded(oracle.notes.embedder().as_ref(), prepared).await,
            verdicts: Mutex::new(HashMap::new()),
            language: crate::lexicon::language_of(&prepared.question),
        }
    }

    /// The sentence as it may be shown, cited to the notes it rests on (`answer::provenance`:
    /// the note it was copied from, the cited notes that hold its words, the shown ones that
    /// hold what they lack) and that back it by the letter, or why it may not be.
    fn by_the_letter(&self, sentence: &Sentence) -> Result<Sentence, Dropped> {
        let Some(text) = complete_sentence_text(&sentence.text) else {
            return Err(Dropped { kind: CUT_OFF, detail: CUT_OFF.to_string() });
        };
        // The notes it rests on by its words, then by the letter (which may add one that
        // holds a number or name they lack).
        // (Notes decided by meaning are then judged by `by_meaning`, as every sentence is.)
        let sources = match self.grounds.provenance(&text, &sentence.sources, self.language) {
            Ok(sources) => sources.labels(),
            Err(reason) => return Err(Dropped::from(&Ungrounded::from(reason))),
        };
        self.grounds
            .attribute(&text, &sources, &self.prepared.names)
            .map(|sources| Sentence { text, sources })
            .map_err(|reason| Dropped::from(&reason))
    }

    /// Whether a passage of the notes `sentence` cites says what it says, judged once per
    /// sentence text and sources.
    async fn by_meaning(&self, sentence: &Sentence) -> Result<(), Ungrounded> {
        let Some((passages, floor)) = &self.support else { return Ok(()) };
        let key = format!("{}\u{1f}{}", sentence.text, sentence.sources.join("\u{1f}"));
        if let Some(verdict) = self.verdicts.lock().ok().and_then(|verdicts| verdicts.get(&key).cloned()) {
            return verdict;
        }
        let embedded = self.oracle.notes.embedder().embed(std::slice::from_ref(&sentence.text), EmbedRole::Query).await;
        let verdict = match embedded {
            Ok(mut vectors) if vectors.len() == 1 => {
                let vector = vectors.remove(0);
                let nearest = passages.nearest(&vector, &sentence.sources);
                tracing::trace!(sentence = %sentence.text, sources = ?sentence.sources, ?nearest, "support judged");
                // The answer's language picks the floor: a short sentence's own words are too
                // few to tell («Tomás fell on the bridge» has a Spanish accent and «a»).
                let same_language = self.grounds.all_in_language(&sentence.sources, self.language);
                passages.verdict(&vector, same_language, &sentence.sources, floor.same_language, floor.other_language)
            }
            Ok(_) | Err(_) => {
                tracing::warn!("support not judged: a sentence could not be embedded");
                tracing::debug!(sentence = %sentence.text, "the sentence not judged");
                Ok(())
            }
        };
        if let Ok(mut verdicts) = self.verdicts.lock() {
            verdicts.insert(key, verdict.clone());
        }
        verdict
    }

    /// The whole reply judged sentence by sentence, in order, as it streamed: what passes is
    /// the answer; nothing left that the notes back means the notes do not hold it.
    async fn judge_reply(&self, reply: StructuredAnswer) -> MadeAnswer {
        let mut kept = Vec::new();
        let mut ungrounded = Vec::new();
        let mut repeated = Vec::new();
        let mut recited = Vec::new();
        let mut repeats = Repeats::default();
        let judged = reply.sentences.len();
        for sentence in reply.sentences {
            let verdict = match self.by_the_letter(&sentence) {
                Ok(attributed) => {
                    self.by_meaning(&attributed).await.map(|()| attributed).map_err(|r| Dropped::from(&r))
                }
                Err(reason) => Err(reason),
            };
            match verdict {
                Ok(attributed) if !repeats.admit(&attributed.text) => {
                    tracing::debug!(sentence = %attributed.text, "a sentence that repeats an earlier one is dropped");
                    repeated.push(render_sentence(&attributed));
                }
                Ok(attributed) => {
                    if attributed.sources != sentence.sources {
                        // Labels and words of a GM answer are GM text: only counts above debug.
                        tracing::info!(
                            n_cited = sentence.sources.len(),
                            n_backing = attributed.sources.len(),
                            "a sentence is cited to the notes that back it"
                        );
                        tracing::debug!(sentence = %sentence.text, from = ?sentence.sources, to = ?attributed.sources, "the sentence re-cited");
                        recited.push(format!(
                            "{} (the model cited {})",
                            render_sentence(&attributed),
                            sentence.sources.join("; ")
                        ));
                    }
                    kept.push(attributed);
                }
                Err(dropped) => {
                    // A GM answer's sentence is GM text: its words only at debug.
                    tracing::info!(reason = dropped.kind, "a sentence the notes do not back is dropped");
                    tracing::debug!(sentence = %sentence.text, reason = %dropped.detail, "the sentence dropped");
                    ungrounded.push(format!("{} ({})", render_sentence(&sentence), dropped.detail));
                }
            }
        }
        let answer = StructuredAnswer { in_notes: reply.in_notes && !kept.is_empty(), sentences: kept };
        let mut made = MadeAnswer::new(render_structured(&answer, self.language), AnswerMode::Structured);
        made.ungrounded = ungrounded;
        made.repeated = repeated;
        made.recited = recited;
        made.judged = judged;
        made
    }
}

/// The shown notes cut into support passages and embedded, with the embedder's floors;
/// `None` when the embedder has no calibrated floor, or the embedding failed (logged: the
/// answer then goes out with the checks by the letter only).
async fn support_windows_embedded(
    embedder: &dyn Embedder,
    prepared: &Prepared,
) -> Option<(SupportWindows, SupportFloor)> {
    let floor = embedder.support_floor()?;
    let started = Instant::now();
    let context = &prepared.context;
    let shown = context.full.iter().map(|f| (f.label.as_str(), f.text.as_str()));
    let story = context.arc.iter().flat_map(|arc| arc.lines.iter().map(|l| (l.label.as_str(), l.text.as_str())));
    let summaries = context.summaries.iter().map(|s| (s.label.as_str(), s.summary.as_str()));
    // Each passage's label, and its text.
    let (labels, windows): (Vec<String>, Vec<String>) = shown
        .chain(story)
        .chain(summaries)
        .flat_map(|(label, text)| support_windows(text).into_iter().map(move |window| (label.to_string(), window)))
        .unzip();
    let span = tracing::info_span!("answer.support", n_passages = windows.len());
    match embedder.embed(&windows, EmbedRole::Query).instrument(span).await {
        Ok(vectors) if vectors.len() == windows.len() => {
            tracing::debug!(
                n_passages = windows.len(),
                ms = started.elapsed().as_secs_f64() * 1000.0,
                "support passages embedded"
            );
            Some((SupportWindows::new(&labels, vectors), floor))
        }
        Ok(vectors) => {
            tracing::warn!(
                expected = windows.len(),
                got = vectors.len(),
                "support check off: the embedder returned the wrong number of vectors"
            );
            None
        }
        Err(err) => {
            tracing::warn!(%err, "support check off: the shown notes could not be embedded");
            None
        }
    }
}
