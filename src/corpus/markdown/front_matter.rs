//! The YAML front matter at the top of a note: its title, aliases, tags, sessions, type,
//! and the marks that make the whole note GM-only.

use serde_yaml_ng::Value;

use super::diagnostic;
use crate::corpus::secrets::phrase_words;
use crate::corpus::text::fold;
use crate::corpus::{CorpusConfig, Diagnostic, NoteKind, SessionNumber};

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
}
