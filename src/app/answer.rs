//! What a front end gives back: one question answered through the oracle's one entry, as
//! `oraculo ask --json` prints it (the MCP server's `ask` gives the same), and an error on one
//! line.

use crate::oracle::{AnswerOptions, AskError, AskRequest, Oracle, Settled};

/// Answers `request` through the oracle's one entry with nothing streamed: `oraculo ask
/// --json` and the MCP server's `ask`.
pub async fn ask_settled(oracle: &Oracle, request: &AskRequest<'_>) -> Result<Settled, AskError> {
    oracle.answer(request, AnswerOptions::new(&crate::oracle::no_events)).await
}

/// `oraculo ask --json`'s object: the model's own answer (the notes' sentences when it failed
/// after them), with `instant` (the notes' own sentences shown first, or null), `instant_kept`
/// (why they stand instead of the model's answer, or null) and `settled` (what stays: `text`
/// and `notes_added`, the instant answer's sentences kept under the model's answer) beside
/// its fields.
pub fn settled_json(settled: &Settled) -> serde_json::Result<serde_json::Value> {
    let mut json = serde_json::to_value(settled.model.as_ref().unwrap_or(&settled.answer))?;
    if let Some(object) = json.as_object_mut() {
        object.insert("instant".into(), serde_json::to_value(&settled.instant)?);
        object.insert("instant_kept".into(), serde_json::to_value(settled.instant_kept)?);
        let stays = serde_json::json!({ "text": settled.answer.text, "notes_added": settled.notes_added });
        object.insert("settled".into(), stays);
    }
    Ok(json)
}

/// `oraculo ask --json`'s object ([`settled_json`]).
pub async fn answer_json(oracle: &Oracle, request: &AskRequest<'_>) -> anyhow::Result<serde_json::Value> {
    Ok(settled_json(&ask_settled(oracle, request).await?)?)
}

/// An error and its causes on one line, each said once. Several of the crate's errors carry
/// their cause's text in their own message *and* as their `source` (thiserror's `{0}` beside
/// `#[from]`), so anyhow's `{:#}` would print it twice: a cause whose text the line already
/// holds is left out.
pub fn render_error(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}
