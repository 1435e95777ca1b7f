//! The application layer: what the CLI, the bot and the evaluation share above the pipeline,
//! so that the same command never behaves two ways.
//!
//! - [`campaign_paths`]: a campaign's notes folder (the embedded sample written out when none
//!   is configured) and its index folder under the data dir.
//! - [`open_oracle`]: the CLI's campaign, its models connected ([`open_answerer`]: no chat
//!   model with `chat.answer_style = "quotes"`); [`open_searcher`]: the same
//!   oracle with no chat model loaded, for `oraculo search` (it never asks one);
//!   [`campaign_searcher`]: any campaign's, over an embedder already connected.
//! - [`ask_settled`]: one question answered through the oracle's one entry
//!   ([`Oracle::answer`]), and [`answer_json`], as `oraculo ask --json` prints it (the MCP
//!   server's `ask` gives the same).
//! - [`render_error`]: an error and its causes on one line, for the CLI and the MCP server.
//! - [`connect_embedder`], [`connect_chat`]: the models the configuration names (the only
//!   place that picks a backend; stages receive trait objects).
//! - [`audit_secrets`]: what a campaign hides from players, and why.
//! - [`ingest_and_annotate`]: the one ingest the CLI and `/reingest` run (with the entity
//!   merge after the annotations).
//! - [`open_campaigns`]: every campaign the bot serves, one oracle each over one shared
//!   embedder and one shared chat model (one llama.cpp model in memory, however many tables).
//! - [`worker::LocalWorker`]: a thread for the oracle's futures, which are not `Send`.
//! - [`init::init_campaign`]: `oraculo init`, a DM's notes folder surveyed as the ingest reads
//!   it ([`survey::survey_campaign`]) and a config written for it and for this machine.

pub mod init;
pub mod survey;
pub mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;

use crate::config::{CampaignConfig, Config, NamedCampaign};
use crate::index::{Index, campaign_index_dir};
use crate::ingest::{
    AnnotationReport, IngestError, IngestOptions, IngestProgress, IngestSummary, Quiet, SecretsAudit,
    annotate_fragments, ingest_campaign, ingest_campaign_with,
};
use crate::llm::chat::ChatModel;
use crate::llm::{Embedder, LlmError};
use crate::oracle::{AnswerSettings, AskError, AskRequest, Oracle, Settled};

/// The campaign folder an ingest reads: the configured one, or the embedded sample written
/// out under the data dir.
pub fn resolve_campaign_dir(configured: Option<&Path>, data_dir: &Path) -> std::io::Result<PathBuf> {
    match configured {
        Some(dir) => Ok(dir.to_path_buf()),
        None => crate::sample::materialize(&data_dir.join("sample-campaign")),
    }
}

/// The notes folder of `campaign` (the sample written out when it has none) and its index.
pub fn campaign_paths(config: &Config, campaign: &CampaignConfig) -> anyhow::Result<(PathBuf, PathBuf)> {
    let campaign_dir =
        resolve_campaign_dir(campaign.dir.as_deref(), &config.data_dir).context("writing the sample campaign")?;
    let index_dir = campaign_index_dir(&config.data_dir, &campaign_dir);
    Ok((campaign_dir, index_dir))
}

/// What `campaign` hides from players and why, and the visible lines that hold a GM word
/// (`oraculo secrets`, and the counts `oraculo doctor` prints): the notes read as an ingest
/// reads them, nothing written.
pub fn audit_secrets(config: &Config, campaign: &CampaignConfig) -> anyhow::Result<(PathBuf, SecretsAudit)> {
    let (campaign_dir, _) = campaign_paths(config, campaign)?;
    let audit = crate::ingest::audit_secrets(&campaign_dir, campaign)
        .with_context(|| format!("reading {}", campaign_dir.display()))?;
    Ok((campaign_dir, audit))
}

/// The oracle of the CLI's campaign (`config.campaign`).
pub async fn open_oracle(config: &Config) -> anyhow::Result<Oracle> {
    let (_, index_dir) = campaign_paths(config, &config.campaign)?;
    let embedder = connect_embedder(&config.embedder, &config.data_dir).await?;
    let chat = connect_chat(&config.chat, &config.data_dir).await?;
    Ok(Oracle::new(&index_dir, embedder, chat, AnswerSettings::from_config(config.chat_max_tokens, &config.answer)))
}

/// The oracle of the CLI's campaign for `oraculo ask` and `oraculo chat`: [`open_oracle`], but
/// with `chat.answer_style = "quotes"` no chat model is loaded (the embedded one costs seconds
/// and a gigabyte, and the notes' own sentences are the answer).
pub async fn open_answerer(config: &Config) -> anyhow::Result<Oracle> {
    if !config.answer.quotes() {
        return open_oracle(config).await;
    }
    let (_, index_dir) = campaign_paths(config, &config.campaign)?;
    let embedder = connect_embedder(&config.embedder, &config.data_dir).await?;
    let settings = AnswerSettings::from_config(config.chat_max_tokens, &config.answer);
    Ok(Oracle::new(&index_dir, embedder, Arc::new(crate::llm::chat::NoChat), settings))
}

/// The oracle of the CLI's campaign for a search only (`oraculo search`): the configured
/// embedder, and no chat model loaded (the embedded one costs seconds and a gigabyte; a
/// search never asks it). The same [`Oracle::search`] the bot runs, `k` as asked.
pub async fn open_searcher(config: &Config, k: usize) -> anyhow::Result<Oracle> {
    let embedder = connect_embedder(&config.embedder, &config.data_dir).await?;
    let mut oracle = campaign_searcher(config, &config.campaign, embedder)?;
    oracle.set_k(k.max(1));
    Ok(oracle)
}

/// The oracle of `campaign` for searching and reading only, over `embedder`: no chat model
/// (asked to answer, it answers with the notes' own sentences), `k` the default.
pub fn campaign_searcher(
    config: &Config,
    campaign: &CampaignConfig,
    embedder: Arc<dyn Embedder>,
) -> anyhow::Result<Oracle> {
    let (_, index_dir) = campaign_paths(config, campaign)?;
    let mut settings = AnswerSettings::from_config(config.chat_max_tokens, &config.answer);
    settings.mode = crate::answer::AnswerMode::Extractive;
    Ok(Oracle::new(&index_dir, embedder, Arc::new(crate::llm::chat::NoChat), settings))
}

/// The oracle of `campaign` over models already connected, answering as `[chat]` says (the
/// MCP server connects its chat model once, on the first question that needs it).
pub fn campaign_oracle(
    config: &Config,
    campaign: &CampaignConfig,
    embedder: Arc<dyn Embedder>,
    chat: Arc<dyn ChatModel>,
) -> anyhow::Result<Oracle> {
    let (_, index_dir) = campaign_paths(config, campaign)?;
    Ok(Oracle::new(&index_dir, embedder, chat, AnswerSettings::from_config(config.chat_max_tokens, &config.answer)))
}

/// Answers `request` through the oracle's one entry with nothing streamed: `oraculo ask
/// --json` and the MCP server's `ask`.
pub async fn ask_settled(oracle: &Oracle, request: &AskRequest<'_>) -> Result<Settled, AskError> {
    oracle.answer(request, &crate::oracle::no_events, None).await
}

/// `oraculo ask --json`'s object: the model's own answer (the notes' sentences when it failed
/// after them), with `instant` (the notes' own sentences shown first, or null), `instant_kept`
/// (why they stand instead of the model's answer, or null) and `settled` (what stays: `text`
/// and `notes_added`, the instant answer's sentences kept under the model's answer) beside
/// its fields.
pub fn settled_json(settled: &Settled) -> serde_json::Result<serde_json::Value> {
    let mut json = serde_json::to_value(settled.model.as_ref().unwrap_or(&settled.answer))?;
    if let Some(object) = json.as_object_mut() {
        object.insert("instant".into(), serde_json::to_value(&settled.instant)?);
        object.insert("instant_kept".into(), serde_json::to_value(settled.instant_kept)?);
        let stays = serde_json::json!({ "text": settled.answer.text, "notes_added": settled.notes_added });
        object.insert("settled".into(), stays);
    }
    Ok(json)
}

/// `oraculo ask --json`'s object ([`settled_json`]).
pub async fn answer_json(oracle: &Oracle, request: &AskRequest<'_>) -> anyhow::Result<serde_json::Value> {
    Ok(settled_json(&ask_settled(oracle, request).await?)?)
}

/// An error and its causes on one line, each said once. Several of the crate's errors carry
/// their cause's text in their own message *and* as their `source` (thiserror's `{0}` beside
/// `#[from]`), so anyhow's `{:#}` would print it twice: a cause whose text the line already
/// holds is left out.
pub fn render_error(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// One campaign the bot serves, opened.
pub struct OpenCampaign {
    pub named: NamedCampaign,
    pub campaign_dir: PathBuf,
    pub oracle: Oracle,
}

/// Every campaign of `config.campaigns`, each with its oracle; the models are connected once.
pub async fn open_campaigns(config: &Config) -> anyhow::Result<Vec<OpenCampaign>> {
    let embedder = connect_embedder(&config.embedder, &config.data_dir).await?;
    let chat = connect_chat(&config.chat, &config.data_dir).await?;
    let settings = AnswerSettings::from_config(config.chat_max_tokens, &config.answer);
    let mut opened = Vec::new();
    for named in &config.campaigns {
        let (campaign_dir, index_dir) =
            campaign_paths(config, &named.campaign).with_context(|| format!("campaign {}", named.name))?;
        let oracle = Oracle::new(&index_dir, Arc::clone(&embedder), Arc::clone(&chat), settings.clone());
        opened.push(OpenCampaign { named: named.clone(), campaign_dir, oracle });
    }
    Ok(opened)
}

/// Builds the embedder the configuration names. The only place that picks a backend:
/// stages receive a `&dyn Embedder` and never ask which one it is.
pub async fn connect_embedder(
    config: &crate::config::EmbedderConfig,
    data_dir: &std::path::Path,
) -> Result<Arc<dyn Embedder>, LlmError> {
    use crate::config::EmbedderConfig;
    match config {
        EmbedderConfig::Embedded { model_path, .. } => {
            let path = model_path.clone().unwrap_or_else(|| crate::llm::embed::e5::E5Embedder::default_path(data_dir));
            Ok(Arc::new(crate::llm::embed::e5::E5Embedder::load(&path)?))
        }
        EmbedderConfig::Ollama(ollama_config) => {
            Ok(Arc::new(crate::llm::embed::ollama::OllamaEmbedder::connect(ollama_config.clone()).await?))
        }
    }
}

/// Builds the chat model the configuration names, loading the embedded model when that is
/// the one (seconds, on a blocking thread). Stages receive an `Arc<dyn ChatModel>` and never
/// ask which backend it is.
pub async fn connect_chat(
    config: &crate::config::ChatConfig,
    data_dir: &std::path::Path,
) -> Result<Arc<dyn ChatModel>, LlmError> {
    use crate::config::ChatConfig;
    match config {
        ChatConfig::Embedded { gguf, threads, n_ctx } => {
            let gguf =
                gguf.clone().unwrap_or_else(|| crate::llm::chat::llama_cpp::LlamaCppChat::default_path(data_dir));
            let config = crate::llm::chat::llama_cpp::LlamaCppConfig { gguf, threads: *threads, n_ctx: *n_ctx };
            let speed_file = crate::llm::chat::llama_cpp::LlamaCppChat::speed_path(data_dir, &config);
            let model = tokio::task::spawn_blocking(move || crate::llm::chat::llama_cpp::LlamaCppChat::load(&config))
                .await
                .map_err(|err| LlmError::Worker(format!("loading the chat model: {err}")))??;
            Ok(Arc::new(model.remember_speed_in(speed_file)))
        }
        ChatConfig::Ollama(ollama_config) => {
            Ok(Arc::new(crate::llm::chat::ollama::OllamaChat::new(ollama_config.clone())?))
        }
        ChatConfig::OpenAi(openai_config) => {
            Ok(Arc::new(crate::llm::chat::openai::OpenAiChat::new(openai_config.clone())?))
        }
    }
}

/// What annotates the fragments after an ingest.
pub enum Annotator<'a> {
    /// No annotation pass (`oraculo ingest --no-annotate`).
    Skip,
    Model(&'a dyn ChatModel),
    /// The configured model could not be reached: the index is complete without annotations
    /// (the rerank just stays off), and the report says why.
    Unreachable(String),
}

/// The one ingest `oraculo ingest`, `oraculo eval` and the bot's `/reingest` run: the campaign
/// read incrementally and committed at once (questions keep reading the previous index until
/// then), then the annotation pass, then the entities the model extracted folded into the
/// compendium (a second pass that embeds nothing: no file changed). The ingest lock is taken
/// before the index is opened (and migrated), and held throughout.
pub async fn ingest_and_annotate(
    index_dir: &Path,
    campaign_dir: &Path,
    campaign: &CampaignConfig,
    embedder: &dyn Embedder,
    annotator: Annotator<'_>,
    options: IngestOptions,
    progress: &dyn IngestProgress,
) -> Result<IngestSummary, IngestError> {
    let mut index = Index::open_for_ingest(index_dir).await?;
    let mut summary = ingest_campaign_with(&mut index, campaign_dir, campaign, embedder, options, progress).await?;
    let batch_size = options.batch_size;
    match annotator {
        Annotator::Skip => {}
        Annotator::Model(chat) => {
            let report = annotate_fragments(&index, chat, progress).await;
            if report.extractions_made > 0 {
                let merged = ingest_campaign(&mut index, campaign_dir, campaign, embedder, batch_size, &Quiet).await?;
                summary.entities = merged.entities;
            }
            summary.annotations = Some(report);
        }
        Annotator::Unreachable(error) => {
            tracing::warn!(%error, "no chat model: fragments stay without annotations");
            let missing = index.store.content_hashes().map(|hashes| hashes.len()).unwrap_or(0);
            summary.annotations = Some(AnnotationReport {
                model: None,
                made: 0,
                missing,
                extractions_made: 0,
                error: Some(error),
                seconds: 0.0,
            });
        }
    }
    Ok(summary)
}
