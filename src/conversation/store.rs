//! The `conversation_turns` table (migration 0002) of the campaign's index, reached through
//! the index's SQLite connection: the turns of one Discord channel, thread or CLI chat.
//!
//! A conversation is an opaque key chosen by the caller (`discord:thread:123`); nothing here
//! reads one conversation's turns into another. Each conversation is bounded: appending prunes
//! everything but its latest turns. Each turn records the visibility of what answered it
//! (migration 0004): a turn answered from GM notes is `DmOnly`, and a player's read of the
//! conversation skips it, as every fragment read does.

use rusqlite::params;

use crate::corpus::Visibility;
use crate::index::{IndexError, Store};
use crate::retrieve::{Turn, TurnRole};

/// The last `limit` turns of `conversation` that `visibility` may read, oldest first:
/// `Some(Player)` only the turns answered for players, `None` every turn.
pub(super) fn turns(
    store: &Store,
    conversation: &str,
    visibility: Option<Visibility>,
    limit: usize,
) -> Result<Vec<Turn>, IndexError> {
    let mut statement = store.connection().prepare_cached(
        "SELECT role, content FROM conversation_turns
         WHERE conversation = ?1 AND (?2 IS NULL OR visibility = ?2) ORDER BY id DESC LIMIT ?3",
    )?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = statement.query_map(params![conversation, visibility.map(Visibility::as_str), limit], |row| {
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
pub(super) fn has_turns(store: &Store, conversation: &str) -> Result<bool, IndexError> {
    let mut statement = store
        .connection()
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM conversation_turns WHERE conversation = ?1)")?;
    Ok(statement.query_row(params![conversation], |row| row.get(0))?)
}

/// Appends `turns`, answered for `visibility` (`DmOnly` when GM notes could be read), to
/// `conversation` and keeps only its latest `keep` turns, in one transaction.
pub(super) fn append_turns(
    store: &Store,
    conversation: &str,
    turns: &[Turn],
    visibility: Visibility,
    keep: usize,
) -> Result<(), IndexError> {
    let transaction = store.connection().unchecked_transaction()?;
    {
        let mut insert = transaction.prepare_cached(
            "INSERT INTO conversation_turns (conversation, role, content, visibility) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for turn in turns {
            let role = match turn.role {
                TurnRole::User => "user",
                TurnRole::Assistant => "assistant",
                // Not a turn of the conversation: never stored.
                TurnRole::System => continue,
            };
            insert.execute(params![conversation, role, turn.content, visibility.as_str()])?;
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
        assert!(!has_turns(&store, "a").unwrap());
        for i in 0..5 {
            let turns = [turn(TurnRole::User, &format!("q{i}")), turn(TurnRole::Assistant, &format!("a{i}"))];
            append_turns(&store, "a", &turns, Visibility::Player, 4).unwrap();
        }
        append_turns(&store, "b", &[turn(TurnRole::User, "only b")], Visibility::Player, 4).unwrap();

        let a = turns(&store, "a", None, 10).unwrap();
        let contents: Vec<&str> = a.iter().map(|t| t.content.as_str()).collect();
        assert_eq!(contents, ["q3", "a3", "q4", "a4"], "pruned to the latest 4, oldest first");
        assert_eq!(a[0].role, TurnRole::User);
        assert_eq!(turns(&store, "a", None, 1).unwrap()[0].content, "a4");
        assert_eq!(turns(&store, "b", None, 10).unwrap(), vec![turn(TurnRole::User, "only b")]);
        assert!(turns(&store, "c", None, 10).unwrap().is_empty());
        assert!(has_turns(&store, "b").unwrap());
    }

    #[test]
    fn a_player_never_reads_a_turn_answered_from_gm_notes() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        let exchange =
            |question: &str, answer: &str| [turn(TurnRole::User, question), turn(TurnRole::Assistant, answer)];
        append_turns(&store, "c", &exchange("¿y el faro?", "Apagado."), Visibility::Player, 10).unwrap();
        append_turns(&store, "c", &exchange("¿quién es?", "El traidor."), Visibility::DmOnly, 10).unwrap();
        let read = |visibility| -> Vec<String> {
            turns(&store, "c", visibility, 10).unwrap().into_iter().map(|t| t.content).collect()
        };
        assert_eq!(read(Some(Visibility::Player)), ["¿y el faro?", "Apagado."]);
        assert_eq!(read(None), ["¿y el faro?", "Apagado.", "¿quién es?", "El traidor."]);
        // A turn stored before turns knew their audience is read as GM-only.
        store
            .connection()
            .execute("INSERT INTO conversation_turns (conversation, role, content) VALUES ('c', 'user', 'antiguo')", [])
            .unwrap();
        assert!(!read(Some(Visibility::Player)).contains(&"antiguo".to_string()));
        assert!(read(None).contains(&"antiguo".to_string()));
    }
}

/// Writes a question taken and not yet answered; its row id.
pub(super) fn remember_question(
    store: &Store,
    asked_at: i64,
    conversation: &str,
    question: &str,
    delivery: &str,
) -> Result<i64, IndexError> {
    store.connection().execute(
        "INSERT INTO questions_in_flight (asked_at, conversation, question, delivery) VALUES (?1, ?2, ?3, ?4)",
        params![asked_at, conversation, question, delivery],
    )?;
    Ok(store.connection().last_insert_rowid())
}

/// Removes a question once it has been answered (or told why not).
pub(super) fn forget_question(store: &Store, id: i64) -> Result<(), IndexError> {
    store.connection().execute("DELETE FROM questions_in_flight WHERE id = ?1", params![id])?;
    Ok(())
}

/// Every question left in flight, oldest first, each counted as taken up once more (in one
/// transaction, so a start that dies while answering them has counted its attempt).
pub(super) fn take_up_questions(store: &Store) -> Result<Vec<super::InFlight>, IndexError> {
    let transaction = store.connection().unchecked_transaction()?;
    transaction.execute("UPDATE questions_in_flight SET attempts = attempts + 1", [])?;
    let questions = {
        let mut statement = transaction.prepare(
            "SELECT id, asked_at, conversation, question, delivery, attempts FROM questions_in_flight
             ORDER BY asked_at, id",
        )?;
        let rows = statement.query_map([], |row| {
            Ok(super::InFlight {
                id: row.get(0)?,
                asked_at: row.get(1)?,
                conversation: row.get(2)?,
                question: row.get(3)?,
                delivery: row.get(4)?,
                attempts: row.get(5)?,
            })
        })?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    transaction.commit()?;
    Ok(questions)
}
