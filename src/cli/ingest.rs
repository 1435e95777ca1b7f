//! `oraculo ingest` (and `--watch`) and `oraculo annotate`: the notes read into the index, the
//! annotations made, and what each run reports.

use std::io::IsTerminal;

use anyhow::Context;

use super::{CampaignArgs, IngestArgs, campaign_paths, open_campaign_index};
use crate::app::Annotator;
use crate::config::Config;
use crate::index::Index;
use crate::ingest::{
    AnnotationReport, IngestOptions, IngestProgress, IngestSummary, Quiet, Removal, annotate_fragments,
};

pub(super) async fn ingest(ingest_args: &IngestArgs) -> anyhow::Result<()> {
    let args = &ingest_args.campaign;
    let config = args.load_config()?;
    if ingest_args.watch {
        return watch_campaign(&config, !ingest_args.no_annotate, args.json).await;
    }
    let removal = if ingest_args.allow_removal { Removal::Allowed } else { Removal::Guarded };
    let summary = run_ingest(&config, !ingest_args.no_annotate, !args.json, removal).await?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print!("{}", render_summary(&summary));
    }
    Ok(())
}

/// `oraculo ingest --watch`: the watcher the bot runs, reporting on stdout until Ctrl-C.
async fn watch_campaign(config: &Config, annotate: bool, json: bool) -> anyhow::Result<()> {
    use crate::watch::{WatchModels, WatchSettings, WatchTarget};
    let (campaign_dir, index_dir) = campaign_paths(config)?;
    let embedder = crate::app::connect_embedder(&config.embedder, &config.data_dir).await?;
    let annotator = match annotate {
        false => None,
        true => match crate::app::connect_chat(&config.chat, &config.data_dir).await {
            Ok(chat) => Some(chat),
            Err(err) => {
                tracing::warn!(error = %err, "no chat model: new fragments stay without annotations");
                None
            }
        },
    };
    let target =
        WatchTarget::new(&campaign_dir, &index_dir, &config.data_dir, &config.campaign, config.embedder.batch_size());
    let (reports, mut received) = tokio::sync::mpsc::unbounded_channel();
    let watching = crate::watch::watch_campaign(
        target,
        WatchModels { embedder, annotator },
        WatchSettings::new(&config.campaign.watch),
        Some(reports),
        crate::discord::shutdown_signal(),
    );
    let print = async {
        while let Some(report) = received.recv().await {
            match json {
                true => println!("{}", serde_json::to_string(&report).unwrap_or_default()),
                false => println!("{}", report.render()),
            }
        }
    };
    let (watched, ()) = tokio::join!(watching, print);
    watched.with_context(|| format!("watching {}", campaign_dir.display()))
}

/// Ingests the configured campaign (incremental), then annotates new fragments and folds the
/// entities the model extracted into the compendium. What `oraculo ingest` and `oraculo eval`
/// run first.
pub(super) async fn run_ingest(
    config: &Config,
    annotate: bool,
    show_progress: bool,
    removal: Removal,
) -> anyhow::Result<IngestSummary> {
    let (campaign_dir, index_dir) = campaign_paths(config)?;
    let embedder = crate::app::connect_embedder(&config.embedder, &config.data_dir).await?;
    let chat = if annotate { Some(crate::app::connect_chat(&config.chat, &config.data_dir).await) } else { None };
    let annotator = match &chat {
        None => Annotator::Skip,
        Some(Ok(chat)) => Annotator::Model(chat.as_ref()),
        Some(Err(err)) => Annotator::Unreachable(err.to_string()),
    };
    let bar = if show_progress && std::io::stderr().is_terminal() { Some(ProgressBar::default()) } else { None };
    let progress: &dyn IngestProgress = match &bar {
        Some(bar) => bar,
        None => &Quiet,
    };
    let summary = crate::app::ingest_and_annotate(
        &index_dir,
        &campaign_dir,
        &config.campaign,
        embedder.as_ref(),
        annotator,
        IngestOptions { batch_size: config.embedder.batch_size(), removal },
        progress,
    )
    .await
    .with_context(|| format!("ingesting {}", campaign_dir.display()))?;
    if let Some(bar) = bar {
        bar.bar.finish_and_clear();
    }
    Ok(summary)
}

/// Runs the annotation pass with the configured chat model; an unreachable model is a
/// report, not an error (the index is complete without annotations, the rerank just stays off).
async fn annotate_with_config(config: &Config, index: &Index, progress: &dyn IngestProgress) -> AnnotationReport {
    match crate::app::connect_chat(&config.chat, &config.data_dir).await {
        Ok(chat) => annotate_fragments(index, chat.as_ref(), progress).await,
        Err(err) => {
            tracing::warn!(error = %err, "no chat model: fragments stay without annotations");
            let missing = index.store.content_hashes().map(|hashes| hashes.len()).unwrap_or(0);
            AnnotationReport {
                model: None,
                made: 0,
                missing,
                extractions_made: 0,
                error: Some(err.to_string()),
                seconds: 0.0,
            }
        }
    }
}

pub(super) async fn annotate(args: &CampaignArgs) -> anyhow::Result<()> {
    let config = args.load_config()?;
    let (_, index) = open_campaign_index(&config).await?;
    let bar = if !args.json && std::io::stderr().is_terminal() { Some(ProgressBar::default()) } else { None };
    let progress: &dyn IngestProgress = match &bar {
        Some(bar) => bar,
        None => &Quiet,
    };
    let report = annotate_with_config(&config, &index, progress).await;
    if let Some(bar) = bar {
        bar.bar.finish_and_clear();
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", render_annotations(&report));
    }
    Ok(())
}

fn render_annotations(report: &AnnotationReport) -> String {
    let mut out = format!(
        "Annotations ({}): {} made, {} missing; entities extracted from {} sessions; {:.1} s\n",
        report.model.as_deref().unwrap_or("no chat model"),
        report.made,
        report.missing,
        report.extractions_made,
        report.seconds
    );
    if let Some(error) = &report.error {
        out.push_str(&format!("  stopped: {error}\n"));
    }
    out
}

fn render_summary(summary: &IngestSummary) -> String {
    let mut out = String::new();
    out.push_str(&format!("Campaign: {}\n", summary.campaign));
    out.push_str(&format!(
        "Files: {} ({} changed, {} removed)\n",
        summary.files, summary.files_changed, summary.files_removed
    ));
    out.push_str(&format!(
        "Sessions: {}  Sheets: {}  World documents: {}\n",
        summary.sessions, summary.sheets, summary.world_documents
    ));
    out.push_str(&format!("Fragments: {} ({} GM-only)\n", summary.fragments, summary.dm_only_fragments));
    out.push_str(&format!("Compendium: {} entities\n", summary.entities));
    out.push_str(&format!(
        "Embedding ({}): {} windows in {} calls; {} stale vectors dropped\n",
        summary.embedder, summary.windows_embedded, summary.embedding_calls, summary.vectors_dropped
    ));
    if let Some(report) = &summary.annotations {
        out.push_str(&render_annotations(report));
    }
    out.push_str(&format!("Done in {:.2} s\n", summary.seconds));
    if !summary.warnings.is_empty() {
        out.push_str(&format!("Warnings ({}):\n", summary.warnings.len()));
        for warning in &summary.warnings {
            out.push_str(&format!("  {}\n", render_diagnostic(warning)));
        }
    }
    out
}

pub(super) fn render_diagnostic(diagnostic: &crate::corpus::Diagnostic) -> String {
    match diagnostic.line {
        Some(line) => format!("{}:{}: {}", diagnostic.path, line, diagnostic.message),
        None => format!("{}: {}", diagnostic.path, diagnostic.message),
    }
}

/// A terminal progress bar over the windows being embedded.
struct ProgressBar {
    bar: indicatif::ProgressBar,
}

impl Default for ProgressBar {
    fn default() -> ProgressBar {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg:10} {bar:40} {pos}/{len} ({eta})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message("embedding");
        ProgressBar { bar }
    }
}

impl IngestProgress for ProgressBar {
    fn embedding_started(&self, total: usize) {
        self.bar.set_length(total as u64);
    }

    fn embedded(&self, n: usize) {
        self.bar.inc(n as u64);
    }

    fn annotating_started(&self, total: usize) {
        self.bar.reset();
        self.bar.set_length(total as u64);
        self.bar.set_message("annotating");
    }

    fn annotated(&self, n: usize) {
        self.bar.inc(n as u64);
    }
}
