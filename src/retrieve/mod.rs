//! Retrieve: a question → a fused pool of candidate fragments.
//!
//! Four independent paths, because no single one is enough:
//! - [`dense`]: embeddings; understands paraphrase, scatters invented names;
//! - [`bm25`]: FTS5; nails "Norkiel" literally, cannot generalise;
//! - [`entity`]: the compendium; brings every session where a named entity appears;
//! - [`time`]: the sessions a question places itself in («la sesión 12», «la última», «justo
//!   después de X»), found from session numbers rather than words.
//!
//! Each path is asked for `max(k*2, k+5)` results and [`fuse`] merges them by reciprocal rank
//! into a pool of at most 40. The pool's order is not the answer set: [`choose`] takes the
//! final `k` from it (the rerank, or the pool's order), so the pool's recall matters more
//! than its order. [`choose`] lists every step of the order, first to last.
//!
//! Architecture invariant: visibility is applied inside every path's query (SQL `WHERE`,
//! LanceDB filter), before ranking; a player request never even scores a GM-only fragment.

pub mod bm25;
pub mod choose;
pub mod dense;
pub mod entity;
pub mod followup;
pub mod fuse;
pub mod rerank;
pub mod time;
pub mod windows;

use std::collections::HashMap;
use std::time::Instant;

use serde::Serialize;
use tracing::Instrument;

use crate::corpus::{FragmentId, Label, NoteKind, SessionNumber, Visibility};
use crate::index::{Index, IndexError};
use crate::llm::{EmbedRole, Embedder, LlmError};

pub use crate::llm::chat::{Turn, TurnRole};
pub use bm25::Bm25Terms;
pub use entity::{CompendiumIndex, DetectedEntity, ENTITY_MIN_WEIGHT, EntityEvidence, EntityShare};
pub use followup::{FollowupDecision, decide_followup, expand_followup};
pub use fuse::{MAX_PARTS_PER_NOTE, MAX_POOL, RRF_K, fuse_candidates, fuse_weighted, spread_notes};

/// Fragments the model finally sees in full (the rerank's output size).
pub const DEFAULT_K: usize = 8;

/// How deep each path searches for a final set of `k`: twice `k`, and at least `k + 5`, so
/// fusion has depth to work with.
pub fn path_depth(k: usize) -> usize {
    (k * 2).max(k + 5)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RetrievalPath {
    Dense,
    Bm25,
    Entity,
    Time,
}

/// A candidate's 1-based rank in each path (`None`: that path did not find it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PathRanks {
    pub dense: Option<usize>,
    pub bm25: Option<usize>,
    pub entity: Option<usize>,
    pub time: Option<usize>,
}

impl PathRanks {
    pub fn get(&self, path: RetrievalPath) -> Option<usize> {
        match path {
            RetrievalPath::Dense => self.dense,
            RetrievalPath::Bm25 => self.bm25,
            RetrievalPath::Entity => self.entity,
            RetrievalPath::Time => self.time,
        }
    }

    pub fn set(&mut self, path: RetrievalPath, rank: usize) {
        match path {
            RetrievalPath::Dense => self.dense = Some(rank),
            RetrievalPath::Bm25 => self.bm25 = Some(rank),
            RetrievalPath::Entity => self.entity = Some(rank),
            RetrievalPath::Time => self.time = Some(rank),
        }
    }

    /// The best (lowest) rank over the paths that found it.
    pub fn best(&self) -> usize {
        [self.dense, self.bm25, self.entity, self.time].into_iter().flatten().min().unwrap_or(usize::MAX)
    }
}

/// Which paths a search runs. Every search in the product runs all four; the evaluation
/// switches paths off to measure what each one adds (ablations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct PathSet {
    pub dense: bool,
    pub bm25: bool,
    pub entity: bool,
    pub time: bool,
    /// How the BM25 path scores a fragment ([`bm25::BM25_SCORING`] in the product).
    pub bm25_scoring: bm25::Bm25Scoring,
}

impl PathSet {
    pub const ALL: PathSet =
        PathSet { dense: true, bm25: true, entity: true, time: true, bm25_scoring: bm25::BM25_SCORING };

    /// Only the paths listed.
    pub fn only(paths: &[RetrievalPath]) -> PathSet {
        PathSet {
            dense: paths.contains(&RetrievalPath::Dense),
            bm25: paths.contains(&RetrievalPath::Bm25),
            entity: paths.contains(&RetrievalPath::Entity),
            time: paths.contains(&RetrievalPath::Time),
            bm25_scoring: bm25::BM25_SCORING,
        }
    }

    /// The same paths, BM25 scoring fragments by `scoring` (the evaluation's variants).
    pub fn scoring_bm25_by(self, scoring: bm25::Bm25Scoring) -> PathSet {
        PathSet { bm25_scoring: scoring, ..self }
    }

    /// The same paths with the time path off (the evaluation's `time` variant).
    pub fn without_time(self) -> PathSet {
        PathSet { time: false, ..self }
    }

    pub fn contains(self, path: RetrievalPath) -> bool {
        match path {
            RetrievalPath::Dense => self.dense,
            RetrievalPath::Bm25 => self.bm25,
            RetrievalPath::Entity => self.entity,
            RetrievalPath::Time => self.time,
        }
    }

    /// `dense+bm25+entity+time`, in that order.
    pub fn name(self) -> String {
        let names: Vec<&str> = [RetrievalPath::Dense, RetrievalPath::Bm25, RetrievalPath::Entity, RetrievalPath::Time]
            .into_iter()
            .filter(|path| self.contains(*path))
            .map(RetrievalPath::as_str)
            .collect();
        let name = if names.is_empty() { "none".to_string() } else { names.join("+") };
        match self.bm25_scoring {
            scoring if !self.bm25 || scoring == bm25::BM25_SCORING => name,
            scoring => format!("{name} [bm25 by {}]", scoring.as_str()),
        }
    }
}

impl Default for PathSet {
    fn default() -> PathSet {
        PathSet::ALL
    }
}

impl RetrievalPath {
    pub fn as_str(self) -> &'static str {
        match self {
            RetrievalPath::Dense => "dense",
            RetrievalPath::Bm25 => "bm25",
            RetrievalPath::Entity => "entity",
            RetrievalPath::Time => "time",
        }
    }
}

/// Who is asking: players never see GM-only fragments; the GM sees everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Audience {
    Player,
    Gm,
}

impl Audience {
    /// The visibility filter every path applies.
    pub fn visibility_filter(self) -> Option<Visibility> {
        match self {
            Audience::Player => Some(Visibility::Player),
            Audience::Gm => None,
        }
    }
}

/// A fragment proposed by retrieval.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    pub fragment_id: FragmentId,
    pub label: Label,
    pub kind: NoteKind,
    pub source_path: String,
    pub session: Option<SessionNumber>,
    pub part: u32,
    pub visibility: Visibility,
    pub content_hash: String,
    pub ranks: PathRanks,
    pub rrf_score: f64,
    /// The window of the fragment nearest the question, when the dense path found it.
    pub dense_window: Option<u32>,
}

impl Candidate {
    /// A stored fragment's head as a candidate, with where the paths ranked it.
    pub fn from_head(
        head: crate::index::FragmentHead,
        ranks: PathRanks,
        rrf_score: f64,
        dense_window: Option<u32>,
    ) -> Candidate {
        Candidate {
            fragment_id: head.id,
            label: head.label,
            kind: head.kind,
            source_path: head.source_path,
            session: head.session,
            part: head.part,
            visibility: head.visibility,
            content_hash: head.content_hash,
            ranks,
            rrf_score,
            dense_window,
        }
    }
}

/// One search.
#[derive(Debug, Clone)]
pub struct SearchRequest<'a> {
    pub question: &'a str,
    pub history: &'a [Turn],
    pub audience: Audience,
    /// Final answer-set size the pool is built for.
    pub k: usize,
    /// The paths to run ([`PathSet::ALL`] outside the evaluation).
    pub paths: PathSet,
}

/// Milliseconds per stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SearchTimings {
    pub embed_query_ms: f64,
    pub dense_ms: f64,
    pub bm25_ms: f64,
    /// Finding the entities the question names (titles in another language embedded, the
    /// first time with the compendium's titles) and listing their fragments.
    pub entity_ms: f64,
    pub fuse_ms: f64,
    /// Reading the question's time references and listing their sessions.
    pub time_ms: f64,
}

/// The fused pool with what explains it. `oraculo search --json` prints this.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    pub question: String,
    /// What was searched: the question, or the previous user turn + the question.
    pub search_query: String,
    pub followup_expanded: bool,
    pub entities: Vec<DetectedEntity>,
    pub candidates: Vec<Candidate>,
    pub timings: SearchTimings,
    /// Paths that failed (the embedder down, a LanceDB or FTS5 error): the pool comes from the
    /// others, and the answer says which were missing. Empty when every path answered.
    pub missing_paths: Vec<MissingPath>,
    /// Why the pool looks as it does: the follow-up decision, the entity path's
    /// evidence (each named entity's session share and weight) and each path's list length.
    pub diagnostics: SearchDiagnostics,
    /// What the time path read and brought (empty when the question has no time reference).
    pub time: time::TimeDiagnostics,
    /// Every embedding window the dense path hit, nearest first: a fragment and the window's
    /// place among its windows (what ranks the passages a slow machine's model reads).
    #[serde(skip)]
    pub dense_hits: Vec<(FragmentId, u32)>,
}

/// What explains a pool: `search --json` prints it beside the candidates' per-path ranks.
#[derive(Debug, Clone, Serialize)]
pub struct SearchDiagnostics {
    pub followup: FollowupDecision,
    /// `None` when the question names no entity or the entity path is off.
    pub entity_path: Option<EntityEvidence>,
    /// How many fragments each path returned before fusion (`depth` at most).
    pub path_lengths: PathLengths,
    /// How much of the question the BM25 path could match, and the weight that gave it.
    pub bm25_terms: Bm25Terms,
    /// Each path's list as fused: the path, its weight, its fragment ids best first (the
    /// evaluation reads them; `--json` does not print them).
    #[serde(skip)]
    pub lists: Vec<(RetrievalPath, f64, Vec<FragmentId>)>,
}

/// Results per path before fusion.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct PathLengths {
    pub dense: usize,
    pub bm25: usize,
    pub entity: usize,
}

/// A retrieval path that failed for one question, and why (for the log and `--json`).
#[derive(Debug, Clone, Serialize)]
pub struct MissingPath {
    pub path: RetrievalPath,
    pub error: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RetrieveError {
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("embedding the question failed: {0}")]
    Embed(#[from] LlmError),
    #[error(
        "the index was built with the embedder `{index}` but `{configured}` is configured: run `oraculo ingest` again to re-embed"
    )]
    EmbedderMismatch { index: String, configured: String },
    /// A players' search given the GM's compendium: it would name what only the GM may read.
    #[error("a players' search was given the GM's compendium: refused, it names GM-only entities")]
    CompendiumForTheGm,
}

/// Runs the three paths and fuses them. `compendium` is loaded once per index generation.
pub async fn search(
    index: &Index,
    compendium: &CompendiumIndex,
    embedder: &dyn Embedder,
    request: &SearchRequest<'_>,
) -> Result<SearchResult, RetrieveError> {
    let span = tracing::info_span!("retrieve", audience = ?request.audience, k = request.k);
    search_paths(index, compendium, embedder, request).instrument(span).await
}

/// The paths that failed alone: the question is answered from the paths that worked, and
/// says which did not. Only all of them failing is an error.
#[derive(Default)]
struct PathFailures {
    missing: Vec<MissingPath>,
    first: Option<RetrieveError>,
}

impl PathFailures {
    fn fail(&mut self, path: RetrievalPath, error: RetrieveError) {
        tracing::warn!(path = path.as_str(), error = %error, "a retrieval path failed; answering from the others");
        self.missing.push(MissingPath { path, error: error.to_string() });
        self.first.get_or_insert(error);
    }
}

/// [`search`]'s stages: names and follow-up, the dense, BM25 and entity paths, the time path
/// anchored on them, then the fused pool.
async fn search_paths(
    index: &Index,
    compendium: &CompendiumIndex,
    embedder: &dyn Embedder,
    request: &SearchRequest<'_>,
) -> Result<SearchResult, RetrieveError> {
    if request.audience == Audience::Player && compendium.audience != Audience::Player {
        return Err(RetrieveError::CompendiumForTheGm);
    }
    let depth = path_depth(request.k);

    // Follow-ups: a name in the question always wins over the history. A title asked in
    // another language than the notes write it («the archduke») is a name too.
    let started_names = Instant::now();
    let named = detect_names(compendium, embedder, request.question).await;
    let (expanded, followup) = decide_followup(request.question, request.history, !named.is_empty());
    let search_query = expanded.clone().unwrap_or_else(|| request.question.to_string());
    let detected = if expanded.is_some() { detect_names(compendium, embedder, &search_query).await } else { named };
    let mut timings = SearchTimings::default();
    let names_ms = ms(started_names);

    let mut failures = PathFailures::default();
    let started = Instant::now();
    let dense = match run_dense_path(index, embedder, request, &search_query, depth, &mut timings).await? {
        Ok(hits) => hits,
        Err(error) => {
            failures.fail(RetrievalPath::Dense, error);
            Vec::new()
        }
    };
    let dense_hits: Vec<(FragmentId, u32)> = dense.iter().map(|hit| (hit.fragment_id, hit.window)).collect();
    let dense = dense::best_per_fragment(&dense, depth);

    let started_bm25 = Instant::now();
    let bm25_hits = run_bm25_path(index, request, &search_query, depth, &mut failures);
    let (bm25, bm25_terms) = (bm25_hits.ids, bm25_hits.terms);
    timings.bm25_ms = ms(started_bm25);

    let started_entity = Instant::now();
    let named_entities: Vec<(i64, String)> = detected.iter().map(|(id, entity)| (*id, entity.name.clone())).collect();
    let entity_evidence = run_entity_path(index, request, &search_query, &named_entities, depth, &mut failures);
    let (by_entity, entity_weight) =
        entity_evidence.as_ref().map_or((Vec::new(), 1.0), |evidence| (evidence.ranked.clone(), evidence.weight));
    timings.entity_ms = names_ms + ms(started_entity);
    let path_lengths = PathLengths { dense: dense.len(), bm25: bm25.len(), entity: by_entity.len() };
    let requested = [request.paths.dense, request.paths.bm25, request.paths.entity].iter().filter(|on| **on).count();
    if let Some(error) = failures.first
        && failures.missing.len() >= requested
    {
        return Err(error);
    }
    tracing::trace!(elapsed_ms = ms(started), "paths done");

    let dense_windows: HashMap<FragmentId, u32> = dense.iter().map(|hit| (hit.fragment_id, hit.window)).collect();
    let dense: Vec<FragmentId> = dense.iter().map(|hit| hit.fragment_id).collect();
    let mut lists: Vec<(RetrievalPath, f64, Vec<FragmentId>)> = vec![
        (RetrievalPath::Dense, 1.0, dense),
        (RetrievalPath::Bm25, bm25_terms.weight, bm25),
        (RetrievalPath::Entity, entity_weight, by_entity),
    ];
    let started = Instant::now();
    let entity_ids: Vec<i64> = named_entities.iter().map(|(id, _)| *id).collect();
    let (by_time, time) = if request.paths.time {
        search_time_path(index, request, &search_query, expanded.is_some(), &lists, &entity_ids, depth)?
    } else {
        (Vec::new(), time::TimeDiagnostics::default())
    };
    lists.push((RetrievalPath::Time, 1.0, by_time));
    timings.time_ms = ms(started);

    let started = Instant::now();
    let candidates = fused_pool(index, &lists, &dense_windows, &time.named_sessions)?;
    timings.fuse_ms = ms(started);
    tracing::debug!(n_candidates = candidates.len(), "fused pool");

    Ok(SearchResult {
        question: request.question.to_string(),
        search_query,
        followup_expanded: expanded.is_some(),
        entities: detected.into_iter().map(|(_, entity)| entity).collect(),
        candidates,
        timings,
        missing_paths: failures.missing,
        diagnostics: SearchDiagnostics { followup, entity_path: entity_evidence, path_lengths, bm25_terms, lists },
        time,
        dense_hits,
    })
}

/// The dense path when it may run: the outer error stops the search (an index embedded by
/// another model answers nothing right), the inner one is this path failing alone.
async fn run_dense_path(
    index: &Index,
    embedder: &dyn Embedder,
    request: &SearchRequest<'_>,
    search_query: &str,
    depth: usize,
    timings: &mut SearchTimings,
) -> Result<Result<Vec<dense::DenseHit>, RetrieveError>, RetrieveError> {
    let visibility = request.audience.visibility_filter();
    Ok(match index.store.meta(crate::index::store::META_EMBEDDER)? {
        _ if !request.paths.dense => Ok(Vec::new()),
        // Nothing embedded yet: the dense path has nothing to say.
        None => Ok(Vec::new()),
        Some(built_with) if built_with != embedder.id() => {
            return Err(RetrieveError::EmbedderMismatch { index: built_with, configured: embedder.id().to_string() });
        }
        Some(_) => search_dense_path(index, embedder, search_query, visibility, depth, timings).await,
    })
}

/// The BM25 path when asked for; its failure is this path failing alone (no hits).
fn run_bm25_path(
    index: &Index,
    request: &SearchRequest<'_>,
    search_query: &str,
    depth: usize,
    failures: &mut PathFailures,
) -> bm25::Bm25Hits {
    if !request.paths.bm25 {
        return bm25::Bm25Hits::default();
    }
    let visibility = request.audience.visibility_filter();
    bm25::search_bm25(&index.store, search_query, visibility, depth, request.paths.bm25_scoring).unwrap_or_else(
        |error| {
            failures.fail(RetrievalPath::Bm25, error.into());
            bm25::Bm25Hits::default()
        },
    )
}

/// The entity path when asked for and the question names an entity; its failure is this path
/// failing alone (no evidence).
fn run_entity_path(
    index: &Index,
    request: &SearchRequest<'_>,
    search_query: &str,
    named_entities: &[(i64, String)],
    depth: usize,
    failures: &mut PathFailures,
) -> Option<entity::EntityEvidence> {
    if !request.paths.entity || named_entities.is_empty() {
        return None;
    }
    let visibility = request.audience.visibility_filter();
    let arc = entity::is_arc_question(search_query);
    entity::search_entities(&index.store, named_entities, visibility, depth, arc)
        .map_err(|error| failures.fail(RetrievalPath::Entity, error.into()))
        .ok()
}

/// The fused pool of candidates, best first: the lists fused, their heads read, one note's
/// fragments spread out, and the sessions the question names leading.
fn fused_pool(
    index: &Index,
    lists: &[(RetrievalPath, f64, Vec<FragmentId>)],
    dense_windows: &HashMap<FragmentId, u32>,
    named_sessions: &[SessionNumber],
) -> Result<Vec<Candidate>, RetrieveError> {
    let fused = fuse_weighted(lists, MAX_POOL);
    let ids: Vec<FragmentId> = fused.iter().map(|f| f.fragment_id).collect();
    let mut heads: HashMap<FragmentId, crate::index::FragmentHead> =
        index.store.fragment_heads(&ids)?.into_iter().map(|head| (head.id, head)).collect();
    let candidates: Vec<Candidate> = fused
        .iter()
        .filter_map(|entry| heads.remove(&entry.fragment_id).map(|head| (entry, head)))
        .map(|(entry, head)| {
            let dense_window = dense_windows.get(&head.id).copied();
            Candidate::from_head(head, entry.ranks, entry.score, dense_window)
        })
        .collect();
    let mut candidates = spread_notes(candidates, |c| c.label.as_str(), |c| c.ranks.time.is_some());
    lead_with_named_sessions(&mut candidates, named_sessions);
    Ok(candidates)
}

/// Moves the candidates of the sessions a question names («la sesión 45», «la última») to
/// the front, in the order the question names them, each session's parts in part order: the
/// question is about them. Two other paths agreeing on a stats page that lists every session
/// put the session itself seventh in a players' vault; it must be the first thing read.
pub fn lead_with_named_sessions(candidates: &mut Vec<Candidate>, named: &[SessionNumber]) {
    if named.is_empty() {
        return;
    }
    let mut leading: Vec<Candidate> = Vec::new();
    for session in named {
        let mut parts: Vec<Candidate> = Vec::new();
        let mut idx = 0;
        while idx < candidates.len() {
            if candidates[idx].session == Some(*session) && candidates[idx].kind == NoteKind::Session {
                parts.push(candidates.remove(idx));
            } else {
                idx += 1;
            }
        }
        parts.sort_by_key(|candidate| candidate.part);
        leading.extend(parts);
    }
    candidates.splice(0..0, leading);
}

/// The entities `text` names: by spelling, then titles in translation.
async fn detect_names(
    compendium: &CompendiumIndex,
    embedder: &dyn Embedder,
    text: &str,
) -> Vec<(i64, entity::DetectedEntity)> {
    let mut named = compendium.detect(text);
    let translated = compendium.detect_translated(text, embedder, &named).await;
    named.extend(translated);
    named
}

/// The dense path: the query's embedding, then the nearest windows in LanceDB.
async fn search_dense_path(
    index: &Index,
    embedder: &dyn Embedder,
    search_query: &str,
    visibility: Option<Visibility>,
    depth: usize,
    timings: &mut SearchTimings,
) -> Result<Vec<dense::DenseHit>, RetrieveError> {
    let started = Instant::now();
    let query_vector = embedder.embed(&[search_query.to_string()], EmbedRole::Query).await?.pop().unwrap_or_default();
    timings.embed_query_ms = ms(started);
    let dense_started = Instant::now();
    let ids = dense::search_dense(index, &query_vector, visibility, depth)
        .instrument(tracing::info_span!("retrieve.dense", depth))
        .await?;
    timings.dense_ms = ms(dense_started);
    Ok(ids)
}

/// The time path: the question's references (the expanded follow-up's when the question
/// alone has none), anchored on the other three paths' fusion for «antes/después de X».
fn search_time_path(
    index: &Index,
    request: &SearchRequest<'_>,
    search_query: &str,
    expanded: bool,
    other_paths: &[(RetrievalPath, f64, Vec<FragmentId>)],
    entity_ids: &[i64],
    depth: usize,
) -> Result<(Vec<FragmentId>, time::TimeDiagnostics), IndexError> {
    let mut references = time::parse_time_references(request.question);
    if references.is_empty() && expanded {
        references = time::parse_time_references(search_query);
    }
    if references.is_empty() {
        return Ok((Vec::new(), time::TimeDiagnostics::default()));
    }
    let needs_anchor =
        references.iter().any(|r| matches!(r, time::TimeReference::AfterEvent | time::TimeReference::BeforeEvent));
    let prior: Vec<FragmentId> = if needs_anchor {
        fuse_weighted(other_paths, MAX_POOL).into_iter().map(|fused| fused.fragment_id).collect()
    } else {
        Vec::new()
    };
    time::search_time(&index.store, &references, &prior, entity_ids, request.audience.visibility_filter(), depth)
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(fragment_id: i64, label: &str, session: Option<u32>, part: u32) -> Candidate {
        Candidate {
            fragment_id: FragmentId(fragment_id),
            label: Label::new(label),
            kind: if session.is_some() { NoteKind::Session } else { NoteKind::World },
            source_path: format!("{label}.md"),
            session: session.map(SessionNumber),
            part,
            visibility: Visibility::Player,
            content_hash: fragment_id.to_string(),
            ranks: PathRanks::default(),
            rrf_score: 0.0,
            dense_window: None,
        }
    }

    #[test]
    fn the_sessions_a_question_names_lead_the_fused_order_in_the_order_asked() {
        let mut pool = vec![
            candidate(1, "Mundo: Estadísticas", None, 0),
            candidate(2, "Sesión 8", Some(8), 0),
            candidate(3, "Sesión 45", Some(45), 1),
            candidate(4, "Sesión 1", Some(1), 0),
            candidate(5, "Sesión 45", Some(45), 0),
            candidate(6, "Sesión 44", Some(44), 0),
        ];
        lead_with_named_sessions(&mut pool, &[SessionNumber(45), SessionNumber(44)]);
        let order: Vec<i64> = pool.iter().map(|c| c.fragment_id.0).collect();
        // Session 45's parts in part order, then 44, then the rest as fused.
        assert_eq!(order, [5, 3, 6, 1, 2, 4]);
        // No session named: nothing moves.
        let before: Vec<FragmentId> = pool.iter().map(|c| c.fragment_id).collect();
        lead_with_named_sessions(&mut pool, &[]);
        assert_eq!(pool.iter().map(|c| c.fragment_id).collect::<Vec<_>>(), before);
    }
}
