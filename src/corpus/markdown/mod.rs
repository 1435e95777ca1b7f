//! Markdown, line by line: front matter, GM secrets, wikilinks, embeds, placeholders, tags.
//!
//! Everything here keeps one output line per input line, so line numbers survive every
//! step: a removed passage leaves an empty line (or a shorter one) behind, never a gap.
//! A line is scanned once per kind of marker, whatever the number of markers on it: a line
//! of a million `<!--` costs what a line of a million letters does.
//!
//! [`read_front_matter`] reads the front matter ([`front_matter`]); [`read_body`] reads the rest
//! ([`body`]), taking out secret callouts ([`callout`]) and inline secrets ([`inline`]) and
//! rendering links ([`links`]).

mod body;
mod callout;
mod front_matter;
mod inline;
mod links;
mod named;

pub(crate) use body::read_body;
pub(crate) use front_matter::{FrontMatter, read_front_matter};
pub(crate) use links::LinkReader;
use links::render_obsidian;
pub(crate) use named::{Covers, cover_named_things};

use super::{Diagnostic, HiddenBecause, Link, SecretPassage, SessionNumber};

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

/// A line that opens or closes fenced code (```` ``` ```` or `~~~`).
pub(crate) fn is_fence(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("```") || line.starts_with("~~~")
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
    /// What a named thing holding a GM word covers (`named`).
    Named,
}

impl SecretForm {
    /// The kind of marker, as `oraculo secrets` names it.
    fn thing(self) -> &'static str {
        match self {
            SecretForm::Comment => "comment",
            SecretForm::GmBlock => "gm block",
            SecretForm::HtmlComment => "html comment",
            SecretForm::Callout => "callout",
            SecretForm::Named => "named thing",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            SecretForm::Comment => "`%%` comment",
            SecretForm::GmBlock => "`<!-- gm -->` block",
            SecretForm::HtmlComment => "`<!--` comment",
            SecretForm::Callout => "secret callout",
            SecretForm::Named => "GM section",
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
    /// The marker as written (`[!gm-only]`, `<!-- DJ -->`) and its GM word, for the audit.
    name: String,
    word: String,
    /// The named thing's kind, for `SecretForm::Named`.
    thing: Option<String>,
}

impl OpenSecret {
    fn new(form: SecretForm, line_start: usize, text: &str) -> OpenSecret {
        OpenSecret {
            form,
            line_start,
            text: text.to_string(),
            quote_depth: 0,
            last_line_blank: true,
            name: String::new(),
            word: String::new(),
            thing: None,
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
    let line_start = line_number(secret.line_start);
    secrets.push(SecretPassage {
        line_start,
        line_end: line_number(line_end_index.max(secret.line_start)),
        text,
        because: HiddenBecause::new(
            Some(line_start),
            secret.thing.as_deref().unwrap_or(secret.form.thing()),
            &secret.name,
            &secret.word,
        ),
    });
}

/// Reads a note's body under the one rule: what its named things (headings, labels, columns,
/// fences, elements, fields) cover is blanked before anything else reads the lines, then the
/// other secret forms are taken out and links rendered ([`read_body`]); what was covered joins
/// the body's secrets.
pub(crate) fn read_covered_body(
    path: &str,
    raw_lines: &[&str],
    front: &FrontMatter,
    (config, secret_notes): (&super::CorpusConfig, &super::SecretNotes),
    markers: TextMarkers,
    diagnostics: &mut Vec<Diagnostic>,
) -> Body {
    let covers = cover_named_things(raw_lines, front.body_start, config);
    let (shown_lines, covered) = covers.apply(raw_lines);
    for (line_index, problem) in &covers.problems {
        let message = format!("{problem}: everything after it is treated as DM-only");
        diagnostics.push(diagnostic(path, u32::try_from(line_index + 1).ok(), &message));
    }
    let lines: Vec<&str> = shown_lines.iter().map(String::as_str).collect();
    let reader = LinkReader::new(config, secret_notes, path, &lines, markers);
    let mut body = read_body(path, &lines, front, &reader, diagnostics);
    if !covers.is_empty() {
        add_covered(&mut body, covered, &covers);
    }
    body
}

/// Adds what the body's named things covered (`Covers::apply`'s passages) to its secrets, in
/// file order, rendered as GM text.
pub(crate) fn add_covered(body: &mut Body, covered: Vec<(usize, usize, usize, String)>, covers: &Covers) {
    for (reason, first, last, text) in covered {
        let mut secret = OpenSecret::new(SecretForm::Named, first, &text);
        let because = &covers.reasons[reason];
        secret.name = because.name.clone();
        secret.word = because.word.clone();
        secret.thing = Some(because.thing.clone());
        close_secret(secret, last, &mut body.secrets);
    }
    body.secrets.sort_by_key(|secret| secret.line_start);
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
    use crate::corpus::CorpusConfig;
    use crate::corpus::secrets::SecretNotes;

    /// Reads `text` as a note body and renders everything this stage produces, one fact a
    /// line: front matter fields, visible lines (numbered), secrets, links, tags, diagnostics.
    pub(super) fn check(text: &str, expect: &str) {
        check_in(&SecretNotes::default(), text, expect);
    }

    pub(super) fn config() -> CorpusConfig {
        CorpusConfig {
            label_language: crate::corpus::LabelLanguage::Es,
            kind_folders: crate::corpus::default_kind_folders(),
            secret_paths: vec!["Secretos".to_string()],
            secret_words: crate::corpus::default_secret_words(),
            player_paths: Vec::new(),
            session_patterns: crate::corpus::SessionPattern::defaults(),
        }
    }

    /// As `check`, for the note `Sesiones/n.md` of a campaign whose notes are `secret_notes`.
    pub(super) fn check_in(secret_notes: &SecretNotes, text: &str, expect: &str) {
        let lines: Vec<&str> = text.lines().collect();
        let mut diagnostics = Vec::new();
        let config = config();
        let front = read_front_matter("n.md", &lines, &config, &mut diagnostics);
        let markers = TextMarkers::in_text(text);
        let body =
            read_covered_body("Sesiones/n.md", &lines, &front, (&config, secret_notes), markers, &mut diagnostics);
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
}
