//! The sample campaign shipped inside the binary: what `oraculo ingest` reads when no
//! campaign is given, so a fresh machine can run the whole pipeline at once.

use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/sample_files.rs"));

/// Writes the sample campaign into `dir` (rewriting only what differs, so a second run
/// leaves every file, and so every vector, as it was) and returns `dir`.
pub fn materialize(dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    for (relative, content) in SAMPLE_FILES {
        let path = dir.join(relative);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(*content) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, content)?;
    }
    Ok(dir.to_path_buf())
}

/// The sample campaign's question bank (`eval/questions.jsonl`), built in so `oraculo eval`
/// runs on a fresh machine with no arguments.
pub const SAMPLE_BANK: &str = include_str!("../eval/questions.jsonl");

/// The built-in bank, read and checked like any other.
pub fn sample_bank() -> anyhow::Result<Vec<crate::eval::EvalQuestion>> {
    crate::eval::bank::parse_and_check(SAMPLE_BANK)
}
