//! The bot against the stand-ins, shared by the Discord tests and the benches: the test
//! config, the usual table (the chronicle indexed, the bot connected), the running bot, and
//! what tells its requests apart.

use std::path::Path;

use oraculo::config::{CliOverrides, Config, RawConfig};
use serde_json::{Value, json};

use crate::fake_discord::{APP_ID, FakeDiscord, GUILD_ID, Recorded, WAIT, text_channel};
use crate::fake_ollama::FakeOllama;
use crate::harness::{Scratch, campaign_config, ingest_dir, ollama_embedder};

pub(crate) const EMBED_MODEL: &str = "fake-embed";
pub(crate) const CHAT_MODEL: &str = "fake-chat";
pub(crate) const TOKEN: &str = "test-token-do-not-log";
pub(crate) const DM: u64 = 700_000_000_000_000_001;
pub(crate) const PLAYER: u64 = 700_000_000_000_000_002;
pub(crate) const CHANNEL: u64 = 700_000_000_000_000_100;

pub(crate) const CRONICA: &str = "# Crónica de Galerna

## Sesión 1 — La feria
El archiduque Ardo huyó al norte tras la feria de las redes, con la corona robada.

## Sesión 2 — La tormenta
Una tormenta hundió el barco del archiduque frente al faro. @everyone <@&123>
";

pub(crate) const FIRST_QUESTION: &str = "¿Qué pasó con el archiduque?";

pub(crate) fn config(scratch: &Scratch, ollama: &FakeOllama, discord: &FakeDiscord) -> Config {
    config_with(scratch, ollama, discord, "")
}

/// The test config with `extra` lines added to its `[discord]` section.
pub(crate) fn config_with(scratch: &Scratch, ollama: &FakeOllama, discord: &FakeDiscord, extra: &str) -> Config {
    let campaign =
        format!("[campaign]\ndir = \"{}\"\nsecret_paths = [\"Secretos\"]\n", scratch.campaign.path().display());
    parse_config(&config_toml(scratch.data.path(), &campaign, ollama, discord, extra))
}

/// The test config: `campaigns` (a `[campaign]` section or `[[campaigns]]` entries), the
/// Ollama stand-in for embeddings and answers, the Discord stand-in, `extra` `[discord]` lines.
pub(crate) fn config_toml(
    data: &Path,
    campaigns: &str,
    ollama: &FakeOllama,
    discord: &FakeDiscord,
    extra: &str,
) -> String {
    ollama_config_toml(data, campaigns, ollama, CHAT_MODEL, &discord_toml(TOKEN, discord, extra))
}

/// A config of `campaigns`, the Ollama stand-in for embeddings and answers (by `chat_model`),
/// and `discord`, its `[discord]` section ([`discord_toml`]).
pub(crate) fn ollama_config_toml(
    data: &Path,
    campaigns: &str,
    ollama: &FakeOllama,
    chat_model: &str,
    discord: &str,
) -> String {
    format!(
        r#"
data_dir = "{data}"
{campaigns}
[embedder]
backend = "ollama"
model = "{EMBED_MODEL}"
batch_size = 4
window_words = 250
[ollama]
url = "{ollama}"
timeout_secs = 30
retries = 0
[chat]
backend = "ollama"
model = "{chat_model}"
{discord}"#,
        data = data.display(),
        ollama = ollama.url(),
    )
}

/// The `[discord]` section: the bot's `token`, the DM, the stand-in's server and address,
/// `extra` lines.
pub(crate) fn discord_toml(token: &str, discord: &FakeDiscord, extra: &str) -> String {
    let rest = discord.rest_url();
    format!(
        "[discord]\ntoken = \"{token}\"\ndm_user_ids = [{DM}]\nguild_ids = [{GUILD_ID}]\nproxy_url = \"{rest}\"\n{extra}\n"
    )
}

/// A `[campaign]` section for the campaign in `dir`.
pub(crate) fn campaign_toml(dir: &Path) -> String {
    format!("[campaign]\ndir = \"{}\"\n", dir.display())
}

pub(crate) fn parse_config(text: &str) -> Config {
    let raw = RawConfig::parse(text, Path::new("config.toml")).unwrap();
    Config::from_layers(raw, &|_| None, &CliOverrides::default()).unwrap()
}

/// The usual table: the chronicle indexed through the Ollama stand-in, the bot connected to
/// the Discord stand-in with `extra` `[discord]` lines, its commands registered.
pub(crate) struct Table {
    /// Holds the campaign and data folders for as long as the bot runs.
    _scratch: Scratch,
    pub(crate) ollama: FakeOllama,
    pub(crate) discord: FakeDiscord,
    pub(crate) bot: RunningBot,
}

impl Table {
    pub(crate) async fn start(extra: &str) -> Table {
        Table::start_reaching(extra, Reach::Proxy).await
    }

    pub(crate) async fn start_reaching(extra: &str, reach: Reach) -> Table {
        Table::start_adjusted(extra, reach, |_| {}).await
    }

    /// A table over a campaign already indexed in `scratch`, the bot started with `config`.
    pub(crate) async fn from_parts(
        scratch: Scratch,
        ollama: FakeOllama,
        discord: FakeDiscord,
        config: Config,
    ) -> Table {
        oraculo::logging::init();
        let bot = RunningBot::start(config);
        wait_for_guild_commands(&discord).await;
        Table { _scratch: scratch, ollama, discord, bot }
    }

    /// [`Table::start_reaching`] with the config changed by `adjust` (a `[chat]` setting).
    pub(crate) async fn start_adjusted(extra: &str, reach: Reach, adjust: impl FnOnce(&mut Config)) -> Table {
        oraculo::logging::init();
        let (scratch, ollama) = indexed_campaign(&[("Crónica.md", CRONICA)], &[]).await;
        let discord = FakeDiscord::start().await;
        let mut config = config_with(&scratch, &ollama, &discord, extra);
        adjust(&mut config);
        if let Reach::Proxy = reach {
            return Table::from_parts(scratch, ollama, discord, config).await;
        }
        // As serenity ships: no proxy, so its own rate limiter paces every request.
        if let Some(discord) = config.discord.as_mut() {
            discord.proxy_url = None;
        }
        let bot = RunningBot::start_with_client(config, Some(discord.https_client()));
        wait_for_guild_commands(&discord).await;
        Table { _scratch: scratch, ollama, discord, bot }
    }
}

/// A campaign of `files` (`secret_paths` its secret folders), indexed beforehand through the
/// Ollama stand-in that the bot will embed with and answer through.
/// Warnings (a payload serenity could not read, a failed request) show when a test fails.
pub(crate) async fn indexed_campaign(files: &[(&str, &str)], secret_paths: &[&str]) -> (Scratch, FakeOllama) {
    oraculo::logging::init();
    let scratch = Scratch::new(files);
    let ollama = FakeOllama::start(&[EMBED_MODEL, CHAT_MODEL]).await;
    let embedder = ollama_embedder(&ollama, EMBED_MODEL).await;
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(secret_paths), &embedder).await.unwrap();
    (scratch, ollama)
}

/// How the bot reaches the Discord stand-in's REST API.
pub(crate) enum Reach {
    /// Through `discord.proxy_url` (plain HTTP; serenity's limiter off, as with a proxy).
    Proxy,
    /// As `https://discord.com` over TLS, serenity's own rate limiter on.
    DiscordCom,
}

/// `/oraculo` with the first question, asked by the player in the usual channel; its token.
pub(crate) fn ask_first_question(discord: &FakeDiscord) -> String {
    ask_in_channel(discord, FIRST_QUESTION)
}

/// `/oraculo` asked by the player in the usual channel; its token.
pub(crate) fn ask_in_channel(discord: &FakeDiscord, question: &str) -> String {
    player_command(discord, "oraculo", "pregunta", question)
}

/// `/command` with its one text `option` set to `value`, used by the player in the usual
/// channel; its token.
pub(crate) fn player_command(discord: &FakeDiscord, command: &str, option: &str, value: &str) -> String {
    let options = json!([{ "name": option, "type": 3, "value": value }]);
    discord.slash_command(PLAYER, &[], text_channel(CHANNEL), command, options)
}

/// The interaction's messages with embeds, in the order they reached Discord, with when.
pub(crate) fn answer_bodies(discord: &FakeDiscord, token: &str) -> Vec<(Value, std::time::Instant)> {
    discord
        .requests_with_arrivals()
        .into_iter()
        .filter(|(r, _)| is_webhook_for(token, "PATCH")(r) || is_webhook_for(token, "POST")(r))
        .filter(|(r, _)| r.body["embeds"].as_array().is_some_and(|embeds| !embeds.is_empty()))
        .map(|(r, at)| (r.body, at))
        .collect()
}

/// The bot running against the stand-ins until [`RunningBot::stop`].
pub(crate) struct RunningBot {
    stop: tokio::sync::oneshot::Sender<()>,
    handle: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl RunningBot {
    pub(crate) fn start(config: Config) -> RunningBot {
        RunningBot::start_with_client(config, None)
    }

    /// The bot reaching Discord's REST API with `rest_client` (the stand-in as discord.com).
    pub(crate) fn start_with_client(config: Config, rest_client: Option<reqwest::Client>) -> RunningBot {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handle = tokio::spawn(oraculo::discord::run_with_client(config, rest_client, async move {
            let _ = stopped.await;
        }));
        RunningBot { stop, handle }
    }

    /// Signals the shutdown and waits for a clean exit.
    pub(crate) async fn stop(self) {
        self.stop.send(()).unwrap();
        let stopped = tokio::time::timeout(WAIT, self.handle).await.expect("the bot stops").unwrap();
        stopped.unwrap();
    }
}

/// Connected: the commands registered in the configured guild.
pub(crate) async fn wait_for_guild_commands(discord: &FakeDiscord) -> Recorded {
    discord
        .wait_for("the guild commands", |r| {
            r.method == "PUT" && r.path == format!("/applications/{APP_ID}/guilds/{GUILD_ID}/commands")
        })
        .await
}

pub(crate) fn is_callback_for(token: &str) -> impl Fn(&Recorded) -> bool + '_ {
    move |r| {
        r.method == "POST" && r.path.starts_with("/interactions/") && r.path.ends_with(&format!("/{token}/callback"))
    }
}

pub(crate) fn is_webhook_for<'a>(token: &'a str, method: &'static str) -> impl Fn(&Recorded) -> bool + 'a {
    move |r| r.method == method && r.path.starts_with(&format!("/webhooks/{APP_ID}/{token}"))
}

/// A message still being made: a stage (🔎 searching, 📚 reading the notes), the text so far
/// or the notes' own sentences while the model writes (✍️ in its footer), or while it waits for
/// its turn (⏳); the final layout has none of them.
pub(crate) fn is_preview(body: &Value) -> bool {
    let body = body.to_string();
    ["✍️", "🔎", "📚", "⏳"].iter().any(|marker| body.contains(marker))
}

/// The answer's final layout (checked citations, sources, buttons) for an interaction: after
/// the previews, the message is edited (or posted) one last time without the writing footer.
pub(crate) fn is_final_answer_for(token: &str) -> impl Fn(&Recorded) -> bool + '_ {
    move |r| {
        (is_webhook_for(token, "POST")(r) || is_webhook_for(token, "PATCH")(r))
            && r.body["embeds"].as_array().is_some_and(|embeds| !embeds.is_empty())
            && !is_preview(&r.body)
    }
}

/// The text of every embed of a message body: titles, descriptions, field names and values.
pub(crate) fn embed_text(body: &Value) -> String {
    let mut text = String::new();
    for embed in body["embeds"].as_array().into_iter().flatten() {
        for key in ["title", "description"] {
            text.push_str(embed[key].as_str().unwrap_or(""));
            text.push('\n');
        }
        for field in embed["fields"].as_array().into_iter().flatten() {
            text.push_str(field["name"].as_str().unwrap_or(""));
            text.push('\n');
            text.push_str(field["value"].as_str().unwrap_or(""));
            text.push('\n');
        }
    }
    text
}

/// A message (not a preview) the bot posted in `channel`: an answer's final layout there.
pub(crate) fn is_final_message_in(channel: u64) -> impl Fn(&Recorded) -> bool {
    move |r: &Recorded| {
        r.path.starts_with(&format!("/channels/{channel}/messages"))
            && r.message_body().is_some()
            && !is_preview(&r.body)
    }
}

/// The final layout (not a preview) of an answer posted in `CHANNEL` that says `words`.
pub(crate) fn final_saying(words: &'static str) -> impl Fn(&Recorded) -> bool {
    move |r: &Recorded| {
        r.path.starts_with(&format!("/channels/{CHANNEL}/messages"))
            && !is_preview(&r.body)
            && embed_text(&r.body).contains(words)
    }
}
