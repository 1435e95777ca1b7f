//! The [`Embedder`](super::Embedder) backends: multilingual-e5-small in this process
//! ([`e5`]), the default on a fresh machine, and Ollama's `/api/embed` ([`ollama`]).

pub mod e5;
pub mod ollama;
