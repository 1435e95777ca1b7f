//! The watched vault: a campaign folder followed as the DM saves, against real SQLite and
//! LanceDB in temp dirs and the Ollama stand-in's embeddings; the bot's direct message about
//! a saved note's warnings against the Discord stand-in.

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use oraculo::config::{WatchConfig, WatchMode};
use oraculo::index::Index;
use oraculo::llm::Embedder;
use oraculo::llm::chat::NoChat;
use oraculo::oracle::{AnswerSettings, AskRequest, Oracle};
use oraculo::retrieve::Audience;
use oraculo::watch::{WatchModels, WatchReport, WatchSettings, WatchTarget, WatchedIngest, watch_campaign};
use tokio::sync::{mpsc, oneshot};

use crate::bot::{CHAT_MODEL, DM, campaign_toml, config_toml, parse_config};
use crate::fake_discord::{FakeDiscord, WAIT};
use crate::fake_ollama::FakeOllama;
use crate::harness::{CountingEmbedder, Scratch, campaign_config, ollama_embedder};

const EMBED_MODEL: &str = "fake-embed";
/// The default debounce: a shorter one would let a stall of a loaded test machine between two
/// of a burst's saves split the burst into more ingests than an editor's saves cause.
const DEBOUNCE: Duration = Duration::from_millis(1000);

const SESSION_1: &str = "# Sesión 1\nEl archiduque Ardo huyó al norte tras la feria de las redes.\n";
const SESSION_2: &str = "# Sesión 2\nUna tormenta hundió el barco del archiduque frente al faro.\n";
/// The campaign with the first session, and with both.
const ONE: &[(&str, &str)] = &[("Sesiones/Sesion 1.md", SESSION_1)];
const BOTH: &[(&str, &str)] = &[("Sesiones/Sesion 1.md", SESSION_1), ("Sesiones/Sesion 2.md", SESSION_2)];

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

    /// The next refusal the watcher reports, failing on an ingest or after `WAIT`.
    async fn next_refusal(&mut self) -> oraculo::ingest::MassRemoval {
        let refused = tokio::time::timeout(WAIT, async {
            loop {
                match self.reports.recv().await.expect("the watcher runs") {
                    WatchReport::Refused(refused) => return refused,
                    WatchReport::Ingested(ingested) => panic!("ingested instead: {:?}", ingested.summary),
                    WatchReport::Failed { error } => panic!("watched ingest failed: {error}"),
                    _ => {}
                }
            }
        })
        .await;
        refused.expect("a refusal within WAIT")
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
        let found = self.oracle.notes().search(&AskRequest { question, history: &[], audience }).await.expect("search");
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

/// `test` on a watcher of a campaign of `files`, its catch-up ingest done, embedded through the
/// Ollama stand-in.
async fn watching<F: Future<Output = ()>>(
    files: &[(&str, &str)],
    mode: WatchMode,
    test: impl FnOnce(Rc<Scratch>, Watching) -> F,
) {
    let (_fake, embedder) = fake_embedder().await;
    watching_with(files, mode, embedder, test).await;
}

/// [`watching`] with `embedder`.
async fn watching_with<F: Future<Output = ()>>(
    files: &[(&str, &str)],
    mode: WatchMode,
    embedder: Arc<dyn Embedder>,
    test: impl FnOnce(Rc<Scratch>, Watching) -> F,
) {
    // Held here, not only by `test`: a test that reads one of its folders would keep only that.
    let scratch = Rc::new(Scratch::new(files));
    let local = tokio::task::LocalSet::new();
    let watching = watch(&local, &scratch, embedder, mode).await;
    local.run_until(test(Rc::clone(&scratch), watching)).await;
}

#[tokio::test]
async fn a_new_session_note_is_answerable_within_the_debounce_and_its_ingest() {
    watching(ONE, WatchMode::Events, |scratch, mut watching| async move {
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
    watching(BOTH, WatchMode::Events, |scratch, mut watching| async move {
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
    watching(BOTH, WatchMode::Events, |scratch, mut watching| async move {
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
    watching(ONE, WatchMode::Events, |scratch, mut watching| async move {
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
    let fake = FakeOllama::start(&[EMBED_MODEL]).await;
    let gated = CountingEmbedder::new(ollama_embedder(&fake, EMBED_MODEL).await);
    let embedder = Arc::clone(&gated) as Arc<dyn Embedder>;
    watching_with(ONE, WatchMode::Events, embedder, |scratch, mut watching| async move {
        gated.gate.close();
        let secret = "> [!secreto]\n> El archiduque es en verdad el traidor Wendolrik.\n";
        scratch.write("Sesiones/Sesion 1.md", &format!("{SESSION_1}\n{secret}"));
        // The ingest is under way, held at its embedding: a player asks meanwhile.
        tokio::time::timeout(WAIT, async {
            while gated.gate.held() == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the ingest reaches its embedding");
        for question in ["¿Quién es el traidor Wendolrik?", "¿Qué pasó con el archiduque?"] {
            let texts = watching.texts_found(question, Audience::Player).await;
            assert!(!texts.iter().any(|text| text.contains("Wendolrik")), "during: {texts:?}");
        }
        gated.gate.open();
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
    watching(BOTH, WatchMode::Events, |scratch, mut watching| async move {
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

/// A folder whose name holds a dot, moved to `.trash/`, used to be taken for a
/// file and ignored: its notes still answered.
#[tokio::test]
async fn a_dotted_folder_moved_to_the_trash_no_longer_answers() {
    let files = [("Sesiones/Sesion 1.md", SESSION_1), ("Arco.Viejo/Sesion 2.md", SESSION_2)];
    watching(&files, WatchMode::Events, |scratch, mut watching| async move {
        assert!(watching.found("¿Qué hundió el barco?", "tormenta").await);
        let trash = scratch.campaign.path().join(".trash");
        std::fs::create_dir_all(&trash).unwrap();
        std::fs::rename(scratch.campaign.path().join("Arco.Viejo"), trash.join("Arco.Viejo")).unwrap();
        let ingested = watching.next_ingest().await;
        assert_eq!(ingested.summary.files_removed, 1);
        assert!(!watching.found("¿Qué hundió el barco?", "tormenta").await);
    })
    .await;
}

/// The folder emptied under the watcher (a sync tool mid-resync) is refused, and
/// the campaign keeps answering; the notes back, it reads them as usual.
#[tokio::test]
async fn a_folder_emptied_under_the_watcher_keeps_answering() {
    watching(BOTH, WatchMode::Events, |scratch, mut watching| async move {
        let away = tempfile::TempDir::new().unwrap();
        std::fs::rename(scratch.campaign.path().join("Sesiones"), away.path().join("Sesiones")).unwrap();
        let refused = watching.next_refusal().await;
        assert_eq!((refused.indexed, refused.removed, refused.read), (2, 2, 0));
        assert!(watching.found("¿Qué hundió el barco?", "tormenta").await, "the last index answers");
        std::fs::rename(away.path().join("Sesiones"), scratch.campaign.path().join("Sesiones")).unwrap();
        let ingested = watching.next_ingest().await;
        assert_eq!((ingested.summary.files_changed, ingested.summary.files_removed), (0, 0));
    })
    .await;
}

#[tokio::test]
async fn a_polled_folder_reads_its_saves_too() {
    watching(ONE, WatchMode::Poll, |scratch, mut watching| async move {
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
    oraculo::logging::init();
    let scratch = Scratch::new(ONE);
    let ollama = FakeOllama::start(&[EMBED_MODEL, CHAT_MODEL]).await;
    let discord = FakeDiscord::start().await;
    let campaign = campaign_toml(scratch.campaign.path()) + "watch_debounce_ms = 200\nwatch_dm_warnings = true\n";
    let config = parse_config(&config_toml(scratch.data.path(), &campaign, &ollama, &discord, ""));
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

/// A watched ingest that fails (the embedder answering 500) or that the guard
/// refuses reaches the DM by direct message, though the DM asked for no warnings.
#[tokio::test]
async fn the_bot_tells_the_dm_of_a_failed_and_of_a_refused_watched_ingest() {
    oraculo::logging::init();
    let scratch = Scratch::new(BOTH);
    let ollama = FakeOllama::start(&[EMBED_MODEL, CHAT_MODEL]).await;
    let discord = FakeDiscord::start().await;
    let campaign = campaign_toml(scratch.campaign.path()) + "watch_debounce_ms = 200\n";
    let config = parse_config(&config_toml(scratch.data.path(), &campaign, &ollama, &discord, ""));
    let (stop, stopped) = oneshot::channel::<()>();
    let bot = tokio::spawn(oraculo::discord::run_with_client(config, None, async move {
        let _ = stopped.await;
    }));
    let index = scratch.index_dir();
    tokio::time::timeout(WAIT, async {
        while !index.join("index.sqlite").exists() || ollama.requests_to("/api/embed") == 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("the catch-up ingest");
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The folder emptied (a sync tool mid-resync): refused, and the DM told how to confirm.
    let away = tempfile::TempDir::new().unwrap();
    std::fs::rename(scratch.campaign.path().join("Sesiones"), away.path().join("Sesiones")).unwrap();
    let refused = discord
        .wait_for("the refusal notice", |r| {
            r.method == "POST" && r.path.starts_with("/channels/") && r.body.to_string().contains("permitir_borrado")
        })
        .await;
    let body = refused.body.to_string();
    assert!(body.contains("ninguna nota") && body.contains("--allow-removal"), "{body}");
    // The notes back with a new one, and the embedder fails that ingest.
    ollama.enqueue(crate::fake_ollama::Fault::Status(500, "model crashed".into()));
    std::fs::rename(away.path().join("Sesiones"), scratch.campaign.path().join("Sesiones")).unwrap();
    scratch.write("Sesiones/Sesion 3.md", "# Sesión 3\nEl faro se apagó.\n");
    let failed = discord
        .wait_for("the failure notice", |r| {
            r.method == "POST" && r.path.starts_with("/channels/") && r.body.to_string().contains("No pude leer")
        })
        .await;
    assert!(failed.body.to_string().contains("500"), "{}", failed.body);
    assert!(discord.violations().is_empty(), "{:?}", discord.violations());
    stop.send(()).unwrap();
    tokio::time::timeout(WAIT, bot).await.expect("the bot stops").unwrap().unwrap();
}
