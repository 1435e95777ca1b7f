//! Provenance: each sentence of a structured answer is cited to the shown notes it rests on.
//!
//! The schema makes every label *valid* (one the model was shown); it does not make it
//! *true*. Read against the notes, a 1.5B's cited sentences were backed by a label they cite
//! six times in ten: the rest copy a session they do not cite («No hay signos de lucha…»,
//! word for word in Sesión 9, cited to 10, 30 and 31), cite a sheet that names the person
//! and says nothing of the fact, or state what no note says. [`super::grounding`] checks the
//! letter (numbers, names, counts) and only ever *adds* a note; this module decides which
//! notes a sentence rests on, by the words it shares with each:
//!
//! - each shown note is read in windows of [`WINDOW_WORDS`]; a note's evidence for a sentence
//!   is its best window: the sentence's content words (no stopwords, matched by their first
//!   [`STEM_CHARS`] letters, numbers whole) that window holds, and the longest run of the
//!   sentence's words it holds in a row;
//! - a note whose run reaches [`COPIED_RUN_WORDS`] is the note the sentence was copied from,
//!   and is cited first, whatever the model wrote;
//! - then notes are taken greedily by the content words they add (a cited note first at equal
//!   gain), each adding at least [`MIN_GAIN_WORDS`], up to [`super::grounding::MAX_SOURCES`];
//!   a cited note that adds nothing is removed;
//! - the sentence is backed when the notes taken hold [`BACKED_SHARE`] of its content words
//!   (or it was copied); else it is dropped. A negation the sentence states («por **no**
//!   perdonar la deuda») that none of its notes' windows states is not backed either.
//!
//! Only notes in the sentence's language are read by their words: an English sentence over
//! Spanish notes keeps the labels the model gave, and the letter and meaning checks judge it.
//! Pure: text in, labels out.

use std::collections::HashSet;

use crate::corpus::LabelLanguage;
use crate::lexicon::is_stopword;

use super::grounding::{CitedNotes, MAX_SOURCES, Ungrounded};

/// Words per window of a note: about two sentences of prose, the span one answer sentence
/// restates (the support check's passages are 40; a little more here, as a sentence that
/// joins two facts of one scene reaches across them).
pub const WINDOW_WORDS: usize = 50;
/// Windows start every this many words, so a restated span is whole in one of them.
const WINDOW_STEP: usize = 10;
/// Words are matched by their first letters so that «desaparecidas» finds «desaparecen» and
/// "hired" finds "hires"; whole when shorter.
pub const STEM_CHARS: usize = 5;
/// A content word is at least this long (or holds a digit): «ir», «as» and "go" tell nothing.
const MIN_CONTENT_CHARS: usize = 3;
/// This many of the sentence's words in a row, in the note's order, is a copy: the note it
/// came from.
pub const COPIED_RUN_WORDS: usize = 6;
/// A note taken after the first must hold this many content words the others do not: a
/// sheet that only repeats the name the session already gives adds nothing.
pub const MIN_GAIN_WORDS: usize = 3;
/// The share of a sentence's content words its notes must hold for it to be backed.
/// Chosen on the tune half of `eval/citations-judged.jsonl` (`eval/README.md`).
pub const BACKED_SHARE: f32 = 0.7;

/// The notes a sentence rests on, and how that was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sources {
    /// By its words: the note it was copied from, the notes that hold its content words.
    Backed(Vec<String>),
    /// Its words cannot decide (a paraphrase: «lo enterraron» for «el funeral»; a translation;
    /// no content word): these labels, to be judged by the meaning check and the letter.
    ByMeaning(Vec<String>),
}

impl Sources {
    /// The labels, however decided.
    pub fn labels(self) -> Vec<String> {
        match self {
            Sources::Backed(labels) | Sources::ByMeaning(labels) => labels,
        }
    }
}

/// A share of a sentence's content words under which no meaning check is tried: notes that
/// hold a third of its words at best do not say it, in other words either («Lo enterró la
/// abadesa Urquijo» over «el funeral de Tomás en el puerto»: 0 of 4).
pub const MEANING_MIN_SHARE: f32 = BACKED_SHARE;

/// Why no note shown backs a sentence by its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unbacked {
    /// The best notes hold only this share of the sentence's content words, in hundredths.
    Words { held_percent: u32 },
    /// The sentence states a negation its notes do not.
    Negation(String),
}

impl From<Unbacked> for Ungrounded {
    fn from(reason: Unbacked) -> Ungrounded {
        match reason {
            Unbacked::Words { held_percent } => Ungrounded::NotInNotes { held_percent },
            Unbacked::Negation(word) => Ungrounded::Negation(word),
        }
    }
}

/// One note's evidence for a sentence: its best window.
#[derive(Debug, Clone, Default)]
struct Evidence {
    /// Indexes (into the sentence's content words) of those the best window holds.
    held: HashSet<usize>,
    /// The longest run of the sentence's words the note holds in a row.
    run: usize,
    /// Whether the best window states a negation.
    negates: bool,
}

/// A sentence read for provenance: its words and content words, folded.
struct Read {
    words: Vec<String>,
    /// Content words' stems (or whole numbers).
    content: Vec<String>,
    negation: Option<String>,
}

impl Read {
    fn new(sentence: &str) -> Read {
        let words = folded_words(sentence);
        let mut content: Vec<String> = Vec::new();
        for word in &words {
            let is_number = word.chars().any(|c| c.is_ascii_digit());
            if (is_number || word.chars().count() >= MIN_CONTENT_CHARS) && !is_stopword(word) {
                let stem = stem(word);
                if !content.contains(&stem) {
                    content.push(stem);
                }
            }
        }
        let negation = words.iter().find(|word| is_negation(word)).cloned();
        Read { words, content, negation }
    }
}

impl CitedNotes {
    /// The labels `sentence` rests on, cited first as the model cited them where they back it,
    /// the note it was copied from first of all ([`Sources::Backed`]); `Err` when no shown note
    /// backs it by its words; [`Sources::ByMeaning`] when its words cannot decide (no note shown
    /// in its language, no content word, or its notes hold part of its words: a paraphrase).
    /// `language`: the answer's (its question's): a short sentence's own words are too few to
    /// tell («Tomás fell on the bridge, pierced by a harpoon» has an accent and «a»).
    pub fn provenance(&self, sentence: &str, cited: &[String], language: LabelLanguage) -> Result<Sources, Unbacked> {
        let read = Read::new(sentence);
        if read.content.is_empty() {
            return Ok(Sources::ByMeaning(cited.to_vec()));
        }
        // The shown notes in the sentence's language, cited ones first (they win ties).
        let mut candidates: Vec<&String> = cited.iter().filter(|label| self.is_in(label, language)).collect();
        for label in self.order() {
            if !candidates.contains(&label) && self.is_in(label, language) {
                candidates.push(label);
            }
        }
        if candidates.is_empty() {
            return self.provenance_across_languages(sentence, cited);
        }
        let evidence: Vec<Evidence> =
            candidates.iter().map(|label| self.evidence(label, &read).unwrap_or_default()).collect();
        let mut taken: Vec<usize> = Vec::new();
        let mut held: HashSet<usize> = HashSet::new();
        // The note copied from: the longest run, when it is a copy.
        let copied = (0..candidates.len())
            .filter(|&at| evidence[at].run >= COPIED_RUN_WORDS)
            .max_by_key(|&at| (evidence[at].run, std::cmp::Reverse(at)));
        if let Some(at) = copied {
            taken.push(at);
            held.extend(evidence[at].held.iter().copied());
        }
        while taken.len() < MAX_SOURCES {
            let gain = |at: usize| evidence[at].held.difference(&held).count();
            let best = (0..candidates.len())
                .filter(|at| !taken.contains(at))
                .max_by_key(|&at| (gain(at), std::cmp::Reverse(at)))
                .filter(|&at| gain(at) >= if taken.is_empty() { 1 } else { MIN_GAIN_WORDS });
            let Some(at) = best else { break };
            held.extend(evidence[at].held.iter().copied());
            taken.push(at);
        }
        let share = held.len() as f32 / read.content.len() as f32;
        if copied.is_none() && share < BACKED_SHARE {
            // Cited notes in another language may still back it, by its names and numbers.
            let elsewhere: Vec<String> = cited.iter().filter(|label| !self.is_in(label, language)).cloned().collect();
            if !elsewhere.is_empty() {
                return self.provenance_across_languages(sentence, &elsewhere);
            }
            if share < MEANING_MIN_SHARE {
                return Err(Unbacked::Words { held_percent: (share * 100.0).round() as u32 });
            }
            // A paraphrase, perhaps: the cited notes that hold some of its words, else the
            // notes taken, for the meaning check to judge.
            let holding: Vec<String> = (0..candidates.len())
                .filter(|&at| cited.contains(candidates[at]) && !evidence[at].held.is_empty())
                .map(|at| candidates[at].clone())
                .collect();
            let labels =
                if holding.is_empty() { taken.iter().map(|&at| candidates[at].clone()).collect() } else { holding };
            return Ok(Sources::ByMeaning(labels));
        }
        if let Some(word) = &read.negation
            && !taken.iter().any(|&at| evidence[at].negates)
        {
            return Err(Unbacked::Negation(word.clone()));
        }
        Ok(Sources::Backed(taken.into_iter().map(|at| candidates[at].clone()).collect()))
    }

    /// [`Self::provenance`] over notes in another language: the cited notes that hold the
    /// sentence's names and numbers ([`Sources::ByMeaning`]: a translation is judged by meaning
    /// too); all of `cited` when it states neither.
    fn provenance_across_languages(&self, sentence: &str, cited: &[String]) -> Result<Sources, Unbacked> {
        let mut tokens: Vec<String> = super::grounding::names_in(sentence)
            .iter()
            .flat_map(|name| folded_words(name))
            .filter(|word| !is_stopword(word))
            .collect();
        tokens.extend(folded_words(sentence).into_iter().filter(|word| word.chars().any(|c| c.is_ascii_digit())));
        tokens.dedup();
        if tokens.is_empty() {
            return Ok(Sources::ByMeaning(cited.to_vec()));
        }
        let mut best_share: f32 = 0.0;
        let mut kept = Vec::new();
        for label in cited {
            let Some(words) = self.words_of(label) else { continue };
            let held = tokens.iter().filter(|token| words.contains(&format!(" {token} "))).count();
            let share = held as f32 / tokens.len() as f32;
            best_share = best_share.max(share);
            if share >= BACKED_SHARE {
                kept.push(label.clone());
            }
        }
        if kept.is_empty() {
            return Err(Unbacked::Words { held_percent: (best_share * 100.0).round() as u32 });
        }
        Ok(Sources::ByMeaning(kept))
    }

    /// Whether every share of `label`'s notes here is written in `language`.
    fn is_in(&self, label: &str, language: LabelLanguage) -> bool {
        self.all_in_language(&[label.to_string()], language)
    }

    /// `label`'s evidence for the sentence read as `read`: its best window by content words
    /// held (then by run); `None` when the label has no text here.
    fn evidence(&self, label: &str, read: &Read) -> Option<Evidence> {
        let note: Vec<&str> = self.words_of(label)?.split(' ').filter(|word| !word.is_empty()).collect();
        let run = longest_common_run(&read.words, &note);
        let stems: Vec<String> = note.iter().map(|word| stem(word)).collect();
        let mut best = Evidence { run, ..Evidence::default() };
        let mut start = 0;
        loop {
            let end = (start + WINDOW_WORDS).min(note.len());
            let window: HashSet<&str> = stems[start..end].iter().map(String::as_str).collect();
            let held: HashSet<usize> = read
                .content
                .iter()
                .enumerate()
                .filter(|(_, stem)| window.contains(stem.as_str()))
                .map(|(i, _)| i)
                .collect();
            if held.len() > best.held.len() {
                best.held = held;
                best.negates = note[start..end].iter().any(|word| is_negation(word));
            }
            if end == note.len() {
                break;
            }
            start += WINDOW_STEP;
        }
        Some(best)
    }
}

/// The folded words of `text`, digit groups joined («1.000» → «1000»).
fn folded_words(text: &str) -> Vec<String> {
    super::grounding::padded_words(text).split(' ').filter(|word| !word.is_empty()).map(str::to_string).collect()
}

/// A word's first [`STEM_CHARS`] letters; a number whole.
fn stem(word: &str) -> String {
    if word.chars().any(|c| c.is_ascii_digit()) { word.to_string() } else { word.chars().take(STEM_CHARS).collect() }
}

/// The longest run of `sentence`'s words found in a row in `note`.
fn longest_common_run(sentence: &[String], note: &[&str]) -> usize {
    // Dynamic programming over the two sequences, one row at a time.
    let mut previous = vec![0usize; note.len() + 1];
    let mut best = 0;
    for word in sentence {
        let mut row = vec![0usize; note.len() + 1];
        for (at, other) in note.iter().enumerate() {
            if word == other {
                row[at + 1] = previous[at] + 1;
                best = best.max(row[at + 1]);
            }
        }
        previous = row;
    }
    best
}

/// Words that state a negation, folded, both languages («didn't» is folded to «didn» «t»).
fn is_negation(folded: &str) -> bool {
    const NEGATIONS: &[&str] = &[
        "no", "nunca", "jamas", "ni", "nadie", "nada", "ningun", "ninguno", "ninguna", "tampoco", "not", "never",
        "nor", "nobody", "nothing", "none", "neither", "cannot", "didn", "doesn", "don", "wasn", "weren", "isn",
        "aren", "couldn", "wouldn", "won", "hasn", "haven", "hadn", "shouldn",
    ];
    NEGATIONS.contains(&folded)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ES: LabelLanguage = LabelLanguage::Es;
    const EN: LabelLanguage = LabelLanguage::En;

    const SESSION_9: &str = "Durante la Fiesta de las Mareas el archiduque desaparece del salón. La guardia registra el \
        despacho: no hay signos de lucha, ni sangre, ni otra salida que la puerta por la que han entrado.";
    const SESSION_10: &str = "El grupo interroga a los criados del palacio. Nadie vio salir al archiduque.";
    const SESSION_12: &str = "Dorian Quesada vende al grupo a los contrabandistas a cambio de que le perdonen la deuda \
        de su barco.";
    const SHEET: &str = "# Dorian Quesada\nCapitán del Garza Gris, endeudado con la cofradía de Puerto Salobre.";
    const ENGLISH: &str = "Rook bought three hundred arrows in the harbour and paid with a silver ring.";

    fn notes() -> CitedNotes {
        let shown: Vec<String> =
            ["Sesión 9", "Sesión 10", "Sesión 12", "Ficha: Dorian Quesada", "Sesión 17"].map(String::from).to_vec();
        CitedNotes::new(
            [
                ("Sesión 9", SESSION_9),
                ("Sesión 10", SESSION_10),
                ("Sesión 12", SESSION_12),
                ("Ficha: Dorian Quesada", SHEET),
                ("Sesión 17", ENGLISH),
            ],
            &shown,
        )
    }

    fn cites(labels: &[&str]) -> Vec<String> {
        labels.iter().map(|label| label.to_string()).collect()
    }

    #[test]
    fn a_copied_sentence_cites_the_note_it_came_from() {
        let sentence = "No hay signos de lucha, ni sangre, ni otra salida que la puerta por la que han entrado.";
        let labels = notes().provenance(sentence, &cites(&["Sesión 10", "Sesión 12"]), ES).unwrap().labels();
        assert_eq!(labels, cites(&["Sesión 9"]), "copied from 9; 10 and 12 add nothing");
    }

    #[test]
    fn a_cited_note_that_backs_it_stays_first_and_one_that_adds_nothing_goes() {
        let sentence = "Dorian Quesada vendió al grupo a los contrabandistas por la deuda de su barco.";
        let labels =
            notes().provenance(sentence, &cites(&["Ficha: Dorian Quesada", "Sesión 12"]), ES).unwrap().labels();
        assert_eq!(labels, cites(&["Sesión 12"]), "the sheet only repeats the name and the debt");
    }

    #[test]
    fn a_sentence_no_note_holds_is_not_backed() {
        let sentence = "La capitana Brisa Aldana liberó a doce prisioneros en la torre del faro.";
        assert!(matches!(
            notes().provenance(sentence, &cites(&["Sesión 12"]), ES),
            Err(Unbacked::Words { held_percent }) if held_percent < 60
        ));
    }

    #[test]
    fn a_negation_the_notes_do_not_state_is_not_backed() {
        let sentence = "Dorian Quesada vendió al grupo a los contrabandistas por no perdonarle la deuda de su barco.";
        assert_eq!(notes().provenance(sentence, &cites(&["Sesión 12"]), ES), Err(Unbacked::Negation("no".into())));
        // Stated in the note: backed.
        let sentence = "Nadie vio salir al archiduque, según los criados del palacio.";
        assert_eq!(notes().provenance(sentence, &cites(&["Sesión 9"]), ES), Ok(Sources::Backed(cites(&["Sesión 10"]))));
    }

    #[test]
    fn two_notes_back_a_sentence_that_joins_them() {
        let sentence = "El archiduque desaparece durante la Fiesta de las Mareas y nadie de los criados lo vio salir.";
        let labels = notes().provenance(sentence, &cites(&["Sesión 9"]), ES).unwrap().labels();
        assert_eq!(labels, cites(&["Sesión 9", "Sesión 10"]));
    }

    #[test]
    fn notes_in_another_language_leave_the_labels_to_the_other_checks() {
        // A Spanish sentence, only the English note cited: no Spanish note backs it, and the
        // English one states no name inside it nor a number to match: the meaning check decides.
        let sentence = "Rook compró trescientas flechas en el puerto.";
        assert_eq!(
            notes().provenance(sentence, &cites(&["Sesión 17"]), ES),
            Ok(Sources::ByMeaning(cites(&["Sesión 17"])))
        );
        // Cited to a Spanish session that does not hold it: dropped.
        assert!(notes().provenance(sentence, &cites(&["Sesión 12"]), ES).is_err());
        // An English sentence: no English note but Sesión 17, which backs it.
        let sentence = "Rook bought three hundred arrows and paid with a silver ring.";
        assert_eq!(notes().provenance(sentence, &cites(&["Sesión 9"]), EN), Ok(Sources::Backed(cites(&["Sesión 17"]))));
        // An English sentence cited to Spanish notes only: its number decides.
        let sentence = "The archduke paid the party 50 crowns in advance.";
        assert!(notes().provenance(sentence, &cites(&["Sesión 12"]), EN).is_err(), "no 50 in Sesión 12");
        let sentence = "Dorian Quesada sold the party to the smugglers.";
        assert_eq!(
            notes().provenance(sentence, &cites(&["Sesión 12"]), EN),
            Ok(Sources::ByMeaning(cites(&["Sesión 12"])))
        );
        // No content word: nothing to judge by.
        assert_eq!(notes().provenance("Sí.", &cites(&["Sesión 9"]), ES), Ok(Sources::ByMeaning(cites(&["Sesión 9"]))));
    }
}
