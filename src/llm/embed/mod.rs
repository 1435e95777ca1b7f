//! The [`Embedder`](super::Embedder) backends: multilingual-e5-small in this process
//! ([`e5`]), the default on a fresh machine, and Ollama's `/api/embed` ([`ollama`]); either remembered where the
//! answering side asks for the same texts again ([`remembered`]).

pub mod e5;
pub mod ollama;
pub mod remembered;
