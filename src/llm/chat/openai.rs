//! Any OpenAI-compatible server over HTTP: `POST {base}/v1/chat/completions`, streamed as
//! server-sent events. For llama.cpp's `llama-server`, vLLM and LM Studio, and the way to
//! serve many guilds from a pool of GPUs.
//!
//! Structured output goes in `response_format` as a strict JSON schema. The API key, when
//! there is one, is sent as a bearer token and never printed (see [`ApiKey`]).
//!
//! The context window is the server's: asked once per process (llama-server's `/props`, else
//! `/v1/models` metadata), unless `chat.n_ctx` sets it. A prompt the server refuses as too
//! long (llama-server's `exceed_context_size_error`, vLLM's and OpenAI's "maximum context
//! length") comes back as [`LlmError::ContextExceeded`] with the window the server reported,
//! which [`ChatModel::refresh_window`] then remembers.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tracing::warn;

use super::served::{Delivery, Link, Served};
use super::{ChatMessage, ChatModel, ChatRequest, ContextWindow, WindowSource};
use crate::llm::http::{Edge, clip, context_refusal, error_message};
use crate::llm::{LlmError, ModelServer, Server};

/// The name the schema is given in `response_format` (servers require one).
const SCHEMA_NAME: &str = "answer";

/// A bearer token: [`Redacted`](crate::redacted::Redacted), so configs and clients can be logged.
pub type ApiKey = crate::redacted::Redacted<String>;

/// How to reach an OpenAI-compatible server. Built from `[chat]` in config.
#[derive(Debug, Clone)]
pub struct OpenAiChatConfig {
    /// The server (its URL may end in `/v1`), the model and how long and how often to try.
    pub server: ModelServer,
    /// From `ORACULO_OPENAI_API_KEY` only; local servers usually need none.
    pub api_key: Option<ApiKey>,
    /// `chat.n_ctx`: the context window, in tokens, when set by hand (it wins over what
    /// the server says). `None`: the server is asked, else
    /// [`crate::llm::chat::DEFAULT_SERVER_N_CTX`].
    pub n_ctx: Option<usize>,
}

/// The body of `POST /v1/chat/completions`.
#[derive(Serialize)]
struct CompletionBody<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    stream: bool,
    stream_options: StreamOptions,
    max_tokens: usize,
    temperature: f32,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// One `data:` event of a streamed completion.
#[derive(Deserialize)]
struct CompletionChunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<usize>,
    #[serde(default)]
    completion_tokens: Option<usize>,
}

/// Chat with a model behind an OpenAI-compatible endpoint.
#[derive(Debug)]
pub struct OpenAiChat {
    config: OpenAiChatConfig,
    link: Link,
}

impl OpenAiChat {
    /// Builds the client. Nothing is sent until the first `chat`.
    pub fn new(config: OpenAiChatConfig) -> Result<OpenAiChat, LlmError> {
        let edge = Edge::new(Server::OpenAi, &config.server, false)?;
        Ok(OpenAiChat { link: Link::new("chat completion", edge, config.n_ctx, config.server.retries), config })
    }

    /// The server's root, without a trailing `/v1`.
    fn base(&self) -> &str {
        let base = self.config.server.url.trim_end_matches('/');
        base.strip_suffix("/v1").unwrap_or(base)
    }

    fn endpoint(&self) -> String {
        format!("{}/v1/chat/completions", self.base())
    }

    /// `request` with the API key as a bearer token, when there is one. reqwest marks a
    /// bearer header sensitive: it never shows in its Debug output.
    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.config.api_key {
            Some(key) => request.bearer_auth(key.expose()),
            None => request,
        }
    }

    /// The server-sent events of a completion, each piece of text delivered as it arrives,
    /// until `data: [DONE]` (or the body's end after a finish reason).
    async fn read_stream(
        &self,
        response: reqwest::Response,
        max_tokens: usize,
        out: &mut Delivery<'_>,
    ) -> Result<(), LlmError> {
        let mut lines = self.link.edge.lines(response);
        let mut finish_reason: Option<String> = None;
        loop {
            let Some(line) = lines.next_line().await? else {
                // Some servers close after the last choice without `[DONE]`: accept that
                // when a finish reason arrived, since the answer is then whole.
                if finish_reason.is_some() {
                    break;
                }
                let detail = format!("no `data: [DONE]` after {} characters", out.answer.text.len());
                return Err(self.link.edge.incomplete(detail));
            };
            // Server-sent events: `data:` carries the payload; comments (`:`), `event:`,
            // `id:` and blank separators carry nothing we need.
            let Some(data) = line.strip_prefix("data:") else { continue };
            let data = data.trim();
            if data == "[DONE]" {
                break;
            }
            if data.is_empty() {
                continue;
            }
            let chunk: CompletionChunk = serde_json::from_str(data).map_err(|err| {
                self.link.edge.bad_response(format!(
                    "/v1/chat/completions streamed an event that does not parse ({err}): {}",
                    clip(data)
                ))
            })?;
            if let Some(error) = chunk.error {
                let body = serde_json::json!({ "error": error }).to_string();
                if let Some(refusal) = context_refusal(&body) {
                    return Err(LlmError::ContextExceeded {
                        backend: self.link.edge.id().to_string(),
                        message: error_message(&body),
                        n_ctx: refusal.n_ctx,
                        prompt_tokens: refusal.prompt_tokens,
                    });
                }
                return Err(LlmError::Generation {
                    backend: self.link.edge.id().to_string(),
                    message: error_message(&error.to_string()),
                });
            }
            if let Some(usage) = chunk.usage {
                out.answer.prompt_tokens = usage.prompt_tokens.or(out.answer.prompt_tokens);
                out.answer.completion_tokens = usage.completion_tokens.or(out.answer.completion_tokens);
            }
            for choice in chunk.choices {
                if let Some(content) = choice.delta.and_then(|delta| delta.content) {
                    out.push(&content);
                }
                if choice.finish_reason.is_some() {
                    finish_reason = choice.finish_reason;
                }
            }
        }
        if finish_reason.as_deref() == Some("length") {
            warn!(backend = %self.link.edge.id(), max_tokens, "the answer stopped at max_tokens");
        }
        Ok(())
    }
}

/// llama-server's `/props`: `default_generation_settings.n_ctx`, the window of one slot
/// (0 in router mode, where no model is loaded: no answer).
fn props_window(props: &serde_json::Value) -> Option<usize> {
    props["default_generation_settings"]["n_ctx"].as_u64().map(|n| n as usize).filter(|n| *n > 0)
}

/// `/v1/models`: the entry for `model` (or the only one), with vLLM's `max_model_len`,
/// llama-server's `meta.n_ctx` (per slot), or a `context_length` / `max_context_length`.
fn models_window(models: &serde_json::Value, model: &str) -> Option<usize> {
    let entries = models["data"].as_array()?;
    let entry = entries.iter().find(|entry| entry["id"].as_str() == Some(model)).or(match entries.as_slice() {
        [only] => Some(only),
        _ => None,
    })?;
    [&entry["max_model_len"], &entry["meta"]["n_ctx"], &entry["context_length"], &entry["max_context_length"]]
        .into_iter()
        .find_map(|value| value.as_u64())
        .map(|n| n as usize)
        .filter(|n| *n > 0)
}

#[async_trait]
impl Served for OpenAiChat {
    fn link(&self) -> &Link {
        &self.link
    }

    /// What the server says its window is: llama-server's `/props`, else `/v1/models`.
    async fn window_from_server(&self) -> Option<ContextWindow> {
        let get = |path: &str| self.authorized(self.link.edge.client().get(format!("{}{path}", self.base())));
        if let Some(tokens) = self.link.edge.metadata(get("/props")).await.as_ref().and_then(props_window) {
            return Some(ContextWindow { tokens, source: WindowSource::ServerProps });
        }
        let models = self.link.edge.metadata(get("/v1/models")).await?;
        let tokens = models_window(&models, &self.config.server.model)?;
        Some(ContextWindow { tokens, source: WindowSource::ServerModels })
    }

    /// The window the refusal reported; else what the server says now, the configured
    /// `n_ctx` aside (it just proved wrong); else three quarters of the window that failed.
    async fn relearn_window(&self, refusal: &LlmError) -> ContextWindow {
        let failed = self.window().await;
        let window = match refusal {
            LlmError::ContextExceeded { n_ctx: Some(tokens), .. } => {
                ContextWindow { tokens: *tokens, source: WindowSource::Refusal }
            }
            _ => match self.window_from_server().await {
                Some(window) if window.tokens < failed.tokens => window,
                _ => ContextWindow { tokens: failed.tokens * 3 / 4, source: WindowSource::Refusal },
            },
        };
        warn!(backend = %self.link.edge.id(), from = failed.tokens, to = window.tokens, source = ?window.source, "the server refused the prompt as too long; window relearnt");
        self.link.windows.remember(window);
        window
    }

    /// The completion asked for (structured output as a strict JSON schema in
    /// `response_format`), then its server-sent events read.
    async fn attempt(&self, request: &ChatRequest, out: &mut Delivery<'_>) -> Result<(), LlmError> {
        let response_format = request.json_schema.as_ref().map(|schema| {
            serde_json::json!({
                "type": "json_schema",
                "json_schema": { "name": SCHEMA_NAME, "schema": schema, "strict": true },
            })
        });
        let body = CompletionBody {
            model: &self.config.server.model,
            messages: &request.messages,
            stream: true,
            stream_options: StreamOptions { include_usage: true },
            max_tokens: request.max_tokens,
            temperature: request.temperature,
            response_format,
        };
        let response =
            self.link.edge.send(self.authorized(self.link.edge.client().post(self.endpoint()).json(&body))).await?;
        self.read_stream(response, body.max_tokens, out).await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_api_key_never_shows_in_debug_output() {
        let config = OpenAiChatConfig {
            server: ModelServer {
                url: "http://127.0.0.1:8080".into(),
                model: "m".into(),
                timeout: Duration::from_secs(1),
                retries: 0,
            },
            api_key: Some(ApiKey::new("sk-very-secret".to_string())),
            n_ctx: Some(4096),
        };
        let chat = OpenAiChat::new(config.clone()).unwrap();
        for text in [format!("{config:?}"), format!("{chat:?}")] {
            assert!(!text.contains("sk-very-secret"), "{text}");
            assert!(text.contains("redacted"), "{text}");
        }
    }

    #[test]
    fn the_window_is_read_from_props_and_model_metadata() {
        let props = serde_json::json!({ "default_generation_settings": { "n_ctx": 8192 }, "total_slots": 1 });
        assert_eq!(props_window(&props), Some(8192));
        assert_eq!(props_window(&serde_json::json!({ "default_generation_settings": { "n_ctx": 0 } })), None);
        let llama = serde_json::json!({ "data": [{ "id": "smollm", "meta": { "n_ctx": 4096, "n_ctx_train": 8192 } }] });
        assert_eq!(models_window(&llama, "other-name"), Some(4096), "the only model is the served one");
        let vllm = serde_json::json!({ "data": [
            { "id": "a", "max_model_len": 32768 }, { "id": "b", "max_model_len": 8192 } ] });
        assert_eq!(models_window(&vllm, "b"), Some(8192));
        assert_eq!(models_window(&vllm, "c"), None, "several models, none named: no guess");
        assert_eq!(models_window(&serde_json::json!({ "data": [{ "id": "m" }] }), "m"), None);
    }

    #[test]
    fn a_base_url_with_or_without_v1_reaches_the_same_endpoint() {
        for url in ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/"] {
            let chat = OpenAiChat::new(OpenAiChatConfig {
                server: ModelServer { url: url.into(), model: "m".into(), timeout: Duration::from_secs(1), retries: 0 },
                api_key: None,
                n_ctx: Some(4096),
            })
            .unwrap();
            assert_eq!(chat.endpoint(), "http://h:1/v1/chat/completions");
        }
    }
}
