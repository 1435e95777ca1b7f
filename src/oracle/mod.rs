//! The oracle: one question in, one cited answer out. [`Oracle::answer`] is the one entry the
//! CLI, the bot, the evaluation and the MCP server call (`ask.rs`): events while the answer is
//! made, the settled answer at the end.
//!
//! search (three paths + fusion) → annotations → rerank → context (8 full fragments + one-line
//! summaries) → prompt → chat model → citation check → what stays. Each step is its own
//! module; this one only strings them together and keeps the timings.

mod answer;
mod ask;
mod found;
mod generate;
mod instant;
mod plan;
mod quoted;
mod story;

use crate::corpus::FragmentId;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::answer::grounding::NameBook;
use crate::answer::passages::QueryTerms;
use crate::answer::{AnswerMode, AnswerStyle, Context, ContextFragment};
use crate::index::store::SourceSummary;
use crate::index::{Index, IndexError, StoredFragment};
use crate::llm::chat::{ChatMessage, ChatModel};
use crate::llm::{Embedder, LlmError};
use crate::prompt::ANNOTATE_PROMPT_VERSION;
use crate::retrieve::choose::{RerankPlan, Shown, choose_shown};
use crate::retrieve::rerank::{RERANK_MEASURE_TIMEOUT, RERANK_SHARE, RerankDecision, RerankReads, RerankSkip};
use crate::retrieve::windows::{WindowSource, rank_windows, window_evidence};
use crate::retrieve::{
    Audience, Candidate, CompendiumIndex, DEFAULT_K, PathSet, RetrieveError, SearchRequest, SearchResult, Turn,
    TurnRole,
};
use plan::ChosenMaterial;

pub use answer::{Answer, AnswerTimings, CitationSource, EXCERPT_CHARS, ShownSource};
pub use ask::{AnswerEvent, AnswerEvents, ModelTurn, no_events};
pub use found::{FoundPassage, GLIMPSE_WORDS, PASSAGE_WORDS};
pub use instant::{InstantKept, Settled, question_language};
pub use plan::{ContextPlan, DEADLINE_SLACK, FrameCost, PlanInputs, plan_answer};
pub use story::ArcStory;

/// A question longer than this is refused: it is a paste, not a question, and it would
/// crowd the notes out of the context window.
pub const MAX_QUESTION_CHARS: usize = 1000;
/// Opened indexes an oracle keeps between questions (the bot answers at memory speed,
/// not re-opening SQLite and LanceDB per question): one per question answered at once, which
/// the bot's `concurrency` bounds; more are opened on demand and closed when returned.
const OPEN_INDEXES_KEPT: usize = 4;

/// How answers are made. Passed explicitly; built from config.
#[derive(Debug, Clone)]
pub struct AnswerSettings {
    /// Fragments shown in full (the rerank's output size).
    pub k: usize,
    /// The rerank gives up after this and keeps the fusion order.
    pub rerank_timeout: Duration,
    /// Which annotations the rerank reads.
    pub rerank_reads: RerankReads,
    /// Whether the rerank is skipped when, at the backend's measured speed, reading would
    /// take more than [`RERANK_SHARE`] of `answer_seconds` (off only to measure it).
    pub rerank_within_time: bool,
    /// The answer budget, in tokens.
    pub max_tokens: usize,
    pub temperature: f32,
    /// How the model is asked to answer; `Extractive` asks no model.
    pub mode: AnswerMode,
    /// How long an answer may take on a backend that reports its speed (the embedded one).
    pub answer_seconds: f64,
    /// The total time one answer's generation may take, every attempt included; past it the
    /// answer is extractive (one endless stream cannot hold the queue).
    pub deadline: Duration,
    /// Whether the notes' own sentences are shown before the model's answer.
    pub instant: bool,
    /// The notes' own sentences as the answer, at once, or the model's prose after them.
    pub style: AnswerStyle,
}

impl AnswerSettings {
    /// Free text, as a server's model writes it; see [`AnswerSettings::from_config`].
    pub fn new(max_tokens: usize) -> AnswerSettings {
        AnswerSettings {
            k: DEFAULT_K,
            rerank_timeout: Duration::from_secs(60),
            rerank_reads: RerankReads::default(),
            rerank_within_time: true,
            max_tokens,
            temperature: 0.2,
            mode: AnswerMode::Free,
            answer_seconds: crate::config::DEFAULT_ANSWER_SECONDS,
            deadline: Duration::from_secs(crate::config::DEFAULT_ANSWER_DEADLINE_SECS),
            instant: true,
            style: AnswerStyle::Prose,
        }
    }

    /// What `[chat]` asks for.
    pub fn from_config(max_tokens: usize, answer: &crate::config::AnswerConfig) -> AnswerSettings {
        AnswerSettings {
            mode: answer.mode,
            answer_seconds: answer.seconds,
            deadline: answer.deadline,
            instant: answer.instant,
            style: answer.style,
            ..AnswerSettings::new(max_tokens)
        }
    }
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
    texts: HashMap<FragmentId, StoredFragment>,
    history: Vec<ChatMessage>,
    /// What the question is about, for passages and excerpts.
    terms: QueryTerms,
    /// The quotable sentences' similarity to the question, by text, where they were embedded
    /// ([`Oracle::weigh_quotes`]); the quotes are ranked without meaning where empty.
    quote_similarity: HashMap<String, f32>,
    /// What the context was built from, kept to build it again smaller after a refusal.
    chosen_context: Vec<ContextFragment>,
    /// The windows of the chosen fragments, best first: what a time plan shows of them.
    windows: Vec<(FragmentId, std::ops::Range<usize>)>,
    /// An arc question's story, which the plan takes its first block's lines from.
    story: Option<ArcStory>,
    leftovers: Vec<ContextFragment>,
    /// The campaign's names by entity, for the grounding check.
    names: NameBook,
}

/// What [`Oracle::prepare`] chose to show in full, and what the choice read.
struct Choice {
    chosen: Vec<Candidate>,
    rerank: RerankDecision,
    rerank_ms: f64,
    rerank_prompt_tokens: Option<usize>,
    /// The pool's model annotations, by fragment id.
    annotations: HashMap<FragmentId, String>,
    /// The pool's extractive annotations (made at ingest), by content hash.
    extractive: HashMap<String, String>,
}

/// A question checked and on its way through one index: what its preparation reads, in one
/// place instead of in every step's parameters.
#[derive(Clone, Copy)]
struct InFlight<'q> {
    index: &'q Index,
    compendium: &'q CompendiumIndex,
    /// The question, checked ([`check_question`]).
    question: &'q str,
    request: &'q AskRequest<'q>,
    /// When the asker's clock started.
    started: Instant,
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
    /// The compendium matcher of the index generation it was built from (built once
    /// per ingest, not once per question); rebuilt when an ingest commits a new generation.
    /// Per audience (players first, the GM second): the generation it was built from.
    compendium: std::sync::Mutex<[Option<(String, Arc<CompendiumIndex>)>; 2]>,
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
            // An answer embeds its question's story and quotable sentences, and the next
            // question about the same entity embeds them again: remembered, not remade.
            embedder: Arc::new(crate::llm::embed::remembered::Remembered::new(embedder)),
            chat,
            settings,
            compendium: std::sync::Mutex::new([None, None]),
            open_indexes: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Changes how many fragments are shown in full.
    pub fn set_k(&mut self, k: usize) {
        self.settings.k = k;
    }

    /// Answers as a machine of `speed` would (`--pace`): the chat model made to run no faster
    /// and to report that speed to the planner ([`crate::llm::chat::PacedChat`]).
    pub fn set_pace(&mut self, speed: crate::llm::chat::ModelSpeed) {
        self.chat = Arc::new(crate::llm::chat::PacedChat::new(Arc::clone(&self.chat), speed));
    }

    /// Changes what the rerank reads and whether it keeps to its share of the answer's time
    /// (`oraculo eval --rerank-reads`, `--rerank-without-time-limit`).
    /// Without the time limit the rerank may also run past its usual timeout, up to
    /// [`RERANK_MEASURE_TIMEOUT`], so that what it costs on a slow CPU is measured, not cut.
    pub fn set_rerank(&mut self, reads: RerankReads, within_time: bool) {
        self.settings.rerank_reads = reads;
        self.settings.rerank_within_time = within_time;
        if !within_time {
            self.settings.rerank_timeout = self.settings.rerank_timeout.max(RERANK_MEASURE_TIMEOUT);
        }
    }

    /// Why the rerank, reading `prompt_tokens` at the backend's measured speed, would take
    /// more than its share of the answer's time; `None` when it fits or no speed is known.
    async fn rerank_exceeds_its_time(&self, prompt_tokens: usize) -> Option<RerankSkip> {
        let speed = self.chat.speed().await.filter(crate::llm::chat::ModelSpeed::is_plausible)?;
        let needed_seconds = prompt_tokens as f64 / speed.prompt_tokens_per_s;
        let allowed_seconds = self.settings.answer_seconds * RERANK_SHARE;
        (needed_seconds > allowed_seconds).then_some(RerankSkip::NoTime { needed_seconds, allowed_seconds })
    }

    /// Changes how answers are made (`oraculo ask --extractive`, `oraculo eval
    /// --answer-mode`): a mode that asks the model is asking for its prose.
    pub fn set_mode(&mut self, mode: AnswerMode) {
        self.settings.mode = mode;
        if mode != AnswerMode::Extractive {
            self.settings.style = AnswerStyle::Prose;
        }
    }

    /// The mode a question is answered in: a smoke-test model never writes free text, and
    /// with `chat.answer_style = "quotes"` no model writes at all.
    fn answer_mode(&self) -> AnswerMode {
        if self.settings.style == AnswerStyle::Quotes {
            return AnswerMode::Extractive;
        }
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
    /// autocomplete), as `audience` may read them.
    pub async fn entity_names_matching(
        &self,
        typed: &str,
        limit: usize,
        audience: Audience,
    ) -> Result<Vec<String>, AskError> {
        let index = self.open_index().await?;
        let compendium = self.compendium(&index, audience)?;
        Ok(compendium.names_matching(typed, limit))
    }

    /// The compendium matcher of `index`'s current generation as `audience` may read it
    /// (players: no GM-only entity or alias): loaded and compiled once per committed ingest and
    /// audience, then shared by every question until the next one.
    pub fn compendium(&self, index: &Index, audience: Audience) -> Result<Arc<CompendiumIndex>, AskError> {
        let generation = index.store.meta(crate::index::store::META_GENERATION)?.unwrap_or_default();
        let slot = match audience {
            Audience::Player => 0,
            Audience::Gm => 1,
        };
        let mut cached = self.compendium.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((built_from, compendium)) = cached[slot].as_ref()
            && *built_from == generation
        {
            return Ok(Arc::clone(compendium));
        }
        let started = Instant::now();
        let compendium = Arc::new(CompendiumIndex::load(&index.store, audience)?);
        tracing::debug!(%generation, ?audience, ms = started.elapsed().as_secs_f64() * 1000.0, "compendium matcher built");
        cached[slot] = Some((generation, Arc::clone(&compendium)));
        Ok(compendium)
    }

    /// The search alone (three paths + fusion, the time path), with the oracle's open index
    /// and compendium: what `search` shows and what a warm bot does before the rerank.
    pub async fn search(&self, request: &AskRequest<'_>) -> Result<SearchResult, AskError> {
        let question = check_question(request.question)?;
        let index = self.open_index().await?;
        let compendium = self.compendium(&index, request.audience)?;
        let search_request = self.search_request(question, request, PathSet::ALL);
        Ok(crate::retrieve::search(&index, &compendium, self.embedder.as_ref(), &search_request).await?)
    }

    /// The search for a checked `question`, with the request's history and audience, `k` as
    /// set, over `paths`.
    fn search_request<'a>(&self, question: &'a str, request: &AskRequest<'a>, paths: PathSet) -> SearchRequest<'a> {
        SearchRequest { question, history: request.history, audience: request.audience, k: self.settings.k, paths }
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
        let asked = InFlight { index, compendium, question, request, started: Instant::now() };
        let search_request = self.search_request(question, request, pipeline.paths);
        let search = crate::retrieve::search(index, compendium, self.embedder.as_ref(), &search_request).await?;
        self.prepare_from_pool(&asked, search, pipeline.rerank).await
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
        let asked = InFlight { index, compendium, question, request, started: Instant::now() };
        self.prepare_from_pool(&asked, search, rerank).await
    }

    /// Rerank (or the fusion order), then the context.
    async fn prepare_from_pool(
        &self,
        asked: &InFlight<'_>,
        search: SearchResult,
        rerank: bool,
    ) -> Result<Prepared, AskError> {
        let choice = self.choose(asked.index, &search, rerank).await?;
        self.prepare_from_choice(asked, search, choice).await
    }

    /// The context for the fragments `choice` holds, from `search`'s pool.
    async fn prepare_from_choice(
        &self,
        asked: &InFlight<'_>,
        search: SearchResult,
        choice: Choice,
    ) -> Result<Prepared, AskError> {
        let InFlight { index, compendium, question, request, started } = *asked;
        let Choice { mut chosen, rerank, rerank_ms, rerank_prompt_tokens, annotations, extractive } = choice;

        // The context: chosen in full (or as their passages, when a CPU has no time for the
        // whole), the rest of the pool as one-line summaries.
        // Fetched only while each still holds the text that was searched and the audience may
        // see it (a reingest since the search may have changed what an id or label holds);
        // a chosen fragment that fails the check is not shown at all.
        let texts = checked_texts(index, &chosen, request.audience)?;
        chosen.retain(|candidate| texts.contains_key(&candidate.fragment_id));
        let entity_names: Vec<&str> =
            search.entities.iter().flat_map(|entity| [entity.name.as_str(), entity.alias.as_str()]).collect();
        let terms = QueryTerms::new(question, &entity_names);
        // A leftover's headline: its model annotation, else the extractive one made at ingest
        // (its most central sentences), so a CPU with no annotations still shows summaries.
        let headline = |candidate: &Candidate| {
            annotations.get(&candidate.fragment_id).or_else(|| extractive.get(&candidate.content_hash)).cloned()
        };
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
            annotation: headline(candidate),
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
        let story = self.arc_story(index, compendium, question, &search, request.audience).await?;
        let windows = self.ranked_windows(index, &search, &chosen, &texts)?;
        let window = self.chat.window().await;
        let mut plan = self.plan_context(question, &history, window).await;
        let chosen_material = ChosenMaterial { fragments: &chosen_context, windows: &windows, leftovers: &leftovers };
        let context = self.build_planned_context(&mut plan, story.as_ref(), chosen_material, &terms);
        let names = name_book(compendium);
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
            quote_similarity: HashMap::new(),
            chosen_context,
            windows,
            story,
            leftovers,
            names,
        })
    }

    /// The windows of the `chosen` fragments, best first, for a time plan's material
    /// ([`crate::retrieve::windows`]): the dense path's window hits and BM25 over the windows
    /// of these fragments, with each fragment's place among the chosen. None where the notes'
    /// own sentences are the answer: no model reads material, and no plan is limited by time.
    fn ranked_windows(
        &self,
        index: &Index,
        search: &SearchResult,
        chosen: &[Candidate],
        texts: &HashMap<FragmentId, StoredFragment>,
    ) -> Result<Vec<(FragmentId, std::ops::Range<usize>)>, AskError> {
        if self.answer_mode() == AnswerMode::Extractive {
            return Ok(Vec::new());
        }
        let named = &search.time.named_sessions;
        let sources: Vec<WindowSource> = chosen
            .iter()
            .filter_map(|candidate| {
                let stored = texts.get(&candidate.fragment_id)?;
                Some(WindowSource {
                    fragment_id: candidate.fragment_id,
                    n_words: stored.fragment.text.split_whitespace().count(),
                    named: candidate.session.is_some_and(|session| named.contains(&session)),
                })
            })
            .collect();
        let ids: Vec<FragmentId> = sources.iter().map(|source| source.fragment_id).collect();
        let evidence = window_evidence(&index.store, search, &ids, self.embedder.window_words())?;
        Ok(rank_windows(&sources, &evidence).into_iter().map(|window| (window.fragment_id, window.words)).collect())
    }

    /// The fragments shown in full (`retrieve::choose`, where the whole order is told): the
    /// pool's cached annotations read, and whether this machine has time for the rerank to
    /// read them, decided here.
    async fn choose(&self, index: &Index, search: &SearchResult, rerank: bool) -> Result<Choice, AskError> {
        let hashes: Vec<&str> = search.candidates.iter().map(|c| c.content_hash.as_str()).collect();
        let hashes = hashes.as_slice();
        // Rerank over the cached annotations of the pool: the model's, and where the settings
        // say so the extractive ones for the fragments it did not annotate.
        let by_hash = index.store.annotations(hashes, self.chat.id(), ANNOTATE_PROMPT_VERSION)?;
        let extractive = index.store.annotations(
            hashes,
            crate::index::store::EXTRACTIVE_ANNOTATOR,
            crate::index::store::EXTRACTIVE_ANNOTATION_VERSION,
        )?;
        let annotations: HashMap<FragmentId, String> = search
            .candidates
            .iter()
            .filter_map(|c| by_hash.get(&c.content_hash).map(|text| (c.fragment_id, text.clone())))
            .collect();
        let rerank_annotations: HashMap<FragmentId, String> = match self.settings.rerank_reads {
            RerankReads::ModelAnnotations => annotations.clone(),
            RerankReads::ExtractiveToo => search
                .candidates
                .iter()
                .filter_map(|c| {
                    let text = annotations.get(&c.fragment_id).or_else(|| extractive.get(&c.content_hash))?;
                    Some((c.fragment_id, text.clone()))
                })
                .collect(),
        };
        // The size of what the rerank reads (or would read), for the time rule and the cost report.
        let rerank_prompt_tokens = (rerank_annotations.len() == search.candidates.len()).then(|| {
            let listed: Vec<(FragmentId, &str)> = search
                .candidates
                .iter()
                .map(|c| (c.fragment_id, rerank_annotations[&c.fragment_id].as_str()))
                .collect();
            crate::prompt::rerank_messages(&search.search_query, &listed, self.settings.k)
                .iter()
                .map(|message| self.chat.count_tokens(&message.content))
                .sum::<usize>()
        });
        let plan = if !rerank {
            RerankPlan::Off
        } else {
            let no_time = match (self.settings.rerank_within_time, rerank_prompt_tokens) {
                (true, Some(tokens)) => self.rerank_exceeds_its_time(tokens).await,
                _ => None,
            };
            match no_time {
                Some(skip) => RerankPlan::NoTime(skip),
                None => RerankPlan::Run {
                    chat: self.chat.as_ref(),
                    annotations: &rerank_annotations,
                    timeout: self.settings.rerank_timeout,
                },
            }
        };
        let Shown { chosen, rerank, rerank_ms } = choose_shown(search, plan, self.settings.k).await;
        Ok(Choice { chosen, rerank, rerank_ms, rerank_prompt_tokens, annotations, extractive })
    }

    /// Every fragment of `label` the audience may read, in part order (for "show me the source").
    pub async fn read_source(&self, label: &str, audience: Audience) -> Result<Vec<StoredFragment>, AskError> {
        let index = self.open_index().await?;
        Ok(index.store.fragments_of_label(label, audience.visibility_filter())?)
    }
}

/// The stored fragments of `candidates` by id, each only while it still holds the text that
/// was searched (its content hash) and `audience` may see it.
pub(crate) fn checked_texts(
    index: &Index,
    candidates: &[Candidate],
    audience: Audience,
) -> Result<HashMap<FragmentId, StoredFragment>, IndexError> {
    let wanted: Vec<(FragmentId, &str)> = candidates.iter().map(|c| (c.fragment_id, c.content_hash.as_str())).collect();
    Ok(index
        .store
        .fragments_checked(&wanted, audience.visibility_filter())?
        .into_iter()
        .map(|stored| (stored.id, stored))
        .collect())
}

/// The campaign's names by entity (its name and aliases), what the letter check backs a name
/// by: the answer stage and the eval's judged citations read the same book.
pub fn name_book(compendium: &CompendiumIndex) -> NameBook {
    NameBook::new(
        compendium.compendium.entities.iter().map(|entity| {
            std::iter::once(entity.name.as_str()).chain(entity.aliases.iter().map(String::as_str)).collect()
        }),
    )
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
