//! Secrets inside lines: `%% … %%` comments, `<!-- gm --> … <!-- /gm -->` blocks and other
//! `<!-- … -->` comments, each kind of marker searched for once along a line.

use super::{OpenSecret, SecretForm, close_secret};
use crate::corpus::secrets::phrase_words;
use crate::corpus::{CorpusConfig, SecretPassage};
use crate::text::{NextMarker, fold};

/// The first word of a comment that closes a GM block without a `/` (`<!-- end gm -->`,
/// `<!-- fin DJ -->`).
const CLOSER_WORDS: &[&str] = &["end", "fin"];

/// What a GM marker got wrong, found while reading a line.
pub(super) enum GmMarkerProblem {
    /// `<!-- GM: spoilers -->`: opened a GM block anyway; `word` is its GM word.
    OpenerVariant { word: String },
    /// `<!-- /gm -->` with no block open.
    StrayCloser { word: String },
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

/// What reading a line on from a position did.
enum Step {
    /// The line is read on from this byte.
    Next(usize),
    /// The open passage closed; the line is read on from this byte.
    Closed(usize),
    /// The line is read to its end.
    LineEnd,
}

/// One line being split into visible text and secrets, with where each kind of marker is
/// next on it ([`NextMarker`]).
struct LineScan<'l, 'c> {
    line: &'l str,
    line_index: usize,
    config: &'c CorpusConfig,
    percents: NextMarker,
    comment_opens: NextMarker,
    comment_closes: NextMarker,
}

/// Splits one line into what stays visible (returned) and what goes into `open` secrets,
/// opening and closing `%%`, GM comment blocks and `<!-- -->` passages as their markers
/// appear. Each kind of marker is searched for once along the line ([`NextMarker`]).
pub(super) fn take_inline_secrets(
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
    let mut scan = LineScan {
        line,
        line_index,
        config,
        percents: NextMarker::new("%%"),
        comment_opens: NextMarker::new("<!--"),
        comment_closes: NextMarker::new("-->"),
    };
    let mut shown = String::new();
    let mut position = 0;
    loop {
        let step = match open.as_mut() {
            Some(secret) => scan.read_secret(position, secret, problems),
            None => scan.open_secret(position, &mut shown, open, secrets, problems),
        };
        match step {
            Step::Next(next) => position = next,
            Step::Closed(next) => {
                position = next;
                if let Some(secret) = open.take() {
                    close_secret(secret, line_index, secrets);
                }
            }
            Step::LineEnd => return shown,
        }
    }
}

impl LineScan<'_, '_> {
    /// Outside any secret: shows the text up to the next `%%` or `<!--` and opens the passage
    /// it starts; a GM closer there instead hides what the line showed before it.
    fn open_secret(
        &mut self,
        position: usize,
        shown: &mut String,
        open: &mut Option<OpenSecret>,
        secrets: &mut Vec<SecretPassage>,
        problems: &mut Vec<GmMarkerProblem>,
    ) -> Step {
        let line = self.line;
        let comment = self.percents.at_or_after(line, position);
        let html = self.comment_opens.at_or_after(line, position);
        let (at, is_html) = match (comment, html) {
            (None, None) => {
                shown.push_str(&line[position..]);
                return Step::LineEnd;
            }
            (Some(comment), Some(html)) if html < comment => (html, true),
            (Some(comment), _) => (comment, false),
            (None, Some(html)) => (html, true),
        };
        shown.push_str(&line[position..at]);
        if !is_html {
            *open = Some(OpenSecret::new(SecretForm::Comment, self.line_index, ""));
            return Step::Next(at + "%%".len());
        }
        let head = read_comment_head(line, at, self.config);
        match head.kind {
            CommentKind::GmOpener => {
                let mut block = OpenSecret::new(SecretForm::GmBlock, self.line_index, "");
                block.name = format!("<!-- {} -->", line[at + "<!--".len()..head.end].trim());
                block.word = head.word.to_string();
                let next = open_gm_block(line, &head, &mut block, &mut self.comment_closes, problems);
                *open = Some(block);
                Step::Next(next)
            }
            CommentKind::GmCloser => {
                // A closer with no opener: the opener was mistyped, so what this line
                // showed before it is GM-only too (the lines before: `read_body`).
                let before = std::mem::take(shown);
                close_secret(OpenSecret::new(SecretForm::GmBlock, self.line_index, &before), self.line_index, secrets);
                problems.push(GmMarkerProblem::StrayCloser { word: head.word.to_string() });
                Step::Next(after_comment(line, &head, &mut self.comment_closes))
            }
            CommentKind::Plain => {
                *open = Some(OpenSecret::new(SecretForm::HtmlComment, self.line_index, ""));
                Step::Next(at + "<!--".len())
            }
        }
    }

    /// Inside the open `secret`: reads its text up to the marker that closes it, or to the
    /// line's end.
    fn read_secret(&mut self, position: usize, secret: &mut OpenSecret, problems: &mut Vec<GmMarkerProblem>) -> Step {
        let line = self.line;
        match secret.form {
            SecretForm::Comment => match self.percents.at_or_after(line, position) {
                Some(end) => {
                    secret.text.push_str(&line[position..end]);
                    Step::Closed(end + "%%".len())
                }
                None => {
                    secret.text.push_str(&line[position..]);
                    Step::LineEnd
                }
            },
            SecretForm::HtmlComment => self.read_html_comment(position, secret, problems),
            SecretForm::GmBlock => {
                let Some(nested) = self.comment_opens.at_or_after(line, position) else {
                    secret.text.push_str(&line[position..]);
                    return Step::LineEnd;
                };
                let head = read_comment_head(line, nested, self.config);
                if head.kind != CommentKind::GmCloser {
                    secret.text.push_str(&line[position..nested + "<!--".len()]);
                    return Step::Next(nested + "<!--".len());
                }
                secret.text.push_str(&line[position..nested]);
                Step::Closed(after_comment(line, &head, &mut self.comment_closes))
            }
            SecretForm::Callout | SecretForm::Named => {
                unreachable!("callouts and named things are whole lines, handled by read_body")
            }
        }
    }

    /// Inside a plain `<!--` comment: reads its text up to its `-->`, or to the line's end.
    fn read_html_comment(
        &mut self,
        position: usize,
        secret: &mut OpenSecret,
        problems: &mut Vec<GmMarkerProblem>,
    ) -> Step {
        let line = self.line;
        let close = self.comment_closes.at_or_after(line, position);
        let nested =
            self.comment_opens.at_or_after(line, position).filter(|&nested| close.is_none_or(|close| nested < close));
        if let Some(nested) = nested {
            // HTML comments do not nest, but a GM opener inside one means the GM meant
            // a GM block: the passage goes on as one, rather than ending at its `-->`.
            let head = read_comment_head(line, nested, self.config);
            if head.kind == CommentKind::GmOpener {
                secret.text.push_str(&line[position..nested]);
                secret.form = SecretForm::GmBlock;
                return Step::Next(open_gm_block(line, &head, secret, &mut self.comment_closes, problems));
            }
            secret.text.push_str(&line[position..nested + "<!--".len()]);
            return Step::Next(nested + "<!--".len());
        }
        match close {
            Some(end) => {
                secret.text.push_str(&line[position..end]);
                Step::Closed(end + "-->".len())
            }
            None => {
                secret.text.push_str(&line[position..]);
                Step::LineEnd
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{check, config};
    use super::super::{FrontMatter, LinkReader, TextMarkers, read_body, read_front_matter};
    use crate::corpus::secrets::SecretNotes;

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
}
