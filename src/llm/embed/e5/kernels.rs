//! The encoder's numeric kernels: the few-token weight product (AVX2 dot products over the
//! stored weight rows), the element-wise steps (int8 rounding, layer norm, softmax, GELU),
//! and `sgemm` behind a bounds-checked view.

use super::{BLOCK, Q4_BLOCK_BYTES};

/// Tokens up to which a weight product runs [`few_tokens`] instead of `sgemm`: a question is
/// 10 to 40 tokens; a batch of passages is hundreds and stays on `sgemm`, which is faster
/// there (it uses AVX-512 where the CPU has it). In an unoptimised build (tests, `cargo
/// run`) the limit is 0: there every intrinsic is a function call and the kernel runs ~10×
/// slower than `sgemm`, which Cargo.toml optimises even in debug builds. The kernel's own
/// tests call it directly.
pub(super) const FEW_TOKENS: usize = 64;

/// The weight product for a question's few tokens, `output[t][o] += input[t] · weight[o]`,
/// read from the weights as the container stores them (`n_out` rows of `n_in`).
///
/// Why not `sgemm`: it copies the whole weight matrix into its packed layout on every call,
/// and for 10 to 40 tokens that copy was most of a query's time (72% of it, measured with
/// `perf`), the product itself 14%. Here each weight row is read from memory once: a group
/// of [`OUTPUTS`] rows stays in cache while every pair of tokens is multiplied by it, as
/// dot products. x86-64 with AVX2 and FMA only (checked at run time); elsewhere the caller
/// runs `sgemm`.
pub(super) mod few_tokens {
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
    pub(in crate::llm::embed::e5) fn accumulate(
        input: &[f32],
        weight: &[f32],
        output: &mut [f32],
        n_in: usize,
        n_out: usize,
    ) -> bool {
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
pub(super) fn round_to_int8_grid(input: &[f32], output: &mut [f32]) {
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
pub(super) fn add_and_normalize(
    states: &mut [f32],
    residual: Option<&[f32]>,
    norm: &LayerNorm,
    width: usize,
    eps: f32,
) {
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

/// `row` turned into probabilities, its largest value subtracted first so `exp` stays finite.
pub(super) fn softmax(row: &mut [f32]) {
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

/// [`gelu`] of every value.
pub(super) fn gelu_in_place(values: &mut [f32]) {
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
pub(super) struct Strided {
    pub(super) offset: usize,
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) row_stride: usize,
    pub(super) col_stride: usize,
}

impl Strided {
    /// `rows` × `cols` with each row's elements side by side, rows `row_stride` apart.
    pub(super) fn rows(offset: usize, rows: usize, cols: usize, row_stride: usize) -> Strided {
        Strided { offset, rows, cols, row_stride, col_stride: 1 }
    }

    /// One past the last element, which must lie within the backing slice.
    fn end(&self) -> usize {
        self.offset + (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride + 1
    }
}

/// `c = alpha · a · b + beta · c` through `matrixmultiply::sgemm`, bounds-checked.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm(
    alpha: f32,
    a: &[f32],
    a_view: Strided,
    b: &[f32],
    b_view: Strided,
    beta: f32,
    c: &mut [f32],
    c_view: Strided,
) {
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

/// A layer norm's scale and shift, `hidden` wide.
pub(super) struct LayerNorm {
    pub(super) weight: Vec<f32>,
    pub(super) bias: Vec<f32>,
}

/// `y = x · weightᵀ + bias`, with `weight` stored `n_out` rows of `n_in`.
pub(super) struct Linear {
    pub(super) weight: Vec<f32>,
    pub(super) bias: Vec<f32>,
    pub(super) n_in: usize,
    pub(super) n_out: usize,
}

impl Linear {
    /// `output` (tokens × n_out) = `input` (tokens × n_in) · weightᵀ + bias.
    /// Up to `few_token_limit` tokens the product runs [`few_tokens`] where the CPU can.
    pub(super) fn forward(&self, input: &[f32], output: &mut [f32], few_token_limit: usize) {
        let n_tokens = input.len() / self.n_in;
        for row in output.chunks_exact_mut(self.n_out) {
            row.copy_from_slice(&self.bias);
        }
        if n_tokens <= few_token_limit && few_tokens::accumulate(input, &self.weight, output, self.n_in, self.n_out) {
            return;
        }
        let input_view = Strided::rows(0, n_tokens, self.n_in, self.n_in);
        let weight_transposed =
            Strided { offset: 0, rows: self.n_in, cols: self.n_out, row_stride: 1, col_stride: self.n_in };
        let output_view = Strided::rows(0, n_tokens, self.n_out, self.n_out);
        gemm(1.0, input, input_view, &self.weight, weight_transposed, 1.0, output, output_view);
    }
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
pub(super) fn dequantize_q4(raw: &[u8], out: &mut [f32]) {
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn converts_half_precision_scales() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
    }
}
