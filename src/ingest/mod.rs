//! Ingest: campaign folder → corpus → index. The one stage that reads the notes from disk.
//!
//! 1. walk the folder (ignored paths, symlink loops, non-Markdown files skipped);
//! 2. read each note, refusing binaries and oversize files with a warning that names them;
//! 3. parse and fragment the whole campaign (cheap: labels depend on every file);
//! 4. embed only the fragments whose content hash has no vector yet, committing vectors to
//!    LanceDB batch by batch (an interrupted run keeps what it paid for);
//! 5. commit SQLite in one transaction, last; then drop orphaned vectors.
//!
//! Architecture invariant: a failure on one file is a [`Diagnostic`], never an abort; only the
//! index or the embedder failing stops an ingest, and then the previous index stays as it was.

mod annotate;
mod commit;
mod embed;
mod guard;
mod read;

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use tracing::{Instrument, info, info_span, warn};

use crate::config::CampaignConfig;
use crate::corpus::{self, Diagnostic};
use crate::index::{Index, IndexError, vector_table_name};
use crate::llm::{Embedder, LlmError};

pub use annotate::{AnnotationReport, annotate_fragments, annotate_new_fragments};
pub use guard::{MASS_REMOVAL_MIN_NOTES, MASS_REMOVAL_SHARE, MassRemoval, Removal};
pub use read::{is_markdown, reads_path};

/// Bump when the compendium's rules change, so the next ingest rebuilds it even if no note did.
pub const COMPENDIUM_VERSION: &str = "2";

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("campaign folder {path} cannot be read: {source}")]
    Campaign {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("embedding failed, the previous index is unchanged: {0}")]
    Embed(#[from] LlmError),
    /// The ingest would remove most of the campaign: refused, the last index stays.
    #[error("ingest refused: {0}")]
    MassRemoval(MassRemoval),
}

impl IngestError {
    /// Another ingest holds the index (this process's or another's): try again later.
    pub fn is_busy(&self) -> bool {
        matches!(self, IngestError::Index(IndexError::Busy { .. }))
    }

    /// The mass-removal guard refused the ingest: only the DM can confirm it, so retrying
    /// without a change would refuse again.
    pub fn is_refused_removal(&self) -> bool {
        matches!(self, IngestError::MassRemoval(_))
    }
}

/// How one ingest runs: the embedder's batch size, and whether it may remove most notes.
#[derive(Debug, Clone, Copy)]
pub struct IngestOptions {
    pub batch_size: usize,
    pub removal: Removal,
}

impl IngestOptions {
    /// An ingest nobody confirmed a mass removal for.
    pub fn guarded(batch_size: usize) -> IngestOptions {
        IngestOptions { batch_size, removal: Removal::Guarded }
    }
}

/// What an ingest did. `oraculo ingest --json` prints exactly this.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IngestSummary {
    pub campaign: String,
    pub files: usize,
    pub sessions: usize,
    pub sheets: usize,
    pub world_documents: usize,
    pub fragments: usize,
    pub dm_only_fragments: usize,
    pub entities: usize,
    pub files_changed: usize,
    pub files_removed: usize,
    pub warnings: Vec<Diagnostic>,
    pub embedder: String,
    pub embedding_calls: usize,
    pub windows_embedded: usize,
    pub vectors_dropped: usize,
    /// The vector table's cleanup after the commit: old versions removed, small files compacted.
    pub vector_cleanup: crate::index::vectors::Compaction,
    /// Extractive annotations made (a fragment's most central sentences, no model): one for
    /// every new fragment, so the summaries have a headline where no model wrote one.
    pub extractive_annotations: usize,
    /// Annotations of texts no fragment holds any more, removed
    /// ([`crate::index::store::Store::prune_orphaned_annotations`]).
    pub annotations_pruned: usize,
    /// The annotation pass that followed, when one ran.
    pub annotations: Option<AnnotationReport>,
    pub seconds: f64,
}

/// Progress, for a terminal bar or a Discord status line. Called from the ingest's task.
pub trait IngestProgress: Send + Sync {
    /// `total` windows are about to be embedded.
    fn embedding_started(&self, _total: usize) {}
    /// `n` more windows are done.
    fn embedded(&self, _n: usize) {}
    /// `total` fragments are about to be annotated.
    fn annotating_started(&self, _total: usize) {}
    /// `n` more fragments are annotated.
    fn annotated(&self, _n: usize) {}
}

/// No progress shown.
pub struct Quiet;
impl IngestProgress for Quiet {}

/// Every note an ingest of `campaign_dir` would read, as (path, sha256 of its bytes), in path
/// order: what `oraculo doctor` compares with the index to tell which notes changed since.
pub fn note_hashes(campaign_dir: &Path, config: &CampaignConfig) -> Result<Vec<(String, String)>, IngestError> {
    let mut diagnostics = Vec::new();
    let files = read::read_campaign(campaign_dir, config, &mut diagnostics)?;
    Ok(files.files.into_iter().map(|file| (file.path, file.bytes_hash)).collect())
}

pub use crate::corpus::audit::SecretsAudit;

/// What `campaign_dir`'s notes hide from players and why ([`corpus::audit`]), read as an
/// ingest reads them, nothing written.
pub fn audit_secrets(campaign_dir: &Path, config: &CampaignConfig) -> Result<SecretsAudit, IngestError> {
    let (notes, _) = read_notes(campaign_dir, config)?;
    Ok(corpus::audit::audit(&notes, &config.corpus))
}

/// Every note of `campaign_dir` as an ingest reads it (the same walk and the same corpus
/// rules, nothing written), with the diagnostics.
pub fn read_notes(
    campaign_dir: &Path,
    config: &CampaignConfig,
) -> Result<(Vec<corpus::Note>, Vec<corpus::Diagnostic>), IngestError> {
    let mut diagnostics = Vec::new();
    let files = read::read_campaign(campaign_dir, config, &mut diagnostics)?;
    let sources: Vec<(&str, &str)> = files.files.iter().map(|file| (file.path.as_str(), file.text.as_str())).collect();
    let (notes, note_diagnostics) = corpus::parse_campaign(&sources, &config.corpus);
    diagnostics.extend(note_diagnostics);
    Ok((notes, diagnostics))
}

/// Reads, fragments, embeds and indexes `campaign_dir` into `index`; a mass removal is
/// refused ([`Removal::Guarded`]).
pub async fn ingest_campaign(
    index: &mut Index,
    campaign_dir: &Path,
    config: &CampaignConfig,
    embedder: &dyn Embedder,
    batch_size: usize,
    progress: &dyn IngestProgress,
) -> Result<IngestSummary, IngestError> {
    ingest_campaign_with(index, campaign_dir, config, embedder, IngestOptions::guarded(batch_size), progress).await
}

/// [`ingest_campaign`] with its options: the removal of most notes allowed when the DM
/// confirmed it.
pub async fn ingest_campaign_with(
    index: &mut Index,
    campaign_dir: &Path,
    config: &CampaignConfig,
    embedder: &dyn Embedder,
    options: IngestOptions,
    progress: &dyn IngestProgress,
) -> Result<IngestSummary, IngestError> {
    let batch_size = options.batch_size;
    let started = Instant::now();
    let span = info_span!("ingest", campaign = %campaign_dir.display());
    async move {
        let _lock = index.lock_for_ingest()?;
        let mut diagnostics = Vec::new();

        let stored = index.store.file_fingerprints()?;
        let campaign = commit::prepare(index, campaign_dir, config, &stored, &mut diagnostics)?;
        let mut summary = commit::summarize(campaign_dir, &campaign.records);
        summary.embedder = embedder.id().to_string();
        summary.entities = campaign.compendium.compendium.entities.len();
        let plan = commit::plan(index, &stored, &campaign)?;
        let stored_hashes = index.store.file_hashes()?;
        guard::check(
            options.removal,
            campaign_dir,
            &stored_hashes,
            &plan.removals,
            &campaign.records,
            campaign.n_kept(),
        )
        .map_err(|refused| {
            warn!(
                n_indexed = refused.indexed,
                n_removed = refused.removed,
                n_read = refused.read,
                "mass removal refused; the last index stays"
            );
            IngestError::MassRemoval(refused)
        })?;
        summary.files_changed = plan.upserts.len();
        summary.files_removed = plan.removals.len();

        // What LanceDB lacks: every fragment of the new campaign needs its vectors, changed
        // file or not (a previous run may have been cut short, or the embedder changed).
        let table = vector_table_name(embedder.id(), embedder.dimension());
        let (calls, windows) =
            embed::embed_missing(index, &table, embedder, &campaign.records, batch_size, progress).await?;
        summary.embedding_calls = calls;
        summary.windows_embedded = windows;

        commit::commit(index, &table, embedder, campaign, plan, &mut diagnostics, &mut summary).await?;

        summary.warnings = diagnostics;
        summary.seconds = started.elapsed().as_secs_f64();
        info!(
            n_files = summary.files,
            n_fragments = summary.fragments,
            n_changed = summary.files_changed,
            n_windows = summary.windows_embedded,
            seconds = summary.seconds,
            "ingest complete"
        );
        Ok(summary)
    }
    .instrument(span)
    .await
}
