//! `oraculo init`: a DM's own notes folder read as the ingest reads it ([`survey_campaign`]),
//! the model this machine can run picked (an Ollama that answers, else the embedded models),
//! and a commented `config.toml` written for both, under which `oraculo ingest` and `oraculo
//! ask` work with no edit. It asks nothing: what it can detect, it detects.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Serialize;

use super::survey::{CampaignSurvey, survey_campaign};
use crate::config::{CliOverrides, Config, DEFAULT_OLLAMA_CHAT_MODEL, DEFAULT_OLLAMA_EMBED_MODEL, RawConfig};
use crate::corpus::LabelLanguage;

/// How long `oraculo init` waits for an Ollama to list its models: one on this machine or the
/// network answers in milliseconds, and a DM should not wait on one that is not there.
const OLLAMA_PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// What `oraculo init` is asked to do.
#[derive(Debug, Clone)]
pub struct InitOptions {
    /// The notes folder.
    pub campaign_dir: PathBuf,
    /// Where the config goes.
    pub config_path: PathBuf,
    /// `--data`, written into the config when given (else the default data dir stays).
    pub data_dir: Option<PathBuf>,
    /// The data dir the model files are looked for in (the one the config will use).
    pub models_data_dir: PathBuf,
    /// Where an Ollama would answer (`ORACULO_OLLAMA_URL`, else Ollama's usual address).
    pub ollama_url: String,
    /// Overwrite an existing config.
    pub force: bool,
}

/// What `oraculo init` found and did: printed as text, or as JSON with `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct InitReport {
    pub campaign_dir: PathBuf,
    pub config_path: PathBuf,
    pub survey: CampaignSurvey,
    pub model: ModelChoice,
    /// The three commands to run next, in order.
    pub next_commands: Vec<String>,
}

/// The models the written config names, and why.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "backend", rename_all = "lowercase")]
pub enum ModelChoice {
    /// An Ollama answered at `url`.
    Ollama {
        url: String,
        embedder: String,
        chat: String,
        /// What it lists as pulled.
        pulled: Vec<String>,
        /// The models the config names that it has not pulled yet.
        to_pull: Vec<String>,
    },
    /// No Ollama answered: the embedded models, on this CPU.
    Embedded {
        /// Why not Ollama: what the probe of `ollama_url` said.
        ollama_url: String,
        ollama_error: String,
        /// The embedded model files missing from the data dir (`scripts/fetch-models.sh`).
        missing_files: Vec<String>,
    },
}

/// Surveys the folder, picks the model, writes the config; refuses to overwrite one without
/// `force`, and to write one inside the notes folder (Oráculo never writes there).
pub async fn init_campaign(options: &InitOptions) -> anyhow::Result<InitReport> {
    let campaign_dir = std::fs::canonicalize(&options.campaign_dir)
        .with_context(|| format!("the notes folder {}", options.campaign_dir.display()))?;
    let config_path = absolute(&options.config_path)?;
    if config_path.starts_with(&campaign_dir) {
        bail!(
            "{} is inside the notes folder, and Oráculo never writes there: give --config a path outside it (e.g. ~/oraculo/config.toml)",
            config_path.display()
        );
    }
    if config_path.exists() && !options.force {
        bail!("{} exists: pass --force to overwrite it, or --config to write another file", config_path.display());
    }
    // First with the defaults, for the language and the markers seen; then again
    // under the config as written, which is what the ingest will read.
    let first = survey_campaign(&campaign_dir, &campaign_config(&campaign_dir, None)?)?;
    let model = choose_model(options).await;
    let text = render_config(&campaign_dir, options.data_dir.as_deref(), &first, &model);
    let written = campaign_config(&campaign_dir, Some(&text))?;
    let survey = survey_campaign(&campaign_dir, &written)?;
    if let Some(folder) = config_path.parent() {
        std::fs::create_dir_all(folder).with_context(|| format!("creating {}", folder.display()))?;
    }
    std::fs::write(&config_path, &text).with_context(|| format!("writing {}", config_path.display()))?;
    let next_commands = next_commands(&config_path, &model, survey.language);
    Ok(InitReport { campaign_dir, config_path, survey, model, next_commands })
}

/// The campaign settings of `config_text` (the defaults when `None`) for `campaign_dir`,
/// validated as every command validates them.
fn campaign_config(campaign_dir: &Path, config_text: Option<&str>) -> anyhow::Result<crate::config::CampaignConfig> {
    let raw = match config_text {
        Some(text) => RawConfig::parse(text, Path::new("config.toml")).context("the config oraculo init wrote")?,
        None => RawConfig::default(),
    };
    // Only what the file says: the environment must not change what is shown as detected.
    let env = |key: &str| (key == "HOME").then(|| "/".to_string());
    let overrides = CliOverrides { campaign_dir: Some(campaign_dir.to_path_buf()), ..CliOverrides::default() };
    Ok(Config::from_layers(raw, &env, &overrides)?.campaign)
}

fn absolute(path: &Path) -> anyhow::Result<PathBuf> {
    let path = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir()?.join(path) };
    // The folder may not exist yet; its existing part is resolved, so a link to the notes
    // folder is seen for what it is.
    match (path.parent().and_then(|parent| std::fs::canonicalize(parent).ok()), path.file_name()) {
        (Some(parent), Some(name)) => Ok(parent.join(name)),
        _ => Ok(path),
    }
}

/// The Ollama at `options.ollama_url` when it answers, else the embedded models.
async fn choose_model(options: &InitOptions) -> ModelChoice {
    match crate::llm::ollama_pulled_models(&options.ollama_url, OLLAMA_PROBE_TIMEOUT).await {
        Ok(pulled) => {
            let is_pulled = |model: &str| {
                let tagged = if model.contains(':') { model.to_string() } else { format!("{model}:latest") };
                pulled.iter().any(|name| *name == tagged || name == model)
            };
            // A chat model already pulled saves a 9 GB download; the default when there is none.
            let chat = if is_pulled(DEFAULT_OLLAMA_CHAT_MODEL) {
                DEFAULT_OLLAMA_CHAT_MODEL.to_string()
            } else {
                pulled
                    .iter()
                    .find(|name| name.starts_with("qwen2.5") || name.starts_with("qwen3"))
                    .cloned()
                    .unwrap_or_else(|| DEFAULT_OLLAMA_CHAT_MODEL.to_string())
            };
            let embedder = DEFAULT_OLLAMA_EMBED_MODEL.to_string();
            let to_pull = [&embedder, &chat].into_iter().filter(|model| !is_pulled(model)).cloned().collect();
            ModelChoice::Ollama { url: options.ollama_url.clone(), embedder, chat, pulled, to_pull }
        }
        Err(error) => {
            let models = options.models_data_dir.join("models");
            let wanted = [crate::llm::embed::e5::E5_MODEL_FILE, crate::llm::chat::llama_cpp::QWEN_1_5B_FILE];
            let missing_files =
                wanted.iter().filter(|file| !models.join(file).is_file()).map(|file| file.to_string()).collect();
            ModelChoice::Embedded { ollama_url: options.ollama_url.clone(), ollama_error: error, missing_files }
        }
    }
}

/// A TOML string (quoted and escaped as TOML wants).
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// The config `oraculo init` writes: every choice with the reason beside it.
fn render_config(campaign_dir: &Path, data_dir: Option<&Path>, survey: &CampaignSurvey, model: &ModelChoice) -> String {
    let mut out = String::new();
    out.push_str("# Oráculo's configuration, written by `oraculo init` from what it read in the notes folder.\n");
    out.push_str("# Every key: docs/configuration.md (config.toml.example lists them all, with defaults).\n");
    out.push_str("# Use it with --config FILE, or ORACULO_CONFIG=FILE.\n\n");
    if let Some(data_dir) = data_dir {
        out.push_str("# Where the indexes and the model files live.\n");
        out.push_str(&format!("data_dir = {}\n\n", toml_string(&data_dir.to_string_lossy())));
    }
    out.push_str(&render_campaign(campaign_dir, survey));
    out.push_str(&render_models(model));
    out.push_str(DISCORD_TEMPLATE);
    out
}

/// `[campaign]`: the folder, the labels' language, what is secret.
fn render_campaign(campaign_dir: &Path, survey: &CampaignSurvey) -> String {
    let mut out = String::from("[campaign]\n");
    out.push_str(&format!(
        "# The notes folder: {} notes read ({} sessions, {} sheets, {} world documents).\n",
        survey.n_notes,
        survey.sessions.len(),
        survey.sheets.len(),
        survey.world.len()
    ));
    out.push_str(&format!("dir = {}\n", toml_string(&campaign_dir.to_string_lossy())));
    let (language, labels) = match survey.language {
        LabelLanguage::Es => ("es", "\"Sesión N\", \"Ficha: …\", \"Mundo: …\""),
        LabelLanguage::En => ("en", "\"Session N\", \"Sheet: …\", \"World: …\""),
    };
    out.push_str(&format!(
        "# The notes' language ({} Spanish and {} English common words counted): the labels read {labels}.\n",
        survey.language_words.spanish, survey.language_words.english
    ));
    out.push_str(&format!("label_language = \"{language}\"\n"));
    out.push_str("# GM-only as a whole, besides every folder or file whose name holds a GM word");
    if survey.secret_folders.is_empty() {
        out.push_str("\n");
    } else {
        let seen: Vec<&str> = survey.secret_folders.iter().map(String::as_str).collect();
        out.push_str(&format!(" (seen: {})\n", seen.join(", ")));
    }
    out.push_str("# and the default folders \"Secretos\" and \"Secrets\": a folder of GM notes named otherwise\n");
    out.push_str("# goes here by name (any depth).\n");
    out.push_str("secret_paths = []\n");
    out.push_str("# GM words, besides the defaults (secret, secreto, gm, dm, dj, máster, narrador, private,\n");
    out.push_str(
        "# spoiler, hidden…): a callout type, comment opener, tag or front matter key holding one is GM-only.\n",
    );
    if !survey.secret_markers.is_empty() {
        out.push_str(&format!("# Seen in your notes, already GM-only: {}.\n", counted(&survey.secret_markers)));
    }
    if !survey.player_callouts.is_empty() {
        out.push_str(&format!(
            "# Callouts seen that players read: {}; add a word of one here if it is for the GM alone.\n",
            counted(&survey.player_callouts)
        ));
    }
    out.push_str("secret_words = []\n");
    if !survey.world_by_default.is_empty() {
        out.push_str(&format!(
            "# Read as world documents because nothing said otherwise: {}.\n# A folder of character sheets or sessions says so here (uncomment and edit):\n# [campaign.kind_folders]\n",
            counted(&survey.world_by_default)
        ));
        if let Some(folder) = survey.world_by_default.keys().find(|folder| folder.as_str() != super::survey::TOP_FOLDER)
        {
            let leaf = folder.rsplit('/').next().unwrap_or(folder);
            out.push_str(&format!("# {} = \"sheet\"\n", toml_string(leaf)));
        }
    }
    out.push('\n');
    out
}

/// `name (n), name (n)`.
fn counted(map: &std::collections::BTreeMap<String, usize>) -> String {
    map.iter().map(|(name, n)| format!("{name} ({n})")).collect::<Vec<_>>().join(", ")
}

/// `[embedder]`, `[ollama]` and `[chat]` for the model chosen.
fn render_models(model: &ModelChoice) -> String {
    match model {
        ModelChoice::Ollama { url, embedder, chat, .. } => format!(
            "# An Ollama answered at {url}: the models run there (a GPU makes answers take seconds).\n\
             [embedder]\nbackend = \"ollama\"\nmodel = {embedder}\n\n\
             [ollama]\nurl = {url_toml}\n\n\
             [chat]\nbackend = \"ollama\"\n\
             # Which chat model for your GPU's memory: docs/deployment.md (8 GB: qwen2.5:7b).\nmodel = {chat}\n\
             # Each sentence with the notes it rests on, checked before it is shown.\nanswer_mode = \"structured\"\n\n",
            embedder = toml_string(embedder),
            chat = toml_string(chat),
            url_toml = toml_string(url),
        ),
        ModelChoice::Embedded { ollama_url, .. } => format!(
            "# No Ollama answered at {ollama_url}: the embedded models, on this CPU (no server).\n\
             # With Ollama running, `oraculo init --force` writes its models instead.\n\
             [embedder]\nbackend = \"embedded\"\n\n\
             [chat]\nbackend = \"embedded\"\n\
             # Each sentence with the notes it rests on, checked before it is shown: the only way\n\
             # a small model cites reliably.\nanswer_mode = \"structured\"\n\
             # How long an answer may take on this CPU; the context is planned to fit it.\nanswer_seconds = 90\n\n"
        ),
    }
}

/// The bot's section, for later.
const DISCORD_TEMPLATE: &str = "# The Discord bot (docs/discord-setup.md): uncomment and fill in your ids; the token goes in\n\
# the environment (DISCORD_TOKEN), never here.\n\
# [discord]\n# dm_user_ids = []\n# gm_channel_ids = []\n# guild_ids = []\n";

/// The three commands after `oraculo init`: the models if any are missing, the ingest, a
/// question in the notes' language (else the doctor first).
fn next_commands(config_path: &Path, model: &ModelChoice, language: LabelLanguage) -> Vec<String> {
    let config = shell_word(&config_path.to_string_lossy());
    let first = match model {
        ModelChoice::Ollama { to_pull, .. } if !to_pull.is_empty() => {
            to_pull.iter().map(|model| format!("ollama pull {model}")).collect::<Vec<_>>().join(" && ")
        }
        ModelChoice::Embedded { missing_files, .. } if !missing_files.is_empty() => {
            "bash scripts/fetch-models.sh --chat 1.5b".to_string()
        }
        _ => format!("oraculo doctor --config {config}"),
    };
    // On a CPU the annotations cost a model call per note's fragment (~20 s each): the index
    // answers without them, and `oraculo annotate` fills them later.
    let ingest = match model {
        ModelChoice::Embedded { .. } => format!("oraculo ingest --config {config} --no-annotate"),
        ModelChoice::Ollama { .. } => format!("oraculo ingest --config {config}"),
    };
    let question = match language {
        LabelLanguage::Es => "¿Qué pasó en la última sesión?",
        LabelLanguage::En => "What happened in the last session?",
    };
    vec![first, ingest, format!("oraculo ask --config {config} {}", shell_word(question))]
}

/// `text` as one word for a POSIX shell.
fn shell_word(text: &str) -> String {
    let plain = text.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '-' | '_' | '~' | '+'));
    if plain && !text.is_empty() { text.to_string() } else { format!("'{}'", text.replace('\'', r"'\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_word_with_spaces_or_quotes_is_quoted_for_the_shell() {
        for (text, word) in [
            ("/home/dm/config.toml", "/home/dm/config.toml"),
            ("/home/dm/Mis notas/config.toml", "'/home/dm/Mis notas/config.toml'"),
            ("¿Qué pasó?", "'¿Qué pasó?'"),
            ("it's", r"'it'\''s'"),
        ] {
            assert_eq!(shell_word(text), word);
        }
    }
}
