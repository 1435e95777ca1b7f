//! Where a Discord conversation happens: a [`Place`] (channel, thread or direct message) and
//! its key among the campaign's conversations ([`crate::conversation`], kept in its index so
//! a restart keeps them).
//!
//! A conversation is one place: a channel (slash questions there share it), a thread (its
//! follow-ups), or a direct-message channel. Keys never collide across kinds, and nothing
//! reads one place's turns into another's; within a place, a player reads only the turns
//! answered for players.

use std::path::Path;

use crate::conversation::Conversations;
use crate::retrieve::{Audience, Turn};

/// Where a conversation happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Place {
    /// A guild channel (text or announcement): slash questions asked there.
    Channel(u64),
    /// A thread (its parent does not matter: a thread is its own conversation).
    Thread(u64),
    /// A direct-message channel with the bot.
    Direct(u64),
}

impl Place {
    /// The channel's, thread's or direct message's own id (the queue's fairness counts by it).
    pub fn id(self) -> u64 {
        match self {
            Place::Channel(id) | Place::Thread(id) | Place::Direct(id) => id,
        }
    }

    /// The `conversation_turns.conversation` key.
    pub fn key(self) -> String {
        match self {
            Place::Channel(id) => format!("discord:channel:{id}"),
            Place::Thread(id) => format!("discord:thread:{id}"),
            Place::Direct(id) => format!("discord:dm:{id}"),
        }
    }
}

/// The history of every conversation the bot takes part in.
#[derive(Clone, Debug)]
pub struct History {
    conversations: Conversations,
}

impl History {
    /// History in the index at `index_dir`, sending `turns` turns with each question.
    pub fn new(index_dir: &Path, turns: usize) -> History {
        History { conversations: Conversations::new(index_dir, turns) }
    }

    /// The latest turns of `place` that `audience` may read, oldest first (empty when
    /// unreadable: logged). A player never reads a turn answered for the GM.
    pub async fn recent(&self, place: Place, audience: Audience) -> Vec<Turn> {
        self.conversations.recent(&place.key(), audience).await
    }

    /// Records one exchange in `place`, answered for `audience`.
    pub async fn record(&self, place: Place, audience: Audience, question: &str, answer: &str) {
        self.conversations.record(&place.key(), audience, question, answer).await;
    }

    /// Appends `turns`, answered for `audience`, to `place` (a new thread starts with the
    /// exchange it was opened on).
    pub async fn append(&self, place: Place, audience: Audience, turns: Vec<Turn>) {
        self.conversations.append(&place.key(), audience, turns).await;
    }

    /// Writes a question asked in `place` before it is acknowledged ([`super::resume`]).
    pub async fn remember_question(&self, place: Place, question: &str, delivery: String) -> Option<i64> {
        self.conversations.remember_question(&place.key(), question, delivery).await
    }

    /// The question `id` was answered, or told why not.
    pub async fn forget_question(&self, id: i64) {
        self.conversations.forget_question(id).await;
    }

    /// The questions a previous run left in flight, each counted as taken up once more.
    pub async fn take_up_questions(&self) -> Vec<crate::conversation::InFlight> {
        self.conversations.take_up_questions().await
    }

    /// Whether `place` has history: a thread does exactly when the bot opened it.
    pub async fn knows(&self, place: Place) -> bool {
        self.conversations.knows(&place.key()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_of_different_kinds_never_share_a_conversation() {
        let keys = [Place::Channel(1).key(), Place::Thread(1).key(), Place::Direct(1).key(), Place::Channel(2).key()];
        let distinct: std::collections::BTreeSet<&String> = keys.iter().collect();
        assert_eq!(distinct.len(), keys.len(), "{keys:?}");
    }
}
