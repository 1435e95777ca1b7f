//! Who may ask where: the campaign's places, the audience a place gives (GM-only notes only
//! in GM channels, their threads and the DM's direct messages; everywhere else `Player`),
//! which campaign a place belongs to, and the check every command passes first.

use poise::serenity_prelude as serenity;

use super::place::Place;
use super::{Context, Error};
use crate::config::{CampaignPlaces, DiscordConfig};
use crate::retrieve::Audience;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

pub fn command_place(ctx: Context<'_>) -> CommandPlace {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CampaignPlaces;

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
    fn each_place_belongs_to_one_campaign() {
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

    /// Each place where GM notes or any note could leak.
    #[test]
    fn the_audience_and_the_admission_follow_the_context_not_a_missing_guild() {
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
    fn a_category_in_gm_channel_ids_makes_no_channel_a_gm_channel() {
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
}
