//! The oracle: one question in, one cited answer out. [`Oracle::answer`] is the one entry the
//! CLI, the bot, the evaluation and the MCP server call (`ask.rs`): events while the answer is
//! made, the settled answer at the end.
//!
//! search (three paths + fusion) → annotations → rerank → context (8 full fragments + one-line
//! summaries) → prompt → chat model → citation check → what stays. Each step is its own
//! module; this one only strings them together and keeps the timings.

mod answer;
mod ask;
mod compared;
mod generate;
mod instant;
mod plan;
mod quoted;

use crate::corpus::FragmentId;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::answer::grounding::NameBook;
use crate::answer::terms::QueryTerms;
use crate::answer::{AnswerMode, AnswerStyle, Context, ContextFragment};
use crate::index::{Index, StoredFragment};
use crate::llm::Embedder;
use crate::llm::chat::{ChatMessage, ChatModel};
use crate::notes::Notes;
use crate::retrieve::choose::{Choice, ChooseSettings, RerankTime, choose};
use crate::retrieve::rerank::{RERANK_MEASURE_TIMEOUT, RERANK_SHARE, RerankDecision, RerankReads};
use crate::retrieve::windows::{WindowSource, rank_windows, window_evidence};
use crate::retrieve::{Candidate, CompendiumIndex, PathSet, SearchResult, TurnRole};
use plan::ChosenMaterial;

pub use crate::notes::{
    ArcStory, AskError, AskRequest, FoundPassage, GLIMPSE_WORDS, MAX_QUESTION_CHARS, PASSAGE_WORDS, check_question,
};
pub use answer::{Answer, AnswerTimings, CitationSource, EXCERPT_CHARS, ShownSource};
pub use ask::{AnswerEvent, AnswerEvents, AnswerOptions, ModelTurn, Writer, no_events};
pub use instant::{InstantKept, Settled, question_language};
pub use plan::{ContextPlan, DEADLINE_SLACK, FrameCost, PlanInputs, plan_answer};

/// How answers are made. Passed explicitly; built from config.
#[derive(Debug, Clone)]
pub struct AnswerSettings {
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

    /// The mode a question is answered in by `chat`: a smoke-test model never writes free
    /// text, and with `chat.answer_style = "quotes"` no model writes at all.
    pub fn mode_for(&self, chat: &dyn ChatModel) -> AnswerMode {
        if self.style == AnswerStyle::Quotes {
            return AnswerMode::Extractive;
        }
        match self.mode {
            AnswerMode::Free if chat.is_smoke_test() => AnswerMode::Structured,
            mode => mode,
        }
    }

    /// How the `k` shown in full are chosen for one question ([`crate::retrieve::choose`]),
    /// with the time the rerank is given: [`RERANK_SHARE`] of the answer's time, unlimited
    /// when it is measured without its limit.
    fn choosing<'a>(&self, k: usize, rerank: bool, chat: &'a dyn ChatModel) -> ChooseSettings<'a> {
        let time = match self.rerank_within_time {
            true => RerankTime::Within { allowed_seconds: self.answer_seconds * RERANK_SHARE },
            false => RerankTime::Unlimited,
        };
        ChooseSettings { k, rerank, reads: self.rerank_reads, chat, timeout: self.rerank_timeout, time }
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

/// How a question's notes are read ([`AnswerOptions::prepared_as`]): a player's question is read with
/// [`Preparation::default`] (the search's three paths, the rerank).
#[derive(Debug, Clone, Default)]
pub struct Preparation {
    pub pipeline: Pipeline,
    /// The pool to choose from, already searched or gathered: the evaluation compares the
    /// rerank on and off over one search, and a recap reads its session's own fragments.
    pub pool: Option<SearchResult>,
}

impl Preparation {
    /// The same reading with the fragments in fusion order: nothing asks the chat model.
    pub fn without_rerank(self) -> Preparation {
        Preparation { pipeline: Pipeline { rerank: false, ..self.pipeline }, ..self }
    }
}

/// What the reading decided: the pool, the rerank's choice and the model's context (the
/// [`AnswerEvent::Prepared`] event).
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

/// The half that answers: one campaign's [`Notes`] and the chat model that writes from them.
pub struct Oracle {
    notes: Notes,
    chat: Arc<dyn ChatModel>,
    settings: AnswerSettings,
}

impl std::fmt::Debug for Oracle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oracle").field("notes", &self.notes).field("chat", &self.chat.id()).finish()
    }
}

impl Oracle {
    /// The oracle of the notes indexed in `index_dir`.
    pub fn new(
        index_dir: &Path,
        embedder: Arc<dyn Embedder>,
        chat: Arc<dyn ChatModel>,
        settings: AnswerSettings,
    ) -> Oracle {
        Oracle::over(Notes::new(index_dir, embedder), chat, settings)
    }

    /// The oracle of `notes`, which it shares with their other readers.
    pub fn over(notes: Notes, chat: Arc<dyn ChatModel>, settings: AnswerSettings) -> Oracle {
        Oracle { notes, chat, settings }
    }

    /// Changes how many fragments are shown in full.
    pub fn set_k(&mut self, k: usize) {
        self.notes = self.notes.with_k(k);
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

    /// Changes how answers are made (`oraculo ask --extractive`, `oraculo eval
    /// --answer-mode`): a mode that asks the model is asking for its prose.
    pub fn set_mode(&mut self, mode: AnswerMode) {
        self.settings.mode = mode;
        if mode != AnswerMode::Extractive {
            self.settings.style = AnswerStyle::Prose;
        }
    }

    /// How it answers.
    pub fn settings(&self) -> &AnswerSettings {
        &self.settings
    }

    /// The notes it answers from.
    pub fn notes(&self) -> &Notes {
        &self.notes
    }

    pub fn chat(&self) -> &Arc<dyn ChatModel> {
        &self.chat
    }

    /// Everything before the model writes, prepared as `how` says ([`AnswerOptions`]): the
    /// pool, the rerank's choice and the context.
    async fn prepare(&self, request: &AskRequest<'_>, how: Preparation) -> Result<Prepared, AskError> {
        let question = check_question(request.question)?;
        let index = self.notes.open_index().await?;
        let compendium = self.notes.compendium(&index, request.audience)?;
        let asked = InFlight { index: &index, compendium: &compendium, question, request, started: Instant::now() };
        self.prepare_in(&asked, how).await
    }

    /// [`Oracle::prepare`] for a question checked and its index open: the search (unless the
    /// pool is given), the rerank or the fusion order, then the context.
    async fn prepare_in(&self, asked: &InFlight<'_>, how: Preparation) -> Result<Prepared, AskError> {
        let InFlight { index, compendium, question, request, .. } = *asked;
        let search = match how.pool {
            Some(pool) => pool,
            None => self.notes.search_in(index, compendium, question, request, how.pipeline.paths).await?,
        };
        let choice =
            choose(index, &search, &self.settings.choosing(self.notes.k(), how.pipeline.rerank, self.chat.as_ref()))
                .await?;
        self.build_prepared(asked, search, choice).await
    }

    /// The context for the fragments `choice` holds, from `search`'s pool.
    async fn build_prepared(
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
        let texts = crate::notes::checked_texts(index, &chosen, request.audience)?;
        chosen.retain(|candidate| texts.contains_key(&candidate.fragment_id));
        let entity_names: Vec<&str> =
            search.entities.iter().flat_map(|entity| [entity.name.as_str(), entity.alias.as_str()]).collect();
        let terms = QueryTerms::new(question, &entity_names);
        // Notes in another language than the question share no word with it but cognates.
        let notes_language = generate::language_of_notes(
            chosen.iter().filter_map(|candidate| Some(texts.get(&candidate.fragment_id)?.fragment.text.as_str())),
        );
        let asked_in = crate::lexicon::language_of(question);
        let terms =
            if notes_language.is_some_and(|notes| notes != asked_in) { terms.across_languages() } else { terms };
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
        let story = self.notes.arc_story(index, compendium, question, &search, request.audience).await?;
        let windows = self.ranked_windows(index, &search, &chosen, &texts)?;
        let window = self.chat.window().await;
        let planner = self.planner();
        let mut plan = planner.plan_context(question, &history, window).await;
        let chosen_material = ChosenMaterial { fragments: &chosen_context, windows: &windows, leftovers: &leftovers };
        let context = planner.build_planned_context(&mut plan, story.as_ref(), chosen_material, &terms);
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
        if self.settings.mode_for(self.chat.as_ref()) == AnswerMode::Extractive {
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
        let evidence = window_evidence(&index.store, search, &ids, self.notes.embedder().window_words())?;
        Ok(rank_windows(&sources, &evidence).into_iter().map(|window| (window.fragment_id, window.words)).collect())
    }
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
