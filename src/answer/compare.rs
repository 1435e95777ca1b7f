//! Which came first: a question comparing two events in time is answered by each event's
//! sentence, in the order the sessions tell them.
//!
//! «¿Qué pasó antes: el incendio de La Gaviota Coja o la caída de Gaspar Nieto?», "Which came
//! first: X or Y?", «¿Conocieron a Yusuf antes o después de la traición de Dorian?», "Did the
//! archduke come back before or after the party found the crown?". Quoting what the question's
//! words find tells neither order nor, often, the second event (the sentences of the first
//! fill the answer). Here each event is ranked as a question of its own (`answer::quotes`);
//! its sentence holds more than half of its words (names counting double) and most of them
//! of any, from the earliest session among those (an event is told when it happens, and
//! recalled after). The order said is the sessions' numbers, no model's guess; where either
//! event has no such sentence in a session, the question is answered as any other.
//!
//! Pure: text in, order out.

use std::sync::LazyLock;

use regex::Regex;

use super::passages::{Excerpt, quoted_lines};
use super::quotes::AskedSentence;
use crate::corpus::LabelLanguage;

/// How a question compares two events in time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparison {
    /// «A antes o después de B», "A before or after B": whether A came before B.
    BeforeOrAfter { event: String, other: String },
    /// «¿Qué pasó antes: A o B?», "Which came first: A or B?": which of the two.
    WhichFirst { first: String, second: String },
}

/// «A antes o después de B», "Did A before or after B?", the words between the two events
/// («de», «de que», «que») left out of the second.
static BEFORE_OR_AFTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^[\s¿¡]*(?P<a>.+?)\s+(?:antes\s+o\s+despu[eé]s|despu[eé]s\s+o\s+antes|before\s+or\s+after|after\s+or\s+before)\s+(?:(?:de|que)\s+)*(?P<b>.+?)[\s?!.]*$",
    )
    .expect("the before-or-after pattern is valid")
});

/// «¿Qué pasó antes: A o B?», «¿Qué ocurrió primero, A o B?», "Which came first: A or B?".
static WHICH_FIRST: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(?:qu[eé]\s+(?:pas[oó]|ocurri[oó]|sucedi[oó]|fue|vino|hubo)\s+(?:antes|primero)|cu[aá]l\s+(?:fue|vino|pas[oó])\s+(?:antes|primero)|which\s+(?:came|happened|was)\s+first|what\s+(?:came|happened)\s+first)\s*[:,]?\s*(?P<a>.+?),?\s+(?:o|or)\s+(?P<b>.+?)[\s?!.]*$",
    )
    .expect("the which-first pattern is valid")
});

/// How `question` compares two events in time, if it does.
pub fn comparison_of(question: &str) -> Option<Comparison> {
    let event = |captures: &regex::Captures<'_>, name: &str| captures.name(name).map(|m| m.as_str().trim().to_string());
    if let Some(captures) = WHICH_FIRST.captures(question) {
        return Some(Comparison::WhichFirst { first: event(&captures, "a")?, second: event(&captures, "b")? });
    }
    let captures = BEFORE_OR_AFTER.captures(question)?;
    Some(Comparison::BeforeOrAfter { event: event(&captures, "a")?, other: event(&captures, "b")? })
}

impl Comparison {
    /// The two events, in the question's order.
    pub fn events(&self) -> [&str; 2] {
        match self {
            Comparison::BeforeOrAfter { event, other } => [event, other],
            Comparison::WhichFirst { first, second } => [first, second],
        }
    }
}

/// Where an event's sentence is told: its session, and its place (the fragment's rank among
/// the chosen, the sentence's within it).
#[derive(Debug, Clone, PartialEq)]
pub struct Told {
    pub session: u32,
    pub place: (usize, usize),
    pub excerpt: Excerpt,
}

/// An event's sentence among `candidates` (best first, `answer::quotes::asked_sentences`),
/// the event's words weighing `event_weight` in all: of those told in a session (`session_of`
/// a fragment) and holding more than half of it, the ones holding most, and of those the
/// earliest session's, the best ranked. `None`: no session tells it. A sentence holding half
/// or less says something else: "it did not come back" is no "the archduke came back".
pub fn told(
    candidates: &[AskedSentence],
    event_weight: u32,
    session_of: &dyn Fn(usize) -> Option<u32>,
) -> Option<Told> {
    let in_sessions: Vec<(&AskedSentence, u32)> = candidates
        .iter()
        .filter(|candidate| 2 * candidate.held > event_weight)
        .filter_map(|candidate| Some((candidate, session_of(candidate.fragment)?)))
        .collect();
    let most = in_sessions.iter().map(|(candidate, _)| candidate.held).max()?;
    let (candidate, session) =
        in_sessions.into_iter().filter(|(candidate, _)| candidate.held == most).min_by_key(|&(_, session)| session)?;
    Some(Told { session, place: (candidate.fragment, candidate.sentence), excerpt: candidate.excerpt.clone() })
}

/// The answer to `comparison` from each event's sentence (in the question's order): the order
/// said in the question's language, then the two quotes, each with its label; `None` when
/// both events are the one sentence.
pub fn render_order(comparison: &Comparison, told: [&Told; 2], language: LabelLanguage) -> Option<String> {
    let [a, b] = told;
    if a.place == b.place {
        return None;
    }
    let spanish = language == LabelLanguage::Es;
    let (earlier, later) = if (a.session, a.place) < (b.session, b.place) { (a, b) } else { (b, a) };
    let in_story_order = [&earlier.excerpt, &later.excerpt];
    if a.session == b.session {
        let intro = if spanish {
            format!("Las notas cuentan las dos cosas en la misma sesión, la {}, en este orden:", a.excerpt.label)
        } else {
            format!("The notes tell both in the same session, {}, in this order:", a.excerpt.label)
        };
        return Some(format!("{intro}\n{}", lines(&in_story_order)));
    }
    let text = match comparison {
        Comparison::BeforeOrAfter { .. } => {
            let before = a.session < b.session;
            let intro = match (spanish, before) {
                (true, true) => "Antes",
                (true, false) => "Después",
                (false, true) => "Before",
                (false, false) => "After",
            };
            let (a_label, b_label) = (&a.excerpt.label, &b.excerpt.label);
            let said = if spanish {
                format!("{intro}, según las notas: lo uno se cuenta en la {a_label} y lo otro en la {b_label}:")
            } else {
                format!("{intro}, by the notes: the one is told in {a_label} and the other in {b_label}:")
            };
            format!("{said}\n{}", lines(&[&a.excerpt, &b.excerpt]))
        }
        Comparison::WhichFirst { .. } => {
            let (first, then) = (&earlier.excerpt.label, &later.excerpt.label);
            let said = if spanish {
                format!("Según las notas, primero esto ({first}) y después aquello ({then}):")
            } else {
                format!("By the notes, this came first ({first}), then that ({then}):")
            };
            format!("{said}\n{}", lines(&in_story_order))
        }
    };
    Some(text)
}

fn lines(excerpts: &[&Excerpt]) -> String {
    let owned: Vec<Excerpt> = excerpts.iter().map(|excerpt| (*excerpt).clone()).collect();
    quoted_lines(&owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::Label;

    #[test]
    fn the_two_events_a_question_compares_are_read_in_both_languages_and_both_shapes() {
        let which = |first: &str, second: &str| {
            Some(Comparison::WhichFirst { first: first.to_string(), second: second.to_string() })
        };
        let before_or_after = |event: &str, other: &str| {
            Some(Comparison::BeforeOrAfter { event: event.to_string(), other: other.to_string() })
        };
        for (question, expect) in [
            (
                "¿Qué pasó antes: el incendio de La Gaviota Coja o la caída de Gaspar Nieto?",
                which("el incendio de La Gaviota Coja", "la caída de Gaspar Nieto"),
            ),
            (
                "¿Qué ocurrió primero, la deserción de Edric o el regreso del archiduque?",
                which("la deserción de Edric", "el regreso del archiduque"),
            ),
            (
                "Which came first: the sinking of the casino boat or Beezer's death?",
                which("the sinking of the casino boat", "Beezer's death"),
            ),
            (
                "¿Conocieron a Yusuf Benarroch antes o después de la traición de Dorian?",
                before_or_after("Conocieron a Yusuf Benarroch", "la traición de Dorian"),
            ),
            (
                "Did the Mighty Nein find Kiri before or after Molly died?",
                before_or_after("Did the Mighty Nein find Kiri", "Molly died"),
            ),
            ("¿Qué hicieron justo después del incendio?", None),
            ("What happened first in session 3?", None),
            ("¿Quién es Odo o Rook?", None),
        ] {
            assert_eq!(comparison_of(question), expect, "{question}");
        }
    }

    #[test]
    fn every_way_of_asking_which_came_first_reads_the_same_two_events() {
        // Generated: each opener, with or without its colon or comma, each connector, in
        // both languages, around the same two events.
        let (first, second) = ("la caída de Gaspar", "el incendio de la posada");
        let openers = [
            "¿Qué pasó antes",
            "¿Qué ocurrió primero",
            "¿Qué sucedió antes",
            "¿Qué fue primero",
            "¿Cuál fue antes",
            "Which came first",
            "Which happened first",
            "What happened first",
            "What came first",
        ];
        for opener in openers {
            for separator in [":", ",", ""] {
                for connector in ["o", "or"] {
                    let question = format!("{opener}{separator} {first} {connector} {second}?");
                    let expect = Comparison::WhichFirst { first: first.into(), second: second.into() };
                    assert_eq!(comparison_of(&question), Some(expect), "{question}");
                }
            }
        }
        for connector in
            ["antes o después de", "después o antes de", "antes o después de que", "before or after", "after or before"]
        {
            for (opening, closing) in [("¿", "?"), ("", "?"), ("", ""), ("¡", "!")] {
                let question = format!("{opening}Conocieron a Yusuf {connector} {first}{closing}");
                let expect = Comparison::BeforeOrAfter { event: "Conocieron a Yusuf".into(), other: first.into() };
                assert_eq!(comparison_of(&question), Some(expect), "{question}");
            }
        }
    }

    fn asked(held: u32, fragment: usize, sentence: usize, label: &str, text: &str) -> AskedSentence {
        AskedSentence { held, fragment, sentence, excerpt: Excerpt { label: Label::new(label), text: text.into() } }
    }

    #[test]
    fn an_event_is_told_where_most_of_it_is_said_first() {
        // Fragments 0, 1, 2 are sessions 20, 12, 31; fragment 3 is a character sheet.
        let session_of = |fragment: usize| [Some(20), Some(12), Some(31), None][fragment];
        let candidates = [
            asked(2, 0, 4, "Sesión 20", "Desde la traición de Dorian, nadie se fía."),
            asked(1, 1, 2, "Sesión 12", "Dorian sonríe."),
            asked(2, 2, 0, "Sesión 31", "Dorian traicionó al grupo, recuerda Odo."),
            asked(3, 3, 0, "Ficha: Dorian", "Dorian traicionó al grupo en los muelles."),
        ];
        // The event weighs 3 (say «traición» and «Dorian»'s two): more than half is 2.
        let found = told(&candidates, 3, &session_of).expect("a session tells it");
        // The sheet holds most but tells no session; of the two holding two, Sesión 20 is earlier.
        assert_eq!((found.session, found.place), (20, (0, 4)));
        assert!(told(&candidates[3..], 3, &session_of).is_none());
        // Half is not enough: «Dorian sonríe.» alone does not tell it.
        assert!(told(&candidates[1..2], 2, &session_of).is_none());
        assert_eq!(told(&candidates[1..2], 1, &session_of).map(|found| found.session), Some(12));
    }

    #[test]
    fn the_order_is_said_by_the_sessions_in_the_question_s_language() {
        let told_at = |session: u32, place: (usize, usize), text: &str| Told {
            session,
            place,
            excerpt: Excerpt { label: Label::new(format!("Sesión {session}")), text: text.into() },
        };
        let fire = told_at(14, (0, 3), "Arde La Gaviota Coja.");
        let fall = told_at(21, (1, 5), "Cae Gaspar Nieto.");
        let which = comparison_of("¿Qué pasó antes: el incendio o la caída de Gaspar?").expect("a comparison");
        // Asked in either order, the earlier is quoted first.
        for told in [[&fire, &fall], [&fall, &fire]] {
            assert_eq!(
                render_order(&which, told, LabelLanguage::Es).expect("two sentences"),
                "Según las notas, primero esto (Sesión 14) y después aquello (Sesión 21):\n\
                 - «Arde La Gaviota Coja.» [Sesión 14]\n- «Cae Gaspar Nieto.» [Sesión 21]"
            );
        }
        let met = told_at(13, (2, 0), "Conocen a Yusuf.");
        let betrayal = told_at(12, (0, 1), "Dorian los traiciona.");
        let asked = comparison_of("Did they meet Yusuf before or after Dorian's betrayal?").expect("a comparison");
        let answer = render_order(&asked, [&met, &betrayal], LabelLanguage::En).expect("two sentences");
        assert!(answer.starts_with("After, by the notes: the one is told in Sesión 13 and the other in Sesión 12:"));
        let answer = render_order(&asked, [&betrayal, &met], LabelLanguage::Es).expect("two sentences");
        assert!(answer.starts_with("Antes, según las notas"), "{answer}");
        // One session: no order is claimed beyond the notes' own.
        let same = told_at(14, (0, 9), "Gaspar cae esa noche.");
        let answer = render_order(&which, [&same, &fire], LabelLanguage::Es).expect("two sentences");
        assert!(answer.starts_with("Las notas cuentan las dos cosas en la misma sesión, la Sesión 14"), "{answer}");
        assert!(answer.find("Arde").expect("quoted") < answer.find("Gaspar cae").expect("quoted"));
        assert_eq!(render_order(&which, [&fire, &fire], LabelLanguage::Es), None);
    }
}
