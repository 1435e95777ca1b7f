//! The application layer: what the CLI, the bot, the MCP server and the evaluation share
//! above the pipeline, so that the same command never behaves two ways. One file per job:
//!
//! - [`open`]: a campaign opened. [`campaign_paths`]: its notes folder and its index folder;
//!   [`open_oracle`]: the CLI's campaign, its models connected ([`open_answerer`]: no chat
//!   model with `chat.answer_style = "quotes"`); [`open_searcher`]: its notes alone, no chat
//!   model loaded, for `oraculo search`; [`campaign_notes`]: any campaign's notes, and
//!   [`campaign_searcher`], [`campaign_oracle`]: their oracles over models already connected; [`open_campaigns`]: every campaign the bot serves, one oracle each over
//!   one shared embedder and one shared chat model.
//! - [`models`]: [`connect_embedder`], [`connect_chat`], the models the configuration names.
//! - [`answer`]: [`ask_settled`], one question answered through the oracle's one entry
//!   ([`Oracle::answer`](crate::oracle::Oracle::answer)); [`answer_json`], as `oraculo ask
//!   --json` prints it; [`render_error`], an error and its causes on one line.
//! - [`ingest`]: [`ingest_and_annotate`], the one ingest the CLI and `/reingest` run;
//!   [`audit_secrets`], what a campaign hides from players, and why.
//! - [`worker::LocalWorker`]: a thread for the oracle's futures, which are not `Send`.
//! - [`init::init_campaign`]: `oraculo init`, a DM's notes folder surveyed as the ingest reads
//!   it ([`survey::survey_campaign`]) and a config written for it and for this machine.

pub mod answer;
pub mod ingest;
pub mod init;
pub mod models;
pub mod open;
pub mod survey;
pub mod worker;

pub use answer::{answer_json, ask_settled, render_error, settled_json};
pub use ingest::{Annotator, audit_secrets, ingest_and_annotate};
pub use models::{connect_chat, connect_embedder};
pub use open::{
    OpenCampaign, campaign_notes, campaign_oracle, campaign_paths, campaign_searcher, open_answerer, open_campaigns,
    open_oracle, open_searcher, resolve_campaign_dir,
};
