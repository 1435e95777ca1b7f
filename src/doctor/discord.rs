//! Discord, as the doctor sees it: the token (set, and shaped like a bot token), the ids
//! (`guild_ids`, a DM), then what Discord itself says over REST with that token: the
//! application (`GET /oauth2/applications/@me`: its id, hence the invite URL, and its flags,
//! hence the Message Content intent) and the servers the bot is in (`GET /users/@me/guilds`).
//!
//! Plain `reqwest`, not serenity: a check is two GETs, and the doctor runs without the bot.

use std::time::Duration;

use serde::Deserialize;

use super::Check;
use crate::config::{Config, DiscordConfig};

/// Discord's REST API, as serenity reaches it (a `discord.proxy_url` replaces the origin).
pub const DISCORD_API: &str = "https://discord.com/api/v10";
/// The permissions the bot asks for in its invite, one bit each: View Channels (1 << 10),
/// Send Messages (1 << 11), Embed Links (1 << 14), Read Message History (1 << 16), Create
/// Public Threads (1 << 35), Send Messages in Threads (1 << 38). Nothing else: it never
/// moderates, and it never mentions anyone.
pub const BOT_PERMISSIONS: u64 = (1 << 10) | (1 << 11) | (1 << 14) | (1 << 16) | (1 << 35) | (1 << 38);
/// Application flag: the Message Content intent on, for a verified bot (100 servers or more).
const GATEWAY_MESSAGE_CONTENT: u64 = 1 << 18;
/// Application flag: the Message Content intent on, for an unverified bot (under 100 servers).
const GATEWAY_MESSAGE_CONTENT_LIMITED: u64 = 1 << 19;
/// How long one REST call may take: Discord answers in well under a second.
const REST_TIMEOUT: Duration = Duration::from_secs(10);
/// A bot token's first part is the bot's user id in base64: a snowflake has 17 to 20 digits.
const SNOWFLAKE_DIGITS: std::ops::RangeInclusive<usize> = 17..=20;

/// The URL that invites the application `application_id` with the bot's permissions.
pub fn invite_url(application_id: u64) -> String {
    format!(
        "https://discord.com/oauth2/authorize?client_id={application_id}&scope=bot+applications.commands&permissions={BOT_PERMISSIONS}"
    )
}

/// What is wrong with the shape of `token`, if anything: a bot token is three dot-separated
/// base64url parts, the first the bot's user id.
pub fn token_problem(token: &str) -> Option<String> {
    if token != token.trim() {
        return Some("it has spaces or a line break around it".into());
    }
    if token.starts_with("Bot ") || token.starts_with("Bearer ") {
        return Some("it starts with \"Bot \": write the token alone, the bot adds the prefix".into());
    }
    let parts: Vec<&str> = token.split('.').collect();
    let base64url =
        |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if parts.len() != 3 || !parts.iter().all(|part| base64url(part)) {
        let hint = if token.len() == 32 && base64url(token) {
            " (32 characters with no dots: that is the OAuth2 client secret, not the bot token)"
        } else if token.bytes().all(|b| b.is_ascii_digit()) {
            " (only digits: that is an id, not the bot token)"
        } else {
            ""
        };
        return Some(format!("it is not three dot-separated parts, as a bot token is{hint}"));
    }
    let id = decode_base64url(parts[0]).and_then(|bytes| String::from_utf8(bytes).ok());
    match id {
        Some(id) if SNOWFLAKE_DIGITS.contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit()) => None,
        _ => Some("its first part is not a bot's user id in base64".into()),
    }
}

/// Decodes unpadded base64url (a bot token's first part); `None` on any other character.
fn decode_base64url(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'-' | b'+' => 62,
            b'_' | b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut bytes = Vec::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for c in text.trim_end_matches('=').bytes() {
        buffer = (buffer << 6) | value(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(bytes)
}

pub async fn checks(config: &Config, options: &super::Options) -> Vec<Check> {
    let Some(discord) = &config.discord else {
        return vec![Check::skip(
            "discord",
            "Discord: not configured (the CLI answers without it; set DISCORD_TOKEN to run the bot)",
        )];
    };
    let mut checks = Vec::new();
    let token = discord.token.as_ref().map(|token| token.expose().as_str());
    match token {
        None => checks.push(
            Check::fail(
                "discord_token",
                "no Discord token",
                "set DISCORD_TOKEN (Developer Portal → your application → Bot → Reset Token)",
            )
            .blocking(),
        ),
        Some(token) => checks.push(match token_problem(token) {
            None => Check::ok("discord_token", "Discord token is set and shaped like a bot token"),
            Some(problem) => Check::fail(
                "discord_token",
                format!("the Discord token looks wrong: {problem}"),
                "copy the token again from Developer Portal → your application → Bot → Reset Token, into DISCORD_TOKEN",
            ),
        }),
    }
    checks.extend(place_checks(config));
    if let Some(token) = token {
        checks.extend(rest_checks(config, discord, token, options.discord_client.clone()).await);
    }
    checks
}

fn place_checks(config: &Config) -> Vec<Check> {
    let mut checks = Vec::new();
    for named in &config.campaigns {
        let who = if config.campaigns.len() > 1 { format!("campaign {}: ", named.name) } else { String::new() };
        let places = &named.places;
        checks.push(if places.guild_ids.is_empty() {
            Check::fail(
                "discord_guilds_listed",
                format!("{who}discord.guild_ids is empty: the bot would answer in no server"),
                "list your server in discord.guild_ids (Developer Mode on, right-click the server → Copy Server ID)",
            )
            .blocking()
        } else {
            Check::ok("discord_guilds_listed", format!("{who}{} server(s) listed in guild_ids", places.guild_ids.len()))
        });
        checks.push(if places.dm_user_ids.is_empty() && places.dm_role_ids.is_empty() {
            Check::fail(
                "discord_dm",
                format!("{who}no DM set: /reingest is refused to everyone and no direct message is answered"),
                "put your user id in discord.dm_user_ids (right-click your name → Copy User ID), or a role in dm_role_ids",
            )
        } else {
            Check::ok("discord_dm", format!("{who}the DM is set ({} user(s), {} role(s))", places.dm_user_ids.len(), places.dm_role_ids.len()))
        });
    }
    checks
}

#[derive(Deserialize)]
struct Application {
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    flags: u64,
}

#[derive(Deserialize)]
struct PartialGuild {
    id: String,
    #[serde(default)]
    name: String,
}

/// A REST call's outcome the checks tell apart.
enum Answer<T> {
    Ok(T),
    /// 401: Discord refused the token.
    Refused,
    /// Unreachable, or an answer that is no use: the detail says which.
    Failed(String),
}

struct Rest {
    client: reqwest::Client,
    base: String,
    authorization: String,
}

impl Rest {
    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> Answer<T> {
        let sent = self.client.get(format!("{}{path}", self.base)).header("Authorization", &self.authorization);
        let response = match sent.timeout(REST_TIMEOUT).send().await {
            Ok(response) => response,
            Err(err) => return Answer::Failed(format!("GET {path}: {err}")),
        };
        match response.status().as_u16() {
            200 => match response.json().await {
                Ok(value) => Answer::Ok(value),
                Err(err) => Answer::Failed(format!("GET {path}: {err}")),
            },
            401 => Answer::Refused,
            status => Answer::Failed(format!("GET {path} answered {status}")),
        }
    }
}

async fn rest_checks(
    config: &Config,
    discord: &DiscordConfig,
    token: &str,
    client: Option<reqwest::Client>,
) -> Vec<Check> {
    let base = match &discord.proxy_url {
        Some(proxy) => format!("{proxy}/api/v10"),
        None => DISCORD_API.to_string(),
    };
    let rest = Rest { client: client.unwrap_or_default(), base, authorization: format!("Bot {token}") };
    let application: Application = match rest.get("/oauth2/applications/@me").await {
        Answer::Ok(application) => application,
        Answer::Refused => {
            return vec![
                Check::fail(
                    "discord_login",
                    "Discord refused the token (401 Unauthorized): it was reset, or it is not this bot's",
                    "Developer Portal → your application → Bot → Reset Token, then put the new token in DISCORD_TOKEN",
                )
                .blocking(),
            ];
        }
        Answer::Failed(detail) => {
            return vec![Check::skip(
                "discord_login",
                format!(
                    "Discord not reachable from here ({detail}): the application, intent and server checks are skipped"
                ),
            )];
        }
    };
    let id: u64 = application.id.parse().unwrap_or(0);
    let invite = invite_url(id);
    let mut checks = vec![
        Check::ok("discord_application", format!("Discord accepts the token: application {} ({id})", application.name))
            .with_facts(serde_json::json!({ "application_id": application.id, "flags": application.flags })),
        Check::ok("discord_invite", format!("invite URL: {invite}"))
            .with_facts(serde_json::json!({ "url": invite, "permissions": BOT_PERMISSIONS })),
    ];
    checks.push(if application.flags & (GATEWAY_MESSAGE_CONTENT | GATEWAY_MESSAGE_CONTENT_LIMITED) != 0 {
        Check::ok("discord_intent", "the Message Content intent is on")
    } else {
        Check::fail(
            "discord_intent",
            "the Message Content intent is off: Discord refuses the bot's connection (it asks for that intent, to read follow-ups)",
            "Developer Portal → your application → Bot → Privileged Gateway Intents → Message Content Intent: on, then Save",
        )
        .blocking()
    });
    checks.extend(guild_checks(config, &rest, &invite).await);
    checks
}

async fn guild_checks(config: &Config, rest: &Rest, invite: &str) -> Vec<Check> {
    let guilds: Vec<PartialGuild> = match rest.get("/users/@me/guilds").await {
        Answer::Ok(guilds) => guilds,
        Answer::Refused => {
            return vec![Check::fail(
                "discord_guilds",
                "Discord refused the token listing the bot's servers (401)",
                "reset the token",
            )];
        }
        Answer::Failed(detail) => return vec![Check::skip("discord_guilds", format!("the bot's servers: {detail}"))],
    };
    let mut listed: Vec<u64> = config.campaigns.iter().flat_map(|named| named.places.guild_ids.clone()).collect();
    listed.sort_unstable();
    listed.dedup();
    listed
        .into_iter()
        .map(|guild| match guilds.iter().find(|joined| joined.id == guild.to_string()) {
            Some(joined) => Check::ok("discord_guild", format!("the bot is in server {} ({guild})", joined.name)),
            None => Check::fail(
                "discord_guild",
                format!("the bot is not in server {guild}, which guild_ids lists"),
                format!("open {invite} and pick that server (or take {guild} out of guild_ids)"),
            )
            .with_facts(serde_json::json!({ "guild_id": guild.to_string() })),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token shaped as Discord makes them (not a real one): the id 880000000000000001 in base64.
    const WELL_FORMED: &str = "ODgwMDAwMDAwMDAwMDAwMDAx.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB";

    #[test]
    fn a_bot_token_is_three_parts_whose_first_is_the_bot_id() {
        assert_eq!(token_problem(WELL_FORMED), None);
        for (token, says) in [
            (format!("Bot {WELL_FORMED}"), "\"Bot \""),
            (format!("{WELL_FORMED}\n"), "spaces"),
            ("abcdefghijklmnopqrstuvwxyz012345".to_string(), "client secret"),
            ("880000000000000001".to_string(), "an id"),
            ("bm90LWFuLWlk.GhIjKl.abcdefghijklmnop".to_string(), "user id"),
        ] {
            let problem = token_problem(&token).unwrap_or_default();
            assert!(problem.contains(says), "{token:?}: {problem}");
        }
    }

    #[test]
    fn the_invite_asks_for_the_six_permissions_and_no_other() {
        assert_eq!(BOT_PERMISSIONS, 309_237_730_304);
        assert!(invite_url(42).ends_with("client_id=42&scope=bot+applications.commands&permissions=309237730304"));
    }
}
