//! What each tool takes (its JSON schema is derived from these) and what it says it does.

use serde::Deserialize;

/// Which campaign a tool is about (`campaign` names one of several).
#[derive(Debug, Default, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct CampaignParams {
    /// The campaign's name; needed only when this server serves several (the error lists
    /// them).
    pub campaign: Option<String>,
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct QuestionParams {
    /// The question, in the players' own words and language (Spanish or English), e.g.
    /// «¿Qué pasó con el archiduque?».
    pub question: String,
    /// The campaign's name; needed only when this server serves several.
    pub campaign: Option<String>,
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct AskParams {
    /// The question, in the players' own words and language (Spanish or English).
    pub question: String,
    /// true: answer at once with the notes' own sentences, each cited, and no model (what
    /// Oráculo answers when no model is configured).
    pub extractive: Option<bool>,
    /// The campaign's name; needed only when this server serves several.
    pub campaign: Option<String>,
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct TimelineParams {
    /// A name or alias from the compendium (a PC, an NPC, a place, a faction…); accents and
    /// case do not matter.
    pub name: String,
    /// The campaign's name; needed only when this server serves several.
    pub campaign: Option<String>,
}

/// A session as a client may name it: its number, or words.
#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
#[serde(untagged)]
pub enum SessionAsked {
    Number(u32),
    /// «12», «sesión 12», «la última», «la penúltima», «hace dos sesiones», "the last one".
    Words(String),
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct RecapParams {
    /// The session: a number, or words such as «la última», «la penúltima», «hace dos
    /// sesiones», "the last one" (default: the last session).
    pub session: Option<SessionAsked>,
    /// The recap's language, "es" or "en" (default: the words' language, else the
    /// campaign's).
    pub language: Option<String>,
    /// true: the session told in the notes' own sentences, each cited, with no model.
    pub extractive: Option<bool>,
    /// The campaign's name; needed only when this server serves several.
    pub campaign: Option<String>,
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct SourceParams {
    /// The label, exactly as a tool gave it: «Sesión 9», «Ficha: Odo», «Mundo: Puerto Salobre».
    pub label: String,
    /// The campaign's name; needed only when this server serves several.
    pub campaign: Option<String>,
}

#[derive(Debug, Deserialize, rmcp::schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct CiteParams {
    /// The question the client model is about to answer (optional).
    pub question: Option<String>,
    /// The campaign's name; needed only when this server serves several.
    pub campaign: Option<String>,
}

pub const SEARCH_DESCRIPTION: &str = "Searches the campaign's notes for a question (dense, BM25, entity and campaign-time paths, fused) and returns every fragment found, best first, each with its label, session, note path and the passage that matters. Answer from these passages and cite each claim's label in brackets, e.g. [Sesión 9].";
pub const ASK_DESCRIPTION: &str = "Oráculo's own cited answer to a question, in the question's language (what `oraculo ask --json` gives): every sentence ends with the label of the note it rests on, and an answer the notes do not hold says so. With no chat model configured (or extractive: true) it is the notes' own sentences, each cited, at once; with the embedded model on a CPU an answer takes a minute or more.";
pub const TIMELINE_DESCRIPTION: &str = "An entity's sessions in story order (a PC, an NPC, a place, a faction…), one cited line per session, its first and last appearances marked.";
pub const RECAP_DESCRIPTION: &str = "A cited recap of one session, by number or in words («la última», «la penúltima», «hace dos sesiones»; default: the last session), to open a game night.";
pub const SOURCE_DESCRIPTION: &str = "The full text of one label (a session's notes, a character sheet, a world document), every part in order: read it before quoting it.";
pub const SESSIONS_DESCRIPTION: &str = "What the index holds: every session with its label and note, then the character sheets and world documents: the labels there are to cite or read.";
pub const COMPENDIUM_DESCRIPTION: &str = "The campaign's entities (PCs, NPCs, places, gods, factions, items) with their aliases, a description, and the sessions and notes that mention them.";
