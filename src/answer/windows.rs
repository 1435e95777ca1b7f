//! The chosen fragments as the windows a slow machine's model has time for.
//!
//! Under a CPU's time plan the chosen fragments are more than the model can read. The windows
//! of their words come ranked best first (`retrieve::windows`); here they are taken in that
//! order while the budget lasts, each widened to whole sentences, several of one fragment
//! merged in reading order, and each fragment shown as its taken words with a [`GAP_MARK`]
//! where words were left out. A chosen fragment no window of which was taken is not shown in
//! full: it goes to the summaries.

use std::collections::HashMap;
use std::ops::Range;

use crate::corpus::FragmentId;
use crate::text::ends_sentence;

use super::context::ContextFragment;
use super::passages::{GAP_MARK, select_passages};
use super::terms::QueryTerms;

/// Share of a time-planned material budget the chosen fragments may take; the rest is for
/// the one-line summaries of the leftovers.
pub const WINDOWS_SHARE: f64 = 0.85;
/// Words a window is widened by at most, at each end, to start and end a sentence: a window
/// cut mid-sentence gets read, and quoted, mid-sentence.
const MAX_WIDENING_WORDS: usize = 30;
/// Tokens below which no further window is tried: the shortest window with its label.
const MIN_WINDOW_TOKENS: usize = 48;

/// What the time plan shows of the chosen fragments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Narrowed {
    /// The fragments shown, each as its taken windows, in the order they were chosen.
    pub shown: Vec<ContextFragment>,
    /// The chosen fragments no window of which was taken, in the order they were chosen.
    pub left: Vec<ContextFragment>,
    /// How many of `shown` show part of their text.
    pub narrowed: usize,
}

/// `chosen` (best first) as the windows of `ranked` (best first: a fragment and the words of
/// one of its windows) that fit [`WINDOWS_SHARE`] of `material_tokens`. Chosen fragments that
/// fit whole together are all shown whole. When not even the best window fits, its best
/// passages for `terms` are shown.
pub fn narrow_to_windows(
    chosen: &[ContextFragment],
    ranked: &[(FragmentId, Range<usize>)],
    terms: &QueryTerms,
    material_tokens: usize,
    count_tokens: &dyn Fn(&str) -> usize,
) -> Narrowed {
    let _span = tracing::debug_span!("answer.windows", n_chosen = chosen.len(), n_windows = ranked.len()).entered();
    let budget = (material_tokens as f64 * WINDOWS_SHARE) as usize;
    if chosen.iter().map(|fragment| count_tokens(&fragment.text)).sum::<usize>() <= budget {
        return Narrowed { shown: chosen.to_vec(), left: Vec::new(), narrowed: 0 };
    }
    let maps: Vec<WordMap<'_>> = chosen.iter().map(|fragment| WordMap::new(&fragment.text)).collect();
    let place: HashMap<FragmentId, usize> =
        chosen.iter().enumerate().map(|(idx, fragment)| (fragment.fragment_id, idx)).collect();
    let mut taken: Vec<Vec<Range<usize>>> = vec![Vec::new(); chosen.len()];
    let mut cost: Vec<usize> = vec![0; chosen.len()];
    // Each fragment's text as its taken windows render it (what was costed).
    let mut rendered: Vec<String> = vec![String::new(); chosen.len()];
    let mut order: Vec<usize> = Vec::new();
    let mut used = 0;
    // Two passes: each fragment's best window first, then the others, best first.
    let first_pass = ranked.iter().map(|window| (true, window));
    for (first_pass, (fragment_id, words)) in first_pass.chain(ranked.iter().map(|window| (false, window))) {
        if !order.is_empty() && budget.saturating_sub(used) < MIN_WINDOW_TOKENS {
            break;
        }
        let Some(&idx) = place.get(fragment_id) else { continue };
        if first_pass && !taken[idx].is_empty() {
            continue;
        }
        let map = &maps[idx];
        let widened = map.widened(words.clone());
        let ranges = merged(&taken[idx], widened.clone());
        if ranges == taken[idx] {
            continue;
        }
        let text = map.render(&ranges);
        // A fragment shown pays for its label line in the material too.
        let entry = count_tokens(chosen[idx].label.as_str()) + 2;
        let new_cost = count_tokens(&text) + entry;
        if used + new_cost - cost[idx] > budget {
            if order.is_empty() {
                // Not even the best window fits: its best passages do.
                let window_text = map.words_text(widened);
                let room = budget.saturating_sub(entry);
                let mut fragment = chosen[idx].clone();
                fragment.text = select_passages(&window_text, terms, None, room, count_tokens);
                let left = chosen.iter().filter(|other| other.fragment_id != *fragment_id).cloned().collect();
                return Narrowed { shown: vec![fragment], left, narrowed: 1 };
            }
            continue;
        }
        used = used + new_cost - cost[idx];
        cost[idx] = new_cost;
        rendered[idx] = text;
        if taken[idx].is_empty() {
            order.push(idx);
        }
        taken[idx] = ranges;
    }
    let mut narrowed = 0;
    let shown: Vec<ContextFragment> = order
        .iter()
        .map(|&idx| {
            let mut fragment = chosen[idx].clone();
            let whole = taken[idx].len() == 1 && taken[idx][0] == (0..maps[idx].words.len());
            if !whole {
                fragment.text = std::mem::take(&mut rendered[idx]);
                narrowed += 1;
            }
            fragment
        })
        .collect();
    let left = (0..chosen.len()).filter(|idx| !order.contains(idx)).map(|idx| chosen[idx].clone()).collect();
    Narrowed { shown, left, narrowed }
}

/// `ranges` (sorted, apart) with `added`, merged where they touch or overlap.
fn merged(ranges: &[Range<usize>], added: Range<usize>) -> Vec<Range<usize>> {
    let mut all: Vec<Range<usize>> = ranges.to_vec();
    all.push(added);
    all.sort_by_key(|range| range.start);
    let mut out: Vec<Range<usize>> = Vec::new();
    for range in all {
        match out.last_mut() {
            Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
            _ => out.push(range),
        }
    }
    out
}

/// A fragment's words (as `split_whitespace` cuts them, the windows' indexes) with the line
/// each lies on.
struct WordMap<'a> {
    /// Each word, whether it ends its line, and its line's index.
    words: Vec<(&'a str, bool, usize)>,
    /// Each line, and whether it is a Markdown heading.
    lines: Vec<(&'a str, bool)>,
}

impl<'a> WordMap<'a> {
    fn new(text: &'a str) -> WordMap<'a> {
        let mut words = Vec::new();
        let mut lines = Vec::new();
        for (line_idx, line) in text.lines().enumerate() {
            let on_line: Vec<&str> = line.split_whitespace().collect();
            let n = on_line.len();
            words.extend(on_line.into_iter().enumerate().map(|(at, word)| (word, at + 1 == n, line_idx)));
            lines.push((line, line.trim_start().starts_with('#')));
        }
        WordMap { words, lines }
    }

    /// Whether a sentence (or a line) ends after word `at`.
    fn ends_after(&self, at: usize) -> bool {
        let (word, ends_line, _) = self.words[at];
        ends_line || ends_sentence(word)
    }

    /// `words` widened to start and end a sentence (or a line), by [`MAX_WIDENING_WORDS`] at
    /// most at each end.
    fn widened(&self, words: Range<usize>) -> Range<usize> {
        let n = self.words.len();
        let (mut start, mut end) = (words.start.min(n), words.end.min(n));
        let earliest = start.saturating_sub(MAX_WIDENING_WORDS);
        let mut back = start;
        while back > earliest && !self.ends_after(back - 1) {
            back -= 1;
        }
        if back == 0 || self.ends_after(back - 1) {
            start = back;
        }
        let latest = (end + MAX_WIDENING_WORDS).min(n);
        let mut forward = end;
        while forward < latest && !(forward > 0 && self.ends_after(forward - 1)) {
            forward += 1;
        }
        if forward == n || (forward > 0 && self.ends_after(forward - 1)) {
            end = forward;
        }
        start..end.max(start)
    }

    /// The words of `range`, their line breaks kept.
    fn words_text(&self, range: Range<usize>) -> String {
        let mut text = String::new();
        for at in range {
            if !text.is_empty() {
                text.push(if self.words[at - 1].1 { '\n' } else { ' ' });
            }
            text.push_str(self.words[at].0);
        }
        text
    }

    /// The words of `ranges` (sorted, apart) with their lines kept, each range under the
    /// nearest heading above it when that heading is not shown already, a [`GAP_MARK`] where
    /// words were left out.
    fn render(&self, ranges: &[Range<usize>]) -> String {
        let mut blocks: Vec<String> = Vec::new();
        let mut shown_headings: Vec<usize> = Vec::new();
        let mut previous_end = 0;
        for range in ranges {
            if range.start > previous_end || (range.start > 0 && blocks.is_empty()) {
                blocks.push(GAP_MARK.to_string());
            }
            let first_line = self.words.get(range.start).map_or(0, |&(_, _, line)| line);
            let heading = (0..first_line).rev().find(|&line| self.lines[line].1);
            if let Some(heading) = heading.filter(|heading| !shown_headings.contains(heading)) {
                blocks.push(self.lines[heading].0.trim().to_string());
                shown_headings.push(heading);
            }
            shown_headings
                .extend(self.words[range.clone()].iter().map(|&(_, _, line)| line).filter(|&line| self.lines[line].1));
            blocks.push(self.words_text(range.clone()));
            previous_end = range.end;
        }
        if previous_end < self.words.len() {
            blocks.push(GAP_MARK.to_string());
        }
        blocks.join("\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::{Label, SessionNumber};

    fn words(text: &str) -> usize {
        text.split_whitespace().count()
    }

    fn fragment(id: i64, text: &str) -> ContextFragment {
        ContextFragment {
            fragment_id: FragmentId(id),
            label: Label::new(format!("Sesión {id}")),
            session: Some(SessionNumber(id as u32)),
            part: 0,
            text: text.to_string(),
            annotation: None,
        }
    }

    /// `n` sentences of ten words, the i-th word of the j-th being `s{j}w{i}` (the last ends
    /// with a point).
    fn sentences(n: usize) -> String {
        (0..n)
            .map(|j| (0..10).map(|i| format!("s{j}w{i}")).collect::<Vec<_>>().join(" ") + ".")
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn a_window_is_widened_to_whole_sentences() {
        let text = sentences(10);
        let map = WordMap::new(&text);
        // Words 13..27 lie in sentences 1 and 2: widened to 10..30.
        assert_eq!(map.widened(13..27), 10..30);
        assert_eq!(map.widened(0..5), 0..10);
        assert_eq!(map.widened(95..200), 90..100);
        // A run-on with no sentence end near: kept as cut.
        let run_on = vec!["palabra"; 200].join(" ");
        assert_eq!(WordMap::new(&run_on).widened(100..120), 100..120);
    }

    #[test]
    fn each_fragment_best_window_first_then_the_others_merged_in_reading_order() {
        let long = sentences(60);
        let chosen = [fragment(1, &long), fragment(2, &long), fragment(3, "Una nota breve.")];
        let ranked = [
            (FragmentId(2), 300..400),
            (FragmentId(2), 100..200),
            (FragmentId(1), 0..100),
            (FragmentId(3), 0..3),
            (FragmentId(2), 150..250),
        ];
        let terms = QueryTerms::new("¿Qué pasó?", &[]);
        // Budget: 0.85 × 389 = 330 words; a fragment's label costs 2 + 2, a gap mark 1.
        // First pass: 2's best (106), 1's (105), 3 whole (7); second: 2's second window (+101);
        // 11 words are left, too few for another.
        let narrowed = narrow_to_windows(&chosen, &ranked, &terms, 389, &words);
        let ids: Vec<i64> = narrowed.shown.iter().map(|fragment| fragment.fragment_id.0).collect();
        assert_eq!(ids, [2, 1, 3]);
        assert!(narrowed.left.is_empty());
        let shown = &narrowed.shown[0].text;
        assert!(shown.starts_with(GAP_MARK) && shown.ends_with(GAP_MARK), "{shown}");
        // Reading order: words 100..200, a gap, then 300..400.
        let gap = format!("\n\n{GAP_MARK}\n\n");
        let parts: Vec<&str> =
            shown.trim_start_matches(GAP_MARK).trim_end_matches(GAP_MARK).trim().split(gap.as_str()).collect();
        assert_eq!(parts.len(), 2, "{shown}");
        assert!(parts[0].starts_with("s10w0") && parts[0].ends_with("s19w9."), "{shown}");
        assert!(parts[1].starts_with("s30w0") && parts[1].ends_with("s39w9."), "{shown}");
        // The first fragment's window opens the note: no gap before it.
        assert!(narrowed.shown[1].text.starts_with("s0w0"), "{}", narrowed.shown[1].text);
        assert_eq!(narrowed.narrowed, 2, "the short note is shown whole");
        assert!(narrowed.shown.iter().map(|f| words(&f.text) + 4).sum::<usize>() <= 330);

        // A smaller budget (0.85 × 200 = 170): 1's window no longer fits after 2's, 3 does.
        let narrowed = narrow_to_windows(&chosen, &ranked, &terms, 200, &words);
        let ids: Vec<i64> = narrowed.shown.iter().map(|fragment| fragment.fragment_id.0).collect();
        assert_eq!(ids, [2, 3]);
        assert_eq!(narrowed.left.iter().map(|fragment| fragment.fragment_id.0).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn chosen_fragments_that_fit_whole_are_shown_whole() {
        let chosen = [fragment(1, "Uno. Dos."), fragment(2, "Tres.")];
        let terms = QueryTerms::new("¿Qué pasó?", &[]);
        let narrowed = narrow_to_windows(&chosen, &[], &terms, 100, &words);
        assert_eq!(narrowed.shown, chosen);
        assert_eq!(narrowed.narrowed, 0);
    }

    #[test]
    fn when_the_best_window_does_not_fit_its_best_passages_do() {
        let text = format!("{}\n\nEl precio fue de 3630 monedas de oro.\n\n{}", sentences(20), sentences(20));
        let chosen = [fragment(1, &text)];
        let terms = QueryTerms::new("¿Cuánto fue el precio?", &[]);
        let narrowed = narrow_to_windows(&chosen, &[(FragmentId(1), 150..260)], &terms, 40, &words);
        assert_eq!(narrowed.shown.len(), 1);
        assert!(narrowed.shown[0].text.contains("3630"), "{}", narrowed.shown[0].text);
        assert!(words(&narrowed.shown[0].text) <= 34);
    }

    #[test]
    fn a_window_under_a_heading_is_shown_under_it() {
        let text = format!("# Sesión 4\n\n## El puerto\n\n{}\n\n## La torre\n\n{}", sentences(30), sentences(30));
        let map = WordMap::new(&text);
        let tower_start = 3 + 3 + 300 + 3;
        let shown = map.render(&[tower_start + 20..tower_start + 40]);
        assert!(shown.starts_with(&format!("{GAP_MARK}\n\n## La torre\n\ns2w0")), "{shown}");
        let both = map.render(&[6..25, tower_start..tower_start + 10]);
        assert_eq!(both.matches("## El puerto").count(), 1, "{both}");
        assert!(both.contains("## La torre"), "{both}");
    }
}
