//! Links in a note's text: wikilinks, embeds, Markdown and reference links, and template
//! placeholders, rendered so that a link to a secret note shows none of its name.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::TextMarkers;
use crate::corpus::secrets::SecretNotes;
use crate::corpus::{CorpusConfig, Link};
use crate::text::fold;

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

/// How a note's links are rendered: a link to a secret note shows none of its name.
pub(crate) struct LinkReader<'a> {
    pub(super) config: &'a CorpusConfig,
    secret_notes: &'a SecretNotes,
    /// The note the links are in (relative targets are read from its folder).
    from: &'a str,
    /// Reference definitions (`[label]: Secretos/x.md`) whose destination is secret: folded
    /// label → destination.
    secret_references: HashMap<String, String>,
    /// Every reference definition's destination (what the note's rendering depended on).
    pub(super) definition_targets: Vec<String>,
    pub(super) markers: TextMarkers,
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
    pub(super) fn hides_definition(&self, line: &str) -> bool {
        !self.secret_references.is_empty()
            && line.contains("]:")
            && REFERENCE_DEFINITION
                .captures(line)
                .is_some_and(|captures| self.secret_references.contains_key(&fold(captures["label"].trim())))
    }
}

/// Renders wikilinks as their shown text and removes embeds and template placeholders.
/// When `links` is given, every wikilink and embed is recorded there. With a `reader`, a
/// link to a secret note (wikilink, Markdown or reference link) shows only the text the DM
/// gave it, never the note's name, and Markdown destinations are recorded in `targets`.
pub(super) fn render_obsidian(
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

#[cfg(test)]
mod tests {
    use super::super::tests::{check, check_in};
    use crate::corpus::secrets::SecretNotes;

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
}
