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
    ("redacted", &[]),
    ("llm", &["redacted"]),
    ("answer", &["corpus", "lexicon", "llm"]),
    ("prompt", &["answer", "corpus", "llm"]),
    ("logging", &[]),
    ("config", &["answer", "corpus", "llm", "prompt", "redacted"]),
    ("index", &["compendium", "corpus", "llm"]),
    ("sample", &["index"]),
    ("retrieve", &["answer", "compendium", "corpus", "index", "lexicon", "llm", "prompt"]),
    ("conversation", &["corpus", "index", "retrieve"]),
    ("ingest", &["answer", "compendium", "config", "corpus", "index", "llm", "prompt"]),
    ("notes", &["answer", "corpus", "index", "lexicon", "llm", "retrieve"]),
    ("oracle", &["answer", "config", "corpus", "index", "lexicon", "llm", "notes", "prompt", "retrieve"]),
    ("feedback", &["config", "corpus", "index", "oracle", "retrieve"]),
    ("timeline", &["answer", "corpus", "index", "llm", "oracle", "prompt", "retrieve"]),
    ("eval", &["answer", "corpus", "index", "llm", "oracle", "retrieve", "sample"]),
    ("app", &["answer", "config", "corpus", "index", "ingest", "llm", "notes", "oracle", "sample"]),
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
    ("mcp", &["app", "config", "corpus", "feedback", "llm", "notes", "oracle", "retrieve", "timeline"]),
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
    let mut files = BTreeMap::new();
    for (relative, text) in source_texts() {
        let code = text.lines().map(str::trim).enumerate().filter(|(_, line)| !line.starts_with("//"));
        files.insert(relative, code.map(|(index, line)| (index + 1, line.to_string())).collect());
    }
    files
}

/// Every source file under `src/`, as its path relative to `src/`, with its whole text.
fn source_texts() -> BTreeMap<String, String> {
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
                files.insert(relative, std::fs::read_to_string(&path).unwrap());
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

/// A source file holds at most this many lines of code (CONTRIBUTING.md, "Build and test"):
/// past it, a file is several subjects, and a reader cannot hold it.
const MAX_FILE_CODE_LINES: usize = 700;
/// A function spans at most this many lines, from its `fn` line to its closing brace: past it,
/// it is several steps that want a name each.
const MAX_FUNCTION_LINES: usize = 100;

/// Every file under `src/` and every function in it within [`MAX_FILE_CODE_LINES`] and
/// [`MAX_FUNCTION_LINES`] (what counts: [`code_lines`] and [`function_sizes`]).
#[test]
fn no_source_file_or_function_outgrows_its_limit() {
    let over: Vec<String> = source_texts()
        .into_iter()
        .flat_map(|(file, text)| oversizes(&file, &text))
        .map(|oversize| oversize.message)
        .collect();
    assert!(over.is_empty(), "split these by meaning, a named step each:\n{}", over.join("\n"));
}

/// A type of the answering side (`oracle/`, `app/`) holds at most this many methods over all
/// its `impl` blocks: past it, one object is the whole product again, and a newcomer cannot
/// tell its entry from its steps.
const MAX_ANSWERING_METHODS: usize = 25;

/// Every type of the answering side within [`MAX_ANSWERING_METHODS`] (what counts:
/// [`methods_by_type`]).
#[test]
fn no_type_of_the_answering_side_holds_more_than_its_share_of_methods() {
    let texts: Vec<String> = source_texts()
        .into_iter()
        .filter(|(file, _)| file.starts_with("oracle/") || file.starts_with("app/"))
        .map(|(_, text)| text)
        .collect();
    let over = types_over_their_share(&texts.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(over.is_empty(), "give these types' steps types of their own:\n{}", over.join("\n"));
}

/// One way in: of the oracle's methods only [`Oracle::answer`] does the work and is public
/// (async); the rest build it or tell how it answers. The eval, the recap and the tests enter
/// through it too, with `AnswerOptions`, never half-way.
#[test]
fn the_oracle_answers_through_one_public_entry() {
    let entries: Vec<String> = source_texts()
        .into_iter()
        .filter(|(file, _)| file.starts_with("oracle/"))
        .flat_map(|(_, text)| public_async_methods(&text, "Oracle"))
        .collect();
    assert_eq!(entries, ["answer"], "the oracle's public ways in");
}

#[test]
fn a_second_public_async_method_is_a_second_way_in() {
    let planted = "impl Oracle {\n    pub async fn answer(&self) {}\n\n    pub async fn prepare(&self) {}\n\n    \
                   pub(super) async fn generate(&self) {}\n    pub fn settings(&self) {}\n}\n\nimpl Turn {\n    \
                   pub async fn write(&self) {}\n}\n";
    assert_eq!(public_async_methods(planted, "Oracle"), ["answer", "prepare"]);
}

/// The `pub async fn`s (public to every caller, not `pub(super)`) of `type_name`'s top-level
/// `impl` blocks in `text`.
fn public_async_methods(text: &str, type_name: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut inside = false;
    for line in masked_lines(text) {
        if inside {
            if line.starts_with('}') {
                inside = false;
            } else if line.starts_with("    pub async fn ") {
                found.extend(method_name(&line));
            }
        } else if line.starts_with("impl") && line.trim_end().ends_with('{') {
            inside = implemented_type(&line).as_deref() == Some(type_name);
        }
    }
    found
}

/// The types of `texts` with more than [`MAX_ANSWERING_METHODS`] methods over their `impl`
/// blocks, each with its count.
fn types_over_their_share(texts: &[&str]) -> Vec<String> {
    let mut per_type: BTreeMap<String, usize> = BTreeMap::new();
    for text in texts {
        for (type_name, _) in methods_by_type(text) {
            *per_type.entry(type_name).or_default() += 1;
        }
    }
    per_type
        .into_iter()
        .filter(|(_, n)| *n > MAX_ANSWERING_METHODS)
        .map(|(type_name, n)| format!("{type_name}: {n} methods (limit {MAX_ANSWERING_METHODS})"))
        .collect()
}

/// Each method of a top-level `impl` block (`impl Oracle {`, `impl<'a> Turn<'a> {`, `impl Debug
/// for Oracle {`), as (the type's name, the method's name): the `fn`s one level inside the
/// block, up to its closing brace at the start of a line. Test modules' blocks are indented and
/// not counted.
fn methods_by_type(text: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut inside: Option<String> = None;
    for line in masked_lines(text) {
        if let Some(type_name) = &inside {
            if line.starts_with('}') {
                inside = None;
            } else if let Some(name) = method_name(&line) {
                found.push((type_name.clone(), name));
            }
        } else if line.starts_with("impl") && line.trim_end().ends_with('{') {
            inside = implemented_type(&line);
        }
    }
    found
}

/// The name of the method declared on `line`, one level inside an `impl` block.
fn method_name(line: &str) -> Option<String> {
    let rest = line.strip_prefix("    ")?;
    if rest.starts_with(' ') {
        return None;
    }
    let words: Vec<&str> = rest.split_whitespace().collect();
    let at = words.iter().position(|word| *word == "fn")?;
    let name = words.get(at + 1)?;
    Some(name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
}

/// The type an `impl` line implements for: the one after `for`, else the one after `impl`
/// and its generics, without its path and generics.
fn implemented_type(line: &str) -> Option<String> {
    let mut rest = line.strip_prefix("impl")?.trim_start();
    if rest.starts_with('<') {
        let mut depth = 0usize;
        let end = rest.char_indices().find_map(|(at, c)| {
            match c {
                '<' => depth += 1,
                '>' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(at)
        })?;
        rest = rest[end + 1..].trim_start();
    }
    if let Some((_, after)) = rest.split_once(" for ") {
        rest = after.trim_start();
    }
    let path: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
    path.rsplit("::").next().filter(|name| !name.is_empty()).map(String::from)
}

/// One file or function over its limit, with the message that names it.
struct Oversize {
    /// `None` for the file itself.
    function: Option<String>,
    message: String,
}

/// What in one file's text exceeds a limit: the file's code lines, then each function.
fn oversizes(file: &str, text: &str) -> Vec<Oversize> {
    let mut found = Vec::new();
    let n_code_lines = code_lines(text);
    if n_code_lines > MAX_FILE_CODE_LINES {
        found.push(Oversize {
            function: None,
            message: format!("{file}: {n_code_lines} code lines (limit {MAX_FILE_CODE_LINES})"),
        });
    }
    for (name, line, n_lines) in function_sizes(text) {
        if n_lines > MAX_FUNCTION_LINES {
            found.push(Oversize {
                message: format!("{file}:{line}: fn {name}: {n_lines} lines (limit {MAX_FUNCTION_LINES})"),
                function: Some(name),
            });
        }
    }
    found
}

/// The lines of a file that count against [`MAX_FILE_CODE_LINES`]: those with code on them
/// (not blank, not only a comment; the inside of a string literal is code) outside the
/// `#[cfg(test)] mod … { … }` blocks, whose tests sit beside the code by design.
fn code_lines(text: &str) -> usize {
    let masked = masked_lines(text);
    let tests = test_blocks(&masked);
    let in_tests = |index: usize| tests.iter().any(|(first, last)| (*first..=*last).contains(&index));
    masked.iter().enumerate().filter(|(index, line)| !line.trim().is_empty() && !in_tests(*index)).count()
}

/// Each function with a body (`fn name … { … }`, test functions and nested ones included): its
/// name, the number of the line its `fn` is on, and its lines from there to its closing brace.
fn function_sizes(text: &str) -> Vec<(String, usize, usize)> {
    let masked: Vec<char> = masked_lines(text).join("\n").chars().collect();
    let line_at = |at: usize| masked[..at].iter().filter(|c| **c == '\n').count() + 1;
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for at in 0..masked.len().saturating_sub(2) {
        let starts_fn = masked[at] == 'f'
            && masked[at + 1] == 'n'
            && masked[at + 2].is_whitespace()
            && (at == 0 || !is_ident(masked[at - 1]));
        if !starts_fn {
            continue;
        }
        let mut cursor = at + 2;
        while cursor < masked.len() && masked[cursor].is_whitespace() {
            cursor += 1;
        }
        let name: String = masked[cursor..].iter().take_while(|c| is_ident(**c)).collect();
        if name.is_empty() {
            continue;
        }
        // The body opens at the first `{` outside the signature's parentheses and brackets; a
        // `;` there first is a declaration without one.
        let mut depth = 0usize;
        let mut open = None;
        while cursor < masked.len() {
            match masked[cursor] {
                '(' | '[' => depth += 1,
                ')' | ']' => depth = depth.saturating_sub(1),
                '{' if depth == 0 => {
                    open = Some(cursor);
                    break;
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            cursor += 1;
        }
        let Some(open) = open else { continue };
        let Some(close) = closing_brace(&masked, open) else { continue };
        found.push((name, line_at(at), line_at(close) - line_at(at) + 1));
    }
    found
}

/// The index of the `}` that closes the `{` at `open`, in masked text.
fn closing_brace(masked: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (at, c) in masked.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(at);
                }
            }
            _ => {}
        }
    }
    None
}

/// The `#[cfg(test)]`-gated inline modules of masked lines, as (first, last) line indexes: the
/// attribute's line to the module's closing brace.
fn test_blocks(masked: &[String]) -> Vec<(usize, usize)> {
    let text: Vec<char> = masked.join("\n").chars().collect();
    let line_starts: Vec<usize> =
        std::iter::once(0).chain(text.iter().enumerate().filter(|(_, c)| **c == '\n').map(|(at, _)| at + 1)).collect();
    let line_at = |at: usize| line_starts.partition_point(|start| *start <= at) - 1;
    let mut blocks = Vec::new();
    for (index, line) in masked.iter().enumerate() {
        if line.trim() != "#[cfg(test)]" {
            continue;
        }
        // Further attributes may sit between it and the `mod`.
        let Some(item) = masked[index + 1..].iter().position(|line| !line.trim().starts_with("#[")) else { continue };
        let item = index + 1 + item;
        let declaration = masked[item].trim();
        let declares_module = declaration.split_whitespace().take(2).any(|word| word == "mod");
        let Some(brace) = masked[item].find('{').filter(|_| declares_module) else { continue };
        let open = line_starts[item] + masked[item][..brace].chars().count();
        if let Some(close) = closing_brace(&text, open) {
            blocks.push((index, line_at(close)));
        }
    }
    blocks
}

/// A file's lines with the comments taken out and every character inside a string or character
/// literal (delimiters kept) turned into `_`, whitespace kept: what is left holds no brace,
/// quote or `fn` that is not code, and a line of a literal still shows as a line of code.
fn masked_lines(text: &str) -> Vec<String> {
    enum State {
        Code,
        LineComment,
        BlockComment(usize),
        Quoted,
        RawQuoted(usize),
    }
    let chars: Vec<char> = text.chars().collect();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let starts_word = |at: usize| at == 0 || !is_ident(chars[at - 1]);
    let mask = |c: char| if c.is_whitespace() { c } else { '_' };
    let mut out = String::with_capacity(text.len());
    let mut state = State::Code;
    let mut at = 0;
    while at < chars.len() {
        let c = chars[at];
        let next = chars.get(at + 1).copied();
        match state {
            State::Code => match c {
                '/' if next == Some('/') => state = State::LineComment,
                '/' if next == Some('*') => {
                    state = State::BlockComment(1);
                    at += 1;
                }
                '"' => {
                    out.push(c);
                    state = State::Quoted;
                }
                // `r"…"`, `r#"…"#`, `br"…"`: an `r` that starts a word, or follows a `b` that does.
                'r' if (starts_word(at) || (chars[at - 1] == 'b' && starts_word(at - 1)))
                    && matches!(next, Some('"' | '#')) =>
                {
                    let hashes = chars[at + 1..].iter().take_while(|c| **c == '#').count();
                    if chars.get(at + 1 + hashes) == Some(&'"') {
                        out.extend(&chars[at..at + 2 + hashes]);
                        at += 1 + hashes;
                        state = State::RawQuoted(hashes);
                    } else {
                        out.push(c);
                    }
                }
                '\'' => {
                    // A character literal ('x', '\n', '\u{7b}'), or else a lifetime or label.
                    let end = if next == Some('\\') {
                        chars[at + 3..].iter().position(|c| *c == '\'').map(|offset| at + 4 + offset)
                    } else if chars.get(at + 2) == Some(&'\'') {
                        Some(at + 3)
                    } else {
                        None
                    };
                    match end {
                        Some(end) => {
                            out.push('\'');
                            out.extend(chars[at + 1..end - 1].iter().map(|c| mask(*c)));
                            out.push('\'');
                            at = end - 1;
                        }
                        None => out.push(c),
                    }
                }
                _ => out.push(c),
            },
            State::LineComment => {
                if c == '\n' {
                    out.push(c);
                    state = State::Code;
                }
            }
            State::BlockComment(depth) => {
                if c == '\n' {
                    out.push(c);
                } else if c == '/' && next == Some('*') {
                    state = State::BlockComment(depth + 1);
                    at += 1;
                } else if c == '*' && next == Some('/') {
                    state = if depth == 1 { State::Code } else { State::BlockComment(depth - 1) };
                    at += 1;
                }
            }
            State::Quoted => match c {
                '\\' => {
                    out.push('_');
                    if let Some(escaped) = next {
                        out.push(mask(escaped));
                        at += 1;
                    }
                }
                '"' => {
                    out.push(c);
                    state = State::Code;
                }
                _ => out.push(mask(c)),
            },
            State::RawQuoted(hashes) => {
                let closes = c == '"' && chars[at + 1..].iter().take(hashes).filter(|c| **c == '#').count() == hashes;
                if closes {
                    out.extend(&chars[at..at + 1 + hashes]);
                    at += hashes;
                    state = State::Code;
                } else {
                    out.push(mask(c));
                }
            }
        }
        at += 1;
    }
    out.split('\n').map(String::from).collect()
}

/// A planted function of `n_lines` lines, from its `fn` line to its closing brace.
fn planted_function(n_lines: usize) -> String {
    let mut text = String::from("fn planted() {\n");
    for _ in 0..n_lines - 2 {
        text.push_str("    let step = 1;\n");
    }
    text.push_str("}\n");
    text
}

/// A planted file of `n_code_lines` code lines in one-line functions, with comments, blank
/// lines and a long test module that do not count.
fn planted_file(n_code_lines: usize) -> String {
    let mut text = String::from("//! A planted file.\n\n");
    for index in 0..n_code_lines {
        text.push_str(&format!("/// Step {index}.\nfn step_{index}() {{}}\n\n"));
    }
    text.push_str("#[cfg(test)]\nmod tests {\n");
    for index in 0..n_code_lines {
        text.push_str(&format!("    fn check_{index}() {{}}\n"));
    }
    text.push_str("}\n");
    text
}

/// A planted type with `n_methods` methods over two `impl` blocks, a trait's among them, and a
/// test module's helper type that does not count.
fn planted_type(n_methods: usize) -> String {
    let mut text = String::from("impl<'a> Planted<'a> {\n");
    for index in 0..n_methods - 1 {
        text.push_str(&format!("    pub(super) async fn step_{index}(&self) {{\n        let step = 1;\n    }}\n\n"));
    }
    text.push_str("}\n\nimpl std::fmt::Debug for Planted<'_> {\n    fn fmt(&self, f: &mut Formatter<'_>) -> Result {\n        Ok(())\n    }\n}\n");
    text.push_str("\n#[cfg(test)]\nmod tests {\n    impl Planted<'_> {\n        fn helper(&self) {}\n    }\n}\n");
    text
}

#[test]
fn a_type_of_26_methods_is_over_the_limit_and_one_of_25_is_not() {
    let at_limit = planted_type(25);
    assert_eq!(methods_by_type(&at_limit).len(), 25);
    assert!(types_over_their_share(&[&at_limit]).is_empty());
    let over_limit = planted_type(26);
    assert_eq!(types_over_their_share(&[&over_limit]), ["Planted: 26 methods (limit 25)"]);
}

#[test]
fn a_function_of_101_lines_is_over_the_limit_and_one_of_100_is_not() {
    assert!(oversizes("planted.rs", &planted_function(100)).is_empty());
    let over = oversizes("planted.rs", &planted_function(101));
    assert_eq!(over.len(), 1);
    assert_eq!(over[0].function.as_deref(), Some("planted"));
    assert_eq!(over[0].message, "planted.rs:1: fn planted: 101 lines (limit 100)");
}

#[test]
fn a_file_of_701_code_lines_is_over_the_limit_and_one_of_700_is_not() {
    assert_eq!(code_lines(&planted_file(700)), 700);
    assert!(oversizes("planted.rs", &planted_file(700)).is_empty());
    let over = oversizes("planted.rs", &planted_file(701));
    assert_eq!(over.len(), 1);
    assert_eq!(over[0].function, None);
    assert_eq!(over[0].message, "planted.rs: 701 code lines (limit 700)");
}

#[test]
fn braces_and_fn_in_literals_and_comments_are_not_code() {
    let text = r##"
/// fn doc() { in a doc comment
fn first<'a>(text: &'a str) -> Vec<char> {
    let open = '{';
    let escaped = '\'';
    let quoted = "} fn not_a_function() {";
    let raw = r#"a "quoted" } brace"#;
    /* a } block /* nested } */ comment */
    let bytes = br"}";
    vec![open, escaped]
}

fn declared(text: &str) -> usize;

fn second() -> impl Fn(&str) -> bool {
    |text| text.contains('}')
}
"##;
    assert_eq!(function_sizes(text), vec![("first".to_string(), 3, 9), ("second".to_string(), 15, 3)]);
    // The doc comment, the block comment and the blank lines do not count; the rest does.
    assert_eq!(code_lines(text), 12);
}

#[test]
fn a_literal_spread_over_lines_is_code_and_the_test_module_is_not() {
    let text = "fn prompt() -> &'static str {\n    \"first\n\n    }second\"\n}\n#[cfg(test)]\n#[allow(dead_code)]\nmod tests {\n    fn check() { let brace = '}'; }\n}\n";
    assert_eq!(function_sizes(text), vec![("prompt".to_string(), 1, 5), ("check".to_string(), 9, 1)]);
    assert_eq!(code_lines(text), 4);
}

/// Where the house's code and its scripts are: what a newcomer reads (the eval's changelog and
/// results are history, and keep theirs).
const CODE_FOLDERS: &[&str] = &["src", "tests/it", "scripts", ".ci", "benches"];

/// Work-history names in `text`: the word «issue» and a number, apart or joined by `_` or `-`.
fn work_history_names(text: &str) -> Vec<String> {
    let pattern = regex::Regex::new(r"(?i)\bissue[ _-]?[0-9]+").unwrap();
    pattern.find_iter(text).map(|found| found.as_str().to_string()).collect()
}

/// Things are named for what they are, not for the issue that made them: a reader has the
/// code, not the tracker.
#[test]
fn no_work_history_names_in_the_code_or_the_scripts() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut named = Vec::new();
    let files = CODE_FOLDERS.iter().flat_map(|folder| walkdir::WalkDir::new(root.join(folder)));
    for entry in files.chain(walkdir::WalkDir::new(root.join("Cargo.toml"))) {
        let entry = entry.unwrap();
        let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
        for name in work_history_names(&text) {
            named.push(format!("{}: {name}", entry.path().strip_prefix(root).unwrap().display()));
        }
    }
    assert!(named.is_empty(), "work-history names:\n{}", named.join("\n"));
    // The pattern finds each form (written apart here, so this file holds none).
    for form in [concat!("iss", "ue 38"), concat!("iss", "ue_38_x"), concat!("Iss", "ue-41")] {
        assert_eq!(work_history_names(&format!("a {form} b")).len(), 1, "{form}");
    }
}
