//! The oracle: one question in, one cited answer out. The façade the CLI and the bot call.
//!
//! search (three paths + fusion) → annotations → rerank → context (8 full fragments + one-line
//! summaries) → prompt → chat model → citation check. Each step is its own module; this one
//! only strings them together and keeps the timings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tracing::Instrument;

use crate::answer::grounding::{CitedNotes, NameBook, Ungrounded};
use crate::answer::passages::{GAP_MARK, QueryTerms, extract_excerpts, render_extractive, shorten};
use crate::answer::structured::{
    Sentence, SentenceStream, StructuredAnswer, answer_schema, parse_structured, render_sentence, render_structured,
};
use crate::answer::support::{SupportPassages, support_windows};
use crate::answer::{
    AnswerMode, Context, ContextBudget, ContextFragment, ValidatedAnswer, build_context, narrow_to_passages,
    validate_citations,
};
use crate::corpus::{LabelLanguage, NoteKind, SessionNumber};
use crate::index::store::SourceSummary;
use crate::index::{Index, IndexError, StoredFragment};
use crate::llm::chat::{ChatMessage, ChatModel, ChatRequest, ContextWindow, TokenSink, WindowSource};
use crate::llm::{EmbedRole, Embedder, LlmError, SupportFloor};
use crate::prompt::{ANNOTATE_PROMPT_VERSION, answer_messages, structured_answer_messages, structured_retry_message};
use crate::retrieve::rerank::{RerankDecision, RerankSkip, rerank_by_annotation};
use crate::retrieve::{
    Audience, Candidate, CompendiumIndex, DEFAULT_K, DetectedEntity, PathSet, RetrieveError, SearchRequest,
    SearchResult, Turn, TurnRole,
};

/// A question longer than this is refused: it is a paste, not a question, and it would
/// crowd the notes out of the context window.
pub const MAX_QUESTION_CHARS: usize = 1000;
/// Opened indexes an oracle keeps between questions (issue 13: the bot answers at memory speed,
/// not re-opening SQLite and LanceDB per question): one per question answered at once, which
/// the bot's `concurrency` bounds; more are opened on demand and closed when returned.
const OPEN_INDEXES_KEPT: usize = 4;
/// Characters of a cited fragment shown as its excerpt (a Discord embed field holds 1024).
pub const EXCERPT_CHARS: usize = 300;
/// Tokens kept free in the context window for the chat template's own markup.
const TEMPLATE_MARGIN_TOKENS: usize = 256;
/// Tokens an answer is expected to take when its time is planned: four or five cited
/// sentences. The budget (`max_tokens`) stays the hard limit.
const EXPECTED_ANSWER_TOKENS: usize = 256;
/// Under a time plan, the least material an answer gets however slow the machine measured:
/// the passages of three or four fragments (~3 minutes of reading at the slowest speed seen
/// here, 5 prompt tokens a second on a busy 2-core VM, would be absurd; ~15-40 s is typical).
const MIN_MATERIAL_TOKENS: usize = 640;
/// After a refusal for length, the material planned again is at most this share of what was
/// refused: the refusal proves the estimate was low, so the same material must not go again.
const REPLAN_SHRINK: f64 = 0.75;
/// Structured replies tried before the answer becomes extractive: the first, and one retry
/// told what was wrong.
const STRUCTURED_ATTEMPTS: usize = 2;

/// How answers are made. Passed explicitly; built from config.
#[derive(Debug, Clone)]
pub struct AnswerSettings {
    /// Fragments shown in full (the rerank's output size).
    pub k: usize,
    /// The rerank gives up after this and keeps the fusion order.
    pub rerank_timeout: Duration,
    /// The answer budget, in tokens.
    pub max_tokens: usize,
    pub temperature: f32,
    /// How the model is asked to answer; `Extractive` asks no model.
    pub mode: AnswerMode,
    /// How long an answer may take on a backend that reports its speed (the embedded one).
    pub answer_seconds: f64,
    /// The total time one answer's generation may take, every attempt included; past it the
    /// answer is extractive (issue 12, item 12: one endless stream cannot hold the queue).
    pub deadline: Duration,
}

impl AnswerSettings {
    /// Free text, as a server's model writes it; see [`AnswerSettings::from_config`].
    pub fn new(max_tokens: usize) -> AnswerSettings {
        AnswerSettings {
            k: DEFAULT_K,
            rerank_timeout: Duration::from_secs(60),
            max_tokens,
            temperature: 0.2,
            mode: AnswerMode::Free,
            answer_seconds: crate::config::DEFAULT_ANSWER_SECONDS,
            deadline: Duration::from_secs(crate::config::DEFAULT_ANSWER_DEADLINE_SECS),
        }
    }

    /// What `[chat]` asks for.
    pub fn from_config(max_tokens: usize, answer: &crate::config::AnswerConfig) -> AnswerSettings {
        AnswerSettings {
            mode: answer.mode,
            answer_seconds: answer.seconds,
            deadline: answer.deadline,
            ..AnswerSettings::new(max_tokens)
        }
    }
}

/// How much material the model was given, and what limited it: the window (a server) or
/// the time a CPU may spend reading (the embedded backend).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextPlan {
    /// `"window"` or `"time"`.
    pub limited_by: &'static str,
    /// Tokens the material could take.
    pub material_tokens: usize,
    /// The time budget and the measured prompt speed, when the time was the limit.
    pub answer_seconds: Option<f64>,
    pub prompt_tokens_per_s: Option<f64>,
    /// Chosen fragments shown as their passages rather than whole.
    pub fragments_as_passages: usize,
    /// The context window the prompt was planned for, in tokens, and where that number came
    /// from (`config`, `server_props`, `server_models`, `ollama_show`, `refusal`, `default`,
    /// `loaded`).
    pub window_tokens: usize,
    pub window_source: WindowSource,
    /// Times the context was planned again because the server refused the prompt as longer
    /// than its window (0 or 1).
    pub window_retries: usize,
}

/// How a question is retrieved. The product always runs [`Pipeline::default`] (three paths,
/// rerank on); the evaluation varies it to measure what each stage adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pipeline {
    pub paths: PathSet,
    pub rerank: bool,
}

impl Default for Pipeline {
    fn default() -> Pipeline {
        Pipeline { paths: PathSet::ALL, rerank: true }
    }
}

/// What [`Oracle::prepare`] decided: the pool, the rerank's choice and the model's context.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub question: String,
    started: Instant,
    pub search: SearchResult,
    /// The fragments chosen to be shown in full, before the context's token budget.
    pub chosen: Vec<Candidate>,
    pub rerank: RerankDecision,
    pub rerank_ms: f64,
    pub rerank_prompt_tokens: Option<usize>,
    pub context: Context,
    pub plan: ContextPlan,
    texts: HashMap<i64, StoredFragment>,
    history: Vec<ChatMessage>,
    /// What the question is about, for passages and excerpts.
    terms: QueryTerms,
    /// What the context was built from, kept to build it again smaller after a refusal.
    chosen_context: Vec<ContextFragment>,
    leftovers: Vec<ContextFragment>,
    /// The campaign's names by entity, for the grounding check.
    names: NameBook,
}

/// Where an answer is before its first word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The paths are searching the notes.
    Searching,
    /// The model is reading `notes` notes (in full or as summaries) and writing.
    Writing { notes: usize },
}

/// One question.
#[derive(Debug, Clone)]
pub struct AskRequest<'a> {
    pub question: &'a str,
    /// Earlier turns of this conversation (one Discord channel or thread, one CLI chat).
    pub history: &'a [Turn],
    pub audience: Audience,
}

/// A citation in the answer, checked against what the model was shown.
#[derive(Debug, Clone, Serialize)]
pub struct CitationSource {
    pub label: String,
    /// False: the label was not among those shown (invented); never presented as a source.
    pub valid: bool,
    pub source_path: Option<String>,
    pub session: Option<SessionNumber>,
    pub kind: Option<NoteKind>,
    pub fragment_id: Option<i64>,
    /// The start of the cited fragment (or its summary, when only the summary was shown).
    pub excerpt: Option<String>,
    /// Times the answer cites it.
    pub count: usize,
}

/// Something the model was shown.
#[derive(Debug, Clone, Serialize)]
pub struct ShownSource {
    pub fragment_id: i64,
    pub label: String,
    pub session: Option<SessionNumber>,
}

/// Milliseconds per stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AnswerTimings {
    pub embed_query_ms: f64,
    pub dense_ms: f64,
    pub bm25_ms: f64,
    pub entity_ms: f64,
    pub fuse_ms: f64,
    pub time_ms: f64,
    pub rerank_ms: f64,
    pub generation_ms: f64,
    pub total_ms: f64,
}

impl AnswerTimings {
    /// The search's and the rerank's stages; generation and total still to come.
    pub fn before_generation(prepared: &Prepared) -> AnswerTimings {
        let t = &prepared.search.timings;
        AnswerTimings {
            embed_query_ms: t.embed_query_ms,
            dense_ms: t.dense_ms,
            bm25_ms: t.bm25_ms,
            entity_ms: t.entity_ms,
            fuse_ms: t.fuse_ms,
            time_ms: t.time_ms,
            rerank_ms: prepared.rerank_ms,
            generation_ms: 0.0,
            total_ms: 0.0,
        }
    }
}

/// The answer object: `oraculo ask --json` prints it; the bot renders it.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    pub question: String,
    /// The answer, with invented citations marked (see `answer::citations`).
    pub text: String,
    pub citations: Vec<CitationSource>,
    pub invented_citations: Vec<String>,
    pub fragments_shown: Vec<ShownSource>,
    pub summaries_shown: Vec<ShownSource>,
    pub dropped_for_budget: usize,
    pub rerank: RerankDecision,
    /// Tokens of the rerank prompt (question + the pool's annotations), when every candidate
    /// had an annotation.
    pub rerank_prompt_tokens: Option<usize>,
    pub search_query: String,
    pub followup_expanded: bool,
    pub entities: Vec<DetectedEntity>,
    pub pool_size: usize,
    pub timings: AnswerTimings,
    pub chat_model: String,
    pub embedder: String,
    pub prompt_tokens: Option<usize>,
    pub completion_tokens: Option<usize>,
    /// How this answer was made: `structured`, `free` or `extractive`.
    pub mode: AnswerMode,
    /// Why the answer is extractive when the model was asked first (server down, timeout,
    /// a reply that never fitted the schema); `None` otherwise.
    pub fallback: Option<String>,
    /// Model replies it took (a structured reply that did not fit gets one retry).
    pub attempts: usize,
    pub context_plan: ContextPlan,
    /// Retrieval paths that failed for this question (the answer comes from the others).
    pub missing_paths: Vec<crate::retrieve::MissingPath>,
    /// Sentences of the model's answer dropped because the notes they cite do not back
    /// them (a number or a name not there), each with why (`answer::grounding`).
    pub ungrounded: Vec<String>,
}

impl Answer {
    /// Whether this exchange becomes a turn of the conversation: not when the model was
    /// asked and failed (a server killed mid-stream, a timeout, a reply that never fitted):
    /// the player saw the notes' own sentences, not an answer to follow up on, and the next
    /// question should not build on a half-written one (issue 16).
    pub fn joins_history(&self) -> bool {
        self.fallback.is_none()
    }
}

/// What can stop an answer. Each reads as a message a player can act on; details go to logs.
#[derive(Debug, thiserror::Error)]
pub enum AskError {
    #[error("the question is empty")]
    EmptyQuestion,
    #[error("the question is too long ({chars} characters; at most {max})")]
    QuestionTooLong { chars: usize, max: usize },
    #[error("the campaign has not been indexed yet: the DM must run an ingest first")]
    NotBuilt,
    #[error("the index cannot be read: {0}")]
    Index(#[from] IndexError),
    #[error("searching the notes failed: {0}")]
    Retrieve(#[from] RetrieveError),
    #[error("the language model failed: {0}")]
    Llm(#[from] LlmError),
}

/// The models and the index of one campaign.
pub struct Oracle {
    index_dir: PathBuf,
    embedder: Arc<dyn Embedder>,
    chat: Arc<dyn ChatModel>,
    settings: AnswerSettings,
    /// The compendium matcher of the index generation it was built from (issue 13: built once
    /// per ingest, not once per question); rebuilt when an ingest commits a new generation.
    compendium: std::sync::Mutex<Option<(String, Arc<CompendiumIndex>)>>,
    /// Indexes opened for earlier questions, lent to the next ones ([`IndexLease`]). An ingest
    /// writes in place, in transactions, so an open index reads each committed generation.
    open_indexes: std::sync::Mutex<Vec<Index>>,
}

/// An open index lent by the oracle for one question; returned to it when dropped.
pub struct IndexLease<'a> {
    index: Option<Index>,
    pool: &'a std::sync::Mutex<Vec<Index>>,
}

impl std::ops::Deref for IndexLease<'_> {
    type Target = Index;

    fn deref(&self) -> &Index {
        self.index.as_ref().expect("an index lease holds its index until dropped")
    }
}

impl Drop for IndexLease<'_> {
    fn drop(&mut self) {
        if let Some(index) = self.index.take() {
            let mut pool = self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if pool.len() < OPEN_INDEXES_KEPT {
                pool.push(index);
            }
        }
    }
}

impl std::fmt::Debug for Oracle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oracle")
            .field("index_dir", &self.index_dir)
            .field("embedder", &self.embedder.id())
            .field("chat", &self.chat.id())
            .finish()
    }
}

impl Oracle {
    pub fn new(
        index_dir: &Path,
        embedder: Arc<dyn Embedder>,
        chat: Arc<dyn ChatModel>,
        settings: AnswerSettings,
    ) -> Oracle {
        Oracle {
            index_dir: index_dir.to_path_buf(),
            embedder,
            chat,
            settings,
            compendium: std::sync::Mutex::new(None),
            open_indexes: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Changes how many fragments are shown in full.
    pub fn set_k(&mut self, k: usize) {
        self.settings.k = k;
    }

    /// Changes how answers are made (`oraculo ask --extractive`).
    pub fn set_mode(&mut self, mode: AnswerMode) {
        self.settings.mode = mode;
    }

    /// The mode a question is answered in: a smoke-test model never writes free text.
    fn answer_mode(&self) -> AnswerMode {
        match self.settings.mode {
            AnswerMode::Free if self.chat.is_smoke_test() => AnswerMode::Structured,
            mode => mode,
        }
    }

    /// Fragments shown in full.
    pub fn k(&self) -> usize {
        self.settings.k
    }

    pub fn index_dir(&self) -> &Path {
        &self.index_dir
    }

    pub fn chat(&self) -> &Arc<dyn ChatModel> {
        &self.chat
    }

    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.embedder
    }

    /// The campaign's index, open: one kept from an earlier question, or opened now. It reads
    /// the index as it is now (a reingest that commits later is seen by the next read).
    pub async fn open_index(&self) -> Result<IndexLease<'_>, AskError> {
        let kept = self.open_indexes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let index = match kept {
            // Kept, but the index folder is gone (deleted by hand): open afresh, which says so.
            Some(index) if index.dir().join("index.sqlite").is_file() => index,
            _ => match Index::open_existing(&self.index_dir).await {
                Err(IndexError::NotBuilt { .. }) => return Err(AskError::NotBuilt),
                other => other?,
            },
        };
        Ok(IndexLease { index: Some(index), pool: &self.open_indexes })
    }

    /// Every source the audience may read, sessions first by number (the bot's label
    /// autocomplete).
    pub async fn sources(&self, audience: Audience) -> Result<Vec<SourceSummary>, AskError> {
        let index = self.open_index().await?;
        // The visibility filter is in the query: a label with nothing the audience may read is
        // not listed (a secret note's label may name the secret).
        Ok(index.store.sources_visible(audience.visibility_filter())?)
    }

    /// Up to `limit` compendium names that match what was typed (the bot's entity
    /// autocomplete).
    pub async fn entity_names_matching(&self, typed: &str, limit: usize) -> Result<Vec<String>, AskError> {
        let index = self.open_index().await?;
        let compendium = self.compendium(&index)?;
        Ok(compendium.names_matching(typed, limit))
    }

    /// The compendium matcher of `index`'s current generation: loaded and compiled once per
    /// committed ingest, then shared by every question until the next one.
    pub fn compendium(&self, index: &Index) -> Result<Arc<CompendiumIndex>, AskError> {
        let generation = index.store.meta(crate::index::store::META_GENERATION)?.unwrap_or_default();
        let mut cached = self.compendium.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((built_from, compendium)) = cached.as_ref()
            && *built_from == generation
        {
            return Ok(Arc::clone(compendium));
        }
        let started = Instant::now();
        let compendium = Arc::new(CompendiumIndex::load(&index.store)?);
        tracing::debug!(%generation, ms = started.elapsed().as_secs_f64() * 1000.0, "compendium matcher built");
        *cached = Some((generation, Arc::clone(&compendium)));
        Ok(compendium)
    }

    /// The search alone (three paths + fusion, the time path), with the oracle's open index
    /// and compendium: what `search` shows and what a warm bot does before the rerank.
    pub async fn search(&self, request: &AskRequest<'_>) -> Result<SearchResult, AskError> {
        let question = check_question(request.question)?;
        let index = self.open_index().await?;
        let compendium = self.compendium(&index)?;
        let search_request = self.search_request(question, request, PathSet::ALL);
        Ok(crate::retrieve::search(&index, &compendium, self.embedder.as_ref(), &search_request).await?)
    }

    /// The search for a checked `question`, with the request's history and audience, `k` as
    /// set, over `paths`.
    fn search_request<'a>(&self, question: &'a str, request: &AskRequest<'a>, paths: PathSet) -> SearchRequest<'a> {
        SearchRequest { question, history: request.history, audience: request.audience, k: self.settings.k, paths }
    }

    /// Answers one question; `on_token` receives the answer as it streams.
    pub async fn ask(&self, request: &AskRequest<'_>, on_token: Option<TokenSink<'_>>) -> Result<Answer, AskError> {
        self.ask_in_stages(request, &|_| {}, on_token).await
    }

    /// [`Oracle::ask`], telling `on_stage` where the answer is before any text exists (on a
    /// CPU the model reads for a minute before it writes a word: the reader sees why).
    pub async fn ask_in_stages(
        &self,
        request: &AskRequest<'_>,
        on_stage: &(dyn Fn(Stage) + Send + Sync),
        on_token: Option<TokenSink<'_>>,
    ) -> Result<Answer, AskError> {
        let span = tracing::info_span!("answer", audience = ?request.audience);
        async move {
            let question = check_question(request.question)?;
            on_stage(Stage::Searching);
            let index = self.open_index().await?;
            let compendium = self.compendium(&index)?;
            let prepared = self.prepare_checked(&index, &compendium, question, request, Pipeline::default()).await?;
            on_stage(Stage::Writing { notes: prepared.context.shown_labels.len() });
            self.generate(&prepared, on_token).await
        }
        .instrument(span)
        .await
    }

    /// Everything before the model writes: the pool, the rerank's choice and the context.
    /// `ask` runs it with [`Pipeline::default`]; the evaluation varies the pipeline and scores
    /// what was prepared without generating.
    pub async fn prepare(
        &self,
        index: &Index,
        compendium: &CompendiumIndex,
        request: &AskRequest<'_>,
        pipeline: Pipeline,
    ) -> Result<Prepared, AskError> {
        let question = check_question(request.question)?;
        self.prepare_checked(index, compendium, question, request, pipeline).await
    }

    /// [`Oracle::prepare`] for a question already checked.
    async fn prepare_checked(
        &self,
        index: &Index,
        compendium: &CompendiumIndex,
        question: &str,
        request: &AskRequest<'_>,
        pipeline: Pipeline,
    ) -> Result<Prepared, AskError> {
        let started = Instant::now();
        let search_request = self.search_request(question, request, pipeline.paths);
        let search = crate::retrieve::search(index, compendium, self.embedder.as_ref(), &search_request).await?;
        self.prepare_from_pool(index, compendium, question, request, search, pipeline.rerank, started).await
    }

    /// What [`Oracle::prepare`] does after the search, from a pool already searched: the
    /// evaluation compares rerank on and off over one search instead of searching twice.
    pub async fn prepare_from_search(
        &self,
        index: &Index,
        compendium: &CompendiumIndex,
        request: &AskRequest<'_>,
        search: SearchResult,
        rerank: bool,
    ) -> Result<Prepared, AskError> {
        let question = check_question(request.question)?;
        self.prepare_from_pool(index, compendium, question, request, search, rerank, Instant::now()).await
    }

    /// Rerank (or the fusion order), then the context. `started`: when the caller's clock for
    /// this question started.
    #[allow(clippy::too_many_arguments)]
    async fn prepare_from_pool(
        &self,
        index: &Index,
        compendium: &CompendiumIndex,
        question: &str,
        request: &AskRequest<'_>,
        search: SearchResult,
        rerank: bool,
        started: Instant,
    ) -> Result<Prepared, AskError> {
        // Rerank over the cached annotations of the pool.
        let hashes: Vec<&str> = search.candidates.iter().map(|c| c.content_hash.as_str()).collect();
        let by_hash = index.store.annotations(&hashes, self.chat.id(), ANNOTATE_PROMPT_VERSION)?;
        let annotations: HashMap<i64, String> = search
            .candidates
            .iter()
            .filter_map(|c| by_hash.get(&c.content_hash).map(|text| (c.fragment_id, text.clone())))
            .collect();
        let rerank_started = Instant::now();
        let (mut chosen, rerank) = if rerank {
            rerank_by_annotation(
                &search.search_query,
                &search.candidates,
                &annotations,
                self.chat.as_ref(),
                self.settings.k,
                self.settings.rerank_timeout,
            )
            .await
        } else {
            let fusion_order = search.candidates.iter().take(self.settings.k).cloned().collect();
            (fusion_order, RerankDecision::Skipped(RerankSkip::Disabled))
        };
        let rerank_ms = rerank_started.elapsed().as_secs_f64() * 1000.0;
        // The sessions the question names are its subject: shown whatever the rerank chose.
        crate::retrieve::time::keep_named_sessions(
            &mut chosen,
            &search.candidates,
            &search.time.named_sessions,
            self.settings.k,
            |candidate: &Candidate| (candidate.fragment_id, candidate.session),
        );
        // The size of what the rerank read (or would have read), for the cost report.
        let rerank_prompt_tokens = (annotations.len() == search.candidates.len()).then(|| {
            let listed: Vec<(i64, &str)> =
                search.candidates.iter().map(|c| (c.fragment_id, annotations[&c.fragment_id].as_str())).collect();
            crate::prompt::rerank_messages(&search.search_query, &listed, self.settings.k)
                .iter()
                .map(|message| self.chat.count_tokens(&message.content))
                .sum::<usize>()
        });

        // The context: chosen in full (or as their passages, when a CPU has no time for the
        // whole), the rest of the pool as one-line summaries.
        // Fetched only while each still holds the text that was searched and the audience may
        // see it (a reingest since the search may have changed what an id or label holds);
        // a chosen fragment that fails the check is not shown at all.
        let wanted: Vec<(i64, &str)> = chosen.iter().map(|c| (c.fragment_id, c.content_hash.as_str())).collect();
        let texts: HashMap<i64, StoredFragment> = index
            .store
            .fragments_checked(&wanted, request.audience.visibility_filter())?
            .into_iter()
            .map(|stored| (stored.id, stored))
            .collect();
        chosen.retain(|candidate| texts.contains_key(&candidate.fragment_id));
        let entity_names: Vec<&str> =
            search.entities.iter().flat_map(|entity| [entity.name.as_str(), entity.alias.as_str()]).collect();
        let terms = QueryTerms::new(question, &entity_names);
        let to_context = |candidate: &Candidate, with_text: bool| ContextFragment {
            fragment_id: candidate.fragment_id,
            label: candidate.label.clone(),
            session: candidate.session,
            part: candidate.part,
            text: if with_text {
                texts.get(&candidate.fragment_id).map(|s| s.fragment.text.clone()).unwrap_or_default()
            } else {
                String::new()
            },
            annotation: annotations.get(&candidate.fragment_id).cloned(),
            dense_match: candidate
                .dense_window
                .map(|window| crate::corpus::text::window_word_range(window, self.embedder.window_words())),
        };
        let chosen_context: Vec<ContextFragment> = chosen.iter().map(|c| to_context(c, true)).collect();
        let leftovers: Vec<ContextFragment> = search
            .candidates
            .iter()
            .filter(|c| !chosen.iter().any(|chosen| chosen.fragment_id == c.fragment_id))
            .map(|c| to_context(c, false))
            .collect();
        // A conversation's turns are the user's and the oracle's; a system turn in a history
        // (a hand-written `--history` file) is not the conversation's and never reaches the model.
        let history: Vec<ChatMessage> =
            request.history.iter().filter(|turn| turn.role != TurnRole::System).cloned().collect();
        let window = self.chat.window().await;
        let mut plan = self.plan_context(question, &history, window).await;
        let context = self.build_planned_context(&mut plan, &chosen_context, &leftovers, &terms);
        let names = NameBook::new(compendium.compendium.entities.iter().map(|entity| {
            std::iter::once(entity.name.as_str()).chain(entity.aliases.iter().map(String::as_str)).collect()
        }));
        Ok(Prepared {
            question: question.to_string(),
            started,
            search,
            chosen,
            rerank,
            rerank_ms,
            rerank_prompt_tokens,
            context,
            plan,
            texts,
            history,
            terms,
            chosen_context,
            leftovers,
            names,
        })
    }

    /// The context `plan` allows: the chosen fragments (as their passages under a time plan)
    /// and the leftovers' summaries.
    fn build_planned_context(
        &self,
        plan: &mut ContextPlan,
        chosen_context: &[ContextFragment],
        leftovers: &[ContextFragment],
        terms: &QueryTerms,
    ) -> Context {
        let count_tokens = |text: &str| self.chat.count_tokens(text);
        let mut chosen_context = chosen_context.to_vec();
        if plan.limited_by == "time" {
            plan.fragments_as_passages =
                narrow_to_passages(&mut chosen_context, terms, plan.material_tokens, &count_tokens);
        }
        build_context(
            &chosen_context,
            leftovers,
            ContextBudget { max_tokens: plan.material_tokens, count_tokens: &count_tokens },
        )
    }

    /// After the backend refused `prepared`'s prompt as too long: the window learnt again
    /// and a context planned for it, at most [`REPLAN_SHRINK`] of the material refused (less
    /// when the server counted more prompt tokens than estimated). `None` when nothing
    /// smaller can be planned.
    async fn replan(&self, prepared: &Prepared, refusal: &LlmError) -> Option<Prepared> {
        let window = self.chat.refresh_window(refusal).await;
        let mut plan = self.plan_context(&prepared.question, &prepared.history, window).await;
        let material_sent = self.chat.count_tokens(&prepared.context.text);
        let frame_tokens: usize = self
            .answer_frame(&prepared.question, &prepared.history)
            .iter()
            .map(|message| self.chat.count_tokens(&message.content))
            .sum();
        let mut material = plan.material_tokens.min((material_sent as f64 * REPLAN_SHRINK) as usize);
        // The server's own count of the refused prompt, when it gave one, above the estimate:
        // its tokeniser makes more tokens of this text than estimated, so plan that much less.
        if let LlmError::ContextExceeded { prompt_tokens: Some(counted), .. } = refusal {
            let estimated = frame_tokens + material_sent;
            if *counted > estimated && estimated > 0 {
                material = (material as f64 * estimated as f64 / *counted as f64) as usize;
            }
        }
        if material == 0 || prepared.context.text.is_empty() {
            return None;
        }
        plan.material_tokens = material;
        plan.window_retries = prepared.plan.window_retries + 1;
        let context =
            self.build_planned_context(&mut plan, &prepared.chosen_context, &prepared.leftovers, &prepared.terms);
        tracing::warn!(
            window_tokens = window.tokens,
            window_source = ?window.source,
            material_before = material_sent,
            material_after = material,
            "the prompt was refused as too long; context planned again"
        );
        Some(Prepared { context, plan, ..prepared.clone() })
    }

    /// The answer prompt without material: what every plan is made beside.
    fn answer_frame(&self, question: &str, history: &[ChatMessage]) -> Vec<ChatMessage> {
        let empty = build_context(&[], &[], ContextBudget { max_tokens: usize::MAX, count_tokens: &|_: &str| 0 });
        match self.answer_mode() {
            AnswerMode::Structured => structured_answer_messages(question, history, &empty),
            _ => answer_messages(question, history, &empty),
        }
    }

    /// How much material the answer prompt may carry: what the window leaves beside the
    /// prompt's frame and the answer budget, and, on a backend that reports its speed (the
    /// embedded one, on a CPU), what it reads in `answer_seconds` after the time the answer
    /// itself is expected to take.
    /// `window`: the backend's, as [`ChatModel::window`] learnt it.
    async fn plan_context(&self, question: &str, history: &[ChatMessage], window: ContextWindow) -> ContextPlan {
        let frame = self.answer_frame(question, history);
        let frame_tokens: usize = frame.iter().map(|message| self.chat.count_tokens(&message.content)).sum();
        let window_tokens =
            window.tokens.saturating_sub(frame_tokens + self.settings.max_tokens + TEMPLATE_MARGIN_TOKENS);
        let window_plan = ContextPlan {
            limited_by: "window",
            material_tokens: window_tokens,
            answer_seconds: None,
            prompt_tokens_per_s: None,
            fragments_as_passages: 0,
            window_tokens: window.tokens,
            window_source: window.source,
            window_retries: 0,
        };
        if self.answer_mode() == AnswerMode::Extractive {
            return window_plan;
        }
        let Some(speed) = self.chat.speed().await else { return window_plan };
        let writing_seconds =
            EXPECTED_ANSWER_TOKENS.min(self.settings.max_tokens) as f64 / speed.generated_tokens_per_s;
        // Reading gets what writing leaves, and never less than a quarter of the budget.
        let reading_seconds = (self.settings.answer_seconds - writing_seconds).max(self.settings.answer_seconds / 4.0);
        let readable = (reading_seconds * speed.prompt_tokens_per_s) as usize;
        // What the backend kept from an earlier prompt (the fixed system prompt) costs no time.
        let frame_to_read = frame_tokens.saturating_sub(self.chat.cached_prefix_tokens(&frame));
        // A slow or busy machine still gets some material: an answer over its time is better
        // than one with nothing to read.
        let time_tokens = readable.saturating_sub(frame_to_read).max(MIN_MATERIAL_TOKENS);
        if time_tokens >= window_tokens {
            return window_plan;
        }
        ContextPlan {
            limited_by: "time",
            material_tokens: time_tokens,
            answer_seconds: Some(self.settings.answer_seconds),
            prompt_tokens_per_s: Some(speed.prompt_tokens_per_s),
            fragments_as_passages: 0,
            window_tokens: window.tokens,
            window_source: window.source,
            window_retries: 0,
        }
    }

    /// The model writes the answer to what was prepared (structured, free, or, when no model
    /// can, the notes' own sentences); its citations are checked against the labels shown.
    /// A prompt the backend refuses as longer than its window is planned again once, for the
    /// window it reports, and tried again; a second refusal leaves the extractive answer.
    pub async fn generate(&self, prepared: &Prepared, on_token: Option<TokenSink<'_>>) -> Result<Answer, AskError> {
        let generation_started = Instant::now();
        let english = crate::lexicon::language_of(&prepared.question) == crate::corpus::LabelLanguage::En;
        let time_notice = prepared.search.time.notice(english);
        let generation = async {
            // Only sessions that are not there were asked about: say so, naming the last one.
            if prepared.search.time.answers_alone() {
                let notice = MadeAnswer {
                    text: time_notice.clone().unwrap_or_default(),
                    mode: AnswerMode::Extractive,
                    fallback: None,
                    attempts: 0,
                    prompt_tokens: None,
                    completion_tokens: None,
                    refusal: None,
                    ungrounded: Vec::new(),
                };
                return (notice, None);
            }
            let mut made = self.make_answer(prepared, on_token).await;
            let replanned = match made.refusal.take() {
                Some(refusal) => self.replan(prepared, &refusal).await,
                None => None,
            };
            if let Some(replanned) = &replanned {
                made = self.make_answer(replanned, on_token).await;
                made.attempts += 1;
            }
            (made, replanned)
        };
        // Every attempt, a re-planned one included, within one deadline; dropping the
        // generation cancels it (a server request is closed, llama.cpp stops at its next token).
        let deadline = self.settings.deadline;
        let (mut made, replanned) = match tokio::time::timeout(deadline, generation).await {
            Ok(done) => done,
            Err(_) => (
                self.extract(
                    prepared,
                    Some(format!(
                        "the model had not finished after {} s (chat.answer_deadline_secs)",
                        deadline.as_secs()
                    )),
                ),
                None,
            ),
        };
        let prepared = replanned.as_ref().unwrap_or(prepared);
        if let Some(notice) = time_notice.filter(|_| !prepared.search.time.answers_alone()) {
            made.text = format!("{notice}\n\n{}", made.text);
        }
        let generation_ms = generation_started.elapsed().as_secs_f64() * 1000.0;
        if let Some(reason) = &made.fallback {
            tracing::warn!(%reason, "the model could not answer; the answer is extractive");
        }
        let Prepared { question, started, search, rerank, rerank_prompt_tokens, context, texts, plan, chosen, .. } =
            prepared;
        // An extractive answer cites the chosen fragments it quotes, shown to the model or not.
        let citable: Vec<String> = match made.mode {
            AnswerMode::Extractive => chosen.iter().map(|c| c.label.clone()).collect(),
            _ => context.shown_labels.clone(),
        };
        let validated = validate_citations(&made.text, &citable);
        if !validated.invented.is_empty() {
            tracing::warn!(invented = ?validated.invented, "the answer cited labels it was not shown");
        }
        let citations = citation_sources(&validated, context, texts, &search.candidates);

        let timings = AnswerTimings {
            generation_ms,
            total_ms: started.elapsed().as_secs_f64() * 1000.0,
            ..AnswerTimings::before_generation(prepared)
        };
        Ok(Answer {
            question: question.clone(),
            text: validated.text.clone(),
            citations,
            invented_citations: validated.invented.clone(),
            fragments_shown: context
                .full
                .iter()
                .map(|f| ShownSource { fragment_id: f.fragment_id, label: f.label.clone(), session: f.session })
                .collect(),
            summaries_shown: context
                .summaries
                .iter()
                .map(|s| ShownSource { fragment_id: s.fragment_id, label: s.label.clone(), session: s.session })
                .collect(),
            dropped_for_budget: context.dropped_for_budget,
            rerank: rerank.clone(),
            rerank_prompt_tokens: *rerank_prompt_tokens,
            search_query: search.search_query.clone(),
            followup_expanded: search.followup_expanded,
            entities: search.entities.clone(),
            pool_size: search.candidates.len(),
            timings,
            chat_model: self.chat.id().to_string(),
            embedder: self.embedder.id().to_string(),
            prompt_tokens: made.prompt_tokens,
            completion_tokens: made.completion_tokens,
            mode: made.mode,
            fallback: made.fallback,
            attempts: made.attempts,
            context_plan: plan.clone(),
            missing_paths: search.missing_paths.clone(),
            ungrounded: made.ungrounded,
        })
    }

    /// One answer in the configured mode.
    async fn make_answer(&self, prepared: &Prepared, on_token: Option<TokenSink<'_>>) -> MadeAnswer {
        match self.answer_mode() {
            AnswerMode::Extractive => self.extract(prepared, None),
            AnswerMode::Free => self.generate_free(prepared, on_token).await,
            AnswerMode::Structured => self.generate_structured(prepared, on_token).await,
        }
    }

    /// Free text, citing by the prompt's rule; extractive when the model fails.
    async fn generate_free(&self, prepared: &Prepared, on_token: Option<TokenSink<'_>>) -> MadeAnswer {
        let request = ChatRequest {
            messages: answer_messages(&prepared.question, &prepared.history, &prepared.context),
            json_schema: None,
            max_tokens: self.settings.max_tokens,
            temperature: self.settings.temperature,
        };
        let span = tracing::info_span!("answer.generate", model = self.chat.id(), mode = "free");
        match self.chat.chat(&request, on_token).instrument(span).await {
            Ok(response) => MadeAnswer {
                text: response.text,
                mode: AnswerMode::Free,
                fallback: None,
                attempts: 1,
                prompt_tokens: response.prompt_tokens,
                completion_tokens: response.completion_tokens,
                refusal: None,
                ungrounded: Vec::new(),
            },
            Err(err) => self.extract(prepared, Some(format!("{err}"))).after_attempts(1).refused_by(err),
        }
    }

    /// Sentences in a JSON schema whose labels are exactly those shown, each sentence
    /// streamed as it completes; one retry told what was wrong, then extractive.
    async fn generate_structured(&self, prepared: &Prepared, on_token: Option<TokenSink<'_>>) -> MadeAnswer {
        let shown = &prepared.context.shown_labels;
        if shown.is_empty() {
            return self.extract(prepared, None);
        }
        let language = crate::lexicon::language_of(&prepared.question);
        let mut messages = structured_answer_messages(&prepared.question, &prepared.history, &prepared.context);
        let (mut prompt_tokens, mut completion_tokens) = (None::<usize>, None::<usize>);
        let add = |total: &mut Option<usize>, more: Option<usize>| {
            if let Some(more) = more {
                *total = Some(total.unwrap_or(0) + more);
            }
        };
        // What each sentence may rest on: the chosen fragments whole (the note, not only the
        // passages shown) and the summaries.
        let grounds = CitedNotes::new(
            prepared
                .texts
                .values()
                .map(|stored| (stored.fragment.label.as_str(), stored.fragment.text.as_str()))
                .chain(prepared.context.full.iter().map(|f| (f.label.as_str(), f.text.as_str())))
                .chain(prepared.context.summaries.iter().map(|s| (s.label.as_str(), s.summary.as_str()))),
            shown,
        )
        .for_question(&prepared.question);
        // By meaning: each sentence near a passage of the notes it cites (when the embedder
        // has a calibrated floor), judged once per sentence and sources.
        let support = self.support_passages(prepared).await;
        let support_verdicts: std::sync::Mutex<HashMap<String, Result<(), Ungrounded>>> = Default::default();
        // A sentence with the sources that back it (its own, or with the notes shown that hold
        // what they lack), or why none does.
        let grounded = |sentence: &Sentence| {
            grounds
                .attribute(&sentence.text, &sentence.sources, &prepared.names)
                .map(|sources| Sentence { text: sentence.text.clone(), sources })
        };
        let mut problem = String::new();
        for attempt in 1..=STRUCTURED_ATTEMPTS {
            let request = ChatRequest {
                messages: messages.clone(),
                json_schema: Some(answer_schema(shown)),
                max_tokens: self.settings.max_tokens,
                temperature: self.settings.temperature,
            };
            let stream = std::sync::Mutex::new(SentenceStream::new());
            // Complete sentences that their notes back by the letter go to a checker that
            // judges their meaning (an embedding, so async) while the model writes on; only
            // what passes is shown, as the final answer will hold it.
            let (to_checker, mut checked) = tokio::sync::mpsc::unbounded_channel::<Sentence>();
            let span = tracing::info_span!("answer.generate", model = self.chat.id(), mode = "structured", attempt);
            let generate = async move {
                let sentences_sink = |piece: &str| {
                    let complete = match stream.lock() {
                        Ok(mut stream) => stream.push(piece),
                        Err(_) => Vec::new(),
                    };
                    if on_token.is_some() {
                        for sentence in complete.iter().filter_map(|sentence| grounded(sentence).ok()) {
                            let _ = to_checker.send(sentence);
                        }
                    }
                };
                // `to_checker` is dropped with this block: the checker then ends.
                self.chat.chat(&request, Some(&sentences_sink)).instrument(span).await
            };
            let show = async {
                while let Some(sentence) = checked.recv().await {
                    let verdict =
                        self.supported(support.as_ref(), &support_verdicts, &sentence, &grounds, language).await;
                    if let (Ok(()), Some(sink)) = (verdict, on_token) {
                        sink(&format!("{} ", render_sentence(&sentence)));
                    }
                }
            };
            let (response, ()) = tokio::join!(generate, show);
            let response = match response {
                Ok(response) => response,
                Err(err) => {
                    let mut made =
                        self.extract(prepared, Some(format!("{err}"))).after_attempts(attempt).refused_by(err);
                    (made.prompt_tokens, made.completion_tokens) = (prompt_tokens, completion_tokens);
                    return made;
                }
            };
            add(&mut prompt_tokens, response.prompt_tokens);
            add(&mut completion_tokens, response.completion_tokens);
            match parse_structured(&response.text, shown) {
                Ok(answer) => {
                    let mut kept = Vec::new();
                    let mut ungrounded = Vec::new();
                    for sentence in answer.sentences {
                        let verdict = match grounded(&sentence) {
                            Ok(attributed) => self
                                .supported(support.as_ref(), &support_verdicts, &attributed, &grounds, language)
                                .await
                                .map(|()| attributed),
                            Err(reason) => Err(reason),
                        };
                        match verdict {
                            Ok(attributed) => {
                                if attributed.sources != sentence.sources {
                                    tracing::info!(sentence = %sentence.text, from = ?sentence.sources, to = ?attributed.sources, "a sentence is cited to the notes that back it");
                                }
                                kept.push(attributed);
                            }
                            Err(reason) => {
                                tracing::warn!(sentence = %sentence.text, %reason, "a sentence the notes do not back is dropped");
                                ungrounded.push(format!("{} ({reason})", render_sentence(&sentence)));
                            }
                        }
                    }
                    // Nothing left that the notes back: the notes do not hold the answer.
                    let answer = StructuredAnswer { in_notes: answer.in_notes && !kept.is_empty(), sentences: kept };
                    return MadeAnswer {
                        ungrounded,
                        text: render_structured(&answer, language),
                        mode: AnswerMode::Structured,
                        fallback: None,
                        attempts: attempt,
                        prompt_tokens,
                        completion_tokens,
                        refusal: None,
                    };
                }
                Err(err) => {
                    tracing::warn!(attempt, reason = %err, "the structured answer cannot be used");
                    problem = err.to_string();
                    messages.push(ChatMessage::assistant(response.text));
                    messages.push(structured_retry_message(&problem));
                }
            }
        }
        let mut made = self
            .extract(prepared, Some(format!("the model's structured answer could not be used ({problem})")))
            .after_attempts(STRUCTURED_ATTEMPTS);
        (made.prompt_tokens, made.completion_tokens) = (prompt_tokens, completion_tokens);
        made
    }

    /// The shown notes cut into support passages and embedded, with the embedder's floors;
    /// `None` when the embedder has no calibrated floor, or the embedding failed (logged: the
    /// answer then goes out with the checks by the letter only).
    async fn support_passages(&self, prepared: &Prepared) -> Option<(SupportPassages, SupportFloor)> {
        let floor = self.embedder.support_floor()?;
        let started = Instant::now();
        let shown = prepared.context.full.iter().map(|f| (f.label.as_str(), f.text.as_str()));
        let summaries = prepared.context.summaries.iter().map(|s| (s.label.as_str(), s.summary.as_str()));
        // Each passage's label, and its text.
        let (labels, windows): (Vec<String>, Vec<String>) = shown
            .chain(summaries)
            .flat_map(|(label, text)| support_windows(text).into_iter().map(move |window| (label.to_string(), window)))
            .unzip();
        let span = tracing::info_span!("answer.support", n_passages = windows.len());
        match self.embedder.embed(&windows, EmbedRole::Query).instrument(span).await {
            Ok(vectors) if vectors.len() == windows.len() => {
                tracing::debug!(
                    n_passages = windows.len(),
                    ms = started.elapsed().as_secs_f64() * 1000.0,
                    "support passages embedded"
                );
                Some((SupportPassages::new(&labels, vectors), floor))
            }
            Ok(vectors) => {
                tracing::warn!(
                    expected = windows.len(),
                    got = vectors.len(),
                    "support check off: the embedder returned the wrong number of vectors"
                );
                None
            }
            Err(err) => {
                tracing::warn!(%err, "support check off: the shown notes could not be embedded");
                None
            }
        }
    }

    /// Whether a passage of the notes `sentence` cites says what it says ([`SupportPassages`]);
    /// judged once per sentence text and sources (`verdicts`), while streaming and at the end.
    /// `language`: the answer's, which is the question's (a short sentence's own words are too
    /// few to tell: «Tomás fell on the bridge» has a Spanish accent and a Spanish «a»);
    /// `grounds` tells whether the notes cited are in it, which picks the floor.
    async fn supported(
        &self,
        support: Option<&(SupportPassages, SupportFloor)>,
        verdicts: &std::sync::Mutex<HashMap<String, Result<(), Ungrounded>>>,
        sentence: &Sentence,
        grounds: &CitedNotes,
        language: LabelLanguage,
    ) -> Result<(), Ungrounded> {
        let Some((passages, floor)) = support else { return Ok(()) };
        let key = format!("{}\u{1f}{}", sentence.text, sentence.sources.join("\u{1f}"));
        if let Some(verdict) = verdicts.lock().ok().and_then(|verdicts| verdicts.get(&key).cloned()) {
            return verdict;
        }
        let verdict = match self.embedder.embed(std::slice::from_ref(&sentence.text), EmbedRole::Query).await {
            Ok(mut vectors) if vectors.len() == 1 => {
                let vector = vectors.remove(0);
                let nearest = passages.nearest(&vector, &sentence.sources);
                tracing::debug!(sentence = %sentence.text, sources = ?sentence.sources, ?nearest, "support judged");
                let same_language = grounds.all_in_language(&sentence.sources, language);
                passages.verdict(&vector, same_language, &sentence.sources, floor.same_language, floor.other_language)
            }
            Ok(_) | Err(_) => {
                tracing::warn!(sentence = %sentence.text, "support not judged: the sentence could not be embedded");
                Ok(())
            }
        };
        if let Ok(mut verdicts) = verdicts.lock() {
            verdicts.insert(key, verdict.clone());
        }
        verdict
    }

    /// The extractive answer: 2 to 5 sentences of the chosen fragments, each with its label.
    /// `fallback`: why the model's answer is not used, when it was asked.
    fn extract(&self, prepared: &Prepared, fallback: Option<String>) -> MadeAnswer {
        let _span = tracing::info_span!("answer.extract", n_chosen = prepared.chosen.len()).entered();
        // A question that names sessions («¿qué pasó en la sesión 27?») is answered from those
        // sessions when they were chosen: their words, not other notes that say «sesión».
        let named = &prepared.search.time.named_sessions;
        let names_chosen = prepared.chosen.iter().any(|c| c.session.is_some_and(|session| named.contains(&session)));
        let fragments: Vec<(&str, &str)> = prepared
            .chosen
            .iter()
            .filter(|candidate| !names_chosen || candidate.session.is_some_and(|session| named.contains(&session)))
            .filter_map(|candidate| {
                let stored = prepared.texts.get(&candidate.fragment_id)?;
                Some((candidate.label.as_str(), stored.fragment.text.as_str()))
            })
            .collect();
        let excerpts = extract_excerpts(&fragments, &prepared.terms);
        let language = crate::lexicon::language_of(&prepared.question);
        MadeAnswer {
            text: render_extractive(&excerpts, language, fallback.is_some()),
            mode: AnswerMode::Extractive,
            fallback,
            attempts: 0,
            prompt_tokens: None,
            completion_tokens: None,
            refusal: None,
            ungrounded: Vec::new(),
        }
    }

    /// Every fragment of `label` the audience may read, in part order (for "show me the source").
    pub async fn read_source(&self, label: &str, audience: Audience) -> Result<Vec<StoredFragment>, AskError> {
        let index = self.open_index().await?;
        Ok(index.store.fragments_of_label(label, audience.visibility_filter())?)
    }
}

/// What one of the answer modes produced, before the citation check.
struct MadeAnswer {
    text: String,
    mode: AnswerMode,
    fallback: Option<String>,
    attempts: usize,
    prompt_tokens: Option<usize>,
    completion_tokens: Option<usize>,
    /// The backend refused the prompt as longer than its window: a smaller one may pass.
    refusal: Option<LlmError>,
    /// Sentences dropped because the notes they cite do not back them, each with why.
    ungrounded: Vec<String>,
}

impl MadeAnswer {
    fn after_attempts(mut self, attempts: usize) -> MadeAnswer {
        self.attempts = attempts;
        self
    }

    /// Keeps `err` when it is a refusal for length, for [`Oracle::generate`] to plan again.
    fn refused_by(mut self, err: LlmError) -> MadeAnswer {
        if err.is_context_exceeded() {
            self.refusal = Some(err);
        }
        self
    }
}

/// The question, trimmed, when it can be asked at all: the one rule, which the bot also applies
/// before queueing. Each public entry of the oracle checks once; what it calls takes the
/// checked question.
pub fn check_question(question: &str) -> Result<&str, AskError> {
    let question = question.trim();
    if question.is_empty() {
        return Err(AskError::EmptyQuestion);
    }
    let chars = question.chars().count();
    if chars > MAX_QUESTION_CHARS {
        return Err(AskError::QuestionTooLong { chars, max: MAX_QUESTION_CHARS });
    }
    Ok(question)
}

/// Valid citations with their source and excerpt; invented ones flagged, with nothing else.
/// A label is looked up in what the model was shown (full, then summaries), then among the
/// chosen fragments (an extractive answer quotes them directly).
fn citation_sources(
    validated: &ValidatedAnswer,
    context: &Context,
    texts: &HashMap<i64, StoredFragment>,
    pool: &[Candidate],
) -> Vec<CitationSource> {
    validated
        .citations
        .iter()
        .map(|citation| {
            let mut source = CitationSource {
                label: citation.label.clone(),
                valid: citation.valid,
                source_path: None,
                session: None,
                kind: None,
                fragment_id: None,
                excerpt: None,
                count: citation.count,
            };
            if !citation.valid {
                return source;
            }
            if let Some(full) = context.full.iter().find(|f| f.label == citation.label) {
                source.fragment_id = Some(full.fragment_id);
                source.session = full.session;
                source.excerpt = Some(excerpt(&full.text));
                if let Some(stored) = texts.get(&full.fragment_id) {
                    source.source_path = Some(stored.fragment.source_path.clone());
                    source.kind = Some(stored.fragment.kind);
                }
            } else if let Some(summary) = context.summaries.iter().find(|s| s.label == citation.label) {
                source.fragment_id = Some(summary.fragment_id);
                source.session = summary.session;
                source.excerpt = Some(summary.summary.clone());
                if let Some(candidate) = pool.iter().find(|c| c.fragment_id == summary.fragment_id) {
                    source.source_path = Some(candidate.source_path.clone());
                    source.kind = Some(candidate.kind);
                }
            } else if let Some(stored) = pool
                .iter()
                .filter(|c| c.label == citation.label)
                .find_map(|candidate| texts.get(&candidate.fragment_id))
            {
                source.fragment_id = Some(stored.id);
                source.session = stored.fragment.session;
                source.excerpt = Some(excerpt(&stored.fragment.text));
                source.source_path = Some(stored.fragment.source_path.clone());
                source.kind = Some(stored.fragment.kind);
            }
            source
        })
        .collect()
}

/// The first `EXCERPT_CHARS` characters of a fragment, cut at a word, on one line.
/// Headings and the gap marks of a fragment shown as passages are left out: the excerpt is
/// the text itself.
fn excerpt(text: &str) -> String {
    let body: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && *line != GAP_MARK && !line.starts_with('#'))
        .collect();
    shorten(&body.join(" ").split_whitespace().collect::<Vec<_>>().join(" "), EXCERPT_CHARS)
}
