//! The mass-removal guard: an ingest that would remove most of the campaign does not commit.
//!
//! A campaign folder caught empty (a sync tool mid-resync, a network share that did not
//! mount, a container started with its campaign volume unset) reads exactly like a DM who
//! deleted every note. The ingest cannot tell them apart, so it refuses the removal, keeps the
//! last index and says what it read; the DM confirms a real deletion with
//! `oraculo ingest --allow-removal` (or `/reingest`'s option).
//!
//! A note moved (the same bytes under another path) is not removed: renaming a folder is an
//! ordinary reorganisation, not a loss.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::Serialize;

use crate::index::FileRecord;

/// An ingest removing more than this share of the indexed notes stops: a DM prunes a few
/// notes at a time, while a folder that lost most of its notes at once is far more often a
/// mount or a sync gone wrong than a decision.
pub const MASS_REMOVAL_SHARE: f64 = 0.5;
/// …from this many removed notes on: removing 2 of a 3-note campaign is an ordinary edit of a
/// small campaign, not a lost mount. (Removing every note is refused whatever the count.)
pub const MASS_REMOVAL_MIN_NOTES: usize = 5;

/// Whether an ingest may remove most of the campaign.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Removal {
    /// A mass removal is refused: every ingest nobody confirmed (the watcher's, the bot's,
    /// a plain `oraculo ingest`).
    #[default]
    Guarded,
    /// The DM confirmed it: `oraculo ingest --allow-removal`, `/reingest` with its option.
    Allowed,
}

/// What a refused ingest found: enough to tell the DM why, and where it looked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MassRemoval {
    /// The campaign folder as the ingest read it.
    pub path: String,
    /// Notes the last index holds.
    pub indexed: usize,
    /// Of them, the notes this ingest would remove (moved ones not counted).
    pub removed: usize,
    /// Notes the folder holds now.
    pub read: usize,
}

impl std::fmt::Display for MassRemoval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let MassRemoval { path, indexed, removed, read } = self;
        if *read == 0 {
            write!(
                f,
                "the campaign folder {path} holds no note now (empty, not mounted, or not the folder meant) \
                 where the index holds {indexed}"
            )?;
        } else {
            write!(
                f,
                "this ingest would remove {removed} of the {indexed} indexed notes (the campaign folder {path} holds {read} now)"
            )?;
        }
        write!(
            f,
            ": nothing was removed and the last index stays. If the notes were deleted on purpose, \
             run `oraculo ingest --allow-removal` (or /reingest with allow_removal)"
        )
    }
}

/// Refuses the removal of `removals` (paths the index holds that the folder no longer has)
/// when it is a mass removal and `removal` does not allow it.
pub(super) fn check(
    removal: Removal,
    campaign_dir: &Path,
    stored_hashes: &HashMap<String, String>,
    removals: &[String],
    records: &[FileRecord],
    n_kept: usize,
) -> Result<(), MassRemoval> {
    if removal == Removal::Allowed || removals.is_empty() {
        return Ok(());
    }
    // A note moved keeps its bytes: it is not lost, whatever its path.
    let read_hashes: HashSet<&str> = records.iter().map(|record| record.content_hash.as_str()).collect();
    let removed = removals
        .iter()
        .filter(|path| stored_hashes.get(*path).is_none_or(|hash| !read_hashes.contains(hash.as_str())))
        .count();
    let indexed = stored_hashes.len();
    let read = records.len() + n_kept;
    let every_note = removed == indexed;
    let most_notes = removed >= MASS_REMOVAL_MIN_NOTES && removed as f64 > MASS_REMOVAL_SHARE * indexed as f64;
    if every_note || most_notes {
        return Err(MassRemoval { path: campaign_dir.display().to_string(), indexed, removed, read });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(path: &str, hash: &str) -> FileRecord {
        FileRecord {
            path: path.into(),
            content_hash: hash.into(),
            kind: crate::corpus::NoteKind::World,
            title: path.into(),
            aliases: Vec::new(),
            tags: Vec::new(),
            n_bytes: 1,
            fragments: Vec::new(),
            links: Vec::new(),
        }
    }

    /// `indexed` notes n0.md… with hash h0…; the folder now holds `read` of them; the guard's
    /// verdict as the number it would report removed.
    fn check_guard(indexed: usize, read: &[(&str, &str)], removal: Removal) -> Option<usize> {
        let stored: HashMap<String, String> = (0..indexed).map(|i| (format!("n{i}.md"), format!("h{i}"))).collect();
        let records: Vec<FileRecord> = read.iter().map(|(path, hash)| record(path, hash)).collect();
        let present: HashSet<&str> = read.iter().map(|(path, _)| *path).collect();
        let removals: Vec<String> = stored.keys().filter(|p| !present.contains(p.as_str())).cloned().collect();
        check(removal, Path::new("/campaign"), &stored, &removals, &records, 0).err().map(|refused| refused.removed)
    }

    /// The first `n` of the indexed notes, as read.
    fn first(n: usize) -> Vec<(String, String)> {
        (0..n).map(|i| (format!("n{i}.md"), format!("h{i}"))).collect()
    }

    fn refs(notes: &[(String, String)]) -> Vec<(&str, &str)> {
        notes.iter().map(|(path, hash)| (path.as_str(), hash.as_str())).collect()
    }

    #[test]
    fn a_mass_removal_is_refused_and_an_ordinary_one_is_not() {
        // Empty folder: every note would go.
        assert_eq!(check_guard(3, &[], Removal::Guarded), Some(3));
        assert_eq!(check_guard(1, &[], Removal::Guarded), Some(1), "all of them, however few");
        // 6 of 10 gone: more than half and at least 5.
        assert_eq!(check_guard(10, &refs(&first(4)), Removal::Guarded), Some(6));
        // 5 of 10: half, not more.
        assert_eq!(check_guard(10, &refs(&first(5)), Removal::Guarded), None);
        // 3 of 4: more than half, but fewer than 5.
        assert_eq!(check_guard(4, &refs(&first(1)), Removal::Guarded), None);
        // Confirmed.
        assert_eq!(check_guard(3, &[], Removal::Allowed), None);
        // Every note moved into a renamed folder: nothing lost.
        let moved: Vec<(String, String)> = (0..10).map(|i| (format!("nuevo/n{i}.md"), format!("h{i}"))).collect();
        assert_eq!(check_guard(10, &refs(&moved), Removal::Guarded), None);
    }

    #[test]
    fn the_refusal_says_what_was_read_and_how_to_confirm() {
        let refused = MassRemoval { path: "/campaign".into(), indexed: 3, removed: 3, read: 0 };
        let text = refused.to_string();
        assert!(text.contains("/campaign holds no note now") && text.contains("--allow-removal"), "{text}");
        let refused = MassRemoval { path: "/campaign".into(), indexed: 10, removed: 6, read: 4 };
        let text = refused.to_string();
        assert!(text.contains("remove 6 of the 10") && text.contains("holds 4 now"), "{text}");
    }
}
