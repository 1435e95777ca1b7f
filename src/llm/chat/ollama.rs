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

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use super::served::{Delivery, Link, Served};
use super::{ChatMessage, ChatModel, ChatRequest, ContextWindow, WindowSource};
use crate::llm::http::{Edge, clip, context_for};
use crate::llm::{LlmError, ModelServer, Server};

/// `num_ctx` is rounded up to a multiple of this, so prompts of similar size ask for the
/// same window (Ollama reloads the model when `num_ctx` changes).
pub const NUM_CTX_GRANULARITY: usize = 1024;

/// How to reach an Ollama server for chat. Built from `[ollama]` and `[chat]` in config.
#[derive(Debug, Clone)]
pub struct OllamaChatConfig {
    /// The server, the model and how long and how often to try.
    pub server: ModelServer,
    /// How long Ollama keeps the model loaded after a request (`"30m"`, `"-1"` for ever).
    pub keep_alive: String,
    /// `chat.n_ctx`: the largest `num_ctx` ever requested, in tokens, when set by hand.
    /// `None`: the model's context length (`/api/show`), at most
    /// [`crate::llm::chat::DEFAULT_SERVER_N_CTX`].
    pub n_ctx: Option<usize>,
}

/// The body of `POST /api/chat`.
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

/// Chat with a model served by Ollama.
#[derive(Debug)]
pub struct OllamaChat {
    config: OllamaChatConfig,
    link: Link,
}

impl OllamaChat {
    /// Builds the client. Nothing is sent: the first `chat` reports a server that is down
    /// or a model that is not pulled, with the command that fixes it.
    pub fn new(config: OllamaChatConfig) -> Result<OllamaChat, LlmError> {
        let edge = Edge::new(Server::Ollama, &config.server, false)?;
        Ok(OllamaChat { link: Link::new("Ollama chat", edge, config.n_ctx, config.server.retries), config })
    }

    /// The model's context length from `POST /api/show` (`model_info["<arch>.context_length"]`);
    /// `None` (logged) when Ollama does not say.
    async fn context_length_from_show(&self) -> Option<usize> {
        let url = format!("{}/api/show", self.config.server.url.trim_end_matches('/'));
        let show = self.link.edge.client().post(&url).json(&serde_json::json!({ "model": self.config.server.model }));
        show_context_length(&self.link.edge.metadata(show).await?)
    }

    fn endpoint(&self) -> String {
        format!("{}/api/chat", self.config.server.url.trim_end_matches('/'))
    }

    /// The `num_ctx` for `request`: its estimated prompt plus the answer budget, within the
    /// window known now.
    pub fn num_ctx_for(&self, request: &ChatRequest) -> usize {
        let prompt_tokens = self.count_message_tokens(&request.messages);
        context_for(prompt_tokens, request.max_tokens, NUM_CTX_GRANULARITY, self.context_window())
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

#[async_trait]
impl Served for OllamaChat {
    fn link(&self) -> &Link {
        &self.link
    }

    /// The model's context length from `POST /api/show`, capped at
    /// [`crate::llm::chat::DEFAULT_SERVER_N_CTX`].
    async fn window_from_server(&self) -> Option<ContextWindow> {
        let length = self.context_length_from_show().await?;
        let tokens = length.min(crate::llm::chat::DEFAULT_SERVER_N_CTX);
        info!(backend = %self.link.edge.id(), context_length = length, tokens, "context length from /api/show");
        Some(ContextWindow { tokens, source: WindowSource::OllamaShow })
    }

    /// Ollama's refusal names the `num_ctx` this request asked for, not the model's window:
    /// the window stays what `/api/show` said, and the refused prompt's own count is what
    /// the next plan shrinks by.
    async fn relearn_window(&self, _refusal: &LlmError) -> ContextWindow {
        self.window().await
    }

    /// `num_ctx` sized to this prompt (recorded on the chat's span), then the NDJSON lines
    /// read until `"done": true`. The refusal for length arrives as llama.cpp's error JSON
    /// inside Ollama's `error` string.
    async fn attempt(&self, request: &ChatRequest, out: &mut Delivery<'_>) -> Result<(), LlmError> {
        self.window().await;
        let num_ctx = self.num_ctx_for(request);
        tracing::Span::current().record("num_ctx", num_ctx);
        let body = ChatBody {
            model: &self.config.server.model,
            messages: &request.messages,
            stream: true,
            format: request.json_schema.as_ref(),
            options: ChatOptions { num_ctx, num_predict: request.max_tokens, temperature: request.temperature },
            keep_alive: &self.config.keep_alive,
            truncate: false,
        };
        let response = self.link.edge.send(self.link.edge.client().post(self.endpoint()).json(&body)).await?;
        let mut lines = self.link.edge.lines(response);
        loop {
            let Some(line) = lines.next_line().await? else {
                let detail = format!("no line with \"done\": true after {} characters", out.answer.text.len());
                return Err(self.link.edge.incomplete(detail));
            };
            if line.trim().is_empty() {
                continue;
            }
            let chunk: ChatChunk = serde_json::from_str(&line).map_err(|err| {
                self.link
                    .edge
                    .bad_response(format!("/api/chat streamed a line that does not parse ({err}): {}", clip(&line)))
            })?;
            if let Some(message) = chunk.error {
                return Err(LlmError::Generation { backend: self.link.edge.id().to_string(), message });
            }
            if let Some(message) = chunk.message {
                out.push(&message.content);
            }
            if chunk.done {
                out.answer.prompt_tokens = chunk.prompt_eval_count;
                out.answer.completion_tokens = chunk.eval_count;
                if chunk.done_reason.as_deref() == Some("length") {
                    warn!(backend = %self.link.edge.id(), max_tokens = request.max_tokens, "the answer stopped at max_tokens");
                }
                return Ok(());
            }
        }
    }
}
