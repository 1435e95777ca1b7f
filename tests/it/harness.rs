//! Shared helpers: temp campaigns, configs, embedders.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use oraculo::config::{CampaignConfig, DEFAULT_IGNORED, DEFAULT_MAX_NOTE_BYTES};
use oraculo::corpus::{CorpusConfig, LabelLanguage, default_kind_folders};
use oraculo::index::{Index, campaign_index_dir};
use oraculo::ingest::{IngestError, IngestSummary, Quiet, ingest_campaign};
use oraculo::llm::chat::ollama::{OllamaChat, OllamaChatConfig};
use oraculo::llm::chat::{ChatModel, ChatRequest, ChatResponse, ModelSpeed, TokenSink};
use oraculo::llm::embed::e5::E5Embedder;
use oraculo::llm::embed::ollama::{OllamaEmbedder, OllamaEmbedderConfig};
use oraculo::llm::{EmbedRole, Embedder, LlmError};
use oraculo::oracle::{
    Answer, AnswerEvent, AnswerOptions, AnswerSettings, AskError, AskRequest, Oracle, Preparation, Prepared, Settled,
};
use oraculo::retrieve::Audience;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::Notify;

use crate::fake_ollama::FakeOllama;

/// The repository's fixture campaigns.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

pub fn campaign_config(secret_paths: &[&str]) -> CampaignConfig {
    CampaignConfig {
        dir: None,
        corpus: CorpusConfig {
            label_language: LabelLanguage::Es,
            kind_folders: default_kind_folders(),
            secret_paths: secret_paths.iter().map(|s| s.to_string()).collect(),
            secret_words: oraculo::corpus::default_secret_words(),
            player_paths: Vec::new(),
            session_patterns: oraculo::corpus::SessionPattern::defaults(),
        },
        ignore: DEFAULT_IGNORED.iter().map(|s| s.to_string()).collect(),
        max_note_bytes: DEFAULT_MAX_NOTE_BYTES,
        watch: oraculo::config::WatchConfig::default(),
    }
}

/// A campaign folder written by the test, with its own data dir.
pub struct Scratch {
    pub campaign: TempDir,
    pub data: TempDir,
}

impl Scratch {
    pub fn new(files: &[(&str, &str)]) -> Scratch {
        let scratch = Scratch { campaign: TempDir::new().unwrap(), data: TempDir::new().unwrap() };
        for (path, text) in files {
            scratch.write(path, text);
        }
        scratch
    }

    /// [`Scratch::new`] with files made by the test.
    pub fn of(files: &[(String, String)]) -> Scratch {
        let refs: Vec<(&str, &str)> = files.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
        Scratch::new(&refs)
    }

    pub fn write(&self, path: &str, text: &str) {
        let full = self.campaign.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    }

    pub fn index_dir(&self) -> PathBuf {
        campaign_index_dir(self.data.path(), self.campaign.path())
    }
}

pub async fn ollama_embedder(fake: &FakeOllama, model: &str) -> OllamaEmbedder {
    OllamaEmbedder::connect(OllamaEmbedderConfig {
        server: oraculo::llm::ModelServer {
            url: fake.url(),
            model: model.to_string(),
            timeout: Duration::from_secs(10),
            retries: 0,
        },
        batch_size: 4,
        window_words: Some(250),
    })
    .await
    .expect("fake Ollama answers")
}

pub async fn ingest_dir(
    index_dir: &Path,
    campaign_dir: &Path,
    config: &CampaignConfig,
    embedder: &dyn Embedder,
) -> Result<IngestSummary, IngestError> {
    let mut index = Index::open(index_dir).await.expect("index opens");
    ingest_campaign(&mut index, campaign_dir, config, embedder, 4, &Quiet).await
}

pub fn chat_config(url: String, timeout: Duration) -> OllamaChatConfig {
    OllamaChatConfig {
        server: oraculo::llm::ModelServer { url, model: "qwen2.5:14b".into(), timeout, retries: 0 },
        keep_alive: "30m".into(),
        n_ctx: Some(8192),
    }
}

/// Session notes `Sesiones/Sesion {n}.md` for each of `numbers`: a `# Sesión {n}` header, then `body`.
pub fn sessions(numbers: impl IntoIterator<Item = usize>, body: impl Fn(usize) -> String) -> Vec<(String, String)> {
    numbers.into_iter().map(|n| (format!("Sesiones/Sesion {n}.md"), format!("# Sesión {n}\n{}", body(n)))).collect()
}

/// Twelve sessions about a port town, so the fused pool is larger than the eight shown.
pub fn port_campaign() -> Scratch {
    let events = [
        "la feria de las redes en el puerto",
        "una tormenta hunde la barca de Baika",
        "el faro se apaga y el puerto queda a oscuras",
        "Baika teje una red encantada para el puerto",
        "los contrabandistas del puerto roban la estatua",
        "el archiduque visita el puerto con su guardia",
        "Tomás cae en combate defendiendo el puente del puerto",
        "el funeral de Tomás en el puerto",
        "Baika revela un secreto del faro del puerto",
        "la guardia del archiduque cierra el puerto",
        "un barco fantasma entra en el puerto",
        "el grupo abandona el puerto hacia el norte",
    ];
    let mut files = sessions(1..=events.len(), |n| format!("En esta sesión: {}.\n", events[n - 1]));
    files.push(("PNJs/Baika.md".into(), "# Baika\nTejedora de redes del puerto.\n".into()));
    Scratch::of(&files)
}

/// Ollama's chat at `url` (the stand-in's, usually), `qwen2.5:14b` with a 10 s timeout.
pub fn ollama_chat(url: String) -> Arc<dyn ChatModel> {
    Arc::new(OllamaChat::new(chat_config(url, Duration::from_secs(10))).unwrap())
}

/// A campaign ingested through an Ollama stand-in's `bge-m3` embeddings; the same stand-in
/// serves `qwen2.5:14b` for the answers.
pub struct Ingested {
    pub fake: FakeOllama,
    pub scratch: Scratch,
    pub embedder: Arc<dyn Embedder>,
}

impl Ingested {
    /// [`port_campaign`], ingested.
    pub async fn port() -> Ingested {
        Ingested::over(port_campaign()).await
    }

    /// `scratch`'s campaign, ingested.
    pub async fn over(scratch: Scratch) -> Ingested {
        let fake = FakeOllama::start(&["bge-m3", "qwen2.5:14b"]).await;
        let embedder: Arc<dyn Embedder> = Arc::new(ollama_embedder(&fake, "bge-m3").await);
        ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), embedder.as_ref())
            .await
            .unwrap();
        Ingested { fake, scratch, embedder }
    }

    /// Ollama's chat through the stand-in.
    pub fn ollama(&self) -> Arc<dyn ChatModel> {
        ollama_chat(self.fake.url())
    }

    /// The oracle over the index, answering through `chat`.
    pub fn oracle(&self, chat: Arc<dyn ChatModel>, settings: AnswerSettings) -> Oracle {
        Oracle::new(&self.scratch.index_dir(), Arc::clone(&self.embedder), chat, settings)
    }
}

/// The port campaign's oracle with a deadline of 1 s, its model (the second stand-in) silent
/// for 6 s before it answers: its idle timeout (10 s) would wait that out.
pub async fn port_oracle_out_of_time() -> (Ingested, FakeOllama, Oracle) {
    let port = Ingested::port().await;
    let slow = FakeOllama::start(&["qwen2.5:14b"]).await;
    slow.enqueue(crate::fake_ollama::Fault::Delay(Duration::from_secs(6)));
    slow.enqueue_reply("Nunca llega [Sesión 7].");
    let settings = AnswerSettings { deadline: Duration::from_secs(1), ..AnswerSettings::new(256) };
    let oracle = port.oracle(ollama_chat(slow.url()), settings);
    (port, slow, oracle)
}

/// Wraps a real embedder, counting calls and failing from call `fail_from` on (a crash
/// stand-in for the failure-injection tests); while its gate is closed, passage calls wait
/// there (an ingest caught mid-way).
pub struct CountingEmbedder<E> {
    pub inner: E,
    pub calls: AtomicUsize,
    pub texts: AtomicUsize,
    pub fail_from: Option<usize>,
    pub gate: Gate,
}

/// Where passage embeddings wait while it is closed; `held` counts the calls that waited.
#[derive(Default)]
pub struct Gate {
    closed: AtomicBool,
    opened: Notify,
    held: AtomicUsize,
}

impl Gate {
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    pub fn open(&self) {
        self.closed.store(false, Ordering::SeqCst);
        self.opened.notify_waiters();
    }

    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    async fn pass(&self, role: EmbedRole) {
        if role == EmbedRole::Passage && self.closed.load(Ordering::SeqCst) {
            self.held.fetch_add(1, Ordering::SeqCst);
            while self.closed.load(Ordering::SeqCst) {
                let _ = tokio::time::timeout(Duration::from_millis(50), self.opened.notified()).await;
            }
        }
    }
}

impl<E> CountingEmbedder<E> {
    pub fn new(inner: E) -> Arc<CountingEmbedder<E>> {
        CountingEmbedder::with_failure(inner, None)
    }

    pub fn failing_from(inner: E, call: usize) -> Arc<CountingEmbedder<E>> {
        CountingEmbedder::with_failure(inner, Some(call))
    }

    fn with_failure(inner: E, fail_from: Option<usize>) -> Arc<CountingEmbedder<E>> {
        let (calls, texts, gate) = (AtomicUsize::new(0), AtomicUsize::new(0), Gate::default());
        Arc::new(CountingEmbedder { inner, calls, texts, fail_from, gate })
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    pub fn texts(&self) -> usize {
        self.texts.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl<E: Embedder> Embedder for CountingEmbedder<E> {
    fn window_words(&self) -> usize {
        self.inner.window_words()
    }
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    async fn embed(&self, texts: &[String], role: EmbedRole) -> Result<Vec<Vec<f32>>, LlmError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail_from.is_some_and(|from| call >= from) {
            return Err(LlmError::Worker("injected failure".into()));
        }
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.gate.pass(role).await;
        self.inner.embed(texts, role).await
    }
}

/// A chat model that reports a fixed speed, as the embedded backend does (and a fixed window,
/// when given), and answers through `inner` at once: what the plan sees at that speed, without
/// waiting for it.
pub struct FixedSpeed {
    pub inner: Arc<dyn ChatModel>,
    pub speed: ModelSpeed,
    pub window: Option<usize>,
}

#[async_trait]
impl ChatModel for FixedSpeed {
    async fn speed(&self) -> Option<ModelSpeed> {
        Some(self.speed)
    }
    fn context_window(&self) -> usize {
        self.window.unwrap_or_else(|| self.inner.context_window())
    }
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn count_tokens(&self, text: &str) -> usize {
        self.inner.count_tokens(text)
    }
    async fn chat(&self, request: &ChatRequest, on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
        self.inner.chat(request, on_token).await
    }
}

/// `n` words of filler prose, numbered so that windows can be told apart.
pub fn prose(tag: &str, n: usize) -> String {
    (0..n).map(|i| format!("{tag}{i}")).collect::<Vec<_>>().join(" ")
}

/// The data dir the fetched models are under: `ORACULO_DATA`, else the default one.
pub fn data_dir() -> PathBuf {
    std::env::var_os("ORACULO_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").expect("HOME is set")).join(".local/share/oraculo"))
}

/// Where the fetched model files are: the data dir's `models/`.
pub fn models_dir() -> PathBuf {
    data_dir().join("models")
}

/// The embedded e5-small embedder, from the fetched model file: loaded once for the whole
/// binary (a clone shares the weights), as every test that embeds with it reads the same file.
pub fn e5() -> E5Embedder {
    static LOADED: LazyLock<E5Embedder> = LazyLock::new(|| {
        let path = E5Embedder::default_path(&data_dir());
        E5Embedder::load(&path).unwrap_or_else(|err| panic!("{err} (the tests need the embedded model)"))
    });
    LOADED.clone()
}

/// A data dir where the built-in sample campaign is ingested with the embedded e5 (no
/// annotations), once for the whole test binary: the one e5 index of the sample, shared by
/// the pin and the MCP tests. Read-only for them: a test that writes makes its own.
pub fn sample_with_e5() -> &'static Path {
    static SAMPLE: OnceLock<TempDir> = OnceLock::new();
    SAMPLE
        .get_or_init(|| {
            let data = shared_temp_dir("sample-e5");
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_oraculo"));
            for var in ["ORACULO_CONFIG", "ORACULO_CAMPAIGN", "ORACULO_EMBEDDER", "ORACULO_CHAT", "ORACULO_OLLAMA_URL"]
            {
                command.env_remove(var);
            }
            let output = command
                .args(["ingest", "--no-annotate"])
                .env("ORACULO_E5_MODEL", E5Embedder::default_path(&data_dir()))
                .env("ORACULO_DATA", data.path())
                .output()
                .expect("the binary runs");
            assert!(output.status.success(), "ingest failed: {}", String::from_utf8_lossy(&output.stderr));
            data
        })
        .path()
}

/// A temporary dir for what the whole test binary shares, under cargo's target dir:
/// a static is never dropped, so its dir outlives the run; the dirs of runs that are over
/// (their process gone) are removed here instead of piling up in /tmp.
fn shared_temp_dir(what: &str) -> TempDir {
    let parent = Path::new(env!("CARGO_TARGET_TMPDIR")).join("it-shared");
    std::fs::create_dir_all(&parent).expect("the target dir is writable");
    let prefix = format!("{what}-");
    for entry in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid =
            name.strip_prefix(&prefix).and_then(|rest| rest.split('-').next()).and_then(|pid| pid.parse::<u32>().ok());
        if pid.is_some_and(|pid| pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    tempfile::Builder::new()
        .prefix(&format!("{prefix}{}-", std::process::id()))
        .tempdir_in(&parent)
        .expect("a temporary dir under the target dir")
}

/// The `oraculo` binary on `scratch`'s campaign and data dir, with Ollama (embedder and chat)
/// at the stand-in's address and no config file from the environment.
pub fn oraculo_command(scratch: &Scratch, fake: &FakeOllama, args: &[&str]) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_oraculo"));
    command
        .args(args)
        .arg("--campaign")
        .arg(scratch.campaign.path())
        .arg("--data")
        .arg(scratch.data.path())
        .env("ORACULO_EMBEDDER", "ollama")
        .env("ORACULO_CHAT", "ollama")
        .env("ORACULO_OLLAMA_URL", fake.url())
        .env_remove("ORACULO_CONFIG");
    command
}

/// Two tiny sessions ingested with the real e5 embedder, and SmolLM2-135M loaded (one
/// thread): the real models end to end, quickly.
pub async fn smollm_campaign() -> (Scratch, Arc<dyn Embedder>, Arc<dyn oraculo::llm::chat::ChatModel>) {
    let gguf = models_dir().join(oraculo::llm::chat::llama_cpp::SMOLLM2_135M_FILE);
    assert!(gguf.is_file(), "{} is missing: run scripts/fetch-models.sh", gguf.display());
    let scratch = Scratch::new(&[
        ("Sesiones/Sesion 1.md", "# Sesión 1\nEl capitán Ardo cayó en combate defendiendo el puente del río.\n"),
        ("Sesiones/Sesion 2.md", "# Sesión 2\nEn el mercado compraron cuerdas, antorchas y pan.\n"),
    ]);
    let embedder: Arc<dyn Embedder> = Arc::new(e5());
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), embedder.as_ref()).await.unwrap();
    let config = oraculo::llm::chat::llama_cpp::LlamaCppConfig { gguf, threads: 1, n_ctx: 2048 };
    let chat = tokio::task::spawn_blocking(move || oraculo::llm::chat::llama_cpp::LlamaCppChat::load(&config))
        .await
        .unwrap()
        .unwrap();
    (scratch, embedder, Arc::new(chat))
}

/// A structured reply as the model writes it: each sentence with the labels it cites.
pub fn structured(sentences: &[(&str, &[&str])]) -> String {
    let sentences: Vec<Value> =
        sentences.iter().map(|(text, sources)| json!({ "text": text, "sources": sources })).collect();
    json!({ "in_notes": !sentences.is_empty(), "sentences": sentences }).to_string()
}

/// `question` asked of `oracle` by a player: the answer, and the text streamed on the way.
pub async fn ask_streamed(oracle: &Oracle, question: &str) -> (Answer, String) {
    let streamed = Mutex::new(String::new());
    let sink = |piece: &str| streamed.lock().unwrap().push_str(piece);
    let request = AskRequest { question, history: &[], audience: Audience::Player };
    let answer = oracle.ask(&request, Some(&sink)).await.unwrap();
    (answer, streamed.into_inner().unwrap())
}

/// What a correct answer is, whatever a small model wrote: cited (every citation checked
/// against the notes shown), or saying that the notes hold nothing on the question. Uncited
/// text never passes for an answer.
pub fn assert_cited_or_nothing_in_notes(answer: &Answer) {
    let nothing = [
        oraculo::answer::structured::not_in_notes(LabelLanguage::Es).to_string(),
        oraculo::answer::passages::render_extractive(&[], LabelLanguage::Es, false),
    ];
    assert!(!answer.citations.is_empty() || nothing.contains(&answer.text), "every claim is cited: {answer:?}");
}

/// The one entry ([`Oracle::answer`]) as the tests read it: the model's own answer, or what
/// a question's notes give the model.
#[allow(async_fn_in_trait, reason = "implemented once, for the tests' own calls")]
pub trait ThroughTheEntry {
    /// The question answered as a player's, only the model's text streamed to `on_token`,
    /// ending in the model's own answer (the notes' sentences when it failed after them).
    async fn ask(&self, request: &AskRequest<'_>, on_token: Option<TokenSink<'_>>) -> Result<Answer, AskError>;

    /// What the notes read as `preparation` says give the model (the answer left to the
    /// notes alone: no model asked).
    async fn read(&self, request: &AskRequest<'_>, preparation: Preparation) -> Result<Prepared, AskError>;

    /// The notes read as `preparation` says, and the model's own answer from them.
    async fn ask_as(&self, request: &AskRequest<'_>, preparation: Preparation) -> Result<(Prepared, Answer), AskError>;
}

impl ThroughTheEntry for Oracle {
    async fn ask(&self, request: &AskRequest<'_>, on_token: Option<TokenSink<'_>>) -> Result<Answer, AskError> {
        let events = |event: AnswerEvent<'_>| {
            if let (AnswerEvent::Text(piece), Some(on_token)) = (event, on_token) {
                on_token(piece);
            }
        };
        let settled = self.answer(request, AnswerOptions::new(&events)).await?;
        Ok(settled.model.unwrap_or(settled.answer))
    }

    async fn read(&self, request: &AskRequest<'_>, preparation: Preparation) -> Result<Prepared, AskError> {
        let options = AnswerOptions::new(&oraculo::oracle::no_events).prepared_as(preparation).notes_alone();
        Ok(answered_keeping_prepared(self, request, options).await?.0)
    }

    async fn ask_as(&self, request: &AskRequest<'_>, preparation: Preparation) -> Result<(Prepared, Answer), AskError> {
        let options = AnswerOptions::new(&oraculo::oracle::no_events).prepared_as(preparation);
        let (prepared, settled) = answered_keeping_prepared(self, request, options).await?;
        Ok((prepared, settled.model.unwrap_or(settled.answer)))
    }
}

/// `request` answered with `options`, its events replaced by one that keeps the last
/// `Prepared` (the rerank's choice, when it chose again).
async fn answered_keeping_prepared(
    oracle: &Oracle,
    request: &AskRequest<'_>,
    options: AnswerOptions<'_>,
) -> Result<(Prepared, Settled), AskError> {
    let seen = Mutex::new(None);
    let events = |event: AnswerEvent<'_>| {
        if let (AnswerEvent::Prepared(prepared), Ok(mut seen)) = (event, seen.lock()) {
            *seen = Some(prepared.clone());
        }
    };
    let settled = oracle.answer(request, AnswerOptions { events: &events, ..options }).await?;
    let prepared = seen.into_inner().ok().flatten().expect("an answer that settles was prepared first");
    Ok((prepared, settled))
}
