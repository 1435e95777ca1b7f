//! Markdown, line by line: front matter, GM secrets, wikilinks, embeds, placeholders, tags.
//!
//! Everything here keeps one output line per input line, so line numbers survive every
//! step: a removed passage leaves an empty line (or a shorter one) behind, never a gap.
//! A line is scanned once per kind of marker, whatever the number of markers on it: a line
//! of a million `<!--` costs what a line of a million letters does.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_yaml_ng::Value;

use super::secrets::{SecretNotes, phrase_words};
use super::session::detect_session_header;
use super::text::fold;
use super::{CorpusConfig, Diagnostic, Link, NoteKind, SecretPassage, SessionNumber};

/// Any callout opener, `> [!type|metadata]- title`, at any quote depth (`> > [!type]` inside
/// another callout) and in list items (`- > [!type]`, `1. > [!type]`, `> - > [!type]`). It is
/// secret when a word of its type is a GM word ([`CorpusConfig::names_gm`]).
static CALLOUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<prefix>[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)*(?:>[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)*)+)\[!(?P<type>[^\]|\n]*)(?:\|[^\]\n]*)?\][-+]?[ \t]*(?P<title>.*)$",
    )
    .expect("the callout pattern is valid")
});

/// A line that ends a paragraph, so it cannot be a lazy continuation of a callout: an ATX
/// heading, a thematic break, or an HTML block (`<!--`).
static INTERRUPTS_PARAGRAPH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[ \t]{0,3}(?:#{1,6}(?:[ \t]|$)|(?:\*[ \t]*){3,}$|(?:-[ \t]*){3,}$|(?:_[ \t]*){3,}$|<!--)")
        .expect("the paragraph-interrupt pattern is valid")
});

/// The first word of a comment that closes a GM block without a `/` (`<!-- end gm -->`,
/// `<!-- fin DJ -->`).
const CLOSER_WORDS: &[&str] = &["end", "fin"];

/// `[[target|shown]]` and `![[embed]]`.
static WIKILINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?P<embed>!?)\[\[(?P<inner>[^\[\]\n]*)\]\]").expect("the wikilink pattern is valid"));

/// `[text](destination "title")` and `![alt](destination)`; the destination may be in `<…>`.
/// Only a link to a secret note is rewritten (to its text); every other stays as written.
static MARKDOWN_LINK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"!?\[(?P<text>[^\[\]\n]*)\]\([ \t]*(?P<destination><[^<>\n]*>|[^()<>\n]*?)(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'))?[ \t]*\)"#,
    )
    .expect("the markdown link pattern is valid")
});

/// A link reference definition, `[label]: destination "title"`.
static REFERENCE_DEFINITION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"^[ ]{0,3}\[(?P<label>[^\[\]\n]+)\]:[ \t]*(?P<destination><[^<>\n]*>|.+?)(?:[ \t]+(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$"#,
    )
    .expect("the reference definition pattern is valid")
});

/// A reference link: `[text][label]`, `[label][]` or `[label]`.
static REFERENCE_LINK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\[(?P<text>[^\[\]\n]*)\](?:\[(?P<label>[^\[\]\n]*)\])?").expect("the reference link pattern is valid")
});

/// Template placeholders such as `{{Historia}}`.
static PLACEHOLDER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\{\{[^{}\n]*\}\}").expect("the placeholder pattern is valid"));

/// Obsidian inline tags: `#NPC`, `#lugar/puerto`. Not headings (`# Title`), not anchors.
static INLINE_TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[\s(\[,;])#(?P<tag>[\p{L}_][\p{L}\p{N}_/\-]*)").expect("the tag pattern is valid")
});

/// `visibility:` values that leave a note to the players; a GM word marks it GM-only, and
/// anything else is read as GM-only too, with a diagnostic (a value not understood fails closed).
const PUBLIC_VISIBILITIES: &[&str] =
    &["public", "publico", "publica", "player", "players", "jugador", "jugadores", "todos", "all", "everyone"];

/// Values of a GM-word key (`secret:`, `gm:`, `dm_only:`) that mark the note: YAML's yes-words
/// and Spanish's. A key holding other text (`notas_dj: …`) is GM data in the front matter,
/// which is never shown: it marks nothing.
const YES_VALUES: &[&str] = &["true", "yes", "y", "si", "on", "1", "only", "solo"];

/// What the front matter says, and which lines of the file it takes.
#[derive(Debug, Default)]
pub(crate) struct FrontMatter {
    pub title: Option<String>,
    pub aliases: Vec<String>,
    pub tags: Vec<String>,
    pub session: Option<SessionNumber>,
    /// `sessions: [81, 82]`: a note that belongs to several sessions (a fight across two),
    /// ascending, no repeats.
    pub sessions: Vec<SessionNumber>,
    pub kind: Option<NoteKind>,
    /// The `type`/`tipo` value as written (`pj`, `npc`, `dios`…): finer than `kind`.
    pub declared_type: Option<String>,
    /// Index (0-based) of the first body line: lines before it are front matter.
    pub body_start: usize,
    /// Body lines that are nonetheless not text (the closing delimiter of a broken block).
    pub hidden: Vec<usize>,
    /// The whole note is GM-only: a mark (`secret: true`, `visibility: gm`, `publish: false`,
    /// a GM tag or type), or front matter that cannot be read, which might have held one.
    pub gm_only: bool,
}

/// The body of a note with secrets taken out and Obsidian syntax rendered.
#[derive(Debug, Default)]
pub(crate) struct Body {
    /// One entry per line of the file: what players may read. Front matter lines, and the
    /// parts of lines that were secret, embeds and placeholders, are empty.
    pub visible: Vec<String>,
    /// In file order. Their text has one line per line of their span.
    pub secrets: Vec<SecretPassage>,
    /// Links in the visible text only: a link inside a secret is itself a secret.
    pub links: Vec<Link>,
    /// The destinations of Markdown links and link reference definitions in the visible text
    /// (wikilinks are in `links`): what a link's rendering depended on.
    pub markdown_targets: Vec<String>,
    /// `(line index, tag)` for each inline tag in the visible text, without the `#`.
    pub tags: Vec<(usize, String)>,
    /// `(line index, session)` for each session header, outside fenced code. Read before
    /// wikilinks are rendered, so `## [[Sesión 4]]` (a link, not a header) stays a link.
    pub session_headers: Vec<(usize, SessionNumber)>,
}

/// Which markers a note's text holds at all, found by one `memchr` scan of the whole text for
/// each: a note without `[!` has no callout, one without `%%` or `<!--` no inline secret, so
/// no line of it is searched for them (what keeps the secret forms from costing every line).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TextMarkers {
    callouts: bool,
    inline_secrets: bool,
    wikilinks: bool,
    placeholders: bool,
    markdown_links: bool,
    reference_definitions: bool,
}

impl TextMarkers {
    /// Every marker possible: what text not scanned beforehand is read as.
    const ANY: TextMarkers = TextMarkers {
        callouts: true,
        inline_secrets: true,
        wikilinks: true,
        placeholders: true,
        markdown_links: true,
        reference_definitions: true,
    };

    pub(crate) fn in_text(text: &str) -> TextMarkers {
        TextMarkers {
            callouts: holds_pair(text, '[', b'!'),
            inline_secrets: holds_pair(text, '%', b'%') || holds_pair(text, '<', b'!'),
            wikilinks: holds_pair(text, '[', b'['),
            placeholders: holds_pair(text, '{', b'{'),
            markdown_links: holds_pair(text, ']', b'('),
            reference_definitions: holds_pair(text, ']', b':'),
        }
    }
}

/// Whether `first` is followed by the byte `second` somewhere in `text` (`find(char)` runs on
/// `memchr`, so rare markers cost one fast scan).
fn holds_pair(text: &str, first: char, second: u8) -> bool {
    let mut rest = text;
    while let Some(at) = rest.find(first) {
        let after = at + first.len_utf8();
        if rest.as_bytes().get(after) == Some(&second) {
            return true;
        }
        rest = &rest[after..];
    }
    false
}

/// How a note's links are rendered: a link to a secret note shows none of its name.
pub(crate) struct LinkReader<'a> {
    config: &'a CorpusConfig,
    secret_notes: &'a SecretNotes,
    /// The note the links are in (relative targets are read from its folder).
    from: &'a str,
    /// Reference definitions (`[label]: Secretos/x.md`) whose destination is secret: folded
    /// label → destination.
    secret_references: HashMap<String, String>,
    /// Every reference definition's destination (what the note's rendering depended on).
    definition_targets: Vec<String>,
    markers: TextMarkers,
}

impl<'a> LinkReader<'a> {
    /// The reader for the note at `from`, whose `lines` (holding `markers`) are scanned for
    /// reference definitions.
    pub(crate) fn new(
        config: &'a CorpusConfig,
        secret_notes: &'a SecretNotes,
        from: &'a str,
        lines: &[&str],
        markers: TextMarkers,
    ) -> LinkReader<'a> {
        let mut reader = LinkReader {
            config,
            secret_notes,
            from,
            secret_references: HashMap::new(),
            definition_targets: Vec::new(),
            markers,
        };
        let definitions = if markers.reference_definitions { lines } else { &[] };
        for line in definitions.iter().filter(|line| line.contains("]:")) {
            if let Some(captures) = REFERENCE_DEFINITION.captures(line)
                && let Some(target) = markdown_destination(&captures["destination"])
            {
                if reader.is_secret(&target) {
                    reader.secret_references.insert(fold(captures["label"].trim()), target.clone());
                }
                reader.definition_targets.push(target);
            }
        }
        reader
    }

    fn is_secret(&self, target: &str) -> bool {
        self.secret_notes.is_secret_target(target, self.from, self.config)
    }

    /// What a link to the secret `target` shows: the text the DM gave it, unless that text is
    /// the target's own name; else nothing.
    fn safe_text(shown: Option<&str>, target: &str) -> String {
        match shown.map(str::trim) {
            Some(shown) if !shown.is_empty() && !SecretNotes::is_target_name(shown, target) => shown.to_string(),
            _ => String::new(),
        }
    }

    /// Whether `line` is a reference definition pointing at a secret note (it is hidden).
    fn hides_definition(&self, line: &str) -> bool {
        !self.secret_references.is_empty()
            && line.contains("]:")
            && REFERENCE_DEFINITION
                .captures(line)
                .is_some_and(|captures| self.secret_references.contains_key(&fold(captures["label"].trim())))
    }
}

/// Reads the YAML front matter at the very top of the file (`---` … `---` or `...`).
/// Front matter that cannot be read might have marked the note secret: the note is kept
/// GM-only (its lines read as GM text), with a diagnostic naming the line.
pub(crate) fn read_front_matter(
    path: &str,
    lines: &[&str],
    config: &CorpusConfig,
    diagnostics: &mut Vec<Diagnostic>,
) -> FrontMatter {
    let mut front = FrontMatter::default();
    if lines.first().map(|line| line.trim_end()) != Some("---") {
        return front;
    }
    let closing =
        lines[1..].iter().position(|line| matches!(line.trim_end(), "---" | "...")).map(|position| position + 1);
    let Some(closing) = closing else {
        diagnostics.push(diagnostic(
            path,
            Some(1),
            "front matter opened with `---` is never closed: the note is kept GM-only until it is",
        ));
        front.body_start = 1;
        front.gm_only = true;
        return front;
    };
    let yaml = lines[1..closing].join("\n");
    match serde_yaml_ng::from_str::<Value>(&yaml) {
        Ok(Value::Null) => front.body_start = closing + 1,
        Ok(Value::Mapping(mapping)) => {
            front.body_start = closing + 1;
            for (key, value) in &mapping {
                let Some(key) = key.as_str() else { continue };
                read_front_matter_field(path, key.trim(), value, &mut front, config, diagnostics);
            }
        }
        Ok(_) => {
            diagnostics.push(diagnostic(
                path,
                Some(2),
                "front matter is not a list of `key: value` pairs: the note is kept GM-only until it is fixed",
            ));
            front.body_start = 1;
            front.hidden.push(closing);
            front.gm_only = true;
        }
        Err(error) => {
            let yaml_line = error.location().map_or(1, |location| location.line());
            let line = u32::try_from(yaml_line + 1).ok();
            let reason = error.to_string();
            let reason = reason.split(" at line ").next().unwrap_or(&reason);
            diagnostics.push(diagnostic(
                path,
                line,
                &format!("front matter is not valid YAML ({reason}): the note is kept GM-only until it is fixed"),
            ));
            front.body_start = 1;
            front.hidden.push(closing);
            front.gm_only = true;
        }
    }
    front
}

/// Takes secrets out of the body and renders what is left. An unclosed secret runs to the
/// end of the file, with a diagnostic: the corpus fails closed, never open.
pub(crate) fn read_body(
    path: &str,
    lines: &[&str],
    front: &FrontMatter,
    reader: &LinkReader<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Body {
    let config = reader.config;
    let mut body = Body { markdown_targets: reader.definition_targets.clone(), ..Body::default() };
    let mut open: Option<OpenSecret> = None;
    let mut in_fence = false;
    // The line each entry of `body.links` was read on.
    let mut link_lines: Vec<usize> = Vec::new();
    // Where a GM closer with no opener would start hiding: the line after the last session
    // header or stray closer (else the body's first line).
    let mut section_start = front.body_start;
    let mut marker_problems: Vec<GmMarkerProblem> = Vec::new();
    for (line_index, &raw_line) in lines.iter().enumerate() {
        let is_hidden = line_index < front.body_start || front.hidden.contains(&line_index);
        let line = if is_hidden { "" } else { raw_line };

        if let Some(mut callout) = open.take_if(|secret| secret.form == SecretForm::Callout) {
            // Another secret callout at the same depth or shallower starts its own passage.
            let starts_another = reader.markers.callouts
                && secret_callout(line, config).is_some_and(|another| another.quote_depth <= callout.quote_depth);
            if !is_hidden && !starts_another && continues_callout(&callout, line) {
                let (_, content) = quote_depth(line);
                callout.text.push('\n');
                callout.text.push_str(strip_quote_markers(line, callout.quote_depth));
                callout.last_line_blank = content.trim().is_empty();
                open = Some(callout);
                body.visible.push(String::new());
                continue;
            }
            close_secret(callout, line_index - 1, &mut body.secrets);
        }
        match &mut open {
            Some(inline) => inline.text.push('\n'),
            None if reader.markers.callouts => {
                if let Some(secret) = secret_callout(line, config) {
                    let mut callout = OpenSecret::new(SecretForm::Callout, line_index, secret.title);
                    callout.quote_depth = secret.quote_depth;
                    // `> [!secret]` is itself a paragraph line: the next line may continue it lazily.
                    callout.last_line_blank = false;
                    open = Some(callout);
                    body.visible.push(String::new());
                    continue;
                }
            }
            None => {}
        }
        let n_problems = marker_problems.len();
        let shown = if reader.markers.inline_secrets || open.is_some() {
            take_inline_secrets(line, line_index, &mut open, &mut body.secrets, &mut marker_problems, config)
        } else {
            line.to_string()
        };
        for problem in &marker_problems[n_problems..] {
            match problem {
                GmMarkerProblem::OpenerVariant { word } => {
                    let message = format!(
                        "`<!-- {word} …-->` holds more than its GM word and reads as a GM block opener: everything up to `<!-- /{word} -->` is treated as DM-only"
                    );
                    diagnostics.push(diagnostic(path, u32::try_from(line_index + 1).ok(), &message));
                }
                GmMarkerProblem::StrayCloser { word } => {
                    let message = format!(
                        "`<!-- /{word} -->` closes no GM block; the text from line {} up to it is treated as DM-only",
                        line_number(section_start.min(line_index))
                    );
                    diagnostics.push(diagnostic(path, u32::try_from(line_index + 1).ok(), &message));
                    hide_since(&mut body, &mut link_lines, section_start, line_index);
                    section_start = line_index + 1;
                }
            }
        }
        let shown = if reader.hides_definition(&shown) { String::new() } else { shown };
        if is_fence(&shown) {
            in_fence = !in_fence;
        } else if !in_fence && let Some(session) = detect_session_header(&shown) {
            body.session_headers.push((line_index, session));
            section_start = section_start.max(line_index + 1);
        }
        let shown = render_obsidian(&shown, Some(&mut body.links), Some(reader), &mut body.markdown_targets);
        link_lines.resize(body.links.len(), line_index);
        if shown.contains('#') {
            for captures in INLINE_TAG.captures_iter(&shown) {
                body.tags.push((line_index, captures["tag"].to_string()));
            }
        }
        body.visible.push(shown);
    }
    if let Some(secret) = open {
        let last_index = lines.len().saturating_sub(1);
        if secret.form != SecretForm::Callout {
            let message =
                format!("{} is never closed; everything after it is treated as DM-only", secret.form.describe());
            diagnostics.push(diagnostic(path, u32::try_from(secret.line_start + 1).ok(), &message));
        }
        close_secret(secret, last_index, &mut body.secrets);
    }
    // A stray closer hides text read before it: keep the passages in file order.
    body.secrets.sort_by_key(|secret| secret.line_start);
    body
}

/// A secret callout's opener line: how deep it is quoted and its title.
struct SecretCallout<'l> {
    quote_depth: usize,
    title: &'l str,
}

/// `line` when it opens a callout whose type holds a GM word (`[!secret]`, `[!gm-only]`,
/// `[!notas-dj]`, `[!DM notes]`).
fn secret_callout<'l>(line: &'l str, config: &CorpusConfig) -> Option<SecretCallout<'l>> {
    if !line.contains("[!") {
        return None;
    }
    let captures = CALLOUT.captures(line)?;
    if !config.names_gm(captures.name("type")?.as_str()) {
        return None;
    }
    Some(SecretCallout {
        quote_depth: captures["prefix"].matches('>').count(),
        title: captures.name("title").map_or("", |title| title.as_str().trim()),
    })
}

/// What a GM marker got wrong, found while reading a line.
enum GmMarkerProblem {
    /// `<!-- GM: spoilers -->`: opened a GM block anyway; `word` is its GM word.
    OpenerVariant { word: String },
    /// `<!-- /gm -->` with no block open.
    StrayCloser { word: String },
}

/// Fails closed for a GM closer with no opener on line `closer_index`: the opener was
/// mistyped somewhere before it, so every visible line from `section_start` up to the closer
/// becomes one secret passage, with its links and tags.
fn hide_since(body: &mut Body, link_lines: &mut Vec<usize>, section_start: usize, closer_index: usize) {
    let range = section_start..closer_index;
    if range.is_empty() {
        return;
    }
    let text: Vec<String> = body.visible[range.clone()].iter_mut().map(std::mem::take).collect();
    if !text.iter().all(|line| line.trim().is_empty()) {
        let mut hidden = OpenSecret::new(SecretForm::GmBlock, section_start, "");
        hidden.text = text.join("\n");
        close_secret(hidden, closer_index - 1, &mut body.secrets);
    }
    let mut kept_lines = Vec::with_capacity(link_lines.len());
    let mut kept_links = Vec::with_capacity(body.links.len());
    for (link, line_index) in body.links.drain(..).zip(link_lines.drain(..)) {
        if !range.contains(&line_index) {
            kept_links.push(link);
            kept_lines.push(line_index);
        }
    }
    body.links = kept_links;
    *link_lines = kept_lines;
    body.tags.retain(|(line_index, _)| !range.contains(line_index));
}

/// A line that opens or closes fenced code (```` ``` ```` or `~~~`).
pub(crate) fn is_fence(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("```") || line.starts_with("~~~")
}

/// Renders wikilinks as their shown text and removes embeds and template placeholders.
/// When `links` is given, every wikilink and embed is recorded there. With a `reader`, a
/// link to a secret note (wikilink, Markdown or reference link) shows only the text the DM
/// gave it, never the note's name, and Markdown destinations are recorded in `targets`.
fn render_obsidian(
    text: &str,
    mut links: Option<&mut Vec<Link>>,
    reader: Option<&LinkReader<'_>>,
    targets: &mut Vec<String>,
) -> String {
    let markers = reader.map_or(TextMarkers::ANY, |reader| reader.markers);
    let has_link = markers.wikilinks && text.contains("[[");
    let has_placeholder = markers.placeholders && text.contains("{{");
    let has_markdown_link = reader.is_some() && markers.markdown_links && text.contains("](");
    let has_reference = reader.is_some_and(|reader| !reader.secret_references.is_empty()) && text.contains('[');
    if !has_link && !has_placeholder && !has_markdown_link && !has_reference {
        return text.to_string();
    }
    let mut rendered = text.to_string();
    if has_link {
        rendered = WIKILINK
            .replace_all(&rendered, |captures: &Captures<'_>| {
                let embed = !captures["embed"].is_empty();
                let (link, mut shown) = read_wikilink(&captures["inner"], embed);
                if let Some(reader) = reader
                    && !embed
                    && reader.is_secret(&link.target)
                {
                    shown = LinkReader::safe_text(link.shown.as_deref(), &link.target);
                }
                if let Some(links) = links.as_deref_mut()
                    && !link.target.is_empty()
                {
                    links.push(link);
                }
                shown
            })
            .into_owned();
    }
    if has_markdown_link && let Some(reader) = reader {
        rendered = MARKDOWN_LINK
            .replace_all(&rendered, |captures: &Captures<'_>| match markdown_destination(&captures["destination"]) {
                Some(target) => {
                    let secret = reader.is_secret(&target);
                    let shown = if secret {
                        LinkReader::safe_text(Some(&captures["text"]), &target)
                    } else {
                        captures[0].to_string()
                    };
                    targets.push(target);
                    shown
                }
                None => captures[0].to_string(),
            })
            .into_owned();
    }
    if has_reference && let Some(reader) = reader {
        rendered = REFERENCE_LINK
            .replace_all(&rendered, |captures: &Captures<'_>| {
                let text = &captures["text"];
                let label = captures.name("label").map(|label| label.as_str()).filter(|label| !label.trim().is_empty());
                match reader.secret_references.get(&fold(label.unwrap_or(text).trim())) {
                    Some(target) => LinkReader::safe_text(Some(text), target),
                    None => captures[0].to_string(),
                }
            })
            .into_owned();
    }
    if has_placeholder {
        rendered = PLACEHOLDER.replace_all(&rendered, "").into_owned();
    }
    rendered
}

/// The note a Markdown link's destination names, if it names one: `<…>` unwrapped, `%20`
/// decoded, its `#heading` dropped; Obsidian's `obsidian://open?…&file=…` read for its file.
/// A web or mail address names no note.
fn markdown_destination(destination: &str) -> Option<String> {
    let destination = destination.trim();
    let destination = destination.strip_prefix('<').and_then(|inner| inner.strip_suffix('>')).unwrap_or(destination);
    let destination = match destination.strip_prefix("obsidian://") {
        Some(uri) => uri.split(['?', '&']).find_map(|parameter| parameter.strip_prefix("file="))?,
        None if destination.contains("://") || destination.starts_with("mailto:") => return None,
        None => destination,
    };
    let decoded = percent_decode(destination);
    let note = decoded.split(['#', '?']).next().unwrap_or("").trim();
    (!note.is_empty()).then(|| note.to_string())
}

/// `%XX` escapes decoded (invalid UTF-8 replaced), `+` kept as it is.
fn percent_decode(text: &str) -> String {
    if !text.contains('%') {
        return text.to_string();
    }
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let escape = (bytes[index] == b'%')
            .then(|| text.get(index + 1..index + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escape {
            Some(byte) => {
                decoded.push(byte);
                index += 3;
            }
            None => {
                decoded.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// The `Link` a wikilink's inner text records, and the text it renders as (empty for an
/// embed). `Target#Heading|shown` → target `Target`, shown `shown`.
fn read_wikilink(inner: &str, embed: bool) -> (Link, String) {
    let inner = inner.replace("\\|", "|");
    let (destination, shown) = match inner.split_once('|') {
        Some((destination, shown)) => {
            let shown = shown.trim();
            (destination, (!shown.is_empty()).then(|| shown.to_string()))
        }
        None => (inner.as_str(), None),
    };
    let destination = destination.trim();
    let (target, anchor) = match destination.find(['#', '^']) {
        Some(position) => (destination[..position].trim(), destination[position + 1..].trim()),
        None => (destination, ""),
    };
    let rendered = if embed {
        String::new()
    } else if let Some(shown) = &shown {
        shown.clone()
    } else if target.is_empty() {
        anchor.trim_start_matches(['#', '^']).to_string()
    } else {
        let file_name = target.rsplit('/').next().unwrap_or(target);
        file_name.strip_suffix(".md").unwrap_or(file_name).to_string()
    };
    let link = Link { target: target.to_string(), shown, embed };
    (link, rendered)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SecretForm {
    /// `%% … %%`
    Comment,
    /// `<!-- gm --> … <!-- /gm -->`, or any comment opener holding a GM word.
    GmBlock,
    /// Any other `<!-- … -->`: hidden when the note is rendered, so not for players either.
    HtmlComment,
    /// A secret callout (`> [!secret]`) and its quoted lines.
    Callout,
}

impl SecretForm {
    fn describe(self) -> &'static str {
        match self {
            SecretForm::Comment => "`%%` comment",
            SecretForm::GmBlock => "`<!-- gm -->` block",
            SecretForm::HtmlComment => "`<!--` comment",
            SecretForm::Callout => "secret callout",
        }
    }
}

/// A secret passage still being read: its first line and its text so far.
struct OpenSecret {
    form: SecretForm,
    line_start: usize,
    text: String,
    /// Callouts: how many `>` the `[!secret]` line had (2 for `> > [!secret]`).
    quote_depth: usize,
    /// Callouts: whether the last line read into it was blank (no lazy continuation follows).
    last_line_blank: bool,
}

impl OpenSecret {
    fn new(form: SecretForm, line_start: usize, text: &str) -> OpenSecret {
        OpenSecret { form, line_start, text: text.to_string(), quote_depth: 0, last_line_blank: true }
    }
}

/// Whether `line` still belongs to the open secret `callout`, as CommonMark (and Obsidian)
/// read quotes: a line quoted at least as deep as the callout, or a lazy continuation, a
/// non-blank line right after a non-blank one that is not a heading, a thematic break or an
/// HTML block (`> > [!secret]` then `> more` or `more`: both stay in the secret). Lists
/// and other text continue it too: when in doubt, the text stays secret.
fn continues_callout(callout: &OpenSecret, line: &str) -> bool {
    let (depth, content) = quote_depth(line);
    if depth >= callout.quote_depth {
        return true;
    }
    !callout.last_line_blank
        && !content.trim().is_empty()
        && !INTERRUPTS_PARAGRAPH.is_match(content)
        && !is_fence(content)
}

/// How many `>` markers open `line`, and what follows them.
fn quote_depth(line: &str) -> (usize, &str) {
    let mut depth = 0;
    let mut rest = line;
    loop {
        let trimmed = rest.trim_start();
        match trimmed.strip_prefix('>') {
            Some(inner) => {
                depth += 1;
                rest = inner;
            }
            None => return (depth, if depth == 0 { line } else { trimmed }),
        }
    }
}

/// Where the next occurrence of one marker on a line is, at or after an offset, remembered:
/// each search starts past the previous find, so a line is scanned once per kind of marker,
/// however many markers it holds.
struct NextMarker {
    needle: &'static str,
    /// Where the last search started, if one ran.
    searched_from: Option<usize>,
    found: Option<usize>,
}

impl NextMarker {
    fn new(needle: &'static str) -> NextMarker {
        NextMarker { needle, searched_from: None, found: None }
    }

    /// The first `needle` in `line` at `from` or later.
    fn at_or_after(&mut self, line: &str, from: usize) -> Option<usize> {
        if self.searched_from.is_some_and(|searched_from| searched_from <= from) {
            match self.found {
                Some(found) if found >= from => return Some(found),
                None => return None,
                Some(_) => {}
            }
        }
        self.searched_from = Some(from);
        self.found = line.get(from..).and_then(|rest| rest.find(self.needle)).map(|offset| from + offset);
        self.found
    }
}

/// What an HTML comment is, by its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CommentKind {
    /// Its head holds a GM word: `<!-- gm -->`, `<!-- DJ: … -->`, `<!--- gm --->`.
    GmOpener,
    /// `/` or `end`/`fin` and a GM word: `<!-- /DJ -->`, `<!-- end gm -->`.
    GmCloser,
    Plain,
}

/// A comment's head: the text after `<!--` (and any extra `-`) up to the first `:`, `-->`,
/// `<!--` or the line's end. Heads of different comments never overlap, so reading every
/// head of a line reads the line once.
struct CommentHead<'l> {
    kind: CommentKind,
    /// The GM word that made it an opener or closer, as written.
    word: &'l str,
    /// Where the head ends in the line.
    end: usize,
    /// Whether the head ends at `-->`: the comment is its head alone.
    ends_comment: bool,
}

/// Reads the head of the comment whose `<!--` is at `start` in `line`.
fn read_comment_head<'l>(line: &'l str, start: usize, config: &CorpusConfig) -> CommentHead<'l> {
    let bytes = line.as_bytes();
    let mut head_start = start + "<!--".len();
    while bytes.get(head_start) == Some(&b'-') && !bytes[head_start..].starts_with(b"-->") {
        head_start += 1;
    }
    let mut end = head_start;
    let mut ends_comment = false;
    while end < bytes.len() {
        match bytes[end] {
            b':' => break,
            b'-' if bytes[end..].starts_with(b"-->") => {
                ends_comment = true;
                break;
            }
            b'<' if bytes[end..].starts_with(b"<!--") => break,
            _ => end += 1,
        }
    }
    let head = line[head_start..end].trim().trim_end_matches('-').trim();
    let closes = head.starts_with('/')
        || phrase_words(head).next().is_some_and(|first| CLOSER_WORDS.contains(&fold(first).as_str()));
    let word = config.gm_word_in(head);
    let kind = match (word, closes) {
        (Some(_), true) => CommentKind::GmCloser,
        (Some(_), false) => CommentKind::GmOpener,
        (None, _) => CommentKind::Plain,
    };
    CommentHead { kind, word: word.unwrap_or(""), end, ends_comment }
}

/// Where the text after the comment whose head is `head` starts: past its `-->`, or the
/// line's end when it has none.
fn after_comment(line: &str, head: &CommentHead<'_>, comment_close: &mut NextMarker) -> usize {
    if head.ends_comment {
        return head.end + "-->".len();
    }
    comment_close.at_or_after(line, head.end).map_or(line.len(), |close| close + "-->".len())
}

/// Opens `block` at the GM opener `head`: `<!-- gm -->` opens it after its `-->`; an opener
/// holding more (`<!-- DJ: el capitán es el traidor -->`) keeps that text in the block, with a
/// diagnostic (the DM may have meant a one-line note: the rest of the section is hidden).
/// Returns where the block's text goes on.
fn open_gm_block(
    line: &str,
    head: &CommentHead<'_>,
    block: &mut OpenSecret,
    comment_close: &mut NextMarker,
    problems: &mut Vec<GmMarkerProblem>,
) -> usize {
    if head.ends_comment {
        return head.end + "-->".len();
    }
    let text_start = if line[head.end..].starts_with(':') { head.end + 1 } else { head.end };
    // The diagnostic names only the GM word: the rest may be the secret itself.
    problems.push(GmMarkerProblem::OpenerVariant { word: head.word.to_string() });
    match comment_close.at_or_after(line, text_start) {
        Some(close) => {
            block.text.push_str(&line[text_start..close]);
            close + "-->".len()
        }
        None => {
            block.text.push_str(&line[text_start..]);
            line.len()
        }
    }
}

/// Splits one line into what stays visible (returned) and what goes into `open` secrets,
/// opening and closing `%%`, GM comment blocks and `<!-- -->` passages as their markers
/// appear. Each kind of marker is searched for once along the line ([`NextMarker`]).
fn take_inline_secrets(
    line: &str,
    line_index: usize,
    open: &mut Option<OpenSecret>,
    secrets: &mut Vec<SecretPassage>,
    problems: &mut Vec<GmMarkerProblem>,
    config: &CorpusConfig,
) -> String {
    if open.is_none() && !line.contains("%%") && !line.contains("<!--") {
        return line.to_string();
    }
    let mut percents = NextMarker::new("%%");
    let mut comment_opens = NextMarker::new("<!--");
    let mut comment_closes = NextMarker::new("-->");
    let mut shown = String::new();
    let mut position = 0;
    loop {
        let Some(secret) = open.as_mut() else {
            let comment = percents.at_or_after(line, position);
            let html = comment_opens.at_or_after(line, position);
            let (at, is_html) = match (comment, html) {
                (None, None) => {
                    shown.push_str(&line[position..]);
                    return shown;
                }
                (Some(comment), Some(html)) if html < comment => (html, true),
                (Some(comment), _) => (comment, false),
                (None, Some(html)) => (html, true),
            };
            shown.push_str(&line[position..at]);
            if !is_html {
                *open = Some(OpenSecret::new(SecretForm::Comment, line_index, ""));
                position = at + "%%".len();
                continue;
            }
            let head = read_comment_head(line, at, config);
            match head.kind {
                CommentKind::GmOpener => {
                    let mut block = OpenSecret::new(SecretForm::GmBlock, line_index, "");
                    position = open_gm_block(line, &head, &mut block, &mut comment_closes, problems);
                    *open = Some(block);
                }
                CommentKind::GmCloser => {
                    // A closer with no opener: the opener was mistyped, so what this line
                    // showed before it is GM-only too (the lines before: `read_body`).
                    let before = std::mem::take(&mut shown);
                    close_secret(OpenSecret::new(SecretForm::GmBlock, line_index, &before), line_index, secrets);
                    problems.push(GmMarkerProblem::StrayCloser { word: head.word.to_string() });
                    position = after_comment(line, &head, &mut comment_closes);
                }
                CommentKind::Plain => {
                    *open = Some(OpenSecret::new(SecretForm::HtmlComment, line_index, ""));
                    position = at + "<!--".len();
                }
            }
            continue;
        };
        match secret.form {
            SecretForm::Comment => match percents.at_or_after(line, position) {
                Some(end) => {
                    secret.text.push_str(&line[position..end]);
                    position = end + "%%".len();
                }
                None => {
                    secret.text.push_str(&line[position..]);
                    return shown;
                }
            },
            SecretForm::HtmlComment => {
                let close = comment_closes.at_or_after(line, position);
                let nested = comment_opens
                    .at_or_after(line, position)
                    .filter(|&nested| close.is_none_or(|close| nested < close));
                if let Some(nested) = nested {
                    // HTML comments do not nest, but a GM opener inside one means the GM meant
                    // a GM block: the passage goes on as one, rather than ending at its `-->`.
                    let head = read_comment_head(line, nested, config);
                    if head.kind == CommentKind::GmOpener {
                        secret.text.push_str(&line[position..nested]);
                        secret.form = SecretForm::GmBlock;
                        position = open_gm_block(line, &head, secret, &mut comment_closes, problems);
                    } else {
                        secret.text.push_str(&line[position..nested + "<!--".len()]);
                        position = nested + "<!--".len();
                    }
                    continue;
                }
                match close {
                    Some(end) => {
                        secret.text.push_str(&line[position..end]);
                        position = end + "-->".len();
                    }
                    None => {
                        secret.text.push_str(&line[position..]);
                        return shown;
                    }
                }
            }
            SecretForm::GmBlock => {
                let Some(nested) = comment_opens.at_or_after(line, position) else {
                    secret.text.push_str(&line[position..]);
                    return shown;
                };
                let head = read_comment_head(line, nested, config);
                if head.kind != CommentKind::GmCloser {
                    secret.text.push_str(&line[position..nested + "<!--".len()]);
                    position = nested + "<!--".len();
                    continue;
                }
                secret.text.push_str(&line[position..nested]);
                position = after_comment(line, &head, &mut comment_closes);
            }
            SecretForm::Callout => unreachable!("callouts are whole lines, handled by read_body"),
        }
        // The passage just closed.
        if let Some(secret) = open.take() {
            close_secret(secret, line_index, secrets);
        }
    }
}

/// Records a finished secret passage ending on `line_end_index`, unless it holds no text.
fn close_secret(secret: OpenSecret, line_end_index: usize, secrets: &mut Vec<SecretPassage>) {
    // GM text: links in it show their names (a GM may read them).
    let text = render_obsidian(&secret.text, None, None, &mut Vec::new());
    if text.trim().is_empty() {
        return;
    }
    // Spaces only: the text keeps one line per line of its span.
    let text = text.trim_matches([' ', '\t']).to_string();
    secrets.push(SecretPassage {
        line_start: line_number(secret.line_start),
        line_end: line_number(line_end_index.max(secret.line_start)),
        text,
    });
}

/// `> text` → `text` for `depth` 1; quotes nested deeper than `depth` keep their inner
/// markers; a lazy line (fewer markers) loses the ones it has.
fn strip_quote_markers(line: &str, depth: usize) -> &str {
    let mut line = line;
    for _ in 0..depth {
        let trimmed = line.trim_start();
        let Some(inner) = trimmed.strip_prefix('>') else {
            return line;
        };
        line = inner.strip_prefix(' ').unwrap_or(inner);
    }
    line
}

fn read_front_matter_field(
    path: &str,
    key: &str,
    value: &Value,
    front: &mut FrontMatter,
    config: &CorpusConfig,
    diagnostics: &mut Vec<Diagnostic>,
) {
    match fold(key).as_str() {
        "title" | "titulo" => front.title = scalar_text(value),
        "aliases" | "alias" => front.aliases.extend(text_list(value)),
        "tags" | "tag" | "etiquetas" => {
            for tag in text_list(value) {
                let words = tag.split([',', ' ']).map(|word| word.trim().trim_start_matches('#'));
                front.tags.extend(words.filter(|word| !word.is_empty()).map(str::to_string));
            }
        }
        "session" | "sesion" => {
            front.session = session_from_value(value);
            if front.session.is_none() {
                diagnostics.push(diagnostic(path, None, "front matter `session` holds no session number; ignored"));
            }
        }
        "sessions" | "sesiones" => {
            let mut sessions: Vec<SessionNumber> = match value {
                Value::Sequence(items) => items.iter().filter_map(session_from_value).collect(),
                Value::String(text) => text
                    .split([',', ' ', ';'])
                    .filter_map(|item| session_from_value(&Value::String(item.to_string())))
                    .collect(),
                other => session_from_value(other).into_iter().collect(),
            };
            sessions.sort();
            sessions.dedup();
            if sessions.is_empty() {
                diagnostics.push(diagnostic(path, None, "front matter `sessions` holds no session number; ignored"));
            }
            front.sessions = sessions;
        }
        "type" | "tipo" => {
            front.declared_type = scalar_text(value);
            front.kind = front.declared_type.as_deref().map(kind_from_type);
            // `type: secreto`, `tipo: notas-dj`.
            front.gm_only |= front.declared_type.as_deref().is_some_and(|declared| config.names_gm(declared));
        }
        "visibility" | "visibilidad" => {
            let value = scalar_text(value).unwrap_or_default();
            if config.names_gm(&value) {
                front.gm_only = true;
            } else if !PUBLIC_VISIBILITIES.contains(&fold(value.trim()).as_str()) {
                // The value is not quoted: it might be the secret itself.
                diagnostics.push(diagnostic(
                    path,
                    None,
                    "front matter `visibility` is neither a GM word (gm, dm, secret, private…) nor public or player: the note is kept GM-only",
                ));
                front.gm_only = true;
            }
        }
        // Obsidian Publish: a note its DM keeps off the published site is not for the table.
        "publish" | "publicar" => front.gm_only |= is_no(value),
        key if config.names_gm(key) => front.gm_only |= marks_gm_only(key, value),
        _ => {}
    }
}

/// Whether `key: value`, a front matter key holding a GM word (`secret`, `gm`, `dm_only`,
/// `secreto`), marks the note: a yes (`true`, `yes`, `sí`, `1`, `only`); or, for a key that is
/// the GM word alone, nothing at all (`secret:`). Other text under such a key is GM data kept in
/// the front matter, which is never shown (`notas_dj: …`, `gm: {motivo: …}`), and marks nothing.
fn marks_gm_only(key: &str, value: &Value) -> bool {
    match value {
        Value::Bool(flag) => *flag,
        Value::Number(number) => number.as_u64() == Some(1),
        Value::String(text) => YES_VALUES.contains(&fold(text.trim()).as_str()),
        Value::Null => phrase_words(key).count() == 1,
        _ => false,
    }
}

/// `false`, `no`, `0`: a value that says no.
fn is_no(value: &Value) -> bool {
    match value {
        Value::Bool(flag) => !*flag,
        Value::Number(number) => number.as_u64() == Some(0),
        Value::String(text) => matches!(fold(text.trim()).as_str(), "false" | "no" | "n" | "off" | "0"),
        _ => false,
    }
}

/// `type: npc` → sheet, `type: sesión` → session, anything else → world.
fn kind_from_type(text: &str) -> NoteKind {
    match fold(text.trim()).as_str() {
        "npc" | "pc" | "pnj" | "pj" | "character" | "personaje" | "ficha" | "sheet" => NoteKind::Sheet,
        "session" | "sesion" | "chronicle" | "cronica" => NoteKind::Session,
        _ => NoteKind::World,
    }
}

fn session_from_value(value: &Value) -> Option<SessionNumber> {
    match value {
        Value::Number(number) => number.as_u64().and_then(|number| u32::try_from(number).ok()),
        Value::String(text) => {
            let digits: String =
                text.chars().skip_while(|c| !c.is_ascii_digit()).take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        }
        _ => None,
    }
    .map(SessionNumber)
}

fn scalar_text(value: &Value) -> Option<String> {
    let text = match value {
        Value::String(text) => text.trim().to_string(),
        Value::Number(number) => number.to_string(),
        Value::Bool(flag) => flag.to_string(),
        _ => return None,
    };
    (!text.is_empty()).then_some(text)
}

/// A string or a list of strings (YAML lets notes write either).
fn text_list(value: &Value) -> Vec<String> {
    match value {
        Value::Sequence(items) => items.iter().filter_map(scalar_text).collect(),
        other => scalar_text(other).into_iter().collect(),
    }
}

fn line_number(line_index: usize) -> u32 {
    u32::try_from(line_index + 1).unwrap_or(u32::MAX)
}

pub(crate) fn diagnostic(path: &str, line: Option<u32>, message: &str) -> Diagnostic {
    Diagnostic { path: path.to_string(), line, message: message.to_string() }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use super::*;

    /// Reads `text` as a note body and renders everything this stage produces, one fact a
    /// line: front matter fields, visible lines (numbered), secrets, links, tags, diagnostics.
    fn check(text: &str, expect: &str) {
        check_in(&SecretNotes::default(), text, expect);
    }

    fn config() -> CorpusConfig {
        CorpusConfig {
            label_language: crate::corpus::LabelLanguage::Es,
            kind_folders: crate::corpus::default_kind_folders(),
            secret_paths: vec!["Secretos".to_string()],
            secret_words: crate::corpus::default_secret_words(),
            session_patterns: crate::corpus::SessionPattern::defaults(),
        }
    }

    /// As `check`, for the note `Sesiones/n.md` of a campaign whose notes are `secret_notes`.
    fn check_in(secret_notes: &SecretNotes, text: &str, expect: &str) {
        let lines: Vec<&str> = text.lines().collect();
        let mut diagnostics = Vec::new();
        let config = config();
        let front = read_front_matter("n.md", &lines, &config, &mut diagnostics);
        let reader = LinkReader::new(&config, secret_notes, "Sesiones/n.md", &lines, TextMarkers::in_text(text));
        let body = read_body("n.md", &lines, &front, &reader, &mut diagnostics);
        let mut actual = String::new();
        if front.gm_only {
            writeln!(actual, "gm only").unwrap();
        }
        if let Some(title) = &front.title {
            writeln!(actual, "title: {title}").unwrap();
        }
        if !front.aliases.is_empty() {
            writeln!(actual, "aliases: {}", front.aliases.join(", ")).unwrap();
        }
        if let Some(session) = front.session {
            writeln!(actual, "session: {session}").unwrap();
        }
        if !front.sessions.is_empty() {
            let sessions: Vec<String> = front.sessions.iter().map(ToString::to_string).collect();
            writeln!(actual, "sessions: {}", sessions.join(", ")).unwrap();
        }
        if let Some(kind) = front.kind {
            writeln!(actual, "kind: {}", kind.as_str()).unwrap();
        }
        for (line_index, line) in body.visible.iter().enumerate() {
            if !line.is_empty() {
                writeln!(actual, "{}| {}", line_index + 1, line.trim_end()).unwrap();
            }
        }
        for secret in &body.secrets {
            let text = secret.text.trim_end().replace('\n', "⏎");
            writeln!(actual, "secret {}-{}: {text}", secret.line_start, secret.line_end).unwrap();
        }
        for link in &body.links {
            let shown = link.shown.as_deref().unwrap_or("-");
            let embed = if link.embed { " embed" } else { "" };
            writeln!(actual, "link {} | {shown}{embed}", link.target).unwrap();
        }
        let tags: Vec<String> = front.tags.iter().cloned().chain(body.tags.into_iter().map(|(_, tag)| tag)).collect();
        if !tags.is_empty() {
            writeln!(actual, "tags: {}", tags.join(", ")).unwrap();
        }
        for diagnostic in &diagnostics {
            let line = diagnostic.line.map_or("-".to_string(), |line| line.to_string());
            writeln!(actual, "diagnostic {line}: {}", diagnostic.message).unwrap();
        }
        assert_eq!(actual.trim_end(), expect.trim(), "\n--- actual ---\n{actual}");
    }

    #[test]
    fn front_matter_fields() {
        check(
            "---
title: Baika la Tejedora
aliases: La Tejedora
tags: [NPC, puerto]
session: 6
type: pnj
---
Texto.",
            "
title: Baika la Tejedora
aliases: La Tejedora
session: 6
kind: sheet
8| Texto.
tags: NPC, puerto",
        );
        check(
            "---
aliases:
  - Cryovain
  - el dragón blanco
tags: '#lugar, #puerto'
session: Sesión 12
type: Lugar
---",
            "
aliases: Cryovain, el dragón blanco
session: 12
kind: world
tags: lugar, puerto",
        );
        check("---\n---\nSolo cuerpo.", "3| Solo cuerpo.");
        check(
            "---\nsession: pronto\n---\nx",
            "4| x\ndiagnostic -: front matter `session` holds no session number; ignored",
        );
    }

    #[test]
    fn broken_front_matter_makes_the_note_gm_only() {
        // It might have said `secret: true`: the whole note fails closed, its lines read as
        // GM text, and the diagnostic names the line.
        check(
            "---
title: \"sin cerrar
notas_dj: [el capitán
---
Cuerpo.",
            "
gm only
2| title: \"sin cerrar
3| notas_dj: [el capitán
5| Cuerpo.
diagnostic 3: front matter is not valid YAML (found unexpected end of stream): the note is kept GM-only until it is fixed",
        );
        check(
            "---
title: Nunca cerrado
Cuerpo.",
            "
gm only
2| title: Nunca cerrado
3| Cuerpo.
diagnostic 1: front matter opened with `---` is never closed: the note is kept GM-only until it is",
        );
        check(
            "---
notas_dj - el capitán es el traidor
---
Cuerpo.",
            "
gm only
2| notas_dj - el capitán es el traidor
4| Cuerpo.
diagnostic 2: front matter is not a list of `key: value` pairs: the note is kept GM-only until it is fixed",
        );
    }

    #[test]
    fn front_matter_marks_make_the_note_gm_only() {
        let marked = [
            "secret: true",
            "gm: true",
            "dm: yes",
            "secreto: sí",
            "DM_only: true",
            "notas-dj: true",
            "secret:",
            "visibility: gm",
            "visibility: dm",
            "visibility: Secret",
            "visibility: private",
            "visibilidad: solo-máster",
            "publish: false",
            "type: secreto",
            "tipo: notas-dj",
        ];
        for mark in marked {
            let kind = if mark.starts_with("t") { "kind: world\n" } else { "" };
            check(&format!("---\n{mark}\n---\nCuerpo."), &format!("gm only\n{kind}4| Cuerpo."));
        }
        let unmarked = [
            "secret: false",
            "gm: no",
            "notas_dj: el capitán es el traidor",
            "gm:\n  motivo: venganza",
            "visibility: public",
            "visibility: jugadores",
            "publish: true",
            "type: npc",
        ];
        for front in unmarked {
            let n_lines = front.lines().count();
            let expect = format!("{}| Cuerpo.", n_lines + 3);
            let mut diagnostics = Vec::new();
            let text = format!("---\n{front}\n---\nCuerpo.");
            let lines: Vec<&str> = text.lines().collect();
            let parsed = read_front_matter("n.md", &lines, &config(), &mut diagnostics);
            assert!(!parsed.gm_only, "{front}: {diagnostics:?}");
            assert!(diagnostics.is_empty(), "{front}: {diagnostics:?}");
            check(&text, if front.starts_with("type") { "kind: sheet\n4| Cuerpo." } else { &expect });
        }
        // A visibility not understood fails closed, without quoting the value.
        check(
            "---\nvisibility: el capitán\n---\nCuerpo.",
            "
gm only
4| Cuerpo.
diagnostic -: front matter `visibility` is neither a GM word (gm, dm, secret, private…) nor public or player: the note is kept GM-only",
        );
    }

    #[test]
    fn a_callout_is_secret_when_a_word_of_its_type_is_a_gm_word() {
        // (callout type, secret?)
        let table = [
            ("gm-only", true),
            ("notas-dj", true),
            ("DM notes", true),
            ("Máster", true),
            ("narrador", true),
            ("privado", true),
            ("secretos", true),
            ("spoiler", true),
            ("note", false),
            ("gmnotes", false),
            ("info", false),
        ];
        for (kind, secret) in table {
            let note = format!("> [!{kind}] Título\n> SECRETO.\n\nFuera.");
            let expect = if secret {
                "4| Fuera.\nsecret 1-2: Título⏎SECRETO.".to_string()
            } else {
                format!("1| > [!{kind}] Título\n2| > SECRETO.\n4| Fuera.")
            };
            check(&note, &expect);
        }
    }

    #[test]
    fn secret_callouts_in_list_items() {
        check(
            "- Compraron cuerdas.
- > [!secret] Del máster
  > SECRETO en la lista.
  > y su segunda línea.

1. > [!gm-only]
   > SECRETO numerado.

- Fuera.
  > [!dm]
  > SECRETO en la continuación del elemento.",
            "
1| - Compraron cuerdas.
9| - Fuera.
secret 2-4: Del máster⏎SECRETO en la lista.⏎y su segunda línea.
secret 6-7: ⏎SECRETO numerado.
secret 10-11: ⏎SECRETO en la continuación del elemento.",
        );
    }

    #[test]
    fn comment_openers_with_gm_words_open_gm_blocks() {
        check(
            "Público uno.
<!-- DJ: SECRETO en el comentario -->
SECRETO dentro.
<!-- /DJ -->
Público dos. <!--- gm --->SECRETO triple<!--- /gm ---> tras.
<!-- notas del máster -->
SECRETO de notas.
<!-- end máster -->
<!-- narrador -->SECRETO<!-- fin narrador --> Público tres.
<!-- nota normal --> Público cuatro.",
            "
1| Público uno.
5| Público dos.  tras.
9|  Público tres.
10|  Público cuatro.
secret 2-4: SECRETO en el comentario ⏎SECRETO dentro.
secret 5-5: SECRETO triple
secret 6-8: ⏎SECRETO de notas.
secret 9-9: SECRETO
secret 10-10: nota normal
diagnostic 2: `<!-- DJ …-->` holds more than its GM word and reads as a GM block opener: everything up to `<!-- /DJ -->` is treated as DM-only",
        );
    }

    #[test]
    fn a_line_of_many_markers_is_read_marker_by_marker() {
        // Every form, repeated on one line: the scan remembers where each kind of marker is
        // next, and still reads each passage where it is.
        let unit = "a<!-- x -->b%%c%%d<!-- gm -->e<!-- /gm -->f";
        let line = unit.repeat(200);
        let lines = [line.as_str()];
        let mut diagnostics = Vec::new();
        let config = config();
        let front = read_front_matter("n.md", &lines, &config, &mut diagnostics);
        let secret_notes = SecretNotes::default();
        let reader = LinkReader::new(&config, &secret_notes, "n.md", &lines, TextMarkers::in_text(&line));
        let body = read_body("n.md", &lines, &front, &reader, &mut diagnostics);
        assert_eq!(body.visible[0], "abdf".repeat(200));
        let secrets: Vec<&str> = body.secrets.iter().map(|secret| secret.text.as_str()).collect();
        assert_eq!(secrets, ["x", "c", "e"].repeat(200));
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        // Openers that never close: one comment to the end of the line.
        let line = "<!-- ".repeat(1000) + "fin";
        let lines = [line.as_str()];
        let body = read_body("n.md", &lines, &FrontMatter::default(), &reader, &mut diagnostics);
        assert_eq!(body.visible[0], "");
        assert_eq!(body.secrets.len(), 1);
        assert!(body.secrets[0].text.ends_with("fin"));
    }

    #[test]
    fn links_to_secret_notes_show_no_name_of_them() {
        let secret_notes = SecretNotes::new([
            ("Secretos/Krovathen.md", crate::corpus::Visibility::DmOnly),
            ("Mundo/El capitán es el traidor.md", crate::corpus::Visibility::DmOnly),
            ("PNJs/Baika.md", crate::corpus::Visibility::Player),
        ]);
        check_in(
            &secret_notes,
            "Vimos a [[Secretos/Krovathen]] y a [[Secretos/Krovathen|el capitán]] y a [[Krovathen|Krovathen]].
Y [[El capitán es el traidor]], [[el capitán es el traidor#Pruebas]], ![[Secretos/Krovathen]] y [[Baika]].
Enlaces: [el mapa](Secretos/Krovathen.md), [Krovathen](../Secretos/Krovathen.md), [x](<Mundo/El capitán es el traidor.md>).
Más: [nota](Mundo/El%20capit%C3%A1n%20es%20el%20traidor.md \"título\") y [obs](obsidian://open?vault=V&file=Secretos%2FKrovathen) y [web](https://ejemplo.org/Secretos/x).
Referencia [el culpable][k] y [Krovathen][] y [Baika](PNJs/Baika.md).
[k]: Secretos/Krovathen.md
[Krovathen]: <Secretos/Krovathen.md>",
            "
1| Vimos a  y a el capitán y a .
2| Y , ,  y Baika.
3| Enlaces: el mapa, , x.
4| Más: nota y obs y [web](https://ejemplo.org/Secretos/x).
5| Referencia el culpable y  y [Baika](PNJs/Baika.md).
link Secretos/Krovathen | -
link Secretos/Krovathen | el capitán
link Krovathen | Krovathen
link El capitán es el traidor | -
link el capitán es el traidor | -
link Secretos/Krovathen | - embed
link Baika | -",
        );
        // Knowing only the secret paths, a link by name alone still shows it: the campaign
        // pass (`parse_campaign`) reads such a note again once it knows every secret note.
        check(
            "[[El capitán es el traidor]] y [[Secretos/Krovathen]]",
            "1| El capitán es el traidor y\nlink El capitán es el traidor | -\nlink Secretos/Krovathen | -",
        );
    }

    #[test]
    fn wikilinks_embeds_placeholders_and_tags() {
        check(
            "Vimos a [[Cryovain|el dragón blanco]] sobre [[Puerto Galerna]].
Según [[Norkiel#Dogmas]] y [[Lugares/Faro.md|]] y [[#Más abajo]].
![[mapa.png]] El mapa. ![[Baika#Retrato|300]]
{{Historia}} fin {{ fecha }}
Aliado #NPC y #lugar/puerto, no # título ni [[Baika#ojos]] ni #1.
Tabla [[Baika\\|la tejedora]]",
            "
1| Vimos a el dragón blanco sobre Puerto Galerna.
2| Según Norkiel y Faro y Más abajo.
3|  El mapa.
4|  fin
5| Aliado #NPC y #lugar/puerto, no # título ni Baika ni #1.
6| Tabla la tejedora
link Cryovain | el dragón blanco
link Puerto Galerna | -
link Norkiel | -
link Lugares/Faro.md | -
link mapa.png | - embed
link Baika | 300 embed
link Baika | -
link Baika | la tejedora
tags: NPC, lugar/puerto",
        );
    }

    #[test]
    fn secrets_inline_and_multiline() {
        check(
            "Antes %%oculto%% después %%otro%%.
Línea %%abre
medio
cierra%% visible.
%%%%",
            "
1| Antes  después .
2| Línea
4|  visible.
secret 1-1: oculto
secret 1-1: otro
secret 2-4: abre⏎medio⏎cierra",
        );
        check(
            "Público.
<!-- gm -->
El capitán trabaja para [[Umbravela|la Orden]].
<!-- /gm -->
Más público. <!-- nota suelta --> fin.
<!-- GM -->en línea<!-- /GM --> tras.
<!-- sin cerrar
<!-- gm -->
Secreto aunque el comentario anterior no cerrara.
<!-- /gm -->
Fin.",
            "
1| Público.
5| Más público.  fin.
6|  tras.
11| Fin.
secret 2-4: ⏎El capitán trabaja para la Orden.
secret 5-5: nota suelta
secret 6-6: en línea
secret 7-10: sin cerrar⏎⏎Secreto aunque el comentario anterior no cerrara.",
        );
    }

    #[test]
    fn secret_callouts() {
        check(
            "Antes.
> [!secret] Lo que nadie sabe
> Baika es hija de Norkiel.
>
> Y lo oculta.
Después.
> [!GM]- plegado
> texto del máster
> [!Note] seguida, sigue en el mismo callout
> y por eso también es secreta

> [!Note]
> una nota normal
>[!dm]+
>pegado",
            // `Después.` follows the quote with no blank line, so CommonMark (and
            // Obsidian) read it as a lazy continuation of the secret's last paragraph.
            "
1| Antes.
12| > [!Note]
13| > una nota normal
secret 2-6: Lo que nadie sabe⏎Baika es hija de Norkiel.⏎⏎Y lo oculta.⏎Después.
secret 7-10: plegado⏎texto del máster⏎[!Note] seguida, sigue en el mismo callout⏎y por eso también es secreta
secret 14-15: ⏎pegado",
        );
    }

    #[test]
    fn nested_and_decorated_callouts_are_secret() {
        // (note, what stays visible, the secret passages); `SECRETO` marks GM text.
        let table: &[(&str, &str)] = &[
            (
                "> [!note] Pista
> La puerta está cerrada.
> > [!secret]
> > SECRETO anidado.
>
> Vuelve la nota.",
                "
1| > [!note] Pista
2| > La puerta está cerrada.
5| >
6| > Vuelve la nota.
secret 3-4: ⏎SECRETO anidado.",
            ),
            (
                "> [!secret|right] Al margen
> SECRETO con metadatos.

Fuera.",
                "
4| Fuera.
secret 1-2: Al margen⏎SECRETO con metadatos.",
            ),
            (
                "> [!secret]-
> SECRETO plegado.

Fuera.",
                "4| Fuera.
secret 1-2: ⏎SECRETO plegado.",
            ),
            (
                "> [!GM]+
> SECRETO desplegado.

Fuera.",
                "4| Fuera.
secret 1-2: ⏎SECRETO desplegado.",
            ),
            (
                "> [!secretos] SECRETO en plural

Fuera.",
                "3| Fuera.
secret 1-1: SECRETO en plural",
            ),
            // Lazy continuation: a non-blank line right after the quote stays in it.
            (
                "> [!secret]
> Primera línea.
SECRETO perezoso sin `>`.
también esta.

Fuera.",
                "
6| Fuera.
secret 1-4: ⏎Primera línea.⏎SECRETO perezoso sin `>`.⏎también esta.",
            ),
            // Lazy continuation of a nested secret with fewer markers.
            (
                "> [!note]
> > [!gm]
> > Primera.
> SECRETO perezoso con un solo `>`.
>
> Nota.",
                "
1| > [!note]
5| >
6| > Nota.
secret 2-4: ⏎Primera.⏎SECRETO perezoso con un solo `>`.",
            ),
            // A heading or a thematic break ends the paragraph: not lazy.
            (
                "> [!secret]
> SECRETO.
## Sesión 4
> [!dm]
> SECRETO.
---
Fuera.",
                "
3| ## Sesión 4
6| ---
7| Fuera.
secret 1-2: ⏎SECRETO.
secret 4-5: ⏎SECRETO.",
            ),
            // A blank quoted line then an unquoted one: the quote ended.
            (
                "> [!secret]
> SECRETO.
>
Fuera.",
                "4| Fuera.
secret 1-3: ⏎SECRETO.",
            ),
        ];
        for (note, expect) in table {
            check(note, expect);
        }
    }

    #[test]
    fn malformed_gm_markers_fail_closed() {
        // An opener variant opens a GM block, with a diagnostic.
        check(
            "Público.
<!-- GM: spoilers -->
El capitán es el traidor.
<!-- /gm -->
Fin. <!--dm-only-->en línea<!-- /dm --> tras.",
            "
1| Público.
5| Fin.  tras.
secret 2-4: spoilers ⏎El capitán es el traidor.
secret 5-5: en línea
diagnostic 2: `<!-- GM …-->` holds more than its GM word and reads as a GM block opener: everything up to `<!-- /GM -->` is treated as DM-only",
        );
        // A closer with no opener hides its section up to it: links and tags too.
        check(
            "# Sesión 3
Visible quizá.
Texto del máster sobre [[Umbravela|la orden]] #pista
Más <!-- /gm --> Después.
Fin.",
            "
1| # Sesión 3
4|  Después.
5| Fin.
secret 2-3: Visible quizá.⏎Texto del máster sobre la orden #pista
secret 4-4: Más
diagnostic 4: `<!-- /gm -->` closes no GM block; the text from line 2 up to it is treated as DM-only",
        );
        // With no session header before it, from the top of the body (after front matter).
        check(
            "---\ntitle: T\n---\nIntro.\nSecreto.\n<!-- /GM -->\nPúblico.",
            "
title: T
7| Público.
secret 4-5: Intro.⏎Secreto.
diagnostic 6: `<!-- /GM -->` closes no GM block; the text from line 4 up to it is treated as DM-only",
        );
    }

    #[test]
    fn unclosed_secrets_fail_closed() {
        check(
            "Visible.
%% empieza aquí
## Sesión 9
todo esto es secreto",
            "
1| Visible.
secret 2-4: empieza aquí⏎## Sesión 9⏎todo esto es secreto
diagnostic 2: `%%` comment is never closed; everything after it is treated as DM-only",
        );
        check(
            "Visible.
<!-- gm -->
oculto <!-- fin -->
sigue oculto",
            "
1| Visible.
secret 2-4: ⏎oculto <!-- fin -->⏎sigue oculto
diagnostic 2: `<!-- gm -->` block is never closed; everything after it is treated as DM-only",
        );
        check(
            "Visible <!-- sin cierre",
            "
1| Visible
secret 1-1: sin cierre
diagnostic 1: `<!--` comment is never closed; everything after it is treated as DM-only",
        );
    }
}
