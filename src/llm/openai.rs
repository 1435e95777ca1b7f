//! Any OpenAI-compatible server over HTTP: `POST {base}/v1/chat/completions`, streamed as
//! server-sent events. For llama.cpp's `llama-server`, vLLM and LM Studio, and the way to
//! serve many guilds from a pool of GPUs.
//!
//! Structured output goes in `response_format` as a strict JSON schema. The API key, when
//! there is one, is sent as a bearer token and never printed (see [`ApiKey`]).

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tracing::{Instrument, debug, info_span, warn};

use super::LlmError;
use super::chat::{ChatMessage, ChatModel, ChatRequest, ChatResponse, TokenSink, estimate_tokens};
use super::http::{LineReader, ReadError};
use super::ollama::describe;
use super::ollama_chat::clip;

/// First wait before retrying a failed call; doubled on each retry.
const RETRY_BASE_DELAY: Duration = Duration::from_millis(500);
/// The name the schema is given in `response_format` (servers require one).
const SCHEMA_NAME: &str = "answer";

/// A bearer token. Its `Debug` prints nothing of it, so configs and clients can be logged.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// The key itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

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
    /// The context window the server runs the model with, in tokens.
    pub context_window: usize,
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
        let client = reqwest::Client::builder()
            .connect_timeout(config.timeout)
            .build()
            .map_err(|err| LlmError::ServerUnreachable { url: config.url.clone(), detail: describe(&err) })?;
        Ok(OpenAiChat { id: format!("openai:{}", config.model), config, client })
    }

    fn endpoint(&self) -> String {
        let base = self.config.url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        format!("{base}/v1/chat/completions")
    }

    fn timeout_error(&self) -> LlmError {
        LlmError::ServerTimeout {
            backend: "the OpenAI-compatible server".into(),
            url: self.config.url.clone(),
            seconds: self.config.timeout.as_secs(),
            setting: "chat.timeout_secs".into(),
        }
    }

    fn incomplete(&self, detail: String) -> LlmError {
        LlmError::StreamIncomplete { backend: self.id.clone(), detail }
    }

    async fn chat_once(
        &self,
        body: &CompletionBody<'_>,
        on_token: Option<TokenSink<'_>>,
        streamed: &mut bool,
    ) -> Result<ChatResponse, LlmError> {
        let mut builder = self.client.post(self.endpoint()).json(body);
        if let Some(key) = &self.config.api_key {
            // reqwest marks a bearer header sensitive: it never shows in its Debug output.
            builder = builder.bearer_auth(key.expose());
        }
        let response = match tokio::time::timeout(self.config.timeout, builder.send()).await {
            Err(_) => return Err(self.timeout_error()),
            Ok(Err(err)) if err.is_timeout() => return Err(self.timeout_error()),
            Ok(Err(err)) => {
                return Err(LlmError::ServerUnreachable { url: self.config.url.clone(), detail: describe(&err) });
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
            return Err(match status {
                401 | 403 => LlmError::Unauthorized { url: self.config.url.clone(), status },
                404 if message.to_lowercase().contains("model") => LlmError::ModelNotServed {
                    url: self.config.url.clone(),
                    model: self.config.model.clone(),
                    body: message,
                },
                _ => LlmError::ServerStatus {
                    backend: "the OpenAI-compatible server".into(),
                    url: self.config.url.clone(),
                    status,
                    body: message,
                },
            });
        }

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
            warn!(backend = %self.id, max_tokens = body.max_tokens, "the answer stopped at max_tokens");
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

#[async_trait]
impl ChatModel for OpenAiChat {
    fn id(&self) -> &str {
        &self.id
    }

    fn context_window(&self) -> usize {
        self.config.context_window
    }

    /// The server's tokeniser is not reachable from here: an estimate that errs high.
    fn count_tokens(&self, text: &str) -> usize {
        estimate_tokens(text)
    }

    async fn chat(&self, request: &ChatRequest, on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
        let span = info_span!(
            "llm.chat",
            backend = %self.id,
            n_messages = request.messages.len(),
            max_tokens = request.max_tokens,
            json = request.json_schema.is_some()
        );
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
            let mut attempt = 0;
            loop {
                let mut streamed = false;
                match self.chat_once(&body, on_token, &mut streamed).await {
                    Ok(answer) => {
                        debug!(
                            prompt_tokens = answer.prompt_tokens,
                            completion_tokens = answer.completion_tokens,
                            "generated"
                        );
                        return Ok(answer);
                    }
                    // Once text reached the caller a retry would repeat it: only fresh failures retry.
                    Err(err) if !streamed && attempt < self.config.retries && is_transient(&err) => {
                        let delay = RETRY_BASE_DELAY * 2u32.pow(attempt);
                        warn!(error = %err, attempt, delay_ms = delay.as_millis() as u64, "retrying chat completion");
                        tokio::time::sleep(delay).await;
                        attempt += 1;
                    }
                    Err(err) => return Err(err),
                }
            }
        }
        .instrument(span)
        .await
    }
}

fn is_transient(err: &LlmError) -> bool {
    match err {
        LlmError::ServerUnreachable { .. } | LlmError::ServerTimeout { .. } | LlmError::StreamIncomplete { .. } => true,
        LlmError::ServerStatus { status, .. } => *status >= 500,
        _ => false,
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
            api_key: Some(ApiKey::new("sk-very-secret")),
            timeout: Duration::from_secs(1),
            retries: 0,
            context_window: 4096,
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
    fn a_base_url_with_or_without_v1_reaches_the_same_endpoint() {
        for url in ["http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/"] {
            let chat = OpenAiChat::new(OpenAiChatConfig {
                url: url.into(),
                model: "m".into(),
                api_key: None,
                timeout: Duration::from_secs(1),
                retries: 0,
                context_window: 4096,
            })
            .unwrap();
            assert_eq!(chat.endpoint(), "http://h:1/v1/chat/completions");
        }
    }
}
