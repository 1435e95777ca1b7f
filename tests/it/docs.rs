//! The docs do not rot: every `oraculo …` command line in README.md, CONTRIBUTING.md and
//! docs/*.md parses with the real CLI (clap's `try_parse_from` on `oraculo::cli::Cli`), every
//! flag they name belongs to the command they name it with, every config key they name is a
//! key of the config structs (which refuse unknown keys), every environment variable they
//! name is read by the code, and every relative link leads to a file (and heading) that is
//! there.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};
use oraculo::cli::Cli;

/// Flags the docs give to other programs, each with whose: they are not Oráculo's.
const OTHER_PROGRAMS_FLAGS: &[&str] = &[
    // docker run / docker stop
    "--stop-timeout",
    // docker compose and podman-compose
    "--profile",
    // scripts/fetch-models.sh
    "--chat",
];

/// Spans shaped like a config key that name something else, each with what.
const NOT_CONFIG_KEYS: &[&str] = &[
    // systemd's unit for Ollama
    "ollama.service",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Markdown a DM or a contributor reads: README.md, CONTRIBUTING.md, docs/*.md.
fn documents() -> Vec<(PathBuf, String)> {
    let mut paths = vec![root().join("README.md"), root().join("CONTRIBUTING.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .filter(|path| path.exists())
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            (path, text)
        })
        .collect()
}

fn name(path: &Path) -> String {
    path.strip_prefix(root()).unwrap_or(path).display().to_string()
}

/// Each line of a fenced code block, with its 1-based line number and the block's language.
fn code_lines(text: &str) -> Vec<(usize, String, String)> {
    let mut lines = Vec::new();
    let mut language: Option<String> = None;
    for (idx, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(fence) = trimmed.strip_prefix("```") {
            language = match language {
                Some(_) => None,
                None => Some(fence.trim().to_string()),
            };
            continue;
        }
        if let Some(language) = &language {
            lines.push((idx + 1, language.clone(), line.to_string()));
        }
    }
    lines
}

/// The inline code spans outside code blocks, with their line numbers.
fn inline_spans(text: &str) -> Vec<(usize, String)> {
    let mut spans = Vec::new();
    let mut in_block = false;
    for (idx, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        let mut parts = line.split('`');
        parts.next();
        while let (Some(span), Some(_)) = (parts.next(), parts.next()) {
            spans.push((idx + 1, span.to_string()));
        }
    }
    spans
}

/// A shell line split into words as `sh` would (quotes, a trailing comment dropped).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(open), c) if c == open => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

fn subcommands() -> BTreeSet<String> {
    Cli::command().get_subcommands().map(|command| command.get_name().to_string()).collect()
}

/// The `oraculo …` command in a code block's line: from the word `oraculo` when the line starts
/// with it (after a `$` prompt and `VAR=…` assignments), or when a subcommand follows it
/// (`docker compose run --rm oraculo doctor`).
fn command_in(line: &str, subcommands: &BTreeSet<String>) -> Option<Vec<String>> {
    let words = shell_words(line);
    let start = words.iter().position(|word| word != "$" && !word.contains('=')).unwrap_or(words.len());
    if words.get(start).is_some_and(|word| word == "oraculo") {
        return Some(words[start..].to_vec());
    }
    let at = words.windows(2).position(|pair| pair[0] == "oraculo" && subcommands.contains(&pair[1]))?;
    Some(words[at..].to_vec())
}

#[test]
fn every_oraculo_command_line_in_the_docs_parses() {
    let subcommands = subcommands();
    let mut failures = Vec::new();
    let mut n_commands = 0;
    for (path, text) in documents() {
        for (line_number, language, line) in code_lines(&text) {
            if !matches!(language.as_str(), "" | "sh" | "bash" | "console" | "shell") {
                continue;
            }
            let Some(command) = command_in(&line, &subcommands) else {
                continue;
            };
            n_commands += 1;
            if let Err(err) = Cli::try_parse_from(&command) {
                let first = err.to_string().lines().next().unwrap_or_default().to_string();
                failures.push(format!("{}:{line_number}: `{}`: {first}", name(&path), line.trim()));
            }
        }
    }
    assert!(failures.is_empty(), "command lines the CLI refuses:\n{}", failures.join("\n"));
    assert!(n_commands >= 5, "only {n_commands} command lines found: is the extraction still reading the docs?");
}

/// The long flags (`--gm`) of `subcommand`, its globals included.
fn flags_of(subcommand: &str) -> BTreeSet<String> {
    let cli = Cli::command();
    let command = cli.find_subcommand(subcommand).unwrap_or_else(|| panic!("no subcommand {subcommand}"));
    let mut flags: BTreeSet<String> =
        command.get_arguments().filter_map(|arg| arg.get_long().map(|long| format!("--{long}"))).collect();
    flags.extend(["--help".to_string(), "--version".to_string()]);
    flags
}

/// `--flag` words in a span, with `=value` and `|`-alternatives taken off.
fn flags_in(span: &str) -> Vec<String> {
    span.split(|c: char| c.is_whitespace() || matches!(c, '[' | ']' | '(' | ')' | '|' | ','))
        .filter(|word| word.strip_prefix("--").is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_lowercase())))
        .map(|word| word.split('=').next().unwrap_or(word).trim_end_matches(['.', ':', ';']).to_string())
        .collect()
}

#[test]
fn every_flag_the_docs_name_is_one_the_cli_has() {
    let subcommands = subcommands();
    let every_flag: BTreeSet<String> = subcommands.iter().flat_map(|sub| flags_of(sub)).collect();
    let mut failures = Vec::new();
    for (path, text) in documents() {
        for (line_number, span) in inline_spans(&text) {
            let words: Vec<&str> = span.split_whitespace().collect();
            let (known, whose) = match words.as_slice() {
                ["oraculo", sub, ..] if sub.starts_with(|c: char| c.is_ascii_lowercase()) => {
                    if !subcommands.contains(*sub) {
                        failures.push(format!("{}:{line_number}: `{span}`: no subcommand {sub}", name(&path)));
                        continue;
                    }
                    (flags_of(sub), format!("oraculo {sub}"))
                }
                [first, ..] if !flags_in(first).is_empty() => (every_flag.clone(), "any oraculo command".to_string()),
                _ => continue,
            };
            for flag in flags_in(&span) {
                if !known.contains(&flag) && !OTHER_PROGRAMS_FLAGS.contains(&flag.as_str()) {
                    failures.push(format!("{}:{line_number}: `{span}`: {flag} is not a flag of {whose}", name(&path)));
                }
            }
        }
    }
    assert!(failures.is_empty(), "flags the CLI does not have:\n{}", failures.join("\n"));
}

/// Whether the config structs know `key` in `table` (`None`: the top level): a value of any
/// type is refused as of the wrong type by a known key, and as an unknown field by any other.
fn config_knows(table: Option<&str>, key: &str) -> Result<(), String> {
    let text = match table {
        None => format!("{key} = 0\n"),
        // An entry needs its name before its other keys are read.
        Some("campaigns") => format!("[[campaigns]]\nname = \"x\"\n{key} = 0\n"),
        Some("campaign.session_patterns") => format!("[[campaign.session_patterns]]\n{key} = 0\n"),
        Some(table) => format!("[{table}]\n{key} = 0\n"),
    };
    match oraculo::config::RawConfig::parse(&text, Path::new("docs")) {
        Err(err) if format!("{err:#}").contains("unknown field") => Err(format!("{err:#}")),
        _ => Ok(()),
    }
}

/// The keys a document names: `chat.answer_mode` in inline code, and the first column of
/// configuration.md's tables under a `## \`[table]\`` heading.
fn named_keys(text: &str) -> Vec<(usize, Option<String>, String)> {
    let dotted = regex::Regex::new(r"^(campaign|campaigns|embedder|ollama|chat|discord|feedback)\.([a-z_]+)$").unwrap();
    let mut keys = Vec::new();
    for (line_number, span) in inline_spans(text) {
        if NOT_CONFIG_KEYS.contains(&span.trim()) {
            continue;
        }
        if let Some(found) = dotted.captures(span.trim()) {
            keys.push((line_number, Some(found[1].to_string()), found[2].to_string()));
        }
    }
    let heading = regex::Regex::new(r"^#+ `\[{1,2}([a-z_.]+)\]{1,2}`").unwrap();
    let row_key = regex::Regex::new(r"^\| `([a-z_]+)`").unwrap();
    // Where a table row's key belongs: `Some(None)` the top level, `Some(Some(table))` a table.
    let mut section: Option<Option<String>> = None;
    for (idx, line) in text.lines().enumerate() {
        if let Some(found) = heading.captures(line) {
            section = Some(Some(found[1].to_string()));
        } else if line.starts_with("## Top level") {
            section = Some(None);
        } else if line.starts_with("## ") {
            section = None;
        }
        if let (Some(table), Some(found)) = (&section, row_key.captures(line)) {
            keys.push((idx + 1, table.clone(), found[1].to_string()));
        }
    }
    keys
}

#[test]
fn every_config_key_the_docs_and_the_example_name_exists() {
    let mut failures = Vec::new();
    let mut n_keys = 0;
    for (path, text) in documents() {
        for (line_number, table, key) in named_keys(&text) {
            n_keys += 1;
            if let Err(err) = config_knows(table.as_deref(), &key) {
                failures.push(format!("{}:{line_number}: {}.{key}: {err}", name(&path), table.unwrap_or_default()));
            }
        }
        for block in toml_blocks(&text) {
            if let Err(err) = oraculo::config::RawConfig::parse(&block, Path::new("docs")) {
                failures.push(format!("{}: a ```toml block the config refuses: {err:#}\n{block}", name(&path)));
            }
        }
    }
    // config.toml.example: its keys are parsed by the config's own test; the commented-out
    // ones (`# gguf = …`) are checked here, in the table they are written under.
    let example = std::fs::read_to_string(root().join("config.toml.example")).unwrap();
    let table_line = regex::Regex::new(r"^#? ?\[{1,2}([a-z_.]+)\]{1,2}\s*$").unwrap();
    let commented_key = regex::Regex::new(r"^# ([a-z_]+) = \S").unwrap();
    let mut table: Option<String> = None;
    for (idx, line) in example.lines().enumerate() {
        if let Some(found) = table_line.captures(line) {
            table = Some(found[1].to_string());
        } else if let Some(found) = commented_key.captures(line) {
            n_keys += 1;
            if let Err(err) = config_knows(table.as_deref(), &found[1]) {
                failures.push(format!("config.toml.example:{}: {}: {err}", idx + 1, &found[1]));
            }
        }
    }
    assert!(failures.is_empty(), "config keys the config does not have:\n{}", failures.join("\n"));
    assert!(n_keys >= 40, "only {n_keys} keys found: is the extraction still reading the docs?");
}

/// The ```toml blocks of a document.
fn toml_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    let mut in_other_block = false;
    for line in text.lines() {
        if let Some(fence) = line.trim_start().strip_prefix("```") {
            if let Some(block) = current.take() {
                blocks.push(block);
            } else if in_other_block {
                in_other_block = false;
            } else if fence.trim() == "toml" {
                current = Some(String::new());
            } else {
                in_other_block = true;
            }
            continue;
        }
        if let Some(block) = current.as_mut() {
            // A list the docs leave to the reader (`[…]`) is no TOML; an empty one is.
            block.push_str(&line.replace("[…]", "[]"));
            block.push('\n');
        }
    }
    blocks
}

#[test]
fn every_environment_variable_the_docs_name_is_read_by_the_code() {
    let mut source = String::new();
    let mut stack = vec![root().join("src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                source.push_str(&std::fs::read_to_string(path).unwrap());
            }
        }
    }
    let variable = regex::Regex::new(r"\b(ORACULO_[A-Z0-9_]+|DISCORD_TOKEN|XDG_DATA_HOME)\b").unwrap();
    let mut failures = Vec::new();
    let mut in_table = BTreeSet::new();
    for (path, text) in documents() {
        for (idx, line) in text.lines().enumerate() {
            for found in variable.find_iter(line) {
                if !source.contains(&format!("\"{}\"", found.as_str())) {
                    failures.push(format!("{}:{}: {} is read nowhere in src/", name(&path), idx + 1, found.as_str()));
                }
                if name(&path) == "docs/configuration.md" && line.starts_with("| `") {
                    in_table.insert(found.as_str().to_string());
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The table says it is every variable: each one the code reads is in it.
    let read = regex::Regex::new(r#""(ORACULO_[A-Z0-9_]+)""#).unwrap();
    let missing: BTreeSet<String> =
        read.captures_iter(&source).map(|found| found[1].to_string()).filter(|var| !in_table.contains(var)).collect();
    assert!(missing.is_empty(), "read by the code, missing from docs/configuration.md's table: {missing:?}");
}

/// GitHub's anchor for a heading: lower case, spaces to hyphens, punctuation dropped.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_block = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
        } else if !in_block && line.starts_with('#') {
            found.insert(anchor_of(line.trim_start_matches('#')));
        }
    }
    found
}

#[test]
fn every_relative_link_leads_somewhere() {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut failures = Vec::new();
    let mut n_links = 0;
    let mut documents = documents();
    // The other Markdown the docs send a reader to, checked as well.
    for extra in ["ARCHITECTURE.md", "eval/README.md"] {
        let path = root().join(extra);
        if let Ok(text) = std::fs::read_to_string(&path) {
            documents.push((path, text));
        }
    }
    for (path, text) in &documents {
        let mut in_block = false;
        for (idx, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
            }
            if in_block {
                continue;
            }
            // A link written as an example inside inline code is no link.
            let prose: String = line.split('`').step_by(2).collect::<Vec<_>>().join(" ");
            for found in link.captures_iter(&prose) {
                let target = &found[1];
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                n_links += 1;
                let (file, anchor) =
                    target.split_once('#').map_or((target, None), |(file, anchor)| (file, Some(anchor)));
                let resolved = if file.is_empty() { path.clone() } else { path.parent().unwrap().join(file) };
                let place = format!("{}:{}: ({target})", name(path), idx + 1);
                if !resolved.exists() {
                    failures.push(format!("{place}: no {}", name(&resolved)));
                    continue;
                }
                if let Some(anchor) = anchor.filter(|_| resolved.extension().is_some_and(|ext| ext == "md")) {
                    let target_text = std::fs::read_to_string(&resolved).unwrap();
                    if !anchors(&target_text).contains(anchor) {
                        failures.push(format!("{place}: no heading #{anchor} in {}", name(&resolved)));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "links that lead nowhere:\n{}", failures.join("\n"));
    assert!(n_links >= 20, "only {n_links} links found");
}

#[test]
fn the_extraction_reads_what_it_must() {
    // (line, the command it holds)
    let subcommands = subcommands();
    for (line, command) in [
        ("$ oraculo ask \"¿Qué pasó?\"", Some(vec!["oraculo", "ask", "¿Qué pasó?"])),
        ("DISCORD_TOKEN='…' oraculo bot --config config.toml", Some(vec!["oraculo", "bot", "--config", "config.toml"])),
        ("docker compose run --rm oraculo doctor   # why", Some(vec!["oraculo", "doctor"])),
        ("journalctl -u oraculo -f", None),
        ("install -m 0755 target/release/oraculo /usr/local/bin/oraculo", None),
    ] {
        let expected = command.map(|words| words.into_iter().map(str::to_string).collect::<Vec<_>>());
        assert_eq!(command_in(line, &subcommands), expected, "{line}");
    }
    assert_eq!(flags_in("oraculo recap [--gm] [--lang es|en] [N]"), vec!["--gm", "--lang"]);
    assert_eq!(anchor_of(" `[discord]`"), "discord");
    assert_eq!(anchor_of(" GPU memory: which model"), "gpu-memory-which-model");
}
