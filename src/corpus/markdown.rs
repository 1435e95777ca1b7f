//! Markdown, line by line: front matter, GM secrets, wikilinks, embeds, placeholders, tags.
//!
//! Everything here keeps one output line per input line, so line numbers survive every
//! step: a removed passage leaves an empty line (or a shorter one) behind, never a gap.

use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_yaml_ng::Value;

use super::session::detect_session_header;
use super::text::fold;
use super::{Diagnostic, Link, NoteKind, SecretPassage, SessionNumber};

/// `> [!secret]`, `> [!gm]` (also `dm`, `secreto`, plurals), any case, at any quote depth
/// (`> > [!secret]` inside another callout), with optional metadata (`[!secret|right]`),
/// fold marker (`-`, `+`) and title.
static SECRET_CALLOUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^[ \t]*(?P<quotes>(?:>[ \t]*)+)\[!(?:secrets?|secretos?|gm|dm)(?:\|[^\]]*)?\][-+]?[ \t]*(?P<title>.*)$",
    )
    .expect("the callout pattern is valid")
});

/// A line that ends a paragraph, so it cannot be a lazy continuation of a callout: an ATX
/// heading, a thematic break, or an HTML block (`<!--`).
static INTERRUPTS_PARAGRAPH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[ \t]{0,3}(?:#{1,6}(?:[ \t]|$)|(?:\*[ \t]*){3,}$|(?:-[ \t]*){3,}$|(?:_[ \t]*){3,}$|<!--)")
        .expect("the paragraph-interrupt pattern is valid")
});

/// `<!-- gm -->` opening a GM block (also `dm`, `secret`, `secreto`).
static GM_BLOCK_OPEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)<!--[ \t]*(?:gm|dm|secret|secreto)[ \t]*-->").expect("the gm open pattern is valid")
});

/// An HTML comment that starts like a GM opener but is not one (`<!-- GM: spoilers -->`,
/// `<!-- dm-only -->`): the DM meant a GM block, so it opens one, with a diagnostic.
static GM_BLOCK_OPEN_VARIANT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^<!--[ \t]*(?P<word>gm|dm|secrets?|secretos?)\b").expect("the gm variant pattern is valid")
});

/// `<!-- /gm -->` closing it.
static GM_BLOCK_CLOSE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)<!--[ \t]*/[ \t]*(?:gm|dm|secret|secreto)[ \t]*-->").expect("the gm close pattern is valid")
});

/// `[[target|shown]]` and `![[embed]]`.
static WIKILINK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?P<embed>!?)\[\[(?P<inner>[^\[\]\n]*)\]\]").expect("the wikilink pattern is valid"));

/// Template placeholders such as `{{Historia}}`.
static PLACEHOLDER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\{\{[^{}\n]*\}\}").expect("the placeholder pattern is valid"));

/// Obsidian inline tags: `#NPC`, `#lugar/puerto`. Not headings (`# Title`), not anchors.
static INLINE_TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[\s(\[,;])#(?P<tag>[\p{L}_][\p{L}\p{N}_/\-]*)").expect("the tag pattern is valid")
});

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
    /// `(line index, tag)` for each inline tag in the visible text, without the `#`.
    pub tags: Vec<(usize, String)>,
    /// `(line index, session)` for each session header, outside fenced code. Read before
    /// wikilinks are rendered, so `## [[Sesión 4]]` (a link, not a header) stays a link.
    pub session_headers: Vec<(usize, SessionNumber)>,
}

/// Reads the YAML front matter at the very top of the file (`---` … `---` or `...`).
/// Broken front matter gives a diagnostic and its lines are kept as body text.
pub(crate) fn read_front_matter(path: &str, lines: &[&str], diagnostics: &mut Vec<Diagnostic>) -> FrontMatter {
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
            "front matter opened with `---` is never closed; its lines are read as body text",
        ));
        front.body_start = 1;
        return front;
    };
    let yaml = lines[1..closing].join("\n");
    match serde_yaml_ng::from_str::<Value>(&yaml) {
        Ok(Value::Null) => front.body_start = closing + 1,
        Ok(Value::Mapping(mapping)) => {
            front.body_start = closing + 1;
            for (key, value) in &mapping {
                let Some(key) = key.as_str() else { continue };
                read_front_matter_field(path, &fold(key.trim()), value, &mut front, diagnostics);
            }
        }
        Ok(_) => {
            diagnostics.push(diagnostic(
                path,
                Some(2),
                "front matter is not a list of `key: value` pairs; its lines are kept as body text",
            ));
            front.body_start = 1;
            front.hidden.push(closing);
        }
        Err(error) => {
            let yaml_line = error.location().map_or(1, |location| location.line());
            let line = u32::try_from(yaml_line + 1).ok();
            let reason = error.to_string();
            let reason = reason.split(" at line ").next().unwrap_or(&reason);
            diagnostics.push(diagnostic(
                path,
                line,
                &format!("front matter is not valid YAML ({reason}); its lines are kept as body text"),
            ));
            front.body_start = 1;
            front.hidden.push(closing);
        }
    }
    front
}

/// Takes secrets out of the body and renders what is left. An unclosed secret runs to the
/// end of the file, with a diagnostic: the corpus fails closed, never open.
pub(crate) fn read_body(path: &str, lines: &[&str], front: &FrontMatter, diagnostics: &mut Vec<Diagnostic>) -> Body {
    let mut body = Body::default();
    let mut open: Option<OpenSecret> = None;
    let mut in_fence = false;
    // The line each entry of `body.links` was read on.
    let mut link_lines: Vec<usize> = Vec::new();
    // Where a `<!-- /gm -->` with no opener would start hiding: the line after the last
    // session header or stray closer (else the body's first line).
    let mut section_start = front.body_start;
    let mut marker_problems: Vec<GmMarkerProblem> = Vec::new();
    for (line_index, &raw_line) in lines.iter().enumerate() {
        let is_hidden = line_index < front.body_start || front.hidden.contains(&line_index);
        let line = if is_hidden { "" } else { raw_line };

        if let Some(mut callout) = open.take_if(|secret| secret.form == SecretForm::Callout) {
            // Another `[!secret]` at the same depth or shallower starts its own passage.
            let starts_another = SECRET_CALLOUT
                .captures(line)
                .is_some_and(|captures| captures["quotes"].matches('>').count() <= callout.quote_depth);
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
            None => {
                if let Some(captures) = SECRET_CALLOUT.captures(line) {
                    let title = captures.name("title").map_or("", |title| title.as_str().trim());
                    let mut callout = OpenSecret::new(SecretForm::Callout, line_index, title);
                    callout.quote_depth = captures["quotes"].matches('>').count();
                    // `> [!secret]` is itself a paragraph line: the next line may continue it lazily.
                    callout.last_line_blank = false;
                    open = Some(callout);
                    body.visible.push(String::new());
                    continue;
                }
            }
        }
        let n_problems = marker_problems.len();
        let shown = take_inline_secrets(line, line_index, &mut open, &mut body.secrets, &mut marker_problems);
        for problem in &marker_problems[n_problems..] {
            match problem {
                GmMarkerProblem::OpenerVariant { marker, .. } => {
                    let message = format!(
                        "`{marker}` is not `<!-- gm -->` but reads as one: everything up to `<!-- /gm -->` is treated as DM-only"
                    );
                    diagnostics.push(diagnostic(path, u32::try_from(line_index + 1).ok(), &message));
                }
                GmMarkerProblem::StrayCloser => {
                    let message = format!(
                        "`<!-- /gm -->` closes no `<!-- gm -->`; the text from line {} up to it is treated as DM-only",
                        line_number(section_start.min(line_index))
                    );
                    diagnostics.push(diagnostic(path, u32::try_from(line_index + 1).ok(), &message));
                    hide_since(&mut body, &mut link_lines, section_start, line_index);
                    section_start = line_index + 1;
                }
            }
        }
        if is_fence(&shown) {
            in_fence = !in_fence;
        } else if !in_fence && let Some(session) = detect_session_header(&shown) {
            body.session_headers.push((line_index, session));
            section_start = section_start.max(line_index + 1);
        }
        let shown = render_obsidian(&shown, Some(&mut body.links));
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

/// What a GM marker got wrong, found while reading a line.
enum GmMarkerProblem {
    /// `<!-- GM: spoilers -->`: opened a GM block anyway.
    OpenerVariant { marker: String },
    /// `<!-- /gm -->` with no block open.
    StrayCloser,
}

/// Fails closed for a `<!-- /gm -->` with no opener on line `closer_index`: the opener was
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
/// When `links` is given, every wikilink and embed is recorded there.
pub(crate) fn render_obsidian(text: &str, mut links: Option<&mut Vec<Link>>) -> String {
    let has_link = text.contains("[[");
    let has_placeholder = text.contains("{{");
    if !has_link && !has_placeholder {
        return text.to_string();
    }
    let mut rendered = text.to_string();
    if has_link {
        rendered = WIKILINK
            .replace_all(&rendered, |captures: &Captures<'_>| {
                let (link, shown) = read_wikilink(&captures["inner"], !captures["embed"].is_empty());
                if let Some(links) = links.as_deref_mut()
                    && !link.target.is_empty()
                {
                    links.push(link);
                }
                shown
            })
            .into_owned();
    }
    if has_placeholder {
        rendered = PLACEHOLDER.replace_all(&rendered, "").into_owned();
    }
    rendered
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
    /// `<!-- gm --> … <!-- /gm -->`
    GmBlock,
    /// Any other `<!-- … -->`: hidden when the note is rendered, so not for players either.
    HtmlComment,
    /// `> [!secret]` and its quoted lines.
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

/// Splits one line into what stays visible (returned) and what goes into `open` secrets,
/// opening and closing `%%`, `<!-- gm -->` and `<!-- -->` passages as their markers appear.
fn take_inline_secrets(
    line: &str,
    line_index: usize,
    open: &mut Option<OpenSecret>,
    secrets: &mut Vec<SecretPassage>,
    problems: &mut Vec<GmMarkerProblem>,
) -> String {
    if open.is_none() && !line.contains("%%") && !line.contains("<!--") {
        return line.to_string();
    }
    let mut shown = String::new();
    let mut rest = line;
    loop {
        let Some(secret) = open.as_mut() else {
            let comment = rest.find("%%");
            let html = rest.find("<!--");
            let (position, form) = match (comment, html) {
                (None, None) => {
                    shown.push_str(rest);
                    return shown;
                }
                (Some(comment), Some(html)) if html < comment => (html, SecretForm::HtmlComment),
                (Some(comment), _) => (comment, SecretForm::Comment),
                (None, Some(html)) => (html, SecretForm::HtmlComment),
            };
            shown.push_str(&rest[..position]);
            rest = &rest[position..];
            let (form, marker_len) = match form {
                SecretForm::HtmlComment => {
                    if let Some(marker) = find_at_start(&GM_BLOCK_OPEN, rest) {
                        (SecretForm::GmBlock, marker.end())
                    } else if let Some(marker) = find_at_start(&GM_BLOCK_CLOSE, rest) {
                        // A closer with no opener: the opener was mistyped, so what this line
                        // showed before it is GM-only too (the lines before: `read_body`).
                        let before = std::mem::take(&mut shown);
                        close_secret(OpenSecret::new(SecretForm::GmBlock, line_index, &before), line_index, secrets);
                        problems.push(GmMarkerProblem::StrayCloser);
                        rest = &rest[marker.end()..];
                        continue;
                    } else if let Some(variant) = GM_BLOCK_OPEN_VARIANT.captures(rest) {
                        // `<!-- GM: spoilers -->` opens a GM block after its own `-->`; with no
                        // `-->` on the line, the block opens at once (its text is secret either way).
                        // The diagnostic names only the keyword: the rest may be the secret itself.
                        let marker = format!("<!-- {} …-->", &variant["word"]);
                        let marker_end = rest.find("-->").map_or("<!--".len(), |closing| closing + "-->".len());
                        problems.push(GmMarkerProblem::OpenerVariant { marker });
                        (SecretForm::GmBlock, marker_end)
                    } else {
                        (SecretForm::HtmlComment, "<!--".len())
                    }
                }
                form => (form, "%%".len()),
            };
            rest = &rest[marker_len..];
            *open = Some(OpenSecret::new(form, line_index, ""));
            continue;
        };
        // HTML comments do not nest, but a `<!-- gm -->` inside one means the GM meant a GM
        // block: the passage goes on as one, rather than ending at the marker's `-->`.
        if secret.form == SecretForm::HtmlComment
            && let Some(marker) = GM_BLOCK_OPEN.find(rest)
            && rest.find("-->").is_none_or(|closing| marker.start() < closing)
        {
            secret.text.push_str(&rest[..marker.start()]);
            secret.form = SecretForm::GmBlock;
            rest = &rest[marker.end()..];
            continue;
        }
        let closing = match secret.form {
            SecretForm::Comment => rest.find("%%").map(|start| (start, start + 2)),
            SecretForm::HtmlComment => rest.find("-->").map(|start| (start, start + 3)),
            SecretForm::GmBlock => GM_BLOCK_CLOSE.find(rest).map(|marker| (marker.start(), marker.end())),
            SecretForm::Callout => unreachable!("callouts are whole lines, handled by read_body"),
        };
        let Some((marker_start, marker_end)) = closing else {
            secret.text.push_str(rest);
            return shown;
        };
        secret.text.push_str(&rest[..marker_start]);
        rest = &rest[marker_end..];
        if let Some(secret) = open.take() {
            close_secret(secret, line_index, secrets);
        }
    }
}

/// `pattern`'s match when it starts `text`.
fn find_at_start<'t>(pattern: &Regex, text: &'t str) -> Option<regex::Match<'t>> {
    pattern.find(text).filter(|marker| marker.start() == 0)
}

/// Records a finished secret passage ending on `line_end_index`, unless it holds no text.
fn close_secret(secret: OpenSecret, line_end_index: usize, secrets: &mut Vec<SecretPassage>) {
    let text = render_obsidian(&secret.text, None);
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
    diagnostics: &mut Vec<Diagnostic>,
) {
    match key {
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
        }
        _ => {}
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
        let lines: Vec<&str> = text.lines().collect();
        let mut diagnostics = Vec::new();
        let front = read_front_matter("n.md", &lines, &mut diagnostics);
        let body = read_body("n.md", &lines, &front, &mut diagnostics);
        let mut actual = String::new();
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
    fn broken_front_matter_keeps_text() {
        check(
            "---
title: \"sin cerrar
tags: [a, b
---
Cuerpo.",
            "
2| title: \"sin cerrar
3| tags: [a, b
5| Cuerpo.
diagnostic 3: front matter is not valid YAML (found unexpected end of stream); its lines are kept as body text",
        );
        check(
            "---
title: Nunca cerrado
Cuerpo.",
            "
2| title: Nunca cerrado
3| Cuerpo.
diagnostic 1: front matter opened with `---` is never closed; its lines are read as body text",
        );
        check(
            "---
Una línea de texto
---
Cuerpo.",
            "
2| Una línea de texto
4| Cuerpo.
diagnostic 2: front matter is not a list of `key: value` pairs; its lines are kept as body text",
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
            // Issue 12: `Después.` follows the quote with no blank line, so CommonMark (and
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
    fn issue_12_nested_and_decorated_callouts_are_secret() {
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
    fn issue_12_malformed_gm_markers_fail_closed() {
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
secret 2-4: ⏎El capitán es el traidor.
secret 5-5: en línea
diagnostic 2: `<!-- GM …-->` is not `<!-- gm -->` but reads as one: everything up to `<!-- /gm -->` is treated as DM-only
diagnostic 5: `<!-- dm …-->` is not `<!-- gm -->` but reads as one: everything up to `<!-- /gm -->` is treated as DM-only",
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
diagnostic 4: `<!-- /gm -->` closes no `<!-- gm -->`; the text from line 2 up to it is treated as DM-only",
        );
        // With no session header before it, from the top of the body (after front matter).
        check(
            "---\ntitle: T\n---\nIntro.\nSecreto.\n<!-- /GM -->\nPúblico.",
            "
title: T
7| Público.
secret 4-5: Intro.⏎Secreto.
diagnostic 6: `<!-- /gm -->` closes no `<!-- gm -->`; the text from line 4 up to it is treated as DM-only",
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
