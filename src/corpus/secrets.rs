//! What makes text GM-only beyond its own markers: the GM words that callout types, comment
//! openers, front matter marks and tags are read by, and the campaign's secret notes, whose
//! names a link in a player's text must not show.
//!
//! Every table of what counts is in `docs/secrets.md`; a form not read as secret there is
//! read as text a player may see, so the rules here lean towards secret when in doubt.

use std::collections::{HashMap, HashSet};

use super::{CorpusConfig, Visibility};
use crate::text::fold;

/// The GM words out of the box (`campaign.secret_words` adds to them, `"!word"` drops one):
/// the word a DM writes for "only the game master sees this", in English and Spanish, with
/// the forms Spanish inflects (a plural is read too: `secretos`, `narradores`, `gms`).
/// `dj` is «director de juego»; `máster` is how Spanish tables say it; `spoiler`, `oculto`
/// and `hidden` mark what players must not read yet.
pub const DEFAULT_SECRET_WORDS: &[&str] = &[
    "secret",
    "secreto",
    "secreta",
    "gm",
    "dm",
    "dj",
    "máster",
    "gamemaster",
    "narrador",
    "narradora",
    "private",
    "privado",
    "privada",
    "spoiler",
    "oculto",
    "oculta",
    "hidden",
];

/// The default GM words, as `CorpusConfig::secret_words` holds them (folded).
pub fn default_secret_words() -> Vec<String> {
    DEFAULT_SECRET_WORDS.iter().map(|word| fold(word)).collect()
}

/// The words of a named thing (a folder, file name, heading, label, column, fence, class,
/// field key, front matter key or value, tag, callout type): split at every character that is
/// not a letter or digit (`gm-only`, `notas_dj`, `DM's notes`, `Sesión 7 (prep GM)`,
/// `Villano.secret`), between a lower-case letter and an upper-case one (`gmOnly`,
/// `notasDJ`), before the last capital of a capital run that a lower-case letter follows
/// (`GMNotes` is `GM` `Notes`), and between letters and digits (`99DM`). A capital run glued to
/// lower-case letters is also read whole (`DMnotes` holds `DM`). A GM word glued to another in
/// one case (`gmnotes`) is not split: `dmg` is damage, `admin` is no DM.
pub(crate) fn phrase_words(phrase: &str) -> impl Iterator<Item = &str> {
    let mut words = Vec::new();
    for chunk in phrase.split(|c: char| !c.is_alphanumeric()).filter(|chunk| !chunk.is_empty()) {
        let chars: Vec<(usize, char)> = chunk.char_indices().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (at, c) = chars[i];
            let previous = chars[i - 1].1;
            let next_is_lower = chars.get(i + 1).is_some_and(|&(_, next)| next.is_lowercase());
            let boundary = (previous.is_lowercase() && c.is_uppercase())
                || (previous.is_uppercase() && c.is_uppercase() && next_is_lower)
                || (previous.is_alphabetic() && c.is_numeric())
                || (previous.is_numeric() && c.is_alphabetic());
            if boundary {
                words.push(&chunk[start..at]);
                start = at;
            }
        }
        words.push(&chunk[start..]);
        // Every run of two capitals or more, whole: `DMnotes` holds `DM`.
        let mut run_start: Option<usize> = None;
        for (i, &(at, c)) in chars.iter().enumerate() {
            match (c.is_uppercase(), run_start) {
                (true, None) => run_start = Some(i),
                (false, Some(first)) => {
                    if i - first >= 2 && i < chars.len() && chars[i].1.is_lowercase() {
                        words.push(&chunk[chars[first].0..at]);
                    }
                    run_start = None;
                }
                _ => {}
            }
        }
    }
    words.into_iter()
}

impl CorpusConfig {
    /// Whether one of `phrase`'s words is a GM word, or one with a plural ending
    /// (`-s`, `-es`), case- and accent-insensitively.
    pub fn names_gm(&self, phrase: &str) -> bool {
        self.gm_word_in(phrase).is_some()
    }

    /// The first word of `phrase` that is a GM word, as written.
    pub(crate) fn gm_word_in<'p>(&self, phrase: &'p str) -> Option<&'p str> {
        phrase_words(phrase).find(|word| {
            let word = fold(word);
            self.secret_words
                .iter()
                .any(|gm| word.strip_prefix(gm.as_str()).is_some_and(|ending| matches!(ending, "" | "s" | "es")))
        })
    }
}

/// The campaign's notes as a link can name them: by path (`[[Secretos/El traidor]]`,
/// `[x](../Secretos/El%20traidor.md)`) or by file name alone (`[[El traidor]]`). Built from
/// every note's visibility before the notes are rendered, so that a player's text never
/// shows a GM-only note's name.
#[derive(Debug, Clone, Default)]
pub struct SecretNotes {
    /// Folded paths without their extension, and folded file stems.
    secret_paths: HashSet<String>,
    secret_stems: HashSet<String>,
    player_paths: HashSet<String>,
    /// Player notes by stem: how many have it.
    player_stems: HashMap<String, usize>,
}

impl SecretNotes {
    /// From each note's campaign-relative path and visibility.
    pub fn new<'a>(notes: impl IntoIterator<Item = (&'a str, Visibility)>) -> SecretNotes {
        let mut secret_notes = SecretNotes::default();
        for (path, visibility) in notes {
            let key = note_key(path);
            let stem = last_component(&key).to_string();
            match visibility {
                Visibility::DmOnly => {
                    secret_notes.secret_paths.insert(key);
                    secret_notes.secret_stems.insert(stem);
                }
                Visibility::Player => {
                    secret_notes.player_paths.insert(key);
                    *secret_notes.player_stems.entry(stem).or_default() += 1;
                }
            }
        }
        secret_notes
    }

    /// The note at `path`, read as a player's note so far, is GM-only after all (its content
    /// marks it).
    pub(crate) fn mark_secret(&mut self, path: &str) {
        let key = note_key(path);
        let stem = last_component(&key).to_string();
        if self.player_paths.remove(&key)
            && let Some(count) = self.player_stems.get_mut(&stem)
        {
            *count -= 1;
            if *count == 0 {
                self.player_stems.remove(&stem);
            }
        }
        self.secret_paths.insert(key);
        self.secret_stems.insert(stem);
    }

    /// Whether a link to `target` written in the note at `from` names a GM-only note: a target
    /// under a secret path (as written, or resolved from `from`'s folder), the path of a
    /// secret note, or a file name that only secret notes have.
    pub fn is_secret_target(&self, target: &str, from: &str, config: &CorpusConfig) -> bool {
        if self.secret_paths.is_empty() && config.secret_paths.is_empty() {
            return false;
        }
        let written = note_key(target);
        if written.is_empty() {
            return false;
        }
        let resolved = resolve_from(from, &written);
        let candidates: &[&str] = match &resolved {
            Some(resolved) => &[written.as_str(), resolved.as_str()],
            None => &[written.as_str()],
        };
        if candidates.iter().any(|candidate| config.is_secret_path(candidate) || self.secret_paths.contains(*candidate))
        {
            return true;
        }
        let stem = last_component(&written);
        self.secret_stems.contains(stem)
            && !self.player_stems.contains_key(stem)
            && !candidates.iter().any(|candidate| self.player_paths.contains(*candidate))
    }

    /// Whether `shown`, a link's text, is only the target's own name (what Obsidian writes for
    /// `[X](Secretos/X.md)`), so it names the secret too.
    pub(crate) fn is_target_name(shown: &str, target: &str) -> bool {
        let (shown, target) = (note_key(shown), note_key(target));
        !shown.is_empty() && (shown == target || shown == last_component(&target))
    }
}

/// A path or link target as notes are compared: folded, `/`-separated, no leading `./` or
/// `/`, no `.md` extension, runs of spaces as one.
fn note_key(path: &str) -> String {
    let folded = fold(path.trim());
    let trimmed = folded.trim_start_matches("./").trim_matches('/');
    let trimmed = trimmed.strip_suffix(".md").or_else(|| trimmed.strip_suffix(".markdown")).unwrap_or(trimmed);
    trimmed.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `target` read from the folder of the note at `from` (`../Secretos/x` from `Mundo/a.md`
/// is `Secretos/x`); `None` for a target with no `.` component (it reads as written).
fn resolve_from(from: &str, target: &str) -> Option<String> {
    if !target.split('/').any(|component| component == "." || component == "..") {
        return None;
    }
    let from = note_key(from);
    let mut components: Vec<&str> = from.split('/').collect();
    components.pop();
    for component in target.split('/') {
        match component {
            "." | "" => {}
            ".." => {
                components.pop();
            }
            component => components.push(component),
        }
    }
    Some(components.join("/"))
}

fn last_component(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::{LabelLanguage, SessionPattern, default_kind_folders};

    fn config(secret_paths: &[&str]) -> CorpusConfig {
        CorpusConfig {
            label_language: LabelLanguage::Es,
            kind_folders: default_kind_folders(),
            secret_paths: secret_paths.iter().map(|path| path.to_string()).collect(),
            secret_words: default_secret_words(),
            player_paths: Vec::new(),
            session_patterns: SessionPattern::defaults(),
        }
    }

    #[test]
    fn a_phrase_is_gm_when_one_of_its_words_is() {
        let config = config(&[]);
        for gm in [
            "secret",
            "Secretos",
            "GM",
            "gm-only",
            "dm-notes",
            "notas-dj",
            "Notas_DJ",
            "DM notes",
            "máster",
            "MASTER",
            "narradores",
            "privado",
            "info:gm",
            "dm/notas",
            "Spoilers",
            "gmOnly",
            "GMNotes",
            "DMnotes",
            "notasDelDJ",
            "_Secretos",
            "99 - DM",
            "99DM",
            "Sesión 7 (prep GM)",
            "Villano.secret",
            "DM's notes",
            "SECRETOS",
        ] {
            assert!(config.names_gm(gm), "{gm}");
        }
        for not_gm in [
            "note",
            "gmnotes",
            "dmg",
            "admin",
            "info",
            "notas del grupo",
            "",
            "secretaria",
            "djinn",
            "Admin",
            "DMGRoll",
        ] {
            assert!(!config.names_gm(not_gm), "{not_gm}");
        }
        let own = CorpusConfig { secret_words: vec!["arbitro".to_string()], ..config };
        assert!(own.names_gm("notas-árbitro") && !own.names_gm("gm"));
    }

    #[test]
    fn a_link_names_a_secret_note_by_path_or_by_a_name_only_secret_notes_have() {
        let config = config(&["Secretos"]);
        let notes = SecretNotes::new([
            ("Secretos/El Traidor.md", Visibility::DmOnly),
            ("Mundo/Plan oculto.md", Visibility::DmOnly),
            ("Mundo/Baika.md", Visibility::DmOnly),
            ("PNJs/Baika.md", Visibility::Player),
            ("Mundo/Puerto.md", Visibility::Player),
        ]);
        let from = "Sesiones/Sesion 1.md";
        for secret in [
            "Secretos/El Traidor",
            "secretos/el traidor.md",
            "El Traidor",
            "el  traidor",
            "Plan oculto",
            "Mundo/Plan oculto.md",
            "../Secretos/El Traidor",
            "Secretos/Nadie aún",
            "Mundo/Baika",
        ] {
            assert!(notes.is_secret_target(secret, from, &config), "{secret}");
        }
        for public in ["Baika", "PNJs/Baika", "Puerto", "Mundo/Puerto.md", "Nadie", "", "../Mundo/Puerto"] {
            assert!(!notes.is_secret_target(public, from, &config), "{public}");
        }
        assert!(SecretNotes::is_target_name("El Traidor", "Secretos/El Traidor.md"));
        assert!(SecretNotes::is_target_name("secretos/el traidor", "Secretos/El Traidor"));
        assert!(!SecretNotes::is_target_name("el capitán", "Secretos/El Traidor"));
    }
}
