//! Opening a campaign: where its notes and its index live (the embedded sample written out
//! when none is configured), and its oracle over the models the configuration names, for
//! the CLI, the bot (every campaign it serves) and the MCP server.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;

use super::models::{connect_chat, connect_embedder};
use crate::config::{CampaignConfig, Config, NamedCampaign};
use crate::index::campaign_index_dir;
use crate::llm::Embedder;
use crate::llm::chat::ChatModel;
use crate::notes::Notes;
use crate::oracle::{AnswerSettings, Oracle};

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

/// The notes of the CLI's campaign for a search only (`oraculo search`): the configured
/// embedder, and no chat model loaded (the embedded one costs seconds and a gigabyte; a
/// search never asks it). The same [`Notes::search`] the bot runs, `k` as asked.
pub async fn open_searcher(config: &Config, k: usize) -> anyhow::Result<Notes> {
    let embedder = connect_embedder(&config.embedder, &config.data_dir).await?;
    Ok(campaign_notes(config, &config.campaign, embedder)?.with_k(k))
}

/// The notes of `campaign`, read with `embedder`, `k` the default.
pub fn campaign_notes(
    config: &Config,
    campaign: &CampaignConfig,
    embedder: Arc<dyn Embedder>,
) -> anyhow::Result<Notes> {
    let (_, index_dir) = campaign_paths(config, campaign)?;
    Ok(Notes::new(&index_dir, embedder))
}

/// The oracle of `notes` with no chat model: asked to answer, it answers with the notes' own
/// sentences.
pub fn campaign_searcher(config: &Config, notes: Notes) -> Oracle {
    let mut settings = AnswerSettings::from_config(config.chat_max_tokens, &config.answer);
    settings.mode = crate::answer::AnswerMode::Extractive;
    Oracle::over(notes, Arc::new(crate::llm::chat::NoChat), settings)
}

/// The oracle of `notes` with a chat model already connected, answering as `[chat]` says (the
/// MCP server connects its chat model once, on the first question that needs it).
pub fn campaign_oracle(config: &Config, notes: Notes, chat: Arc<dyn ChatModel>) -> Oracle {
    Oracle::over(notes, chat, AnswerSettings::from_config(config.chat_max_tokens, &config.answer))
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
