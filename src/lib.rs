//! Oráculo answers a tabletop campaign's questions from the game master's own notes, and only
//! from them, citing the note behind every claim. The crate reads as its pipeline:
//!
//! - [`corpus`]: Markdown notes → labelled, session-sized fragments. Pure; bad input becomes
//!   diagnostics, never an abort.
//! - [`compendium`]: entities (PCs, NPCs, places, gods…) and their aliases from sheets, world
//!   documents and links; finds them in questions and fragments. Pure.
//! - [`lexicon`]: Spanish and English stopwords, shared by the compendium and BM25.
//! - [`ingest`]: walks a campaign folder, feeds the corpus, embeds what is new, writes the index.
//! - [`watch`]: follows a campaign folder as the DM saves: one incremental ingest per burst.
//! - [`index`]: SQLite (fragments, FTS5 for BM25, migrations) and LanceDB (window vectors),
//!   committed so that a reader never sees half an ingest.
//! - [`retrieve`]: a question → dense, BM25 and entity paths fused by reciprocal rank.
//! - [`answer`]: chosen fragments in full plus one-line summaries of the rest, the versioned
//!   prompts, and citations checked against the labels shown.
//! - [`oracle`]: one question in, one cited answer out: the façade the CLI and the bot call.
//! - [`timeline`]: campaign time for the table: an entity's sessions in order, a session's recap.
//! - [`llm`]: transport to models: embedders (embedded e5-small, Ollama) and chat models.
//! - [`discord`]: the bot: `/oraculo` with cited embeds, threads for follow-ups, `/reingest`.
//!
//! [`app`] is what the CLI, the bot and the evaluation share above the pipeline (resolving a
//! campaign, opening its oracle). [`secret`] is the one redacted value type. [`config`],
//! [`logging`] and [`cli`] are the edges; [`sample`] is the built-in campaign.

pub mod app;
pub mod config;
pub mod logging;

pub mod answer;
pub mod compendium;
pub mod conversation;
pub mod corpus;
pub mod discord;
pub mod index;
pub mod ingest;
pub mod lexicon;
pub mod llm;
pub mod oracle;
pub mod prompt;
pub mod retrieve;
pub mod timeline;
pub mod watch;

pub mod cli;
pub mod eval;
pub mod sample;
pub mod secret;
