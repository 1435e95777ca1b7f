//! Embeds the sample campaign (`eval/campaign/`) into the binary, so `oraculo ingest` with no
//! `--campaign` works on a fresh machine from the binary alone.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=eval/campaign");
    // Read at run time, not baked in with `env!`: a build script compiled for one checkout
    // is reused by cargo for another that shares the target dir.
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = Path::new(&manifest).join("eval").join("campaign");
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    // A binary without its sample would answer "no notes" to the README's first command:
    // a build that finds none is an error, not an empty campaign.
    assert!(!files.is_empty(), "no sample campaign notes under {}", root.display());
    files.sort();
    let mut code =
        String::from("/// (path relative to the sample root, content)\npub const SAMPLE_FILES: &[(&str, &str)] = &[\n");
    for (relative, absolute) in &files {
        code.push_str(&format!("    ({relative:?}, include_str!({absolute:?})),\n"));
    }
    code.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("sample_files.rs");
    std::fs::write(out, code).expect("OUT_DIR is writable");
}

fn collect(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        println!("cargo:rerun-if-changed={}", path.display());
        if path.is_dir() {
            collect(root, &path, files);
        } else if path.extension().is_some_and(|e| e == "md") {
            let relative = path.strip_prefix(root).expect("walked from root").to_string_lossy().replace('\\', "/");
            files.push((relative, path.display().to_string()));
        }
    }
}
