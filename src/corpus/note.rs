//! One note: decide its kind, find its sessions, and cut it into labelled [`Block`]s.
//!
//! Kind, first rule that applies: front matter `type`; a `#NPC`/`#PC`/`#PNJ`/`#PJ` front matter
//! tag; a recognised folder; a session number in the front matter or file name; such a tag
//! inline among the first lines; session headers inside the file; otherwise a world document.
//! Inline tags come late on purpose: session notes tag the NPCs they meet. A tag after the
//! first session header never counts.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;

use super::markdown::{self, Body, FrontMatter, TextMarkers, diagnostic};
use super::secrets::SecretNotes;
use super::session::{session_from_file_name, session_from_patterns};
use super::{
    Block, CorpusConfig, Diagnostic, HiddenBecause, LabelLanguage, Note, NoteKind, SecretPassage, SessionNumber,
    Visibility,
};
use crate::text::{file_stem, fold, normalize_line_endings};

/// Inline tags decide a note's kind only among its first lines: a sheet starts with its
/// `#NPC`, while a session that tags an NPC halfway through is still a session.
const LEADING_TAG_LINES: usize = 5;

/// Reads one Markdown note. `path` is relative to the campaign root and `/`-separated;
/// `secret_notes` are the campaign's GM-only notes, whose names a link in this note's player
/// text must not show ([`parse_campaign`] knows them all; `SecretNotes::default()` knows only
/// the secret paths).
///
/// Never fails: problems (broken front matter, unclosed secrets, an empty file…) come back
/// as diagnostics, and whatever text could be read is kept.
pub fn parse_note(
    path: &str,
    text: &str,
    config: &CorpusConfig,
    secret_notes: &SecretNotes,
) -> (Note, Vec<Diagnostic>) {
    let read = read_note(path, text, config, secret_notes, config.path_hidden_because(path));
    (read.note, read.diagnostics)
}

/// Reads every note of a campaign, `(path, text)` each: which notes are GM-only is known only
/// once all are read (a front matter mark makes a note secret wherever it lies), so a player
/// note whose links name one is read again knowing it, and shows none of its name.
/// The notes come back in the order given.
pub fn parse_campaign(sources: &[(&str, &str)], config: &CorpusConfig) -> (Vec<Note>, Vec<Diagnostic>) {
    // First what the paths alone say: a link by name to a note of a secret folder is right
    // from the first reading; only notes linking to notes secret by their content are read twice.
    let path_secret: Vec<Option<HiddenBecause>> =
        sources.iter().map(|(path, _)| config.path_hidden_because(path)).collect();
    let by_path =
        SecretNotes::new(sources.iter().zip(&path_secret).map(|((path, _), secret)| {
            (*path, if secret.is_some() { Visibility::DmOnly } else { Visibility::Player })
        }));
    let mut read: Vec<ReadNote> = sources
        .iter()
        .zip(&path_secret)
        .map(|((path, text), secret)| read_note(path, text, config, &by_path, secret.clone()))
        .collect();
    let mut secret_notes = by_path.clone();
    for (read, secret) in read.iter().zip(&path_secret) {
        if read.note.visibility == Visibility::DmOnly && secret.is_none() {
            secret_notes.mark_secret(&read.note.path);
        }
    }
    for ((&(path, text), read), secret) in sources.iter().zip(&mut read).zip(&path_secret) {
        let names_a_secret = read.note.visibility == Visibility::Player
            && read.link_targets.iter().any(|target| {
                secret_notes.is_secret_target(target, path, config) && !by_path.is_secret_target(target, path, config)
            });
        if names_a_secret {
            *read = read_note(path, text, config, &secret_notes, secret.clone());
        }
    }
    let mut diagnostics = Vec::new();
    let notes = read
        .into_iter()
        .map(|read| {
            diagnostics.extend(read.diagnostics);
            read.note
        })
        .collect();
    (notes, diagnostics)
}

/// One note read, with the link targets its rendering depended on.
struct ReadNote {
    note: Note,
    diagnostics: Vec<Diagnostic>,
    /// Targets of its visible wikilinks and Markdown links.
    link_targets: Vec<String>,
}

/// Reads the note at `path`; `path_secret`: why its path alone makes it GM-only, if it does.
fn read_note(
    path: &str,
    text: &str,
    config: &CorpusConfig,
    secret_notes: &SecretNotes,
    path_secret: Option<HiddenBecause>,
) -> ReadNote {
    let mut diagnostics = Vec::new();
    let stem = file_stem(path);
    let text = normalize_line_endings(text);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let mut note = Note {
        path: path.to_string(),
        kind: NoteKind::World,
        title: stem.to_string(),
        aliases: Vec::new(),
        tags: Vec::new(),
        declared_type: None,
        session: None,
        links: Vec::new(),
        blocks: Vec::new(),
        visibility: if path_secret.is_some() { Visibility::DmOnly } else { Visibility::Player },
        hidden_because: path_secret,
    };
    if text.contains('\0') {
        diagnostics.push(diagnostic(path, None, "binary file (contains NUL bytes); skipped"));
        return ReadNote { note, diagnostics, link_targets: Vec::new() };
    }

    let raw_lines: Vec<&str> = text.lines().collect();
    let mut front = markdown::read_front_matter(path, &raw_lines, config, &mut diagnostics);
    let body = markdown::read_covered_body(
        path,
        &raw_lines,
        &front,
        (config, secret_notes),
        TextMarkers::in_text(text),
        &mut diagnostics,
    );
    let mark = note_level_mark(&mut front, &body, config);
    if front.gm_only || mark.is_some() {
        note.visibility = Visibility::DmOnly;
        if note.hidden_because.is_none() {
            note.hidden_because = mark;
        }
    }
    let visibility = note.visibility;
    let link_targets: Vec<String> = body
        .links
        .iter()
        .filter(|link| !link.embed)
        .map(|link| link.target.clone())
        .chain(body.markdown_targets.iter().cloned())
        .collect();
    if let Some(title) = front.title.take() {
        note.title = title;
    }
    note.aliases = std::mem::take(&mut front.aliases);
    note.tags = merge_tags(&front.tags, &body.tags);
    note.declared_type = front.declared_type.clone();
    note.session = note_session(&front, &body, config, path);
    let sessions = if front.session.is_none() { front.sessions.clone() } else { Vec::new() };

    let kind_hint = front
        .kind
        .or_else(|| sheet_tag(front.tags.iter()))
        .or_else(|| config.kind_from_folders(path))
        .or_else(|| note.session.map(|_| NoteKind::Session))
        .or_else(|| sheet_tag(leading_tags(&body, front.body_start)));
    let is_empty = body.visible.iter().all(|line| line.trim().is_empty()) && body.secrets.is_empty();
    if is_empty {
        diagnostics.push(diagnostic(path, None, "empty note"));
        note.kind = kind_hint.unwrap_or(NoteKind::World);
        note.links = body.links;
        return ReadNote { note, diagnostics, link_targets };
    }

    let reader = BlockReader { body: &body, config, visibility, title: &note.title, stem, sessions: &sessions };
    let whole_note = front.body_start..=raw_lines.len() - 1;
    let (kind, blocks) = cut_blocks(&reader, kind_hint, note.session, whole_note, path, &mut diagnostics);
    note.kind = kind;
    note.blocks = blocks;
    note.links = body.links;
    ReadNote { note, diagnostics, link_targets }
}

/// Why the whole note is GM-only, if a note-level mark says so: its front matter (taken from
/// `front`), or a tag holding a GM word (`#secreto`, `tags: [gm]`).
fn note_level_mark(front: &mut FrontMatter, body: &Body, config: &CorpusConfig) -> Option<HiddenBecause> {
    let tagged = front.tags.iter().map(|tag| (None, tag)).chain(body.tags.iter().map(|(at, tag)| (Some(*at), tag)));
    let gm_tag = tagged.into_iter().find_map(|(at, tag)| {
        let word = config.gm_word_in(tag)?;
        let line = at.map(|at: usize| u32::try_from(at + 1).unwrap_or(u32::MAX));
        Some(HiddenBecause::new(line, "tag", &format!("#{tag}"), word))
    });
    front.hidden_because.take().or(gm_tag)
}

/// The session of a session-like note: `session:`, or `sessions: [81, 82]` in the front matter
/// (the first one orders and slots the note), else the configured patterns over the file name
/// and first heading.
fn note_session(front: &FrontMatter, body: &Body, config: &CorpusConfig, path: &str) -> Option<SessionNumber> {
    let first_heading = body.visible[front.body_start.min(body.visible.len())..]
        .iter()
        .find(|line| line.trim_start().starts_with('#'))
        .map(String::as_str);
    front
        .session
        .or_else(|| front.sessions.first().copied())
        .or_else(|| session_from_file_name(path))
        .or_else(|| session_from_patterns(&config.session_patterns, path, first_heading))
}

/// The kind and blocks of a note that is not empty: one named block for a sheet or a world
/// document, else one block per session the note holds.
fn cut_blocks(
    reader: &BlockReader<'_>,
    kind_hint: Option<NoteKind>,
    note_session: Option<SessionNumber>,
    whole_note: RangeInclusive<usize>,
    path: &str,
    diagnostics: &mut Vec<Diagnostic>,
) -> (NoteKind, Vec<Block>) {
    match kind_hint {
        Some(kind @ (NoteKind::Sheet | NoteKind::World)) => (kind, vec![reader.named_block(kind, whole_note)]),
        Some(NoteKind::Session) | None => {
            let headers = &reader.body.session_headers;
            let named: BTreeSet<SessionNumber> = headers.iter().map(|&(_, session)| session).collect();
            match (note_session, named.first().copied()) {
                _ if named.len() > 1 => (NoteKind::Session, reader.chronicle_blocks(headers, whole_note)),
                (Some(session), Some(header_session)) if header_session != session => {
                    let header_line = headers.first().map(|&(line_index, _)| line_number(line_index));
                    let message = format!(
                        "a header names session {header_session} but the file says session {session}; \
                         kept as session {session}"
                    );
                    diagnostics.push(diagnostic(path, header_line, &message));
                    (NoteKind::Session, vec![reader.session_block(session, reader.stem.to_string(), whole_note)])
                }
                (Some(session), _) | (None, Some(session)) => {
                    (NoteKind::Session, vec![reader.session_block(session, reader.stem.to_string(), whole_note)])
                }
                (None, None) => {
                    if kind_hint == Some(NoteKind::Session) {
                        diagnostics.push(diagnostic(
                            path,
                            None,
                            "looks like session notes but no session number was found in the front \
                             matter, the file name or a header; kept as a world document",
                        ));
                    }
                    (NoteKind::World, vec![reader.named_block(NoteKind::World, whole_note)])
                }
            }
        }
    }
}

/// `Sesión 12` / `Session 12`.
pub(crate) fn session_label(language: LabelLanguage, session: SessionNumber) -> String {
    match language {
        LabelLanguage::Es => format!("Sesión {session}"),
        LabelLanguage::En => format!("Session {session}"),
    }
}

/// `Sesiones 81 y 82` / `Sessions 81 and 82`, `Sesiones 3, 4 y 5`: a note that belongs to
/// several sessions (front matter `sessions:`).
pub(crate) fn sessions_label(language: LabelLanguage, sessions: &[SessionNumber]) -> String {
    let numbers: Vec<String> = sessions.iter().map(ToString::to_string).collect();
    let (word, and) = match language {
        LabelLanguage::Es => ("Sesiones", "y"),
        LabelLanguage::En => ("Sessions", "and"),
    };
    match numbers.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{word} {} {and} {last}", rest.join(", ")),
        _ => format!("{word} {}", numbers.join("")),
    }
}

/// `Ficha: Baika` / `Mundo: Puerto Galerna` (and `Sheet:` / `World:` in English).
pub(crate) fn named_label(language: LabelLanguage, kind: NoteKind, name: &str) -> String {
    let prefix = match (language, kind) {
        (LabelLanguage::Es, NoteKind::Sheet) => "Ficha",
        (LabelLanguage::Es, _) => "Mundo",
        (LabelLanguage::En, NoteKind::Sheet) => "Sheet",
        (LabelLanguage::En, _) => "World",
    };
    format!("{prefix}: {name}")
}

/// Everything a block of this note shares.
struct BlockReader<'a> {
    body: &'a Body,
    config: &'a CorpusConfig,
    visibility: Visibility,
    title: &'a str,
    stem: &'a str,
    /// Front matter `sessions:` when it names more than one: the whole note's label names them all.
    sessions: &'a [SessionNumber],
}

impl BlockReader<'_> {
    /// The blocks of a chronicle: one per header, plus a world block for any text before
    /// the first header.
    fn chronicle_blocks(&self, headers: &[(usize, SessionNumber)], whole_note: RangeInclusive<usize>) -> Vec<Block> {
        let mut blocks = Vec::new();
        let first_header = headers[0].0;
        if first_header > *whole_note.start() {
            let preamble = *whole_note.start()..=first_header - 1;
            let has_text = self.body.visible[preamble.clone()].iter().any(|line| !line.trim().is_empty());
            let has_secret = self.secrets_in(&preamble).next().is_some();
            if has_text || has_secret {
                blocks.push(self.named_block(NoteKind::World, preamble));
            }
        }
        let mut n_headers: BTreeMap<SessionNumber, usize> = BTreeMap::new();
        for &(_, session) in headers {
            *n_headers.entry(session).or_default() += 1;
        }
        for (header_idx, &(line_index, session)) in headers.iter().enumerate() {
            let end = headers.get(header_idx + 1).map_or(*whole_note.end(), |&(next, _)| next - 1);
            let disambiguator = if n_headers[&session] > 1 {
                format!("{}, l. {}", self.stem, line_index + 1)
            } else {
                self.stem.to_string()
            };
            blocks.push(self.session_block(session, disambiguator, line_index..=end));
        }
        blocks
    }

    fn session_block(&self, session: SessionNumber, disambiguator: String, lines: RangeInclusive<usize>) -> Block {
        let label = if self.sessions.len() > 1 && self.sessions.first() == Some(&session) {
            sessions_label(self.config.label_language, self.sessions)
        } else {
            session_label(self.config.label_language, session)
        };
        self.block(NoteKind::Session, Some(session), label, disambiguator, lines)
    }

    fn named_block(&self, kind: NoteKind, lines: RangeInclusive<usize>) -> Block {
        let label = named_label(self.config.label_language, kind, self.title);
        self.block(kind, None, label, self.stem.to_string(), lines)
    }

    fn block(
        &self,
        kind: NoteKind,
        session: Option<SessionNumber>,
        label: String,
        disambiguator: String,
        lines: RangeInclusive<usize>,
    ) -> Block {
        Block {
            kind,
            session,
            label,
            disambiguator,
            line_start: line_number(*lines.start()),
            line_end: line_number(*lines.end()),
            text: self.body.visible[lines.clone()].join("\n"),
            secrets: self.secrets_in(&lines).cloned().collect(),
            visibility: self.visibility,
        }
    }

    /// The secret passages that start inside `lines` (`body.secrets` is in file order).
    fn secrets_in(&self, lines: &RangeInclusive<usize>) -> impl Iterator<Item = &SecretPassage> {
        let (first, last) = (line_number(*lines.start()), line_number(*lines.end()));
        let start = self.body.secrets.partition_point(|secret| secret.line_start < first);
        self.body.secrets[start..].iter().take_while(move |secret| secret.line_start <= last)
    }
}

/// The inline tags on the first `LEADING_TAG_LINES` non-blank body lines, before any session
/// header: a chronicle that tags an NPC in its first session is still a chronicle.
fn leading_tags(body: &Body, body_start: usize) -> impl Iterator<Item = &String> {
    let last_leading_line = body
        .visible
        .iter()
        .enumerate()
        .skip(body_start)
        .filter(|(_, line)| !line.trim().is_empty())
        .take(LEADING_TAG_LINES)
        .last()
        .map_or(0, |(line_index, _)| line_index);
    let first_header = body.session_headers.first().map_or(usize::MAX, |&(line_index, _)| line_index);
    body.tags
        .iter()
        .filter(move |&&(line_index, _)| line_index <= last_leading_line && line_index < first_header)
        .map(|(_, tag)| tag)
}

fn sheet_tag<'a>(mut tags: impl Iterator<Item = &'a String>) -> Option<NoteKind> {
    tags.any(|tag| {
        let first_level = tag.split('/').next().unwrap_or(tag);
        matches!(fold(first_level).as_str(), "npc" | "pc" | "pnj" | "pj")
    })
    .then_some(NoteKind::Sheet)
}

/// Front matter tags, then inline tags, without repeats (compared folded).
fn merge_tags(front_tags: &[String], inline_tags: &[(usize, String)]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let all_tags = front_tags.iter().chain(inline_tags.iter().map(|(_, tag)| tag));
    all_tags.filter(|tag| seen.insert(fold(tag))).cloned().collect()
}

fn line_number(line_index: usize) -> u32 {
    u32::try_from(line_index + 1).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use super::super::default_kind_folders;
    use super::*;

    const ES: LabelLanguage = LabelLanguage::Es;
    const EN: LabelLanguage = LabelLanguage::En;

    fn config() -> CorpusConfig {
        CorpusConfig {
            label_language: ES,
            kind_folders: default_kind_folders(),
            secret_paths: vec!["Secretos".to_string()],
            secret_words: crate::corpus::default_secret_words(),
            player_paths: Vec::new(),
            session_patterns: crate::corpus::SessionPattern::defaults(),
        }
    }

    /// Parses `text` as the note at `path` (with `Secretos` as a secret path) and renders the
    /// note's kind, title, session, tags and each block with its span, text and secrets.
    fn check(label_language: LabelLanguage, path: &str, text: &str, expect: &str) {
        let config = CorpusConfig {
            label_language,
            kind_folders: default_kind_folders(),
            secret_paths: vec!["Secretos".to_string()],
            secret_words: crate::corpus::default_secret_words(),
            player_paths: Vec::new(),
            session_patterns: crate::corpus::SessionPattern::defaults(),
        };
        let (note, diagnostics) = parse_note(path, text, &config, &Default::default());
        let mut actual = String::new();
        let session = note.session.map_or("-".to_string(), |session| session.to_string());
        writeln!(actual, "{} {:?} session {session}", note.kind.as_str(), note.title).unwrap();
        if !note.tags.is_empty() {
            writeln!(actual, "tags: {}", note.tags.join(", ")).unwrap();
        }
        for block in &note.blocks {
            let visibility = if block.visibility == Visibility::DmOnly { " dm_only" } else { "" };
            writeln!(
                actual,
                "[{}] ({}) {}-{} {}{visibility}",
                block.label,
                block.disambiguator,
                block.line_start,
                block.line_end,
                block.kind.as_str()
            )
            .unwrap();
            assert_eq!(
                block.text.split('\n').count() as u32,
                block.line_end - block.line_start + 1,
                "block text keeps one line per source line"
            );
            let text: Vec<&str> = block.text.lines().map(str::trim).filter(|line| !line.is_empty()).collect();
            if !text.is_empty() {
                writeln!(actual, "  {}", text.join(" ⏎ ")).unwrap();
            }
            for secret in &block.secrets {
                writeln!(actual, "  secret {}-{}: {}", secret.line_start, secret.line_end, secret.text.trim()).unwrap();
            }
        }
        for diagnostic in &diagnostics {
            let line = diagnostic.line.map_or("-".to_string(), |line| line.to_string());
            writeln!(actual, "diagnostic {line}: {}", diagnostic.message).unwrap();
        }
        assert_eq!(actual.trim_end(), expect.trim(), "\n--- actual ---\n{actual}");
    }

    #[test]
    fn crlf_cr_and_lf_line_endings_read_alike() {
        let note = "---\ntitle: Sesión\n---\n# Sesión 4\nPúblico.\n> [!secret]\n> SECRETO.\n\n<!-- gm -->\nSECRETO dos.\n<!-- /gm -->\nFin.\n";
        let read = |text: &str| {
            let (note, diagnostics) = parse_note("Sesiones/Sesion 4.md", text, &config(), &SecretNotes::default());
            let blocks: Vec<String> = note
                .blocks
                .iter()
                .map(|block| {
                    let secrets: Vec<String> =
                        block.secrets.iter().map(|s| format!("{}-{}: {}", s.line_start, s.line_end, s.text)).collect();
                    format!("{}-{}: {}\n{}", block.line_start, block.line_end, block.text, secrets.join("\n"))
                })
                .collect();
            (note.title, blocks, diagnostics)
        };
        let lf = read(note);
        assert_eq!(lf.1[0].matches("SECRETO").count(), 2, "{lf:?}");
        assert!(lf.1[0].contains("6-7: \nSECRETO.") && lf.1[0].contains("9-11: \nSECRETO dos."), "{lf:?}");
        assert_eq!(read(&note.replace('\n', "\r\n")), lf);
        assert_eq!(read(&note.replace('\n', "\r")), lf);
    }

    #[test]
    fn a_gm_tag_makes_the_whole_note_gm_only() {
        for text in ["---\ntags: [npc, secreto]\n---\nTexto.", "#NPC #gm-only\nTexto.", "Texto.\nMás abajo, #DM."] {
            let (note, _) = parse_note("PNJs/Vaskrith.md", text, &config(), &SecretNotes::default());
            assert_eq!(note.visibility, Visibility::DmOnly, "{text}");
            assert!(note.blocks.iter().all(|block| block.visibility == Visibility::DmOnly), "{text}");
        }
        // A tag inside a secret passage marks only that passage.
        let (note, _) = parse_note("PNJs/Baika.md", "Teje.\n%% #secreto espía %%", &config(), &SecretNotes::default());
        assert_eq!(note.visibility, Visibility::Player);
    }

    #[test]
    fn a_campaign_read_knows_which_notes_are_secret_before_rendering_links() {
        let sources = [
            ("Sesiones/Sesion 1.md", "Hablamos con [[El capitán es el traidor]] y [[Baika]]; [x](Mundo/Plan.md)."),
            ("Mundo/El capitán es el traidor.md", "---\nsecret: true\n---\nLo es."),
            ("Mundo/Plan.md", "---\ntags: [dm]\n---\nEl plan."),
            ("PNJs/Baika.md", "Teje."),
        ];
        let (notes, _) = parse_campaign(&sources, &config());
        assert_eq!(notes.iter().map(|note| note.path.as_str()).collect::<Vec<_>>(), sources.map(|(path, _)| path));
        let visibilities: Vec<Visibility> = notes.iter().map(|note| note.visibility).collect();
        assert_eq!(visibilities, [Visibility::Player, Visibility::DmOnly, Visibility::DmOnly, Visibility::Player]);
        assert_eq!(notes[0].blocks[0].text, "Hablamos con  y Baika; x.");
        // Read alone, only the secret paths are known.
        let (alone, _) = parse_note(sources[0].0, sources[0].1, &config(), &SecretNotes::default());
        assert!(alone.blocks[0].text.contains("El capitán es el traidor"));
    }

    #[test]
    fn kinds() {
        check(
            ES,
            "Lugares/Puerto.md",
            "El puerto.",
            r#"
world "Puerto" session -
[Mundo: Puerto] (Puerto) 1-1 world
  El puerto."#,
        );
        check(
            ES,
            "PNJs/Baika.md",
            "---\ntitle: Baika la Tejedora\n---\nTeje.",
            r#"
sheet "Baika la Tejedora" session -
[Ficha: Baika la Tejedora] (Baika) 4-4 sheet
  Teje."#,
        );
        check(
            ES,
            "notas/baika.md",
            "#NPC #puerto\nTeje redes.",
            r#"
sheet "baika" session -
tags: NPC, puerto
[Ficha: baika] (baika) 1-2 sheet
  #NPC #puerto ⏎ Teje redes."#,
        );
        check(
            ES,
            "notas/x.md",
            "---\ntype: Personaje\n---\nAlguien.",
            r#"
sheet "x" session -
[Ficha: x] (x) 4-4 sheet
  Alguien."#,
        );
        check(
            ES,
            "Crónicas/Resumen.md",
            "---\ntype: lugar\n---\n## Sesión 3\nNada.",
            r#"
world "Resumen" session -
[Mundo: Resumen] (Resumen) 4-5 world
  ## Sesión 3 ⏎ Nada."#,
        );
        check(
            ES,
            "PERSONAJES/Muertos/Tomás.md",
            "Cayó.",
            r#"
sheet "Tomás" session -
[Ficha: Tomás] (Tomás) 1-1 sheet
  Cayó."#,
        );
        check(
            ES,
            "Sesiones/Sesion 8.md",
            "Llegamos. Vimos a Baika #NPC más tarde.\n\n\n\n\n\nFin #NPC",
            r#"
session "Sesion 8" session 8
tags: NPC
[Sesión 8] (Sesion 8) 1-7 session
  Llegamos. Vimos a Baika #NPC más tarde. ⏎ Fin #NPC"#,
        );
        check(
            ES,
            "cronica.md",
            "## Sesión 1\nConocimos a Baika #NPC.\n## Sesión 2\nOtra vez.",
            r#"
session "cronica" session -
tags: NPC
[Sesión 1] (cronica) 1-2 session
  ## Sesión 1 ⏎ Conocimos a Baika #NPC.
[Sesión 2] (cronica) 3-4 session
  ## Sesión 2 ⏎ Otra vez."#,
        );
        check(
            ES,
            "Secretos viejos/Plan.md",
            "Público.",
            r#"
world "Plan" session -
[Mundo: Plan] (Plan) 1-1 world dm_only
  Público."#,
        );
        check(
            ES,
            "Secretos/Plan.md",
            "El plan %%real%%.",
            r#"
world "Plan" session -
[Mundo: Plan] (Plan) 1-1 world dm_only
  El plan .
  secret 1-1: real"#,
        );
    }

    /// Session-like notes outside the session notes (recaps, fights, episode
    /// codes) carry their session, so their label, time order and summary slot are right.
    #[test]
    fn session_like_notes() {
        let mut session_patterns = crate::corpus::SessionPattern::defaults();
        session_patterns.push(crate::corpus::SessionPattern::new(r"(?i)^s(?P<number>\d{1,4})$", 0).unwrap());
        session_patterns.push(crate::corpus::SessionPattern::new(r"(?i)^fight_s(?P<number>\d+)", 0).unwrap());
        // (language, path, text, kind, session, labels)
        let cases: &[(LabelLanguage, &str, &str, NoteKind, Option<u32>, &[&str])] = &[
            (EN, "C1E001.md", "# C1E001 — Arrival\nThey arrive.", NoteKind::Session, Some(1), &["Session 1"]),
            (EN, "crd3/C2E003.md", "# C2E003 — The Chase\nThey run.", NoteKind::Session, Some(1003), &["Session 1003"]),
            (ES, "Episodios/Llegada.md", "# C1E007 — El trono\nLlegan.", NoteKind::Session, Some(7), &["Sesión 7"]),
            (ES, "Recaps/S12.md", "Resumen de la doce.", NoteKind::Session, Some(12), &["Sesión 12"]),
            (EN, "Session Combats/Fight_S81_82.md", "Round one.", NoteKind::Session, Some(81), &["Session 81"]),
            // Front matter wins over the file name; a list names every session.
            (
                EN,
                "Session Combats/Fight_S81_82.md",
                "---\nsessions: [81, 82]\n---\nRound one.",
                NoteKind::Session,
                Some(81),
                &["Sessions 81 and 82"],
            ),
            (
                ES,
                "Combates/Emboscada.md",
                "---\nsesiones: 82, 81, 83\n---\nAsalto.",
                NoteKind::Session,
                Some(81),
                &["Sesiones 81, 82 y 83"],
            ),
            (
                ES,
                "Combates/Emboscada.md",
                "---\nsessions: [5]\n---\nAsalto.",
                NoteKind::Session,
                Some(5),
                &["Sesión 5"],
            ),
            (
                ES,
                "Recaps/S12.md",
                "---\nsession: 13\nsessions: [81, 82]\n---\nx",
                NoteKind::Session,
                Some(13),
                &["Sesión 13"],
            ),
            // A folder's kind still decides; notes that name no session stay what they were.
            (ES, "PNJs/C1E001.md", "Un PNJ.", NoteKind::Sheet, Some(1), &["Ficha: C1E001"]),
            (ES, "Recaps/Sumario.md", "# Resumen general\nTodo.", NoteKind::World, None, &["Mundo: Sumario"]),
            (EN, "Lore/Cosmology.md", "# The Gods\nMany.", NoteKind::World, None, &["World: Cosmology"]),
        ];
        for &(label_language, path, text, kind, session, labels) in cases {
            let config = CorpusConfig {
                label_language,
                kind_folders: default_kind_folders(),
                secret_paths: Vec::new(),
                secret_words: crate::corpus::default_secret_words(),
                player_paths: Vec::new(),
                session_patterns: session_patterns.clone(),
            };
            let (note, _) = parse_note(path, text, &config, &Default::default());
            let got: Vec<&str> = note.blocks.iter().map(|block| block.label.as_str()).collect();
            assert_eq!(
                (note.kind, note.session.map(|s| s.0), got.as_slice()),
                (kind, session, labels),
                "{path}: {text:?}"
            );
        }
    }

    #[test]
    fn session_files() {
        check(
            ES,
            "Sesiones/2024-05-19 Sesión 4.md",
            "Texto de la cuarta.",
            r#"
session "2024-05-19 Sesión 4" session 4
[Sesión 4] (2024-05-19 Sesión 4) 1-1 session
  Texto de la cuarta."#,
        );
        check(
            ES,
            "Sesiones/El regreso.md",
            "---\nsession: 6\n---\n# Sesión 6 — El regreso\nVolvimos.",
            r#"
session "El regreso" session 6
[Sesión 6] (El regreso) 4-5 session
  # Sesión 6 — El regreso ⏎ Volvimos."#,
        );
        check(
            ES,
            "Sesiones/Sesion 3.md",
            "# Resumen [[Sesion 2|Sesión Anterior]]\nPasó algo.\n## Sesión 3\nHoy.",
            r#"
session "Sesion 3" session 3
[Sesión 3] (Sesion 3) 1-4 session
  # Resumen Sesión Anterior ⏎ Pasó algo. ⏎ ## Sesión 3 ⏎ Hoy."#,
        );
        check(
            ES,
            "Sesiones/Sesion 8.md",
            "## Sesión 7\nRecuerdo.",
            r#"
session "Sesion 8" session 8
[Sesión 8] (Sesion 8) 1-2 session
  ## Sesión 7 ⏎ Recuerdo.
diagnostic 1: a header names session 7 but the file says session 8; kept as session 8"#,
        );
        check(
            ES,
            "notas/suelta.md",
            "Intro.\n**Sesión 5**\nAlgo.",
            r#"
session "suelta" session -
[Sesión 5] (suelta) 1-3 session
  Intro. ⏎ **Sesión 5** ⏎ Algo."#,
        );
        check(
            ES,
            "Sesiones/Notas sueltas.md",
            "Sin número.",
            r#"
world "Notas sueltas" session -
[Mundo: Notas sueltas] (Notas sueltas) 1-1 world
  Sin número.
diagnostic -: looks like session notes but no session number was found in the front matter, the file name or a header; kept as a world document"#,
        );
    }

    #[test]
    fn chronicles() {
        check(
            ES,
            "Crónica.md",
            r#"---
title: Crónica de Galerna
---
# Crónica

Intro %%nota%%.
## Sesión 1 — El puerto
Uno, ya lo vimos en la sesión 2.
**Sesion 2**
Dos.
Sesión 3 - La cripta
Tres.
## Session 3
Tres bis."#,
            r#"
session "Crónica de Galerna" session -
[Mundo: Crónica de Galerna] (Crónica) 4-6 world
  # Crónica ⏎ Intro .
  secret 6-6: nota
[Sesión 1] (Crónica) 7-8 session
  ## Sesión 1 — El puerto ⏎ Uno, ya lo vimos en la sesión 2.
[Sesión 2] (Crónica) 9-10 session
  **Sesion 2** ⏎ Dos.
[Sesión 3] (Crónica, l. 11) 11-12 session
  Sesión 3 - La cripta ⏎ Tres.
[Sesión 3] (Crónica, l. 13) 13-14 session
  ## Session 3 ⏎ Tres bis."#,
        );
        check(
            ES,
            "Sesiones/Sesion 4.md",
            "## Sesión 4\nA.\n```\n## Sesión 5\n```\n## Sesión 5\nB.",
            r#"
session "Sesion 4" session 4
[Sesión 4] (Sesion 4) 1-5 session
  ## Sesión 4 ⏎ A. ⏎ ``` ⏎ ## Sesión 5 ⏎ ```
[Sesión 5] (Sesion 4) 6-7 session
  ## Sesión 5 ⏎ B."#,
        );
        check(
            ES,
            "cronica.md",
            "\n\n## Sesión 1\nA.\n## Sesión 2\nB.",
            r#"
session "cronica" session -
[Sesión 1] (cronica) 3-4 session
  ## Sesión 1 ⏎ A.
[Sesión 2] (cronica) 5-6 session
  ## Sesión 2 ⏎ B."#,
        );
    }

    #[test]
    fn empty_and_binary_notes() {
        check(
            ES,
            "vacia.md",
            "",
            r#"
world "vacia" session -
diagnostic -: empty note"#,
        );
        check(
            ES,
            "Sesiones/Sesion 2.md",
            "---\ntitle: Nada\n---\n\n  \n{{Historia}}\n![[mapa.png]]",
            r#"
session "Nada" session 2
diagnostic -: empty note"#,
        );
        check(
            ES,
            "raro.md",
            "abc\0def",
            r#"
world "raro" session -
diagnostic -: binary file (contains NUL bytes); skipped"#,
        );
        check(
            ES,
            "solo_secreto.md",
            "%% solo para el máster %%",
            r#"
world "solo_secreto" session -
[Mundo: solo_secreto] (solo_secreto) 1-1 world dm_only
  secret 1-1: solo para el máster"#,
        );
    }

    #[test]
    fn english_labels() {
        check(
            EN,
            "Session Notes/Session 45.md",
            "Text.",
            r#"
session "Session 45" session 45
[Session 45] (Session 45) 1-1 session
  Text."#,
        );
        check(
            EN,
            "PCs/Ayla.md",
            "Text.",
            r#"
sheet "Ayla" session -
[Sheet: Ayla] (Ayla) 1-1 sheet
  Text."#,
        );
        check(
            EN,
            "Places/Harbour.md",
            "Text.",
            r#"
world "Harbour" session -
[World: Harbour] (Harbour) 1-1 world
  Text."#,
        );
    }
}
