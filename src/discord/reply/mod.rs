//! Answering a question: the wait in the queue, the notes' own sentences first (the
//! instant answer), then the model's answer streamed into the same message, then the final
//! layout with its checked citations, sources and buttons. Where the answer goes and how fast
//! its message may change is `outlet`.
//!
//! The question is answered by the oracle's one entry ([`crate::oracle::Oracle::answer`]) on
//! the answer worker, from the moment it is admitted; its events come back here to be shown.
//! Only the model's work takes a queue slot (the slot is the entry's `ModelTurn`): the search
//! and the context run at once (the embedder and the index, not the chat model), so a question
//! waiting for the model shows its instant answer while another answer is written.

mod outlet;

use std::sync::{Arc, Mutex};

use poise::serenity_prelude as serenity;
use tokio::sync::{mpsc, oneshot, watch};

use super::errors::{ask_error_text, log_ask_error, log_discord_error};
use super::feedback::add_verdict_buttons;
use super::layout::{self, Message};
use super::locale::Lang;
use super::place::Place;
use super::queue::{Admission, QueueEvent, Slot, Waiting, Withdrawal, WorkerGone};
use super::{Data, Desk};
use crate::feedback::{FrontEnd, KeptAnswer};
use crate::oracle::{Answer, AnswerEvent, AnswerOptions, AskError, AskRequest, ModelTurn, Settled, Stage};
use crate::retrieve::{Audience, Turn};
use outlet::EditPace;
pub use outlet::{
    INTERACTION_TOKEN_LIFETIME, INTERACTION_TOKEN_MARGIN, Outlet, PREVIEW_EDIT_INTERVAL, Posted,
    interaction_token_usable, snowflake_time,
};

/// Refuses a question before it queues: empty, too long, rate limited, shutting down.
/// `Some(text)` is what to tell the asker.
pub fn refuse_question(data: &Data, user: u64, question: &str, lang: Lang) -> Option<String> {
    // The oracle's own rule (one place decides what can be asked), told before queueing.
    if let Err(refused) = crate::oracle::check_question(question) {
        return Some(super::errors::ask_error_text(&refused, lang));
    }
    if data.lifecycle.is_closing() {
        return Some(lang.shutting_down());
    }
    if let Err(wait) = data.queue.check_rate(user) {
        return Some(lang.rate_limited(wait.as_secs().max(1)));
    }
    None
}

/// What an answered question left behind.
pub struct Answered {
    pub text: String,
    /// The first message of the answer (a thread opens on it).
    pub first_message: Option<serenity::MessageId>,
}

/// What the answer worker returns: the work's own result, or that the worker is gone.
type Made<T> = Result<Result<T, AskError>, WorkerGone>;

/// A question a player asked, as the bot received it: what, by whom, where, and for whom
/// it is answered.
#[derive(Debug, Clone, Copy)]
pub struct Question<'a> {
    pub text: &'a str,
    /// Who asked (the Discord user id); kept with the question only with
    /// `[feedback] keep_askers`.
    pub asker: u64,
    pub place: Place,
    pub audience: Audience,
    /// The asker's language: the bot's notices.
    pub lang: Lang,
    /// The question as written to the campaign's store before it was acknowledged
    /// ([`super::resume`]); it is removed once [`answer_question`] returns (answered, or
    /// told why not), so only a process that dies on the way leaves it for the next start.
    pub in_flight: Option<i64>,
}

/// Queues, answers and posts one question; every path ends with a message to the asker.
/// `None` when no answer was posted (an error or an interruption was, instead). With
/// `chat.instant_answer`, the notes' own sentences are shown as soon as they are found; while
/// the model writes, the message shows its text so far, edited about once a second.
pub async fn answer_question(
    data: &Data,
    desk: &Arc<Desk>,
    outlet: &Outlet<'_>,
    question: Question<'_>,
) -> Option<Answered> {
    let asking = Asking { data, desk, outlet, question, asked_in: Lang::of_question(question.text) };
    let answered = asking.answer_in_turn().await;
    if let Some(id) = question.in_flight {
        desk.history.forget_question(id).await;
    }
    answered
}

/// Searches of waiting questions run at most this many at once, each on an index it opens:
/// a burst of fifty questions holds two indexes and two prepared searches in the making, not
/// fifty; the embedder is one either way, so more at once would not finish sooner.
pub const PREPARED_AT_ONCE: usize = 2;

impl Asking<'_, '_> {
    /// [`answer_question`]: admitted or told the queue is full; answered, or told why not.
    async fn answer_in_turn(&self) -> Option<Answered> {
        let Asking { data, desk, outlet, question: Question { place, audience, lang, .. }, .. } = *self;
        let Some(_job) = data.lifecycle.begin() else {
            outlet.post_or_replace(None, &Message::notice(&lang.shutting_down())).await;
            return None;
        };
        let admission = data.queue.enter(place.id());
        if let Admission::Busy(busy) = &admission {
            tracing::info!(
                waiting = busy.waiting,
                wait_s = busy.wait.as_secs(),
                place_full = busy.place_full,
                "no room in the queue: the asker is told when to come back"
            );
            outlet.post_or_replace(None, &Message::notice(&lang.busy(busy))).await;
            return None;
        }
        // A question asked by a message leaves the queue if that message is deleted.
        let mut withdrawal = outlet.asking_message().map(|message| data.withdrawals.watch(message));
        // The oracle answers it on the worker from now: the search reads the conversation as it
        // is now, and the instant answer does not wait for the queue; the model waits for the slot.
        let mut answering = Answering::start(self, desk.history.recent(place, audience).await);
        let mut shown = None;
        let slot = match admission {
            Admission::Now(slot) => slot,
            Admission::Queued(waiting) => {
                self.wait_for_turn(waiting, &mut shown, withdrawal.as_mut(), &mut answering).await?
            }
            Admission::Busy(_) => return None,
        };
        // Started: deleting the question no longer stops it (its answer is on its way).
        drop(withdrawal.take());
        let (settled, shown) = self.with_the_model(answering, shown, slot).await?;
        self.deliver(settled, shown).await
    }
}

/// One question on its way to its answer.
#[derive(Clone, Copy)]
struct Asking<'a, 'o> {
    data: &'a Data,
    desk: &'a Arc<Desk>,
    outlet: &'a Outlet<'o>,
    question: Question<'a>,
    /// The question's language: the lines around the notes' sentences, which are in it too.
    asked_in: Lang,
}

/// The question answered on the answer worker ([`crate::oracle::Oracle::answer`], whose
/// future is not `Send`), its events brought back here as they come.
struct Answering {
    handle: Option<tokio::task::JoinHandle<Made<Settled>>>,
    done: Option<Made<Settled>>,
    events: mpsc::UnboundedReceiver<Heard>,
    /// Sent when the question's turn comes: the model's work starts.
    turn: Option<oneshot::Sender<()>>,
    /// The notes' own sentences once the search has them (`Some(None)`: the notes hold none).
    instant: Option<Option<Answer>>,
    /// The instant answer is on the question's message already (shown while it waited).
    shown: bool,
}

/// An event of the answer as it crosses from the worker (what was prepared stays there).
enum Heard {
    Stage(Stage),
    Instant(Option<Answer>),
    Text(String),
}

impl Heard {
    fn of(event: AnswerEvent<'_>) -> Option<Heard> {
        match event {
            AnswerEvent::Stage(stage) => Some(Heard::Stage(stage)),
            AnswerEvent::Instant(instant) => Some(Heard::Instant(instant.cloned())),
            AnswerEvent::Text(piece) => Some(Heard::Text(piece.to_string())),
            AnswerEvent::Prepared(_) => None,
        }
    }
}

impl Answering {
    fn start(asking: &Asking<'_, '_>, history: Vec<Turn>) -> Answering {
        let worker = asking.data.worker.clone();
        let oracle = Arc::clone(&asking.desk.oracle);
        let (question, audience) = (asking.question.text.to_string(), asking.question.audience);
        // Only searches made before the turn are rationed; without the instant answer the
        // search waits for the turn itself.
        let turns = oracle.settings().instant.then(|| Arc::clone(&asking.data.preparations));
        let (heard, events) = mpsc::unbounded_channel();
        let (turn, turn_comes) = oneshot::channel::<()>();
        let handle = tokio::spawn(async move {
            // In the order asked; a closed semaphore (never closed) would only skip the wait.
            let searching = match turns {
                Some(turns) => turns.acquire_owned().await.ok(),
                None => None,
            };
            worker
                .run("answers", move || async move {
                    let on_event = move |event: AnswerEvent<'_>| {
                        if let Some(event) = Heard::of(event) {
                            let _ = heard.send(event);
                        }
                    };
                    let model_turn: ModelTurn<'_> = Box::pin(async move {
                        // The search is done: the next waiting question's may run.
                        drop(searching);
                        // A question that left (its sender dropped) never reaches the model.
                        if turn_comes.await.is_err() {
                            std::future::pending::<()>().await;
                        }
                    });
                    let request = AskRequest { question: &question, history: &history, audience };
                    oracle.answer(&request, AnswerOptions::new(&on_event).in_turn(model_turn)).await
                })
                .await
        });
        Answering { handle: Some(handle), done: None, events, turn: Some(turn), instant: None, shown: false }
    }

    /// Resolves once the answer is done (or failed); at once when it already is.
    async fn finish(&mut self) {
        if let Some(handle) = self.handle.as_mut() {
            let made = handle.await.unwrap_or(Err(WorkerGone("answers")));
            self.handle = None;
            self.done = Some(made);
        }
    }

    /// The notes' own sentences, once found.
    fn instant(&self) -> Option<&Answer> {
        self.instant.as_ref().and_then(Option::as_ref)
    }
}

impl Drop for Answering {
    /// A question that leaves (withdrawn, interrupted) stops its answer.
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            handle.abort();
        }
    }
}

impl<'o> Asking<'_, 'o> {
    /// The slot, once the questions before this one are answered. Meanwhile its message
    /// follows the queue (its position, at the edit pace) and shows the instant answer the
    /// moment the search has it. `None`: the question left the queue (withdrawn, the bot
    /// stopping, its search failed), and the asker was told.
    async fn wait_for_turn(
        &self,
        mut waiting: Waiting,
        shown: &mut Option<Posted<'o>>,
        mut withdrawal: Option<&mut Withdrawal>,
        answering: &mut Answering,
    ) -> Option<Slot> {
        let mut position = waiting.position();
        tracing::info!(position, "question queued");
        *shown = self.outlet.post_or_replace(None, &self.waiting_message(position, None)).await;
        // The latest position is edited in at most once per PREVIEW_EDIT_INTERVAL (a refused
        // edit is skipped, the next one carries it).
        let mut moved = false;
        let mut pace = EditPace::posted_now();
        loop {
            let due = async {
                match moved {
                    true => pace.wait().await,
                    false => std::future::pending::<()>().await,
                }
            };
            let withdrawn = async {
                match withdrawal.as_deref_mut() {
                    Some(withdrawal) => withdrawal.withdrawn().await,
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                event = waiting.next() => match event {
                    Ok(QueueEvent::Started(slot)) => return Some(slot),
                    Ok(QueueEvent::Moved(now)) => (position, moved) = (now, true),
                    Err(_) => {
                        self.outlet.post_or_replace(shown.take(), &Message::notice(&self.question.lang.interrupted())).await;
                        return None;
                    }
                },
                () = due => {
                    *shown = self.outlet.show_preview(shown.take(), &self.waiting_message(position, answering.instant())).await;
                    moved = false;
                    pace.edited();
                }
                heard = answering.events.recv() => match heard {
                    Some(Heard::Instant(instant)) => {
                        // The notes' sentences replace the queue notice at once; an edit refused
                        // for a burst is tried again (they must arrive, not wait for the turn).
                        if let Some(instant) = &instant {
                            let message = self.waiting_message(position, Some(instant));
                            *shown = self.outlet.post_or_replace(shown.take(), &message).await;
                            (moved, answering.shown) = (false, true);
                            pace.edited();
                        }
                        answering.instant = Some(instant);
                    }
                    Some(Heard::Stage(_) | Heard::Text(_)) => {}
                    // The answer ended before its turn: its search failed. The asker is told
                    // now, and the question leaves the queue.
                    None => {
                        answering.finish().await;
                        let failure = match answering.done.take() {
                            Some(Ok(Err(err))) => Ok(err),
                            Some(Err(gone)) => Err(gone),
                            Some(Ok(Ok(_))) | None => Err(WorkerGone("answers")),
                        };
                        return self.tell_failure(shown.take(), failure).await;
                    }
                },
                () = self.data.lifecycle.interrupted() => {
                    self.outlet.post_or_replace(shown.take(), &Message::notice(&self.question.lang.interrupted())).await;
                    return None;
                }
                () = withdrawn => {
                    // `waiting` is dropped on return: the questions behind move up.
                    tracing::info!("the question's message was deleted: it leaves the queue");
                    self.outlet.retract(shown.take()).await;
                    return None;
                }
            }
        }
    }

    /// What a waiting question's message shows: its position, under the notes' sentences
    /// once they are found.
    fn waiting_message(&self, position: usize, instant: Option<&Answer>) -> Message {
        match instant {
            Some(instant) => layout::instant_message(&instant.text, &self.asked_in.instant_queued(position)),
            None => Message::notice(&self.question.lang.queued(position)),
        }
    }

    /// With its turn: the model's work starts; the notes' sentences are shown (once the search
    /// has them), then the model's answer streamed over them (or its stages, when there are
    /// none), then what stays, as the oracle settled it.
    async fn with_the_model(
        &self,
        mut answering: Answering,
        shown: Option<Posted<'o>>,
        slot: Slot,
    ) -> Option<(Settled, Option<Posted<'o>>)> {
        if let Some(turn) = answering.turn.take() {
            let _ = turn.send(());
        }
        let instant_first = self.desk.oracle.settings().instant;
        while instant_first && answering.instant.is_none() {
            tokio::select! {
                heard = answering.events.recv() => match heard {
                    Some(Heard::Instant(instant)) => answering.instant = Some(instant),
                    Some(Heard::Stage(_) | Heard::Text(_)) => {}
                    // Ended before its instant answer: the failure is told below.
                    None => answering.instant = Some(None),
                },
                () = self.data.lifecycle.interrupted() => {
                    self.outlet.post_or_replace(shown, &Message::notice(&self.question.lang.interrupted())).await;
                    return None;
                }
            }
        }
        let instant = answering.instant().cloned();
        let shown = match &instant {
            Some(instant) => {
                let message = layout::instant_message(&instant.text, &self.asked_in.instant_writing());
                match answering.shown {
                    // Shown while it waited: only the line under it changes, and a refused
                    // edit may be skipped.
                    true => self.outlet.show_preview(shown, &message).await,
                    // First shown now: an edit refused for a burst is tried again.
                    false => self.outlet.post_or_replace(shown, &message).await,
                }
            }
            None => shown,
        };
        // The preview owns the message while the model writes; the final layout replaces it.
        let shown = Mutex::new(shown);
        let (progress, progress_seen) = watch::channel(Progress::Waiting);
        // Stages are not shown over the notes' sentences, which stay until the model's text.
        let sink = ProgressSink { progress, stages: instant.is_none() };
        let work = async {
            while let Some(heard) = answering.events.recv().await {
                match heard {
                    Heard::Stage(stage) => sink.stage(stage),
                    Heard::Text(piece) => sink.text(&piece),
                    Heard::Instant(_) => {}
                }
            }
            // The preview ends with the answer.
            drop(sink);
            answering.finish().await;
            answering.done.take().unwrap_or(Err(WorkerGone("answers")))
        };
        let made = self.with_preview(work, &shown, progress_seen).await?;
        // The next question may start while this answer is posted.
        drop(slot);
        let shown = take_posted(&shown);
        let settled = match (made, instant) {
            (Ok(Ok(settled)), _) => settled,
            (Err(gone), Some(instant)) => {
                tracing::error!(error = %gone, "the model's answer failed; the notes' own sentences stay");
                Settled::model_failed(instant, gone.to_string())
            }
            (Ok(Err(err)), _) => return self.tell_failure(shown, Ok(err)).await,
            (Err(gone), None) => return self.tell_failure(shown, Err(gone)).await,
        };
        Some((settled, shown))
    }

    /// `work` with its text shown as it streams; `None` when the bot stops first (the asker
    /// is told).
    async fn with_preview<T>(
        &self,
        work: impl std::future::Future<Output = T>,
        shown: &Mutex<Option<Posted<'o>>>,
        progress_seen: watch::Receiver<Progress>,
    ) -> Option<T> {
        tokio::select! {
            (made, ()) = async { tokio::join!(work, preview(self.outlet, shown, progress_seen, self.question.lang)) } => Some(made),
            () = self.data.lifecycle.interrupted() => {
                self.outlet.post_or_replace(take_posted(shown), &Message::notice(&self.question.lang.interrupted())).await;
                None
            }
        }
    }

    /// Tells the asker why there is no answer; always `None`.
    async fn tell_failure<T>(&self, shown: Option<Posted<'o>>, failure: Result<AskError, WorkerGone>) -> Option<T> {
        let text = match failure {
            Ok(err) => {
                log_ask_error(&err, &self.question.place.key());
                ask_error_text(&err, self.question.lang)
            }
            Err(gone) => {
                tracing::error!(error = %gone, "no answer worker");
                self.question.lang.unexpected()
            }
        };
        self.outlet.post_or_replace(shown, &Message::notice(&text)).await;
        None
    }

    /// The final layout over the message that showed the answer being made: the text, its
    /// checked sources and buttons, and a line saying why when the notes' own sentences stay.
    async fn deliver(&self, settled: Settled, mut notice: Option<Posted<'o>>) -> Option<Answered> {
        let answer = &settled.answer;
        let lang = self.question.lang;
        let mut messages =
            layout::answer_messages(&answer.text, &answer.citations, answer.invented_citations.len(), lang);
        let missing: Vec<&str> = answer.missing_paths.iter().map(|missing| missing.path.as_str()).collect();
        layout::mark_partial_search(&mut messages, &missing, lang);
        match settled.instant_kept {
            Some(why) => layout::add_footer_note(&mut messages, &self.asked_in.instant_kept(why)),
            None if answer.fallback.is_some() => layout::add_footer_note(&mut messages, &lang.model_not_answering()),
            None => {}
        }
        // Kept for the DM before it is posted: the 👍/👎 buttons under it carry its id.
        let kept = KeptAnswer::of(&settled, self.question.audience, FrontEnd::Discord, Some(self.question.asker));
        let kept = self.desk.asked.keep(kept).await;
        if let Some(id) = kept {
            add_verdict_buttons(&mut messages, id);
        }
        let mut first_message = None;
        for (index, message) in messages.iter().enumerate() {
            if index == 0 {
                let posted = self.outlet.post_or_replace(notice.take(), message).await;
                match &posted {
                    Some(posted) => first_message = Some(Outlet::message_id(posted).await),
                    None => break,
                }
            } else if let Err(err) = self.outlet.post(message, false).await {
                log_discord_error(&err, "posting the rest of an answer");
            }
        }
        // Only an answer the asker could read joins the conversation, and stays kept.
        let Some(first_message) = first_message else {
            tracing::warn!(
                place = self.question.place.key(),
                "the answer could not be posted; it is not kept in the history"
            );
            if let Some(id) = kept {
                self.desk.asked.forget(id).await;
            }
            return None;
        };
        if settled.joins_history() {
            self.desk
                .history
                .record(self.question.place, self.question.audience, self.question.text, settled.turn_text())
                .await;
        } else {
            tracing::info!(
                place = self.question.place.key(),
                "the model did not answer this one; it is not kept in the history"
            );
        }
        Some(Answered { text: settled.answer.text, first_message })
    }
}

/// The message a preview left, taken out of its lock.
fn take_posted<'a>(shown: &Mutex<Option<Posted<'a>>>) -> Option<Posted<'a>> {
    match shown.lock() {
        Ok(mut guard) => guard.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    }
}

/// Where the answer's text and stages go while it is made.
struct ProgressSink {
    progress: watch::Sender<Progress>,
    /// Whether stages are shown: not over the notes' sentences, which stay until the model's
    /// text replaces them.
    stages: bool,
}

impl ProgressSink {
    /// The answer's text replaces the stage once it starts.
    fn text(&self, piece: &str) {
        self.progress.send_modify(|shown| match shown {
            Progress::Text(text) => text.push_str(piece),
            other => *other = Progress::Text(piece.to_string()),
        });
    }

    /// A stage never replaces text.
    fn stage(&self, stage: Stage) {
        if !self.stages {
            return;
        }
        self.progress.send_if_modified(|shown| match shown {
            Progress::Text(_) => false,
            other => {
                *other = Progress::Stage(stage);
                true
            }
        });
    }
}

/// Shows the answer as it is written: the latest text at most once per
/// [`PREVIEW_EDIT_INTERVAL`], one edit in flight, until the model is done (the progress
/// sender is dropped). An edit that fails leaves the last good preview; nothing is lost, the
/// final layout replaces it.
async fn preview<'a>(
    outlet: &Outlet<'a>,
    shown: &Mutex<Option<Posted<'a>>>,
    mut progress: watch::Receiver<Progress>,
    lang: Lang,
) {
    let mut pace = EditPace::unedited();
    while progress.changed().await.is_ok() {
        // The model finishing ends the wait: the final layout comes next at once, no preview
        // needed, and the next question's turn does not wait out the pace.
        let finished = async { while progress.changed().await.is_ok() {} };
        tokio::select! {
            () = pace.wait() => {}
            () = finished => break,
        }
        // Both at once, the pace chosen: the same, the final layout is next.
        if progress.has_changed().is_err() {
            break;
        }
        let message = match &*progress.borrow_and_update() {
            Progress::Waiting => continue,
            Progress::Stage(stage) => layout::stage_message(*stage, lang),
            Progress::Text(text) if text.trim().is_empty() => continue,
            Progress::Text(text) => layout::preview_message(text, lang),
        };
        pace.edited();
        // Never held across an await: taken out, edited, put back.
        let current = shown.lock().ok().and_then(|mut guard| guard.take());
        let updated = outlet.show_preview(current, &message).await;
        if let Ok(mut guard) = shown.lock() {
            *guard = updated;
        }
    }
}

/// What the answer's message shows while the answer is made.
#[derive(Debug, Clone, PartialEq)]
enum Progress {
    /// Nothing new (the deferral's "thinking…", the queue notice or the notes' sentences stay).
    Waiting,
    /// Before the first word: searching, then reading and writing.
    Stage(Stage),
    /// The answer so far.
    Text(String),
}

/// A source in full for `audience`, or a message saying why not. A GM-only note and a
/// missing one read the same to a player.
pub async fn source_messages_for(
    data: &Data,
    desk: &Desk,
    label: &str,
    audience: Audience,
    lang: Lang,
) -> Vec<Message> {
    let oracle = Arc::clone(&desk.oracle);
    let owned_label = label.to_string();
    let read = data
        .worker
        .run("answers", move || async move { oracle.notes().read_source(&owned_label, audience).await })
        .await;
    let read = match read {
        Ok(read) => read,
        Err(gone) => {
            tracing::error!(error = %gone, "no worker to read a source");
            return vec![Message::notice(&lang.unexpected())];
        }
    };
    match read {
        Ok(parts) if !parts.is_empty() => {
            let texts: Vec<String> = parts.into_iter().map(|stored| stored.fragment.text).collect();
            layout::source_messages(label, &texts, lang)
        }
        Ok(_) => vec![Message::notice(&lang.source_not_found(label))],
        Err(err) => {
            log_ask_error(&err, "source");
            vec![Message::notice(&ask_error_text(&err, lang))]
        }
    }
}
