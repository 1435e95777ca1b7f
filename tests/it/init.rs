//! `oraculo init` on the sample campaign and on a tiny English vault written here: what it
//! detects, the config it writes, and the commands it prints, run as printed (`ingest`, then
//! `ask --extractive`) under that config with no edit.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::fake_ollama::FakeOllama;
use crate::harness::{Scratch, models_dir};

/// `oraculo` with none of the environment's settings: only what the test passes.
fn oraculo() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_oraculo"));
    for var in [
        "ORACULO_CONFIG",
        "ORACULO_DATA",
        "ORACULO_CAMPAIGN",
        "ORACULO_EMBEDDER",
        "ORACULO_CHAT",
        "ORACULO_OLLAMA_URL",
        "ORACULO_E5_MODEL",
    ] {
        command.env_remove(var);
    }
    command
}

fn init(campaign: &Path, config: &Path, data: &Path, ollama_url: &str, extra: &[&str]) -> Output {
    oraculo()
        .arg("init")
        .arg(campaign)
        .arg("--config")
        .arg(config)
        .arg("--data")
        .arg(data)
        .args(extra)
        .env("ORACULO_OLLAMA_URL", ollama_url)
        .output()
        .unwrap()
}

fn json_of(output: &Output) -> Value {
    assert!(output.status.success(), "init failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|err| panic!("{err}: {}", String::from_utf8_lossy(&output.stdout)))
}

/// Runs one of the printed commands as a shell would, `oraculo` being this build's binary, with
/// an environment that holds nothing of Oráculo's: the config alone says what to do.
fn run_printed(command: &str, extra: &str) -> String {
    let line = command.strip_prefix("oraculo ").unwrap_or_else(|| panic!("not an oraculo command: {command}"));
    let binary = env!("CARGO_BIN_EXE_oraculo");
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!("'{binary}' {line} {extra}"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", std::env::var("HOME").unwrap_or_default())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{command}: {}\n{stdout}", String::from_utf8_lossy(&output.stderr));
    stdout
}

fn strings(value: &Value) -> Vec<String> {
    value.as_array().unwrap().iter().map(|item| item.as_str().unwrap_or_default().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_reads_the_sample_and_its_config_ingests_and_answers_with_no_edit() {
    let fake = FakeOllama::start(&["bge-m3", "qwen2.5:14b"]).await;
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/campaign");
    let out = tempfile::tempdir().unwrap();
    let config = out.path().join("config.toml");
    let data = out.path().join("data");
    let report = json_of(&init(&sample, &config, &data, &fake.url(), &["--json"]));

    let survey = &report["survey"];
    assert_eq!(survey["language"], "es");
    let sessions: Vec<u64> = survey["sessions"].as_array().unwrap().iter().map(|n| n.as_u64().unwrap()).collect();
    assert_eq!(sessions, (1..=40).collect::<Vec<u64>>(), "the sample's forty sessions, by number");
    assert_eq!(survey["sheets"].as_array().unwrap().len(), 15, "{}", survey["sheets"]);
    assert!(strings(&survey["sheets"]).iter().all(|label| label.starts_with("Ficha: ")), "{}", survey["sheets"]);
    assert!(!survey["world"].as_array().unwrap().is_empty());
    assert_eq!(report["model"]["backend"], "ollama");
    assert_eq!(report["model"]["to_pull"], serde_json::json!([]), "both models are pulled at the stand-in");

    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("backend = \"ollama\"") && text.contains("answer_mode = \"structured\""), "{text}");
    assert!(text.contains(&format!("url = \"{}\"", fake.url())), "{text}");
    assert!(!sample.join("config.toml").exists(), "nothing is written into the notes folder");

    let next = strings(&report["next_commands"]);
    assert_eq!(next.len(), 3, "{next:?}");
    assert!(next[1].starts_with("oraculo ingest --config"), "{next:?}");
    run_printed(&next[1], "--no-annotate");
    let answer = run_printed(&next[2], "--extractive");
    assert!(answer.contains("[Sesión 40]"), "the last session, cited:\n{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_on_an_english_vault_writes_english_labels_and_its_gm_folder() {
    let scratch = Scratch::new(&[
        (
            "Sessions/Session 1.md",
            "# Session 1\nThe party met the ferryman at the docks and they paid him with their gold.\n",
        ),
        (
            "Sessions/Session 2.md",
            "# Session 2\nThe party crossed the river to the Salt Tower and fought the warden there.\n> [!gm] The warden is the lich.\n",
        ),
        ("Characters/Mira.md", "# Mira\nA ranger of the north, and the party's guide.\n"),
        ("GM Notes/twist.md", "The duke was the quillfeather traitor all along.\n"),
    ]);
    let models = scratch.data.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    for file in [oraculo::llm::embed::e5::E5_MODEL_FILE, oraculo::llm::chat::llama_cpp::SMOLLM2_135M_FILE] {
        std::os::unix::fs::symlink(models_dir().join(file), models.join(file)).unwrap();
    }
    let out = tempfile::tempdir().unwrap();
    let config = out.path().join("config.toml");
    // Nothing listens on the discard port: no Ollama answers, so the embedded models.
    let no_ollama = "http://127.0.0.1:9";
    let report = json_of(&init(scratch.campaign.path(), &config, scratch.data.path(), no_ollama, &["--json"]));

    let survey = &report["survey"];
    assert_eq!(survey["language"], "en");
    assert_eq!(survey["sessions"], serde_json::json!([1, 2]));
    assert_eq!(strings(&survey["sheets"]), vec!["Sheet: Mira".to_string()]);
    assert_eq!(strings(&survey["secret_folders"]), vec!["GM Notes".to_string()]);
    let gm_only: Vec<&str> =
        survey["gm_only"].as_array().unwrap().iter().map(|n| n["path"].as_str().unwrap()).collect();
    assert_eq!(gm_only, vec!["GM Notes/twist.md"], "a folder named for the GM is secret by the one rule");
    assert_eq!(survey["secret_markers"]["[!gm]"], 1);
    assert_eq!(report["model"]["backend"], "embedded");
    let missing = strings(&report["model"]["missing_files"]);
    assert_eq!(missing, vec![oraculo::llm::chat::llama_cpp::QWEN_1_5B_FILE.to_string()]);
    let next = strings(&report["next_commands"]);
    assert_eq!(next[0], "bash scripts/fetch-models.sh --chat 1.5b", "the missing model comes first");

    let text = std::fs::read_to_string(&config).unwrap();
    for line in ["label_language = \"en\"", "secret_paths = []", "backend = \"embedded\""] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }
    let again = init(scratch.campaign.path(), &config, scratch.data.path(), no_ollama, &[]);
    assert!(!again.status.success(), "an existing config is not overwritten");
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"), "{}", String::from_utf8_lossy(&again.stderr));
    let inside = scratch.campaign.path().join("config.toml");
    let refused = init(scratch.campaign.path(), &inside, scratch.data.path(), no_ollama, &[]);
    assert!(!refused.status.success() && !inside.exists(), "the notes folder is never written to");
    let forced = init(scratch.campaign.path(), &config, scratch.data.path(), no_ollama, &["--force"]);
    let printed = String::from_utf8_lossy(&forced.stdout);
    assert!(forced.status.success() && printed.contains("Next:"), "{printed}");

    run_printed(&next[1], "");
    let answer = run_printed(&next[2], "--extractive");
    assert!(answer.contains("[Session 2]"), "the last session, in English labels:\n{answer}");
    assert!(!answer.contains("quillfeather"), "the GM folder stays out of a player's answer:\n{answer}");
}
