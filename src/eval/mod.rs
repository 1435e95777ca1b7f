//! Evaluation: a question bank (`eval/questions.jsonl`, see `eval/README.md`) run against one
//! campaign's index, every variant of the pipeline side by side.
//!
//! Per question, as a player:
//! - each retrieval path alone, each pair, the three fused (rerank off) and the full pipeline
//!   (rerank on): expected labels in the pool, in the k chosen, in the context shown in full
//!   and with the one-line summaries ([`score::Found`]);
//! - the naive baseline (fixed 300-word windows, dense only, top k; [`baseline`]);
//! - with a chat model, the full pipeline's answer: citations checked, abstention, key facts.
//!
//! [`bank`] reads the questions, [`score`] turns rows into the report (pure, tested without an
//! index); this module only runs things.

pub mod bank;
pub mod baseline;
pub mod compare;
pub mod judged;
mod quoted;
pub mod score;

use crate::corpus::FragmentId;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use tracing::Instrument;

use crate::answer::AnswerStyle;
use crate::index::Index;
use crate::oracle::{
    AnswerEvent, AnswerOptions, AnswerTimings, AskRequest, Oracle, Pipeline, Preparation, Prepared, Settled, Writer,
};
use crate::retrieve::bm25::Bm25Scoring;
use crate::retrieve::rerank::RerankDecision;
use crate::retrieve::{Audience, PathSet, RetrievalPath};

pub use bank::{EvalQuestion, FromPlay, QuestionKind, load_bank};
pub use baseline::{BASELINE_WINDOW_WORDS, Baseline};
pub use score::{
    EvalReport, FULL_PIPELINE, FUSION_ONLY, Found, NAIVE_BASELINE, NAIVE_DENSE, QuestionRow, RunInfo, WITHOUT_TIME,
};

/// Which questions get an answer generated and scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerScope {
    /// Retrieval (and the rerank) only.
    None,
    /// Every question.
    All,
    /// The first `n` questions of each kind, in bank order: a small CPU model needs minutes
    /// per answer (a ~7,500-token context), so a sample of every kind is what fits.
    PerKind(usize),
}

/// What a run includes.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Which questions are answered (the chat model; minutes per answer on a CPU).
    pub answers: AnswerScope,
    /// Run the path ablations and the naive baseline as well as the full pipeline.
    pub ablations: bool,
    /// Texts per embedding call for the baseline's windows.
    pub batch_size: usize,
    /// A folder where the baseline's window vectors are kept between runs, keyed by the
    /// embedder and the windows' text (a 159-episode campaign costs as much to embed again
    /// as its ingest). `None`: embed every run.
    pub baseline_cache: Option<std::path::PathBuf>,
}

/// The path ablations, in the order the table prints them (the three fused is `FUSION_ONLY`),
/// then the BM25 path and the fusion with each other way of scoring BM25 (by passages).
fn path_variants() -> Vec<PathSet> {
    use RetrievalPath::{Bm25, Dense, Entity};
    let mut variants: Vec<PathSet> =
        [vec![Dense], vec![Bm25], vec![Entity], vec![Dense, Bm25], vec![Dense, Entity], vec![Bm25, Entity]]
            .iter()
            .map(|paths| PathSet::only(paths))
            .collect();
    for scoring in Bm25Scoring::ALL.into_iter().filter(|scoring| *scoring != crate::retrieve::bm25::BM25_SCORING) {
        variants.push(PathSet::only(&[Bm25]).scoring_bm25_by(scoring));
        variants.push(PathSet::ALL.scoring_bm25_by(scoring));
    }
    variants
}

/// Each path's list for the full pipeline's search, as `label#part` best first, with the
/// BM25 path scored every way: what a fusion rule can be tried on without searching again.
fn path_lists(index: &Index, prepared: &Prepared, depth: usize) -> anyhow::Result<score::PathLists> {
    let search = &prepared.search;
    let mut lists: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut weights: BTreeMap<String, f64> = BTreeMap::new();
    let named = |ids: &[FragmentId]| -> anyhow::Result<Vec<String>> {
        let heads = index.store.fragment_heads(ids)?;
        Ok(heads.into_iter().map(|head| format!("{}#{}", head.label, head.part)).collect())
    };
    for (path, weight, ids) in &search.diagnostics.lists {
        lists.insert(path.as_str().to_string(), named(ids)?);
        weights.insert(path.as_str().to_string(), *weight);
    }
    for scoring in Bm25Scoring::ALL {
        let hits = crate::retrieve::bm25::search_bm25(
            &index.store,
            &search.search_query,
            Audience::Player.visibility_filter(),
            depth,
            scoring,
        )?;
        lists.insert(format!("bm25 by {}", scoring.as_str()), named(&hits.ids)?);
    }
    let pool = search.candidates.iter().map(|c| format!("{}#{}", c.label, c.part)).collect();
    Ok(score::PathLists {
        lists,
        weights,
        named_sessions: search.time.named_sessions.iter().map(|session| session.0).collect(),
        arc: search.diagnostics.entity_path.as_ref().is_some_and(|evidence| evidence.arc),
        pool,
    })
}

/// Where `expected` shows up in what was prepared.
fn found_in(expected: &[&str], prepared: &Prepared) -> Found {
    let pool = prepared.search.candidates.iter().map(|c| c.label.as_str());
    let full = prepared.context.full.iter().map(|f| f.label.as_str());
    let summaries = prepared.context.summaries.iter().map(|s| s.label.as_str());
    Found {
        pool: score::labels_found(expected, pool),
        top: score::labels_found(expected, prepared.chosen.iter().map(|c| c.label.as_str())),
        full: score::labels_found(expected, full.clone()),
        context: score::labels_found(expected, full.chain(summaries)),
        pool_size: prepared.search.candidates.len(),
    }
}

fn rerank_outcome(decision: &RerankDecision) -> String {
    match decision {
        RerankDecision::Applied { from_model } => format!("applied ({from_model} from the model)"),
        RerankDecision::Skipped(reason) => {
            let value = serde_json::to_value(reason).unwrap_or_default();
            format!("skipped: {}", value["reason"].as_str().unwrap_or("unknown"))
        }
    }
}

/// Runs the bank. A question the pipeline fails on becomes an error row; the run goes on.
/// `progress` is told each question as it starts (`n` of `total`).
pub async fn run_eval(
    oracle: &Oracle,
    bank: &[EvalQuestion],
    options: &EvalOptions,
    mut run: RunInfo,
    progress: &dyn Fn(usize, usize, &EvalQuestion),
) -> anyhow::Result<EvalReport> {
    let started = Instant::now();
    run.started_at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    run.embedder = oracle.notes().embedder().id().to_string();
    run.chat_model = oracle.chat().id().to_string();
    let index = oracle.notes().open_index().await?;
    let known: BTreeSet<String> = index.store.sources()?.into_iter().map(|source| source.label.into()).collect();
    let baseline = if options.ablations {
        let built = Baseline::build(
            &index,
            oracle.notes().embedder().as_ref(),
            options.batch_size,
            options.baseline_cache.as_deref(),
        )
        .await?;
        tracing::info!(windows = built.windows(), "eval: baseline built");
        Some(built)
    } else {
        None
    };

    let mut variant_order = vec![FULL_PIPELINE.to_string(), FUSION_ONLY.to_string(), WITHOUT_TIME.to_string()];
    if options.ablations {
        variant_order.extend(path_variants().into_iter().map(PathSet::name));
        variant_order.extend([NAIVE_BASELINE.to_string(), NAIVE_DENSE.to_string()]);
    }

    let mut rows = Vec::with_capacity(bank.len());
    let mut answered_of_kind: BTreeMap<QuestionKind, usize> = BTreeMap::new();
    for (n, question) in bank.iter().enumerate() {
        progress(n + 1, bank.len(), question);
        let answered = answered_of_kind.entry(question.kind).or_insert(0);
        let answer = match options.answers {
            AnswerScope::None => false,
            AnswerScope::All => true,
            AnswerScope::PerKind(limit) => *answered < limit,
        };
        *answered += usize::from(answer);
        let asked = eval_question(oracle, &index, baseline.as_ref(), question, answer, options.ablations);
        let row = match asked.instrument(tracing::info_span!("eval.question", id = %question.id)).await {
            Ok(mut row) => {
                row.unknown_labels =
                    question.expected.iter().filter(|label| !known.contains(*label)).cloned().collect();
                row
            }
            Err(error) => {
                tracing::warn!(question = %question.id, error = format!("{error:#}"), "eval: the pipeline failed");
                QuestionRow { error: Some(format!("{error:#}")), ..QuestionRow::unscored(question) }
            }
        };
        rows.push(row);
    }
    run.k = oracle.notes().k();
    run.seconds = started.elapsed().as_secs_f64();
    Ok(EvalReport::from_rows(run, &variant_order, rows))
}

/// Answers `request` through the one entry every front end calls, read as `preparation` says
/// and written by `writer`, keeping what was prepared, in order (the fusion's choice first;
/// the rerank's, when it chose again, last).
async fn answer_recording(
    oracle: &Oracle,
    request: &AskRequest<'_>,
    preparation: Preparation,
    writer: Writer,
) -> anyhow::Result<(Settled, Vec<Prepared>)> {
    let seen = std::sync::Mutex::new(Vec::new());
    let on_event = |event: AnswerEvent<'_>| {
        if let (AnswerEvent::Prepared(prepared), Ok(mut seen)) = (event, seen.lock()) {
            seen.push(prepared.clone());
        }
    };
    let options = AnswerOptions { writer, ..AnswerOptions::new(&on_event).prepared_as(preparation) };
    let settled = oracle.answer(request, options).await?;
    Ok((settled, seen.into_inner().unwrap_or_default()))
}

/// What the notes read as `preparation` says give the model, the answer left to the notes
/// alone (no model, nothing embedded): what a retrieval variant scores.
async fn read_as(oracle: &Oracle, request: &AskRequest<'_>, preparation: Preparation) -> anyhow::Result<Prepared> {
    let (_, mut seen) = answer_recording(oracle, request, preparation, Writer::NotesAlone).await?;
    seen.pop().ok_or_else(|| anyhow::anyhow!("the answer prepared nothing"))
}

async fn eval_question(
    oracle: &Oracle,
    index: &Index,
    baseline: Option<&Baseline>,
    question: &EvalQuestion,
    answer: bool,
    ablations: bool,
) -> anyhow::Result<QuestionRow> {
    let expected = question.expected_labels();
    let request = AskRequest { question: &question.question, history: &question.history, audience: Audience::Player };
    let mut variants = BTreeMap::new();

    // The full pipeline, timed as a player would wait for it: answered through the one entry
    // every front end calls, what it prepared kept for scoring (the fusion's choice first; the
    // rerank's, when it chose again, last).
    let full_started = Instant::now();
    let (full, fusion, settled) = if answer {
        let (settled, mut seen) =
            answer_recording(oracle, &request, Preparation::default(), Writer::AsConfigured).await?;
        if let (None, Some(failure)) = (&settled.model, &settled.model_failure) {
            anyhow::bail!("the model's answer failed: {failure}");
        }
        let full = seen.pop().ok_or_else(|| anyhow::anyhow!("the answer prepared nothing"))?;
        (full, seen.pop(), Some(settled))
    } else {
        (read_as(oracle, &request, Preparation::default()).await?, None, None)
    };
    variants.insert(FULL_PIPELINE.to_string(), found_in(&expected, &full));
    let mut timings = AnswerTimings::before_generation(&full);
    if let Some(model) = settled.as_ref().and_then(|settled| settled.model.as_ref()) {
        timings.generation_ms = model.timings.generation_ms;
    }
    timings.total_ms = full_started.elapsed().as_secs_f64() * 1000.0;

    // The same pool with the rerank off (no second search): what the instant answer quotes.
    let fusion = match fusion {
        Some(fusion) => fusion,
        None => {
            let pipeline = Pipeline { rerank: false, ..Pipeline::default() };
            read_as(oracle, &request, Preparation { pipeline, pool: Some(full.search.clone()) }).await?
        }
    };
    variants.insert(FUSION_ONLY.to_string(), found_in(&expected, &fusion));
    let answer = match settled {
        Some(settled) => {
            let mut score = score_answer(oracle, question, &expected, &full, &settled);
            // What the player reads quotes, each checked against its note.
            score.quotes = settled.answer.quoted.len();
            score.misquoted = quoted::misquoted(index, &settled.answer.quoted)?;
            Some(score)
        }
        None => None,
    };

    // The time variant: the full pipeline with the time path off.
    let without_time = Pipeline { paths: PathSet::ALL.without_time(), rerank: true };
    let untimed = read_as(oracle, &request, Preparation { pipeline: without_time, pool: None }).await?;
    variants.insert(WITHOUT_TIME.to_string(), found_in(&expected, &untimed));
    if ablations {
        for paths in path_variants() {
            let pipeline = Pipeline { paths, rerank: false };
            let prepared = read_as(oracle, &request, Preparation { pipeline, pool: None }).await?;
            variants.insert(paths.name(), found_in(&expected, &prepared));
        }
    }
    let mut naive_windows = None;
    if let Some(baseline) = baseline {
        let hits = baseline.search(oracle.notes().embedder().as_ref(), &question.question, oracle.notes().k()).await?;
        for (variant, labels) in [(NAIVE_BASELINE, &hits.hybrid), (NAIVE_DENSE, &hits.dense)] {
            let top = score::labels_found(&expected, labels.iter().map(String::as_str));
            let found =
                Found { pool: top.clone(), top: top.clone(), full: top.clone(), context: top, pool_size: labels.len() };
            variants.insert(variant.to_string(), found);
        }
        naive_windows = Some(hits.hybrid_windows);
    }

    // Unanswerable questions list no key facts, and the summary counts answerable ones only.
    let material =
        score::MaterialFacts::new(question, &full.context.text, full.plan.limited_by, full.plan.material_tokens);
    // Naive RAG's windows given the same budget, counted by the same model's tokens.
    let naive_material = naive_windows.and_then(|windows| {
        let count_tokens = |text: &str| oracle.chat().count_tokens(text);
        let text = baseline::material_within(&windows, full.plan.material_tokens, &count_tokens);
        score::MaterialFacts::new(question, &text, full.plan.limited_by, full.plan.material_tokens)
    });
    let paths = path_lists(index, &full, crate::retrieve::path_depth(oracle.notes().k()))?;
    Ok(QuestionRow {
        variants,
        paths: Some(paths),
        material,
        naive_material,
        search_query: full.search.search_query.clone(),
        rerank: Some(rerank_outcome(&full.rerank)),
        answer,
        timings: Some(timings),
        ..QuestionRow::unscored(question)
    })
}
/// What a player reads once the model is done, scored: its answer with the notes' sentences
/// shown first that it did not say, or those sentences when it could not answer; a quoted
/// answer as quoted.
fn score_answer(
    oracle: &Oracle,
    question: &EvalQuestion,
    expected: &[&str],
    full: &Prepared,
    settled: &crate::oracle::Settled,
) -> score::AnswerScore {
    let stays = &settled.answer;
    let answer = settled.model.as_ref().unwrap_or(stays);
    // Citations are distinct per label already (`answer::validate_citations`).
    let valid = stays.citations.iter().filter(|citation| citation.valid).map(|c| c.label.clone()).collect();
    let mut score = score::AnswerScore::new(question, &stays.text, valid, stays.invented_citations.clone());
    score.model_key_facts_found = Some(score::key_facts_in(question, &answer.text).0);
    score.settled = Some(score::SettledAs::of(settled));
    (score.mode, score.fallback) = (Some(answer.mode), answer.fallback.clone());
    score.cut_short = answer.cut_short.is_some();
    (score.model_sentences, score.recited, score.dropped) =
        (answer.model_sentences, answer.recited.len(), answer.ungrounded.len());
    // Quotes are chosen from every chosen fragment; a model reads those shown in full.
    let quoted = oracle.settings().style == AnswerStyle::Quotes;
    let answer_shown = if quoted {
        expected.iter().any(|label| full.chosen.iter().any(|chosen| chosen.label == *label))
    } else {
        expected.iter().any(|label| answer.fragments_shown.iter().any(|shown| shown.label == *label))
    };
    if quoted {
        // A quote that says «no» is the note's, not the answer's: a quoted answer abstains
        // when it quotes nothing.
        score.abstained = answer.quoted.is_empty();
        score.nearest_only = answer.nearest_only;
    }
    score.abstained_with_answer_shown =
        question.kind != bank::QuestionKind::Unanswerable && score.abstained && answer_shown;
    // A quoted answer's time is the whole answer's (no model writes it).
    let spent_ms = if quoted { answer.timings.total_ms } else { answer.timings.generation_ms };
    score.seconds = Some(spent_ms / 1000.0);
    if quoted {
        score.key_facts_in_candidates = Some(score::key_facts_in(question, &full.quotable_text()).0);
    }
    score.budget_seconds = answer.context_plan.answer_seconds;
    if question.kind == bank::QuestionKind::Chronology {
        // The model's own order: the sentences kept under it follow the notes'.
        let cited: Vec<_> = answer.citations.iter().filter(|c| c.valid).map(|c| (c.label.clone(), c.session)).collect();
        score.story_order = score::cited_in_story_order(&answer.text, &cited);
    }
    score
}

/// The sample campaign's built-in bank (`crate::sample::SAMPLE_BANK`), read and checked like
/// any other.
pub fn sample_bank() -> anyhow::Result<Vec<EvalQuestion>> {
    bank::parse_and_check(crate::sample::SAMPLE_BANK)
}
