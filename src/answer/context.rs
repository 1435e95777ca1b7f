//! What the model sees: the chosen fragments in full, then one-line summaries of what did
//! not fit, within a token budget.
//!
//! Two rules shape the summaries block, so that the leftover room brings new sessions and the
//! model knows how far to trust each line:
//! - one slot per session, not per fragment: two parts of one long session must not take two
//!   slots and push out a whole session that adds something new;
//! - the summaries are a separate, titled block, never mixed with the full material, so the
//!   model can tell "I have this in full, cite it with confidence" from "this is a headline".
//!
//! Both blocks are in story order: sessions by number, then character sheets and
//! world documents in the rerank's order; the titles say so, so that a before/after answer
//! reads the events in the order they happened instead of guessing it from the rerank's.

use std::collections::HashSet;

use serde::Serialize;

use crate::answer::arc::{ARC_MAX_ALIASES, ArcBlock, line_entry};
use crate::corpus::{FragmentId, Label, SessionNumber};

/// Fragments shown in full by default: the reranker's top 8 (`k`, `retrieve::DEFAULT_K`).
/// Measured on a 30-question bank, the union of the retrieval paths held the right source for 30 of
/// 30 questions; the best 8 after the rerank, for 28 of them (recall 0.93). `--k` changes it
/// end to end: every chosen fragment is shown in full while the budget allows, and summarised
/// when it does not.
pub const FULL_FRAGMENTS: usize = 8;
/// One-line summaries behind the full block. A session is ~1200 words and its annotation
/// ~38, so sixteen cost about half a session more, with no extra LLM call.
pub const MAX_SUMMARIES: usize = 16;

/// Name of the block of whole fragments; the answer prompt refers to it by this name.
pub const FULL_BLOCK_NAME: &str = "Fragmentos completos";
/// Name of the block of one-line summaries; the answer prompt refers to it by this name.
pub const SUMMARIES_BLOCK_NAME: &str = "Resúmenes";
/// Name of the block of an entity's story, one line per session; the answer prompt refers to
/// it by this name.
pub const ARC_BLOCK_NAME: &str = "Cronología";

/// What the material says when nothing was found: the model must then say the notes are
/// silent, which the answer prompt asks for.
pub const EMPTY_MATERIAL: &str = "(No hay material: las notas no tienen nada sobre esta pregunta.)";

/// One fragment offered to the context builder: a reranked choice or a pool leftover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFragment {
    pub fragment_id: FragmentId,
    /// The exact citation tag (`Sesión 12`, `Ficha: Baika`).
    pub label: Label,
    /// `None` for character sheets and world documents.
    pub session: Option<SessionNumber>,
    /// 0-based index among the fragments that share this label.
    pub part: u32,
    pub text: String,
    /// The cached one-or-two-sentence description, when there is one.
    pub annotation: Option<String>,
}

/// How much material the model can take, and how to count it.
///
/// `max_tokens` is for the material alone: the caller subtracts the system prompt, the
/// history, the question and the answer budget from the model's window first.
/// Costs are summed piece by piece (block titles, entries), which errs high if anything.
#[derive(Clone, Copy)]
pub struct ContextBudget<'a> {
    pub max_tokens: usize,
    pub count_tokens: &'a dyn Fn(&str) -> usize,
}

/// The material the answer prompt carries, and what it is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Context {
    /// The entity's story, one line per session, when the question asks about it across the
    /// campaign: the first block of `text`.
    pub arc: Option<ArcBlock>,
    /// Fragments shown whole, in the order they appear in `text` (story order).
    pub full: Vec<ShownFragment>,
    /// One-line summaries, in the order they appear in `text` (story order).
    pub summaries: Vec<ShownSummary>,
    /// The rendered material: the full block, then the summaries block.
    pub text: String,
    /// Every label the model may cite (full and summaries), each once, in order of
    /// appearance. What `validate_citations` checks against.
    pub shown_labels: Vec<String>,
    /// Chosen fragments that did not fit the budget (shown as summaries where they have an
    /// annotation and their session has no slot yet).
    pub dropped_for_budget: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShownFragment {
    pub fragment_id: FragmentId,
    pub label: Label,
    pub session: Option<SessionNumber>,
    pub part: u32,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShownSummary {
    pub fragment_id: FragmentId,
    pub label: Label,
    pub session: Option<SessionNumber>,
    /// The annotation on one line.
    pub summary: String,
    /// A chosen fragment demoted to a summary because the full block had no room for it.
    pub dropped_for_budget: bool,
}

/// Builds the material from an entity's story (`arc`, already sized by the caller: it is
/// shown first and whole), the reranked `chosen` fragments (best first, `k` of them: all
/// are used) and the `leftovers` of the fused pool (pool order).
///
/// Chosen fragments are kept whole while they fit; from the first that does not, the rest
/// become summary candidates ahead of the leftovers. A fragment's text is never cut.
/// Summaries: at most [`MAX_SUMMARIES`], one per session (per label for sheets and world
/// documents), none for a session or label already shown in full or in the story, none
/// without an annotation.
pub fn build_context(
    arc: Option<&ArcBlock>,
    chosen: &[ContextFragment],
    leftovers: &[ContextFragment],
    budget: ContextBudget<'_>,
) -> Context {
    let _span =
        tracing::debug_span!("answer.context", n_chosen = chosen.len(), n_leftovers = leftovers.len()).entered();
    let count = budget.count_tokens;
    let arc = arc.filter(|arc| !arc.lines.is_empty());
    let arc_text = arc.map(render_arc_block);

    let full_title = full_block_title();
    let mut used_tokens = arc_text.as_deref().map_or(0, count);
    let n_full = fit_in_full(chosen, &full_title, &mut used_tokens, budget);
    let (kept, dropped) = chosen.split_at(n_full);

    let full = group_parts(kept);
    let mut shown_in_full: HashSet<SlotKey<'_>> = kept.iter().map(slot_key).collect();
    // One slot per session: a session the story gives a line to gets no headline too.
    shown_in_full.extend(arc.iter().flat_map(|arc| arc.lines.iter().map(|line| SlotKey::Session(line.session))));

    let summaries_title = summaries_block_title();
    let mut summaries = pick_summaries(dropped, leftovers, &shown_in_full, &summaries_title, &mut used_tokens, budget);

    // Chosen by priority, shown in story order.
    summaries.sort_by_key(|summary| story_key(summary.session));
    let text = render_material(arc_text, &full_title, &full, kept, &summaries_title, &summaries);
    let shown_labels = labels_in_order(arc, &full, &summaries);
    let full = full
        .into_iter()
        .map(|fragment| ShownFragment {
            fragment_id: fragment.fragment_id,
            label: fragment.label.clone(),
            session: fragment.session,
            part: fragment.part,
            text: fragment.text.clone(),
        })
        .collect();
    tracing::debug!(
        n_full = n_full,
        n_summaries = summaries.len(),
        n_dropped = dropped.len(),
        used_tokens,
        "context built"
    );
    Context { arc: arc.cloned(), full, summaries, text, shown_labels, dropped_for_budget: dropped.len() }
}

/// How many of the `chosen` fragments, best first, fit whole (with the full block's title)
/// after `used_tokens`, which grows by what they cost.
fn fit_in_full(
    chosen: &[ContextFragment],
    full_title: &str,
    used_tokens: &mut usize,
    budget: ContextBudget<'_>,
) -> usize {
    let count = budget.count_tokens;
    let mut n_full = 0;
    for fragment_idx in 0..chosen.len() {
        let mut cost = count(&full_entry(&chosen[fragment_idx], chosen));
        if fragment_idx == 0 {
            cost += count(full_title);
        }
        if *used_tokens + cost > budget.max_tokens {
            break;
        }
        *used_tokens += cost;
        n_full = fragment_idx + 1;
    }
    n_full
}

/// The summaries that fit after `used_tokens`: the `dropped` chosen fragments first, then
/// the pool's `leftovers`, one per slot not already shown in full, in priority order.
fn pick_summaries<'a>(
    dropped: &'a [ContextFragment],
    leftovers: &'a [ContextFragment],
    shown_in_full: &HashSet<SlotKey<'a>>,
    summaries_title: &str,
    used_tokens: &mut usize,
    budget: ContextBudget<'_>,
) -> Vec<ShownSummary> {
    let count = budget.count_tokens;
    let summaries_title_tokens = count(summaries_title);
    let mut taken_slots: HashSet<SlotKey<'a>> = HashSet::new();
    let mut summaries: Vec<ShownSummary> = Vec::new();
    let demoted = dropped.iter().map(|fragment| (fragment, true));
    let pool = leftovers.iter().map(|fragment| (fragment, false));
    for (fragment, dropped_for_budget) in demoted.chain(pool) {
        if summaries.len() == MAX_SUMMARIES {
            break;
        }
        let Some(summary) = fragment.annotation.as_deref().map(one_line).filter(|summary| !summary.is_empty()) else {
            continue;
        };
        let key = slot_key(fragment);
        if shown_in_full.contains(&key) || taken_slots.contains(&key) {
            continue;
        }
        let mut cost = count(&summary_entry(&fragment.label, &summary));
        if summaries.is_empty() {
            cost += summaries_title_tokens;
        }
        if *used_tokens + cost > budget.max_tokens {
            // A longer headline than the rest; a later, shorter one may still fit.
            continue;
        }
        *used_tokens += cost;
        taken_slots.insert(key);
        summaries.push(ShownSummary {
            fragment_id: fragment.fragment_id,
            label: fragment.label.clone(),
            session: fragment.session,
            summary,
            dropped_for_budget,
        });
    }
    summaries
}

/// The material's text: the story, the full block, the summaries block, each titled.
fn render_material(
    arc_text: Option<String>,
    full_title: &str,
    full: &[&ContextFragment],
    kept: &[ContextFragment],
    summaries_title: &str,
    summaries: &[ShownSummary],
) -> String {
    let mut blocks: Vec<String> = Vec::new();
    blocks.extend(arc_text);
    if !full.is_empty() {
        let entries: Vec<String> = full.iter().map(|&fragment| full_entry(fragment, kept)).collect();
        blocks.push(format!("{full_title}\n\n{}", entries.join("\n\n")));
    }
    if !summaries.is_empty() {
        let entries: Vec<String> =
            summaries.iter().map(|summary| summary_entry(&summary.label, &summary.summary)).collect();
        blocks.push(format!("{summaries_title}\n\n{}", entries.join("\n")));
    }
    if blocks.is_empty() { EMPTY_MATERIAL.to_string() } else { blocks.join("\n\n") }
}

/// Every label shown (story, full, summaries), each once, in order of appearance.
fn labels_in_order(arc: Option<&ArcBlock>, full: &[&ContextFragment], summaries: &[ShownSummary]) -> Vec<String> {
    let mut shown_labels: Vec<String> = Vec::new();
    let arc_labels = arc.iter().flat_map(|arc| arc.lines.iter().map(|line| &line.label));
    let labels = arc_labels
        .chain(full.iter().map(|fragment| &fragment.label))
        .chain(summaries.iter().map(|summary| &summary.label));
    for label in labels {
        if !shown_labels.iter().any(|shown| shown == label) {
            shown_labels.push(label.to_string());
        }
    }
    shown_labels
}

/// The story block as the model reads it: its title naming the entity, one line per entry.
pub fn render_arc_block(arc: &ArcBlock) -> String {
    let lines: Vec<String> = arc.lines.iter().map(|line| line_entry(&line.label, &line.text)).collect();
    format!("{}\n\n{}", arc_block_title(&arc.entity, &arc.aliases), lines.join("\n"))
}

/// What a summary slot is keyed by: the session, or the label when there is none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum SlotKey<'a> {
    Session(SessionNumber),
    Label(&'a str),
}

fn slot_key(fragment: &ContextFragment) -> SlotKey<'_> {
    match fragment.session {
        Some(session) => SlotKey::Session(session),
        None => SlotKey::Label(&fragment.label),
    }
}

fn full_block_title() -> String {
    format!(
        "== {FULL_BLOCK_NAME}: notas enteras, cítalas con confianza; en orden de campaña \
         (sesiones por número, fichas y mundo al final) =="
    )
}

fn arc_block_title(entity: &str, aliases: &[String]) -> String {
    let also = {
        // A part of the name («Leandro» of «Leandro de Valdemora») says nothing new.
        let name = crate::text::fold(entity);
        let shown: Vec<&str> = aliases
            .iter()
            .filter(|alias| !name.split(' ').any(|word| word == crate::text::fold(alias)))
            .take(ARC_MAX_ALIASES)
            .map(String::as_str)
            .collect();
        if shown.is_empty() { String::new() } else { format!(" (otros nombres: {})", shown.join(", ")) }
    };
    format!(
        "== {ARC_BLOCK_NAME} de {entity}{also}: una frase de cada sesión en que aparece, copiada de sus notas, \
         en orden de campaña; cítala por la etiqueta de su sesión =="
    )
}

fn summaries_block_title() -> String {
    format!(
        "== {SUMMARIES_BLOCK_NAME}: titulares de una línea de notas que no cupieron enteras; \
         no son pasajes para citar en detalle; en orden de campaña =="
    )
}

/// Where a fragment goes in story order: sessions by number, then everything without one
/// (a stable sort keeps those in the order they were chosen).
fn story_key(session: Option<SessionNumber>) -> (bool, Option<SessionNumber>) {
    (session.is_none(), session)
}

/// One whole fragment under its label, as the model must cite it. The part marker sits
/// outside the brackets so that it is not copied into citations; it is shown when the
/// fragment is not the first part of its label or when several parts of it are shown.
fn full_entry(fragment: &ContextFragment, shown: &[ContextFragment]) -> String {
    let n_parts_shown = shown.iter().filter(|other| other.label == fragment.label).count();
    let header = if fragment.part > 0 || n_parts_shown > 1 {
        format!("### [{}] (parte {})", fragment.label, fragment.part + 1)
    } else {
        format!("### [{}]", fragment.label)
    };
    format!("{header}\n{}", fragment.text.trim_end())
}

fn summary_entry(label: &str, summary: &str) -> String {
    format!("- [{label}] {summary}")
}

/// The fragments in story order: sessions by number, then sheets and world documents by first
/// appearance of their label (rerank order); the parts of one label together and in part order.
fn group_parts(fragments: &[ContextFragment]) -> Vec<&ContextFragment> {
    let mut labels: Vec<&str> = Vec::new();
    let mut sessions: Vec<Option<SessionNumber>> = Vec::new();
    for fragment in fragments {
        if !labels.contains(&fragment.label.as_str()) {
            labels.push(&fragment.label);
            sessions.push(fragment.session);
        }
    }
    let mut order: Vec<usize> = (0..labels.len()).collect();
    order.sort_by_key(|&idx| story_key(sessions[idx]));
    let labels: Vec<&str> = order.into_iter().map(|idx| labels[idx]).collect();
    let mut grouped: Vec<&ContextFragment> = Vec::with_capacity(fragments.len());
    for label in labels {
        let mut parts: Vec<&ContextFragment> = fragments.iter().filter(|fragment| fragment.label == label).collect();
        parts.sort_by_key(|fragment| fragment.part);
        grouped.extend(parts);
    }
    grouped
}

/// An annotation on one line, whitespace collapsed.
fn one_line(annotation: &str) -> String {
    annotation.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fragment from a compact spec: `"S12#1 words… | annotation"` is part 1 of session
    /// 12 (label `Sesión 12`); `"Ficha: Baika | …"` a sheet; no `|` means no annotation. The
    /// text is `words` repeated, so a budget in words can be set precisely.
    fn fragment(fragment_id: i64, spec: &str) -> ContextFragment {
        let (head, annotation) = match spec.split_once(" | ") {
            Some((head, annotation)) => (head, Some(annotation.to_string())),
            None => (spec, None),
        };
        let (head, text) = head.split_once(' ').unwrap_or((head, "texto"));
        let (label, part) = match head.split_once('#') {
            Some((label, part)) => (label, part.parse().expect("part is a number")),
            None => (head, 0),
        };
        let (label, session) = match label.strip_prefix('S').and_then(|number| number.parse().ok()) {
            Some(number) => (format!("Sesión {number}"), Some(SessionNumber(number))),
            None => (label.replace('_', " "), None),
        };
        ContextFragment {
            fragment_id: FragmentId(fragment_id),
            label: Label::new(label),
            session,
            part,
            text: text.to_string(),
            annotation,
        }
    }

    fn word_count(text: &str) -> usize {
        text.split_whitespace().count()
    }

    /// Builds the context with a budget of `max_words` words and compares a compact
    /// rendering: one line per full fragment (`full <label>#<part>`), per summary
    /// (`summary <label>` plus ` (dropped)` when demoted for budget), then `dropped N`.
    /// Also checks the invariants every context must hold: full texts are never cut, the
    /// summaries block is titled and separate, each label cited appears in `shown_labels`.
    fn check(chosen: &[&str], leftovers: &[&str], max_words: usize, expect: &str) -> Context {
        let chosen: Vec<ContextFragment> =
            chosen.iter().enumerate().map(|(idx, spec)| fragment(idx as i64, spec)).collect();
        let leftovers: Vec<ContextFragment> =
            leftovers.iter().enumerate().map(|(idx, spec)| fragment(100 + idx as i64, spec)).collect();
        let budget = ContextBudget { max_tokens: max_words, count_tokens: &word_count };
        let context = build_context(None, &chosen, &leftovers, budget);

        let mut lines: Vec<String> = Vec::new();
        for shown in &context.full {
            lines.push(format!("full {}#{}", shown.label, shown.part));
        }
        for summary in &context.summaries {
            let dropped = if summary.dropped_for_budget { " (dropped)" } else { "" };
            lines.push(format!("summary {}{dropped}", summary.label));
        }
        lines.push(format!("dropped {}", context.dropped_for_budget));
        assert_eq!(lines.join("\n"), expect.trim(), "\n{}", context.text);

        assert!(word_count(&context.text) <= max_words.max(word_count(EMPTY_MATERIAL)), "{}", context.text);
        for shown in &context.full {
            let original = chosen.iter().find(|fragment| fragment.fragment_id == shown.fragment_id);
            assert_eq!(shown.text, original.expect("shown came from chosen").text);
            assert!(context.text.contains(&shown.text), "{} cut", shown.label);
        }
        let full_at = context.text.find(FULL_BLOCK_NAME);
        let summaries_at = context.text.find(SUMMARIES_BLOCK_NAME);
        assert_eq!(full_at.is_some(), !context.full.is_empty());
        assert_eq!(summaries_at.is_some(), !context.summaries.is_empty());
        if let (Some(full_at), Some(summaries_at)) = (full_at, summaries_at) {
            let last_full = context.full.last().expect("full is not empty");
            let last_full_at = context.text.find(&last_full.text).expect("full text shown");
            assert!(full_at < last_full_at && last_full_at < summaries_at, "summaries mixed into the full block");
        }
        for label in context.full.iter().map(|shown| &shown.label).chain(context.summaries.iter().map(|s| &s.label)) {
            assert!(context.shown_labels.iter().any(|shown| shown == label));
            assert!(context.text.contains(&format!("[{label}]")));
        }
        context
    }

    const ROOMY: usize = 10_000;

    #[test]
    fn one_slot_per_session() {
        check(
            &["S1 | uno"],
            &["S4#0 | cuarta, primera mitad", "S4#1 | cuarta, segunda mitad", "S5 | quinta", "Ficha:_Baika | ficha"],
            ROOMY,
            "
full Sesión 1#0
summary Sesión 4
summary Sesión 5
summary Ficha: Baika
dropped 0",
        );
    }

    #[test]
    fn no_summary_for_a_session_shown_in_full() {
        check(
            &["S2#0 | segunda", "Ficha:_Baika | ficha"],
            &["S2#1 | segunda, otra parte", "Ficha:_Baika#1 | ficha otra vez", "S3 | tercera"],
            ROOMY,
            "
full Sesión 2#0
full Ficha: Baika#0
summary Sesión 3
dropped 0",
        );
    }

    #[test]
    fn leftovers_without_annotation_get_no_slot() {
        check(
            &["S1 | uno"],
            &["S2", "S3 |    ", "S4 | cuarta"],
            ROOMY,
            "
full Sesión 1#0
summary Sesión 4
dropped 0",
        );
    }

    #[test]
    fn at_most_the_limits_and_k_is_one_knob() {
        // Ten chosen (`--k 10`): all ten in full where the budget allows, none lost
        // (the ninth and tenth are neither dropped nor left unsummarised); the summaries stop at
        // their limit.
        let chosen: Vec<String> = (1..=10).map(|session| format!("S{session} | a")).collect();
        let leftovers: Vec<String> = (11..=40).map(|session| format!("S{session} | a")).collect();
        let chosen: Vec<&str> = chosen.iter().map(String::as_str).collect();
        let leftovers: Vec<&str> = leftovers.iter().map(String::as_str).collect();
        let context = check(&chosen, &leftovers, ROOMY, &{
            let full = (1..=10).map(|session| format!("full Sesión {session}#0"));
            let summaries = (11..=26).map(|session| format!("summary Sesión {session}"));
            full.chain(summaries).chain(["dropped 0".to_string()]).collect::<Vec<_>>().join("\n")
        });
        assert_eq!(context.full.len(), 10);
        assert_eq!(context.summaries.len(), MAX_SUMMARIES);
        // Without room for them, the chosen that do not fit are summarised first.
        let words = vec!["palabra"; 40].join(" ");
        let chosen: Vec<ContextFragment> =
            (1..=10).map(|session| fragment(session, &format!("S{session} {words} | resumen {session}"))).collect();
        let leftovers: Vec<ContextFragment> =
            leftovers.iter().enumerate().map(|(idx, spec)| fragment(100 + idx as i64, spec)).collect();
        let tight = ContextBudget { max_tokens: 233, count_tokens: &word_count };
        let context = build_context(None, &chosen, &leftovers, tight);
        assert!(context.full.len() < 10, "{}", context.text);
        let demoted: Vec<&ShownSummary> = context.summaries.iter().filter(|s| s.dropped_for_budget).collect();
        assert!(!demoted.is_empty() && demoted.len() <= 10 - context.full.len(), "{}", context.text);
    }

    #[test]
    fn parts_of_one_label_are_grouped_and_marked() {
        // Story order: Sesión 3 before Sesión 7 whatever the rerank's order.
        let context = check(
            &["S7#1 segunda_mitad", "S3 tercera", "S7#0 primera_mitad"],
            &[],
            ROOMY,
            "
full Sesión 3#0
full Sesión 7#0
full Sesión 7#1
dropped 0",
        );
        assert!(context.text.contains("### [Sesión 7] (parte 1)\nprimera_mitad"), "{}", context.text);
        assert!(context.text.contains("### [Sesión 7] (parte 2)\nsegunda_mitad"), "{}", context.text);
        assert!(context.text.contains("### [Sesión 3]\ntercera"), "{}", context.text);
        assert_eq!(context.shown_labels, ["Sesión 3", "Sesión 7"]);
    }

    #[test]
    fn fragments_and_summaries_are_in_story_order() {
        let context = check(
            &["Ficha:_Baika ficha", "S12 doce", "Mundo:_Dioses dioses", "S3 tres", "S40 cuarenta"],
            &["S9 | nueve", "Ficha:_Odo | odo", "S2 | dos", "S31 | treinta y una"],
            ROOMY,
            "
full Sesión 3#0
full Sesión 12#0
full Sesión 40#0
full Ficha: Baika#0
full Mundo: Dioses#0
summary Sesión 2
summary Sesión 9
summary Sesión 31
summary Ficha: Odo
dropped 0",
        );
        assert_eq!(
            context.shown_labels,
            [
                "Sesión 3",
                "Sesión 12",
                "Sesión 40",
                "Ficha: Baika",
                "Mundo: Dioses",
                "Sesión 2",
                "Sesión 9",
                "Sesión 31",
                "Ficha: Odo"
            ]
        );
        let at = |text: &str| context.text.find(text).expect("shown");
        assert!(at("### [Sesión 3]") < at("### [Sesión 12]") && at("### [Sesión 12]") < at("### [Sesión 40]"));
        assert!(
            at("### [Sesión 40]") < at("### [Ficha: Baika]") && at("### [Ficha: Baika]") < at("### [Mundo: Dioses]")
        );
        assert!(context.text.contains("en orden de campaña"), "{}", context.text);
    }

    #[test]
    fn the_story_comes_first_its_sessions_are_citable_and_get_no_headline() {
        let line = |session: u32, text: &str, best: bool| crate::answer::arc::ArcLine {
            session: SessionNumber(session),
            label: Label::new(format!("Sesión {session}")),
            fragment_id: FragmentId(i64::from(session)),
            source_path: format!("Sesiones/{session}.md"),
            text: text.to_string(),
            best,
        };
        let arc = ArcBlock {
            entity: "Leandro de Valdemora".into(),
            aliases: vec!["Leandro".into(), "el Archiduque".into()],
            lines: vec![line(1, "Leandro los contrata.", true), line(9, "Leandro desaparece.", true)],
            sessions_left_out: 0,
        };
        let chosen = [fragment(1, "S9 nueve")];
        let leftovers = [fragment(100, "S1 | uno"), fragment(101, "S4 | cuatro")];
        let budget = ContextBudget { max_tokens: ROOMY, count_tokens: &word_count };
        let context = build_context(Some(&arc), &chosen, &leftovers, budget);
        assert!(
            context.text.starts_with(
                "== Cronología de Leandro de Valdemora (otros nombres: el Archiduque): una frase de cada sesión"
            ),
            "the story first, titled with the names that are not part of the name: {}",
            context.text
        );
        assert!(context.text.contains("- [Sesión 1] Leandro los contrata.\n- [Sesión 9] Leandro desaparece."));
        // Story, then full, then summaries: Sesión 1 has its story line, so no headline.
        let summaries: Vec<&str> = context.summaries.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(summaries, ["Sesión 4"]);
        assert_eq!(context.shown_labels, ["Sesión 1", "Sesión 9", "Sesión 4"]);
        assert_eq!(context.arc.as_ref().map(|arc| arc.lines.len()), Some(2));
        // The story's cost counts against the budget: with room for it alone, nothing else.
        let story_only = word_count(&render_arc_block(&arc));
        let tight = ContextBudget { max_tokens: story_only, count_tokens: &word_count };
        let context = build_context(Some(&arc), &chosen, &leftovers, tight);
        assert!(context.full.is_empty() && context.summaries.is_empty(), "{}", context.text);
        assert_eq!(context.shown_labels, ["Sesión 1", "Sesión 9"]);
        // An empty story is no block.
        let empty = ArcBlock { lines: Vec::new(), ..arc };
        let context = build_context(Some(&empty), &chosen, &[], budget);
        assert!(context.arc.is_none() && !context.text.contains(ARC_BLOCK_NAME), "{}", context.text);
    }

    #[test]
    fn summaries_block_is_separate_and_titled() {
        let context = check(
            &["S1 texto_uno | uno"],
            &["S2 | la segunda\n  en dos líneas"],
            ROOMY,
            "
full Sesión 1#0
summary Sesión 2
dropped 0",
        );
        let expect = format!(
            "{}\n\n### [Sesión 1]\ntexto_uno\n\n{}\n\n- [Sesión 2] la segunda en dos líneas",
            full_block_title(),
            summaries_block_title()
        );
        assert_eq!(context.text, expect);
        assert_eq!(context.shown_labels, ["Sesión 1", "Sesión 2"]);
    }

    /// Words the two block titles take.
    fn title_words() -> (usize, usize) {
        (word_count(&full_block_title()), word_count(&summaries_block_title()))
    }

    #[test]
    fn budget_keeps_fewer_full_fragments_and_more_summaries() {
        // Each full entry takes 3 header words + 40; each summary 4 words.
        let (full_title, summaries_title) = title_words();
        let long = "x ".repeat(40);
        let chosen: Vec<String> = (1..=4).map(|session| format!("S{session} {} | s{session}", long.trim())).collect();
        let chosen: Vec<&str> = chosen.iter().map(String::as_str).collect();
        check(
            &chosen,
            &["S9 | nueve", "S1#1 | uno otra vez"],
            full_title + 43 * 2 + summaries_title + 4 * 3,
            "
full Sesión 1#0
full Sesión 2#0
summary Sesión 3 (dropped)
summary Sesión 4 (dropped)
summary Sesión 9
dropped 2",
        );
    }

    #[test]
    fn budget_drops_from_the_end_even_when_a_later_fragment_would_fit() {
        let (full_title, summaries_title) = title_words();
        let long = "x ".repeat(50);
        check(
            &["S1 corto", &format!("S2 {}", long.trim()), "S3 corto | tercera"],
            &[],
            full_title + 4 + summaries_title + 4,
            "
full Sesión 1#0
summary Sesión 3 (dropped)
dropped 2",
        );
    }

    #[test]
    fn nothing_fits_means_summaries_only_and_nothing_at_all_is_said_plainly() {
        let long = "x ".repeat(50);
        check(
            &[&format!("S1 {} | uno", long.trim())],
            &[],
            title_words().1 + 4,
            "
summary Sesión 1 (dropped)
dropped 1",
        );
        let context = check(&[], &[], ROOMY, "dropped 0");
        assert_eq!(context.text, EMPTY_MATERIAL);
        assert!(context.shown_labels.is_empty());
    }
}
