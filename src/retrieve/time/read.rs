//! Reading the question: the folded words and the references they make («sesión 45»,
//! «la última», «sesiones 10 a 14», «después de X»), before any session is looked at.

use super::{MAX_SESSION_NUMBER, TimeReference};
use crate::text::fold;

/// The references in `question`, in order of appearance, each once.
pub fn parse_time_references(question: &str) -> Vec<TimeReference> {
    let words = tokens(question);
    let mut found: Vec<TimeReference> = Vec::new();
    let push = |found: &mut Vec<TimeReference>, reference: TimeReference| {
        if !found.contains(&reference) {
            found.push(reference);
        }
    };
    let comparison = is_comparison(&words);
    let mut at = 0;
    while at < words.len() {
        match read_reference(&words, at, comparison) {
            Some((references, next)) => {
                for reference in references {
                    push(&mut found, reference);
                }
                at = next.max(at + 1);
            }
            None => at += 1,
        }
    }
    found
}

/// A folded word, or a mark: `-` for a dash between numbers, `.` for any other punctuation
/// (where a phrase ends).
fn tokens(question: &str) -> Vec<String> {
    let folded = fold(question);
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, words: &mut Vec<String>| {
        if !word.is_empty() {
            words.push(std::mem::take(word));
        }
    };
    for c in folded.chars() {
        // Ordinal marks first: `º` and `ª` are letters to Unicode (`nº 29`, `3ª`).
        if c == 'º' || c == 'ª' || c == '°' {
            word.push('o');
        } else if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut words);
            match c {
                '-' | '–' | '—' => words.push("-".to_string()),
                '#' | '\'' | '’' => {}
                c if c.is_whitespace() => {}
                _ => words.push(".".to_string()),
            }
        }
    }
    flush(&mut word, &mut words);
    words
}

fn word<'a>(words: &'a [String], at: usize) -> &'a str {
    words.get(at).map(String::as_str).unwrap_or(".")
}

fn is_session_word(w: &str) -> bool {
    matches!(w, "sesion" | "sesiones" | "session" | "sessions" | "partida" | "partidas")
}

fn is_plural_session_word(w: &str) -> bool {
    matches!(w, "sesiones" | "sessions" | "partidas")
}

/// Where a phrase may end after «la 12»: punctuation, the end, or a word that joins clauses.
fn ends_phrase(w: &str) -> bool {
    matches!(
        w,
        "." | "-"
            | "y"
            | "e"
            | "o"
            | "u"
            | "a"
            | "al"
            | "hasta"
            | "ni"
            | "pero"
            | "and"
            | "or"
            | "to"
            | "que"
            | "de"
            | "del"
            | "en"
            | "con"
    )
}

/// A number: digits (with an ordinal ending: `3a`, `3o`, `3rd`, `12th`) or a number word.
/// A session's number after a session word: a [`number`], or zero («session 0», «la sesión
/// cero»: the session before the campaign starts, which many tables play). «session 0.5»
/// reads as session 0, as the notes label it.
fn session_number(w: &str) -> Option<u32> {
    match w {
        "0" | "cero" | "zero" => Some(0),
        _ => number(w),
    }
}

fn number(w: &str) -> Option<u32> {
    let digits: String = w.chars().take_while(char::is_ascii_digit).collect();
    if !digits.is_empty() {
        let suffix = &w[digits.len()..];
        if !matches!(suffix, "" | "a" | "o" | "st" | "nd" | "rd" | "th" | "na" | "ra" | "ta" | "va") {
            return None;
        }
        return digits.parse::<u32>().ok().filter(|&n| (1..=MAX_SESSION_NUMBER).contains(&n));
    }
    cardinal_word(w).or_else(|| ordinal_word(w))
}

fn cardinal_word(w: &str) -> Option<u32> {
    const WORDS: &[(&str, u32)] = &[
        ("una", 1),
        ("uno", 1),
        ("dos", 2),
        ("tres", 3),
        ("cuatro", 4),
        ("cinco", 5),
        ("seis", 6),
        ("siete", 7),
        ("ocho", 8),
        ("nueve", 9),
        ("diez", 10),
        ("once", 11),
        ("doce", 12),
        ("trece", 13),
        ("catorce", 14),
        ("quince", 15),
        ("dieciseis", 16),
        ("diecisiete", 17),
        ("dieciocho", 18),
        ("diecinueve", 19),
        ("veinte", 20),
        ("one", 1),
        ("two", 2),
        ("three", 3),
        ("four", 4),
        ("five", 5),
        ("six", 6),
        ("seven", 7),
        ("eight", 8),
        ("nine", 9),
        ("ten", 10),
        ("eleven", 11),
        ("twelve", 12),
        ("thirteen", 13),
        ("fourteen", 14),
        ("fifteen", 15),
        ("sixteen", 16),
        ("seventeen", 17),
        ("eighteen", 18),
        ("nineteen", 19),
        ("twenty", 20),
    ];
    WORDS.iter().find(|(word, _)| *word == w).map(|(_, n)| *n)
}

fn ordinal_word(w: &str) -> Option<u32> {
    const WORDS: &[(&str, u32)] = &[
        ("primera", 1),
        ("primero", 1),
        ("primer", 1),
        ("segunda", 2),
        ("segundo", 2),
        ("tercera", 3),
        ("tercero", 3),
        ("tercer", 3),
        ("cuarta", 4),
        ("cuarto", 4),
        ("quinta", 5),
        ("quinto", 5),
        ("sexta", 6),
        ("sexto", 6),
        ("septima", 7),
        ("septimo", 7),
        ("octava", 8),
        ("octavo", 8),
        ("novena", 9),
        ("noveno", 9),
        ("decima", 10),
        ("decimo", 10),
        ("undecima", 11),
        ("duodecima", 12),
        ("first", 1),
        ("second", 2),
        ("third", 3),
        ("fourth", 4),
        ("fifth", 5),
        ("sixth", 6),
        ("seventh", 7),
        ("eighth", 8),
        ("ninth", 9),
        ("tenth", 10),
        ("eleventh", 11),
        ("twelfth", 12),
    ];
    WORDS.iter().find(|(word, _)| *word == w).map(|(_, n)| *n)
}

/// «antes o después», «before or after», «qué pasó antes: …»: a question that compares two
/// events; neither is an anchor to step from.
fn is_comparison(words: &[String]) -> bool {
    words.windows(3).any(|w| {
        matches!(
            (w[0].as_str(), w[1].as_str(), w[2].as_str()),
            ("antes", "o", "despues")
                | ("despues", "o", "antes")
                | ("before", "or", "after")
                | ("after", "or", "before")
        )
    })
}

fn is_article(w: &str) -> bool {
    matches!(w, "la" | "las" | "el" | "los" | "the")
}

/// The session words and article that may stand between a connector and the next number:
/// «a la 14», «y la sesión 5», «to session 14».
fn skip_filler(words: &[String], mut at: usize) -> usize {
    while is_article(word(words, at))
        || is_session_word(word(words, at))
        || matches!(word(words, at), "numero" | "number" | "no" | "n")
    {
        at += 1;
    }
    at
}

/// What one kind of reference read at a word: `None` when the word starts none of that kind
/// (reading tries the next kind), `Some(None)` when it starts one that stops reading there.
type Read = Option<Option<(Vec<TimeReference>, usize)>>;

/// One reference starting at `at`, and where reading goes on.
fn read_reference(words: &[String], at: usize, comparison: bool) -> Option<(Vec<TimeReference>, usize)> {
    let w = word(words, at);
    if let Some(found) = read_appearance(words, at) {
        return Some(found);
    }
    if matches!(w, "entre" | "between") {
        return read_between(words, at);
    }
    if let Some(read) = read_relative(words, at) {
        return read;
    }
    if is_session_word(w) {
        return read_after_session_word(words, at);
    }
    if let Some(found) = read_ordinal_or_bare_number(words, at) {
        return Some(found);
    }
    // A question comparing two events has no anchor to step from.
    if comparison {
        return None;
    }
    read_event(words, at)
}

/// An entity's first or last appearance, which needs no session number.
fn read_appearance(words: &[String], at: usize) -> Option<(Vec<TimeReference>, usize)> {
    let w = word(words, at);
    let next = word(words, at + 1);

    // An entity's first or last appearance: «por primera vez», «la última vez», «first
    // time», «first met», «last seen».
    match (w, next) {
        ("primera", "vez" | "aparicion") | ("first", "time" | "appearance") => {
            Some((vec![TimeReference::FirstAppearance], at + 2))
        }
        ("ultima", "vez" | "aparicion") | ("last", "time" | "appearance" | "seen" | "saw") => {
            Some((vec![TimeReference::LastAppearance], at + 2))
        }
        ("first", "meet" | "met" | "see" | "saw" | "seen" | "appear" | "appeared" | "appears" | "meets") => {
            Some((vec![TimeReference::FirstAppearance], at + 2))
        }
        _ => None,
    }
}

/// A range between two sessions, or nothing when «entre» / «between» names none.
fn read_between(words: &[String], at: usize) -> Option<(Vec<TimeReference>, usize)> {
    // «entre la 3 y la 5», «entre las sesiones 3 y 5», «between sessions 3 and 5».
    let first_at = skip_filler(words, at + 1);
    let named_sessions = (at + 1..first_at).any(|i| is_session_word(word(words, i)) || is_article(word(words, i)))
        && words[at + 1..first_at].iter().any(|w| w != "the");
    if let Some(from) = number(word(words, first_at)).filter(|_| named_sessions)
        && matches!(word(words, first_at + 1), "y" | "e" | "and")
    {
        let second_at = skip_filler(words, first_at + 2);
        if let Some(to) = number(word(words, second_at)) {
            return Some((vec![TimeReference::Range { from, to }], second_at + 1));
        }
    }
    None
}

/// A session counted back from the last one, or the last few.
fn read_relative(words: &[String], at: usize) -> Read {
    let w = word(words, at);
    let next = word(words, at + 1);

    // Relative: «la última (sesión)», «la penúltima», «la antepenúltima», «las últimas tres
    // sesiones», «la sesión anterior», «hace dos sesiones», «last session», «two sessions
    // ago», «the session before last», «the previous session».
    if let Some(back) = match w {
        "ultima" | "ultimo" => Some(0),
        "penultima" | "penultimo" => Some(1),
        "antepenultima" | "antepenultimo" => Some(2),
        _ => None,
    } {
        if is_session_word(next) || next == "." && is_article(word(words, at.wrapping_sub(1))) {
            return Some(Some((vec![TimeReference::Back { sessions: back }], at + 2)));
        }
        return Some(None);
    }
    if matches!(w, "ultimas" | "ultimos") {
        if let Some(count) = number(next)
            && is_session_word(word(words, at + 2))
        {
            return Some(Some((vec![TimeReference::Last { count }], at + 3)));
        }
        if is_session_word(next) {
            return Some(Some((vec![TimeReference::Last { count: 3 }], at + 2)));
        }
        return Some(None);
    }
    if let Some(count) = number(w)
        && matches!(next, "ultimas" | "ultimos")
        && is_session_word(word(words, at + 2))
    {
        return Some(Some((vec![TimeReference::Last { count }], at + 3)));
    }
    if w == "hace"
        && let Some(count) = number(next)
        && is_session_word(word(words, at + 2))
    {
        return Some(Some((vec![TimeReference::Back { sessions: count.saturating_sub(1) }], at + 3)));
    }
    if matches!(w, "last" | "latest" | "previous" | "past") {
        if let Some(count) = number(next).filter(|_| is_plural_session_word(word(words, at + 2))) {
            return Some(Some((vec![TimeReference::Last { count }], at + 3)));
        }
        if is_session_word(next) {
            return Some(Some((vec![TimeReference::Back { sessions: 0 }], at + 2)));
        }
        return Some(None);
    }
    if let Some(count) = number(w)
        && is_plural_session_word(next)
        && word(words, at + 2) == "ago"
    {
        return Some(Some((vec![TimeReference::Back { sessions: count.saturating_sub(1) }], at + 3)));
    }
    if matches!(w, "session" | "sesion") && matches!(next, "before" | "antes") && word(words, at + 2) == "last" {
        return Some(Some((vec![TimeReference::Back { sessions: 1 }], at + 3)));
    }
    None
}

/// What follows a session word: its number (and a range or list), its neighbour, an ordinal.
fn read_after_session_word(words: &[String], at: usize) -> Option<(Vec<TimeReference>, usize)> {
    // A session word: «sesión 12», «sesiones 10 a 14», «sesión anterior (a la 12)»,
    // «session after 12», «sesión tercera».
    let mut number_at = at + 1;
    while matches!(word(words, number_at), "numero" | "number" | "no" | "n" | "nro") {
        number_at += 1;
    }
    if let Some(first) = session_number(word(words, number_at)) {
        let mut references = vec![TimeReference::Session { number: first }];
        let mut end = number_at + 1;
        // A range or a list: «10 a 14», «10-14», «10 to 14», «3 y 5», «3, 4 y 5».
        loop {
            let connector = word(words, end);
            let is_range = matches!(connector, "a" | "al" | "hasta" | "-" | "to" | "through" | "until");
            let is_list = matches!(connector, "y" | "e" | "and" | "o" | "or");
            if !is_range && !is_list {
                break;
            }
            let then_at = skip_filler(words, end + 1);
            let Some(then) = number(word(words, then_at)) else { break };
            if is_range {
                let from = match references.pop() {
                    Some(TimeReference::Session { number }) => number,
                    Some(other) => {
                        references.push(other);
                        break;
                    }
                    None => break,
                };
                references.push(TimeReference::Range { from, to: then });
            } else {
                references.push(TimeReference::Session { number: then });
            }
            end = then_at + 1;
        }
        return Some((references, end));
    }
    // «la sesión anterior», «la sesión pasada», «la sesión previa» (to tonight's): the
    // last one; «la sesión anterior a la 12»: the 11th; «la sesión siguiente a la 12».
    let relation = word(words, at + 1);
    let is_before = matches!(relation, "anterior" | "previa" | "before");
    let is_after = matches!(relation, "siguiente" | "posterior" | "after");
    if is_before || is_after {
        let target_at = skip_filler(words, at + 2 + usize::from(word(words, at + 2) == "a"));
        if let Some(target) = number(word(words, target_at)) {
            let number = if is_before { target.saturating_sub(1) } else { target + 1 };
            return Some((vec![TimeReference::Session { number }], target_at + 1));
        }
        if is_before && relation != "before" {
            return Some((vec![TimeReference::Back { sessions: 0 }], at + 2));
        }
    }
    if matches!(relation, "pasada" | "previous") {
        return Some((vec![TimeReference::Back { sessions: 0 }], at + 2));
    }
    if let Some(ordinal) = ordinal_word(relation) {
        return Some((vec![TimeReference::Session { number: ordinal }], at + 2));
    }
    None
}

/// «la anterior» alone, an ordinal, or «la 12»: a session without a session word after it.
fn read_ordinal_or_bare_number(words: &[String], at: usize) -> Option<(Vec<TimeReference>, usize)> {
    let w = word(words, at);
    let next = word(words, at + 1);

    // «la anterior» standing alone: the last session, from tonight's.
    if w == "anterior" && is_article(word(words, at.wrapping_sub(1))) && next == "." {
        return Some((vec![TimeReference::Back { sessions: 0 }], at + 1));
    }
    // «the previous session» is read above; «la partida pasada».

    // An ordinal: «la tercera sesión», «the first session», «3a sesión», «la primera» alone.
    let digits_with_ending = w.starts_with(|c: char| c.is_ascii_digit()) && w.chars().any(char::is_alphabetic);
    if let Some(ordinal) = ordinal_word(w).or_else(|| number(w).filter(|_| digits_with_ending)) {
        if is_session_word(next) {
            return Some((vec![TimeReference::Session { number: ordinal }], at + 2));
        }
        if is_article(word(words, at.wrapping_sub(1))) && next == "." && ordinal_word(w).is_some() {
            return Some((vec![TimeReference::Session { number: ordinal }], at + 1));
        }
    }

    // «la 12», «en la 12 y la 13», «de la 10 a la 14»: an article, a bare number, and nothing
    // that makes it a quantity («la 12 monedas» is not Spanish; «nivel 5» has no article).
    if matches!(w, "la" | "las")
        && let Some(first) = number(next).filter(|_| next.chars().all(|c| c.is_ascii_digit()))
        && ends_phrase(word(words, at + 2))
    {
        let after = word(words, at + 2);
        if matches!(after, "a" | "al" | "hasta" | "-") {
            let then_at = skip_filler(words, at + 3);
            if let Some(then) = number(word(words, then_at)) {
                return Some((vec![TimeReference::Range { from: first, to: then }], then_at + 1));
            }
        }
        return Some((vec![TimeReference::Session { number: first }], at + 2));
    }
    None
}

/// Before or after an event, or an explicit session's neighbour.
fn read_event(words: &[String], at: usize) -> Option<(Vec<TimeReference>, usize)> {
    let w = word(words, at);
    let next = word(words, at + 1);

    // Before or after an event: «(justo) después de X», «tras X», «antes de que …», «right
    // after leaving Z», «before Scanlan came back». An explicit session after the word is read
    // as that session's neighbour.
    let after = match w {
        "despues" if matches!(next, "de" | "del" | "que") => Some(true),
        "tras" if next != "." => Some(true),
        "antes" if matches!(next, "de" | "del" | "que") => Some(false),
        "after" if next != "." && next != "all" => Some(true),
        "before" if next != "." && next != "that" => Some(false),
        _ => None,
    }?;
    let target_at = skip_filler(words, at + 1 + usize::from(matches!(next, "de" | "del")));
    // «después de la sesión 12», «después de la 12»; not «después de los 3 días».
    let session_word_between = (at + 1..target_at).any(|i| is_session_word(word(words, i)));
    let bare_la =
        (at + 1..target_at).any(|i| matches!(word(words, i), "la" | "las")) && ends_phrase(word(words, target_at + 1));
    if let Some(target) = number(word(words, target_at)).filter(|_| session_word_between || bare_la) {
        let number = if after { target + 1 } else { target.saturating_sub(1) };
        return Some((vec![TimeReference::Session { number }], target_at + 1));
    }
    Some((vec![if after { TimeReference::AfterEvent } else { TimeReference::BeforeEvent }], at + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use TimeReference::*;

    /// Every rule: the question and the references it must yield.
    #[track_caller]
    fn check(question: &str, expected: &[TimeReference]) {
        assert_eq!(parse_time_references(question), expected, "{question}");
    }

    #[test]
    fn explicit_references() {
        let table: &[(&str, &[TimeReference])] = &[
            ("¿Qué pasó en la sesión 12?", &[Session { number: 12 }]),
            ("¿Qué pasó en la SESION 12?", &[Session { number: 12 }]),
            ("¿Y en la 12?", &[Session { number: 12 }]),
            ("What happened in session 12?", &[Session { number: 12 }]),
            ("Resume la sesión 33", &[Session { number: 33 }]),
            ("Resume la sesión nº 29", &[Session { number: 29 }]),
            ("¿Qué pasó en la sesión #7?", &[Session { number: 7 }]),
            ("¿Qué pasó en las sesiones 10 a 14?", &[Range { from: 10, to: 14 }]),
            ("sesiones 10-14", &[Range { from: 10, to: 14 }]),
            ("What happened in sessions 10 to 14?", &[Range { from: 10, to: 14 }]),
            ("¿Qué pasó entre la 3 y la 5?", &[Range { from: 3, to: 5 }]),
            ("¿Qué pasó entre las sesiones 3 y 5?", &[Range { from: 3, to: 5 }]),
            ("What happened between sessions 3 and 5?", &[Range { from: 3, to: 5 }]),
            ("¿Qué pasó de la 10 a la 14?", &[Range { from: 10, to: 14 }]),
            ("¿Qué pasó en las sesiones 3 y 5?", &[Session { number: 3 }, Session { number: 5 }]),
            ("¿Qué pasó en la 12 y en la 13?", &[Session { number: 12 }, Session { number: 13 }]),
            ("Compara la sesión 14 con la sesión 22", &[Session { number: 14 }, Session { number: 22 }]),
            ("¿Qué pasó en la sesión doce?", &[Session { number: 12 }]),
            ("What happened in session twelve?", &[Session { number: 12 }]),
            // Session zero, before the campaign starts; «0.5» as the notes label it.
            ("What happened in session 0?", &[Session { number: 0 }]),
            ("What happened in session 0.5?", &[Session { number: 0 }]),
            ("¿Qué pasó en la sesión cero?", &[Session { number: 0 }]),
        ];
        for (question, expected) in table {
            check(question, expected);
        }
    }

    #[test]
    fn ordinals() {
        let table: &[(&str, &[TimeReference])] = &[
            ("¿Qué pasó en la primera sesión?", &[Session { number: 1 }]),
            ("¿Qué pasó en la primera?", &[Session { number: 1 }]),
            ("¿Qué pasó en la tercera sesión?", &[Session { number: 3 }]),
            ("¿Qué pasó en la sesión tercera?", &[Session { number: 3 }]),
            ("¿Qué pasó en la 3ª sesión?", &[Session { number: 3 }]),
            ("What happened in the first session?", &[Session { number: 1 }]),
            ("What happened in the 3rd session?", &[Session { number: 3 }]),
            ("¿Cuándo vimos por primera vez a la Tejedora?", &[FirstAppearance]),
            ("When did we first meet Baika?", &[FirstAppearance]),
            ("¿Cuál fue la primera aparición de Baika?", &[FirstAppearance]),
        ];
        for (question, expected) in table {
            check(question, expected);
        }
    }

    #[test]
    fn relative_references() {
        let table: &[(&str, &[TimeReference])] = &[
            ("¿Qué pasó la última sesión?", &[Back { sessions: 0 }]),
            ("¿Qué pasó en la ÚLTIMA SESIÓN?", &[Back { sessions: 0 }]),
            ("¿Y en la última?", &[Back { sessions: 0 }]),
            ("¿Qué pasó en la sesión anterior?", &[Back { sessions: 0 }]),
            ("¿Qué pasó en la anterior?", &[Back { sessions: 0 }]),
            ("¿Qué pasó la sesión pasada?", &[Back { sessions: 0 }]),
            ("¿Qué pasó en la penúltima sesión?", &[Back { sessions: 1 }]),
            ("¿Y en la penúltima?", &[Back { sessions: 1 }]),
            ("¿Qué pasó en la antepenúltima sesión?", &[Back { sessions: 2 }]),
            ("¿Qué pasó hace dos sesiones?", &[Back { sessions: 1 }]),
            ("¿Qué pasó hace una sesión?", &[Back { sessions: 0 }]),
            ("Resume las últimas tres sesiones", &[Last { count: 3 }]),
            ("Resume las tres últimas sesiones", &[Last { count: 3 }]),
            ("What happened last session?", &[Back { sessions: 0 }]),
            ("What happened in the previous session?", &[Back { sessions: 0 }]),
            ("What happened in the session before last?", &[Back { sessions: 1 }]),
            ("What happened two sessions ago?", &[Back { sessions: 1 }]),
            ("Recap the last 3 sessions", &[Last { count: 3 }]),
            ("¿Qué pasó en la sesión anterior a la 12?", &[Session { number: 11 }]),
            ("¿Qué pasó en la sesión siguiente a la 12?", &[Session { number: 13 }]),
            ("¿Qué pasó después de la sesión 12?", &[Session { number: 13 }]),
            ("What happened after session 12?", &[Session { number: 13 }]),
            ("What happened in the session before session 12?", &[Session { number: 11 }]),
            ("¿Cuál fue la última vez que vimos a Baika?", &[LastAppearance]),
        ];
        for (question, expected) in table {
            check(question, expected);
        }
    }

    #[test]
    fn before_and_after_an_event() {
        let table: &[(&str, &[TimeReference])] = &[
            ("¿Qué hicimos justo después de la batalla del puerto?", &[AfterEvent]),
            ("¿Qué pasó después del incendio?", &[AfterEvent]),
            ("¿Qué hicieron tras el banquete?", &[AfterEvent]),
            ("¿Qué pasó antes de que conocieran a Yusuf?", &[BeforeEvent]),
            ("What did we do right after leaving the monastery?", &[AfterEvent]),
            ("What happened before Scanlan came back?", &[BeforeEvent]),
        ];
        for (question, expected) in table {
            check(question, expected);
        }
    }

    #[test]
    fn numbers_that_are_not_sessions() {
        let table: &[&str] = &[
            "¿Quién les pagó 12 monedas?",
            "¿Qué pasó cuando llegaron a nivel 5?",
            "¿Cuántas monedas costaban 12 barriles?",
            "¿Quién vive en la calle 12 de Puerto Salobre?",
            "¿Por qué la 12 monedas?",
            "How many of the 300 coins did the archduke pay?",
            "¿Qué pasó entre 3 y 5 de la tarde?",
            "Did they fight between 3 and 5 guards?",
            "¿Cuándo vimos por primera vez a la Tejedora? ¿Fue la primera vez?",
            "¿Qué pasó antes: el incendio o la caída de Gaspar?",
            "¿Conocieron a Yusuf antes o después de la traición de Dorian?",
            "Did the archduke come back before or after the party found the crown?",
            "¿Qué ocurrió primero, la deserción de Edric o el regreso del archiduque?",
            "La última vez que vieron al archiduque, ¿qué llevaba?",
            "¿Qué es la Corona de Sal?",
        ];
        for question in table {
            let found: Vec<TimeReference> = parse_time_references(question)
                .into_iter()
                .filter(|reference| !matches!(reference, FirstAppearance | LastAppearance))
                .collect();
            assert_eq!(found, [], "{question}");
        }
    }
}
