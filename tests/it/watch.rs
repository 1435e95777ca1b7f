//! The watched vault: a campaign folder followed as the DM saves, against real SQLite and
//! LanceDB in temp dirs and the Ollama stand-in's embeddings; the bot's direct message about
//! a saved note's warnings against the Discord stand-in.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use oraculo::config::{CliOverrides, Config, RawConfig, WatchConfig, WatchMode};
use oraculo::index::Index;
use oraculo::llm::chat::NoChat;
use oraculo::llm::{EmbedRole, Embedder, LlmError};
use oraculo::oracle::{AnswerSettings, AskRequest, Oracle};
use oraculo::retrieve::Audience;
use oraculo::watch::{WatchModels, WatchReport, WatchSettings, WatchTarget, WatchedIngest, watch_campaign};
use tokio::sync::{Notify, mpsc, oneshot};

use crate::fake_discord::{FakeDiscord, GUILD_ID, WAIT};
use crate::fake_ollama::FakeOllama;
use crate::harness::{Scratch, campaign_config, ollama_embedder};

const EMBED_MODEL: &str = "fake-embed";
/// The default debounce: a shorter one would let a stall of a loaded test machine between two
/// of a burst's saves split the burst into more ingests than an editor's saves cause.
const DEBOUNCE: Duration = Duration::from_millis(1000);

const SESSION_1: &str = "# Sesión 1\nEl archiduque Ardo huyó al norte tras la feria de las redes.\n";
const SESSION_2: &str = "# Sesión 2\nUna tormenta hundió el barco del archiduque frente al faro.\n";

/// An embedder whose passage calls can be held at a gate: an ingest caught mid-way.
struct GatedEmbedder {
    inner: Arc<dyn Embedder>,
    closed: AtomicBool,
    opened: Notify,
    held: AtomicUsize,
}

#[async_trait]
impl Embedder for GatedEmbedder {
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn window_words(&self) -> usize {
        self.inner.window_words()
    }
    async fn embed(&self, texts: &[String], role: EmbedRole) -> Result<Vec<Vec<f32>>, LlmError> {
        if role == EmbedRole::Passage && self.closed.load(Ordering::SeqCst) {
            self.held.fetch_add(1, Ordering::SeqCst);
            while self.closed.load(Ordering::SeqCst) {
                let _ = tokio::time::timeout(Duration::from_millis(50), self.opened.notified()).await;
            }
        }
        self.inner.embed(texts, role).await
    }
}

/// A watcher on `scratch`'s campaign, with its reports and the oracle a player asks.
struct Watching {
    reports: mpsc::UnboundedReceiver<WatchReport>,
    oracle: Oracle,
    index_dir: std::path::PathBuf,
    _stop: oneshot::Sender<()>,
}

impl Watching {
    /// The next ingest the watcher reports (the catch-up included), failing after `WAIT`.
    async fn next_ingest(&mut self) -> WatchedIngest {
        let ingested = tokio::time::timeout(WAIT, async {
            loop {
                match self.reports.recv().await.expect("the watcher runs") {
                    WatchReport::Ingested(ingested) => return ingested,
                    WatchReport::Failed { error } => panic!("watched ingest failed: {error}"),
                    _ => {}
                }
            }
        })
        .await;
        ingested.expect("an ingest within WAIT")
    }

    /// Ingests reported within `within`.
    async fn ingests_within(&mut self, within: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + within;
        let mut n = 0;
        while let Ok(Some(report)) = tokio::time::timeout_at(deadline, self.reports.recv()).await {
            n += usize::from(matches!(report, WatchReport::Ingested(_)));
        }
        n
    }

    /// The texts of the fragments a search as `audience` puts in its pool.
    async fn texts_found(&self, question: &str, audience: Audience) -> Vec<String> {
        let found = self.oracle.search(&AskRequest { question, history: &[], audience }).await.expect("search");
        let index = Index::open_existing(&self.index_dir).await.expect("index");
        let stored = index.store.fragments(None).expect("fragments");
        found
            .candidates
            .iter()
            .filter_map(|candidate| stored.iter().find(|s| s.id == candidate.fragment_id))
            .map(|stored| stored.fragment.text.clone())
            .collect()
    }

    async fn found(&self, question: &str, words: &str) -> bool {
        self.texts_found(question, Audience::Player).await.iter().any(|text| text.contains(words))
    }
}

fn settings(mode: WatchMode) -> WatchSettings {
    let watch =
        WatchConfig { debounce: DEBOUNCE, mode, poll_interval: Duration::from_millis(200), ..Default::default() };
    WatchSettings { watch, annotate_after: Duration::from_secs(3600) }
}

/// Starts watching `scratch` on `local` and waits for the catch-up ingest.
async fn watch(
    local: &tokio::task::LocalSet,
    scratch: &Scratch,
    embedder: Arc<dyn Embedder>,
    mode: WatchMode,
) -> Watching {
    let index_dir = scratch.index_dir();
    let target = WatchTarget::new(scratch.campaign.path(), &index_dir, scratch.data.path(), &campaign_config(&[]), 4);
    let (reports, received) = mpsc::unbounded_channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let models = WatchModels { embedder: Arc::clone(&embedder), annotator: None };
    local.spawn_local(async move {
        let stopped = async move {
            let _ = stopped.await;
        };
        watch_campaign(target, models, settings(mode), Some(reports), stopped).await.expect("the folder is watched");
    });
    let oracle = Oracle::new(&index_dir, embedder, Arc::new(NoChat), AnswerSettings::new(256));
    let mut watching = Watching { reports: received, oracle, index_dir, _stop: stop };
    let catch_up = local.run_until(watching.next_ingest()).await;
    assert!(catch_up.catch_up, "the first ingest reads what changed while nothing watched");
    watching
}

async fn fake_embedder() -> (FakeOllama, Arc<dyn Embedder>) {
    let fake = FakeOllama::start(&[EMBED_MODEL]).await;
    let embedder = ollama_embedder(&fake, EMBED_MODEL).await;
    (fake, Arc::new(embedder))
}

#[tokio::test]
async fn a_new_session_note_is_answerable_within_the_debounce_and_its_ingest() {
    let (_fake, embedder) = fake_embedder().await;
    let scratch = Scratch::new(&[("Sesiones/Sesion 1.md", SESSION_1)]);
    let local = tokio::task::LocalSet::new();
    let mut watching = watch(&local, &scratch, embedder, WatchMode::Events).await;
    local
        .run_until(async {
            assert!(!watching.found("¿Qué hundió el barco?", "tormenta").await);
            let saved = Instant::now();
            scratch.write("Sesiones/Sesion 2.md", SESSION_2);
            let ingested = watching.next_ingest().await;
            let answerable = saved.elapsed();
            assert!(!ingested.catch_up);
            assert_eq!((ingested.summary.files_changed, ingested.summary.files_removed), (1, 0));
            // The debounce, the ingest itself, and a little for the event to arrive.
            let bound = DEBOUNCE + Duration::from_secs_f64(ingested.summary.seconds) + Duration::from_millis(500);
            assert!(answerable <= bound, "answerable after {answerable:?}, over {bound:?}");
            assert!(watching.found("¿Qué hundió el barco?", "tormenta").await);
        })
        .await;
}

#[tokio::test]
async fn an_edited_note_saved_atomically_no_longer_gives_its_old_text() {
    let (_fake, embedder) = fake_embedder().await;
    let scratch = Scratch::new(&[("Sesiones/Sesion 1.md", SESSION_1), ("Sesiones/Sesion 2.md", SESSION_2)]);
    let local = tokio::task::LocalSet::new();
    let mut watching = watch(&local, &scratch, embedder, WatchMode::Events).await;
    local
        .run_until(async {
            assert!(watching.found("¿Qué hundió el barco?", "tormenta").await);
            // As editors save: the new text written to a hidden temp file, renamed over the note.
            let note = scratch.campaign.path().join("Sesiones/Sesion 2.md");
            let temp = scratch.campaign.path().join("Sesiones/.Sesion 2.md.tmp");
            std::fs::write(&temp, "# Sesión 2\nUna ballena blanca volcó el barco del archiduque frente al faro.\n")
                .unwrap();
            std::fs::rename(&temp, &note).unwrap();
            let ingested = watching.next_ingest().await;
            assert_eq!(ingested.summary.files_changed, 1);
            let texts = watching.texts_found("¿Qué volcó el barco?", Audience::Player).await;
            assert!(texts.iter().any(|text| text.contains("ballena")), "{texts:?}");
            assert!(!texts.iter().any(|text| text.contains("tormenta")), "the old text is gone: {texts:?}");
        })
        .await;
}

#[tokio::test]
async fn deleted_and_renamed_notes_lose_their_old_fragments() {
    let (_fake, embedder) = fake_embedder().await;
    let scratch = Scratch::new(&[("Sesiones/Sesion 1.md", SESSION_1), ("Sesiones/Sesion 2.md", SESSION_2)]);
    let local = tokio::task::LocalSet::new();
    let mut watching = watch(&local, &scratch, embedder, WatchMode::Events).await;
    local
        .run_until(async {
            std::fs::remove_file(scratch.campaign.path().join("Sesiones/Sesion 2.md")).unwrap();
            let ingested = watching.next_ingest().await;
            assert_eq!(ingested.summary.files_removed, 1);
            assert!(!watching.found("¿Qué hundió el barco?", "tormenta").await);
            let from = scratch.campaign.path().join("Sesiones/Sesion 1.md");
            std::fs::rename(&from, scratch.campaign.path().join("Sesiones/La feria.md")).unwrap();
            let ingested = watching.next_ingest().await;
            assert_eq!((ingested.summary.files_changed, ingested.summary.files_removed), (1, 1));
            let index = Index::open_existing(&watching.index_dir).await.unwrap();
            let paths: Vec<String> =
                index.store.fragments(None).unwrap().into_iter().map(|s| s.fragment.source_path).collect();
            assert_eq!(paths, ["Sesiones/La feria.md"]);
        })
        .await;
}

#[tokio::test]
async fn fifty_saves_in_two_seconds_cause_at_most_two_ingests() {
    let (_fake, embedder) = fake_embedder().await;
    let scratch = Scratch::new(&[("Sesiones/Sesion 1.md", SESSION_1)]);
    let local = tokio::task::LocalSet::new();
    let mut watching = watch(&local, &scratch, embedder, WatchMode::Events).await;
    local
        .run_until(async {
            for save in 0..50 {
                scratch.write("Sesiones/Sesion 2.md", &format!("{SESSION_2}Nota {save}.\n"));
                tokio::time::sleep(Duration::from_millis(40)).await;
            }
            let n = watching.ingests_within(DEBOUNCE * 4 + Duration::from_secs(3)).await;
            assert!((1..=2).contains(&n), "{n} ingests");
            assert!(watching.found("¿Qué hundió el barco?", "Nota 49").await, "the last save is read");
        })
        .await;
}

#[tokio::test]
async fn a_new_secret_block_is_never_shown_to_a_player_during_or_after_its_ingest() {
    let (_fake, embedder) = fake_embedder().await;
    let gated = Arc::new(GatedEmbedder {
        inner: embedder,
        closed: AtomicBool::new(false),
        opened: Notify::new(),
        held: AtomicUsize::new(0),
    });
    let scratch = Scratch::new(&[("Sesiones/Sesion 1.md", SESSION_1)]);
    let local = tokio::task::LocalSet::new();
    let mut watching = watch(&local, &scratch, Arc::clone(&gated) as Arc<dyn Embedder>, WatchMode::Events).await;
    local
        .run_until(async {
            gated.closed.store(true, Ordering::SeqCst);
            let secret = "> [!secreto]\n> El archiduque es en verdad el traidor Wendolrik.\n";
            scratch.write("Sesiones/Sesion 1.md", &format!("{SESSION_1}\n{secret}"));
            // The ingest is under way, held at its embedding: a player asks meanwhile.
            tokio::time::timeout(WAIT, async {
                while gated.held.load(Ordering::SeqCst) == 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await
            .expect("the ingest reaches its embedding");
            for question in ["¿Quién es el traidor Wendolrik?", "¿Qué pasó con el archiduque?"] {
                let texts = watching.texts_found(question, Audience::Player).await;
                assert!(!texts.iter().any(|text| text.contains("Wendolrik")), "during: {texts:?}");
            }
            gated.closed.store(false, Ordering::SeqCst);
            gated.opened.notify_waiters();
            watching.next_ingest().await;
            for question in ["¿Quién es el traidor Wendolrik?", "¿Qué pasó con el archiduque?"] {
                let texts = watching.texts_found(question, Audience::Player).await;
                assert!(!texts.iter().any(|text| text.contains("Wendolrik")), "after: {texts:?}");
                assert!(texts.iter().any(|text| text.contains("feria")), "the player text stays: {texts:?}");
            }
            let gm = watching.texts_found("¿Quién es el traidor Wendolrik?", Audience::Gm).await;
            assert!(gm.iter().any(|text| text.contains("Wendolrik")), "the GM reads the new block: {gm:?}");
        })
        .await;
}

#[tokio::test]
async fn a_note_caught_empty_keeps_its_last_fragments_until_it_is_saved_again() {
    let (_fake, embedder) = fake_embedder().await;
    let scratch = Scratch::new(&[("Sesiones/Sesion 1.md", SESSION_1), ("Sesiones/Sesion 2.md", SESSION_2)]);
    let local = tokio::task::LocalSet::new();
    let mut watching = watch(&local, &scratch, embedder, WatchMode::Events).await;
    local
        .run_until(async {
            // An editor truncated the note and had not written it yet when the ingest ran.
            scratch.write("Sesiones/Sesion 2.md", "");
            let ingested = watching.next_ingest().await;
            assert_eq!((ingested.summary.files_changed, ingested.summary.files_removed), (0, 0));
            assert!(
                ingested.new_warnings.iter().any(|w| w.path == "Sesiones/Sesion 2.md" && w.message.contains("kept")),
                "{:?}",
                ingested.new_warnings
            );
            assert!(watching.found("¿Qué hundió el barco?", "tormenta").await, "the last good text stays");
            scratch.write("Sesiones/Sesion 2.md", "# Sesión 2\nUn kraken hundió el barco.\n");
            watching.next_ingest().await;
            let texts = watching.texts_found("¿Qué hundió el barco?", Audience::Player).await;
            assert!(texts.iter().any(|text| text.contains("kraken")) && !texts.iter().any(|t| t.contains("tormenta")));
        })
        .await;
}

#[tokio::test]
async fn a_polled_folder_reads_its_saves_too() {
    let (_fake, embedder) = fake_embedder().await;
    let scratch = Scratch::new(&[("Sesiones/Sesion 1.md", SESSION_1)]);
    let local = tokio::task::LocalSet::new();
    let mut watching = watch(&local, &scratch, embedder, WatchMode::Poll).await;
    local
        .run_until(async {
            scratch.write("Sesiones/Sesion 2.md", SESSION_2);
            let ingested = watching.next_ingest().await;
            assert_eq!(ingested.summary.files_changed, 1);
            assert!(watching.found("¿Qué hundió el barco?", "tormenta").await);
        })
        .await;
}

/// The bot watching a campaign whose DM asked to hear of warnings: a saved note with a secret
/// block left open reaches the DM by direct message, and only the DM.
#[tokio::test]
async fn the_bot_tells_the_dm_by_direct_message_of_a_saved_notes_warnings() {
    const DM: u64 = 700_000_000_000_000_001;
    oraculo::logging::init();
    let scratch = Scratch::new(&[("Sesiones/Sesion 1.md", SESSION_1)]);
    let ollama = FakeOllama::start(&[EMBED_MODEL, "fake-chat"]).await;
    let discord = FakeDiscord::start().await;
    let text = format!(
        r#"
data_dir = "{data}"
[campaign]
dir = "{campaign}"
watch_debounce_ms = 200
watch_dm_warnings = true
[embedder]
backend = "ollama"
model = "{EMBED_MODEL}"
batch_size = 4
window_words = 250
[ollama]
url = "{ollama}"
timeout_secs = 30
retries = 0
[chat]
backend = "ollama"
model = "fake-chat"
[discord]
token = "test-token-do-not-log"
dm_user_ids = [{DM}]
guild_ids = [{GUILD_ID}]
proxy_url = "{rest}"
"#,
        data = scratch.data.path().display(),
        campaign = scratch.campaign.path().display(),
        ollama = ollama.url(),
        rest = discord.rest_url(),
    );
    let raw = RawConfig::parse(&text, Path::new("config.toml")).unwrap();
    let config = Config::from_layers(raw, &|_| None, &CliOverrides::default()).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let bot = tokio::spawn(oraculo::discord::run_with_client(config, None, async move {
        let _ = stopped.await;
    }));
    // The catch-up ingest indexes the campaign; then the DM saves a note that leaves a
    // secret block open.
    let index = scratch.index_dir();
    tokio::time::timeout(WAIT, async {
        while !index.join("index.sqlite").exists() || ollama.requests_to("/api/embed") == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the catch-up ingest");
    tokio::time::sleep(Duration::from_millis(500)).await;
    scratch.write("Sesiones/Sesion 2.md", &format!("{SESSION_2}<!-- DJ: el faro es una trampa\n"));
    let opened =
        discord.wait_for("the DM's direct channel", |r| r.method == "POST" && r.path == "/users/@me/channels").await;
    assert_eq!(opened.body["recipient_id"].as_str(), Some(DM.to_string().as_str()));
    let sent = discord
        .wait_for("the warning message", |r| {
            r.method == "POST" && r.path.starts_with("/channels/") && r.body.to_string().contains("avisos")
        })
        .await;
    let body = sent.body.to_string();
    assert!(body.contains("Sesiones/Sesion 2.md") && body.contains("never closed"), "{body}");
    assert!(discord.violations().is_empty(), "{:?}", discord.violations());
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, bot).await.expect("the bot stops").unwrap().unwrap();
}
