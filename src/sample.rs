//! The sample campaign shipped inside the binary: what `oraculo ingest` reads when no
//! campaign is given, so a fresh machine can run the whole pipeline at once.

use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/sample_files.rs"));

/// Writes the sample campaign into `dir` (rewriting only what differs, so a second run
/// leaves every file, and so every vector, as it was) and returns `dir`. The folder is
/// Oráculo's own: a note an older binary's sample left there, and that this one does not
/// ship, is removed, so it is not ingested beside the new sample.
pub fn materialize(dir: &Path) -> std::io::Result<PathBuf> {
    write_files(dir, SAMPLE_FILES)?;
    Ok(dir.to_path_buf())
}

fn write_files(dir: &Path, files: &[(&str, &str)]) -> std::io::Result<()> {
    // The sample folder often creates the data dir, which will hold the indexes: private.
    crate::index::create_missing_dirs_private(dir)?;
    for (relative, content) in files {
        let path = dir.join(relative);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(*content) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, content)?;
    }
    let shipped: std::collections::HashSet<PathBuf> = files.iter().map(|(relative, _)| dir.join(relative)).collect();
    remove_stale(dir, &shipped)
}

/// Removes the Markdown files under `dir` that are not `shipped`, then the folders left empty.
/// Links are never followed: a linked folder is not descended into (its notes are someone
/// else's), and a stale link to a note is removed as a link, never its target.
fn remove_stale(dir: &Path, shipped: &std::collections::HashSet<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        // `DirEntry::file_type` does not follow links (unlike `Path::is_dir`).
        let file_type = entry.file_type()?;
        if file_type.is_dir() {
            remove_stale(&path, shipped)?;
            if std::fs::read_dir(&path)?.next().is_none() {
                std::fs::remove_dir(&path)?;
            }
        } else if (file_type.is_file() || file_type.is_symlink())
            && path.extension().is_some_and(|extension| extension == "md")
            && !shipped.contains(&path)
        {
            // For a link, this removes the link itself.
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

/// The sample campaign's question bank (`eval/questions.jsonl`), built in so `oraculo eval`
/// runs on a fresh machine with no arguments.
pub const SAMPLE_BANK: &str = include_str!("../eval/questions.jsonl");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn materializing_keeps_unchanged_files_and_drops_an_older_samples_notes() {
        let dir = tempfile::TempDir::new().unwrap();
        let root = dir.path();
        // What an older binary left: a note this sample no longer ships, in a folder of its own.
        std::fs::create_dir_all(root.join("PNJs")).unwrap();
        std::fs::write(root.join("PNJs/Madre Ulva.md"), "# Madre Ulva").unwrap();
        std::fs::write(root.join("notas.txt"), "not a note").unwrap();
        write_files(root, &[("Crónica.md", "## Sesión 1"), ("Fichas/Iria.md", "# Iria")]).unwrap();
        let modified = std::fs::metadata(root.join("Crónica.md")).unwrap().modified().unwrap();

        write_files(root, &[("Crónica.md", "## Sesión 1"), ("Fichas/Iria.md", "# Iria")]).unwrap();
        assert_eq!(std::fs::metadata(root.join("Crónica.md")).unwrap().modified().unwrap(), modified);
        assert!(!root.join("PNJs").exists(), "the stale note and its emptied folder are gone");
        assert!(root.join("notas.txt").exists(), "only Markdown notes are removed");
        assert_eq!(std::fs::read_to_string(root.join("Fichas/Iria.md")).unwrap(), "# Iria");
    }

    #[cfg(unix)]
    #[test]
    fn the_sample_creates_a_missing_data_dir_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::TempDir::new().unwrap();
        let data_dir = dir.path().join("oraculo");
        materialize(&data_dir.join("sample-campaign")).unwrap();
        let mode = std::fs::metadata(&data_dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
    }

    #[cfg(unix)]
    #[test]
    fn the_cleanup_never_follows_links() {
        let outside = tempfile::TempDir::new().unwrap();
        std::fs::write(outside.path().join("Villano.md"), "# Notas del DM").unwrap();
        std::fs::write(outside.path().join("Suelta.md"), "# Suelta").unwrap();
        let dir = tempfile::TempDir::new().unwrap();
        let root = dir.path();
        // A linked folder, and a linked note that this sample does not ship.
        std::os::unix::fs::symlink(outside.path(), root.join("Mis notas")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("Suelta.md"), root.join("Suelta.md")).unwrap();
        write_files(root, &[("Crónica.md", "## Sesión 1")]).unwrap();
        assert!(outside.path().join("Villano.md").exists(), "a note in a linked folder is not the sample's");
        assert!(outside.path().join("Suelta.md").exists(), "a link's target is never removed");
        assert!(root.join("Mis notas").exists(), "the linked folder itself is left alone");
        assert!(std::fs::symlink_metadata(root.join("Suelta.md")).is_err(), "the stale link is removed as a link");
    }
}
