//! What each tool answers: a structured value (the tool result's `structuredContent`) and the
//! same as cited text (its `content`), in the question's language, every passage under the
//! label a client model must cite.

use serde::Serialize;

use crate::corpus::{Label, LabelLanguage, NoteKind, SessionNumber};
use crate::oracle::{Answer, FoundPassage};
use crate::retrieve::Audience;

/// Which notes a server reads: what every result says, so a client never mistakes one for
/// the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum View {
    /// The players' view: GM-only notes are neither searched nor shown.
    Players,
    /// The GM's view: GM-only notes included.
    Gm,
}

impl View {
    pub fn of(audience: Audience) -> View {
        match audience {
            Audience::Player => View::Players,
            Audience::Gm => View::Gm,
        }
    }

    /// One sentence on what the view holds, for a tool's description.
    pub fn describe(self) -> &'static str {
        match self {
            View::Players => "This server serves the players' view: GM-only notes are never searched, listed or shown.",
            View::Gm => {
                "This server serves the GM's view: GM-only notes (secrets) are included, so do not show its answers to players."
            }
        }
    }

    fn phrase(self, language: LabelLanguage) -> &'static str {
        match (self, language) {
            (View::Players, LabelLanguage::Es) => "vista de los jugadores",
            (View::Gm, LabelLanguage::Es) => "vista del DJ, con sus secretos",
            (View::Players, LabelLanguage::En) => "the players' view",
            (View::Gm, LabelLanguage::En) => "the GM's view, secrets included",
        }
    }
}

/// Picks the Spanish or the English of a line.
fn say<'a>(language: LabelLanguage, es: &'a str, en: &'a str) -> &'a str {
    match language {
        LabelLanguage::Es => es,
        LabelLanguage::En => en,
    }
}

/// `search`: the fused pool, best first, each fragment with its passage.
#[derive(Debug, Serialize)]
pub struct SearchOutput {
    pub campaign: String,
    pub view: View,
    pub question: String,
    /// Every fragment of the pool, in the order `oraculo search --json` lists its candidates.
    pub fragments: Vec<FoundPassage>,
    /// The compendium's entities the question names, as the notes call them.
    pub entities: Vec<String>,
    /// Said when a session the question names is not in the notes.
    pub notice: Option<String>,
    /// Retrieval paths that failed for this question (the pool comes from the others).
    pub missing_paths: Vec<String>,
}

impl SearchOutput {
    pub fn text(&self, language: LabelLanguage) -> String {
        let view = self.view.phrase(language);
        let mut out = if self.fragments.is_empty() {
            match language {
                LabelLanguage::Es => format!("Las notas no tienen nada sobre «{}» ({view}).", self.question),
                LabelLanguage::En => format!("The notes hold nothing on «{}» ({view}).", self.question),
            }
        } else {
            match language {
                LabelLanguage::Es => format!(
                    "{} fragmentos de las notas sobre «{}» ({view}), el más pertinente primero. Cita la etiqueta entre corchetes tras cada afirmación.",
                    self.fragments.len(),
                    self.question
                ),
                LabelLanguage::En => format!(
                    "{} fragments of the notes on «{}» ({view}), most relevant first. Cite the label in brackets after every claim.",
                    self.fragments.len(),
                    self.question
                ),
            }
        };
        if let Some(notice) = &self.notice {
            out.push_str(&format!("\n{notice}"));
        }
        for found in &self.fragments {
            let session =
                found.session.map(|s| format!(", {} {s}", say(language, "sesión", "session"))).unwrap_or_default();
            out.push_str(&format!(
                "\n\n{}. [{}] {}{session}\n{}",
                found.rank,
                found.label,
                found.source_path,
                found.passage.trim()
            ));
        }
        for path in &self.missing_paths {
            out.push_str(&format!(
                "\n\n({}: {path})",
                say(language, "buscado sin esta vía, que falló", "searched without this path, which failed")
            ));
        }
        out
    }
}

/// The text of an answer (`ask`, `recap`): its cited text, then its sources.
pub fn answer_text(answer: &Answer, no_model: Option<&str>, language: LabelLanguage) -> String {
    let mut out = answer.text.trim().to_string();
    let valid: Vec<_> = answer.citations.iter().filter(|citation| citation.valid).collect();
    if !valid.is_empty() {
        out.push_str(&format!("\n\n{}", say(language, "Fuentes:", "Sources:")));
        for citation in valid {
            out.push_str(&format!("\n[{}] {}", citation.label, citation.source_path.as_deref().unwrap_or("")));
            if let Some(excerpt) = &citation.excerpt {
                out.push_str(&format!(" — {}", excerpt.trim()));
            }
        }
    }
    if let Some(reason) = no_model {
        out.push_str(&format!(
            "\n\n({})",
            match language {
                LabelLanguage::Es => format!("las frases de las notas, sin modelo: {reason}"),
                LabelLanguage::En => format!("the notes' own sentences, no model: {reason}"),
            }
        ));
    }
    out
}

/// The text of a timeline: one cited line per session, in story order.
pub fn timeline_text(timeline: &crate::timeline::Timeline, language: LabelLanguage) -> String {
    let aliases =
        if timeline.aliases.is_empty() { String::new() } else { format!(" ({})", timeline.aliases.join(", ")) };
    let mut out = format!("{} [{}]{aliases}", timeline.entity, timeline.kind);
    if timeline.entries.is_empty() {
        out.push_str(&format!("\n{}", say(language, "No aparece en ninguna sesión.", "Appears in no session.")));
    }
    for entry in &timeline.entries {
        let mark = match (entry.first, entry.last) {
            (true, true) => say(language, " (primera y última aparición)", " (first and last appearance)"),
            (true, false) => say(language, " (primera aparición)", " (first appearance)"),
            (false, true) => say(language, " (última aparición)", " (last appearance)"),
            _ => "",
        };
        out.push_str(&format!(
            "\n{} {}: {} [{}]{mark}",
            say(language, "Sesión", "Session"),
            entry.session,
            entry.line,
            entry.label
        ));
    }
    if !timeline.other_labels.is_empty() {
        out.push_str(&format!("\n{} {}", say(language, "También en:", "Also in:"), timeline.other_labels.join("; ")));
    }
    out
}

/// `source`: every part of one label, in order.
#[derive(Debug, Serialize)]
pub struct SourceOutput {
    pub campaign: String,
    pub view: View,
    pub label: Label,
    pub kind: NoteKind,
    pub session: Option<SessionNumber>,
    pub source_path: String,
    pub parts: Vec<SourcePart>,
}

/// One fragment of a label.
#[derive(Debug, Serialize)]
pub struct SourcePart {
    pub part: u32,
    /// The headings above the fragment's first line, outermost first.
    pub heading_path: Vec<String>,
    /// 1-based, inclusive, in the note.
    pub line_start: u32,
    pub line_end: u32,
    pub text: String,
}

impl SourceOutput {
    pub fn text(&self) -> String {
        let mut out = format!("[{}] {}", self.label, self.source_path);
        for part in &self.parts {
            out.push_str(&format!("\n\n{}", part.text.trim()));
        }
        out
    }
}

/// `sessions`: what the index holds, as the view may read it.
#[derive(Debug, Serialize)]
pub struct SessionsOutput {
    pub campaign: String,
    pub view: View,
    pub sessions: Vec<SessionEntry>,
    /// Character sheets and world documents: labels with no place in time.
    pub other_sources: Vec<OtherSource>,
}

#[derive(Debug, Serialize)]
pub struct SessionEntry {
    pub session: SessionNumber,
    pub label: Label,
    pub source_path: String,
    pub n_fragments: u32,
    pub n_words: u64,
}

#[derive(Debug, Serialize)]
pub struct OtherSource {
    pub label: Label,
    pub kind: NoteKind,
    pub source_path: String,
}

impl SessionsOutput {
    pub fn text(&self, language: LabelLanguage) -> String {
        let view = self.view.phrase(language);
        let mut out = match (self.sessions.first(), self.sessions.last()) {
            (Some(first), Some(last)) => match language {
                LabelLanguage::Es => format!(
                    "«{}» ({view}): {} sesiones, de la {} a la {}.",
                    self.campaign,
                    self.sessions.len(),
                    first.session,
                    last.session
                ),
                LabelLanguage::En => format!(
                    "«{}» ({view}): {} sessions, from {} to {}.",
                    self.campaign,
                    self.sessions.len(),
                    first.session,
                    last.session
                ),
            },
            _ => match language {
                LabelLanguage::Es => format!("«{}» ({view}): ninguna sesión numerada.", self.campaign),
                LabelLanguage::En => format!("«{}» ({view}): no numbered session.", self.campaign),
            },
        };
        for entry in &self.sessions {
            out.push_str(&format!("\n[{}] {}", entry.label, entry.source_path));
        }
        if !self.other_sources.is_empty() {
            out.push_str(&format!(
                "\n\n{}",
                say(language, "Fichas y documentos del mundo:", "Sheets and world documents:")
            ));
            for other in &self.other_sources {
                out.push_str(&format!("\n[{}] {}", other.label, other.source_path));
            }
        }
        out
    }
}

/// `compendium`: the entities, as the view may read them.
#[derive(Debug, Serialize)]
pub struct CompendiumOutput {
    pub campaign: String,
    pub view: View,
    pub entities: Vec<EntityEntry>,
}

#[derive(Debug, Serialize)]
pub struct EntityEntry {
    pub name: String,
    /// pc, npc, place, god, faction, item, other.
    pub kind: String,
    pub aliases: Vec<String>,
    pub description: String,
    /// Sessions whose notes mention it, ascending.
    pub sessions: Vec<SessionNumber>,
    /// Sheets and world documents that mention it.
    pub other_labels: Vec<String>,
}

impl CompendiumOutput {
    pub fn text(&self, language: LabelLanguage) -> String {
        let view = self.view.phrase(language);
        let mut out = match language {
            LabelLanguage::Es => format!("«{}» ({view}): {} entidades.", self.campaign, self.entities.len()),
            LabelLanguage::En => format!("«{}» ({view}): {} entities.", self.campaign, self.entities.len()),
        };
        for entity in &self.entities {
            let aliases =
                if entity.aliases.is_empty() { String::new() } else { format!(" ({})", entity.aliases.join(", ")) };
            out.push_str(&format!("\n\n{} [{}]{aliases}", entity.name, entity.kind));
            if !entity.description.is_empty() {
                out.push_str(&format!("\n{}", entity.description.trim()));
            }
            if !entity.sessions.is_empty() {
                let sessions: Vec<String> = entity.sessions.iter().map(ToString::to_string).collect();
                out.push_str(&format!("\n{} {}", say(language, "Sesiones:", "Sessions:"), sessions.join(", ")));
            }
            if !entity.other_labels.is_empty() {
                out.push_str(&format!(
                    "\n{} {}",
                    say(language, "También en:", "Also in:"),
                    entity.other_labels.join("; ")
                ));
            }
        }
        out
    }
}
