//! The watched vault: a campaign folder followed as the DM saves, each burst of saves read by
//! one incremental ingest, and the fragments it made annotated in the background.
//!
//! 1. changes come from the system's file events (`notify`), or from scanning the folder
//!    where events do not arrive (a network or sync mount, see [`mount_needs_polling`]);
//! 2. a change counts when it touches a note the ingest reads ([`ingest::reads_path`]): a
//!    save in `.obsidian/`, an editor's hidden swap file or the index's own files do not;
//! 3. after `debounce` without another change, one [`ingest_campaign`]: only what changed is
//!    embedded and written, committed at once (a question meanwhile reads the last committed
//!    index, as during `/reingest`); changes made during it start the next one;
//! 4. once the folder has been quiet for `annotate_after`, the new fragments are annotated
//!    by the chat model through [`ModelTurns`]: a question waiting for the model takes it
//!    back, and the annotation it interrupted is asked again afterwards.
//!
//! A note that cannot be read when an ingest runs (caught empty between an editor's truncate
//! and write, or unreadable) keeps its last indexed fragments until it reads (`ingest.rs`).

use std::collections::HashSet;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use notify::Watcher as _;
use serde::Serialize;
use tokio::sync::mpsc;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::config::{CampaignConfig, WatchConfig, WatchMode};
use crate::corpus::Diagnostic;
use crate::index::{Index, IndexError};
use crate::ingest::{
    self, AnnotationReport, IngestError, IngestSummary, MassRemoval, Quiet, annotate_new_fragments, ingest_campaign,
};
use crate::llm::Embedder;
use crate::llm::LlmError;
use crate::llm::chat::{ChatModel, ChatRequest, ChatResponse, TokenSink};

/// A burst that never pauses (a sync tool rewriting the folder) is still ingested this long
/// after its first change: the notes saved first should not wait for the last.
const MAX_BURST_WAIT: Duration = Duration::from_secs(10);
/// Another ingest holds the index (`/reingest`, `oraculo ingest`): try again this soon.
const BUSY_RETRY: Duration = Duration::from_secs(5);
/// The index or the embedder failed (a server down): try again this much later, not in a loop.
const FAILURE_RETRY: Duration = Duration::from_secs(30);
/// The folder has been quiet this long before the new fragments are annotated: a DM writing
/// during the session saves every few seconds, and each save makes new fragment text, so an
/// annotation made sooner pays the model for a version that is replaced a moment later.
pub const DEFAULT_ANNOTATE_AFTER: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot watch {path}: {source}")]
    Watch {
        path: String,
        #[source]
        source: notify::Error,
    },
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// The campaign a watcher follows.
#[derive(Debug, Clone)]
pub struct WatchTarget {
    pub campaign_dir: PathBuf,
    pub index_dir: PathBuf,
    pub campaign: CampaignConfig,
    pub batch_size: usize,
    /// Folders whose writes are never changes to the notes: the data dir (the index writes
    /// there on every ingest) when it lies inside the campaign folder.
    pub own_dirs: Vec<PathBuf>,
}

impl WatchTarget {
    /// The campaign in `campaign_dir`, indexed in `index_dir` under `data_dir`. Paths are
    /// compared as the system reports them, so both are resolved once here. The data dir is
    /// Oráculo's own, unless it holds the campaign (the sample is written out under it): then
    /// only its indexes and models are.
    pub fn new(
        campaign_dir: &Path,
        index_dir: &Path,
        data_dir: &Path,
        campaign: &CampaignConfig,
        batch_size: usize,
    ) -> WatchTarget {
        let resolve = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let (campaign_dir, data_dir) = (resolve(campaign_dir), resolve(data_dir));
        let own_dirs = if campaign_dir.starts_with(&data_dir) {
            vec![resolve(index_dir), data_dir.join("campaigns"), data_dir.join("models")]
        } else {
            vec![data_dir]
        };
        WatchTarget {
            campaign_dir,
            index_dir: index_dir.to_path_buf(),
            campaign: campaign.clone(),
            batch_size,
            own_dirs,
        }
    }
}

/// The timings of a watcher: the campaign's `watch` settings and when to annotate.
#[derive(Debug, Clone)]
pub struct WatchSettings {
    pub watch: WatchConfig,
    pub annotate_after: Duration,
}

impl WatchSettings {
    pub fn new(watch: &WatchConfig) -> WatchSettings {
        WatchSettings { watch: watch.clone(), annotate_after: DEFAULT_ANNOTATE_AFTER }
    }
}

/// The models a watcher uses: the embedder, and the chat model that annotates (`None`: the
/// fragments stay without annotations until `oraculo annotate` or `/reingest`).
pub struct WatchModels {
    pub embedder: Arc<dyn Embedder>,
    pub annotator: Option<Arc<dyn ChatModel>>,
}

/// How a watcher learns of changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeSource {
    Events,
    Poll,
}

/// What a watcher did, for whoever reports it (the CLI prints it, the bot may tell the DM).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum WatchReport {
    Watching {
        source: ChangeSource,
        reason: String,
    },
    Ingested(WatchedIngest),
    Annotated(AnnotationReport),
    Failed {
        error: String,
    },
    /// The mass-removal guard refused the ingest; the next change is read again.
    Refused(MassRemoval),
}

impl WatchReport {
    /// One line for a terminal.
    pub fn render(&self) -> String {
        match self {
            WatchReport::Watching { source, reason } => {
                let how = match source {
                    ChangeSource::Events => "watching",
                    ChangeSource::Poll => "polling",
                };
                format!("{how} the campaign folder ({reason}); Ctrl-C stops")
            }
            WatchReport::Ingested(ingested) => {
                let summary = &ingested.summary;
                let what = if ingested.catch_up { "read the folder" } else { "saved" };
                let mut line = format!(
                    "{what}: {} changed, {} removed, {} windows embedded; answerable {:.1} s after the change",
                    summary.files_changed,
                    summary.files_removed,
                    summary.windows_embedded,
                    ingested.seconds_since_change
                );
                for warning in &ingested.new_warnings {
                    let at = warning.line.map(|line| format!(":{line}")).unwrap_or_default();
                    line.push_str(&format!("\n  warning {}{at}: {}", warning.path, warning.message));
                }
                line
            }
            WatchReport::Annotated(report) => match &report.error {
                None => format!("annotated {} new fragments in {:.1} s", report.made, report.seconds),
                Some(error) => format!("annotated {} new fragments; stopped: {error}", report.made),
            },
            WatchReport::Failed { error } => format!("ingest failed, the previous index stays: {error}"),
            WatchReport::Refused(refused) => format!("ingest refused: {refused}"),
        }
    }
}

/// One ingest a burst of saves caused.
#[derive(Debug, Clone, Serialize)]
pub struct WatchedIngest {
    /// The first ingest a watcher runs reads what changed while nothing watched.
    pub catch_up: bool,
    /// Seconds from the first change of the burst to the commit: when it became answerable.
    pub seconds_since_change: f64,
    /// Warnings this ingest has that the one before did not (none on a catch-up).
    pub new_warnings: Vec<Diagnostic>,
    pub summary: IngestSummary,
}

/// The chat model's turns, shared with the questions: background work waits for a turn no
/// question wants, and gives it back when one does.
#[async_trait]
pub trait ModelTurns: Send + Sync {
    /// Waits until the model is free and no question waits for it; the turn lasts while the
    /// returned value lives.
    async fn background_turn(&self) -> Box<dyn Send + Sync>;
    /// Resolves once a question waits for the model.
    async fn question_waiting(&self);
}

/// A chat model that answers background work only in turns no question wants: a request
/// interrupted by a question is asked again in the next free turn.
pub struct YieldingChat {
    pub inner: Arc<dyn ChatModel>,
    pub turns: Arc<dyn ModelTurns>,
}

#[async_trait]
impl ChatModel for YieldingChat {
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn context_window(&self) -> usize {
        self.inner.context_window()
    }
    fn count_tokens(&self, text: &str) -> usize {
        self.inner.count_tokens(text)
    }
    fn is_smoke_test(&self) -> bool {
        self.inner.is_smoke_test()
    }
    async fn chat(&self, request: &ChatRequest, on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
        loop {
            let turn = self.turns.background_turn().await;
            // Dropping the request stops it (llama.cpp checks between tokens; a server
            // request is closed), so the question that wants the model gets it at once.
            tokio::select! {
                biased;
                () = self.turns.question_waiting() => {
                    drop(turn);
                    debug!("background annotation yields to a question");
                }
                response = self.inner.chat(request, on_token) => return response,
            }
        }
    }
}

/// Follows `target` until `stop` resolves: a catch-up ingest first (what changed while
/// nothing watched), then one ingest per burst of changes, each reported on `reports`.
/// Fails only when the folder cannot be watched at all or its index cannot be opened.
pub async fn watch_campaign(
    target: WatchTarget,
    models: WatchModels,
    settings: WatchSettings,
    reports: Option<mpsc::UnboundedSender<WatchReport>>,
    stop: impl Future<Output = ()>,
) -> Result<(), WatchError> {
    let span = info_span!("watch", campaign = %target.campaign_dir.display());
    async move {
        let (changes, mut received) = mpsc::unbounded_channel();
        let (_source, source, reason) = start_source(&target.campaign_dir, &settings.watch, changes)?;
        info!(source = ?source, %reason, "watching the campaign folder");
        let report = |message: WatchReport| {
            if let Some(reports) = &reports {
                let _ = reports.send(message);
            }
        };
        report(WatchReport::Watching { source, reason });
        let mut index = Index::open(&target.index_dir).await?;
        let folders = indexed_folders(&index);
        let mut state = WatchState { burst_started: Some(Instant::now()), folders, ..WatchState::default() };
        tokio::pin!(stop);
        loop {
            // Quiet: wait for a change, or annotate once the folder has been quiet long enough.
            if state.burst_started.is_none() {
                let annotate_in = state.annotate_at.map(|at| at.saturating_duration_since(Instant::now()));
                tokio::select! {
                    () = &mut stop => return Ok(()),
                    change = received.recv() => match change {
                        Some(change) if is_note_change(&change, &target, &state.folders) => {
                            state.burst_started = Some(Instant::now())
                        }
                        Some(_) => {}
                        None => return Ok(()),
                    },
                    () = sleep_or_never(annotate_in) => {
                        state.annotate_at = None;
                        let annotator = models.annotator.as_deref();
                        let embedder = models.embedder.as_ref();
                        tokio::select! {
                            () = &mut stop => return Ok(()),
                            outcome = annotate_in_background(&mut index, &target, embedder, annotator, &state.unannotated) => {
                                if let Some(annotated) = outcome {
                                    state.unannotated.clear();
                                    report(WatchReport::Annotated(annotated));
                                }
                            }
                            // A save: the annotations wait for the folder to be quiet again.
                            change = wait_for_note_change(&mut received, &target, &state.folders) => {
                                if change.is_none() { return Ok(()); }
                                state.burst_started = Some(Instant::now());
                            }
                        }
                    }
                }
                continue;
            }
            // A burst: wait until it pauses for `debounce`, then ingest once.
            let started = state.burst_started.unwrap_or_else(Instant::now);
            let quiet = settings.watch.debounce;
            if !debounce(&mut received, (&target, &state.folders), quiet, started, &mut stop).await {
                return Ok(());
            }
            let catch_up = state.warnings.is_none();
            match ingest_burst(&mut index, &target, models.embedder.as_ref(), &mut state, started, catch_up).await {
                Ok(ingested) => {
                    state.burst_started = None;
                    if models.annotator.is_some() && !state.unannotated.is_empty() {
                        state.annotate_at = Some(Instant::now() + settings.annotate_after);
                    }
                    report(WatchReport::Ingested(ingested));
                }
                Err(IngestError::MassRemoval(refused)) => {
                    // Only the DM can confirm it: asking again before the folder changes
                    // would refuse again, so the next change is what is read.
                    warn!(error = %refused, "watched ingest refused; the previous index stays");
                    state.burst_started = None;
                    report(WatchReport::Refused(refused));
                }
                Err(err) => {
                    let retry = if err.is_busy() { BUSY_RETRY } else { FAILURE_RETRY };
                    if err.is_busy() {
                        debug!(retry_s = retry.as_secs(), "another ingest holds the index; the changes wait");
                    } else {
                        warn!(error = %err, retry_s = retry.as_secs(), "watched ingest failed; the previous index stays");
                        report(WatchReport::Failed { error: err.to_string() });
                    }
                    tokio::select! {
                        () = &mut stop => return Ok(()),
                        () = tokio::time::sleep(retry) => {}
                    }
                }
            }
        }
    }
    .instrument(span)
    .await
}

/// What a watcher remembers between bursts.
#[derive(Default)]
struct WatchState {
    /// When the burst being gathered began; `None` while the folder is quiet.
    burst_started: Option<Instant>,
    /// The last ingest's warnings (`None` before the first), to tell which are new.
    warnings: Option<HashSet<Diagnostic>>,
    /// Content hashes the watcher's ingests made that are not annotated yet.
    unannotated: HashSet<String>,
    annotate_at: Option<Instant>,
    /// The folders that hold indexed notes, relative: a removed path is known for a folder by
    /// this, not by its name (`Arco.Viejo/` has what reads as an extension).
    folders: HashSet<PathBuf>,
}

/// Every folder (relative, with its ancestors) holding a note `index` has.
fn indexed_folders(index: &Index) -> HashSet<PathBuf> {
    let paths = index.store.file_hashes().map(|hashes| hashes.into_keys().collect()).unwrap_or_else(|err| {
        debug!(error = %err, "the indexed folders cannot be read; removed folders are told by their name");
        Vec::new()
    });
    let mut folders = HashSet::new();
    for path in paths {
        let mut folder = Path::new(&path).parent();
        while let Some(parent) = folder.filter(|parent| !parent.as_os_str().is_empty()) {
            if !folders.insert(parent.to_path_buf()) {
                break;
            }
            folder = parent.parent();
        }
    }
    folders
}

/// One ingest for a burst of changes, with what it added.
async fn ingest_burst(
    index: &mut Index,
    target: &WatchTarget,
    embedder: &dyn Embedder,
    state: &mut WatchState,
    started: Instant,
    catch_up: bool,
) -> Result<WatchedIngest, ingest::IngestError> {
    let before: HashSet<String> = index.store.content_hashes()?.into_iter().collect();
    let summary =
        ingest_campaign(index, &target.campaign_dir, &target.campaign, embedder, target.batch_size, &Quiet).await?;
    let seconds_since_change = started.elapsed().as_secs_f64();
    // A catch-up annotates nothing: the backlog of a campaign never annotated is the job of
    // `oraculo annotate` or `/reingest`, not of a background pass.
    if !catch_up {
        let after = index.store.content_hashes()?;
        state.unannotated.extend(after.into_iter().filter(|hash| !before.contains(hash)));
    }
    let warnings: HashSet<Diagnostic> = summary.warnings.iter().cloned().collect();
    let new_warnings = match &state.warnings {
        Some(previous) => summary.warnings.iter().filter(|w| !previous.contains(*w)).cloned().collect(),
        None => Vec::new(),
    };
    state.warnings = Some(warnings);
    state.folders = indexed_folders(index);
    info!(
        catch_up,
        n_changed = summary.files_changed,
        n_removed = summary.files_removed,
        n_windows = summary.windows_embedded,
        n_new_warnings = new_warnings.len(),
        seconds_since_change,
        "watched change ingested"
    );
    Ok(WatchedIngest { catch_up, seconds_since_change, new_warnings, summary })
}

/// The background annotation of the fragments `unannotated` names, then the entities it
/// extracted folded into the compendium (an ingest that embeds nothing). `None` without a
/// chat model or with nothing to do.
async fn annotate_in_background(
    index: &mut Index,
    target: &WatchTarget,
    embedder: &dyn Embedder,
    annotator: Option<&dyn ChatModel>,
    unannotated: &HashSet<String>,
) -> Option<AnnotationReport> {
    let chat = annotator?;
    if unannotated.is_empty() {
        return None;
    }
    let report = annotate_new_fragments(index, chat, unannotated, &Quiet).await;
    info!(n_made = report.made, n_missing = report.missing, error = ?report.error, "background annotations");
    if report.extractions_made > 0 {
        let merged =
            ingest_campaign(index, &target.campaign_dir, &target.campaign, embedder, target.batch_size, &Quiet).await;
        if let Err(err) = merged {
            debug!(error = %err, "the extracted entities wait for the next ingest");
        }
    }
    Some(report)
}

async fn sleep_or_never(duration: Option<Duration>) {
    match duration {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending().await,
    }
}

/// The next change to a note; `None` once the source is gone.
async fn wait_for_note_change(
    received: &mut mpsc::UnboundedReceiver<Change>,
    target: &WatchTarget,
    folders: &HashSet<PathBuf>,
) -> Option<()> {
    loop {
        let change = received.recv().await?;
        if is_note_change(&change, target, folders) {
            return Some(());
        }
    }
}

/// Waits until no note has changed for `quiet` (at most `MAX_BURST_WAIT` after `started`);
/// `false` when `stop` came first or the source is gone.
async fn debounce(
    received: &mut mpsc::UnboundedReceiver<Change>,
    (target, folders): (&WatchTarget, &HashSet<PathBuf>),
    quiet: Duration,
    started: Instant,
    stop: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
) -> bool {
    let latest = started + MAX_BURST_WAIT;
    let mut due = (Instant::now() + quiet).min(latest);
    loop {
        tokio::select! {
            () = stop.as_mut() => return false,
            () = tokio::time::sleep_until(due.into()) => return true,
            change = received.recv() => match change {
                Some(change) if is_note_change(&change, target, folders) => due = (Instant::now() + quiet).min(latest),
                Some(_) => {}
                None => return false,
            },
        }
    }
}

/// What the file-event source sends: an event, or its error (a lost event: rescan).
type Change = notify::Result<notify::Event>;

/// A running source of changes; dropping it stops it.
type Source = Box<dyn notify::Watcher + Send>;

/// Starts the source `config.mode` asks for: the system's events, or polling, which `Auto`
/// picks on a network or sync mount and when events cannot be set up. Returns it with why.
fn start_source(
    dir: &Path,
    config: &WatchConfig,
    changes: mpsc::UnboundedSender<Change>,
) -> Result<(Source, ChangeSource, String), WatchError> {
    let watch_error = |source| WatchError::Watch { path: dir.display().to_string(), source };
    let polled = |reason: String| -> Result<(Source, ChangeSource, String), WatchError> {
        let sender = changes.clone();
        let poll_config =
            notify::Config::default().with_poll_interval(config.poll_interval).with_compare_contents(true);
        let mut watcher =
            notify::PollWatcher::new(move |change| drop(sender.send(change)), poll_config).map_err(watch_error)?;
        watcher.watch(dir, notify::RecursiveMode::Recursive).map_err(watch_error)?;
        Ok((Box::new(watcher), ChangeSource::Poll, reason))
    };
    let every = format!("every {} ms", config.poll_interval.as_millis());
    match config.mode {
        WatchMode::Poll => return polled(format!("campaign.watch_mode = \"poll\": scanning {every}")),
        WatchMode::Auto => {
            if let Some(filesystem) = mount_needs_polling(dir) {
                return polled(format!("on a {filesystem} mount, where file events may not arrive: scanning {every}"));
            }
        }
        WatchMode::Events => {}
    }
    let sender = changes.clone();
    let events = notify::recommended_watcher(move |change| drop(sender.send(change))).and_then(|mut watcher| {
        watcher.watch(dir, notify::RecursiveMode::Recursive)?;
        Ok(watcher)
    });
    match events {
        Ok(watcher) => Ok((Box::new(watcher), ChangeSource::Events, "file events".to_string())),
        Err(err) if config.mode == WatchMode::Auto => {
            warn!(error = %err, "file events cannot be set up; polling the folder instead");
            polled(format!("file events cannot be set up ({err}): scanning {every}"))
        }
        Err(err) => Err(watch_error(err)),
    }
}

/// Whether `change` touches a note the ingest reads: a Markdown file, or a folder that may
/// hold some (created, moved, deleted), outside hidden and ignored folders and Oráculo's own.
/// A path gone can no longer be asked whether it was a folder: it was one when it has no
/// extension, or when `folders` (those holding indexed notes) has it.
fn is_note_change(change: &Change, target: &WatchTarget, folders: &HashSet<PathBuf>) -> bool {
    let event = match change {
        Ok(event) => event,
        // Lost events (an overflowed queue): whatever changed is read by the next ingest.
        Err(err) => {
            warn!(error = %err, "file events were lost; reading the folder again");
            return true;
        }
    };
    if event.need_rescan() {
        return true;
    }
    if matches!(event.kind, notify::EventKind::Access(_)) {
        return false;
    }
    let gone = matches!(
        event.kind,
        notify::EventKind::Remove(_) | notify::EventKind::Modify(notify::event::ModifyKind::Name(_))
    );
    event.paths.iter().any(|path| {
        if target.own_dirs.iter().any(|own| path.starts_with(own)) {
            return false;
        }
        let Ok(relative) = path.strip_prefix(&target.campaign_dir) else { return false };
        if !ingest::reads_path(relative, &target.campaign) {
            return false;
        }
        ingest::is_markdown(path)
            || path.is_dir()
            || (gone && (path.extension().is_none() || folders.contains(relative)))
    })
}

/// Filesystems where a change made elsewhere (another machine, the host of a VM, a sync
/// client) raises no event here: network shares, FUSE mounts (sshfs, rclone, most sync
/// clients), WSL's and VMs' shared folders.
const POLLED_FILESYSTEMS: &[&str] =
    &["nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "virtiofs", "vboxsf", "afs", "ceph", "glusterfs", "davfs", "fuse"];

/// The filesystem `dir` lies on, when it is one whose changes may raise no event
/// ([`POLLED_FILESYSTEMS`], `fuse.*` included; `fuseblk`, a local disk through FUSE, not).
/// Read from `/proc/self/mountinfo`; `None` where that cannot be read (not Linux).
pub fn mount_needs_polling(dir: &Path) -> Option<String> {
    let real = std::fs::canonicalize(dir).ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let filesystem = filesystem_of(&mountinfo, &real)?;
    let family = filesystem.split('.').next().unwrap_or(&filesystem);
    POLLED_FILESYSTEMS.contains(&family).then_some(filesystem)
}

/// The type of the mount holding `path` (the longest mount point that contains it).
fn filesystem_of(mountinfo: &str, path: &Path) -> Option<String> {
    mountinfo
        .lines()
        .filter_map(|line| {
            // "36 35 98:0 /root /mnt/point rw,noatime shared:1 - ext4 /dev/sda1 rw"
            let (left, right) = line.split_once(" - ")?;
            let mount_point = unescape_mountinfo(left.split(' ').nth(4)?);
            let filesystem = right.split(' ').next()?.to_string();
            path.starts_with(&mount_point).then_some((mount_point.components().count(), filesystem))
        })
        .max_by_key(|(depth, _)| *depth)
        .map(|(_, filesystem)| filesystem)
}

/// mountinfo writes a space, tab, newline and backslash in a path as octal escapes.
fn unescape_mountinfo(field: &str) -> PathBuf {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4).and_then(|digits| u8::from_str_radix(digits, 8).ok());
        match code {
            Some(byte) => {
                out.push(byte as char);
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    PathBuf::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:35 / /mnt/nas rw,relatime shared:20 - nfs4 nas:/export rw
41 22 0:36 / /home/dm/Dropbox\\040Vault rw,nosuid shared:21 - fuse.rclone remote: rw
42 22 8:17 / /media/usb rw,relatime shared:22 - fuseblk /dev/sdb1 rw
43 40 8:2 / /mnt/nas/local rw,relatime shared:23 - ext4 /dev/sda2 rw
";

    fn check_mount(path: &str, expected: Option<&str>) {
        let filesystem = filesystem_of(MOUNTINFO, Path::new(path));
        let needs = filesystem
            .filter(|fs| POLLED_FILESYSTEMS.contains(&fs.split('.').next().unwrap_or(fs)))
            .map(|fs| fs.to_string());
        assert_eq!(needs.as_deref(), expected, "{path}");
    }

    #[test]
    fn network_and_sync_mounts_are_polled_and_local_disks_are_not() {
        check_mount("/home/dm/Campaña", None);
        check_mount("/mnt/nas/Galerna", Some("nfs4"));
        check_mount("/home/dm/Dropbox Vault/Galerna", Some("fuse.rclone"));
        check_mount("/media/usb/notas", None);
        // The deepest mount holding the path decides.
        check_mount("/mnt/nas/local/notas", None);
    }

    fn target(dir: &Path) -> WatchTarget {
        let home = |key: &str| (key == "HOME").then(|| "/home/dm".to_string());
        let overrides = crate::config::CliOverrides::default();
        let campaign = crate::config::Config::from_layers(crate::config::RawConfig::default(), &home, &overrides)
            .expect("the defaults are valid")
            .campaign;
        WatchTarget {
            campaign_dir: dir.to_path_buf(),
            index_dir: dir.join("data/campaigns/x"),
            campaign,
            batch_size: 4,
            own_dirs: vec![dir.join("data")],
        }
    }

    fn check_change(kind: notify::EventKind, path: &str, expected: bool) {
        let dir = Path::new("/campaign");
        let event = notify::Event::new(kind).add_path(dir.join(path));
        let folders: HashSet<PathBuf> = ["Sesiones", "Arco.Viejo", "Arco.Viejo/Mapas"].map(PathBuf::from).into();
        assert_eq!(is_note_change(&Ok(event), &target(dir), &folders), expected, "{kind:?} {path}");
    }

    #[test]
    fn only_changes_to_notes_the_ingest_reads_count() {
        use notify::EventKind::{Access, Create, Modify, Remove};
        use notify::event::{AccessKind, CreateKind, DataChange, ModifyKind, RemoveKind, RenameMode};
        check_change(Modify(ModifyKind::Data(DataChange::Content)), "Sesiones/Sesion 3.md", true);
        check_change(Create(CreateKind::File), "Nueva.markdown", true);
        check_change(Remove(RemoveKind::File), "Vieja.md", true);
        check_change(Modify(ModifyKind::Name(RenameMode::To)), "Sesion 4.md", true);
        // A folder moved away: gone, so asked by its name.
        check_change(Remove(RemoveKind::Folder), "Sesiones", true);
        // A folder with a dot in its name, moved to `.trash/` or out of the vault.
        check_change(Remove(RemoveKind::Any), "Arco.Viejo", true);
        check_change(Modify(ModifyKind::Name(RenameMode::From)), "Arco.Viejo/Mapas", true);
        check_change(Remove(RemoveKind::File), "imagen.png", false);
        // The editor's own files, hidden folders, ignored folders, the index, reads.
        check_change(Modify(ModifyKind::Data(DataChange::Content)), ".obsidian/workspace.json", false);
        check_change(Create(CreateKind::File), ".Sesion 3.md.swp", false);
        check_change(Create(CreateKind::File), "Sesion 3.md~", false);
        check_change(Create(CreateKind::File), "Plantillas/Sesion.md", false);
        check_change(Create(CreateKind::File), ".trash/Vieja.md", false);
        check_change(Modify(ModifyKind::Data(DataChange::Content)), "data/campaigns/x/index.sqlite", false);
        check_change(Create(CreateKind::File), "data/sample/Nota.md", false);
        check_change(Access(AccessKind::Any), "Sesion 3.md", false);
        check_change(Create(CreateKind::File), "imagen.png", false);
    }

    /// A model whose first answer never ends (a long annotation), counting the requests.
    struct SlowFirstChat {
        calls: std::sync::atomic::AtomicUsize,
    }

    #[async_trait]
    impl ChatModel for SlowFirstChat {
        fn id(&self) -> &str {
            "slow-first"
        }
        fn context_window(&self) -> usize {
            2048
        }
        fn count_tokens(&self, text: &str) -> usize {
            text.len()
        }
        async fn chat(&self, _: &ChatRequest, _: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
            if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                std::future::pending::<()>().await;
            }
            Ok(ChatResponse {
                text: "annotated".into(),
                prompt_tokens: None,
                completion_tokens: None,
                cached_prompt_tokens: None,
            })
        }
    }

    /// Turns always free; a question waits from the moment `asked` is notified until taken.
    struct OneQuestion {
        asked: tokio::sync::Notify,
        waiting: std::sync::atomic::AtomicBool,
    }

    #[async_trait]
    impl ModelTurns for OneQuestion {
        async fn background_turn(&self) -> Box<dyn Send + Sync> {
            // The question takes its turn first; then the model is free again.
            self.waiting.store(false, std::sync::atomic::Ordering::SeqCst);
            Box::new(())
        }
        async fn question_waiting(&self) {
            if !self.waiting.load(std::sync::atomic::Ordering::SeqCst) {
                self.asked.notified().await;
                self.waiting.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }

    #[tokio::test]
    async fn a_background_request_gives_the_model_back_to_a_question_and_is_asked_again() {
        let inner = Arc::new(SlowFirstChat { calls: Default::default() });
        let turns = Arc::new(OneQuestion { asked: tokio::sync::Notify::new(), waiting: Default::default() });
        let chat = YieldingChat { inner: Arc::clone(&inner) as Arc<dyn ChatModel>, turns: Arc::clone(&turns) as _ };
        let request = ChatRequest { messages: Vec::new(), json_schema: None, max_tokens: 8, temperature: 0.0 };
        let answered = tokio::spawn(async move { chat.chat(&request, None).await.map(|response| response.text) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!answered.is_finished(), "the first request is still being written");
        turns.asked.notify_one();
        let text = tokio::time::timeout(Duration::from_secs(5), answered).await.unwrap().unwrap().unwrap();
        assert_eq!(text, "annotated");
        assert_eq!(inner.calls.load(std::sync::atomic::Ordering::SeqCst), 2, "interrupted once, asked again");
    }

    #[test]
    fn mountinfo_escapes_are_read() {
        assert_eq!(unescape_mountinfo("/a\\040b\\134c"), PathBuf::from("/a b\\c"));
        assert_eq!(unescape_mountinfo("/plain"), PathBuf::from("/plain"));
    }
}
