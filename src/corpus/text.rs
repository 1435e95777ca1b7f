//! Small text helpers the other stages share: accent folding, word counts, hashes, word
//! windows and shortening (the one helper every message, excerpt and error line cuts with).

use sha2::{Digest, Sha256};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

use super::Visibility;

/// Lowercases `s` and strips its diacritics (NFD, then combining marks dropped), so that
/// `Sesión`, `SESION` and `sesion` compare equal. `ñ` folds to `n`.
pub fn fold(s: &str) -> String {
    if s.is_ascii() {
        return s.to_ascii_lowercase();
    }
    s.nfd().filter(|c| !is_combining_mark(*c)).flat_map(char::to_lowercase).collect()
}

/// `text` with CRLF and lone CR line endings made LF, so every line ending reads alike (a
/// file saved with CR only would otherwise be one line).
pub(crate) fn normalize_line_endings(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains('\r') {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
}

/// sha256 (hex) over `visibility.as_str() + "\n" + text`: what decides re-embedding.
/// The visibility is part of it so that a passage becoming secret is re-indexed.
pub fn content_hash(visibility: Visibility, text: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(visibility.as_str().as_bytes());
    hasher.update(b"\n");
    hasher.update(text.as_bytes());
    hex::encode(hasher.finalize())
}

/// Words are whitespace-separated tokens, the unit of `SESSION_MAX_WORDS`.
pub(crate) fn word_count(s: &str) -> usize {
    s.split_whitespace().count()
}

/// Byte ranges of the whitespace-separated tokens of `s`, in order.
pub(crate) fn word_spans(s: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut word_start = None;
    for (offset, c) in s.char_indices() {
        match (c.is_whitespace(), word_start) {
            (true, Some(start)) => {
                spans.push((start, offset));
                word_start = None;
            }
            (false, None) => word_start = Some(offset),
            _ => {}
        }
    }
    if let Some(start) = word_start {
        spans.push((start, s.len()));
    }
    spans
}

/// The file name of a `/`-separated path without its extension: `Sesiones/Sesion 8.md` →
/// `Sesion 8`.
pub(crate) fn file_stem(path: &str) -> &str {
    let file_name = path.rsplit('/').next().unwrap_or(path);
    match file_name.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem,
        _ => file_name,
    }
}

/// Overlap between an embedding window and the next, as a fraction of the window: a sentence
/// cut by one window boundary is whole in the neighbouring window.
const WINDOW_OVERLAP_DIVISOR: usize = 5;

/// Splits `text` into windows of at most `window_words` words, overlapping by a fifth.
pub fn embedding_windows(text: &str, window_words: usize) -> Vec<String> {
    let window_words = window_words.max(2);
    word_windows(text, window_words, window_step(window_words))
}

/// `text`'s words in windows of `window_words`, one every `step` words, the last one ending
/// with the text; a text no longer than one window is one window (an empty text, one empty
/// window). What the embedder's windows and the answer's support passages are both cut by.
pub fn word_windows(text: &str, window_words: usize, step: usize) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() <= window_words {
        return vec![words.join(" ")];
    }
    let mut windows = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + window_words).min(words.len());
        windows.push(words[start..end].join(" "));
        if end == words.len() {
            break;
        }
        start += step.max(1);
    }
    windows
}

/// Words between the starts of two windows: they overlap by a fifth.
fn window_step(window_words: usize) -> usize {
    let window_words = window_words.max(2);
    window_words - window_words / WINDOW_OVERLAP_DIVISOR
}

/// The words (indexes into the fragment's whitespace-separated words) that window `window`
/// of [`embedding_windows`] covers: where a dense hit lies in its fragment.
pub fn window_word_range(window: u32, window_words: usize) -> std::ops::Range<usize> {
    let start = window as usize * window_step(window_words);
    start..start + window_words.max(2)
}

/// `text` cut at a word to at most `max_chars` characters, with `…` when cut.
pub fn shorten(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_string();
    }
    let cut: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    match cut.rfind(' ') {
        Some(space) if space > 0 => format!("{}…", cut[..space].trim_end_matches([',', ';', ':'])),
        _ => format!("{cut}…"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per helper call: (helper name, input, rendered output).
    fn check(helper: &str, input: &str, expect: &str) {
        let actual = match helper {
            "fold" => fold(input),
            "word_count" => word_count(input).to_string(),
            "word_spans" => word_spans(input)
                .iter()
                .map(|&(start, end)| input[start..end].to_string())
                .collect::<Vec<_>>()
                .join("|"),
            "file_stem" => file_stem(input).to_string(),
            "hash_player" => content_hash(Visibility::Player, input),
            "hash_dm_only" => content_hash(Visibility::DmOnly, input),
            other => panic!("unknown helper {other}"),
        };
        assert_eq!(actual, expect, "{helper}({input:?})");
    }

    #[test]
    fn text_helpers() {
        let cases = [
            ("fold", "Sesión", "sesion"),
            ("fold", "SESIÓN 12 — Crónica", "sesion 12 — cronica"),
            ("fold", "Año del Dragón, ñandú", "ano del dragon, nandu"),
            ("fold", "PLAIN ascii", "plain ascii"),
            ("fold", "Ü É Ç", "u e c"),
            ("word_count", "", "0"),
            ("word_count", "  uno\tdos \n tres  ", "3"),
            ("word_spans", " ¡Hola,  dragón!\nfin ", "¡Hola,|dragón!|fin"),
            ("word_spans", "x", "x"),
            ("file_stem", "Sesiones/Sesion 8.md", "Sesion 8"),
            ("file_stem", "Crónica.md", "Crónica"),
            ("file_stem", "a/b.c/Nota", "Nota"),
            ("file_stem", "a/.hidden", ".hidden"),
            // sha256("player\nhola") and sha256("dm_only\nhola"): visibility changes the hash.
            ("hash_player", "hola", "521b9f8a942e081a18445aa6b1938bdad6bf93eb2e36a0de60f43870036339be"),
            ("hash_dm_only", "hola", "14d7b23efa02174fe7c29bd8d9b946f130124cef1f2b4fe868f0eb8bd880ea45"),
        ];
        for (helper, input, expect) in cases {
            check(helper, input, expect);
        }
    }

    #[test]
    fn shortening_cuts_at_a_word_and_marks_the_cut() {
        assert_eq!(shorten("uno dos tres", 100), "uno dos tres");
        assert_eq!(shorten("uno dos, tres", 10), "uno dos…");
        assert_eq!(shorten("abcdefghij", 5), "abcd…");
        assert!(shorten(&"ñ".repeat(300), 200).chars().count() <= 200);
    }
}
