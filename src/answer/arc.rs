//! An entity's story as the context's first block: for a question about someone across the
//! campaign («¿qué pasó con el archiduque?»), one cited line per session where they appear,
//! in story order, each the sentence of that session that best answers the question.
//!
//! A model that reads twenty tokens a second gets through a few hundred tokens of material:
//! the first passages of the best-ranked fragments held one session's description of the
//! archduke, not what happened to him. The same budget holds a line for each of his eight
//! sessions. The block follows the design's rule for leftovers: one slot per session, in a
//! titled block of its own that the model can tell from the full material.
//!
//! Pure: the caller finds the sentences that name the entity (the compendium's matcher) and
//! scores them against the question (its terms, and the embedder's similarity); this module
//! picks and renders.

use crate::answer::passages::{EXCERPT_MAX_CHARS, leads_into_next, sentences};
use crate::answer::terms::fold_words;
use crate::corpus::{FragmentId, Label, SessionNumber};
use crate::text::shorten;

/// Other names the block's title gives at most: enough for the titles a story turns on.
pub const ARC_MAX_ALIASES: usize = 4;
/// Sessions an entity's block lists at most: a recurring NPC's whole story (the sample's
/// archduke appears in eight, its most travelled NPC in nine) and, for a character in every
/// session, its first and last appearances and the ten sessions that best answer.
pub const ARC_MAX_SESSIONS: usize = 12;
/// Lines one session may give: the best sentence first in every session, then a second
/// where the budget allows (a session where the entity vanishes and one where it returns say
/// two things each).
pub const ARC_LINES_PER_SESSION: usize = 2;
/// A sentence shorter than this is read with the next one («Leandro no está.» says little
/// without «Nadie lo ha visto salir del salón.»).
const ARC_MIN_SENTENCE_CHARS: usize = 60;

/// A fragment of a session where the entity appears, as the caller read it.
#[derive(Debug, Clone, Copy)]
pub struct ArcFragment<'a> {
    pub session: SessionNumber,
    pub label: &'a str,
    pub fragment_id: FragmentId,
    pub source_path: &'a str,
    pub text: &'a str,
}

/// A sentence of a session that names the entity: a candidate line.
#[derive(Debug, Clone, PartialEq)]
pub struct ArcSentence {
    pub session: SessionNumber,
    pub label: Label,
    pub fragment_id: FragmentId,
    pub source_path: String,
    pub text: String,
    /// Its place among the sentences of its fragment (0: the first).
    pub position: usize,
}

/// One line of the block.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArcLine {
    pub session: SessionNumber,
    pub label: Label,
    pub fragment_id: FragmentId,
    pub source_path: String,
    pub text: String,
    /// The session's best line (a second line of a session is not).
    pub best: bool,
}

/// The block: whose story, and its lines in story order (sessions by number, a session's
/// lines in the order its notes tell them).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ArcBlock {
    pub entity: String,
    /// Its other names, as the block's title gives them: a line may call it by any of them
    /// («el Heraldo de la Marea Baja» is the archduke, changed), and the model must know.
    pub aliases: Vec<String>,
    pub lines: Vec<ArcLine>,
    /// Sessions where the entity appears that the block had no room for.
    pub sessions_left_out: usize,
}

/// Every sentence of `fragments` that names the entity (`names_entity`), a short one read
/// with the sentence after it, each cut at [`EXCERPT_MAX_CHARS`] at a sentence's end where
/// one falls inside.
pub fn arc_sentences(fragments: &[ArcFragment<'_>], names_entity: &dyn Fn(&str) -> bool) -> Vec<ArcSentence> {
    let mut found = Vec::new();
    for fragment in fragments {
        let all = sentences(fragment.text);
        for (position, sentence) in all.iter().enumerate() {
            if !names_entity(sentence) {
                continue;
            }
            let mut text = sentence.clone();
            if (text.chars().count() < ARC_MIN_SENTENCE_CHARS || leads_into_next(&text))
                && let Some(next) = all.get(position + 1)
            {
                text = format!("{text} {next}");
            }
            found.push(ArcSentence {
                session: fragment.session,
                label: Label::new(fragment.label),
                fragment_id: fragment.fragment_id,
                source_path: fragment.source_path.to_string(),
                text: shorten(&text, EXCERPT_MAX_CHARS),
                position,
            });
        }
    }
    found
}

/// The block's lines from `candidates` and their `scores` (one each, higher is more about
/// the question), within `max_tokens`:
/// - the best sentence of every session first, the sessions beyond `max_sessions` (at most
///   [`ARC_MAX_SESSIONS`]) left out by score, never the first and last appearances (where
///   the story starts and where it stands);
/// - then a second sentence of the sessions whose second best scores highest, while the
///   budget allows ([`ARC_LINES_PER_SESSION`]);
/// - a line that would not fit is skipped, a shorter later one may still go in.
///
/// Lines are returned in story order.
pub fn choose_arc_lines(
    candidates: &[ArcSentence],
    scores: &[f64],
    max_sessions: usize,
    max_tokens: usize,
    count_tokens: &dyn Fn(&str) -> usize,
) -> (Vec<ArcLine>, usize) {
    let max_sessions = max_sessions.clamp(1, ARC_MAX_SESSIONS);
    let mut sessions: Vec<SessionNumber> = candidates.iter().map(|sentence| sentence.session).collect();
    sessions.sort_unstable();
    sessions.dedup();
    // Each session's sentences, best first (ties: the earlier in the notes).
    let ranked_in = |session: SessionNumber| {
        let mut idxs: Vec<usize> = (0..candidates.len()).filter(|&idx| candidates[idx].session == session).collect();
        idxs.sort_by(|&a, &b| score(scores, b).total_cmp(&score(scores, a)).then(a.cmp(&b)));
        idxs
    };
    let per_session: Vec<(SessionNumber, Vec<usize>)> =
        sessions.iter().map(|&session| (session, ranked_in(session))).collect();
    // Sessions in the order they get a line: first and last appearance, then by best score.
    let mut order: Vec<usize> = (0..per_session.len()).collect();
    let last = per_session.len().saturating_sub(1);
    order.sort_by(|&a, &b| {
        let pinned = |idx: usize| idx == 0 || idx == last;
        let best = |idx: usize| per_session[idx].1.first().map_or(f64::MIN, |&best| score(scores, best));
        pinned(b).cmp(&pinned(a)).then(best(b).total_cmp(&best(a))).then(a.cmp(&b))
    });
    let mut picked: Vec<usize> = Vec::new();
    let mut used = 0;
    let mut n_sessions = 0;
    let take = |idx: usize, used: &mut usize, picked: &mut Vec<usize>| {
        let cost = count_tokens(&line_entry(&candidates[idx].label, &candidates[idx].text));
        if *used + cost > max_tokens {
            return false;
        }
        *used += cost;
        picked.push(idx);
        true
    };
    let mut lined: Vec<usize> = Vec::new();
    for &session_idx in &order {
        if n_sessions == max_sessions {
            break;
        }
        if let Some(&best) = per_session[session_idx].1.first()
            && take(best, &mut used, &mut picked)
        {
            n_sessions += 1;
            lined.push(session_idx);
        }
    }
    // Second lines: the sessions already lined whose next sentence scores highest.
    for round in 1..ARC_LINES_PER_SESSION {
        let mut seconds: Vec<usize> =
            lined.iter().filter_map(|&session_idx| per_session[session_idx].1.get(round).copied()).collect();
        seconds.sort_by(|&a, &b| score(scores, b).total_cmp(&score(scores, a)).then(a.cmp(&b)));
        for idx in seconds {
            take(idx, &mut used, &mut picked);
        }
    }
    let sessions_left_out = per_session.len() - n_sessions;
    let best: Vec<usize> =
        lined.iter().filter_map(|&session_idx| per_session[session_idx].1.first().copied()).collect();
    picked.sort_by_key(|&idx| (candidates[idx].session, candidates[idx].fragment_id, candidates[idx].position));
    let lines = picked
        .into_iter()
        .map(|idx| {
            let sentence = &candidates[idx];
            ArcLine {
                session: sentence.session,
                label: sentence.label.clone(),
                fragment_id: sentence.fragment_id,
                source_path: sentence.source_path.clone(),
                text: sentence.text.clone(),
                best: best.contains(&idx),
            }
        })
        .collect();
    (lines, sessions_left_out)
}

fn score(scores: &[f64], idx: usize) -> f64 {
    scores.get(idx).copied().unwrap_or(0.0)
}

/// The entity's other names that the quoted `texts` call it by and a reader of the question
/// would not know for it: the answer's introduction says them («…de Leandro de Valdemora, a
/// quien también llaman «el Heraldo de la Marea Baja»»), or a player reads of a Heraldo and
/// never learns the lines are the archduke's. Not a part of its name («Leandro»), not one the
/// question already uses («el archiduque»), and not one inside another one given («el
/// Heraldo» in «el Heraldo de la Marea Baja»). Matched as the compendium matches: whole
/// words, case and accents aside.
pub fn other_names_quoted(arc: &ArcBlock, texts: &[&str], question: &str) -> Vec<String> {
    let words = |text: &str| -> Vec<String> { fold_words(text).collect() };
    let holds = |haystack: &[String], needle: &[String]| {
        !needle.is_empty() && haystack.windows(needle.len()).any(|window| window == needle)
    };
    let name = words(&arc.entity);
    let asked = words(question);
    let quoted: Vec<Vec<String>> = texts.iter().map(|text| words(text)).collect();
    let used: Vec<(&String, Vec<String>)> = arc
        .aliases
        .iter()
        .map(|alias| (alias, words(alias)))
        .filter(|(_, alias)| !holds(&name, alias) && !holds(&asked, alias))
        .filter(|(_, alias)| quoted.iter().any(|text| holds(text, alias)))
        .collect();
    used.iter()
        .filter(|(_, alias)| !used.iter().any(|(_, other)| other.len() > alias.len() && holds(other, alias)))
        .map(|(alias, _)| alias.to_string())
        .take(ARC_MAX_ALIASES)
        .collect()
}

/// One line as the model reads it: `- [Sesión 9] …`.
pub fn line_entry(label: &str, text: &str) -> String {
    format!("- [{label}] {text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word_count(text: &str) -> usize {
        text.split_whitespace().count()
    }

    /// Sessions of a story about «Leandro» (session number, text).
    const STORY: &[(u32, &str)] = &[
        (1, "El grupo llega a Puerto Salobre. Leandro los contrata para escoltar las caravanas de sal hasta el paso."),
        (
            5,
            "Leandro los recibe en su despacho, nervioso y pálido, frotándose las manos mientras habla. \
             Leandro les confiesa que oye una voz en sueños que le pide la Corona.",
        ),
        (8, "Llueve. Nadie habla de Leandro en la taberna esta noche, y el grupo bebe en silencio junto al fuego."),
        (
            9,
            "Durante la Fiesta de las Mareas, Leandro desaparece del salón sin dejar rastro. \
             La guardia busca a Leandro por todo el palacio hasta el alba.",
        ),
        (
            30,
            "El Heraldo de la Marea Baja se presenta en la fiesta: es Leandro, cambiado, con la piel cubierta de sal.",
        ),
    ];

    fn fragments() -> Vec<(String, u32, &'static str)> {
        STORY.iter().map(|&(session, text)| (format!("Sesión {session}"), session, text)).collect()
    }

    fn candidates() -> Vec<ArcSentence> {
        let owned = fragments();
        let fragments: Vec<ArcFragment<'_>> = owned
            .iter()
            .map(|(label, session, text)| ArcFragment {
                session: SessionNumber(*session),
                label,
                fragment_id: FragmentId(i64::from(*session)),
                source_path: "Crónica.md",
                text,
            })
            .collect();
        arc_sentences(&fragments, &|sentence: &str| sentence.contains("Leandro"))
    }

    #[test]
    fn the_candidates_are_the_sentences_that_name_the_entity() {
        let found = candidates();
        let texts: Vec<(u32, &str)> = found.iter().map(|s| (s.session.0, s.text.as_str())).collect();
        assert_eq!(texts.len(), 7, "{texts:#?}");
        // «El grupo llega…» does not name him; «Llueve.» does not either, and the short
        // sentence that does is not short here.
        assert!(texts.iter().all(|(_, text)| text.contains("Leandro")), "{texts:#?}");
        assert_eq!(found[0].position, 1);
        assert_eq!(texts[2].0, 5);
    }

    #[test]
    fn each_session_gives_its_best_sentence_in_story_order_and_seconds_only_with_room() {
        let found = candidates();
        // Scores: what a question about his disappearance would give.
        let scores: Vec<f64> = found
            .iter()
            .map(|s| if s.text.contains("desaparece") || s.text.contains("Heraldo") { 3.0 } else { 1.0 })
            .collect();
        let (lines, left_out) = choose_arc_lines(&found, &scores, ARC_MAX_SESSIONS, 10_000, &word_count);
        let sessions: Vec<u32> = lines.iter().map(|line| line.session.0).collect();
        assert_eq!(sessions, [1, 5, 5, 8, 9, 9, 30], "with room, second lines too, in story order");
        assert_eq!(left_out, 0);
        // Session 9's best line is the one that says what happened, and it comes first there.
        let nine: Vec<&ArcLine> = lines.iter().filter(|l| l.session.0 == 9).collect();
        assert!(nine[0].text.contains("desaparece") && nine[0].best && !nine[1].best, "{nine:?}");
        assert_eq!(lines.iter().filter(|l| l.best).count(), STORY.len(), "one best line per session");

        // A budget for the five best lines: one per session, none twice.
        let best_of = |session: u32| {
            lines.iter().find(|l| l.session.0 == session).map_or(0, |l| word_count(&line_entry(&l.label, &l.text)))
        };
        let one_each: usize = STORY.iter().map(|&(session, _)| best_of(session)).sum();
        let (lines, left_out) = choose_arc_lines(&found, &scores, ARC_MAX_SESSIONS, one_each, &word_count);
        let sessions: Vec<u32> = lines.iter().map(|line| line.session.0).collect();
        assert_eq!(sessions, [1, 5, 8, 9, 30], "{lines:#?}");
        assert_eq!(left_out, 0);
    }

    #[test]
    fn too_many_sessions_keep_the_first_and_last_appearance_and_the_best_in_between() {
        // A character in 20 sessions, whose middle sessions score by their number.
        let sentences: Vec<ArcSentence> = (1..=20)
            .map(|n| ArcSentence {
                session: SessionNumber(n),
                label: Label::new(format!("Sesión {n}")),
                fragment_id: FragmentId(i64::from(n)),
                source_path: format!("Sesiones/{n}.md"),
                text: format!("Leandro en la sesión {n}."),
                position: 0,
            })
            .collect();
        let scores: Vec<f64> = (1..=20).map(|n| if n == 1 || n == 20 { 0.0 } else { f64::from(n % 7) }).collect();
        let (lines, left_out) = choose_arc_lines(&sentences, &scores, ARC_MAX_SESSIONS, 10_000, &word_count);
        let sessions: Vec<u32> = lines.iter().map(|line| line.session.0).collect();
        assert_eq!(lines.len(), ARC_MAX_SESSIONS);
        assert_eq!(left_out, 20 - ARC_MAX_SESSIONS);
        assert_eq!(sessions.first(), Some(&1), "the first appearance stays, though it scores least");
        assert_eq!(sessions.last(), Some(&20), "the last appearance stays");
        assert!(sessions.windows(2).all(|pair| pair[0] < pair[1]), "story order: {sessions:?}");
        // The ten others are the best scores: 6, 5, 4 … (n % 7), never a 0 or 1 over a 6.
        assert!(sessions.contains(&6) && sessions.contains(&13), "{sessions:?}");
        assert!(!sessions.contains(&7) && !sessions.contains(&14), "{sessions:?}");
    }

    #[test]
    fn fewer_sessions_asked_keep_the_ends_and_the_best() {
        let found = candidates();
        let scores: Vec<f64> = found
            .iter()
            .map(|s| if s.text.contains("desaparece") || s.text.contains("Heraldo") { 3.0 } else { 1.0 })
            .collect();
        let (lines, left_out) = choose_arc_lines(&found, &scores, 3, 10_000, &word_count);
        let sessions: Vec<u32> = lines.iter().map(|line| line.session.0).collect();
        // First and last appearance, and the session that says what happened.
        assert_eq!(sessions, [1, 9, 9, 30], "{lines:#?}");
        assert_eq!(left_out, 2);
    }

    #[test]
    fn nothing_fits_gives_no_line_and_a_long_line_is_skipped_for_a_shorter_one() {
        let found = candidates();
        let scores = vec![1.0; found.len()];
        assert_eq!(choose_arc_lines(&found, &scores, ARC_MAX_SESSIONS, 3, &word_count).0, Vec::new());
        let (lines, _) = choose_arc_lines(&found, &scores, ARC_MAX_SESSIONS, 20, &word_count);
        assert!(!lines.is_empty());
        assert!(lines.iter().map(|l| word_count(&line_entry(&l.label, &l.text))).sum::<usize>() <= 20);
    }

    #[test]
    fn the_other_names_said_are_those_the_quotes_use_and_the_question_does_not() {
        let arc = ArcBlock {
            entity: "Leandro de Valdemora".into(),
            aliases: vec![
                "el Archiduque".into(),
                "el Heraldo de la Marea Baja".into(),
                "el Heraldo".into(),
                "Leandro".into(),
                "la Gaviota".into(),
            ],
            lines: Vec::new(),
            sessions_left_out: 0,
        };
        let quotes = [
            "Leandro de Valdemora ha desaparecido.",
            "Desde el balcón, el HERALDO DE LA MAREA BAJA lee un bando.",
            "El Heraldo no cae enseguida.",
            "El archiduque los recibe.",
        ];
        let question = "¿Qué pasó con el archiduque?";
        // A part of the name, one the question uses, one inside a longer one given, and one
        // no quote uses are not said.
        assert_eq!(other_names_quoted(&arc, &quotes, question), vec!["el Heraldo de la Marea Baja".to_string()]);
        // Asked by name, the title the quotes use is said too.
        assert_eq!(
            other_names_quoted(&arc, &quotes, "¿Qué pasó con Leandro?"),
            vec!["el Archiduque".to_string(), "el Heraldo de la Marea Baja".to_string()]
        );
        // A shorter name alone, with no longer one quoted, is said; a word inside another is no name.
        assert_eq!(
            other_names_quoted(&arc, &["El Heraldo no cae.", "Las gaviotas graznan."], question),
            vec!["el Heraldo".to_string()]
        );
        assert!(other_names_quoted(&arc, &["Leandro de Valdemora ha desaparecido."], question).is_empty());
    }
}
