//! `oraculo search`: the fused candidate pool for a question, each path's rank beside it.

use super::SearchArgs;
use super::ask::read_history;
use crate::oracle::AskRequest;
use crate::retrieve::Audience;

pub(super) async fn search(args: &SearchArgs) -> anyhow::Result<()> {
    let config = args.campaign.load_config()?;
    let history = read_history(args.history.as_deref())?;
    // The bot's search, through the same notes (their checks: an empty question is refused, a
    // missing index is a message), with no chat model loaded.
    let notes = crate::app::open_searcher(&config, args.k).await?;
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    let result = notes.search(&AskRequest { question: &args.question, history: &history, audience }).await?;
    if args.campaign.json {
        println!("{}", serde_json::to_string(&result)?);
        return Ok(());
    }
    if result.followup_expanded {
        println!("Follow-up: searched as \"{}\"", result.search_query);
    }
    for missing in &result.missing_paths {
        println!("Searched without the {} path, which failed: {}", missing.path.as_str(), missing.error);
    }
    println!("Follow-up rule: {}", result.diagnostics.followup.reason);
    if !result.entities.is_empty() {
        let named: Vec<String> = result
            .entities
            .iter()
            .map(|e| match (&e.asked_as, e.similarity) {
                (Some(asked_as), Some(similarity)) => {
                    format!(
                        "{} [{}] as \"{}\", asked as \"{asked_as}\" (cosine {similarity:.3})",
                        e.name, e.kind, e.alias
                    )
                }
                _ => format!("{} [{}] as \"{}\"", e.name, e.kind, e.alias),
            })
            .collect();
        println!("Entities: {}", named.join("; "));
    }
    if let Some(evidence) = &result.diagnostics.entity_path {
        let shares: Vec<String> = evidence
            .entities
            .iter()
            .map(|e| format!("{} in {}/{} sessions, weight {:.2}", e.name, e.n_sessions, evidence.n_sessions, e.weight))
            .collect();
        let arc = if evidence.arc { " (arc question: full weight)" } else { "" };
        println!("Entity path weight {:.2}{arc}: {}", evidence.weight, shares.join("; "));
    }
    let terms = &result.diagnostics.bm25_terms;
    if terms.asked > 0 && terms.in_notes < terms.asked {
        println!(
            "BM25 weight {:.2}: the notes hold {} of the question's {} words (another language?)",
            terms.weight, terms.in_notes, terms.asked
        );
    }
    let rank = |r: Option<usize>| r.map(|r| r.to_string()).unwrap_or_else(|| "-".into());
    let width = result.candidates.iter().map(|c| c.label.chars().count()).max().unwrap_or(5).max(5);
    println!(
        "{:>3}  {:>5}  {:width$}  {:>5}  {:>5}  {:>6}  {:>4}  {:>7}  source",
        "#", "id", "label", "dense", "bm25", "entity", "time", "rrf"
    );
    for (position, candidate) in result.candidates.iter().enumerate() {
        println!(
            "{:>3}  {:>5}  {:width$}  {:>5}  {:>5}  {:>6}  {:>4}  {:>7.5}  {}",
            position + 1,
            candidate.fragment_id,
            candidate.label,
            rank(candidate.ranks.dense),
            rank(candidate.ranks.bm25),
            rank(candidate.ranks.entity),
            rank(candidate.ranks.time),
            candidate.rrf_score,
            candidate.source_path
        );
    }
    let t = &result.timings;
    println!(
        "\n{} candidates; embed {:.1} ms, dense {:.1} ms, bm25 {:.1} ms, entity {:.1} ms, time {:.2} ms, fuse {:.1} ms",
        result.candidates.len(),
        t.embed_query_ms,
        t.dense_ms,
        t.bm25_ms,
        t.entity_ms,
        t.time_ms,
        t.fuse_ms
    );
    if let Some(notice) = result.time.notice(false) {
        println!("{notice}");
    } else if result.time.is_active() {
        let sessions: Vec<String> = result.time.sessions.iter().map(|s| s.to_string()).collect();
        println!("Time: sessions {}", if sessions.is_empty() { "-".to_string() } else { sessions.join(", ") });
    }
    Ok(())
}
