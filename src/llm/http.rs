//! The one HTTP edge of the model servers: what the Ollama and OpenAI-compatible backends
//! (chat and embeddings) share. An [`Edge`] sends a request with a limit on silence, maps an
//! error status to the error it means (a refusal for length, a key refused, a model not
//! pulled), reads a streamed body line by line (Ollama's NDJSON, the OpenAI server-sent
//! events) and asks a server's metadata routes. Backends import from here, never from each
//! other (`tests/it/architecture.rs`).

use std::time::Duration;

use tracing::debug;

use super::{LlmError, ModelServer, Server};

/// The longest a question about a model's metadata (Ollama's `/api/show`, llama-server's
/// `/props`, `/v1/models`) may take: a server slower than this to say its window is planned
/// for with the default instead.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest server line an error message quotes, in characters.
const CLIPPED_LINE_CHARS: usize = 200;

/// How long a kept connection to a model server may sit idle before the client drops it.
/// Local servers close idle connections early (llama.cpp's llama-server, through cpp-httplib,
/// after 5 s), and a request sent on a connection the server is closing fails with
/// "connection closed before message completed" (seen once in `check-real-server.sh`, on the
/// entity extraction after the annotations). Reconnecting costs a millisecond on 127.0.0.1;
/// a request costs seconds.
pub(super) const POOL_IDLE: Duration = Duration::from_secs(4);

/// The HTTP client every server backend uses: `timeout` to reach `server` at `url` (and, when
/// `whole_request`, for each request as a whole: the embedder's, which does not stream), idle
/// connections dropped before the server drops them. A client that cannot be built (no TLS
/// backend) is reported as the server unreachable.
fn client(server: Server, url: &str, timeout: Duration, whole_request: bool) -> Result<reqwest::Client, LlmError> {
    let mut builder = reqwest::Client::builder().connect_timeout(timeout).pool_idle_timeout(POOL_IDLE);
    if whole_request {
        builder = builder.timeout(timeout);
    }
    builder.build().map_err(|err| LlmError::Unreachable { server, url: url.to_string(), detail: describe(&err) })
}

/// A model server as one backend reaches it: the client, where the server is, the model asked
/// for, how long the server may stay silent, and the id errors name.
pub(super) struct Edge {
    server: Server,
    url: String,
    model: String,
    id: String,
    timeout: Duration,
    client: reqwest::Client,
}

impl std::fmt::Debug for Edge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edge").field("id", &self.id).field("url", &self.url).finish()
    }
}

impl Edge {
    /// The edge to a `server` of this kind `at` its address, for its model: the timeout to
    /// connect and for each silence (and, when `whole_request`, for each request as a whole:
    /// the embedder's, which does not stream). Nothing is sent.
    pub(super) fn new(server: Server, at: &ModelServer, whole_request: bool) -> Result<Edge, LlmError> {
        Ok(Edge {
            server,
            url: at.url.clone(),
            model: at.model.clone(),
            id: format!("{}:{}", server.backend_prefix(), at.model),
            timeout: at.timeout,
            client: client(server, &at.url, at.timeout, whole_request)?,
        })
    }

    /// The backend's id (`ollama:qwen2.5:14b`, `openai:smollm`), as errors and spans name it.
    pub(super) fn id(&self) -> &str {
        &self.id
    }

    pub(super) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The server stayed silent longer than the timeout: the setting that raises it.
    pub(super) fn timeout_error(&self) -> LlmError {
        LlmError::Timeout {
            server: self.server,
            url: self.url.clone(),
            seconds: self.timeout.as_secs(),
            setting: self.server.timeout_setting().into(),
        }
    }

    /// A request that failed before its body was read: out of time, or the server not reached.
    pub(super) fn request_error(&self, err: &reqwest::Error) -> LlmError {
        if err.is_timeout() {
            self.timeout_error()
        } else {
            LlmError::Unreachable { server: self.server, url: self.url.clone(), detail: describe(err) }
        }
    }

    /// A reply this backend cannot use.
    pub(super) fn bad_response(&self, detail: String) -> LlmError {
        LlmError::BadResponse { backend: self.id.clone(), detail }
    }

    /// A streamed answer cut before its end.
    pub(super) fn incomplete(&self, detail: String) -> LlmError {
        LlmError::StreamIncomplete { backend: self.id.clone(), detail }
    }

    /// Sends `request` within the timeout; an error status comes back as the error it means
    /// ([`Edge::refused`]), its body read within the timeout too.
    pub(super) async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, LlmError> {
        let response = match tokio::time::timeout(self.timeout, request.send()).await {
            Err(_) => return Err(self.timeout_error()),
            Ok(Err(err)) => return Err(self.request_error(&err)),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = match tokio::time::timeout(self.timeout, response.text()).await {
            Ok(Ok(body)) => body,
            _ => String::new(),
        };
        Err(self.refused(status.as_u16(), &body))
    }

    /// What an error status means, whichever server sent it: a prompt refused for length
    /// (in any server's wording, [`context_refusal`]), a key refused (OpenAI-compatible), a
    /// model the server does not have (with the command or setting that fixes it), else the
    /// status and the body's own words.
    pub(super) fn refused(&self, status: u16, body: &str) -> LlmError {
        let message = error_message(body);
        if (400..500).contains(&status)
            && let Some(refusal) = refusal_in(body, &message)
        {
            return LlmError::ContextExceeded {
                backend: self.id.clone(),
                // Ollama wraps llama.cpp's error JSON in its own `error` string.
                message: error_message(&message),
                n_ctx: refusal.n_ctx,
                prompt_tokens: refusal.prompt_tokens,
            };
        }
        let server = self.server;
        let url = self.url.clone();
        match (server, status) {
            (Server::OpenAi, 401 | 403) => LlmError::Unauthorized { server, url, status },
            (Server::Ollama, 404) if message.contains("not found") => {
                self.model_missing(format!("run `ollama pull {}`", self.model))
            }
            (Server::OpenAi, 404) if message.to_lowercase().contains("model") => {
                self.model_missing(format!("{message}. Check chat.model"))
            }
            _ => LlmError::Status { server, url, status, body: message },
        }
    }

    fn model_missing(&self, fix: String) -> LlmError {
        LlmError::ModelMissing { server: self.server, url: self.url.clone(), model: self.model.clone(), fix }
    }

    /// The lines of a streamed `response`, each within the timeout.
    pub(super) fn lines(&self, response: reqwest::Response) -> Lines<'_> {
        Lines { edge: self, response, buffer: Vec::new(), finished: false }
    }

    /// A metadata route's JSON (`request` built on [`Edge::client`]), within
    /// [`METADATA_TIMEOUT`]; `None` (logged) when the server has no such route, fails or is
    /// slow: a window nobody says is not an error.
    pub(super) async fn metadata(&self, request: reqwest::RequestBuilder) -> Option<serde_json::Value> {
        let fetch = async {
            let response = request.send().await.map_err(|err| describe(&err))?;
            if !response.status().is_success() {
                return Err(format!("status {}", response.status().as_u16()));
            }
            let url = response.url().to_string();
            response.json::<serde_json::Value>().await.map(|value| (url, value)).map_err(|err| describe(&err))
        };
        match tokio::time::timeout(METADATA_TIMEOUT.min(self.timeout), fetch).await {
            Ok(Ok((url, value))) => {
                debug!(backend = %self.id, %url, "metadata read");
                Some(value)
            }
            Ok(Err(detail)) => {
                debug!(backend = %self.id, %detail, "no metadata from this route");
                None
            }
            Err(_) => {
                debug!(backend = %self.id, "no metadata from this route: timed out");
                None
            }
        }
    }
}

/// A streamed response body, cut into lines as the bytes arrive.
pub(super) struct Lines<'e> {
    edge: &'e Edge,
    response: reqwest::Response,
    buffer: Vec<u8>,
    finished: bool,
}

impl Lines<'_> {
    /// The next line without its `\n` (or `\r\n`), `None` once the body is over. Bytes are
    /// split only at `\n`, which never occurs inside a multi-byte UTF-8 character. A server
    /// silent for the timeout is [`LlmError::Timeout`]; a broken connection,
    /// [`LlmError::StreamIncomplete`].
    pub(super) async fn next_line(&mut self) -> Result<Option<String>, LlmError> {
        loop {
            if let Some(newline) = self.buffer.iter().position(|&byte| byte == b'\n') {
                let mut line: Vec<u8> = self.buffer.drain(..=newline).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(Some(String::from_utf8_lossy(&line).into_owned()));
            }
            if self.finished {
                if self.buffer.is_empty() {
                    return Ok(None);
                }
                let rest = std::mem::take(&mut self.buffer);
                return Ok(Some(String::from_utf8_lossy(&rest).into_owned()));
            }
            match tokio::time::timeout(self.edge.timeout, self.response.chunk()).await {
                Err(_) => return Err(self.edge.timeout_error()),
                Ok(Err(err)) => return Err(self.edge.incomplete(describe(&err))),
                Ok(Ok(None)) => self.finished = true,
                Ok(Ok(Some(bytes))) => self.buffer.extend_from_slice(&bytes),
            }
        }
    }
}

/// A refusal for length in an error `body` or in its `message` (Ollama wraps llama.cpp's error
/// JSON in a string): the numbers either one carries.
fn refusal_in(body: &str, message: &str) -> Option<Refusal> {
    match (context_refusal(body), context_refusal(message)) {
        (Some(outer), Some(inner)) => Some(Refusal {
            n_ctx: outer.n_ctx.or(inner.n_ctx),
            prompt_tokens: outer.prompt_tokens.or(inner.prompt_tokens),
        }),
        (outer, inner) => outer.or(inner),
    }
}

/// A server's line short enough for an error message.
pub(super) fn clip(line: &str) -> String {
    crate::text::shorten(line, CLIPPED_LINE_CHARS)
}

/// reqwest's Display hides the cause ("error sending request"); the chain says "connection refused".
pub(super) fn describe(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The human part of an error body: `{"error": {"message": …}}`, `{"error": "…"}`, or the
/// body itself.
pub(super) fn error_message(body: &str) -> String {
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
pub(super) struct Refusal {
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
pub(super) fn context_refusal(body: &str) -> Option<Refusal> {
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

/// The number right after `marker` in `text` (`"size (8192 tokens"`, marker `"size ("` → 8192).
fn number_after(text: &str, marker: &str) -> Option<usize> {
    let start = text.find(marker)? + marker.len();
    let digits: String = text[start..].chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok().filter(|n| *n > 0)
}

/// The context window to ask for: the prompt plus the answer budget, rounded up to a
/// multiple of `granularity` (so near-equal prompts share one size), never above `cap`.
pub(super) fn context_for(prompt_tokens: usize, max_tokens: usize, granularity: usize, cap: usize) -> usize {
    let needed = prompt_tokens + max_tokens;
    needed.div_ceil(granularity).max(1).saturating_mul(granularity).min(cap)
}

#[cfg(test)]
mod tests {
    use super::{context_for, context_refusal, error_message};

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
    fn context_rounds_up_to_the_granularity_and_stops_at_the_cap() {
        assert_eq!(context_for(0, 0, 1024, 32768), 1024);
        assert_eq!(context_for(10, 500, 1024, 32768), 1024);
        assert_eq!(context_for(1000, 24, 1024, 32768), 1024);
        assert_eq!(context_for(1000, 25, 1024, 32768), 2048);
        assert_eq!(context_for(9000, 1024, 1024, 32768), 10240);
        assert_eq!(context_for(40000, 1024, 1024, 32768), 32768);
    }
}

/// The models an Ollama server at `url` has pulled (`GET /api/tags`), waiting at most
/// `timeout`: what `oraculo doctor` checks the configured models against, and how `oraculo
/// init` tells whether an Ollama answers on this machine. The error says why in one line.
pub async fn ollama_pulled_models(url: &str, timeout: Duration) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct Tags {
        models: Vec<Tag>,
    }
    #[derive(serde::Deserialize)]
    struct Tag {
        name: String,
    }
    let client = reqwest::Client::builder().timeout(timeout).build().map_err(|err| err.to_string())?;
    let endpoint = format!("{}/api/tags", url.trim_end_matches('/'));
    let response = client.get(&endpoint).send().await.map_err(|err| err.to_string())?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("GET /api/tags answered {status}"));
    }
    let tags: Tags = response.json().await.map_err(|err| format!("GET /api/tags: {err}"))?;
    Ok(tags.models.into_iter().map(|tag| tag.name).collect())
}
