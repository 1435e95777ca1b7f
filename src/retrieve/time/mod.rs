//! The time path: a question that places itself in the campaign's story («la sesión 12»,
//! «la última sesión», «justo después de la batalla del puerto») brings the sessions it
//! means, as one more ranked list for the same reciprocal-rank fusion.
//!
//! Three kinds of reference, read on accent-folded, lowercased words (Spanish and English):
//! - explicit: «sesión 12», «la 12», «session 12», «sesiones 10 a 14», «entre la 3 y la 5»,
//!   ordinals («la tercera sesión», «the first session») and number words («la sesión doce»);
//! - relative to the highest session the asker may read: «la última sesión», «la anterior»,
//!   «la penúltima», «hace dos sesiones», «las últimas tres sesiones», «last session», «the
//!   session before last», «two sessions ago»;
//! - before or after an event: «justo después de X», «antes de que conocieran a Y», «right
//!   after leaving Z»: the other paths find where the event happens (the anchors), this path
//!   adds the next (or previous) session.
//!
//! A number counts only beside a session word or as «la N» standing alone, so «12 monedas»
//! and «nivel 5» are never sessions. The path is pure over the session list it reads (one
//! SQLite query, visibility applied in it): a player's «última sesión» is the last one a
//! player may read.
//!
//! The sessions a question names (explicitly or relatively) are its subject, not a guess:
//! [`keep_named_sessions`] keeps them among the fragments the model is shown whatever the
//! rerank chose (measured on the sample bank: `eval/README.md`).

mod read;
mod resolve;

use serde::Serialize;

use crate::corpus::SessionNumber;

pub use read::parse_time_references;
pub use resolve::{
    SessionFragments, entity_session_fragments, entity_sessions, keep_named_sessions, resolve, search_time,
};

/// Sessions a range brings at most: «sesiones 1 a 400» is clamped to the sessions there are
/// and then to this many (the pool is ~27 candidates; a range wider than this is a survey,
/// which the dense and entity paths serve better).
pub const MAX_RANGE_SESSIONS: usize = 12;
/// Sessions where an event happens, taken from the other paths' fusion for «antes de X» /
/// «después de X»: the best two, so one wrong guess does not decide alone.
pub const ANCHOR_SESSIONS: usize = 2;
/// Fragments of the best-fused candidates that are read for anchors: the top of the pool.
const ANCHOR_CANDIDATES: usize = 5;
/// Sessions an entity's first or last appearance brings («¿cuándo vimos por primera vez a X?»).
pub const APPEARANCE_SESSIONS: usize = 2;
/// The largest session number read as one: four digits, as the session-header detector reads.
const MAX_SESSION_NUMBER: u32 = 9999;

/// One way a question places itself in time, as written (resolved against the campaign by
/// [`resolve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TimeReference {
    /// «sesión 12», «la 12», «la tercera sesión».
    Session { number: u32 },
    /// «sesiones 10 a 14», «entre la 3 y la 5» (either order).
    Range { from: u32, to: u32 },
    /// Sessions back from the last one: «la última» is 0, «la penúltima» and «hace dos
    /// sesiones» are 1.
    Back { sessions: u32 },
    /// «las últimas tres sesiones»: the last `count`.
    Last { count: u32 },
    /// «después de X», «right after X»: the session after the event's.
    AfterEvent,
    /// «antes de X», «before X»: the session before the event's.
    BeforeEvent,
    /// «¿cuándo vimos por primera vez a X?»: the first sessions of the entities named.
    FirstAppearance,
    /// «la última vez que vimos a X»: their last sessions.
    LastAppearance,
}

impl TimeReference {
    /// An explicit or relative reference names its sessions; the others are found from the
    /// question's other words.
    pub fn names_sessions(self) -> bool {
        matches!(
            self,
            TimeReference::Session { .. }
                | TimeReference::Range { .. }
                | TimeReference::Back { .. }
                | TimeReference::Last { .. }
        )
    }
}

/// What the time path did, for `oraculo search --json` (`time`) and the answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TimeDiagnostics {
    /// The references read in the question, in order.
    pub references: Vec<TimeReference>,
    /// The highest session the asker may read (`None`: the campaign has no sessions).
    pub highest_session: Option<SessionNumber>,
    /// The sessions the path brought, in its rank order.
    pub sessions: Vec<SessionNumber>,
    /// The sessions the question names (explicit and relative references, and the session
    /// right after or before the first anchor): kept among those shown.
    pub named_sessions: Vec<SessionNumber>,
    /// Sessions asked for that are not in the notes («sesión 400»).
    pub missing: Vec<u32>,
    /// Where the event of «antes de X» / «después de X» happens, by the other paths.
    pub anchors: Vec<SessionNumber>,
    /// A range was reversed, ran past the notes or was wider than [`MAX_RANGE_SESSIONS`].
    pub clamped: bool,
}

impl TimeDiagnostics {
    /// Whether the question placed itself in time at all.
    pub fn is_active(&self) -> bool {
        !self.references.is_empty()
    }

    /// Whether the question is only about sessions that are not there: it is answered by
    /// saying so, naming the highest session there is, without asking a model.
    pub fn answers_alone(&self) -> bool {
        let only_named = !self.references.is_empty() && self.references.iter().all(|r| r.names_sessions());
        only_named && self.sessions.is_empty() && (!self.missing.is_empty() || self.highest_session.is_none())
    }

    /// What to tell the asker when a session they named is not in the notes, or the campaign
    /// has no sessions at all; `None` when everything asked for is there.
    pub fn notice(&self, english: bool) -> Option<String> {
        if !self.references.iter().any(|r| r.names_sessions()) {
            return None;
        }
        let Some(highest) = self.highest_session else {
            return Some(if english {
                "These notes have no numbered sessions (only character sheets and world documents).".to_string()
            } else {
                "Estas notas no tienen sesiones numeradas (solo fichas y documentos del mundo).".to_string()
            });
        };
        if self.missing.is_empty() {
            return None;
        }
        let numbers: Vec<String> = self.missing.iter().map(u32::to_string).collect();
        Some(match (english, self.missing.len()) {
            (true, 1) => format!("Session {} is not in the notes: the last session there is {highest}.", numbers[0]),
            (true, _) => {
                format!("Sessions {} are not in the notes: the last session there is {highest}.", numbers.join(", "))
            }
            (false, 1) => format!("La sesión {} no está en las notas: la última que hay es la {highest}.", numbers[0]),
            (false, _) => {
                format!("Las sesiones {} no están en las notas: la última que hay es la {highest}.", numbers.join(", "))
            }
        })
    }
}
