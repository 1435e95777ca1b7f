//! From logits to text: the sampler chain (a grammar or the repetition penalty, then greedy or
//! top-k and temperature) and the pieces of text assembled into whole UTF-8 characters.

use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;

/// Sampling seed when the temperature is above zero: the same prompt gives the same answer.
const SAMPLING_SEED: u32 = 0x5EED;
/// Candidates kept before temperature sampling.
const TOP_K: i32 = 40;
/// Free text only: tokens of the last `REPEAT_WINDOW` are made less likely by
/// `REPEAT_PENALTY` (llama.cpp's usual 64 / 1.1). Small models otherwise fall into a loop and
/// repeat one sentence until `max_tokens` (SmolLM2-135M did, on the sample campaign's first
/// question, for all 1024 tokens). Never with a grammar: JSON repeats its quotes and braces.
const REPEAT_WINDOW: i32 = 64;
const REPEAT_PENALTY: f32 = 1.1;

/// Greedy at temperature 0 (reproducible, and what structured output wants); otherwise top-k
/// then temperature, with a fixed seed. A grammar, when given, comes first and removes every
/// token that would break it; free text gets the repetition penalty instead.
pub(super) fn build_sampler(
    model: &LlamaModel,
    grammar: Option<&str>,
    temperature: f32,
) -> Result<LlamaSampler, String> {
    let mut samplers = Vec::new();
    match grammar {
        Some(grammar) => samplers.push(
            LlamaSampler::grammar(model, grammar, "root")
                .map_err(|err| format!("llama.cpp rejects the grammar: {err}"))?,
        ),
        None => samplers.push(LlamaSampler::penalties(model.n_vocab(), REPEAT_WINDOW, REPEAT_PENALTY, 0.0, 0.0)),
    }
    if temperature <= 0.0 {
        samplers.push(LlamaSampler::greedy());
    } else {
        samplers.push(LlamaSampler::top_k(TOP_K));
        samplers.push(LlamaSampler::temp(temperature));
        samplers.push(LlamaSampler::dist(SAMPLING_SEED));
    }
    Ok(LlamaSampler::chain_simple(samplers))
}

/// Removes and returns the longest valid UTF-8 prefix of `bytes`, leaving the start of a
/// character split across tokens for the next call. Invalid bytes become U+FFFD.
pub(super) fn take_complete_utf8(bytes: &mut Vec<u8>) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            let text = text.to_string();
            bytes.clear();
            text
        }
        Err(err) => match err.error_len() {
            // Incomplete character at the end: keep it for later.
            None => {
                let valid = err.valid_up_to();
                let text = String::from_utf8_lossy(&bytes[..valid]).into_owned();
                bytes.drain(..valid);
                text
            }
            // Bytes that never make a character: replace them and go on.
            Some(_) => {
                let text = String::from_utf8_lossy(bytes).into_owned();
                bytes.clear();
                text
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_characters_wait_for_their_last_byte() {
        let mut bytes = "añ".as_bytes()[..2].to_vec(); // "a" and the first byte of "ñ"
        assert_eq!(take_complete_utf8(&mut bytes), "a");
        assert_eq!(bytes.len(), 1);
        bytes.push("ñ".as_bytes()[1]);
        assert_eq!(take_complete_utf8(&mut bytes), "ñ");
        assert!(bytes.is_empty());
        let mut invalid = vec![0xFF, b'x'];
        assert_eq!(take_complete_utf8(&mut invalid), "\u{FFFD}x");
    }
}
