//! The report's tables for a terminal: the questions, retrieval by kind, the time path, the
//! ablations, the material, the answers and the latency.

use std::fmt::Write as _;

use super::{
    EvalReport, FULL_PIPELINE, FUSION_ONLY, Found, VariantReport, VariantScore, WITHOUT_TIME, distinct, ratio,
};
use crate::text::shorten;

impl EvalReport {
    /// The tables for a terminal.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let run = &self.run;
        let _ = writeln!(
            out,
            "Oráculo eval: {} questions ({} failed) on {}\nembedder {}, chat model {}, k = {}, {:.0} s\n",
            self.questions, self.errors, run.campaign, run.embedder, run.chat_model, run.k, run.seconds
        );
        self.render_questions(&mut out);
        self.render_kinds(&mut out);
        self.render_ablations(&mut out);
        self.render_material(&mut out);
        self.render_answers(&mut out);
        self.render_latency(&mut out);
        let _ = writeln!(out, "\nThe bar: {}", self.design_bar);
        out
    }

    fn render_questions(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "{:5} {:12} {:>5} {:>6} {:>6}  {:14}  question / missing",
            "id", "kind", "pool", "fused", "chosen", "answer"
        );
        for row in &self.rows {
            if let Some(error) = &row.error {
                let _ = writeln!(out, "{:5} {:12} ERROR {}", row.id, row.kind.as_str(), shorten(error, 90));
                continue;
            }
            let n = distinct(&row.expected);
            let cell = |variant: &str, stage: fn(&Found) -> &Vec<String>| match row.variants.get(variant) {
                Some(found) if n > 0 => format!("{}/{}", stage(found).len(), n),
                Some(_) => "-".to_string(),
                None => "".to_string(),
            };
            let answer = match &row.answer {
                None => String::new(),
                Some(answer) => {
                    let cites = if answer.supported {
                        "cites"
                    } else if answer.valid_citations.is_empty() {
                        "uncited"
                    } else {
                        "other"
                    };
                    let facts = answer.key_facts_found.len() + answer.key_facts_missing.len();
                    let abstained = if answer.abstained { " no" } else { "" };
                    format!("{cites} {}/{facts}{abstained}", answer.key_facts_found.len())
                }
            };
            let _ = writeln!(
                out,
                "{:5} {:12} {:>5} {:>6} {:>6}  {:14}  {}",
                row.id,
                row.kind.as_str(),
                cell(FULL_PIPELINE, |f| &f.pool),
                cell(FUSION_ONLY, |f| &f.top),
                cell(FULL_PIPELINE, |f| &f.top),
                answer,
                shorten(&row.question, 70)
            );
            if let Some(found) = row.variants.get(FULL_PIPELINE) {
                let missing: Vec<&str> =
                    row.expected.iter().filter(|label| !found.top.contains(label)).map(String::as_str).collect();
                if !missing.is_empty() {
                    let _ = writeln!(out, "{:46}not chosen: {}", "", missing.join("; "));
                }
            }
            if !row.unknown_labels.is_empty() {
                let _ = writeln!(out, "{:46}NOT IN THE INDEX: {}", "", row.unknown_labels.join("; "));
            }
        }
        let _ = writeln!(
            out,
            "(pool: expected labels in the fused pool; fused: in the fusion's top k; chosen: in the rerank's k; \
answer: cites an expected note / key facts found / \"no\" = says it is not in the notes)\n"
        );
    }

    fn render_kinds(&self, out: &mut String) {
        let (Some(full), Some(fusion)) = (self.variant(FULL_PIPELINE), self.variant(FUSION_ONLY)) else { return };
        let _ = writeln!(
            out,
            "Retrieval by kind (hits: questions with an expected note in the set; recall: expected notes found)"
        );
        let _ = writeln!(
            out,
            "{:12} {:>3}  {:>7} {:>8} {:>8}  {:>7} {:>8} {:>8}",
            "kind", "n", "union", "fused@k", "rerank@k", "union", "fused@k", "rerank@k"
        );
        let line = |out: &mut String, name: &str, full: &VariantScore, fusion: &VariantScore| {
            let hits =
                [full.pool_hits, fusion.top_hits, full.top_hits].map(|hits| format!("{hits}/{}", full.questions));
            let recalls = [full.recall.pool, fusion.recall.top, full.recall.top];
            let [pool, fused, reranked] = hits;
            let n = full.questions;
            let _ = writeln!(
                out,
                "{name:12} {n:>3}  {pool:>7} {fused:>8} {reranked:>8}  {:>7.2} {:>8.2} {:>8.2}",
                recalls[0], recalls[1], recalls[2]
            );
        };
        rows_by_kind(out, full, fusion, line);
        self.render_time(out);
    }

    /// The time variant: hits in the final k with and without the time path.
    fn render_time(&self, out: &mut String) {
        let (Some(full), Some(untimed)) = (self.variant(FULL_PIPELINE), self.variant(WITHOUT_TIME)) else { return };
        let _ = writeln!(out, "Time path (hits in the final k and recall, with / without the time path)");
        let _ =
            writeln!(out, "{:12} {:>3}  {:>8} {:>8}  {:>6} {:>6}", "kind", "n", "with", "without", "with", "without");
        let line = |out: &mut String, name: &str, with: &VariantScore, without: &VariantScore| {
            let [hits_with, hits_without] =
                [with, without].map(|score| format!("{}/{}", score.top_hits, score.questions));
            let (n, recall_with, recall_without) = (with.questions, with.recall.top, without.recall.top);
            let _ = writeln!(
                out,
                "{name:12} {n:>3}  {hits_with:>8} {hits_without:>8}  {recall_with:>6.2} {recall_without:>6.2}"
            );
        };
        rows_by_kind(out, full, untimed, line);
    }

    fn render_ablations(&self, out: &mut String) {
        let _ = writeln!(out, "Ablations (same questions, same index; arc: recall over arc questions' gold sessions)");
        let _ = writeln!(
            out,
            "{:42} {:>7} {:>7} {:>6} {:>6} {:>6} {:>7} {:>6}",
            "variant", "union", "top-k", "union", "top-k", "arc@k", "arc+sum", "pool"
        );
        for variant in &self.variants {
            let o = &variant.overall;
            let _ = writeln!(
                out,
                "{:42} {:>7} {:>7} {:>6.2} {:>6.2} {:>6.2} {:>7.2} {:>6.1}",
                shorten(&variant.name, 42),
                format!("{}/{}", o.pool_hits, o.questions),
                format!("{}/{}", o.top_hits, o.questions),
                o.recall.pool,
                o.recall.top,
                variant.arc.recall.top,
                variant.arc.recall.context,
                o.mean_pool_size,
            );
        }
        if let Some(full) = self.variant(FULL_PIPELINE) {
            let _ = writeln!(
                out,
                "arc coverage, full pipeline: pool {:.2}, chosen {:.2}, shown in full {:.2}, full + summaries {:.2}",
                full.arc.recall.pool, full.arc.recall.top, full.arc.recall.full, full.arc.recall.context
            );
        }
        let _ = writeln!(out);
    }

    fn render_material(&self, out: &mut String) {
        let Some(m) = &self.material else { return };
        let _ = writeln!(
            out,
            "Key facts in the material shown to the model ({} answerable questions; {} planned by time; \
material up to {:.0} tokens on average)",
            m.questions, m.limited_by_time, m.mean_material_tokens
        );
        let naive = |found: Option<usize>, facts: usize| match found {
            Some(found) => format!(
                "  naive windows, same budget {:>7} {:>4.0}%",
                format!("{found}/{facts}"),
                100.0 * ratio(found, facts)
            ),
            None => String::new(),
        };
        for (kind, (questions, facts, found)) in &m.by_kind {
            let naive_found = m.naive_found.map(|_| m.naive_by_kind.get(kind).copied().unwrap_or(0));
            let _ = writeln!(
                out,
                "{:12} {:>3}  {:>7}  {:>4.0}%{}",
                kind.as_str(),
                questions,
                format!("{found}/{facts}"),
                100.0 * ratio(*found, *facts),
                naive(naive_found, *facts)
            );
        }
        let _ = writeln!(
            out,
            "{:12} {:>3}  {:>7}  {:>4.0}%{}; {} of {} questions shown every key fact\n",
            "all",
            m.questions,
            format!("{}/{}", m.found, m.key_facts),
            100.0 * ratio(m.found, m.key_facts),
            naive(m.naive_found, m.key_facts),
            m.complete,
            m.questions
        );
    }

    fn render_answers(&self, out: &mut String) {
        let Some(a) = &self.answers else {
            let _ = writeln!(out, "Answers: not generated (no chat model, or --retrieval-only)\n");
            return;
        };
        let _ = writeln!(out, "Answers ({} generated)", a.answered);
        let _ = writeln!(out, "  citation rate        {} answers with a valid citation", share(a.cited, a.answered));
        let _ = writeln!(out, "  uncited answerable   {}/{}", a.uncited_answerable, a.answerable);
        let _ = writeln!(out, "  cites an expected    {}/{}", a.supported, a.answerable);
        let _ = writeln!(out, "  invented citations   {} in {} answers", a.invented_citations, a.answers_with_invented);
        let _ = writeln!(out, "  extractive fallbacks {}/{}", a.fallbacks, a.answered);
        let _ = writeln!(
            out,
            "  chronology in order  {}/{} chronology answers citing two sessions or more",
            a.chronology_in_story_order, a.chronology_cited
        );
        let _ = writeln!(
            out,
            "  abstention           {}/{} unanswerable (and {} answerable said part was missing)",
            a.abstained_unanswerable, a.unanswerable, a.abstained_answerable
        );
        let _ = writeln!(
            out,
            "  model sentences      {} judged: {} kept as cited, {} re-cited to the notes they rest on, {} dropped \
(no note shown backs it by its words, numbers, names or meaning)",
            a.model_sentences,
            a.model_sentences.saturating_sub(a.recited + a.dropped),
            a.recited,
            a.dropped
        );
        let _ = writeln!(
            out,
            "  «not in the notes»   {} answerable answers said so with an answering note shown in full",
            a.abstained_with_answer_shown
        );
        let _ = writeln!(
            out,
            "  only the nearest     {} answerable and {} unanswerable answers quoted the nearest sentences, saying \
the notes do not say it in the question's words",
            a.nearest_only_answerable, a.nearest_only_unanswerable
        );
        let _ = writeln!(
            out,
            "  key facts            {}/{} ({:.0}%); {} of {} answers hold every key fact; the material shown \
held {}/{}",
            a.key_facts_found,
            a.key_facts,
            100.0 * ratio(a.key_facts_found, a.key_facts),
            a.complete_answers,
            a.with_key_facts,
            a.key_facts_in_material,
            a.key_facts
        );
        if let Some(candidates) = a.key_facts_in_candidates {
            let _ = writeln!(
                out,
                "  quoted from          every sentence the quotes were chosen from held {candidates}/{} key facts",
                a.key_facts
            );
        }
        if a.quotes > 0 {
            let _ = writeln!(
                out,
                "  word for word        {} of {} quotes are in the note their label names, word for word; {} are not",
                a.quotes - a.misquoted,
                a.quotes,
                a.misquoted
            );
        }
        let _ = writeln!(out, "  arc key facts        {}", share(a.arc_key_facts_found, a.arc_key_facts));
        if let (Some(model), Some(arc_model)) = (a.model_key_facts_found, a.arc_model_key_facts_found) {
            let _ = writeln!(
                out,
                "  what stays           {} answers kept the notes' sentences shown first that the model did not \
say under its answer, {} were those sentences alone; the model's own sentences held {}/{} key facts \
({}/{} in arcs)",
                a.with_notes_added, a.notes_alone, model, a.key_facts, arc_model, a.arc_key_facts
            );
        }
        let _ = writeln!(out, "  repeated sentences   {} in all answers", a.repeated_sentences);
        if let (Some(p50), Some(p95)) = (a.seconds_p50, a.seconds_p95) {
            let _ = writeln!(
                out,
                "  answer seconds       p50 {p50:.1}  p95 {p95:.1}; {} of {} planned for a time budget took over it by \
more than a fifth; {} stopped at the deadline",
                a.over_budget, a.budgeted, a.cut_short
            );
        }
        let _ = writeln!(out, "  secrets leaked       {} answers\n", a.leaks);
    }

    fn render_latency(&self, out: &mut String) {
        if self.latency.is_empty() {
            return;
        }
        let _ = writeln!(out, "Latency per stage, full pipeline (ms)");
        for (stage, p) in &self.latency {
            let _ = writeln!(out, "  {:12} p50 {:>10.1}  p95 {:>10.1}  (n = {})", stage, p.p50_ms, p.p95_ms, p.n);
        }
    }
}

/// `part/whole (pp%)`, as the summary prints a share.
fn share(part: usize, whole: usize) -> String {
    format!("{part}/{whole} ({:.0}%)", 100.0 * ratio(part, whole))
}

/// One row per kind both variants scored, then the row of all questions and a blank line.
fn rows_by_kind(
    out: &mut String,
    first: &VariantReport,
    second: &VariantReport,
    line: impl Fn(&mut String, &str, &VariantScore, &VariantScore),
) {
    for (kind, score) in &first.by_kind {
        if let Some(other) = second.by_kind.get(kind) {
            line(out, kind.as_str(), score, other);
        }
    }
    line(out, "all", &first.overall, &second.overall);
    let _ = writeln!(out);
}
