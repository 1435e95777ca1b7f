//! `[discord]`: the bot's token, its DMs and GM channels, its queue and its history.

use anyhow::bail;
use serde::Deserialize;

use super::{CampaignPlaces, Redacted};

/// Questions answered at once: one local GPU serves one generation at a time, and a second
/// concurrent request to Ollama only slows both down.
pub const DEFAULT_DISCORD_CONCURRENCY: usize = 1;
/// Questions one Discord user may ask per minute: enough for a conversation, too few for a
/// flood that would queue the whole table behind one player.
pub const DEFAULT_QUESTIONS_PER_MINUTE: u32 = 4;
/// Questions that may wait for the model at once: each holds its prepared notes (tens of KB)
/// and a Discord interaction; a burst beyond this is told to come back rather than buffered
/// without bound. The time bound (no wait over ten minutes) is usually the tighter one.
pub const DEFAULT_QUEUE_LIMIT: usize = 50;
/// Turns (a question or an answer each) of a channel's or thread's history sent with a
/// follow-up: the answer prompt keeps at most this many anyway (`prompt::MAX_HISTORY_MESSAGES`).
pub const DEFAULT_HISTORY_TURNS: usize = crate::prompt::MAX_HISTORY_MESSAGES;
/// The most history turns a conversation may be configured to carry: beyond this the notes
/// are crowded out of the context window.
pub const MAX_HISTORY_TURNS: usize = 40;
/// The environment variables the Discord token is read from, first found wins.
pub const DISCORD_TOKEN_VARS: &[&str] = &["ORACULO_DISCORD_TOKEN", "DISCORD_TOKEN"];

/// `[discord]`: the bot (`oraculo bot`). Ids are Discord snowflakes (integers).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDiscord {
    /// Prefer `DISCORD_TOKEN` / `ORACULO_DISCORD_TOKEN`: a file gets shared, an env var less so.
    pub token: Option<Redacted<String>>,
    pub dm_user_ids: Option<Vec<u64>>,
    pub dm_role_ids: Option<Vec<u64>>,
    pub gm_channel_ids: Option<Vec<u64>>,
    pub guild_ids: Option<Vec<u64>>,
    pub concurrency: Option<usize>,
    pub questions_per_minute: Option<u32>,
    pub queue_limit: Option<usize>,
    pub history_turns: Option<usize>,
    pub proxy_url: Option<String>,
}

/// The Discord bot's settings, validated.
#[derive(Debug, Clone)]
pub struct DiscordConfig {
    /// From `ORACULO_DISCORD_TOKEN`, `DISCORD_TOKEN`, else `discord.token`; `None`: the bot
    /// refuses to start, saying where to put one.
    pub token: Option<Redacted<String>>,
    /// Users who are the campaign's DM: they may `/reingest`, and their direct messages to
    /// the bot see GM-only notes.
    pub dm_user_ids: Vec<u64>,
    /// Members holding any of these roles are the DM too.
    pub dm_role_ids: Vec<u64>,
    /// Channels (and their threads) where GM-only notes may be retrieved.
    pub gm_channel_ids: Vec<u64>,
    /// Guilds the commands are registered in (instantly); empty: registered globally.
    pub guild_ids: Vec<u64>,
    /// Questions answered at once; the rest wait in a queue.
    pub concurrency: usize,
    /// Per user; 0: no limit.
    pub questions_per_minute: u32,
    /// Questions that may wait for the model at once; more are told the bot is busy.
    pub queue_limit: usize,
    /// History turns sent with each question of a channel or thread.
    pub history_turns: usize,
    /// A Discord REST proxy (`twilight-http-proxy`, or a test's stand-in): REST calls go there,
    /// and it does the rate limiting.
    pub proxy_url: Option<String>,
}

impl DiscordConfig {
    /// `[discord]`'s ids as one campaign's places (the single-campaign config).
    pub fn places(&self) -> CampaignPlaces {
        CampaignPlaces {
            dm_user_ids: self.dm_user_ids.clone(),
            dm_role_ids: self.dm_role_ids.clone(),
            gm_channel_ids: self.gm_channel_ids.clone(),
            guild_ids: self.guild_ids.clone(),
            channel_ids: Vec::new(),
        }
    }
}

/// Validates `[discord]`. Present when the section is, or when a token is in the environment.
pub(super) fn discord_config(
    raw: Option<RawDiscord>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<DiscordConfig>> {
    let env_token = DISCORD_TOKEN_VARS.iter().find_map(|key| env(key)).map(Redacted::new);
    let raw = match (raw, &env_token) {
        (Some(raw), _) => raw,
        (None, Some(_)) => RawDiscord::default(),
        (None, None) => return Ok(None),
    };
    let token = env_token.or(raw.token).filter(|token| !token.expose().trim().is_empty());
    let concurrency = raw.concurrency.unwrap_or(DEFAULT_DISCORD_CONCURRENCY);
    if concurrency == 0 {
        bail!("discord.concurrency must be above 0 (1 for a single local GPU)");
    }
    let queue_limit = raw.queue_limit.unwrap_or(DEFAULT_QUEUE_LIMIT);
    if queue_limit == 0 {
        bail!("discord.queue_limit must be above 0 (questions that may wait for the model at once)");
    }
    let history_turns = raw.history_turns.unwrap_or(DEFAULT_HISTORY_TURNS);
    if history_turns > MAX_HISTORY_TURNS {
        bail!("discord.history_turns = {history_turns}: at most {MAX_HISTORY_TURNS}");
    }
    let ids = |key: &str, ids: Option<Vec<u64>>| -> anyhow::Result<Vec<u64>> {
        let ids = ids.unwrap_or_default();
        if ids.contains(&0) {
            bail!("discord.{key} holds 0, which is no Discord id (copy ids with Developer Mode on)");
        }
        Ok(ids)
    };
    if let Some(url) = &raw.proxy_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        bail!("discord.proxy_url = {url:?}: expected an http:// or https:// address");
    }
    Ok(Some(DiscordConfig {
        token,
        dm_user_ids: ids("dm_user_ids", raw.dm_user_ids)?,
        dm_role_ids: ids("dm_role_ids", raw.dm_role_ids)?,
        gm_channel_ids: ids("gm_channel_ids", raw.gm_channel_ids)?,
        guild_ids: ids("guild_ids", raw.guild_ids)?,
        concurrency,
        questions_per_minute: raw.questions_per_minute.unwrap_or(DEFAULT_QUESTIONS_PER_MINUTE),
        queue_limit,
        history_turns,
        proxy_url: raw.proxy_url.map(|url| url.trim_end_matches('/').to_string()),
    }))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::DEFAULT_DISCORD_CONCURRENCY;
    use crate::config::RawConfig;
    use crate::config::tests::check;

    #[test]
    fn discord_token_prefers_the_environment_and_never_prints() {
        let text = "[discord]\ntoken = \"file-token-123\"\ndm_user_ids = [42]\n";
        let config = check(text, &[("HOME", "/h")]).unwrap();
        let discord = config.discord.expect("a [discord] section");
        assert_eq!(discord.token.as_ref().map(|t| t.expose().as_str()), Some("file-token-123"));
        assert_eq!(discord.dm_user_ids, vec![42]);
        assert_eq!(discord.concurrency, DEFAULT_DISCORD_CONCURRENCY);
        assert!(!format!("{discord:?}").contains("file-token-123"), "{discord:?}");

        let config = check(text, &[("HOME", "/h"), ("DISCORD_TOKEN", "env-token-456")]).unwrap();
        let discord = config.discord.unwrap();
        assert_eq!(discord.token.as_ref().map(|t| t.expose().as_str()), Some("env-token-456"));
        assert_eq!(format!("{}", discord.token.as_ref().unwrap()), "[redacted]");

        // A token in the environment alone is enough for the bot; no section, no token: CLI only.
        let config = check("", &[("HOME", "/h"), ("ORACULO_DISCORD_TOKEN", "t")]).unwrap();
        assert!(config.discord.is_some_and(|d| d.dm_user_ids.is_empty() && d.token.is_some()));
        assert!(check("", &[("HOME", "/h")]).unwrap().discord.is_none());

        let raw = RawConfig::parse(text, Path::new("config.toml")).unwrap();
        assert!(!format!("{raw:?}").contains("file-token-123"), "{raw:?}");
    }

    #[test]
    fn discord_errors_name_the_key() {
        for (text, key) in [
            ("[discord]\nconcurrency = 0\n", "discord.concurrency"),
            ("[discord]\nhistory_turns = 1000\n", "discord.history_turns"),
            ("[discord]\ndm_user_ids = [0]\n", "discord.dm_user_ids"),
            ("[discord]\nproxy_url = \"127.0.0.1:9\"\n", "discord.proxy_url"),
            ("[discord]\nadmins = [1]\n", "admins"),
        ] {
            let err = check(text, &[("HOME", "/h")]).unwrap_err();
            assert!(format!("{err:#}").contains(key), "{text}: {err:#}");
        }
    }
}
