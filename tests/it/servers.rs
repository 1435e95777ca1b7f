//! What real model servers taught, through their wire-format stand-ins: the window
//! learnt from the server before a prompt is planned, a prompt refused as too long planned
//! again once for the window the server reports, a second refusal left to the extractive
//! answer, and a stream cut mid-token read as a clear error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use oraculo::answer::AnswerMode;
use oraculo::llm::LlmError;
use oraculo::llm::chat::ollama::{OllamaChat, OllamaChatConfig};
use oraculo::llm::chat::openai::{OpenAiChat, OpenAiChatConfig};
use oraculo::llm::chat::{ChatModel, WindowSource};
use oraculo::oracle::{Answer, AnswerSettings, Oracle};

use crate::fake_ollama::{FakeOllama, Fault, fake_prompt_tokens};
use crate::harness::{Scratch, ask_streamed, campaign_config, ingest_dir, ollama_embedder, sessions};

const MODEL: &str = "qwen2.5:14b";
const QUESTION: &str = "¿Qué pasó en el mercado del puerto?";
/// The stand-in's window in the tests that enforce one: the eight chosen sessions (~500
/// of the fake's tokens each) do not fit in it, three or four do.
const WINDOW: usize = 3072;
/// The refusal llama-server sends, as a canned fault.
const LLAMA_REFUSAL: &str = "the request exceeds the available context size, try increasing it";

/// Ten long sessions about a market: the whole pool is far more than `WINDOW`.
fn market_campaign() -> Scratch {
    let files = sessions(1..=10, |n| {
        let mut text = String::new();
        for line in 0..12 {
            text.push_str(&format!(
                "En el mercado del puerto, durante la sesión {n}, el grupo habla con la mercader número {line} sobre \
                 especias, cuerdas y linternas, y anota el precio de cada cosa en su cuaderno de viaje.\n"
            ));
        }
        text
    });
    Scratch::of(&files)
}

struct Bench {
    /// The chat server: its faults and window never touch the embedder's.
    fake: FakeOllama,
    _embed_server: FakeOllama,
    scratch: Scratch,
    embedder: Arc<dyn oraculo::llm::Embedder>,
}

async fn bench() -> Bench {
    let scratch = market_campaign();
    let embed_server = FakeOllama::start(&["bge-m3"]).await;
    let embedder: Arc<dyn oraculo::llm::Embedder> = Arc::new(ollama_embedder(&embed_server, "bge-m3").await);
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), embedder.as_ref()).await.unwrap();
    let fake = FakeOllama::start(&[MODEL]).await;
    Bench { fake, _embed_server: embed_server, scratch, embedder }
}

impl Bench {
    fn oracle(&self, chat: Arc<dyn ChatModel>, mode: AnswerMode) -> Oracle {
        let settings = AnswerSettings { mode, ..AnswerSettings::new(256) };
        Oracle::new(&self.scratch.index_dir(), self.embedder.clone(), chat, settings)
    }

    fn openai(&self, n_ctx: Option<usize>) -> Arc<dyn ChatModel> {
        Arc::new(
            OpenAiChat::new(OpenAiChatConfig {
                server: oraculo::llm::ModelServer {
                    url: self.fake.url(),
                    model: MODEL.into(),
                    timeout: Duration::from_secs(10),
                    retries: 0,
                },
                api_key: None,
                n_ctx,
            })
            .unwrap(),
        )
    }

    fn ollama(&self, n_ctx: Option<usize>) -> Arc<dyn ChatModel> {
        Arc::new(
            OllamaChat::new(OllamaChatConfig {
                server: oraculo::llm::ModelServer {
                    url: self.fake.url(),
                    model: MODEL.into(),
                    timeout: Duration::from_secs(10),
                    retries: 0,
                },
                keep_alive: "30m".into(),
                n_ctx,
            })
            .unwrap(),
        )
    }

    /// The prompt sizes of the chat requests on `path`, as the stand-in counted them.
    fn prompt_sizes(&self, path: &str) -> Vec<usize> {
        self.fake.chat_requests(path).iter().map(|r| fake_prompt_tokens(&r.body)).collect()
    }
}

async fn ask(oracle: &Oracle) -> (Answer, String) {
    ask_streamed(oracle, QUESTION).await
}

#[tokio::test]
async fn the_window_is_learnt_from_the_server_once_and_the_prompt_planned_within_it() {
    let bench = bench().await;
    bench.fake.set_window(WINDOW);
    // (backend, its chat route, where the window is told, the source reported)
    let cases: [(Arc<dyn ChatModel>, &str, &str, WindowSource, &str); 2] = [
        (bench.openai(None), "/v1/chat/completions", "/props", WindowSource::ServerProps, "server_props"),
        (bench.ollama(None), "/api/chat", "/api/show", WindowSource::OllamaShow, "ollama_show"),
    ];
    for (chat, route, told_by, source, source_json) in cases {
        let oracle = bench.oracle(chat, AnswerMode::Free);
        bench.fake.enqueue_reply("En el mercado compraron especias [Sesión 1].");
        let (first, _) = ask(&oracle).await;
        bench.fake.enqueue_reply("Y cuerdas [Sesión 2].");
        let (second, _) = ask(&oracle).await;
        for answer in [&first, &second] {
            assert_eq!((answer.mode, answer.fallback.as_deref()), (AnswerMode::Free, None), "{answer:?}");
            let plan = &answer.context_plan;
            assert_eq!((plan.window_tokens, plan.window_source, plan.window_retries), (WINDOW, source, 0));
            assert!(plan.material_tokens < WINDOW, "{plan:?}");
            assert!(answer.dropped_for_budget > 0, "the window, not the pool, limited the context: {answer:?}");
        }
        let json = serde_json::to_value(&first).unwrap();
        assert_eq!(json["context_plan"]["window_tokens"], WINDOW);
        assert_eq!(json["context_plan"]["window_source"], source_json);
        let sizes = bench.prompt_sizes(route);
        assert_eq!(sizes.len(), 2, "nothing was refused: {sizes:?}");
        assert!(sizes.iter().all(|&size| size < WINDOW), "{sizes:?}");
        assert_eq!(bench.fake.requests_to(told_by), 1, "asked once per process, then cached");
    }
}

#[tokio::test]
async fn a_prompt_refused_as_too_long_is_planned_again_for_the_window_the_server_reports() {
    let bench = bench().await;
    bench.fake.set_window(WINDOW);
    // chat.n_ctx set by hand, and wrong: it wins until the server refuses.
    let oracle = bench.oracle(bench.openai(Some(32768)), AnswerMode::Free);
    bench.fake.enqueue_reply("En el mercado compraron especias.");
    let (answer, streamed) = ask(&oracle).await;

    assert_eq!((answer.mode, answer.fallback.as_deref()), (AnswerMode::Free, None), "{answer:?}");
    assert_eq!(answer.text.trim(), "En el mercado compraron especias.");
    assert_eq!(streamed.trim(), answer.text.trim(), "only the accepted prompt's answer streamed");
    assert_eq!(answer.attempts, 2);
    let plan = &answer.context_plan;
    assert_eq!((plan.window_tokens, plan.window_source, plan.window_retries), (WINDOW, WindowSource::Refusal, 1));
    let sizes = bench.prompt_sizes("/v1/chat/completions");
    assert_eq!(sizes.len(), 2, "{sizes:?}");
    assert!(sizes[0] >= WINDOW && sizes[1] < WINDOW, "refused, then planned within the window: {sizes:?}");
    assert!(answer.fragments_shown.len() < 8, "{:?}", answer.fragments_shown);
}

#[tokio::test]
async fn a_prompt_refused_twice_falls_back_to_the_extractive_answer() {
    let bench = bench().await;
    // (backend, its chat route, the refusal as that server words it)
    let ollama_refusal = serde_json::json!({ "error": { "code": 400,
        "message": "request (9000 tokens) exceeds the available context size (4096 tokens), try increasing it",
        "type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 4096 } })
    .to_string();
    let cases: [(Arc<dyn ChatModel>, &str, String); 3] = [
        (bench.openai(None), "/v1/chat/completions", LLAMA_REFUSAL.to_string()),
        (
            bench.openai(None),
            "/v1/chat/completions",
            "This model's maximum context length is 4096 tokens. However, you requested 9000 tokens (8000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.".to_string(),
        ),
        (bench.ollama(None), "/api/chat", ollama_refusal),
    ];
    for (chat, route, refusal) in cases {
        let before = bench.fake.chat_requests(route).len();
        bench.fake.enqueue(Fault::Status(400, refusal.clone()));
        bench.fake.enqueue(Fault::Status(400, refusal.clone()));
        let oracle = bench.oracle(chat, AnswerMode::Free);
        let (answer, streamed) = ask(&oracle).await;
        assert_eq!(answer.mode, AnswerMode::Extractive, "{answer:?}");
        let fallback = answer.fallback.as_deref().unwrap_or_default();
        assert!(fallback.contains("refused the prompt as longer than its context window"), "{fallback}");
        assert_eq!((answer.attempts, answer.context_plan.window_retries), (2, 1), "{refusal}");
        assert_eq!(bench.fake.chat_requests(route).len() - before, 2, "one retry, no more");
        assert!(streamed.is_empty(), "no model text reached the reader: {streamed:?}");
        assert!(answer.text.contains("[Sesión"), "the notes' own sentences, cited: {}", answer.text);
        assert!(answer.citations.iter().all(|c| c.valid), "{:?}", answer.citations);
    }
}

#[tokio::test]
async fn a_stream_cut_mid_token_is_a_clear_error_and_the_answer_comes_from_the_notes() {
    let bench = bench().await;
    let reply = "En el mercado del puerto compraron especias y cuerdas para la sesión siguiente [Sesión 1].";
    for (chat, route) in [(bench.openai(None), "/v1/chat/completions"), (bench.ollama(None), "/api/chat")] {
        // The model alone: what arrived streamed, then an error that says what happened.
        bench.fake.enqueue_reply(reply);
        bench.fake.enqueue(Fault::CutMidToken);
        let pieces = Mutex::new(String::new());
        let sink = |piece: &str| pieces.lock().unwrap().push_str(piece);
        let request = oraculo::llm::chat::ChatRequest {
            messages: vec![oraculo::llm::chat::ChatMessage::user("hola")],
            json_schema: None,
            max_tokens: 64,
            temperature: 0.0,
        };
        let err = chat.chat(&request, Some(&sink)).await.unwrap_err();
        assert!(matches!(err, LlmError::StreamIncomplete { .. }), "{route}: {err:?}");
        assert!(err.to_string().contains("ended before it was complete"), "{err}");
        let pieces = pieces.into_inner().unwrap();
        assert!(reply.starts_with(&pieces) && !pieces.is_empty(), "{pieces:?}");
        assert!(!pieces.contains('\u{FFFD}'), "half a character never reaches the reader: {pieces:?}");

        // The oracle: the notes' own sentences, with the reason.
        bench.fake.enqueue_reply(reply);
        bench.fake.enqueue(Fault::CutMidToken);
        let (answer, _) = ask(&bench.oracle(chat, AnswerMode::Free)).await;
        assert_eq!(answer.mode, AnswerMode::Extractive, "{answer:?}");
        assert!(answer.fallback.as_deref().unwrap_or_default().contains("ended before it was complete"), "{answer:?}");
        assert_eq!(answer.context_plan.window_retries, 0, "a cut stream is not a refusal for length");
    }
}

#[tokio::test]
async fn a_server_that_does_not_say_its_window_is_planned_for_the_default() {
    let bench = bench().await;
    bench.fake.set_window(WINDOW);
    bench.fake.hide_window();
    for chat in [bench.openai(None), bench.ollama(None)] {
        let window = chat.window().await;
        assert_eq!((window.tokens, window.source), (oraculo::config::DEFAULT_SERVER_N_CTX, WindowSource::Default));
    }
    let configured = bench.openai(Some(4096)).window().await;
    assert_eq!((configured.tokens, configured.source), (4096, WindowSource::Config));
    assert_eq!(bench.fake.requests_to("/props"), 1, "chat.n_ctx set: the server is not asked");
}
