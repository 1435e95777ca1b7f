//! The notes read: the one ingest the CLI, the eval and `/reingest` run (the annotations and
//! the entity merge after it), and the secrets audit (the notes read as an ingest reads them,
//! nothing written).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::open::campaign_paths;
use crate::config::{CampaignConfig, Config};
use crate::index::Index;
use crate::ingest::{
    AnnotationReport, IngestError, IngestOptions, IngestProgress, IngestSummary, Quiet, SecretsAudit,
    annotate_fragments, ingest_campaign, ingest_campaign_with,
};
use crate::llm::Embedder;
use crate::llm::chat::ChatModel;

/// What `campaign` hides from players and why, and the visible lines that hold a GM word
/// (`oraculo secrets`, and the counts `oraculo doctor` prints): the notes read as an ingest
/// reads them, nothing written.
pub fn audit_secrets(config: &Config, campaign: &CampaignConfig) -> anyhow::Result<(PathBuf, SecretsAudit)> {
    let (campaign_dir, _) = campaign_paths(config, campaign)?;
    let audit = crate::ingest::audit_secrets(&campaign_dir, campaign)
        .with_context(|| format!("reading {}", campaign_dir.display()))?;
    Ok((campaign_dir, audit))
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
