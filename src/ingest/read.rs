//! Reading the campaign folder: the walk (hidden and ignored paths, symbolic links and their
//! loops), each note read with binaries and oversize files refused, and the notes being
//! written set aside.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use sha2::{Digest, Sha256};
use tracing::info;

use super::IngestError;
use crate::config::CampaignConfig;
use crate::corpus::Diagnostic;

/// Bytes read to decide whether a file is binary: a NUL in the first 8 KiB means it is.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// A note read from disk, before parsing.
pub(super) struct NoteFile {
    pub(super) path: String,
    pub(super) bytes_hash: String,
    pub(super) n_bytes: u64,
    pub(super) text: String,
}

/// What a walk of the campaign read: the notes, and the paths of notes that are there but
/// could not be read now (an I/O error, or no bytes at all: an editor caught between
/// truncating a note and writing it again).
pub(super) struct CampaignRead {
    pub(super) files: Vec<NoteFile>,
    unreadable: Vec<String>,
    /// Folders (and entries) the walk could not list now, relative: what the index holds
    /// under them is not gone, only out of sight.
    unlisted: Vec<String>,
}

impl CampaignRead {
    /// Reads the note at `absolute` under `path`, keeping it or its path as it reads.
    fn read(&mut self, absolute: &Path, path: String, max_bytes: u64, diagnostics: &mut Vec<Diagnostic>) {
        match read_note_file(absolute, path, max_bytes, diagnostics) {
            NoteRead::Read(file) => self.files.push(file),
            NoteRead::Unreadable(path) => self.unreadable.push(path),
            NoteRead::NotANote => {}
        }
    }
}

/// Sets aside the notes that could not be read now but that the index holds: their last
/// indexed fragments stay, with a warning, until a later ingest (the next save, when the
/// vault is watched) reads them. A note never indexed has nothing to keep: an empty one is
/// read as the empty note it is, and one that cannot be read is left out with its warning.
/// Returns the notes to parse and the paths kept as they are.
pub(super) fn keep_notes_being_written(
    read: CampaignRead,
    stored: &HashMap<String, String>,
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
    // A folder that cannot be listed hides its notes; it does not delete them.
    let under_unlisted = |path: &str| {
        read.unlisted.iter().any(|folder| {
            path == folder.as_str() || path.strip_prefix(folder.as_str()).is_some_and(|rest| rest.starts_with('/'))
        })
    };
    let read_paths: HashSet<&str> = files.iter().map(|file| file.path.as_str()).collect();
    let mut hidden: Vec<String> = stored
        .keys()
        .filter(|path| under_unlisted(path.as_str()) && !read_paths.contains(path.as_str()) && !kept.contains(*path))
        .cloned()
        .collect();
    hidden.sort();
    for path in &hidden {
        let message =
            "in a folder that cannot be listed now: its last indexed version is kept until the folder reads".into();
        diagnostics.push(Diagnostic { path: path.clone(), line: None, message });
    }
    kept.extend(hidden);
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
pub(super) fn read_campaign(
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
    let ignored: Vec<String> = config.ignore.iter().map(|i| crate::text::fold(i)).collect();
    // Hidden folders and files (`.trash/`, `.obsidian/`, `.git/`) are never read, whatever
    // `ignore` says: a deleted note must not come back as campaign text.
    let is_read = |name: &str| !name.starts_with('.') && !ignored.contains(&crate::text::fold(name));
    let mut read = CampaignRead { files: Vec::new(), unreadable: Vec::new(), unlisted: Vec::new() };
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
            Err(err) if err.loop_ancestor().is_none() && err.depth() == 0 => {
                // The campaign folder itself cannot be listed: nothing read could be trusted
                // to say which notes are gone.
                return Err(campaign_error(std::io::Error::from(err)));
            }
            Err(err) => {
                let diagnostic = walk_error(campaign_dir, &err);
                if err.loop_ancestor().is_none() {
                    read.unlisted.push(diagnostic.path.clone());
                }
                diagnostics.push(diagnostic);
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
                read.read(entry.path(), link_path, config.max_note_bytes, diagnostics);
            }
            continue;
        }
        let Some(path) = linked_note_path(entry.path(), link_path, &root, &is_read, diagnostics) else {
            continue;
        };
        if !seen.insert(path.clone()) {
            continue;
        }
        read.read(entry.path(), path, config.max_note_bytes, diagnostics);
    }
    diagnostics.extend(links_out);
    // Whichever way a file was reached first, the notes come in path order.
    read.files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(read)
}

/// The diagnostic for an entry the walk could not reach.
fn walk_error(campaign_dir: &Path, err: &walkdir::Error) -> Diagnostic {
    let path = err.path().map(|p| relative(campaign_dir, p)).unwrap_or_else(|| ".".into());
    let message = if err.loop_ancestor().is_some() {
        "symbolic link loop: not followed".to_string()
    } else {
        format!("cannot read: {err}")
    };
    Diagnostic { path, line: None, message }
}

/// The path inside the campaign under which a file reached through a symbolic link (at
/// `link_path`) is read: its real one. `None`, with a diagnostic where it is one, when it is
/// not read: outside the campaign, not Markdown, or inside a hidden or ignored folder.
fn linked_note_path(
    absolute: &Path,
    link_path: String,
    root: &Path,
    is_read: &dyn Fn(&str) -> bool,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<String> {
    let real = match std::fs::canonicalize(absolute) {
        Ok(real) => real,
        Err(err) => {
            diagnostics.push(Diagnostic { path: link_path, line: None, message: format!("cannot read: {err}") });
            return None;
        }
    };
    let Ok(real_relative) = real.strip_prefix(root) else {
        let message = "symbolic link to outside the campaign folder: not followed".to_string();
        diagnostics.push(Diagnostic { path: link_path, line: None, message });
        return None;
    };
    if !is_markdown(&real) {
        return None;
    }
    let path = relative(Path::new(""), real_relative);
    // Reached through a link into a hidden or ignored folder: not read there either.
    let components: Vec<&str> = path.split('/').collect();
    if !components.iter().all(|component| is_read(component)) {
        let message = format!("symbolic link into {path}, which is never read: not followed");
        diagnostics.push(Diagnostic { path: link_path, line: None, message });
        return None;
    }
    Some(path)
}

/// Whether the walk reads what lies at `relative` (a path inside the campaign folder): no
/// part of it is hidden or ignored. The watcher asks it of every changed path, so that a
/// save in `.obsidian/` or an editor's hidden swap file never starts an ingest.
pub fn reads_path(relative: &Path, config: &CampaignConfig) -> bool {
    relative.components().all(|component| {
        let name = component.as_os_str().to_string_lossy();
        !name.starts_with('.')
            && !config.ignore.iter().any(|ignored| crate::text::fold(ignored) == crate::text::fold(&name))
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

    fn note(path: &str) -> NoteFile {
        NoteFile { path: path.into(), bytes_hash: "h".into(), n_bytes: 1, text: "x".into() }
    }

    #[test]
    fn notes_under_a_folder_that_cannot_be_listed_are_kept_not_removed() {
        let read = CampaignRead {
            files: vec![note("Sesion 1.md")],
            unreadable: Vec::new(),
            unlisted: vec!["Arco.Viejo".into()],
        };
        let stored: HashMap<String, String> =
            ["Sesion 1.md", "Arco.Viejo/a.md", "Arco.Viejo/Sub/b.md", "Arco.Viejos/c.md"]
                .map(|path| (path.to_string(), "fingerprint".to_string()))
                .into();
        let mut diagnostics = Vec::new();
        let (files, mut kept) = keep_notes_being_written(read, &stored, &mut diagnostics);
        kept.sort();
        assert_eq!(files.len(), 1);
        assert_eq!(kept, ["Arco.Viejo/Sub/b.md", "Arco.Viejo/a.md"], "a sibling with a longer name is not under it");
        assert!(diagnostics.iter().all(|d| d.message.contains("cannot be listed")), "{diagnostics:?}");
    }
}
