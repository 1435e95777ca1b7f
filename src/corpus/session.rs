//! Session numbers: from a header line inside a chronicle, or from a file name.
//!
//! Both work on accent-folded, lowercased text, so `Sesión`, `SESION` and `sesion` are one
//! word, and English `Session` is accepted beside it. Both are conservative: a session
//! mentioned in running text ("ya lo vimos en la sesión 5") is not a header.

use std::sync::LazyLock;

use regex::Regex;

use super::SessionNumber;
use super::text::{file_stem, fold, word_count};

/// A header that is not a Markdown heading (a bold line, or a line on its own) may carry a
/// title of at most this many words; longer lines are running text that starts with
/// "Sesión 5: …".
const MAX_PLAIN_TITLE_WORDS: usize = 12;

/// Characters that may separate the number from the title: `Sesión 12 — El puerto`.
const TITLE_SEPARATORS: &[char] = &['—', '–', '-', ':', '.', '|', ',', '('];

/// A header line, folded and trimmed: optional heading or bold prefix, optional emphasis
/// (touching the word, so a `* ` list bullet is not emphasis),
/// optional date, the session word, an optional `nº`/`#`, the number, and whatever follows.
static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?P<prefix>#{1,6}[ \t]+|\*\*|__)?[*_]*",
        r"(?:\d{4}-\d{1,2}-\d{1,2}[ \t]*[-—–:.,]?[ \t]*)?",
        r"(?:sesion|session)[ \t]*(?:n[oº°]\.?[ \t]*|#[ \t]*)?",
        r"(?P<number>\d{1,4})(?P<rest>.*)$",
    ))
    .expect("the header pattern is valid")
});

/// Dates inside a file name (`2024-05-19`, `19.05.2024`): their digits are never the session.
static FILE_DATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d{4}[-_./]\d{1,2}[-_./]\d{1,2}|\d{1,2}[-_./]\d{1,2}[-_./]\d{2,4}").expect("the date pattern is valid")
});

/// The session word as a whole word in a folded file stem, then the number.
static FILE_SESSION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^\p{L}\p{N}])(?:sesion|session|ses)(?:[\s_.#-]|n[oº°])*(\d{1,4})(?:$|[^\p{N}])")
        .expect("the file session pattern is valid")
});

/// The session a line opens, when the line is a session header: `## Sesión 12 — El puerto`,
/// `**Sesion 7**`, `**Sesión 7:** título`, `### SESIÓN 12`, `Sesión 12 - …` alone on its
/// line, `## Session 12`, `Session 12:`.
///
/// Not headers: a session mentioned in running text, a heading that only links a session
/// (`# Resumen [[Sesion 7|Sesión Anterior]]`), list items (`- sesión 5: …`).
pub fn detect_session_header(line: &str) -> Option<SessionNumber> {
    let trimmed = line.trim();
    // Cheap rejection before folding: a header's first word is the session word or a date.
    let first = trimmed.trim_start_matches(['#', '*', '_', ' ', '\t']).chars().next()?;
    if !matches!(first, 's' | 'S') && !first.is_ascii_digit() {
        return None;
    }
    let folded = fold(trimmed);
    let captures = HEADER.captures(&folded)?;
    let is_heading = captures.name("prefix").is_some_and(|prefix| prefix.as_str().starts_with('#'));
    let rest = captures.name("rest").map_or("", |rest| rest.as_str());
    if rest.starts_with(|c: char| c.is_alphanumeric()) {
        return None;
    }
    let after_emphasis = rest.trim_start_matches(['*', '_']);
    let emphasis_closed = after_emphasis.len() != rest.len();
    let after_emphasis = after_emphasis.trim_start();
    let title = if after_emphasis.is_empty() {
        ""
    } else if let Some(title) = after_emphasis.strip_prefix(TITLE_SEPARATORS) {
        title
    } else if emphasis_closed || (is_heading && rest.starts_with([' ', '\t'])) {
        after_emphasis
    } else {
        return None;
    };
    if !is_heading && word_count(title.trim_matches(['*', '_'])) > MAX_PLAIN_TITLE_WORDS {
        return None;
    }
    let number = captures["number"].parse().ok()?;
    Some(SessionNumber(number))
}

/// The session number a file name gives: `Sesiones/Sesion 8.md`, `Session 45 - Título.md`,
/// `Sesión_08.md`, `2024-05-19 Sesión 8.md` (dates are skipped). Only the file name is
/// read, never the folders.
pub fn session_from_file_name(path: &str) -> Option<SessionNumber> {
    let stem = fold(file_stem(path));
    let without_dates = FILE_DATE.replace_all(&stem, " ");
    let captures = FILE_SESSION.captures(&without_dates)?;
    let number = captures[1].parse().ok()?;
    Some(SessionNumber(number))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `detector` over each `(input, expected session)` row.
    fn check(detector: fn(&str) -> Option<SessionNumber>, cases: &[(&str, Option<u32>)]) {
        for &(input, expect) in cases {
            assert_eq!(detector(input), expect.map(SessionNumber), "{input:?}");
        }
    }

    #[test]
    fn session_headers() {
        check(
            detect_session_header,
            &[
                // Markdown headings, any level, accents, case, separator and title.
                ("## Sesión 12 — El puerto", Some(12)),
                ("# Sesion 7", Some(7)),
                ("### SESIÓN 12", Some(12)),
                ("###### sesión 3", Some(3)),
                ("## Sesión 12 – La tormenta", Some(12)),
                ("## Sesión 12 - La tormenta", Some(12)),
                ("## Sesión 12: La tormenta", Some(12)),
                ("## Sesión 12. La tormenta", Some(12)),
                ("## Sesión 12 El puerto", Some(12)),
                ("## Sesión 12 (segunda parte)", Some(12)),
                ("## Sesión nº 4", Some(4)),
                ("## Sesión #4", Some(4)),
                ("## **Sesión 9**", Some(9)),
                ("## 2024-05-19 Sesión 8", Some(8)),
                ("## Sesión 0 — Creación de personajes", Some(0)),
                ("  ## Sesión 5  ", Some(5)),
                // English.
                ("## Session 12", Some(12)),
                ("## Session 5 — The harbour", Some(5)),
                ("Session 12:", Some(12)),
                ("SESSION 3", Some(3)),
                // Bold lines.
                ("**Sesion 7**", Some(7)),
                ("**Sesión 7:** título", Some(7)),
                ("**Sesión 7: título**", Some(7)),
                ("**Sesión 7** El regreso", Some(7)),
                ("__Sesión 7__", Some(7)),
                ("*Sesión 7*", Some(7)),
                // A line on its own.
                ("Sesión 12 - El puerto", Some(12)),
                ("Sesión 12 — El puerto", Some(12)),
                ("Sesion 4", Some(4)),
                ("Sesión 4.", Some(4)),
                // Running text, links, lists, plurals and other near misses.
                ("…ya lo vimos en la sesión 5…", None),
                ("En la sesión 3 murió el capitán.", None),
                ("ya lo vimos en la sesión 2, cuando llegamos", None),
                ("# Resumen [[Sesion 7|Sesión Anterior]]", None),
                ("## Ver [[Sesión 4]]", None),
                ("## [[Sesión 4]]", None),
                ("- sesión 5: llegamos al puerto", None),
                ("* Sesión 5: llegamos al puerto", None),
                ("1. Sesión 5", None),
                ("> ## Sesión 5", None),
                ("Sesión 12 fue la mejor de todas", None),
                ("Session 12 was great", None),
                ("#Sesion 3", None),
                ("## Sesiones 3 a 5", None),
                ("## Session Notes", None),
                ("## Sesión", None),
                ("## Sesión 12b", None),
                ("## Sesión 12345", None),
                (
                    "**Sesión 7:** llegamos al puerto, hablamos con la tabernera, discutimos el precio y al final dormimos",
                    None,
                ),
                (
                    "Sesión 3: llegamos al puerto, hablamos con la tabernera, discutimos el precio y al final dormimos allí",
                    None,
                ),
                ("", None),
                ("Sesiones", None),
            ],
        );
    }

    #[test]
    fn session_file_names() {
        check(
            session_from_file_name,
            &[
                ("Sesiones/Sesion 8.md", Some(8)),
                ("sesion 25.md", Some(25)),
                ("Session Notes/Session 45.md", Some(45)),
                ("Session 45 - Título.md", Some(45)),
                ("2024-05-19 Sesión 8.md", Some(8)),
                ("Sesiones/2024-05-19 Sesión 4.md", Some(4)),
                ("Sesión_08.md", Some(8)),
                ("SESIÓN-3.md", Some(3)),
                ("Sesion8.md", Some(8)),
                ("Sesión nº 5.md", Some(5)),
                ("Sesión 8 (19.05.2024).md", Some(8)),
                ("Notas/Ses 12.md", Some(12)),
                // Nothing that names a session.
                ("Sesiones/El regreso.md", None),
                ("Sesiones 3 a 5.md", None),
                ("2024-05-19.md", None),
                ("Sesión 2024-05-19.md", None),
                ("Sesion 3/Resumen.md", None),
                ("Multisesion 3.md", None),
                ("Capítulo 3.md", None),
                ("PNJs/Baika.md", None),
            ],
        );
    }
}
