//! The crate's layering (ARCHITECTURE.md, "Who may import whom"), read from the source's own
//! `crate::` paths, so that it cannot rot again: every top-level module is placed in
//! [`LAYERS`], imports only the modules listed for it, and lists only modules placed before it
//! (so the layering has no cycle by construction).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module with the modules it may import, lowest layer first.
const LAYERS: &[(&str, &[&str])] = &[
    ("corpus", &[]),
    ("lexicon", &["corpus"]),
    ("compendium", &["corpus", "lexicon"]),
    ("secret", &[]),
    ("llm", &["corpus", "secret"]),
    ("answer", &["corpus", "lexicon", "llm"]),
    ("prompt", &["answer", "llm"]),
    ("logging", &[]),
    ("config", &["answer", "corpus", "llm", "prompt", "secret"]),
    ("index", &["compendium", "corpus", "llm"]),
    ("sample", &["index"]),
    ("retrieve", &["answer", "compendium", "corpus", "index", "lexicon", "llm", "prompt"]),
    ("conversation", &["corpus", "index", "retrieve"]),
    ("ingest", &["answer", "compendium", "config", "corpus", "index", "llm", "prompt"]),
    ("oracle", &["answer", "config", "corpus", "index", "lexicon", "llm", "prompt", "retrieve"]),
    ("timeline", &["answer", "corpus", "index", "llm", "oracle", "prompt", "retrieve"]),
    ("eval", &["answer", "corpus", "index", "llm", "oracle", "retrieve", "sample"]),
    ("app", &["answer", "config", "corpus", "index", "ingest", "llm", "oracle", "sample"]),
    ("doctor", &["app", "config", "index", "ingest", "llm"]),
    ("watch", &["config", "corpus", "index", "ingest", "llm"]),
    (
        "discord",
        &[
            "answer",
            "app",
            "config",
            "conversation",
            "corpus",
            "doctor",
            "ingest",
            "llm",
            "oracle",
            "retrieve",
            "timeline",
            "watch",
        ],
    ),
    ("mcp", &["app", "config", "corpus", "llm", "oracle", "retrieve", "timeline"]),
    (
        "cli",
        &[
            "answer", "app", "config", "corpus", "discord", "doctor", "eval", "index", "ingest", "llm", "logging",
            "mcp", "oracle", "prompt", "retrieve", "sample", "timeline", "watch",
        ],
    ),
];

/// The top-level module each source file belongs to, with the `crate::` modules it names in
/// code (comments do not count).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs") {
                continue;
            }
            let relative = path.strip_prefix(&src).unwrap();
            let first = relative.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
            let module = first.trim_end_matches(".rs").to_string();
            if matches!(module.as_str(), "lib" | "main") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let named = found.entry(module.clone()).or_default();
            for line in text.lines().map(str::trim).filter(|line| !line.starts_with("//")) {
                assert!(
                    !line.contains("crate::{"),
                    "{}: write one `crate::module::…` path per module (the layering test reads them): {line}",
                    relative.display()
                );
                for (at, _) in line.match_indices("crate::") {
                    let rest = &line[at + "crate::".len()..];
                    let target: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                    let preceded_by_ident = line[..at].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_');
                    if !target.is_empty() && target != module && !preceded_by_ident {
                        named.insert(target);
                    }
                }
            }
        }
    }
    found
}

#[test]
fn every_module_imports_only_the_layers_below_it() {
    let placed: Vec<&str> = LAYERS.iter().map(|(module, _)| *module).collect();
    // The table itself: each module lists only modules placed before it.
    for (position, (module, allowed)) in LAYERS.iter().enumerate() {
        for dependency in *allowed {
            let at = placed.iter().position(|m| m == dependency);
            assert!(
                at.is_some_and(|at| at < position),
                "{module} may import {dependency}, which is not placed before it: that would be a cycle"
            );
        }
    }
    let found = imports();
    let mut crossings = Vec::new();
    for (module, named) in &found {
        let Some((_, allowed)) = LAYERS.iter().find(|(m, _)| m == module) else {
            crossings.push(format!("{module} is a new module: place it in LAYERS (and ARCHITECTURE.md)"));
            continue;
        };
        for target in named {
            if !allowed.contains(&target.as_str()) {
                crossings.push(format!("{module} imports {target}"));
            }
        }
    }
    assert!(crossings.is_empty(), "layering broken (ARCHITECTURE.md, who may import whom):\n{}", crossings.join("\n"));
    // The rules named in the issue, asserted by name so a table edit cannot quietly drop them.
    let imports_of = |module: &str| found.get(module).cloned().unwrap_or_default();
    assert!(!imports_of("discord").contains("cli"), "the bot reaches the app layer, never the CLI");
    assert!(!imports_of("discord").contains("index"), "the bot reaches the index only through the oracle");
    for edge in ["discord", "cli", "index", "ingest"] {
        assert!(
            !imports_of("mcp").contains(edge),
            "the MCP server reaches {edge} only through the app layer, if at all"
        );
    }
    assert!(!imports_of("ingest").contains("eval") && !imports_of("ingest").contains("sample"));
    assert!(!imports_of("llm").contains("config"), "transport knows nothing of the configuration");
    for pure in ["corpus", "answer", "compendium"] {
        assert!(!imports_of(pure).contains("index"), "{pure} stays pure");
    }
    assert!(!imports_of("corpus").contains("llm") && !imports_of("compendium").contains("llm"));
    // `answer` takes from `llm` the one message type, nothing that talks to a model.
    let answer_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/answer");
    for entry in std::fs::read_dir(answer_dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines().filter(|line| line.contains("crate::llm::") && !line.trim().starts_with("//")) {
            assert!(
                line.contains("crate::llm::chat::{ChatMessage, ChatRole}")
                    || line.contains("crate::llm::chat::ChatMessage"),
                "{}: {line}",
                path.display()
            );
        }
    }
}
