//! Session numbers: from a header line inside a chronicle, or from a file name.
//!
//! Both work on accent-folded, lowercased text, so `Sesión`, `SESION` and `sesion` are one
//! word, and English `Session` is accepted beside it. Both are conservative: a session
//! mentioned in running text ("ya lo vimos en la sesión 5") is not a header.

use std::sync::LazyLock;

use regex::Regex;

use super::SessionNumber;
use crate::text::{file_stem, fold, word_count};

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

/// Episode codes from several campaigns share one ordered line of sessions: episode `e` of
/// campaign `c` is session `(c - 1) × CAMPAIGN_SESSION_STRIDE + e`, so `C1E115` (115) comes
/// before `C2E001` (1001) and the two never collide. No campaign reaches 1,000 sessions.
pub const CAMPAIGN_SESSION_STRIDE: u32 = 1000;

/// The built-in session pattern: Critical Role style episode codes, `C1E001`, `c2e15`, at the
/// start of a file name or of its first heading (`# C1E001 — Arrival at Kraghammer`).
pub const EPISODE_CODE_PATTERN: &str = r"(?i)^c(?P<campaign>\d{1,2})e(?P<number>\d{1,4})(?:$|[^\p{L}\p{N}])";

/// A configurable rule that ties a session-like note (`Recaps/S12.md`,
/// `Session Combats/Fight_S81_82.md`, `C1E001.md`) to its session: a regex over the file
/// name (without extension) and the note's first heading, with a `number` group (required)
/// and an optional `campaign` group, plus a fixed `offset` added to the number.
#[derive(Debug, Clone)]
pub struct SessionPattern {
    regex: Regex,
    offset: u32,
}

impl SessionPattern {
    /// Checks the pattern: a valid regex with a `number` group.
    pub fn new(pattern: &str, offset: u32) -> Result<SessionPattern, String> {
        let regex = Regex::new(pattern).map_err(|err| format!("not a valid regex: {err}"))?;
        if !regex.capture_names().flatten().any(|name| name == "number") {
            return Err("has no `(?P<number>…)` group for the session number".to_string());
        }
        Ok(SessionPattern { regex, offset })
    }

    /// The patterns every campaign gets: episode codes.
    pub fn defaults() -> Vec<SessionPattern> {
        vec![SessionPattern::new(EPISODE_CODE_PATTERN, 0).expect("the episode code pattern is valid")]
    }

    pub fn as_str(&self) -> &str {
        self.regex.as_str()
    }

    /// The session `text` names under this pattern, if it matches.
    pub fn session_in(&self, text: &str) -> Option<SessionNumber> {
        let captures = self.regex.captures(text.trim())?;
        let number: u32 = captures.name("number")?.as_str().parse().ok()?;
        let campaign_base = match captures.name("campaign") {
            Some(campaign) => {
                let campaign: u32 = campaign.as_str().parse().ok()?;
                campaign.checked_sub(1)?.checked_mul(CAMPAIGN_SESSION_STRIDE)?
            }
            None => 0,
        };
        campaign_base.checked_add(number)?.checked_add(self.offset).map(SessionNumber)
    }
}

/// The session a session-like note belongs to by the configured patterns: the file name
/// first, then its first heading (`#` marks stripped). `None` when no pattern matches.
pub fn session_from_patterns(
    patterns: &[SessionPattern],
    path: &str,
    first_heading: Option<&str>,
) -> Option<SessionNumber> {
    let stem = file_stem(path);
    let heading = first_heading.map(|line| line.trim().trim_start_matches('#').trim());
    patterns
        .iter()
        .find_map(|pattern| pattern.session_in(stem))
        .or_else(|| heading.and_then(|heading| patterns.iter().find_map(|pattern| pattern.session_in(heading))))
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

    #[test]
    fn session_patterns() {
        let fight = SessionPattern::new(r"(?i)^fight_s(?P<number>\d+)", 0).unwrap();
        let recap = SessionPattern::new(r"(?i)^s(?P<number>\d{1,4})$", 0).unwrap();
        let offset = SessionPattern::new(r"^Libro 2 - (?P<number>\d+)", 40).unwrap();
        let mut patterns = SessionPattern::defaults();
        patterns.extend([fight, recap, offset]);
        // (file, first heading, expected session)
        let cases: &[(&str, Option<&str>, Option<u32>)] = &[
            // Episode codes: campaign 1 keeps its numbers, campaign 2 starts at 1001.
            ("C1E001.md", None, Some(1)),
            ("crd3/C1E115.md", None, Some(115)),
            ("C2E001.md", None, Some(1001)),
            ("c2e46 notes.md", None, Some(1046)),
            ("Episodio.md", Some("# C2E003 — The Midnight Chase"), Some(1003)),
            ("Episodio.md", Some("## C1E010"), Some(10)),
            // Configured patterns, English and Spanish names.
            ("Session Combats/Fight_S81_82.md", None, Some(81)),
            ("Recaps/S12.md", None, Some(12)),
            ("Libro 2 - 3.md", None, Some(43)),
            // Not sessions: a code inside a word, an unknown campaign 0, other notes.
            ("EC1E001.md", None, None),
            ("C0E004.md", None, None),
            ("C1Extra.md", None, None),
            ("Recaps/Sumario.md", None, None),
            ("Recaps/S12 borrador viejo.md", None, None),
            ("PNJs/Baika.md", Some("# Baika la Tejedora"), None),
        ];
        for &(path, heading, expected) in cases {
            assert_eq!(
                session_from_patterns(&patterns, path, heading),
                expected.map(SessionNumber),
                "{path} {heading:?}"
            );
        }
        // Campaign codes keep episodes in story order across campaigns.
        let order: Vec<Option<SessionNumber>> = ["C1E114.md", "C1E115.md", "C2E001.md", "C2E002.md"]
            .iter()
            .map(|p| session_from_patterns(&patterns, p, None))
            .collect();
        assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "{order:?}");
    }

    #[test]
    fn a_session_pattern_needs_a_number_group() {
        assert!(SessionPattern::new(r"^S(\d+)", 0).unwrap_err().contains("number"));
        assert!(SessionPattern::new(r"^S(?P<number>\d+", 0).unwrap_err().contains("regex"));
    }
}
