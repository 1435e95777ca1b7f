//! Ingest: campaign folder → corpus → index. The one stage that reads the notes from disk.
//!
//! 1. walk the folder (ignored paths, symlink loops, non-Markdown files skipped);
//! 2. read each note, refusing binaries and oversize files with a warning that names them;
//! 3. parse and fragment the whole campaign (cheap: labels depend on every file);
//! 4. embed only the fragments whose content hash has no vector yet, committing vectors to
//!    LanceDB batch by batch (an interrupted run keeps what it paid for);
//! 5. commit SQLite in one transaction, last; then drop orphaned vectors.
//!
//! Architecture invariant: a failure on one file is a [`Diagnostic`], never an abort; only the
//! index or the embedder failing stops an ingest, and then the previous index stays as it was.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use sha2::{Digest, Sha256};
use tracing::{Instrument, debug, info, info_span, warn};

use crate::answer::passages::central_sentences;
use crate::compendium::{Compendium, EntityMatcher, ExtractedEntity};
use crate::config::CampaignConfig;
use crate::corpus::text::embedding_windows;
use crate::corpus::{self, CorpusConfig, Diagnostic, Fragment, Note, NoteKind, Visibility};
use crate::index::store::{
    META_COMPENDIUM_EXTRACTIONS, META_COMPENDIUM_VERSION, META_DIMENSION, META_EMBEDDER, META_VECTOR_TABLE,
};
use crate::index::{
    CompendiumRecords, FileRecord, Index, IndexError, IngestChanges, MentionRecord, VectorRow, vector_table_name,
};
use crate::llm::chat::{ChatModel, ChatRequest};
use crate::llm::{EmbedRole, Embedder, LlmError};

/// Bump when the compendium's rules change, so the next ingest rebuilds it even if no note did.
pub const COMPENDIUM_VERSION: &str = "1";
/// Bytes read to decide whether a file is binary: a NUL in the first 8 KiB means it is.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error("campaign folder {path} cannot be read: {source}")]
    Campaign {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("embedding failed, the previous index is unchanged: {0}")]
    Embed(#[from] LlmError),
}

impl IngestError {
    /// Another ingest holds the index (this process's or another's): try again later.
    pub fn is_busy(&self) -> bool {
        matches!(self, IngestError::Index(IndexError::Busy { .. }))
    }
}

/// What an ingest did. `oraculo ingest --json` prints exactly this.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IngestSummary {
    pub campaign: String,
    pub files: usize,
    pub sessions: usize,
    pub sheets: usize,
    pub world_documents: usize,
    pub fragments: usize,
    pub dm_only_fragments: usize,
    pub entities: usize,
    pub files_changed: usize,
    pub files_removed: usize,
    pub warnings: Vec<Diagnostic>,
    pub embedder: String,
    pub embedding_calls: usize,
    pub windows_embedded: usize,
    pub vectors_dropped: usize,
    /// Extractive annotations made (a fragment's most central sentences, no model): one for
    /// every new fragment, so the summaries have a headline where no model wrote one.
    pub extractive_annotations: usize,
    /// The annotation pass that followed, when one ran.
    pub annotations: Option<AnnotationReport>,
    pub seconds: f64,
}

/// Progress, for a terminal bar or a Discord status line. Called from the ingest's task.
pub trait IngestProgress: Send + Sync {
    /// `total` windows are about to be embedded.
    fn embedding_started(&self, _total: usize) {}
    /// `n` more windows are done.
    fn embedded(&self, _n: usize) {}
    /// `total` fragments are about to be annotated.
    fn annotating_started(&self, _total: usize) {}
    /// `n` more fragments are annotated.
    fn annotated(&self, _n: usize) {}
}

/// No progress shown.
pub struct Quiet;
impl IngestProgress for Quiet {}

/// A note read from disk, before parsing.
struct NoteFile {
    path: String,
    bytes_hash: String,
    n_bytes: u64,
    text: String,
}

/// Every note an ingest of `campaign_dir` would read, as (path, sha256 of its bytes), in path
/// order: what `oraculo doctor` compares with the index to tell which notes changed since.
pub fn note_hashes(campaign_dir: &Path, config: &CampaignConfig) -> Result<Vec<(String, String)>, IngestError> {
    let mut diagnostics = Vec::new();
    let files = read_campaign(campaign_dir, config, &mut diagnostics)?;
    Ok(files.files.into_iter().map(|file| (file.path, file.bytes_hash)).collect())
}

/// Reads, fragments, embeds and indexes `campaign_dir` into `index`.
pub async fn ingest_campaign(
    index: &mut Index,
    campaign_dir: &Path,
    config: &CampaignConfig,
    embedder: &dyn Embedder,
    batch_size: usize,
    progress: &dyn IngestProgress,
) -> Result<IngestSummary, IngestError> {
    let started = Instant::now();
    let span = info_span!("ingest", campaign = %campaign_dir.display());
    async move {
        let _lock = index.lock_for_ingest()?;
        let mut diagnostics = Vec::new();

        let stored = index.store.file_fingerprints()?;
        let (note_files, kept) = {
            let _span = info_span!("ingest.read").entered();
            let read = read_campaign(campaign_dir, config, &mut diagnostics)?;
            keep_notes_being_written(read, &stored, &mut diagnostics)
        };
        let (notes, fragments) = {
            let _span = info_span!("ingest.split", n_files = note_files.len()).entered();
            let sources: Vec<(&str, &str)> =
                note_files.iter().map(|file| (file.path.as_str(), file.text.as_str())).collect();
            let (notes, note_diagnostics) = corpus::parse_campaign(&sources, &config.corpus);
            diagnostics.extend(note_diagnostics);
            let (fragments, fragment_diagnostics) = corpus::fragment_campaign(&notes, &config.corpus);
            diagnostics.extend(fragment_diagnostics);
            (notes, fragments)
        };
        let extracted = cached_extractions(index, &fragments)?;
        let n_extractions = extracted.len();
        let compendium = {
            let _span = info_span!("ingest.compendium", n_fragments = fragments.len(), n_extractions).entered();
            compendium_records(&notes, &fragments, extracted, &config.corpus)
        };
        let records = file_records(&note_files, &notes, fragments);

        let mut summary = summarize(campaign_dir, &records);
        summary.embedder = embedder.id().to_string();

        // What SQLite must change. A note being written keeps what the index holds of it.
        let present: HashSet<&str> =
            records.iter().map(|r| r.path.as_str()).chain(kept.iter().map(String::as_str)).collect();
        let removals: Vec<String> = stored.keys().filter(|p| !present.contains(p.as_str())).cloned().collect();
        let upserts: Vec<FileRecord> =
            records.iter().filter(|r| stored.get(&r.path) != Some(&r.fingerprint())).cloned().collect();
        summary.files_changed = upserts.len();
        summary.files_removed = removals.len();
        summary.entities = compendium.compendium.entities.len();
        // Entities depend on every note (a link in one file names an alias of another), so the
        // compendium is rewritten whole whenever any file changed, or its rules did.
        let compendium_stale = !upserts.is_empty()
            || !removals.is_empty()
            || index.store.compendium_version()?.as_deref() != Some(COMPENDIUM_VERSION)
            || index.store.meta(META_COMPENDIUM_EXTRACTIONS)? != Some(n_extractions.to_string());

        // What LanceDB lacks: every fragment of the new campaign needs its vectors, changed
        // file or not (a previous run may have been cut short, or the embedder changed).
        let table = vector_table_name(embedder.id(), embedder.dimension());
        let embedded = index.vectors.embedded_hashes(&table).await?;
        let mut pending: BTreeMap<&str, &Fragment> = BTreeMap::new();
        for fragment in records.iter().flat_map(|r| r.fragments.iter()) {
            if !embedded.contains(&fragment.content_hash) {
                pending.insert(&fragment.content_hash, fragment);
            }
        }
        let (calls, windows) =
            embed_fragments(index, &table, embedder, pending.values().copied(), batch_size, progress).await?;
        summary.embedding_calls = calls;
        summary.windows_embedded = windows;

        // SQLite last, in one transaction: the moment the new campaign becomes visible.
        let meta = vec![
            (META_VECTOR_TABLE.to_string(), table.clone()),
            (META_EMBEDDER.to_string(), embedder.id().to_string()),
            (META_DIMENSION.to_string(), embedder.dimension().to_string()),
            (META_COMPENDIUM_VERSION.to_string(), COMPENDIUM_VERSION.to_string()),
            (META_COMPENDIUM_EXTRACTIONS.to_string(), n_extractions.to_string()),
        ];
        diagnostics.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
        for diagnostic in &diagnostics {
            warn!(path = %diagnostic.path, line = diagnostic.line, "{}", diagnostic.message);
        }
        let matcher = EntityMatcher::new(&compendium.compendium);
        let changes = IngestChanges {
            upserts,
            removals,
            diagnostics: diagnostics.clone(),
            meta,
            compendium: compendium_stale.then_some(compendium),
        };
        index.store.apply_ingest(&changes)?;
        summary.extractive_annotations = annotate_extractively(index, &matcher)?;

        // Only now may vectors go: nothing committed refers to them any more.
        let keep: HashSet<String> = index.store.content_hashes()?.into_iter().collect();
        summary.vectors_dropped = index.vectors.drop_orphans(&table, &keep).await?;
        for dropped in index.vectors.drop_other_tables(&table).await? {
            info!(table = %dropped, "dropped the vectors of a previous embedder");
        }

        summary.warnings = diagnostics;
        summary.seconds = started.elapsed().as_secs_f64();
        info!(
            n_files = summary.files,
            n_fragments = summary.fragments,
            n_changed = summary.files_changed,
            n_windows = summary.windows_embedded,
            seconds = summary.seconds,
            "ingest complete"
        );
        Ok(summary)
    }
    .instrument(span)
    .await
}

/// Gives every fragment without one its extractive annotation (its most central sentences,
/// `answer::passages::central_sentences`), all in one transaction: no model, a few
/// milliseconds for a campaign. Returns how many were made.
fn annotate_extractively(index: &mut Index, matcher: &EntityMatcher) -> Result<usize, IngestError> {
    use crate::index::store::{EXTRACTIVE_ANNOTATION_VERSION, EXTRACTIVE_ANNOTATOR};
    let _span = info_span!("ingest.annotate_extractively").entered();
    let pending = index.store.fragments_missing_annotation(EXTRACTIVE_ANNOTATOR, EXTRACTIVE_ANNOTATION_VERSION)?;
    let names_in = |sentence: &str| matcher.count_mentions(sentence).iter().map(|(_, n)| *n as usize).sum();
    let made: Vec<(String, String)> = pending
        .iter()
        .map(|stored| (stored.fragment.content_hash.clone(), central_sentences(&stored.fragment.text, &names_in)))
        .filter(|(_, annotation)| !annotation.is_empty())
        .collect();
    index.store.put_annotations(&made, EXTRACTIVE_ANNOTATOR, EXTRACTIVE_ANNOTATION_VERSION)?;
    debug!(n_made = made.len(), "extractive annotations");
    Ok(made.len())
}

/// Tokens for a one-or-two-sentence annotation (~40 words) with room to finish the sentence.
const ANNOTATION_MAX_TOKENS: usize = 120;
/// Tokens for a session's entity list as JSON.
const ENTITIES_MAX_TOKENS: usize = 512;
/// An annotation longer than this is cut: it is a headline, not a second copy of the fragment.
const ANNOTATION_MAX_CHARS: usize = 400;

/// What an annotation pass did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AnnotationReport {
    /// The chat model that wrote them (part of the cache key), if one was reachable.
    pub model: Option<String>,
    pub made: usize,
    /// Fragments still without an annotation: the rerank stays off for pools holding them.
    pub missing: usize,
    /// Session fragments whose named entities were extracted (merged by the next ingest).
    pub extractions_made: usize,
    /// Why the pass stopped early, if it did.
    pub error: Option<String>,
    pub seconds: f64,
}

/// Annotates every fragment that has no cached annotation by `chat` under the current
/// prompt version. Each annotation is committed as soon as it is made; a failure stops the
/// pass (the rest stays missing, to be filled by the next ingest or `oraculo annotate`)
/// but is never an ingest error.
pub async fn annotate_fragments(
    index: &Index,
    chat: &dyn ChatModel,
    progress: &dyn IngestProgress,
) -> AnnotationReport {
    annotate_pending(index, chat, progress, None).await
}

/// Annotates, and extracts the entities of, only the fragments whose content hash is in
/// `new`: what a watched vault's last saves made. It takes no ingest lock, so that the next
/// save's ingest (or a `/reingest`) never waits behind it; the few fragments it covers could
/// at worst be annotated twice by a full pass running at the same time.
pub async fn annotate_new_fragments(
    index: &Index,
    chat: &dyn ChatModel,
    new: &HashSet<String>,
    progress: &dyn IngestProgress,
) -> AnnotationReport {
    annotate_pending(index, chat, progress, Some(new)).await
}

async fn annotate_pending(
    index: &Index,
    chat: &dyn ChatModel,
    progress: &dyn IngestProgress,
    only: Option<&HashSet<String>>,
) -> AnnotationReport {
    use crate::prompt::{ANNOTATE_PROMPT_VERSION, annotate_messages};
    let span = info_span!("ingest.annotate", model = chat.id(), scoped = only.is_some());
    let started = Instant::now();
    async move {
        let mut report = AnnotationReport { model: Some(chat.id().to_string()), ..Default::default() };
        // The ingest lock for a full pass: two at once would pay the model twice for the same
        // fragments.
        let _lock = match only {
            Some(_) => None,
            None => match index.lock_for_ingest() {
                Ok(lock) => Some(lock),
                Err(err) => {
                    report.error = Some(err.to_string());
                    return report;
                }
            },
        };
        let in_scope = |hash: &str| only.is_none_or(|only| only.contains(hash));
        let pending = match index.store.fragments_missing_annotation(chat.id(), ANNOTATE_PROMPT_VERSION) {
            Ok(pending) => pending.into_iter().filter(|s| in_scope(&s.fragment.content_hash)).collect::<Vec<_>>(),
            Err(err) => {
                report.error = Some(err.to_string());
                return report;
            }
        };
        report.missing = pending.len();
        progress.annotating_started(pending.len());
        for stored in &pending {
            let fragment = &stored.fragment;
            let request = ChatRequest {
                messages: annotate_messages(&fragment.label, &fragment.text),
                json_schema: None,
                max_tokens: ANNOTATION_MAX_TOKENS,
                temperature: 0.0,
            };
            let text = match chat.chat(&request, None).await {
                Ok(response) => clean_annotation(&response.text),
                Err(err) => {
                    warn!(error = %err, label = %fragment.label, "annotation stopped; the rest stays missing");
                    report.error = Some(err.to_string());
                    break;
                }
            };
            if text.is_empty() {
                warn!(label = %fragment.label, "the model returned an empty annotation");
                continue;
            }
            if let Err(err) =
                index.store.put_annotation(&fragment.content_hash, chat.id(), ANNOTATE_PROMPT_VERSION, &text)
            {
                report.error = Some(err.to_string());
                break;
            }
            report.made += 1;
            report.missing -= 1;
            progress.annotated(1);
        }
        if report.error.is_none() {
            extract_entities(index, chat, &in_scope, &mut report).await;
        }
        report.seconds = started.elapsed().as_secs_f64();
        report
    }
    .instrument(span)
    .await
}

/// The compendium's LLM source: named entities of each player-visible session fragment, cached
/// by content hash + model + prompt version like the annotations. The next ingest merges them.
async fn extract_entities(
    index: &Index,
    chat: &dyn ChatModel,
    in_scope: &dyn Fn(&str) -> bool,
    report: &mut AnnotationReport,
) {
    use crate::prompt::{ENTITIES_PROMPT_VERSION, entities_messages, entities_schema};
    #[derive(serde::Deserialize)]
    struct Extraction {
        entities: Vec<ExtractedEntity>,
    }
    let pending = match index.store.fragments_missing_annotation(chat.id(), ENTITIES_PROMPT_VERSION) {
        Ok(pending) => pending,
        Err(err) => {
            report.error = Some(err.to_string());
            return;
        }
    };
    let sessions = pending.iter().filter(|s| {
        s.fragment.kind == NoteKind::Session
            && s.fragment.visibility == Visibility::Player
            && in_scope(&s.fragment.content_hash)
    });
    for stored in sessions {
        let fragment = &stored.fragment;
        let request = ChatRequest {
            messages: entities_messages(&fragment.label, &fragment.text),
            json_schema: Some(entities_schema()),
            max_tokens: ENTITIES_MAX_TOKENS,
            temperature: 0.0,
        };
        let text = match chat.chat(&request, None).await {
            Ok(response) => response.text,
            Err(err) => {
                warn!(error = %err, label = %fragment.label, "entity extraction stopped");
                report.error = Some(err.to_string());
                return;
            }
        };
        let entities: Vec<ExtractedEntity> = match serde_json::from_str::<Extraction>(text.trim()) {
            Ok(extraction) => extraction.entities.into_iter().filter(|e| !e.name.trim().is_empty()).collect(),
            Err(err) => {
                // Cached as "nothing found": unchanged text is never sent again (a small model
                // that runs out of tokens would otherwise cost every ingest the same calls).
                warn!(error = %err, label = %fragment.label, "entity extraction is not valid JSON; recorded as empty");
                Vec::new()
            }
        };
        let json = serde_json::to_string(&entities).unwrap_or_else(|_| "[]".into());
        if let Err(err) = index.store.put_annotation(&fragment.content_hash, chat.id(), ENTITIES_PROMPT_VERSION, &json)
        {
            report.error = Some(err.to_string());
            return;
        }
        report.extractions_made += 1;
    }
}

/// One line, no surrounding quotes, at most `ANNOTATION_MAX_CHARS`.
fn clean_annotation(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = one_line.trim_matches(|c: char| c == '"' || c == '\'' || c == '`').trim();
    match trimmed.char_indices().nth(ANNOTATION_MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &trimmed[..cut]),
        None => trimmed.to_string(),
    }
}

/// Embeds the fragments' windows, committing a batch of whole fragments at a time.
async fn embed_fragments<'a>(
    index: &Index,
    table: &str,
    embedder: &dyn Embedder,
    fragments: impl Iterator<Item = &'a Fragment>,
    batch_size: usize,
    progress: &dyn IngestProgress,
) -> Result<(usize, usize), IngestError> {
    let windowed: Vec<(&Fragment, Vec<String>)> =
        fragments.map(|f| (f, embedding_windows(&f.text, embedder.window_words()))).collect();
    let total: usize = windowed.iter().map(|(_, w)| w.len()).sum();
    let span = info_span!("ingest.embed", n_fragments = windowed.len(), n_windows = total);
    async move {
        if total == 0 {
            return Ok((0, 0));
        }
        progress.embedding_started(total);
        let (mut calls, mut done) = (0, 0);
        let mut batch: Vec<(&Fragment, usize, String)> = Vec::new();
        let mut windowed = windowed.into_iter().peekable();
        while let Some((fragment, windows)) = windowed.next() {
            // A fragment's windows stay in one commit: a hash present in LanceDB is complete.
            for (window, text) in windows.into_iter().enumerate() {
                batch.push((fragment, window, text));
            }
            if batch.len() >= batch_size || windowed.peek().is_none() {
                let texts: Vec<String> = batch.iter().map(|(_, _, text)| text.clone()).collect();
                let vectors = embedder.embed(&texts, EmbedRole::Passage).await?;
                calls += 1;
                if vectors.len() != texts.len() {
                    return Err(IngestError::Embed(LlmError::BadResponse {
                        backend: embedder.id().to_string(),
                        detail: format!("{} vectors for {} texts", vectors.len(), texts.len()),
                    }));
                }
                let rows: Vec<VectorRow> = batch
                    .drain(..)
                    .zip(vectors)
                    .map(|((fragment, window, _), vector)| VectorRow {
                        content_hash: fragment.content_hash.clone(),
                        window: window as i32,
                        visibility: fragment.visibility,
                        vector,
                    })
                    .collect();
                index.vectors.add(table, embedder.dimension(), &rows).await?;
                done += rows.len();
                progress.embedded(rows.len());
            }
        }
        Ok((calls, done))
    }
    .instrument(span)
    .await
}

/// Entities a chat model extracted from the campaign's player-visible session fragments in
/// earlier annotation passes (cached by content hash), whichever model wrote them.
fn cached_extractions(index: &Index, fragments: &[Fragment]) -> Result<Vec<ExtractedEntity>, IndexError> {
    use crate::prompt::ENTITIES_PROMPT_VERSION;
    let hashes: Vec<&str> = fragments
        .iter()
        .filter(|f| f.kind == NoteKind::Session && f.visibility == Visibility::Player)
        .map(|f| f.content_hash.as_str())
        .collect();
    let mut extracted = Vec::new();
    for json in index.store.cached_outputs_any_model(&hashes, ENTITIES_PROMPT_VERSION)? {
        // Stored only after validation; a row that no longer parses is skipped, not fatal.
        extracted.extend(serde_json::from_str::<Vec<ExtractedEntity>>(&json).unwrap_or_default());
    }
    Ok(extracted)
}

/// The compendium of the whole campaign (deterministic sources, then what a chat model
/// extracted) and its mentions in every fragment.
fn compendium_records(
    notes: &[Note],
    fragments: &[Fragment],
    extracted: Vec<ExtractedEntity>,
    corpus: &CorpusConfig,
) -> CompendiumRecords {
    let mut compendium = Compendium::build(notes, corpus);
    compendium.merge_extracted(extracted);
    let matcher = EntityMatcher::new(&compendium);
    let mentions = crate::compendium::mentions(&compendium, &matcher, fragments)
        .into_iter()
        .filter_map(|mention| {
            let fragment = fragments.get(mention.fragment)?;
            Some(MentionRecord {
                entity: mention.entity,
                label: fragment.label.clone(),
                part: fragment.part,
                count: mention.count,
            })
        })
        .collect();
    CompendiumRecords { compendium, mentions }
}

fn file_records(files: &[NoteFile], notes: &[Note], fragments: Vec<Fragment>) -> Vec<FileRecord> {
    let mut by_path: BTreeMap<String, Vec<Fragment>> = BTreeMap::new();
    for fragment in fragments {
        by_path.entry(fragment.source_path.clone()).or_default().push(fragment);
    }
    files
        .iter()
        .zip(notes)
        .map(|(file, note)| FileRecord {
            path: file.path.clone(),
            content_hash: file.bytes_hash.clone(),
            kind: note.kind,
            title: note.title.clone(),
            aliases: note.aliases.clone(),
            tags: note.tags.clone(),
            n_bytes: file.n_bytes,
            fragments: by_path.remove(&file.path).unwrap_or_default(),
            links: note.links.clone(),
        })
        .collect()
}

fn summarize(campaign_dir: &Path, records: &[FileRecord]) -> IngestSummary {
    let mut labels: BTreeMap<(&str, NoteKind), ()> = BTreeMap::new();
    let mut summary =
        IngestSummary { campaign: campaign_dir.display().to_string(), files: records.len(), ..Default::default() };
    for fragment in records.iter().flat_map(|r| r.fragments.iter()) {
        summary.fragments += 1;
        if fragment.visibility == Visibility::DmOnly {
            summary.dm_only_fragments += 1;
        }
        labels.insert((fragment.label.as_str(), fragment.kind), ());
    }
    for (_, kind) in labels.keys() {
        match kind {
            NoteKind::Session => summary.sessions += 1,
            NoteKind::Sheet => summary.sheets += 1,
            NoteKind::World => summary.world_documents += 1,
        }
    }
    summary
}

/// What a walk of the campaign read: the notes, and the paths of notes that are there but
/// could not be read now (an I/O error, or no bytes at all: an editor caught between
/// truncating a note and writing it again).
struct CampaignRead {
    files: Vec<NoteFile>,
    unreadable: Vec<String>,
}

/// Sets aside the notes that could not be read now but that the index holds: their last
/// indexed fragments stay, with a warning, until a later ingest (the next save, when the
/// vault is watched) reads them. A note never indexed has nothing to keep: an empty one is
/// read as the empty note it is, and one that cannot be read is left out with its warning.
/// Returns the notes to parse and the paths kept as they are.
fn keep_notes_being_written(
    read: CampaignRead,
    stored: &std::collections::HashMap<String, String>,
    diagnostics: &mut Vec<Diagnostic>,
) -> (Vec<NoteFile>, Vec<String>) {
    let mut kept: Vec<String> = read.unreadable.into_iter().filter(|path| stored.contains_key(path)).collect();
    let mut files = Vec::with_capacity(read.files.len());
    for file in read.files {
        if file.n_bytes == 0 && stored.contains_key(&file.path) {
            kept.push(file.path);
        } else {
            files.push(file);
        }
    }
    for path in &kept {
        let message =
            "cannot be read now (empty, or being written): its last indexed version is kept until it reads".into();
        diagnostics.push(Diagnostic { path: path.clone(), line: None, message });
    }
    if !kept.is_empty() {
        info!(n_kept = kept.len(), "notes being written keep their last indexed fragments");
    }
    (files, kept)
}

/// Walks the campaign and reads every Markdown note, reporting what it cannot read.
///
/// A note reached through a symbolic link is read once, as the file it really is: under its
/// real path in the campaign, so that it has that path's visibility (`Mundo/Archivo ->
/// ../Secretos` leaves `Secretos/plan.md` GM-only, and never makes it `Mundo/Archivo/plan.md`).
/// A link whose target lies outside the campaign folder is not followed, with a warning.
fn read_campaign(
    campaign_dir: &Path,
    config: &CampaignConfig,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<CampaignRead, IngestError> {
    let campaign_error =
        |source: std::io::Error| IngestError::Campaign { path: campaign_dir.display().to_string(), source };
    let metadata = std::fs::metadata(campaign_dir).map_err(campaign_error)?;
    if !metadata.is_dir() {
        return Err(campaign_error(std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a folder")));
    }
    let root = std::fs::canonicalize(campaign_dir).map_err(campaign_error)?;
    let ignored: Vec<String> = config.ignore.iter().map(|i| corpus::fold(i)).collect();
    // Hidden folders and files (`.trash/`, `.obsidian/`, `.git/`) are never read, whatever
    // `ignore` says: a deleted note must not come back as campaign text.
    let is_read = |name: &str| !name.starts_with('.') && !ignored.contains(&corpus::fold(name));
    let mut files = Vec::new();
    let mut unreadable = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut links_out: Vec<Diagnostic> = Vec::new();
    let walker = walkdir::WalkDir::new(campaign_dir).follow_links(true).sort_by_file_name().into_iter();
    let walker = walker.filter_entry(|entry| {
        if entry.depth() == 0 {
            return true;
        }
        if !is_read(&entry.file_name().to_string_lossy()) {
            return false;
        }
        if !entry.path_is_symlink() {
            return true;
        }
        let problem = match std::fs::canonicalize(entry.path()) {
            Ok(real) if real.starts_with(&root) => return true,
            Ok(_) => "symbolic link to outside the campaign folder: not followed".to_string(),
            Err(err) => format!("symbolic link that cannot be followed: {err}"),
        };
        links_out.push(Diagnostic { path: relative(campaign_dir, entry.path()), line: None, message: problem });
        false
    });
    // Whether each folder on the way to the current entry was reached through a link: only
    // what was needs its real path looked up (one `canonicalize` per such file, none otherwise).
    let mut through_link: Vec<bool> = Vec::new();
    for entry in walker {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                let path = err.path().map(|p| relative(campaign_dir, p)).unwrap_or_else(|| ".".into());
                let message = if err.loop_ancestor().is_some() {
                    "symbolic link loop: not followed".to_string()
                } else {
                    format!("cannot read: {err}")
                };
                diagnostics.push(Diagnostic { path, line: None, message });
                continue;
            }
        };
        through_link.truncate(entry.depth());
        let linked = entry.path_is_symlink() || through_link.last().copied().unwrap_or(false);
        if !entry.file_type().is_file() {
            through_link.push(linked);
            continue;
        }
        let link_path = relative(campaign_dir, entry.path());
        if !linked {
            if is_markdown(entry.path()) && seen.insert(link_path.clone()) {
                match read_note_file(entry.path(), link_path, config.max_note_bytes, diagnostics) {
                    NoteRead::Read(file) => files.push(file),
                    NoteRead::Unreadable(path) => unreadable.push(path),
                    NoteRead::NotANote => {}
                }
            }
            continue;
        }
        let real = match std::fs::canonicalize(entry.path()) {
            Ok(real) => real,
            Err(err) => {
                diagnostics.push(Diagnostic { path: link_path, line: None, message: format!("cannot read: {err}") });
                continue;
            }
        };
        let Ok(real_relative) = real.strip_prefix(&root) else {
            let message = "symbolic link to outside the campaign folder: not followed".to_string();
            diagnostics.push(Diagnostic { path: link_path, line: None, message });
            continue;
        };
        if !is_markdown(&real) {
            continue;
        }
        let path = relative(Path::new(""), real_relative);
        // Reached through a link into a hidden or ignored folder: not read there either.
        let components: Vec<&str> = path.split('/').collect();
        if !components.iter().all(|component| is_read(component)) {
            let message = format!("symbolic link into {path}, which is never read: not followed");
            diagnostics.push(Diagnostic { path: link_path, line: None, message });
            continue;
        }
        if !seen.insert(path.clone()) {
            continue;
        }
        match read_note_file(entry.path(), path, config.max_note_bytes, diagnostics) {
            NoteRead::Read(file) => files.push(file),
            NoteRead::Unreadable(path) => unreadable.push(path),
            NoteRead::NotANote => {}
        }
    }
    diagnostics.extend(links_out);
    // Whichever way a file was reached first, the notes come in path order.
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(CampaignRead { files, unreadable })
}

/// Whether the walk reads what lies at `relative` (a path inside the campaign folder): no
/// part of it is hidden or ignored. The watcher asks it of every changed path, so that a
/// save in `.obsidian/` or an editor's hidden swap file never starts an ingest.
pub fn reads_path(relative: &Path, config: &CampaignConfig) -> bool {
    relative.components().all(|component| {
        let name = component.as_os_str().to_string_lossy();
        !name.starts_with('.') && !config.ignore.iter().any(|ignored| corpus::fold(ignored) == corpus::fold(&name))
    })
}

/// A Markdown note by its extension (`.md`, `.markdown`, any case).
pub fn is_markdown(path: &Path) -> bool {
    matches!(path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref(), Some("md" | "markdown"))
}

fn relative(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    relative.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/")
}

/// One note file, as read.
enum NoteRead {
    Read(NoteFile),
    /// It is there but could not be read now (its path): a later read may succeed.
    Unreadable(String),
    /// Binary or oversize: not a note, whenever it is read.
    NotANote,
}

/// Reads one note; what cannot be read comes with a diagnostic.
fn read_note_file(absolute: &Path, path: String, max_bytes: u64, diagnostics: &mut Vec<Diagnostic>) -> NoteRead {
    let mut report = |message: String| diagnostics.push(Diagnostic { path: path.clone(), line: None, message });
    let size = match std::fs::metadata(absolute) {
        Ok(metadata) => metadata.len(),
        Err(err) => {
            report(format!("cannot read: {err}"));
            return NoteRead::Unreadable(path);
        }
    };
    if size > max_bytes {
        report(format!(
            "{:.1} MB is over the {:.1} MB limit for one note (campaign.max_note_bytes): skipped",
            size as f64 / 1e6,
            max_bytes as f64 / 1e6
        ));
        return NoteRead::NotANote;
    }
    let bytes = match std::fs::read(absolute) {
        Ok(bytes) => bytes,
        Err(err) => {
            report(format!("cannot read: {err}"));
            return NoteRead::Unreadable(path);
        }
    };
    if bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0) {
        report("binary file (NUL bytes), not a Markdown note: skipped".into());
        return NoteRead::NotANote;
    }
    let bytes_hash = hex::encode(Sha256::digest(&bytes));
    // The size read now: the file may have grown or shrunk since its metadata was read.
    let n_bytes = bytes.len() as u64;
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(err) => {
            let valid_up_to = err.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(err.as_bytes()).into_owned();
            let line = text[..valid_up_to.min(text.len())].matches('\n').count() as u32 + 1;
            diagnostics.push(Diagnostic {
                path: path.clone(),
                line: Some(line),
                message: "invalid UTF-8: undecodable bytes replaced with U+FFFD".into(),
            });
            text
        }
    };
    NoteRead::Read(NoteFile { path, bytes_hash, n_bytes, text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::text::window_word_range;

    fn check_windows(n_words: usize, window: usize, expected: &[(usize, usize)]) {
        let text: Vec<String> = (0..n_words).map(|i| format!("w{i}")).collect();
        let windows = embedding_windows(&text.join(" "), window);
        let spans: Vec<(usize, usize)> = windows
            .iter()
            .map(|w| {
                let words: Vec<&str> = w.split_whitespace().collect();
                let first = words[0][1..].parse().unwrap();
                (first, first + words.len())
            })
            .collect();
        assert_eq!(spans, expected);
        // `window_word_range` names the same words as the windows (clipped at the text's end).
        for (idx, &(first, end)) in expected.iter().enumerate() {
            let range = window_word_range(idx as u32, window);
            assert_eq!((range.start, range.end.min(n_words)), (first, end), "window {idx}");
        }
    }

    #[test]
    fn short_text_is_one_window() {
        check_windows(10, 250, &[(0, 10)]);
        check_windows(250, 250, &[(0, 250)]);
    }

    #[test]
    fn long_text_windows_overlap_by_a_fifth_and_cover_everything() {
        check_windows(251, 250, &[(0, 250), (200, 251)]);
        check_windows(600, 250, &[(0, 250), (200, 450), (400, 600)]);
    }
}
