//! Configuration, read once and validated before any work starts.
//!
//! Precedence, lowest to highest: built-in defaults → `config.toml` → `ORACULO_*` environment
//! variables → command-line flags. Two stages, as in ripgrep: [`RawConfig`] is a faithful
//! parse (unknown keys rejected, everything optional); [`Config`] is validated and ready.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::answer::AnswerMode;
use crate::corpus::{
    CorpusConfig, DEFAULT_SECRET_WORDS, LabelLanguage, NoteKind, SessionPattern, default_kind_folders, fold,
};
use crate::llm::chat::ollama::OllamaChatConfig;
use crate::llm::chat::openai::{ApiKey, OpenAiChatConfig};
use crate::llm::embed::ollama::OllamaEmbedderConfig;

/// Folders never read: Obsidian's settings and trash, and template folders whose notes are
/// placeholders, not campaign facts.
pub const DEFAULT_IGNORED: &[&str] =
    &[".obsidian", ".trash", ".git", "Plantillas", "Templates", "_templates", "templates"];
/// Folders whose notes are GM-only as a whole: a DM who names a folder "Secretos" means it.
/// `campaign.secret_paths` adds to them; `"!Secrets"` drops one.
pub const DEFAULT_SECRET_PATHS: &[&str] = &["Secretos", "Secrets"];
/// A note bigger than this is skipped with a warning: a 100-session chronicle is ~1 MB, so a
/// bigger "note" is an export or a dump, and reading it would stall the ingest.
pub const DEFAULT_MAX_NOTE_BYTES: u64 = 8 * 1024 * 1024;
/// Quiet time after a save before the watched folder is ingested: an editor's save (a temp
/// file written, then renamed over the note) and Obsidian's autosave while the DM types come
/// within a few hundred milliseconds of each other, and a second is short next to the
/// question that follows.
pub const DEFAULT_WATCH_DEBOUNCE_MS: u64 = 1000;
/// A polled folder (network or sync mount) is scanned this often: a save is answerable
/// within a scan and the debounce, and a scan of a few hundred notes' metadata is cheap.
pub const DEFAULT_WATCH_POLL_MS: u64 = 2000;
/// Below this a poll rescans the folder continuously.
pub const MIN_WATCH_POLL_MS: u64 = 200;
/// Ollama's usual address.
pub const DEFAULT_OLLAMA_URL: &str = "http://127.0.0.1:11434";
/// The production embedder: multilingual, 8192-token window.
pub const DEFAULT_OLLAMA_EMBED_MODEL: &str = "bge-m3";
/// The production chat model: the one that answers, annotates and reranks.
pub const DEFAULT_OLLAMA_CHAT_MODEL: &str = "qwen2.5:14b";
/// How long Ollama keeps the chat model loaded after a request: longer than the gap
/// between questions at a table, so a question never waits for a reload.
pub const DEFAULT_KEEP_ALIVE: &str = "30m";
/// llama.cpp's `llama-server` listens here by default.
pub const DEFAULT_OPENAI_URL: &str = "http://127.0.0.1:8080";
/// The answer budget in tokens: a long answer (~400 Spanish words) with room to spare.
pub const DEFAULT_CHAT_MAX_TOKENS: usize = 1024;
/// How long an answer may take on a CPU (the embedded backend): a question at the table can
/// wait a minute and a half; the context is sized so that the model reads it in that time.
pub const DEFAULT_ANSWER_SECONDS: f64 = 90.0;
/// Below this no useful context can be read on a CPU.
pub const MIN_ANSWER_SECONDS: f64 = 10.0;
/// The most one answer's generation may take, every attempt included, before it gives way to
/// the extractive answer: with one answer at a time, a stream that never ends would hold the
/// whole queue. Five minutes covers a structured answer and its retry on a loaded CPU
/// (measured p95 212 s for the 1.5B on 2 busy cores).
pub const DEFAULT_ANSWER_DEADLINE_SECS: u64 = 300;
/// Context window for server backends when neither `chat.n_ctx` nor the server says one
/// (defined with the chat trait, which plans by it).
pub use crate::llm::chat::DEFAULT_SERVER_N_CTX;
/// Context window of the embedded model: 8 session fragments (~2k tokens each) fit, and the
/// 1.5B model's cache stays near 230 MB.
pub const DEFAULT_EMBEDDED_N_CTX: usize = 8192;
/// Questions answered at once: one local GPU serves one generation at a time, and a second
/// concurrent request to Ollama only slows both down.
pub const DEFAULT_DISCORD_CONCURRENCY: usize = 1;
/// Questions one Discord user may ask per minute: enough for a conversation, too few for a
/// flood that would queue the whole table behind one player.
pub const DEFAULT_QUESTIONS_PER_MINUTE: u32 = 4;
/// Turns (a question or an answer each) of a channel's or thread's history sent with a
/// follow-up: the answer prompt keeps at most this many anyway (`prompt::MAX_HISTORY_MESSAGES`).
pub const DEFAULT_HISTORY_TURNS: usize = crate::prompt::MAX_HISTORY_MESSAGES;
/// The most history turns a conversation may be configured to carry: beyond this the notes
/// are crowded out of the context window.
pub const MAX_HISTORY_TURNS: usize = 40;
/// The environment variables the Discord token is read from, first found wins.
pub const DISCORD_TOKEN_VARS: &[&str] = &["ORACULO_DISCORD_TOKEN", "DISCORD_TOKEN"];

/// A value never printed: the Discord token (and the OpenAI-compatible server's API key).
pub use crate::secret::Secret;

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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCampaign {
    pub dir: Option<PathBuf>,
    pub label_language: Option<LabelLanguage>,
    pub ignore: Option<Vec<String>>,
    pub secret_paths: Option<Vec<String>>,
    pub secret_words: Option<Vec<String>>,
    pub kind_folders: Option<BTreeMap<String, String>>,
    pub max_note_bytes: Option<u64>,
    pub session_patterns: Option<Vec<RawSessionPattern>>,
    pub watch: Option<bool>,
    pub watch_debounce_ms: Option<u64>,
    pub watch_mode: Option<String>,
    pub watch_poll_ms: Option<u64>,
    pub watch_dm_warnings: Option<bool>,
}

/// `[[campaigns]]`: one campaign of several served by one bot: its notes (as `[campaign]`)
/// and where it answers (as `[discord]`'s ids; a list left out is `[discord]`'s).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawNamedCampaign {
    pub name: String,
    pub dir: Option<PathBuf>,
    pub label_language: Option<LabelLanguage>,
    pub ignore: Option<Vec<String>>,
    pub secret_paths: Option<Vec<String>>,
    pub secret_words: Option<Vec<String>>,
    pub kind_folders: Option<BTreeMap<String, String>>,
    pub max_note_bytes: Option<u64>,
    pub session_patterns: Option<Vec<RawSessionPattern>>,
    pub watch: Option<bool>,
    pub watch_debounce_ms: Option<u64>,
    pub watch_mode: Option<String>,
    pub watch_poll_ms: Option<u64>,
    pub watch_dm_warnings: Option<bool>,
    pub dm_user_ids: Option<Vec<u64>>,
    pub dm_role_ids: Option<Vec<u64>>,
    pub gm_channel_ids: Option<Vec<u64>>,
    pub guild_ids: Option<Vec<u64>>,
    /// Only these channels (and their threads) of its guilds; left out: every channel of them.
    pub channel_ids: Option<Vec<u64>>,
}

/// `[[campaign.session_patterns]]`: a regex with a `number` group over a session-like note's
/// file name and first heading, and an offset added to the number.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSessionPattern {
    pub pattern: String,
    pub offset: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEmbedder {
    pub backend: Option<String>,
    pub model: Option<String>,
    pub model_path: Option<PathBuf>,
    pub batch_size: Option<usize>,
    pub window_words: Option<usize>,
}

/// `[chat]`. The API key is deliberately absent: it comes from `ORACULO_OPENAI_API_KEY`
/// only, so it never sits in a file that gets shared.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawChat {
    pub backend: Option<String>,
    pub model: Option<String>,
    pub url: Option<String>,
    pub gguf: Option<PathBuf>,
    pub threads: Option<usize>,
    pub n_ctx: Option<usize>,
    pub keep_alive: Option<String>,
    pub max_tokens: Option<usize>,
    pub timeout_secs: Option<u64>,
    pub retries: Option<u32>,
    pub answer_mode: Option<String>,
    pub answer_seconds: Option<f64>,
    pub answer_deadline_secs: Option<u64>,
    pub instant_answer: Option<bool>,
}

/// `[discord]`: the bot (`oraculo bot`). Ids are Discord snowflakes (integers).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDiscord {
    /// Prefer `DISCORD_TOKEN` / `ORACULO_DISCORD_TOKEN`: a file gets shared, an env var less so.
    pub token: Option<Secret<String>>,
    pub dm_user_ids: Option<Vec<u64>>,
    pub dm_role_ids: Option<Vec<u64>>,
    pub gm_channel_ids: Option<Vec<u64>>,
    pub guild_ids: Option<Vec<u64>>,
    pub concurrency: Option<usize>,
    pub questions_per_minute: Option<u32>,
    pub history_turns: Option<usize>,
    pub proxy_url: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOllama {
    pub url: Option<String>,
    pub timeout_secs: Option<u64>,
    pub retries: Option<u32>,
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
}

/// The Discord bot's settings, validated.
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

#[derive(Debug, Clone)]
pub struct DiscordConfig {
    /// From `ORACULO_DISCORD_TOKEN`, `DISCORD_TOKEN`, else `discord.token`; `None`: the bot
    /// refuses to start, saying where to put one.
    pub token: Option<Secret<String>>,
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
    /// History turns sent with each question of a channel or thread.
    pub history_turns: usize,
    /// A Discord REST proxy (`twilight-http-proxy`, or a test's stand-in): REST calls go there,
    /// and it does the rate limiting.
    pub proxy_url: Option<String>,
}

/// One campaign the bot serves, and where.
#[derive(Debug, Clone)]
pub struct NamedCampaign {
    pub name: String,
    pub campaign: CampaignConfig,
    pub places: CampaignPlaces,
}

/// Who runs a campaign and where it is asked about (Discord ids).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CampaignPlaces {
    pub dm_user_ids: Vec<u64>,
    pub dm_role_ids: Vec<u64>,
    pub gm_channel_ids: Vec<u64>,
    pub guild_ids: Vec<u64>,
    /// Empty: every channel of its guilds.
    pub channel_ids: Vec<u64>,
}

#[derive(Debug, Clone)]
pub struct CampaignConfig {
    /// `None`: the embedded sample campaign.
    pub dir: Option<PathBuf>,
    pub corpus: CorpusConfig,
    /// Folder or file names (any depth, case-insensitive) the ingest never reads.
    pub ignore: Vec<String>,
    pub max_note_bytes: u64,
    /// How the bot (and `oraculo ingest --watch`) follows the folder as the DM saves.
    pub watch: WatchConfig,
}

/// `campaign.watch*`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchConfig {
    /// Whether the bot watches the folder (`oraculo ingest --watch` watches either way).
    pub enabled: bool,
    /// Quiet time after the last change before the ingest runs: a burst of saves is one ingest.
    pub debounce: Duration,
    pub mode: WatchMode,
    /// How often a polled folder is scanned.
    pub poll_interval: Duration,
    /// Tell the campaign's DM by direct message when a saved note produced new warnings.
    pub dm_warnings: bool,
}

/// Where the changes come from (`campaign.watch_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchMode {
    /// The system's file events, or polling where they do not arrive (a network or sync
    /// mount, detected by its filesystem; events that cannot be set up).
    Auto,
    /// The system's file events only.
    Events,
    /// Scan the folder every `poll_interval`.
    Poll,
}

impl Default for WatchConfig {
    fn default() -> WatchConfig {
        WatchConfig {
            enabled: true,
            debounce: Duration::from_millis(DEFAULT_WATCH_DEBOUNCE_MS),
            mode: WatchMode::Auto,
            poll_interval: Duration::from_millis(DEFAULT_WATCH_POLL_MS),
            dm_warnings: false,
        }
    }
}

#[derive(Debug, Clone)]
pub enum EmbedderConfig {
    /// multilingual-e5-small in-process; `None` looks in `<data_dir>/models/`.
    Embedded {
        model_path: Option<PathBuf>,
        batch_size: usize,
    },
    Ollama(OllamaEmbedderConfig),
}

/// `chat.answer_mode` and `chat.answer_seconds`, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AnswerConfig {
    pub mode: AnswerMode,
    /// The time an answer may take where the backend runs on this machine and reports its
    /// speed (the embedded one): the context is planned to be read within it.
    pub seconds: f64,
    /// The total time one answer's generation may take (`chat.answer_deadline_secs`).
    pub deadline: std::time::Duration,
    /// Whether the notes' own sentences are shown at once, before the model's answer
    /// (`chat.instant_answer`, default on).
    pub instant: bool,
}

/// Which chat model answers, annotates and reranks; `llm::connect_chat` builds it.
#[derive(Debug, Clone)]
pub enum ChatConfig {
    /// llama.cpp in-process. `gguf: None` picks the largest model fetched into
    /// `<data_dir>/models/` (see `LlamaCppChat::default_path`).
    Embedded {
        gguf: Option<PathBuf>,
        threads: usize,
        n_ctx: usize,
    },
    Ollama(OllamaChatConfig),
    OpenAi(OpenAiChatConfig),
}

impl EmbedderConfig {
    /// Passages per embedding call, whichever backend.
    pub fn batch_size(&self) -> usize {
        match self {
            EmbedderConfig::Embedded { batch_size, .. } => *batch_size,
            EmbedderConfig::Ollama(ollama) => ollama.batch_size,
        }
    }
}

/// Overrides from the command line, the highest layer.
#[derive(Debug, Default, Clone)]
pub struct CliOverrides {
    pub config_file: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub campaign_dir: Option<PathBuf>,
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

        let embedder_raw = raw.embedder.unwrap_or_default();
        let ollama_raw = raw.ollama.unwrap_or_default();
        // Before the embedder takes its parts of [ollama]: the chat reaches the same server.
        let mut raw_chat = raw.chat.unwrap_or_default();
        let answer = answer_config(&mut raw_chat, env)?;
        let (chat, chat_max_tokens) = chat_config(raw_chat, &ollama_raw, env)?;
        let backend = env("ORACULO_EMBEDDER").or(embedder_raw.backend).unwrap_or_else(|| "embedded".into());
        let batch_size = embedder_raw.batch_size.unwrap_or(16);
        if batch_size == 0 {
            bail!("embedder.batch_size must be above 0");
        }
        let embedder = match backend.as_str() {
            "embedded" => EmbedderConfig::Embedded { model_path: embedder_raw.model_path, batch_size },
            "ollama" => {
                let url = env("ORACULO_OLLAMA_URL").or(ollama_raw.url).unwrap_or_else(|| DEFAULT_OLLAMA_URL.into());
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    bail!("ollama.url = {url:?}: expected an http:// or https:// address");
                }
                EmbedderConfig::Ollama(OllamaEmbedderConfig {
                    url,
                    model: embedder_raw.model.unwrap_or_else(|| DEFAULT_OLLAMA_EMBED_MODEL.into()),
                    timeout: Duration::from_secs(ollama_raw.timeout_secs.unwrap_or(120)),
                    retries: ollama_raw.retries.unwrap_or(3),
                    batch_size,
                    window_words: embedder_raw.window_words,
                })
            }
            other => bail!("embedder.backend = {other:?}: expected \"embedded\" or \"ollama\""),
        };
        Ok(Config { data_dir, campaign, campaigns, embedder, chat, chat_max_tokens, answer, discord })
    }
}

/// Validates one campaign's notes settings (`key`: where they are, for messages).
fn campaign_config(campaign: RawCampaign, key: &str) -> anyhow::Result<CampaignConfig> {
    let watch = watch_config(&campaign, key)?;
    let mut kind_folders = default_kind_folders();
    for (folder, kind) in campaign.kind_folders.unwrap_or_default() {
        let kind = NoteKind::parse(&kind).with_context(|| {
            format!("{key}.kind_folders.{folder} = {kind:?}: expected \"session\", \"sheet\" or \"world\"")
        })?;
        kind_folders.insert(folder, kind);
    }
    // A user's patterns extend the built-in ones (episode codes), tried after them.
    let mut session_patterns = SessionPattern::defaults();
    for (pattern_idx, raw_pattern) in campaign.session_patterns.unwrap_or_default().iter().enumerate() {
        let pattern = SessionPattern::new(&raw_pattern.pattern, raw_pattern.offset.unwrap_or(0)).map_err(|reason| {
            anyhow::anyhow!("{key}.session_patterns[{pattern_idx}] = {:?} {reason}", raw_pattern.pattern)
        })?;
        session_patterns.push(pattern);
    }
    let secret_words = with_defaults(&format!("{key}.secret_words"), DEFAULT_SECRET_WORDS, campaign.secret_words)?;
    if let Some(phrase) = secret_words.iter().find(|word| crate::corpus::phrase_words(word).count() != 1) {
        bail!(
            "{key}.secret_words holds {phrase:?}, which is not one word: a callout type or comment opener is read word by word (split at -, _, spaces and :), so list each word alone"
        );
    }
    let corpus = CorpusConfig {
        label_language: campaign.label_language.unwrap_or_default(),
        kind_folders,
        secret_paths: with_defaults(&format!("{key}.secret_paths"), DEFAULT_SECRET_PATHS, campaign.secret_paths)?,
        secret_words: secret_words.iter().map(|word| fold(word)).collect(),
        session_patterns,
    };
    let max_note_bytes = campaign.max_note_bytes.unwrap_or(DEFAULT_MAX_NOTE_BYTES);
    if max_note_bytes == 0 {
        bail!("{key}.max_note_bytes must be above 0");
    }
    Ok(CampaignConfig {
        watch,
        dir: campaign.dir,
        corpus,
        // A user's list extends the defaults: `.trash` stays unread whatever the config says.
        ignore: DEFAULT_IGNORED.iter().map(|s| s.to_string()).chain(campaign.ignore.unwrap_or_default()).collect(),
        max_note_bytes,
    })
}

/// Validates `campaign.watch*` (`key`: where they are, for messages).
fn watch_config(campaign: &RawCampaign, key: &str) -> anyhow::Result<WatchConfig> {
    let mode = match campaign.watch_mode.as_deref() {
        None | Some("auto") => WatchMode::Auto,
        Some("events") => WatchMode::Events,
        Some("poll") => WatchMode::Poll,
        Some(other) => bail!("{key}.watch_mode = {other:?}: expected \"auto\", \"events\" or \"poll\""),
    };
    let poll_ms = campaign.watch_poll_ms.unwrap_or(DEFAULT_WATCH_POLL_MS);
    if poll_ms < MIN_WATCH_POLL_MS {
        bail!("{key}.watch_poll_ms = {poll_ms}: at least {MIN_WATCH_POLL_MS}");
    }
    Ok(WatchConfig {
        enabled: campaign.watch.unwrap_or(true),
        debounce: Duration::from_millis(campaign.watch_debounce_ms.unwrap_or(DEFAULT_WATCH_DEBOUNCE_MS)),
        mode,
        poll_interval: Duration::from_millis(poll_ms),
        dm_warnings: campaign.watch_dm_warnings.unwrap_or(false),
    })
}

/// A list that extends built-in `defaults` (`campaign.secret_paths`, `campaign.secret_words`):
/// each entry is added, and an entry `"!name"` drops the default it names (compared without
/// case or accents) instead, the one way to give up a default; `key` names the list in errors.
fn with_defaults(key: &str, defaults: &[&str], entries: Option<Vec<String>>) -> anyhow::Result<Vec<String>> {
    let mut list: Vec<String> = defaults.iter().map(|default| default.to_string()).collect();
    let entries = entries.unwrap_or_default();
    for entry in &entries {
        let entry = entry.trim();
        let dropped = entry.strip_prefix('!').map(str::trim);
        if entry.is_empty() || dropped.is_some_and(str::is_empty) {
            bail!("{key} holds an empty entry");
        }
        if dropped.is_none() && !list.iter().any(|kept| fold(kept) == fold(entry)) {
            list.push(entry.to_string());
        }
    }
    for dropped in entries.iter().filter_map(|entry| entry.trim().strip_prefix('!').map(str::trim)) {
        if !defaults.iter().any(|default| fold(default) == fold(dropped)) {
            bail!(
                "{key} holds \"!{dropped}\", but {dropped:?} is no default to drop (the defaults: {}); list it without `!` to add it",
                defaults.join(", ")
            );
        }
        list.retain(|kept| fold(kept) != fold(dropped));
    }
    Ok(list)
}

/// Validates `[[campaigns]]`: names unique and non-empty, every one with a folder of its own;
/// the CLI's campaign is the one `--campaign` names (its name or folder), else the first.
fn named_campaigns(
    entries: Vec<RawNamedCampaign>,
    discord: Option<&DiscordConfig>,
    overrides: &CliOverrides,
) -> anyhow::Result<(CampaignConfig, Vec<NamedCampaign>)> {
    if entries.is_empty() {
        bail!("[[campaigns]] is empty: write one entry per campaign, or use [campaign] for one");
    }
    let inherited = discord.map(DiscordConfig::places).unwrap_or_default();
    let mut campaigns: Vec<NamedCampaign> = Vec::new();
    // Every channel a campaign names so far: (channel, (campaign, the key that names it)).
    let mut claimed: Vec<(u64, (String, &str))> = Vec::new();
    for (idx, entry) in entries.into_iter().enumerate() {
        let key = format!("campaigns[{idx}]");
        let name = entry.name.trim().to_string();
        if name.is_empty() {
            bail!("{key}.name is empty: each campaign needs a name (it appears in logs and messages)");
        }
        if campaigns.iter().any(|other| other.name == name) {
            bail!("{key}.name = {name:?} is used twice");
        }
        let Some(dir) = entry.dir.clone() else { bail!("{key} ({name}) has no dir: the folder of its notes") };
        if campaigns.iter().any(|other| other.campaign.dir.as_deref() == Some(dir.as_path())) {
            bail!("{key}.dir = {} is another campaign's folder too", dir.display());
        }
        let ids = |field: &str, ids: Option<Vec<u64>>, default: &[u64]| -> anyhow::Result<Vec<u64>> {
            let ids = ids.unwrap_or_else(|| default.to_vec());
            if ids.contains(&0) {
                bail!("{key}.{field} holds 0, which is no Discord id (copy ids with Developer Mode on)");
            }
            Ok(ids)
        };
        let gm_channels_inherited = entry.gm_channel_ids.is_none() && !inherited.gm_channel_ids.is_empty();
        let places = CampaignPlaces {
            dm_user_ids: ids("dm_user_ids", entry.dm_user_ids, &inherited.dm_user_ids)?,
            dm_role_ids: ids("dm_role_ids", entry.dm_role_ids, &inherited.dm_role_ids)?,
            gm_channel_ids: ids("gm_channel_ids", entry.gm_channel_ids, &inherited.gm_channel_ids)?,
            guild_ids: ids("guild_ids", entry.guild_ids, &inherited.guild_ids)?,
            channel_ids: ids("channel_ids", entry.channel_ids, &[])?,
        };
        let raw = RawCampaign {
            dir: entry.dir,
            label_language: entry.label_language,
            ignore: entry.ignore,
            secret_paths: entry.secret_paths,
            secret_words: entry.secret_words,
            kind_folders: entry.kind_folders,
            max_note_bytes: entry.max_note_bytes,
            session_patterns: entry.session_patterns,
            watch: entry.watch,
            watch_debounce_ms: entry.watch_debounce_ms,
            watch_mode: entry.watch_mode,
            watch_poll_ms: entry.watch_poll_ms,
            watch_dm_warnings: entry.watch_dm_warnings,
        };
        let gm_channels = if gm_channels_inherited { "gm_channel_ids, from [discord]" } else { "gm_channel_ids" };
        for (channel, field) in places
            .gm_channel_ids
            .iter()
            .map(|channel| (*channel, gm_channels))
            .chain(places.channel_ids.iter().map(|channel| (*channel, "channel_ids")))
        {
            if let Some((other, other_field)) = claimed
                .iter()
                .find_map(|(claimed_channel, claim)| (*claimed_channel == channel && claim.0 != name).then_some(claim))
            {
                bail!(
                    "channel {channel} is claimed by two campaigns: {other:?} ({other_field}) and {name:?} ({field}). A channel belongs to one campaign, or one campaign's GM channel could answer another's players (or the reverse); give each [[campaigns]] entry its own gm_channel_ids and channel_ids"
                );
            }
            claimed.push((channel, (name.clone(), field)));
        }
        campaigns.push(NamedCampaign { name, campaign: campaign_config(raw, &key)?, places });
    }
    let chosen = match &overrides.campaign_dir {
        None => campaigns[0].campaign.clone(),
        Some(wanted) => match campaigns
            .iter()
            .find(|c| c.campaign.dir.as_deref() == Some(wanted.as_path()) || Path::new(&c.name) == wanted.as_path())
        {
            Some(named) => named.campaign.clone(),
            // Another folder: the first entry's settings over it.
            None => CampaignConfig { dir: Some(wanted.clone()), ..campaigns[0].campaign.clone() },
        },
    };
    Ok((chosen, campaigns))
}

/// Validates `[discord]`. Present when the section is, or when a token is in the environment.
fn discord_config(
    raw: Option<RawDiscord>,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<Option<DiscordConfig>> {
    let env_token = DISCORD_TOKEN_VARS.iter().find_map(|key| env(key)).map(Secret::new);
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
        history_turns,
        proxy_url: raw.proxy_url.map(|url| url.trim_end_matches('/').to_string()),
    }))
}

/// `chat.answer_mode` (default: structured for the embedded backend, whose small models cite
/// reliably only through a schema; free text for servers) and `chat.answer_seconds`.
/// Takes both keys out of `chat`.
fn answer_config(chat: &mut RawChat, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<AnswerConfig> {
    let backend = env("ORACULO_CHAT").or(chat.backend.clone()).unwrap_or_else(|| "embedded".into());
    let mode = match chat.answer_mode.take().as_deref() {
        None if backend == "embedded" => AnswerMode::Structured,
        None => AnswerMode::Free,
        Some("structured") => AnswerMode::Structured,
        Some("free") => AnswerMode::Free,
        Some(other) => bail!("chat.answer_mode = {other:?}: expected \"structured\" or \"free\""),
    };
    let seconds = chat.answer_seconds.take().unwrap_or(DEFAULT_ANSWER_SECONDS);
    if !(seconds.is_finite() && seconds >= MIN_ANSWER_SECONDS) {
        bail!("chat.answer_seconds = {seconds}: expected at least {MIN_ANSWER_SECONDS} seconds");
    }
    let deadline_secs = chat.answer_deadline_secs.take().unwrap_or(DEFAULT_ANSWER_DEADLINE_SECS);
    if (deadline_secs as f64) < seconds {
        bail!("chat.answer_deadline_secs = {deadline_secs}: expected at least chat.answer_seconds ({seconds})");
    }
    let instant = chat.instant_answer.take().unwrap_or(true);
    Ok(AnswerConfig { mode, seconds, deadline: std::time::Duration::from_secs(deadline_secs), instant })
}

/// Validates `[chat]`; the Ollama backend reaches the server `[ollama]` describes.
fn chat_config(
    chat: RawChat,
    ollama: &RawOllama,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<(ChatConfig, usize)> {
    let backend = env("ORACULO_CHAT").or(chat.backend).unwrap_or_else(|| "embedded".into());
    let max_tokens = chat.max_tokens.unwrap_or(DEFAULT_CHAT_MAX_TOKENS);
    if max_tokens == 0 {
        bail!("chat.max_tokens must be above 0");
    }
    let n_ctx = chat.n_ctx.unwrap_or(if backend == "embedded" { DEFAULT_EMBEDDED_N_CTX } else { DEFAULT_SERVER_N_CTX });
    if n_ctx <= max_tokens {
        bail!("chat.n_ctx = {n_ctx} leaves no room for a prompt beside chat.max_tokens = {max_tokens}");
    }
    let check_url = |key: &str, url: &str| -> anyhow::Result<()> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("{key} = {url:?}: expected an http:// or https:// address");
        }
        Ok(())
    };
    let config = match backend.as_str() {
        "embedded" => {
            let threads = chat.threads.unwrap_or_else(default_threads);
            if threads == 0 {
                bail!("chat.threads must be above 0");
            }
            ChatConfig::Embedded { gguf: chat.gguf, threads, n_ctx }
        }
        "ollama" => {
            let url =
                env("ORACULO_OLLAMA_URL").or_else(|| ollama.url.clone()).unwrap_or_else(|| DEFAULT_OLLAMA_URL.into());
            check_url("ollama.url", &url)?;
            let keep_alive = chat.keep_alive.unwrap_or_else(|| DEFAULT_KEEP_ALIVE.into());
            if keep_alive.trim().is_empty() {
                bail!("chat.keep_alive is empty: use a duration such as \"30m\", or \"-1\" to keep the model loaded");
            }
            ChatConfig::Ollama(OllamaChatConfig {
                url,
                model: chat.model.unwrap_or_else(|| DEFAULT_OLLAMA_CHAT_MODEL.into()),
                timeout: Duration::from_secs(ollama.timeout_secs.unwrap_or(120)),
                retries: ollama.retries.unwrap_or(3),
                keep_alive,
                n_ctx: chat.n_ctx,
            })
        }
        "openai" => {
            let url = chat.url.unwrap_or_else(|| DEFAULT_OPENAI_URL.into());
            check_url("chat.url", &url)?;
            let model = chat.model.context(
                "chat.model is required with backend \"openai\": the name the server serves the model under",
            )?;
            ChatConfig::OpenAi(OpenAiChatConfig {
                url,
                model,
                api_key: env("ORACULO_OPENAI_API_KEY").map(ApiKey::new),
                timeout: Duration::from_secs(chat.timeout_secs.unwrap_or(120)),
                retries: chat.retries.unwrap_or(3),
                n_ctx: chat.n_ctx,
            })
        }
        other => bail!("chat.backend = {other:?}: expected \"embedded\", \"ollama\" or \"openai\""),
    };
    Ok((config, max_tokens))
}

/// llama.cpp threads when `chat.threads` is unset: one core fewer than this process may use,
/// at least 1, at most 8 (beyond that generation is bound by memory bandwidth). llama.cpp's
/// threads wait for each other at every step, so one thread losing its core to another
/// process stalls them all: measured on a 2-core VM busy compiling, 2 threads generated
/// 0.8-1.3 tok/s where 1 thread held 3.5-23 tok/s (1.5B / 135M). Leaving a core free costs
/// half the speed on an idle 2-core machine and little on bigger ones.
fn default_threads() -> usize {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    cores.saturating_sub(1).clamp(1, 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(toml_text: &str, env: &[(&str, &str)]) -> anyhow::Result<Config> {
        let raw = RawConfig::parse(toml_text, Path::new("config.toml"))?;
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let lookup = move |key: &str| env.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        Config::from_layers(raw, &lookup, &CliOverrides::default())
    }

    #[test]
    fn several_campaigns_each_with_its_places() {
        let two = "[discord]\ndm_user_ids = [7]\nguild_ids = [1]\n\n\
            [[campaigns]]\nname = \"Galerna\"\ndir = \"/n/galerna\"\nchannel_ids = [10]\n\n\
            [[campaigns]]\nname = \"Vorn\"\ndir = \"/n/vorn\"\ndm_user_ids = [8]\nlabel_language = \"en\"\n";
        let config = check(two, &[("HOME", "/h")]).unwrap();
        let names: Vec<&str> = config.campaigns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Galerna", "Vorn"]);
        // A list left out is [discord]'s; one written is the campaign's own.
        assert_eq!(config.campaigns[0].places.dm_user_ids, [7]);
        assert_eq!(config.campaigns[1].places.dm_user_ids, [8]);
        assert_eq!(config.campaigns[1].places.guild_ids, [1]);
        assert_eq!(
            (config.campaigns[0].places.channel_ids.as_slice(), config.campaigns[1].places.channel_ids.len()),
            (&[10][..], 0)
        );
        assert_eq!(config.campaigns[1].campaign.corpus.label_language, LabelLanguage::En);
        // The CLI's campaign: the first, or the one --campaign names (by name or folder).
        assert_eq!(config.campaign.dir.as_deref(), Some(Path::new("/n/galerna")));
        let by_name = |wanted: &str| {
            let raw = RawConfig::parse(two, Path::new("config.toml")).unwrap();
            let overrides = CliOverrides { campaign_dir: Some(PathBuf::from(wanted)), ..CliOverrides::default() };
            Config::from_layers(raw, &|key| (key == "HOME").then(|| "/h".to_string()), &overrides).unwrap()
        };
        assert_eq!(by_name("Vorn").campaign.dir.as_deref(), Some(Path::new("/n/vorn")));
        assert_eq!(by_name("Vorn").campaign.corpus.label_language, LabelLanguage::En);
        assert_eq!(by_name("/n/otra").campaign.dir.as_deref(), Some(Path::new("/n/otra")));
        // One campaign without [[campaigns]]: [discord]'s ids, named after its folder.
        let one = check("[campaign]\ndir = \"/n/galerna\"\n[discord]\nguild_ids = [1]\n", &[("HOME", "/h")]).unwrap();
        assert_eq!((one.campaigns.len(), one.campaigns[0].name.as_str()), (1, "galerna"));
        assert_eq!(one.campaigns[0].places.guild_ids, [1]);
        // Mistakes, each named.
        for (text, needle) in [
            (
                "[campaign]\ndir = \"/a\"\n[[campaigns]]\nname = \"A\"\ndir = \"/a\"\n",
                "both [campaign] and [[campaigns]]",
            ),
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\n[[campaigns]]\nname = \"A\"\ndir = \"/b\"\n", "used twice"),
            (
                "[[campaigns]]\nname = \"A\"\ndir = \"/a\"\n[[campaigns]]\nname = \"B\"\ndir = \"/a\"\n",
                "another campaign's folder",
            ),
            ("[[campaigns]]\nname = \"A\"\n", "has no dir"),
            ("[[campaigns]]\nname = \" \"\ndir = \"/a\"\n", "name is empty"),
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nchannel_ids = [0]\n", "campaigns[0].channel_ids holds 0"),
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nmax_note_bytes = 0\n", "campaigns[0].max_note_bytes"),
            ("[campaign]\nwatch_mode = \"inotify\"\n", "campaign.watch_mode = \"inotify\""),
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nwatch_poll_ms = 10\n", "campaigns[0].watch_poll_ms = 10"),
        ] {
            let err = format!("{:#}", check(text, &[("HOME", "/h")]).unwrap_err());
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn the_watched_vault_is_on_by_default_and_read_per_campaign() {
        let config = check("", &[("HOME", "/h")]).unwrap();
        assert_eq!(config.campaign.watch, WatchConfig::default());
        assert!(config.campaign.watch.enabled && !config.campaign.watch.dm_warnings);
        let text = "[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nwatch = false\n\n[[campaigns]]\nname = \"B\"\ndir = \"/b\"\n\
                    watch_debounce_ms = 250\nwatch_mode = \"poll\"\nwatch_poll_ms = 500\nwatch_dm_warnings = true\n";
        let config = check(text, &[("HOME", "/h")]).unwrap();
        assert!(!config.campaigns[0].campaign.watch.enabled);
        let b = &config.campaigns[1].campaign.watch;
        assert_eq!(
            (b.debounce, b.mode, b.poll_interval),
            (Duration::from_millis(250), WatchMode::Poll, Duration::from_millis(500))
        );
        assert!(b.enabled && b.dm_warnings);
    }

    #[test]
    fn secret_paths_and_words_extend_their_defaults_and_drop_one_only_by_name() {
        let config =
            check("[campaign]\nsecret_paths = [\"Planes\"]\nsecret_words = [\"árbitro\"]\n", &[("HOME", "/h")])
                .unwrap();
        assert_eq!(config.campaign.corpus.secret_paths, ["Secretos", "Secrets", "Planes"]);
        let words = &config.campaign.corpus.secret_words;
        assert!(words.iter().any(|word| word == "arbitro") && words.iter().any(|word| word == "master"), "{words:?}");
        assert!(config.campaign.corpus.is_secret_path("Secretos/x.md"), "a default stays secret");
        // `[]` adds nothing and drops nothing.
        let config = check("[campaign]\nsecret_paths = []\n", &[("HOME", "/h")]).unwrap();
        assert_eq!(config.campaign.corpus.secret_paths, ["Secretos", "Secrets"]);
        // `!name` drops a default, compared without case or accents.
        let config = check(
            "[campaign]\nsecret_paths = [\"!secrets\"]\nsecret_words = [\"!Máster\", \"!spoiler\"]\n",
            &[("HOME", "/h")],
        )
        .unwrap();
        assert_eq!(config.campaign.corpus.secret_paths, ["Secretos"]);
        assert!(!config.campaign.corpus.names_gm("master") && !config.campaign.corpus.names_gm("spoilers"));
        assert!(config.campaign.corpus.names_gm("gm-only"));
        // The same in [[campaigns]].
        let config = check(
            "[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nsecret_paths = [\"Planes\", \"!Secretos\"]\n",
            &[("HOME", "/h")],
        )
        .unwrap();
        assert_eq!(config.campaigns[0].campaign.corpus.secret_paths, ["Secrets", "Planes"]);
        for (text, needle) in [
            ("[campaign]\nsecret_paths = [\"!Planes\"]\n", "campaign.secret_paths holds \"!Planes\""),
            ("[campaign]\nsecret_words = [\"!árbitro\"]\n", "campaign.secret_words holds \"!árbitro\""),
            ("[campaign]\nsecret_words = [\"game master\"]\n", "not one word"),
            ("[campaign]\nsecret_paths = [\" \"]\n", "empty entry"),
            ("[[campaigns]]\nname = \"A\"\ndir = \"/a\"\nsecret_words = [\"gm-only\"]\n", "campaigns[0].secret_words"),
        ] {
            let err = format!("{:#}", check(text, &[("HOME", "/h")]).unwrap_err());
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn a_channel_claimed_by_two_campaigns_is_refused_naming_both() {
        let campaigns = |a: &str, b: &str| {
            format!(
                "[discord]\nguild_ids = [1]\n{a}\n[[campaigns]]\nname = \"Galerna\"\ndir = \"/g\"\nchannel_ids = [10]\n\n[[campaigns]]\nname = \"Vorn\"\ndir = \"/v\"\nchannel_ids = [20]\n{b}\n"
            )
        };
        // B's GM channel is A's player channel.
        let err = format!("{:#}", check(&campaigns("", "gm_channel_ids = [10]"), &[("HOME", "/h")]).unwrap_err());
        for needle in ["channel 10", "\"Galerna\" (channel_ids)", "\"Vorn\" (gm_channel_ids)"] {
            assert!(err.contains(needle), "{needle}: {err}");
        }
        // A GM channel of [discord] is inherited by both campaigns.
        let err = format!("{:#}", check(&campaigns("gm_channel_ids = [30]", ""), &[("HOME", "/h")]).unwrap_err());
        for needle in
            ["channel 30", "\"Galerna\" (gm_channel_ids, from [discord])", "\"Vorn\" (gm_channel_ids, from [discord])"]
        {
            assert!(err.contains(needle), "{needle}: {err}");
        }
        // Each with its own GM channel, or one campaign naming a channel twice: fine.
        let config = check(&campaigns("gm_channel_ids = [30]", "gm_channel_ids = [40]"), &[("HOME", "/h")]).unwrap();
        assert_eq!(config.campaigns[0].places.gm_channel_ids, [30]);
        let own = "[discord]\nguild_ids = [1]\n[[campaigns]]\nname = \"Galerna\"\ndir = \"/g\"\nchannel_ids = [10]\ngm_channel_ids = [10, 30]\n\n[[campaigns]]\nname = \"Vorn\"\ndir = \"/v\"\nchannel_ids = [20]\ngm_channel_ids = [40]\n";
        let config = check(own, &[("HOME", "/h")]).unwrap();
        assert_eq!(config.campaigns[1].places.gm_channel_ids, [40]);
    }

    #[test]
    fn example_config_parses_and_validates() {
        let text = include_str!("../config.toml.example");
        let config = check(text, &[("HOME", "/home/dm")]).expect("config.toml.example must stay valid");
        assert!(matches!(config.embedder, EmbedderConfig::Ollama(_)));
        let discord = config.discord.expect("the example documents [discord]");
        assert_eq!(discord.concurrency, DEFAULT_DISCORD_CONCURRENCY);
        assert!(discord.token.is_none(), "the example must not carry a token");
        match config.chat {
            ChatConfig::Ollama(chat) => {
                assert_eq!(chat.model, DEFAULT_OLLAMA_CHAT_MODEL);
                assert_eq!(chat.keep_alive, DEFAULT_KEEP_ALIVE);
            }
            other => panic!("the example's chat backend is Ollama, got {other:?}"),
        }
    }

    #[test]
    fn chat_defaults_to_the_embedded_model_and_env_picks_another() {
        let config = check("", &[("HOME", "/h")]).unwrap();
        assert!(matches!(config.chat, ChatConfig::Embedded { gguf: None, n_ctx: DEFAULT_EMBEDDED_N_CTX, .. }));
        assert_eq!(config.campaign.corpus.secret_paths, ["Secretos", "Secrets"]);
        assert_eq!(config.chat_max_tokens, DEFAULT_CHAT_MAX_TOKENS);
        // The embedded model answers through the schema, within the CPU's time budget.
        assert_eq!(
            config.answer,
            AnswerConfig {
                mode: AnswerMode::Structured,
                seconds: DEFAULT_ANSWER_SECONDS,
                deadline: std::time::Duration::from_secs(DEFAULT_ANSWER_DEADLINE_SECS),
                instant: true,
            }
        );

        let text = "[chat]\nbackend = \"openai\"\nmodel = \"qwen\"\nurl = \"http://gpu:8000/v1\"\n";
        let config = check(text, &[("HOME", "/h"), ("ORACULO_OPENAI_API_KEY", "sk-1")]).unwrap();
        let ChatConfig::OpenAi(chat) = config.chat else { panic!("openai") };
        assert_eq!(chat.api_key.as_ref().map(|key| key.expose().as_str()), Some("sk-1"));
        assert!(!format!("{chat:?}").contains("sk-1"));

        assert_eq!(config.answer.mode, AnswerMode::Free, "a server's model writes free text by default");

        let config = check(text, &[("HOME", "/h"), ("ORACULO_CHAT", "ollama")]).unwrap();
        assert!(matches!(config.chat, ChatConfig::Ollama(_)));
        assert_eq!(config.answer.mode, AnswerMode::Free);

        let text = "[chat]\nbackend = \"ollama\"\nanswer_mode = \"structured\"\nanswer_seconds = 30\nanswer_deadline_secs = 60\n";
        let config = check(text, &[("HOME", "/h")]).unwrap();
        let deadline = std::time::Duration::from_secs(60);
        assert_eq!(config.answer, AnswerConfig { mode: AnswerMode::Structured, seconds: 30.0, deadline, instant: true });
        let off = check("[chat]\ninstant_answer = false\n", &[("HOME", "/h")]).unwrap();
        assert!(!off.answer.instant, "chat.instant_answer = false turns the notes' sentences first off");
    }

    #[test]
    fn chat_errors_name_the_key() {
        for (text, key) in [
            ("[chat]\nbackend = \"gpt\"\n", "chat.backend"),
            ("[chat]\nbackend = \"openai\"\n", "chat.model"),
            ("[chat]\napi_key = \"sk-in-a-file\"\n", "api_key"),
            ("[chat]\nmax_tokens = 0\n", "chat.max_tokens"),
            ("[chat]\nn_ctx = 512\nmax_tokens = 1024\n", "chat.n_ctx"),
            ("[chat]\nthreads = 0\n", "chat.threads"),
            ("[chat]\nanswer_mode = \"json\"\n", "chat.answer_mode"),
            ("[chat]\nanswer_seconds = 2\n", "chat.answer_seconds"),
            ("[chat]\nanswer_seconds = 90\nanswer_deadline_secs = 30\n", "chat.answer_deadline_secs"),
        ] {
            let err = check(text, &[("HOME", "/h")]).unwrap_err();
            assert!(format!("{err:#}").contains(key), "{text}: {err:#}");
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
    fn a_user_ignore_list_extends_the_defaults() {
        let config = check("[campaign]\nignore = [\"Borradores\"]\n", &[("HOME", "/home/dm")]).unwrap();
        for ignored in [".trash", ".obsidian", "Plantillas", "Borradores"] {
            assert!(config.campaign.ignore.iter().any(|i| i == ignored), "{ignored}: {:?}", config.campaign.ignore);
        }
    }

    #[test]
    fn env_beats_file() {
        let text = "data_dir = \"/from/file\"\n[embedder]\nbackend = \"embedded\"\n";
        let config = check(text, &[("ORACULO_DATA", "/from/env"), ("ORACULO_EMBEDDER", "ollama")]).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/from/env"));
        assert!(matches!(config.embedder, EmbedderConfig::Ollama(_)));
    }

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
    fn session_patterns_extend_the_episode_codes() {
        let config = check(
            "[[campaign.session_patterns]]\npattern = \"(?i)^recap s(?P<number>\\\\d+)\"\n\n[[campaign.session_patterns]]\npattern = \"^Libro 2 - (?P<number>\\\\d+)\"\noffset = 40\n",
            &[("HOME", "/h")],
        )
        .unwrap();
        let patterns = &config.campaign.corpus.session_patterns;
        assert_eq!(patterns.len(), 3, "{patterns:?}");
        let session = |path: &str| crate::corpus::session_from_patterns(patterns, path, None).map(|s| s.0);
        assert_eq!(session("C2E004.md"), Some(1004));
        assert_eq!(session("Recap S12.md"), Some(12));
        assert_eq!(session("Libro 2 - 3.md"), Some(43));
        for (text, needle) in [
            ("[[campaign.session_patterns]]\npattern = \"^S(\\\\d+)\"\n", "session_patterns[0]"),
            ("[[campaign.session_patterns]]\npattern = \"^S(?P<number>\"\n", "regex"),
            ("[[campaign.session_patterns]]\npatern = \"x\"\n", "patern"),
        ] {
            let err = check(text, &[("HOME", "/h")]).unwrap_err();
            assert!(format!("{err:#}").contains(needle), "{text}: {err:#}");
        }
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
