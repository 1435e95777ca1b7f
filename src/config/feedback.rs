//! `[feedback]`: what the bot keeps of the questions players ask, for the DM (`oraculo asked`,
//! `/oraculo_informe`), and for how long.

use anyhow::bail;
use serde::Deserialize;

/// Days a kept question (with its answer and verdicts) stays: half a year of weekly games is
/// long enough to see what the notes keep failing to answer, short enough that a player's
/// words are not kept for good. Older rows are deleted at each start.
pub const DEFAULT_FEEDBACK_KEEP_DAYS: u32 = 180;
/// The longest a question may be kept: ten years reads as «forever» to a DM, and keeps the
/// cutoff's seconds far inside an `i64`.
pub const MAX_FEEDBACK_KEEP_DAYS: u32 = 3650;

/// `[feedback]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFeedback {
    pub keep_askers: Option<bool>,
    pub keep_days: Option<u32>,
    pub keep_mcp: Option<bool>,
}

/// What is kept of the questions asked, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedbackConfig {
    /// Keep the Discord user id of whoever asked (and of whoever gave a verdict). Off: no user
    /// id is stored; a verdict is keyed by a hash that only tells one player from another.
    pub keep_askers: bool,
    /// Days a question is kept; older ones are deleted at each start.
    pub keep_days: u32,
    /// Keep the questions asked through `oraculo mcp`'s `ask` too (off: an assistant's
    /// questions are the DM's own work, not the players').
    pub keep_mcp: bool,
}

impl FeedbackConfig {
    /// The seconds a question is kept.
    pub fn keep_seconds(&self) -> i64 {
        i64::from(self.keep_days) * 24 * 60 * 60
    }
}

/// Validates `[feedback]` (every key optional).
pub(super) fn feedback_config(raw: Option<RawFeedback>) -> anyhow::Result<FeedbackConfig> {
    let raw = raw.unwrap_or_default();
    let keep_days = raw.keep_days.unwrap_or(DEFAULT_FEEDBACK_KEEP_DAYS);
    if keep_days == 0 || keep_days > MAX_FEEDBACK_KEEP_DAYS {
        bail!(
            "feedback.keep_days = {keep_days}: between 1 and {MAX_FEEDBACK_KEEP_DAYS} (0 would delete each question \
             at the next start; to keep none, delete them with the SQL in docs/operations.md)"
        );
    }
    Ok(FeedbackConfig {
        keep_askers: raw.keep_askers.unwrap_or(false),
        keep_days,
        keep_mcp: raw.keep_mcp.unwrap_or(false),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::check;

    #[test]
    fn feedback_keeps_no_asker_by_default_and_names_a_bad_key() {
        let config = check("", &[("HOME", "/h")]).unwrap();
        let expected = FeedbackConfig { keep_askers: false, keep_days: DEFAULT_FEEDBACK_KEEP_DAYS, keep_mcp: false };
        assert_eq!(config.feedback, expected);
        let config = check("[feedback]\nkeep_askers = true\nkeep_days = 7\n", &[("HOME", "/h")]).unwrap();
        assert!(config.feedback.keep_askers);
        assert_eq!(config.feedback.keep_seconds(), 7 * 86_400);
        for text in ["[feedback]\nkeep_days = 0\n", "[feedback]\nkeep_days = 99999\n", "[feedback]\nkeep = 1\n"] {
            let err = check(text, &[("HOME", "/h")]).unwrap_err();
            assert!(format!("{err:#}").contains("keep"), "{text}: {err:#}");
        }
    }
}
