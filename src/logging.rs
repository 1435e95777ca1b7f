//! The one place that builds the tracing subscriber.
//!
//! `ORACULO_LOG` filters (`info`, `oraculo=debug,lance=warn`, …; default [`DEFAULT_FILTER`]), and every
//! span logs its `time.busy` when it closes, which gives per-stage timings for free.
//! Logs go to stderr so `--json` output on stdout stays clean.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// Our warnings; LanceDB's deprecation notices and llama.cpp's model-loading chatter only when
/// they are errors (they say nothing a DM can act on).
pub const DEFAULT_FILTER: &str = "warn,lance=error,llama-cpp-2=error";

/// Installs the subscriber; a second call (tests) is a no-op. Colours only on a terminal:
/// a log written to a pipe or a file (a service's journal, `2> log`) carries no ANSI codes.
pub fn init() {
    use std::io::IsTerminal;
    let filter = EnvFilter::try_from_env("ORACULO_LOG").unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}
