//! Oráculo answers a tabletop campaign's questions from the game master's own notes, and only
//! from them, citing the note behind every claim. The crate reads as its pipeline:
//!
//! - [`text`]: the ground floor: folding, words, word windows, where a sentence ends,
//!   shortening; the one home of each.
//! - [`corpus`]: Markdown notes → labelled, session-sized fragments. Pure; bad input becomes
//!   diagnostics, never an abort.
//! - [`compendium`]: entities (PCs, NPCs, places, gods…) and their aliases from sheets, world
//!   documents and links; finds them in questions and fragments. Pure.
//! - [`lexicon`]: Spanish and English stopwords, shared by the compendium and BM25.
//! - [`ingest`]: walks a campaign folder, feeds the corpus, embeds what is new, writes the index.
//! - [`watch`]: follows a campaign folder as the DM saves: one incremental ingest per burst.
//! - [`index`]: SQLite (fragments, FTS5 for BM25, migrations) and LanceDB (window vectors),
//!   committed so that a reader never sees half an ingest.
//! - [`retrieve`]: a question → dense, BM25, entity and time paths fused by reciprocal rank,
//!   then reranked over the fragments' annotations.
//! - [`answer`]: chosen fragments in full plus one-line summaries of the rest, the structured
//!   answer's schema, the checks of each sentence, and citations checked against the labels
//!   shown.
//! - [`prompt`]: the versioned prompts under `prompts/` and the messages built from them, the
//!   one place the answer, the rerank and the annotations take their prompts from.
//! - [`notes`]: the campaign as a reader reads it, read-only: the index, the compendium as an
//!   audience may read it, the sources, the search and its passages.
//! - [`oracle`]: one question in, one cited answer out, from the [`notes`] and a chat model:
//!   the façade the CLI and the bot call.
//! - [`timeline`]: campaign time for the table: an entity's sessions in order, a session's recap.
//! - [`conversation`]: the conversations' history, kept in the campaign's index with the
//!   audience each exchange was answered for.
//! - [`feedback`]: what the players asked, kept for the DM: each answered question, the notes
//!   it cited, whether the notes held an answer, the players' 👍/👎 (`oraculo asked`).
//! - [`llm`]: transport to models: embedders ([`llm::embed`]: embedded e5-small, Ollama) and chat
//!   models ([`llm::chat`]: llama.cpp in-process, Ollama, OpenAI-compatible servers).
//! - [`discord`]: the bot: `/oraculo` with cited embeds, threads for follow-ups, `/reingest`.
//!
//! [`mcp`] serves the same tools to assistants that speak the Model Context Protocol
//! (`oraculo mcp`).
//!
//! [`doctor`] checks that an install can answer (`oraculo doctor`, and the bot at its start).
//!
//! [`app`] is what the CLI, the bot and the evaluation share above the pipeline (resolving a
//! campaign, opening its oracle). [`redacted`] is the one type for values no log may show
//! (the Discord token, an API key). [`config`], [`logging`] and [`cli`] are the edges;
//! [`sample`] is the built-in campaign, and [`eval`] runs a question bank through every
//! variant of the pipeline and scores it.

pub mod app;
pub mod config;
pub mod logging;

pub mod answer;
pub mod compendium;
pub mod conversation;
pub mod corpus;
pub mod discord;
pub mod doctor;
pub mod feedback;
pub mod index;
pub mod ingest;
pub mod lexicon;
pub mod llm;
pub mod notes;
pub mod oracle;
pub mod prompt;
pub mod retrieve;
pub mod timeline;
pub mod watch;

pub mod cli;
pub mod eval;
pub mod mcp;
pub mod redacted;
pub mod sample;
pub mod text;
