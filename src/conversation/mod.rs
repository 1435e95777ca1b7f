//! Conversation history, kept in the campaign's index (`conversation_turns`) so a restart
//! keeps it: what a follow-up question is read with.
//!
//! A conversation is a key the caller chooses (the bot: one per channel, thread or direct
//! message); nothing reads one key's turns into another's, and each keeps only its latest
//! turns. Each exchange is kept with the audience it was answered for: a player's question
//! is never read with a turn answered from GM notes (a channel that stops being a GM channel
//! keeps its GM turns away from its players). The bot reaches the index's history only
//! through here: the Discord layer never sees `Index` or `Store`.
//!
//! The store is opened lazily, once the campaign's index exists: before the first ingest
//! there is no history to read, and opening would create an empty index that looks built.
//! Its table, `conversation_turns`, is read and written in [`store`], through the index's
//! SQLite connection.
//!
//! Beside the turns, the questions in flight (`questions_in_flight`, migration 0007): a front
//! end writes each question it takes before acknowledging it and removes it once answered, so
//! what a crash leaves behind is answered on the next start ([`Conversations::take_up_questions`]).

mod store;

use std::path::Path;
use std::sync::Arc;

use crate::corpus::Visibility;
use crate::index::SharedStore;
use crate::retrieve::{Audience, Turn, TurnRole};

/// A question taken and not yet answered when the process ended.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlight {
    pub id: i64,
    /// Unix seconds.
    pub asked_at: i64,
    pub conversation: String,
    pub question: String,
    /// The front end's record of where its answer goes.
    pub delivery: String,
    /// Starts that took it up, this one included.
    pub attempts: u32,
}

/// The conversations of one campaign.
#[derive(Clone)]
pub struct Conversations {
    inner: Arc<Inner>,
}

struct Inner {
    /// Turns sent with a question.
    turns: usize,
    store: Arc<SharedStore>,
}

impl std::fmt::Debug for Conversations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversations")
            .field("index_dir", &self.inner.store.index_dir())
            .field("turns", &self.inner.turns)
            .finish()
    }
}

impl Conversations {
    /// The history in the index at `index_dir`, sending `turns` turns with each question.
    pub fn new(index_dir: &Path, turns: usize) -> Conversations {
        Conversations { inner: Arc::new(Inner { turns, store: SharedStore::new(index_dir, "history") }) }
    }

    /// Turns stored per conversation: what is sent, and at least one exchange, so that a
    /// thread the bot opened stays recognisable even with `history_turns = 0`.
    fn kept(&self) -> usize {
        self.inner.turns.max(2)
    }

    /// The latest turns of conversation `key` that `audience` may read, oldest first (a
    /// player: only the turns answered for players); empty when there are none or the store
    /// cannot be read (logged: a question without history is still answered).
    pub async fn recent(&self, key: &str, audience: Audience) -> Vec<Turn> {
        let limit = self.inner.turns;
        if limit == 0 {
            return Vec::new();
        }
        let owned = key.to_string();
        let visibility = audience.visibility_filter();
        match self.inner.store.with(move |sqlite| store::turns(sqlite, &owned, visibility, limit)).await {
            Ok(turns) => turns.unwrap_or_default(),
            Err(err) => {
                tracing::warn!(error = %err, conversation = key, "conversation history unreadable: answering without it");
                Vec::new()
            }
        }
    }

    /// Records one exchange in conversation `key`, answered for `audience`.
    pub async fn record(&self, key: &str, audience: Audience, question: &str, answer: &str) {
        let turns = vec![
            Turn { role: TurnRole::User, content: question.to_string() },
            Turn { role: TurnRole::Assistant, content: answer.to_string() },
        ];
        self.append(key, audience, turns).await;
    }

    /// Appends `turns`, answered for `audience`, to conversation `key` (a new thread starts
    /// with the exchange it was opened on).
    pub async fn append(&self, key: &str, audience: Audience, turns: Vec<Turn>) {
        let owned = key.to_string();
        let keep = self.kept();
        // A GM's exchange may hold GM-only text: stored as such.
        let visibility = match audience {
            Audience::Player => Visibility::Player,
            Audience::Gm => Visibility::DmOnly,
        };
        match self.inner.store.with(move |sqlite| store::append_turns(sqlite, &owned, &turns, visibility, keep)).await {
            Ok(Some(())) => {}
            Ok(None) => tracing::warn!(conversation = key, "no index yet: the exchange is not kept in the history"),
            Err(err) => tracing::warn!(error = %err, conversation = key, "conversation history not written"),
        }
    }

    /// Whether conversation `key` has history (a thread does exactly when the bot opened it).
    pub async fn knows(&self, key: &str) -> bool {
        let owned = key.to_string();
        match self.inner.store.with(move |sqlite| store::has_turns(sqlite, &owned)).await {
            Ok(known) => known.unwrap_or(false),
            Err(err) => {
                tracing::warn!(error = %err, conversation = key, "conversation history unreadable");
                false
            }
        }
    }
    /// Writes `question`, asked in conversation `key` and to be answered at `delivery` (the
    /// front end's own record), before it is acknowledged: its id, for
    /// [`Conversations::forget_question`]. `None` when it cannot be kept (no index yet, an
    /// unwritable store: logged): the question is answered all the same, only not across a
    /// restart.
    pub async fn remember_question(&self, key: &str, question: &str, delivery: String) -> Option<i64> {
        let (owned, question) = (key.to_string(), question.to_string());
        let asked_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| i64::try_from(since.as_secs()).unwrap_or(i64::MAX));
        match self
            .inner
            .store
            .with(move |sqlite| store::remember_question(sqlite, asked_at, &owned, &question, &delivery))
            .await
        {
            Ok(id) => id,
            Err(err) => {
                tracing::warn!(error = %err, conversation = key, "the question is not kept across a restart");
                None
            }
        }
    }

    /// The question `id` was answered, or told why not: it is not taken up again.
    pub async fn forget_question(&self, id: i64) {
        if let Err(err) = self.inner.store.with(move |sqlite| store::forget_question(sqlite, id)).await {
            tracing::warn!(error = %err, id, "an answered question stays in flight: it may be answered again");
        }
    }

    /// The questions a previous run left in flight, oldest first, each counted as taken up
    /// once more; empty when there are none or the store cannot be read (logged).
    pub async fn take_up_questions(&self) -> Vec<InFlight> {
        match self.inner.store.with(store::take_up_questions).await {
            Ok(questions) => questions.unwrap_or_default(),
            Err(err) => {
                tracing::warn!(error = %err, "the questions left in flight could not be read");
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Store;

    async fn check(conversations: &Conversations, key: &str, expected: &[&str]) {
        let turns = conversations.recent(key, Audience::Player).await;
        let contents: Vec<&str> = turns.iter().map(|t| t.content.as_str()).collect();
        assert_eq!(contents, expected, "{key}");
    }

    #[tokio::test]
    async fn history_never_crosses_conversations() {
        let dir = tempfile::TempDir::new().unwrap();
        Store::open(&dir.path().join("index.sqlite")).unwrap();
        let conversations = Conversations::new(dir.path(), 4);
        let player = Audience::Player;
        conversations
            .record("discord:channel:1", player, "¿quién es Baika?", "Una contrabandista [Ficha: Baika].")
            .await;
        conversations.record("discord:thread:1", player, "¿y su barco?", "El Tuerto [Sesión 2].").await;
        conversations.record("discord:channel:2", player, "¿dónde está el faro?", "En Puerto Galerna.").await;
        assert!(conversations.knows("discord:thread:1").await);
        assert!(!conversations.knows("discord:thread:2").await);
        check(&conversations, "discord:channel:1", &["¿quién es Baika?", "Una contrabandista [Ficha: Baika]."]).await;
        check(&conversations, "discord:thread:1", &["¿y su barco?", "El Tuerto [Sesión 2]."]).await;
        check(&conversations, "discord:channel:2", &["¿dónde está el faro?", "En Puerto Galerna."]).await;
        check(&conversations, "discord:thread:3", &[]).await;
    }

    #[tokio::test]
    async fn a_channel_that_stops_being_a_gm_channel_keeps_its_gm_turns_from_its_players() {
        let dir = tempfile::TempDir::new().unwrap();
        Store::open(&dir.path().join("index.sqlite")).unwrap();
        let conversations = Conversations::new(dir.path(), 6);
        let channel = "discord:channel:5";
        // A GM channel: the GM asks, answered from GM notes.
        conversations.record(channel, Audience::Gm, "¿quién es el traidor?", "El capitán [Mundo: Secreto].").await;
        // The config changes: the same channel is a player channel now.
        conversations.record(channel, Audience::Player, "¿qué pasó en el faro?", "Se apagó [Sesión 3].").await;
        check(&conversations, channel, &["¿qué pasó en el faro?", "Se apagó [Sesión 3]."]).await;
        let gm: Vec<String> =
            conversations.recent(channel, Audience::Gm).await.into_iter().map(|turn| turn.content).collect();
        assert_eq!(gm.len(), 4, "the GM reads both: {gm:?}");
    }

    #[tokio::test]
    async fn questions_in_flight_outlive_the_process_until_forgotten_and_count_their_starts() {
        let dir = tempfile::TempDir::new().unwrap();
        let absent = Conversations::new(dir.path(), 4);
        assert_eq!(absent.remember_question("k", "¿?", "{}".into()).await, None, "no index: not kept, not created");
        assert!(!dir.path().join("index.sqlite").exists());
        Store::open(&dir.path().join("index.sqlite")).unwrap();
        let first_run = Conversations::new(dir.path(), 4);
        let answered = first_run.remember_question("discord:channel:1", "¿quién es Baika?", "{\"a\":1}".into()).await;
        let lost = first_run.remember_question("discord:thread:2", "¿y su barco?", "{\"b\":2}".into()).await;
        first_run.forget_question(answered.expect("kept")).await;
        drop(first_run);
        // The process ended with one question unanswered: the next start takes it up.
        let second_run = Conversations::new(dir.path(), 4);
        let taken = second_run.take_up_questions().await;
        assert_eq!(taken.len(), 1, "{taken:?}");
        assert_eq!(Some(taken[0].id), lost);
        assert_eq!((taken[0].conversation.as_str(), taken[0].question.as_str()), ("discord:thread:2", "¿y su barco?"));
        assert_eq!((taken[0].delivery.as_str(), taken[0].attempts), ("{\"b\":2}", 1));
        // That start died too: the next one sees the second attempt.
        let third_run = Conversations::new(dir.path(), 4);
        assert_eq!(third_run.take_up_questions().await[0].attempts, 2);
        third_run.forget_question(taken[0].id).await;
        assert!(third_run.take_up_questions().await.is_empty());
    }

    #[tokio::test]
    async fn history_is_bounded_and_survives_a_restart() {
        let dir = tempfile::TempDir::new().unwrap();
        Store::open(&dir.path().join("index.sqlite")).unwrap();
        let conversations = Conversations::new(dir.path(), 4);
        for i in 0..10 {
            conversations.record("discord:thread:7", Audience::Player, &format!("q{i}"), &format!("a{i}")).await;
        }
        let restarted = Conversations::new(dir.path(), 4);
        let turns = restarted.recent("discord:thread:7", Audience::Player).await;
        let contents: Vec<&str> = turns.iter().map(|t| t.content.as_str()).collect();
        assert_eq!(contents, ["q8", "a8", "q9", "a9"]);
        assert_eq!(turns[0].role, TurnRole::User);
    }

    #[tokio::test]
    async fn no_index_means_no_history_and_no_index_created() {
        let dir = tempfile::TempDir::new().unwrap();
        let conversations = Conversations::new(dir.path(), 4);
        conversations.record("discord:channel:1", Audience::Player, "q", "a").await;
        assert!(conversations.recent("discord:channel:1", Audience::Player).await.is_empty());
        assert!(!dir.path().join("index.sqlite").exists(), "the history must not create an index");
    }
}
