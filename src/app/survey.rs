//! What a campaign folder holds, read as the ingest reads it: the notes an ingest would read
//! (`ingest::note_hashes`, the same walk), parsed and cut by the same corpus code
//! (`corpus::parse_campaign`, `corpus::fragment_campaign`), and nothing written anywhere.
//! `oraculo init` shows it to the DM and writes the config from it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;

use crate::config::CampaignConfig;
use crate::corpus::{self, Diagnostic, LabelLanguage, Note, NoteKind, Visibility};

/// What `oraculo init` detected in a campaign folder.
#[derive(Debug, Clone, Serialize)]
pub struct CampaignSurvey {
    /// The notes an ingest reads (Markdown, outside hidden and ignored folders).
    pub n_notes: usize,
    /// The language the notes are written in, which the labels follow.
    pub language: LabelLanguage,
    /// Why that language: the common words of each counted in the notes.
    pub language_words: LanguageWords,
    /// The session numbers, in order, each once.
    pub sessions: Vec<u32>,
    /// The sheets' labels (`Ficha: Baika`), in order.
    pub sheets: Vec<String>,
    /// The world documents' labels (`Mundo: Puerto Salobre`), in order.
    pub world: Vec<String>,
    /// Notes GM-only as a whole, each with why.
    pub gm_only: Vec<NoteReason>,
    /// Notes that players read but that hold GM-only passages, each with how many.
    pub secret_passages: Vec<NoteReason>,
    /// Notes that give nothing to search, or a session with no number, each with why.
    pub unplaced: Vec<NoteReason>,
    /// Folders whose notes were read as world documents only because nothing said otherwise
    /// (no folder hint, front matter type or tag), with how many notes each.
    pub world_by_default: BTreeMap<String, usize>,
    /// Folders whose name holds a GM word, which are not secret by default.
    pub secret_folders: Vec<String>,
    /// GM markers met in the notes (`[!gm]` callouts, `%%…%%`, `<!-- dm -->`), with how many
    /// notes use each: already read as secret.
    pub secret_markers: BTreeMap<String, usize>,
    /// Callout types met that hold no GM word: players read them.
    pub player_callouts: BTreeMap<String, usize>,
    /// What the ingest would warn about, by file.
    pub warnings: Vec<Diagnostic>,
}

/// A note's path and one line about it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NoteReason {
    pub path: String,
    pub why: String,
}

/// The common words of each language counted in the notes.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct LanguageWords {
    pub spanish: usize,
    pub english: usize,
}

/// Words that are common in any Spanish prose and rare in English (and the other way round):
/// counting them tells the notes' language without a model. Short, unambiguous function
/// words only ("a", "me", "no" are in both).
const SPANISH_WORDS: &[&str] =
    &["el", "los", "las", "del", "que", "por", "con", "una", "para", "pero", "como", "sesion", "su", "sus", "es"];
const ENGLISH_WORDS: &[&str] =
    &["the", "and", "of", "to", "with", "was", "were", "they", "their", "that", "for", "session", "his", "her", "is"];

/// Surveys `campaign_dir` as `campaign` reads it.
pub fn survey_campaign(campaign_dir: &Path, campaign: &CampaignConfig) -> anyhow::Result<CampaignSurvey> {
    let paths = crate::ingest::note_hashes(campaign_dir, campaign)
        .with_context(|| format!("reading the campaign folder {}", campaign_dir.display()))?;
    let texts: Vec<(String, String)> = paths
        .into_iter()
        .filter_map(|(path, _)| {
            // A note that vanished since the walk is simply not there; the ingest says the same.
            let bytes = std::fs::read(campaign_dir.join(&path)).ok()?;
            Some((path, String::from_utf8_lossy(&bytes).into_owned()))
        })
        .collect();
    let sources: Vec<(&str, &str)> = texts.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
    let (notes, mut warnings) = corpus::parse_campaign(&sources, &campaign.corpus);
    let (fragments, fragment_warnings) = corpus::fragment_campaign(&notes, &campaign.corpus);
    warnings.extend(fragment_warnings);

    let mut sessions = BTreeSet::new();
    let mut sheets = BTreeSet::new();
    let mut world = BTreeSet::new();
    for fragment in &fragments {
        match (fragment.kind, fragment.session) {
            (NoteKind::Session, Some(number)) => {
                sessions.insert(number.0);
            }
            (NoteKind::Sheet, _) => {
                sheets.insert(fragment.label.clone());
            }
            (NoteKind::World, _) => {
                world.insert(fragment.label.clone());
            }
            (NoteKind::Session, None) => {}
        }
    }
    let language_words = language_words(texts.iter().map(|(_, text)| text.as_str()));
    let markers = markers_seen(&texts, campaign);
    Ok(CampaignSurvey {
        n_notes: notes.len(),
        language: if language_words.english > language_words.spanish { LabelLanguage::En } else { LabelLanguage::Es },
        language_words,
        sessions: sessions.into_iter().collect(),
        sheets: sheets.into_iter().map(String::from).collect(),
        world: world.into_iter().map(String::from).collect(),
        gm_only: notes.iter().filter_map(|note| gm_only_reason(note, &warnings)).collect(),
        secret_passages: notes.iter().filter_map(secret_passages).collect(),
        unplaced: notes.iter().filter_map(unplaced_reason).collect(),
        world_by_default: world_by_default(&notes, campaign),
        secret_folders: secret_folders(&notes, campaign),
        secret_markers: markers.secret,
        player_callouts: markers.player,
        warnings,
    })
}

/// Counts the common words of each language in `texts`.
fn language_words<'t>(texts: impl Iterator<Item = &'t str>) -> LanguageWords {
    let mut counted = LanguageWords::default();
    for text in texts {
        let folded = crate::text::fold(text);
        for word in folded.split(|c: char| !c.is_alphanumeric()) {
            if SPANISH_WORDS.contains(&word) {
                counted.spanish += 1;
            } else if ENGLISH_WORDS.contains(&word) {
                counted.english += 1;
            }
        }
    }
    counted
}

/// Why a GM-only note is, as the one rule of `docs/secrets.md` found it (the named thing and
/// its GM word, the presence mark, the allow-list), or broken front matter kept GM-only.
fn gm_only_reason(note: &Note, warnings: &[Diagnostic]) -> Option<NoteReason> {
    if note.visibility != Visibility::DmOnly {
        return None;
    }
    let why = if let Some(because) = &note.hidden_because {
        corpus::audit::describe(because)
    } else if warnings.iter().any(|warning| warning.path == note.path && warning.message.contains("front matter")) {
        "its front matter cannot be read, so it is kept GM-only until fixed".to_string()
    } else {
        "its front matter marks it GM-only".to_string()
    };
    Some(NoteReason { path: note.path.clone(), why })
}

/// A player note holding GM-only passages, and how many.
fn secret_passages(note: &Note) -> Option<NoteReason> {
    if note.visibility == Visibility::DmOnly {
        return None;
    }
    let n_passages: usize = note.blocks.iter().map(|block| block.secrets.len()).sum();
    (n_passages > 0).then(|| NoteReason {
        path: note.path.clone(),
        why: format!("{n_passages} GM-only passage(s); players read the rest"),
    })
}

/// A note that gives nothing to search, or a session note whose number was not read.
fn unplaced_reason(note: &Note) -> Option<NoteReason> {
    let why = if note.blocks.iter().all(|block| block.text.trim().is_empty()) {
        "no text to search (empty, or front matter only)"
    } else if note.blocks.iter().any(|block| block.kind == NoteKind::Session && block.session.is_none()) {
        "a session note with no number read: name it `Session 12`, or write `session: 12` in its front matter"
    } else {
        return None;
    };
    Some(NoteReason { path: note.path.clone(), why: why.to_string() })
}

/// How the notes folder itself is named where folders are listed.
pub const TOP_FOLDER: &str = "(top folder)";

/// The folders ([`TOP_FOLDER`] for the notes folder itself) of world documents that nothing said were world documents.
fn world_by_default(notes: &[Note], campaign: &CampaignConfig) -> BTreeMap<String, usize> {
    let mut folders = BTreeMap::new();
    for note in notes {
        let told = campaign.corpus.kind_from_folders(&note.path).is_some() || note.declared_type.is_some();
        if note.kind == NoteKind::World && !told {
            let folder = note.path.rsplit_once('/').map_or(TOP_FOLDER, |(folder, _)| folder);
            *folders.entry(folder.to_string()).or_insert(0) += 1;
        }
    }
    folders
}

/// Folders whose own name holds a GM word (`GM Notes`, `Notas del DJ`): GM-only by the one rule
/// already, listed so that a DM sees which folders players will not read.
fn secret_folders(notes: &[Note], campaign: &CampaignConfig) -> Vec<String> {
    let mut folders = BTreeSet::new();
    for note in notes {
        let components: Vec<&str> = note.path.split('/').collect();
        for depth in 1..components.len() {
            if campaign.corpus.names_gm(components[depth - 1]) {
                folders.insert(components[..depth].join("/"));
                break;
            }
        }
    }
    folders.into_iter().collect()
}

/// GM markers and player callouts met in the notes.
struct Markers {
    secret: BTreeMap<String, usize>,
    player: BTreeMap<String, usize>,
}

/// The callout types (`> [!gm]`), GM comment openers (`<!-- dm -->`) and `%%` comments the
/// notes use, each counted once per note: which are secret and which players read.
fn markers_seen(texts: &[(String, String)], campaign: &CampaignConfig) -> Markers {
    // Both patterns are literals, checked by the unit tests.
    let callout = regex::Regex::new(r"(?m)^[ \t]*(?:>[ \t]*)+\[!([^\]\n]+)\]").expect("callout pattern");
    let comment = regex::Regex::new(r"<!--+[ \t]*([^\s>-][^>\n]*?)[ \t]*-*-->").expect("comment pattern");
    let mut markers = Markers { secret: BTreeMap::new(), player: BTreeMap::new() };
    for (_, text) in texts {
        let mut seen_secret = BTreeSet::new();
        let mut seen_player = BTreeSet::new();
        for found in callout.captures_iter(text) {
            let kind = found[1].trim().to_lowercase();
            let shown = format!("[!{kind}]");
            if campaign.corpus.names_gm(&kind) {
                seen_secret.insert(shown)
            } else {
                seen_player.insert(shown)
            };
        }
        for found in comment.captures_iter(text) {
            let head = found[1].split_whitespace().next().unwrap_or("").trim_end_matches(':').to_lowercase();
            if campaign.corpus.names_gm(&head) {
                seen_secret.insert(format!("<!-- {head} -->"));
            }
        }
        if text.contains("%%") {
            seen_secret.insert("%%…%%".to_string());
        }
        for marker in seen_secret {
            *markers.secret.entry(marker).or_insert(0) += 1;
        }
        for marker in seen_player {
            *markers.player.entry(marker).or_insert(0) += 1;
        }
    }
    markers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(files: &[(&str, &str)]) -> CampaignSurvey {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let config = crate::config::Config::from_layers(
            crate::config::RawConfig::default(),
            &|key: &str| (key == "HOME").then(|| "/h".to_string()),
            &crate::config::CliOverrides::default(),
        )
        .unwrap();
        survey_campaign(dir.path(), &config.campaign).unwrap()
    }

    #[test]
    fn an_english_vault_is_read_as_the_ingest_reads_it() {
        let survey = check(&[
            ("Sessions/Session 1.md", "# Session 1\nThe party met the ferryman and they paid him with their gold.\n"),
            ("Sessions/Session 2.md", "# Session 2\nThey crossed the river.\n> [!gm] The ferryman is the lich.\n"),
            ("Characters/Mira.md", "# Mira\nA ranger of the north, and the party's guide.\n> [!note] Player-made.\n"),
            ("GM Notes/twist.md", "The duke was the traitor all along.\n"),
            ("Secrets/plan.md", "The plan of the villain.\n"),
            ("Places/Harbor.md", "The harbor <!-- dm: smugglers --> is busy.\n"),
            ("Empty.md", ""),
        ]);
        assert_eq!(survey.n_notes, 7);
        assert_eq!(survey.language, LabelLanguage::En, "{:?}", survey.language_words);
        assert_eq!(survey.sessions, vec![1, 2]);
        assert!(survey.sheets.iter().any(|label| label.contains("Mira")), "{:?}", survey.sheets);
        assert_eq!(survey.secret_folders, ["GM Notes", "Secrets"], "the folders named for the GM are seen");
        let secret: Vec<&str> = survey.gm_only.iter().map(|note| note.path.as_str()).collect();
        assert_eq!(secret, vec!["GM Notes/twist.md", "Secrets/plan.md"], "folders named for the GM, by the one rule");
        assert!(survey.gm_only[0].why.contains("GM Notes"), "{:?}", survey.gm_only);
        assert!(survey.gm_only[1].why.contains("Secrets"), "{:?}", survey.gm_only);
        let passages: Vec<&str> = survey.secret_passages.iter().map(|note| note.path.as_str()).collect();
        assert!(passages.contains(&"Sessions/Session 2.md"), "{passages:?}");
        assert_eq!(survey.secret_markers.get("[!gm]"), Some(&1));
        assert_eq!(survey.secret_markers.get("<!-- dm -->"), Some(&1));
        assert_eq!(survey.player_callouts.get("[!note]"), Some(&1));
        assert_eq!(survey.unplaced.iter().map(|note| note.path.as_str()).collect::<Vec<_>>(), vec!["Empty.md"]);
        assert_eq!(survey.world_by_default.get("Places"), Some(&1), "{:?}", survey.world_by_default);
        assert_eq!(survey.world_by_default.get(TOP_FOLDER), Some(&1), "Empty.md: {:?}", survey.world_by_default);
    }

    #[test]
    fn spanish_notes_give_spanish_labels() {
        let survey =
            check(&[("Sesión 3.md", "# Sesión 3\nLos jugadores llegan a la ciudad por el puerto con sus barcos.\n")]);
        assert_eq!(survey.language, LabelLanguage::Es, "{:?}", survey.language_words);
        assert_eq!(survey.sessions, vec![3]);
    }
}
