//! The BERT encoder (XLM-R shape): token embeddings, then every layer's attention and
//! feed-forward products, then the mean over every token.

use super::kernels::{
    LayerNorm, Linear, Strided, add_and_normalize, dequantize_q4, gelu_in_place, gemm, round_to_int8_grid, softmax,
};
use super::{BLOCK, E5Model, E5Prefix, Q4_BLOCK_BYTES, Shape, prefixed};

/// One of the encoder's layers: attention, then feed-forward, each with its layer norm.
pub(super) struct EncoderLayer {
    /// Q, K and V stacked: output row `[q | k | v]`, each `hidden` wide.
    pub(super) qkv: Linear,
    pub(super) attention_out: Linear,
    pub(super) attention_norm: LayerNorm,
    pub(super) ffn_in: Linear,
    pub(super) ffn_out: Linear,
    pub(super) ffn_norm: LayerNorm,
}

impl E5Model {
    /// `<s>`, the pieces of the prefixed text (at most `max_tokens - 2`), `</s>`.
    pub(super) fn input_ids(&self, text: &str, prefix: E5Prefix) -> Vec<u32> {
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
    pub(super) fn encode_mean(&self, sequences: &[Vec<u32>]) -> Vec<Vec<f32>> {
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
                let queries = Strided::rows(first * qkv_width + column, n, head_dim, qkv_width);
                let keys_transposed = Strided {
                    offset: first * qkv_width + hidden + column,
                    rows: head_dim,
                    cols: n,
                    row_stride: 1,
                    col_stride: qkv_width,
                };
                let weights_view = Strided::rows(0, n, n, n);
                gemm(scale, &scratch.qkv, queries, &scratch.qkv, keys_transposed, 0.0, weights, weights_view);
                let mut row_start = 0;
                while row_start < n * n {
                    softmax(&mut weights[row_start..row_start + n]);
                    row_start += n;
                }
                // context_i = Σ_j weights[i][j] · v_j
                let values = Strided::rows(first * qkv_width + 2 * hidden + column, n, head_dim, qkv_width);
                let context = Strided::rows(first * hidden + column, n, head_dim, hidden);
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
