//! The time path: a question that places itself in the campaign's story («la sesión 12»,
//! «la última sesión», «justo después de la batalla del puerto») brings the sessions it
//! means, as one more ranked list for the same reciprocal-rank fusion.
//!
//! Three kinds of reference, read on accent-folded, lowercased words (Spanish and English):
//! - explicit: «sesión 12», «la 12», «session 12», «sesiones 10 a 14», «entre la 3 y la 5»,
//!   ordinals («la tercera sesión», «the first session») and number words («la sesión doce»);
//! - relative to the highest session the asker may read: «la última sesión», «la anterior»,
//!   «la penúltima», «hace dos sesiones», «las últimas tres sesiones», «last session», «the
//!   session before last», «two sessions ago»;
//! - before or after an event: «justo después de X», «antes de que conocieran a Y», «right
//!   after leaving Z»: the other paths find where the event happens (the anchors), this path
//!   adds the next (or previous) session.
//!
//! A number counts only beside a session word or as «la N» standing alone, so «12 monedas»
//! and «nivel 5» are never sessions. The path is pure over the session list it reads (one
//! SQLite query, visibility applied in it): a player's «última sesión» is the last one a
//! player may read.
//!
//! The sessions a question names (explicitly or relatively) are its subject, not a guess:
//! [`keep_named_sessions`] keeps them among the fragments the model is shown whatever the
//! rerank chose (measured on the sample bank: `eval/README.md`).

use std::collections::HashMap;

use rusqlite::params;
use serde::Serialize;

use crate::corpus::{SessionNumber, Visibility, fold};
use crate::index::{IndexError, Store};

/// Sessions a range brings at most: «sesiones 1 a 400» is clamped to the sessions there are
/// and then to this many (the pool is ~27 candidates; a range wider than this is a survey,
/// which the dense and entity paths serve better).
pub const MAX_RANGE_SESSIONS: usize = 12;
/// Sessions where an event happens, taken from the other paths' fusion for «antes de X» /
/// «después de X»: the best two, so one wrong guess does not decide alone.
pub const ANCHOR_SESSIONS: usize = 2;
/// Fragments of the best-fused candidates that are read for anchors: the top of the pool.
const ANCHOR_CANDIDATES: usize = 5;
/// Sessions an entity's first or last appearance brings («¿cuándo vimos por primera vez a X?»).
pub const APPEARANCE_SESSIONS: usize = 2;
/// The largest session number read as one: four digits, as the session-header detector reads.
const MAX_SESSION_NUMBER: u32 = 9999;

/// One way a question places itself in time, as written (resolved against the campaign by
/// [`resolve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TimeReference {
    /// «sesión 12», «la 12», «la tercera sesión».
    Session { number: u32 },
    /// «sesiones 10 a 14», «entre la 3 y la 5» (either order).
    Range { from: u32, to: u32 },
    /// Sessions back from the last one: «la última» is 0, «la penúltima» and «hace dos
    /// sesiones» are 1.
    Back { sessions: u32 },
    /// «las últimas tres sesiones»: the last `count`.
    Last { count: u32 },
    /// «después de X», «right after X»: the session after the event's.
    AfterEvent,
    /// «antes de X», «before X»: the session before the event's.
    BeforeEvent,
    /// «¿cuándo vimos por primera vez a X?»: the first sessions of the entities named.
    FirstAppearance,
    /// «la última vez que vimos a X»: their last sessions.
    LastAppearance,
}

impl TimeReference {
    /// An explicit or relative reference names its sessions; the others are found from the
    /// question's other words.
    pub fn names_sessions(self) -> bool {
        matches!(
            self,
            TimeReference::Session { .. }
                | TimeReference::Range { .. }
                | TimeReference::Back { .. }
                | TimeReference::Last { .. }
        )
    }
}

/// What the time path did, for `oraculo search --json` (`time`) and the answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TimeDiagnostics {
    /// The references read in the question, in order.
    pub references: Vec<TimeReference>,
    /// The highest session the asker may read (`None`: the campaign has no sessions).
    pub highest_session: Option<SessionNumber>,
    /// The sessions the path brought, in its rank order.
    pub sessions: Vec<SessionNumber>,
    /// The sessions the question names (explicit and relative references, and the session
    /// right after or before the first anchor): kept among those shown.
    pub named_sessions: Vec<SessionNumber>,
    /// Sessions asked for that are not in the notes («sesión 400»).
    pub missing: Vec<u32>,
    /// Where the event of «antes de X» / «después de X» happens, by the other paths.
    pub anchors: Vec<SessionNumber>,
    /// A range was reversed, ran past the notes or was wider than [`MAX_RANGE_SESSIONS`].
    pub clamped: bool,
}

impl TimeDiagnostics {
    /// Whether the question placed itself in time at all.
    pub fn is_active(&self) -> bool {
        !self.references.is_empty()
    }

    /// Whether the question is only about sessions that are not there: it is answered by
    /// saying so, naming the highest session there is, without asking a model.
    pub fn answers_alone(&self) -> bool {
        let only_named = !self.references.is_empty() && self.references.iter().all(|r| r.names_sessions());
        only_named && self.sessions.is_empty() && (!self.missing.is_empty() || self.highest_session.is_none())
    }

    /// What to tell the asker when a session they named is not in the notes, or the campaign
    /// has no sessions at all; `None` when everything asked for is there.
    pub fn notice(&self, english: bool) -> Option<String> {
        if !self.references.iter().any(|r| r.names_sessions()) {
            return None;
        }
        let Some(highest) = self.highest_session else {
            return Some(if english {
                "These notes have no numbered sessions (only character sheets and world documents).".to_string()
            } else {
                "Estas notas no tienen sesiones numeradas (solo fichas y documentos del mundo).".to_string()
            });
        };
        if self.missing.is_empty() {
            return None;
        }
        let numbers: Vec<String> = self.missing.iter().map(u32::to_string).collect();
        Some(match (english, self.missing.len()) {
            (true, 1) => format!("Session {} is not in the notes: the last session there is {highest}.", numbers[0]),
            (true, _) => {
                format!("Sessions {} are not in the notes: the last session there is {highest}.", numbers.join(", "))
            }
            (false, 1) => format!("La sesión {} no está en las notas: la última que hay es la {highest}.", numbers[0]),
            (false, _) => {
                format!("Las sesiones {} no están en las notas: la última que hay es la {highest}.", numbers.join(", "))
            }
        })
    }
}

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

/// The time path's ranked list (fragment ids) and what it did. `prior` is the other paths'
/// fusion, best first, where «antes de X» / «después de X» find X; `entity_ids` the
/// entities the question names (for first and last appearances). Visibility is applied in
/// the query: a session the asker may not read is neither listed nor counted as the last.
pub fn search_time(
    store: &Store,
    references: &[TimeReference],
    prior: &[i64],
    entity_ids: &[i64],
    visibility: Option<Visibility>,
    depth: usize,
) -> Result<(Vec<i64>, TimeDiagnostics), IndexError> {
    let _span = tracing::info_span!("retrieve.time", n_references = references.len(), depth).entered();
    if references.is_empty() {
        return Ok((Vec::new(), TimeDiagnostics::default()));
    }
    let timeline = SessionFragments::load(store, visibility)?;
    let anchors: Vec<SessionNumber> =
        if references.iter().any(|r| matches!(r, TimeReference::AfterEvent | TimeReference::BeforeEvent)) {
            let mut anchors: Vec<SessionNumber> = Vec::new();
            for id in prior.iter().take(ANCHOR_CANDIDATES) {
                if let Some(&session) = timeline.session_of.get(id)
                    && !anchors.contains(&session)
                    && anchors.len() < ANCHOR_SESSIONS
                {
                    anchors.push(session);
                }
            }
            anchors
        } else {
            Vec::new()
        };
    let appearances =
        if references.iter().any(|r| matches!(r, TimeReference::FirstAppearance | TimeReference::LastAppearance)) {
            entity_sessions(store, entity_ids, visibility)?
        } else {
            Vec::new()
        };
    let mut diagnostics = resolve(references, &timeline.sessions, &anchors, &appearances);
    diagnostics.sessions.truncate(depth);
    let ids: Vec<i64> = diagnostics
        .sessions
        .iter()
        .flat_map(|session| timeline.fragments.get(session).cloned().unwrap_or_default())
        .take(depth)
        .collect();
    tracing::debug!(n_sessions = diagnostics.sessions.len(), n_fragments = ids.len(), "time path");
    Ok((ids, diagnostics))
}

/// Resolves `references` against the sessions there are (ascending): the sessions to bring,
/// best first, and what was missing or clamped. Pure.
pub fn resolve(
    references: &[TimeReference],
    known: &[SessionNumber],
    anchors: &[SessionNumber],
    appearances: &[SessionNumber],
) -> TimeDiagnostics {
    let mut diagnostics = TimeDiagnostics {
        references: references.to_vec(),
        highest_session: known.last().copied(),
        anchors: anchors.to_vec(),
        ..TimeDiagnostics::default()
    };
    let add = |list: &mut Vec<SessionNumber>, session: SessionNumber| {
        if !list.contains(&session) {
            list.push(session);
        }
    };
    let mut sessions: Vec<SessionNumber> = Vec::new();
    let mut named: Vec<SessionNumber> = Vec::new();
    for reference in references {
        let brought: Vec<SessionNumber> = match *reference {
            TimeReference::Session { number } => {
                if known.contains(&SessionNumber(number)) {
                    vec![SessionNumber(number)]
                } else {
                    diagnostics.missing.push(number);
                    Vec::new()
                }
            }
            TimeReference::Range { from, to } => {
                let (low, high) = (from.min(to), from.max(to));
                let inside: Vec<SessionNumber> =
                    known.iter().copied().filter(|s| (low..=high).contains(&s.0)).collect();
                let past_the_notes =
                    known.last().is_none_or(|last| high > last.0) || known.first().is_none_or(|first| low < first.0);
                if from > to || past_the_notes || inside.len() > MAX_RANGE_SESSIONS {
                    diagnostics.clamped = true;
                }
                if inside.is_empty() {
                    diagnostics.missing.push(low);
                }
                inside.into_iter().take(MAX_RANGE_SESSIONS).collect()
            }
            TimeReference::Back { sessions: back } => {
                match known.len().checked_sub(1 + back as usize).and_then(|position| known.get(position)) {
                    Some(&session) => vec![session],
                    None => Vec::new(),
                }
            }
            TimeReference::Last { count } => {
                let count = (count as usize).min(MAX_RANGE_SESSIONS);
                known[known.len().saturating_sub(count)..].iter().rev().copied().collect()
            }
            TimeReference::AfterEvent | TimeReference::BeforeEvent => {
                let after = matches!(reference, TimeReference::AfterEvent);
                let mut brought = Vec::new();
                for (position, anchor) in anchors.iter().enumerate() {
                    let neighbour = if after {
                        known.iter().copied().find(|s| s > anchor)
                    } else {
                        known.iter().rev().copied().find(|s| s < anchor)
                    };
                    if let Some(neighbour) = neighbour {
                        brought.push(neighbour);
                        if position == 0 {
                            add(&mut named, neighbour);
                        }
                    }
                    brought.push(*anchor);
                }
                brought
            }
            TimeReference::FirstAppearance => appearances.iter().copied().take(APPEARANCE_SESSIONS).collect(),
            TimeReference::LastAppearance => appearances.iter().rev().copied().take(APPEARANCE_SESSIONS).collect(),
        };
        for session in brought {
            if reference.names_sessions() {
                add(&mut named, session);
            }
            add(&mut sessions, session);
        }
    }
    diagnostics.sessions = sessions;
    diagnostics.named_sessions = named;
    diagnostics
}

/// Keeps the fragments of the sessions the question names among the `k` chosen: each one
/// missing replaces the lowest-ranked chosen fragment of a session not named, up to
/// `k - k/4` of them (the rest stays the rerank's). `pool` is the fused pool, where the
/// named fragments are found (so visibility was already applied).
pub fn keep_named_sessions<C: Clone>(
    chosen: &mut Vec<C>,
    pool: &[C],
    named: &[SessionNumber],
    k: usize,
    session_of: impl Fn(&C) -> (i64, Option<SessionNumber>),
) -> usize {
    if named.is_empty() || k == 0 {
        return 0;
    }
    let max_named = k - k / 4;
    let is_named = |candidate: &C| session_of(candidate).1.is_some_and(|session| named.contains(&session));
    let mut wanted: Vec<&C> = Vec::new();
    for session in named {
        for candidate in pool.iter().filter(|c| session_of(c).1 == Some(*session)) {
            if wanted.len() < max_named {
                wanted.push(candidate);
            }
        }
    }
    let mut added = 0;
    for candidate in wanted {
        let id = session_of(candidate).0;
        if chosen.iter().any(|c| session_of(c).0 == id) {
            continue;
        }
        if chosen.len() >= k {
            match chosen.iter().rposition(|c| !is_named(c)) {
                Some(position) => {
                    chosen.remove(position);
                }
                None => break,
            }
        }
        chosen.push(candidate.clone());
        added += 1;
    }
    added
}

/// The sessions an audience may read, ascending, and each one's fragment ids in part order.
#[derive(Debug, Default)]
pub struct SessionFragments {
    pub sessions: Vec<SessionNumber>,
    pub fragments: HashMap<SessionNumber, Vec<i64>>,
    pub session_of: HashMap<i64, SessionNumber>,
}

impl SessionFragments {
    /// One query over the session fragments the visibility allows.
    pub fn load(store: &Store, visibility: Option<Visibility>) -> Result<SessionFragments, IndexError> {
        let mut statement = store.connection().prepare_cached(
            "SELECT id, session FROM fragments
             WHERE kind = 'session' AND session IS NOT NULL AND (?1 IS NULL OR visibility = ?1)
             ORDER BY session, part, id",
        )?;
        let rows = statement.query_map(params![visibility.map(Visibility::as_str)], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, u32>(1)?))
        })?;
        let mut loaded = SessionFragments::default();
        for row in rows {
            let (id, session) = row?;
            let session = SessionNumber(session);
            if loaded.sessions.last() != Some(&session) {
                loaded.sessions.push(session);
            }
            loaded.fragments.entry(session).or_default().push(id);
            loaded.session_of.insert(id, session);
        }
        Ok(loaded)
    }
}

/// The sessions where any of `entity_ids` is mentioned in a fragment the visibility allows,
/// ascending.
pub fn entity_sessions(
    store: &Store,
    entity_ids: &[i64],
    visibility: Option<Visibility>,
) -> Result<Vec<SessionNumber>, IndexError> {
    let mut statement = store.connection().prepare_cached(
        "SELECT DISTINCT f.session FROM entity_mentions m JOIN fragments f ON f.id = m.fragment_id
         WHERE m.entity_id = ?1 AND f.session IS NOT NULL AND f.kind = 'session'
           AND (?2 IS NULL OR f.visibility = ?2)",
    )?;
    let mut sessions: Vec<SessionNumber> = Vec::new();
    for entity_id in entity_ids {
        let rows =
            statement.query_map(params![entity_id, visibility.map(Visibility::as_str)], |row| row.get::<_, u32>(0))?;
        for row in rows {
            sessions.push(SessionNumber(row?));
        }
    }
    sessions.sort_unstable();
    sessions.dedup();
    Ok(sessions)
}

/// The session fragments that mention `entity_id` and the visibility allows, by session and
/// part: `(id, session, label, content hash)`.
pub fn entity_session_fragments(
    store: &Store,
    entity_id: i64,
    visibility: Option<Visibility>,
) -> Result<Vec<(i64, SessionNumber, String, String)>, IndexError> {
    let mut statement = store.connection().prepare_cached(
        "SELECT f.id, f.session, f.label, f.content_hash FROM entity_mentions m JOIN fragments f ON f.id = m.fragment_id
         WHERE m.entity_id = ?1 AND f.session IS NOT NULL AND f.kind = 'session'
           AND (?2 IS NULL OR f.visibility = ?2)
         ORDER BY f.session, f.part, f.id",
    )?;
    let rows = statement.query_map(params![entity_id, visibility.map(Visibility::as_str)], |row| {
        Ok((row.get::<_, i64>(0)?, SessionNumber(row.get::<_, u32>(1)?), row.get(2)?, row.get(3)?))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

// --- reading the question ---------------------------------------------------------------

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

/// One reference starting at `at`, and where reading goes on.
fn read_reference(words: &[String], at: usize, comparison: bool) -> Option<(Vec<TimeReference>, usize)> {
    let w = word(words, at);
    let next = word(words, at + 1);

    // An entity's first or last appearance: «por primera vez», «la última vez», «first
    // time», «first met», «last seen».
    match (w, next) {
        ("primera", "vez" | "aparicion") | ("first", "time" | "appearance") => {
            return Some((vec![TimeReference::FirstAppearance], at + 2));
        }
        ("ultima", "vez" | "aparicion") | ("last", "time" | "appearance" | "seen" | "saw") => {
            return Some((vec![TimeReference::LastAppearance], at + 2));
        }
        ("first", "meet" | "met" | "see" | "saw" | "seen" | "appear" | "appeared" | "appears" | "meets") => {
            return Some((vec![TimeReference::FirstAppearance], at + 2));
        }
        _ => {}
    }

    // «entre la 3 y la 5», «entre las sesiones 3 y 5», «between sessions 3 and 5».
    if matches!(w, "entre" | "between") {
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
        return None;
    }

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
            return Some((vec![TimeReference::Back { sessions: back }], at + 2));
        }
        return None;
    }
    if matches!(w, "ultimas" | "ultimos") {
        if let Some(count) = number(next)
            && is_session_word(word(words, at + 2))
        {
            return Some((vec![TimeReference::Last { count }], at + 3));
        }
        if is_session_word(next) {
            return Some((vec![TimeReference::Last { count: 3 }], at + 2));
        }
        return None;
    }
    if let Some(count) = number(w)
        && matches!(next, "ultimas" | "ultimos")
        && is_session_word(word(words, at + 2))
    {
        return Some((vec![TimeReference::Last { count }], at + 3));
    }
    if w == "hace"
        && let Some(count) = number(next)
        && is_session_word(word(words, at + 2))
    {
        return Some((vec![TimeReference::Back { sessions: count.saturating_sub(1) }], at + 3));
    }
    if matches!(w, "last" | "latest" | "previous" | "past") {
        if let Some(count) = number(next).filter(|_| is_plural_session_word(word(words, at + 2))) {
            return Some((vec![TimeReference::Last { count }], at + 3));
        }
        if is_session_word(next) {
            return Some((vec![TimeReference::Back { sessions: 0 }], at + 2));
        }
        return None;
    }
    if let Some(count) = number(w)
        && is_plural_session_word(next)
        && word(words, at + 2) == "ago"
    {
        return Some((vec![TimeReference::Back { sessions: count.saturating_sub(1) }], at + 3));
    }
    if matches!(w, "session" | "sesion") && matches!(next, "before" | "antes") && word(words, at + 2) == "last" {
        return Some((vec![TimeReference::Back { sessions: 1 }], at + 3));
    }

    // A session word: «sesión 12», «sesiones 10 a 14», «sesión anterior (a la 12)»,
    // «session after 12», «sesión tercera».
    if is_session_word(w) {
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
        return None;
    }

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

    // Before or after an event: «(justo) después de X», «tras X», «antes de que …», «right
    // after leaving Z», «before Scanlan came back». An explicit session after the word is read
    // as that session's neighbour.
    if comparison {
        return None;
    }
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

    /// Every rule, as the issue lists them: the question and the references it must yield.
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

    fn sessions(numbers: &[u32]) -> Vec<SessionNumber> {
        numbers.iter().map(|&n| SessionNumber(n)).collect()
    }

    #[track_caller]
    fn check_resolved(references: &[TimeReference], anchors: &[u32], expected: &[u32], missing: &[u32], clamped: bool) {
        let known = sessions(&[1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 40]);
        let resolved = resolve(references, &known, &sessions(anchors), &sessions(&[2, 7, 12]));
        assert_eq!(resolved.sessions, sessions(expected), "{references:?}");
        assert_eq!(resolved.missing, missing, "{references:?}");
        assert_eq!(resolved.clamped, clamped, "{references:?}");
        assert_eq!(resolved.highest_session, Some(SessionNumber(40)));
    }

    #[test]
    fn resolution_against_the_sessions_there_are() {
        check_resolved(&[Session { number: 12 }], &[], &[12], &[], false);
        // A session that does not exist is missing; the notice names the highest.
        check_resolved(&[Session { number: 400 }], &[], &[], &[400], false);
        check_resolved(&[Session { number: 4 }], &[], &[], &[4], false);
        // Reversed and huge ranges are clamped.
        check_resolved(&[Range { from: 14, to: 10 }], &[], &[10, 11, 12, 13, 14], &[], true);
        check_resolved(&[Range { from: 1, to: 400 }], &[], &[1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13], &[], true);
        check_resolved(&[Range { from: 100, to: 400 }], &[], &[], &[100], true);
        // Relative: from the highest there is, over the sessions there are.
        check_resolved(&[Back { sessions: 0 }], &[], &[40], &[], false);
        check_resolved(&[Back { sessions: 1 }], &[], &[20], &[], false);
        check_resolved(&[Back { sessions: 99 }], &[], &[], &[], false);
        check_resolved(&[Last { count: 3 }], &[], &[40, 20, 19], &[], false);
        // Before and after: the neighbour of each anchor, then the anchor.
        check_resolved(&[AfterEvent], &[3, 12], &[5, 3, 13, 12], &[], false);
        check_resolved(&[BeforeEvent], &[5], &[3, 5], &[], false);
        check_resolved(&[AfterEvent], &[40], &[40], &[], false);
        check_resolved(&[FirstAppearance], &[], &[2, 7], &[], false);
        check_resolved(&[LastAppearance], &[], &[12, 7], &[], false);
    }

    #[test]
    fn notices_name_the_highest_session() {
        let known = sessions(&[1, 2, 40]);
        let missing = resolve(&[Session { number: 400 }], &known, &[], &[]);
        assert!(missing.answers_alone());
        assert_eq!(
            missing.notice(false).as_deref(),
            Some("La sesión 400 no está en las notas: la última que hay es la 40.")
        );
        assert_eq!(
            missing.notice(true).as_deref(),
            Some("Session 400 is not in the notes: the last session there is 40.")
        );
        let partly = resolve(&[Session { number: 2 }, Session { number: 400 }], &known, &[], &[]);
        assert!(!partly.answers_alone());
        assert!(partly.notice(false).is_some());
        let none = resolve(&[Back { sessions: 0 }], &[], &[], &[]);
        assert!(none.answers_alone());
        assert!(none.notice(false).is_some_and(|notice| notice.contains("no tienen sesiones")));
        let fine = resolve(&[Session { number: 2 }], &known, &[], &[]);
        assert_eq!(fine.notice(false), None);
        assert!(!resolve(&[AfterEvent], &[], &[], &[]).answers_alone());
    }

    #[test]
    fn named_sessions_are_kept_among_the_chosen() {
        // (id, session); the pool in fusion order.
        let pool: Vec<(i64, Option<SessionNumber>)> =
            (1..=12).map(|id| (id, Some(SessionNumber(id as u32)))).chain([(13, None)]).collect();
        let key = |c: &(i64, Option<SessionNumber>)| *c;
        let mut chosen: Vec<_> = pool[..8].to_vec();
        let added = keep_named_sessions(&mut chosen, &pool, &sessions(&[11]), 8, key);
        assert_eq!(added, 1);
        let ids: Vec<i64> = chosen.iter().map(|c| c.0).collect();
        assert_eq!(ids, [1, 2, 3, 4, 5, 6, 7, 11]);
        // At most k - k/4 named; the rest stay.
        let mut chosen: Vec<_> = pool[..8].to_vec();
        keep_named_sessions(&mut chosen, &pool, &sessions(&[9, 10, 11, 12]), 8, key);
        let ids: Vec<i64> = chosen.iter().map(|c| c.0).collect();
        assert_eq!(ids, [1, 2, 3, 4, 9, 10, 11, 12]);
        // Already there: nothing moves.
        let mut chosen: Vec<_> = pool[..8].to_vec();
        assert_eq!(keep_named_sessions(&mut chosen, &pool, &sessions(&[2]), 8, key), 0);
    }
}
