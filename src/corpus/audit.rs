//! The DM's audit of what is secret (`oraculo secrets`): every note and passage hidden from
//! players, with the named thing and the GM word that hid it, and every line players may read
//! that still holds a GM word somewhere ("check these": the rule found no named thing around
//! it, so the DM decides). Pure: notes in, the audit out.

use serde::Serialize;

use super::{HiddenBecause, Note, Visibility};

/// A check-these line is cut to this many characters: enough to recognise the line.
const CHECK_LINE_MAX_CHARS: usize = 120;

#[derive(Debug, Clone, Serialize)]
pub struct SecretsAudit {
    pub notes_read: usize,
    /// Whole notes hidden, in path order.
    pub hidden_notes: Vec<HiddenNote>,
    /// Passages hidden inside notes players may read, in path and line order.
    pub hidden_passages: Vec<HiddenPassage>,
    /// Player-visible lines that hold a GM word.
    pub check: Vec<CheckLine>,
    /// Words players may read, and words only the GM may.
    pub player_words: usize,
    pub gm_words: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct HiddenNote {
    pub path: String,
    pub because: HiddenBecause,
    pub words: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct HiddenPassage {
    pub path: String,
    pub line_start: u32,
    pub line_end: u32,
    pub because: HiddenBecause,
    pub words: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct CheckLine {
    pub path: String,
    pub line: u32,
    /// The GM word, as written.
    pub word: String,
    pub text: String,
}

impl SecretsAudit {
    /// The share of the campaign's words that players may read (1.0 when nothing is hidden).
    pub fn player_share(&self) -> f64 {
        let total = self.player_words + self.gm_words;
        if total == 0 { 1.0 } else { self.player_words as f64 / total as f64 }
    }
}

/// Audits `notes` as the corpus read them under `config`'s GM words.
pub fn audit(notes: &[Note], config: &super::CorpusConfig) -> SecretsAudit {
    let mut audit = SecretsAudit {
        notes_read: notes.len(),
        hidden_notes: Vec::new(),
        hidden_passages: Vec::new(),
        check: Vec::new(),
        player_words: 0,
        gm_words: 0,
    };
    for note in notes {
        let note_words: usize = note.blocks.iter().map(|block| word_count(&block.text)).sum();
        let secret_words: usize =
            note.blocks.iter().flat_map(|block| &block.secrets).map(|secret| word_count(&secret.text)).sum();
        if note.visibility == Visibility::DmOnly {
            audit.gm_words += note_words + secret_words;
            let because = note.hidden_because.clone().unwrap_or_else(|| HiddenBecause::new(None, "note", "", ""));
            audit.hidden_notes.push(HiddenNote { path: note.path.clone(), because, words: note_words + secret_words });
            continue;
        }
        for block in &note.blocks {
            for secret in &block.secrets {
                let words = word_count(&secret.text);
                audit.gm_words += words;
                audit.hidden_passages.push(HiddenPassage {
                    path: note.path.clone(),
                    line_start: secret.line_start,
                    line_end: secret.line_end,
                    because: secret.because.clone(),
                    words,
                });
            }
            if block.visibility == Visibility::DmOnly {
                audit.gm_words += word_count(&block.text);
                continue;
            }
            audit.player_words += word_count(&block.text);
            for (offset, line) in block.text.lines().enumerate() {
                if let Some(word) = config.gm_word_in(line) {
                    audit.check.push(CheckLine {
                        path: note.path.clone(),
                        line: block.line_start + u32::try_from(offset).unwrap_or(u32::MAX),
                        word: word.to_string(),
                        text: clip(line.trim()),
                    });
                }
            }
        }
    }
    audit.hidden_notes.sort_by(|a, b| a.path.cmp(&b.path));
    audit.hidden_passages.sort_by(|a, b| (&a.path, a.line_start).cmp(&(&b.path, b.line_start)));
    audit.check.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    audit.check.dedup_by(|a, b| a.path == b.path && a.line == b.line);
    audit
}

/// One line of the audit for a hidden thing: «heading «## Notas del DJ» (GM word «DJ»)».
pub fn describe(because: &HiddenBecause) -> String {
    let mut text = because.thing.clone();
    if !because.name.is_empty() {
        text.push_str(&format!(" «{}»", because.name));
    }
    if !because.word.is_empty() {
        text.push_str(&format!(" (GM word «{}»)", because.word));
    }
    text
}

fn word_count(text: &str) -> usize {
    text.split_whitespace().filter(|word| word.chars().any(char::is_alphanumeric)).count()
}

fn clip(line: &str) -> String {
    crate::text::shorten(line, CHECK_LINE_MAX_CHARS)
}
