//! No behaviour change by refactoring: the sample campaign's 73 questions, searched
//! as `oraculo eval` searches them (the embedded e5, no rerank), find the
//! same labels in the same order as the pinned run in `data/sample-pin.txt`: the fused pool
//! (whose first k are the chosen) and each path's list. A change meant to reorder them writes the file anew
//! (`ORACULO_PIN_WRITE=1 cargo test --test it pin`) and says why in its commit.
//!
//! The same run answers every question as the embedded default does on a CPU (the notes' own
//! sentences, `chat.answer_style = "quotes"`, no model asked), and every quote of every answer
//! is, word for word, in the note its label names (the eval checks each: `eval/quoted.rs`).

use std::fmt::Write as _;
use std::path::Path;

use crate::harness::{Scratch, data_dir, sample_with_e5};

const PIN: &str = "tests/it/data/sample-pin.txt";

/// The pinned lines of one run: a question's id, then the fused pool in its order (the k
/// chosen are its first k: no rerank runs), then each path's list, each `; `-joined.
fn pinned_lines(report: &serde_json::Value) -> String {
    fn labels(list: &serde_json::Value) -> String {
        let labels: Vec<&str> =
            list.as_array().map_or(Vec::new(), |labels| labels.iter().filter_map(|l| l.as_str()).collect());
        labels.join("; ")
    }
    let mut lines = String::new();
    for row in report["rows"].as_array().expect("the report has rows") {
        let paths = &row["paths"];
        let _ = write!(lines, "{}\tpool: {}", row["id"].as_str().unwrap_or("?"), labels(&paths["pool"]));
        for (path, list) in paths["lists"].as_object().into_iter().flatten() {
            let _ = write!(lines, "\t{path}: {}", labels(list));
        }
        lines.push('\n');
    }
    lines
}

#[test]
fn the_sample_questions_find_the_pinned_labels_in_the_pinned_order() {
    let scratch = Scratch::new(&[]);
    let e5_model = oraculo::llm::embed::e5::E5Embedder::default_path(&data_dir());
    let report_path = scratch.data.path().join("pin-report.json");
    // The sample's e5 index the MCP tests read too, searched as it is (`--no-ingest`): the
    // ingest is the same `oraculo ingest --no-annotate` the eval would run first.
    let config = scratch.data.path().join("quotes.toml");
    std::fs::write(&config, "[chat]\nanswer_style = \"quotes\"\n").expect("the scratch folder is writable");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_oraculo"))
        .args(["eval", "--no-ablations", "--no-ingest", "--json", "--config"])
        .arg(&config)
        .arg("--data")
        .arg(sample_with_e5())
        .arg("--out")
        .arg(&report_path)
        .env("ORACULO_E5_MODEL", &e5_model)
        .env("ORACULO_EMBEDDER", "embedded")
        // No chat model is asked (no annotations, so no rerank; the answers are quotes): an
        // Ollama nobody runs stands in for the embedded one, which would load a gigabyte for nothing.
        .env("ORACULO_CHAT", "ollama")
        .env("ORACULO_OLLAMA_URL", "http://127.0.0.1:9")
        .env_remove("ORACULO_CONFIG")
        .env_remove("ORACULO_CAMPAIGN")
        .env_remove("ORACULO_DATA")
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON report on stdout");
    assert_eq!(report["rows"].as_array().map(Vec::len), Some(73), "the sample bank's 73 questions");
    let answers = &report["answers"];
    assert_eq!(answers["answered"], 73, "every question answered: {answers}");
    assert!(answers["quotes"].as_u64().is_some_and(|n| n > 73), "the answers quote the notes: {answers}");
    let misquoted: Vec<String> = report["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| {
            let id = row["id"].as_str().unwrap_or("?").to_string();
            let quotes = row["answer"]["misquoted"].as_array().cloned().unwrap_or_default();
            quotes.into_iter().map(move |quote| format!("{id}: {}", quote.as_str().unwrap_or("?")))
        })
        .collect();
    assert!(misquoted.is_empty(), "quotes not word for word in their note:\n{}", misquoted.join("\n"));
    let now = pinned_lines(&report);
    let pin = Path::new(env!("CARGO_MANIFEST_DIR")).join(PIN);
    if std::env::var_os("ORACULO_PIN_WRITE").is_some() {
        std::fs::write(&pin, &now).expect("the pin file is writable");
        return;
    }
    let pinned = std::fs::read_to_string(&pin).expect("the pin file exists (ORACULO_PIN_WRITE=1 writes it)");
    let changed: Vec<String> = pinned
        .lines()
        .zip(now.lines())
        .filter(|(was, is)| was != is)
        .map(|(was, is)| format!("pinned: {was}\n   now: {is}"))
        .collect();
    assert!(
        changed.is_empty() && pinned.lines().count() == now.lines().count(),
        "{} of 73 questions find other labels or another order:\n{}",
        changed.len(),
        changed.join("\n")
    );
}
