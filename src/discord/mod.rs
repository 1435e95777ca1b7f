//! The Discord edge: `/oraculo` answers with cited embeds, threads for follow-ups, a DM-only
//! `/reingest`, `/fuente` (and a button) to read a cited source in full.
//!
//! - `commands`: the slash commands (poise's), nothing else.
//! - `access`: who may ask where: places, audiences, which campaign a place belongs to.
//! - `reply`: answering a question: the outlet, the edit pace, the queue wait, the instant
//!   answer and the model's answer in one message.
//! - `events`: gateway events that are not commands: messages in the bot's threads, source
//!   buttons.
//! - `embeds`: an answer as messages within Discord's limits (pure), and the serenity builders.
//! - `place`: where a conversation happens (channel, thread, direct message) and its key in the
//!   campaign's conversations.
//! - `queue`: LLM work in order with a configured concurrency, and the per-user rate limit.
//! - `errors`: the one `on_error`, and what users read when something fails.
//! - `feedback`: the 👍/👎 under every answer and the DM's report (`/oraculo_informe`), kept in
//!   the campaign's index through [`crate::feedback`]; `verdict` the buttons' ids and row.
//! - `locale`: every sentence the bot says, in Spanish and English.
//!
//! Architecture invariant: this is the only module that imports serenity or poise. It reaches
//! the notes only through [`Oracle`] (answers, sources) and the ingest functions the CLI uses.
//! The bot has no tools: note text reaches the model as prompt text and can change an
//! answer's words, never what the bot does (it only ever posts the answer).
//!
//! Architecture invariant: every message the bot sends carries empty `allowed_mentions`.

pub mod access;
pub mod builders;
pub mod commands;
pub mod errors;
pub mod events;
pub mod feedback;
pub mod layout;
pub mod locale;
mod notices;
pub mod place;
pub mod queue;
pub mod reply;
pub mod resume;
pub mod verdict;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use poise::serenity_prelude as serenity;
use tokio::sync::watch;

use crate::config::{CampaignConfig, Config, DiscordConfig};

use crate::oracle::Oracle;
use access::Access;
use locale::Lang;
use place::History;
use queue::Queue;

/// What a command or event handler returns when it fails (logged by `errors::on_error`).
pub type Error = anyhow::Error;
/// The context every command receives.
pub type Context<'a> = poise::Context<'a, Data, Error>;

/// How long in-flight answers may take to finish after a shutdown signal: a long answer from
/// a 14B model on one GPU takes about a minute.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(90);
/// After the grace period, how long interrupted answers get to say so before the bot exits.
pub const INTERRUPT_NOTICE: Duration = Duration::from_secs(10);

/// The gateway intents, each for one reason:
/// - `GUILDS`: channel and thread events, so the cache knows a thread's parent channel
///   (GM channels) and owner (the bot's own threads).
/// - `GUILD_MESSAGES`: MESSAGE_CREATE in guild threads, the follow-up questions.
/// - `MESSAGE_CONTENT` (privileged, switched on in the Developer Portal): the text of those
///   follow-ups; without it Discord sends them empty. Slash commands need none of these.
pub fn intents() -> serenity::GatewayIntents {
    serenity::GatewayIntents::GUILDS
        | serenity::GatewayIntents::GUILD_MESSAGES
        | serenity::GatewayIntents::MESSAGE_CONTENT
}

/// Everything the handlers share. No token here: it stays with the HTTP client.
pub struct Data {
    /// The campaigns served (one, or `[[campaigns]]`): each place belongs to at most one.
    pub desks: Vec<Arc<Desk>>,
    /// Runs the oracle's work (answers, sources), whose futures are not `Send`.
    pub worker: queue::LocalWorker,
    /// Runs `/reingest`, apart from the answers so that questions keep flowing meanwhile.
    pub ingest_worker: queue::LocalWorker,
    /// One queue for every campaign: they share one model.
    pub queue: Queue,
    /// Queued questions asked by a message, withdrawn when it is deleted.
    pub withdrawals: queue::Withdrawals,
    /// Turns for the searches of questions waiting for the model ([`reply::PREPARED_AT_ONCE`]).
    pub preparations: Arc<tokio::sync::Semaphore>,
    /// Whether the questions a previous run left in flight were taken up (once per process,
    /// on the first connection).
    pub resumed: std::sync::atomic::AtomicBool,
    pub lifecycle: Arc<Lifecycle>,
    /// The language of messages that carry no locale, before a campaign is known.
    pub lang: Lang,
}

/// One campaign the bot serves: its oracle, its conversations, who runs it and where.
pub struct Desk {
    pub name: String,
    pub oracle: Arc<Oracle>,
    pub history: History,
    /// What its players asked, kept for the DM (`[feedback]`), with their verdicts.
    pub asked: crate::feedback::AskedQuestions,
    pub access: Access,
    pub reingest: Arc<ReingestSetup>,
    /// The language of its messages that carry no locale (thread follow-ups, mentions).
    pub lang: Lang,
}

impl Data {
    /// The campaign that answers `user` at `location`, or why none does ([`access::route`]).
    pub fn desk(&self, user: u64, location: access::Location) -> Result<Arc<Desk>, access::Barred> {
        let accesses: Vec<&Access> = self.desks.iter().map(|desk| &desk.access).collect();
        access::route(&accesses, user, location).map(|idx| Arc::clone(&self.desks[idx]))
    }
}

/// What `/reingest` needs to run the same ingest as `oraculo ingest`.
#[derive(Debug)]
pub struct ReingestSetup {
    pub campaign_dir: PathBuf,
    pub campaign: CampaignConfig,
    pub batch_size: usize,
    /// Held while a reingest runs in this process, so a second one is refused at once; the
    /// index's own lock covers another process (`oraculo ingest`).
    pub running: Arc<tokio::sync::Mutex<()>>,
}

impl std::fmt::Debug for Data {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Only what helps a log reader; nothing secret is in Data, and nothing big is printed.
        let campaigns: Vec<(&str, &std::path::Path)> =
            self.desks.iter().map(|desk| (desk.name.as_str(), desk.oracle.notes().index_dir())).collect();
        f.debug_struct("Data").field("campaigns", &campaigns).field("lang", &self.lang).finish_non_exhaustive()
    }
}

/// Runs the bot until `shutdown` completes (a signal in production, a test's trigger), then
/// lets in-flight answers finish (or tells them they were interrupted) and disconnects.
pub async fn run(config: Config, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
    run_with_client(config, None, shutdown).await
}

/// [`run`], reaching Discord's REST API with `rest_client` when given (a program embedding the
/// bot behind its own proxy or CA; the tests' stand-in answering as discord.com) instead of
/// serenity's default client. Without `discord.proxy_url`, serenity's own rate limiter paces
/// every request either way.
pub async fn run_with_client(
    config: Config,
    rest_client: Option<reqwest::Client>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    // 1. Settings and token.
    let discord = discord_settings(&config)?;
    let token = discord
        .token
        .clone()
        .context("no Discord token: set DISCORD_TOKEN (or ORACULO_DISCORD_TOKEN), or discord.token in the config")?;

    // The doctor's checks (Discord's view of the token, the intent, the servers; Ollama's
    // models): a ✗ that leaves the bot unable to answer stops it here, with the doctor's line.
    crate::doctor::preflight(&config, rest_client.clone()).await.map_err(anyhow::Error::msg)?;

    // 2. The oracles: one per campaign over one embedder and one chat model, opened as the
    // CLI opens them.
    let opened = crate::app::open_campaigns(&config).await.context("opening the campaigns' oracles")?;
    log_secrets_audits(&config, &opened);
    let batch_size = config.embedder.batch_size();

    // 3. The shared state.
    let lifecycle = Lifecycle::new();
    let worker = queue::LocalWorker::start("answers").context("starting the answer thread")?;
    let ingest_worker = queue::LocalWorker::start("ingest").context("starting the ingest thread")?;
    let desks = open_desks(opened, discord.history_turns, batch_size, config.feedback);
    prune_kept_questions(&desks).await;
    let guild_ids = guild_ids(&config);
    let queue = Queue::new(discord.concurrency, discord.questions_per_minute)
        .with_room(discord.queue_limit, Duration::from_secs_f64(config.answer.seconds));
    let watched = Watched { desks: desks.clone(), ingest_worker: ingest_worker.clone(), turns: queue.background() };
    let data = Data {
        lang: desks.first().map_or(Lang::Es, |desk| desk.lang),
        desks,
        worker,
        ingest_worker,
        queue,
        withdrawals: queue::Withdrawals::default(),
        preparations: Arc::new(tokio::sync::Semaphore::new(reply::PREPARED_AT_ONCE)),
        resumed: std::sync::atomic::AtomicBool::new(false),
        lifecycle: Arc::clone(&lifecycle),
    };
    tracing::info!(?data, concurrency = discord.concurrency, "bot state ready");

    // 4. The framework: commands, the error handler, the event handler.
    let framework = framework(data, guild_ids);

    // 5. The client: REST straight to Discord, or through the configured proxy.
    let http = rest_http(token.expose(), rest_client, &discord);
    let mut client = serenity::ClientBuilder::new_with_http(http, intents())
        .framework(framework)
        .await
        .context("creating the Discord client")?;
    let shard_manager = Arc::clone(&client.shard_manager);
    let (stop_watching, watching) = watch::channel(false);
    watched.start(&config, Arc::clone(&client.http), watching);

    // 6. Run until the signal, or until the connection ends on its own (a bad token).
    let mut connection = tokio::spawn(async move { client.start().await });
    tokio::select! {
        () = shutdown => tracing::info!("shutdown requested: finishing the answers in flight"),
        ended = &mut connection => {
            return match ended {
                Ok(Ok(())) => Ok(()),
                Ok(Err(err)) => Err(anyhow::Error::new(err).context("the Discord connection ended (is the token valid?)")),
                Err(err) => Err(anyhow::anyhow!("the Discord connection task failed: {err}")),
            };
        }
    }

    // 7. Drain, then disconnect.
    stop_watching.send_replace(true);
    lifecycle.drain(SHUTDOWN_GRACE, INTERRUPT_NOTICE).await;
    shard_manager.shutdown_all().await;
    if tokio::time::timeout(Duration::from_secs(10), connection).await.is_err() {
        tracing::warn!("the Discord connection did not close in 10 s; exiting anyway");
    }
    tracing::info!("bot stopped");
    Ok(())
}

/// Logs each campaign's secrets audit: the DM reads in the start log how much the notes hide
/// (`oraculo secrets` lists it).
fn log_secrets_audits(config: &Config, opened: &[crate::app::OpenCampaign]) {
    for campaign in opened {
        match crate::app::audit_secrets(config, &campaign.named.campaign) {
            Ok((_, audit)) => tracing::info!(
                campaign = %campaign.named.name,
                hidden_notes = audit.hidden_notes.len(),
                hidden_spans = audit.hidden_passages.len(),
                check_lines = audit.check.len(),
                "GM-only: {} note(s) and {} span(s) hidden from players (`oraculo secrets` lists them)",
                audit.hidden_notes.len(),
                audit.hidden_passages.len()
            ),
            Err(err) => {
                tracing::warn!(campaign = %campaign.named.name, "the secrets audit could not read the notes: {err:#}");
            }
        }
    }
}

/// The poise framework over `data`: the commands, the place check, the error handler, the
/// event handler, no mentions; the commands are registered in `guild_ids` once connected.
fn framework(data: Data, guild_ids: Vec<u64>) -> poise::Framework<Data, Error> {
    poise::Framework::builder()
        .options(poise::FrameworkOptions {
            commands: commands::commands(),
            command_check: Some(|ctx| Box::pin(access::place_check(ctx))),
            on_error: |error| Box::pin(errors::on_error(error)),
            event_handler: |ctx, event, framework, data| Box::pin(events::handle(ctx, event, framework, data)),
            allowed_mentions: Some(builders::no_mentions()),
            ..Default::default()
        })
        .initialize_owners(false)
        .setup(move |ctx, ready, framework| {
            Box::pin(async move {
                register_commands(ctx, &framework.options().commands, &guild_ids).await;
                tracing::info!(user = %ready.user.name, guilds = ready.guilds.len(), "connected to Discord");
                Ok(data)
            })
        })
        .build()
}

/// The `[discord]` settings, once every campaign names the servers it answers in.
fn discord_settings(config: &Config) -> anyhow::Result<DiscordConfig> {
    let discord = config.discord.clone().context(
        "no Discord settings: add a [discord] section to the config, or set DISCORD_TOKEN (see docs/discord-setup.md)",
    )?;
    for named in &config.campaigns {
        anyhow::ensure!(
            !named.places.guild_ids.is_empty(),
            "discord.guild_ids is empty (campaign {}): list the server(s) the bot answers in (right-click the \
             server → Copy ID). The bot answers only there, so a server that invites it cannot read the \
             campaign's notes",
            named.name
        );
    }
    Ok(discord)
}

/// What the players asked is kept `feedback.keep_days`: older questions go at each start.
async fn prune_kept_questions(desks: &[Arc<Desk>]) {
    for desk in desks {
        if let Err(err) = desk.asked.prune().await {
            tracing::warn!(campaign = %desk.name, error = format!("{err:#}"), "the kept questions could not be pruned");
        }
    }
}

/// One desk per opened campaign: its oracle, history, kept questions, access, re-ingest setup
/// and language.
fn open_desks(
    opened: Vec<crate::app::OpenCampaign>,
    history_turns: usize,
    batch_size: usize,
    feedback: crate::config::FeedbackConfig,
) -> Vec<Arc<Desk>> {
    opened
        .into_iter()
        .map(|open| {
            let oracle = Arc::new(open.oracle);
            Arc::new(Desk {
                name: open.named.name.clone(),
                history: History::new(oracle.notes().index_dir(), history_turns),
                asked: crate::feedback::AskedQuestions::new(oracle.notes().index_dir(), feedback),
                oracle,
                access: Access::from_places(&open.named.places),
                reingest: Arc::new(ReingestSetup {
                    campaign_dir: open.campaign_dir,
                    campaign: open.named.campaign.clone(),
                    batch_size,
                    running: Arc::new(tokio::sync::Mutex::new(())),
                }),
                lang: Lang::of_labels(open.named.campaign.corpus.label_language),
            })
        })
        .collect()
}

/// Every campaign's servers, each once: where the commands are registered.
fn guild_ids(config: &Config) -> Vec<u64> {
    let mut ids: Vec<u64> = config.campaigns.iter().flat_map(|named| named.places.guild_ids.clone()).collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// The REST client: straight to Discord (through `rest_client` when given), or through the
/// configured proxy.
fn rest_http(token: &str, rest_client: Option<reqwest::Client>, discord: &DiscordConfig) -> serenity::Http {
    let mut http = serenity::HttpBuilder::new(token).default_allowed_mentions(builders::no_mentions());
    if let Some(client) = rest_client {
        http = http.client(client);
    }
    if let Some(proxy) = &discord.proxy_url {
        // The proxy does the rate limiting (serenity's own limiter would bypass it).
        http = http.proxy(proxy.as_str()).ratelimiter_disabled(true);
    }
    http.build()
}

/// What the campaigns' watchers need from the bot's state.
struct Watched {
    desks: Vec<Arc<Desk>>,
    ingest_worker: queue::LocalWorker,
    turns: queue::BackgroundTurns,
}

impl Watched {
    /// Watches each campaign whose `campaign.watch` is on (the default): a saved note is read
    /// by an incremental ingest on the ingest thread, its new fragments annotated in turns no
    /// question wants, and the campaign's DM told by direct message of an ingest refused or
    /// failed (rate-limited), and of new warnings when `campaign.watch_dm_warnings` asks.
    /// Watching stops when `stop` turns true.
    fn start(self, config: &Config, http: Arc<serenity::Http>, stop: watch::Receiver<bool>) {
        use crate::watch::{WatchModels, WatchSettings, WatchTarget, YieldingChat, watch_campaign};
        for desk in self.desks {
            let setup = &desk.reingest;
            if !setup.campaign.watch.enabled {
                continue;
            }
            let target = WatchTarget::new(
                &setup.campaign_dir,
                desk.oracle.notes().index_dir(),
                &config.data_dir,
                &setup.campaign,
                setup.batch_size,
            );
            let turns: Arc<dyn crate::watch::ModelTurns> = Arc::new(self.turns.clone());
            let annotator = YieldingChat { inner: Arc::clone(desk.oracle.chat()), turns };
            let models = WatchModels {
                embedder: Arc::clone(desk.oracle.notes().embedder()),
                annotator: Some(Arc::new(annotator)),
            };
            let settings = WatchSettings::new(&setup.campaign.watch);
            let (reports, received) = tokio::sync::mpsc::unbounded_channel();
            let mut stop = stop.clone();
            let worker = self.ingest_worker.clone();
            let name = desk.name.clone();
            tokio::spawn(async move {
                let stopped = async move {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                };
                let run = worker.run("watch", move || watch_campaign(target, models, settings, Some(reports), stopped));
                match run.await {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => {
                        tracing::error!(campaign = %name, error = %err, "not watching; /reingest reads the notes")
                    }
                    Err(gone) => tracing::error!(campaign = %name, error = %gone, "not watching"),
                }
            });
            let dm_users = config
                .campaigns
                .iter()
                .find(|named| named.name == desk.name)
                .map(|named| named.places.dm_user_ids.clone())
                .unwrap_or_default();
            if !dm_users.is_empty() {
                let dm =
                    notices::DmNotices::new(Arc::clone(&http), dm_users, desk.lang, setup.campaign.watch.dm_warnings);
                tokio::spawn(dm.follow(received));
            }
        }
    }
}

/// Registers the commands in each configured guild (usable in servers only), and globally
/// for the bot's own direct messages (where only the campaign's DM is answered). Explicit
/// contexts and a guild-only install: the app cannot be user-installed into group DMs. A
/// failure is logged, and the bot keeps running (commands registered earlier still work).
async fn register_commands(ctx: &serenity::Context, commands: &[poise::Command<Data, Error>], guild_ids: &[u64]) {
    let built = |context: serenity::InteractionContext| -> Vec<serenity::CreateCommand> {
        poise::builtins::create_application_commands(commands)
            .into_iter()
            .map(|command| {
                command.integration_types(vec![serenity::InstallationContext::Guild]).contexts(vec![context])
            })
            .collect()
    };
    for &guild in guild_ids {
        let guild = serenity::GuildId::new(guild);
        match guild.set_commands(ctx, built(serenity::InteractionContext::Guild)).await {
            Ok(registered) => {
                if let Some(reingest) = registered.iter().find(|command| command.name == "reingest") {
                    // Each guild gives its copy its own id; the first one's is kept (the usual
                    // bot serves one server; elsewhere the mention still shows the name).
                    let _ = locale::REINGEST_COMMAND_ID.set(reingest.id.get());
                }
            }
            Err(err) => errors::log_discord_error(&err, "registering the commands in a guild"),
        }
    }
    if let Err(err) = serenity::Command::set_global_commands(ctx, built(serenity::InteractionContext::BotDm)).await {
        errors::log_discord_error(&err, "registering the commands for direct messages");
    }
}

/// Resolves on Ctrl-C or SIGTERM (what `systemctl stop` and `docker stop` send).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

/// Work in flight, and the shutdown that waits for it.
#[derive(Debug)]
pub struct Lifecycle {
    state: watch::Sender<LifeState>,
}

#[derive(Debug, Clone, Copy, Default)]
struct LifeState {
    /// No new work is accepted.
    closing: bool,
    /// The grace period is over: work still running must stop and say so.
    interrupting: bool,
    in_flight: usize,
}

/// One piece of work in flight (an answer, a reingest); dropping it says it is done.
#[derive(Debug)]
pub struct Job {
    lifecycle: Arc<Lifecycle>,
}

impl Drop for Job {
    fn drop(&mut self) {
        self.lifecycle.state.send_modify(|state| state.in_flight = state.in_flight.saturating_sub(1));
    }
}

impl Lifecycle {
    pub fn new() -> Arc<Lifecycle> {
        Arc::new(Lifecycle { state: watch::Sender::new(LifeState::default()) })
    }

    /// Starts a piece of work; `None` once shutting down.
    pub fn begin(self: &Arc<Self>) -> Option<Job> {
        let mut admitted = false;
        self.state.send_if_modified(|state| {
            if state.closing {
                return false;
            }
            state.in_flight += 1;
            admitted = true;
            true
        });
        admitted.then(|| Job { lifecycle: Arc::clone(self) })
    }

    pub fn is_closing(&self) -> bool {
        self.state.borrow().closing
    }

    /// Resolves when work in flight must stop (the grace period is over).
    pub async fn interrupted(&self) {
        let mut receiver = self.state.subscribe();
        if receiver.wait_for(|state| state.interrupting).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Refuses new work, waits up to `grace` for the work in flight, then interrupts what is
    /// left and gives it `notice` to tell its users.
    pub async fn drain(&self, grace: Duration, notice: Duration) {
        self.state.send_modify(|state| state.closing = true);
        let mut receiver = self.state.subscribe();
        let in_flight = self.state.borrow().in_flight;
        if in_flight > 0 {
            tracing::info!(in_flight, "waiting for the answers in flight");
        }
        let finished = tokio::time::timeout(grace, receiver.wait_for(|state| state.in_flight == 0)).await.is_ok();
        if !finished {
            let left = self.state.borrow().in_flight;
            tracing::warn!(in_flight = left, "grace period over: interrupting the work in flight");
            self.state.send_modify(|state| state.interrupting = true);
            let _ = tokio::time::timeout(notice, receiver.wait_for(|state| state.in_flight == 0)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shutdown_waits_for_work_then_interrupts_what_is_left() {
        let lifecycle = Lifecycle::new();
        let quick = lifecycle.begin().unwrap();
        let slow = lifecycle.begin().unwrap();
        let interrupted = {
            let lifecycle = Arc::clone(&lifecycle);
            tokio::spawn(async move {
                lifecycle.interrupted().await;
                drop(slow);
            })
        };
        let drained = {
            let lifecycle = Arc::clone(&lifecycle);
            tokio::spawn(async move { lifecycle.drain(Duration::from_millis(200), Duration::from_secs(5)).await })
        };
        drop(quick);
        tokio::time::timeout(Duration::from_secs(10), drained).await.unwrap().unwrap();
        interrupted.await.unwrap();
        assert!(lifecycle.is_closing());
        assert!(lifecycle.begin().is_none(), "no new work once closing");
    }

    #[tokio::test]
    async fn shutdown_with_nothing_in_flight_is_immediate() {
        let lifecycle = Lifecycle::new();
        drop(lifecycle.begin().unwrap());
        tokio::time::timeout(Duration::from_secs(5), lifecycle.drain(Duration::from_secs(60), Duration::from_secs(1)))
            .await
            .expect("nothing to wait for");
    }
}
