//! The chat backends through their production code: Ollama and the OpenAI-compatible client
//! against the local stand-in (real wire formats over HTTP), llama.cpp with the real
//! SmolLM2-135M GGUF on one thread.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use oraculo::app::connect_chat;
use oraculo::config::ChatConfig;
use oraculo::llm::LlmError;
use oraculo::llm::chat::llama_cpp::{LlamaCppChat, LlamaCppConfig, QWEN_0_5B_FILE, QWEN_1_5B_FILE, SMOLLM2_135M_FILE};
use oraculo::llm::chat::ollama::{OllamaChat, OllamaChatConfig};
use oraculo::llm::chat::openai::{ApiKey, OpenAiChat, OpenAiChatConfig};
use oraculo::llm::chat::{ChatMessage, ChatModel, ChatRequest, ChatResponse};
use serde_json::{Value, json};

use crate::fake_ollama::{FakeOllama, Fault};
use crate::harness::models_dir;

const MODEL: &str = "qwen2.5:14b";

fn ollama_config(url: String) -> OllamaChatConfig {
    OllamaChatConfig {
        server: oraculo::llm::ModelServer { url, model: MODEL.into(), timeout: Duration::from_secs(10), retries: 0 },
        keep_alive: "30m".into(),
        n_ctx: Some(32768),
    }
}

fn openai_config(url: String, api_key: Option<&str>) -> OpenAiChatConfig {
    OpenAiChatConfig {
        server: oraculo::llm::ModelServer { url, model: MODEL.into(), timeout: Duration::from_secs(10), retries: 0 },
        api_key: api_key.map(|key| ApiKey::new(key.to_string())),
        n_ctx: Some(32768),
    }
}

fn request(user: &str) -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::system("Responde en español."), ChatMessage::user(user)],
        json_schema: None,
        max_tokens: 256,
        temperature: 0.0,
    }
}

fn ids_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "ids": { "type": "array", "items": { "type": "integer" } } },
        "required": ["ids"]
    })
}

/// Runs `chat`, collecting what the sink received.
async fn chat_collecting(
    model: &dyn ChatModel,
    request: &ChatRequest,
) -> (Result<ChatResponse, LlmError>, Vec<String>) {
    let pieces = Mutex::new(Vec::new());
    let sink = |piece: &str| pieces.lock().unwrap().push(piece.to_string());
    let result = model.chat(request, Some(&sink)).await;
    (result, pieces.into_inner().unwrap())
}

/// An address where nothing listens.
async fn dead_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

// --- Ollama -------------------------------------------------------------------------

#[tokio::test]
async fn ollama_chat_streams_tokens_in_order_and_returns_the_whole_text() {
    let fake = FakeOllama::start(&[MODEL]).await;
    let reply = "Ardo cayó en el puente [Sesión 1], y nadie lo vio venir.";
    fake.enqueue_reply(reply);
    let chat = OllamaChat::new(ollama_config(fake.url())).unwrap();

    let (result, pieces) = chat_collecting(&chat, &request("¿Quién murió?")).await;
    let answer = result.unwrap();
    assert_eq!(answer.text, reply);
    assert!(pieces.len() > 5, "streamed in pieces: {pieces:?}");
    assert_eq!(pieces.concat(), reply);
    assert_eq!(answer.completion_tokens, Some(pieces.len()));
    assert!(answer.prompt_tokens.is_some());

    let sent = fake.chat_requests("/api/chat");
    assert_eq!(sent.len(), 1);
    let body = &sent[0].body;
    assert_eq!(body["model"], MODEL);
    assert_eq!(body["stream"], true);
    assert_eq!(body["keep_alive"], "30m");
    assert_eq!(body["options"]["num_predict"], 256);
    assert_eq!(body["options"]["temperature"], 0.0);
    assert_eq!(body["messages"][1], json!({ "role": "user", "content": "¿Quién murió?" }));
    assert!(body.get("format").is_none(), "no schema, no format: {body}");
    assert_eq!(chat.id(), "ollama:qwen2.5:14b");
}

#[tokio::test]
async fn ollama_num_ctx_is_set_on_every_request_and_grows_with_the_prompt() {
    let fake = FakeOllama::start(&[MODEL]).await;
    let chat = OllamaChat::new(ollama_config(fake.url())).unwrap();
    let long_question = "palabra ".repeat(3000); // 24000 characters: ~8000 estimated tokens
    let huge_question = "palabra ".repeat(60000); // beyond the 32768-token window
    for question in ["¿Quién murió?", long_question.as_str(), huge_question.as_str()] {
        chat.chat(&request(question), None).await.unwrap();
    }
    let num_ctx: Vec<u64> =
        fake.chat_requests("/api/chat").iter().map(|r| r.body["options"]["num_ctx"].as_u64().unwrap()).collect();
    assert_eq!(num_ctx[0], 1024, "a short prompt plus 256 tokens fits the smallest window");
    // 24000/3 + 4 + 7 + 4 = 8015 prompt tokens, + 256 = 8271 → 9216.
    assert_eq!(num_ctx[1], 9216);
    assert_eq!(num_ctx[2], 32768, "capped at the configured window");
    assert!(num_ctx.iter().all(|n| n % 1024 == 0), "{num_ctx:?}");
    // The estimate errs high: never below the prompt's characters / 4.
    assert!(chat.count_tokens(&long_question) >= long_question.len() / 4);
}

#[tokio::test]
async fn ollama_json_schema_goes_in_format() {
    let fake = FakeOllama::start(&[MODEL]).await;
    let chat = OllamaChat::new(ollama_config(fake.url())).unwrap();
    let mut asked = request("Los 8 mejores ids, en JSON.");
    asked.json_schema = Some(ids_schema());
    let answer = chat.chat(&asked, None).await.unwrap();
    assert_eq!(fake.chat_requests("/api/chat")[0].body["format"], ids_schema());
    let parsed: Value = serde_json::from_str(&answer.text).unwrap();
    assert_eq!(parsed, json!({ "ids": [] }));
}

#[tokio::test]
async fn ollama_errors_read_as_fixes() {
    // Server down: name the command that starts it.
    let chat = OllamaChat::new(ollama_config(dead_url().await)).unwrap();
    let err = chat.chat(&request("hola"), None).await.unwrap_err();
    assert!(matches!(err, LlmError::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains("ollama serve"), "{err}");

    // Model not pulled: name the command that pulls it.
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let chat = OllamaChat::new(ollama_config(fake.url())).unwrap();
    let err = chat.chat(&request("hola"), None).await.unwrap_err();
    assert!(err.to_string().contains("ollama pull qwen2.5:14b"), "{err}");

    // Silence: name the setting to raise.
    let fake = FakeOllama::start(&[MODEL]).await;
    let chat = OllamaChat::new({
        let mut config = ollama_config(fake.url());
        config.server.timeout = Duration::from_millis(300);
        config
    })
    .unwrap();
    fake.enqueue(Fault::Delay(Duration::from_secs(30)));
    let err = chat.chat(&request("hola"), None).await.unwrap_err();
    assert!(matches!(err, LlmError::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("ollama.timeout_secs"), "{err}");

    // A 500 with the server's message.
    fake.enqueue(Fault::Status(500, "llama runner process has terminated".into()));
    let err = chat.chat(&request("hola"), None).await.unwrap_err();
    assert!(err.to_string().contains("llama runner process has terminated"), "{err}");
}

#[tokio::test]
async fn ollama_broken_streams_are_errors_not_short_answers() {
    let fake = FakeOllama::start(&[MODEL]).await;
    let chat = OllamaChat::new(ollama_config(fake.url())).unwrap();

    fake.enqueue_reply("una respuesta que se corta a la mitad sin avisar");
    fake.enqueue(Fault::Truncated);
    let (result, pieces) = chat_collecting(&chat, &request("hola")).await;
    let err = result.unwrap_err();
    assert!(matches!(err, LlmError::StreamIncomplete { .. }), "{err:?}");
    assert!(!pieces.is_empty(), "what arrived was still streamed");

    fake.enqueue_reply("una respuesta con una línea rota");
    fake.enqueue(Fault::BadJson);
    let err = chat.chat(&request("hola"), None).await.unwrap_err();
    assert!(matches!(err, LlmError::BadResponse { .. }), "{err:?}");
    assert!(err.to_string().contains("does not parse"), "{err}");
}

#[tokio::test]
async fn ollama_retries_a_failure_before_anything_streamed() {
    let fake = FakeOllama::start(&[MODEL]).await;
    let chat = OllamaChat::new({
        let mut config = ollama_config(fake.url());
        config.server.retries = 1;
        config
    })
    .unwrap();
    fake.enqueue(Fault::Status(503, "loading model".into()));
    fake.enqueue_reply("ya cargado");
    let answer = chat.chat(&request("hola"), None).await.unwrap();
    assert_eq!(answer.text, "ya cargado");
    assert_eq!(fake.chat_requests("/api/chat").len(), 2);
}

#[tokio::test]
async fn ollama_asks_to_be_refused_rather_than_truncated_and_reads_the_refusal() {
    let fake = FakeOllama::start(&[MODEL]).await;
    fake.set_window(4096);
    let chat = OllamaChat::new(OllamaChatConfig { n_ctx: Some(1024), ..ollama_config(fake.url()) }).unwrap();
    let err = chat.chat(&request(&"palabra ".repeat(2000)), None).await.unwrap_err();
    let sent = fake.chat_requests("/api/chat");
    assert_eq!(sent[0].body["truncate"], false);
    assert_eq!(sent[0].body["options"]["num_ctx"], 1024, "capped at chat.n_ctx");
    match &err {
        LlmError::ContextExceeded { n_ctx, prompt_tokens, message, .. } => {
            assert_eq!(*n_ctx, Some(1024));
            assert!(prompt_tokens.is_some_and(|n| n > 1024), "{err:?}");
            assert!(message.contains("exceeds the available context size"), "{message}");
        }
        other => panic!("expected a refusal for length, got {other:?}"),
    }
    assert!(err.is_context_exceeded());
    assert_eq!(fake.requests_to("/api/show"), 0, "chat.n_ctx set: the server is not asked");
}

// --- OpenAI-compatible ----------------------------------------------------------------

#[tokio::test]
async fn openai_streams_with_response_format_and_the_bearer_key() {
    let fake = FakeOllama::start(&[MODEL]).await;
    fake.require_api_key("sk-test-123");
    let reply = r#"{"ids": [3, 1, 4]}"#;
    fake.enqueue_reply(reply);
    let chat = OpenAiChat::new(openai_config(format!("{}/v1", fake.url()), Some("sk-test-123"))).unwrap();
    let mut asked = request("Los mejores ids.");
    asked.json_schema = Some(ids_schema());

    let (result, pieces) = chat_collecting(&chat, &asked).await;
    let answer = result.unwrap();
    assert_eq!(answer.text, reply);
    assert!(pieces.len() > 1, "{pieces:?}");
    assert_eq!(pieces.concat(), reply);
    assert_eq!(answer.completion_tokens, Some(pieces.len()));

    let sent = fake.chat_requests("/v1/chat/completions");
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("authorization"), Some("Bearer sk-test-123"));
    let body = &sent[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 256);
    assert_eq!(
        body["response_format"],
        json!({ "type": "json_schema", "json_schema": { "name": "answer", "schema": ids_schema(), "strict": true } })
    );
    assert!(!format!("{chat:?}").contains("sk-test-123"));
}

#[tokio::test]
async fn openai_errors_read_as_fixes() {
    let fake = FakeOllama::start(&[MODEL]).await;
    fake.require_api_key("sk-right");

    let chat = OpenAiChat::new(openai_config(fake.url(), Some("sk-wrong"))).unwrap();
    let err = chat.chat(&request("hola"), None).await.unwrap_err();
    assert!(err.to_string().contains("ORACULO_OPENAI_API_KEY"), "{err}");
    assert!(!err.to_string().contains("sk-wrong"), "{err}");

    let chat = OpenAiChat::new({
        let mut config = openai_config(fake.url(), Some("sk-right"));
        config.server.model = "llama-70b".into();
        config
    })
    .unwrap();
    let err = chat.chat(&request("hola"), None).await.unwrap_err();
    assert!(matches!(err, LlmError::ModelMissing { .. }), "{err:?}");
    assert!(err.to_string().contains("chat.model"), "{err}");

    let chat = OpenAiChat::new(openai_config(dead_url().await, None)).unwrap();
    let err = chat.chat(&request("hola"), None).await.unwrap_err();
    assert!(err.to_string().contains("llama-server"), "{err}");

    let chat = OpenAiChat::new(openai_config(fake.url(), Some("sk-right"))).unwrap();
    fake.enqueue(Fault::Truncated);
    fake.enqueue_reply("una respuesta que no termina nunca como debe");
    let err = chat.chat(&request("hola"), None).await.unwrap_err();
    assert!(matches!(err, LlmError::StreamIncomplete { .. }), "{err:?}");
}

#[tokio::test]
async fn openai_reads_llama_servers_refusal_with_its_numbers() {
    let fake = FakeOllama::start(&[MODEL]).await;
    fake.set_window(1024);
    let chat = OpenAiChat::new(OpenAiChatConfig { n_ctx: None, ..openai_config(fake.url(), None) }).unwrap();
    let window = chat.window().await;
    assert_eq!((window.tokens, window.source), (1024, oraculo::llm::chat::WindowSource::ServerProps));
    let err = chat.chat(&request(&"palabra ".repeat(2000)), None).await.unwrap_err();
    match &err {
        LlmError::ContextExceeded { n_ctx, prompt_tokens, message, .. } => {
            assert_eq!(*n_ctx, Some(1024));
            assert!(prompt_tokens.is_some_and(|n| n >= 1024), "{err:?}");
            assert!(
                message.ends_with("exceeds the available context size (1024 tokens), try increasing it"),
                "{message}"
            );
        }
        other => panic!("expected a refusal for length, got {other:?}"),
    }
    assert_eq!(fake.chat_requests("/v1/chat/completions").len(), 1, "a refusal is not retried as transient");
    let relearnt = chat.refresh_window(&err).await;
    assert_eq!((relearnt.tokens, relearnt.source), (1024, oraculo::llm::chat::WindowSource::Refusal));
    assert_eq!(chat.context_window(), 1024);
}

// --- registration ---------------------------------------------------------------------

#[tokio::test]
async fn connect_chat_builds_the_configured_backend() {
    let fake = FakeOllama::start(&[MODEL]).await;
    let data = tempfile::TempDir::new().unwrap();
    let chat = connect_chat(&ChatConfig::Ollama(ollama_config(fake.url())), data.path()).await.unwrap();
    assert_eq!(chat.id(), "ollama:qwen2.5:14b");
    fake.enqueue_reply("hola");
    assert_eq!(chat.chat(&request("hola"), None).await.unwrap().text, "hola");

    let chat = connect_chat(&ChatConfig::OpenAi(openai_config(fake.url(), None)), data.path()).await.unwrap();
    assert_eq!(chat.id(), "openai:qwen2.5:14b");

    // The embedded default in an empty data dir: the error names the script that fetches it.
    let config = ChatConfig::Embedded { gguf: None, threads: 1, n_ctx: 2048 };
    let err = connect_chat(&config, data.path()).await.err().expect("no model in an empty data dir");
    assert!(err.to_string().contains("scripts/fetch-models.sh"), "{err}");
    assert!(err.to_string().contains(SMOLLM2_135M_FILE), "{err}");
}

#[test]
fn the_embedded_default_is_the_largest_model_fetched() {
    let data = tempfile::TempDir::new().unwrap();
    let models = data.path().join("models");
    assert_eq!(LlamaCppChat::default_path(data.path()), models.join(SMOLLM2_135M_FILE));
    std::fs::create_dir_all(&models).unwrap();
    std::fs::write(models.join(QWEN_0_5B_FILE), "GGUF").unwrap();
    assert_eq!(LlamaCppChat::default_path(data.path()), models.join(QWEN_0_5B_FILE));
    std::fs::write(models.join(QWEN_1_5B_FILE), "GGUF").unwrap();
    assert_eq!(LlamaCppChat::default_path(data.path()), models.join(QWEN_1_5B_FILE));
}

// --- llama.cpp, in-process --------------------------------------------------------------

/// SmolLM2-135M, loaded once for every test here, one thread (stable on a busy machine).
fn smollm() -> &'static LlamaCppChat {
    static MODEL: OnceLock<LlamaCppChat> = OnceLock::new();
    MODEL.get_or_init(|| {
        let config = LlamaCppConfig { gguf: models_dir().join(SMOLLM2_135M_FILE), threads: 1, n_ctx: 2048 };
        LlamaCppChat::load(&config).unwrap_or_else(|err| panic!("{err} (the tests need the embedded chat model)"))
    })
}

#[tokio::test]
async fn llama_cpp_generates_and_streams_text() {
    let model = smollm();
    assert_eq!(model.id(), "llama.cpp:SmolLM2-135M-Instruct.Q4_1");
    assert_eq!(model.context_window(), 2048);
    let asked = ChatRequest {
        messages: vec![
            ChatMessage::system("You are a helpful assistant."),
            ChatMessage::user("What is the capital of France?"),
        ],
        json_schema: None,
        max_tokens: 24,
        temperature: 0.0,
    };
    let (result, pieces) = chat_collecting(model, &asked).await;
    let answer = result.unwrap();
    assert!(!answer.text.trim().is_empty(), "{answer:?}");
    assert_eq!(pieces.concat(), answer.text);
    let generated = answer.completion_tokens.unwrap();
    assert!((1..=24).contains(&generated), "{answer:?}");
    // The prompt is the templated conversation: more than its two texts alone.
    let texts =
        model.count_tokens("You are a helpful assistant.") + model.count_tokens("What is the capital of France?");
    assert!(answer.prompt_tokens.unwrap() > texts, "{answer:?}");

    // Greedy sampling: the same question, the same answer.
    let again = model.chat(&asked, None).await.unwrap();
    assert_eq!(again.text, answer.text);
}

#[tokio::test]
async fn llama_cpp_json_schema_output_parses_and_validates() {
    let model = smollm();
    let mut capped = ids_schema();
    capped["properties"]["ids"]["maxItems"] = json!(8);
    for (schema, max_items) in [(ids_schema(), None), (capped, Some(8))] {
        let asked = ChatRequest {
            messages: vec![
                ChatMessage::system("Answer with JSON only."),
                ChatMessage::user("Fragments 4, 7 and 9 mention the dragon. Give their ids as {\"ids\": [...]}."),
            ],
            json_schema: Some(schema),
            max_tokens: 96,
            temperature: 0.0,
        };
        let answer = model.chat(&asked, None).await.unwrap();
        let parsed: Value =
            serde_json::from_str(&answer.text).unwrap_or_else(|err| panic!("{err}: not JSON: {:?}", answer.text));
        let object = parsed.as_object().unwrap_or_else(|| panic!("not an object: {parsed}"));
        assert_eq!(object.len(), 1, "only the schema's property: {parsed}");
        let ids = parsed["ids"].as_array().unwrap_or_else(|| panic!("no ids array: {parsed}"));
        assert!(ids.iter().all(Value::is_i64), "{parsed}");
        if let Some(max_items) = max_items {
            // SmolLM2 counts on past 8 when free to (measured: 1…9); the grammar stops it.
            assert!(ids.len() <= max_items, "{parsed}");
        }
    }
}

#[tokio::test]
async fn llama_cpp_reads_again_only_what_changed_after_a_cached_prefix() {
    // Its own instance: the shared one's cached contexts serve the other tests meanwhile.
    let config = LlamaCppConfig { gguf: models_dir().join(SMOLLM2_135M_FILE), threads: 1, n_ctx: 1024 };
    let model = LlamaCppChat::load(&config).unwrap();
    let system = format!("Eres el oráculo de la campaña. {}", "Responde solo con las notas del máster. ".repeat(12));
    let ask = |system: &str, user: &str| ChatRequest {
        messages: vec![ChatMessage::system(system), ChatMessage::user(user)],
        json_schema: None,
        max_tokens: 4,
        temperature: 0.0,
    };
    model.chat(&ask(&system, "¿Quién es Baika?"), None).await.unwrap();
    let system_tokens = model.count_tokens(&system);
    // Another conversation in between keeps its own cached context.
    model.chat(&ask("You are a rerank model. Answer with JSON.", "Rank these."), None).await.unwrap();
    let second = model.chat(&ask(&system, "¿Y el archiduque?"), None).await.unwrap();
    let cached = second.cached_prompt_tokens.unwrap();
    assert!(cached >= system_tokens, "{cached} cached, the system prompt alone is {system_tokens}: {second:?}");
    assert!(cached < second.prompt_tokens.unwrap(), "the new question is read: {second:?}");
    // The very same prompt again: everything but its last token comes from the cache.
    let again = model.chat(&ask(&system, "¿Y el archiduque?"), None).await.unwrap();
    assert_eq!(again.cached_prompt_tokens, Some(again.prompt_tokens.unwrap() - 1));
    assert_eq!(again.text, second.text, "a cached prefix changes nothing in what greedy sampling writes");
}

#[tokio::test]
async fn llama_cpp_measures_its_speed_and_remembers_it() {
    let data = tempfile::TempDir::new().unwrap();
    let config = LlamaCppConfig { gguf: models_dir().join(SMOLLM2_135M_FILE), threads: 1, n_ctx: 1024 };
    let path = LlamaCppChat::speed_path(data.path(), &config);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "not json").unwrap();
    let load = |config: LlamaCppConfig| LlamaCppChat::load(&config).unwrap();
    let model = load(config.clone()).remember_speed_in(path.clone());
    // Nothing usable stored: calibrated on first use, then written.
    let speed = model.speed().await.expect("calibrated");
    assert!(speed.is_plausible(), "{speed:?}");
    let stored: oraculo::llm::chat::ModelSpeed =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    // JSON keeps the figures to within a rounding step.
    assert!((stored.prompt_tokens_per_s - speed.prompt_tokens_per_s).abs() < 1e-9, "{stored:?} vs {speed:?}");
    assert!((stored.generated_tokens_per_s - speed.generated_tokens_per_s).abs() < 1e-9, "{stored:?} vs {speed:?}");
    // A new process starts from what was stored, without calibrating.
    let fake = oraculo::llm::chat::ModelSpeed { prompt_tokens_per_s: 12.5, generated_tokens_per_s: 3.5 };
    std::fs::write(&path, serde_json::to_string(&fake).unwrap()).unwrap();
    let model = load(config).remember_speed_in(path);
    assert_eq!(model.speed().await, Some(fake));
}

#[tokio::test]
async fn llama_cpp_counts_tokens_exactly_and_rejects_an_oversized_prompt() {
    let model = smollm();
    assert_eq!(model.count_tokens(""), 0);
    let one = model.count_tokens(" dragón");
    assert!(one >= 1);
    // Ten words that each tokenise alone: ten times the tokens of one.
    assert_eq!(model.count_tokens(&" dragón".repeat(10)), 10 * one);
    let err = model.chat(&request(&"dragón ".repeat(3000)), None).await.unwrap_err();
    assert!(matches!(err, LlmError::PromptTooLong { context_window: 2048, .. }), "{err:?}");
    assert!(err.to_string().contains("chat.n_ctx"), "{err}");
}

#[tokio::test]
async fn llama_cpp_an_abandoned_request_frees_the_model() {
    let model = smollm();
    // Greedy SmolLM2 repeats itself: left alone this would take a minute or more on one thread.
    let endless = ChatRequest {
        messages: vec![ChatMessage::user("Repite «dragón» sin parar.")],
        json_schema: None,
        max_tokens: 1500,
        temperature: 0.0,
    };
    let abandoned = tokio::time::timeout(Duration::from_millis(200), model.chat(&endless, None)).await;
    assert!(abandoned.is_err(), "the caller gave up first");
    // The next request gets the model at once instead of waiting behind 1500 tokens.
    let mut short = request("Hola");
    short.max_tokens = 8;
    let answer = tokio::time::timeout(Duration::from_secs(30), model.chat(&short, None))
        .await
        .expect("the abandoned generation stopped and released the model")
        .unwrap();
    assert!(answer.completion_tokens.unwrap() <= 8);
}

#[test]
fn llama_cpp_missing_or_wrong_files_name_the_fix() {
    let dir = tempfile::TempDir::new().unwrap();
    let missing = LlamaCppConfig { gguf: dir.path().join("nope.gguf"), threads: 1, n_ctx: 2048 };
    let err = LlamaCppChat::load(&missing).unwrap_err();
    assert!(err.to_string().contains("scripts/fetch-models.sh"), "{err}");

    let not_gguf = dir.path().join("notes.gguf");
    std::fs::write(&not_gguf, "# Sesión 1\n").unwrap();
    let err = LlamaCppChat::load(&LlamaCppConfig { gguf: not_gguf, threads: 1, n_ctx: 2048 }).unwrap_err();
    assert!(err.to_string().contains("not a GGUF file"), "{err}");
}
