//! One campaign the MCP server serves: its name, language, notes and oracles, and the command
//! that builds its index (what a tool error names as the fix for «no index»).

use crate::config::CampaignConfig;
use crate::corpus::LabelLanguage;
use crate::notes::Notes;
use crate::oracle::Oracle;

/// One campaign the server serves.
pub struct Campaign {
    pub name: String,
    /// Its labels' language: the answers' when no question says otherwise.
    pub language: LabelLanguage,
    /// Its notes: search, sources, listings, read by every tool.
    pub notes: Notes,
    /// The notes answering with their own sentences, with no model.
    pub searcher: Oracle,
    /// The same campaign answering with the chat model, made on the first question that
    /// needs it.
    pub(super) answerer: tokio::sync::OnceCell<Oracle>,
    /// The command that builds its index, with the server's own flags (the fix for «no index»).
    pub ingest_command: String,
}

impl Campaign {
    pub fn new(
        name: String,
        config: CampaignConfig,
        notes: Notes,
        searcher: Oracle,
        ingest_command: String,
    ) -> Campaign {
        let language = config.corpus.label_language;
        Campaign { name, language, notes, searcher, answerer: tokio::sync::OnceCell::new(), ingest_command }
    }
}
