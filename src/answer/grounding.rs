//! Grounding: every sentence of a structured answer must be backed by the notes it cites.
//!
//! The schema already makes an invented *label* impossible; what a small model still invents
//! is the *content*: «La abadesa Celia Urquijo tiene 63 hijos [Ficha: Celia Urquijo]» (the
//! sheet says nothing of children), «El torneo de justas de Altamira fue ganado por Rook
//! [Sesión 20]» (session 20 never mentions Altamira). Both are unanswerable questions the
//! 1.5B answered instead of abstaining. Two checks catch them without a model:
//!
//! - **Numbers.** Every number a sentence states, in digits («63») or in words («trescientas»,
//!   "thirty"), must be in the notes it cites, in digits or in words of either language, or
//!   in a label shown (a session's number). Language-neutral, so it holds for an English
//!   answer over Spanish notes.
//! - **Names.** Every capitalised word inside a sentence (not its first word) must be in the
//!   notes it cites or in a label shown, or be a name or alias of an entity that the cited
//!   notes name some other way («Gaspar» for a session that says «el Tuerto»). Only checked
//!   when the sentence is written in the language of the notes it cites: a translated name
//!   ("the Salt Crown" for «la Corona de Sal») is not an invention.
//!
//! - **Counts.** A question that asks how many of a thing («¿Cuántos hijos tiene…?», "how many
//!   siblings…") is answered by a number, and that number must be stated *of that thing* in
//!   the notes it cites: the number (even «dos», "two") within [`COUNT_WINDOW`] words of the
//!   thing counted. «La abadesa tiene dos hijos [Ficha: Celia Urquijo]» passes the number
//!   check (the sheet says «dos» elsewhere) but the sheet never mentions children.
//!
//! A sentence that fails is dropped (and logged); an answer left with no sentence says the
//! notes do not hold the answer. Pure: text in, verdicts out. Whether a passage of the cited
//! notes says what the sentence says, by meaning, is [`super::support`]'s check, which needs
//! the embedder.

use std::collections::{HashMap, HashSet};

use crate::corpus::LabelLanguage;
use crate::lexicon::{is_stopword, language_of};
use crate::text::fold;

/// Labels one sentence may cite (the answer schema's `maxItems`).
pub const MAX_SOURCES: usize = 3;
/// A capitalised word shorter than this is not taken for a name («Al», «Yo»).
const MIN_NAME_CHARS: usize = 3;
/// Spelled numbers below this are not checked: «uno/una», «dos» and "two" are as often
/// articles or "both" («los dos hermanos») as counts.
const MIN_SPELLED_CHECKED: u32 = 3;
/// Numbers spelled out in the notes are recognised up to this value (and whole thousands
/// up to ten times it); larger counts are written in digits.
const MAX_SPELLED: u32 = 1000;
/// Words between a count and the thing counted: «tiene **tres** hijos», «**tres** de sus
/// hijos», «hijos: **tres**», "had **two** older siblings".
const COUNT_WINDOW: usize = 4;
/// The thing counted is matched by its first letters, so «hijo»/«hijos», «hermano»/«hermanos»,
/// "sibling"/"siblings" agree: the word less its last two letters, but at least this many.
const COUNTED_STEM_CHARS: usize = 4;

/// Why a sentence is not backed by the notes it cites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ungrounded {
    /// A number (as the sentence writes it) that the cited notes do not hold.
    Number(String),
    /// A name that the cited notes do not hold, under any of its entity's names.
    Name(String),
    /// A count (as the sentence writes it) that the cited notes do not state of the thing the
    /// question counts.
    Count { number: String, counted: String },
    /// No passage of the cited notes is near the sentence in meaning: the nearest one's
    /// cosine, and the floor it missed, in thousandths ([`super::support`]).
    Unsupported { nearest_milli: i32, floor_milli: i32 },
    /// No note shown holds enough of the sentence's words ([`super::provenance`]): the share
    /// its best notes hold, in hundredths.
    NotInNotes { held_percent: u32 },
    /// The sentence states a negation (as written) that no note it rests on states.
    Negation(String),
}

impl Ungrounded {
    /// Which check the sentence failed, naming nothing of it: what the logs say at warn.
    pub fn kind(&self) -> &'static str {
        match self {
            Ungrounded::Number(_) => "a number not in the notes it cites",
            Ungrounded::Name(_) => "a name not in the notes it cites",
            Ungrounded::Count { .. } => "a count the notes it cites do not give",
            Ungrounded::Unsupported { .. } => "no passage of the notes it cites says it",
            Ungrounded::NotInNotes { .. } => "no note shown holds its words",
            Ungrounded::Negation(_) => "a negation the notes do not state",
        }
    }
}

impl std::fmt::Display for Ungrounded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ungrounded::Number(number) => write!(f, "the number «{number}» is not in the notes it cites"),
            Ungrounded::Name(name) => write!(f, "the name «{name}» is not in the notes it cites"),
            Ungrounded::Count { number, counted } => {
                write!(f, "the notes it cites do not give «{number}» as a count of «{counted}»")
            }
            Ungrounded::Unsupported { nearest_milli, floor_milli } => write!(
                f,
                "no passage of the notes it cites says it (nearest cosine {:.3}, floor {:.3})",
                f64::from(*nearest_milli) / 1000.0,
                f64::from(*floor_milli) / 1000.0
            ),
            Ungrounded::NotInNotes { held_percent } => {
                write!(f, "the notes shown hold {held_percent} % of its words at best")
            }
            Ungrounded::Negation(word) => write!(f, "it says «{word}» where its notes do not"),
        }
    }
}

/// The campaign's names, grouped by entity (its name and aliases): a name is backed by a
/// note that names its entity any other way.
#[derive(Debug, Clone, Default)]
pub struct NameBook {
    /// Each entity's names and aliases, folded, words joined by one space.
    groups: Vec<Vec<String>>,
    /// Folded word → the groups whose names hold it.
    by_word: HashMap<String, Vec<usize>>,
}

impl NameBook {
    /// `entities`: each entity's name followed by its aliases.
    pub fn new<'a>(entities: impl IntoIterator<Item = Vec<&'a str>>) -> NameBook {
        let mut book = NameBook::default();
        for names in entities {
            let group: Vec<String> =
                names.iter().map(|name| words(name).collect::<Vec<_>>().join(" ")).filter(|n| !n.is_empty()).collect();
            let idx = book.groups.len();
            for word in group.iter().flat_map(|name| name.split(' ')) {
                let entry = book.by_word.entry(word.to_string()).or_default();
                if !entry.contains(&idx) {
                    entry.push(idx);
                }
            }
            book.groups.push(group);
        }
        book
    }
}

/// The notes a sentence may rest on, folded once.
#[derive(Debug, Clone)]
pub struct CitedNotes {
    /// Label → its notes' text (fragments in full, or their summaries), folded into words
    /// joined by single spaces and padded with one space at each end.
    by_label: HashMap<String, String>,
    /// The language each label's notes are written in.
    language: HashMap<String, LabelLanguage>,
    /// Every label shown, folded the same way: a session's number or a sheet's name.
    labels: String,
    /// The labels shown, in the order shown (where a misattributed sentence is looked up).
    order: Vec<String>,
    /// What the question counts («hijos» in «¿Cuántos hijos…?»), folded, when it asks how many.
    counted: Option<String>,
}

impl CitedNotes {
    /// `notes`: (label, text) pairs, a label possibly several times (its parts);
    /// `shown_labels`: every label the model was shown.
    pub fn new<'a>(notes: impl IntoIterator<Item = (&'a str, &'a str)>, shown_labels: &[String]) -> CitedNotes {
        let mut raw: HashMap<String, String> = HashMap::new();
        for (label, text) in notes {
            let entry = raw.entry(label.to_string()).or_default();
            entry.push('\n');
            entry.push_str(text);
        }
        let language = raw.iter().map(|(label, text)| (label.clone(), language_of(text))).collect();
        let by_label = raw.into_iter().map(|(label, text)| (label, padded_words(&text))).collect();
        CitedNotes {
            by_label,
            language,
            labels: padded_words(&shown_labels.join(" ")),
            order: shown_labels.to_vec(),
            counted: None,
        }
    }

    /// Whether every note of `sources` is written in `language` (a label with no text here is
    /// in none): what decides whether a sentence's words can be looked up in its notes, and
    /// which of the support floors applies (`super::support`).
    pub fn all_in_language(&self, sources: &[String], language: LabelLanguage) -> bool {
        sources.iter().all(|label| self.language.get(label) == Some(&language))
    }

    /// `label`'s notes as folded words joined by single spaces (padded), if shown here.
    pub(super) fn words_of(&self, label: &str) -> Option<&str> {
        self.by_label.get(label).map(String::as_str)
    }

    /// The labels shown, in the order shown.
    pub(super) fn order(&self) -> &[String] {
        &self.order
    }

    /// Checks counts against what `question` counts, when it asks how many of something.
    pub fn for_question(mut self, question: &str) -> CitedNotes {
        self.counted = counted_in(question);
        self
    }

    /// The sources that back `sentence`: its own when they do; else its own plus the notes
    /// shown that hold what they lack (a small model often cites the session it read last
    /// for a fact of another one: «100 coronas por adelantado» is in session 1, not the 9 it
    /// cited), at most [`MAX_SOURCES`] in all, as the schema allows; `Err` with the first
    /// reason when no note shown backs it.
    pub fn attribute(&self, sentence: &str, sources: &[String], names: &NameBook) -> Result<Vec<String>, Ungrounded> {
        let mut sources = sources.to_vec();
        loop {
            let Some(problem) = self.check(sentence, &sources, names) else { return Ok(sources) };
            if sources.len() >= MAX_SOURCES {
                return Err(problem);
            }
            let with = |label: &String| {
                let mut more = sources.clone();
                more.push(label.clone());
                more
            };
            let candidates: Vec<&String> = self
                .order
                .iter()
                .filter(|label| !sources.contains(label) && self.by_label.contains_key(*label))
                .collect();
            // A note that backs the whole sentence with the others; else one that at least
            // backs what is missing now (the next round looks for the rest).
            let whole = candidates.iter().find(|label| self.check(sentence, &with(label), names).is_none());
            let progress =
                || candidates.iter().find(|label| self.check(sentence, &with(label), names) != Some(problem.clone()));
            match whole.or_else(progress) {
                Some(label) => sources.push((*label).clone()),
                None => return Err(problem),
            }
        }
    }

    /// The first reason `sentence` (its text, the labels it cites) is not backed by the
    /// notes it cites; `None` when it is.
    pub fn check(&self, sentence: &str, sources: &[String], names: &NameBook) -> Option<Ungrounded> {
        let cited: Vec<&str> =
            sources.iter().filter_map(|label| self.by_label.get(label).map(String::as_str)).collect();
        // A label with no text here (nothing to check against) is taken at its word.
        if cited.len() < sources.len() {
            return None;
        }
        let holds = |phrase: &str| {
            let needle = format!(" {phrase} ");
            self.labels.contains(&needle) || cited.iter().any(|text| text.contains(&needle))
        };
        for number in numbers_in(sentence) {
            if !number_forms(number.value).iter().any(|form| holds(form)) {
                return Some(Ungrounded::Number(number.written));
            }
        }
        let sentence_language = language_of(sentence);
        let same_language = self.all_in_language(sources, sentence_language);
        // The thing counted is a word of the question, matched in the notes' words: only
        // when the sentence is in the notes' language («siblings» is not found as «hermanos»).
        if same_language && let Some(counted) = &self.counted {
            // A session's number («en la sesión 12») is not a count.
            let in_labels = |number: &StatedNumber| self.labels.contains(&format!(" {} ", number.value));
            for number in counts_in(sentence).into_iter().filter(|number| !in_labels(number)) {
                let forms = number_forms(number.value);
                if !cited.iter().any(|text| states_count_of(text, &forms, counted)) {
                    return Some(Ungrounded::Count { number: number.written, counted: counted.clone() });
                }
            }
        }
        if same_language {
            for name in names_in(sentence) {
                let folded = fold(&name);
                let backed = holds(&folded)
                    || names.by_word.get(&folded).is_some_and(|groups| {
                        groups.iter().any(|&group| names.groups[group].iter().any(|alias| holds(alias)))
                    });
                if !backed {
                    return Some(Ungrounded::Name(name));
                }
            }
        }
        None
    }
}

/// What a how-many question counts: the word after «cuántos/cuántas» or "how many", folded;
/// `None` for any other question («¿Cuánto pagó…?» asks an amount, not a count of a thing).
fn counted_in(question: &str) -> Option<String> {
    let words: Vec<String> = words(question).collect();
    let after = words.iter().enumerate().find_map(|(idx, word)| match word.as_str() {
        "cuantos" | "cuantas" => words.get(idx + 1),
        "how" if words.get(idx + 1).is_some_and(|next| next == "many") => words.get(idx + 2),
        _ => None,
    })?;
    (!is_stopword(after) && after.chars().all(char::is_alphabetic)).then(|| after.clone())
}

/// The numbers a sentence gives as an answer to a count: every number it states, «dos» and
/// "two" included (the floor of [`numbers_in`] is for sentences that do not answer a count).
fn counts_in(sentence: &str) -> Vec<StatedNumber> {
    let spelled = spelled_values();
    let mut found: Vec<StatedNumber> = numbers_in(sentence);
    for word in sentence.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()) {
        if let Some(&value) = spelled.get(fold(word).as_str())
            && (2..MIN_SPELLED_CHECKED).contains(&value)
        {
            found.push(StatedNumber { written: word.to_string(), value: u64::from(value) });
        }
    }
    found
}

/// Whether `padded` (a note's [`padded_words`]) states one of `forms` within [`COUNT_WINDOW`]
/// words of a word that starts like `counted`.
fn states_count_of(padded: &str, forms: &[String], counted: &str) -> bool {
    let stem: String = {
        let n = counted.chars().count();
        counted.chars().take(n.saturating_sub(2).max(COUNTED_STEM_CHARS)).collect()
    };
    let note: Vec<&str> = padded.split(' ').filter(|word| !word.is_empty()).collect();
    forms.iter().any(|form| {
        let form: Vec<&str> = form.split(' ').collect();
        (0..note.len().saturating_sub(form.len() - 1)).filter(|&at| note[at..at + form.len()] == form[..]).any(|at| {
            let from = at.saturating_sub(COUNT_WINDOW);
            let to = (at + form.len() + COUNT_WINDOW).min(note.len());
            note[from..to].iter().any(|word| word.starts_with(&stem))
        })
    })
}

/// Folded words (letters and digits), in order.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()).map(fold)
}

/// ` w1 w2 … ` : whole-word and whole-phrase search by `contains(" phrase ")`. Digit groups
/// written with separators («1.000», "1,000») are joined first.
pub(super) fn padded_words(text: &str) -> String {
    let joined = join_digit_groups(text);
    let mut padded = String::with_capacity(joined.len() + 2);
    padded.push(' ');
    for word in words(&joined) {
        padded.push_str(&word);
        padded.push(' ');
    }
    padded
}

/// «1.000» and "1,000" → «1000»: a separator between a digit and exactly three digits.
fn join_digit_groups(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for (i, &c) in chars.iter().enumerate() {
        let separator = matches!(c, '.' | ',')
            && i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.get(i + 1..i + 4).is_some_and(|next| next.iter().all(char::is_ascii_digit))
            && !chars.get(i + 4).is_some_and(char::is_ascii_digit);
        if !separator {
            out.push(c);
        }
    }
    out
}

/// A number a sentence states.
#[derive(Debug, PartialEq, Eq)]
struct StatedNumber {
    written: String,
    value: u64,
}

/// The numbers `sentence` states: runs of digits, and single spelled-out numbers of at least
/// [`MIN_SPELLED_CHECKED`] in either language.
fn numbers_in(sentence: &str) -> Vec<StatedNumber> {
    let joined = join_digit_groups(sentence);
    let spelled = spelled_values();
    let mut found = Vec::new();
    for word in joined.split(|c: char| !c.is_alphanumeric()).filter(|word| !word.is_empty()) {
        if word.chars().all(|c| c.is_ascii_digit()) {
            if let Ok(value) = word.parse::<u64>() {
                found.push(StatedNumber { written: word.to_string(), value });
            }
        } else if let Some(&value) = spelled.get(fold(word).as_str())
            && value >= MIN_SPELLED_CHECKED
        {
            found.push(StatedNumber { written: word.to_string(), value: u64::from(value) });
        }
    }
    found
}

/// How a value may be written in the notes: digits, and its Spanish and English words.
pub(crate) fn number_forms(value: u64) -> Vec<String> {
    let mut forms = vec![value.to_string()];
    if let Ok(small) = u32::try_from(value) {
        forms.extend(spanish_words(small));
        forms.extend(english_words(small));
    }
    forms
}

/// The words that join a spelled number's parts and say no number: «treinta y dos», "a
/// hundred and five".
const NUMBER_JOINERS: [&str; 3] = ["y", "and", "a"];

/// Whether a folded word is a word of a spelled-out number from 2 to [`MAX_SPELLED`], in
/// either language, as [`number_forms`] writes them («dos», «veintiun», «ciento», "twenty",
/// "hundred"): not «uno», «una», "one" (articles and pronouns as often as numbers), not the
/// [`NUMBER_JOINERS`], not «once» (Spanish 11, and the English adverb).
pub(crate) fn is_number_word(folded_word: &str) -> bool {
    static WORDS: std::sync::LazyLock<HashSet<String>> = std::sync::LazyLock::new(|| {
        let words_of = |values: std::ops::RangeInclusive<u64>| -> HashSet<String> {
            let forms = values.flat_map(|value| number_forms(value).into_iter().skip(1));
            forms.flat_map(|form| form.split(' ').map(str::to_string).collect::<Vec<_>>()).collect()
        };
        let not_counting = words_of(0..=1);
        let mut words = words_of(2..=u64::from(MAX_SPELLED));
        words.retain(|word| !not_counting.contains(word) && !NUMBER_JOINERS.contains(&word.as_str()) && word != "once");
        words
    });
    WORDS.contains(folded_word)
}

/// Single spelled-out words and their values, both languages (for the sentence side).
fn spelled_values() -> &'static HashMap<&'static str, u32> {
    static VALUES: std::sync::LazyLock<HashMap<&'static str, u32>> = std::sync::LazyLock::new(|| {
        let mut values = HashMap::new();
        for (value, word) in SPANISH_UNITS.iter().enumerate().chain(ENGLISH_UNITS.iter().enumerate()) {
            values.insert(*word, value as u32);
        }
        for (tens, word) in SPANISH_TENS.iter().enumerate().chain(ENGLISH_TENS.iter().enumerate()) {
            if !word.is_empty() {
                values.insert(*word, (tens as u32 + 3) * 10);
            }
        }
        for (hundreds, word) in SPANISH_HUNDREDS.iter().enumerate() {
            values.insert(*word, (hundreds as u32 + 2) * 100);
        }
        for (hundreds, word) in SPANISH_HUNDREDS_FEMININE.iter().enumerate() {
            values.insert(*word, (hundreds as u32 + 2) * 100);
        }
        values.insert("cien", 100);
        // Spanish 11 and the English adverb: "he once saw her" states no number.
        values.remove("once");
        values
    });
    &VALUES
}

/// 0–29 (folded: «dieciseis», «veintidos»).
const SPANISH_UNITS: [&str; 30] = [
    "cero",
    "uno",
    "dos",
    "tres",
    "cuatro",
    "cinco",
    "seis",
    "siete",
    "ocho",
    "nueve",
    "diez",
    "once",
    "doce",
    "trece",
    "catorce",
    "quince",
    "dieciseis",
    "diecisiete",
    "dieciocho",
    "diecinueve",
    "veinte",
    "veintiuno",
    "veintidos",
    "veintitres",
    "veinticuatro",
    "veinticinco",
    "veintiseis",
    "veintisiete",
    "veintiocho",
    "veintinueve",
];
/// 30, 40, … 90.
const SPANISH_TENS: [&str; 7] = ["treinta", "cuarenta", "cincuenta", "sesenta", "setenta", "ochenta", "noventa"];
/// 200, 300, … 900.
const SPANISH_HUNDREDS: [&str; 8] = [
    "doscientos",
    "trescientos",
    "cuatrocientos",
    "quinientos",
    "seiscientos",
    "setecientos",
    "ochocientos",
    "novecientos",
];
const SPANISH_HUNDREDS_FEMININE: [&str; 8] = [
    "doscientas",
    "trescientas",
    "cuatrocientas",
    "quinientas",
    "seiscientas",
    "setecientas",
    "ochocientas",
    "novecientas",
];
/// 0–19.
const ENGLISH_UNITS: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
/// 30, 40, … 90 (20 is separate: "twenty").
const ENGLISH_TENS: [&str; 7] = ["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"];

/// The Spanish spellings of `value` (folded, words joined by a space), masculine and
/// feminine where they differ («una», «veintiuna», «doscientas»).
fn spanish_words(value: u32) -> Vec<String> {
    fn below_hundred(value: u32) -> Vec<String> {
        match value {
            1 => vec!["uno".into(), "una".into(), "un".into()],
            21 => vec!["veintiuno".into(), "veintiuna".into(), "veintiun".into()],
            0..=29 => vec![SPANISH_UNITS[value as usize].to_string()],
            _ => {
                let tens = SPANISH_TENS[(value / 10 - 3) as usize];
                match value % 10 {
                    0 => vec![tens.to_string()],
                    unit => below_hundred(unit).into_iter().map(|u| format!("{tens} y {u}")).collect(),
                }
            }
        }
    }
    match value {
        0..=99 => below_hundred(value),
        100 => vec!["cien".into(), "ciento".into()],
        101..=999 => {
            let (hundreds, rest) = (value / 100, value % 100);
            let heads: Vec<&str> = match hundreds {
                1 => vec!["ciento"],
                h => vec![SPANISH_HUNDREDS[(h - 2) as usize], SPANISH_HUNDREDS_FEMININE[(h - 2) as usize]],
            };
            let tails = if rest == 0 { vec![String::new()] } else { below_hundred(rest) };
            heads
                .iter()
                .flat_map(|head| tails.iter().map(move |tail| format!("{head} {tail}").trim_end().to_string()))
                .collect()
        }
        1000 => vec!["mil".into()],
        _ if value.is_multiple_of(1000) && value <= MAX_SPELLED * 10 => {
            below_hundred(value / 1000).into_iter().map(|thousands| format!("{thousands} mil")).collect()
        }
        _ => Vec::new(),
    }
}

/// The English spellings of `value` (folded; "twenty-one" is two words once folded).
fn english_words(value: u32) -> Vec<String> {
    fn below_hundred(value: u32) -> String {
        match value {
            0..=19 => ENGLISH_UNITS[value as usize].to_string(),
            20..=29 => match value % 10 {
                0 => "twenty".to_string(),
                unit => format!("twenty {}", ENGLISH_UNITS[unit as usize]),
            },
            _ => {
                let tens = ENGLISH_TENS[(value / 10 - 3) as usize];
                match value % 10 {
                    0 => tens.to_string(),
                    unit => format!("{tens} {}", ENGLISH_UNITS[unit as usize]),
                }
            }
        }
    }
    match value {
        0..=99 => vec![below_hundred(value)],
        100..=999 => {
            let (hundreds, rest) = (value / 100, value % 100);
            let mut heads = vec![format!("{} hundred", ENGLISH_UNITS[hundreds as usize])];
            if hundreds == 1 {
                heads.push("a hundred".into());
            }
            if rest == 0 {
                return heads;
            }
            let tail = below_hundred(rest);
            heads.iter().flat_map(|head| [format!("{head} {tail}"), format!("{head} and {tail}")]).collect()
        }
        _ if value.is_multiple_of(1000) && value <= MAX_SPELLED * 10 => {
            let mut forms = vec![format!("{} thousand", below_hundred(value / 1000))];
            if value == 1000 {
                forms.push("a thousand".into());
            }
            forms
        }
        _ => Vec::new(),
    }
}

/// The capitalised words inside `sentence` that read as names: not its first word, not the
/// first word after a full stop, colon or opening quote, not a stopword.
pub(super) fn names_in(sentence: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut seen = HashSet::new();
    let mut opens_sentence = true;
    let mut word = String::new();
    let mut flush = |word: &mut String, opens_sentence: bool| {
        if !word.is_empty() {
            let capitalised = word.chars().next().is_some_and(char::is_uppercase);
            let folded = fold(word);
            if capitalised
                && !opens_sentence
                && word.chars().count() >= MIN_NAME_CHARS
                && !word.chars().any(|c| c.is_ascii_digit())
                && !is_stopword(&folded)
                && seen.insert(folded)
            {
                names.push(word.clone());
            }
            word.clear();
        }
    };
    for c in sentence.chars() {
        if c.is_alphanumeric() {
            word.push(c);
            continue;
        }
        let had_word = !word.is_empty();
        flush(&mut word, opens_sentence);
        if had_word {
            opens_sentence = false;
        }
        if matches!(c, '.' | '!' | '?' | '¿' | '¡' | ':' | ';' | '«' | '"' | '“' | '(' | '—' | '\n') {
            opens_sentence = true;
        }
    }
    flush(&mut word, opens_sentence);
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHEET: &str = "# Celia Urquijo\nAbadesa de Piedraluz. Severa, culta, guarda la biblioteca del monasterio desde hace treinta años.";
    const SESSION_20: &str =
        "El grupo llega a Puerto Salobre. Rook compra trescientas flechas y el Tuerto paga 1.000 coronas por el barco.";
    const SESSION_22: &str = "El Tuerto cayó con el alfanje todavía en la mano, defendiendo la puerta del Pósito.";

    fn notes() -> CitedNotes {
        let shown: Vec<String> =
            ["Ficha: Celia Urquijo", "Sesión 20", "Sesión 22", "Sesión 27"].iter().map(|l| l.to_string()).collect();
        CitedNotes::new([("Ficha: Celia Urquijo", SHEET), ("Sesión 20", SESSION_20), ("Sesión 22", SESSION_22)], &shown)
    }

    fn names() -> NameBook {
        NameBook::new([vec!["Gaspar Roldán", "el Tuerto"], vec!["Celia Urquijo", "la abadesa"]])
    }

    fn check(sentence: &str, sources: &[&str]) -> Option<Ungrounded> {
        let sources: Vec<String> = sources.iter().map(|s| s.to_string()).collect();
        notes().check(sentence, &sources, &names())
    }

    #[test]
    fn the_inventions_the_small_model_made_are_caught() {
        // The two unanswerables, as the 1.5B answered them.
        assert_eq!(
            check("La abadesa Celia Urquijo tiene 63 hijos.", &["Ficha: Celia Urquijo"]),
            Some(Ungrounded::Number("63".into()))
        );
        assert_eq!(
            check("El torneo de justas de Altamira fue ganado por Rook.", &["Sesión 20"]),
            Some(Ungrounded::Name("Altamira".into()))
        );
        // A spelled-out count that is not there either.
        assert_eq!(
            check("Celia tiene cuarenta discípulos.", &["Ficha: Celia Urquijo"]),
            Some(Ungrounded::Number("cuarenta".into()))
        );
    }

    #[test]
    fn numbers_are_backed_in_digits_or_words_of_either_language() {
        let table: &[(&str, &[&str])] = &[
            ("Guarda la biblioteca desde hace 30 años.", &["Ficha: Celia Urquijo"]),
            ("Rook compró 300 flechas.", &["Sesión 20"]),
            ("The one-eyed paid 1,000 crowns for the ship.", &["Sesión 20"]),
            ("El Tuerto pagó mil coronas.", &["Sesión 20"]),
            ("She has kept the library for thirty years.", &["Ficha: Celia Urquijo"]),
            // A session's number is in its label; «los dos» is not a count.
            ("En la sesión 27 vuelven al puerto, y los dos hermanos callan.", &["Sesión 20"]),
        ];
        for (sentence, sources) in table {
            assert_eq!(check(sentence, sources), None, "{sentence}");
        }
        assert_eq!(check("Rook compró 301 flechas.", &["Sesión 20"]), Some(Ungrounded::Number("301".into())));
    }

    #[test]
    fn names_are_backed_by_the_note_or_by_another_name_of_their_entity() {
        // The session says «el Tuerto»; «Gaspar» is his name.
        assert_eq!(check("Gaspar cayó defendiendo la puerta del Pósito.", &["Sesión 22"]), None);
        assert_eq!(check("Al final, Gaspar Roldán cayó en el Pósito.", &["Sesión 22"]), None);
        // A name from another note is not backed by this one.
        assert_eq!(
            check("Gaspar cayó en la puerta, y Dorian lo vio.", &["Sesión 22"]),
            Some(Ungrounded::Name("Dorian".into()))
        );
        // The first word of a sentence, after a colon or a quote, is not a name by its capital.
        assert_eq!(check("Cayó con el alfanje en la mano: Defendía la puerta.", &["Sesión 22"]), None);
        // An English sentence over Spanish notes: names are not checked (translations).
        assert_eq!(check("The Salt Crown was never mentioned by the One-Eyed.", &["Sesión 22"]), None);
        // Two sources: either may back it.
        assert_eq!(check("Rook compró flechas y el Tuerto cayó en el Pósito.", &["Sesión 20", "Sesión 22"]), None);
    }

    #[test]
    fn a_fact_cited_to_the_wrong_note_is_attributed_to_the_note_shown_that_holds_it() {
        let sources = |labels: &[&str]| labels.iter().map(|l| l.to_string()).collect::<Vec<_>>();
        // «1000 coronas» is in session 20, not in the session 22 the model cited.
        assert_eq!(
            notes().attribute("El Tuerto pagó 1000 coronas.", &sources(&["Sesión 22"]), &names()),
            Ok(sources(&["Sesión 22", "Sesión 20"]))
        );
        // Backed as cited: unchanged.
        assert_eq!(
            notes().attribute("Rook compró flechas.", &sources(&["Sesión 20"]), &names()),
            Ok(sources(&["Sesión 20"]))
        );
        // Two things from two other notes: both added.
        assert_eq!(
            notes().attribute(
                "Rook pagó 1000 coronas y la abadesa guarda treinta años la biblioteca.",
                &sources(&["Sesión 22"]),
                &names()
            ),
            Ok(sources(&["Sesión 22", "Sesión 20", "Ficha: Celia Urquijo"]))
        );
        // In no note shown: not backed.
        assert_eq!(
            notes().attribute("La abadesa tiene 63 hijos.", &sources(&["Ficha: Celia Urquijo"]), &names()),
            Err(Ungrounded::Number("63".into()))
        );
    }

    #[test]
    fn a_count_must_be_stated_of_the_thing_the_question_counts() {
        let family = "Ficha: Nela Nieto";
        let nela = "# Nela Nieto\nHija del Tuerto. Tiene dos hermanos mayores, los dos marineros, y vive en los Muelles desde hace veinte años con sus tres barcas.";
        let shown: Vec<String> = ["Ficha: Celia Urquijo", family, "Sesión 12"].iter().map(|l| l.to_string()).collect();
        let notes = |question: &str| {
            CitedNotes::new([("Ficha: Celia Urquijo", SHEET), (family, nela)], &shown).for_question(question)
        };
        let sources = |labels: &[&str]| labels.iter().map(|l| l.to_string()).collect::<Vec<_>>();
        let counted = "¿Cuántos hijos tiene la abadesa Celia Urquijo?";
        // The unanswerable as the 1.5B answered it: «dos» is in no count of children.
        assert_eq!(
            notes(counted).check(
                "La abadesa Celia Urquijo tiene dos hijos: Sor Amaranta y Odo.",
                &sources(&["Ficha: Celia Urquijo"]),
                &names()
            ),
            Some(Ungrounded::Count { number: "dos".into(), counted: "hijos".into() })
        );
        // Not rescued by a note that says «dos» of something else.
        assert_eq!(
            notes(counted).attribute("Celia tiene dos hijos.", &sources(&["Ficha: Celia Urquijo"]), &names()),
            Err(Ungrounded::Count { number: "dos".into(), counted: "hijos".into() })
        );
        let table: &[(&str, &str, Option<Ungrounded>)] = &[
            // Stated of the thing, in words or digits, in either language, singular or plural.
            ("¿Cuántos hermanos tiene Nela?", "Nela tiene dos hermanos mayores.", None),
            // Across languages the thing counted cannot be found by its word: not checked.
            (
                "How many siblings does Nela have?",
                "Nela has 7 older brothers, and they are all at sea.",
                Some(Ungrounded::Number("7".into())),
            ),
            ("How many siblings does Nela have?", "Nela has two older brothers, and they are both at sea.", None),
            (
                "¿Cuántos hermanos tiene Nela?",
                "Nela tiene tres hermanos.",
                Some(Ungrounded::Count { number: "tres".into(), counted: "hermanos".into() }),
            ),
            // A session's number is not a count.
            ("¿Cuántos hermanos tiene Nela?", "En la sesión 12 Nela habla de sus dos hermanos.", None),
            // Not a count question: the usual number check only («dos» is not checked).
            ("¿Qué sabemos de Nela?", "Nela tiene dos primos.", None),
            ("¿Cuánto tiempo lleva Nela en los Muelles?", "Nela vive en los Muelles desde hace veinte años.", None),
        ];
        for (question, sentence, expected) in table {
            assert_eq!(
                &notes(question).check(sentence, &sources(&[family]), &names()),
                expected,
                "{question} / {sentence}"
            );
        }
        assert_eq!(counted_in("¿Cuántas de ellas volvieron?"), None);
        assert_eq!(counted_in("How many ships did they sink?").as_deref(), Some("ships"));
    }

    #[test]
    fn spellings_cover_the_usual_forms() {
        assert!(spanish_words(300).contains(&"trescientas".to_string()));
        assert!(spanish_words(32).contains(&"treinta y dos".to_string()));
        assert!(spanish_words(121).contains(&"ciento veintiuna".to_string()));
        assert!(spanish_words(5000).contains(&"cinco mil".to_string()));
        assert!(english_words(21).contains(&"twenty one".to_string()));
        assert!(english_words(120).contains(&"one hundred and twenty".to_string()));
        assert_eq!(
            numbers_in("pagó 1.500 coronas y tres caballos"),
            [StatedNumber { written: "1500".into(), value: 1500 }, StatedNumber { written: "tres".into(), value: 3 }]
        );
        assert_eq!(names_in("«Hola», dijo Rook a la Garza en Puerto Salobre."), ["Rook", "Garza", "Puerto", "Salobre"]);
    }
}
