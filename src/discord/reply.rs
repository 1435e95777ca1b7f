//! Answering a question: where the answer goes (`Outlet`: a slash command's interaction,
//! or a message in a thread or channel), the pace of its edits, the wait in the queue, and
//! the answer's flow: the notes' own sentences first (the instant answer), then the model's
//! answer streamed into the same message, then the final layout with its sources.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use poise::serenity_prelude as serenity;
use tokio::sync::watch;

use super::embeds::{self, Message};
use super::errors::{ask_error_text, log_ask_error, log_discord_error};
use super::history::Place;
use super::locale::Lang;
use super::queue::WorkerGone;
use super::{Context, Data, Desk};
use crate::oracle::{AskRequest, Stage};
use crate::retrieve::{Audience, Turn};

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

/// How long an interaction's token works after the interaction is created (Discord's rule):
/// follow-ups and edits through it fail after that.
pub const INTERACTION_TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Stop using an interaction's token this long before it expires: an answer's messages, its
/// edits and its thread must all go out before then, and clocks drift.
pub const INTERACTION_TOKEN_MARGIN: Duration = Duration::from_secs(60);
/// How often the answer's message is edited while the model writes it: Discord allows about
/// five edits in five seconds per channel; one a second leaves room for other answers.
pub const PREVIEW_EDIT_INTERVAL: Duration = Duration::from_secs(1);

/// The pace of one edited message (a queue notice, an answer's preview): at most one edit per
/// [`PREVIEW_EDIT_INTERVAL`]. The one throttle every edited message keeps.
#[derive(Debug, Clone, Copy)]
struct EditPace {
    last_edit: Option<tokio::time::Instant>,
}

impl EditPace {
    /// A message just posted: its first edit waits a whole interval.
    fn posted_now() -> EditPace {
        EditPace { last_edit: Some(tokio::time::Instant::now()) }
    }

    /// A message not edited yet: its first edit goes at once.
    fn unedited() -> EditPace {
        EditPace { last_edit: None }
    }

    /// Until the next edit is allowed.
    async fn wait(&self) {
        if let Some(last) = self.last_edit {
            tokio::time::sleep_until(last + PREVIEW_EDIT_INTERVAL).await;
        }
    }

    fn edited(&mut self) {
        self.last_edit = Some(tokio::time::Instant::now());
    }
}
/// Discord's epoch (2015-01-01) in Unix milliseconds: a snowflake's top bits count from it.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// When a snowflake (an interaction id) was made.
pub fn snowflake_time(id: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis((id >> 22) + DISCORD_EPOCH_MS)
}

/// Whether an interaction's token may still be used for a message that must arrive.
pub fn interaction_token_usable(interaction_id: u64, now: SystemTime) -> bool {
    let expires = snowflake_time(interaction_id) + INTERACTION_TOKEN_LIFETIME;
    now + INTERACTION_TOKEN_MARGIN < expires
}

/// Where an answer goes.
pub enum Outlet<'a> {
    /// A slash command: its first message replaces the deferred response (`@original`), the
    /// rest are follow-ups, while its token lives; then ordinary messages in its channel with
    /// the bot's own token.
    Command { ctx: Context<'a>, original_used: std::sync::atomic::AtomicBool },
    /// A message in one of the bot's threads: the first message replies to it.
    Thread { http: &'a serenity::Http, channel: serenity::ChannelId, reply_to: serenity::MessageId },
}

/// A message the bot posted, to edit later.
pub enum Posted<'a> {
    /// The deferred response, edited (`@original`).
    Original(serenity::MessageId),
    /// A follow-up through the interaction's webhook.
    Interaction(poise::ReplyHandle<'a>),
    /// An ordinary channel message.
    Channel(serenity::ChannelId, serenity::MessageId),
}

impl<'a> Outlet<'a> {
    /// The message that asked the question, when a message did (not a slash command).
    fn asking_message(&self) -> Option<u64> {
        match self {
            Outlet::Command { .. } => None,
            Outlet::Thread { reply_to, .. } => Some(reply_to.get()),
        }
    }

    /// Deletes a notice the bot posted (the queue position of a withdrawn question).
    async fn retract(&self, notice: Option<Posted<'a>>) {
        let deleted = match (self, notice) {
            (Outlet::Thread { http, .. }, Some(Posted::Channel(channel, message))) => {
                channel.delete_message(http, message).await
            }
            (Outlet::Command { ctx, .. }, Some(Posted::Channel(channel, message))) => {
                channel.delete_message(ctx.http(), message).await
            }
            (Outlet::Command { ctx, .. }, Some(Posted::Interaction(handle))) => handle.delete(*ctx).await,
            _ => Ok(()),
        };
        if let Err(err) = deleted {
            log_discord_error(&err, "deleting a withdrawn question's notice");
        }
    }

    fn token_usable(&self) -> bool {
        match self {
            Outlet::Command { ctx, .. } => interaction_token_usable(ctx.id(), SystemTime::now()),
            Outlet::Thread { .. } => false,
        }
    }

    fn http(&self) -> &serenity::Http {
        match self {
            Outlet::Command { ctx, .. } => ctx.http(),
            Outlet::Thread { http, .. } => http,
        }
    }

    async fn post(&self, message: &Message, first: bool) -> Result<Posted<'a>, serenity::Error> {
        match self {
            Outlet::Command { ctx, original_used } if self.token_usable() => {
                if let poise::Context::Application(app) = ctx
                    && !original_used.swap(true, Ordering::SeqCst)
                {
                    let sent = app.interaction.edit_response(ctx.http(), message.to_edit_response()).await?;
                    return Ok(Posted::Original(sent.id));
                }
                Ok(Posted::Interaction(ctx.send(message.to_reply(false)).await?))
            }
            Outlet::Command { ctx, .. } => {
                tracing::info!("the interaction's token is expiring: answering with a channel message");
                let sent = ctx.channel_id().send_message(ctx.http(), message.to_create_message(None)).await?;
                Ok(Posted::Channel(sent.channel_id, sent.id))
            }
            Outlet::Thread { http, channel, reply_to } => {
                let reference = first.then(|| embeds::reply_reference(*channel, *reply_to));
                let sent = channel.send_message(*http, message.to_create_message(reference)).await?;
                Ok(Posted::Channel(sent.channel_id, sent.id))
            }
        }
    }

    /// Edits `posted` into `message`; a webhook message whose token is expiring cannot be
    /// edited any more, so `message` is posted anew instead. The handle comes back whether
    /// the edit worked or not (an edit that failed leaves the message as it was).
    async fn replace(
        &self,
        posted: Posted<'a>,
        message: &Message,
    ) -> (Option<Posted<'a>>, Result<(), serenity::Error>) {
        match (self, posted) {
            (Outlet::Command { ctx, .. }, Posted::Interaction(handle)) if self.token_usable() => {
                let edited = handle.edit(*ctx, message.to_reply(false)).await;
                (Some(Posted::Interaction(handle)), edited)
            }
            (Outlet::Command { ctx: poise::Context::Application(app), .. }, Posted::Original(id))
                if self.token_usable() =>
            {
                let edited = app.interaction.edit_response(app.http(), message.to_edit_response()).await.map(|_| ());
                (Some(Posted::Original(id)), edited)
            }
            (_, Posted::Interaction(_) | Posted::Original(_)) => match self.post(message, true).await {
                Ok(posted) => (Some(posted), Ok(())),
                Err(err) => (None, Err(err)),
            },
            (_, Posted::Channel(channel, id)) => {
                let edited = channel.edit_message(self.http(), id, message.to_edit_message()).await.map(|_| ());
                (Some(Posted::Channel(channel, id)), edited)
            }
        }
    }

    async fn message_id(posted: &Posted<'a>) -> Option<serenity::MessageId> {
        match posted {
            Posted::Interaction(handle) => match handle.message().await {
                Ok(message) => Some(message.id),
                Err(err) => {
                    log_discord_error(&err, "reading the posted answer");
                    None
                }
            },
            Posted::Original(id) | Posted::Channel(_, id) => Some(*id),
        }
    }

    /// Posts `message`, replacing `notice` (a "queued" message, a preview) when there is one.
    /// An edit refused for a burst (429) is tried again after a second; an edit that fails
    /// for good gives way to a new message, so the message always arrives.
    async fn post_or_replace(&self, notice: Option<Posted<'a>>, message: &Message) -> Option<Posted<'a>> {
        let Some(notice) = notice else {
            return match self.post(message, true).await {
                Ok(posted) => Some(posted),
                Err(err) => {
                    log_discord_error(&err, "posting a message");
                    None
                }
            };
        };
        let (mut kept, mut edited) = self.replace(notice, message).await;
        if let Err(err) = &edited
            && is_rate_limited(err)
            && let Some(posted) = kept.take()
        {
            tokio::time::sleep(RATE_LIMITED_RETRY).await;
            (kept, edited) = self.replace(posted, message).await;
        }
        match edited {
            Ok(()) => kept,
            Err(err) => {
                log_discord_error(&err, "editing a message; posting it anew");
                match self.post(message, true).await {
                    Ok(posted) => Some(posted),
                    Err(err) => {
                        log_discord_error(&err, "posting a message");
                        kept
                    }
                }
            }
        }
    }

    /// Shows a preview: an edit that fails (a 429 in a burst) is skipped, and the next one
    /// carries the latest text.
    async fn show_preview(&self, shown: Option<Posted<'a>>, message: &Message) -> Option<Posted<'a>> {
        let Some(shown) = shown else {
            return self.post_or_replace(None, message).await;
        };
        let (kept, edited) = self.replace(shown, message).await;
        if let Err(err) = edited {
            tracing::debug!(error = %err, "a preview edit was refused; the next one carries the latest text");
        }
        kept
    }
}

/// How long to wait before editing again after a 429.
const RATE_LIMITED_RETRY: Duration = Duration::from_secs(1);

/// Whether Discord (or the REST proxy) refused a request for its rate limit.
fn is_rate_limited(error: &serenity::Error) -> bool {
    matches!(
        error,
        serenity::Error::Http(serenity::HttpError::UnsuccessfulRequest(response))
            if response.status_code.as_u16() == 429
    )
}

/// What an answered question left behind.
pub struct Answered {
    pub text: String,
    /// The first message of the answer (a thread opens on it).
    pub first_message: Option<serenity::MessageId>,
}

/// Queues, answers and posts one question; every path ends with a message to the asker.
/// `None` when no answer was posted (an error or an interruption was, instead). While the
/// model writes, the answer's message shows the text so far, edited about once a second.
pub async fn answer_question(
    data: &Data,
    desk: &Arc<Desk>,
    outlet: &Outlet<'_>,
    question: &str,
    place: Place,
    audience: Audience,
    lang: Lang,
) -> Option<Answered> {
    let Some(_job) = data.lifecycle.begin() else {
        outlet.post_or_replace(None, &Message::notice(&lang.shutting_down())).await;
        return None;
    };
    let mut notice = None;
    // A question asked by a message leaves the queue if that message is deleted.
    let mut withdrawal = outlet.asking_message().map(|message| data.withdrawals.watch(message));
    let slot = match data.queue.enter() {
        super::queue::Admission::Now(slot) => slot,
        super::queue::Admission::Queued(waiting) => {
            tracing::info!(position = waiting.position(), "question queued");
            let mut waiting = waiting;
            notice = outlet.post_or_replace(None, &Message::notice(&lang.queued(waiting.position()))).await;
            // The notice follows the queue: its position is edited as the questions before
            // it are answered or leave, at most once per PREVIEW_EDIT_INTERVAL (the latest
            // position; a refused edit is skipped, the next one carries it).
            let mut moved_to: Option<usize> = None;
            let mut pace = EditPace::posted_now();
            loop {
                let due = async {
                    match moved_to {
                        Some(_) => pace.wait().await,
                        None => std::future::pending::<()>().await,
                    }
                };
                tokio::select! {
                    event = waiting.next() => match event {
                        Ok(super::queue::QueueEvent::Started(slot)) => break slot,
                        Ok(super::queue::QueueEvent::Moved(position)) => moved_to = Some(position),
                        Err(_) => {
                            outlet.post_or_replace(notice, &Message::notice(&lang.interrupted())).await;
                            return None;
                        }
                    },
                    () = due => {
                        if let Some(position) = moved_to.take() {
                            notice = outlet.show_preview(notice, &Message::notice(&lang.queued(position))).await;
                            pace.edited();
                        }
                    }
                    () = data.lifecycle.interrupted() => {
                        outlet.post_or_replace(notice, &Message::notice(&lang.interrupted())).await;
                        return None;
                    }
                    () = async {
                        match withdrawal.as_mut() {
                            Some(withdrawal) => withdrawal.withdrawn().await,
                            None => std::future::pending::<()>().await,
                        }
                    } => {
                        // `waiting` is dropped on return: the questions behind move up.
                        tracing::info!("the question's message was deleted: it leaves the queue");
                        outlet.retract(notice).await;
                        return None;
                    }
                }
            }
        }
    };
    // Started: deleting the question no longer stops it (its answer is on its way).
    drop(withdrawal.take());
    let history = desk.history.recent(place, audience).await;
    // The preview owns the message while the model writes; the final layout replaces it.
    let shown = std::sync::Mutex::new(notice);

    let (progress, progress_seen) = watch::channel(Progress::Waiting);
    let asked = tokio::select! {
        (asked, ()) = async {
            tokio::join!(ask(data, desk, question, history, audience, progress), preview(outlet, &shown, progress_seen, lang))
        } => asked,
        () = data.lifecycle.interrupted() => {
            outlet.post_or_replace(take_posted(&shown), &Message::notice(&lang.interrupted())).await;
            return None;
        }
    };
    let mut notice = take_posted(&shown);
    // The next question may start while this answer is posted.
    drop(slot);
    let answer = match asked {
        Ok(Ok(answer)) => answer,
        Ok(Err(err)) => {
            log_ask_error(&err, &place.key());
            outlet.post_or_replace(notice, &Message::notice(&ask_error_text(&err, lang))).await;
            return None;
        }
        Err(gone) => {
            tracing::error!(error = %gone, "no answer worker");
            outlet.post_or_replace(notice, &Message::notice(&lang.unexpected())).await;
            return None;
        }
    };
    let mut messages = embeds::answer_messages(&answer.text, &answer.citations, answer.invented_citations.len(), lang);
    let missing: Vec<&str> = answer.missing_paths.iter().map(|missing| missing.path.as_str()).collect();
    embeds::mark_partial_search(&mut messages, &missing, lang);
    if answer.fallback.is_some() {
        embeds::add_footer_note(&mut messages, &lang.model_not_answering());
    }
    let mut first_message = None;
    let mut delivered = false;
    for (index, message) in messages.iter().enumerate() {
        let posted = if index == 0 {
            outlet.post_or_replace(notice.take(), message).await
        } else {
            match outlet.post(message, false).await {
                Ok(posted) => Some(posted),
                Err(err) => {
                    log_discord_error(&err, "posting the rest of an answer");
                    None
                }
            }
        };
        if index == 0
            && let Some(posted) = &posted
        {
            delivered = true;
            first_message = Outlet::message_id(posted).await;
        }
    }
    // Only an answer the asker could read joins the conversation.
    if !delivered {
        tracing::warn!(place = place.key(), "the answer could not be posted; it is not kept in the history");
        return None;
    }
    if answer.joins_history() {
        desk.history.record(place, audience, question, &answer.text).await;
    } else {
        tracing::info!(place = place.key(), "the model failed on this answer; it is not kept in the history");
    }
    Some(Answered { text: answer.text, first_message })
}

/// The message a preview left, taken out of its lock.
fn take_posted<'a>(shown: &std::sync::Mutex<Option<Posted<'a>>>) -> Option<Posted<'a>> {
    match shown.lock() {
        Ok(mut guard) => guard.take(),
        Err(poisoned) => poisoned.into_inner().take(),
    }
}

/// Shows the answer as it is written: the latest text at most once per
/// [`PREVIEW_EDIT_INTERVAL`], one edit in flight, until the model is done (the progress
/// sender is dropped). An edit that fails leaves the last good preview; nothing is lost, the
/// final layout replaces it.
async fn preview<'a>(
    outlet: &Outlet<'a>,
    shown: &std::sync::Mutex<Option<Posted<'a>>>,
    mut progress: watch::Receiver<Progress>,
    lang: Lang,
) {
    let mut pace = EditPace::unedited();
    while progress.changed().await.is_ok() {
        pace.wait().await;
        // The model finished while waiting: the final layout comes next, no preview needed.
        if progress.has_changed().is_err() {
            break;
        }
        let message = match &*progress.borrow_and_update() {
            Progress::Waiting => continue,
            Progress::Stage(stage) => embeds::stage_message(*stage, lang),
            Progress::Text(text) if text.trim().is_empty() => continue,
            Progress::Text(text) => embeds::preview_message(text, lang),
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
    /// Nothing yet (the deferral's "thinking…", or the queue notice, stays).
    Waiting,
    /// Before the first word: searching, then reading and writing.
    Stage(Stage),
    /// The answer so far.
    Text(String),
}

/// The oracle's answer, computed on the answer worker (its future is not `Send`); the text
/// so far goes to `progress` as it streams.
async fn ask(
    data: &Data,
    desk: &Desk,
    question: &str,
    history: Vec<Turn>,
    audience: Audience,
    progress: watch::Sender<Progress>,
) -> Result<Result<crate::oracle::Answer, crate::oracle::AskError>, WorkerGone> {
    let oracle = Arc::clone(&desk.oracle);
    let question = question.to_string();
    data.worker
        .run("answers", move || async move {
            // The answer's text replaces the stage once it starts; a stage never replaces text.
            let sink = |piece: &str| {
                progress.send_modify(|shown| match shown {
                    Progress::Text(text) => text.push_str(piece),
                    other => *other = Progress::Text(piece.to_string()),
                })
            };
            let on_stage = |stage: Stage| {
                progress.send_if_modified(|shown| match shown {
                    Progress::Text(_) => false,
                    other => {
                        *other = Progress::Stage(stage);
                        true
                    }
                });
            };
            let request = AskRequest { question: &question, history: &history, audience };
            oracle.ask_in_stages(&request, &on_stage, Some(&sink)).await
        })
        .await
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
    let read =
        data.worker.run("answers", move || async move { oracle.read_source(&owned_label, audience).await }).await;
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
            embeds::source_messages(label, &texts, lang)
        }
        Ok(_) => vec![Message::notice(&lang.source_not_found(label))],
        Err(err) => {
            log_ask_error(&err, "source");
            vec![Message::notice(&ask_error_text(&err, lang))]
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interaction_token_is_used_until_a_minute_before_its_15_minutes() {
        // 2024-05-01T20:00:00Z as a snowflake.
        let created = UNIX_EPOCH + Duration::from_secs(1_714_593_600);
        let id = ((1_714_593_600_000u64 - DISCORD_EPOCH_MS) << 22) | 42;
        assert_eq!(snowflake_time(id), created);
        assert!(interaction_token_usable(id, created));
        assert!(interaction_token_usable(id, created + Duration::from_secs(13 * 60)));
        assert!(!interaction_token_usable(id, created + Duration::from_secs(14 * 60 + 1)), "inside the margin");
        assert!(!interaction_token_usable(id, created + Duration::from_secs(16 * 60)));
    }
}
