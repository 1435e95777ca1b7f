//! `oraculo mcp`: the retrieval half of Oráculo served to the assistants a DM already uses,
//! over the Model Context Protocol on stdin and stdout (the `rmcp` SDK).
//!
//! - [`serve`]: opens the campaigns (one, or every `[[campaigns]]` entry) on one embedder,
//!   and serves them to one audience until the client closes the session.
//! - `server`: the tools (`search`, `ask`, `timeline`, `recap`, `source`, `sessions`,
//!   `compendium`), each label as a resource, and the `cite_the_notes` prompt.
//! - `params`: what each tool takes, and its description.
//! - `failure`: a tool that could not answer, as a tool error with its fix.
//! - `output`: what each tool answers, structured and as cited text.
//! - `uri`: the resources' URIs.
//!
//! Stdout is the protocol: logs go to stderr (`logging`), and nothing here prints.

mod campaign;
mod failure;
mod output;
mod params;
mod server;
mod uri;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use rmcp::ServiceExt as _;

use crate::config::{CampaignConfig, Config};
use crate::retrieve::Audience;

pub use output::View;

/// How `oraculo mcp` was started.
#[derive(Debug, Clone)]
pub struct McpOptions {
    /// Players (the default) or the GM.
    pub audience: Audience,
    /// The `--campaign` the command line gave, as written: that campaign alone is served.
    /// `None`: every campaign of the configuration.
    pub campaign_flag: Option<String>,
    /// The flags that say where the config and the data are (`--config FILE`, `--data DIR`),
    /// repeated in the fixes the server gives (`oraculo ingest --config FILE`).
    pub flags: Vec<String>,
}

/// Serves the campaigns to `options.audience` on stdin and stdout until the client ends the
/// session (closes stdin). The embedder is loaded once, now; the chat model on the first
/// answer that needs it. A campaign with no index yet is served all the same: its tools say
/// to run `oraculo ingest`.
pub async fn serve(config: Config, options: McpOptions) -> anyhow::Result<()> {
    let served = served_campaigns(&config, options.campaign_flag.is_some());
    let embedder = crate::app::connect_embedder(&config.embedder, &config.data_dir)
        .await
        .context("loading the embedder (the search needs it)")?;
    let several = served.len() > 1;
    let mut campaigns = Vec::new();
    for (name, campaign) in served {
        let notes = crate::app::campaign_notes(&config, &campaign, Arc::clone(&embedder))
            .with_context(|| format!("campaign {name}"))?;
        let searcher = crate::app::campaign_searcher(&config, notes.clone());
        let ingest = ingest_command(&options, several.then_some(name.as_str()));
        campaigns.push(campaign::Campaign::new(name, campaign, notes, searcher, ingest));
    }
    let names: Vec<&str> = campaigns.iter().map(|campaign| campaign.name.as_str()).collect();
    tracing::info!(campaigns = %names.join(", "), audience = ?options.audience, "serving MCP on stdin and stdout");
    let worker = crate::app::worker::LocalWorker::start("mcp").context("starting the tools' thread")?;
    let state = server::State::new(config, options.audience, campaigns, worker);
    let running = server::OraculoServer::new(state)
        .serve(rmcp::transport::stdio())
        .await
        .context("starting the MCP session on stdin and stdout")?;
    let quit = running.waiting().await.context("the MCP session")?;
    tracing::info!(?quit, "MCP session over");
    Ok(())
}

/// The campaigns served, each with its name: the one `--campaign` picked (the configuration
/// resolved it as every command does), else every campaign of the configuration.
fn served_campaigns(config: &Config, only_named: bool) -> Vec<(String, CampaignConfig)> {
    if !only_named {
        return config.campaigns.iter().map(|named| (named.name.clone(), named.campaign.clone())).collect();
    }
    let name = config
        .campaigns
        .iter()
        .find(|named| named.campaign.dir == config.campaign.dir)
        .map(|named| named.name.clone())
        .or_else(|| {
            config.campaign.dir.as_deref().and_then(Path::file_name).map(|name| name.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "sample".to_string());
    vec![(name, config.campaign.clone())]
}

/// `oraculo ingest` for one served campaign, with the server's own flags, written to be pasted
/// into a shell.
fn ingest_command(options: &McpOptions, several: Option<&str>) -> String {
    let mut words = vec!["oraculo".to_string(), "ingest".to_string()];
    words.extend(options.flags.iter().cloned());
    if let Some(campaign) = several.or(options.campaign_flag.as_deref()) {
        words.push("--campaign".to_string());
        words.push(campaign.to_string());
    }
    words.iter().map(|word| shell_word(word)).collect::<Vec<_>>().join(" ")
}

/// `word` as a shell reads it back: as it is when it is plain, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word.chars().all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ':' | '=' | '+' | ','));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

#[cfg(test)]
mod tests {
    use super::{McpOptions, ingest_command};
    use crate::retrieve::Audience;

    fn check(flags: &[&str], campaign_flag: Option<&str>, several: Option<&str>, expected: &str) {
        let options = McpOptions {
            audience: Audience::Player,
            campaign_flag: campaign_flag.map(str::to_string),
            flags: flags.iter().map(|flag| flag.to_string()).collect(),
        };
        assert_eq!(ingest_command(&options, several), expected);
    }

    #[test]
    fn the_fix_for_no_index_is_the_ingest_of_the_same_campaign() {
        check(&[], None, None, "oraculo ingest");
        check(&["--config", "/home/dm/config.toml"], None, None, "oraculo ingest --config /home/dm/config.toml");
        check(
            &["--data", "/tmp/my data"],
            Some("Galerna"),
            None,
            "oraculo ingest --data '/tmp/my data' --campaign Galerna",
        );
        check(&[], None, Some("Vorn's"), r"oraculo ingest --campaign 'Vorn'\''s'");
    }
}
