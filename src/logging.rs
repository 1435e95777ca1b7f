//! The one place that builds the tracing subscriber.
//!
//! `ORACULO_LOG` filters (`info`, `oraculo=debug,lance=warn`, …; default [`DEFAULT_FILTER`]), and every
//! span logs its `time.busy` when it closes, which gives per-stage timings for free.
//! Logs go to stderr so `--json` output on stdout stays clean.
//!
//! On a terminal, stdout and stderr are one screen: a warning written while an answer streams
//! would land in the middle of it. [`hold_on_terminal`] keeps the log lines back while a
//! command prints its answer and writes them under it when the answer is done.

use std::io::Write;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// Our warnings; LanceDB's deprecation notices and llama.cpp's model-loading chatter only when
/// they are errors (they say nothing a DM can act on).
pub const DEFAULT_FILTER: &str = "warn,lance=error,llama-cpp-2=error";

/// serenity's HTTP spans print each request's route, and an interaction's route holds its
/// token (an answer's credential for 15 minutes): they stay off whatever `ORACULO_LOG` asks.
const NEVER_LOGGED: &str = "serenity::http=warn";

/// The log lines written while an answer is printed on a terminal (`Some` while held).
static HELD_LINES: Mutex<Option<Vec<u8>>> = Mutex::new(None);

/// Installs the subscriber; a second call (tests) is a no-op. Colours only on a terminal:
/// a log written to a pipe or a file (a service's journal, `2> log`) carries no ANSI codes.
/// On a terminal a line has no timestamp (the person reading it is there now); in a journal
/// or a file it has one.
pub fn init() {
    use std::io::IsTerminal;
    let mut filter = EnvFilter::try_from_env("ORACULO_LOG").unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    if let Ok(directive) = NEVER_LOGGED.parse() {
        filter = filter.add_directive(directive);
    }
    let on_terminal = std::io::stderr().is_terminal();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(FmtSpan::CLOSE)
        .with_ansi(on_terminal)
        .with_writer(|| StderrUnlessHeld);
    let _ = if on_terminal { builder.without_time().try_init() } else { builder.try_init() };
}

/// While it lives, log lines wait instead of interleaving with the answer on the screen;
/// dropped, it writes them to stderr, in order.
pub struct HeldLogs(());

/// Holds the log lines back while a command prints an answer, when stdout and stderr are the
/// same terminal. `None` (nothing held) when either is a pipe or a file: there the two
/// streams are apart already, and a log read later wants its lines as they came.
pub fn hold_on_terminal() -> Option<HeldLogs> {
    use std::io::IsTerminal;
    if !(std::io::stdout().is_terminal() && std::io::stderr().is_terminal()) {
        return None;
    }
    Some(hold())
}

/// Holds the log lines back whatever the streams are (what [`hold_on_terminal`] does on a
/// terminal; tests call it directly).
pub fn hold() -> HeldLogs {
    if let Ok(mut held) = HELD_LINES.lock() {
        held.get_or_insert_with(Vec::new);
    }
    HeldLogs(())
}

impl Drop for HeldLogs {
    fn drop(&mut self) {
        let lines = HELD_LINES.lock().ok().and_then(|mut held| held.take()).unwrap_or_default();
        if !lines.is_empty() {
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(&lines);
            let _ = stderr.flush();
        }
    }
}

/// The subscriber's writer: stderr, or the held lines while an answer is printed.
struct StderrUnlessHeld;

impl Write for StderrUnlessHeld {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut held) = HELD_LINES.lock()
            && let Some(lines) = held.as_mut()
        {
            lines.extend_from_slice(bytes);
            return Ok(bytes.len());
        }
        std::io::stderr().write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::{HELD_LINES, StderrUnlessHeld, hold};

    fn held_text() -> Option<String> {
        HELD_LINES.lock().unwrap().as_ref().map(|lines| String::from_utf8_lossy(lines).into_owned())
    }

    #[test]
    fn a_line_logged_while_an_answer_prints_waits_for_it() {
        let held = hold();
        StderrUnlessHeld.write_all(b"WARN rerank skipped\n").unwrap();
        assert_eq!(
            held_text().as_deref(),
            Some("WARN rerank skipped\n"),
            "held, not written between the answer's lines"
        );
        drop(held);
        assert_eq!(held_text(), None, "written out when the answer is done, and nothing held after");
    }
}
