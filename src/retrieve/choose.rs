//! The ranking's last step: the `k` fragments shown in full, chosen from the fused pool.
//!
//! Every step of the order a question's fragments come in, first to last:
//! 1. each path ranks its own: [`dense`](super::dense), [`bm25`](super::bm25),
//!    [`entity`](super::entity), [`time`](super::time);
//! 2. [`fuse`](super::fuse) merges them by reciprocal rank into the pool (at most
//!    [`MAX_POOL`](super::MAX_POOL)), and the sessions the question names lead it
//!    ([`lead_with_named_sessions`](super::lead_with_named_sessions)): [`search`](super::search);
//! 3. here, [`choose_shown`]: the rerank over the pool's annotations where it was asked for
//!    and the caller found time for it ([`RerankPlan`]), else the pool's order, the first `k`;
//! 4. here: the sessions the question names kept among those `k`
//!    ([`keep_named_sessions`](super::time::keep_named_sessions)), and first, so that a slow
//!    machine's plan gives them the largest share.
//!
//! [`choose`] runs steps 3 and 4 for a question: it reads the pool's cached annotations and
//! weighs the rerank's prompt against the time the caller gives it ([`RerankTime`]: the caller
//! knows the model's speed and the answer's budget); this file only orders.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::corpus::FragmentId;
use crate::index::store::{EXTRACTIVE_ANNOTATION_VERSION, EXTRACTIVE_ANNOTATOR};
use crate::index::{Index, IndexError};
use crate::llm::chat::ChatModel;
use crate::prompt::ANNOTATE_PROMPT_VERSION;

use super::rerank::{RerankDecision, RerankReads, RerankSkip, rerank_by_annotation};
use super::{Candidate, SearchResult};

/// How one question's `k` are chosen: the caller's settings and the time it gives the rerank.
pub struct ChooseSettings<'a> {
    /// Fragments shown in full.
    pub k: usize,
    /// Whether the rerank was asked for (the eval's fusion-only variant asks it not to run).
    pub rerank: bool,
    /// Which annotations the rerank reads.
    pub reads: RerankReads,
    /// The model that annotated the pool and reranks it.
    pub chat: &'a dyn ChatModel,
    /// The rerank gives up after this and keeps the fusion order.
    pub timeout: Duration,
    pub time: RerankTime,
}

/// The time the rerank may take, decided by the caller.
#[derive(Debug, Clone, Copy)]
pub enum RerankTime {
    /// As long as its timeout (measured without a limit).
    Unlimited,
    /// Reading its prompt at the model's measured speed must take no more than
    /// `allowed_seconds` (unlimited where the model reports no plausible speed).
    Within { allowed_seconds: f64 },
}

/// Why `chat`, reading `prompt_tokens` at its measured speed, would take more than
/// `allowed_seconds`; `None` when it fits or no speed is known. The speed is asked for only
/// here, where there is a prompt to weigh (an embedded model measures it when first asked).
async fn exceeds_its_time(chat: &dyn ChatModel, prompt_tokens: usize, allowed_seconds: f64) -> Option<RerankSkip> {
    let speed = chat.speed().await.filter(crate::llm::chat::ModelSpeed::is_plausible)?;
    let needed_seconds = prompt_tokens as f64 / speed.prompt_tokens_per_s;
    (needed_seconds > allowed_seconds).then_some(RerankSkip::NoTime { needed_seconds, allowed_seconds })
}

/// The fragments shown in full and what choosing them read.
pub struct Choice {
    pub chosen: Vec<Candidate>,
    pub rerank: RerankDecision,
    pub rerank_ms: f64,
    /// The size of what the rerank reads (or would read), where every pool fragment has an
    /// annotation to read.
    pub rerank_prompt_tokens: Option<usize>,
    /// The pool's model annotations, by fragment id.
    pub annotations: HashMap<FragmentId, String>,
    /// The pool's extractive annotations (made at ingest), by content hash.
    pub extractive: HashMap<String, String>,
}

/// Steps 3 and 4 for one question: the pool's cached annotations read (the model's, and where
/// `settings.reads` says so the extractive ones for the fragments it did not annotate), the
/// rerank planned within the time given, and the `k` shown in full chosen.
pub async fn choose(index: &Index, search: &SearchResult, settings: &ChooseSettings<'_>) -> Result<Choice, IndexError> {
    let hashes: Vec<&str> = search.candidates.iter().map(|c| c.content_hash.as_str()).collect();
    let by_hash = index.store.annotations(&hashes, settings.chat.id(), ANNOTATE_PROMPT_VERSION)?;
    let extractive = index.store.annotations(&hashes, EXTRACTIVE_ANNOTATOR, EXTRACTIVE_ANNOTATION_VERSION)?;
    let annotations: HashMap<FragmentId, String> = search
        .candidates
        .iter()
        .filter_map(|c| by_hash.get(&c.content_hash).map(|text| (c.fragment_id, text.clone())))
        .collect();
    let rerank_annotations: HashMap<FragmentId, String> = match settings.reads {
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
        let listed: Vec<(FragmentId, &str)> =
            search.candidates.iter().map(|c| (c.fragment_id, rerank_annotations[&c.fragment_id].as_str())).collect();
        crate::prompt::rerank_messages(&search.search_query, &listed, settings.k)
            .iter()
            .map(|message| settings.chat.count_tokens(&message.content))
            .sum::<usize>()
    });
    let no_time = match (settings.rerank, settings.time, rerank_prompt_tokens) {
        (true, RerankTime::Within { allowed_seconds }, Some(tokens)) => {
            exceeds_its_time(settings.chat, tokens, allowed_seconds).await
        }
        _ => None,
    };
    let plan = match (settings.rerank, no_time) {
        (false, _) => RerankPlan::Off,
        (true, Some(skip)) => RerankPlan::NoTime(skip),
        (true, None) => {
            RerankPlan::Run { chat: settings.chat, annotations: &rerank_annotations, timeout: settings.timeout }
        }
    };
    let Shown { chosen, rerank, rerank_ms } = choose_shown(search, plan, settings.k).await;
    Ok(Choice { chosen, rerank, rerank_ms, rerank_prompt_tokens, annotations, extractive })
}

/// Whether the rerank runs for one question.
pub enum RerankPlan<'a> {
    /// Not asked for (the eval's fusion-only variant).
    Off,
    /// Asked for, but the caller found no time for it at this machine's speed.
    NoTime(RerankSkip),
    /// Run: `chat` reads `annotations` (one per pool fragment) and picks, within `timeout`.
    Run { chat: &'a dyn ChatModel, annotations: &'a HashMap<FragmentId, String>, timeout: Duration },
}

/// The fragments shown in full, in the order they are shown, and how they were chosen.
pub struct Shown {
    pub chosen: Vec<Candidate>,
    pub rerank: RerankDecision,
    pub rerank_ms: f64,
}

/// Steps 3 and 4 above: the `k` fragments of `search`'s pool shown in full.
pub async fn choose_shown(search: &SearchResult, plan: RerankPlan<'_>, k: usize) -> Shown {
    let fusion_order = || search.candidates.iter().take(k).cloned().collect::<Vec<_>>();
    let started = Instant::now();
    let (mut chosen, rerank) = match plan {
        RerankPlan::Off => (fusion_order(), RerankDecision::Skipped(RerankSkip::Disabled)),
        RerankPlan::NoTime(skip) => {
            tracing::debug!(?skip, "rerank skipped: no time for it at this machine's speed");
            (fusion_order(), RerankDecision::Skipped(skip))
        }
        RerankPlan::Run { chat, annotations, timeout } => {
            rerank_by_annotation(&search.search_query, &search.candidates, annotations, chat, k, timeout).await
        }
    };
    let rerank_ms = started.elapsed().as_secs_f64() * 1000.0;
    let named = &search.time.named_sessions;
    super::time::keep_named_sessions(&mut chosen, &search.candidates, named, k, |candidate: &Candidate| {
        (candidate.fragment_id, candidate.session)
    });
    chosen.sort_by_key(|candidate| !candidate.session.is_some_and(|session| named.contains(&session)));
    Shown { chosen, rerank, rerank_ms }
}
