//! Where an answer goes and how fast its message may change: a slash command's interaction
//! (while its token lives) or a message in a channel or thread, edited at most once per
//! [`PREVIEW_EDIT_INTERVAL`].

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use poise::serenity_prelude as serenity;

use crate::discord::Context;
use crate::discord::builders;
use crate::discord::errors::log_discord_error;
use crate::discord::layout::Message;

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
pub(super) struct EditPace {
    last_edit: Option<tokio::time::Instant>,
}

impl EditPace {
    /// A message just posted: its first edit waits a whole interval.
    pub(super) fn posted_now() -> EditPace {
        EditPace { last_edit: Some(tokio::time::Instant::now()) }
    }

    /// A message not edited yet: its first edit goes at once.
    pub(super) fn unedited() -> EditPace {
        EditPace { last_edit: None }
    }

    /// Until the next edit is allowed.
    pub(super) async fn wait(&self) {
        if let Some(last) = self.last_edit {
            tokio::time::sleep_until(last + PREVIEW_EDIT_INTERVAL).await;
        }
    }

    pub(super) fn edited(&mut self) {
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
    /// A question a restart interrupted, answered by the next start: through its interaction
    /// while the token lives (the deferred response is edited, as if nothing happened), else
    /// in its channel, replying to the asking message when a message asked it, or saying which
    /// question it answers when a slash command did.
    Resumed {
        http: &'a serenity::Http,
        channel: serenity::ChannelId,
        /// The interaction's id and token (a slash command).
        interaction: Option<(u64, &'a str)>,
        reply_to: Option<serenity::MessageId>,
        /// The first line of a channel message that answers a slash command's question.
        preface: String,
        original_used: std::sync::atomic::AtomicBool,
    },
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
    pub(super) fn asking_message(&self) -> Option<u64> {
        match self {
            Outlet::Command { .. } => None,
            Outlet::Thread { reply_to, .. } => Some(reply_to.get()),
            Outlet::Resumed { reply_to, .. } => reply_to.map(serenity::MessageId::get),
        }
    }

    /// Deletes a notice the bot posted (the queue position of a withdrawn question).
    pub(super) async fn retract(&self, notice: Option<Posted<'a>>) {
        let deleted = match (self, notice) {
            (Outlet::Thread { http, .. } | Outlet::Resumed { http, .. }, Some(Posted::Channel(channel, message))) => {
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
            Outlet::Resumed { interaction, .. } => {
                interaction.is_some_and(|(id, _)| interaction_token_usable(id, SystemTime::now()))
            }
        }
    }

    fn http(&self) -> &serenity::Http {
        match self {
            Outlet::Command { ctx, .. } => ctx.http(),
            Outlet::Thread { http, .. } | Outlet::Resumed { http, .. } => http,
        }
    }

    pub(super) async fn post(&self, message: &Message, first: bool) -> Result<Posted<'a>, serenity::Error> {
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
                let reference = first.then(|| builders::reply_reference(*channel, *reply_to));
                let sent = channel.send_message(*http, message.to_create_message(reference)).await?;
                Ok(Posted::Channel(sent.channel_id, sent.id))
            }
            Outlet::Resumed { http, interaction: Some((_, token)), original_used, .. }
                if self.token_usable() && !original_used.swap(true, Ordering::SeqCst) =>
            {
                use serenity::Builder as _;
                let sent = message.to_edit_response().execute(*http, token).await?;
                Ok(Posted::Original(sent.id))
            }
            Outlet::Resumed { http, channel, reply_to, .. } => {
                let reference = reply_to.filter(|_| first).map(|asking| builders::reply_reference(*channel, asking));
                let message = self.prefaced(message);
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
            (Outlet::Resumed { http, interaction: Some((_, token)), .. }, Posted::Original(id))
                if self.token_usable() =>
            {
                use serenity::Builder as _;
                let edited = message.to_edit_response().execute(*http, token).await.map(|_| ());
                (Some(Posted::Original(id)), edited)
            }
            (_, Posted::Interaction(_) | Posted::Original(_)) => match self.post(message, true).await {
                Ok(posted) => (Some(posted), Ok(())),
                Err(err) => (None, Err(err)),
            },
            (_, Posted::Channel(channel, id)) => {
                let message = self.prefaced(message);
                let edited = channel.edit_message(self.http(), id, message.to_edit_message()).await.map(|_| ());
                (Some(Posted::Channel(channel, id)), edited)
            }
        }
    }

    /// A resumed slash command's question answered in its channel says, above every message
    /// (its edits included), which question it answers; anything else is `message` itself.
    fn prefaced<'m>(&self, message: &'m Message) -> std::borrow::Cow<'m, Message> {
        match self {
            Outlet::Resumed { reply_to: None, preface, .. } if !preface.is_empty() => {
                let mut prefaced = message.clone();
                prefaced.content = format!("{preface}\n{}", message.content).trim_end().to_string();
                std::borrow::Cow::Owned(prefaced)
            }
            _ => std::borrow::Cow::Borrowed(message),
        }
    }

    pub(super) async fn message_id(posted: &Posted<'a>) -> Option<serenity::MessageId> {
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
    pub async fn post_or_replace(&self, notice: Option<Posted<'a>>, message: &Message) -> Option<Posted<'a>> {
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
    pub(super) async fn show_preview(&self, shown: Option<Posted<'a>>, message: &Message) -> Option<Posted<'a>> {
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
