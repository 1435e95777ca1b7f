//! The [`ChatModel`] trait: one required method, `chat`, as in simonw/llm's `Model.execute`.
//! Prompts arrive as text; nothing here knows what a fragment or a citation is.
//!
//! The backends: llama.cpp in this process ([`llama_cpp`]), the default on a fresh machine;
//! Ollama's `/api/chat` ([`ollama`]); any OpenAI-compatible server ([`openai`]).

pub mod llama_cpp;
pub mod ollama;
pub mod openai;
mod served;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::LlmError;

/// Context window for server backends when neither `chat.n_ctx` nor the server says one
/// (and the cap on an Ollama model's own context length): Qwen2.5's native window. Each
/// Ollama request asks for only what its prompt needs (rounded up to 1024), so the cap costs
/// nothing until used.
pub const DEFAULT_SERVER_N_CTX: usize = 32768;

/// One turn of a conversation the table had with the oracle (a Discord channel or thread, a
/// CLI chat): a chat message, user or assistant (one message type).
pub type Turn = ChatMessage;
/// Who said a turn.
pub type TurnRole = ChatRole;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatRole {
    System,
    User,
    Assistant,
}

impl ChatRole {
    /// The role as the wire formats write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ChatRole::System => "system",
            ChatRole::User => "user",
            ChatRole::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: ChatRole,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: ChatRole::System, content: content.into() }
    }
    pub fn user(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: ChatRole::User, content: content.into() }
    }
    pub fn assistant(content: impl Into<String>) -> ChatMessage {
        ChatMessage { role: ChatRole::Assistant, content: content.into() }
    }
}

/// One generation.
#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    /// When set, the output must be JSON valid against this schema (Ollama `format`,
    /// OpenAI `response_format`, a llama.cpp grammar).
    pub json_schema: Option<serde_json::Value>,
    /// The answer budget, in tokens.
    pub max_tokens: usize,
    pub temperature: f32,
}

#[derive(Debug, Clone, Default)]
pub struct ChatResponse {
    pub text: String,
    pub prompt_tokens: Option<usize>,
    pub completion_tokens: Option<usize>,
    /// Prompt tokens the backend did not read again because it kept them from an earlier
    /// prompt with the same start (llama.cpp's cached contexts).
    pub cached_prompt_tokens: Option<usize>,
}

/// Characters per token the HTTP backends assume when they cannot tokenise: real
/// tokenisers average ~4 for English prose and ~3.5 for Spanish, so 3 errs high.
pub const ESTIMATE_CHARS_PER_TOKEN: usize = 3;
/// Tokens a chat template adds around each message (ChatML's role markers take 4-5).
pub const TOKENS_PER_MESSAGE: usize = 4;

/// A token count for `text` that errs high, for backends without a local tokeniser.
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(ESTIMATE_CHARS_PER_TOKEN)
}

/// How fast a backend running on this machine reads a prompt and writes an answer. What a
/// CPU answer's context is planned from: there prompt reading is the cost (~60-86 tok/s for
/// the 1.5B on two idle cores), not the window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelSpeed {
    pub prompt_tokens_per_s: f64,
    pub generated_tokens_per_s: f64,
}

impl ModelSpeed {
    /// Finite, positive speeds (a stored file could hold anything).
    pub fn is_plausible(&self) -> bool {
        [self.prompt_tokens_per_s, self.generated_tokens_per_s].iter().all(|speed| speed.is_finite() && *speed > 0.0)
    }
}

/// Where a backend's context window came from: what the answer object reports beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowSource {
    /// `chat.n_ctx`: set by hand, it wins over what the server says.
    Config,
    /// llama-server's `GET /props` (`default_generation_settings.n_ctx`, per slot).
    ServerProps,
    /// `GET /v1/models` metadata (vLLM's `max_model_len`, llama-server's `meta.n_ctx`).
    ServerModels,
    /// Ollama's `POST /api/show` (the model's `<arch>.context_length`), capped at the
    /// default `num_ctx` ceiling.
    OllamaShow,
    /// What the server reported when it refused a prompt as too long.
    Refusal,
    /// The server said nothing: the built-in default for servers.
    Default,
    /// The model runs in this process: the context it was loaded with.
    Loaded,
}

/// A context window in tokens and where the number came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextWindow {
    pub tokens: usize,
    pub source: WindowSource,
}

/// A server's window as this process knows it: learnt once (from the configuration or the
/// server), relearnt after a refusal. The one cache every server backend keeps.
#[derive(Debug)]
pub struct WindowCache {
    /// `chat.n_ctx`, when set by hand: the window until something is learnt.
    configured: Option<usize>,
    learnt: std::sync::Mutex<Option<ContextWindow>>,
}

impl WindowCache {
    pub fn new(configured: Option<usize>) -> WindowCache {
        WindowCache { configured, learnt: std::sync::Mutex::new(None) }
    }

    /// `chat.n_ctx`, when set by hand.
    pub fn configured(&self) -> Option<usize> {
        self.configured
    }

    /// The window learnt so far, if any.
    pub fn learnt(&self) -> Option<ContextWindow> {
        *self.learnt.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Tokens known now, without asking: what was learnt, else `chat.n_ctx`, else the
    /// default for servers.
    pub fn tokens(&self) -> usize {
        match self.learnt() {
            Some(window) => window.tokens,
            None => self.configured.unwrap_or(DEFAULT_SERVER_N_CTX),
        }
    }

    /// The window learnt, or learnt now by `learn` (asked once; later calls reuse it).
    pub async fn get_or_learn(&self, learn: impl std::future::Future<Output = ContextWindow>) -> ContextWindow {
        if let Some(window) = self.learnt() {
            return window;
        }
        let window = learn.await;
        self.remember(window);
        window
    }

    /// Replaces what was learnt (a refusal said otherwise).
    pub fn remember(&self, window: ContextWindow) {
        *self.learnt.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(window);
    }
}

/// Receives the answer as it is generated (a terminal, a Discord message being edited).
pub type TokenSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// A text generator.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// Stable id: part of every cache key for what this model produced (`ollama:qwen2.5:14b`).
    fn id(&self) -> &str;
    /// The context window the backend is run with, in tokens: what is known now, without
    /// asking a server (see [`ChatModel::window`]).
    fn context_window(&self) -> usize;
    /// The window a prompt is planned for, and where it came from. A server is asked what
    /// it serves the first time (then cached for the process); `chat.n_ctx` wins when set.
    async fn window(&self) -> ContextWindow {
        ContextWindow { tokens: self.context_window(), source: WindowSource::Loaded }
    }
    /// After a refusal for length: forgets the cached window and learns it again (from the
    /// refusal itself when it said, else from the server).
    async fn refresh_window(&self, _refusal: &LlmError) -> ContextWindow {
        self.window().await
    }
    /// Tokens `text` takes in the prompt (exact where the backend can tokenise, else an
    /// estimate that errs high).
    fn count_tokens(&self, text: &str) -> usize;
    /// Tokens the whole conversation takes in the prompt, template markers included.
    fn count_message_tokens(&self, messages: &[ChatMessage]) -> usize {
        messages.iter().map(|message| self.count_tokens(&message.content) + TOKENS_PER_MESSAGE).sum()
    }
    /// A smoke-test model (SmolLM2-135M): it proves the pipeline runs, and its free text is
    /// never shown to a user (the oracle asks it for structured answers or extracts).
    fn is_smoke_test(&self) -> bool {
        false
    }
    /// The speeds measured on this machine, for a backend that runs here and whose time is
    /// the limit (the embedded one); `None` for servers, whose window is the limit.
    async fn speed(&self) -> Option<ModelSpeed> {
        None
    }
    /// Tokens at the start of this conversation's prompt the backend holds from an earlier
    /// one and would not read again (llama.cpp's cached contexts); 0 for servers.
    fn cached_prefix_tokens(&self, _messages: &[ChatMessage]) -> usize {
        0
    }
    /// Generates one answer. `on_token`, when given, receives the text as it streams.
    async fn chat(&self, request: &ChatRequest, on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError>;
}

/// The chat model of an oracle opened only to search (`oraculo search`, the pipeline bench):
/// none is loaded, since a search never asks one. Asked anyway, it says so.
pub struct NoChat;

#[async_trait]
impl ChatModel for NoChat {
    fn id(&self) -> &str {
        "none"
    }
    fn context_window(&self) -> usize {
        0
    }
    fn count_tokens(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
    async fn chat(&self, _request: &ChatRequest, _on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
        Err(LlmError::BadResponse {
            backend: "none".into(),
            detail: "this oracle was opened to search and has no chat model loaded".into(),
        })
    }
}

/// The span every backend's `chat` runs in (`num_ctx` is recorded by the backends that choose one).
pub(crate) fn chat_span(backend: &str, request: &ChatRequest) -> tracing::Span {
    tracing::info_span!(
        "llm.chat",
        backend = %backend,
        n_messages = request.messages.len(),
        num_ctx = tracing::field::Empty,
        max_tokens = request.max_tokens,
        json = request.json_schema.is_some()
    )
}

/// A chat model made to run no faster than a slower machine would: it reads each prompt at
/// `speed.prompt_tokens_per_s` (what the backend holds cached is not read again) and streams
/// each token at `speed.generated_tokens_per_s`, waiting where the model it wraps is faster,
/// and reports that speed to the planner. `oraculo ask --pace` and `oraculo eval --pace`
/// answer as a slow CPU would, on any machine, so that what depends on the speed (the plan,
/// the deadline, what the model gets to read) is measured at several speeds, not only at
/// the one this machine has. Waiting costs no CPU; a model slower than the pace keeps its
/// own speed.
pub struct PacedChat {
    inner: std::sync::Arc<dyn ChatModel>,
    speed: ModelSpeed,
}

impl PacedChat {
    pub fn new(inner: std::sync::Arc<dyn ChatModel>, speed: ModelSpeed) -> PacedChat {
        PacedChat { inner, speed }
    }
}

#[async_trait]
impl ChatModel for PacedChat {
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn context_window(&self) -> usize {
        self.inner.context_window()
    }
    async fn window(&self) -> ContextWindow {
        self.inner.window().await
    }
    async fn refresh_window(&self, refusal: &LlmError) -> ContextWindow {
        self.inner.refresh_window(refusal).await
    }
    fn count_tokens(&self, text: &str) -> usize {
        self.inner.count_tokens(text)
    }
    fn count_message_tokens(&self, messages: &[ChatMessage]) -> usize {
        self.inner.count_message_tokens(messages)
    }
    fn is_smoke_test(&self) -> bool {
        self.inner.is_smoke_test()
    }
    async fn speed(&self) -> Option<ModelSpeed> {
        Some(self.speed)
    }
    fn cached_prefix_tokens(&self, messages: &[ChatMessage]) -> usize {
        self.inner.cached_prefix_tokens(messages)
    }
    async fn chat(&self, request: &ChatRequest, on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
        use tokio::time::{Duration, Instant, sleep_until};
        let to_read = self
            .inner
            .count_message_tokens(&request.messages)
            .saturating_sub(self.inner.cached_prefix_tokens(&request.messages));
        let per_token = Duration::from_secs_f64(1.0 / self.speed.generated_tokens_per_s);
        let first_token_at = Instant::now() + Duration::from_secs_f64(to_read as f64 / self.speed.prompt_tokens_per_s);
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<String>();
        let generate = async move {
            let forward = move |piece: &str| {
                let _ = sender.send(piece.to_string());
            };
            // `forward` (and the sender with it) goes when the generation ends: the delivery
            // below then drains what is left and stops.
            self.inner.chat(request, Some(&forward)).await
        };
        let deliver = async {
            let mut delivered: u32 = 0;
            while let Some(piece) = receiver.recv().await {
                sleep_until(first_token_at + per_token * delivered).await;
                delivered += 1;
                if let Some(sink) = on_token {
                    sink(&piece);
                }
            }
        };
        let (response, ()) = tokio::join!(generate, deliver);
        let response = response?;
        // A reply the backend did not stream still takes the time its tokens would.
        let generated = response.completion_tokens.unwrap_or(0).min(u32::MAX as usize) as u32;
        sleep_until(first_token_at + per_token * generated).await;
        Ok(response)
    }
}
