//! Ollama over HTTP: `POST /api/embed` for vectors (`bge-m3` by default).
//!
//! The wire types mirror Ollama's JSON exactly, so the test stand-in (a local HTTP server
//! speaking the same format) exercises this very code.

use async_trait::async_trait;
use serde::Deserialize;
use tracing::{Instrument, debug, info_span};

use crate::llm::http::Edge;
use crate::llm::{EmbedRole, Embedder, LlmError, ModelServer, Server, normalize};

/// bge-m3's input window is 8192 tokens; ~4000 words keeps a whole session (1200 words)
/// in one window with a wide margin for Spanish tokenisation.
const BGE_M3_WINDOW_WORDS: usize = 4000;

/// How to reach Ollama for embeddings. Built from `[ollama]` and `[embedder]` in config.
#[derive(Debug, Clone)]
pub struct OllamaEmbedderConfig {
    /// The server, the model and how long (each request, whole) and how often to try.
    pub server: ModelServer,
    /// Passages per request.
    pub batch_size: usize,
    /// Words per window; `None` picks from the model name (bge-m3: 4000, others: 250).
    pub window_words: Option<usize>,
}

#[derive(Deserialize)]
struct EmbedResponse {
    embeddings: Vec<Vec<f32>>,
}

/// Embeddings from a running Ollama server.
#[derive(Debug)]
pub struct OllamaEmbedder {
    config: OllamaEmbedderConfig,
    edge: Edge,
    dimension: usize,
    window_words: usize,
}

impl OllamaEmbedder {
    /// Connects and probes the model once, so a server that is down or a model that is
    /// not pulled is reported before any work starts, and the vector dimension is known.
    pub async fn connect(config: OllamaEmbedderConfig) -> Result<OllamaEmbedder, LlmError> {
        let edge = Edge::new(Server::Ollama, &config.server, true)?;
        let window_words = config
            .window_words
            .unwrap_or_else(|| if config.server.model.starts_with("bge-m3") { BGE_M3_WINDOW_WORDS } else { 250 });
        let mut embedder = OllamaEmbedder { config, edge, dimension: 0, window_words };
        let probe = embedder.post_embed(&["dimension probe".to_string()]).await?;
        embedder.dimension = probe.first().map(Vec::len).unwrap_or(0);
        if embedder.dimension == 0 {
            return Err(embedder.edge.bad_response("the probe returned an empty vector".into()));
        }
        Ok(embedder)
    }

    fn endpoint(&self) -> String {
        format!("{}/api/embed", self.config.server.url.trim_end_matches('/'))
    }

    async fn post_embed(&self, input: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        crate::llm::with_retries("Ollama embed", self.config.server.retries, || async {
            self.post_embed_once(input).await.map_err(|err| (err, true))
        })
        .await
    }

    async fn post_embed_once(&self, input: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        // The body of `POST /api/embed`; `truncate`: a window over the model's context is cut, not refused.
        let request = serde_json::json!({ "model": self.config.server.model, "input": input, "truncate": true });
        let response = self.edge.send(self.edge.client().post(self.endpoint()).json(&request)).await?;
        let body = response.text().await.map_err(|err| self.edge.request_error(&err))?;
        let parsed: EmbedResponse = serde_json::from_str(&body)
            .map_err(|err| self.edge.bad_response(format!("/api/embed body does not parse: {err}")))?;
        if parsed.embeddings.len() != input.len() {
            let detail = format!("asked for {} embeddings, got {}", input.len(), parsed.embeddings.len());
            return Err(self.edge.bad_response(detail));
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
        self.edge.id()
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn window_words(&self) -> usize {
        self.window_words
    }

    async fn embed(&self, texts: &[String], _role: EmbedRole) -> Result<Vec<Vec<f32>>, LlmError> {
        let span = info_span!("llm.embed", backend = %self.edge.id(), n_texts = texts.len());
        async {
            let mut vectors = Vec::with_capacity(texts.len());
            for batch in texts.chunks(self.config.batch_size.max(1)) {
                let batch_vectors = self.post_embed(batch).await?;
                for vector in &batch_vectors {
                    if vector.len() != self.dimension {
                        let detail = format!("vector of {} dimensions, expected {}", vector.len(), self.dimension);
                        return Err(self.edge.bad_response(detail));
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
