//! Support: a sentence of a structured answer must say what a window of its notes says.
//!
//! [`super::grounding`] checks what can be checked by the letter (numbers, names, counts).
//! What it cannot see is a sentence that keeps the letter and changes the subject: «Iria ganó
//! el torneo de justas de Altamira [Ficha: Inés Carvajal]» (an unanswerable question as the
//! 1.5B answered it) names only Altamira, and the sheet does name Altamira, as the college
//! where Inés studied. No note mentions a tournament.
//!
//! The check is by meaning: the cited notes' shown text is cut into short overlapping
//! windows ([`SUPPORT_WINDOW_WORDS`]), the sentence and the windows are embedded on the
//! same side (both as queries: a symmetric comparison), and the sentence is supported when
//! its nearest window reaches the embedder's calibrated floor (`llm::SupportFloor`, passed in
//! as two numbers: this module takes nothing from `llm` that talks to a model). A
//! sentence the small model copies or paraphrases from a note sits well above it; one that
//! restates the question around a name sits below. An embedder with no calibrated floor
//! leaves the check off. Pure: vectors in, verdicts out; the embedding is the caller's.
//!
//! The floor was calibrated on prose notes (the sample campaign; `eval/README.md`). Short,
//! telegraphic notes score every sentence about their subject higher (a one-line session
//! scored «Tomás compró tres caballos» at 0.87 against «Tomás cae defendiendo el puente»), so
//! there the check keeps more, never fewer: it errs towards the answer, not the abstention.

use std::collections::HashMap;

use crate::text::word_windows;

use super::grounding::Ungrounded;

/// Words per support window: about two sentences of a note, the span one answer sentence
/// restates. The dense path's windows (250 words) are too long: a sentence's meaning is
/// diluted in them, and every sentence about the same session looks alike.
pub const SUPPORT_WINDOW_WORDS: usize = 40;
/// Windows overlap by half, so that a sentence split by a window's edge is whole in the
/// next one.
const SUPPORT_WINDOW_STEP: usize = 20;

/// A note's text cut into support windows: [`SUPPORT_WINDOW_WORDS`] words every
/// [`SUPPORT_WINDOW_STEP`], the last one ending with the text; one window when it is short.
pub fn support_windows(text: &str) -> Vec<String> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    word_windows(text, SUPPORT_WINDOW_WORDS, SUPPORT_WINDOW_STEP)
}

/// The shown notes' support windows, embedded, by label.
#[derive(Debug, Default)]
pub struct SupportWindows {
    by_label: HashMap<String, Vec<Vec<f32>>>,
}

impl SupportWindows {
    /// `vectors[i]` is the embedding of a window of the notes labelled `labels[i]`.
    pub fn new(labels: &[String], vectors: Vec<Vec<f32>>) -> SupportWindows {
        let mut by_label: HashMap<String, Vec<Vec<f32>>> = HashMap::new();
        for (label, vector) in labels.iter().zip(vectors) {
            by_label.entry(label.clone()).or_default().push(vector);
        }
        SupportWindows { by_label }
    }

    /// The cosine of `sentence` (its vector, unit length) to the nearest window of the notes
    /// `sources` cites; `None` when none of them has a window here (nothing to judge by).
    pub fn nearest(&self, sentence: &[f32], sources: &[String]) -> Option<f32> {
        sources
            .iter()
            .filter_map(|label| self.by_label.get(label))
            .flatten()
            .map(|window| window.iter().zip(sentence).map(|(a, b)| a * b).sum::<f32>())
            .reduce(f32::max)
    }

    /// Whether `sentence` is supported by `sources`: its nearest window at
    /// `same_language_floor` when all the notes it cites are in its language (`same_language`,
    /// as `CitedNotes::all_in_language` tells), else at `other_language_floor`. A sentence
    /// with no window to judge by is taken at its word.
    pub fn verdict(
        &self,
        sentence: &[f32],
        same_language: bool,
        sources: &[String],
        same_language_floor: f32,
        other_language_floor: f32,
    ) -> Result<(), Ungrounded> {
        let Some(nearest) = self.nearest(sentence, sources) else { return Ok(()) };
        let floor = if same_language { same_language_floor } else { other_language_floor };
        if nearest >= floor {
            Ok(())
        } else {
            let milli = |x: f32| (x * 1000.0).round() as i32;
            Err(Ungrounded::Unsupported { nearest_milli: milli(nearest), floor_milli: milli(floor) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.iter().map(|x| x / norm).collect()
    }

    #[test]
    fn windows_cover_the_text_with_overlap_and_end_with_it() {
        let text: String = (0..95).map(|i| format!("w{i} ")).collect();
        let windows = support_windows(&text);
        assert_eq!(windows.len(), 4, "0-40, 20-60, 40-80, 60-95");
        assert!(windows[0].starts_with("w0 ") && windows[0].ends_with("w39"));
        assert!(windows[1].starts_with("w20 "));
        assert!(windows[3].starts_with("w60 ") && windows[3].ends_with("w94"));
        assert_eq!(support_windows("  una frase corta  "), ["una frase corta"]);
        assert!(support_windows(" \n ").is_empty());
    }

    #[test]
    fn a_sentence_far_from_every_window_it_cites_is_unsupported() {
        // Sesión 1's windows a and b, the sheet's c.
        let labels = ["Sesión 1", "Sesión 1", "Ficha: Inés"].map(String::from);
        let vectors = vec![unit(&[1.0, 0.0, 0.0]), unit(&[0.0, 1.0, 0.0]), unit(&[0.0, 0.0, 1.0])];
        let support = SupportWindows::new(&labels, vectors);
        let floor = (0.83, 0.80);
        let cites = |labels: &[&str]| labels.iter().map(|l| l.to_string()).collect::<Vec<_>>();
        // Near Sesión 1's second window.
        let near_b = unit(&[0.1, 0.95, 0.1]);
        assert_eq!(support.verdict(&near_b, true, &cites(&["Sesión 1"]), floor.0, floor.1), Ok(()));
        // The same sentence cited to the sheet only: nothing there says it.
        assert_eq!(
            support.verdict(&near_b, true, &cites(&["Ficha: Inés"]), floor.0, floor.1),
            Err(Ungrounded::Unsupported { nearest_milli: 104, floor_milli: 830 })
        );
        // Any of its sources may support it.
        assert_eq!(support.verdict(&near_b, true, &cites(&["Ficha: Inés", "Sesión 1"]), floor.0, floor.1), Ok(()));
        // Between the two floors: supported only as a translation (notes in another language).
        let between = unit(&[0.82, 0.5724, 0.0]);
        assert!(support.nearest(&between, &cites(&["Sesión 1"])).is_some_and(|c| (0.80..0.83).contains(&c)));
        assert!(support.verdict(&between, true, &cites(&["Sesión 1"]), floor.0, floor.1).is_err());
        assert_eq!(support.verdict(&between, false, &cites(&["Sesión 1"]), floor.0, floor.1), Ok(()));
        // A label with no windows here: taken at its word.
        assert_eq!(support.verdict(&near_b, true, &cites(&["Mundo: Dioses"]), floor.0, floor.1), Ok(()));
    }
}
