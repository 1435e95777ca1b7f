//! One type for values that must never reach a log, an error or a `Debug` print: the Discord
//! token and an OpenAI-compatible server's API key (redaction was written twice).

use serde::Deserialize;

/// A value that must never reach a log or an error message: its `Debug` and `Display` print
/// `[redacted]`. [`Redacted::expose`] is the one way to the value, for the place that sends it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Redacted<T>(T);

impl<T> Redacted<T> {
    pub fn new(value: T) -> Redacted<T> {
        Redacted(value)
    }

    /// The value itself, for the one place that sends it (the Discord client).
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> std::fmt::Debug for Redacted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl<T> std::fmt::Display for Redacted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}
