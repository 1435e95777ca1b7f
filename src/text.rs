//! Text, at the ground floor: accent folding, words, word windows, where a sentence ends,
//! shortening, and the next marker on a line. The one home of each: every stage (corpus, retrieval, answer, compendium,
//! timeline, Discord, the model servers' error lines) cuts, folds and splits with these, so a
//! sentence ends in the same place wherever it is read. Imports nothing of the crate.

use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

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

/// What may close a sentence.
pub const SENTENCE_ENDS: [char; 4] = ['.', '!', '?', '…'];

/// What may follow a sentence's closing mark and still belong to the sentence: closing
/// quotes, brackets and Markdown emphasis (`«¡Corred!»`, `(véase la sesión 3.)`, `*fin.*`).
const SENTENCE_CLOSERS: [char; 10] = ['»', '"', '\'', '”', '’', ')', ']', '*', '_', '`'];

/// Titles and ranks written short before a name, in the notes' two languages: their point
/// abbreviates, it does not close («el Sr. Quesada», "Lt. Beezer" were split in two).
const TITLE_ABBREVIATIONS: [&str; 18] = [
    "Sr.", "Sra.", "Srta.", "Dr.", "Dra.", "Dña.", "Fr.", "Sto.", "Sta.", "Mr.", "Mrs.", "Ms.", "Lt.", "Sgt.", "Capt.",
    "Col.", "Gen.", "Prof.",
];

/// Whether `word` (a whitespace-separated token) closes a sentence: its last mark before any
/// closers is `.`, `!`, `?` or `…`, and it is no title written short. `3.5` does not; `fin.»`
/// does; `Lt.` does not.
pub fn ends_sentence(word: &str) -> bool {
    let word = word.trim_end_matches(SENTENCE_CLOSERS);
    let bare = word.trim_start_matches(|c: char| !c.is_alphanumeric());
    word.ends_with(SENTENCE_ENDS) && !TITLE_ABBREVIATIONS.contains(&bare)
}

/// The byte offsets in `text` where a sentence ends: right after the word that closes it
/// ([`ends_sentence`]), closers included, before the whitespace (or the text's end) that
/// follows. The one rule of where a sentence ends, for splitting notes into sentences,
/// describing an entity by its first sentences and cutting a long Discord message.
pub fn sentence_ends(text: &str) -> Vec<usize> {
    let spans = word_spans(text);
    spans
        .iter()
        .enumerate()
        .filter(|&(at, &(start, end))| {
            let trails_off_into = || {
                spans.get(at + 1).is_some_and(|&(next, next_end)| {
                    trails_off(&text[start..end]) && goes_on(&text[next..next_end]) && !text[end..next].contains('\n')
                })
            };
            ends_sentence(&text[start..end]) && !inside_a_quotation(text, end) && !trails_off_into()
        })
        .map(|(_, &(_, end))| end)
        .collect()
}

/// Whether `word` ends in an ellipsis («an...», «pero…»): before a word in lowercase on its
/// line the sentence goes on ("ran into an... ally, a strange dragonborn" was split at the
/// dots and its second half quoted alone).
fn trails_off(word: &str) -> bool {
    let word = word.trim_end_matches(SENTENCE_CLOSERS);
    word.ends_with("...") || word.ends_with('…')
}

/// Whether `word` opens in lowercase: it goes on with what came before it.
pub fn goes_on(word: &str) -> bool {
    word.chars().find(|c| c.is_alphanumeric()).is_some_and(char::is_lowercase)
}

/// The text of `line` when it is a list item (`- `, `* `, `+ `, or `1. ` / `1) `, its mark
/// taken off, and a task's box), else `None`. The one reading of a list item: the sentence
/// splitter's and the fragment cutter's.
pub fn list_item_text(line: &str) -> Option<&str> {
    let rest = ["- ", "* ", "+ "].iter().find_map(|bullet| line.strip_prefix(bullet)).or_else(|| {
        let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        (digits > 0 && digits <= MAX_ITEM_NUMBER_DIGITS)
            .then(|| line[digits..].strip_prefix(". ").or_else(|| line[digits..].strip_prefix(") ")))
            .flatten()
    })?;
    // A task's box («- [x] Question the banshee») is the list's mark, not its words.
    let rest = rest.trim_start();
    let unboxed = ["[ ] ", "[x] ", "[X] "].iter().find_map(|task_box| rest.strip_prefix(task_box));
    Some(unboxed.unwrap_or(rest).trim_start())
}

/// Digits a numbered item's number has at most: «12. » numbers an item; «1999. » opens a
/// sentence about a year.
const MAX_ITEM_NUMBER_DIGITS: usize = 3;

/// Marks that open and close with different signs, so that a reader can tell whether a point
/// stands inside them: Spanish guillemets and curly double quotes, and the parentheses of an
/// aside. (Straight `"` opens and closes alike, and `'` is an apostrophe as often as a quote.)
const QUOTATION_MARKS: [(char, char); 3] = [('«', '»'), ('“', '”'), ('(', ')')];

/// Whether byte offset `at` of `text` stands inside a quotation, or an aside, that closes
/// later on its line: «dijo: «Amaranta. Soy Sor Amaranta».» is one sentence, what someone
/// said in it included, and so is «(Odo ganó la apuesta. Rook pagó en cobre.)», which split
/// at its first point was quoted with its parenthesis left open. A mark left open on its line
/// quotes nothing: the point ends its sentence.
fn inside_a_quotation(text: &str, at: usize) -> bool {
    let line_start = text[..at].rfind('\n').map_or(0, |newline| newline + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |newline| at + newline);
    let (before, after) = (&text[line_start..at], &text[at..line_end]);
    QUOTATION_MARKS.iter().any(|&(open, close)| {
        let depth = before.chars().filter(|&c| c == open).count() as isize
            - before.chars().filter(|&c| c == close).count() as isize;
        depth > 0 && after.contains(close)
    })
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

/// Where the next occurrence of one marker on a line is, at or after an offset, remembered:
/// each search starts past the previous find, so a line is scanned once per kind of marker,
/// however many markers it holds.
pub struct NextMarker {
    needle: &'static str,
    /// Where the last search started, if one ran.
    searched_from: Option<usize>,
    found: Option<usize>,
}

impl NextMarker {
    pub fn new(needle: &'static str) -> NextMarker {
        NextMarker { needle, searched_from: None, found: None }
    }

    /// The first `needle` in `line` at `from` or later.
    pub fn at_or_after(&mut self, line: &str, from: usize) -> Option<usize> {
        if self.searched_from.is_some_and(|searched_from| searched_from <= from) {
            match self.found {
                Some(found) if found >= from => return Some(found),
                None => return None,
                Some(_) => {}
            }
        }
        self.searched_from = Some(from);
        self.found = line.get(from..).and_then(|rest| rest.find(self.needle)).map(|offset| from + offset);
        self.found
    }
}

/// Stems shorter than this match only as the same word: «sal» (salt) is also the stem of
/// «salió» (went out).
const MIN_STEM_CHARS: usize = 4;

/// The Snowball stems of `word` in the campaigns' two languages, folded (accents and case),
/// those of at least [`MIN_STEM_CHARS`] characters: «expulsaron» and «expulsado» share
/// «expuls», "vanished" and "vanishes" share "vanish". The word is stemmed before it is
/// folded, since the Spanish stemmer reads its accents («regaló»).
pub fn stems(word: &str) -> Vec<String> {
    use rust_stemmers::{Algorithm, Stemmer};
    static SPANISH: std::sync::LazyLock<Stemmer> = std::sync::LazyLock::new(|| Stemmer::create(Algorithm::Spanish));
    static ENGLISH: std::sync::LazyLock<Stemmer> = std::sync::LazyLock::new(|| Stemmer::create(Algorithm::English));
    let lower = word.to_lowercase();
    let mut found: Vec<String> = Vec::with_capacity(2);
    for stemmer in [&*SPANISH, &*ENGLISH] {
        let stem = fold(&stemmer.stem(&lower));
        if stem.chars().count() >= MIN_STEM_CHARS && !found.contains(&stem) {
            found.push(stem);
        }
    }
    found
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
            "sentence_ends" => {
                let mut start = 0;
                let mut pieces = Vec::new();
                for end in sentence_ends(input) {
                    pieces.push(input[start..end].trim().to_string());
                    start = end;
                }
                pieces.join("|")
            }
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
            ("sentence_ends", "Uno. Dos? Tres", "Uno.|Dos?"),
            ("sentence_ends", "«¡Corred!» Y corrieron…", "«¡Corred!»|Y corrieron…"),
            ("sentence_ends", "Pagó 3.5 coronas (véase la sesión 3.) Fin", "Pagó 3.5 coronas (véase la sesión 3.)"),
            ("sentence_ends", "*Fin.* Nada", "*Fin.*"),
            ("sentence_ends", "sin final", ""),
            ("sentence_ends", "Beezer, Lt. Pike and Eugene left. Then", "Beezer, Lt. Pike and Eugene left."),
            (
                "sentence_ends",
                "Habló con el Sr. Quesada y la Dra. Vidal. Luego",
                "Habló con el Sr. Quesada y la Dra. Vidal.",
            ),
            ("sentence_ends", "(Sr. Quesada) Fin.", "(Sr. Quesada) Fin."),
        ];
        for (helper, input, expect) in cases {
            check(helper, input, expect);
        }
    }

    #[test]
    fn a_point_inside_a_quotation_or_an_aside_closed_on_its_line_ends_no_sentence() {
        fn ends(text: &str) -> Vec<String> {
            let mut start = 0;
            sentence_ends(text)
                .into_iter()
                .map(|end| {
                    let sentence = text[start..end].trim().to_string();
                    start = end;
                    sentence
                })
                .collect()
        }
        for (open, close) in QUOTATION_MARKS {
            let said = format!("Y dijo: {open}Amaranta. Soy Sor Amaranta{close}. Se fue.");
            assert_eq!(ends(&said), [format!("Y dijo: {open}Amaranta. Soy Sor Amaranta{close}."), "Se fue.".into()]);
            // Every point inside, whichever mark closes the quoted sentence.
            for point in SENTENCE_ENDS {
                let said = format!("Gritó {open}¡Corred{point} Ya{point}{close} Luego nada.");
                assert_eq!(ends(&said).len(), 2, "{said}");
            }
            // Open on its line and never closed there: the point ends its sentence.
            let unclosed = format!("Dijo {open}vete. Y se fue.\nEl día{close} acabó.");
            assert_eq!(
                ends(&unclosed),
                [format!("Dijo {open}vete."), "Y se fue.".into(), format!("El día{close} acabó.")]
            );
        }
        // An ellipsis before a word in lowercase trails off inside the sentence; before a
        // capital, or at a line's end, it ends it.
        assert_eq!(
            ends("They ran into an... ally, a dragonborn. Then… Nothing. Pero…\ny luego."),
            ["They ran into an... ally, a dragonborn.", "Then…", "Nothing.", "Pero…", "y luego."]
        );
        // A closed quotation before the point leaves it the end it was.
        assert_eq!(ends("Lo llamó «el Tuerto». Él calló."), ["Lo llamó «el Tuerto».", "Él calló."]);
        // An aside of two sentences is one, its parentheses closed.
        assert_eq!(
            ends("Fin. (Odo ganó la apuesta. Rook pagó en cobre.) Todos rieron."),
            ["Fin.", "(Odo ganó la apuesta. Rook pagó en cobre.)", "Todos rieron."]
        );
    }

    #[test]
    fn no_title_written_short_ends_a_sentence_wherever_it_stands() {
        // Every abbreviation, as written and after an opening mark, before a name.
        for abbreviation in TITLE_ABBREVIATIONS {
            for before in ["", "(", "«", "\"", "*"] {
                let text = format!("Llegó {before}{abbreviation} Quesada con el grupo. Luego");
                let ends = sentence_ends(&text);
                assert_eq!(ends.len(), 1, "{text}");
                assert_eq!(&text[..ends[0]], text.trim_end_matches(" Luego"), "{text}");
            }
        }
        // The same word without its point, or another word with one, still ends where it ends.
        assert!(ends_sentence("Quesada.") && ends_sentence("Lt!") && !ends_sentence("Lt."));
    }
    #[test]
    fn shortening_cuts_at_a_word_and_marks_the_cut() {
        assert_eq!(shorten("uno dos tres", 100), "uno dos tres");
        assert_eq!(shorten("uno dos, tres", 10), "uno dos…");
        assert_eq!(shorten("abcdefghij", 5), "abcd…");
        assert!(shorten(&"ñ".repeat(300), 200).chars().count() <= 200);
    }

    #[test]
    fn forms_of_one_word_share_a_stem_and_short_stems_do_not_count() {
        let shared = |a: &str, b: &str| stems(a).iter().any(|stem| stems(b).contains(stem));
        assert!(shared("expulsaron", "expulsado"));
        assert!(shared("desapareció", "desaparecido"));
        assert!(shared("regaló", "regala"));
        assert!(shared("vanished", "vanishes"));
        assert!(!shared("sal", "salió"), "{:?} {:?}", stems("sal"), stems("salió"));
        assert!(!shared("expulsaron", "regaló"));
    }
}
