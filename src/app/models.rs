//! The models the configuration names, connected: the only place that picks a backend
//! (the stages receive trait objects and never ask which one they hold).

use std::sync::Arc;

use crate::llm::chat::ChatModel;
use crate::llm::{Embedder, LlmError};

/// Builds the embedder the configuration names. The only place that picks a backend:
/// stages receive a `&dyn Embedder` and never ask which one it is.
pub async fn connect_embedder(
    config: &crate::config::EmbedderConfig,
    data_dir: &std::path::Path,
) -> Result<Arc<dyn Embedder>, LlmError> {
    use crate::config::EmbedderConfig;
    match config {
        EmbedderConfig::Embedded { model_path, .. } => {
            let path = model_path.clone().unwrap_or_else(|| crate::llm::embed::e5::E5Embedder::default_path(data_dir));
            Ok(Arc::new(crate::llm::embed::e5::E5Embedder::load(&path)?))
        }
        EmbedderConfig::Ollama(ollama_config) => {
            Ok(Arc::new(crate::llm::embed::ollama::OllamaEmbedder::connect(ollama_config.clone()).await?))
        }
    }
}

/// Builds the chat model the configuration names, loading the embedded model when that is
/// the one (seconds, on a blocking thread). Stages receive an `Arc<dyn ChatModel>` and never
/// ask which backend it is.
pub async fn connect_chat(
    config: &crate::config::ChatConfig,
    data_dir: &std::path::Path,
) -> Result<Arc<dyn ChatModel>, LlmError> {
    use crate::config::ChatConfig;
    match config {
        ChatConfig::Embedded { gguf, threads, n_ctx } => {
            let gguf =
                gguf.clone().unwrap_or_else(|| crate::llm::chat::llama_cpp::LlamaCppChat::default_path(data_dir));
            let config = crate::llm::chat::llama_cpp::LlamaCppConfig { gguf, threads: *threads, n_ctx: *n_ctx };
            let speed_file = crate::llm::chat::llama_cpp::LlamaCppChat::speed_path(data_dir, &config);
            let model = tokio::task::spawn_blocking(move || crate::llm::chat::llama_cpp::LlamaCppChat::load(&config))
                .await
                .map_err(|err| LlmError::Worker(format!("loading the chat model: {err}")))??;
            Ok(Arc::new(model.remember_speed_in(speed_file)))
        }
        ChatConfig::Ollama(ollama_config) => {
            Ok(Arc::new(crate::llm::chat::ollama::OllamaChat::new(ollama_config.clone())?))
        }
        ChatConfig::OpenAi(openai_config) => {
            Ok(Arc::new(crate::llm::chat::openai::OpenAiChat::new(openai_config.clone())?))
        }
    }
}
