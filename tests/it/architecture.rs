//! The crate's layering (ARCHITECTURE.md, "Who may import whom"), read from the source's own
//! `crate::` paths, so that it cannot rot again: every top-level module is placed in
//! [`LAYERS`], imports only the modules listed for it, and lists only modules placed before it
//! (so the layering has no cycle by construction). Below the modules, the files: no circle of
//! imports between files, no import between two backends of `llm`, and no caller of `settle`
//! outside the oracle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module with the modules it may import, lowest layer first.
/// `text` (folding, words, sentence ends, shortening) is the ground floor: placed first, and
/// every module may import it.
const LAYERS: &[(&str, &[&str])] = &[
    ("text", &[]),
    ("corpus", &[]),
    ("lexicon", &["corpus"]),
    ("compendium", &["corpus", "lexicon"]),
    ("secret", &[]),
    ("llm", &["secret"]),
    ("answer", &["corpus", "lexicon", "llm"]),
    ("prompt", &["answer", "corpus", "llm"]),
    ("logging", &[]),
    ("config", &["answer", "corpus", "llm", "prompt", "secret"]),
    ("index", &["compendium", "corpus", "llm"]),
    ("sample", &["index"]),
    ("retrieve", &["answer", "compendium", "corpus", "index", "lexicon", "llm", "prompt"]),
    ("conversation", &["corpus", "index", "retrieve"]),
    ("ingest", &["answer", "compendium", "config", "corpus", "index", "llm", "prompt"]),
    ("oracle", &["answer", "config", "corpus", "index", "lexicon", "llm", "prompt", "retrieve"]),
    ("feedback", &["config", "corpus", "index", "oracle", "retrieve"]),
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
            "feedback",
            "ingest",
            "llm",
            "oracle",
            "retrieve",
            "timeline",
            "watch",
        ],
    ),
    ("mcp", &["app", "config", "corpus", "feedback", "llm", "oracle", "retrieve", "timeline"]),
    (
        "cli",
        &[
            "answer", "app", "config", "corpus", "discord", "doctor", "eval", "feedback", "index", "ingest", "llm",
            "logging", "mcp", "oracle", "prompt", "retrieve", "sample", "timeline", "watch",
        ],
    ),
];

/// The module every other may import.
const GROUND_FLOOR: &str = "text";

/// The top-level module each source file belongs to, with the `crate::` modules it names in
/// code (comments do not count).
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, lines) in source_files() {
        let first = file.split('/').next().unwrap_or_default();
        let module = first.trim_end_matches(".rs").to_string();
        if matches!(module.as_str(), "lib" | "main") {
            continue;
        }
        let named = found.entry(module.clone()).or_default();
        for (_, line) in &lines {
            assert!(
                !line.contains("crate::{"),
                "{file}: write one `crate::module::…` path per module (the layering test reads them): {line}"
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
            if target != GROUND_FLOOR && !allowed.contains(&target.as_str()) {
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

/// What stays of an answer (the model's, the notes' sentences under it, or those sentences
/// instead) is decided once, in the oracle: the CLI, the bot, the eval and the MCP server call
/// `Oracle::answer` and render the `Settled` it ends in (ARCHITECTURE.md, `oracle/`).
#[test]
fn no_caller_settles_an_answer_outside_the_oracle() {
    let mut callers = Vec::new();
    for (file, lines) in source_files() {
        if file.starts_with("oracle/") {
            continue;
        }
        for (number, code) in lines {
            let calls = code
                .match_indices("settle(")
                .any(|(at, _)| !code[..at].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_'));
            if calls {
                callers.push(format!("{file}:{number}: {code}"));
            }
        }
    }
    assert!(callers.is_empty(), "only the oracle settles an answer (call Oracle::answer):\n{}", callers.join("\n"));
}

/// Public fields that carry a fragment's id or label between modules hold `FragmentId` and
/// `Label`, not a bare `i64` or `String`. A label stays text only where it is somebody's
/// writing not yet matched against the index: a note's block before labels are made unique,
/// the model's citations, an MCP client's parameter, and a judged pair as its bank file writes it.
#[test]
fn fragment_ids_and_labels_cross_modules_as_their_types() {
    const LABELS_AS_WRITTEN: [&str; 5] =
        ["corpus/mod.rs", "answer/citations.rs", "oracle/answer.rs", "mcp/params.rs", "eval/judged.rs"];
    let mut bare = Vec::new();
    for (file, lines) in source_files() {
        for (number, code) in lines {
            let Some(field) = code.strip_prefix("pub ") else { continue };
            let Some((name, kind)) = field.split_once(": ") else { continue };
            let id = matches!(name, "fragment_id" | "fragment_ids") && kind.contains("i64");
            let label = matches!(name, "label" | "labels")
                && kind.contains("String")
                && !LABELS_AS_WRITTEN.contains(&file.as_str());
            if id || label {
                bare.push(format!("{file}:{number}: {code}"));
            }
        }
    }
    assert!(bare.is_empty(), "fragment ids are FragmentId and labels are Label:\n{}", bare.join("\n"));
}

/// Every source file under `src/`, as its path relative to `src/` (`llm/chat/ollama.rs`), with
/// its lines of code, trimmed and numbered from 1 (comments left out).
fn source_files() -> BTreeMap<String, Vec<(usize, String)>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let relative = path.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.lines().map(str::trim).enumerate().filter(|(_, line)| !line.starts_with("//"));
                files.insert(relative, code.map(|(index, line)| (index + 1, line.to_string())).collect());
            }
        }
    }
    files
}

/// The module path of a file (`llm/chat/ollama.rs` → `["llm", "chat", "ollama"]`;
/// `llm/chat/mod.rs` → `["llm", "chat"]`).
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file.trim_end_matches(".rs").split('/').map(String::from).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// The file that holds the deepest module of `path` (module segments from the crate's root)
/// that is a file of `files`.
fn file_of(path: &[String], files: &BTreeMap<String, Vec<(usize, String)>>) -> Option<String> {
    (1..=path.len()).rev().find_map(|depth| {
        let joined = path[..depth].join("/");
        [format!("{joined}.rs"), format!("{joined}/mod.rs")].into_iter().find(|file| files.contains_key(file))
    })
}

/// Each file with the files its `crate::` and `super::` paths lead to (itself, its parent
/// module's file and its own child modules' files left out: a `mod.rs` and the files it
/// declares are one room).
fn file_imports(files: &BTreeMap<String, Vec<(usize, String)>>) -> BTreeMap<String, BTreeSet<String>> {
    let mut found = BTreeMap::new();
    for (file, lines) in files {
        let module = module_of(file);
        let mut named = BTreeSet::new();
        for (_, line) in lines {
            for (at, _) in line.match_indices("crate::").chain(line.match_indices("super::")) {
                if line[..at].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let rest = &line[at..];
                let mut segments: Vec<String> = Vec::new();
                let mut path = rest.split("::").map(|segment| {
                    segment.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>()
                });
                let first = path.next().unwrap_or_default();
                if first == "super" {
                    // A `mod.rs`'s module is its folder; a file's module is its own name.
                    let mut base = module.clone();
                    base.pop();
                    segments.extend(base);
                    for segment in path.by_ref() {
                        if segment == "super" {
                            segments.pop();
                        } else {
                            segments.push(segment);
                            break;
                        }
                    }
                }
                segments.extend(path.take_while(|segment| !segment.is_empty()));
                let Some(target) = file_of(&segments, files) else { continue };
                let target_module = module_of(&target);
                let parent = module.len() == target_module.len() + 1 && module.starts_with(&target_module);
                let child = target_module.len() == module.len() + 1 && target_module.starts_with(&module);
                if target != *file && !parent && !child {
                    named.insert(target);
                }
            }
        }
        found.insert(file.clone(), named);
    }
    found
}

/// No file reaches back to itself through the files it imports: each step of a question's walk
/// leans on the ones below it.
#[test]
fn no_circle_of_imports_between_files() {
    let files = source_files();
    let graph = file_imports(&files);
    assert!(
        graph.get("llm/chat/ollama.rs").is_some_and(|named| named.contains("llm/http.rs")),
        "the file graph is read (a backend's edge import is seen)"
    );
    // Depth-first, with the path walked so far: a file met again on its own path is a circle.
    fn walk<'g>(
        file: &'g str,
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'g str>,
        done: &mut BTreeSet<&'g str>,
        circles: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|on_path| *on_path == file) {
            circles.push(format!("{} -> {file}", path[at..].join(" -> ")));
            return;
        }
        if !done.insert(file) {
            return;
        }
        path.push(file);
        for next in graph.get(file).into_iter().flatten() {
            walk(next, graph, path, done, circles);
        }
        path.pop();
    }
    let mut circles = Vec::new();
    let mut done = BTreeSet::new();
    for file in graph.keys() {
        walk(file, &graph, &mut Vec::new(), &mut done, &mut circles);
    }
    assert!(circles.is_empty(), "circles of imports between files:\n{}", circles.join("\n"));
}

/// The model servers' backends share `llm/http.rs` (the one HTTP edge) and the traits of
/// `llm/`, never each other: a fix to sending, timeouts or status mapping is made once.
#[test]
fn no_backend_imports_another() {
    const BACKENDS: [&str; 5] =
        ["llm/chat/ollama", "llm/chat/openai", "llm/chat/llama_cpp", "llm/embed/ollama", "llm/embed/e5"];
    let backend_of = |file: &str| BACKENDS.iter().find(|backend| file.trim_end_matches(".rs").starts_with(*backend));
    let files = source_files();
    let mut crossings = Vec::new();
    for (file, named) in file_imports(&files) {
        let Some(own) = backend_of(&file) else { continue };
        for target in named {
            if let Some(other) = backend_of(&target)
                && other != own
            {
                crossings.push(format!("{file} imports {target}"));
            }
        }
    }
    assert!(crossings.is_empty(), "backends borrow from each other (use llm/http.rs):\n{}", crossings.join("\n"));
}

/// ARCHITECTURE.md reads in a terminal and a diff: no line of 200 characters or more.
#[test]
fn the_architecture_reads_in_short_lines() {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    let long: Vec<String> = text
        .lines()
        .enumerate()
        .filter(|(_, line)| line.chars().count() >= 200)
        .map(|(number, line)| format!("{}: {}…", number + 1, line.chars().take(60).collect::<String>()))
        .collect();
    assert!(long.is_empty(), "ARCHITECTURE.md lines of 200 characters or more:\n{}", long.join("\n"));
}
