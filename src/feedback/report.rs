//! The DM's report over the kept questions (pure): the questions the notes did not answer,
//! grouped by the entity or session they name, most asked first; the answers marked wrong,
//! with the labels they cited; and the counts per week. `oraculo asked` prints it (`--json`:
//! docs/cli-json.md) and `/oraculo_informe` shows it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::KeptQuestion;
use crate::corpus::Label;
use crate::retrieve::Audience;
use crate::text::fold;

/// Seconds in a day.
const DAY_SECONDS: i64 = 24 * 60 * 60;

/// What `audience` may read of the kept questions since `since`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// `player` (GM-channel questions left out) or `gm` (every question).
    pub audience: &'static str,
    /// Unix seconds; `None`: every kept question.
    pub since: Option<i64>,
    /// Questions kept in the span.
    pub n_questions: usize,
    /// Of them, those the notes did not answer (abstained, or a 👎 «it was in the notes»).
    pub n_unanswered: usize,
    pub unanswered: Vec<UnansweredGroup>,
    pub marked_wrong: Vec<MarkedWrong>,
    /// Oldest week first.
    pub weeks: Vec<WeekCount>,
}

/// What a group of unanswered questions names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NamedKind {
    /// An entity of the compendium (a character, a place, a god…).
    Entity,
    /// A session by number.
    Session,
    /// Nothing the compendium or the time path recognised.
    Nothing,
}

/// The unanswered questions that name one entity or session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnansweredGroup {
    /// The entity's name, or the session's number; empty for `nothing`.
    pub named: String,
    pub kind: NamedKind,
    /// Times its questions were asked.
    pub asked: usize,
    /// Most asked first.
    pub questions: Vec<UnansweredQuestion>,
}

/// One unanswered question (the same words, accents and case aside, are one question).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnansweredQuestion {
    /// As it was last asked.
    pub question: String,
    pub asked: usize,
    /// Times the answer said the notes do not hold it.
    pub abstained: usize,
    /// 👎 «it was in the notes».
    pub in_the_notes: usize,
    pub last_asked_at: i64,
}

/// An answer a player marked 👎 for something other than «it was in the notes».
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MarkedWrong {
    /// The kept question's id.
    pub id: i64,
    pub asked_at: i64,
    pub question: String,
    pub cited: Vec<Label>,
    pub down: usize,
    pub wrong: usize,
    pub incomplete: usize,
    pub up: usize,
}

/// One week's counts (weeks start on Monday, UTC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WeekCount {
    /// The week's Monday, `YYYY-MM-DD`.
    pub week: String,
    pub asked: usize,
    pub unanswered: usize,
    pub up: usize,
    pub down: usize,
}

impl Report {
    /// The report over `questions` (oldest first), read for `audience` since `since`.
    pub fn of(questions: &[KeptQuestion], audience: Audience, since: Option<i64>) -> Report {
        let unanswered: Vec<&KeptQuestion> = questions.iter().filter(|question| question.unanswered()).collect();
        Report {
            audience: match audience {
                Audience::Player => "player",
                Audience::Gm => "gm",
            },
            since,
            n_questions: questions.len(),
            n_unanswered: unanswered.len(),
            unanswered: group_unanswered(&unanswered),
            marked_wrong: marked_wrong(questions),
            weeks: weeks(questions),
        }
    }
}

/// Each unanswered question under every entity and session it names (under «nothing» when it
/// names none); groups and their questions most asked first.
fn group_unanswered(unanswered: &[&KeptQuestion]) -> Vec<UnansweredGroup> {
    let mut groups: BTreeMap<(NamedKind, String), BTreeMap<String, UnansweredQuestion>> = BTreeMap::new();
    for question in unanswered {
        let mut named: Vec<(NamedKind, String)> =
            question.entities.iter().map(|entity| (NamedKind::Entity, entity.clone())).collect();
        named.extend(question.sessions.iter().map(|session| (NamedKind::Session, session.0.to_string())));
        if named.is_empty() {
            named.push((NamedKind::Nothing, String::new()));
        }
        for key in named {
            let entry = groups.entry(key).or_default().entry(same_question(&question.question)).or_insert_with(|| {
                UnansweredQuestion {
                    question: question.question.clone(),
                    asked: 0,
                    abstained: 0,
                    in_the_notes: 0,
                    last_asked_at: question.asked_at,
                }
            });
            entry.asked += 1;
            entry.abstained += usize::from(question.not_in_notes);
            entry.in_the_notes += question.verdicts.in_the_notes;
            if question.asked_at >= entry.last_asked_at {
                entry.last_asked_at = question.asked_at;
                entry.question = question.question.clone();
            }
        }
    }
    let mut grouped: Vec<UnansweredGroup> = groups
        .into_iter()
        .map(|((kind, named), questions)| {
            let mut questions: Vec<UnansweredQuestion> = questions.into_values().collect();
            questions.sort_by(|a, b| b.asked.cmp(&a.asked).then(b.last_asked_at.cmp(&a.last_asked_at)));
            UnansweredGroup { asked: questions.iter().map(|question| question.asked).sum(), named, kind, questions }
        })
        .collect();
    // Most asked first; then what names something before what names nothing, by name.
    grouped.sort_by(|a, b| b.asked.cmp(&a.asked).then(a.kind.cmp(&b.kind)).then(a.named.cmp(&b.named)));
    grouped
}

/// The answers with a 👎 that is not «it was in the notes», most 👎 first, then newest.
fn marked_wrong(questions: &[KeptQuestion]) -> Vec<MarkedWrong> {
    let mut marked: Vec<MarkedWrong> = questions
        .iter()
        .filter(|question| question.verdicts.down > question.verdicts.in_the_notes)
        .map(|question| MarkedWrong {
            id: question.id,
            asked_at: question.asked_at,
            question: question.question.clone(),
            cited: question.cited.clone(),
            down: question.verdicts.down,
            wrong: question.verdicts.wrong,
            incomplete: question.verdicts.incomplete,
            up: question.verdicts.up,
        })
        .collect();
    marked.sort_by(|a, b| b.down.cmp(&a.down).then(b.asked_at.cmp(&a.asked_at)));
    marked
}

/// The counts of each week that has a question, oldest first.
fn weeks(questions: &[KeptQuestion]) -> Vec<WeekCount> {
    let mut weeks: BTreeMap<String, WeekCount> = BTreeMap::new();
    for question in questions {
        let week = week_of(question.asked_at);
        let count =
            weeks.entry(week.clone()).or_insert_with(|| WeekCount { week, asked: 0, unanswered: 0, up: 0, down: 0 });
        count.asked += 1;
        count.unanswered += usize::from(question.unanswered());
        count.up += question.verdicts.up;
        count.down += question.verdicts.down;
    }
    weeks.into_values().collect()
}

/// What makes two questions one: the same words, whatever their case, accents and the marks
/// around them («¿Dónde está Baika?» and «donde esta baika»).
pub fn same_question(question: &str) -> String {
    let folded = fold(question.trim());
    folded.trim_matches(|c: char| matches!(c, '¿' | '?' | '¡' | '!' | '.') || c.is_whitespace()).to_string()
}

/// The Monday (UTC) of the week of `unix_seconds`, as `YYYY-MM-DD`.
pub fn week_of(unix_seconds: i64) -> String {
    let days = unix_seconds.div_euclid(DAY_SECONDS);
    // 1970-01-01 was a Thursday: three days after a Monday.
    let monday = days - (days + 3).rem_euclid(7);
    let (year, month, day) = civil_from_days(monday);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The proleptic Gregorian date of a count of days since 1970-01-01 (H. Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month as u32, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::SessionNumber;
    use crate::feedback::VerdictCounts;

    fn question(id: i64, asked_at: i64, text: &str, entities: &[&str], not_in_notes: bool) -> KeptQuestion {
        KeptQuestion {
            id,
            asked_at,
            audience: "player",
            question: text.to_string(),
            search_query: None,
            answer_text: String::new(),
            cited: vec![Label::new("Sesión 2")],
            shown: Vec::new(),
            entities: entities.iter().map(|entity| entity.to_string()).collect(),
            sessions: Vec::new(),
            not_in_notes,
            verdicts: VerdictCounts::default(),
        }
    }

    fn check(report: &Report, expected: &[(&str, usize, &[&str])]) {
        let groups: Vec<(&str, usize, Vec<&str>)> = report
            .unanswered
            .iter()
            .map(|group| {
                (group.named.as_str(), group.asked, group.questions.iter().map(|q| q.question.as_str()).collect())
            })
            .collect();
        let expected: Vec<(&str, usize, Vec<&str>)> =
            expected.iter().map(|(named, asked, questions)| (*named, *asked, questions.to_vec())).collect();
        assert_eq!(groups, expected);
    }

    #[test]
    fn unanswered_questions_group_by_what_they_name_most_asked_first() {
        let mut questions = vec![
            question(1, 100, "¿Dónde está Baika?", &["Baika"], true),
            question(2, 200, "¿dónde está baika", &["Baika"], true),
            question(3, 300, "¿Quién mató a Odo?", &["Odo"], true),
            question(4, 400, "¿Qué pasó en el faro?", &[], false),
            question(5, 500, "¿Y el tesoro?", &[], true),
        ];
        // Answered, but a player says it was in the notes; and one answer marked wrong.
        questions[3].verdicts = VerdictCounts { down: 1, in_the_notes: 1, ..VerdictCounts::default() };
        questions[3].sessions = vec![SessionNumber(4)];
        let mut wrong = question(6, 600, "¿Quién es Inés?", &["Inés"], false);
        wrong.verdicts = VerdictCounts { down: 2, wrong: 2, ..VerdictCounts::default() };
        questions.push(wrong);
        let report = Report::of(&questions, Audience::Player, None);
        assert_eq!((report.n_questions, report.n_unanswered), (6, 5));
        check(
            &report,
            &[
                ("Baika", 2, &["¿dónde está baika"]),
                ("Odo", 1, &["¿Quién mató a Odo?"]),
                ("4", 1, &["¿Qué pasó en el faro?"]),
                ("", 1, &["¿Y el tesoro?"]),
            ],
        );
        assert_eq!(report.marked_wrong.len(), 1);
        assert_eq!((report.marked_wrong[0].id, report.marked_wrong[0].wrong), (6, 2));
        assert_eq!(report.marked_wrong[0].cited, [Label::new("Sesión 2")]);
    }

    #[test]
    fn weeks_start_on_monday() {
        // 1970-01-01 was a Thursday; 2026-12-06 is a Sunday, 2026-12-07 a Monday.
        assert_eq!(week_of(0), "1969-12-29");
        assert_eq!(week_of(1_796_515_200), "2026-11-30");
        assert_eq!(week_of(1_796_601_600), "2026-12-07");
        let questions = [question(1, 1_796_515_200, "a", &[], true), question(2, 1_796_601_600, "b", &[], false)];
        let weeks = Report::of(&questions, Audience::Gm, None).weeks;
        let counts: Vec<(&str, usize, usize)> =
            weeks.iter().map(|week| (week.week.as_str(), week.asked, week.unanswered)).collect();
        assert_eq!(counts, [("2026-11-30", 1, 1), ("2026-12-07", 1, 0)]);
    }
}
