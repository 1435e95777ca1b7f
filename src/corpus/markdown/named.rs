//! The one rule for a note's body: every **named thing** (a heading, a label opening a
//! paragraph, list item or table cell, a table column's header, a fence's info string, an HTML
//! element's `summary`, `title` or `class`, an inline field's key) goes through the same GM-word
//! test ([`CorpusConfig::gm_word_in`]), and what a named thing that holds a GM word covers is
//! GM-only:
//!
//! | named thing | covers |
//! |---|---|
//! | heading | its section, up to the next heading of the same or a higher level |
//! | label (`**GM:**`, `Secreto:`, a bold line `**Notas del DM**`) | its paragraph or list item (and the next paragraph when the label stands alone) |
//! | column header | every cell of the column |
//! | label in a cell | the cell |
//! | fence info (```` ```spoiler ````) | the fence and its content |
//! | HTML `summary`/`title`/`class` | the element, up to its closing tag |
//! | inline field key (`dm:: …`) | its value (the line, or the bracketed field) |
//!
//! Callouts (type, metadata, title) are read by `callout`, with the same test.
//!
//! Runs before the body's other secret forms are read, on the raw lines: a covered line is
//! blanked (a covered cell or field is blanked in its line), so nothing in it is rendered,
//! linked, tagged or read as a session header for players. Nested containers (lists,
//! quotes, callouts) are looked through: a label in `> - **GM:** …` is a label.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::callout::quote_depth;
use crate::corpus::{CorpusConfig, HiddenBecause};
use crate::text::NextMarker;

/// A label is a name, not a sentence: `Notas del DJ para la sesión:` is a label, a sentence
/// that happens to hold a colon is not. Six words cover every label seen in the notes.
const LABEL_MAX_WORDS: usize = 6;

/// How many lines after `<details>` its `<summary>` may start on.
const SUMMARY_LOOKAHEAD_LINES: usize = 3;

static HEADING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^ {0,3}(?P<marks>#{1,6})(?:[ \t]+(?P<text>.*?))?[ \t#]*$").expect("valid heading pattern")
});
/// A list item's marker and task box, after the indentation.
static LIST_MARKER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)(?:\[.\][ \t]+)?").expect("valid list pattern"));
/// A label: optional emphasis, a name without colons, the colon (inside or outside the
/// emphasis), then a space or the end. `::` is an inline field, not a label.
static LABEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:\*\*|__|\*|_)?(?P<label>[^:*|\[\]<>`]{1,80}?)[ \t]*(?:\*\*|__|\*|_)?:(?:\*\*|__|\*|_)?(?:[ \t]|$)")
        .expect("valid label pattern")
});
/// A line of bold text alone (`**Notas del DM**`): a label without its colon, as DMs write a
/// heading that is not one; it labels what follows it.
static BOLD_LINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:\*\*|__)(?P<label>[^*_]{1,80}?)(?:\*\*|__)[ \t]*$").expect("valid bold line pattern")
});
/// An inline field that opens its line: `dm:: …`, `- gm notes:: …`.
static FIELD_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?P<key>[\p{L}\p{N}_\- ]{1,40}?)::").expect("valid field pattern"));
/// An inline field in brackets or parentheses anywhere in a line: `[dm:: …]`, `(gm:: …)`.
static FIELD_INLINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\[(?P<key>[\p{L}\p{N}_\- ]{1,40}?)::[^\]]*\]|\((?P<pkey>[\p{L}\p{N}_\- ]{1,40}?)::[^)]*\)")
        .expect("valid inline field pattern")
});
static HTML_OPEN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"<(?P<tag>[A-Za-z][A-Za-z0-9-]*)(?P<attrs>\s[^>]*)?>").expect("valid html pattern"));
static HTML_ATTR: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)\b(?P<name>class|title)\s*=\s*(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s>]+))"#)
        .expect("valid attribute pattern")
});
static SUMMARY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?is)<summary[^>]*>(?P<text>.*?)</summary>").expect("valid summary pattern"));

/// What the named things of a body cover.
#[derive(Debug, Default)]
pub(crate) struct Covers {
    /// One entry per named thing that holds a GM word.
    pub reasons: Vec<HiddenBecause>,
    /// Per line index: the reason covering the whole line.
    whole: Vec<Option<usize>>,
    /// `(line index, byte range, reason)`: parts of lines covered (cells, bracketed fields,
    /// an element that opens and closes on one line).
    spans: Vec<(usize, Range<usize>, usize)>,
    /// Unclosed elements and fences: `(line index, message)`.
    pub problems: Vec<(usize, String)>,
    /// Comments (`%%`, `<!--`) over several lines: `(opener line, closer line)`. A cover never
    /// ends inside one, so the comment reader after it sees both ends or neither.
    comments: Vec<(usize, usize)>,
}

impl Covers {
    pub fn is_empty(&self) -> bool {
        self.reasons.is_empty()
    }

    fn cover_lines(&mut self, mut lines: Range<usize>, because: HiddenBecause) {
        if let Some(&(_, closer)) =
            self.comments.iter().find(|&&(opener, closer)| opener < lines.end && lines.end <= closer)
        {
            lines.end = closer + 1;
        }
        let reason = self.reasons.len();
        self.reasons.push(because);
        for line_index in lines {
            if let Some(slot) = self.whole.get_mut(line_index)
                && slot.is_none()
            {
                *slot = Some(reason);
            }
        }
    }

    fn cover_spans(&mut self, spans: Vec<(usize, Range<usize>)>, because: HiddenBecause) {
        if spans.is_empty() {
            return;
        }
        let reason = self.reasons.len();
        self.reasons.push(because);
        self.spans.extend(spans.into_iter().map(|(line_index, range)| (line_index, range, reason)));
    }

    /// The lines as players may read them (covered lines empty, covered spans blanked), and
    /// each reason's covered text: `(reason, first line index, last line index, text)`, the
    /// text one line per line of its span.
    pub fn apply(&self, lines: &[&str]) -> (Vec<String>, Vec<(usize, usize, usize, String)>) {
        let mut shown: Vec<String> = lines.iter().map(|line| (*line).to_string()).collect();
        let mut taken: Vec<Vec<(usize, String)>> = vec![Vec::new(); self.reasons.len()];
        // One span per stretch of a line (a cell covered by its column and by its own label is
        // taken once, by the first), applied right to left so earlier ranges stay valid.
        let mut spans = self.spans.clone();
        spans.sort_by(|a, b| (a.0, a.1.start, a.2).cmp(&(b.0, b.1.start, b.2)));
        let mut kept: Vec<(usize, Range<usize>, usize)> = Vec::with_capacity(spans.len());
        for span in spans {
            let overlaps = kept.last().is_some_and(|last| last.0 == span.0 && last.1.end > span.1.start);
            if !overlaps {
                kept.push(span);
            }
        }
        let mut spans = kept;
        spans.reverse();
        for (line_index, range, reason) in spans {
            if self.whole[line_index].is_some() || range.end > shown[line_index].len() {
                continue;
            }
            let line = &mut shown[line_index];
            if !line.is_char_boundary(range.start) || !line.is_char_boundary(range.end) {
                continue;
            }
            let text = line[range.clone()].to_string();
            line.replace_range(range, " ");
            taken[reason].push((line_index, text));
        }
        for (line_index, slot) in self.whole.iter().enumerate() {
            if let Some(reason) = *slot {
                taken[reason].push((line_index, std::mem::take(&mut shown[line_index])));
            }
        }
        let mut passages = Vec::new();
        for (reason, mut parts) in taken.into_iter().enumerate() {
            if parts.is_empty() {
                continue;
            }
            parts.sort_by_key(|(line_index, _)| *line_index);
            let first = parts[0].0;
            let last = parts[parts.len() - 1].0;
            let mut text_lines = vec![String::new(); last - first + 1];
            for (line_index, text) in parts {
                let slot = &mut text_lines[line_index - first];
                if !slot.is_empty() {
                    slot.push(' ');
                }
                slot.push_str(text.trim_matches(|c: char| c == '|' || c.is_whitespace()));
            }
            passages.push((reason, first, last, text_lines.join("\n")));
        }
        (shown, passages)
    }
}

/// Finds the named things of the body (`lines[body_start..]`) that hold a GM word.
pub(crate) fn cover_named_things(lines: &[&str], body_start: usize, config: &CorpusConfig) -> Covers {
    let structure = Structure::read(lines, body_start);
    let mut covers =
        Covers { whole: vec![None; lines.len()], comments: structure.comments.clone(), ..Covers::default() };
    let mut line_index = body_start;
    while line_index < lines.len() {
        // A line that starts inside a comment is already secret: nothing in it names anything.
        if structure.comments.iter().any(|&(opener, closer)| opener < line_index && line_index <= closer) {
            line_index += 1;
            continue;
        }
        if let Some(fence) = structure.fence_opened_at(line_index) {
            let info = fence.info.trim();
            if let Some(word) = config.gm_word_in(info) {
                let end = fence.close.unwrap_or(lines.len() - 1);
                if fence.close.is_none() {
                    covers.problems.push((line_index, format!("fence `{info}` is never closed")));
                }
                let because = HiddenBecause::new(Some(line_number(line_index)), "fence", info, word);
                covers.cover_lines(line_index..end + 1, because);
            }
            line_index = fence.close.map_or(lines.len(), |close| close + 1);
            continue;
        }
        if let Some(table_end) = structure.table_at(line_index, lines) {
            cover_table(lines, line_index, table_end, config, &mut covers);
            line_index = table_end + 1;
            continue;
        }
        cover_line_things(lines, line_index, &structure, config, &mut covers);
        line_index += 1;
    }
    covers
}

/// The headings, labels, fields and elements that open or sit on `line_index`.
fn cover_line_things(
    lines: &[&str],
    line_index: usize,
    structure: &Structure,
    config: &CorpusConfig,
    covers: &mut Covers,
) {
    let line = lines[line_index];
    let (depth, content) = quote_depth(line);
    let line_no = Some(line_number(line_index));
    let (indent, item, rest) = container(content);
    // A heading opens its line, or a list item (`- ## Notas del DJ`).
    let heading = HEADING.captures(content).or_else(|| if item { HEADING.captures(rest) } else { None });
    if let Some(heading) = heading {
        let text = heading.name("text").map_or("", |text| text.as_str());
        if let Some(word) = config.gm_word_in(text) {
            let level = heading["marks"].len();
            let end = if item {
                block_end(lines, line_index, depth, indent, item, false)
            } else {
                structure.section_end(line_index, level, depth, lines)
            };
            covers.cover_lines(line_index..end + 1, HiddenBecause::new(line_no, "heading", content.trim(), word));
        }
        return;
    }
    if let Some(field) = FIELD_LINE.captures(rest) {
        if let Some(word) = config.gm_word_in(&field["key"]) {
            covers.cover_lines(line_index..line_index + 1, HiddenBecause::new(line_no, "field", &field["key"], word));
        }
    } else if let Some(label) = LABEL.captures(rest) {
        let name = label["label"].trim();
        if name.split_whitespace().count() <= LABEL_MAX_WORDS
            && let Some(word) = config.gm_word_in(name)
        {
            let stands_alone = rest[label.get(0).map_or(0, |whole| whole.end())..].trim().is_empty();
            let end = block_end(lines, line_index, depth, indent, item, stands_alone);
            covers.cover_lines(line_index..end + 1, HiddenBecause::new(line_no, "label", name, word));
        }
    } else if let Some(bold) = BOLD_LINE.captures(rest) {
        let name = bold["label"].trim();
        if name.split_whitespace().count() <= LABEL_MAX_WORDS
            && let Some(word) = config.gm_word_in(name)
        {
            let end = block_end(lines, line_index, depth, indent, item, true);
            covers.cover_lines(line_index..end + 1, HiddenBecause::new(line_no, "label", name, word));
        }
    }
    for field in FIELD_INLINE.captures_iter(line) {
        let key = field.name("key").or_else(|| field.name("pkey")).map_or("", |key| key.as_str());
        if let (Some(word), Some(whole)) = (config.gm_word_in(key), field.get(0)) {
            covers.cover_spans(vec![(line_index, whole.range())], HiddenBecause::new(line_no, "field", key, word));
        }
    }
    cover_elements(lines, line_index, config, covers);
}

/// HTML elements opened on `line_index` whose `class`, `title` or (for `<details>`) summary
/// holds a GM word: covered up to their closing tag.
fn cover_elements(lines: &[&str], line_index: usize, config: &CorpusConfig, covers: &mut Covers) {
    let line = lines[line_index];
    if !line.contains('<') {
        return;
    }
    for open in HTML_OPEN.captures_iter(line) {
        let Some(whole) = open.get(0) else { continue };
        let tag = open["tag"].to_ascii_lowercase();
        let attrs = open.name("attrs").map_or("", |attrs| attrs.as_str());
        let mut named: Option<(String, String)> = None;
        for attr in HTML_ATTR.captures_iter(attrs) {
            let value = attr.name("dq").or(attr.name("sq")).or(attr.name("bare")).map_or("", |value| value.as_str());
            if let Some(word) = config.gm_word_in(value) {
                named = Some((format!("<{tag} {}=\"{value}\">", attr["name"].to_ascii_lowercase()), word.to_string()));
                break;
            }
        }
        if named.is_none() && tag == "details" {
            let upto = (line_index + SUMMARY_LOOKAHEAD_LINES + 1).min(lines.len());
            let ahead = format!("{}\n{}", &line[whole.end()..], lines[line_index + 1..upto].join("\n"));
            if let Some(summary) = SUMMARY.captures(&ahead)
                && let Some(word) = config.gm_word_in(&summary["text"])
            {
                named = Some((format!("<summary>{}</summary>", summary["text"].trim()), word.to_string()));
            }
        }
        let Some((name, word)) = named else { continue };
        let because = HiddenBecause::new(Some(line_number(line_index)), "html", &name, &word);
        match closing_tag(lines, line_index, whole.end(), &tag) {
            Some((close_line, close_end)) if close_line == line_index => {
                covers.cover_spans(vec![(line_index, whole.start()..close_end)], because);
            }
            Some((close_line, _)) => covers.cover_lines(line_index..close_line + 1, because),
            None => {
                covers.problems.push((line_index, format!("`<{tag}>` is never closed")));
                covers.cover_lines(line_index..lines.len(), because);
            }
        }
    }
}

/// Where the element `<tag …>` opened at `(line_index, from)` closes: the line and the byte
/// after its `</tag>`, counting nested elements of the same tag.
fn closing_tag(lines: &[&str], line_index: usize, from: usize, tag: &str) -> Option<(usize, usize)> {
    let open = Regex::new(&format!(r"(?i)<{}(?:\s[^>]*)?>|</{}\s*>", regex::escape(tag), regex::escape(tag))).ok()?;
    let mut depth = 1usize;
    for (at, line) in lines.iter().enumerate().skip(line_index) {
        let start = if at == line_index { from } else { 0 };
        for found in open.find_iter(&line[start..]) {
            if found.as_str().starts_with("</") {
                depth -= 1;
                if depth == 0 {
                    return Some((at, start + found.end()));
                }
            } else {
                depth += 1;
            }
        }
    }
    None
}

/// A table from its header row at `first` to `last`: columns whose header holds a GM word
/// cover their cells; a cell that opens with a GM label covers itself.
fn cover_table(lines: &[&str], first: usize, last: usize, config: &CorpusConfig, covers: &mut Covers) {
    let header = cells(lines[first]);
    for (column, (_, header_text)) in header.iter().enumerate() {
        let Some(word) = config.gm_word_in(header_text) else { continue };
        let spans: Vec<(usize, Range<usize>)> = (first..=last)
            .filter(|&row| row != first + 1)
            .filter_map(|row| cells(lines[row]).get(column).map(|(range, _)| (row, range.clone())))
            .collect();
        covers.cover_spans(spans, HiddenBecause::new(Some(line_number(first)), "column", header_text, word));
    }
    for row in (first + 2)..=last {
        for (range, text) in cells(lines[row]) {
            if let Some(label) = LABEL.captures(text.trim())
                && label["label"].split_whitespace().count() <= LABEL_MAX_WORDS
                && let Some(word) = config.gm_word_in(&label["label"])
            {
                let because = HiddenBecause::new(Some(line_number(row)), "label", label["label"].trim(), word);
                covers.cover_spans(vec![(row, range)], because);
            }
        }
    }
}

/// A table row's cells: each one's byte range in the line and its text (escaped `\|` kept).
fn cells(line: &str) -> Vec<(Range<usize>, &str)> {
    let (_, quoted) = quote_depth(line);
    // A table in a list item: its rows follow the marker or the item's indentation.
    let (_, _, content) = container(quoted);
    let offset = line.len() - content.len();
    let mut bounds = Vec::new();
    let bytes = content.as_bytes();
    for (at, &byte) in bytes.iter().enumerate() {
        if byte == b'|' && (at == 0 || bytes[at - 1] != b'\\') {
            bounds.push(at);
        }
    }
    let trimmed = content.trim_end();
    let mut edges = Vec::new();
    if !content.trim_start().starts_with('|') {
        edges.push(0usize.wrapping_sub(1));
    }
    edges.extend(bounds.iter().copied());
    if !trimmed.ends_with('|') || trimmed.ends_with("\\|") {
        edges.push(trimmed.len());
    }
    edges
        .windows(2)
        .map(|pair| {
            let start = pair[0].wrapping_add(1);
            let range = start..pair[1];
            (offset + range.start..offset + range.end, &content[range])
        })
        .filter(|(range, _)| range.start <= range.end)
        .collect()
}

/// The last line of the paragraph or list item that a label on `line_index` opens.
/// `stands_alone`: the label has no text after it, so what follows (past blank lines) is
/// what it labels.
fn block_end(lines: &[&str], line_index: usize, depth: usize, indent: usize, item: bool, stands_alone: bool) -> usize {
    let mut end = line_index;
    let mut at = line_index + 1;
    if stands_alone {
        while at < lines.len() && is_blank_at(lines[at], depth) {
            at += 1;
        }
    }
    while at < lines.len() {
        let (line_depth, content) = quote_depth(lines[at]);
        if line_depth < depth && !content.trim().is_empty() && is_blank_at(lines[at - 1], depth) {
            break;
        }
        if content.trim().is_empty() || line_depth < depth {
            if !item {
                break;
            }
            // A list item goes on past a blank line when what follows is indented under it.
            let next = (at..lines.len()).find(|&next| !is_blank_at(lines[next], depth));
            match next {
                Some(next) if container(quote_depth(lines[next]).1).0 > indent => {
                    at = next;
                    continue;
                }
                _ => break,
            }
        }
        if HEADING.is_match(content) || super::is_fence(content) {
            break;
        }
        let (line_indent, is_item, _) = container(content);
        if item && is_item && line_indent <= indent {
            break;
        }
        end = at;
        at += 1;
    }
    end
}

fn is_blank_at(line: &str, _depth: usize) -> bool {
    quote_depth(line).1.trim().is_empty()
}

/// A line's indentation (columns, a tab as 4), whether it opens a list item, and its text
/// after the list marker and task box.
fn container(content: &str) -> (usize, bool, &str) {
    let stripped = content.trim_start_matches([' ', '\t']);
    let indent: usize = content[..content.len() - stripped.len()].chars().map(|c| if c == '\t' { 4 } else { 1 }).sum();
    match LIST_MARKER.find(stripped) {
        Some(marker) => (indent, true, &stripped[marker.end()..]),
        None => (indent, false, stripped),
    }
}

/// Fences, headings and comments over several lines, read once.
struct Structure {
    fences: Vec<Fence>,
    /// `(line index, level, quote depth)`, outside fences.
    headings: Vec<(usize, usize, usize)>,
    /// `(opener line, closer line)` of each `%%` or `<!--` comment that spans lines (the
    /// last line when never closed); read as the body reader reads them, fences included.
    comments: Vec<(usize, usize)>,
}

/// The comments that span lines: each `(opener line, closer line)`.
fn multiline_comments(lines: &[&str], body_start: usize) -> Vec<(usize, usize)> {
    let mut comments = Vec::new();
    let mut open: Option<(usize, &str)> = None;
    for (line_index, line) in lines.iter().enumerate().skip(body_start) {
        // Where the line is read from, and the next of each opener at or after it: each kind
        // is searched for once along the line, as the body reader does, so a
        // line of many markers of one kind is not scanned again for the other at each one.
        let mut from = 0;
        let (mut percents, mut html_opens) = (NextMarker::new("%%"), NextMarker::new("<!--"));
        loop {
            match open {
                Some((opener, closer)) => match line[from..].find(closer) {
                    Some(at) => {
                        if opener != line_index {
                            comments.push((opener, line_index));
                        }
                        from += at + closer.len();
                        open = None;
                    }
                    None => break,
                },
                None => {
                    let (at, opener_len, closer) =
                        match (percents.at_or_after(line, from), html_opens.at_or_after(line, from)) {
                            (Some(p), Some(h)) if h < p => (h, 4, "-->"),
                            (Some(p), _) => (p, 2, "%%"),
                            (None, Some(h)) => (h, 4, "-->"),
                            (None, None) => break,
                        };
                    from = at + opener_len;
                    open = Some((line_index, closer));
                }
            }
        }
    }
    if let Some((opener, _)) = open
        && opener + 1 < lines.len()
    {
        comments.push((opener, lines.len() - 1));
    }
    comments
}

struct Fence {
    open: usize,
    close: Option<usize>,
    info: String,
}

impl Structure {
    fn read(lines: &[&str], body_start: usize) -> Structure {
        let mut structure =
            Structure { fences: Vec::new(), headings: Vec::new(), comments: multiline_comments(lines, body_start) };
        let mut open: Option<(usize, char, usize, String)> = None;
        for (line_index, line) in lines.iter().enumerate().skip(body_start) {
            let (depth, content) = quote_depth(line);
            // A fence may open a list item (`- ```spoiler`).
            let (_, _, trimmed) = container(content);
            let marker = trimmed.chars().next().filter(|c| matches!(c, '`' | '~'));
            let run = marker.map_or(0, |marker| trimmed.chars().take_while(|&c| c == marker).count());
            match (&open, marker) {
                (Some((_, fence_char, fence_len, _)), Some(marker))
                    if marker == *fence_char && run >= *fence_len && trimmed[run..].trim().is_empty() =>
                {
                    if let Some((start, _, _, info)) = open.take() {
                        structure.fences.push(Fence { open: start, close: Some(line_index), info });
                    }
                }
                (Some(_), _) => {}
                (None, Some(marker)) if run >= 3 => {
                    open = Some((line_index, marker, run, trimmed[run..].trim().to_string()));
                }
                (None, _) => {
                    if let Some(heading) = HEADING.captures(content) {
                        structure.headings.push((line_index, heading["marks"].len(), depth));
                    }
                }
            }
        }
        if let Some((start, _, _, info)) = open {
            structure.fences.push(Fence { open: start, close: None, info });
        }
        structure
    }

    fn fence_opened_at(&self, line_index: usize) -> Option<&Fence> {
        self.fences.iter().find(|fence| fence.open == line_index)
    }

    /// The last line of the section a heading of `level` at `line_index` opens: up to the next
    /// heading of the same or a higher level; inside a quote, also up to where the quote ends.
    fn section_end(&self, line_index: usize, level: usize, depth: usize, lines: &[&str]) -> usize {
        let next_heading = self
            .headings
            .iter()
            .find(|&&(at, other_level, _)| at > line_index && other_level <= level)
            .map_or(lines.len(), |&(at, _, _)| at);
        let quote_end = if depth > 0 {
            (line_index + 1..next_heading).find(|&at| quote_depth(lines[at]).0 < depth).unwrap_or(next_heading)
        } else {
            next_heading
        };
        quote_end.saturating_sub(1).max(line_index)
    }

    /// The last row of a table whose header row is `line_index` (a row of cells followed by
    /// a delimiter row `|---|:-:|`), or `None`.
    fn table_at(&self, line_index: usize, lines: &[&str]) -> Option<usize> {
        let header = lines[line_index];
        if !header.contains('|') {
            return None;
        }
        let delimiter = quote_depth(lines.get(line_index + 1)?).1.trim();
        let is_delimiter = delimiter.contains('-')
            && delimiter.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
            && delimiter.contains('|');
        if !is_delimiter {
            return None;
        }
        let mut last = line_index + 1;
        while last + 1 < lines.len()
            && lines[last + 1].contains('|')
            && !quote_depth(lines[last + 1]).1.trim().is_empty()
        {
            last += 1;
        }
        Some(last)
    }
}

fn line_number(line_index: usize) -> u32 {
    u32::try_from(line_index + 1).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::super::tests::check;

    #[test]
    fn a_heading_covers_its_section_up_to_the_next_of_its_level() {
        check(
            "# Baika
Tabernera del puerto.
## Notas del DJ
Es la espía de la Orden.
### Detalles
Cobra en perlas.
## Relaciones
Amiga de Nerea.",
            "
1| # Baika
2| Tabernera del puerto.
7| ## Relaciones
8| Amiga de Nerea.
secret 3-6: ## Notas del DJ⏎Es la espía de la Orden.⏎### Detalles⏎Cobra en perlas.",
        );
    }

    #[test]
    fn a_label_covers_its_paragraph_or_item() {
        check(
            "Llegan al puerto.
**GM:** el capitán miente.
Sigue mintiendo.

- Compran cuerdas.
- Secreto: la cuerda está podrida.
  y nadie lo sabe.
- Venden el barco.

DM notes:

El barco es robado.

Fin.",
            "
1| Llegan al puerto.
5| - Compran cuerdas.
8| - Venden el barco.
14| Fin.
secret 2-3: **GM:** el capitán miente.⏎Sigue mintiendo.
secret 6-7: - Secreto: la cuerda está podrida.⏎y nadie lo sabe.
secret 10-12: DM notes:⏎⏎El barco es robado.",
        );
    }

    #[test]
    fn columns_cells_fences_elements_and_fields_cover_what_they_name() {
        check(
            "| PNJ | Rol | GM |
|---|---|---|
| Baika | tabernera | espía |
| Nerea | guía | **DM:** traidora |

```spoiler
El dragón vive.
```

<details><summary>Para el máster</summary>
La reina es falsa.
</details>

<span class=\"gm-only\">oculto aquí</span> visible.

dm:: el tesoro está en la cripta
Tiene [secreto:: un hijo] y un perro.",
            "
1| | PNJ | Rol | |
2| |---|---|---|
3| | Baika | tabernera | |
4| | Nerea | guía | |
14|   visible.
17| Tiene   y un perro.
secret 1-4: GM⏎⏎espía⏎**DM:** traidora
secret 6-8: ```spoiler⏎El dragón vive.⏎```
secret 10-12: <details><summary>Para el máster</summary>⏎La reina es falsa.⏎</details>
secret 14-14: <span class=\"gm-only\">oculto aquí</span>
secret 16-16: dm:: el tesoro está en la cripta
secret 17-17: [secreto:: un hijo]",
        );
    }

    #[test]
    fn comments_over_lines_are_found_however_their_markers_mix_on_a_line() {
        let lines = ["x %%a%% <!-- b --> %%c", "c goes on %% then <!-- d", "d goes on", "--> and %%e%%", "plain"];
        assert_eq!(super::multiline_comments(&lines, 0), [(0, 1), (1, 3)]);
        // Many markers of one kind, none of the other: each pair closes on its line.
        let long = "%%x%% ".repeat(2_000) + "<!-- open";
        assert_eq!(super::multiline_comments(&[long.as_str(), "-->"], 0), [(0, 1)]);
    }
}
