//! A stand-in for Ollama on 127.0.0.1 that speaks its real wire format (`/api/embed`,
//! `/api/tags`, `/api/chat` streamed as NDJSON), plus the OpenAI-compatible
//! `/v1/chat/completions` streamed as server-sent events, so the production HTTP clients are
//! what runs in tests.
//!
//! Embeddings are deterministic feature-hashed bags of words (folded, so "sesion" and
//! "sesión" share a dimension): texts sharing words point the same way. Chat answers come
//! from a queue of scripted replies (`enqueue_reply`), streamed a word at a time; with the
//! queue empty, a request with a JSON schema gets the schema's smallest valid object.
//! Canned faults (`enqueue`) and a recorded history (`requests`, headers included) let tests
//! drive failures and check what was sent.
//!
//! What the real servers taught: a served window (`set_window`), told where each
//! server tells it (llama-server's `/props` and `/v1/models` `meta.n_ctx`, Ollama's
//! `/api/show` `model_info`), and enforced as each enforces it: `/v1/chat/completions`
//! refuses a prompt of the window's size or more with llama-server's 400
//! (`exceed_context_size_error`, its exact wording and fields); `/api/chat` refuses a prompt
//! longer than `num_ctx` when sent `truncate: false` (Ollama's 400, llama.cpp's JSON inside
//! its `error` string) and otherwise keeps half the window, as Ollama does. Prompt tokens are
//! counted as characters / 4, the fake's tokeniser. `Fault::CutMidToken` is a server killed
//! mid-stream.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Dimension of the fake vectors.
pub const FAKE_DIMENSION: usize = 64;

/// What the next request gets instead of a normal answer.
#[derive(Debug, Clone)]
pub enum Fault {
    /// That status, with the route's error body (`{"error": …}`).
    Status(u16, String),
    /// Silence for that long, then the normal answer.
    Delay(Duration),
    /// Embed: a truncated JSON body. Chat: one good line, then a line that is not JSON.
    BadJson,
    /// Chat: half the answer, then the body ends without `done` / `[DONE]`.
    Truncated,
    /// Chat: each streamed piece that long after the last, as a model on a CPU writes.
    Slow(Duration),
    /// Chat: a few pieces, then half an event cut inside a multi-byte character, and the
    /// connection closes without ending the chunked body (a server killed mid-stream).
    CutMidToken,
}

pub use crate::http::Recorded;

#[derive(Default)]
struct State {
    models: Vec<String>,
    faults: VecDeque<Fault>,
    requests: Vec<Recorded>,
    replies: VecDeque<String>,
    /// When set, `/v1/*` answers 401 unless sent `Authorization: Bearer <key>`.
    api_key: Option<String>,
    /// With no reply queued, a free-text chat answers its whole prompt back, newest message
    /// first (the canary tests: whatever the model was shown reaches the user, and an
    /// annotation, cut to its first few hundred characters, repeats the fragment it describes).
    echo: bool,
    /// With no reply queued, a free-text chat answers what this makes of the request's
    /// messages (a reply that depends on the question, whatever order questions come in).
    reply_rule: Option<Arc<dyn Fn(&Value) -> String + Send + Sync>>,
    /// The window the model is served with, in the fake's tokens; `None`: any prompt goes.
    window: Option<usize>,
    /// Whether `/props`, `/v1/models` and `/api/show` say the window (a server that does not).
    tells_window: bool,
}

#[derive(Clone)]
pub struct FakeOllama {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl FakeOllama {
    /// Starts a server that has `models` pulled.
    pub async fn start(models: &[&str]) -> FakeOllama {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let state =
            Arc::new(Mutex::new(State { models: models.iter().map(|m| m.to_string()).collect(), ..State::default() }));
        let server_state = Arc::clone(&state);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = Arc::clone(&server_state);
                tokio::spawn(async move {
                    let _ = serve(stream, state).await;
                });
            }
        });
        FakeOllama { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn enqueue(&self, fault: Fault) {
        self.state.lock().unwrap().faults.push_back(fault);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The next chat request (either route) answers `text`.
    pub fn enqueue_reply(&self, text: &str) {
        self.state.lock().unwrap().replies.push_back(text.to_string());
    }

    /// From now on a chat with no queued reply (and no schema) answers `rule(messages)`.
    pub fn reply_by(&self, rule: impl Fn(&Value) -> String + Send + Sync + 'static) {
        self.state.lock().unwrap().reply_rule = Some(Arc::new(rule));
    }

    /// From now on a chat with no queued reply (and no schema) answers its whole prompt,
    /// newest message first.
    pub fn echo_prompts(&self) {
        self.state.lock().unwrap().echo = true;
    }

    /// From now on `/v1/*` requires this bearer key.
    pub fn require_api_key(&self, key: &str) {
        self.state.lock().unwrap().api_key = Some(key.to_string());
    }

    /// From now on the model is served with a window of `tokens` (characters / 4), which
    /// the server tells and enforces.
    pub fn set_window(&self, tokens: usize) {
        let mut state = self.state.lock().unwrap();
        state.window = Some(tokens);
        state.tells_window = true;
    }

    /// The window is still enforced, but no route says it (`/props` is 404, `/v1/models`
    /// and `/api/show` carry no size), as some OpenAI-compatible servers do.
    pub fn hide_window(&self) {
        self.state.lock().unwrap().tells_window = false;
    }

    /// Requests received on `path` (any method).
    pub fn requests_to(&self, path: &str) -> usize {
        self.requests().iter().filter(|r| r.path == path).count()
    }

    /// The bodies of the chat requests received on `path`, in order.
    pub fn chat_requests(&self, path: &str) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.path == path).collect()
    }
}

/// The fake embedding: each folded word adds to one of `FAKE_DIMENSION` axes.
pub fn fake_embedding(text: &str) -> Vec<f32> {
    let mut vector = vec![0.0f32; FAKE_DIMENSION];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let folded = oraculo::text::fold(word);
        let hash = folded.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
        vector[(hash % FAKE_DIMENSION as u64) as usize] += 1.0;
    }
    vector[0] += 0.01; // never the zero vector
    vector
}

async fn serve(stream: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream);
    loop {
        let Some(request) = crate::http::read_request(&mut reader).await? else {
            return Ok(());
        };
        let crate::http::Request { method, target: path, headers, body } = request;
        let fault = {
            let mut state = state.lock().unwrap();
            state.requests.push(Recorded {
                method: method.clone(),
                path: path.clone(),
                body: body.clone(),
                headers: headers.clone(),
            });
            // Faults are meant for the work routes: the questions a client asks first (the
            // window: `/props`, `/v1/models`, `/api/show`; the pulled models: `/api/tags`)
            // never take one.
            let window_route = matches!(path.as_str(), "/props" | "/v1/models" | "/api/show" | "/api/tags");
            if window_route { None } else { state.faults.pop_front() }
        };
        if method == "POST" && (path == "/api/chat" || path == "/v1/chat/completions") {
            if !serve_chat(reader.get_mut(), &path, &body, &headers, fault, &state).await? {
                return Ok(());
            }
            continue;
        }
        let (status, payload) = match fault {
            Some(Fault::Status(status, message)) => (status, json!({ "error": message }).to_string()),
            Some(Fault::BadJson) => (200, "{\"embeddings\": [[0.1, ".to_string()),
            Some(Fault::Delay(delay)) => {
                tokio::time::sleep(delay).await;
                answer(&method, &path, &body, &state)
            }
            Some(Fault::Truncated | Fault::Slow(_) | Fault::CutMidToken) | None => {
                answer(&method, &path, &body, &state)
            }
        };
        let reason = if status == 200 { "OK" } else { "Error" };
        let response = format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{payload}",
            payload.len()
        );
        reader.get_mut().write_all(response.as_bytes()).await?;
    }
}

/// The fake's tokeniser: characters / 4, plus one.
pub fn fake_prompt_tokens(body: &Value) -> usize {
    let prompt_chars: usize = body["messages"]
        .as_array()
        .map(|ms| ms.iter().map(|m| m["content"].as_str().unwrap_or("").len()).sum())
        .unwrap_or(0);
    prompt_chars / 4 + 1
}

fn answer(method: &str, path: &str, body: &Value, state: &Arc<Mutex<State>>) -> (u16, String) {
    let (models, window) = {
        let state = state.lock().unwrap();
        (state.models.clone(), state.window.filter(|_| state.tells_window))
    };
    match (method, path) {
        // llama-server: the window of one slot.
        ("GET", "/props") => match window {
            Some(n_ctx) => (
                200,
                json!({ "default_generation_settings": { "n_ctx": n_ctx, "params": {} }, "total_slots": 1,
                        "model_alias": models.last().cloned().unwrap_or_default() })
                .to_string(),
            ),
            None => (
                404,
                json!({ "error": { "code": 404, "message": "File Not Found", "type": "not_found_error" } }).to_string(),
            ),
        },
        ("GET", "/v1/models") => {
            let data: Vec<Value> = models
                .iter()
                .map(|m| match window {
                    Some(n_ctx) => json!({ "id": m, "object": "model", "owned_by": "llamacpp",
                                           "meta": { "n_ctx": n_ctx, "n_ctx_train": n_ctx * 4 } }),
                    None => json!({ "id": m, "object": "model", "owned_by": "llamacpp" }),
                })
                .collect();
            (200, json!({ "object": "list", "data": data }).to_string())
        }
        ("POST", "/api/show") => {
            let model = body["model"].as_str().unwrap_or("");
            if !models.iter().any(|m| m == model) {
                return (404, json!({ "error": format!("model '{model}' not found") }).to_string());
            }
            let mut info = json!({ "general.architecture": "qwen2", "qwen2.embedding_length": 5120 });
            if let Some(n_ctx) = window {
                info["qwen2.context_length"] = json!(n_ctx);
            }
            (
                200,
                json!({ "modelfile": "", "parameters": "temperature 0.7", "template": "", "model_info": info })
                    .to_string(),
            )
        }
        ("GET", "/api/tags") => {
            let list: Vec<Value> = models
                .iter()
                .map(|m| {
                    // Ollama lists a model pulled without a tag as `:latest`, a tagged one as is.
                    let name = if m.contains(':') { m.clone() } else { format!("{m}:latest") };
                    json!({ "name": name, "model": name, "size": 1_000_000, "digest": "0" })
                })
                .collect();
            (200, json!({ "models": list }).to_string())
        }
        ("POST", "/api/embed") => {
            let model = body["model"].as_str().unwrap_or("");
            if !models.iter().any(|m| m == model) {
                return (
                    404,
                    json!({ "error": format!("model \"{model}\" not found, try pulling it first") }).to_string(),
                );
            }
            let inputs: Vec<String> = match &body["input"] {
                Value::String(s) => vec![s.clone()],
                Value::Array(items) => items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
                _ => Vec::new(),
            };
            let embeddings: Vec<Vec<f32>> = inputs.iter().map(|t| fake_embedding(t)).collect();
            (200, json!({ "model": model, "embeddings": embeddings, "total_duration": 1000, "prompt_eval_count": inputs.len() }).to_string())
        }
        _ => (404, "404 page not found".to_string()),
    }
}

// --- chat ---------------------------------------------------------------------------

/// Answers one chat request. Returns false when the connection must close (it was cut).
async fn serve_chat(
    stream: &mut TcpStream,
    path: &str,
    body: &Value,
    headers: &[(String, String)],
    fault: Option<Fault>,
    state: &Arc<Mutex<State>>,
) -> std::io::Result<bool> {
    let openai = path.starts_with("/v1/");
    let error_body = |message: &str| {
        if openai {
            json!({ "error": { "message": message, "type": "invalid_request_error" } }).to_string()
        } else {
            json!({ "error": message }).to_string()
        }
    };
    match &fault {
        Some(Fault::Status(status, message)) => {
            write_json(stream, *status, &error_body(message)).await?;
            return Ok(true);
        }
        Some(Fault::Delay(delay)) => tokio::time::sleep(*delay).await,
        _ => {}
    }
    let (models, api_key) = {
        let state = state.lock().unwrap();
        (state.models.clone(), state.api_key.clone())
    };
    if openai && let Some(key) = api_key {
        let sent = headers.iter().find(|(n, _)| n == "authorization").map(|(_, v)| v.as_str());
        if sent != Some(format!("Bearer {key}").as_str()) {
            write_json(stream, 401, &error_body("Incorrect API key provided")).await?;
            return Ok(true);
        }
    }
    let model = body["model"].as_str().unwrap_or("").to_string();
    if !models.contains(&model) {
        let (status, message) = if openai {
            (404, format!("The model `{model}` does not exist or you do not have access to it."))
        } else {
            (404, format!("model \"{model}\" not found, try pulling it first"))
        };
        write_json(stream, status, &error_body(&message)).await?;
        return Ok(true);
    }

    let prompt_tokens = fake_prompt_tokens(body);
    let window = state.lock().unwrap().window;
    let mut truncated_to = None;
    if let Some(window) = window {
        if openai && prompt_tokens >= window {
            // llama-server's refusal, word for word (server-context.cpp, server-task.cpp).
            let error = json!({ "error": {
                "code": 400,
                "message": format!("request ({prompt_tokens} tokens) exceeds the available context size ({window} tokens), try increasing it"),
                "type": "exceed_context_size_error", "n_prompt_tokens": prompt_tokens, "n_ctx": window } });
            write_json(stream, 400, &error.to_string()).await?;
            return Ok(true);
        }
        let num_ctx = body["options"]["num_ctx"].as_u64().map(|n| n as usize).unwrap_or(2048);
        if !openai && prompt_tokens > num_ctx {
            if body["truncate"] == json!(false) {
                // Ollama passes its runner's llama.cpp error on as a string.
                let inner = json!({ "error": {
                    "code": 400,
                    "message": format!("request ({prompt_tokens} tokens) exceeds the available context size ({num_ctx} tokens), try increasing it"),
                    "type": "exceed_context_size_error", "n_prompt_tokens": prompt_tokens, "n_ctx": num_ctx } });
                write_json(stream, 400, &json!({ "error": inner.to_string() }).to_string()).await?;
                return Ok(true);
            }
            // Ollama keeps half the buffer and drops the rest, silently.
            truncated_to = Some(num_ctx / 2 + 2);
        }
    }
    let prompt_tokens = truncated_to.unwrap_or(prompt_tokens);

    let schema = if openai { body["response_format"]["json_schema"]["schema"].clone() } else { body["format"].clone() };
    let (queued, echo, rule) = {
        let mut state = state.lock().unwrap();
        (state.replies.pop_front(), state.echo, state.reply_rule.clone())
    };
    let reply = queued.unwrap_or_else(|| {
        if schema.is_object() {
            smallest_valid(&schema).to_string()
        } else if let Some(rule) = &rule {
            rule(&body["messages"])
        } else if echo {
            let contents: Vec<&str> =
                body["messages"].as_array().into_iter().flatten().filter_map(|m| m["content"].as_str()).collect();
            contents.into_iter().rev().collect::<Vec<_>>().join("\n")
        } else {
            "(no reply queued)".to_string()
        }
    });
    let pieces = split_words(&reply);

    if !openai && body["stream"] == json!(false) {
        let answer = json!({
            "model": model, "created_at": "2024-01-01T00:00:00Z",
            "message": { "role": "assistant", "content": reply },
            "done": true, "done_reason": "stop",
            "prompt_eval_count": prompt_tokens, "eval_count": pieces.len(),
        });
        write_json(stream, 200, &answer.to_string()).await?;
        return Ok(true);
    }

    let mut lines: Vec<String> = Vec::new();
    for (index, piece) in pieces.iter().enumerate() {
        lines.push(if openai {
            let delta =
                if index == 0 { json!({ "role": "assistant", "content": piece }) } else { json!({ "content": piece }) };
            format!(
                "data: {}\n\n",
                json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model,
                        "choices": [{ "index": 0, "delta": delta, "finish_reason": null }] })
            )
        } else {
            format!(
                "{}\n",
                json!({ "model": model, "created_at": "2024-01-01T00:00:00Z",
                        "message": { "role": "assistant", "content": piece }, "done": false })
            )
        });
    }
    let full_length = lines.len();
    let pace = match &fault {
        Some(Fault::Slow(pace)) => Some(*pace),
        _ => None,
    };
    if let Some(Fault::CutMidToken) = fault {
        let content_type = if openai { "text/event-stream" } else { "application/x-ndjson" };
        let head = format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n\r\n");
        stream.write_all(head.as_bytes()).await?;
        for line in lines.iter().take((full_length / 2).max(1)) {
            stream.write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes()).await?;
        }
        // Half an event, ending inside "ó" (0xC3 0xB3): the process died mid-write.
        let mut cut: Vec<u8> = if openai {
            b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" sesi".to_vec()
        } else {
            b"{\"message\":{\"role\":\"assistant\",\"content\":\" sesi".to_vec()
        };
        cut.push(0xC3);
        stream.write_all(format!("{:x}\r\n", cut.len()).as_bytes()).await?;
        stream.write_all(&cut).await?;
        stream.write_all(b"\r\n").await?;
        stream.flush().await?;
        // No terminating chunk: the connection just closes.
        return Ok(false);
    }
    match fault {
        Some(Fault::BadJson) => {
            lines.truncate(1);
            lines.push(if openai {
                "data: {\"choices\": [{\"delta\":\n\n".to_string()
            } else {
                "{\"message\": {\"content\": \n".to_string()
            });
        }
        Some(Fault::Truncated) => lines.truncate(full_length / 2),
        _ => {
            if openai {
                let finish = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model,
                                     "choices": [{ "index": 0, "delta": {}, "finish_reason": "stop" }] });
                lines.push(format!("data: {finish}\n\n"));
                if body["stream_options"]["include_usage"] == json!(true) {
                    let usage = json!({ "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model,
                                        "choices": [],
                                        "usage": { "prompt_tokens": prompt_tokens, "completion_tokens": pieces.len(),
                                                   "total_tokens": prompt_tokens + pieces.len() } });
                    lines.push(format!("data: {usage}\n\n"));
                }
                lines.push("data: [DONE]\n\n".to_string());
            } else {
                let done = json!({ "model": model, "created_at": "2024-01-01T00:00:00Z",
                                   "message": { "role": "assistant", "content": "" }, "done": true, "done_reason": "stop",
                                   "total_duration": 1000, "prompt_eval_count": prompt_tokens, "eval_count": pieces.len() });
                lines.push(format!("{done}\n"));
            }
        }
    }
    let content_type = if openai { "text/event-stream" } else { "application/x-ndjson" };
    let head = format!("HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    for line in &lines {
        if let Some(pace) = pace {
            tokio::time::sleep(pace).await;
        }
        // One HTTP chunk per line, flushed, as a streaming server sends them.
        stream.write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes()).await?;
        stream.flush().await?;
    }
    stream.write_all(b"0\r\n\r\n").await?;
    Ok(true)
}

async fn write_json(stream: &mut TcpStream, status: u16, payload: &str) -> std::io::Result<()> {
    let reason = if status == 200 { "OK" } else { "Error" };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{payload}",
        payload.len()
    );
    stream.write_all(response.as_bytes()).await
}

/// "Hola mundo, ¿qué tal?" → ["Hola", " mundo,", " ¿qué", " tal?"]: a word per piece, each
/// carrying the space before it, as a model streams tokens.
pub fn split_words(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if c.is_whitespace() && current.chars().any(|p| !p.is_whitespace()) {
            pieces.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// The smallest value valid against `schema` (objects get their required properties): the
/// stand-in honours `format` loosely, as a JSON-constrained model would.
pub fn smallest_valid(schema: &Value) -> Value {
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(shapes) = schema["anyOf"].as_array() {
        // Of several shapes, the shortest: a constrained model may take any of them.
        return shapes.iter().map(smallest_valid).min_by_key(|value| value.to_string().len()).unwrap_or(Value::Null);
    }
    if let Some(values) = schema["enum"].as_array() {
        return values.first().cloned().unwrap_or(Value::Null);
    }
    match schema["type"].as_str() {
        Some("object") => {
            let mut object = serde_json::Map::new();
            for name in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                object.insert(name.to_string(), smallest_valid(&schema["properties"][name]));
            }
            Value::Object(object)
        }
        Some("array") => {
            let min_items = schema["minItems"].as_u64().unwrap_or(0) as usize;
            Value::Array((0..min_items).map(|_| smallest_valid(&schema["items"])).collect())
        }
        Some("integer") | Some("number") => json!(0),
        Some("boolean") => json!(false),
        Some("string") => json!(""),
        _ => Value::Null,
    }
}
