//! Corpus: Markdown notes → [`Note`]s → labelled, session-sized [`Fragment`]s.
//!
//! Pure: text in, fragments and [`Diagnostic`]s out. Nothing here touches the disk, SQLite,
//! LanceDB or HTTP; the ingest (`crate::ingest`) reads the files and hands their text over.
//! Bad input is data, not an error: every problem becomes a `Diagnostic` naming the file,
//! and the rest of the note is kept.
//!
//! The stages, one file each, in the order a note goes through them:
//! - `windows`: the embedder's overlapping word windows over a fragment.
//! - `session`: session numbers from header lines and file names.
//! - `audit`: what is hidden and why, and the visible lines that hold a GM word (`oraculo secrets`).
//! - `secrets`: the GM words, and the campaign's secret notes a link must not name.
//! - `markdown`: front matter, GM secrets, wikilinks, embeds, placeholders and tags, line by line.
//! - `note`: [`parse_note`] decides a note's kind and visibility and cuts it into labelled
//!   [`Block`]s; [`parse_campaign`] reads every note, knowing which ones are secret.
//! - `split`: [`fragment_campaign`] makes labels unique and sizes blocks into [`Fragment`]s.
//!
//! Line numbers everywhere are 1-based and count the whole file, front matter included.
//! CRLF, CR and LF line endings are read alike: a note is normalised to LF on entry.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::text::fold;

pub mod audit;
mod markdown;
mod note;
mod secrets;
mod session;
mod split;
pub mod windows;

pub(crate) use markdown::is_fence;
pub use note::{parse_campaign, parse_note};
pub(crate) use secrets::phrase_words;
pub use secrets::{DEFAULT_SECRET_WORDS, SecretNotes, default_secret_words};
pub use session::{
    CAMPAIGN_SESSION_STRIDE, EPISODE_CODE_PATTERN, SessionPattern, detect_session_header, session_from_file_name,
    session_from_patterns,
};
pub use split::{content_hash, fragment_campaign, split_block};

/// A session is one fragment unless it exceeds this, about what a GM writes for one session:
/// most sessions stay whole, so what happened in one is retrieved together rather than in parts.
pub const SESSION_MAX_WORDS: usize = 1200;
/// Overlap when a single section must be windowed blindly: ~10% of `SESSION_MAX_WORDS`.
pub const OVERLAP_WORDS: usize = 120;

/// A numbered game session. Never a bare `u32` in signatures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionNumber(pub u32);

impl fmt::Display for SessionNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A stored fragment's row id in the index (`fragments.id`): what the retrieval paths rank,
/// fusion merges and the rerank names. Never a bare `i64` in signatures, so it cannot be
/// taken for an entity's id or a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FragmentId(pub i64);

impl fmt::Display for FragmentId {
    /// As its number is written: a width and an alignment pad it (the CLI's tables).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A note's citation tag (`Sesión 12`, `Ficha: Baika`, `Mundo: Vado`): unique per source within
/// the campaign, what the model cites in brackets and what a player reads under an answer. A
/// label the model wrote is text until it is matched against the labels it was shown.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Label(String);

impl Label {
    pub fn new(label: impl Into<String>) -> Label {
        Label(label.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Label {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Label {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Label {
    /// As a string is written: a width and an alignment pad it (the CLI's tables).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl From<String> for Label {
    fn from(label: String) -> Label {
        Label(label)
    }
}

impl From<&str> for Label {
    fn from(label: &str) -> Label {
        Label(label.to_string())
    }
}

impl From<Label> for String {
    fn from(label: Label) -> String {
        label.0
    }
}

impl PartialEq<str> for Label {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Label {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Label {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<Label> for str {
    fn eq(&self, other: &Label) -> bool {
        self == other.0
    }
}

impl PartialEq<Label> for &str {
    fn eq(&self, other: &Label) -> bool {
        *self == other.0
    }
}

impl PartialEq<Label> for String {
    fn eq(&self, other: &Label) -> bool {
        *self == other.0
    }
}

/// What a fragment's source is: a session's notes, a character sheet, or a world document.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NoteKind {
    Session,
    Sheet,
    World,
}

impl NoteKind {
    pub fn as_str(self) -> &'static str {
        match self {
            NoteKind::Session => "session",
            NoteKind::Sheet => "sheet",
            NoteKind::World => "world",
        }
    }

    pub fn parse(s: &str) -> Option<NoteKind> {
        match s {
            "session" => Some(NoteKind::Session),
            "sheet" => Some(NoteKind::Sheet),
            "world" => Some(NoteKind::World),
            _ => None,
        }
    }
}

/// Who may see a fragment. DM-secret text is `DmOnly` from the moment the corpus reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    Player,
    DmOnly,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Player => "player",
            Visibility::DmOnly => "dm_only",
        }
    }

    pub fn parse(s: &str) -> Option<Visibility> {
        match s {
            "player" => Some(Visibility::Player),
            "dm_only" => Some(Visibility::DmOnly),
            _ => None,
        }
    }
}

/// The language of the labels the model cites and the user sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LabelLanguage {
    /// `Sesión N`, `Ficha: <name>`, `Mundo: <name>`.
    #[default]
    Es,
    /// `Session N`, `Sheet: <name>`, `World: <name>`.
    En,
}

/// How the corpus reads a campaign. Built by `crate::config`; passed explicitly.
#[derive(Debug, Clone)]
pub struct CorpusConfig {
    pub label_language: LabelLanguage,
    /// Folder name (compared case- and accent-insensitively, any depth) → kind.
    /// Folders not listed give no hint.
    pub kind_folders: BTreeMap<String, NoteKind>,
    /// Path prefixes (relative to the campaign root, `/`-separated) whose notes are DM-only
    /// as a whole.
    pub secret_paths: Vec<String>,
    /// GM words, folded ([`DEFAULT_SECRET_WORDS`] plus `campaign.secret_words`): a callout
    /// type, comment opener, front matter mark or tag holding one as a word is secret.
    pub secret_words: Vec<String>,
    /// Session-like notes: patterns over the file name and first heading that give a note's
    /// session when its front matter and the `Sesión N` rules do not
    /// ([`SessionPattern::defaults`]: episode codes, plus `campaign.session_patterns`).
    pub session_patterns: Vec<SessionPattern>,
    /// The allow-list (`campaign.player_paths`): when not empty, only notes under one of these
    /// folders may reach players; everything else is GM-only.
    pub player_paths: Vec<String>,
}

/// One problem with one file. The ingest reports it and goes on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Diagnostic {
    /// Relative to the campaign root, `/`-separated.
    pub path: String,
    /// 1-based line in the file, when the problem has one.
    pub line: Option<u32>,
    pub message: String,
}

/// A wikilink seen in a note: `[[target|shown]]` or `[[target]]` (`shown` is `None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub target: String,
    pub shown: Option<String>,
    /// `![[...]]`: recorded, never expanded.
    pub embed: bool,
}

/// One Markdown file after front matter and structure are read.
#[derive(Debug, Clone)]
pub struct Note {
    /// Relative to the campaign root, `/`-separated.
    pub path: String,
    pub kind: NoteKind,
    /// Front matter `title`, else the file stem.
    pub title: String,
    pub aliases: Vec<String>,
    pub tags: Vec<String>,
    /// Front matter `type`/`tipo` as written (`pj`, `npc`, `dios`), when there is one.
    pub declared_type: Option<String>,
    /// From front matter `session:` or the file name; chronicles carry theirs per block.
    pub session: Option<SessionNumber>,
    pub links: Vec<Link>,
    /// The labelled blocks of this note before sizing: one per session in a chronicle,
    /// one for a session file, sheet or world document.
    pub blocks: Vec<Block>,
    /// `DmOnly` when the whole note is (it lies under a secret path, its front matter or a tag
    /// marks it, or its front matter cannot be read), even with no blocks: an empty or
    /// front-matter-only secret note still names a secret.
    pub visibility: Visibility,
    /// Why the whole note is GM-only, when it is.
    pub hidden_because: Option<HiddenBecause>,
}

/// A labelled run of a note's text, before it is cut to size.
#[derive(Debug, Clone)]
pub struct Block {
    pub kind: NoteKind,
    pub session: Option<SessionNumber>,
    /// The label before campaign-wide de-duplication (`Sesión 12`, `Ficha: Baika`).
    pub label: String,
    /// Name used to make a duplicated label distinguishable (usually the file stem).
    pub disambiguator: String,
    /// 1-based, inclusive.
    pub line_start: u32,
    pub line_end: u32,
    /// Markdown with wikilinks rendered as their shown text, secrets and comments removed; a
    /// link to a secret note shows no name of it.
    pub text: String,
    /// Secret passages of this block (`%%…%%`, callouts and comment blocks whose type or
    /// opener holds a GM word), each with its 1-based line span. Their text is not in `text`.
    pub secrets: Vec<SecretPassage>,
    /// The whole block is DM-only (the note is).
    pub visibility: Visibility,
}

#[derive(Debug, Clone)]
pub struct SecretPassage {
    pub line_start: u32,
    pub line_end: u32,
    pub text: String,
    /// What made it secret: what `oraculo secrets` shows the DM.
    pub because: HiddenBecause,
}

/// Why text is GM-only: the named thing (or marker) that holds a GM word, and that word.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HiddenBecause {
    /// 1-based line of the named thing; `None` for the note's path.
    pub line: Option<u32>,
    /// What kind of named thing: `folder`, `file name`, `heading`, `label`, `column`, `fence`,
    /// `html`, `field`, `front matter key`, `front matter value`, `presence mark`, `tag`,
    /// `callout`, `comment`, `gm block`, `allow-list`, `broken front matter`.
    pub thing: String,
    /// The named thing as written (`## Notas del DJ`, `gmOnly`).
    pub name: String,
    /// The GM word it holds, as written (`DJ`); empty when no word decided (a presence mark
    /// such as `publish: false`, a `%%` comment, the allow-list).
    pub word: String,
}

impl HiddenBecause {
    pub fn new(line: Option<u32>, thing: &str, name: &str, word: &str) -> HiddenBecause {
        HiddenBecause { line, thing: thing.to_string(), name: name.trim().to_string(), word: word.to_string() }
    }
}

/// The retrievable unit: one session, or one part of a session that exceeded the cap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fragment {
    /// Exact citation tag, unique per source within the campaign.
    pub label: Label,
    pub kind: NoteKind,
    /// Relative to the campaign root, `/`-separated.
    pub source_path: String,
    pub session: Option<SessionNumber>,
    /// 0-based index among the fragments that share this label.
    pub part: u32,
    /// Markdown headings enclosing the fragment's first line, outermost first.
    pub heading_path: Vec<String>,
    pub text: String,
    pub word_count: usize,
    /// 1-based, inclusive, in the source file.
    pub line_start: u32,
    pub line_end: u32,
    pub visibility: Visibility,
    /// sha256 (hex) of the visibility and the text: what decides re-embedding.
    pub content_hash: String,
}

/// The folder names the corpus recognises out of the box (English and Spanish).
/// `crate::config` starts from these and lets `config.toml` add or replace entries.
pub fn default_kind_folders() -> BTreeMap<String, NoteKind> {
    const SHEETS: &[&str] = &[
        "PCs",
        "PJs",
        "NPCs",
        "PNJs",
        "Personajes",
        "Fichas",
        "Characters",
        "Aliados",
        "Enemigos",
        "Muertos",
        "Deidades",
    ];
    const SESSIONS: &[&str] = &["Sesiones", "Sessions", "Session Notes", "Crónicas"];
    let sheets = SHEETS.iter().map(|name| (name.to_string(), NoteKind::Sheet));
    let sessions = SESSIONS.iter().map(|name| (name.to_string(), NoteKind::Session));
    sheets.chain(sessions).collect()
}

/// Folders of note templates (Obsidian's Templates plugin): placeholders, not campaign facts.
const TEMPLATE_FOLDERS: &[&str] = &["plantillas", "templates", "_templates"];

/// Whether a campaign-relative path names a note the corpus should read: a Markdown file
/// outside hidden folders (`.obsidian/`, `.trash/`, `.git/`) and template folders
/// (`Plantillas/`, `Templates/`).
/// `Villano.secret.md` → `Villano.secret`.
fn strip_note_extension(file_name: &str) -> &str {
    let lower = file_name.to_ascii_lowercase();
    if lower.ends_with(".md") {
        &file_name[..file_name.len() - 3]
    } else if lower.ends_with(".markdown") {
        &file_name[..file_name.len() - 9]
    } else {
        file_name
    }
}

pub fn is_campaign_note(path: &str) -> bool {
    let mut components = path.split('/').filter(|component| !component.is_empty());
    let Some(file_name) = components.next_back() else {
        return false;
    };
    let hidden_folder = components.any(|component| {
        (component.starts_with('.') && component != "..") || TEMPLATE_FOLDERS.contains(&fold(component).as_str())
    });
    let extension = file_name.rsplit_once('.').map(|(_, extension)| extension.to_ascii_lowercase());
    let is_markdown = matches!(extension.as_deref(), Some("md" | "markdown"));
    is_markdown && !hidden_folder && !file_name.starts_with('.')
}

impl CorpusConfig {
    /// The configuration the unit tests of the pure stages read notes with: Spanish labels,
    /// the default folders, words and patterns, and `Secretos/` secret as a whole.
    #[cfg(test)]
    pub(crate) fn for_tests() -> CorpusConfig {
        CorpusConfig {
            label_language: LabelLanguage::Es,
            kind_folders: default_kind_folders(),
            secret_paths: vec!["Secretos".to_string()],
            secret_words: default_secret_words(),
            player_paths: Vec::new(),
            session_patterns: SessionPattern::defaults(),
        }
    }

    /// Whether the note at `path` is GM-only by its path alone ([`Self::path_hidden_because`]).
    pub fn is_secret_path(&self, path: &str) -> bool {
        self.path_hidden_because(path).is_some()
    }

    /// Why the note at `path` is GM-only by its path alone, if it is:
    /// - a folder or the file name holds a GM word (`_Secretos/`, `99 - DM/`,
    ///   `Sesión 7 (prep GM).md`, `Villano.secret.md`), the one rule of `docs/secrets.md`;
    /// - it lies under one of `secret_paths` at any depth, as `ignore` and `kind_folders`
    ///   match: `Secretos` covers `PNJs/Secretos/villano.md`; `PNJs/Secretos` covers
    ///   `Campaña/PNJs/Secretos/x.md` (whole components, no case or accents);
    /// - the allow-list (`player_paths`) is set and no folder of it holds the note.
    pub fn path_hidden_because(&self, path: &str) -> Option<HiddenBecause> {
        let trimmed = path.trim_start_matches("./");
        let raw_components: Vec<&str> = trimmed.split('/').filter(|component| !component.is_empty()).collect();
        for (at, component) in raw_components.iter().enumerate() {
            let is_file = at + 1 == raw_components.len();
            let name = if is_file { strip_note_extension(component) } else { component };
            if let Some(word) = self.gm_word_in(name) {
                let thing = if is_file { "file name" } else { "folder" };
                return Some(HiddenBecause::new(None, thing, component, word));
            }
        }
        let folded = fold(trimmed);
        let components: Vec<&str> = folded.split('/').filter(|component| !component.is_empty()).collect();
        let under = |listed: &String| {
            let listed = fold(listed.trim_start_matches("./"));
            let listed: Vec<&str> =
                listed.split('/').map(str::trim).filter(|component| !component.is_empty()).collect();
            !listed.is_empty() && components.windows(listed.len()).any(|window| window == listed.as_slice())
        };
        if let Some(listed) = self.secret_paths.iter().find(|listed| under(listed)) {
            return Some(HiddenBecause::new(None, "secret path", listed, ""));
        }
        if !self.player_paths.is_empty() && !self.player_paths.iter().any(|listed| under(listed)) {
            return Some(HiddenBecause::new(None, "allow-list", "campaign.player_paths", ""));
        }
        None
    }

    /// The kind the deepest recognised folder of `path` gives, if any.
    pub fn kind_from_folders(&self, path: &str) -> Option<NoteKind> {
        let folders: Vec<&str> = path.split('/').collect();
        let folders = &folders[..folders.len().saturating_sub(1)];
        folders.iter().rev().find_map(|folder| {
            let folder = fold(folder.trim());
            self.kind_folders.iter().find(|(name, _)| fold(name) == folder).map(|(_, kind)| *kind)
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    /// A word that appears only inside the fixtures' GM secrets: it must never reach a
    /// player fragment.
    const SECRET_CANARY: &str = "Umbravela";

    fn crate_root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    #[test]
    fn a_label_or_a_fragment_id_in_a_table_column_is_padded_to_its_width() {
        let label = Label::new("Sesión 1");
        assert_eq!(format!("{label:12}|"), "Sesión 1    |", "padded by characters, not bytes");
        assert_eq!(format!("{label:>10}|"), "  Sesión 1|");
        assert_eq!(format!("{label}|"), "Sesión 1|");
        assert_eq!(format!("{:>4}|", FragmentId(12)), "  12|");
    }

    /// Every campaign note under `campaign_dir`: (`/`-separated relative path, text), sorted.
    /// Shared with the compendium's fixture tests.
    pub(crate) fn read_campaign(campaign_dir: &Path) -> Vec<(String, String)> {
        let mut pending = vec![campaign_dir.to_path_buf()];
        let mut notes = Vec::new();
        while let Some(dir) = pending.pop() {
            for entry in std::fs::read_dir(&dir).expect("fixture folders are readable") {
                let path = entry.expect("fixture entries are readable").path();
                let relative = path.strip_prefix(campaign_dir).expect("under the campaign");
                let relative: Vec<String> =
                    relative.components().map(|part| part.as_os_str().to_string_lossy().into_owned()).collect();
                let relative = relative.join("/");
                if path.is_dir() {
                    pending.push(path);
                } else if is_campaign_note(&relative) {
                    // `broken/binario.md` is not UTF-8 everywhere; the corpus reports it.
                    let text = String::from_utf8_lossy(&std::fs::read(&path).expect("fixture notes are readable"))
                        .into_owned();
                    notes.push((relative, text));
                }
            }
        }
        notes.sort();
        notes
    }

    /// Parses and fragments the campaign at `campaign` (relative to the crate root, with
    /// `Secretos` as secret path) and checks one row of counts from the fixtures README:
    /// notes, session blocks, sheet blocks, world blocks, fragments, DM-only fragments,
    /// diagnostics. Also checks spans and that no player fragment holds `SECRET_CANARY`.
    /// Returns the fragments for further checks.
    fn check(campaign: &str, expect: [usize; 7]) -> Vec<Fragment> {
        let config = CorpusConfig {
            label_language: LabelLanguage::Es,
            kind_folders: default_kind_folders(),
            secret_paths: vec!["Secretos".to_string()],
            secret_words: default_secret_words(),
            player_paths: Vec::new(),
            session_patterns: crate::corpus::SessionPattern::defaults(),
        };
        let sources = read_campaign(&crate_root().join(campaign));
        let sources_ref: Vec<(&str, &str)> =
            sources.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
        let (notes, mut diagnostics) = parse_campaign(&sources_ref, &config);
        let (fragments, fragment_diagnostics) = fragment_campaign(&notes, &config);
        diagnostics.extend(fragment_diagnostics);
        let blocks: Vec<&Block> = notes.iter().flat_map(|note| &note.blocks).collect();
        let n_blocks = |kind: NoteKind| blocks.iter().filter(|block| block.kind == kind).count();
        let n_dm_only = fragments.iter().filter(|fragment| fragment.visibility == Visibility::DmOnly).count();
        let actual = [
            notes.len(),
            n_blocks(NoteKind::Session),
            n_blocks(NoteKind::Sheet),
            n_blocks(NoteKind::World),
            fragments.len(),
            n_dm_only,
            diagnostics.len(),
        ];
        let labels: Vec<String> = fragments
            .iter()
            .map(|fragment| format!("{} #{} {}", fragment.label, fragment.part, fragment.visibility.as_str()))
            .collect();
        assert_eq!(actual, expect, "{campaign}: {labels:#?}\n{diagnostics:#?}");

        for fragment in &fragments {
            let n_lines =
                sources.iter().find(|(path, _)| *path == fragment.source_path).map(|(_, text)| text.lines().count());
            assert!(fragment.line_start <= fragment.line_end, "{}", fragment.label);
            assert!(fragment.line_end as usize <= n_lines.unwrap_or(0), "{}", fragment.label);
            if fragment.visibility == Visibility::Player {
                assert!(!fragment.text.contains(SECRET_CANARY), "{} leaks a secret", fragment.label);
            }
        }
        fragments
    }

    /// The count rows of `tests/fixtures/README.md`: `| path | n | n | n | n | n | n | n |`.
    fn readme_rows() -> Vec<(String, [usize; 7])> {
        let readme = std::fs::read_to_string(crate_root().join("tests/fixtures/README.md"))
            .expect("tests/fixtures/README.md exists");
        readme
            .lines()
            .filter_map(|line| {
                let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
                let counts: Vec<usize> = cells.get(1..)?.iter().map(|cell| cell.parse().ok()).collect::<Option<_>>()?;
                let counts: [usize; 7] = counts.try_into().ok()?;
                Some((cells[0].trim_matches('`').to_string(), counts))
            })
            .collect()
    }

    #[test]
    fn secret_paths_match_at_any_depth() {
        let config = CorpusConfig {
            label_language: LabelLanguage::Es,
            kind_folders: default_kind_folders(),
            secret_paths: vec!["Secretos".to_string(), "Mundo/Planes".to_string()],
            secret_words: default_secret_words(),
            player_paths: Vec::new(),
            session_patterns: crate::corpus::SessionPattern::defaults(),
        };
        let table = [
            ("Secretos/x.md", true),
            ("./secretos/x.md", true),
            ("PNJs/Secretos/villano.md", true),
            ("Campaña/PNJs/SECRÉTOS/Hondo/villano.md", true),
            ("Secretos", true),
            ("Campaña/Mundo/Planes/golpe.md", true),
            // The one rule: a folder or file name holding a GM word, however it is written.
            ("Secretos viejos/x.md", true),
            ("PNJs/NoSecretos/x.md", true),
            ("_Secretos/x.md", true),
            ("99 - DM/x.md", true),
            ("DM/x.md", true),
            ("Spoilers/x.md", true),
            ("Sesiones/Sesión 7 (prep GM).md", true),
            ("PNJs/Villano.secret.md", true),
            ("Mundo/x.md", false),
            ("Planes/x.md", false),
            ("Secretaria/x.md", false),
            ("Admin/dmg.md", false),
            ("PNJs/El gmnotes.md", false),
        ];
        for (path, secret) in table {
            assert_eq!(config.is_secret_path(path), secret, "{path}");
        }
        // The allow-list: only its folders reach players.
        let cautious = CorpusConfig { player_paths: vec!["Sesiones".to_string(), "Mundo".to_string()], ..config };
        for (path, secret) in
            [("Sesiones/1.md", false), ("Mundo/Lugares/x.md", false), ("PNJs/x.md", true), ("x.md", true)]
        {
            assert_eq!(cautious.is_secret_path(path), secret, "allow-list: {path}");
        }
        let because = cautious.path_hidden_because("PNJs/x.md").unwrap();
        assert_eq!(because.thing, "allow-list");
        let because = cautious.path_hidden_because("Mundo/99 - DM/x.md").unwrap();
        assert_eq!((because.thing.as_str(), because.name.as_str(), because.word.as_str()), ("folder", "99 - DM", "DM"));
    }

    #[test]
    fn fixture_campaigns_match_their_readme() {
        let rows = readme_rows();
        let campaigns: Vec<&str> = rows.iter().map(|(campaign, _)| campaign.as_str()).collect();
        assert_eq!(
            campaigns,
            [
                "tests/fixtures/cronica",
                "tests/fixtures/por_sesion",
                "tests/fixtures/boveda",
                "tests/fixtures/broken",
                "eval/campaign"
            ]
        );
        for (campaign, expect) in rows {
            let fragments = check(&campaign, expect);
            if campaign == "tests/fixtures/boveda" {
                // What the retrieval tests rely on (see the README).
                let player_sessions = |word: &str| -> Vec<u32> {
                    let mut sessions: Vec<u32> = fragments
                        .iter()
                        .filter(|fragment| fragment.visibility == Visibility::Player && fragment.text.contains(word))
                        .filter_map(|fragment| fragment.session.map(|session| session.0))
                        .collect();
                    sessions.sort();
                    sessions.dedup();
                    sessions
                };
                assert_eq!(player_sessions("Baika").len(), 6);
                assert_eq!(player_sessions("cayó en combate"), [5]);
                assert!(player_sessions("murió").is_empty());
            }
            if campaign == "eval/campaign" {
                // The sample campaign: every session 1–40 found, whatever its header or file
                // name, and no cross-reference ("como en la sesión 4") made a phantom one.
                let mut sessions: Vec<u32> =
                    fragments.iter().filter_map(|fragment| fragment.session.map(|session| session.0)).collect();
                sessions.dedup();
                sessions.sort();
                sessions.dedup();
                assert_eq!(sessions, (1..=40).collect::<Vec<u32>>());
                // Long sessions are split, never beyond the cap.
                assert!(fragments.iter().all(|fragment| fragment.word_count <= SESSION_MAX_WORDS));
                for long in [9, 18, 30, 39] {
                    let parts = fragments.iter().filter(|f| f.session.map(|s| s.0) == Some(long)).count();
                    assert!(parts >= 2, "session {long} is over the cap and must be split ({parts} part)");
                }
            }
        }
    }
}
