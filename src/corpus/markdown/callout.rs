//! Secret callouts (`> [!secret]`): which callout openers are secret, and which of the lines
//! after one still belong to it, as CommonMark reads quotes.

use std::sync::LazyLock;

use regex::Regex;

use super::{OpenSecret, is_fence};
use crate::corpus::CorpusConfig;

/// Any callout opener, `> [!type|metadata]- title`, at any quote depth (`> > [!type]` inside
/// another callout) and in list items (`- > [!type]`, `1. > [!type]`, `> - > [!type]`). It is
/// secret when a word of its type, its metadata (`[!quote|dm]`) or its title (`> [!INFO]- DM's
/// Note`) is a GM word ([`CorpusConfig::gm_word_in`]).
static CALLOUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?P<prefix>[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)*(?:>[ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)*)+)\[!(?P<type>[^\]|\n]*)(?:\|(?P<meta>[^\]\n]*))?\][-+]?[ \t]*(?P<title>.*)$",
    )
    .expect("the callout pattern is valid")
});

/// A line that ends a paragraph, so it cannot be a lazy continuation of a callout: an ATX
/// heading, a thematic break, or an HTML block (`<!--`).
static INTERRUPTS_PARAGRAPH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[ \t]{0,3}(?:#{1,6}(?:[ \t]|$)|(?:\*[ \t]*){3,}$|(?:-[ \t]*){3,}$|(?:_[ \t]*){3,}$|<!--)")
        .expect("the paragraph-interrupt pattern is valid")
});

/// A secret callout's opener line: how deep it is quoted and its title.
pub(super) struct SecretCallout<'l> {
    pub(super) quote_depth: usize,
    pub(super) title: &'l str,
    /// `[!type|meta]` as written, and the GM word in it.
    pub(super) name: &'l str,
    pub(super) word: &'l str,
}

/// `line` when it opens a callout whose type holds a GM word (`[!secret]`, `[!gm-only]`,
/// `[!notas-dj]`, `[!DM notes]`).
pub(super) fn secret_callout<'l>(line: &'l str, config: &CorpusConfig) -> Option<SecretCallout<'l>> {
    if !line.contains("[!") {
        return None;
    }
    let captures = CALLOUT.captures(line)?;
    // The type, its metadata and its title: a title is the callout's heading (`> [!INFO]- DM's Note`).
    let word = ["type", "meta", "title"]
        .iter()
        .find_map(|part| captures.name(part).and_then(|found| config.gm_word_in(found.as_str())))?;
    let prefix = captures.name("prefix")?;
    let title = captures.name("title");
    Some(SecretCallout {
        quote_depth: prefix.as_str().matches('>').count(),
        title: title.map_or("", |title| title.as_str().trim()),
        name: line[prefix.end()..].trim(),
        word,
    })
}

/// Whether `line` still belongs to the open secret `callout`, as CommonMark (and Obsidian)
/// read quotes: a line quoted at least as deep as the callout, or a lazy continuation, a
/// non-blank line right after a non-blank one that is not a heading, a thematic break or an
/// HTML block (`> > [!secret]` then `> more` or `more`: both stay in the secret). Lists
/// and other text continue it too: when in doubt, the text stays secret.
pub(super) fn continues_callout(callout: &OpenSecret, line: &str) -> bool {
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
pub(super) fn quote_depth(line: &str) -> (usize, &str) {
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

/// `> text` → `text` for `depth` 1; quotes nested deeper than `depth` keep their inner
/// markers; a lazy line (fewer markers) loses the ones it has.
pub(super) fn strip_quote_markers(line: &str, depth: usize) -> &str {
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

#[cfg(test)]
mod tests {
    use super::super::tests::check;

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
        ];
        for (note, expect) in table {
            check(note, expect);
        }
    }

    #[test]
    fn a_secret_callout_ends_where_its_quote_ends() {
        // (note, what stays visible, the secret passages); `SECRETO` marks GM text.
        let table: &[(&str, &str)] = &[
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
}
