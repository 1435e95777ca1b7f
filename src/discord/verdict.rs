//! The 👍/👎 buttons' ids and row: what a feedback button says (`discord/feedback.rs` handles
//! the clicks; `embeds` puts the row under an answer). Apart from both, so neither reaches back
//! to the other.

use poise::serenity_prelude as serenity;

use crate::feedback::{Reason, Verdict};

/// The prefix of a 👍/👎 button's id: `oraculo:veredicto:<kept id>:<up|down>`.
pub const VERDICT_BUTTON_PREFIX: &str = "oraculo:veredicto:";
/// The prefix of a «¿Qué estaba mal?» choice's id: `oraculo:porque:<kept id>:<reason>`.
pub const REASON_BUTTON_PREFIX: &str = "oraculo:porque:";

/// What a feedback button says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Press {
    Verdict(i64, Verdict),
    Reason(i64, Reason),
}

impl Press {
    /// The button's id.
    pub fn custom_id(self) -> String {
        match self {
            Press::Verdict(id, verdict) => format!("{VERDICT_BUTTON_PREFIX}{id}:{}", verdict.as_str()),
            Press::Reason(id, reason) => format!("{REASON_BUTTON_PREFIX}{id}:{}", reason.as_str()),
        }
    }

    /// The press a button id names; `None` for any other button.
    pub fn of(custom_id: &str) -> Option<Press> {
        if let Some(rest) = custom_id.strip_prefix(VERDICT_BUTTON_PREFIX) {
            let (id, verdict) = rest.split_once(':')?;
            return Some(Press::Verdict(id.parse().ok()?, Verdict::parse(verdict)?));
        }
        let rest = custom_id.strip_prefix(REASON_BUTTON_PREFIX)?;
        let (id, reason) = rest.split_once(':')?;
        Some(Press::Reason(id.parse().ok()?, Reason::parse(reason)?))
    }
}

/// The 👍/👎 row of kept question `id`.
pub fn verdict_row(id: i64) -> serenity::CreateActionRow {
    let button = |verdict: Verdict, emoji: char| {
        serenity::CreateButton::new(Press::Verdict(id, verdict).custom_id())
            .emoji(emoji)
            .style(serenity::ButtonStyle::Secondary)
    };
    serenity::CreateActionRow::Buttons(vec![button(Verdict::Up, '👍'), button(Verdict::Down, '👎')])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Discord's limit on a custom id (`layout::CUSTOM_ID_LIMIT`, not imported: `embeds`
    /// imports this file).
    const CUSTOM_ID_LIMIT: usize = 100;

    #[test]
    fn feedback_button_ids_round_trip_within_discords_limit() {
        let presses = [
            Press::Verdict(1, Verdict::Up),
            Press::Verdict(i64::MAX, Verdict::Down),
            Press::Reason(7, Reason::InTheNotes),
            Press::Reason(7, Reason::Wrong),
        ];
        for press in presses {
            let id = press.custom_id();
            assert!(id.len() <= CUSTOM_ID_LIMIT, "{id}");
            assert_eq!(Press::of(&id), Some(press), "{id}");
        }
        for other in ["oraculo:fuente:Sesión 1", "oraculo:veredicto:x:up", "oraculo:porque:3:maybe", ""] {
            assert_eq!(Press::of(other), None, "{other}");
        }
    }
}
