//! The application layer: what the CLI, the bot and the evaluation share above the pipeline,
//! so that the same command never behaves two ways (issue 13).
//!
//! - [`campaign_paths`]: a campaign's notes folder (the embedded sample written out when none
//!   is configured) and its index folder under the data dir.
//! - [`open_oracle`]: the CLI's campaign, its models connected.
//! - [`open_campaigns`]: every campaign the bot serves, one oracle each over one shared
//!   embedder and one shared chat model (one llama.cpp model in memory, however many tables).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;

use crate::config::{CampaignConfig, Config, NamedCampaign};
use crate::index::campaign_index_dir;
use crate::ingest::resolve_campaign_dir;
use crate::oracle::{AnswerSettings, Oracle};

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
    let embedder = crate::llm::connect_embedder(&config.embedder, &config.data_dir).await?;
    let chat = crate::llm::connect_chat(&config.chat, &config.data_dir).await?;
    Ok(Oracle::new(&index_dir, embedder, chat, AnswerSettings::from_config(config.chat_max_tokens, &config.answer)))
}

/// One campaign the bot serves, opened.
pub struct OpenCampaign {
    pub named: NamedCampaign,
    pub campaign_dir: PathBuf,
    pub oracle: Oracle,
}

/// Every campaign of `config.campaigns`, each with its oracle; the models are connected once.
pub async fn open_campaigns(config: &Config) -> anyhow::Result<Vec<OpenCampaign>> {
    let embedder = crate::llm::connect_embedder(&config.embedder, &config.data_dir).await?;
    let chat = crate::llm::connect_chat(&config.chat, &config.data_dir).await?;
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
