//! The command line: every subcommand calls the same core functions the bot calls.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use crate::app::Annotator;
use crate::config::{CliOverrides, Config};
use crate::index::Index;
use crate::ingest::{AnnotationReport, IngestProgress, IngestSummary, Quiet, annotate_fragments};
use crate::oracle::{AskRequest, Oracle};
use crate::retrieve::{Audience, Turn, TurnRole};

/// Oráculo: answers a campaign's questions from the game master's notes, citing them.
#[derive(Debug, Parser)]
#[command(name = "oraculo", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Reads a campaign folder into the index (incremental: unchanged notes cost nothing),
    /// then annotates new fragments with the chat model.
    Ingest(IngestArgs),
    /// Fills missing annotations (what the rerank and the summaries read) with the chat model.
    Annotate(CampaignArgs),
    /// Lists every label the index holds, so a DM can check what was detected.
    Sources(CampaignArgs),
    /// Lists the compendium: entities, their aliases and the sessions where each appears.
    Compendium(CompendiumArgs),
    /// Shows the fused candidate pool for a question (dense, BM25 and entity ranks, RRF).
    Search(SearchArgs),
    /// Answers a question from the notes, citing them (streams on a terminal).
    Ask(SearchArgs),
    /// A terminal conversation with follow-ups; `/fuentes` shows the last answer's sources.
    Chat(ChatArgs),
    /// An entity's sessions in story order, each with one cited line; first and last marked.
    Timeline(TimelineArgs),
    /// A cited recap of one session (default: the last one), to open a game night.
    Recap(RecapArgs),
    /// Scores retrieval (and, with --answers, the answers) on a question bank from eval/.
    Eval(EvalArgs),
    /// Runs the Discord bot (token from DISCORD_TOKEN or the config's [discord] section)
    /// until Ctrl-C or SIGTERM.
    Bot(crate::discord::BotArgs),
    /// Checks, line by line, whether this install can answer: the config, the folders, the
    /// index, the models, Discord; each ✗ with its fix, exit status 1 on any ✗.
    Doctor(CampaignArgs),
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub campaign: CampaignArgs,
    /// The question bank (JSON Lines; see eval/README.md). Default: the sample campaign's
    /// bank built into the binary, when the campaign is the sample.
    #[arg(long, alias = "bank")]
    pub questions: Option<PathBuf>,
    /// Score retrieval only: no answers generated (seconds instead of minutes per question).
    #[arg(long, conflicts_with = "answers_per_kind")]
    pub retrieval_only: bool,
    /// Answer only the first N questions of each kind (the rest: retrieval and rerank only).
    /// For small CPU models, where one answer takes minutes.
    #[arg(long, value_name = "N")]
    pub answers_per_kind: Option<usize>,
    /// Only the full pipeline and the fusion: no path ablations, no naive baseline.
    #[arg(long)]
    pub no_ablations: bool,
    /// How answers are made for this run, over the config's `chat.answer_mode`:
    /// structured, free or extractive (no model).
    #[arg(long, value_name = "MODE", value_parser = parse_answer_mode)]
    pub answer_mode: Option<crate::answer::AnswerMode>,
    /// Use the index as it is: no ingest (and no annotation) before the run.
    #[arg(long)]
    pub no_ingest: bool,
    /// Where to save the report as JSON (default: <data dir>/eval/report-<unix time>.json).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Fragments shown in full.
    #[arg(long, default_value_t = crate::retrieve::DEFAULT_K)]
    pub k: usize,
    /// Answer as a machine this slow would: the embedded model reads PROMPT tokens a second
    /// and writes GENERATED (default: PROMPT × 0.31, the ratio of a slow 2-core machine),
    /// waiting where this one is faster, and the context is planned for that speed.
    #[arg(long, value_name = "PROMPT[/GENERATED]", value_parser = parse_pace)]
    pub pace: Option<crate::llm::chat::ModelSpeed>,
    /// What the rerank reads: `model` (the chat model's annotations; the default) or
    /// `extractive` (those, else the extractive ones every ingest makes).
    #[arg(long, value_name = "ANNOTATIONS", value_parser = parse_rerank_reads)]
    pub rerank_reads: Option<crate::retrieve::rerank::RerankReads>,
    /// Rerank even where, at the model's measured speed, reading the annotations would take
    /// more than its share of `chat.answer_seconds` (to measure what the rerank costs).
    #[arg(long)]
    pub rerank_without_time_limit: bool,
}

#[derive(Debug, Args)]
pub struct TimelineArgs {
    #[command(flatten)]
    pub campaign: CampaignArgs,
    /// As the GM: GM-only notes count too.
    #[arg(long)]
    pub gm: bool,
    /// The entity's name or alias, as the compendium lists it (accents and case ignored).
    pub name: String,
}

#[derive(Debug, Args)]
pub struct RecapArgs {
    #[command(flatten)]
    pub campaign: CampaignArgs,
    /// As the GM: GM-only notes count too.
    #[arg(long)]
    pub gm: bool,
    /// With the notes' own sentences, each with its label, and no model.
    #[arg(long)]
    pub extractive: bool,
    /// The recap's language: es or en (default: the campaign's label language).
    #[arg(long, value_parser = parse_language)]
    pub lang: Option<crate::corpus::LabelLanguage>,
    /// The session (default: the last one).
    pub session: Option<u32>,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub campaign: CampaignArgs,
    /// Chat as the GM: GM-only notes included.
    #[arg(long)]
    pub gm: bool,
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    #[command(flatten)]
    pub campaign: CampaignArgs,
    /// Skip the annotation pass (run `oraculo annotate` later).
    #[arg(long)]
    pub no_annotate: bool,
    /// Keep watching the folder: each burst of saves is read by one incremental ingest (one
    /// line each, a JSON object with --json) and its new fragments are annotated in the
    /// background, until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
}

#[derive(Debug, Args)]
pub struct CompendiumArgs {
    #[command(flatten)]
    pub campaign: CampaignArgs,
    /// Count GM-only fragments too.
    #[arg(long)]
    pub gm: bool,
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    #[command(flatten)]
    pub campaign: CampaignArgs,
    /// A JSON list of {"role": "user"|"assistant", "content": "…"} turns before the question.
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Search as the GM: GM-only fragments included.
    #[arg(long)]
    pub gm: bool,
    /// Final answer-set size the pool is built for (each path searches max(2k, k+5)).
    #[arg(long, default_value_t = crate::retrieve::DEFAULT_K)]
    pub k: usize,
    /// `ask` only: answer with the notes' own sentences, each with its label, and no model.
    #[arg(long)]
    pub extractive: bool,
    /// `ask` only: answer as a machine this slow would (see `eval --pace`).
    #[arg(long, value_name = "PROMPT[/GENERATED]", value_parser = parse_pace)]
    pub pace: Option<crate::llm::chat::ModelSpeed>,
    /// The question.
    pub question: String,
}

/// Where the campaign, its index and the configuration are.
#[derive(Debug, Args)]
pub struct CampaignArgs {
    /// The campaign's notes folder (default: the config's, else the embedded sample campaign).
    #[arg(long)]
    pub campaign: Option<PathBuf>,
    /// Where indexes and models live (default: ORACULO_DATA, else ~/.local/share/oraculo).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// A config.toml (default: ORACULO_CONFIG, else none).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

impl CampaignArgs {
    fn load_config(&self) -> anyhow::Result<Config> {
        Config::load(&CliOverrides {
            config_file: self.config.clone(),
            data_dir: self.data.clone(),
            campaign_dir: self.campaign.clone(),
        })
    }
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

/// Runs one subcommand.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Ingest(args) => ingest(&args).await,
        Command::Annotate(args) => annotate(&args).await,
        Command::Sources(args) => sources(&args).await,
        Command::Compendium(args) => compendium(&args).await,
        Command::Search(args) => search(&args).await,
        Command::Ask(args) => ask(&args).await,
        Command::Chat(args) => chat(&args).await,
        Command::Timeline(args) => timeline(&args).await,
        Command::Recap(args) => recap(&args).await,
        Command::Eval(args) => eval(&args).await,
        Command::Bot(args) => bot(&args).await,
        Command::Doctor(args) => doctor(&args).await,
    }
}

async fn ingest(ingest_args: &IngestArgs) -> anyhow::Result<()> {
    let args = &ingest_args.campaign;
    let config = args.load_config()?;
    if ingest_args.watch {
        return watch_campaign(&config, !ingest_args.no_annotate, args.json).await;
    }
    let summary = run_ingest(&config, !ingest_args.no_annotate, !args.json).await?;
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
async fn run_ingest(config: &Config, annotate: bool, show_progress: bool) -> anyhow::Result<IngestSummary> {
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
        config.embedder.batch_size(),
        progress,
    )
    .await
    .with_context(|| format!("ingesting {}", campaign_dir.display()))?;
    if let Some(bar) = bar {
        bar.bar.finish_and_clear();
    }
    Ok(summary)
}

async fn sources(args: &CampaignArgs) -> anyhow::Result<()> {
    let config = args.load_config()?;
    let (campaign_dir, index) = open_campaign_index(&config).await?;
    let sources = index.store.sources()?;
    let warnings = index.store.diagnostics()?;
    if args.json {
        let json = serde_json::json!({ "campaign": campaign_dir.display().to_string(), "sources": sources, "warnings": warnings });
        println!("{json}");
        return Ok(());
    }
    let width = sources.iter().map(|s| s.label.chars().count()).max().unwrap_or(5).max(5);
    println!("{:width$}  {:7}  {:>7}  {:>9}  source", "label", "kind", "session", "fragments");
    for source in &sources {
        let session = source.session.map(|s| s.to_string()).unwrap_or_else(|| "-".into());
        let dm = if source.n_dm_only > 0 { format!(" ({} GM-only)", source.n_dm_only) } else { String::new() };
        println!(
            "{:width$}  {:7}  {:>7}  {:>9}  {}{}",
            source.label,
            source.kind.as_str(),
            session,
            source.n_fragments,
            source.source_path,
            dm
        );
    }
    print_warnings(&warnings);
    Ok(())
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

async fn annotate(args: &CampaignArgs) -> anyhow::Result<()> {
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

/// The CLI's campaign folder (the sample, written out, when none is configured) and the
/// folder of its index.
fn campaign_paths(config: &Config) -> anyhow::Result<(PathBuf, PathBuf)> {
    crate::app::campaign_paths(config, &config.campaign)
}

/// Opens the index of the configured campaign, which an ingest must have built.
async fn open_campaign_index(config: &Config) -> anyhow::Result<(PathBuf, Index)> {
    let (campaign_dir, index_dir) = campaign_paths(config)?;
    Ok((campaign_dir, Index::open_existing(&index_dir).await?))
}

async fn compendium(args: &CompendiumArgs) -> anyhow::Result<()> {
    let config = args.campaign.load_config()?;
    let (campaign_dir, index) = open_campaign_index(&config).await?;
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    let listing = index.store.compendium_listing(audience.visibility_filter())?;
    if args.campaign.json {
        let json = serde_json::json!({ "campaign": campaign_dir.display().to_string(), "entities": listing });
        println!("{json}");
        return Ok(());
    }
    for entity in &listing {
        let aliases =
            if entity.aliases.is_empty() { String::new() } else { format!(" ({})", entity.aliases.join(", ")) };
        println!("{} [{}]{}", entity.name, entity.kind.as_str(), aliases);
        if !entity.description.is_empty() {
            println!("    {}", entity.description);
        }
        let sessions: Vec<String> = entity.sessions.iter().map(|s| s.to_string()).collect();
        println!("    sessions: {}", if sessions.is_empty() { "-".to_string() } else { sessions.join(", ") });
        if !entity.other_labels.is_empty() {
            println!("    also in: {}", entity.other_labels.join("; "));
        }
    }
    println!("\n{} entities", listing.len());
    Ok(())
}

async fn search(args: &SearchArgs) -> anyhow::Result<()> {
    let config = args.campaign.load_config()?;
    let history = read_history(args.history.as_deref())?;
    // The bot's search, through the same oracle (its checks: an empty question is refused, a
    // missing index is a message), with no chat model loaded.
    let oracle = crate::app::open_searcher(&config, args.k).await?;
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    let result = oracle.search(&AskRequest { question: &args.question, history: &history, audience }).await?;
    if args.campaign.json {
        println!("{}", serde_json::to_string(&result)?);
        return Ok(());
    }
    if result.followup_expanded {
        println!("Follow-up: searched as \"{}\"", result.search_query);
    }
    for missing in &result.missing_paths {
        println!("Searched without the {} path, which failed: {}", missing.path.as_str(), missing.error);
    }
    println!("Follow-up rule: {}", result.diagnostics.followup.reason);
    if !result.entities.is_empty() {
        let named: Vec<String> = result
            .entities
            .iter()
            .map(|e| match (&e.asked_as, e.similarity) {
                (Some(asked_as), Some(similarity)) => {
                    format!(
                        "{} [{}] as \"{}\", asked as \"{asked_as}\" (cosine {similarity:.3})",
                        e.name, e.kind, e.alias
                    )
                }
                _ => format!("{} [{}] as \"{}\"", e.name, e.kind, e.alias),
            })
            .collect();
        println!("Entities: {}", named.join("; "));
    }
    if let Some(evidence) = &result.diagnostics.entity_path {
        let shares: Vec<String> = evidence
            .entities
            .iter()
            .map(|e| format!("{} in {}/{} sessions, weight {:.2}", e.name, e.n_sessions, evidence.n_sessions, e.weight))
            .collect();
        let arc = if evidence.arc { " (arc question: full weight)" } else { "" };
        println!("Entity path weight {:.2}{arc}: {}", evidence.weight, shares.join("; "));
    }
    let terms = &result.diagnostics.bm25_terms;
    if terms.asked > 0 && terms.in_notes < terms.asked {
        println!(
            "BM25 weight {:.2}: the notes hold {} of the question's {} words (another language?)",
            terms.weight, terms.in_notes, terms.asked
        );
    }
    let rank = |r: Option<usize>| r.map(|r| r.to_string()).unwrap_or_else(|| "-".into());
    let width = result.candidates.iter().map(|c| c.label.chars().count()).max().unwrap_or(5).max(5);
    println!(
        "{:>3}  {:>5}  {:width$}  {:>5}  {:>5}  {:>6}  {:>4}  {:>7}  source",
        "#", "id", "label", "dense", "bm25", "entity", "time", "rrf"
    );
    for (position, candidate) in result.candidates.iter().enumerate() {
        println!(
            "{:>3}  {:>5}  {:width$}  {:>5}  {:>5}  {:>6}  {:>4}  {:>7.5}  {}",
            position + 1,
            candidate.fragment_id,
            candidate.label,
            rank(candidate.ranks.dense),
            rank(candidate.ranks.bm25),
            rank(candidate.ranks.entity),
            rank(candidate.ranks.time),
            candidate.rrf_score,
            candidate.source_path
        );
    }
    let t = &result.timings;
    println!(
        "\n{} candidates; embed {:.1} ms, dense {:.1} ms, bm25 {:.1} ms, entity {:.1} ms, time {:.2} ms, fuse {:.1} ms",
        result.candidates.len(),
        t.embed_query_ms,
        t.dense_ms,
        t.bm25_ms,
        t.entity_ms,
        t.time_ms,
        t.fuse_ms
    );
    if let Some(notice) = result.time.notice(false) {
        println!("{notice}");
    } else if result.time.is_active() {
        let sessions: Vec<String> = result.time.sessions.iter().map(|s| s.to_string()).collect();
        println!("Time: sessions {}", if sessions.is_empty() { "-".to_string() } else { sessions.join(", ") });
    }
    Ok(())
}

/// The oracle of the configured campaign: its index, embedder and chat model.
async fn open_oracle(config: &Config) -> anyhow::Result<Oracle> {
    crate::app::open_oracle(config).await
}

async fn ask(args: &SearchArgs) -> anyhow::Result<()> {
    let config = args.campaign.load_config()?;
    let history = read_history(args.history.as_deref())?;
    let mut oracle = open_oracle(&config).await?;
    oracle.set_k(args.k.max(1));
    if args.extractive {
        oracle.set_mode(crate::answer::AnswerMode::Extractive);
    }
    if let Some(speed) = args.pace {
        oracle.set_pace(speed);
    }
    let request = AskRequest {
        question: &args.question,
        history: &history,
        audience: if args.gm { Audience::Gm } else { Audience::Player },
    };
    if args.campaign.json {
        println!("{}", serde_json::to_string(&answer_json(&oracle, &request).await?)?);
        return Ok(());
    }
    let answer = ask_streaming(&oracle, &request).await?;
    print_sources(&answer);
    println!("\n{}", render_footer(&answer));
    Ok(())
}

/// `oraculo ask --json`: the model's answer as always, with `instant` (the notes' own
/// sentences shown first, or null) and `instant_kept` (why they stand instead of the model's
/// answer, or null) beside its fields.
async fn answer_json(oracle: &Oracle, request: &AskRequest<'_>) -> anyhow::Result<serde_json::Value> {
    let (answer, instant, kept) = if oracle.instant_enabled() {
        let (instant, model) = oracle.ask_instant_first(request, &|_| {}, &|_| {}, None).await?;
        let kept = crate::oracle::settle(instant.clone(), model.clone()).instant_kept;
        (model, instant, kept)
    } else {
        (oracle.ask(request, None).await?, None, None)
    };
    let mut json = serde_json::to_value(&answer)?;
    if let Some(object) = json.as_object_mut() {
        object.insert("instant".into(), serde_json::to_value(&instant)?);
        object.insert("instant_kept".into(), serde_json::to_value(kept)?);
    }
    Ok(json)
}

/// Asks, printing the notes' own sentences first (with `chat.instant_answer`), then the
/// model's answer under them as it streams (a structured answer sentence by sentence); the
/// final text is printed again only if it differs from what streamed: invented citations
/// marked, or the extractive answer that replaced a model's unusable one.
async fn ask_streaming(oracle: &Oracle, request: &AskRequest<'_>) -> anyhow::Result<crate::oracle::Answer> {
    use std::io::Write;
    let streamed = std::sync::Mutex::new(String::new());
    let sink = |token: &str| {
        if let Ok(mut text) = streamed.lock() {
            text.push_str(token);
        }
        print!("{token}");
        let _ = std::io::stdout().flush();
    };
    let on_instant = |instant: &crate::oracle::Answer| {
        println!("{}\n\n{}\n\n{}", INSTANT_HEADING, instant.text.trim(), MODEL_HEADING);
        let _ = std::io::stdout().flush();
    };
    let (answer, kept) = if oracle.instant_enabled() {
        let (instant, model) = oracle.ask_instant_first(request, &|_| {}, &on_instant, Some(&sink)).await?;
        let settled = crate::oracle::settle(instant, model);
        (settled.answer, settled.instant_kept)
    } else {
        (oracle.ask(request, Some(&sink)).await?, None)
    };
    let streamed = streamed.into_inner().unwrap_or_default();
    if let Some(why) = kept {
        println!("\n(the model's answer is not used: {}; the notes' sentences above stand)", instant_kept_reason(why));
        return Ok(answer);
    }
    if streamed.trim().is_empty() {
        println!("{}", answer.text);
    } else if streamed.trim() != answer.text.trim() {
        println!();
        if answer.fallback.is_some() {
            println!("\n(that answer could not be used; from the notes instead)");
        } else {
            println!("\n(checked: {} invented citation(s) marked [?])", answer.invented_citations.len());
        }
        println!("{}", answer.text);
    } else {
        println!();
    }
    Ok(answer)
}

/// Above the instant answer on a terminal.
const INSTANT_HEADING: &str = "── From the notes, as written (the model is writing its answer) ──";
/// Between the instant answer and the model's.
const MODEL_HEADING: &str = "── The model's answer ──";

/// Why the notes' sentences stand instead of the model's answer, for a terminal.
fn instant_kept_reason(why: crate::oracle::InstantKept) -> &'static str {
    match why {
        crate::oracle::InstantKept::ModelFailed => "the model failed",
        crate::oracle::InstantKept::ModelOutOfTime => "the model did not finish in time",
        crate::oracle::InstantKept::ModelAbstained => "the model found no answer in the notes",
    }
}

async fn timeline(args: &TimelineArgs) -> anyhow::Result<()> {
    let config = args.campaign.load_config()?;
    let oracle = open_oracle(&config).await?;
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    let timeline = crate::timeline::timeline(&oracle, &args.name, audience).await?;
    if args.campaign.json {
        println!("{}", serde_json::to_string(&timeline)?);
        return Ok(());
    }
    print!("{}", render_timeline(&timeline));
    Ok(())
}

/// The timeline as text: one line per session, first and last appearance marked.
fn render_timeline(timeline: &crate::timeline::Timeline) -> String {
    let aliases =
        if timeline.aliases.is_empty() { String::new() } else { format!(" ({})", timeline.aliases.join(", ")) };
    let mut out = format!("{} [{}]{}\n", timeline.entity, timeline.kind, aliases);
    if timeline.entries.is_empty() {
        out.push_str("  appears in no session\n");
    }
    for entry in &timeline.entries {
        let mark = match (entry.first, entry.last) {
            (true, true) => "  (first and last appearance)",
            (true, false) => "  (first appearance)",
            (false, true) => "  (last appearance)",
            _ => "",
        };
        out.push_str(&format!("  {:>4}  {} [{}]{mark}\n", entry.session.to_string(), entry.line, entry.label));
    }
    if !timeline.other_labels.is_empty() {
        out.push_str(&format!("  also in: {}\n", timeline.other_labels.join("; ")));
    }
    out
}

async fn recap(args: &RecapArgs) -> anyhow::Result<()> {
    use std::io::Write;
    let config = args.campaign.load_config()?;
    let mut oracle = open_oracle(&config).await?;
    if args.extractive {
        oracle.set_mode(crate::answer::AnswerMode::Extractive);
    }
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    let language = args.lang.unwrap_or(config.campaign.corpus.label_language);
    if args.campaign.json {
        let recap = crate::timeline::recap(&oracle, args.session, audience, language, None).await?;
        println!("{}", serde_json::to_string(&recap)?);
        return Ok(());
    }
    let streamed = std::sync::Mutex::new(String::new());
    let sink = |token: &str| {
        if let Ok(mut text) = streamed.lock() {
            text.push_str(token);
        }
        print!("{token}");
        let _ = std::io::stdout().flush();
    };
    let recap = crate::timeline::recap(&oracle, args.session, audience, language, Some(&sink)).await?;
    let streamed = streamed.into_inner().unwrap_or_default();
    if streamed.trim() != recap.answer.text.trim() {
        if !streamed.trim().is_empty() {
            println!("\n");
        }
        println!("{}", recap.answer.text);
    } else {
        println!();
    }
    print_sources(&recap.answer);
    println!("\n{}", render_footer(&recap.answer));
    Ok(())
}

fn parse_language(text: &str) -> Result<crate::corpus::LabelLanguage, String> {
    match text {
        "es" => Ok(crate::corpus::LabelLanguage::Es),
        "en" => Ok(crate::corpus::LabelLanguage::En),
        other => Err(format!("{other:?}: expected es or en")),
    }
}

/// Generated tokens a second per prompt token a second when `--pace` gives only the prompt
/// speed: what a slow 2-core machine measured for the embedded 1.5B (20 and 6.2).
const PACE_GENERATED_PER_PROMPT: f64 = 0.31;

/// `--pace 20` or `--pace 20/6.2`: prompt (and generated) tokens a second.
fn parse_pace(text: &str) -> Result<crate::llm::chat::ModelSpeed, String> {
    let number = |part: &str| {
        part.trim().parse::<f64>().ok().filter(|speed| speed.is_finite() && *speed > 0.0).ok_or_else(|| {
            format!("`{part}` is not a speed: give tokens a second, as PROMPT or PROMPT/GENERATED (e.g. 20/6.2)")
        })
    };
    let (prompt, generated) = match text.split_once('/') {
        Some((prompt, generated)) => (number(prompt)?, number(generated)?),
        None => {
            let prompt = number(text)?;
            (prompt, prompt * PACE_GENERATED_PER_PROMPT)
        }
    };
    Ok(crate::llm::chat::ModelSpeed { prompt_tokens_per_s: prompt, generated_tokens_per_s: generated })
}

fn parse_rerank_reads(text: &str) -> Result<crate::retrieve::rerank::RerankReads, String> {
    use crate::retrieve::rerank::RerankReads;
    match text {
        "model" => Ok(RerankReads::ModelAnnotations),
        "extractive" => Ok(RerankReads::ExtractiveToo),
        other => Err(format!("`{other}`: the rerank reads `model` or `extractive` annotations")),
    }
}

fn parse_answer_mode(text: &str) -> Result<crate::answer::AnswerMode, String> {
    match text {
        "structured" => Ok(crate::answer::AnswerMode::Structured),
        "free" => Ok(crate::answer::AnswerMode::Free),
        "extractive" => Ok(crate::answer::AnswerMode::Extractive),
        other => Err(format!("{other:?}: expected structured, free or extractive")),
    }
}

/// One line on how the answer was made: mode, model, time, and what limited the context.
fn render_footer(answer: &crate::oracle::Answer) -> String {
    let seconds = answer.timings.total_ms / 1000.0;
    let mode = match answer.mode {
        crate::answer::AnswerMode::Structured => "structured",
        crate::answer::AnswerMode::Free => "free text",
        crate::answer::AnswerMode::Extractive => "extractive",
    };
    let model = match answer.mode {
        crate::answer::AnswerMode::Extractive => "no model".to_string(),
        _ => answer.chat_model.clone(),
    };
    let mut footer = format!("— {seconds:.1} s · {mode} · {model}");
    let plan = &answer.context_plan;
    if let (Some(budget), Some(prompt), Some(generated)) =
        (plan.answer_seconds, plan.prompt_tokens_per_s, plan.generated_tokens_per_s)
    {
        let story = if plan.arc_lines > 0 { format!("{} story line(s), ", plan.arc_lines) } else { String::new() };
        footer.push_str(&format!(
            " · planned for {budget:.0} s at {prompt:.0}/{generated:.1} tok/s ({story}{} fragment(s) as passages{})",
            plan.fragments_as_passages,
            if plan.prompt == crate::prompt::StructuredPrompt::Brief { ", brief prompt" } else { "" },
        ));
    }
    if let Some(reason) = &answer.fallback {
        footer.push_str(&format!("\n  (the model did not answer: {reason})"));
    }
    if let Some(reason) = &answer.cut_short {
        footer.push_str(&format!("\n  (the model was stopped: {reason}; the sentences it had written are shown)"));
    }
    for missing in &answer.missing_paths {
        footer.push_str(&format!(
            "\n  (searched without the {} path, which failed: {})",
            missing.path.as_str(),
            missing.error
        ));
    }
    footer
}

fn print_sources(answer: &crate::oracle::Answer) {
    let valid: Vec<_> = answer.citations.iter().filter(|c| c.valid).collect();
    if valid.is_empty() {
        println!("\n(no sources cited)");
    } else {
        println!("\nSources:");
        for citation in valid {
            println!("  [{}] {}", citation.label, citation.source_path.as_deref().unwrap_or(""));
            if let Some(excerpt) = &citation.excerpt {
                println!("      {excerpt}");
            }
        }
    }
    if !answer.invented_citations.is_empty() {
        println!("Invented citations removed: {}", answer.invented_citations.join("; "));
    }
}

async fn chat(args: &ChatArgs) -> anyhow::Result<()> {
    use std::io::BufRead;
    let config = args.campaign.load_config()?;
    let oracle = open_oracle(&config).await?;
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    let mut history: Vec<Turn> = Vec::new();
    let mut last: Option<crate::oracle::Answer> = None;
    eprintln!("Oráculo: ask about the campaign. /fuentes shows the last answer's sources, /salir quits.");
    let stdin = std::io::stdin();
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim();
        match line {
            "" => continue,
            "/salir" | "/exit" | "/quit" => break,
            "/fuentes" | "/sources" => {
                match &last {
                    Some(answer) => print_sources(answer),
                    None => println!("(no answer yet)"),
                }
                continue;
            }
            _ => {}
        }
        let request = AskRequest { question: line, history: &history, audience };
        match ask_streaming(&oracle, &request).await {
            Ok(answer) => {
                if answer.joins_history() {
                    history.push(Turn { role: TurnRole::User, content: line.to_string() });
                    history.push(Turn { role: TurnRole::Assistant, content: answer.text.clone() });
                }
                last = Some(answer);
            }
            Err(err) => eprintln!("error: {}", render_error(&err)),
        }
    }
    Ok(())
}

async fn eval(args: &EvalArgs) -> anyhow::Result<()> {
    let config = args.campaign.load_config()?;
    let (campaign_dir, _) = campaign_paths(&config)?;
    let (bank, questions_file) = match &args.questions {
        Some(path) => (crate::eval::load_bank(path)?, path.display().to_string()),
        None if config.campaign.dir.is_none() => {
            (crate::eval::sample_bank().context("the built-in sample bank")?, "(built-in sample bank)".to_string())
        }
        None => anyhow::bail!("--questions FILE is required for a campaign other than the built-in sample"),
    };
    if !args.no_ingest {
        let summary = run_ingest(&config, !args.retrieval_only, !args.campaign.json).await?;
        eprintln!(
            "eval: ingested {} ({} fragments, {} embedded){}",
            summary.campaign,
            summary.fragments,
            summary.windows_embedded,
            match &summary.annotations {
                Some(report) if report.missing > 0 => format!("; {} fragments without annotation", report.missing),
                _ => String::new(),
            }
        );
    }
    let mut oracle = open_oracle(&config).await?;
    oracle.set_k(args.k.max(1));
    if let Some(mode) = args.answer_mode {
        oracle.set_mode(mode);
    }
    if let Some(speed) = args.pace {
        oracle.set_pace(speed);
    }
    oracle.set_rerank(args.rerank_reads.unwrap_or_default(), !args.rerank_without_time_limit);
    let answers = match (args.retrieval_only, args.answers_per_kind) {
        (true, _) => crate::eval::AnswerScope::None,
        (false, Some(n)) => crate::eval::AnswerScope::PerKind(n),
        (false, None) => crate::eval::AnswerScope::All,
    };
    let options = crate::eval::EvalOptions {
        answers,
        ablations: !args.no_ablations,
        batch_size: config.embedder.batch_size(),
        baseline_cache: Some(config.data_dir.join("eval").join("baseline-cache")),
    };
    let run =
        crate::eval::RunInfo { campaign: campaign_dir.display().to_string(), questions_file, ..Default::default() };
    let progress = |n: usize, total: usize, question: &crate::eval::EvalQuestion| {
        eprintln!("eval: [{n}/{total}] {} {}", question.id, question.question);
    };
    let report = crate::eval::run_eval(&oracle, &bank, &options, run, &progress).await?;
    let out = match &args.out {
        Some(path) => path.clone(),
        None => config.data_dir.join("eval").join(format!("report-{}.json", report.run.started_at)),
    };
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(&out, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("saving the report to {}", out.display()))?;
    if args.campaign.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.render());
        println!("Saved to {}", out.display());
    }
    Ok(())
}

/// Reads `--history`: a JSON list of turns.
fn read_history(path: Option<&std::path::Path>) -> anyhow::Result<Vec<Turn>> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading history {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("history {}: expected a JSON list of {{\"role\", \"content\"}} turns", path.display()))
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

fn print_warnings(warnings: &[crate::corpus::Diagnostic]) {
    if !warnings.is_empty() {
        println!("\nWarnings from the last ingest ({}):", warnings.len());
        for warning in warnings {
            println!("  {}", render_diagnostic(warning));
        }
    }
}

fn render_diagnostic(diagnostic: &crate::corpus::Diagnostic) -> String {
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

/// `oraculo bot`: the same oracle as `ask`, behind Discord, until a shutdown signal.
async fn bot(args: &crate::discord::BotArgs) -> anyhow::Result<()> {
    let config = Config::load(&args.overrides())?;
    crate::discord::run(config, crate::discord::shutdown_signal()).await
}

/// `oraculo doctor`: every check printed (or one JSON object), then an error when one failed,
/// so the exit status says it.
async fn doctor(args: &CampaignArgs) -> anyhow::Result<()> {
    let overrides = CliOverrides {
        config_file: args.config.clone(),
        data_dir: args.data.clone(),
        campaign_dir: args.campaign.clone(),
    };
    let options = crate::doctor::Options { probe_models: true, discord_client: None };
    let report = crate::doctor::run(&overrides, &options).await;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.render());
    }
    match report.failures().count() {
        0 => Ok(()),
        failed => anyhow::bail!("{failed} check(s) failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::render_error;
    use crate::llm::LlmError;
    use crate::oracle::AskError;

    #[test]
    fn an_error_prints_its_causes_once() {
        let refused = || LlmError::Status {
            server: crate::llm::Server::OpenAi,
            url: "http://127.0.0.1:8080".into(),
            status: 400,
            body: "the request exceeds the available context size, try increasing it".into(),
        };
        let io = || std::io::Error::other("connection reset");
        // (error, what the line must be)
        let cases: Vec<(anyhow::Error, &str)> = vec![
            (
                anyhow::Error::from(AskError::Llm(refused())),
                "the language model failed: the OpenAI-compatible server at http://127.0.0.1:8080 answered 400: the request exceeds the available context size, try increasing it",
            ),
            (
                anyhow::Error::from(AskError::Llm(refused())).context("answering the question"),
                "answering the question: the language model failed: the OpenAI-compatible server at http://127.0.0.1:8080 answered 400: the request exceeds the available context size, try increasing it",
            ),
            (anyhow::Error::from(io()).context("reading notes/a.md"), "reading notes/a.md: connection reset"),
        ];
        for (err, expected) in cases {
            let line = render_error(&err);
            assert_eq!(line, expected);
            assert_eq!(line.matches("exceeds").count(), usize::from(expected.contains("exceeds")), "{line}");
        }
    }
}
