//! Configuration, read once and validated before any work starts.
//!
//! Precedence, lowest to highest: built-in defaults → `config.toml` → `ORACULO_*` environment
//! variables → command-line flags. Two stages, as in ripgrep: [`RawConfig`] is a faithful
//! parse (unknown keys rejected, everything optional); [`Config`] is validated and ready.
//!
//! This file loads the layers and holds the whole; each section is read and validated in its
//! own file: `campaign.rs` (the notes, the watch, `[[campaigns]]`), `models.rs` (the embedder
//! and the chat model), `discord.rs` (the bot) and `feedback.rs` (what is kept of the questions
//! asked).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

mod campaign;
mod discord;
mod feedback;
mod models;

pub use campaign::{
    CampaignConfig, CampaignPlaces, DEFAULT_IGNORED, DEFAULT_MAX_NOTE_BYTES, DEFAULT_SECRET_PATHS,
    DEFAULT_WATCH_DEBOUNCE_MS, DEFAULT_WATCH_POLL_MS, MIN_WATCH_POLL_MS, NamedCampaign, RawCampaign, RawNamedCampaign,
    RawSessionPattern, WatchConfig, WatchMode,
};
pub use discord::{
    DEFAULT_DISCORD_CONCURRENCY, DEFAULT_HISTORY_TURNS, DEFAULT_QUESTIONS_PER_MINUTE, DISCORD_TOKEN_VARS,
    DiscordConfig, MAX_HISTORY_TURNS, RawDiscord,
};
pub use feedback::{DEFAULT_FEEDBACK_KEEP_DAYS, FeedbackConfig, MAX_FEEDBACK_KEEP_DAYS, RawFeedback};
pub use models::{
    AnswerConfig, ChatConfig, DEFAULT_ANSWER_DEADLINE_SECS, DEFAULT_ANSWER_SECONDS, DEFAULT_CHAT_MAX_TOKENS,
    DEFAULT_EMBEDDED_N_CTX, DEFAULT_KEEP_ALIVE, DEFAULT_OLLAMA_CHAT_MODEL, DEFAULT_OLLAMA_EMBED_MODEL,
    DEFAULT_OLLAMA_URL, DEFAULT_OPENAI_URL, DEFAULT_SERVER_N_CTX, EmbedderConfig, MIN_ANSWER_SECONDS, RawChat,
    RawEmbedder, RawOllama,
};

use campaign::{campaign_config, named_campaigns};
use discord::discord_config;
use feedback::feedback_config;
use models::{answer_config, chat_config, embedder_config};

/// A value never printed: the Discord token (and the OpenAI-compatible server's API key).
pub use crate::redacted::Redacted;

/// `config.toml` as written. Every key optional; unknown keys are an error naming the key.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub data_dir: Option<PathBuf>,
    pub campaign: Option<RawCampaign>,
    /// `[[campaigns]]`: several campaigns in one bot, each with its places.
    pub campaigns: Option<Vec<RawNamedCampaign>>,
    pub embedder: Option<RawEmbedder>,
    pub ollama: Option<RawOllama>,
    pub chat: Option<RawChat>,
    pub discord: Option<RawDiscord>,
    pub feedback: Option<RawFeedback>,
}

/// Validated configuration. Sub-configs are passed explicitly to each stage.
#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    /// The campaign the CLI works on: `[campaign]`, or the `[[campaigns]]` entry that
    /// `--campaign` names (by name or folder), else the first.
    pub campaign: CampaignConfig,
    /// Every campaign the bot serves, each with its places: `[[campaigns]]`, or the one
    /// campaign of `[campaign]` with `[discord]`'s ids. Never empty.
    pub campaigns: Vec<NamedCampaign>,
    pub embedder: EmbedderConfig,
    pub chat: ChatConfig,
    /// The answer budget every generation asks for, in tokens (`chat.max_tokens`).
    pub chat_max_tokens: usize,
    /// How answers are written (`chat.answer_mode`) and, on a CPU, how long one may take
    /// (`chat.answer_seconds`).
    pub answer: AnswerConfig,
    /// `None`: no `[discord]` section and no token in the environment (CLI only).
    pub discord: Option<DiscordConfig>,
    /// What is kept of the questions asked (`[feedback]`), and for how long.
    pub feedback: FeedbackConfig,
}

/// Overrides from the command line, the highest layer: which campaign, and where its index
/// and the configuration are. Every command that reads a campaign takes these flags (the CLI's
/// commands, `bot` and `mcp` flatten this one declaration).
#[derive(Debug, Default, Clone, clap::Args)]
pub struct CliOverrides {
    /// The campaign's notes folder, or a [[campaigns]] entry's name (default: the config's
    /// campaign, for `mcp` every one of them; else the embedded sample campaign).
    #[arg(long = "campaign", value_name = "CAMPAIGN")]
    pub campaign_dir: Option<PathBuf>,
    /// Where indexes and models live (default: ORACULO_DATA, else ~/.local/share/oraculo).
    #[arg(long = "data", value_name = "DATA")]
    pub data_dir: Option<PathBuf>,
    /// A config.toml (default: ORACULO_CONFIG, else none); `bot` reads its [discord] section.
    #[arg(long = "config", value_name = "CONFIG")]
    pub config_file: Option<PathBuf>,
}

impl RawConfig {
    /// Parses `text` (the content of `path`, named in errors).
    pub fn parse(text: &str, path: &Path) -> anyhow::Result<RawConfig> {
        toml::from_str(text).with_context(|| format!("reading config {}", path.display()))
    }
}

impl Config {
    /// Loads every layer: the file named by `--config` (or `ORACULO_CONFIG`), then the
    /// environment, then the flags.
    pub fn load(overrides: &CliOverrides) -> anyhow::Result<Config> {
        let file = overrides.config_file.clone().or_else(|| std::env::var_os("ORACULO_CONFIG").map(PathBuf::from));
        let raw = match &file {
            Some(path) => {
                let text =
                    std::fs::read_to_string(path).with_context(|| format!("reading config {}", path.display()))?;
                RawConfig::parse(&text, path)?
            }
            None => RawConfig::default(),
        };
        let env = |key: &str| std::env::var(key).ok().filter(|v| !v.is_empty());
        Config::from_layers(raw, &env, overrides)
    }

    /// Validates the layers; `env` reads one environment variable (a closure so tests
    /// never touch the process environment).
    pub fn from_layers(
        raw: RawConfig,
        env: &dyn Fn(&str) -> Option<String>,
        overrides: &CliOverrides,
    ) -> anyhow::Result<Config> {
        let data_dir = overrides
            .data_dir
            .clone()
            .or_else(|| env("ORACULO_DATA").map(PathBuf::from))
            .or(raw.data_dir)
            .or_else(|| env("XDG_DATA_HOME").map(|d| PathBuf::from(d).join("oraculo")))
            .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".local/share/oraculo")))
            .context("no data dir: set data_dir in the config, ORACULO_DATA, or --data")?;

        // `ORACULO_CAMPAIGN` is `--campaign` from the environment (a container's `/campaign`).
        let overrides = &CliOverrides {
            campaign_dir: overrides.campaign_dir.clone().or_else(|| env("ORACULO_CAMPAIGN").map(PathBuf::from)),
            ..overrides.clone()
        };
        if raw.campaign.is_some() && raw.campaigns.is_some() {
            bail!("both [campaign] and [[campaigns]]: write every campaign as a [[campaigns]] entry");
        }
        let discord = discord_config(raw.discord, env)?;
        let feedback = feedback_config(raw.feedback)?;
        let (campaign, campaigns) = match raw.campaigns {
            None => {
                let campaign = campaign_config(raw.campaign.unwrap_or_default(), "campaign")?;
                let campaign = CampaignConfig { dir: overrides.campaign_dir.clone().or(campaign.dir), ..campaign };
                let name = campaign
                    .dir
                    .as_deref()
                    .and_then(Path::file_name)
                    .map_or_else(|| "sample".to_string(), |name| name.to_string_lossy().into_owned());
                let places = discord.as_ref().map(DiscordConfig::places).unwrap_or_default();
                (campaign.clone(), vec![NamedCampaign { name, campaign, places }])
            }
            Some(entries) => named_campaigns(entries, discord.as_ref(), overrides)?,
        };

        let ollama_raw = raw.ollama.unwrap_or_default();
        // Before the embedder takes its parts of [ollama]: the chat reaches the same server.
        let mut raw_chat = raw.chat.unwrap_or_default();
        let answer = answer_config(&mut raw_chat, env)?;
        let (chat, chat_max_tokens) = chat_config(raw_chat, &ollama_raw, env)?;
        let embedder = embedder_config(raw.embedder.unwrap_or_default(), ollama_raw, env)?;
        Ok(Config { data_dir, campaign, campaigns, embedder, chat, chat_max_tokens, answer, discord, feedback })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn check(toml_text: &str, env: &[(&str, &str)]) -> anyhow::Result<Config> {
        let raw = RawConfig::parse(toml_text, Path::new("config.toml"))?;
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let lookup = move |key: &str| env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        Config::from_layers(raw, &lookup, &CliOverrides::default())
    }

    #[test]
    fn example_config_parses_and_validates() {
        let text = include_str!("../../config.toml.example");
        let config = check(text, &[("HOME", "/home/dm")]).expect("config.toml.example must stay valid");
        assert!(matches!(config.embedder, EmbedderConfig::Ollama(_)));
        // The mode a DM who copies the example gets: the one the eval measured best.
        assert_eq!(config.answer.mode, crate::answer::AnswerMode::Structured);
        let discord = config.discord.expect("the example documents [discord]");
        assert_eq!(discord.concurrency, DEFAULT_DISCORD_CONCURRENCY);
        assert!(discord.token.is_none(), "the example must not carry a token");
        match config.chat {
            ChatConfig::Ollama(chat) => {
                assert_eq!(chat.server.model, DEFAULT_OLLAMA_CHAT_MODEL);
                assert_eq!(chat.keep_alive, DEFAULT_KEEP_ALIVE);
            }
            other => panic!("the example's chat backend is Ollama, got {other:?}"),
        }
    }

    #[test]
    fn defaults_need_only_a_home() {
        let config = check("", &[("HOME", "/home/dm")]).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/home/dm/.local/share/oraculo"));
        assert!(matches!(config.embedder, EmbedderConfig::Embedded { .. }));
        assert!(config.campaign.ignore.iter().any(|i| i == ".obsidian"));
    }

    #[test]
    fn env_beats_file() {
        let text = "data_dir = \"/from/file\"\n[embedder]\nbackend = \"embedded\"\n";
        let config = check(text, &[("ORACULO_DATA", "/from/env"), ("ORACULO_EMBEDDER", "ollama")]).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/from/env"));
        assert!(matches!(config.embedder, EmbedderConfig::Ollama(_)));
        let text = "[embedder]\nmodel_path = \"/from/file.bin\"\n";
        let config = check(text, &[("HOME", "/h"), ("ORACULO_E5_MODEL", "/from/env.bin")]).unwrap();
        match config.embedder {
            EmbedderConfig::Embedded { model_path, .. } => {
                assert_eq!(model_path.as_deref(), Some(Path::new("/from/env.bin")));
            }
            other => panic!("embedded expected, got {other:?}"),
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        let err = check("[campaign]\ndirr = \"x\"\n", &[("HOME", "/h")]).unwrap_err();
        assert!(format!("{err:#}").contains("dirr"), "{err:#}");
        let err = check("[embedder]\nbackend = \"gpt\"\n", &[("HOME", "/h")]).unwrap_err();
        assert!(format!("{err:#}").contains("embedder.backend"), "{err:#}");
        let err = check("[campaign.kind_folders]\nBestiario = \"monster\"\n", &[("HOME", "/h")]).unwrap_err();
        assert!(format!("{err:#}").contains("Bestiario"), "{err:#}");
    }

    #[test]
    fn the_campaign_folder_comes_from_oraculo_campaign_below_the_flag() {
        let config =
            check("[campaign]\ndir = \"/from/file\"\n", &[("HOME", "/h"), ("ORACULO_CAMPAIGN", "/campaign")]).unwrap();
        assert_eq!(config.campaign.dir.as_deref(), Some(Path::new("/campaign")));
        let raw = RawConfig::parse("", Path::new("config.toml")).unwrap();
        let flag = CliOverrides { campaign_dir: Some("/flag".into()), ..CliOverrides::default() };
        let env = |key: &str| match key {
            "HOME" => Some("/h".to_string()),
            "ORACULO_CAMPAIGN" => Some("/campaign".to_string()),
            _ => None,
        };
        let config = Config::from_layers(raw, &env, &flag).unwrap();
        assert_eq!(config.campaign.dir.as_deref(), Some(Path::new("/flag")));
    }
}
