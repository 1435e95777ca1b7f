//! Ollama chat over HTTP: `POST /api/chat`, streamed as NDJSON (`qwen2.5:14b` by default).
//!
//! Every request sets `options.num_ctx` from the prompt's size plus the answer budget:
//! Ollama's default window is small and silently drops the start of a longer prompt.
//! `keep_alive` keeps the model resident between questions.
//!
//! The window is the model's own context length, asked once per process from `/api/show`
//! and capped at [`crate::llm::chat::DEFAULT_SERVER_N_CTX`] (`chat.n_ctx`, when set, wins).
//! Requests say `truncate: false`: a prompt longer than `num_ctx` is then refused (400,
//! llama.cpp's "exceeds the available context size") instead of losing its start, and comes
//! back as [`LlmError::ContextExceeded`]. (Ollama versions before that flag still drop the
//! start silently: the planned prompt is sized from an estimate that errs high.) The wire types mirror Ollama's
//! JSON, so the test stand-in exercises this very code.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tracing::{Instrument, debug, info, warn};

use super::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ContextWindow, TokenSink, WindowCache, WindowSource, chat_span,
    estimate_tokens,
};
use crate::llm::http::{LineReader, ReadError, context_for, describe};
use crate::llm::{LlmError, Server};

/// `num_ctx` is rounded up to a multiple of this, so prompts of similar size ask for the
/// same window (Ollama reloads the model when `num_ctx` changes).
pub const NUM_CTX_GRANULARITY: usize = 1024;
/// The longest `/api/show` may take to say the model's context length.
const WINDOW_QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// How to reach an Ollama server for chat. Built from `[ollama]` and `[chat]` in config.
#[derive(Debug, Clone)]
pub struct OllamaChatConfig {
    /// Base URL, e.g. `http://127.0.0.1:11434`.
    pub url: String,
    pub model: String,
    /// The longest the server may stay silent: before the first byte (a model loading, a
    /// long prompt being read) and between two streamed lines.
    pub timeout: Duration,
    /// Extra attempts after the first on connection errors, timeouts and 5xx answers,
    /// only while nothing has been streamed to the caller yet.
    pub retries: u32,
    /// How long Ollama keeps the model loaded after a request (`"30m"`, `"-1"` for ever).
    pub keep_alive: String,
    /// `chat.n_ctx`: the largest `num_ctx` ever requested, in tokens, when set by hand.
    /// `None`: the model's context length (`/api/show`), at most
    /// [`crate::llm::chat::DEFAULT_SERVER_N_CTX`].
    pub n_ctx: Option<usize>,
}

#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<&'a serde_json::Value>,
    options: ChatOptions,
    keep_alive: &'a str,
    /// Refuse a prompt longer than `num_ctx` rather than drop its start.
    truncate: bool,
}

#[derive(Serialize)]
struct ChatOptions {
    num_ctx: usize,
    num_predict: usize,
    temperature: f32,
}

/// One NDJSON line of a streamed `/api/chat` answer.
#[derive(Deserialize)]
struct ChatChunk {
    #[serde(default)]
    message: Option<ChunkMessage>,
    #[serde(default)]
    done: bool,
    #[serde(default)]
    done_reason: Option<String>,
    #[serde(default)]
    prompt_eval_count: Option<usize>,
    #[serde(default)]
    eval_count: Option<usize>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct ChunkMessage {
    #[serde(default)]
    content: String,
}

#[derive(Deserialize)]
struct ErrorResponse {
    error: String,
}

/// Chat with a model served by Ollama.
pub struct OllamaChat {
    config: OllamaChatConfig,
    client: reqwest::Client,
    id: String,
    /// The window learnt from `/api/show`, once per process.
    window: WindowCache,
}

impl std::fmt::Debug for OllamaChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OllamaChat").field("id", &self.id).field("url", &self.config.url).finish()
    }
}

impl OllamaChat {
    /// Builds the client. Nothing is sent: the first `chat` reports a server that is down
    /// or a model that is not pulled, with the command that fixes it.
    pub fn new(config: OllamaChatConfig) -> Result<OllamaChat, LlmError> {
        let client = crate::llm::http::client(Server::Ollama, &config.url, config.timeout, false)?;
        let window = WindowCache::new(config.n_ctx);
        Ok(OllamaChat { id: format!("ollama:{}", config.model), config, client, window })
    }

    /// The model's context length from `POST /api/show` (`model_info["<arch>.context_length"]`);
    /// `None` (logged) when Ollama does not say.
    async fn context_length_from_show(&self) -> Option<usize> {
        let url = format!("{}/api/show", self.config.url.trim_end_matches('/'));
        let fetch = async {
            let response = self
                .client
                .post(&url)
                .json(&serde_json::json!({ "model": self.config.model }))
                .send()
                .await
                .map_err(|err| describe(&err))?;
            if !response.status().is_success() {
                return Err(format!("status {}", response.status().as_u16()));
            }
            response.json::<serde_json::Value>().await.map_err(|err| describe(&err))
        };
        let show = match tokio::time::timeout(WINDOW_QUERY_TIMEOUT.min(self.config.timeout), fetch).await {
            Ok(Ok(show)) => show,
            Ok(Err(detail)) => {
                debug!(%url, %detail, "no context length from /api/show");
                return None;
            }
            Err(_) => {
                debug!(%url, "no context length from /api/show: timed out");
                return None;
            }
        };
        show_context_length(&show)
    }

    async fn discover_window(&self) -> ContextWindow {
        if let Some(tokens) = self.config.n_ctx {
            return ContextWindow { tokens, source: WindowSource::Config };
        }
        match self.context_length_from_show().await {
            Some(length) => {
                let tokens = length.min(crate::llm::chat::DEFAULT_SERVER_N_CTX);
                info!(backend = %self.id, context_length = length, tokens, "context window learnt from /api/show");
                ContextWindow { tokens, source: WindowSource::OllamaShow }
            }
            None => ContextWindow { tokens: crate::llm::chat::DEFAULT_SERVER_N_CTX, source: WindowSource::Default },
        }
    }

    fn endpoint(&self) -> String {
        format!("{}/api/chat", self.config.url.trim_end_matches('/'))
    }

    fn timeout_error(&self) -> LlmError {
        LlmError::Timeout {
            server: Server::Ollama,
            url: self.config.url.clone(),
            seconds: self.config.timeout.as_secs(),
            setting: "ollama.timeout_secs".into(),
        }
    }

    /// The `num_ctx` for `request`: its estimated prompt plus the answer budget, within the
    /// window known now.
    pub fn num_ctx_for(&self, request: &ChatRequest) -> usize {
        let prompt_tokens = self.count_message_tokens(&request.messages);
        context_for(prompt_tokens, request.max_tokens, NUM_CTX_GRANULARITY, self.context_window())
    }

    async fn chat_once(
        &self,
        body: &ChatBody<'_>,
        on_token: Option<TokenSink<'_>>,
        streamed: &mut bool,
    ) -> Result<ChatResponse, LlmError> {
        let url = self.endpoint();
        let send = self.client.post(&url).json(body).send();
        let response = match tokio::time::timeout(self.config.timeout, send).await {
            Err(_) => return Err(self.timeout_error()),
            Ok(Err(err)) if err.is_timeout() => return Err(self.timeout_error()),
            Ok(Err(err)) => {
                return Err(LlmError::Unreachable {
                    server: Server::Ollama,
                    url: self.config.url.clone(),
                    detail: describe(&err),
                });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let body = match tokio::time::timeout(self.config.timeout, response.text()).await {
                Ok(Ok(body)) => body,
                _ => String::new(),
            };
            let message = serde_json::from_str::<ErrorResponse>(&body).map(|e| e.error).unwrap_or(body);
            // The refusal arrives as llama.cpp's error JSON inside Ollama's `error` string.
            if status.is_client_error()
                && let Some(refusal) = super::openai::context_refusal(&message)
            {
                return Err(LlmError::ContextExceeded {
                    backend: self.id.clone(),
                    message: super::openai::refusal_message(&message),
                    n_ctx: refusal.n_ctx,
                    prompt_tokens: refusal.prompt_tokens,
                });
            }
            if status.as_u16() == 404 && message.contains("not found") {
                return Err(crate::llm::embed::ollama::model_not_pulled(&self.config.url, &self.config.model));
            }
            return Err(LlmError::Status {
                server: Server::Ollama,
                url: self.config.url.clone(),
                status: status.as_u16(),
                body: message,
            });
        }

        let mut lines = LineReader::new(response, self.config.timeout);
        let mut answer = ChatResponse::default();
        loop {
            let line = match lines.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => {
                    return Err(LlmError::StreamIncomplete {
                        backend: self.id.clone(),
                        detail: format!("no line with \"done\": true after {} characters", answer.text.len()),
                    });
                }
                Err(ReadError::Idle) => return Err(self.timeout_error()),
                Err(ReadError::Broken(detail)) => {
                    return Err(LlmError::StreamIncomplete { backend: self.id.clone(), detail });
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            let chunk: ChatChunk = serde_json::from_str(&line).map_err(|err| LlmError::BadResponse {
                backend: self.id.clone(),
                detail: format!("/api/chat streamed a line that does not parse ({err}): {}", clip(&line)),
            })?;
            if let Some(message) = chunk.error {
                return Err(LlmError::Generation { backend: self.id.clone(), message });
            }
            if let Some(message) = chunk.message
                && !message.content.is_empty()
            {
                *streamed = true;
                if let Some(sink) = on_token {
                    sink(&message.content);
                }
                answer.text.push_str(&message.content);
            }
            if chunk.done {
                answer.prompt_tokens = chunk.prompt_eval_count;
                answer.completion_tokens = chunk.eval_count;
                if chunk.done_reason.as_deref() == Some("length") {
                    warn!(backend = %self.id, max_tokens = body.options.num_predict, "the answer stopped at max_tokens");
                }
                return Ok(answer);
            }
        }
    }
}

/// `/api/show`'s `model_info["<arch>.context_length"]` (the architecture varies: `qwen2.`,
/// `llama.`, `gemma3.`…).
fn show_context_length(show: &serde_json::Value) -> Option<usize> {
    let info = show["model_info"].as_object()?;
    info.iter()
        .find(|(key, _)| key.ends_with(".context_length"))
        .and_then(|(_, value)| value.as_u64())
        .map(|n| n as usize)
        .filter(|n| *n > 0)
}

/// A line short enough for an error message.
pub(super) fn clip(line: &str) -> String {
    crate::corpus::text::shorten(line, 200)
}

#[async_trait]
impl ChatModel for OllamaChat {
    fn id(&self) -> &str {
        &self.id
    }

    fn context_window(&self) -> usize {
        self.window.tokens()
    }

    async fn window(&self) -> ContextWindow {
        self.window.get_or_learn(self.discover_window()).await
    }

    /// Ollama's refusal names the `num_ctx` this request asked for, not the model's window:
    /// the window stays what `/api/show` said, and the refused prompt's own count is what
    /// the next plan shrinks by.
    async fn refresh_window(&self, _refusal: &LlmError) -> ContextWindow {
        self.window().await
    }

    /// Ollama does not expose the model's tokeniser: an estimate that errs high.
    fn count_tokens(&self, text: &str) -> usize {
        estimate_tokens(text)
    }

    async fn chat(&self, request: &ChatRequest, on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
        self.window().await;
        let num_ctx = self.num_ctx_for(request);
        let span = chat_span(&self.id, request);
        span.record("num_ctx", num_ctx);
        async {
            let body = ChatBody {
                model: &self.config.model,
                messages: &request.messages,
                stream: true,
                format: request.json_schema.as_ref(),
                options: ChatOptions { num_ctx, num_predict: request.max_tokens, temperature: request.temperature },
                keep_alive: &self.config.keep_alive,
                truncate: false,
            };
            let answer = crate::llm::with_retries("Ollama chat", self.config.retries, || async {
                let mut streamed = false;
                self.chat_once(&body, on_token, &mut streamed).await.map_err(|err| (err, !streamed))
            })
            .await?;
            debug!(prompt_tokens = answer.prompt_tokens, completion_tokens = answer.completion_tokens, "generated");
            Ok(answer)
        }
        .instrument(span)
        .await
    }
}
