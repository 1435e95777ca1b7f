//! Shared helpers: temp campaigns, configs, embedders.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use oraculo::config::{CampaignConfig, DEFAULT_IGNORED, DEFAULT_MAX_NOTE_BYTES};
use oraculo::corpus::{CorpusConfig, LabelLanguage, default_kind_folders};
use oraculo::index::{Index, campaign_index_dir};
use oraculo::ingest::{IngestError, IngestSummary, Quiet, ingest_campaign};
use oraculo::llm::embed::ollama::{OllamaEmbedder, OllamaEmbedderConfig};
use oraculo::llm::{EmbedRole, Embedder, LlmError};
use oraculo::oracle::{Answer, AskRequest, Oracle};
use oraculo::retrieve::Audience;
use serde_json::{Value, json};
use tempfile::TempDir;

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
        url: fake.url(),
        model: model.to_string(),
        timeout: Duration::from_secs(10),
        retries: 0,
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

/// Wraps a real embedder, counting calls and failing from call `fail_from` on (a crash
/// stand-in for the failure-injection tests).
pub struct CountingEmbedder<E> {
    pub inner: E,
    pub calls: AtomicUsize,
    pub texts: AtomicUsize,
    pub fail_from: Option<usize>,
}

impl<E> CountingEmbedder<E> {
    pub fn new(inner: E) -> Arc<CountingEmbedder<E>> {
        Arc::new(CountingEmbedder { inner, calls: AtomicUsize::new(0), texts: AtomicUsize::new(0), fail_from: None })
    }

    pub fn failing_from(inner: E, call: usize) -> Arc<CountingEmbedder<E>> {
        Arc::new(CountingEmbedder {
            inner,
            calls: AtomicUsize::new(0),
            texts: AtomicUsize::new(0),
            fail_from: Some(call),
        })
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
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.fail_from.is_some_and(|from| call >= from) {
            return Err(LlmError::Worker("injected failure".into()));
        }
        self.texts.fetch_add(texts.len(), Ordering::SeqCst);
        self.inner.embed(texts, role).await
    }
}

/// `n` words of filler prose, numbered so that windows can be told apart.
pub fn prose(tag: &str, n: usize) -> String {
    (0..n).map(|i| format!("{tag}{i}")).collect::<Vec<_>>().join(" ")
}

/// Where the fetched model files are: `ORACULO_DATA`'s, else the default data dir's `models/`.
pub fn models_dir() -> PathBuf {
    let data_dir = std::env::var_os("ORACULO_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").expect("HOME is set")).join(".local/share/oraculo"));
    data_dir.join("models")
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
    let embedder: Arc<dyn Embedder> = Arc::new(crate::embedded::e5());
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
