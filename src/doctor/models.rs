//! The models: every model Ollama must serve is pulled (`GET /api/tags`, with the exact
//! `ollama pull` line for one that is not), the embedder answers with the index's vector
//! size, and the chat model answers, with its context window.

use std::time::{Duration, Instant};

use super::Check;
use crate::config::{ChatConfig, Config, EmbedderConfig};
use crate::llm::LlmError;
use crate::llm::chat::{ChatMessage, ChatRequest};

/// How long `/api/tags` may take: it lists files on the server's disk, instantly when the
/// server is up.
const TAGS_TIMEOUT: Duration = Duration::from_secs(10);
/// Tokens the chat probe asks for: enough to prove the model writes, little enough to cost
/// nothing on a CPU.
const PROBE_TOKENS: usize = 8;

pub async fn checks(config: &Config, options: &super::Options) -> Vec<Check> {
    let mut checks = ollama_checks(config).await;
    if options.probe_models {
        checks.push(embedder_check(config).await);
        checks.push(chat_check(config).await);
    }
    checks
}

/// One model the configuration asks an Ollama server for.
struct Wanted<'a> {
    url: &'a str,
    model: &'a str,
    /// The embedder: without it nothing is searched.
    essential: bool,
}

async fn ollama_checks(config: &Config) -> Vec<Check> {
    let mut wanted = Vec::new();
    if let EmbedderConfig::Ollama(embedder) = &config.embedder {
        wanted.push(Wanted { url: &embedder.server.url, model: &embedder.server.model, essential: true });
    }
    if let ChatConfig::Ollama(chat) = &config.chat {
        wanted.push(Wanted { url: &chat.server.url, model: &chat.server.model, essential: false });
    }
    let mut checks = Vec::new();
    let mut urls: Vec<&str> = wanted.iter().map(|w| w.url).collect();
    urls.dedup();
    for url in urls {
        let here: Vec<&Wanted> = wanted.iter().filter(|w| w.url == url).collect();
        let essential = here.iter().any(|w| w.essential);
        match crate::llm::ollama_pulled_models(url, TAGS_TIMEOUT).await {
            Ok(pulled) => {
                for want in here {
                    checks.push(pulled_check(url, want, &pulled));
                }
            }
            Err(detail) => {
                let check = Check::fail(
                    "ollama",
                    format!("cannot reach Ollama at {url}: {detail}"),
                    format!(
                        "start it (`ollama serve`, or `docker compose up -d ollama`), or set ollama.url / ORACULO_OLLAMA_URL to where it runs"
                    ),
                );
                checks.push(if essential { check.blocking() } else { check });
            }
        }
    }
    checks
}

/// Whether Ollama lists `model`: a name without a tag is its `:latest`.
pub fn is_pulled(model: &str, pulled: &[String]) -> bool {
    let wanted = if model.contains(':') { model.to_string() } else { format!("{model}:latest") };
    pulled.iter().any(|name| *name == wanted || name == model)
}

fn pulled_check(url: &str, want: &Wanted, pulled: &[String]) -> Check {
    let role = if want.essential { "embedder" } else { "chat model" };
    if is_pulled(want.model, pulled) {
        return Check::ok("ollama_models", format!("Ollama at {url} has the {role} {} pulled", want.model));
    }
    let check = Check::fail(
        "ollama_models",
        format!("Ollama at {url} has not pulled the {role} {} (it lists: {})", want.model, listed(pulled)),
        format!("ollama pull {}", want.model),
    )
    .with_facts(serde_json::json!({ "model": want.model, "pulled": pulled }));
    if want.essential { check.blocking() } else { check }
}

fn listed(pulled: &[String]) -> String {
    if pulled.is_empty() { "nothing".to_string() } else { pulled.join(", ") }
}

/// What failed, without the fix (printed below it).
fn describe(err: &LlmError) -> String {
    match err {
        LlmError::ModelFileMissing { path, .. } => format!("model file {path} is missing"),
        LlmError::ModelMissing { server, url, model, .. } => {
            format!("{server} at {url} does not serve the model `{model}`")
        }
        other => other.to_string(),
    }
}

/// What fixes a model error: the error's own words name the backend and the setting.
fn fix_for(err: &LlmError) -> String {
    match err {
        LlmError::ModelMissing { fix, .. } | LlmError::ModelFileMissing { fix, .. } => fix.clone(),
        LlmError::Unreachable { server, .. } => server.start_hint().to_string(),
        LlmError::Unauthorized { .. } => "set ORACULO_OPENAI_API_KEY to the server's key".to_string(),
        LlmError::Timeout { setting, .. } => format!("raise {setting}, or check the server's load"),
        _ => "check the [embedder] and [chat] sections against config.toml.example".to_string(),
    }
}

async fn embedder_check(config: &Config) -> Check {
    let started = Instant::now();
    let embedder = match crate::app::connect_embedder(&config.embedder, &config.data_dir).await {
        Ok(embedder) => embedder,
        Err(err) => {
            return Check::fail("embedder", format!("the embedder does not load: {}", describe(&err)), fix_for(&err))
                .blocking();
        }
    };
    let probe = embedder.embed(&["¿Qué pasó en la última sesión?".to_string()], crate::llm::EmbedRole::Query).await;
    let dimension = match probe {
        Ok(vectors) => vectors.first().map_or(0, Vec::len),
        Err(err) => {
            return Check::fail(
                "embedder",
                format!("the embedder {} fails: {}", embedder.id(), describe(&err)),
                fix_for(&err),
            )
            .blocking();
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let indexed = indexed_embedders(config);
    let facts = serde_json::json!({ "embedder": embedder.id(), "dimension": dimension, "seconds": seconds });
    let head = format!("embedder {} answers: {dimension}-d vectors ({seconds:.1} s)", embedder.id());
    let other: Vec<&(String, String, usize)> =
        indexed.iter().filter(|(_, id, dim)| id != embedder.id() || *dim != dimension).collect();
    match other.first() {
        None if indexed.is_empty() => {
            Check::ok("embedder", format!("{head}; no index yet to compare")).with_facts(facts)
        }
        None => Check::ok("embedder", format!("{head}, as the index holds")).with_facts(facts),
        Some((campaign, id, dim)) => Check::fail(
            "embedder",
            format!(
                "{head}, but the index of {campaign} holds {dim}-d vectors from {id}: questions would search nothing"
            ),
            format!("oraculo ingest (it embeds the notes again with {})", embedder.id()),
        )
        .blocking()
        .with_facts(facts),
    }
}

/// (campaign, embedder id, dimension) of every campaign's index that records them.
fn indexed_embedders(config: &Config) -> Vec<(String, String, usize)> {
    let mut found = Vec::new();
    for named in &config.campaigns {
        let Ok((_, index_dir)) = crate::app::campaign_paths(config, &named.campaign) else { continue };
        let sqlite = index_dir.join("index.sqlite");
        let Ok(store) = sqlite.is_file().then(|| crate::index::Store::open(&sqlite)).transpose() else { continue };
        let Some(store) = store else { continue };
        let id = store.meta(crate::index::store::META_EMBEDDER).ok().flatten();
        let dim = store.meta(crate::index::store::META_DIMENSION).ok().flatten().and_then(|d| d.parse().ok());
        if let (Some(id), Some(dim)) = (id, dim) {
            found.push((named.name.clone(), id, dim));
        }
    }
    found
}

async fn chat_check(config: &Config) -> Check {
    let started = Instant::now();
    let chat = match crate::app::connect_chat(&config.chat, &config.data_dir).await {
        Ok(chat) => chat,
        Err(err) => {
            return Check::fail(
                "chat",
                format!(
                    "the chat model does not load: {}; answers would be extractive (the notes' own sentences)",
                    describe(&err)
                ),
                fix_for(&err),
            );
        }
    };
    let window = chat.window().await;
    let request = ChatRequest {
        messages: vec![ChatMessage::user("Reply with one word: ready.")],
        json_schema: None,
        max_tokens: PROBE_TOKENS,
        temperature: 0.0,
    };
    let seconds = || started.elapsed().as_secs_f64();
    let facts = |seconds: f64| serde_json::json!({ "model": chat.id(), "window_tokens": window.tokens, "window_source": window.source, "seconds": seconds });
    match chat.chat(&request, None).await {
        Ok(_) => {
            let smoke = if chat.is_smoke_test() {
                "; a smoke-test model: its free text is never shown (fetch a real one: scripts/fetch-models.sh --chat 1.5b)"
            } else {
                ""
            };
            let seconds = seconds();
            Check::ok(
                "chat",
                format!(
                    "chat model {} answers ({seconds:.1} s), window {} tokens ({}){smoke}",
                    chat.id(),
                    window.tokens,
                    serde_json::to_value(window.source)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                ),
            )
            .with_facts(facts(seconds))
        }
        Err(err) => Check::fail(
            "chat",
            format!(
                "chat model {} fails: {}; answers would be extractive (the notes' own sentences)",
                chat.id(),
                describe(&err)
            ),
            fix_for(&err),
        )
        .with_facts(facts(seconds())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_without_a_tag_is_pulled_as_latest() {
        let pulled = vec!["bge-m3:latest".to_string(), "qwen2.5:14b".to_string()];
        assert!(is_pulled("bge-m3", &pulled));
        assert!(is_pulled("qwen2.5:14b", &pulled));
        assert!(!is_pulled("qwen2.5", &pulled), "qwen2.5 is qwen2.5:latest, not the 14b tag");
        assert!(!is_pulled("qwen2.5:7b", &pulled));
    }
}
