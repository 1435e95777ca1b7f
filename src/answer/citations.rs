//! After generation: find the bracketed citations in an answer and check each against the
//! labels the model was actually shown.
//!
//! A citation is a bracket such as `[Sesión 12]`, `[Ficha: Baika]`, or several labels in
//! one bracket, `[Sesión 3; Sesión 5]` (`,` also separates, `[Sesión 3, 5]` means both
//! sessions). Markdown links `[text](url)`, images, checkboxes `[ ]`/`[x]`, footnotes `[^n]`,
//! escaped `\[`, and anything inside code are not citations.
//!
//! Matching is exact after trimming, then tolerant: case, accents, `_` for spaces, spacing
//! around `:`, leading zeros, `nº`/`#`, a copied part marker (`parte 2`), the other
//! language's kind word (`Session 12` for `Sesión 12`, `Sheet:` for `Ficha:`), the label
//! without its kind (`[Baika]` for `Ficha: Baika`) or without its disambiguator
//! (`Sesión 12` for `Sesión 12 (Crónica)`). A tolerant match must point at exactly one
//! shown label; it is rewritten to that label in the text.
//!
//! A cited label that maps to no shown label is invented. It is removed from its bracket;
//! a bracket left with no valid label becomes [`INVENTED_MARK`], so the reader sees that
//! the claim before it has no verifiable source. Invented labels are never listed as valid
//! citations, are counted, and are logged.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::text::fold;

/// What replaces a bracket none of whose labels was shown: the claim before it has no
/// verifiable source. Digit-free and not label-like, so validating again leaves it alone.
pub const INVENTED_MARK: &str = "[?]";

/// One bracket that looks like a citation, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CitationSpan {
    /// Byte range in the answer, brackets included.
    pub range: Range<usize>,
    /// The labels inside, trimmed, in order; a bare number after a session label is
    /// expanded with its kind word (`[Sesión 3, 5]` → `Sesión 3`, `Sesión 5`).
    pub labels: Vec<String>,
}

/// One distinct label the answer cites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Citation {
    /// The shown label it maps to; for an invented one, the label as written.
    pub label: String,
    /// Whether it maps to a label shown to the model.
    pub valid: bool,
    /// Times it is cited.
    pub count: usize,
}

/// An answer after its citations were checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ValidatedAnswer {
    /// The answer with tolerant matches rewritten to their labels and invented labels
    /// removed (a bracket left empty becomes [`INVENTED_MARK`]).
    pub text: String,
    /// Every distinct cited label in order of first appearance, valid or not.
    pub citations: Vec<Citation>,
    /// The invented labels as written, distinct, in order of first appearance.
    pub invented: Vec<String>,
}

impl ValidatedAnswer {
    /// The valid citations: the only ones a reader may be shown as sources.
    pub fn sources(&self) -> impl Iterator<Item = &Citation> {
        self.citations.iter().filter(|citation| citation.valid)
    }

    /// Times the answer cited a label it was not shown.
    pub fn n_invented(&self) -> usize {
        self.citations.iter().filter(|citation| !citation.valid).map(|citation| citation.count).sum()
    }
}

/// The brackets of `answer` that look like citations: at least one label inside starts with
/// a kind word (`Sesión`, `Session`, `Ficha`, `Sheet`, `Mundo`, `World`, any case or accent).
/// Knows nothing of the labels shown; [`validate_citations`] does.
pub fn parse_citations(answer: &str) -> Vec<CitationSpan> {
    scan_brackets(answer)
        .into_iter()
        .filter(|bracket| bracket.pieces.iter().any(|piece| label_kind(&piece.text).is_some()))
        .map(|bracket| CitationSpan {
            range: bracket.range,
            labels: bracket.pieces.into_iter().map(|piece| piece.text).collect(),
        })
        .collect()
}

/// Checks every citation of `answer` against `shown_labels` (the context's), rewrites
/// tolerant matches to the exact label and removes invented ones (see the module docs).
/// A bracket that neither looks like a citation nor names a shown label (`[sic]`, `[…]`)
/// is left as written.
pub fn validate_citations(answer: &str, shown_labels: &[String]) -> ValidatedAnswer {
    let _span = tracing::debug_span!("answer.citations", n_shown = shown_labels.len()).entered();
    let resolver = Resolver::new(shown_labels);
    let mut text = String::with_capacity(answer.len());
    let mut copied_up_to = 0;
    let mut citations: Vec<Citation> = Vec::new();
    let mut invented: Vec<String> = Vec::new();

    for bracket in scan_brackets(answer) {
        let items = resolve_bracket(answer, &bracket, &resolver);
        let is_citation = items.iter().any(|item| match item {
            BracketItem::Shown { .. } => true,
            BracketItem::Unresolved { label_like, .. } => *label_like,
        });
        if !is_citation {
            continue;
        }
        let mut valid_labels: Vec<&str> = Vec::new();
        let mut unchanged = true;
        for item in &items {
            let (label, valid) = match item {
                BracketItem::Shown { label, exact } => {
                    unchanged &= *exact && !valid_labels.contains(label);
                    if !valid_labels.contains(label) {
                        valid_labels.push(label);
                    }
                    (label.to_string(), true)
                }
                BracketItem::Unresolved { written, .. } => {
                    unchanged = false;
                    // The model's words: only at debug (the count is logged below).
                    tracing::debug!(label = %written, "invented citation");
                    if !invented.contains(written) {
                        invented.push(written.clone());
                    }
                    (written.clone(), false)
                }
            };
            match citations.iter_mut().find(|citation| citation.label == label && citation.valid == valid) {
                Some(citation) => citation.count += 1,
                None => citations.push(Citation { label, valid, count: 1 }),
            }
        }
        if unchanged {
            continue;
        }
        text.push_str(&answer[copied_up_to..bracket.range.start]);
        if valid_labels.is_empty() {
            text.push_str(INVENTED_MARK);
        } else {
            text.push('[');
            text.push_str(&valid_labels.join("; "));
            text.push(']');
        }
        copied_up_to = bracket.range.end;
    }
    text.push_str(&answer[copied_up_to..]);
    if !invented.is_empty() {
        tracing::warn!(n_invented = invented.len(), "answer cited labels it was not shown");
    }
    ValidatedAnswer { text, citations, invented }
}

/// A bracket's content cut at its separators.
#[derive(Debug)]
struct Bracket {
    /// Brackets included.
    range: Range<usize>,
    pieces: Vec<Piece>,
}

#[derive(Debug)]
struct Piece {
    /// The trimmed piece in the answer.
    range: Range<usize>,
    /// As written, or expanded (`5` after `Sesión 3` → `Sesión 5`).
    text: String,
}

/// What one label (or run of pieces) in a bracket turned out to be.
enum BracketItem<'a> {
    Shown { label: &'a str, exact: bool },
    Unresolved { written: String, label_like: bool },
}

/// Longest run of pieces first, so that a label holding a separator (`Ficha: Ana, la
/// Roja`, a copied `Sesión 12, parte 2`) is read as one. An unresolved piece takes the
/// following pieces that are neither label-like nor shown, as the rest of what was written.
fn resolve_bracket<'a>(answer: &str, bracket: &Bracket, resolver: &Resolver<'a>) -> Vec<BracketItem<'a>> {
    let pieces = &bracket.pieces;
    let written = |first: usize, last: usize| -> String {
        if first == last {
            pieces[first].text.clone()
        } else {
            answer[pieces[first].range.start..pieces[last].range.end].to_string()
        }
    };
    let mut items = Vec::new();
    let mut piece_idx = 0;
    while piece_idx < pieces.len() {
        let longest_shown = (piece_idx..pieces.len()).rev().find_map(|last| {
            let candidate = written(piece_idx, last);
            resolver.resolve(&candidate).map(|(label, exact)| (last, label, exact))
        });
        if let Some((last, label, exact)) = longest_shown {
            items.push(BracketItem::Shown { label, exact });
            piece_idx = last + 1;
            continue;
        }
        let mut last = piece_idx;
        while last + 1 < pieces.len()
            && label_kind(&pieces[last + 1].text).is_none()
            && resolver.resolve(&pieces[last + 1].text).is_none()
        {
            last += 1;
        }
        let label_like = label_kind(&pieces[piece_idx].text).is_some();
        items.push(BracketItem::Unresolved { written: written(piece_idx, last), label_like });
        piece_idx = last + 1;
    }
    items
}

/// Maps what the model wrote to a shown label: exactly, or by [`label_key`] and its
/// fallbacks when they point at one label only.
struct Resolver<'a> {
    labels: &'a [String],
    by_key: HashMap<String, Vec<usize>>,
    /// Key without a trailing parenthetical: `session 12` for `Sesión 12 (Crónica)`.
    by_base_key: HashMap<String, Vec<usize>>,
    /// Sheets and world documents by name alone: `baika` for `Ficha: Baika`.
    by_name: HashMap<String, Vec<usize>>,
}

impl<'a> Resolver<'a> {
    fn new(labels: &'a [String]) -> Resolver<'a> {
        let mut by_key: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_base_key: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_name: HashMap<String, Vec<usize>> = HashMap::new();
        for (label_idx, label) in labels.iter().enumerate() {
            let key = label_key(label);
            if let Some(base) = without_parenthetical(&key) {
                by_base_key.entry(base.to_string()).or_default().push(label_idx);
            }
            if let LabelKey { kind: Some(Kind::Sheet | Kind::World), name } = split_key(&key) {
                by_name.entry(name.to_string()).or_default().push(label_idx);
            }
            by_key.entry(key.clone()).or_default().push(label_idx);
        }
        Resolver { labels, by_key, by_base_key, by_name }
    }

    /// The shown label `written` stands for, and whether it was written exactly.
    fn resolve(&self, written: &str) -> Option<(&'a str, bool)> {
        let written = written.trim();
        if let Some(label) = self.labels.iter().find(|label| label.trim() == written) {
            return Some((label, true));
        }
        let key = label_key(written);
        let unique = |matches: Option<&Vec<usize>>| match matches.map(Vec::as_slice) {
            Some(&[label_idx]) => Some((self.labels[label_idx].as_str(), false)),
            _ => None,
        };
        if let Some(found) = unique(self.by_key.get(&key)) {
            return Some(found);
        }
        if self.by_key.contains_key(&key) {
            return None; // several shown labels share the key: ambiguous
        }
        if let Some(found) = unique(self.by_base_key.get(&key)) {
            return Some(found);
        }
        match split_key(&key) {
            LabelKey { kind: None | Some(Kind::Sheet | Kind::World), name } if !name.is_empty() => {
                unique(self.by_name.get(name))
            }
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Session,
    Sheet,
    World,
}

struct LabelKey<'k> {
    kind: Option<Kind>,
    name: &'k str,
}

const KIND_WORDS: &[(&str, Kind)] = &[
    ("sesion", Kind::Session),
    ("session", Kind::Session),
    ("ficha", Kind::Sheet),
    ("sheet", Kind::Sheet),
    ("mundo", Kind::World),
    ("world", Kind::World),
];

/// The kind a label-like text starts with (`Sesión 3`, `FICHA: x`, `Sessions`), if any.
fn label_kind(text: &str) -> Option<Kind> {
    let folded = fold(text.trim());
    KIND_WORDS.iter().find(|(word, _)| folded.starts_with(word)).map(|(_, kind)| *kind)
}

/// A key under which the ways of writing one label compare equal:
/// `kind name`, kind canonical (`session`, `sheet`, `world`), folded, `_` as space, spaces
/// collapsed, no `:`/`#`/`nº` after the kind, no leading zeros, no copied part marker.
fn label_key(text: &str) -> String {
    static PART_MARKER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"[\s,;(]*\b(?:parte|part|pt)\.?\s*\d+(?:\s*(?:de|of|/)\s*\d+)?\)?$").expect("valid regex")
    });
    static LEADING_ZEROS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b0+(\d)").expect("valid regex"));
    static KIND_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(sesion|session|ficha|sheet|mundo|world)[a-z]*\s*(?::|#|n\.?º|n°|no\.|num\.?|numero)?\s*")
            .expect("valid regex")
    });
    let folded = fold(text).replace(['_', '\u{a0}'], " ");
    let folded = folded.split_whitespace().collect::<Vec<_>>().join(" ");
    let folded = folded.trim_end_matches(['.', ' ']);
    let folded = PART_MARKER.replace(folded, "");
    let folded = LEADING_ZEROS.replace_all(&folded, "$1");
    let folded = folded.replace("( ", "(").replace(" )", ")");
    match KIND_PREFIX.captures(&folded) {
        Some(captures) => {
            let kind_word = captures.get(1).expect("group 1 always matches").as_str();
            let kind = KIND_WORDS.iter().find(|(word, _)| *word == kind_word).map(|(_, kind)| *kind);
            let canonical = match kind {
                Some(Kind::Session) => "session",
                Some(Kind::Sheet) => "sheet",
                _ => "world",
            };
            let name = &folded[captures.get(0).expect("whole match").end()..];
            format!("{canonical} {}", name.trim())
        }
        None => folded.trim().to_string(),
    }
}

fn split_key(key: &str) -> LabelKey<'_> {
    for (canonical, kind) in [("session ", Kind::Session), ("sheet ", Kind::Sheet), ("world ", Kind::World)] {
        if let Some(name) = key.strip_prefix(canonical) {
            return LabelKey { kind: Some(kind), name };
        }
    }
    LabelKey { kind: None, name: key }
}

/// `session 12` for `session 12 (cronica)`; `None` when there is no trailing parenthetical.
fn without_parenthetical(key: &str) -> Option<&str> {
    let open = key.strip_suffix(')')?.rfind('(')?;
    let base = key[..open].trim_end();
    (!base.is_empty()).then_some(base)
}

/// Every bracket of `answer` that could hold citations, outside code, links, images,
/// checkboxes, footnotes and escapes, cut into pieces at `;` and at `,` outside parentheses.
fn scan_brackets(answer: &str) -> Vec<Bracket> {
    let mut brackets = Vec::new();
    let mut in_fence = false;
    let mut line_start = 0;
    for line in answer.split_inclusive('\n') {
        let line_offset = line_start;
        line_start += line.len();
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        scan_line(line, line_offset, &mut brackets);
    }
    brackets
}

/// Longest bracket content considered; longer brackets are prose, not a citation.
const MAX_BRACKET_CHARS: usize = 300;

fn scan_line(line: &str, line_offset: usize, brackets: &mut Vec<Bracket>) {
    let bytes = line.as_bytes();
    let mut pos = 0;
    while pos < bytes.len() {
        match bytes[pos] {
            b'`' => {
                let run = bytes[pos..].iter().take_while(|&&byte| byte == b'`').count();
                let fence = &line[pos..pos + run];
                pos += run;
                // Skip to the matching run of backticks, if the span closes on this line.
                if let Some(close) = line[pos..].find(fence) {
                    pos += close + run;
                }
            }
            b'\\' => pos += 2,
            b'[' => {
                let open = pos;
                pos += 1;
                let Some(close) = line[pos..].find(['[', ']']).map(|found| pos + found) else {
                    continue;
                };
                if bytes[close] == b'[' {
                    pos = close; // an inner bracket starts: the innermost one is the citation
                    continue;
                }
                pos = close + 1;
                let content = &line[open + 1..close];
                let next = bytes.get(close + 1).copied();
                let image = open > 0 && bytes[open - 1] == b'!';
                let link = next == Some(b'(');
                let definition = next == Some(b':') && line[..open].trim().is_empty();
                let checkbox = matches!(content, "" | " " | "x" | "X");
                let footnote = content.starts_with('^');
                if image || link || definition || checkbox || footnote || content.trim().is_empty() {
                    continue;
                }
                if content.chars().count() > MAX_BRACKET_CHARS {
                    continue;
                }
                let pieces = split_pieces(content, line_offset + open + 1);
                if !pieces.is_empty() {
                    brackets.push(Bracket { range: line_offset + open..line_offset + close + 1, pieces });
                }
            }
            _ => pos += 1,
        }
    }
}

/// Cuts a bracket's content at `;` and at `,` outside parentheses; trims each piece, drops
/// empty ones, and expands a bare number after a session label with that label's kind word.
fn split_pieces(content: &str, content_offset: usize) -> Vec<Piece> {
    let mut ranges: Vec<Range<usize>> = Vec::new();
    let mut depth = 0usize;
    let mut piece_start = 0;
    for (offset, c) in content.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ';' => {
                ranges.push(piece_start..offset);
                piece_start = offset + 1;
            }
            ',' if depth == 0 => {
                ranges.push(piece_start..offset);
                piece_start = offset + 1;
            }
            _ => {}
        }
    }
    ranges.push(piece_start..content.len());

    let mut pieces: Vec<Piece> = Vec::new();
    for range in ranges {
        let raw = &content[range.clone()];
        let text = raw.trim();
        if text.is_empty() {
            continue;
        }
        let start = range.start + (raw.len() - raw.trim_start().len());
        let range = content_offset + start..content_offset + start + text.len();
        let previous_session_word = pieces
            .last()
            .filter(|previous| label_kind(&previous.text) == Some(Kind::Session))
            .and_then(|previous| previous.text.split_whitespace().next());
        let text = match previous_session_word {
            Some(word) if text.chars().all(|c| c.is_ascii_digit()) => format!("{word} {text}"),
            _ => text.to_string(),
        };
        pieces.push(Piece { range, text });
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(labels: &[&str]) -> Vec<String> {
        labels.iter().map(|label| label.to_string()).collect()
    }

    /// Validates `answer` against `shown` and compares a compact rendering: the rewritten
    /// text, then one line per citation (`label ×count`, `invented` for invalid ones).
    /// Also checks that validating the result again changes nothing and invents nothing.
    fn check(answer: &str, shown: &[&str], expect: &str) {
        let shown = labels(shown);
        let validated = validate_citations(answer, &shown);
        let mut lines = vec![validated.text.clone()];
        for citation in &validated.citations {
            let status = if citation.valid { "" } else { " invented" };
            lines.push(format!("{} ×{}{status}", citation.label, citation.count));
        }
        assert_eq!(lines.join("\n"), expect.trim());
        let invented: Vec<&str> = validated
            .citations
            .iter()
            .filter(|citation| !citation.valid)
            .map(|citation| citation.label.as_str())
            .collect();
        assert_eq!(validated.invented, invented);
        for source in validated.sources() {
            assert!(shown.contains(&source.label), "{} shown as a source", source.label);
        }

        let again = validate_citations(&validated.text, &shown);
        assert_eq!(again.text, validated.text, "validation is not idempotent");
        assert!(again.invented.is_empty());
    }

    fn check_parse(answer: &str, expect: &[&[&str]]) {
        let spans = parse_citations(answer);
        let actual: Vec<Vec<&str>> =
            spans.iter().map(|span| span.labels.iter().map(String::as_str).collect()).collect();
        assert_eq!(actual, expect);
        for span in &spans {
            assert!(answer[span.range.clone()].starts_with('[') && answer[span.range.clone()].ends_with(']'));
        }
    }

    const SHOWN: &[&str] = &["Sesión 12", "Sesión 3", "Sesión 5", "Ficha: Baika", "Mundo: GODS"];

    #[test]
    fn parses_single_and_multi_label_brackets() {
        check_parse(
            "Baika roba el ídolo [Sesión 12]. Es ladrona [Ficha: Baika] y teme a los dioses [Sesión 3; Sesión 5, Mundo: GODS].",
            &[&["Sesión 12"], &["Ficha: Baika"], &["Sesión 3", "Sesión 5", "Mundo: GODS"]],
        );
        check_parse("Lo hizo [Sesión 3, 5 ,7].", &[&["Sesión 3", "Sesión 5", "Sesión 7"]]);
        check_parse("Lo dice [sesion 4 (Crónica, l. 40)].", &[&["sesion 4 (Crónica, l. 40)"]]);
        check_parse("[[Sesión 2]]", &[&["Sesión 2"]]);
    }

    #[test]
    fn parse_ignores_links_checkboxes_footnotes_code_and_prose_brackets() {
        check_parse(
            "Ver [Sesión 4](https://x.org/s4) y ![Sesión 1](img.png).\n\
             - [ ] pendiente\n- [x] hecho\n\
             Nota[^1] y \\[Sesión 9] y `[Sesión 8]` y [sic] y […].\n\
             ```\n[Sesión 7]\n```\n\
             [Sesión 6]: https://x.org\n\
             Pero sí [Sesión 2].",
            &[&["Sesión 2"]],
        );
    }

    #[test]
    fn exact_citations_are_kept_and_counted() {
        check(
            "Baika roba el ídolo [Sesión 12]. Huye [Sesión 12; Ficha: Baika].",
            SHOWN,
            "
Baika roba el ídolo [Sesión 12]. Huye [Sesión 12; Ficha: Baika].
Sesión 12 ×2
Ficha: Baika ×1",
        );
    }

    #[test]
    fn invented_labels_are_removed_and_a_bracket_left_empty_is_marked() {
        check(
            "Murió en combate [Sesión 99]. Huyó [Sesión 3; Sesión 119]. Tiene un barco [Ficha: Katerina_Emberdusk].",
            SHOWN,
            "
Murió en combate [?]. Huyó [Sesión 3]. Tiene un barco [?].
Sesión 99 ×1 invented
Sesión 3 ×1
Sesión 119 ×1 invented
Ficha: Katerina_Emberdusk ×1 invented",
        );
    }

    #[test]
    fn accentless_cased_and_other_language_variants_map_to_the_shown_label() {
        check(
            "A [Sesion 12]. B [SESIÓN 3]. C [Session 05]. D [ficha:baika]. E [Sheet: Baika]. F [Sesión nº 5]. G [mundo gods.]",
            SHOWN,
            "
A [Sesión 12]. B [Sesión 3]. C [Sesión 5]. D [Ficha: Baika]. E [Ficha: Baika]. F [Sesión 5]. G [Mundo: GODS]
Sesión 12 ×1
Sesión 3 ×1
Sesión 5 ×2
Ficha: Baika ×2
Mundo: GODS ×1",
        );
        check(
            "Cayó [Sesion 7] y [Sesión 7]. Su diosa [World: Gods].",
            &["Session 7", "World: GODS"],
            "
Cayó [Session 7] y [Session 7]. Su diosa [World: GODS].
Session 7 ×2
World: GODS ×1",
        );
    }

    #[test]
    fn names_parts_and_disambiguators() {
        check(
            "Es ladrona [Baika]. Lo cuenta [Sesión 12, parte 2] y [Sesión 4] y [Katerina Emberdusk].",
            &["Ficha: Baika", "Sesión 12", "Sesión 4 (Crónica)", "Ficha: Katerina_Emberdusk"],
            "
Es ladrona [Ficha: Baika]. Lo cuenta [Sesión 12] y [Sesión 4 (Crónica)] y [Ficha: Katerina_Emberdusk].
Ficha: Baika ×1
Sesión 12 ×1
Sesión 4 (Crónica) ×1
Ficha: Katerina_Emberdusk ×1",
        );
        // Two shown labels fit `Sesión 4`: it cannot be tied to one note.
        check(
            "Lo cuenta [Sesión 4].",
            &["Sesión 4 (Crónica)", "Sesión 4 (Diario)"],
            "
Lo cuenta [?].
Sesión 4 ×1 invented",
        );
        // A label holding a comma is read whole.
        check(
            "Es capitana [Ficha: Ana, la Roja; Sesión 3, 5].",
            &["Ficha: Ana, la Roja", "Sesión 3", "Sesión 5"],
            "
Es capitana [Ficha: Ana, la Roja; Sesión 3, 5].
Ficha: Ana, la Roja ×1
Sesión 3 ×1
Sesión 5 ×1",
        );
    }

    #[test]
    fn non_citation_brackets_and_links_are_left_alone() {
        check(
            "Dijo «no [sic] volveré» […]. Mira [el mapa](https://x.org/Sesión 3) y - [x] hecho [Sesión 3].",
            SHOWN,
            "
Dijo «no [sic] volveré» […]. Mira [el mapa](https://x.org/Sesión 3) y - [x] hecho [Sesión 3].
Sesión 3 ×1",
        );
        check("Sin citas.", SHOWN, "Sin citas.");
        check("Nada mostrado [Sesión 1].", &[], "Nada mostrado [?].\nSesión 1 ×1 invented");
    }

    #[test]
    fn duplicate_labels_in_one_bracket_collapse() {
        check(
            "Pasó [Sesión 3; sesion 3; Sesión 3].",
            SHOWN,
            "
Pasó [Sesión 3].
Sesión 3 ×3",
        );
    }

    #[test]
    fn label_keys() {
        let keys: Vec<String> =
            ["Sesión 012", "session  12 (Parte 2 de 3)", "FICHA : Katerina_Emberdusk", "Mundo: GODS", "Baika"]
                .iter()
                .map(|label| label_key(label))
                .collect();
        assert_eq!(keys, ["session 12", "session 12", "sheet katerina emberdusk", "world gods", "baika"]);
    }
}
