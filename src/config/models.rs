//! `[embedder]`, `[chat]` and `[ollama]`: which models embed, answer, annotate and rerank, and
//! how answers are made.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::answer::{AnswerMode, AnswerStyle};
use crate::llm::ModelServer;
use crate::llm::chat::ollama::OllamaChatConfig;
use crate::llm::chat::openai::{ApiKey, OpenAiChatConfig};
use crate::llm::embed::ollama::OllamaEmbedderConfig;

/// Ollama's usual address.
pub const DEFAULT_OLLAMA_URL: &str = "http://127.0.0.1:11434";
/// The production embedder: multilingual, 8192-token window.
pub const DEFAULT_OLLAMA_EMBED_MODEL: &str = "bge-m3";
/// The production chat model: the one that answers, annotates and reranks.
pub const DEFAULT_OLLAMA_CHAT_MODEL: &str = "qwen2.5:14b";
/// How long Ollama keeps the chat model loaded after a request: longer than the gap
/// between questions at a table, so a question never waits for a reload.
pub const DEFAULT_KEEP_ALIVE: &str = "30m";
/// llama.cpp's `llama-server` listens here by default.
pub const DEFAULT_OPENAI_URL: &str = "http://127.0.0.1:8080";
/// The answer budget in tokens: a long answer (~400 Spanish words) with room to spare.
pub const DEFAULT_CHAT_MAX_TOKENS: usize = 1024;
/// How long an answer may take on a CPU (the embedded backend): a question at the table can
/// wait a minute and a half; the context is sized so that the model reads it in that time.
pub const DEFAULT_ANSWER_SECONDS: f64 = 90.0;
/// Below this no useful context can be read on a CPU.
pub const MIN_ANSWER_SECONDS: f64 = 10.0;
/// The most one answer's generation may take, every attempt included, before it gives way to
/// the extractive answer: with one answer at a time, a stream that never ends would hold the
/// whole queue. Five minutes covers a structured answer and its retry on a loaded CPU
/// (measured p95 212 s for the 1.5B on 2 busy cores).
pub const DEFAULT_ANSWER_DEADLINE_SECS: u64 = 300;
/// Context window for server backends when neither `chat.n_ctx` nor the server says one
/// (defined with the chat trait, which plans by it).
pub use crate::llm::chat::DEFAULT_SERVER_N_CTX;
/// Context window of the embedded model: 8 session fragments (~2k tokens each) fit, and the
/// 1.5B model's cache stays near 230 MB.
pub const DEFAULT_EMBEDDED_N_CTX: usize = 8192;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEmbedder {
    pub backend: Option<String>,
    pub model: Option<String>,
    pub model_path: Option<PathBuf>,
    pub batch_size: Option<usize>,
    pub window_words: Option<usize>,
}

/// `[chat]`. The API key is deliberately absent: it comes from `ORACULO_OPENAI_API_KEY`
/// only, so it never sits in a file that gets shared.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawChat {
    pub backend: Option<String>,
    pub model: Option<String>,
    pub url: Option<String>,
    pub gguf: Option<PathBuf>,
    pub threads: Option<usize>,
    pub n_ctx: Option<usize>,
    pub keep_alive: Option<String>,
    pub max_tokens: Option<usize>,
    pub timeout_secs: Option<u64>,
    pub retries: Option<u32>,
    pub answer_mode: Option<String>,
    pub answer_style: Option<String>,
    pub answer_seconds: Option<f64>,
    pub answer_deadline_secs: Option<u64>,
    pub instant_answer: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawOllama {
    pub url: Option<String>,
    pub timeout_secs: Option<u64>,
    pub retries: Option<u32>,
}

#[derive(Debug, Clone)]
pub enum EmbedderConfig {
    /// multilingual-e5-small in-process; `None` looks in `<data_dir>/models/`.
    Embedded {
        model_path: Option<PathBuf>,
        batch_size: usize,
    },
    Ollama(OllamaEmbedderConfig),
}

/// `chat.answer_mode` and `chat.answer_seconds`, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AnswerConfig {
    pub mode: AnswerMode,
    /// The time an answer may take where the backend runs on this machine and reports its
    /// speed (the embedded one): the context is planned to be read within it.
    pub seconds: f64,
    /// The total time one answer's generation may take (`chat.answer_deadline_secs`).
    pub deadline: std::time::Duration,
    /// Whether the notes' own sentences are shown at once, before the model's answer
    /// (`chat.instant_answer`, default on).
    pub instant: bool,
    /// Whether the answer is the notes' own sentences or the model's prose
    /// (`chat.answer_style`; see [`answer_style`]).
    pub style: AnswerStyle,
}

impl AnswerConfig {
    /// Whether the answer is the notes' own sentences (`chat.answer_style = "quotes"`): no chat
    /// model is needed for it.
    pub fn quotes(&self) -> bool {
        self.style == AnswerStyle::Quotes
    }
}

/// Which chat model answers, annotates and reranks; `llm::connect_chat` builds it.
#[derive(Debug, Clone)]
pub enum ChatConfig {
    /// llama.cpp in-process. `gguf: None` picks the largest model fetched into
    /// `<data_dir>/models/` (see `LlamaCppChat::default_path`).
    Embedded {
        gguf: Option<PathBuf>,
        threads: usize,
        n_ctx: usize,
    },
    Ollama(OllamaChatConfig),
    OpenAi(OpenAiChatConfig),
}

impl EmbedderConfig {
    /// Passages per embedding call, whichever backend.
    pub fn batch_size(&self) -> usize {
        match self {
            EmbedderConfig::Embedded { batch_size, .. } => *batch_size,
            EmbedderConfig::Ollama(ollama) => ollama.batch_size,
        }
    }
}

/// Validates `[embedder]`; the Ollama backend reaches the server `[ollama]` describes.
pub(super) fn embedder_config(
    embedder_raw: RawEmbedder,
    ollama_raw: RawOllama,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<EmbedderConfig> {
    let backend = env("ORACULO_EMBEDDER").or(embedder_raw.backend).unwrap_or_else(|| "embedded".into());
    let batch_size = embedder_raw.batch_size.unwrap_or(16);
    if batch_size == 0 {
        bail!("embedder.batch_size must be above 0");
    }
    Ok(match backend.as_str() {
        // `ORACULO_E5_MODEL` beats `embedder.model_path`, as every variable beats the file.
        "embedded" => EmbedderConfig::Embedded {
            model_path: env("ORACULO_E5_MODEL").map(PathBuf::from).or(embedder_raw.model_path),
            batch_size,
        },
        "ollama" => {
            let url = env("ORACULO_OLLAMA_URL").or(ollama_raw.url).unwrap_or_else(|| DEFAULT_OLLAMA_URL.into());
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                bail!("ollama.url = {url:?}: expected an http:// or https:// address");
            }
            EmbedderConfig::Ollama(OllamaEmbedderConfig {
                server: ModelServer {
                    url,
                    model: embedder_raw.model.unwrap_or_else(|| DEFAULT_OLLAMA_EMBED_MODEL.into()),
                    timeout: Duration::from_secs(ollama_raw.timeout_secs.unwrap_or(120)),
                    retries: ollama_raw.retries.unwrap_or(3),
                },
                batch_size,
                window_words: embedder_raw.window_words,
            })
        }
        other => bail!("embedder.backend = {other:?}: expected \"embedded\" or \"ollama\""),
    })
}

/// `chat.answer_mode` (default: structured for the embedded backend, whose small models cite
/// reliably only through a schema; free text for servers) and `chat.answer_seconds`.
/// Takes both keys out of `chat`.
pub(super) fn answer_config(chat: &mut RawChat, env: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<AnswerConfig> {
    let backend = env("ORACULO_CHAT").or(chat.backend.clone()).unwrap_or_else(|| "embedded".into());
    let mode = match chat.answer_mode.take().as_deref() {
        None if backend == "embedded" => AnswerMode::Structured,
        None => AnswerMode::Free,
        Some("structured") => AnswerMode::Structured,
        Some("free") => AnswerMode::Free,
        Some(other) => bail!("chat.answer_mode = {other:?}: expected \"structured\" or \"free\""),
    };
    let seconds = chat.answer_seconds.take().unwrap_or(DEFAULT_ANSWER_SECONDS);
    if !(seconds.is_finite() && seconds >= MIN_ANSWER_SECONDS) {
        bail!("chat.answer_seconds = {seconds}: expected at least {MIN_ANSWER_SECONDS} seconds");
    }
    let deadline_secs = chat.answer_deadline_secs.take().unwrap_or(DEFAULT_ANSWER_DEADLINE_SECS);
    if (deadline_secs as f64) < seconds {
        bail!("chat.answer_deadline_secs = {deadline_secs}: expected at least chat.answer_seconds ({seconds})");
    }
    let instant = chat.instant_answer.take().unwrap_or(true);
    let style = answer_style(chat.answer_style.take().as_deref(), &backend)?;
    Ok(AnswerConfig { mode, seconds, deadline: std::time::Duration::from_secs(deadline_secs), instant, style })
}

/// `chat.answer_style`. By default the embedded backend (a CPU, where a 1.5B model takes a
/// minute to write two sentences) answers with the notes' own sentences, at once; a served
/// model (Ollama, OpenAI-compatible: a GPU) writes prose.
fn answer_style(configured: Option<&str>, backend: &str) -> anyhow::Result<AnswerStyle> {
    Ok(match configured {
        None if backend == "embedded" => AnswerStyle::Quotes,
        None => AnswerStyle::Prose,
        Some("quotes") => AnswerStyle::Quotes,
        Some("prose") => AnswerStyle::Prose,
        Some(other) => bail!("chat.answer_style = {other:?}: expected \"quotes\" or \"prose\""),
    })
}

/// Validates `[chat]`; the Ollama backend reaches the server `[ollama]` describes.
pub(super) fn chat_config(
    chat: RawChat,
    ollama: &RawOllama,
    env: &dyn Fn(&str) -> Option<String>,
) -> anyhow::Result<(ChatConfig, usize)> {
    let backend = env("ORACULO_CHAT").or(chat.backend).unwrap_or_else(|| "embedded".into());
    let max_tokens = chat.max_tokens.unwrap_or(DEFAULT_CHAT_MAX_TOKENS);
    if max_tokens == 0 {
        bail!("chat.max_tokens must be above 0");
    }
    let n_ctx = chat.n_ctx.unwrap_or(if backend == "embedded" { DEFAULT_EMBEDDED_N_CTX } else { DEFAULT_SERVER_N_CTX });
    if n_ctx <= max_tokens {
        bail!("chat.n_ctx = {n_ctx} leaves no room for a prompt beside chat.max_tokens = {max_tokens}");
    }
    let check_url = |key: &str, url: &str| -> anyhow::Result<()> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("{key} = {url:?}: expected an http:// or https:// address");
        }
        Ok(())
    };
    let config = match backend.as_str() {
        "embedded" => {
            let threads = chat.threads.unwrap_or_else(default_threads);
            if threads == 0 {
                bail!("chat.threads must be above 0");
            }
            ChatConfig::Embedded { gguf: chat.gguf, threads, n_ctx }
        }
        "ollama" => {
            let url =
                env("ORACULO_OLLAMA_URL").or_else(|| ollama.url.clone()).unwrap_or_else(|| DEFAULT_OLLAMA_URL.into());
            check_url("ollama.url", &url)?;
            let keep_alive = chat.keep_alive.unwrap_or_else(|| DEFAULT_KEEP_ALIVE.into());
            if keep_alive.trim().is_empty() {
                bail!("chat.keep_alive is empty: use a duration such as \"30m\", or \"-1\" to keep the model loaded");
            }
            ChatConfig::Ollama(OllamaChatConfig {
                server: ModelServer {
                    url,
                    model: chat.model.unwrap_or_else(|| DEFAULT_OLLAMA_CHAT_MODEL.into()),
                    timeout: Duration::from_secs(ollama.timeout_secs.unwrap_or(120)),
                    retries: ollama.retries.unwrap_or(3),
                },
                keep_alive,
                n_ctx: chat.n_ctx,
            })
        }
        "openai" => {
            let url = chat.url.unwrap_or_else(|| DEFAULT_OPENAI_URL.into());
            check_url("chat.url", &url)?;
            let model = chat.model.context(
                "chat.model is required with backend \"openai\": the name the server serves the model under",
            )?;
            ChatConfig::OpenAi(OpenAiChatConfig {
                server: ModelServer {
                    url,
                    model,
                    timeout: Duration::from_secs(chat.timeout_secs.unwrap_or(120)),
                    retries: chat.retries.unwrap_or(3),
                },
                api_key: env("ORACULO_OPENAI_API_KEY").map(ApiKey::new),
                n_ctx: chat.n_ctx,
            })
        }
        other => bail!("chat.backend = {other:?}: expected \"embedded\", \"ollama\" or \"openai\""),
    };
    Ok((config, max_tokens))
}

/// llama.cpp threads when `chat.threads` is unset: one core fewer than this process may use,
/// at least 1, at most 8 (beyond that generation is bound by memory bandwidth). llama.cpp's
/// threads wait for each other at every step, so one thread losing its core to another
/// process stalls them all: measured on a 2-core VM busy compiling, 2 threads generated
/// 0.8-1.3 tok/s where 1 thread held 3.5-23 tok/s (1.5B / 135M). Leaving a core free costs
/// half the speed on an idle 2-core machine and little on bigger ones.
fn default_threads() -> usize {
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    cores.saturating_sub(1).clamp(1, 8)
}

#[cfg(test)]
mod tests {
    use super::{AnswerConfig, ChatConfig};
    use super::{
        DEFAULT_ANSWER_DEADLINE_SECS, DEFAULT_ANSWER_SECONDS, DEFAULT_CHAT_MAX_TOKENS, DEFAULT_EMBEDDED_N_CTX,
    };
    use crate::answer::{AnswerMode, AnswerStyle};
    use crate::config::tests::check;

    #[test]
    fn chat_defaults_to_the_embedded_model_and_env_picks_another() {
        let config = check("", &[("HOME", "/h")]).unwrap();
        assert!(matches!(config.chat, ChatConfig::Embedded { gguf: None, n_ctx: DEFAULT_EMBEDDED_N_CTX, .. }));
        assert_eq!(config.campaign.corpus.secret_paths, ["Secretos", "Secrets"]);
        assert_eq!(config.chat_max_tokens, DEFAULT_CHAT_MAX_TOKENS);
        // The embedded model answers through the schema, within the CPU's time budget.
        assert_eq!(
            config.answer,
            AnswerConfig {
                mode: AnswerMode::Structured,
                seconds: DEFAULT_ANSWER_SECONDS,
                deadline: std::time::Duration::from_secs(DEFAULT_ANSWER_DEADLINE_SECS),
                instant: true,
                style: AnswerStyle::Quotes,
            }
        );

        let text = "[chat]\nbackend = \"openai\"\nmodel = \"qwen\"\nurl = \"http://gpu:8000/v1\"\n";
        let config = check(text, &[("HOME", "/h"), ("ORACULO_OPENAI_API_KEY", "sk-1")]).unwrap();
        let ChatConfig::OpenAi(chat) = config.chat else { panic!("openai") };
        assert_eq!(chat.api_key.as_ref().map(|key| key.expose().as_str()), Some("sk-1"));
        assert!(!format!("{chat:?}").contains("sk-1"));

        assert_eq!(config.answer.mode, AnswerMode::Free, "a server's model writes free text by default");
        assert_eq!(config.answer.style, AnswerStyle::Prose, "a server's model writes the answer by default");

        let config = check(text, &[("HOME", "/h"), ("ORACULO_CHAT", "ollama")]).unwrap();
        assert!(matches!(config.chat, ChatConfig::Ollama(_)));
        assert_eq!(config.answer.mode, AnswerMode::Free);

        let text = "[chat]\nbackend = \"ollama\"\nanswer_mode = \"structured\"\nanswer_seconds = 30\nanswer_deadline_secs = 60\n";
        let config = check(text, &[("HOME", "/h")]).unwrap();
        let deadline = std::time::Duration::from_secs(60);
        assert_eq!(
            config.answer,
            AnswerConfig {
                mode: AnswerMode::Structured,
                seconds: 30.0,
                deadline,
                instant: true,
                style: AnswerStyle::Prose
            }
        );
        let quotes = check("[chat]\nbackend = \"ollama\"\nanswer_style = \"quotes\"\n", &[("HOME", "/h")]).unwrap();
        assert_eq!(quotes.answer.style, AnswerStyle::Quotes, "a server may answer with the notes' sentences too");
        let prose = check("[chat]\nanswer_style = \"prose\"\n", &[("HOME", "/h")]).unwrap();
        assert_eq!(prose.answer.style, AnswerStyle::Prose, "and a CPU may wait for the model's prose");
        let off = check("[chat]\ninstant_answer = false\n", &[("HOME", "/h")]).unwrap();
        assert!(!off.answer.instant, "chat.instant_answer = false turns the notes' sentences first off");
    }

    #[test]
    fn chat_errors_name_the_key() {
        for (text, key) in [
            ("[chat]\nbackend = \"gpt\"\n", "chat.backend"),
            ("[chat]\nbackend = \"openai\"\n", "chat.model"),
            ("[chat]\napi_key = \"sk-in-a-file\"\n", "api_key"),
            ("[chat]\nmax_tokens = 0\n", "chat.max_tokens"),
            ("[chat]\nn_ctx = 512\nmax_tokens = 1024\n", "chat.n_ctx"),
            ("[chat]\nthreads = 0\n", "chat.threads"),
            ("[chat]\nanswer_mode = \"json\"\n", "chat.answer_mode"),
            ("[chat]\nanswer_style = \"poem\"\n", "chat.answer_style"),
            ("[chat]\nanswer_seconds = 2\n", "chat.answer_seconds"),
            ("[chat]\nanswer_seconds = 90\nanswer_deadline_secs = 30\n", "chat.answer_deadline_secs"),
        ] {
            let err = check(text, &[("HOME", "/h")]).unwrap_err();
            assert!(format!("{err:#}").contains(key), "{text}: {err:#}");
        }
    }
}
