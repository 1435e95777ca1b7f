//! Integration tests: one binary (each extra test binary would re-link LanceDB).
//! Real SQLite files and LanceDB tables in temp dirs; Ollama is a local stand-in that speaks
//! its wire format; the embedded e5 model is the real one.

mod bot;
mod fake_discord;
mod fake_ollama;
mod harness;
mod http;

mod answer;
mod architecture;
mod canary;
mod chat;
mod compose;
mod discord;
mod docs;
mod doctor;
mod embedded;
mod eval;
mod feedback;
mod first_answer;
mod guard;
mod ingest;
mod init;
mod instant;
mod mcp;
mod pin;
mod quoted;
mod restart;
mod retrieve;
mod robustness;
mod secrets;
mod servers;
mod structured;
mod time;
mod watch;
