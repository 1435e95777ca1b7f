//! The slash commands, who may use them, and the answer flow they share with thread
//! follow-ups.
//!
//! - `/oraculo pregunta:<texto>`: defers at once (Discord's 3-second window), queues, answers
//!   with cited embeds, and opens a thread on the answer for follow-ups.
//! - `/reingest`: the campaign's DM only (a poise `check`); runs the incremental ingest in the
//!   background and reports ephemerally. Questions meanwhile read the previous index.
//! - `/fuente etiqueta:<label>`: a cited source in full, only to the asker.
//! - `/cronologia nombre:<entity>`: every session where an entity appears, in order, each
//!   with one cited line; first and last appearance marked; paged (issue 15).
//! - `/resumen [sesion]`: a cited recap of a session (default: the last one), queued like a
//!   question (issue 15).
//!
//! Access: GM-only notes are retrieved only in configured GM channels (and their threads) and
//! in direct messages from the DM; everywhere else the audience is `Player`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use poise::serenity_prelude as serenity;
use tokio::sync::watch;
use tracing::Instrument;

use super::embeds::{self, Message};
use super::errors::{ask_error_text, lang_of, log_ask_error, log_discord_error, tell};
use super::history::Place;
use super::locale::Lang;
use super::queue::WorkerGone;
use super::{Context, Data, Desk, Error, Job, ReingestSetup};
use crate::config::{CampaignPlaces, DiscordConfig};
use crate::corpus::fold;
use crate::ingest::{IngestError, IngestSummary, Quiet};
use crate::oracle::{AskRequest, Oracle, Stage};
use crate::retrieve::{Audience, Turn, TurnRole};

/// Every command, in the order `/` lists them.
pub fn commands() -> Vec<poise::Command<Data, Error>> {
    vec![oraculo(), fuente(), reingest(), cronologia(), resumen()]
}

/// Who is the campaign's DM, where GM-only notes may be read, and where the bot answers.
#[derive(Debug, Clone, Default)]
pub struct Access {
    dm_user_ids: Vec<u64>,
    dm_role_ids: Vec<u64>,
    gm_channel_ids: Vec<u64>,
    /// The only servers the bot answers in for this campaign (its `guild_ids`).
    guild_ids: Vec<u64>,
    /// Only these channels (and their threads) of those servers; empty: all of them.
    channel_ids: Vec<u64>,
}

/// Where an interaction or message happened, as Discord's interaction context says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// A server channel or thread.
    Guild,
    /// A direct message with the bot itself.
    BotDm,
    /// A group DM, or a DM between other users (a user-installed app): never answered. So is
    /// an interaction whose context Discord did not say and that has no guild.
    Private,
}

/// Where a question was asked, as far as access goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    pub surface: Surface,
    /// `None` outside servers.
    pub guild: Option<u64>,
    pub channel: u64,
    /// For a thread, the channel it was opened in; `None` for anything else (a channel's
    /// category is not its parent here: a category id never makes its channels GM channels).
    pub parent: Option<u64>,
}

/// Why the bot does not answer somewhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Barred {
    /// A server not in `guild_ids` (someone invited the bot elsewhere): nothing is answered
    /// there, and the log says so.
    #[error("a server not in discord.guild_ids")]
    UnknownGuild(u64),
    /// A direct message from someone who is not the campaign's DM: the bot cannot tell
    /// whether they belong to the table, so they are told to ask in the campaign's server.
    #[error("a direct message from someone who is not the campaign's DM")]
    DirectFromStranger,
    /// A group DM or another user's DM (user-installed app): told to ask in the server.
    #[error("a group or private message")]
    PrivateChannel,
    /// A channel of a served server that no campaign answers in (several campaigns, each
    /// with its channels): told so, ephemerally.
    #[error("a channel that belongs to no campaign")]
    NoCampaign,
}

impl Access {
    pub fn from_config(config: &DiscordConfig) -> Access {
        Access::from_places(&config.places())
    }

    pub fn from_places(places: &CampaignPlaces) -> Access {
        Access {
            dm_user_ids: places.dm_user_ids.clone(),
            dm_role_ids: places.dm_role_ids.clone(),
            gm_channel_ids: places.gm_channel_ids.clone(),
            guild_ids: places.guild_ids.clone(),
            channel_ids: places.channel_ids.clone(),
        }
    }

    /// Whether `location` (a channel, or a thread by its parent) is one this campaign names:
    /// one of its channels or GM channels.
    fn names_channel(&self, location: Location) -> bool {
        let named = |channel: u64| self.channel_ids.contains(&channel) || self.gm_channel_ids.contains(&channel);
        named(location.channel) || location.parent.is_some_and(named)
    }

    /// The DM is a configured user, or a member holding a configured role.
    pub fn is_campaign_dm(&self, user: u64, roles: &[u64]) -> bool {
        self.dm_user_ids.contains(&user) || roles.iter().any(|role| self.dm_role_ids.contains(role))
    }

    /// Whether the bot answers `user` at `location` at all (questions, sources, buttons,
    /// autocomplete, thread messages): only in the configured servers, and in direct messages
    /// only to the campaign's DM.
    pub fn admits(&self, user: u64, location: Location) -> Result<(), Barred> {
        match (location.surface, location.guild) {
            (Surface::Guild, Some(guild)) if self.guild_ids.contains(&guild) => Ok(()),
            (Surface::Guild, Some(guild)) => Err(Barred::UnknownGuild(guild)),
            (Surface::Guild, None) | (Surface::Private, _) => Err(Barred::PrivateChannel),
            (Surface::BotDm, _) if self.dm_user_ids.contains(&user) => Ok(()),
            (Surface::BotDm, _) => Err(Barred::DirectFromStranger),
        }
    }

    /// `Gm` in a GM channel of a configured server or one of its threads, and in the DM's
    /// direct messages with the bot; `Player` everywhere else. Fails closed: a place the bot
    /// does not admit is `Player` too (and is refused before this matters).
    pub fn audience(&self, user: u64, location: Location) -> Audience {
        let gm = match (location.surface, location.guild) {
            (Surface::BotDm, None) => self.dm_user_ids.contains(&user),
            (Surface::Guild, Some(guild)) => {
                self.guild_ids.contains(&guild)
                    && (self.gm_channel_ids.contains(&location.channel)
                        || location.parent.is_some_and(|parent| self.gm_channel_ids.contains(&parent)))
            }
            _ => false,
        };
        if gm { Audience::Gm } else { Audience::Player }
    }
}

/// Which campaign answers `user` at `location` (an index into `campaigns`), or why none does.
///
/// In a server: a campaign that names the channel (or the thread's parent) among its
/// channels or GM channels, else one that takes every channel of that server; a server no
/// campaign lists is refused silently, a channel of a listed server that no campaign takes
/// is [`Barred::NoCampaign`]. In the bot's direct messages: the first campaign whose DM the
/// user is. Each campaign's own rules ([`Access::admits`]) then apply.
pub fn route(campaigns: &[&Access], user: u64, location: Location) -> Result<usize, Barred> {
    if let (Surface::Guild, Some(guild)) = (location.surface, location.guild) {
        let in_guild: Vec<usize> =
            (0..campaigns.len()).filter(|&idx| campaigns[idx].guild_ids.contains(&guild)).collect();
        if in_guild.is_empty() {
            return Err(Barred::UnknownGuild(guild));
        }
        let chosen = in_guild
            .iter()
            .copied()
            .find(|&idx| campaigns[idx].names_channel(location))
            .or_else(|| in_guild.iter().copied().find(|&idx| campaigns[idx].channel_ids.is_empty()))
            .ok_or(Barred::NoCampaign)?;
        campaigns[chosen].admits(user, location)?;
        return Ok(chosen);
    }
    if location.surface == Surface::BotDm {
        if let Some(idx) = (0..campaigns.len()).find(|&idx| campaigns[idx].admits(user, location).is_ok()) {
            return Ok(idx);
        }
        return Err(Barred::DirectFromStranger);
    }
    Err(Barred::PrivateChannel)
}

/// Where a command was used: its conversation, its audience, whether an answer there may
/// open a thread.
#[derive(Debug, Clone, Copy)]
pub struct CommandPlace {
    pub place: Place,
    pub location: Location,
    pub can_open_thread: bool,
}

fn is_thread(kind: serenity::ChannelType) -> bool {
    matches!(
        kind,
        serenity::ChannelType::PublicThread | serenity::ChannelType::PrivateThread | serenity::ChannelType::NewsThread
    )
}

/// The surface Discord's `context` names; without one (older payloads), a guild means a
/// server and anything else is treated as private (never the bot's DM: fail closed).
pub fn surface_of(context: Option<serenity::InteractionContext>, guild: Option<serenity::GuildId>) -> Surface {
    match (context, guild) {
        (Some(serenity::InteractionContext::Guild), Some(_)) | (None, Some(_)) => Surface::Guild,
        (Some(serenity::InteractionContext::BotDm), None) => Surface::BotDm,
        _ => Surface::Private,
    }
}

/// Where an interaction happened, from its context, guild and the partial channel Discord
/// sends.
pub fn interaction_place(
    context: Option<serenity::InteractionContext>,
    guild: Option<serenity::GuildId>,
    channel_id: serenity::ChannelId,
    channel: Option<&serenity::PartialChannel>,
) -> CommandPlace {
    let surface = surface_of(context, guild);
    let channel_id = channel_id.get();
    let guild = guild.map(serenity::GuildId::get);
    let kind = channel.map(|c| c.kind);
    // Only a thread has a parent that counts for access; a channel's parent is its category.
    let parent = match kind {
        Some(kind) if is_thread(kind) => channel.and_then(|c| c.parent_id).map(serenity::ChannelId::get),
        _ => None,
    };
    let location = Location { surface, guild, channel: channel_id, parent };
    if surface != Surface::Guild {
        return CommandPlace { place: Place::Direct(channel_id), location, can_open_thread: false };
    }
    match kind {
        Some(kind) if is_thread(kind) => {
            CommandPlace { place: Place::Thread(channel_id), location, can_open_thread: false }
        }
        kind => CommandPlace {
            place: Place::Channel(channel_id),
            location,
            can_open_thread: matches!(
                kind,
                None | Some(serenity::ChannelType::Text) | Some(serenity::ChannelType::News)
            ),
        },
    }
}

fn command_place(ctx: Context<'_>) -> CommandPlace {
    let (context, channel) = match ctx {
        poise::Context::Application(app) => (app.interaction.context, app.interaction.channel.as_ref()),
        poise::Context::Prefix(_) => (None, None),
    };
    interaction_place(context, ctx.guild_id(), ctx.channel_id(), channel)
}

/// The check every command passes first (poise's `command_check`, so a command added later
/// cannot forget it): the place must be one the bot answers in. A refusal is an error the
/// error handler recognises ([`Barred`]): it tells the user, or says nothing in a server the
/// bot does not serve.
pub async fn place_check(ctx: Context<'_>) -> Result<bool, Error> {
    let place = command_place(ctx);
    match ctx.data().desk(ctx.author().id.get(), place.location) {
        Ok(_) => Ok(true),
        Err(barred) => Err(barred.into()),
    }
}

/// Logs a refusal by place (never the question's text).
pub fn refuse_barred(barred: Barred, user: u64) {
    match barred {
        Barred::UnknownGuild(guild) => {
            tracing::warn!(guild, user, "ignored: a server not in discord.guild_ids (someone invited the bot there?)")
        }
        Barred::DirectFromStranger | Barred::PrivateChannel => {
            tracing::info!(user, ?barred, "refused outside the campaign's server")
        }
        Barred::NoCampaign => tracing::info!(user, "refused: a channel that belongs to no campaign"),
    }
}

/// The deferred "thinking…" response, sent before any slow work; mentions off like every
/// message (poise's own `defer` sets no `allowed_mentions`).
async fn defer(ctx: Context<'_>, ephemeral: bool) -> Result<(), serenity::Error> {
    if let poise::Context::Application(app) = ctx
        && !app.has_sent_initial_response.load(Ordering::SeqCst)
    {
        app.interaction.create_response(ctx.serenity_context(), embeds::deferred_response(ephemeral)).await?;
        app.has_sent_initial_response.store(true, Ordering::SeqCst);
    }
    Ok(())
}

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

// --- /oraculo ----------------------------------------------------------------------------

/// Pregunta al oráculo de la campaña; responde citando las notas del DM.
#[poise::command(
    slash_command,
    name_localized("es-ES", "oraculo"),
    name_localized("es-419", "oraculo"),
    name_localized("en-US", "oracle"),
    name_localized("en-GB", "oracle"),
    description_localized("en-US", "Ask the campaign's oracle; it answers citing the DM's notes."),
    description_localized("en-GB", "Ask the campaign's oracle; it answers citing the DM's notes."),
    description_localized("es-ES", "Pregunta al oráculo de la campaña; responde citando las notas del DM."),
    description_localized("es-419", "Pregunta al oráculo de la campaña; responde citando las notas del DM.")
)]
pub async fn oraculo(
    ctx: Context<'_>,
    #[description = "Lo que quieres saber de la campaña"]
    #[name_localized("en-US", "question")]
    #[name_localized("en-GB", "question")]
    #[description_localized("en-US", "What you want to know about the campaign")]
    #[description_localized("en-GB", "What you want to know about the campaign")]
    #[max_length = 1000]
    pregunta: String,
) -> Result<(), Error> {
    let data = ctx.data();
    let lang = lang_of(ctx);
    let question = pregunta.trim();
    let where_asked = command_place(ctx);
    if let Some(refusal) = refuse_question(data, ctx.author().id.get(), question, lang) {
        tell(ctx, &refusal).await;
        return Ok(());
    }
    let desk = data.desk(ctx.author().id.get(), where_asked.location)?;
    defer(ctx, false).await?;
    let audience = desk.access.audience(ctx.author().id.get(), where_asked.location);
    let span = tracing::info_span!("discord.reply", campaign = %desk.name, place = ?where_asked.place, ?audience, user = ctx.author().id.get());
    async move {
        let outlet = Outlet::Command { ctx, original_used: std::sync::atomic::AtomicBool::new(false) };
        let Some(answered) = answer_question(data, &desk, &outlet, question, where_asked.place, audience, lang).await
        else {
            return;
        };
        if where_asked.can_open_thread
            && let Some(message_id) = answered.first_message
        {
            open_thread(ctx, &desk, message_id, question, &answered.text, audience, lang).await;
        }
    }
    .instrument(span)
    .await;
    Ok(())
}

/// Opens a thread on the answer, starting its history with the exchange it was opened on.
///
/// A thread started from a message takes that message's id, so its history is written
/// before the thread exists: a follow-up typed the moment it appears is already recognised.
async fn open_thread(
    ctx: Context<'_>,
    desk: &Desk,
    message_id: serenity::MessageId,
    question: &str,
    answer: &str,
    audience: Audience,
    lang: Lang,
) {
    let turns = vec![
        Turn { role: TurnRole::User, content: question.to_string() },
        Turn { role: TurnRole::Assistant, content: answer.to_string() },
    ];
    desk.history.append(Place::Thread(message_id.get()), audience, turns.clone()).await;
    let builder = serenity::CreateThread::new(embeds::thread_name(question, lang))
        .auto_archive_duration(serenity::AutoArchiveDuration::OneDay);
    match ctx.channel_id().create_thread_from_message(ctx.http(), message_id, builder).await {
        Ok(thread) if thread.id.get() != message_id.get() => {
            desk.history.append(Place::Thread(thread.id.get()), audience, turns).await;
        }
        Ok(_) => {}
        Err(err) => log_discord_error(&err, "opening a thread on an answer"),
    }
}

// --- the answer flow, shared with thread follow-ups ------------------------------------

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

// --- /fuente -------------------------------------------------------------------------------

/// Muestra entera una nota citada (solo tú la ves).
#[poise::command(
    slash_command,
    ephemeral,
    name_localized("es-ES", "fuente"),
    name_localized("es-419", "fuente"),
    name_localized("en-US", "source"),
    name_localized("en-GB", "source"),
    description_localized("en-US", "Show a cited note in full (only you see it)."),
    description_localized("en-GB", "Show a cited note in full (only you see it)."),
    description_localized("es-ES", "Muestra entera una nota citada (solo tú la ves)."),
    description_localized("es-419", "Muestra entera una nota citada (solo tú la ves).")
)]
pub async fn fuente(
    ctx: Context<'_>,
    #[description = "La etiqueta citada, p. ej. «Sesión 12»"]
    #[name_localized("en-US", "label")]
    #[name_localized("en-GB", "label")]
    #[description_localized("en-US", "The cited label, e.g. “Session 12”")]
    #[description_localized("en-GB", "The cited label, e.g. “Session 12”")]
    #[autocomplete = "autocomplete_label"]
    #[max_length = 200]
    etiqueta: String,
) -> Result<(), Error> {
    let data = ctx.data();
    let lang = lang_of(ctx);
    let place = command_place(ctx);
    if let Err(wait) = data.queue.check_source_rate(ctx.author().id.get()) {
        tell(ctx, &lang.sources_rate_limited(wait.as_secs().max(1))).await;
        return Ok(());
    }
    let desk = data.desk(ctx.author().id.get(), place.location)?;
    defer(ctx, true).await?;
    let audience = desk.access.audience(ctx.author().id.get(), place.location);
    for message in source_messages_for(data, &desk, etiqueta.trim(), audience, lang).await {
        ctx.send(message.to_reply(true)).await?;
    }
    Ok(())
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

/// Labels the asker may read that contain what was typed (accents and case ignored).
async fn autocomplete_label(ctx: Context<'_>, partial: &str) -> Vec<String> {
    let location = command_place(ctx).location;
    let desk = match ctx.data().desk(ctx.author().id.get(), location) {
        Ok(desk) => desk,
        Err(barred) => {
            refuse_barred(barred, ctx.author().id.get());
            return Vec::new();
        }
    };
    let audience = desk.access.audience(ctx.author().id.get(), location);
    let oracle = Arc::clone(&desk.oracle);
    let listed = ctx.data().worker.run("answers", move || async move { oracle.sources(audience).await.ok() }).await;
    let Ok(Some(sources)) = listed else {
        return Vec::new();
    };
    let typed = fold(partial.trim());
    sources
        .into_iter()
        .map(|source| source.label)
        .filter(|label| embeds::discord_len(label) <= 100 && fold(label).contains(&typed))
        .take(25)
        .collect()
}

// --- /reingest -----------------------------------------------------------------------------

/// The check on `/reingest`: only the campaign's DM (a configured user, or role).
async fn is_campaign_dm(ctx: Context<'_>) -> Result<bool, Error> {
    let roles: Vec<u64> = match ctx {
        poise::Context::Application(app) => {
            app.interaction.member.as_ref().map(|member| member.roles.iter().map(|role| role.get()).collect())
        }
        poise::Context::Prefix(_) => None,
    }
    .unwrap_or_default();
    // The DM of the campaign of the place it is used in (place_check has routed it already).
    let Ok(desk) = ctx.data().desk(ctx.author().id.get(), command_place(ctx).location) else {
        return Ok(false);
    };
    Ok(desk.access.is_campaign_dm(ctx.author().id.get(), &roles))
}

/// Vuelve a leer las notas de la campaña (solo el DM).
#[poise::command(
    slash_command,
    ephemeral,
    check = "is_campaign_dm",
    name_localized("es-ES", "reindexar"),
    name_localized("es-419", "reindexar"),
    name_localized("en-US", "reingest"),
    name_localized("en-GB", "reingest"),
    description_localized("en-US", "Read the campaign's notes again (DM only)."),
    description_localized("en-GB", "Read the campaign's notes again (DM only)."),
    description_localized("es-ES", "Vuelve a leer las notas de la campaña (solo el DM)."),
    description_localized("es-419", "Vuelve a leer las notas de la campaña (solo el DM).")
)]
pub async fn reingest(ctx: Context<'_>) -> Result<(), Error> {
    let data = ctx.data();
    let lang = lang_of(ctx);
    let desk = data.desk(ctx.author().id.get(), command_place(ctx).location)?;
    defer(ctx, true).await?;
    let poise::Context::Application(app) = ctx else {
        return Ok(());
    };
    let edit = |text: String| {
        let interaction = app.interaction.clone();
        async move {
            if let Err(err) = interaction.edit_response(ctx.http(), Message::notice(&text).to_edit_response()).await {
                log_discord_error(&err, "reporting on a reingest");
            }
        }
    };
    let Some(job) = data.lifecycle.begin() else {
        edit(lang.shutting_down()).await;
        return Ok(());
    };
    let Ok(running) = Arc::clone(&desk.reingest.running).try_lock_owned() else {
        edit(lang.reingest_already_running()).await;
        return Ok(());
    };
    edit(lang.reingest_running()).await;
    tracing::info!(user = ctx.author().id.get(), campaign = %desk.name, "reingest started from Discord");

    // The ingest outlives this command: it reports by editing the deferred reply while its
    // token lives (15 minutes), by direct message after.
    let http = Arc::clone(&ctx.serenity_context().http);
    let interaction = app.interaction.clone();
    let oracle = Arc::clone(&desk.oracle);
    let setup = Arc::clone(&desk.reingest);
    let lifecycle = Arc::clone(&data.lifecycle);
    let worker = data.ingest_worker.clone();
    tokio::spawn(
        async move {
            let _job: Job = job;
            let _running = running;
            let ingest = worker.run("ingest", move || async move { run_reingest(&oracle, &setup).await });
            let outcome = tokio::select! {
                outcome = ingest => Some(outcome),
                () = lifecycle.interrupted() => None,
            };
            let text = match outcome {
                Some(Ok(Ok(summary))) => lang.reingest_summary(&summary),
                Some(Ok(Err(err))) if err.is_busy() => lang.reingest_already_running(),
                Some(Ok(Err(err))) => {
                    tracing::error!(error = %err, "reingest failed; the previous index stays in use");
                    lang.reingest_failed()
                }
                Some(Err(gone)) => {
                    tracing::error!(error = %gone, "reingest could not run");
                    lang.reingest_failed()
                }
                None => lang.interrupted(),
            };
            // The annotation pass can outlast the interaction's token: then the report goes to
            // the DM by direct message.
            if interaction_token_usable(interaction.id.get(), SystemTime::now()) {
                if let Err(err) = interaction.edit_response(&http, Message::notice(&text).to_edit_response()).await {
                    log_discord_error(&err, "reporting a finished reingest");
                }
            } else {
                let sent = match interaction.user.id.create_dm_channel(&http).await {
                    Ok(direct) => direct.id.send_message(&http, Message::notice(&text).to_create_message(None)).await,
                    Err(err) => Err(err),
                };
                if let Err(err) = sent {
                    log_discord_error(&err, "reporting a finished reingest by direct message");
                }
            }
        }
        .instrument(tracing::info_span!("discord.reingest")),
    );
    Ok(())
}

/// The ingest `oraculo ingest` runs: incremental, committed at once at the end (questions keep
/// reading the previous index until then), then the annotation pass.
pub async fn run_reingest(oracle: &Oracle, setup: &ReingestSetup) -> Result<IngestSummary, IngestError> {
    crate::app::ingest_and_annotate(
        oracle.index_dir(),
        &setup.campaign_dir,
        &setup.campaign,
        oracle.embedder().as_ref(),
        crate::app::Annotator::Model(oracle.chat().as_ref()),
        setup.batch_size,
        &Quiet,
    )
    .await
}

// --- /cronologia and /resumen (issue 15) --------------------------------------------------

/// What a timeline or a recap failure tells the asker.
fn time_error_text(error: &crate::timeline::TimeError, lang: Lang) -> String {
    use crate::timeline::TimeError;
    match error {
        TimeError::Ask(err) => ask_error_text(err, lang),
        TimeError::Index(_) => lang.search_failed(),
        TimeError::UnknownEntity { name, suggestions } => lang.unknown_entity(name, suggestions),
        TimeError::NoSessions => lang.no_sessions(),
        TimeError::MissingSession { asked, highest } => lang.missing_session(*asked, highest.0),
    }
}

/// Las sesiones en las que aparece alguien o algo, en orden, cada una con su línea citada.
#[poise::command(
    slash_command,
    name_localized("es-ES", "cronologia"),
    name_localized("es-419", "cronologia"),
    name_localized("en-US", "timeline"),
    name_localized("en-GB", "timeline"),
    description_localized(
        "en-US",
        "Every session where someone or something appears, in order, each with a cited line."
    ),
    description_localized(
        "en-GB",
        "Every session where someone or something appears, in order, each with a cited line."
    ),
    description_localized(
        "es-ES",
        "Las sesiones en las que aparece alguien o algo, en orden, cada una con su línea citada."
    ),
    description_localized(
        "es-419",
        "Las sesiones en las que aparece alguien o algo, en orden, cada una con su línea citada."
    )
)]
pub async fn cronologia(
    ctx: Context<'_>,
    #[description = "Un personaje, lugar, facción u objeto del compendio"]
    #[name_localized("en-US", "name")]
    #[name_localized("en-GB", "name")]
    #[description_localized("en-US", "A character, place, faction or item of the compendium")]
    #[description_localized("en-GB", "A character, place, faction or item of the compendium")]
    #[autocomplete = "autocomplete_entity"]
    #[max_length = 100]
    nombre: String,
) -> Result<(), Error> {
    let data = ctx.data();
    let lang = lang_of(ctx);
    let location = command_place(ctx).location;
    let desk = data.desk(ctx.author().id.get(), location)?;
    defer(ctx, false).await?;
    let audience = desk.access.audience(ctx.author().id.get(), location);
    let oracle = Arc::clone(&desk.oracle);
    let name = nombre.trim().to_string();
    let made = data
        .worker
        .run("answers", move || async move { crate::timeline::timeline(&oracle, &name, audience).await })
        .instrument(tracing::info_span!("discord.timeline", ?audience))
        .await;
    let messages = match made {
        Ok(Ok(timeline)) => embeds::timeline_messages(&timeline, lang),
        Ok(Err(err)) => {
            tracing::info!(error = %err, "timeline refused");
            vec![Message::notice(&time_error_text(&err, lang))]
        }
        Err(gone) => {
            tracing::error!(error = %gone, "no worker for a timeline");
            vec![Message::notice(&lang.unexpected())]
        }
    };
    for message in messages {
        ctx.send(message.to_reply(false)).await?;
    }
    Ok(())
}

/// Compendium names and aliases containing what was typed (accents and case ignored). The
/// compendium holds no entity from secret notes, so every name may be offered.
async fn autocomplete_entity(ctx: Context<'_>, partial: &str) -> Vec<String> {
    let desk = match ctx.data().desk(ctx.author().id.get(), command_place(ctx).location) {
        Ok(desk) => desk,
        Err(barred) => {
            refuse_barred(barred, ctx.author().id.get());
            return Vec::new();
        }
    };
    let oracle = Arc::clone(&desk.oracle);
    let typed = partial.to_string();
    let listed = ctx
        .data()
        .worker
        .run("answers", move || async move { oracle.entity_names_matching(&typed, 25).await.ok() })
        .await;
    match listed {
        Ok(Some(names)) => names.into_iter().filter(|name| embeds::discord_len(name) <= 100).collect(),
        _ => Vec::new(),
    }
}

/// Resume una sesión (por defecto, la última) para empezar la partida, citando las notas.
#[poise::command(
    slash_command,
    name_localized("es-ES", "resumen"),
    name_localized("es-419", "resumen"),
    name_localized("en-US", "recap"),
    name_localized("en-GB", "recap"),
    description_localized("en-US", "Recap a session (by default the last one) to open the night, citing the notes."),
    description_localized("en-GB", "Recap a session (by default the last one) to open the night, citing the notes."),
    description_localized(
        "es-ES",
        "Resume una sesión (por defecto, la última) para empezar la partida, citando las notas."
    ),
    description_localized(
        "es-419",
        "Resume una sesión (por defecto, la última) para empezar la partida, citando las notas."
    )
)]
pub async fn resumen(
    ctx: Context<'_>,
    #[description = "El número de la sesión (por defecto, la última)"]
    #[name_localized("en-US", "session")]
    #[name_localized("en-GB", "session")]
    #[description_localized("en-US", "The session's number (by default, the last one)")]
    #[description_localized("en-GB", "The session's number (by default, the last one)")]
    #[min = 1]
    #[max = 9999]
    sesion: Option<u32>,
) -> Result<(), Error> {
    let data = ctx.data();
    let lang = lang_of(ctx);
    if let Some(refusal) = refuse_question(data, ctx.author().id.get(), "/resumen", lang) {
        tell(ctx, &refusal).await;
        return Ok(());
    }
    let location = command_place(ctx).location;
    let desk = data.desk(ctx.author().id.get(), location)?;
    defer(ctx, false).await?;
    let audience = desk.access.audience(ctx.author().id.get(), location);
    let Some(_job) = data.lifecycle.begin() else {
        ctx.send(Message::notice(&lang.shutting_down()).to_reply(false)).await?;
        return Ok(());
    };
    // One model at a time: a recap waits its turn like a question.
    let _slot = match data.queue.enter() {
        super::queue::Admission::Now(slot) => slot,
        super::queue::Admission::Queued(waiting) => {
            tokio::select! {
                slot = waiting.start() => match slot {
                    Ok(slot) => slot,
                    Err(_) => {
                        ctx.send(Message::notice(&lang.interrupted()).to_reply(false)).await?;
                        return Ok(());
                    }
                },
                () = data.lifecycle.interrupted() => {
                    ctx.send(Message::notice(&lang.interrupted()).to_reply(false)).await?;
                    return Ok(());
                }
            }
        }
    };
    let oracle = Arc::clone(&desk.oracle);
    let language = match lang {
        Lang::Es => crate::corpus::LabelLanguage::Es,
        Lang::En => crate::corpus::LabelLanguage::En,
    };
    let made = data
        .worker
        .run("answers", move || async move { crate::timeline::recap(&oracle, sesion, audience, language, None).await })
        .instrument(tracing::info_span!("discord.recap", ?audience, session = sesion));
    let made = tokio::select! {
        made = made => made,
        () = data.lifecycle.interrupted() => {
            ctx.send(Message::notice(&lang.interrupted()).to_reply(false)).await?;
            return Ok(());
        }
    };
    let messages = match made {
        Ok(Ok(recap)) => {
            let text =
                format!("**{}**\n\n{}", lang.recap_heading(recap.session.0, recap.is_last), recap.answer.text.trim());
            embeds::answer_messages(&text, &recap.answer.citations, recap.answer.invented_citations.len(), lang)
        }
        Ok(Err(err)) => {
            tracing::info!(error = %err, "recap refused");
            vec![Message::notice(&time_error_text(&err, lang))]
        }
        Err(gone) => {
            tracing::error!(error = %gone, "no worker for a recap");
            vec![Message::notice(&lang.unexpected())]
        }
    };
    for message in messages {
        ctx.send(message.to_reply(false)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GUILD: u64 = 1;

    fn access() -> Access {
        Access {
            dm_user_ids: vec![10],
            dm_role_ids: vec![77],
            gm_channel_ids: vec![500],
            guild_ids: vec![GUILD],
            channel_ids: Vec::new(),
        }
    }

    fn guild(channel: u64, parent: Option<u64>) -> Location {
        Location { surface: Surface::Guild, guild: Some(GUILD), channel, parent }
    }

    #[test]
    fn issue_14_each_place_belongs_to_one_campaign() {
        let places = |guilds: &[u64], channels: &[u64], gm: &[u64], dms: &[u64]| {
            Access::from_places(&CampaignPlaces {
                dm_user_ids: dms.to_vec(),
                dm_role_ids: Vec::new(),
                gm_channel_ids: gm.to_vec(),
                guild_ids: guilds.to_vec(),
                channel_ids: channels.to_vec(),
            })
        };
        let a = places(&[1], &[10], &[], &[5]);
        let b = places(&[1], &[], &[20], &[6]);
        let c = places(&[2], &[30], &[], &[6]);
        let campaigns = [&a, &b, &c];
        let at = |guild: u64, channel: u64, parent: Option<u64>| Location {
            surface: Surface::Guild,
            guild: Some(guild),
            channel,
            parent,
        };
        let table: &[(Location, Result<usize, Barred>)] = &[
            (at(1, 10, None), Ok(0)),
            (at(1, 99, Some(10)), Ok(0)), // a thread of A's channel
            (at(1, 11, None), Ok(1)),     // B takes the rest of server 1
            (at(1, 20, None), Ok(1)),     // B's GM channel
            (at(2, 30, None), Ok(2)),
            (at(2, 31, None), Err(Barred::NoCampaign)),
            (at(3, 10, None), Err(Barred::UnknownGuild(3))),
        ];
        for (location, expected) in table {
            assert_eq!(route(&campaigns, 1, *location), *expected, "{location:?}");
        }
        let direct = Location { surface: Surface::BotDm, guild: None, channel: 1, parent: None };
        assert_eq!(route(&campaigns, 6, direct), Ok(1), "the first campaign whose DM writes");
        assert_eq!(route(&campaigns, 9, direct), Err(Barred::DirectFromStranger));
        let group = Location { surface: Surface::Private, guild: None, channel: 1, parent: None };
        assert_eq!(route(&campaigns, 5, group), Err(Barred::PrivateChannel));
    }

    #[test]
    fn only_the_campaign_dm_may_reingest() {
        let access = access();
        assert!(access.is_campaign_dm(10, &[]), "a configured user");
        assert!(access.is_campaign_dm(11, &[3, 77]), "a member with a configured role");
        assert!(!access.is_campaign_dm(11, &[3]), "anyone else");
        assert!(!access.is_campaign_dm(11, &[]));
        assert!(!Access::default().is_campaign_dm(10, &[77]), "nobody is the DM until configured");
    }

    #[test]
    fn gm_notes_only_in_gm_channels_their_threads_and_the_dms_direct_messages() {
        let access = access();
        assert_eq!(access.audience(11, guild(500, None)), Audience::Gm);
        assert_eq!(access.audience(11, guild(900, Some(500))), Audience::Gm, "a thread of a GM channel");
        assert_eq!(access.audience(10, guild(600, None)), Audience::Player, "the DM in a player channel");
        assert_eq!(access.audience(10, guild(601, Some(600))), Audience::Player);
        let direct = |channel| Location { surface: Surface::BotDm, guild: None, channel, parent: None };
        assert_eq!(access.audience(10, direct(42)), Audience::Gm, "the DM's direct messages");
        assert_eq!(access.audience(11, direct(43)), Audience::Player, "a player's direct messages");
        assert_eq!(access.audience(11, direct(500)), Audience::Player, "a DM channel id is not a GM channel");
    }

    /// Issue 12, items 7 to 9: each place where GM notes or any note could leak.
    #[test]
    fn issue_12_the_audience_and_the_admission_follow_the_context_not_a_missing_guild() {
        let access = access();
        // A group DM (or another user's DM, through a user install): no guild, not the bot's DM.
        let group = Location { surface: Surface::Private, guild: None, channel: 42, parent: None };
        assert_eq!(access.audience(10, group), Audience::Player, "the DM in a group DM is a player there");
        assert_eq!(access.admits(10, group), Err(Barred::PrivateChannel));
        // A server the bot was invited to without being configured: nothing at all, even in a
        // channel whose id is a GM channel's.
        let stranger = Location { surface: Surface::Guild, guild: Some(2), channel: 500, parent: None };
        assert_eq!(access.admits(11, stranger), Err(Barred::UnknownGuild(2)));
        assert_eq!(access.audience(10, stranger), Audience::Player);
        // The bot's DM: the campaign's DM only.
        let direct = Location { surface: Surface::BotDm, guild: None, channel: 43, parent: None };
        assert_eq!(access.admits(10, direct), Ok(()));
        assert_eq!(access.admits(11, direct), Err(Barred::DirectFromStranger));
        assert_eq!(access.admits(11, guild(600, None)), Ok(()), "a configured server");
        // A payload that names no context and no guild is private, never the bot's DM.
        assert_eq!(surface_of(None, None), Surface::Private);
        assert_eq!(surface_of(Some(serenity::InteractionContext::PrivateChannel), None), Surface::Private);
        assert_eq!(surface_of(Some(serenity::InteractionContext::BotDm), None), Surface::BotDm);
        assert_eq!(surface_of(None, Some(serenity::GuildId::new(GUILD))), Surface::Guild);
    }

    #[test]
    fn issue_12_a_category_in_gm_channel_ids_makes_no_channel_a_gm_channel() {
        let access = access();
        let channel = |kind: u8, parent: u64| {
            serde_json::from_value::<serenity::PartialChannel>(serde_json::json!({
                "id": "600", "type": kind, "parent_id": parent.to_string(),
            }))
            .unwrap()
        };
        let guild_id = Some(serenity::GuildId::new(GUILD));
        let context = Some(serenity::InteractionContext::Guild);
        // A text channel filed under the category 500 (listed by mistake as a GM channel).
        let in_category = interaction_place(context, guild_id, serenity::ChannelId::new(600), Some(&channel(0, 500)));
        assert_eq!(in_category.location.parent, None, "a category is not a parent for access");
        assert_eq!(access.audience(11, in_category.location), Audience::Player);
        // A thread of the GM channel 500 still is one.
        let thread = interaction_place(context, guild_id, serenity::ChannelId::new(600), Some(&channel(11, 500)));
        assert_eq!(access.audience(11, thread.location), Audience::Gm);
    }

    #[test]
    fn the_place_of_an_interaction_decides_the_conversation_and_the_thread() {
        let channel = |kind, parent: Option<u64>| {
            serde_json::from_value::<serenity::PartialChannel>(serde_json::json!({
                "id": "300", "type": kind, "parent_id": parent.map(|p| p.to_string()),
            }))
            .unwrap()
        };
        let guild = Some(serenity::GuildId::new(1));
        let in_guild = Some(serenity::InteractionContext::Guild);
        let id = serenity::ChannelId::new(300);
        let text = interaction_place(in_guild, guild, id, Some(&channel(0, None)));
        assert_eq!(text.place, Place::Channel(300));
        assert!(text.can_open_thread);
        let thread = interaction_place(in_guild, guild, id, Some(&channel(11, Some(200))));
        assert_eq!(thread.place, Place::Thread(300));
        assert_eq!(thread.location.parent, Some(200));
        assert!(!thread.can_open_thread, "no thread inside a thread");
        let voice = interaction_place(in_guild, guild, id, Some(&channel(2, None)));
        assert!(!voice.can_open_thread);
        let direct = interaction_place(Some(serenity::InteractionContext::BotDm), None, id, Some(&channel(1, None)));
        assert_eq!(direct.place, Place::Direct(300));
        assert!(!direct.can_open_thread);
    }

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

    #[test]
    fn commands_are_localised_in_spanish_and_english() {
        for command in commands() {
            assert!(command.name_localizations.contains_key("en-US"), "{}", command.name);
            assert!(command.name_localizations.contains_key("es-ES"), "{}", command.name);
            assert!(command.description_localizations.contains_key("es-ES"), "{}", command.name);
            assert!(command.description_localizations.contains_key("en-US"), "{}", command.name);
            for parameter in &command.parameters {
                assert!(parameter.name_localizations.contains_key("en-US"), "{}", parameter.name);
                assert!(parameter.description_localizations.contains_key("en-US"), "{}", parameter.name);
            }
        }
        let names: Vec<String> = commands().into_iter().map(|c| c.name).collect();
        assert_eq!(names, ["oraculo", "fuente", "reingest", "cronologia", "resumen"]);
    }
}
