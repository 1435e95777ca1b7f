//! Blocks → fragments: campaign-wide unique labels, then sizing to `SESSION_MAX_WORDS`.
//!
//! A block under the cap is one fragment. A longer one is cut at its own Markdown headings,
//! grouping whole sections up to the cap; only a section that alone exceeds the cap is cut
//! blindly, into windows that overlap by `OVERLAP_WORDS`. Secret passages follow the
//! player text as DM-only parts under the same label.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::markdown::{diagnostic, is_fence};

use super::{
    Block, CorpusConfig, Diagnostic, Fragment, Label, Note, NoteKind, OVERLAP_WORDS, SESSION_MAX_WORDS, Visibility,
};
use crate::text::{list_item_text, sentence_ends, word_count, word_spans};

/// Labels and sizes every block of every note. Labels shared by several blocks become
/// `"{label} ({disambiguator})"` for all of them, with a diagnostic on each; nothing is
/// merged or dropped. The output is sorted by path, line and part, whatever the input order.
pub fn fragment_campaign(notes: &[Note], config: &CorpusConfig) -> (Vec<Fragment>, Vec<Diagnostic>) {
    let mut entries: Vec<(&Note, &Block)> =
        notes.iter().flat_map(|note| note.blocks.iter().map(move |block| (note, block))).collect();
    entries.sort_by(|(note_a, block_a), (note_b, block_b)| {
        (&note_a.path, block_a.line_start, &block_a.label).cmp(&(&note_b.path, block_b.line_start, &block_b.label))
    });
    let (labels, diagnostics) = unique_labels(&entries);
    let mut fragments = Vec::new();
    for ((note, block), label) in entries.iter().zip(&labels) {
        // Fail closed: a note under a secret path is DM-only even if it was parsed with
        // another configuration.
        if block.visibility == Visibility::Player && config.is_secret_path(&note.path) {
            let secret_block = Block { visibility: Visibility::DmOnly, ..(*block).clone() };
            fragments.extend(split_block(&secret_block, label, &note.path));
        } else {
            fragments.extend(split_block(block, label, &note.path));
        }
    }
    (fragments, diagnostics)
}

/// Cuts one block into fragments labelled `label`: its text first (parts `0..`, with the
/// block's visibility), then its secret passages gathered as DM-only parts.
/// Fragments never hold an empty text; a block with no words gives only its secret parts.
pub fn split_block(block: &Block, label: &str, source_path: &str) -> Vec<Fragment> {
    let block_lines = source_lines(&block.text, block.line_start);
    let player_pieces = split_lines(&block_lines).into_iter().map(|piece| (piece, block.visibility));

    let mut secret_lines = Vec::new();
    for secret in &block.secrets {
        if let Some(previous) = secret_lines.last() {
            // A blank line between passages so they do not run together.
            let SourceLine { number, .. } = *previous;
            secret_lines.push(SourceLine { number, text: "" });
        }
        secret_lines.extend(source_lines(&secret.text, secret.line_start));
    }
    let secret_pieces = split_lines(&secret_lines).into_iter().map(|piece| (piece, Visibility::DmOnly));

    let headings = HeadingIndex::new(&block_lines);
    player_pieces
        .chain(secret_pieces)
        .enumerate()
        .map(|(part, (piece, visibility))| Fragment {
            label: Label::new(label),
            kind: block.kind,
            source_path: source_path.to_string(),
            session: block.session,
            part: u32::try_from(part).unwrap_or(u32::MAX),
            heading_path: headings.enclosing(piece.line_start),
            word_count: word_count(&piece.text),
            line_start: piece.line_start,
            line_end: piece.line_end,
            visibility,
            content_hash: content_hash(visibility, &piece.text),
            text: piece.text,
        })
        .collect()
}

/// One line of a block or secret passage, with its 1-based number in the file.
#[derive(Debug, Clone, Copy)]
struct SourceLine<'a> {
    number: u32,
    text: &'a str,
}

/// A sized run of text before its label is attached.
#[derive(Debug)]
struct Piece {
    text: String,
    line_start: u32,
    line_end: u32,
}

fn source_lines(text: &str, first_line: u32) -> Vec<SourceLine<'_>> {
    text.split('\n')
        .enumerate()
        .map(|(offset, line)| SourceLine {
            number: first_line.saturating_add(u32::try_from(offset).unwrap_or(u32::MAX)),
            text: line.strip_suffix('\r').unwrap_or(line),
        })
        .collect()
}

/// Sizes a run of lines: whole if under the cap, else grouped sections, else windows.
fn split_lines(lines: &[SourceLine<'_>]) -> Vec<Piece> {
    let words_per_line: Vec<usize> = lines.iter().map(|line| word_count(line.text)).collect();
    let n_words: usize = words_per_line.iter().sum();
    if n_words == 0 {
        return Vec::new();
    }
    if n_words <= SESSION_MAX_WORDS {
        return piece_from_lines(lines).into_iter().collect();
    }
    let mut pieces = Vec::new();
    let mut group: Option<(usize, usize)> = None;
    let mut group_words = 0;
    for (start, end) in sections(lines) {
        let section_words: usize = words_per_line[start..end].iter().sum();
        if section_words > SESSION_MAX_WORDS {
            if let Some((group_start, group_end)) = group.take() {
                pieces.extend(piece_from_lines(&lines[group_start..group_end]));
            }
            pieces.extend(windows(&lines[start..end]));
            continue;
        }
        match &mut group {
            Some((_, group_end)) if group_words + section_words <= SESSION_MAX_WORDS => {
                *group_end = end;
                group_words += section_words;
            }
            _ => {
                if let Some((group_start, group_end)) = group.take() {
                    pieces.extend(piece_from_lines(&lines[group_start..group_end]));
                }
                group = Some((start, end));
                group_words = section_words;
            }
        }
    }
    if let Some((group_start, group_end)) = group {
        pieces.extend(piece_from_lines(&lines[group_start..group_end]));
    }
    pieces
}

/// `(start, end)` line ranges, each starting at a Markdown heading (the first may not).
/// Bold-only lines are not headings; neither is anything inside fenced code.
fn sections(lines: &[SourceLine<'_>]) -> Vec<(usize, usize)> {
    let mut starts = vec![0];
    let mut in_fence = false;
    for (line_idx, line) in lines.iter().enumerate() {
        if is_fence(line.text) {
            in_fence = !in_fence;
        } else if !in_fence && line_idx > 0 && atx_heading(line.text).is_some() {
            starts.push(line_idx);
        }
    }
    let ends = starts.iter().skip(1).copied().chain([lines.len()]);
    starts.iter().copied().zip(ends).collect()
}

/// The lines without leading and trailing blank ones, or `None` if all are blank.
fn piece_from_lines(lines: &[SourceLine<'_>]) -> Option<Piece> {
    let first = lines.iter().position(|line| !line.text.trim().is_empty())?;
    let last = lines.iter().rposition(|line| !line.text.trim().is_empty())?;
    let kept = &lines[first..=last];
    let text = kept.iter().map(|line| line.text).collect::<Vec<_>>().join("\n");
    Some(Piece { text, line_start: kept[0].number, line_end: kept[kept.len() - 1].number })
}

/// Windows of at most `SESSION_MAX_WORDS` words over one section too long to keep whole,
/// consecutive windows sharing about `OVERLAP_WORDS` words. Each window ends at a sentence
/// ([`sentence_ends`], the one splitter) or a paragraph's end within its last `OVERLAP_WORDS`
/// words, and the next starts at a sentence's start at most `OVERLAP_WORDS` words before
/// its nominal start: a fragment cut mid-sentence was embedded, shown to the model and
/// quoted mid-sentence («a hobby in textile work…», CRD3's blind windows: 42 of its 444
/// fragments opened so). Only where no sentence ends near a cut is it blind. Text between a
/// window's first and last word is kept as it was, line breaks included.
fn windows(lines: &[SourceLine<'_>]) -> Vec<Piece> {
    let words = section_words(lines);
    let ends_after = |at: usize| words[at].3;
    let n = words.len();
    let mut pieces = Vec::new();
    let mut window_start = 0;
    while window_start < n {
        let nominal_end = (window_start + SESSION_MAX_WORDS).min(n);
        let window_end = if nominal_end == n {
            n
        } else {
            let earliest = nominal_end - OVERLAP_WORDS + 1;
            (earliest..=nominal_end).rev().find(|&end| ends_after(end - 1)).unwrap_or(nominal_end)
        };
        let (first_line, first_offset, _, _) = words[window_start];
        let (last_line, _, last_offset, _) = words[window_end - 1];
        let text = if first_line == last_line {
            lines[first_line].text[first_offset..last_offset].to_string()
        } else {
            let mut text = lines[first_line].text[first_offset..].to_string();
            for line in &lines[first_line + 1..last_line] {
                text.push('\n');
                text.push_str(line.text);
            }
            text.push('\n');
            text.push_str(&lines[last_line].text[..last_offset]);
            text
        };
        pieces.push(Piece { text, line_start: lines[first_line].number, line_end: lines[last_line].number });
        if window_end == n {
            break;
        }
        // The window ends at least `SESSION_MAX_WORDS - OVERLAP_WORDS` words past its start,
        // so the next start, `OVERLAP_WORDS` before that end or up to as many more, is past it.
        let nominal_next = window_end - OVERLAP_WORDS;
        let starts_sentence = |at: usize| at > window_start && ends_after(at - 1);
        window_start = (nominal_next - OVERLAP_WORDS..=nominal_next)
            .rev()
            .find(|&at| starts_sentence(at))
            .or_else(|| (nominal_next + 1..window_end).find(|&at| starts_sentence(at)))
            .unwrap_or(nominal_next);
    }
    pieces
}

/// The words of a section's lines: (line, start byte, end byte, whether a sentence or a
/// paragraph ends after it: the next line is blank, a list item or none).
fn section_words(lines: &[SourceLine<'_>]) -> Vec<(usize, usize, usize, bool)> {
    let mut words = Vec::new();
    for (line_idx, line) in lines.iter().enumerate() {
        // In order, as the words are: each is looked up by halving, not by a scan of the line.
        let ends = sentence_ends(line.text);
        let next = lines.get(line_idx + 1).map(|next| next.text.trim_start());
        let paragraph_ends = next.is_none_or(|next| next.is_empty() || list_item_text(next).is_some());
        let spans = word_spans(line.text);
        let last = spans.len().saturating_sub(1);
        for (at, (start, end)) in spans.into_iter().enumerate() {
            words.push((line_idx, start, end, ends.binary_search(&end).is_ok() || (at == last && paragraph_ends)));
        }
    }
    words
}

/// The Markdown headings of a block, to answer which ones enclose a line. Only the block's
/// own headings count (a chronicle's session header included when it is a `#` heading).
struct HeadingIndex<'a> {
    /// At each heading line: its number and the open headings `(level, title)`, outermost first.
    stacks: Vec<(u32, Vec<(usize, &'a str)>)>,
}

impl<'a> HeadingIndex<'a> {
    fn new(lines: &[SourceLine<'a>]) -> HeadingIndex<'a> {
        let mut stacks: Vec<(u32, Vec<(usize, &'a str)>)> = Vec::new();
        let mut in_fence = false;
        for line in lines {
            if is_fence(line.text) {
                in_fence = !in_fence;
                continue;
            }
            if in_fence {
                continue;
            }
            if let Some((level, title)) = atx_heading(line.text) {
                let mut stack = stacks.last().map(|(_, stack)| stack.clone()).unwrap_or_default();
                while stack.last().is_some_and(|&(open_level, _)| open_level >= level) {
                    stack.pop();
                }
                stack.push((level, title));
                stacks.push((line.number, stack));
            }
        }
        HeadingIndex { stacks }
    }

    /// The headings enclosing line `number`, outermost first; a heading encloses its own line.
    fn enclosing(&self, number: u32) -> Vec<String> {
        let n_before = self.stacks.partition_point(|&(heading_line, _)| heading_line <= number);
        let Some((_, stack)) = n_before.checked_sub(1).map(|idx| &self.stacks[idx]) else {
            return Vec::new();
        };
        stack.iter().filter(|(_, title)| !title.is_empty()).map(|(_, title)| title.to_string()).collect()
    }
}

/// `## Title ##` → `(2, "Title")`. Up to three spaces of indent; `#tag` is not a heading.
fn atx_heading(line: &str) -> Option<(usize, &str)> {
    let unindented = line.trim_start_matches(' ');
    if line.len() - unindented.len() > 3 {
        return None;
    }
    let level = unindented.bytes().take_while(|&byte| byte == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let after = &unindented[level..];
    if !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    let title = after.trim();
    let without_closing = title.trim_end_matches('#');
    let title = if without_closing.is_empty() || without_closing.ends_with([' ', '\t']) {
        without_closing.trim_end()
    } else {
        title
    };
    Some((level, title))
}

/// Final labels, one per entry, and a diagnostic on every block whose label was shared.
fn unique_labels(entries: &[(&Note, &Block)]) -> (Vec<String>, Vec<Diagnostic>) {
    let mut by_label: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (entry_idx, (_, block)) in entries.iter().enumerate() {
        by_label.entry(block.label.as_str()).or_default().push(entry_idx);
    }
    let mut labels: Vec<String> = entries.iter().map(|(_, block)| block.label.clone()).collect();
    let shared: Vec<&Vec<usize>> = by_label.values().filter(|members| members.len() > 1).collect();
    for members in &shared {
        for &entry_idx in members.iter() {
            let block = entries[entry_idx].1;
            labels[entry_idx] = format!("{} ({})", block.label, block.disambiguator);
        }
    }
    // Same disambiguator too (two `Sesion 12.md` in different folders): path and line decide.
    let mut n_uses: BTreeMap<String, usize> = BTreeMap::new();
    for label in &labels {
        *n_uses.entry(label.clone()).or_default() += 1;
    }
    for (entry_idx, (note, block)) in entries.iter().enumerate() {
        if n_uses[&labels[entry_idx]] > 1 {
            labels[entry_idx] = format!("{} ({}, l. {})", block.label, note.path, block.line_start);
        }
    }

    let mut diagnostics = Vec::new();
    for members in shared {
        let kept: Vec<String> = members.iter().map(|&entry_idx| format!("\"{}\"", labels[entry_idx])).collect();
        let kept = match kept.as_slice() {
            [first, second] => format!("kept both as {first} and {second}"),
            _ => format!("kept all {} as {}", kept.len(), kept.join(", ")),
        };
        for &entry_idx in members {
            let (note, block) = entries[entry_idx];
            let subject = match (block.kind, block.session) {
                (NoteKind::Session, Some(session)) => format!("session {session}"),
                _ => format!("label \"{}\"", block.label),
            };
            let others: Vec<String> = members
                .iter()
                .filter(|&&other_idx| other_idx != entry_idx)
                .map(|&other_idx| format!("{} (l. {})", entries[other_idx].0.path, entries[other_idx].1.line_start))
                .collect();
            let message = format!("{subject} also claimed by {}; {kept}", others.join(", "));
            diagnostics.push(diagnostic(&note.path, Some(block.line_start), &message));
        }
    }
    (labels, diagnostics)
}

/// sha256 (hex) over `visibility.as_str() + "\n" + text`: what decides re-embedding.
/// The visibility is part of it so that a passage becoming secret is re-indexed.
pub fn content_hash(visibility: Visibility, text: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(visibility.as_str().as_bytes());
    hasher.update(b"\n");
    hasher.update(text.as_bytes());
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use super::super::{LabelLanguage, SessionNumber, default_kind_folders, parse_note};
    use super::*;

    /// Parses each `(path, text)` note, fragments the campaign (with `Secretos` secret) and
    /// renders every fragment on one line: label, part, visibility, span, words, headings and
    /// the first and last words of its text; then the diagnostics.
    fn check(notes: &[(&str, &str)], expect: &str) {
        let config = CorpusConfig::for_tests();
        let notes: Vec<Note> =
            notes.iter().map(|(path, text)| parse_note(path, text, &config, &Default::default()).0).collect();
        let (fragments, diagnostics) = fragment_campaign(&notes, &config);
        let mut actual = String::new();
        for fragment in &fragments {
            let words: Vec<&str> = fragment.text.split_whitespace().collect();
            let edges = match words.as_slice() {
                [] => String::new(),
                [only] => (*only).to_string(),
                [first, .., last] => format!("{first} … {last}"),
            };
            let visibility = if fragment.visibility == Visibility::DmOnly { " dm_only" } else { "" };
            writeln!(
                actual,
                "[{}] #{}{visibility} {}-{} {}w {:?} {edges}",
                fragment.label,
                fragment.part,
                fragment.line_start,
                fragment.line_end,
                fragment.word_count,
                fragment.heading_path,
            )
            .unwrap();
            assert_eq!(fragment.word_count, words.len());
            assert!(fragment.word_count <= SESSION_MAX_WORDS, "{} over the cap", fragment.label);
            assert_eq!(fragment.content_hash, content_hash(fragment.visibility, &fragment.text));
        }
        for diagnostic in &diagnostics {
            let line = diagnostic.line.map_or("-".to_string(), |line| line.to_string());
            writeln!(actual, "diagnostic {} {line}: {}", diagnostic.path, diagnostic.message).unwrap();
        }
        assert_eq!(actual.trim_end(), expect.trim(), "\n--- actual ---\n{actual}");
    }

    /// `n` numbered words `{prefix}1 … {prefix}n`, `per_line` to a line.
    fn words(prefix: &str, n: usize, per_line: usize) -> String {
        let words: Vec<String> = (1..=n).map(|i| format!("{prefix}{i}")).collect();
        words.chunks(per_line).map(|line| line.join(" ")).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn small_block_is_one_fragment() {
        check(
            &[("Sesiones/Sesion 1.md", "\n# Sesión 1\n\nHola %%secreto%% mundo.\n\n")],
            r#"
[Sesión 1] #0 2-4 5w ["Sesión 1"] # … mundo.
[Sesión 1] #1 dm_only 4-4 1w ["Sesión 1"] secreto"#,
        );
    }

    #[test]
    fn exactly_the_cap_is_one_fragment() {
        let text = words("w", SESSION_MAX_WORDS, 10);
        check(&[("Sesiones/Sesion 1.md", &text)], "[Sesión 1] #0 1-120 1200w [] w1 … w1200");
    }

    #[test]
    fn sections_are_grouped_up_to_the_cap_never_split() {
        // Four sections of 1 + 500 words (heading + body): two fit under the cap, a third does not.
        let text = ["a", "b", "c", "d"]
            .iter()
            .map(|name| format!("## {name}\n{}", words(name, 499, 50)))
            .collect::<Vec<_>>()
            .join("\n");
        check(
            &[("Sesiones/Sesion 2.md", &format!("Intro.\n**No es título**\n{text}"))],
            r#"
[Sesión 2] #0 1-24 1006w [] Intro. … b499
[Sesión 2] #1 25-46 1002w ["c"] ## … d499"#,
        );
    }

    #[test]
    fn oversized_section_is_windowed_with_overlap() {
        // One heading-less run of 2500 words: windows start at 0, 1080 and 2160.
        let text = words("w", 2500, 10);
        check(
            &[("Lugares/Largo.md", &format!("# Largo\n{text}\n## Después\nfin."))],
            r#"
[Mundo: Largo] #0 1-121 1200w ["Largo"] # … w1198
[Mundo: Largo] #1 109-229 1200w ["Largo"] w1079 … w2278
[Mundo: Largo] #2 217-251 342w ["Largo"] w2159 … w2500
[Mundo: Largo] #3 252-253 3w ["Largo", "Después"] ## … fin."#,
        );
    }

    #[test]
    fn windows_keep_every_word_and_overlap_exactly() {
        let text = words("w", 3000, 7);
        let lines = source_lines(&text, 10);
        let pieces = windows(&lines);
        let windows: Vec<Vec<&str>> = pieces.iter().map(|piece| piece.text.split_whitespace().collect()).collect();
        for pair in windows.windows(2) {
            let overlap = &pair[0][pair[0].len() - OVERLAP_WORDS..];
            assert_eq!(overlap, &pair[1][..OVERLAP_WORDS]);
            assert_ne!(pair[0][pair[0].len() - OVERLAP_WORDS - 1], pair[1][0]);
        }
        let mut rebuilt: Vec<&str> = windows[0].clone();
        for window in &windows[1..] {
            rebuilt.extend(&window[OVERLAP_WORDS..]);
        }
        let original: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(rebuilt, original);
        let spans: Vec<(u32, u32)> = pieces.iter().map(|piece| (piece.line_start, piece.line_end)).collect();
        assert_eq!(spans, [(10, 181), (164, 335), (318, 438)]);
    }

    #[test]
    fn windows_start_and_end_at_sentences_where_the_text_has_them() {
        // 300 sentences of nine words, five to a line, no blank line: one section of 2,700
        // words that must be windowed, with a sentence end every ninth word.
        let sentences: Vec<String> =
            (1..=300).map(|j| (1..=9).map(|i| format!("s{j}w{i}")).collect::<Vec<_>>().join(" ") + ".").collect();
        let text = sentences.chunks(5).map(|line| line.join(" ")).collect::<Vec<_>>().join("\n");
        let pieces = windows(&source_lines(&text, 1));
        let windows: Vec<Vec<&str>> = pieces.iter().map(|piece| piece.text.split_whitespace().collect()).collect();
        assert!(windows.len() >= 3, "{} windows", windows.len());
        for window in &windows {
            assert!(window.len() <= SESSION_MAX_WORDS);
            assert!(window[0].ends_with("w1"), "a window opens mid-sentence: {:?}", window[0]);
            assert!(window[window.len() - 1].ends_with("w9."), "a window ends mid-sentence: {:?}", window.last());
        }
        let mut rebuilt: Vec<&str> = windows[0].clone();
        for pair in windows.windows(2) {
            let overlap =
                pair[0].len() - pair[0].iter().position(|word| *word == pair[1][0]).expect("the windows overlap");
            assert!((OVERLAP_WORDS..=2 * OVERLAP_WORDS).contains(&overlap), "overlap of {overlap} words");
            assert_eq!(pair[0][pair[0].len() - overlap..], pair[1][..overlap]);
            rebuilt.extend(&pair[1][overlap..]);
        }
        assert_eq!(rebuilt, text.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn chronicle_sections_and_secrets() {
        let long_session = format!(
            "## Sesión 2 — Larga\n### Parte A\n{}\n### Parte B\n{}\n%% el máster %%\n### Parte C\ncorta.",
            words("a", 700, 100),
            words("b", 700, 100)
        );
        check(
            &[("Crónica.md", &format!("# Crónica\nIntro.\n## Sesión 1\nUno.\n{long_session}"))],
            r#"
[Mundo: Crónica] #0 1-2 3w ["Crónica"] # … Intro.
[Sesión 1] #0 3-4 4w ["Sesión 1"] ## … Uno.
[Sesión 2] #0 5-13 708w ["Sesión 2 — Larga"] ## … a700
[Sesión 2] #1 14-24 707w ["Sesión 2 — Larga", "Parte B"] ### … corta.
[Sesión 2] #2 dm_only 22-22 2w ["Sesión 2 — Larga", "Parte B"] el … máster"#,
        );
    }

    #[test]
    fn duplicate_labels_are_kept_and_reported() {
        check(
            &[
                ("Sesiones/Sesion 12.md", "Doce."),
                ("Crónica.md", "## Sesión 11\nOnce.\n## Sesión 12\nDoce otra vez.\n## Sesión 12\nY otra."),
                ("otros/Sesiones/Sesion 12.md", "Doce bis."),
            ],
            r#"
[Sesión 11] #0 1-2 4w ["Sesión 11"] ## … Once.
[Sesión 12 (Crónica, l. 3)] #0 3-4 6w ["Sesión 12"] ## … vez.
[Sesión 12 (Crónica, l. 5)] #0 5-6 5w ["Sesión 12"] ## … otra.
[Sesión 12 (Sesiones/Sesion 12.md, l. 1)] #0 1-1 1w [] Doce.
[Sesión 12 (otros/Sesiones/Sesion 12.md, l. 1)] #0 1-1 2w [] Doce … bis.
diagnostic Crónica.md 3: session 12 also claimed by Crónica.md (l. 5), Sesiones/Sesion 12.md (l. 1), otros/Sesiones/Sesion 12.md (l. 1); kept all 4 as "Sesión 12 (Crónica, l. 3)", "Sesión 12 (Crónica, l. 5)", "Sesión 12 (Sesiones/Sesion 12.md, l. 1)", "Sesión 12 (otros/Sesiones/Sesion 12.md, l. 1)"
diagnostic Crónica.md 5: session 12 also claimed by Crónica.md (l. 3), Sesiones/Sesion 12.md (l. 1), otros/Sesiones/Sesion 12.md (l. 1); kept all 4 as "Sesión 12 (Crónica, l. 3)", "Sesión 12 (Crónica, l. 5)", "Sesión 12 (Sesiones/Sesion 12.md, l. 1)", "Sesión 12 (otros/Sesiones/Sesion 12.md, l. 1)"
diagnostic Sesiones/Sesion 12.md 1: session 12 also claimed by Crónica.md (l. 3), Crónica.md (l. 5), otros/Sesiones/Sesion 12.md (l. 1); kept all 4 as "Sesión 12 (Crónica, l. 3)", "Sesión 12 (Crónica, l. 5)", "Sesión 12 (Sesiones/Sesion 12.md, l. 1)", "Sesión 12 (otros/Sesiones/Sesion 12.md, l. 1)"
diagnostic otros/Sesiones/Sesion 12.md 1: session 12 also claimed by Crónica.md (l. 3), Crónica.md (l. 5), Sesiones/Sesion 12.md (l. 1); kept all 4 as "Sesión 12 (Crónica, l. 3)", "Sesión 12 (Crónica, l. 5)", "Sesión 12 (Sesiones/Sesion 12.md, l. 1)", "Sesión 12 (otros/Sesiones/Sesion 12.md, l. 1)""#,
        );
        check(
            &[("b/Sesion 3.md", "Tres."), ("a/Crónica.md", "## Sesión 3\nTres.\n## Sesión 4\nCuatro.")],
            r#"
[Sesión 3 (Crónica)] #0 1-2 4w ["Sesión 3"] ## … Tres.
[Sesión 4] #0 3-4 4w ["Sesión 4"] ## … Cuatro.
[Sesión 3 (Sesion 3)] #0 1-1 1w [] Tres.
diagnostic a/Crónica.md 1: session 3 also claimed by b/Sesion 3.md (l. 1); kept both as "Sesión 3 (Crónica)" and "Sesión 3 (Sesion 3)"
diagnostic b/Sesion 3.md 1: session 3 also claimed by a/Crónica.md (l. 1); kept both as "Sesión 3 (Crónica)" and "Sesión 3 (Sesion 3)""#,
        );
    }

    #[test]
    fn secret_paths_give_only_dm_only_fragments() {
        check(
            &[("secretos/Plan.md", "# Plan\nLa traición. <!-- gm -->Y más.<!-- /gm -->")],
            r#"
[Mundo: Plan] #0 dm_only 1-2 4w ["Plan"] # … traición.
[Mundo: Plan] #1 dm_only 2-2 2w ["Plan"] Y … más."#,
        );
    }

    #[test]
    fn output_does_not_depend_on_input_order() {
        let config = CorpusConfig {
            label_language: LabelLanguage::Es,
            kind_folders: default_kind_folders(),
            secret_paths: Vec::new(),
            secret_words: crate::corpus::default_secret_words(),
            player_paths: Vec::new(),
            session_patterns: crate::corpus::SessionPattern::defaults(),
        };
        let sources = [("Sesiones/Sesion 1.md", "Uno."), ("Crónica.md", "## Sesión 1\nA.\n## Sesión 2\nB.")];
        let notes: Vec<Note> =
            sources.iter().map(|(path, text)| parse_note(path, text, &config, &Default::default()).0).collect();
        let reversed: Vec<Note> = notes.iter().rev().cloned().collect();
        assert_eq!(fragment_campaign(&notes, &config), fragment_campaign(&reversed, &config));
        assert_eq!(fragment_campaign(&notes, &config).0[0].session, Some(SessionNumber(1)));
    }

    #[test]
    fn the_hash_covers_the_visibility() {
        // sha256("player\nhola") and sha256("dm_only\nhola"): a passage turned secret is re-indexed.
        assert_eq!(
            content_hash(Visibility::Player, "hola"),
            "521b9f8a942e081a18445aa6b1938bdad6bf93eb2e36a0de60f43870036339be"
        );
        assert_eq!(
            content_hash(Visibility::DmOnly, "hola"),
            "14d7b23efa02174fe7c29bd8d9b946f130124cef1f2b4fe868f0eb8bd880ea45"
        );
    }
}
