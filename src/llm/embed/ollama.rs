//! Ollama over HTTP: `POST /api/embed` for vectors (`bge-m3` by default).
//!
//! The wire types mirror Ollama's JSON exactly, so the test stand-in (a local HTTP server
//! speaking the same format) exercises this very code.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tracing::{Instrument, debug, info_span};

use crate::llm::http::describe;
use crate::llm::{EmbedRole, Embedder, LlmError, Server, normalize};

/// bge-m3's input window is 8192 tokens; ~4000 words keeps a whole session (1200 words)
/// in one window with a wide margin for Spanish tokenisation.
const BGE_M3_WINDOW_WORDS: usize = 4000;

/// How to reach Ollama for embeddings. Built from `[ollama]` and `[embedder]` in config.
#[derive(Debug, Clone)]
pub struct OllamaEmbedderConfig {
    /// Base URL, e.g. `http://127.0.0.1:11434`.
    pub url: String,
    pub model: String,
    /// Per request.
    pub timeout: Duration,
    /// Extra attempts after the first on connection errors, timeouts and 5xx answers.
    pub retries: u32,
    /// Passages per request.
    pub batch_size: usize,
    /// Words per window; `None` picks from the model name (bge-m3: 4000, others: 250).
    pub window_words: Option<usize>,
}

#[derive(Serialize)]
struct EmbedRequest<'a> {
    model: &'a str,
    input: &'a [String],
    truncate: bool,
}

#[derive(Deserialize)]
struct EmbedResponse {
    embeddings: Vec<Vec<f32>>,
}

#[derive(Deserialize)]
struct ErrorResponse {
    error: String,
}

/// Embeddings from a running Ollama server.
pub struct OllamaEmbedder {
    config: OllamaEmbedderConfig,
    client: reqwest::Client,
    id: String,
    dimension: usize,
    window_words: usize,
}

impl std::fmt::Debug for OllamaEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OllamaEmbedder").field("id", &self.id).field("url", &self.config.url).finish()
    }
}

impl OllamaEmbedder {
    /// Connects and probes the model once, so a server that is down or a model that is
    /// not pulled is reported before any work starts, and the vector dimension is known.
    pub async fn connect(config: OllamaEmbedderConfig) -> Result<OllamaEmbedder, LlmError> {
        let client = crate::llm::http::client(Server::Ollama, &config.url, config.timeout, true)?;
        let window_words = config
            .window_words
            .unwrap_or_else(|| if config.model.starts_with("bge-m3") { BGE_M3_WINDOW_WORDS } else { 250 });
        let mut embedder =
            OllamaEmbedder { id: format!("ollama:{}", config.model), config, client, dimension: 0, window_words };
        let probe = embedder.post_embed(&["dimension probe".to_string()]).await?;
        embedder.dimension = probe.first().map(Vec::len).unwrap_or(0);
        if embedder.dimension == 0 {
            return Err(LlmError::BadResponse {
                backend: embedder.id.clone(),
                detail: "the probe returned an empty vector".into(),
            });
        }
        Ok(embedder)
    }

    fn endpoint(&self) -> String {
        format!("{}/api/embed", self.config.url.trim_end_matches('/'))
    }

    async fn post_embed(&self, input: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        crate::llm::with_retries("Ollama embed", self.config.retries, || async {
            self.post_embed_once(input).await.map_err(|err| (err, true))
        })
        .await
    }

    /// A request that failed before its body was read: out of time, or the server not reached.
    fn request_error(&self, err: &reqwest::Error) -> LlmError {
        let url = self.config.url.clone();
        if err.is_timeout() {
            let seconds = self.config.timeout.as_secs();
            LlmError::Timeout { server: Server::Ollama, url, seconds, setting: "ollama.timeout_secs".into() }
        } else {
            LlmError::Unreachable { server: Server::Ollama, url, detail: describe(err) }
        }
    }

    async fn post_embed_once(&self, input: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let url = self.endpoint();
        let request = EmbedRequest { model: &self.config.model, input, truncate: true };
        let response = self.client.post(&url).json(&request).send().await.map_err(|err| self.request_error(&err))?;
        let status = response.status();
        let body = response.text().await.map_err(|err| self.request_error(&err))?;
        if !status.is_success() {
            let message = serde_json::from_str::<ErrorResponse>(&body).map(|e| e.error).unwrap_or(body);
            if status.as_u16() == 404 && message.contains("not found") {
                return Err(model_not_pulled(&self.config.url, &self.config.model));
            }
            return Err(LlmError::Status {
                server: Server::Ollama,
                url: self.config.url.clone(),
                status: status.as_u16(),
                body: message,
            });
        }
        let parsed: EmbedResponse = serde_json::from_str(&body).map_err(|err| LlmError::BadResponse {
            backend: self.id.clone(),
            detail: format!("/api/embed body does not parse: {err}"),
        })?;
        if parsed.embeddings.len() != input.len() {
            return Err(LlmError::BadResponse {
                backend: self.id.clone(),
                detail: format!("asked for {} embeddings, got {}", input.len(), parsed.embeddings.len()),
            });
        }
        let mut vectors = parsed.embeddings;
        for vector in &mut vectors {
            normalize(vector);
        }
        Ok(vectors)
    }
}

#[async_trait]
impl Embedder for OllamaEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn window_words(&self) -> usize {
        self.window_words
    }

    async fn embed(&self, texts: &[String], _role: EmbedRole) -> Result<Vec<Vec<f32>>, LlmError> {
        let span = info_span!("llm.embed", backend = %self.id, n_texts = texts.len());
        async {
            let mut vectors = Vec::with_capacity(texts.len());
            for batch in texts.chunks(self.config.batch_size.max(1)) {
                let batch_vectors = self.post_embed(batch).await?;
                for vector in &batch_vectors {
                    if vector.len() != self.dimension {
                        return Err(LlmError::BadResponse {
                            backend: self.id.clone(),
                            detail: format!("vector of {} dimensions, expected {}", vector.len(), self.dimension),
                        });
                    }
                }
                vectors.extend(batch_vectors);
            }
            debug!(n_vectors = vectors.len(), "embedded");
            Ok(vectors)
        }
        .instrument(span)
        .await
    }
}

/// Ollama has no such model: the command that pulls it.
pub(in crate::llm) fn model_not_pulled(url: &str, model: &str) -> LlmError {
    LlmError::ModelMissing {
        server: Server::Ollama,
        url: url.to_string(),
        model: model.to_string(),
        fix: format!("run `ollama pull {model}`"),
    }
}
