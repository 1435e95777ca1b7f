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
//! The time a rerank may take is the caller's to decide (it knows the model's speed and the
//! answer's budget); this file only orders.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::corpus::FragmentId;
use crate::llm::chat::ChatModel;

use super::rerank::{RerankDecision, RerankSkip, rerank_by_annotation};
use super::{Candidate, SearchResult};

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
