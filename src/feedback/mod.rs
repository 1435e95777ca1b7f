//! What the players asked, kept for the DM: each question the bot answered (as asked, and as
//! searched after a follow-up's expansion), who it was answered for, the labels it cited and
//! the notes it was shown, whether the notes held an answer, and the players' 👍/👎 on it.
//!
//! Kept in the campaign's index (`asked_questions`, `answer_verdicts`: migration 0008),
//! through the index's SQLite connection, opened lazily as the conversations are (no index,
//! nothing kept, no index created). The bot keeps what it answers ([`KeptAnswer::of`]);
//! `oraculo mcp` only with `[feedback] keep_mcp`; the CLI's `ask` (a DM at a desk) and the
//! evaluation never. `oraculo asked` and `/oraculo_informe` read it back ([`Report`]).
//!
//! What is not kept: the asker's user id, unless `[feedback] keep_askers`; a verdict is keyed
//! by a hash of the player's id keyed by the index's own random key, which tells one player
//! from another on one answer and nothing else. Rows older than `[feedback] keep_days` are
//! deleted at each start ([`AskedQuestions::prune`]).

mod report;
mod store;

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use tracing::Instrument;

use crate::config::FeedbackConfig;
use crate::corpus::{Label, SessionNumber};
use crate::index::SharedStore;
use crate::oracle::Settled;
use crate::retrieve::Audience;

pub use report::{
    MarkedWrong, NamedKind, Report, UnansweredGroup, UnansweredQuestion, WeekCount, same_question, week_of,
};

/// Which front end took the question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrontEnd {
    Discord,
    Mcp,
}

impl FrontEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            FrontEnd::Discord => "discord",
            FrontEnd::Mcp => "mcp",
        }
    }
}

/// One answered question, as it is kept.
#[derive(Debug, Clone, PartialEq)]
pub struct KeptAnswer {
    /// Unix seconds.
    pub asked_at: i64,
    pub audience: Audience,
    pub front_end: FrontEnd,
    /// As the asker wrote it.
    pub question: String,
    /// As it was searched, when a follow-up was expanded with what it follows.
    pub search_query: Option<String>,
    /// What stayed of the answer (what the asker read).
    pub answer_text: String,
    /// The labels the answer cites (valid citations only).
    pub cited: Vec<Label>,
    /// The labels of the notes the model was shown (in full, then as summaries).
    pub shown: Vec<Label>,
    /// The compendium's entities the question names.
    pub entities: Vec<String>,
    /// The sessions the question names («la sesión 12»).
    pub sessions: Vec<SessionNumber>,
    /// The notes held no answer: the model cited none, or nothing was found.
    pub not_in_notes: bool,
    /// The asker's Discord user id; stored only with `keep_askers`.
    pub asker: Option<u64>,
}

impl KeptAnswer {
    /// What is kept of `settled`, asked by `asker` for `audience` through `front_end`, now.
    pub fn of(settled: &Settled, audience: Audience, front_end: FrontEnd, asker: Option<u64>) -> KeptAnswer {
        let answer = &settled.answer;
        let mut shown: Vec<Label> = Vec::new();
        for source in answer.fragments_shown.iter().chain(&answer.summaries_shown) {
            if !shown.contains(&source.label) {
                shown.push(source.label.clone());
            }
        }
        let mut cited: Vec<Label> = Vec::new();
        for citation in answer.citations.iter().filter(|citation| citation.valid) {
            let label = Label::new(citation.label.as_str());
            if !cited.contains(&label) {
                cited.push(label);
            }
        }
        let mut entities: Vec<String> = Vec::new();
        for entity in &answer.entities {
            if !entities.contains(&entity.name) {
                entities.push(entity.name.clone());
            }
        }
        KeptAnswer {
            asked_at: now_unix(),
            audience,
            front_end,
            question: answer.question.clone(),
            search_query: answer.followup_expanded.then(|| answer.search_query.clone()),
            answer_text: answer.text.clone(),
            cited,
            shown,
            entities,
            sessions: sessions_named(&answer.question),
            not_in_notes: settled.not_in_the_notes(),
            asker,
        }
    }
}

/// The sessions a question names by number («la sesión 12», «sesiones 3 a 5»), in order.
pub fn sessions_named(question: &str) -> Vec<SessionNumber> {
    use crate::retrieve::time::{TimeReference, parse_time_references};
    /// A range is listed session by session only this far: «sesiones 1 a 200» names a span,
    /// not two hundred groups of a report.
    const RANGE_SESSIONS_LISTED: u32 = 5;
    let mut sessions = Vec::new();
    for reference in parse_time_references(question) {
        let numbers: Vec<u32> = match reference {
            TimeReference::Session { number } => vec![number],
            TimeReference::Range { from, to } => {
                let (low, high) = (from.min(to), from.max(to));
                (low..=high).take(RANGE_SESSIONS_LISTED as usize).collect()
            }
            _ => Vec::new(),
        };
        for number in numbers {
            if !sessions.contains(&SessionNumber(number)) {
                sessions.push(SessionNumber(number));
            }
        }
    }
    sessions
}

/// What a player thought of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Up,
    Down,
}

/// Why a 👎: the three choices «¿Qué estaba mal?» offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The answer said something the notes do not.
    Wrong,
    /// Right as far as it went, but something was missing.
    Incomplete,
    /// It said the notes do not hold it, and they do.
    InTheNotes,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Up => "up",
            Verdict::Down => "down",
        }
    }

    pub fn parse(text: &str) -> Option<Verdict> {
        [Verdict::Up, Verdict::Down].into_iter().find(|verdict| verdict.as_str() == text)
    }
}

impl Reason {
    pub const ALL: [Reason; 3] = [Reason::Wrong, Reason::Incomplete, Reason::InTheNotes];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Wrong => "wrong",
            Reason::Incomplete => "incomplete",
            Reason::InTheNotes => "in_the_notes",
        }
    }

    pub fn parse(text: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|reason| reason.as_str() == text)
    }
}

/// A kept question read back, with its verdicts counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeptQuestion {
    pub id: i64,
    pub asked_at: i64,
    pub audience: &'static str,
    pub question: String,
    pub search_query: Option<String>,
    pub answer_text: String,
    pub cited: Vec<Label>,
    pub shown: Vec<Label>,
    pub entities: Vec<String>,
    pub sessions: Vec<SessionNumber>,
    pub not_in_notes: bool,
    pub verdicts: VerdictCounts,
}

impl KeptQuestion {
    /// The notes did not answer it: the answer said so, or a player said it was in the notes.
    pub fn unanswered(&self) -> bool {
        self.not_in_notes || self.verdicts.in_the_notes > 0
    }

    /// Answered, and liked with no 👎: its cited labels are a fair first guess at the notes
    /// that answer it.
    pub fn liked(&self) -> bool {
        !self.not_in_notes && self.verdicts.up > 0 && self.verdicts.down == 0 && !self.cited.is_empty()
    }

    /// As it was searched: a follow-up with what it follows, else as asked.
    pub fn as_searched(&self) -> &str {
        self.search_query.as_deref().unwrap_or(&self.question)
    }
}

/// The verdicts on one answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct VerdictCounts {
    pub up: usize,
    pub down: usize,
    pub wrong: usize,
    pub incomplete: usize,
    pub in_the_notes: usize,
}

/// A verdict as it was stored: new, or replacing the player's earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    New,
    Changed,
    /// The question is not kept (pruned, or never kept): nothing stored.
    Unknown,
}

/// The questions of one campaign, kept in its index.
#[derive(Clone)]
pub struct AskedQuestions {
    inner: Arc<Inner>,
}

struct Inner {
    config: FeedbackConfig,
    store: Arc<SharedStore>,
}

impl std::fmt::Debug for AskedQuestions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AskedQuestions")
            .field("index_dir", &self.inner.store.index_dir())
            .field("config", &self.inner.config)
            .finish()
    }
}

impl AskedQuestions {
    /// The kept questions of the index at `index_dir`, under `config`.
    pub fn new(index_dir: &Path, config: FeedbackConfig) -> AskedQuestions {
        AskedQuestions { inner: Arc::new(Inner { config, store: SharedStore::new(index_dir, "kept questions") }) }
    }

    /// What is kept, and for how long.
    pub fn config(&self) -> FeedbackConfig {
        self.inner.config
    }

    /// Keeps one answered question: its id (what the verdict buttons carry), or `None` when it
    /// cannot be kept (no index yet, an unwritable store: logged). The asker's id is dropped
    /// unless `keep_askers`.
    pub async fn keep(&self, mut kept: KeptAnswer) -> Option<i64> {
        if !self.inner.config.keep_askers {
            kept.asker = None;
        }
        let span = tracing::info_span!("feedback.keep", audience = ?kept.audience, not_in_notes = kept.not_in_notes);
        match self.inner.store.with(move |sqlite| store::keep(sqlite, &kept)).instrument(span).await {
            Ok(Some(id)) => Some(id),
            Ok(None) => {
                tracing::info!("no index yet: the question is not kept");
                None
            }
            Err(err) => {
                tracing::warn!(error = format!("{err:#}"), "the question could not be kept");
                None
            }
        }
    }

    /// Removes a kept question whose answer never reached the asker.
    pub async fn forget(&self, id: i64) {
        if let Err(err) = self.inner.store.with(move |sqlite| store::forget(sqlite, id)).await {
            tracing::warn!(error = format!("{err:#}"), id, "a kept question could not be removed");
        }
    }

    /// Stores `voter`'s verdict on question `id` (with why, for a 👎 that says), replacing
    /// their earlier one: one verdict per player per answer.
    pub async fn judge(&self, id: i64, voter: u64, verdict: Verdict, reason: Option<Reason>) -> anyhow::Result<Judged> {
        let keep_voter = self.inner.config.keep_askers;
        let judged = self
            .inner
            .store
            .with(move |sqlite| {
                store::judge(sqlite, &store::Judgement { id, voter, keep_voter, verdict, reason, at: now_unix() })
            })
            .await?;
        Ok(judged.unwrap_or(Judged::Unknown))
    }

    /// Deletes what is older than `keep_days`: the number of questions deleted (`None`: no
    /// index, nothing kept).
    pub async fn prune(&self) -> anyhow::Result<Option<usize>> {
        let cutoff = now_unix() - self.inner.config.keep_seconds();
        let pruned = self.inner.store.with(move |sqlite| store::prune(sqlite, cutoff)).await?;
        if let Some(n_pruned) = pruned.filter(|n| *n > 0) {
            tracing::info!(n_pruned, keep_days = self.inner.config.keep_days, "kept questions past keep_days deleted");
        }
        Ok(pruned)
    }

    /// The kept questions `audience` may read (a player's view: never a GM channel's), asked
    /// at or after `since` (Unix seconds), oldest first.
    pub async fn questions(&self, audience: Audience, since: Option<i64>) -> anyhow::Result<Vec<KeptQuestion>> {
        let questions = self.inner.store.with(move |sqlite| store::questions(sqlite, audience, since)).await?;
        Ok(questions.unwrap_or_default())
    }

    /// The report over what `audience` may read since `since`.
    pub async fn report(&self, audience: Audience, since: Option<i64>) -> anyhow::Result<Report> {
        Ok(Report::of(&self.questions(audience, since).await?, audience, since))
    }
}

/// Now, in Unix seconds.
pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| i64::try_from(since.as_secs()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Store;

    fn kept(asker: Option<u64>, asked_at: i64) -> KeptAnswer {
        KeptAnswer {
            asked_at,
            audience: Audience::Player,
            front_end: FrontEnd::Discord,
            question: "¿Dónde está Baika?".to_string(),
            search_query: None,
            answer_text: "Las notas no lo dicen.".to_string(),
            cited: Vec::new(),
            shown: vec![Label::new("Sesión 1")],
            entities: vec!["Baika".to_string()],
            sessions: Vec::new(),
            not_in_notes: true,
            asker,
        }
    }

    fn config(keep_askers: bool, keep_days: u32) -> FeedbackConfig {
        FeedbackConfig { keep_askers, keep_days, keep_mcp: false }
    }

    /// The askers and voters stored, as the file holds them.
    fn stored_ids(dir: &Path) -> (Vec<Option<String>>, Vec<Option<String>>) {
        let store = Store::open(&dir.join("index.sqlite")).unwrap();
        let column = |sql: &str| -> Vec<Option<String>> {
            let mut statement = store.connection().prepare(sql).unwrap();
            statement.query_map([], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
        };
        (column("SELECT asker FROM asked_questions"), column("SELECT voter_id FROM answer_verdicts"))
    }

    #[tokio::test]
    async fn no_user_id_is_kept_unless_the_dm_asks() {
        let dir = tempfile::TempDir::new().unwrap();
        let absent = AskedQuestions::new(dir.path(), config(false, 30));
        assert_eq!(absent.keep(kept(Some(42), now_unix())).await, None, "no index: nothing kept");
        assert!(!dir.path().join("index.sqlite").exists(), "keeping a question never creates an index");
        Store::open(&dir.path().join("index.sqlite")).unwrap();

        let anonymous = AskedQuestions::new(dir.path(), config(false, 30));
        let id = anonymous.keep(kept(Some(42), now_unix())).await.expect("kept");
        assert_eq!(anonymous.judge(id, 43, Verdict::Down, Some(Reason::InTheNotes)).await.unwrap(), Judged::New);
        assert_eq!(stored_ids(dir.path()), (vec![None], vec![None]));

        let named = AskedQuestions::new(dir.path(), config(true, 30));
        let id = named.keep(kept(Some(42), now_unix())).await.expect("kept");
        named.judge(id, 43, Verdict::Up, None).await.unwrap();
        let (askers, voters) = stored_ids(dir.path());
        assert_eq!(askers, [None, Some("42".to_string())]);
        assert!(voters.contains(&Some("43".to_string())), "{voters:?}");
    }

    #[tokio::test]
    async fn nothing_is_kept_past_keep_days() {
        let dir = tempfile::TempDir::new().unwrap();
        Store::open(&dir.path().join("index.sqlite")).unwrap();
        let asked = AskedQuestions::new(dir.path(), config(false, 30));
        let day = 24 * 60 * 60;
        let old = asked.keep(kept(None, now_unix() - 31 * day)).await.unwrap();
        asked.judge(old, 1, Verdict::Up, None).await.unwrap();
        asked.keep(kept(None, now_unix() - 29 * day)).await.unwrap();
        assert_eq!(asked.prune().await.unwrap(), Some(1));
        let left = asked.questions(Audience::Gm, None).await.unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(asked.judge(old, 1, Verdict::Down, None).await.unwrap(), Judged::Unknown);
    }

    #[test]
    fn the_sessions_a_question_names() {
        assert_eq!(sessions_named("¿Qué pasó en la sesión 12?"), [SessionNumber(12)]);
        assert_eq!(sessions_named("¿Qué pasó en las sesiones 3 a 4?"), [SessionNumber(3), SessionNumber(4)]);
        assert!(sessions_named("¿Quién es Baika?").is_empty());
    }
}
