//! A note's body, line by line: secrets taken out, links rendered, tags and session headers
//! found, one output line per input line.

use std::sync::LazyLock;

use regex::Regex;

use super::callout::{continues_callout, quote_depth, secret_callout, strip_quote_markers};
use super::inline::{GmMarkerProblem, take_inline_secrets};
use super::links::render_obsidian;
use super::{Body, FrontMatter, LinkReader, OpenSecret, SecretForm, close_secret, diagnostic, is_fence, line_number};
use crate::corpus::Diagnostic;
use crate::corpus::session::detect_session_header;

/// Obsidian inline tags: `#NPC`, `#lugar/puerto`. Not headings (`# Title`), not anchors.
static INLINE_TAG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[\s(\[,;])#(?P<tag>[\p{L}_][\p{L}\p{N}_/\-]*)").expect("the tag pattern is valid")
});

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
                    callout.name = secret.name.to_string();
                    callout.word = secret.word.to_string();
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
        report_marker_problems(
            path,
            line_index,
            &marker_problems[n_problems..],
            &mut body,
            &mut link_lines,
            &mut section_start,
            diagnostics,
        );
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

/// Reports the GM marker `problems` found on line `line_index`. A stray closer also hides the
/// text read since `section_start`, and the next section starts after it.
fn report_marker_problems(
    path: &str,
    line_index: usize,
    problems: &[GmMarkerProblem],
    body: &mut Body,
    link_lines: &mut Vec<usize>,
    section_start: &mut usize,
    diagnostics: &mut Vec<Diagnostic>,
) {
    for problem in problems {
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
                    line_number((*section_start).min(line_index))
                );
                diagnostics.push(diagnostic(path, u32::try_from(line_index + 1).ok(), &message));
                hide_since(body, link_lines, *section_start, line_index);
                *section_start = line_index + 1;
            }
        }
    }
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

#[cfg(test)]
mod tests {
    use super::super::tests::check;

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
