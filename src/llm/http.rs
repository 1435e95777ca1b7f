//! What the HTTP backends share: the client, a request error's cause spelled out, and reading
//! a streamed body line by line (Ollama's NDJSON, the OpenAI server-sent events) with a limit
//! on how long the server may stay silent.

use std::time::Duration;

use super::{LlmError, Server};

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
pub(super) fn client(
    server: Server,
    url: &str,
    timeout: Duration,
    whole_request: bool,
) -> Result<reqwest::Client, LlmError> {
    let mut builder = reqwest::Client::builder().connect_timeout(timeout).pool_idle_timeout(POOL_IDLE);
    if whole_request {
        builder = builder.timeout(timeout);
    }
    builder.build().map_err(|err| LlmError::Unreachable { server, url: url.to_string(), detail: describe(&err) })
}

/// Why a streamed body stopped before its end.
#[derive(Debug)]
pub(super) enum ReadError {
    /// Nothing arrived for the idle timeout.
    Idle,
    /// The connection broke (reset, bad chunked encoding…); the cause, spelled out.
    Broken(String),
}

/// A streamed response body, cut into lines as the bytes arrive.
pub(super) struct LineReader {
    response: reqwest::Response,
    buffer: Vec<u8>,
    idle_timeout: Duration,
    finished: bool,
}

impl LineReader {
    pub(super) fn new(response: reqwest::Response, idle_timeout: Duration) -> LineReader {
        LineReader { response, buffer: Vec::new(), idle_timeout, finished: false }
    }

    /// The next line without its `\n` (or `\r\n`), `None` once the body is over. Bytes are
    /// split only at `\n`, which never occurs inside a multi-byte UTF-8 character.
    pub(super) async fn next_line(&mut self) -> Result<Option<String>, ReadError> {
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
            match tokio::time::timeout(self.idle_timeout, self.response.chunk()).await {
                Err(_) => return Err(ReadError::Idle),
                Ok(Err(err)) => return Err(ReadError::Broken(describe(&err))),
                Ok(Ok(None)) => self.finished = true,
                Ok(Ok(Some(bytes))) => self.buffer.extend_from_slice(&bytes),
            }
        }
    }
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

/// The context window to ask for: the prompt plus the answer budget, rounded up to a
/// multiple of `granularity` (so near-equal prompts share one size), never above `cap`.
pub(super) fn context_for(prompt_tokens: usize, max_tokens: usize, granularity: usize, cap: usize) -> usize {
    let needed = prompt_tokens + max_tokens;
    needed.div_ceil(granularity).max(1).saturating_mul(granularity).min(cap)
}

#[cfg(test)]
mod tests {
    use super::context_for;

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
