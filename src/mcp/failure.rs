//! A tool that could not answer, as a client shows it: what happened and the fix, as an MCP
//! tool error (`isError`), never a protocol error or a crash of the server.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

use super::campaign::Campaign;
use super::params::SessionAsked;
use crate::corpus::SessionNumber;
use crate::oracle::AskError;
use crate::timeline::TimeError;

/// A tool that could not answer, as the client shows it: what happened, and the fix.
#[derive(Debug)]
pub struct Failure {
    /// A stable word a client can branch on (`not_indexed`, `unknown_label`, …).
    pub kind: &'static str,
    pub message: String,
}

impl Failure {
    pub fn new(kind: &'static str, message: impl Into<String>) -> Failure {
        Failure { kind, message: message.into() }
    }

    pub fn into_result(self) -> CallToolResult {
        tracing::info!(kind = self.kind, message = %self.message, "tool error");
        let mut result = CallToolResult::error(vec![ContentBlock::text(self.message.clone())]);
        result.structured_content = Some(json!({ "error": self.kind, "message": self.message }));
        result
    }

    /// What stops an answer, search or read, with its fix.
    pub fn of_ask(err: AskError, campaign: &Campaign) -> Failure {
        match err {
            AskError::NotBuilt => Failure::new(
                "not_indexed",
                format!(
                    "The campaign «{}» has no index yet: run `{}` (it reads the notes into the index), then call this tool again.",
                    campaign.name, campaign.ingest_command
                ),
            ),
            AskError::EmptyQuestion => Failure::new(
                "empty_question",
                "The question is empty: pass what you want to know about the campaign, e.g. «¿Qué pasó en la última sesión?».",
            ),
            AskError::QuestionTooLong { chars, max } => Failure::new(
                "question_too_long",
                format!(
                    "The question is too long ({chars} characters; at most {max}): ask it in a sentence or two, without pasting notes into it."
                ),
            ),
            other => Failure::new(
                "failed",
                format!("Oráculo could not read the notes: {}", crate::app::render_error(&anyhow::Error::from(other))),
            ),
        }
    }

    /// What stops a timeline or a recap, with its fix.
    pub fn of_time(err: TimeError, campaign: &Campaign) -> Failure {
        match err {
            TimeError::Ask(err) => Failure::of_ask(err, campaign),
            err @ TimeError::UnknownEntity { .. } => {
                Failure::new("unknown_entity", format!("{err}. Call `compendium` for the names the notes hold."))
            }
            err @ TimeError::MissingSession { .. } => {
                Failure::new("missing_session", format!("{err}. Call `sessions` for the sessions there are."))
            }
            err @ TimeError::NoSessions => Failure::new("no_sessions", err.to_string()),
            err @ TimeError::Index(_) => Failure::new(
                "failed",
                format!("Oráculo could not read the notes: {}", crate::app::render_error(&anyhow::Error::from(err))),
            ),
        }
    }
}

/// The session a recap is asked for: `None` (the last) when none is named; a number as it
/// is; words read as the time path reads a question («la última», «la penúltima», «hace dos
/// sesiones», «sesión 12») against the sessions the view may read.
pub fn session_asked(asked: Option<&SessionAsked>, known: &[SessionNumber]) -> Result<Option<u32>, Failure> {
    use crate::retrieve::time::{TimeReference, parse_time_references};
    let words = match asked {
        None => return Ok(None),
        Some(SessionAsked::Number(number)) => return Ok(Some(*number)),
        Some(SessionAsked::Words(words)) => words.trim(),
    };
    if words.is_empty() {
        return Ok(None);
    }
    if let Ok(number) = words.parse::<u32>() {
        return Ok(Some(number));
    }
    let from_last =
        |back: usize| known.len().checked_sub(1 + back).and_then(|at| known.get(at)).map(|session| session.0);
    match parse_time_references(words).first() {
        Some(TimeReference::Session { number }) => Ok(Some(*number)),
        Some(TimeReference::Back { sessions }) => from_last(*sessions as usize).map(Some).ok_or_else(|| {
            Failure::new(
                "missing_session",
                format!(
                    "The notes do not go back that far: they hold {} session(s). Call `sessions` for them.",
                    known.len()
                ),
            )
        }),
        // «las últimas tres sesiones»: a recap is of one, the last.
        Some(TimeReference::Last { .. }) => Ok(from_last(0)),
        _ => Err(Failure::new(
            "unknown_session",
            format!(
                "«{words}» names no session: pass its number, or words such as «la última», «la penúltima», «hace dos sesiones»."
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{SessionAsked, session_asked};
    use crate::corpus::SessionNumber;

    fn check(asked: Option<SessionAsked>, expected: Result<Option<u32>, &str>) {
        let known: Vec<SessionNumber> = [1, 2, 3, 5, 8].into_iter().map(SessionNumber).collect();
        let got = session_asked(asked.as_ref(), &known).map_err(|failure| failure.kind);
        assert_eq!(got, expected.map_err(|kind| kind), "{asked:?}");
    }

    #[test]
    fn a_session_is_named_by_number_or_in_words() {
        let words = |text: &str| Some(SessionAsked::Words(text.to_string()));
        check(None, Ok(None));
        check(Some(SessionAsked::Number(3)), Ok(Some(3)));
        check(words("5"), Ok(Some(5)));
        check(words(" "), Ok(None));
        check(words("sesión 2"), Ok(Some(2)));
        check(words("la última"), Ok(Some(8)));
        check(words("la penúltima"), Ok(Some(5)));
        check(words("hace dos sesiones"), Ok(Some(5)));
        check(words("the last session"), Ok(Some(8)));
        check(words("hace diez sesiones"), Err("missing_session"));
        check(words("la del dragón"), Err("unknown_session"));
    }
}
