//! Writing the index: the records SQLite is to hold, what of them changed, and the commit
//! (SQLite in one transaction, last, then the vectors nothing refers to any more dropped).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use tracing::{info, info_span, warn};

use super::annotate::annotate_extractively;
use super::read::{NoteFile, keep_notes_being_written, read_campaign};
use super::{COMPENDIUM_VERSION, IngestError, IngestSummary};
use crate::compendium::{Compendium, EntityMatcher, ExtractedEntity};
use crate::config::CampaignConfig;
use crate::corpus::{self, CorpusConfig, Diagnostic, Fragment, Label, Note, NoteKind, Visibility};
use crate::index::store::{
    META_COMPENDIUM_EXTRACTIONS, META_COMPENDIUM_VERSION, META_DIMENSION, META_EMBEDDER, META_VECTOR_TABLE,
};
use crate::index::{CompendiumRecords, FileRecord, Index, IndexError, IngestChanges, MentionRecord};
use crate::llm::Embedder;

/// The campaign as this ingest read it: the records SQLite is to hold, the notes kept as
/// indexed because they are being written, and the compendium built from them all.
pub(super) struct Campaign {
    pub(super) records: Vec<FileRecord>,
    kept: Vec<String>,
    pub(super) compendium: CompendiumRecords,
    n_extractions: usize,
}

impl Campaign {
    /// Notes that are there but kept at their last indexed version (being written, or in a
    /// folder that cannot be listed now).
    pub(super) fn n_kept(&self) -> usize {
        self.kept.len()
    }
}

/// Reads, parses and fragments the whole campaign, and builds its compendium (cheap: labels
/// and entities depend on every file).
pub(super) fn prepare(
    index: &Index,
    campaign_dir: &Path,
    config: &CampaignConfig,
    stored: &HashMap<String, String>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Result<Campaign, IngestError> {
    let (note_files, kept) = {
        let _span = info_span!("ingest.read").entered();
        let read = read_campaign(campaign_dir, config, diagnostics)?;
        keep_notes_being_written(read, stored, diagnostics)
    };
    let kept_labels = index.store.labels_of_paths(&kept)?;
    let (notes, fragments) = {
        let _span = info_span!("ingest.split", n_files = note_files.len()).entered();
        let sources: Vec<(&str, &str)> =
            note_files.iter().map(|file| (file.path.as_str(), file.text.as_str())).collect();
        let (notes, note_diagnostics) = corpus::parse_campaign(&sources, &config.corpus);
        diagnostics.extend(note_diagnostics);
        let (mut fragments, fragment_diagnostics) = corpus::fragment_campaign(&notes, &config.corpus);
        diagnostics.extend(fragment_diagnostics);
        keep_labels_of_kept_notes(&mut fragments, &kept_labels, diagnostics);
        (notes, fragments)
    };
    let extracted = cached_extractions(index, &fragments)?;
    let n_extractions = extracted.len();
    let compendium = {
        let _span = info_span!("ingest.compendium", n_fragments = fragments.len(), n_extractions).entered();
        compendium_records(&notes, &fragments, extracted, &config.corpus)
    };
    let records = file_records(&note_files, &notes, fragments);
    Ok(Campaign { records, kept, compendium, n_extractions })
}

/// The labels of the notes kept at their last indexed version stay in the label check: a
/// note read now that claims one of them (a second note with the same session number) takes
/// a distinct label, as two notes read together do, so the commit never meets
/// `UNIQUE(label, part)` and wedges every ingest until the kept note is written again.
fn keep_labels_of_kept_notes(
    fragments: &mut [Fragment],
    kept_labels: &[(String, Label)],
    diagnostics: &mut Vec<Diagnostic>,
) {
    if kept_labels.is_empty() {
        return;
    }
    let held: HashMap<&str, &str> = kept_labels.iter().map(|(path, label)| (label.as_str(), path.as_str())).collect();
    let mut taken: HashSet<Label> =
        fragments.iter().map(|f| f.label.clone()).chain(kept_labels.iter().map(|(_, label)| label.clone())).collect();
    // (path, label read) → the label given: every part of a block keeps one label.
    let mut given: HashMap<(String, Label), Label> = HashMap::new();
    for fragment in fragments.iter_mut() {
        let Some(holder) = held.get(fragment.label.as_str()) else { continue };
        let key = (fragment.source_path.clone(), fragment.label.clone());
        if let Some(label) = given.get(&key) {
            fragment.label = label.clone();
            continue;
        }
        let stem = Path::new(&fragment.source_path).file_stem().map(|s| s.to_string_lossy().into_owned());
        let mut label = Label::new(format!("{} ({})", fragment.label, stem.unwrap_or_default()));
        if taken.contains(&label) {
            label = Label::new(format!("{} ({}, l. {})", fragment.label, fragment.source_path, fragment.line_start));
        }
        taken.insert(label.clone());
        let message = format!(
            "label \"{}\" is also held by {holder}, kept at its last indexed version while it cannot be read; \
             this one is \"{label}\" until then",
            fragment.label
        );
        diagnostics.push(Diagnostic { path: fragment.source_path.clone(), line: Some(fragment.line_start), message });
        given.insert(key, label.clone());
        fragment.label = label;
    }
}

/// What SQLite must change.
pub(super) struct Plan {
    pub(super) upserts: Vec<FileRecord>,
    pub(super) removals: Vec<String>,
    compendium_stale: bool,
}

/// Compares the campaign read with what the index holds. A note being written keeps what the
/// index holds of it.
pub(super) fn plan(index: &Index, stored: &HashMap<String, String>, campaign: &Campaign) -> Result<Plan, IngestError> {
    let records = &campaign.records;
    let present: HashSet<&str> =
        records.iter().map(|r| r.path.as_str()).chain(campaign.kept.iter().map(String::as_str)).collect();
    let removals: Vec<String> = stored.keys().filter(|p| !present.contains(p.as_str())).cloned().collect();
    let upserts: Vec<FileRecord> =
        records.iter().filter(|r| stored.get(&r.path) != Some(&r.fingerprint())).cloned().collect();
    // Entities depend on every note (a link in one file names an alias of another), so the
    // compendium is rewritten whole whenever any file changed, or its rules did.
    let compendium_stale = !upserts.is_empty()
        || !removals.is_empty()
        || index.store.compendium_version()?.as_deref() != Some(COMPENDIUM_VERSION)
        || index.store.meta(META_COMPENDIUM_EXTRACTIONS)? != Some(campaign.n_extractions.to_string());
    Ok(Plan { upserts, removals, compendium_stale })
}

/// Commits SQLite last, in one transaction: the moment the new campaign becomes visible.
/// Then the extractive annotations of the new fragments, and only then may vectors go:
/// nothing committed refers to them any more.
pub(super) async fn commit(
    index: &mut Index,
    table: &str,
    embedder: &dyn Embedder,
    campaign: Campaign,
    plan: Plan,
    diagnostics: &mut Vec<Diagnostic>,
    summary: &mut IngestSummary,
) -> Result<(), IngestError> {
    let meta = vec![
        (META_VECTOR_TABLE.to_string(), table.to_string()),
        (META_EMBEDDER.to_string(), embedder.id().to_string()),
        (META_DIMENSION.to_string(), embedder.dimension().to_string()),
        (META_COMPENDIUM_VERSION.to_string(), COMPENDIUM_VERSION.to_string()),
        (META_COMPENDIUM_EXTRACTIONS.to_string(), campaign.n_extractions.to_string()),
    ];
    diagnostics.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    for diagnostic in diagnostics.iter() {
        warn!(path = %diagnostic.path, line = diagnostic.line, "{}", diagnostic.message);
    }
    let matcher = EntityMatcher::new(&campaign.compendium.compendium.for_gm());
    let changes = IngestChanges {
        upserts: plan.upserts,
        removals: plan.removals,
        diagnostics: diagnostics.clone(),
        meta,
        compendium: plan.compendium_stale.then_some(campaign.compendium),
    };
    index.store.apply_ingest(&changes)?;
    summary.extractive_annotations = annotate_extractively(index, &matcher)?;
    summary.annotations_pruned = index.store.prune_orphaned_annotations()?;

    let keep: HashSet<String> = index.store.content_hashes()?.into_iter().collect();
    summary.vectors_dropped = index.vectors.drop_orphans(table, &keep).await?;
    for dropped in index.vectors.drop_other_tables(table).await? {
        info!(table = %dropped, "dropped the vectors of a previous embedder");
    }
    // Committed: what fails now leaves a complete index, only a larger one on disk.
    match index.vectors.compact(table).await {
        Ok(compaction) => summary.vector_cleanup = compaction,
        Err(err) => warn!(error = %err, "the vector table was not cleaned up; the next ingest tries again"),
    }
    Ok(())
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
    // Mentions as the GM reads the notes: an alias only GM text uses is only in GM fragments.
    let gm_view = compendium.for_gm();
    let matcher = EntityMatcher::new(&gm_view);
    let mentions = crate::compendium::mentions(&gm_view, &matcher, fragments)
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

/// The index records of each note read, with its fragments.
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

/// The counts of the campaign as read, before anything is written.
pub(super) fn summarize(campaign_dir: &Path, records: &[FileRecord]) -> IngestSummary {
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
