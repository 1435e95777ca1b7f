//! `oraculo mcp` driven as an assistant drives it: rmcp's client starts the binary and speaks
//! the protocol over its stdin and stdout, on the sample campaign ingested with the real
//! embedded e5 (no chat model: `ask` and `recap` answer with the notes' own sentences).
//! Every tool answers; the players' view holds none of the sample's four GM secrets through
//! any tool, resource or listing, and the GM's view finds each; the errors a client can show
//! come as tool errors with their fix; `search` returns the labels `oraculo search --json`
//! returns, in its order, for every question of the sample's bank (through the searcher the
//! command calls; the command itself for one question in eight).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use rmcp::model::{
    CallToolRequestParams, CallToolResult, GetPromptRequestParams, ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::harness::{models_dir, sample_with_e5 as sample};

/// The sample's GM secrets (`oraculo secrets` on it lists four passages), each with words only
/// the secret holds and the label that holds it.
const SECRETS: &[(&str, &str)] = &[
    ("responde en secreto ante la Magistra", "Verónica de Valdemora's sheet: a gm comment"),
    ("hermanastro bastardo", "Tobías Lerma's sheet: a secret callout"),
    ("cáscara de sal", "session 30: a DM's note callout"),
    ("el precio fue su hermano", "the chronicle: a %% comment"),
];
/// Names that only the secrets hold.
const SECRET_NAMES: &[&str] = &["Umbravela", "Ramiro"];

/// `oraculo` with none of the environment's settings, the embedded e5 from the fetched models
/// and no chat model file in `data` (so answers are the notes' own sentences).
fn oraculo(data: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_oraculo"));
    for var in ["ORACULO_CONFIG", "ORACULO_CAMPAIGN", "ORACULO_EMBEDDER", "ORACULO_CHAT", "ORACULO_OLLAMA_URL"] {
        command.env_remove(var);
    }
    command.env("ORACULO_E5_MODEL", models_dir().join("e5-small-q4.bin")).env("ORACULO_DATA", data);
    command
}

/// `oraculo mcp` (with `extra` flags) on `data`, and rmcp's client connected to it.
async fn connect(data: &Path, extra: &[&str]) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_oraculo"));
    for var in ["ORACULO_CONFIG", "ORACULO_CAMPAIGN", "ORACULO_EMBEDDER", "ORACULO_CHAT", "ORACULO_OLLAMA_URL"] {
        command.env_remove(var);
    }
    command
        .arg("mcp")
        .args(["--data".as_ref(), data.as_os_str()])
        .args(extra)
        .env("ORACULO_E5_MODEL", models_dir().join("e5-small-q4.bin"))
        .env_remove("ORACULO_DATA");
    let transport = TokioChildProcess::new(command).expect("oraculo mcp starts");
    ().serve(transport).await.expect("the MCP session initializes")
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else { panic!("arguments are an object") };
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments))
        .await
        .unwrap_or_else(|err| panic!("{tool}: {err}"))
}

/// A tool's text content, all of it.
fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|content| content.as_text()).map(|text| text.text.as_str()).collect()
}

/// A successful call's structured content.
fn structured(tool: &str, result: &CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "{tool} failed: {}", text_of(result));
    result.structured_content.clone().unwrap_or_else(|| panic!("{tool} has no structured content"))
}

/// A failed call's error kind, and its message.
fn failure(tool: &str, result: &CallToolResult) -> (String, String) {
    assert_eq!(result.is_error, Some(true), "{tool} should have failed: {}", text_of(result));
    let structured = result.structured_content.clone().unwrap_or_default();
    (structured["error"].as_str().unwrap_or_default().to_string(), text_of(result))
}

/// Everything a client can read through the server, as one text: every tool's answer on the
/// sample, every label's source, every resource, the prompt, the server's instructions and
/// its tools' descriptions.
async fn everything_readable(client: &RunningService<RoleClient, ()>) -> String {
    let mut seen = String::new();
    let info = client.peer_info().expect("the server introduced itself");
    keep(&mut seen, &*info);
    keep(&mut seen, &client.list_all_tools().await.unwrap());
    let sessions = call(client, "sessions", json!({})).await;
    keep(&mut seen, &sessions);
    let listed = structured("sessions", &sessions);
    let labels: Vec<String> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .chain(listed["other_sources"].as_array().unwrap())
        .map(|source| source["label"].as_str().unwrap().to_string())
        .collect();
    for label in &labels {
        let source = call(client, "source", json!({ "label": label })).await;
        structured("source", &source);
        keep(&mut seen, &source);
    }
    let resources = client.list_all_resources().await.unwrap();
    let resource_labels: BTreeSet<&str> = resources.iter().map(|resource| resource.name.as_str()).collect();
    assert_eq!(resource_labels, labels.iter().map(String::as_str).collect(), "each label is a resource");
    for resource in &resources {
        let read = client.read_resource(ReadResourceRequestParams::new(resource.uri.clone())).await.unwrap();
        keep(&mut seen, &read);
    }
    let questions = [
        "¿Quién es el verdadero padre de Tobías?",
        "¿Qué lleva Verónica bajo el guante y ante quién responde?",
        "¿Qué es el Heraldo de la Marea Baja? ¿Sigue Leandro dentro?",
        "¿Qué pacto hizo Verónica y cuál fue el precio?",
        "¿Qué pasó con el archiduque?",
    ];
    for question in questions {
        for tool in ["search", "ask"] {
            let answer = call(client, tool, json!({ "question": question })).await;
            structured(tool, &answer);
            keep(&mut seen, &answer);
        }
    }
    for arguments in [json!({}), json!({ "session": 30 }), json!({ "session": "la penúltima" })] {
        let recap = call(client, "recap", arguments).await;
        structured("recap", &recap);
        keep(&mut seen, &recap);
    }
    for name in ["Verónica", "Tobías", "Leandro"] {
        let timeline = call(client, "timeline", json!({ "name": name })).await;
        structured("timeline", &timeline);
        keep(&mut seen, &timeline);
    }
    let compendium = call(client, "compendium", json!({})).await;
    structured("compendium", &compendium);
    keep(&mut seen, &compendium);
    let prompt = client
        .get_prompt(
            GetPromptRequestParams::new("cite_the_notes")
                .with_arguments(json!({ "question": "¿Qué pasó con el archiduque?" }).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    keep(&mut seen, &prompt);
    seen
}

/// Adds what a client reads of `value` (its JSON, non-ASCII as written: «cáscara» is
/// searched as the notes have it) to `seen`.
fn keep<T: serde::Serialize + ?Sized>(seen: &mut String, value: &T) {
    seen.push_str(&serde_json::to_string(value).unwrap());
    seen.push('\n');
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_players_view_answers_every_tool_and_holds_no_secret_the_gm_view_finds_them() {
    let data = sample();

    let player = connect(data, &[]).await;
    let tools: BTreeSet<String> =
        player.list_all_tools().await.unwrap().iter().map(|tool| tool.name.to_string()).collect();
    let expected: BTreeSet<String> =
        ["search", "ask", "timeline", "recap", "source", "sessions", "compendium"].map(String::from).into();
    assert_eq!(tools, expected);
    for tool in player.list_all_tools().await.unwrap() {
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(description.contains("players' view"), "{}: {description}", tool.name);
    }
    let seen = everything_readable(&player).await;
    for (words, what) in SECRETS {
        assert!(!seen.contains(words), "the players' view shows {what}: «{words}»");
    }
    for name in SECRET_NAMES {
        assert!(!seen.contains(name), "the players' view names «{name}»");
    }
    // The question's answer cites its notes, in Spanish.
    let answer = call(&player, "ask", json!({ "question": "¿Qué pasó con el archiduque?" })).await;
    let answer_text = text_of(&answer);
    assert!(answer_text.contains("[Sesión "), "{answer_text}");
    assert!(answer_text.contains("Fuentes:"), "{answer_text}");
    assert_eq!(structured("ask", &answer)["mode"], "extractive", "no chat model in this data dir");
    let quoted: Vec<&str> = answer_text.lines().filter(|line| line.starts_with("- «")).collect();
    let distinct: BTreeSet<&str> = quoted.iter().copied().collect();
    assert_eq!(quoted.len(), distinct.len(), "the notes' sentences are said once: {answer_text}");
    player.cancel().await.unwrap();

    let gm = connect(data, &["--gm"]).await;
    for tool in gm.list_all_tools().await.unwrap() {
        let description = tool.description.as_deref().unwrap_or_default();
        assert!(description.contains("GM's view"), "{}: {description}", tool.name);
    }
    let seen = everything_readable(&gm).await;
    for (words, what) in SECRETS {
        assert!(seen.contains(words), "the GM's view misses {what}: «{words}»");
    }
    // A secret is found by searching for it, not only by reading every note.
    let found = call(&gm, "search", json!({ "question": "¿Quién es el verdadero padre de Tobías?" })).await;
    assert!(text_of(&found).contains("hermanastro"), "{}", text_of(&found));
    gm.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_errors_are_tool_errors_with_their_fix_and_the_server_goes_on() {
    // No index yet: a fresh data dir, no ingest.
    let empty = TempDir::new().unwrap();
    let client = connect(empty.path(), &[]).await;
    let (kind, message) =
        failure("search", &call(&client, "search", json!({ "question": "¿Qué pasó con el archiduque?" })).await);
    assert_eq!(kind, "not_indexed");
    assert!(message.contains(&format!("oraculo ingest --data {}", empty.path().display())), "{message}");
    let (kind, _) = failure("sessions", &call(&client, "sessions", json!({})).await);
    assert_eq!(kind, "not_indexed");
    assert!(client.list_all_resources().await.unwrap().is_empty(), "no index, no resource");
    client.cancel().await.unwrap();

    let client = connect(sample(), &[]).await;
    let cases = [
        ("search", json!({ "question": "  " }), "empty_question", "empty"),
        ("ask", json!({ "question": "" }), "empty_question", "empty"),
        ("ask", json!({ "question": "¿y? ".repeat(400) }), "question_too_long", "at most 1000"),
        ("source", json!({ "label": "Sesión 99" }), "unknown_label", "`sessions`"),
        ("source", json!({ "label": "sesión 9" }), "unknown_label", "did you mean: Sesión 9"),
        ("timeline", json!({ "name": "Zorblax Quintuplo" }), "unknown_entity", "`compendium`"),
        ("recap", json!({ "session": 400 }), "missing_session", "the last session there is 40"),
        ("recap", json!({ "session": "la del dragón" }), "unknown_session", "la última"),
        ("search", json!({ "question": "¿Qué pasó?", "campaign": "Otra" }), "unknown_campaign", "«sample»"),
    ];
    for (tool, arguments, expected_kind, fix) in cases {
        let (kind, message) = failure(tool, &call(&client, tool, arguments).await);
        assert_eq!(kind, expected_kind, "{tool}: {message}");
        assert!(message.contains(fix), "{tool}: «{fix}» not in: {message}");
    }
    // Arguments of the wrong type are a tool error too (rmcp's), and the server answers the next call.
    let malformed = call(&client, "search", json!({ "question": 12 })).await;
    assert_eq!(malformed.is_error, Some(true), "a number is no question");
    assert!(text_of(&malformed).contains("expected a string"), "{}", text_of(&malformed));
    let unknown = client.read_resource(ReadResourceRequestParams::new("oraculo://notes/sample/Sesi%C3%B3n%2099")).await;
    assert!(unknown.is_err(), "an unknown label is no resource");
    let answer = call(&client, "search", json!({ "question": "¿Qué pasó con el archiduque?" })).await;
    assert!(!structured("search", &answer)["fragments"].as_array().unwrap().is_empty());
    client.cancel().await.unwrap();
}

/// Every this-many-th question of the bank is also searched by an `oraculo search --json`
/// process: the command line's own path (its flags, its config) for a question of each
/// stretch of the bank, while the whole bank is compared through the application layer's
/// searcher the command calls, opened in this process (a process per question spent a minute
/// of CPU loading e5 73 times).
const CLI_EVERY: usize = 8;

/// The configuration `oraculo search` loads from `ORACULO_DATA` and `ORACULO_E5_MODEL` on
/// `data`, no config file, no flag.
fn config_of(data: &Path) -> oraculo::config::Config {
    use oraculo::config::{CliOverrides, Config, RawConfig};
    let raw = RawConfig::parse("", Path::new("config.toml")).unwrap();
    let env = |var: &str| match var {
        "ORACULO_DATA" => Some(data.display().to_string()),
        "ORACULO_E5_MODEL" => Some(models_dir().join("e5-small-q4.bin").display().to_string()),
        _ => None,
    };
    Config::from_layers(raw, &env, &CliOverrides::default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_search_returns_the_labels_of_oraculo_search_json_in_its_order_for_the_whole_bank() {
    let data = sample();
    let bank = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("eval/questions.jsonl")).unwrap();
    let questions: Vec<String> = bank
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["question"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(questions.len(), 73);
    let labels_of = |json: &Value| -> Vec<String> {
        json["candidates"].as_array().unwrap().iter().map(|c| c["label"].as_str().unwrap().to_string()).collect()
    };
    // The command line's searches, side by side while the searcher and the server answer.
    let by_cli: Vec<(usize, std::thread::JoinHandle<std::process::Output>)> = (0..questions.len())
        .step_by(CLI_EVERY)
        .map(|at| {
            let (data, question) = (data.to_path_buf(), questions[at].clone());
            (at, std::thread::spawn(move || oraculo(&data).args(["search", "--json", &question]).output().unwrap()))
        })
        .collect();
    let searcher = oraculo::app::open_searcher(&config_of(data), oraculo::retrieve::DEFAULT_K).await.unwrap();
    let client = connect(data, &[]).await;
    let mut searched = Vec::with_capacity(questions.len());
    for question in &questions {
        let request =
            oraculo::oracle::AskRequest { question, history: &[], audience: oraculo::retrieve::Audience::Player };
        let found = searcher.search(&request).await.unwrap_or_else(|err| panic!("{question}: {err:#}"));
        let searcher_labels = labels_of(&serde_json::to_value(&found).unwrap());
        let answer = call(&client, "search", json!({ "question": question })).await;
        let served = structured("search", &answer);
        let mcp_labels: Vec<&str> =
            served["fragments"].as_array().unwrap().iter().map(|f| f["label"].as_str().unwrap()).collect();
        assert_eq!(mcp_labels, searcher_labels, "{question}");
        searched.push(searcher_labels);
    }
    client.cancel().await.unwrap();
    for (at, process) in by_cli {
        let output = process.join().unwrap();
        let question = &questions[at];
        assert!(output.status.success(), "{question}: {}", String::from_utf8_lossy(&output.stderr));
        let cli: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(labels_of(&cli), searched[at], "`oraculo search --json` and the searcher: {question}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_serves_every_campaign_of_the_config_each_named_and_one_when_the_command_line_names_it() {
    let root = TempDir::new().unwrap();
    let write = |path: &str, text: &str| {
        let full = root.path().join(path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, text).unwrap();
    };
    write("galerna/Sesiones/Sesion 1.md", "# Sesión 1\nEl grupo llega al puerto de Galerna y alquila un bote.\n");
    write(
        "galerna/Sesiones/Sesion 2.md",
        "# Sesión 2\nEl faro se apaga.\n%%Zorblax apagó el faro.%%\nEl grupo sube al faro con antorchas.\n",
    );
    write("vorn/Sessions/Session 1.md", "# Session 1\nThe party reaches the mines of Vorn and meets a dwarf.\n");
    write("nube/Sesiones/Sesion 1.md", "# Sesión 1\nNadie ha leído esta campaña todavía.\n");
    let campaign = |name: &str, folder: &str, extra: &str| {
        format!("[[campaigns]]\nname = \"{name}\"\ndir = \"{}\"\n{extra}\n", root.path().join(folder).display())
    };
    let config = root.path().join("config.toml");
    std::fs::write(
        &config,
        campaign("Galerna", "galerna", "")
            + &campaign("Vorn", "vorn", "label_language = \"en\"")
            + &campaign("Nube", "nube", ""),
    )
    .unwrap();
    let data = root.path().join("data");
    let config_flag = config.to_str().unwrap();
    for name in ["Galerna", "Vorn"] {
        let output = oraculo(&data)
            .args(["ingest", "--no-annotate", "--config", config_flag, "--campaign", name])
            .output()
            .unwrap();
        assert!(output.status.success(), "ingest {name}: {}", String::from_utf8_lossy(&output.stderr));
    }

    let client = connect(&data, &["--config", config_flag]).await;
    let (kind, message) = failure("search", &call(&client, "search", json!({ "question": "¿Qué pasó?" })).await);
    assert_eq!(kind, "campaign_needed");
    assert!(message.contains("«Galerna», «Vorn», «Nube»"), "{message}");
    let galerna = structured("sessions", &call(&client, "sessions", json!({ "campaign": "Galerna" })).await);
    let labels: Vec<&str> =
        galerna["sessions"].as_array().unwrap().iter().map(|s| s["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["Sesión 1", "Sesión 2"]);
    let vorn =
        call(&client, "search", json!({ "question": "Who did the party meet in the mines?", "campaign": "vorn" }))
            .await;
    assert_eq!(structured("search", &vorn)["fragments"][0]["label"], "Session 1");
    assert!(text_of(&vorn).contains("players' view"), "in the question's language: {}", text_of(&vorn));
    let secret = call(&client, "source", json!({ "label": "Sesión 2", "campaign": "Galerna" })).await;
    assert!(!text_of(&secret).contains("Zorblax"), "{}", text_of(&secret));
    let (kind, message) =
        failure("search", &call(&client, "search", json!({ "question": "¿Qué pasó?", "campaign": "Nube" })).await);
    assert_eq!(kind, "not_indexed");
    assert!(message.contains(&format!("--config {config_flag}")) && message.contains("--campaign Nube"), "{message}");
    let uris: BTreeSet<String> = client.list_all_resources().await.unwrap().into_iter().map(|r| r.uri).collect();
    let expected: BTreeSet<String> = [
        "oraculo://notes/Galerna/Sesi%C3%B3n%201",
        "oraculo://notes/Galerna/Sesi%C3%B3n%202",
        "oraculo://notes/Vorn/Session%201",
    ]
    .map(String::from)
    .into();
    assert_eq!(uris, expected, "each ingested campaign's labels, each under its campaign");
    let read = client.read_resource(ReadResourceRequestParams::new("oraculo://notes/Vorn/Session%201")).await.unwrap();
    let ResourceContents::TextResourceContents { text, .. } = &read.contents[0] else { panic!("a text resource") };
    assert!(text.contains("mines of Vorn"), "{text}");
    client.cancel().await.unwrap();

    // Named on the command line, one campaign is served alone, and needs no `campaign`.
    let client = connect(&data, &["--config", config_flag, "--campaign", "Vorn"]).await;
    let answer = call(&client, "sessions", json!({})).await;
    assert_eq!(structured("sessions", &answer)["campaign"], "Vorn");
    client.cancel().await.unwrap();
}

/// The `ask` tool keeps nothing for the DM's report, unless the config asks
/// (`[feedback] keep_mcp = true`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_ask_keeps_a_question_for_the_dm_only_when_the_config_asks() {
    // The one test that writes to the shared index: only the kept questions' table, which no
    // other test reads (a copy of the data dir would not be found: the sample's index is keyed
    // by where its notes were unpacked).
    let data = sample();
    let kept = || {
        let output = oraculo(data).args(["asked", "--gm", "--json"]).output().unwrap();
        assert!(output.status.success(), "oraculo asked: {}", String::from_utf8_lossy(&output.stderr));
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        report["n_questions"].as_u64().unwrap()
    };
    let question = json!({ "question": "¿Quién es Odo?" });
    let client = connect(data, &[]).await;
    structured("ask", &call(&client, "ask", question.clone()).await);
    client.cancel().await.unwrap();
    assert_eq!(kept(), 0, "keep_mcp is off by default");

    let config = TempDir::new().unwrap();
    let config_path = config.path().join("config.toml");
    std::fs::write(&config_path, "[feedback]\nkeep_mcp = true\n").unwrap();
    let client = connect(data, &["--config", config_path.to_str().unwrap()]).await;
    structured("ask", &call(&client, "ask", question).await);
    client.cancel().await.unwrap();
    assert_eq!(kept(), 1, "kept with keep_mcp = true");
}
