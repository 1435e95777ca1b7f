//! The embedded embedder: multilingual-e5-small run in-process (see [`super::e5`]).
//! The default on a fresh machine: no server, one model file fetched by
//! `scripts/fetch-models.sh`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use tracing::{Instrument, info_span};

use super::e5::{E5Model, E5Prefix};
use super::{EmbedRole, Embedder, LlmError, NameFloor, SupportFloor};

/// e5-small reads at most 512 tokens. Spanish notes run ~1.6 XLM-R tokens per word once
/// Markdown punctuation counts, so 250 words (~400 tokens) fit with a margin.
pub const E5_WINDOW_WORDS: usize = 250;
/// e5-small's support floors, measured on the sample campaign (`eval/README.md`):
/// the 73 sentences of three 1.5B answer runs and 14 written by hand, each against 40-word
/// passages of the notes it cites. In the notes' language, every sentence of an answer that
/// held a key fact was at 0.854 or above; «Iria/Rook ganó el torneo de justas de Altamira»,
/// an unanswerable question, at 0.814 and 0.819; right paraphrases written by hand from 0.877.
/// The floor sits between, nearer the inventions, so a campaign whose prose differs keeps its
/// right sentences first. An English sentence over Spanish notes runs lower (right
/// translations from 0.824), so its floor is lower and catches only the farthest.
pub const E5_SUPPORT_FLOOR: SupportFloor = SupportFloor { same_language: 0.83, other_language: 0.80 };
/// e5-small's floor for a title named across languages, both embedded as queries.
/// Measured on the sample campaign's 15 article-led aliases against 108 "the …" phrases of
/// both banks' questions and 27 written by hand: right translations score 0.907 to 0.947
/// («the abbess» → «la Abadesa», «the cartographer» → «el cartógrafo»), each at least 0.054
/// above the next entity; every wrong pairing stays at or under 0.901 ("the heron" →
/// «el Heraldo», by spelling) and within 0.035 of the next. e5-small knows cognates, not
/// vocabulary: «the Weaver» reaches «La Tejedora» at 0.850 only, so it is not found.
pub const E5_NAME_FLOOR: NameFloor = NameFloor { least: 0.90, margin: 0.04 };
/// File name of the model inside `<data>/models/`.
pub const E5_MODEL_FILE: &str = "e5-small-q4.bin";

/// multilingual-e5-small, 4-bit, in this process.
pub struct E5Embedder {
    model: Arc<E5Model>,
    path: PathBuf,
}

impl std::fmt::Debug for E5Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5Embedder").field("path", &self.path).finish()
    }
}

impl E5Embedder {
    /// Loads the model file; a missing file names the command that fetches it.
    pub fn load(path: &Path) -> Result<E5Embedder, LlmError> {
        if !path.is_file() {
            return Err(LlmError::ModelFileMissing {
                path: path.display().to_string(),
                fix: "run `scripts/fetch-models.sh` (or set ORACULO_E5_MODEL)".into(),
            });
        }
        let _span = info_span!("llm.load", model = "e5-small").entered();
        let model = E5Model::load(path)
            .map_err(|source| LlmError::EmbeddedModel { path: path.display().to_string(), source })?;
        Ok(E5Embedder { model: Arc::new(model), path: path.to_path_buf() })
    }

    /// Where the model is looked for: `ORACULO_E5_MODEL`, else `<data_dir>/models/`.
    pub fn default_path(data_dir: &Path) -> PathBuf {
        match std::env::var_os("ORACULO_E5_MODEL") {
            Some(path) => PathBuf::from(path),
            None => data_dir.join("models").join(E5_MODEL_FILE),
        }
    }
}

#[async_trait]
impl Embedder for E5Embedder {
    fn id(&self) -> &str {
        "e5-small-q4"
    }

    fn dimension(&self) -> usize {
        self.model.dimension()
    }

    fn window_words(&self) -> usize {
        E5_WINDOW_WORDS
    }

    async fn embed(&self, texts: &[String], role: EmbedRole) -> Result<Vec<Vec<f32>>, LlmError> {
        let span = info_span!("llm.embed", backend = "e5-small-q4", n_texts = texts.len());
        let model = Arc::clone(&self.model);
        let texts = texts.to_vec();
        let prefix = match role {
            EmbedRole::Query => E5Prefix::Query,
            EmbedRole::Passage => E5Prefix::Passage,
        };
        // CPU-bound: off the async runtime so the bot keeps answering while it runs.
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            model.embed_batch(&refs, prefix)
        })
        .instrument(span)
        .await
        .map_err(|err| LlmError::Worker(err.to_string()))
    }

    fn support_floor(&self) -> Option<SupportFloor> {
        Some(E5_SUPPORT_FLOOR)
    }

    fn name_floor(&self) -> Option<NameFloor> {
        Some(E5_NAME_FLOOR)
    }
}
