//! `compose.yaml` runs what the config says: the notes folder is required, the pull service
//! pulls the models `config.toml` names (its script run here against a stand-in `ollama`
//! command), and compose waits for the bot's shutdown grace before it kills.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn repository_file(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// `120s`, `2m`, `1m30s` as compose reads a duration.
fn compose_duration(text: &str) -> Duration {
    let mut seconds = 0;
    let mut number = String::new();
    for c in text.trim().chars() {
        match c {
            '0'..='9' => number.push(c),
            'h' | 'm' | 's' => {
                let unit = match c {
                    'h' => 3600,
                    'm' => 60,
                    _ => 1,
                };
                seconds += number.parse::<u64>().unwrap() * unit;
                number.clear();
            }
            other => panic!("{other:?} in the duration {text:?}"),
        }
    }
    Duration::from_secs(seconds)
}

#[test]
fn the_notes_folder_is_required_and_the_stop_waits_for_the_answers() {
    let compose = repository_file("compose.yaml");
    let mount = compose.lines().find(|line| line.contains(":/campaign:ro")).expect("the notes are mounted");
    assert!(mount.contains("${CAMPAIGN_DIR:?set CAMPAIGN_DIR to your notes folder"), "{mount}");
    let needed = oraculo::discord::SHUTDOWN_GRACE + oraculo::discord::INTERRUPT_NOTICE;
    let grace = compose
        .lines()
        .filter_map(|line| line.trim().strip_prefix("stop_grace_period:"))
        .map(compose_duration)
        .collect::<Vec<_>>();
    assert!(!grace.is_empty() && grace.iter().all(|grace| *grace >= needed), "{grace:?} for {needed:?}");
    let unit = repository_file("deploy/oraculo.service");
    let stop = unit.lines().find_map(|line| line.strip_prefix("TimeoutStopSec=")).expect("the unit waits");
    assert!(Duration::from_secs(stop.trim().parse().unwrap()) >= needed, "TimeoutStopSec={stop}");
    assert!(!compose.contains("ollama pull qwen2.5:14b"), "the pull service reads the config, not a fixed model");
    let ignored = repository_file(".dockerignore");
    for private in ["campaign/", ".env", "config.toml"] {
        assert!(ignored.lines().any(|line| line.trim() == private), "{private} stays out of the image's build");
    }
}

/// Runs `scripts/ollama-pull.sh CONFIG` with an `ollama` that records what it is asked to pull.
fn pulled_for(config_text: Option<&str>) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    if let Some(text) = config_text {
        std::fs::write(&config, text).unwrap();
    }
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let record = dir.path().join("pulled");
    let fake = format!("#!/bin/sh\n[ \"$1\" = pull ] && echo \"$2\" >> '{}'\n", record.display());
    std::fs::write(bin.join("ollama"), fake).unwrap();
    let executable = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
    std::fs::set_permissions(bin.join("ollama"), executable).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ollama-pull.sh");
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let output = Command::new("sh").arg(script).arg(&config).env("PATH", path).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    std::fs::read_to_string(record).unwrap_or_default().lines().map(str::to_string).collect()
}

#[test]
fn the_pull_service_pulls_the_models_the_config_names() {
    let config = "[campaign]\ndir = \"/notes\"\n\n[embedder]\nbackend = \"ollama\"\nmodel = \"bge-m3\"  # the embedder\n\n\
                  [chat]\n# model = \"not-this-one\"\nbackend = \"ollama\"\nmodel = \"qwen2.5:7b\"\n";
    assert_eq!(pulled_for(Some(config)), vec!["bge-m3", "qwen2.5:7b"]);
    // A config that names no model (an embedded one, as `oraculo init` writes on a CPU): the
    // defaults the code falls back to, so the profile's Ollama serves what the bot will ask.
    let embedded = "[embedder]\nbackend = \"embedded\"\n\n[chat]\nbackend = \"embedded\"\n";
    let defaults = vec![
        oraculo::config::DEFAULT_OLLAMA_EMBED_MODEL.to_string(),
        oraculo::config::DEFAULT_OLLAMA_CHAT_MODEL.to_string(),
    ];
    assert_eq!(pulled_for(Some(embedded)), defaults);
    assert_eq!(pulled_for(None), defaults, "no config file: the defaults, with a word on stderr");
    assert_eq!(pulled_for(Some(&repository_file("config.toml.example"))), defaults, "the example names the defaults");
}
