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

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tracing::{Instrument, debug, info, warn};

use super::ollama::clip;
use super::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, ContextWindow, TokenSink, WindowCache, WindowSource, chat_span,
    estimate_tokens,
};
use crate::llm::http::{LineReader, ReadError, describe};
use crate::llm::{LlmError, Server};

/// The name the schema is given in `response_format` (servers require one).
const SCHEMA_NAME: &str = "answer";
/// The longest a question about the window (`/props`, `/v1/models`) may take: a server that
/// is slower than this to say its window is planned for with the default instead.
const WINDOW_QUERY_TIMEOUT: Duration = Duration::from_secs(10);

/// A bearer token: a [`Secret`](crate::secret::Secret), so configs and clients can be logged.
pub type ApiKey = crate::secret::Secret<String>;

/// How to reach an OpenAI-compatible server. Built from `[chat]` in config.
#[derive(Debug, Clone)]
pub struct OpenAiChatConfig {
    /// Base URL, e.g. `http://127.0.0.1:8080` (a trailing `/v1` is accepted too).
    pub url: String,
    pub model: String,
    /// From `ORACULO_OPENAI_API_KEY` only; local servers usually need none.
    pub api_key: Option<ApiKey>,
    /// The longest the server may stay silent: before the first byte and between events.
    pub timeout: Duration,
    /// Extra attempts on connection errors, timeouts and 5xx, before anything streamed.
    pub retries: u32,
    /// `chat.n_ctx`: the context window, in tokens, when set by hand (it wins over what
    /// the server says). `None`: the server is asked, else
    /// [`crate::llm::chat::DEFAULT_SERVER_N_CTX`].
    pub n_ctx: Option<usize>,
}

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
pub struct OpenAiChat {
    config: OpenAiChatConfig,
    client: reqwest::Client,
    id: String,
    /// The window learnt from the server (or its refusal), once per process.
    window: WindowCache,
}

impl std::fmt::Debug for OpenAiChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiChat")
            .field("id", &self.id)
            .field("url", &self.config.url)
            .field("api_key", &self.config.api_key)
            .finish()
    }
}

impl OpenAiChat {
    /// Builds the client. Nothing is sent until the first `chat`.
    pub fn new(config: OpenAiChatConfig) -> Result<OpenAiChat, LlmError> {
        let client = crate::llm::http::client(Server::OpenAi, &config.url, config.timeout, false)?;
        let window = WindowCache::new(config.n_ctx);
        Ok(OpenAiChat { id: format!("openai:{}", config.model), config, client, window })
    }

    /// The server's root, without a trailing `/v1`.
    fn base(&self) -> &str {
        let base = self.config.url.trim_end_matches('/');
        base.strip_suffix("/v1").unwrap_or(base)
    }

    fn endpoint(&self) -> String {
        format!("{}/v1/chat/completions", self.base())
    }

    /// `GET {base}{path}` as JSON; `None` (logged) when the server has no such route or
    /// does not answer in time: a window nobody says is not an error.
    async fn get_json(&self, path: &str) -> Option<serde_json::Value> {
        let url = format!("{}{path}", self.base());
        let mut builder = self.client.get(&url);
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key.expose());
        }
        let fetch = async {
            let response = builder.send().await.map_err(|err| describe(&err))?;
            if !response.status().is_success() {
                return Err(format!("status {}", response.status().as_u16()));
            }
            response.json::<serde_json::Value>().await.map_err(|err| describe(&err))
        };
        match tokio::time::timeout(WINDOW_QUERY_TIMEOUT.min(self.config.timeout), fetch).await {
            Ok(Ok(value)) => Some(value),
            Ok(Err(detail)) => {
                debug!(%url, %detail, "no window from this route");
                None
            }
            Err(_) => {
                debug!(%url, "no window from this route: timed out");
                None
            }
        }
    }

    /// What the server says its window is: llama-server's `/props`, else `/v1/models`.
    async fn window_from_server(&self) -> Option<ContextWindow> {
        if let Some(tokens) = self.get_json("/props").await.as_ref().and_then(props_window) {
            return Some(ContextWindow { tokens, source: WindowSource::ServerProps });
        }
        let models = self.get_json("/v1/models").await?;
        let tokens = models_window(&models, &self.config.model)?;
        Some(ContextWindow { tokens, source: WindowSource::ServerModels })
    }

    /// The window as the configuration or the server says, else the default.
    async fn discover_window(&self) -> ContextWindow {
        if let Some(tokens) = self.config.n_ctx {
            return ContextWindow { tokens, source: WindowSource::Config };
        }
        match self.window_from_server().await {
            Some(window) => {
                info!(backend = %self.id, tokens = window.tokens, source = ?window.source, "context window learnt from the server");
                window
            }
            None => {
                warn!(
                    backend = %self.id,
                    tokens = crate::llm::chat::DEFAULT_SERVER_N_CTX,
                    "the server does not say its context window; planning for the default (set chat.n_ctx)"
                );
                ContextWindow { tokens: crate::llm::chat::DEFAULT_SERVER_N_CTX, source: WindowSource::Default }
            }
        }
    }

    fn timeout_error(&self) -> LlmError {
        LlmError::Timeout {
            server: Server::OpenAi,
            url: self.config.url.clone(),
            seconds: self.config.timeout.as_secs(),
            setting: "chat.timeout_secs".into(),
        }
    }

    fn incomplete(&self, detail: String) -> LlmError {
        LlmError::StreamIncomplete { backend: self.id.clone(), detail }
    }

    /// One attempt: the request sent, then its stream read. `streamed` turns true once text
    /// reached `on_token` (a retry would then repeat it).
    async fn chat_once(
        &self,
        body: &CompletionBody<'_>,
        on_token: Option<TokenSink<'_>>,
        streamed: &mut bool,
    ) -> Result<ChatResponse, LlmError> {
        let response = self.send(body).await?;
        self.read_stream(response, body.max_tokens, on_token, streamed).await
    }

    /// Posts the completion request; an error status comes back as the error it means (a
    /// refusal for length, a key refused, a model missing).
    async fn send(&self, body: &CompletionBody<'_>) -> Result<reqwest::Response, LlmError> {
        let mut builder = self.client.post(self.endpoint()).json(body);
        if let Some(key) = &self.config.api_key {
            // reqwest marks a bearer header sensitive: it never shows in its Debug output.
            builder = builder.bearer_auth(key.expose());
        }
        let response = match tokio::time::timeout(self.config.timeout, builder.send()).await {
            Err(_) => return Err(self.timeout_error()),
            Ok(Err(err)) if err.is_timeout() => return Err(self.timeout_error()),
            Ok(Err(err)) => {
                return Err(LlmError::Unreachable {
                    server: Server::OpenAi,
                    url: self.config.url.clone(),
                    detail: describe(&err),
                });
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        if !response.status().is_success() {
            let body = match tokio::time::timeout(self.config.timeout, response.text()).await {
                Ok(Ok(body)) => body,
                _ => String::new(),
            };
            let message = error_message(&body);
            if (400..500).contains(&status)
                && let Some(refusal) = context_refusal(&body)
            {
                return Err(LlmError::ContextExceeded {
                    backend: self.id.clone(),
                    message,
                    n_ctx: refusal.n_ctx,
                    prompt_tokens: refusal.prompt_tokens,
                });
            }
            return Err(match status {
                401 | 403 => LlmError::Unauthorized { server: Server::OpenAi, url: self.config.url.clone(), status },
                404 if message.to_lowercase().contains("model") => LlmError::ModelMissing {
                    server: Server::OpenAi,
                    url: self.config.url.clone(),
                    model: self.config.model.clone(),
                    fix: format!("{message}. Check chat.model"),
                },
                _ => LlmError::Status { server: Server::OpenAi, url: self.config.url.clone(), status, body: message },
            });
        }
        Ok(response)
    }

    /// The server-sent events of a completion, each piece of text passed to `on_token` as it
    /// arrives, until `data: [DONE]` (or the body's end after a finish reason).
    async fn read_stream(
        &self,
        response: reqwest::Response,
        max_tokens: usize,
        on_token: Option<TokenSink<'_>>,
        streamed: &mut bool,
    ) -> Result<ChatResponse, LlmError> {
        let mut lines = LineReader::new(response, self.config.timeout);
        let mut answer = ChatResponse::default();
        let mut finish_reason: Option<String> = None;
        loop {
            let line = match lines.next_line().await {
                Ok(Some(line)) => line,
                // Some servers close after the last choice without `[DONE]`: accept that
                // when a finish reason arrived, since the answer is then whole.
                Ok(None) if finish_reason.is_some() => break,
                Ok(None) => {
                    return Err(self.incomplete(format!("no `data: [DONE]` after {} characters", answer.text.len())));
                }
                Err(ReadError::Idle) => return Err(self.timeout_error()),
                Err(ReadError::Broken(detail)) => return Err(self.incomplete(detail)),
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
            let chunk: CompletionChunk = serde_json::from_str(data).map_err(|err| LlmError::BadResponse {
                backend: self.id.clone(),
                detail: format!("/v1/chat/completions streamed an event that does not parse ({err}): {}", clip(data)),
            })?;
            if let Some(error) = chunk.error {
                let body = serde_json::json!({ "error": error }).to_string();
                if let Some(refusal) = context_refusal(&body) {
                    return Err(LlmError::ContextExceeded {
                        backend: self.id.clone(),
                        message: error_message(&body),
                        n_ctx: refusal.n_ctx,
                        prompt_tokens: refusal.prompt_tokens,
                    });
                }
                return Err(LlmError::Generation {
                    backend: self.id.clone(),
                    message: error_message(&error.to_string()),
                });
            }
            if let Some(usage) = chunk.usage {
                answer.prompt_tokens = usage.prompt_tokens.or(answer.prompt_tokens);
                answer.completion_tokens = usage.completion_tokens.or(answer.completion_tokens);
            }
            for choice in chunk.choices {
                if let Some(content) = choice.delta.and_then(|delta| delta.content)
                    && !content.is_empty()
                {
                    *streamed = true;
                    if let Some(sink) = on_token {
                        sink(&content);
                    }
                    answer.text.push_str(&content);
                }
                if choice.finish_reason.is_some() {
                    finish_reason = choice.finish_reason;
                }
            }
        }
        if finish_reason.as_deref() == Some("length") {
            warn!(backend = %self.id, max_tokens, "the answer stopped at max_tokens");
        }
        Ok(answer)
    }
}

/// The human part of an error body: `{"error": {"message": …}}`, `{"error": "…"}`, or the
/// body itself.
fn error_message(body: &str) -> String {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else { return clip(body) };
    let error = value.get("error").unwrap_or(&value);
    match error {
        serde_json::Value::String(message) => message.clone(),
        _ => match error.get("message").and_then(|m| m.as_str()) {
            Some(message) => message.to_string(),
            None => clip(body),
        },
    }
}

/// What a "context exceeded" refusal said about the window and the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub n_ctx: Option<usize>,
    pub prompt_tokens: Option<usize>,
}

/// A refusal for length in an error body, in any of the wordings servers use, with the
/// numbers it carries:
/// - llama-server: `{"error": {"type": "exceed_context_size_error", "message": "request (N
///   tokens) exceeds the available context size (W tokens), try increasing it", "n_ctx": W,
///   "n_prompt_tokens": N}}`;
/// - OpenAI: `code: "context_length_exceeded"`, "This model's maximum context length is W
///   tokens. However, your messages resulted in N tokens…";
/// - vLLM: "This model's maximum context length is W tokens. However, you requested N tokens…"
///   (newer: "…and your request has N input tokens").
pub fn context_refusal(body: &str) -> Option<Refusal> {
    let value: serde_json::Value = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    let error = value.get("error").unwrap_or(&value);
    let message = match error {
        serde_json::Value::String(message) => message.clone(),
        _ => error.get("message").and_then(|m| m.as_str()).map(str::to_string).unwrap_or_else(|| body.to_string()),
    };
    let lower = message.to_lowercase();
    let typed = error.get("type").and_then(|t| t.as_str()) == Some("exceed_context_size_error")
        || error.get("code").and_then(|c| c.as_str()) == Some("context_length_exceeded");
    let worded = [
        "exceeds the available context size",
        "larger than the max context size",
        "maximum context length",
        "context size has been exceeded",
        "context length exceeded",
        "exceeds the context length",
        "input length exceeds",
    ]
    .iter()
    .any(|wording| lower.contains(wording));
    if !typed && !worded {
        return None;
    }
    let field = |name: &str| error.get(name).and_then(|n| n.as_u64()).map(|n| n as usize).filter(|n| *n > 0);
    let n_ctx = field("n_ctx").or_else(|| {
        ["available context size (", "max context size (", "maximum context length is "]
            .iter()
            .find_map(|marker| number_after(&lower, marker))
    });
    let prompt_tokens = field("n_prompt_tokens").or_else(|| {
        ["request (", "input (", "you requested ", "resulted in ", "your request has "]
            .iter()
            .find_map(|marker| number_after(&lower, marker))
    });
    Some(Refusal { n_ctx, prompt_tokens })
}

/// The human part of a refusal body (`error.message`), or the body itself.
pub fn refusal_message(body: &str) -> String {
    error_message(body)
}

/// The number right after `marker` in `text` (`"size (8192 tokens"`, marker `"size ("` → 8192).
fn number_after(text: &str, marker: &str) -> Option<usize> {
    let start = text.find(marker)? + marker.len();
    let digits: String = text[start..].chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok().filter(|n| *n > 0)
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
impl ChatModel for OpenAiChat {
    fn id(&self) -> &str {
        &self.id
    }

    fn context_window(&self) -> usize {
        self.window.tokens()
    }

    async fn window(&self) -> ContextWindow {
        self.window.get_or_learn(self.discover_window()).await
    }

    /// The window the refusal reported; else what the server says now, the configured
    /// `n_ctx` aside (it just proved wrong); else three quarters of the window that failed.
    async fn refresh_window(&self, refusal: &LlmError) -> ContextWindow {
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
        warn!(backend = %self.id, from = failed.tokens, to = window.tokens, source = ?window.source, "the server refused the prompt as too long; window relearnt");
        self.window.remember(window);
        window
    }

    /// The server's tokeniser is not reachable from here: an estimate that errs high.
    fn count_tokens(&self, text: &str) -> usize {
        estimate_tokens(text)
    }

    async fn chat(&self, request: &ChatRequest, on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
        let span = chat_span(&self.id, request);
        async {
            let response_format = request.json_schema.as_ref().map(|schema| {
                serde_json::json!({
                    "type": "json_schema",
                    "json_schema": { "name": SCHEMA_NAME, "schema": schema, "strict": true },
                })
            });
            let body = CompletionBody {
                model: &self.config.model,
                messages: &request.messages,
                stream: true,
                stream_options: StreamOptions { include_usage: true },
                max_tokens: request.max_tokens,
                temperature: request.temperature,
                response_format,
            };
            let answer = crate::llm::with_retries("chat completion", self.config.retries, || async {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_key_never_shows_in_debug_output() {
        let config = OpenAiChatConfig {
            url: "http://127.0.0.1:8080".into(),
            model: "m".into(),
            api_key: Some(ApiKey::new("sk-very-secret".to_string())),
            timeout: Duration::from_secs(1),
            retries: 0,
            n_ctx: Some(4096),
        };
        let chat = OpenAiChat::new(config.clone()).unwrap();
        for text in [format!("{config:?}"), format!("{chat:?}")] {
            assert!(!text.contains("sk-very-secret"), "{text}");
            assert!(text.contains("redacted"), "{text}");
        }
    }

    #[test]
    fn error_bodies_yield_their_message() {
        assert_eq!(error_message(r#"{"error":{"message":"no such model","type":"x"}}"#), "no such model");
        assert_eq!(error_message(r#"{"error":"loading"}"#), "loading");
        assert_eq!(error_message("404 page not found"), "404 page not found");
    }

    #[test]
    fn refusals_for_length_are_read_in_each_servers_wording() {
        // (body, n_ctx, prompt_tokens); None: not a refusal for length.
        let cases: &[(&str, Option<(Option<usize>, Option<usize>)>)] = &[
            (
                r#"{"error":{"code":400,"message":"request (10877 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":10877,"n_ctx":8192}}"#,
                Some((Some(8192), Some(10877))),
            ),
            (
                r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#,
                Some((None, None)),
            ),
            (
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 10877 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
                Some((Some(8192), Some(10877))),
            ),
            (
                r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
                Some((Some(4096), Some(5000))),
            ),
            (r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#, None),
            ("404 page not found", None),
        ];
        for (body, expected) in cases {
            let got = context_refusal(body).map(|r| (r.n_ctx, r.prompt_tokens));
            assert_eq!(got, *expected, "{body}");
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
                url: url.into(),
                model: "m".into(),
                api_key: None,
                timeout: Duration::from_secs(1),
                retries: 0,
                n_ctx: Some(4096),
            })
            .unwrap();
            assert_eq!(chat.endpoint(), "http://h:1/v1/chat/completions");
        }
    }
}
