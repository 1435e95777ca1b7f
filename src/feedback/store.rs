//! The `asked_questions` and `answer_verdicts` tables (migration 0008) of the campaign's
//! index, reached through the index's SQLite connection.

use rusqlite::{OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::{Judged, KeptAnswer, KeptQuestion, Reason, Verdict, VerdictCounts};
use crate::corpus::{Label, SessionNumber};
use crate::index::{IndexError, Store};
use crate::retrieve::Audience;

/// The meta row holding the key of the voters' hashes (made by migration 0008).
const META_FEEDBACK_KEY: &str = "feedback_key";

/// A verdict to store.
pub(super) struct Judgement {
    pub id: i64,
    pub voter: u64,
    /// Store the voter's id beside its hash (`keep_askers`).
    pub keep_voter: bool,
    pub verdict: Verdict,
    pub reason: Option<Reason>,
    pub at: i64,
}

fn audience_str(audience: Audience) -> &'static str {
    match audience {
        Audience::Player => "player",
        Audience::Gm => "gm",
    }
}

/// A list as stored: a JSON array.
fn json_list<T: serde::Serialize>(items: &[T]) -> String {
    // A list of strings or numbers always serializes.
    serde_json::to_string(items).unwrap_or_else(|_| "[]".to_string())
}

/// A stored JSON array read back; an unreadable one (edited by hand) reads as empty.
fn read_list<T: serde::de::DeserializeOwned>(text: &str) -> Vec<T> {
    serde_json::from_str(text).unwrap_or_else(|err| {
        tracing::warn!(error = %err, "an unreadable list in asked_questions: read as empty");
        Vec::new()
    })
}

/// Writes one answered question; its row id.
pub(super) fn keep(store: &Store, kept: &KeptAnswer) -> Result<i64, IndexError> {
    store.connection().execute(
        "INSERT INTO asked_questions (asked_at, audience, front_end, question, search_query, answer_text,
             cited_labels, shown_labels, entities, sessions, not_in_notes, asker)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            kept.asked_at,
            audience_str(kept.audience),
            kept.front_end.as_str(),
            kept.question,
            kept.search_query,
            kept.answer_text,
            json_list(&kept.cited),
            json_list(&kept.shown),
            json_list(&kept.entities),
            json_list(&kept.sessions),
            kept.not_in_notes,
            kept.asker.map(|user| user.to_string()),
        ],
    )?;
    Ok(store.connection().last_insert_rowid())
}

/// Removes a kept question (and its verdicts).
pub(super) fn forget(store: &Store, id: i64) -> Result<(), IndexError> {
    store.connection().execute("DELETE FROM asked_questions WHERE id = ?1", params![id])?;
    Ok(())
}

/// The voter's key for one answer: a hash of their id under the index's own random key, so
/// one player's verdicts on two answers cannot be linked, and no id is stored.
fn voter_key(store: &Store, id: i64, voter: u64) -> Result<String, IndexError> {
    let connection = store.connection();
    connection.execute(
        "INSERT OR IGNORE INTO meta (key, value) VALUES (?1, lower(hex(randomblob(16))))",
        params![META_FEEDBACK_KEY],
    )?;
    let key: String =
        connection.query_row("SELECT value FROM meta WHERE key = ?1", params![META_FEEDBACK_KEY], |row| row.get(0))?;
    let mut hasher = Sha256::new();
    hasher.update(format!("{key}:{id}:{voter}").as_bytes());
    Ok(hex::encode(hasher.finalize()))
}

/// Stores a verdict, replacing the voter's earlier one on the same answer.
pub(super) fn judge(store: &Store, judgement: &Judgement) -> Result<Judged, IndexError> {
    let connection = store.connection();
    let exists: bool = connection.query_row(
        "SELECT EXISTS (SELECT 1 FROM asked_questions WHERE id = ?1)",
        params![judgement.id],
        |row| row.get(0),
    )?;
    if !exists {
        return Ok(Judged::Unknown);
    }
    let voter = voter_key(store, judgement.id, judgement.voter)?;
    let earlier: Option<i64> = connection
        .query_row(
            "SELECT 1 FROM answer_verdicts WHERE question_id = ?1 AND voter = ?2",
            params![judgement.id, voter],
            |row| row.get(0),
        )
        .optional()?;
    connection.execute(
        "INSERT INTO answer_verdicts (question_id, voter, voter_id, verdict, reason, given_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (question_id, voter) DO UPDATE SET
             voter_id = excluded.voter_id, verdict = excluded.verdict, reason = excluded.reason,
             given_at = excluded.given_at",
        params![
            judgement.id,
            voter,
            judgement.keep_voter.then(|| judgement.voter.to_string()),
            judgement.verdict.as_str(),
            judgement.reason.map(Reason::as_str),
            judgement.at,
        ],
    )?;
    Ok(if earlier.is_some() { Judged::Changed } else { Judged::New })
}

/// Deletes every question asked before `cutoff` (Unix seconds), with its verdicts: how many.
pub(super) fn prune(store: &Store, cutoff: i64) -> Result<usize, IndexError> {
    let transaction = store.connection().unchecked_transaction()?;
    // Explicitly, not only by the cascade: a connection opened without foreign keys on
    // (the sqlite3 shell) leaves no verdict of a deleted question behind either.
    transaction.execute(
        "DELETE FROM answer_verdicts WHERE question_id IN (SELECT id FROM asked_questions WHERE asked_at < ?1)",
        params![cutoff],
    )?;
    let n_pruned = transaction.execute("DELETE FROM asked_questions WHERE asked_at < ?1", params![cutoff])?;
    transaction.commit()?;
    Ok(n_pruned)
}

/// The questions `audience` may read, asked at or after `since`, oldest first, each with its
/// verdicts counted.
pub(super) fn questions(
    store: &Store,
    audience: Audience,
    since: Option<i64>,
) -> Result<Vec<KeptQuestion>, IndexError> {
    let only_players = matches!(audience, Audience::Player);
    let mut statement = store.connection().prepare(
        "SELECT q.id, q.asked_at, q.audience, q.question, q.search_query, q.answer_text, q.cited_labels,
                q.shown_labels, q.entities, q.sessions, q.not_in_notes,
                COALESCE(SUM(v.verdict = 'up'), 0), COALESCE(SUM(v.verdict = 'down'), 0),
                COALESCE(SUM(v.reason = 'wrong'), 0), COALESCE(SUM(v.reason = 'incomplete'), 0),
                COALESCE(SUM(v.reason = 'in_the_notes'), 0)
         FROM asked_questions q LEFT JOIN answer_verdicts v ON v.question_id = q.id
         WHERE (?1 = 0 OR q.audience = 'player') AND (?2 IS NULL OR q.asked_at >= ?2)
         GROUP BY q.id ORDER BY q.asked_at, q.id",
    )?;
    let count = |value: i64| usize::try_from(value).unwrap_or(0);
    let rows = statement.query_map(params![only_players, since], |row| {
        let audience: String = row.get(2)?;
        let cited: String = row.get(6)?;
        let shown: String = row.get(7)?;
        let entities: String = row.get(8)?;
        let sessions: String = row.get(9)?;
        Ok(KeptQuestion {
            id: row.get(0)?,
            asked_at: row.get(1)?,
            audience: if audience == "gm" { "gm" } else { "player" },
            question: row.get(3)?,
            search_query: row.get(4)?,
            answer_text: row.get(5)?,
            cited: read_list::<String>(&cited).into_iter().map(Label::from).collect(),
            shown: read_list::<String>(&shown).into_iter().map(Label::from).collect(),
            entities: read_list(&entities),
            sessions: read_list::<u32>(&sessions).into_iter().map(SessionNumber).collect(),
            not_in_notes: row.get(10)?,
            verdicts: VerdictCounts {
                up: count(row.get(11)?),
                down: count(row.get(12)?),
                wrong: count(row.get(13)?),
                incomplete: count(row.get(14)?),
                in_the_notes: count(row.get(15)?),
            },
        })
    })?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::feedback::FrontEnd;

    fn kept(question: &str, audience: Audience, asked_at: i64) -> KeptAnswer {
        KeptAnswer {
            asked_at,
            audience,
            front_end: FrontEnd::Discord,
            question: question.to_string(),
            search_query: None,
            answer_text: "Las notas no lo dicen.".to_string(),
            cited: vec![Label::new("Sesión 1")],
            shown: vec![Label::new("Sesión 1"), Label::new("Sesión 2")],
            entities: vec!["Baika".to_string()],
            sessions: vec![SessionNumber(3)],
            not_in_notes: false,
            asker: None,
        }
    }

    fn check(store: &Store, audience: Audience, since: Option<i64>, expected: &[&str]) {
        let read = questions(store, audience, since).unwrap();
        let asked: Vec<&str> = read.iter().map(|question| question.question.as_str()).collect();
        assert_eq!(asked, expected, "{audience:?} since {since:?}");
    }

    fn judgement(id: i64, voter: u64, verdict: Verdict, reason: Option<Reason>) -> Judgement {
        Judgement { id, voter, keep_voter: false, verdict, reason, at: 100 }
    }

    #[test]
    fn one_verdict_per_player_per_answer_and_a_players_view_skips_the_gm() {
        let dir = tempfile::TempDir::new().unwrap();
        let store = Store::open(&dir.path().join("index.sqlite")).unwrap();
        let asked = keep(&store, &kept("¿quién es Baika?", Audience::Player, 10)).unwrap();
        keep(&store, &kept("¿quién es el traidor?", Audience::Gm, 20)).unwrap();
        check(&store, Audience::Player, None, &["¿quién es Baika?"]);
        check(&store, Audience::Gm, None, &["¿quién es Baika?", "¿quién es el traidor?"]);
        check(&store, Audience::Gm, Some(15), &["¿quién es el traidor?"]);

        let down = judgement(asked, 7, Verdict::Down, Some(Reason::InTheNotes));
        assert_eq!(judge(&store, &down).unwrap(), Judged::New);
        assert_eq!(judge(&store, &judgement(asked, 7, Verdict::Up, None)).unwrap(), Judged::Changed);
        assert_eq!(judge(&store, &judgement(asked, 8, Verdict::Down, Some(Reason::Wrong))).unwrap(), Judged::New);
        assert_eq!(judge(&store, &judgement(999, 8, Verdict::Up, None)).unwrap(), Judged::Unknown);
        let read = &questions(&store, Audience::Player, None).unwrap()[0];
        let expected = VerdictCounts { up: 1, down: 1, wrong: 1, incomplete: 0, in_the_notes: 0 };
        assert_eq!(read.verdicts, expected);
        assert_eq!(read.cited, [Label::new("Sesión 1")]);
        assert_eq!(read.sessions, [SessionNumber(3)]);
        let stored_voters: Vec<(String, Option<String>)> = {
            let mut statement = store.connection().prepare("SELECT voter, voter_id FROM answer_verdicts").unwrap();
            let rows = statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?))).unwrap();
            rows.map(Result::unwrap).collect()
        };
        assert!(stored_voters.iter().all(|(voter, id)| id.is_none() && voter.len() == 64 && voter != "7"));

        assert_eq!(prune(&store, 15).unwrap(), 1);
        check(&store, Audience::Gm, None, &["¿quién es el traidor?"]);
        let n_verdicts: i64 =
            store.connection().query_row("SELECT COUNT(*) FROM answer_verdicts", [], |row| row.get(0)).unwrap();
        assert_eq!(n_verdicts, 0, "a pruned question's verdicts go with it");
    }
}
