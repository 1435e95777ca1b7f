//! `oraculo asked`: what the players asked the bot, kept for the DM (`feedback`): the questions
//! the notes did not answer, grouped by what they name; the answers marked wrong; the counts per
//! week. `--bank FILE` writes the kept questions as an eval bank instead.

use std::collections::BTreeSet;
use std::io::Write as _;

use anyhow::Context as _;

use super::{AskedArgs, campaign_paths};
use crate::eval::{EvalQuestion, FromPlay, QuestionKind};
use crate::feedback::{AskedQuestions, KeptQuestion, NamedKind, Report, now_unix, same_question};
use crate::retrieve::Audience;

/// The id prefix of a question kept from play in a bank: `play-<kept id>`.
const BANK_ID_PREFIX: &str = "play-";

pub(super) async fn asked(args: &AskedArgs) -> anyhow::Result<()> {
    let config = args.campaign.load_config()?;
    let (_, index_dir) = campaign_paths(&config)?;
    let kept = AskedQuestions::new(&index_dir, config.feedback);
    // Every start prunes: nothing is read, or written to a bank, past keep_days.
    kept.prune().await.context("deleting the kept questions past feedback.keep_days")?;
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    let since = args.since.map(|seconds| now_unix() - seconds);
    if let Some(path) = &args.bank {
        let questions = kept.questions(audience, since).await.context("reading the kept questions")?;
        let bank = bank_of(&questions);
        anyhow::ensure!(!bank.is_empty(), "no question is kept{}: no bank written", span_text(args.since));
        let mut text = String::new();
        for question in &bank {
            text.push_str(&serde_json::to_string(question)?);
            text.push('\n');
        }
        let mut file = std::fs::File::create(path).with_context(|| format!("creating the bank {}", path.display()))?;
        file.write_all(text.as_bytes()).with_context(|| format!("writing the bank {}", path.display()))?;
        let prefilled = bank.iter().filter(|question| question.from_play == Some(FromPlay::CitedAndLiked)).count();
        eprintln!(
            "asked: {} question(s) written to {} ({prefilled} with the labels of a liked answer to check, the rest \
             to fill)",
            bank.len(),
            path.display()
        );
        return Ok(());
    }
    let report = kept.report(audience, since).await.context("reading the kept questions")?;
    if args.campaign.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", render(&report, args.since));
    }
    Ok(())
}

/// The kept questions as an eval bank (eval/README.md): each distinct question once, as it
/// was searched (a follow-up with what it follows: a bank question has no history). The
/// answered and liked ones carry the labels their answer cited (`cited_and_liked`); the rest
/// wait for the DM (`to_fill`), the ones the notes did not answer as `unanswerable`.
fn bank_of(questions: &[KeptQuestion]) -> Vec<EvalQuestion> {
    // Liked first, so a question asked twice keeps its pre-filled labels; then newest.
    let mut ordered: Vec<&KeptQuestion> = questions.iter().collect();
    ordered.sort_by(|a, b| b.liked().cmp(&a.liked()).then(b.asked_at.cmp(&a.asked_at)));
    let mut seen = BTreeSet::new();
    let mut bank: Vec<(i64, EvalQuestion)> = Vec::new();
    for question in ordered {
        let asked = question.as_searched().trim();
        if asked.is_empty() || !seen.insert(same_question(asked)) {
            continue;
        }
        let (kind, expected, from_play) = if question.liked() {
            let cited = question.cited.iter().map(|label| label.to_string()).collect();
            (QuestionKind::Fact, cited, FromPlay::CitedAndLiked)
        } else if question.not_in_notes && question.verdicts.in_the_notes == 0 {
            (QuestionKind::Unanswerable, Vec::new(), FromPlay::ToFill)
        } else {
            (QuestionKind::Fact, Vec::new(), FromPlay::ToFill)
        };
        let line = EvalQuestion {
            id: format!("{BANK_ID_PREFIX}{}", question.id),
            question: asked.to_string(),
            kind,
            expected,
            key_facts: Vec::new(),
            forbidden: Vec::new(),
            history: Vec::new(),
            from_play: Some(from_play),
        };
        bank.push((question.asked_at, line));
    }
    // In the order asked, as a DM reads back a campaign.
    bank.sort_by_key(|(asked_at, _)| *asked_at);
    bank.into_iter().map(|(_, question)| question).collect()
}

/// « in the last 7d» for a `--since` span, nothing without one.
fn span_text(since: Option<i64>) -> String {
    since.map(|seconds| format!(" in the last {}", render_span(seconds))).unwrap_or_default()
}

/// Seconds as the largest whole unit `--since` takes.
fn render_span(seconds: i64) -> String {
    for (unit, size) in SPAN_UNITS {
        if seconds % size == 0 && seconds >= size {
            return format!("{}{unit}", seconds / size);
        }
    }
    format!("{seconds}s")
}

/// `--since`'s units, largest first.
const SPAN_UNITS: [(&str, i64); 4] = [("w", 7 * 86_400), ("d", 86_400), ("h", 3_600), ("m", 60)];

/// `7d`, `2w`, `24h`, `90m`: a span back from now, in seconds.
pub(super) fn parse_span(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let refuse = || format!("`{text}` is not a span: a number and a unit, w, d, h or m (7d, 2w, 24h)");
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(refuse)?;
    let (number, unit) = text.split_at(split);
    let number: i64 = number.parse().map_err(|_| refuse())?;
    let size = SPAN_UNITS.iter().find(|(name, _)| *name == unit).map(|(_, size)| *size).ok_or_else(refuse)?;
    number.checked_mul(size).filter(|seconds| *seconds > 0).ok_or_else(refuse)
}

/// The report as text: the unanswered questions by what they name, the answers marked wrong,
/// the weeks.
fn render(report: &Report, since: Option<i64>) -> String {
    let mut out = String::new();
    let whose = if report.audience == "gm" { "every channel" } else { "players' channels" };
    out.push_str(&format!(
        "{} question(s) kept{} ({whose}); {} the notes did not answer\n",
        report.n_questions,
        span_text(since),
        report.n_unanswered
    ));
    if !report.unanswered.is_empty() {
        out.push_str("\nNot answered by the notes, by what they name (most asked first):\n");
    }
    for group in &report.unanswered {
        let named = match group.kind {
            NamedKind::Entity => group.named.clone(),
            NamedKind::Session => format!("session {}", group.named),
            NamedKind::Nothing => "(nothing named)".to_string(),
        };
        out.push_str(&format!("  {named} — asked {}×\n", group.asked));
        for question in &group.questions {
            let in_notes = if question.in_the_notes > 0 {
                format!(", 👎 «it was in the notes» {}×", question.in_the_notes)
            } else {
                String::new()
            };
            out.push_str(&format!("    {}× {}{in_notes}\n", question.asked, question.question));
        }
    }
    if !report.marked_wrong.is_empty() {
        out.push_str("\nMarked wrong (👎), with the labels they cited:\n");
    }
    for marked in &report.marked_wrong {
        let cited: Vec<&str> = marked.cited.iter().map(|label| label.as_str()).collect();
        let cited = if cited.is_empty() { "no label".to_string() } else { cited.join(", ") };
        out.push_str(&format!(
            "  👎 {} (wrong {}, incomplete {}) {} — cited: {cited}\n",
            marked.down, marked.wrong, marked.incomplete, marked.question
        ));
    }
    if !report.weeks.is_empty() {
        out.push_str("\nweek of       asked  unanswered  👍  👎\n");
    }
    for week in &report.weeks {
        out.push_str(&format!(
            "{}  {:>5}  {:>10}  {:>2}  {:>2}\n",
            week.week, week.asked, week.unanswered, week.up, week.down
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(id: i64, question: &str, not_in_notes: bool, up: usize) -> KeptQuestion {
        KeptQuestion {
            id,
            asked_at: id * 100,
            audience: "player",
            question: question.to_string(),
            search_query: None,
            answer_text: String::new(),
            cited: if not_in_notes { Vec::new() } else { vec![crate::corpus::Label::new("Sesión 3")] },
            shown: Vec::new(),
            entities: Vec::new(),
            sessions: Vec::new(),
            not_in_notes,
            verdicts: crate::feedback::VerdictCounts { up, ..Default::default() },
        }
    }

    #[test]
    fn a_bank_from_play_reads_as_a_bank_without_edits() {
        let mut followup = kept(4, "¿Y después?", false, 0);
        followup.search_query = Some("¿Qué hizo Odo? ¿Y después?".to_string());
        let kept = [
            kept(1, "¿Qué hizo Odo?", false, 0),
            kept(2, "¿qué hizo Odo", false, 1),
            kept(3, "¿Quién es el dios del mar?", true, 0),
            followup,
        ];
        let bank = bank_of(&kept);
        let lines: Vec<(&str, &str, QuestionKind, usize, Option<FromPlay>)> =
            bank.iter().map(|q| (q.id.as_str(), q.question.as_str(), q.kind, q.expected.len(), q.from_play)).collect();
        assert_eq!(
            lines,
            [
                ("play-2", "¿qué hizo Odo", QuestionKind::Fact, 1, Some(FromPlay::CitedAndLiked)),
                ("play-3", "¿Quién es el dios del mar?", QuestionKind::Unanswerable, 0, Some(FromPlay::ToFill)),
                ("play-4", "¿Qué hizo Odo? ¿Y después?", QuestionKind::Fact, 0, Some(FromPlay::ToFill)),
            ]
        );
        let text: Vec<String> = bank.iter().map(|question| serde_json::to_string(question).unwrap()).collect();
        let read = crate::eval::bank::parse_and_check(&text.join("\n")).unwrap();
        assert_eq!(read, bank);
    }

    #[test]
    fn spans_read_in_weeks_days_hours_and_minutes() {
        assert_eq!(parse_span("7d"), Ok(7 * 86_400));
        assert_eq!(parse_span("2w"), Ok(14 * 86_400));
        assert_eq!(parse_span("24h"), Ok(86_400));
        for refused in ["7", "d", "7y", "-1d", "0d", ""] {
            assert!(parse_span(refused).is_err(), "{refused}");
        }
        assert_eq!(render_span(14 * 86_400), "2w");
        assert_eq!(render_span(3 * 86_400), "3d");
    }
}
