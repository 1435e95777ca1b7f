//! The question bank: what a question tests, the notes that hold its answer and the facts a
//! correct answer must contain. One JSON object per line (`eval/questions.jsonl`); a JSON list
//! is read too.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::retrieve::Turn;
use crate::text::fold;

/// What a question tests (see `eval/README.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QuestionKind {
    /// One note answers it.
    Fact,
    /// Several sessions together: what happened with X across the campaign.
    Arc,
    /// Shares no words with the passage that answers it: only the dense path can find it.
    Paraphrase,
    /// Names an entity by a nickname or epithet: the compendium's aliases find it.
    Alias,
    /// Leans on the `history` before it.
    Followup,
    /// The notes do not hold the answer: the right answer says so. No expected labels.
    Unanswerable,
    /// Asked in one language about notes written in the other.
    Crosslingual,
    /// Before or after: needs the sessions of both events.
    Chronology,
    /// Places itself in the campaign's time: «la sesión 27», «la última sesión», «justo
    /// después de X»; or carries a number that is not a session («12 monedas»), which the time
    /// path must leave alone.
    Time,
}

impl QuestionKind {
    pub const ALL: [QuestionKind; 9] = [
        QuestionKind::Fact,
        QuestionKind::Arc,
        QuestionKind::Paraphrase,
        QuestionKind::Alias,
        QuestionKind::Followup,
        QuestionKind::Unanswerable,
        QuestionKind::Crosslingual,
        QuestionKind::Chronology,
        QuestionKind::Time,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            QuestionKind::Fact => "fact",
            QuestionKind::Arc => "arc",
            QuestionKind::Paraphrase => "paraphrase",
            QuestionKind::Alias => "alias",
            QuestionKind::Followup => "followup",
            QuestionKind::Unanswerable => "unanswerable",
            QuestionKind::Crosslingual => "crosslingual",
            QuestionKind::Chronology => "chronology",
            QuestionKind::Time => "time",
        }
    }
}

/// One question of a bank.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvalQuestion {
    /// A short stable name (`q07`); the line number when missing.
    #[serde(default)]
    pub id: String,
    pub question: String,
    pub kind: QuestionKind,
    /// Labels, exactly as `oraculo sources` prints them, of the notes that hold the answer.
    /// Empty only for unanswerable questions.
    #[serde(default)]
    pub expected: Vec<String>,
    /// What a correct answer must contain, each a `|`-separated list of accepted spellings
    /// (`"300|trescientas"`), matched case- and accent-insensitively.
    #[serde(default)]
    pub key_facts: Vec<String>,
    /// What no answer to a player may contain: words that only GM secrets hold. Matched like
    /// key facts; any hit is a leak.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbidden: Vec<String>,
    /// Earlier turns, for follow-ups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Turn>,
    /// A question kept from real play (`oraculo asked --bank`), and what its `expected` holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_play: Option<FromPlay>,
}

/// What a question kept from real play carries in `expected` (eval/README.md, «A bank from
/// real play»).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FromPlay {
    /// Nothing yet: the DM fills `expected` (and the kind). Read, searched and not scored until then.
    ToFill,
    /// The labels the answer cited, which a player liked (👍, no 👎): a first guess for the
    /// DM to check.
    CitedAndLiked,
}

impl EvalQuestion {
    /// The expected labels without repeats, in the bank's order.
    pub fn expected_labels(&self) -> Vec<&str> {
        let mut seen = BTreeSet::new();
        self.expected.iter().map(String::as_str).filter(|label| seen.insert(*label)).collect()
    }
}

/// Reads and checks a bank: JSON Lines (one question per line, blank lines and lines starting
/// with `//` skipped) or one JSON list.
pub fn load_bank(path: impl AsRef<Path>) -> anyhow::Result<Vec<EvalQuestion>> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).with_context(|| format!("reading the bank {}", path.display()))?;
    let bank = parse_bank(&text).with_context(|| format!("reading the bank {}", path.display()))?;
    check_bank(&bank).with_context(|| format!("checking the bank {}", path.display()))?;
    Ok(bank)
}

/// Reads and checks a bank from its text (the built-in sample bank has no file).
pub fn parse_and_check(text: &str) -> anyhow::Result<Vec<EvalQuestion>> {
    let bank = parse_bank(text)?;
    check_bank(&bank)?;
    Ok(bank)
}

fn parse_bank(text: &str) -> anyhow::Result<Vec<EvalQuestion>> {
    let mut bank: Vec<EvalQuestion> = if text.trim_start().starts_with('[') {
        serde_json::from_str(text).context("parsing the JSON list")?
    } else {
        let mut bank = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with("//") {
                continue;
            }
            let question: EvalQuestion =
                serde_json::from_str(line).with_context(|| format!("line {} is not a question", n + 1))?;
            bank.push(question);
        }
        bank
    };
    for (n, question) in bank.iter_mut().enumerate() {
        if question.id.trim().is_empty() {
            question.id = format!("#{}", n + 1);
        }
    }
    Ok(bank)
}

/// A bank must have questions, each non-empty; answerable questions name at least one
/// expected label (but a question from play left for the DM to fill) and unanswerable ones
/// none; follow-ups carry history; ids are unique.
pub fn check_bank(bank: &[EvalQuestion]) -> anyhow::Result<()> {
    anyhow::ensure!(!bank.is_empty(), "the bank has no questions");
    let mut ids = BTreeSet::new();
    for question in bank {
        let id = &question.id;
        anyhow::ensure!(ids.insert(id.as_str()), "the id {id} is used twice");
        anyhow::ensure!(!question.question.trim().is_empty(), "question {id} is empty");
        anyhow::ensure!(
            question.expected.iter().all(|label| !label.trim().is_empty()),
            "question {id} has an empty expected label"
        );
        if question.kind == QuestionKind::Unanswerable {
            anyhow::ensure!(question.expected.is_empty(), "question {id} is unanswerable but lists expected labels");
        } else if question.from_play != Some(FromPlay::ToFill) {
            anyhow::ensure!(!question.expected.is_empty(), "question {id} lists no expected label");
        }
        anyhow::ensure!(
            question.key_facts.iter().all(|fact| fact.split('|').all(|spelling| !spelling.trim().is_empty())),
            "question {id} has an empty key fact (or an empty spelling between `|`)"
        );
        anyhow::ensure!(
            question.forbidden.iter().all(|word| word.split('|').all(|spelling| !spelling.trim().is_empty())),
            "question {id} has an empty forbidden word"
        );
        if question.kind == QuestionKind::Followup {
            anyhow::ensure!(!question.history.is_empty(), "question {id} is a follow-up without history");
        }
    }
    Ok(())
}

/// Whether `answer` contains `fact`: any of its `|`-separated spellings, ignoring case and
/// accents.
pub fn contains_fact(answer: &str, fact: &str) -> bool {
    let answer = fold(answer);
    fact.split('|').map(|spelling| fold(spelling.trim())).any(|spelling| answer.contains(&spelling))
}

/// Phrases that say "the notes do not hold this", folded (lower case, no accents), in Spanish
/// and English. An answer to an unanswerable question should contain one of them.
const ABSTENTION_PHRASES: &[&str] = &[
    "no aparece",
    "no aparecen",
    "no se menciona",
    "no mencionan",
    "no menciona",
    "no se dice",
    "no dicen",
    "no dice",
    "no hay informacion",
    "no hay datos",
    "no hay nada",
    "no contiene",
    "no contienen",
    "no consta",
    "no se sabe",
    "no lo se",
    "no tengo informacion",
    "no encuentro",
    "no se indica",
    "no especifica",
    "no se especifica",
    "no figura",
    "no recogen",
    "no se recoge",
    "sin informacion",
    "not in the notes",
    "not mentioned",
    "no information",
    "do not mention",
    "does not mention",
    "don't mention",
    "doesn't mention",
    "do not say",
    "does not say",
    "doesn't say",
    "don't say",
    "do not contain",
    "does not contain",
    "not contain",
    "no mention",
    "not say",
    "not recorded",
    "i don't know",
    "i do not know",
    "cannot find",
    "can't find",
    "not specified",
];

/// Whether `answer` says the notes do not hold the answer (wholly or in part).
pub fn abstains(answer: &str) -> bool {
    let folded = fold(answer);
    ABSTENTION_PHRASES.iter().any(|phrase| folded.contains(phrase))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_and_json_lists_read_the_same() {
        let lines = r#"
// a comment
{"id": "q1", "question": "¿Quién?", "kind": "fact", "expected": ["Sesión 1"], "key_facts": ["Leandro"]}

{"question": "¿Y el dragón?", "kind": "unanswerable"}
"#;
        let from_lines = parse_bank(lines).unwrap();
        assert_eq!(from_lines.len(), 2);
        assert_eq!(from_lines[0].id, "q1");
        // A missing id becomes the position.
        assert_eq!(from_lines[1].id, "#2");
        check_bank(&from_lines).unwrap();
        let list = r#"[{"id": "q1", "question": "¿Quién?", "kind": "fact", "expected": ["Sesión 1"], "key_facts": ["Leandro"]},
                       {"question": "¿Y el dragón?", "kind": "unanswerable"}]"#;
        assert_eq!(parse_bank(list).unwrap(), from_lines);
    }

    #[test]
    fn a_bad_line_is_named() {
        let error = parse_bank("{\"question\": \"q\", \"kind\": \"fact\", \"expected\": [\"Sesión 1\"]}\n{oops}\n")
            .unwrap_err();
        assert!(format!("{error:#}").contains("line 2"), "{error:#}");
        // A typo in a field name is an error, not a silently empty field.
        assert!(parse_bank(r#"{"question": "q", "expect": ["Sesión 1"], "kind": "fact"}"#).is_err());
        assert!(parse_bank(r#"{"question": "q", "expected": ["Sesión 1"], "kind": "trivia"}"#).is_err());
    }

    #[test]
    fn bank_checks() {
        let check = |json: &str| check_bank(&parse_bank(json).unwrap());
        check(r#"{"question": "¿y?", "expected": ["Sesión 7"], "kind": "followup", "history": [{"role": "user", "content": "¿Qué pasó en el lago?"}]}"#).unwrap();
        assert!(check(r#"{"question": "¿y?", "expected": ["Sesión 1"], "kind": "followup"}"#).is_err());
        assert!(check(r#"{"question": "q", "expected": [], "kind": "fact"}"#).is_err());
        assert!(check(r#"{"question": "q", "expected": ["Sesión 1"], "kind": "unanswerable"}"#).is_err());
        assert!(check(r#"{"question": " ", "expected": ["Sesión 1"], "kind": "fact"}"#).is_err());
        assert!(
            check(r#"{"question": "q", "expected": ["Sesión 1"], "kind": "fact", "key_facts": ["a||b"]}"#).is_err()
        );
        let twice =
            "{\"id\": \"a\", \"question\": \"q\", \"expected\": [\"Sesión 1\"], \"kind\": \"fact\"}\n".repeat(2);
        assert!(check(&twice).is_err());
        assert!(check_bank(&[]).is_err());
    }

    #[test]
    fn key_facts_match_any_spelling_without_case_or_accents() {
        let answer = "Les pagó TRESCIENTAS coronas [Sesión 1]; el archiduque Leandro firmó.";
        assert!(contains_fact(answer, "300|trescientas"));
        assert!(contains_fact(answer, "Archiduque"));
        assert!(contains_fact("Tobias", "Tobías"));
        assert!(!contains_fact(answer, "Verónica"));
    }

    #[test]
    fn abstention_is_read_in_both_languages() {
        assert!(abstains("Las notas no mencionan ningún torneo en Altamira."));
        assert!(abstains("Eso no aparece en el material."));
        assert!(abstains("The notes do not say who won the tournament."));
        assert!(abstains("No hay información sobre eso."));
        assert!(!abstains("Gaspar cayó defendiendo la puerta del Pósito [Sesión 22]."));
    }

    #[test]
    fn expected_labels_drop_repeats() {
        let question =
            parse_bank(r#"{"question": "q", "expected": ["Sesión 2", "Sesión 1", "Sesión 2"], "kind": "arc"}"#)
                .unwrap()
                .remove(0);
        assert_eq!(question.expected_labels(), vec!["Sesión 2", "Sesión 1"]);
    }

    /// The CRD3 bank holds at least 40 questions, at least 4 of each kind, labels in
    /// the episode-code scheme (C2 episodes from «Sesión 1001»), and follow-ups the follow-up
    /// rule actually expands (no proper name that would make them stand alone).
    #[test]
    fn the_crd3_bank_is_complete() {
        let bank = parse_and_check(include_str!("../../eval/crd3-questions.jsonl")).unwrap();
        assert!(bank.len() >= 40, "{}", bank.len());
        // The eight kinds; the time kind is measured on the sample bank.
        for kind in QuestionKind::ALL.into_iter().filter(|kind| *kind != QuestionKind::Time) {
            let n = bank.iter().filter(|question| question.kind == kind).count();
            assert!(n >= 4, "{}: {n}", kind.as_str());
        }
        for question in &bank {
            for label in &question.expected {
                let number: u32 = label.strip_prefix("Sesión ").and_then(|n| n.parse().ok()).unwrap_or(0);
                assert!((1..=115).contains(&number) || (1001..=1046).contains(&number), "{}: {label}", question.id);
            }
            if question.kind == QuestionKind::Followup {
                let (expanded, decision) =
                    crate::retrieve::decide_followup(&question.question, &question.history, false);
                assert!(expanded.is_some(), "{}: {}", question.id, decision.reason);
            }
        }
    }

    /// The adventure log (a real players' vault, `../shared/corpora/adventure-log-en`): every
    /// label that is not a session, as `oraculo sources` prints them for that vault (its
    /// `characters/` notes are sheets, the rest world documents, each named by its title).
    const ADVENTURE_LOG_NOTES: &[&str] = &[
        "Ficha: Agatha",
        "Ficha: Alder Wickwire",
        "Ficha: Aliana",
        "Ficha: Beezer Twelve Washingbeard",
        "Ficha: Fallon",
        "Ficha: Flameskull",
        "Ficha: Gil",
        "Ficha: Glasstaff",
        "Ficha: Gundren Rockseeker",
        "Ficha: Hotan",
        "Ficha: King Grohl",
        "Ficha: Klarg",
        "Ficha: Kleb Fumpton",
        "Ficha: Labyrinth Guardian",
        "Ficha: Lantern Spirit",
        "Ficha: Lord Neverember",
        "Ficha: Nothic",
        "Ficha: Ozamataz Buckshank",
        "Ficha: Puppetmaster",
        "Ficha: Rowan Chokrotsk",
        "Ficha: Rulkorf Alpensinger",
        "Ficha: Sildar Hallwinter",
        "Ficha: Sister Garaele",
        "Ficha: Skeleton Giant",
        "Ficha: Skeleton Minotaur",
        "Ficha: Spectator",
        "Ficha: The Black Spider",
        "Ficha: Toby Keith \"TK\" Blackbird",
        "Ficha: Yemick",
        "Mundo: Avorio Mansion",
        "Mundo: Bag of Holding",
        "Mundo: Cabin Journal",
        "Mundo: Cabin in the Maze",
        "Mundo: Calibur",
        "Mundo: Candlekeep",
        "Mundo: Cragmaw Castle",
        "Mundo: Cragmaw Hideout",
        "Mundo: Hall of Mirrors",
        "Mundo: Lozenge Azure",
        "Mundo: Lozenge Gules",
        "Mundo: Manta Ray Cloak",
        "Mundo: Merchant Arcane",
        "Mundo: Mistcutter",
        "Mundo: Neverwinter",
        "Mundo: Phandalin",
        "Mundo: Port Nyanzaru",
        "Mundo: Quest Tracker",
        "Mundo: Soul Lantern",
        "Mundo: Sword Coast Carnival",
        "Mundo: The Cragmaws",
        "Mundo: The Harpers",
        "Mundo: The Oremaster",
        "Mundo: The Party",
        "Mundo: The Redbrands",
        "Mundo: The Spellforge",
        "Mundo: The Zentarum",
        "Mundo: Tresendar Manor",
        "Mundo: Waterdeep",
        "Mundo: Wave Echo Cave",
        "Mundo: index",
        "Mundo: orange-theory",
    ];

    /// The banks written by other hands, frozen: they parse, hold 40 questions each
    /// with every answerable one's gold labels, and are never edited to suit a ranking (the
    /// count of their lines is part of the freeze).
    #[test]
    fn the_frozen_players_banks_parse() {
        for (name, text) in [
            ("adventure-players", include_str!("../../eval/adventure-players-questions.jsonl")),
            ("crd3-players", include_str!("../../eval/crd3-players-questions.jsonl")),
        ] {
            let bank = parse_and_check(text).unwrap();
            assert_eq!(bank.len(), 40, "{name}");
            let unanswerable = bank.iter().filter(|question| question.kind == QuestionKind::Unanswerable).count();
            assert_eq!(unanswerable, 4, "{name}");
            assert!(bank.iter().all(|q| q.kind == QuestionKind::Unanswerable || !q.expected.is_empty()), "{name}");
        }
    }

    /// The adventure-log bank holds at least 40 answerable questions and 4 of each kind, its gold
    /// labels are labels Oráculo gives that vault (`session-NN.md` is «Sesión NN» for NN up to
    /// 73, `session-0.5.md` «Sesión 0»), its follow-ups are ones the follow-up rule expands, and
    /// the time path reads at least 6 of its time questions.
    #[test]
    fn the_adventure_log_bank_is_complete() {
        let bank = parse_and_check(include_str!("../../eval/adventure-questions.jsonl")).unwrap();
        let answerable = bank.iter().filter(|question| question.kind != QuestionKind::Unanswerable).count();
        assert!(answerable >= 40, "{answerable}");
        for kind in QuestionKind::ALL {
            let n = bank.iter().filter(|question| question.kind == kind).count();
            assert!(n >= 4, "{}: {n}", kind.as_str());
        }
        for question in &bank {
            for label in &question.expected {
                match label.strip_prefix("Sesión ") {
                    Some(number) => {
                        let number: u32 = number.parse().unwrap_or(u32::MAX);
                        assert!(number <= 73, "{}: {label}", question.id);
                    }
                    None => assert!(ADVENTURE_LOG_NOTES.contains(&label.as_str()), "{}: {label}", question.id),
                }
            }
            if question.kind == QuestionKind::Followup {
                let (expanded, decision) =
                    crate::retrieve::decide_followup(&question.question, &question.history, false);
                assert!(expanded.is_some(), "{}: {}", question.id, decision.reason);
            }
        }
        let time_questions: Vec<&EvalQuestion> =
            bank.iter().filter(|question| question.kind == QuestionKind::Time).collect();
        let unread: Vec<&str> = time_questions
            .iter()
            .filter(|question| crate::retrieve::time::parse_time_references(&question.question).is_empty())
            .map(|question| question.id.as_str())
            .collect();
        // a44's «Dock 41» is not a session, so nothing is read there on purpose; a45's
        // «session 0.5», the vault's own name for its catch-up chronicle, reads as session zero.
        assert_eq!(unread, ["a44"]);
        assert!(time_questions.len() - unread.len() >= 6, "{}", time_questions.len() - unread.len());
    }

    #[test]
    fn a_question_from_play_may_wait_for_its_expected_labels() {
        let to_fill = r#"{"id": "play-1", "question": "¿Dónde está Baika?", "kind": "fact", "from_play": "to_fill"}"#;
        let bank = parse_bank(to_fill).unwrap();
        assert_eq!(bank[0].from_play, Some(FromPlay::ToFill));
        check_bank(&bank).unwrap();
        let unmarked = r#"{"id": "q1", "question": "¿Dónde está Baika?", "kind": "fact"}"#;
        assert!(check_bank(&parse_bank(unmarked).unwrap()).is_err(), "a hand-written question names its labels");
        let liked = r#"{"id": "p2", "question": "¿Y Odo?", "kind": "fact", "from_play": "cited_and_liked"}"#;
        assert!(check_bank(&parse_bank(liked).unwrap()).is_err(), "a liked answer's labels are in the line");
    }
}
