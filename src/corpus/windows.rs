//! The embedder's windows over a fragment: how a fragment longer than the model's input is
//! cut into overlapping word windows, and which words a window covers (where a dense hit lies).

use crate::text::word_windows;

/// Overlap between an embedding window and the next, as a fraction of the window: a sentence
/// cut by one window boundary is whole in the neighbouring window.
const WINDOW_OVERLAP_DIVISOR: usize = 5;

/// Splits `text` into windows of at most `window_words` words, overlapping by a fifth.
pub fn embedding_windows(text: &str, window_words: usize) -> Vec<String> {
    let window_words = window_words.max(2);
    word_windows(text, window_words, window_step(window_words))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_overlap_by_a_fifth_and_each_covers_its_words() {
        let text: String = (0..23).map(|i| format!("w{i} ")).collect();
        let windows = embedding_windows(&text, 10);
        assert_eq!(windows[0], "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9");
        assert_eq!(windows[1].split(' ').next(), Some("w8"), "a fifth of the window overlaps");
        assert_eq!(window_word_range(1, 10), 8..18);
        assert_eq!(embedding_windows("", 10), vec![String::new()]);
    }
}
