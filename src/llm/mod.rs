//! Transport to models: the [`Embedder`] and [`chat::ChatModel`] traits and their backends.
//!
//! Embedders ([`embed`]): e5-small in-process ([`embed::e5`]), Ollama ([`embed::ollama`]).
//! Chat models ([`chat`]): llama.cpp in-process ([`chat::llama_cpp`]), Ollama
//! ([`chat::ollama`]), any OpenAI-compatible server ([`chat::openai`]).
//! `app::connect_embedder` and `app::connect_chat` are the only places that pick a backend.
//!
//! Architecture invariant: nothing here knows what a fragment, a label or a citation is.
//! Text goes in, vectors and generated text come out.

pub mod chat;
pub mod embed;
mod http;

pub use http::ollama_pulled_models;

use async_trait::async_trait;

/// How to reach a model on a server: what every server backend's configuration starts with.
#[derive(Debug, Clone)]
pub struct ModelServer {
    /// Base URL, e.g. `http://127.0.0.1:11434`.
    pub url: String,
    /// The name the server serves the model under.
    pub model: String,
    /// The longest the server may stay silent: before the first byte (a model loading, a long
    /// prompt being read) and between two streamed lines; for embeddings, each request whole.
    pub timeout: std::time::Duration,
    /// Extra attempts after the first on connection errors, timeouts and 5xx answers, only
    /// while nothing has streamed to the caller yet.
    pub retries: u32,
}

/// A model server, as an error names it: who failed, and what usually fixes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// Ollama (embeddings and chat).
    Ollama,
    /// An OpenAI-compatible server (llama-server, vLLM, LM Studio…).
    OpenAi,
}

impl Server {
    /// What to check when it cannot be reached.
    pub fn start_hint(self) -> &'static str {
        match self {
            Server::Ollama => "Is it running? Start it with `ollama serve`",
            Server::OpenAi => "Is it running (llama-server, vLLM, LM Studio)? Check chat.url",
        }
    }

    /// The prefix of a backend's id (`ollama:bge-m3`, `openai:smollm`).
    pub fn backend_prefix(self) -> &'static str {
        match self {
            Server::Ollama => "ollama",
            Server::OpenAi => "openai",
        }
    }

    /// The setting that raises how long the server may stay silent.
    pub fn timeout_setting(self) -> &'static str {
        match self {
            Server::Ollama => "ollama.timeout_secs",
            Server::OpenAi => "chat.timeout_secs",
        }
    }
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Server::Ollama => "Ollama",
            Server::OpenAi => "the OpenAI-compatible server",
        })
    }
}

/// What failed while talking to a model, whichever backend it was: the server unreachable,
/// slow, answering an error status or missing the model, a model file missing, a reply that
/// cannot be used. Every variant names the backend (or file) involved.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("cannot reach {server} at {url}: {detail}. {}", .server.start_hint())]
    Unreachable { server: Server, url: String, detail: String },
    #[error("{server} at {url} does not serve the model `{model}`: {fix}")]
    ModelMissing { server: Server, url: String, model: String, fix: String },
    #[error("{server} at {url} answered {status}: {body}")]
    Status { server: Server, url: String, status: u16, body: String },
    #[error(
        "{server} at {url} sent nothing for {seconds} s (a model still loading or a long prompt on a slow machine?): raise {setting}"
    )]
    Timeout { server: Server, url: String, seconds: u64, setting: String },
    #[error("{server} at {url} refused the API key ({status}): set ORACULO_OPENAI_API_KEY")]
    Unauthorized { server: Server, url: String, status: u16 },
    #[error("model file {path} is missing: {fix}")]
    ModelFileMissing { path: String, fix: String },
    #[error("unexpected answer from {backend}: {detail}")]
    BadResponse { backend: String, detail: String },
    #[error("embedded model {path}: {source}")]
    EmbeddedModel {
        path: String,
        #[source]
        source: embed::e5::E5Error,
    },
    #[error("embedding worker failed: {0}")]
    Worker(String),
    #[error(
        "the answer stream from {backend} ended before it was complete ({detail}); the server may have crashed or restarted"
    )]
    StreamIncomplete { backend: String, detail: String },
    #[error("{backend} reported an error while generating: {message}")]
    Generation { backend: String, message: String },
    #[error("llama.cpp with {path}: {detail}")]
    LlamaCpp { path: String, detail: String },
    #[error("the JSON schema cannot be turned into a llama.cpp grammar: {detail}")]
    Schema { detail: String },
    #[error(
        "the prompt takes {prompt_tokens} tokens, beyond the {context_window}-token context window of {backend}: send less context or raise chat.n_ctx"
    )]
    PromptTooLong { backend: String, prompt_tokens: usize, context_window: usize },
    #[error("{backend} refused the prompt as longer than its context window: {message}")]
    ContextExceeded {
        backend: String,
        /// The server's own words (llama-server, vLLM and OpenAI each word it differently).
        message: String,
        /// The window the server said it has, when it said.
        n_ctx: Option<usize>,
        /// The prompt's size as the server counted it, when it said.
        prompt_tokens: Option<usize>,
    },
}

/// The wait before retry number `attempt + 1`: 0.5 s, then 1 s, 2 s… (doubling), for every
/// HTTP backend alike.
pub const RETRY_BASE_DELAY: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs one request until it succeeds, fails for good, or `retries` more attempts are spent,
/// waiting [`RETRY_BASE_DELAY`] doubled each time. `once` returns the failure and whether it
/// may be tried again: a transient one ([`LlmError::is_transient`]) before any text streamed
/// (a retry after that would repeat the text to the reader). The one retry loop of `llm`.
pub(crate) async fn with_retries<T, Fut>(
    what: &'static str,
    retries: u32,
    mut once: impl FnMut() -> Fut,
) -> Result<T, LlmError>
where
    Fut: std::future::Future<Output = Result<T, (LlmError, bool)>>,
{
    let mut attempt = 0;
    loop {
        match once().await {
            Ok(done) => return Ok(done),
            Err((err, may_retry)) if may_retry && attempt < retries && err.is_transient() => {
                let delay = RETRY_BASE_DELAY * 2u32.pow(attempt);
                tracing::warn!(error = %err, attempt, delay_ms = delay.as_millis() as u64, "retrying {what}");
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
            Err((err, _)) => return Err(err),
        }
    }
}

impl LlmError {
    /// A failure another attempt may not meet: the server unreachable, slow or cut off, or a
    /// 5xx. Never a 4xx, a missing model or a bad reply: those would fail the same way again.
    pub fn is_transient(&self) -> bool {
        match self {
            LlmError::Unreachable { .. } | LlmError::Timeout { .. } | LlmError::StreamIncomplete { .. } => true,
            LlmError::Status { status, .. } => *status >= 500,
            _ => false,
        }
    }

    /// A prompt the backend would not take because it does not fit the window: the caller
    /// can plan a smaller one and try again.
    pub fn is_context_exceeded(&self) -> bool {
        matches!(self, LlmError::ContextExceeded { .. } | LlmError::PromptTooLong { .. })
    }
}

/// Which side of an asymmetric embedder a text is on (e5's `query: ` / `passage: `).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmbedRole {
    Query,
    Passage,
}

/// A text → vector backend. One required method, as in simonw/llm's `Model.execute`.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Stable id recorded with the vectors it made (`e5-small-q4`, `ollama:bge-m3`).
    /// A different id means the vectors are not comparable and must be remade.
    fn id(&self) -> &str;
    /// Length of every vector this embedder returns.
    fn dimension(&self) -> usize;
    /// The longest passage, in words, that fits the model's input window; longer
    /// fragments are embedded as several overlapping windows of this many words.
    fn window_words(&self) -> usize;
    /// Embeds `texts` in one call (the caller batches). Vectors are L2-normalised.
    async fn embed(&self, texts: &[String], role: EmbedRole) -> Result<Vec<Vec<f32>>, LlmError>;
    /// The cosines at which an answer's sentence counts as said by a passage of its notes
    /// (`answer::support`), where this embedder was calibrated for it; `None` leaves that
    /// check off (cosines are not comparable between embedders).
    fn support_floor(&self) -> Option<SupportFloor> {
        None
    }
    /// The cosines at which a question's phrase in one language names a title written in the
    /// other («the archduke» for «el Archiduque»: `retrieve::entity`), where this embedder was
    /// calibrated for it; `None` leaves titles to the lexical matcher alone.
    fn name_floor(&self) -> Option<NameFloor> {
        None
    }
}

/// An embedder's floor for naming a title across languages: the phrase's nearest title must
/// reach `least`, and stand `margin` above the nearest title of any other entity (a phrase
/// about equally near two entities names neither).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NameFloor {
    pub least: f32,
    pub margin: f32,
}

/// An embedder's floors for `answer::support`: the least cosine between a sentence and its
/// nearest passage (both embedded as queries) for the passage to say what the sentence says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SupportFloor {
    /// The sentence in the language of the notes it cites.
    pub same_language: f32,
    /// A translation (an English answer over Spanish notes): cosines across languages run lower.
    pub other_language: f32,
}

/// The cosine of two vectors an embedder returned (L2-normalised: their dot product).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Scales `vector` to unit length (cosine distance then equals 1 - dot product).
pub fn normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in vector.iter_mut() {
            *x /= norm;
        }
    }
}
