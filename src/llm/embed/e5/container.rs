//! The `E5S1` container: the header, the vocabulary and its normalisation map, the tensor
//! directory, and the Q4_0 weights dequantised (the layout is in [`super`]'s docs).

use std::ops::RangeInclusive;
use std::path::Path;

use super::encoder::EncoderLayer;
use super::kernels::{FEW_TOKENS, LayerNorm, Linear, dequantize_q4};
use super::tokenizer::{NormalizationMap, Tokenizer};
use super::{BLOCK, E5Error, E5Model, Q4_BLOCK_BYTES, Shape};

/// The container version this module reads.
const CONTAINER_VERSION: u32 = 1;

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

/// The model in `bytes`, read from `path` (which every error names).
pub(super) fn parse_container(path: &Path, bytes: &[u8]) -> Result<E5Model, E5Error> {
    let mut reader = Reader { path, bytes, position: 0 };
    let Header { shape, vocab_rows, type_rows } = parse_header(&mut reader)?;
    let hidden = shape.hidden;

    let tokenizer = parse_tokenizer(&mut reader)?;
    if tokenizer.scores.len() > vocab_rows {
        return Err(malformed(
            path,
            format!("{} vocabulary pieces but only {vocab_rows} embedding rows", tokenizer.scores.len()),
        ));
    }
    let tensors = parse_directory(&mut reader)?;

    let word_embeddings_q4 = tensors.q4_raw("emb.word", vocab_rows * hidden)?.to_vec();
    let position_embeddings = tensors.f32("emb.pos", shape.max_positions * hidden)?;
    let mut token_type_embedding = tensors.f32("emb.type", type_rows * hidden)?;
    token_type_embedding.truncate(hidden);
    let embedding_norm = LayerNorm { weight: tensors.f32("emb.ln.w", hidden)?, bias: tensors.f32("emb.ln.b", hidden)? };
    let layers = (0..shape.n_layers).map(|layer| parse_layer(&tensors, layer, &shape)).collect::<Result<_, _>>()?;

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

/// What the header says beside the encoder's shape: the rows of the embedding tables.
struct Header {
    shape: Shape,
    vocab_rows: usize,
    type_rows: usize,
}

/// The magic, the version and the dimensions, checked against each other.
fn parse_header(reader: &mut Reader<'_>) -> Result<Header, E5Error> {
    let (path, bytes) = (reader.path, reader.bytes);
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
    Ok(Header { shape, vocab_rows, type_rows })
}

/// Encoder layer `layer`'s weights, the 4-bit ones dequantised.
fn parse_layer(tensors: &Tensors<'_>, layer: usize, shape: &Shape) -> Result<EncoderLayer, E5Error> {
    let (hidden, ffn) = (shape.hidden, shape.ffn);
    let name = |suffix: &str| format!("l{layer}.{suffix}");
    // Q, K and V read the same input: one product with their rows stacked.
    let mut qkv_weight = Vec::with_capacity(3 * hidden * hidden);
    let mut qkv_bias = Vec::with_capacity(3 * hidden);
    for part in ["q", "k", "v"] {
        qkv_weight.extend(tensors.q4_dequantized(&name(&format!("{part}.w")), hidden, hidden)?);
        qkv_bias.extend(tensors.f32(&name(&format!("{part}.b")), hidden)?);
    }
    // A `prefix.w` (n_out × n_in, quantised) and `prefix.b` pair, and a layer norm's.
    let linear = |prefix: &str, n_out: usize, n_in: usize| -> Result<Linear, E5Error> {
        Ok(Linear {
            weight: tensors.q4_dequantized(&name(&format!("{prefix}.w")), n_out, n_in)?,
            bias: tensors.f32(&name(&format!("{prefix}.b")), n_out)?,
            n_in,
            n_out,
        })
    };
    let norm = |prefix: &str| -> Result<LayerNorm, E5Error> {
        Ok(LayerNorm {
            weight: tensors.f32(&name(&format!("{prefix}.w")), hidden)?,
            bias: tensors.f32(&name(&format!("{prefix}.b")), hidden)?,
        })
    };
    Ok(EncoderLayer {
        qkv: Linear { weight: qkv_weight, bias: qkv_bias, n_in: hidden, n_out: 3 * hidden },
        attention_out: linear("ao", hidden, hidden)?,
        attention_norm: norm("aln")?,
        ffn_in: linear("fi", ffn, hidden)?,
        ffn_out: linear("fo", hidden, ffn)?,
        ffn_norm: norm("oln")?,
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

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
}
