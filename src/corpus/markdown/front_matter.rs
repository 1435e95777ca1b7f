//! The YAML front matter at the top of a note: its title, aliases, tags, sessions, type,
//! and the marks that make the whole note GM-only.

use serde_yaml_ng::Value;

use super::diagnostic;
use crate::corpus::secrets::phrase_words;
use crate::corpus::{CorpusConfig, Diagnostic, HiddenBecause, NoteKind, SessionNumber};
use crate::text::fold;

/// `visibility:` values that leave a note to the players; a GM word marks it GM-only, and
/// anything else is read as GM-only too, with a diagnostic (a value not understood fails closed).
const PUBLIC_VISIBILITIES: &[&str] =
    &["public", "publico", "publica", "player", "players", "jugador", "jugadores", "todos", "all", "everyone", "true"];

/// Values that say yes (YAML's and Spanish's) and no.
const YES_VALUES: &[&str] = &["true", "yes", "y", "si", "on", "1", "only", "solo"];
const NO_VALUES: &[&str] = &["false", "no", "n", "off", "0"];

/// How a presence mark's value decides whether a note is for the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Presence {
    /// `publish: false` hides; `true` shows.
    HiddenWhenNo,
    /// `draft: true` hides; `false` shows.
    HiddenWhenYes,
    /// `visibility: gm` hides (a GM word, or `false`); public words show.
    Audience,
}

/// The presence marks, one table (keys compared folded, without `-`, `_` or spaces, so
/// `dg-publish` is `dgpublish`): keys that say whether a note is published, visible or a
/// draft, from Obsidian Publish, Digital Garden, Quartz, Hugo and the DM's own habit. A
/// publish-like key hides only on a no (`published: 2022-02-19` is a date it was published);
/// a draft-like key hides on anything but a no or an empty field; an audience the reader does
/// not understand hides the note, with a diagnostic (fails closed).
const PRESENCE_MARKS: &[(&str, Presence)] = &[
    ("visible", Presence::HiddenWhenNo),
    ("publish", Presence::HiddenWhenNo),
    ("published", Presence::HiddenWhenNo),
    ("publicar", Presence::HiddenWhenNo),
    ("publicado", Presence::HiddenWhenNo),
    ("publicada", Presence::HiddenWhenNo),
    ("dgpublish", Presence::HiddenWhenNo),
    ("public", Presence::HiddenWhenNo),
    ("publico", Presence::HiddenWhenNo),
    ("publica", Presence::HiddenWhenNo),
    ("share", Presence::HiddenWhenNo),
    ("shared", Presence::HiddenWhenNo),
    ("compartir", Presence::HiddenWhenNo),
    ("draft", Presence::HiddenWhenYes),
    ("borrador", Presence::HiddenWhenYes),
    ("visibility", Presence::Audience),
    ("visibilidad", Presence::Audience),
    ("audience", Presence::Audience),
    ("audiencia", Presence::Audience),
];

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
    /// Why, when it is.
    pub hidden_because: Option<HiddenBecause>,
}

impl FrontMatter {
    fn hide(&mut self, because: HiddenBecause) {
        self.gm_only = true;
        self.hidden_because.get_or_insert(because);
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
        front.hide(HiddenBecause::new(Some(1), "broken front matter", "---", ""));
        return front;
    };
    let yaml = lines[1..closing].join("\n");
    match serde_yaml_ng::from_str::<Value>(&yaml) {
        Ok(Value::Null) => front.body_start = closing + 1,
        Ok(Value::Mapping(mapping)) => {
            front.body_start = closing + 1;
            for (key, value) in &mapping {
                let Some(key) = key.as_str() else { continue };
                let key = key.trim();
                let line = lines[1..closing]
                    .iter()
                    .position(|line| line.trim_start().starts_with(key))
                    .and_then(|at| u32::try_from(at + 2).ok());
                read_front_matter_field(path, key, value, &mut front, diagnostics);
                read_front_matter_mark(path, (line, key), value, &mut front, config, diagnostics);
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
            front.hide(HiddenBecause::new(Some(2), "broken front matter", "not key: value pairs", ""));
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
            front.hide(HiddenBecause::new(line, "broken front matter", reason, ""));
        }
    }
    front
}

fn read_front_matter_field(
    path: &str,
    key: &str,
    value: &Value,
    front: &mut FrontMatter,
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
            // Obsidian's Properties editor writes a list: `type:\n  - npc`.
            front.declared_type = text_list(value).into_iter().next();
            front.kind = front.declared_type.as_deref().map(kind_from_type);
        }
        _ => {}
    }
}

/// The one rule over a front matter field: a presence mark is read by its value
/// ([`PRESENCE_MARKS`]); a key holding a GM word (`secret`, `gmOnly`, `dm_notes`) hides the
/// note unless its value says no (`gmOnly: false`, as templates write it) or it is an empty
/// template field with more words than the GM word (`dm_notes:`); any value, scalar or in a
/// list or mapping, holding a GM word (`type: [npc, secreto]`, `cssclasses: gm-only`) hides it.
fn read_front_matter_mark(
    path: &str,
    (line, key): (Option<u32>, &str),
    value: &Value,
    front: &mut FrontMatter,
    config: &CorpusConfig,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let compact: String = fold(key).chars().filter(|c| c.is_alphanumeric()).collect();
    if let Some(&(_, presence)) = PRESENCE_MARKS.iter().find(|(mark, _)| *mark == compact) {
        let answer = yes_or_no(value);
        let text = scalar_text(value).unwrap_or_default();
        let empty = text.trim().is_empty();
        let hides = match (presence, answer) {
            // `published: 2022-02-19` says when, so that it was: only a no hides.
            (Presence::HiddenWhenNo, answer) => answer == Some(false),
            // `draft: true`, `draft: wip`; an empty template field or a no does not.
            (Presence::HiddenWhenYes, answer) => answer != Some(false) && !empty,
            (Presence::Audience, _) if config.names_gm(&text) => true,
            (Presence::Audience, Some(false)) => true,
            (Presence::Audience, _) if PUBLIC_VISIBILITIES.contains(&fold(text.trim()).as_str()) => false,
            _ => {
                // The value is not understood: it might be the secret itself.
                diagnostics.push(diagnostic(
                    path,
                    line,
                    &format!(
                        "front matter `{key}` is a presence mark whose value is neither yes, no, public nor a GM word: the note is kept GM-only"
                    ),
                ));
                true
            }
        };
        if hides {
            front.hide(HiddenBecause::new(line, "presence mark", &format!("{key}: {text}"), ""));
        }
        return;
    }
    if let Some(word) = config.gm_word_in(key) {
        let hides = match value {
            Value::Null => phrase_words(key).count() == 1,
            Value::String(text) if text.trim().is_empty() => phrase_words(key).count() == 1,
            Value::Sequence(items) if items.is_empty() => phrase_words(key).count() == 1,
            other => yes_or_no(other).unwrap_or(true),
        };
        if hides {
            front.hide(HiddenBecause::new(line, "front matter key", key, word));
        }
        return;
    }
    let mut texts = Vec::new();
    strings_in(value, &mut texts);
    for text in texts {
        if let Some(word) = config.gm_word_in(&text) {
            front.hide(HiddenBecause::new(line, "front matter value", &format!("{key}: {text}"), word));
            return;
        }
    }
}

/// Every string in a value, through lists and mappings (keys of nested mappings too).
fn strings_in(value: &Value, texts: &mut Vec<String>) {
    match value {
        Value::String(text) => texts.push(text.clone()),
        Value::Sequence(items) => items.iter().for_each(|item| strings_in(item, texts)),
        Value::Mapping(mapping) => {
            for (key, value) in mapping {
                strings_in(key, texts);
                strings_in(value, texts);
            }
        }
        Value::Tagged(tagged) => strings_in(&tagged.value, texts),
        _ => {}
    }
}

/// `true`/`yes`/`sí`/`1` → yes, `false`/`no`/`0` → no, anything else → `None`.
fn yes_or_no(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::Number(number) => match number.as_u64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        Value::String(text) => {
            let text = fold(text.trim());
            if YES_VALUES.contains(&text.as_str()) {
                Some(true)
            } else if NO_VALUES.contains(&text.as_str()) {
                Some(false)
            } else {
                None
            }
        }
        _ => None,
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

#[cfg(test)]
mod tests {
    use super::super::tests::{check, config};
    use super::*;

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
secret 3-5: notas_dj: [el capitán⏎---⏎Cuerpo.
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
            // The one rule: a GM-word key with content, camelCase, a presence mark, a list value.
            "notas_dj: el capitán es el traidor",
            "gmOnly: true",
            "draft: true",
            "dg-publish: false",
            "visible: no",
            "publicado: false",
            "cssclasses: [gm-only]",
            "estado: [borrador, spoiler]",
            "draft: wip",
        ];
        for mark in marked {
            let kind = if mark.starts_with("t") { "kind: world\n" } else { "" };
            let lines: Vec<&str> = ["---", mark, "---"].to_vec();
            let parsed = read_front_matter("n.md", &lines, &config(), &mut Vec::new());
            assert!(parsed.hidden_because.is_some(), "{mark}: no reason given");
            check(&format!("---\n{mark}\n---\nCuerpo."), &format!("gm only\n{kind}4| Cuerpo."));
        }
        let unmarked = [
            "secret: false",
            "gm: no",
            "gmOnly: false",
            "dm_notes:",
            "draft: false",
            "draft:",
            "dg-publish: true",
            "published: 2022-02-19",
            "publish:",
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
diagnostic 2: front matter `visibility` is a presence mark whose value is neither yes, no, public nor a GM word: the note is kept GM-only",
        );
    }
}
