//! Follow-up questions: history feeds the search, not only the model.
//!
//! A deterministic heuristic, no LLM call. A question that does not stand alone (it opens with
//! a connector such as "y", "pero", "entonces", "and", "then", "what about", it is short, or it
//! refers back with a pronoun: "did she ever get it back?", "¿y su hermano?", "how far is it
//! from there?") and names no entity gets the conversation's last user turn prepended, for the
//! search only; the question answered stays the original. Conservative on purpose: a proper name always wins, so
//! "¿y qué hizo Baika?" is searched as it is.

use serde::Serialize;

use crate::llm::chat::{Turn, TurnRole};
use crate::text::fold;

/// Words that open a question leaning on the previous one.
const CONNECTORS: &[&str] = &[
    "y", "e", "pero", "entonces", "luego", "despues", "ademas", "tambien", "and", "but", "then", "so", "also", "after",
];
/// At most this many words and no name: "¿por qué?", "¿y él?", "¿cómo murió?".
const SHORT_QUESTION_WORDS: usize = 3;
/// Words that point back at something named before: personal pronouns, possessives and
/// place adverbs (folded). Left out on purpose: the Spanish `lo`, `la`, `los`, `las` (articles
/// far more often than pronouns) and English `this`, `that` ("this session", "that night").
const ANAPHORA: &[&str] = &[
    "el", "ella", "ellos", "ellas", "eso", "esa", "ese", "esos", "esas", "aquel", "aquella", "alli", "alla", "ahi",
    "su", "sus", "le", "les", "suyo", "suya", "it", "its", "he", "him", "his", "she", "her", "hers", "they", "them",
    "their", "theirs", "there",
];
/// "What about …?", "¿Y qué hay de …?": the rest of the question lives in the previous one.
const OPENING_PHRASES: &[&str] = &["what about", "how about", "y que hay de", "que hay de", "y que tal"];

/// Why a question was or was not searched with the previous user turn: `search --json`
/// shows it, so a lost follow-up can be explained without a debugger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FollowupDecision {
    pub expanded: bool,
    /// `no previous user turn`, `names an entity of the compendium`, `names "Baika"`,
    /// `opens with "and"`, `opens with "what about"`, `refers back with "she"`,
    /// `short (2 words)`, `stands alone`.
    pub reason: String,
}

/// The text to search with: the question, or the last user turn + the question when the
/// question does not stand alone. `names_entity` says whether the compendium found a name.
pub fn expand_followup(question: &str, history: &[Turn], names_entity: bool) -> Option<String> {
    decide_followup(question, history, names_entity).0
}

/// [`expand_followup`] with the reason for its decision.
pub fn decide_followup(question: &str, history: &[Turn], names_entity: bool) -> (Option<String>, FollowupDecision) {
    let decided = |expanded: bool, reason: String| FollowupDecision { expanded, reason };
    let Some(previous) = history.iter().rev().find(|turn| turn.role == TurnRole::User) else {
        return (None, decided(false, "no previous user turn".to_string()));
    };
    if names_entity {
        return (None, decided(false, "names an entity of the compendium".to_string()));
    }
    if let Some(name) = proper_name(question) {
        return (None, decided(false, format!("names \"{name}\"")));
    }
    match leans_back(question) {
        None => (None, decided(false, "stands alone".to_string())),
        Some(reason) => (Some(format!("{} {}", previous.content.trim(), question.trim())), decided(true, reason)),
    }
}

fn words(question: &str) -> Vec<&str> {
    question.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect()
}

/// Why the question does not stand alone, or `None` when it does.
fn leans_back(question: &str) -> Option<String> {
    let words = words(question);
    let first = words.first()?;
    let folded: Vec<String> = words.iter().map(|word| fold(word)).collect();
    if CONNECTORS.contains(&fold(first).as_str()) {
        return Some(format!("opens with \"{}\"", first.to_lowercase()));
    }
    let joined = folded.join(" ");
    if let Some(phrase) = OPENING_PHRASES.iter().find(|phrase| joined.starts_with(*phrase)) {
        return Some(format!("opens with \"{phrase}\""));
    }
    // "él" (he) folds to "el" (the): only the accented form written is a pronoun.
    let refers_back = words.iter().zip(&folded).find(|(word, folded)| {
        ANAPHORA.contains(&folded.as_str()) && !(folded.as_str() == "el" && !word.to_lowercase().starts_with('é'))
    });
    if let Some((word, _)) = refers_back {
        return Some(format!("refers back with \"{}\"", word.to_lowercase()));
    }
    (words.len() <= SHORT_QUESTION_WORDS).then(|| format!("short ({} words)", words.len()))
}

/// A capitalised word that does not open the sentence: "¿y qué hizo Baika?".
fn proper_name(question: &str) -> Option<&str> {
    words(question).into_iter().skip(1).find(|word| word.chars().next().is_some_and(char::is_uppercase))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(question: &str, names_entity: bool, expected: Option<&str>) {
        let history = vec![
            Turn { role: TurnRole::User, content: "¿Qué pasó con el archiduque?".into() },
            Turn { role: TurnRole::Assistant, content: "Huyó al norte [Sesión …].".into() },
        ];
        assert_eq!(expand_followup(question, &history, names_entity).as_deref(), expected, "{question}");
    }

    #[test]
    fn questions_that_lean_on_the_previous_one_are_expanded() {
        let expanded = |q: &str| format!("¿Qué pasó con el archiduque? {q}");
        for question in [
            "¿Y después?",
            "¿y qué pasó luego con sus tropas?",
            "Pero, ¿por qué huyó al norte sin avisar?",
            "Entonces ¿quién lo traicionó al final?",
            "e hijos, ¿tenía alguno?",
            "¿Por qué?",
            "¿Cómo murió?",
            "And then what happened to the army?",
            "but why did he leave the city?",
            "So who betrayed him?",
            "Why?",
            // Pronouns that point back, in both languages.
            "did she ever get it back?",
            "how far is it from there?",
            "what happened to his brother in the end?",
            "¿qué le dijo al capitán del barco?",
            "¿cuántos años tenía ella entonces?",
            "¿qué pasó con su hermano mayor?",
            "¿quién vivía allí antes de la guerra?",
            "¿lo sabía él desde el principio?",
            "What about the army of the north?",
            "¿Qué hay de la torre del mago?",
        ] {
            check(question, false, Some(&expanded(question)));
        }
    }

    #[test]
    fn questions_that_stand_alone_are_searched_as_they_are() {
        for question in [
            "¿Quién forjó la espada del rey?",
            "¿Dónde está el templo del mar?",
            "What did the party find in the lighthouse?",
            // "el" the article is not "él" the pronoun; "la" is left alone.
            "¿Quién forjó el escudo de la reina?",
            "Which god does the temple of the sea worship?",
        ] {
            check(question, false, None);
        }
    }

    #[test]
    fn a_name_always_wins() {
        // Named in the compendium.
        check("¿y qué hizo el archiduque?", true, None);
        check("¿Y después?", true, None);
        // A proper name the compendium does not know yet.
        check("¿y qué hizo Baika?", false, None);
        check("and Norkiel?", false, None);
    }

    #[test]
    fn no_history_means_no_expansion() {
        assert_eq!(expand_followup("¿Y después?", &[], false), None);
        let only_assistant = [Turn { role: TurnRole::Assistant, content: "Hola".into() }];
        assert_eq!(expand_followup("¿Y después?", &only_assistant, false), None);
    }

    #[test]
    fn each_decision_says_why() {
        let history = vec![Turn { role: TurnRole::User, content: "Who is Vex?".into() }];
        for (question, names_entity, expanded, reason) in [
            ("did she ever get it back?", false, true, "refers back with \"she\""),
            ("¿y su hermano?", false, true, "opens with \"y\""),
            ("What about the horse?", false, true, "opens with \"what about\""),
            ("¿Cómo murió?", false, true, "short (2 words)"),
            ("¿Lo sabía él desde el principio?", false, true, "refers back with \"él\""),
            ("What did Vex call the horse?", true, false, "names an entity of the compendium"),
            ("and Norkiel?", false, false, "names \"Norkiel\""),
            ("Which god does the temple of the sea worship?", false, false, "stands alone"),
        ] {
            let (_, decision) = decide_followup(question, &history, names_entity);
            assert_eq!(decision, FollowupDecision { expanded, reason: reason.to_string() }, "{question}");
        }
        assert_eq!(decide_followup("¿Y después?", &[], false).1.reason, "no previous user turn");
    }
}
