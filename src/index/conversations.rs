//! Conversation history: the turns of one Discord channel, thread or CLI chat, in the
//! `conversation_turns` table (migration 0002), so a restart keeps them.
//!
//! A conversation is an opaque key chosen by the caller (`discord:thread:123`); nothing here
//! reads one conversation's turns into another. Each conversation is bounded: appending prunes
//! everything but its latest turns.

use rusqlite::params;

use super::{IndexError, Store};
use crate::llm::chat::{Turn, TurnRole};

impl Store {
    /// The last `limit` turns of `conversation`, oldest first.
    pub fn conversation_turns(&self, conversation: &str, limit: usize) -> Result<Vec<Turn>, IndexError> {
        let mut statement = self.connection().prepare_cached(
            "SELECT role, content FROM conversation_turns WHERE conversation = ?1 ORDER BY id DESC LIMIT ?2",
        )?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = statement.query_map(params![conversation, limit], |row| {
            let role: String = row.get(0)?;
            let content: String = row.get(1)?;
            Ok((role, content))
        })?;
        let mut turns = Vec::new();
        for row in rows {
            let (role, content) = row?;
            // The table's CHECK allows only these two.
            let role = if role == "assistant" { TurnRole::Assistant } else { TurnRole::User };
            turns.push(Turn { role, content });
        }
        turns.reverse();
        Ok(turns)
    }

    /// Whether `conversation` has any turn stored.
    pub fn has_conversation(&self, conversation: &str) -> Result<bool, IndexError> {
        let mut statement = self
            .connection()
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM conversation_turns WHERE conversation = ?1)")?;
        Ok(statement.query_row(params![conversation], |row| row.get(0))?)
    }

    /// Appends `turns` to `conversation` and keeps only its latest `keep` turns, in one
    /// transaction.
    pub fn append_conversation_turns(&self, conversation: &str, turns: &[Turn], keep: usize) -> Result<(), IndexError> {
        let transaction = self.connection().unchecked_transaction()?;
        {
            let mut insert = transaction
                .prepare_cached("INSERT INTO conversation_turns (conversation, role, content) VALUES (?1, ?2, ?3)")?;
            for turn in turns {
                let role = match turn.role {
                    TurnRole::User => "user",
                    TurnRole::Assistant => "assistant",
                    // Not a turn of the conversation: never stored.
                    TurnRole::System => continue,
                };
                insert.execute(params![conversation, role, turn.content])?;
            }
            let keep = i64::try_from(keep).unwrap_or(i64::MAX);
            transaction.execute(
                "DELETE FROM conversation_turns WHERE conversation = ?1 AND id NOT IN (
                    SELECT id FROM conversation_turns WHERE conversation = ?1 ORDER BY id DESC LIMIT ?2)",
                params![conversation, keep],
            )?;
        }
        transaction.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(role: TurnRole, content: &str) -> Turn {
        Turn { role, content: content.to_string() }
    }

    #[test]
    fn conversations_are_bounded_ordered_and_apart() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        assert!(!store.has_conversation("a").unwrap());
        for i in 0..5 {
            let turns = [turn(TurnRole::User, &format!("q{i}")), turn(TurnRole::Assistant, &format!("a{i}"))];
            store.append_conversation_turns("a", &turns, 4).unwrap();
        }
        store.append_conversation_turns("b", &[turn(TurnRole::User, "only b")], 4).unwrap();

        let a = store.conversation_turns("a", 10).unwrap();
        let contents: Vec<&str> = a.iter().map(|t| t.content.as_str()).collect();
        assert_eq!(contents, ["q3", "a3", "q4", "a4"], "pruned to the latest 4, oldest first");
        assert_eq!(a[0].role, TurnRole::User);
        assert_eq!(store.conversation_turns("a", 1).unwrap()[0].content, "a4");
        assert_eq!(store.conversation_turns("b", 10).unwrap(), vec![turn(TurnRole::User, "only b")]);
        assert!(store.conversation_turns("c", 10).unwrap().is_empty());
        assert!(store.has_conversation("b").unwrap());
    }
}
