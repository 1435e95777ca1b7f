//! `oraculo doctor`: whether this install can answer, one line per check, each ✗ with its fix.
//!
//! - this module: the report (text and `--json`), the configuration, the folders and the index;
//! - `models`: Ollama's pulled models (`/api/tags`), the embedder, the chat model and its window;
//! - `discord`: the token, the ids, and Discord's own view of the application (its id, the
//!   invite URL, the Message Content intent, the servers the bot is in), over plain REST.
//!
//! `oraculo bot` runs the same checks before it connects ([`preflight`]) and refuses to start
//! on a ✗ that leaves it unable to answer ([`Check::blocks_bot`]), printing that line.

mod discord;
mod models;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;

use crate::config::{CliOverrides, Config};

pub use discord::{BOT_PERMISSIONS, DISCORD_API, invite_url, token_problem};

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// Works, with something to know (notes changed since the ingest).
    Warn,
    Fail,
    /// Not checked: what it needs is missing or not configured (said in the detail).
    Skip,
}

impl Status {
    fn mark(self) -> &'static str {
        match self {
            Status::Ok => "✓",
            Status::Warn => "!",
            Status::Fail => "✗",
            Status::Skip => "-",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// A stable name for scripts (`config`, `index`, `ollama_models`, `discord_intent`…).
    pub check: String,
    pub status: Status,
    /// What was found, in one sentence.
    pub detail: String,
    /// What to do about a ✗ (or a !): a command or a setting, exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
    /// A ✗ that leaves the bot unable to answer anyone: `oraculo bot` refuses to start on it.
    pub blocks_bot: bool,
    /// What was measured, for scripts (fragment counts, the window, the application id…).
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    pub facts: serde_json::Value,
}

impl Check {
    pub fn ok(check: &str, detail: impl Into<String>) -> Check {
        Check::new(check, Status::Ok, detail, None)
    }
    pub fn skip(check: &str, detail: impl Into<String>) -> Check {
        Check::new(check, Status::Skip, detail, None)
    }
    pub fn warn(check: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(check, Status::Warn, detail, Some(fix.into()))
    }
    pub fn fail(check: &str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check::new(check, Status::Fail, detail, Some(fix.into()))
    }
    fn new(check: &str, status: Status, detail: impl Into<String>, fix: Option<String>) -> Check {
        Check {
            check: check.to_string(),
            status,
            detail: detail.into(),
            fix,
            blocks_bot: false,
            facts: serde_json::Value::Null,
        }
    }
    /// Marks a ✗ as one the bot cannot run with.
    pub fn blocking(mut self) -> Check {
        self.blocks_bot = self.status == Status::Fail;
        self
    }
    pub fn with_facts(mut self, facts: serde_json::Value) -> Check {
        self.facts = facts;
        self
    }

    /// The check as the text report prints it: the mark, the detail, the fix indented below.
    pub fn line(&self) -> String {
        let mut line = format!("{} {}", self.status.mark(), self.detail);
        if let Some(fix) = &self.fix {
            line.push_str(&format!("\n    fix: {fix}"));
        }
        line
    }
}

/// Every check, in the order run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// No ✗.
    pub ok: bool,
    pub checks: Vec<Check>,
    pub seconds: f64,
}

impl Report {
    fn finish(checks: Vec<Check>, started: Instant) -> Report {
        let ok = checks.iter().all(|check| check.status != Status::Fail);
        Report { ok, checks, seconds: started.elapsed().as_secs_f64() }
    }

    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|check| check.status == Status::Fail)
    }

    /// The checks that keep the bot from starting.
    pub fn blocking(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|check| check.blocks_bot)
    }

    /// The text report: one line per check, then the verdict.
    pub fn render(&self) -> String {
        let mut out: String = self.checks.iter().map(|check| check.line() + "\n").collect();
        let failed = self.failures().count();
        out.push_str(&match failed {
            0 => format!("All checks pass ({:.1} s).\n", self.seconds),
            1 => format!("1 check failed ({:.1} s): fix it and run `oraculo doctor` again.\n", self.seconds),
            n => format!("{n} checks failed ({:.1} s): fix them and run `oraculo doctor` again.\n", self.seconds),
        });
        out
    }
}

/// What the doctor may do beyond reading.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Ask the embedder for a vector and the chat model for a few tokens (`oraculo doctor`);
    /// off at the bot's start, which connects the models itself right after.
    pub probe_models: bool,
    /// The HTTP client that reaches `https://discord.com` (a test's stand-in, a program's own
    /// proxy or CA); `None`: a plain client, or `discord.proxy_url` when configured.
    pub discord_client: Option<reqwest::Client>,
}

/// `oraculo doctor`: loads the configuration as every command does, then checks the rest.
pub async fn run(overrides: &CliOverrides, options: &Options) -> Report {
    let started = Instant::now();
    let file = overrides.config_file.clone().or_else(|| std::env::var_os("ORACULO_CONFIG").map(Into::into));
    let config = match Config::load(overrides) {
        Ok(config) => config,
        Err(err) => {
            let check = Check::fail(
                "config",
                format!("the configuration does not load: {err:#}"),
                "correct the key it names (config.toml.example lists every key)",
            )
            .blocking();
            return Report::finish(vec![check], started);
        }
    };
    let source = file.map_or_else(
        || "no config file: defaults and ORACULO_* variables".to_string(),
        |path| format!("config {} parses", path.display()),
    );
    let mut checks = vec![Check::ok("config", source)];
    checks.extend(diagnose(&config, options).await);
    Report::finish(checks, started)
}

/// The checks after the configuration, for a configuration already loaded.
pub async fn diagnose(config: &Config, options: &Options) -> Vec<Check> {
    let mut checks = Vec::new();
    checks.push(data_dir_check(&config.data_dir));
    for named in &config.campaigns {
        let several = config.campaigns.len() > 1;
        let who = if several { format!("campaign {}: ", named.name) } else { String::new() };
        let (campaign_dir, index_dir) = match crate::app::campaign_paths(config, &named.campaign) {
            Ok(paths) => paths,
            Err(err) => {
                checks.push(Check::fail("campaign", format!("{who}{err:#}"), "check campaign.dir").blocking());
                continue;
            }
        };
        let is_sample = named.campaign.dir.is_none();
        checks.push(campaign_check(&who, &campaign_dir, is_sample));
        checks.push(index_check(&who, &campaign_dir, &index_dir, &named.campaign));
        checks.push(secrets_check(&who, config, &named.campaign));
    }
    checks.extend(models::checks(config, options).await);
    checks.extend(discord::checks(config, options).await);
    checks
}

/// The bot's checks before it connects: every one but the model probes (the bot connects
/// the models next, and says so itself if one fails). `Err` holds the lines that keep it
/// from starting.
pub async fn preflight(config: &Config, discord_client: Option<reqwest::Client>) -> Result<Report, String> {
    let started = Instant::now();
    let options = Options { probe_models: false, discord_client };
    let mut checks = vec![Check::ok("config", "the configuration loads")];
    checks.extend(diagnose(config, &options).await);
    let report = Report::finish(checks, started);
    for check in &report.checks {
        match check.status {
            Status::Fail | Status::Warn => tracing::warn!(check = %check.check, "doctor: {}", check.line()),
            Status::Ok | Status::Skip => tracing::info!(check = %check.check, "doctor: {}", check.detail),
        }
    }
    let blocking: Vec<String> = report.blocking().map(Check::line).collect();
    if blocking.is_empty() {
        Ok(report)
    } else {
        Err(format!(
            "the bot cannot answer with this install (`oraculo doctor` checks it all):\n{}",
            blocking.join("\n")
        ))
    }
}

/// A scratch file's name: written and removed to prove the data dir takes writes.
const WRITE_PROBE: &str = ".oraculo-doctor-probe";

/// What the notes hide from players, counted, pointing at `oraculo secrets` for the list.
fn secrets_check(who: &str, config: &Config, campaign: &crate::config::CampaignConfig) -> Check {
    match crate::app::audit_secrets(config, campaign) {
        Ok((_, audit)) => {
            let detail = format!(
                "{who}hidden from players: {} note(s) whole and {} passage(s) ({:.1} % of the words stay visible); {} visible line(s) hold a GM word — `oraculo secrets` lists them",
                audit.hidden_notes.len(),
                audit.hidden_passages.len(),
                audit.player_share() * 100.0,
                audit.check.len()
            );
            Check::ok("secrets", detail).with_facts(serde_json::json!({
                "hidden_notes": audit.hidden_notes.len(),
                "hidden_passages": audit.hidden_passages.len(),
                "check_lines": audit.check.len(),
                "player_share": audit.player_share(),
            }))
        }
        Err(err) => Check::skip("secrets", format!("{who}the notes cannot be read: {err:#}")),
    }
}

fn data_dir_check(data_dir: &Path) -> Check {
    let shown = data_dir.display();
    let written = crate::index::create_missing_dirs_private(data_dir).and_then(|()| {
        let probe = data_dir.join(WRITE_PROBE);
        std::fs::write(&probe, b"probe")?;
        std::fs::remove_file(&probe)
    });
    match written {
        Ok(()) => Check::ok("data_dir", format!("data dir {shown} is writable")),
        Err(err) => Check::fail(
            "data_dir",
            format!("data dir {shown} is not writable: {err}"),
            format!(
                "give this user write access to {shown} (chown it), or point data_dir / ORACULO_DATA / --data elsewhere"
            ),
        )
        .blocking(),
    }
}

fn campaign_check(who: &str, campaign_dir: &Path, is_sample: bool) -> Check {
    let shown = campaign_dir.display();
    match std::fs::read_dir(campaign_dir) {
        Ok(entries) => {
            let n = entries.count();
            let what = if is_sample { "the built-in sample campaign, written out at" } else { "campaign folder" };
            Check::ok("campaign", format!("{who}{what} {shown} is readable ({n} entries at its top)"))
        }
        Err(err) => Check::fail(
            "campaign",
            format!("{who}campaign folder {shown} cannot be read: {err}"),
            "set campaign.dir (or --campaign) to the notes folder, readable by this user (a container mounts it at /campaign)",
        ),
    }
}

fn index_check(who: &str, campaign_dir: &Path, index_dir: &Path, campaign: &crate::config::CampaignConfig) -> Check {
    let sqlite = index_dir.join("index.sqlite");
    let ingest_fix = match campaign.dir.as_deref() {
        Some(dir) => format!("oraculo ingest --campaign {}", dir.display()),
        None => "oraculo ingest".to_string(),
    };
    if !sqlite.is_file() {
        return Check::fail("index", format!("{who}no index yet for {}", campaign_dir.display()), ingest_fix);
    }
    let written = last_written(&sqlite);
    let store = match crate::index::Store::open(&sqlite) {
        Ok(store) => store,
        Err(err) => {
            return Check::fail(
                "index",
                format!("{who}the index {} cannot be opened: {err}", sqlite.display()),
                ingest_fix,
            );
        }
    };
    let (fragments, stored) = match (store.n_fragments(), store.file_hashes()) {
        (Ok(fragments), Ok(stored)) => (fragments, stored),
        (Err(err), _) | (_, Err(err)) => {
            return Check::fail("index", format!("{who}the index cannot be read: {err}"), ingest_fix);
        }
    };
    let ago = written.map_or_else(|| "at an unknown time".to_string(), |at| format!("{} ago", age(at)));
    let changed = crate::ingest::note_hashes(campaign_dir, campaign).map(|notes| NoteChanges::between(&notes, &stored));
    let facts = |changes: Option<&NoteChanges>| {
        serde_json::json!({
            "fragments": fragments,
            "files": stored.len(),
            "ingested_unix": written.and_then(|at| at.duration_since(SystemTime::UNIX_EPOCH).ok()).map(|d| d.as_secs()),
            "notes_changed_since": changes.map(NoteChanges::total),
        })
    };
    let head = format!("{who}index: {fragments} fragments from {} notes, ingested {ago}", stored.len());
    match changed {
        Ok(changes) if changes.total() == 0 => {
            Check::ok("index", format!("{head}; no note changed since")).with_facts(facts(Some(&changes)))
        }
        Ok(changes) => Check::warn("index", format!("{head}; since then {}", changes.describe()), ingest_fix)
            .with_facts(facts(Some(&changes))),
        Err(err) => Check::warn("index", format!("{head}; the notes cannot be compared: {err}"), ingest_fix)
            .with_facts(facts(None)),
    }
}

/// Notes on disk against the files the index stored.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct NoteChanges {
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
}

impl NoteChanges {
    pub fn between(notes: &[(String, String)], stored: &std::collections::HashMap<String, String>) -> NoteChanges {
        let mut changes = NoteChanges::default();
        for (path, hash) in notes {
            match stored.get(path) {
                None => changes.added += 1,
                Some(stored_hash) if stored_hash != hash => changes.changed += 1,
                Some(_) => {}
            }
        }
        let on_disk: std::collections::HashSet<&str> = notes.iter().map(|(path, _)| path.as_str()).collect();
        changes.removed = stored.keys().filter(|path| !on_disk.contains(path.as_str())).count();
        changes
    }

    pub fn total(&self) -> usize {
        self.added + self.changed + self.removed
    }

    fn describe(&self) -> String {
        let parts: Vec<String> = [(self.changed, "changed"), (self.added, "new"), (self.removed, "removed")]
            .iter()
            .filter(|(n, _)| *n > 0)
            .map(|(n, what)| format!("{n} {what}"))
            .collect();
        format!("{} note(s): the answers do not know them yet", parts.join(", "))
    }
}

/// When SQLite last wrote the index: the newer of the file and its write-ahead log (a
/// commit lands in the log first).
fn last_written(sqlite: &Path) -> Option<SystemTime> {
    let mut wal = sqlite.as_os_str().to_owned();
    wal.push("-wal");
    [sqlite.to_path_buf(), wal.into()]
        .iter()
        .filter_map(|path| std::fs::metadata(path).and_then(|meta| meta.modified()).ok())
        .max()
}

/// "3 min", "5 h", "2 days": how long ago, roughly.
fn age(at: SystemTime) -> String {
    let seconds = SystemTime::now().duration_since(at).unwrap_or(Duration::ZERO).as_secs();
    match seconds {
        0..60 => format!("{seconds} s"),
        60..7200 => format!("{} min", seconds / 60),
        7200..172_800 => format!("{} h", seconds / 3600),
        _ => format!("{} days", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(notes: &[(&str, &str)], stored: &[(&str, &str)], expected: NoteChanges) {
        let notes: Vec<(String, String)> = notes.iter().map(|(p, h)| (p.to_string(), h.to_string())).collect();
        let stored = stored.iter().map(|(p, h)| (p.to_string(), h.to_string())).collect();
        assert_eq!(NoteChanges::between(&notes, &stored), expected);
    }

    #[test]
    fn notes_are_compared_with_the_index_by_path_and_hash() {
        check(&[("a.md", "1")], &[("a.md", "1")], NoteChanges::default());
        check(
            &[("a.md", "2"), ("b.md", "1")],
            &[("a.md", "1"), ("c.md", "1")],
            NoteChanges { added: 1, changed: 1, removed: 1 },
        );
    }

    #[test]
    fn a_failure_prints_its_fix_below_it_and_only_blocking_failures_block() {
        let failed = Check::fail("index", "no index yet", "oraculo ingest").blocking();
        assert_eq!(failed.line(), "✗ no index yet\n    fix: oraculo ingest");
        assert!(failed.blocks_bot);
        assert!(!Check::ok("config", "fine").blocking().blocks_bot, "only a ✗ blocks");
        let report = Report::finish(vec![Check::ok("config", "fine"), failed], Instant::now());
        assert!(!report.ok);
        assert!(report.render().contains("1 check failed"), "{}", report.render());
    }
}
