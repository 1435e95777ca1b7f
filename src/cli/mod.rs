//! The command line: every subcommand calls the same core functions the bot calls.
//!
//! This module holds the flags and the dispatch; each command group prints in its own file.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{CliOverrides, Config};
use crate::index::Index;
use crate::oracle::Oracle;
use crate::retrieve::Audience;

/// An error on one line for `main` (and the tests): the application layer's.
pub use crate::app::render_error;

mod ask;
mod asked;
mod doctor;
mod eval;
mod ingest;
mod init;
mod listing;
mod search;
mod timeline;

/// Oráculo: answers a campaign's questions from the game master's notes, citing them.
#[derive(Debug, Parser)]
#[command(name = "oraculo", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Reads your notes folder as the ingest would, shows what it detected (sessions, sheets,
    /// world documents, what is GM-only and why), and writes a commented config.toml for it
    /// and for this machine's model; asks nothing.
    Init(InitArgs),
    /// Reads a campaign folder into the index (incremental: unchanged notes cost nothing),
    /// then annotates new fragments with the chat model.
    Ingest(IngestArgs),
    /// Fills missing annotations (what the rerank and the summaries read) with the chat model.
    Annotate(CampaignArgs),
    /// Lists every label the index holds, so a DM can check what was detected.
    Sources(CampaignArgs),
    /// Lists the compendium: entities, their aliases and the sessions where each appears.
    Compendium(CompendiumArgs),
    /// For the DM: what players never see (file, line, the named thing and the GM word that
    /// hid it), and every line players may read that holds a GM word ("check these").
    Secrets(CampaignArgs),
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
    /// For the DM: what the players asked the bot (kept per [feedback]): the questions the
    /// notes did not answer, grouped by the entity or session they name, most asked first; the
    /// answers marked wrong (👎) with the labels they cited; counts per week. With --bank, the
    /// kept questions written as an eval bank instead.
    Asked(AskedArgs),
    /// Scores retrieval (and, with --answers, the answers) on a question bank from eval/.
    Eval(EvalArgs),
    /// Runs the Discord bot (token from DISCORD_TOKEN or the config's [discord] section)
    /// until Ctrl-C or SIGTERM.
    Bot(CliOverrides),
    /// Serves the campaign to an assistant that speaks the Model Context Protocol, on stdin and
    /// stdout: search, ask, timeline, recap, source, sessions and compendium as tools, each label
    /// as a resource (docs/mcp.md). Players' view unless --gm.
    Mcp(McpArgs),
    /// Checks, line by line, whether this install can answer: the config, the folders, the
    /// index, the models, Discord; each ✗ with its fix, exit status 1 on any ✗.
    Doctor(CampaignArgs),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The notes folder (a plain folder or an Obsidian vault; default: the current folder).
    pub dir: Option<PathBuf>,
    /// Where to write the config (default: ./config.toml, or ~/.config/oraculo/config.toml
    /// when the current folder is inside the notes folder, which Oráculo never writes to).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The data dir the config names (default: none written, so ORACULO_DATA, else
    /// ~/.local/share/oraculo).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// Overwrite an existing config.
    #[arg(long)]
    pub force: bool,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub campaign: CampaignArgs,
    /// The question bank (JSON Lines; see eval/README.md). Default: the sample campaign's
    /// bank built into the binary, when the campaign is the sample.
    #[arg(long, alias = "bank")]
    pub questions: Option<PathBuf>,
    /// Measure the citation checker instead of running a bank: sentences × labels judged by
    /// reading (eval/citations-judged.jsonl), precision and recall per split.
    #[arg(long, value_name = "FILE")]
    pub judged: Option<PathBuf>,
    /// Which answers of the judged file were made on this campaign (its `bank` field).
    #[arg(long, value_name = "NAME", default_value = "sample", requires = "judged")]
    pub judged_bank: String,
    /// Compare ordering rules across banks instead of running one: the saved reports of
    /// `oraculo eval` (one per bank), every rule scored per bank, and each bank's score under
    /// the rule chosen on the others (eval/README.md, «Choosing a rule across banks»).
    #[arg(long, value_name = "REPORT", num_args = 2.., conflicts_with = "questions")]
    pub compare: Vec<PathBuf>,
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
    /// more than its share of `chat.answer_seconds`, and for up to 600 s instead of 60 (to
    /// measure what the rerank costs).
    #[arg(long)]
    pub rerank_without_time_limit: bool,
}

#[derive(Debug, Args)]
pub struct AskedArgs {
    #[command(flatten)]
    pub campaign: CampaignArgs,
    /// Only what was asked in the last SPAN: a number and w, d, h or m (7d, 2w, 24h). Default:
    /// everything kept (feedback.keep_days).
    #[arg(long, value_name = "SPAN", value_parser = asked::parse_span)]
    pub since: Option<i64>,
    /// The GM's view: the questions of GM channels and the DM's direct messages too.
    #[arg(long)]
    pub gm: bool,
    /// Write the kept questions to FILE as an eval bank (JSON Lines, eval/README.md) instead of
    /// the report: `expected` left for you to fill, pre-filled with the cited labels where a
    /// player liked the answer. `oraculo eval --questions FILE` reads it as written.
    #[arg(long, value_name = "FILE")]
    pub bank: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub location: CliOverrides,
    /// Serve the GM's view: GM-only notes included. Without it, the players' view.
    #[arg(long)]
    pub gm: bool,
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
    /// Confirm a real deletion: commit an ingest that removes more than half the indexed
    /// notes (at least 5), or all of them. Without it such an ingest is refused and the last
    /// index stays (a folder caught empty or unmounted reads like a deleted campaign).
    #[arg(long)]
    pub allow_removal: bool,
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

/// A command over one campaign, printing text or one JSON object.
#[derive(Debug, Args)]
pub struct CampaignArgs {
    #[command(flatten)]
    pub location: CliOverrides,
    /// Print one JSON object on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

impl CampaignArgs {
    fn load_config(&self) -> anyhow::Result<Config> {
        Config::load(&self.location)
    }
}

/// Runs one subcommand.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    if cli.command.only_prints() {
        end_quietly_on_a_closed_pipe();
    }
    match cli.command {
        Command::Init(args) => init::init(&args).await,
        Command::Ingest(args) => ingest::ingest(&args).await,
        Command::Annotate(args) => ingest::annotate(&args).await,
        Command::Sources(args) => listing::sources(&args).await,
        Command::Compendium(args) => listing::compendium(&args).await,
        Command::Secrets(args) => listing::secrets(&args),
        Command::Search(args) => search::search(&args).await,
        Command::Ask(args) => ask::ask(&args).await,
        Command::Chat(args) => ask::chat(&args).await,
        Command::Timeline(args) => timeline::timeline(&args).await,
        Command::Recap(args) => timeline::recap(&args).await,
        Command::Asked(args) => asked::asked(&args).await,
        Command::Eval(args) => eval::eval(&args).await,
        Command::Bot(args) => doctor::bot(&args).await,
        Command::Mcp(args) => mcp(&args).await,
        Command::Doctor(args) => doctor::doctor(&args).await,
    }
}

impl Command {
    /// Whether the command reads and prints, and nothing else: a reader that stops reading
    /// (`oraculo sources | head`) loses nothing when it ends. Not an ingest or an annotation
    /// (they write the index, and finish what they started), not the conversation, the bot
    /// or the MCP server (they write to sockets and pipes whose closing is theirs to handle).
    fn only_prints(&self) -> bool {
        match self {
            Command::Sources(_)
            | Command::Compendium(_)
            | Command::Secrets(_)
            | Command::Search(_)
            | Command::Ask(_)
            | Command::Timeline(_)
            | Command::Recap(_)
            | Command::Asked(_)
            | Command::Eval(_)
            | Command::Doctor(_) => true,
            Command::Init(_)
            | Command::Ingest(_)
            | Command::Annotate(_)
            | Command::Chat(_)
            | Command::Bot(_)
            | Command::Mcp(_) => false,
        }
    }
}

/// A write to a pipe whose reader has gone ends the process, as for any Unix tool, instead
/// of `println!`'s panic («failed printing to stdout: Broken pipe»): Rust ignores SIGPIPE
/// and turns it into that error. Only for the commands that just print.
fn end_quietly_on_a_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default, before any thread of ours
    // writes to stdout; no handler runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// `oraculo mcp`: the configuration as every command loads it, then the server until the
/// client ends the session.
async fn mcp(args: &McpArgs) -> anyhow::Result<()> {
    let location = &args.location;
    let config = Config::load(location)?;
    let mut flags = Vec::new();
    for (flag, value) in [("--config", &location.config_file), ("--data", &location.data_dir)] {
        if let Some(value) = value {
            flags.push(flag.to_string());
            flags.push(value.display().to_string());
        }
    }
    // `ORACULO_CAMPAIGN` is `--campaign` from the environment, for this command as for the others.
    let campaign_flag = location
        .campaign_dir
        .as_ref()
        .map(|campaign| campaign.display().to_string())
        .or_else(|| std::env::var("ORACULO_CAMPAIGN").ok().filter(|campaign| !campaign.is_empty()));
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    crate::mcp::serve(config, crate::mcp::McpOptions { audience, campaign_flag, flags }).await
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

/// The oracle of the configured campaign: its index, embedder and chat model.
async fn open_oracle(config: &Config) -> anyhow::Result<Oracle> {
    crate::app::open_oracle(config).await
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

/// A model's tokens printed as they stream, and kept, so that the final text is printed
/// again only where it differs from what the terminal already shows.
#[derive(Default)]
struct Echo {
    printed: std::sync::Mutex<String>,
}

impl Echo {
    fn print(&self, token: &str) {
        use std::io::Write;
        if let Ok(mut text) = self.printed.lock() {
            text.push_str(token);
        }
        print!("{token}");
        let _ = std::io::stdout().flush();
    }

    fn into_printed(self) -> String {
        self.printed.into_inner().unwrap_or_default()
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
