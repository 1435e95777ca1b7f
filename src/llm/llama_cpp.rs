//! The embedded chat backend: llama.cpp in this process (the `llama-cpp-2` crate), reading a
//! GGUF file. The default on a fresh machine: no server, one file fetched by
//! `scripts/fetch-models.sh`.
//!
//! The model is loaded once and shared; one generation runs at a time (a second request
//! waits), each in a fresh context sized to its prompt, on a blocking thread. JSON-schema
//! requests are constrained by a GBNF grammar made from the schema, so the output parses.
//! Token counts are exact: they come from the model's own tokeniser.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use async_trait::async_trait;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use tracing::{Instrument, debug, info_span, warn};

use super::LlmError;
use super::chat::{ChatMessage, ChatModel, ChatRequest, ChatResponse, ChatRole, TokenSink};

/// Qwen2.5-Coder-1.5B-Instruct Q4_K_M: the embedded model meant for real use (the only
/// small one that answered a Spanish question correctly; ~20 tok/s on 2 cores).
pub const QWEN_1_5B_FILE: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
/// Qwen2.5-Coder-0.5B-Instruct Q4_K_M: loads and generates, answers wrongly.
pub const QWEN_0_5B_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
/// SmolLM2-135M-Instruct Q4_1: fast and incoherent; the tests' model, and the fallback.
pub const SMOLLM2_135M_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Prompt tokens decoded per batch (llama.cpp's default micro-batch).
const PROMPT_BATCH: usize = 512;
/// Each request's context is rounded up to a multiple of this (KV cache allocation).
const CONTEXT_GRANULARITY: usize = 256;
/// Sampling seed when the temperature is above zero: the same prompt gives the same answer.
const SAMPLING_SEED: u32 = 0x5EED;
/// Candidates kept before temperature sampling.
const TOP_K: i32 = 40;
/// Free text only: tokens of the last `REPEAT_WINDOW` are made less likely by
/// `REPEAT_PENALTY` (llama.cpp's usual 64 / 1.1). Small models otherwise fall into a loop and
/// repeat one sentence until `max_tokens` (SmolLM2-135M did, on the sample campaign's first
/// question, for all 1024 tokens). Never with a grammar: JSON repeats its quotes and braces.
const REPEAT_WINDOW: i32 = 64;
const REPEAT_PENALTY: f32 = 1.1;

/// How to run the embedded model. Built from `[chat]` in config.
#[derive(Debug, Clone)]
pub struct LlamaCppConfig {
    pub gguf: PathBuf,
    /// CPU threads for prompt reading and generation (1 in tests: stable on a busy machine).
    pub threads: usize,
    /// Largest context, in tokens; capped at the model's training window.
    pub n_ctx: usize,
}

/// A GGUF model run in-process by llama.cpp.
pub struct LlamaCppChat {
    id: String,
    path: PathBuf,
    threads: usize,
    context_window: usize,
    engine: Arc<Engine>,
}

struct Engine {
    model: LlamaModel,
    /// The GGUF's own template when llama.cpp recognises it; `None`: ChatML.
    template: Option<LlamaChatTemplate>,
    /// One generation at a time: a context per generation is cheap, the CPU is not.
    generation: Mutex<()>,
}

impl std::fmt::Debug for LlamaCppChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlamaCppChat")
            .field("path", &self.path)
            .field("threads", &self.threads)
            .field("context_window", &self.context_window)
            .finish()
    }
}

/// llama.cpp's global state: initialised once per process (a second init is an error), with
/// its logs sent to `tracing` instead of stderr.
fn backend() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|err| err.to_string())
        })
        .as_ref()
        .map_err(Clone::clone)
}

impl LlamaCppChat {
    /// Which GGUF the embedded backend uses when the config names none: the largest one
    /// fetched. The 1.5B model when `scripts/fetch-models.sh --chat 1.5b` fetched it, else the
    /// 0.5B (`--chat 0.5b`), else SmolLM2-135M (always fetched; a smoke-test model, so loading
    /// it logs a warning). When none is there, the SmolLM2 path, for the error to name.
    pub fn default_path(data_dir: &Path) -> PathBuf {
        let models = data_dir.join("models");
        [QWEN_1_5B_FILE, QWEN_0_5B_FILE]
            .iter()
            .map(|file| models.join(file))
            .find(|path| path.is_file())
            .unwrap_or_else(|| models.join(SMOLLM2_135M_FILE))
    }

    /// Loads the model (blocking: seconds for a 1 GB file). A missing file names the script
    /// that fetches it.
    pub fn load(config: &LlamaCppConfig) -> Result<LlamaCppChat, LlmError> {
        let path = &config.gguf;
        let path_text = path.display().to_string();
        let llama_error = |detail: String| LlmError::LlamaCpp { path: path_text.clone(), detail };
        if !path.is_file() {
            return Err(LlmError::ChatModelFileMissing { path: path_text.clone() });
        }
        let mut magic = [0u8; 4];
        let is_gguf = std::fs::File::open(path)
            .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut magic))
            .map(|()| &magic == b"GGUF")
            .unwrap_or(false);
        if !is_gguf {
            return Err(llama_error("not a GGUF file (it does not start with `GGUF`)".into()));
        }
        if config.threads == 0 || config.n_ctx == 0 {
            return Err(llama_error("threads and n_ctx must be above 0".into()));
        }
        let _span = info_span!("llm.load", model = %path_text).entered();
        let backend = backend().map_err(llama_error)?;
        let model = LlamaModel::load_from_file(backend, path, &LlamaModelParams::default())
            .map_err(|err| llama_error(format!("cannot load the model: {err}")))?;

        let template = model.chat_template(None).ok().filter(|template| {
            let probe = [LlamaChatMessage::new("user".into(), "probe".into())];
            match probe {
                [Ok(message)] => model.apply_chat_template(template, &[message], true).is_ok(),
                _ => false,
            }
        });
        if template.is_none() {
            debug!(path = %path_text, "no chat template llama.cpp recognises in the GGUF; using ChatML");
        }
        let trained = model.n_ctx_train() as usize;
        let context_window = if trained > 0 { config.n_ctx.min(trained) } else { config.n_ctx };
        if context_window < config.n_ctx {
            warn!(n_ctx = config.n_ctx, trained, "chat.n_ctx is above the model's training window; using the latter");
        }
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        if path.file_name().is_some_and(|name| name == SMOLLM2_135M_FILE) {
            warn!(
                "the embedded chat model is SmolLM2-135M, a smoke-test model whose answers are not usable; \
                 fetch the 1.5B model with `scripts/fetch-models.sh --chat 1.5b`"
            );
        }
        Ok(LlamaCppChat {
            id: format!("llama.cpp:{stem}"),
            path: path.clone(),
            threads: config.threads,
            context_window,
            engine: Arc::new(Engine { model, template, generation: Mutex::new(()) }),
        })
    }
}

impl Engine {
    /// The conversation as the model was trained to read it, ending where the assistant speaks.
    fn render(&self, messages: &[ChatMessage]) -> Result<String, String> {
        if let Some(template) = &self.template {
            let chat = messages
                .iter()
                .map(|message| LlamaChatMessage::new(role_name(message.role).into(), message.content.clone()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|err| format!("a message holds a NUL byte: {err}"))?;
            return self
                .model
                .apply_chat_template(template, &chat, true)
                .map_err(|err| format!("cannot apply the chat template: {err}"));
        }
        Ok(render_chatml(messages))
    }

    /// Runs one generation to the end (blocking). `emit` gets each piece of text; when it
    /// returns false, or `abandoned` true between two prompt batches (the caller dropped the
    /// request, e.g. on its own timeout), generation stops and frees the CPU.
    #[allow(clippy::too_many_arguments)]
    fn generate(
        &self,
        request: &ChatRequest,
        grammar: Option<&str>,
        threads: usize,
        context_window: usize,
        backend_id: &str,
        emit: &mut dyn FnMut(&str) -> bool,
        abandoned: &dyn Fn() -> bool,
    ) -> Result<ChatResponse, LlmError> {
        // A panic in an earlier generation leaves nothing shared half-done: the context is
        // per generation. Poisoning is therefore harmless.
        let _one_at_a_time = self.generation.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let fail = |detail: String| LlmError::Generation { backend: backend_id.to_string(), message: detail };

        let prompt = self.render(&request.messages).map_err(fail)?;
        let vocab = self.model.vocab();
        let prompt_tokens = vocab.tokenize(prompt.as_bytes(), true, true);
        let n_prompt = prompt_tokens.len();
        if n_prompt == 0 {
            return Err(fail("the prompt is empty".into()));
        }
        if n_prompt >= context_window {
            return Err(LlmError::PromptTooLong {
                backend: backend_id.to_string(),
                prompt_tokens: n_prompt,
                context_window,
            });
        }
        let budget = request.max_tokens.min(context_window - n_prompt);
        if budget < request.max_tokens {
            warn!(
                n_prompt,
                max_tokens = request.max_tokens,
                budget,
                "the answer budget does not fit the context window; shortened"
            );
        }
        let n_ctx = super::http::context_for(n_prompt, budget, CONTEXT_GRANULARITY, context_window);
        let n_ctx = NonZeroU32::new(n_ctx as u32).expect("context_for never returns 0 for a non-empty prompt");
        let threads = i32::try_from(threads).unwrap_or(i32::MAX);
        let params = LlamaContextParams::default()
            .with_n_ctx(Some(n_ctx))
            .with_n_batch(PROMPT_BATCH as u32)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let backend = backend().map_err(fail)?;
        let mut context =
            self.model.new_context(backend, params).map_err(|err| fail(format!("cannot create a context: {err}")))?;

        let mut sampler = build_sampler(&self.model, grammar, request.temperature).map_err(fail)?;

        // Read the prompt, PROMPT_BATCH tokens at a time; logits only for its last token.
        let started = Instant::now();
        let mut batch = LlamaBatch::new(PROMPT_BATCH, 1);
        for (chunk_index, chunk) in prompt_tokens.chunks(PROMPT_BATCH).enumerate() {
            if abandoned() {
                debug!(n_prompt, "request abandoned while reading the prompt");
                return Ok(ChatResponse {
                    text: String::new(),
                    prompt_tokens: Some(n_prompt),
                    completion_tokens: Some(0),
                });
            }
            batch.clear();
            for (offset, token) in chunk.iter().enumerate() {
                let position = chunk_index * PROMPT_BATCH + offset;
                batch
                    .add(*token, position as i32, &[0], position + 1 == n_prompt)
                    .map_err(|err| fail(format!("prompt batch: {err}")))?;
            }
            context.decode(&mut batch).map_err(|err| fail(format!("reading the prompt: {err}")))?;
        }
        let prompt_seconds = started.elapsed().as_secs_f64();

        let started = Instant::now();
        let mut text = String::new();
        let mut pending_bytes: Vec<u8> = Vec::new();
        let mut n_generated = 0usize;
        let mut position = n_prompt;
        let mut stopped_by_caller = false;
        while n_generated < budget {
            let token = sampler.sample(&context, batch.n_tokens() - 1);
            if vocab.is_eog(token) {
                break;
            }
            n_generated += 1;
            pending_bytes.extend(vocab.token_to_piece(token, false, None));
            let piece = take_complete_utf8(&mut pending_bytes);
            if !piece.is_empty() {
                text.push_str(&piece);
                if !emit(&piece) {
                    stopped_by_caller = true;
                    break;
                }
            }
            if n_generated == budget {
                break;
            }
            batch.clear();
            batch.add(token, position as i32, &[0], true).map_err(|err| fail(format!("generation batch: {err}")))?;
            position += 1;
            context.decode(&mut batch).map_err(|err| fail(format!("generating: {err}")))?;
        }
        if !pending_bytes.is_empty() {
            let rest = String::from_utf8_lossy(&pending_bytes).into_owned();
            text.push_str(&rest);
            emit(&rest);
        }
        let generation_seconds = started.elapsed().as_secs_f64();
        if n_generated == budget {
            warn!(backend = backend_id, budget, "the answer stopped at max_tokens");
        }
        debug!(
            n_prompt,
            n_generated,
            prompt_tokens_per_s = n_prompt as f64 / prompt_seconds.max(1e-9),
            generated_tokens_per_s = n_generated as f64 / generation_seconds.max(1e-9),
            stopped_by_caller,
            "generated"
        );
        Ok(ChatResponse { text, prompt_tokens: Some(n_prompt), completion_tokens: Some(n_generated) })
    }
}

/// Greedy at temperature 0 (reproducible, and what structured output wants); otherwise top-k
/// then temperature, with a fixed seed. A grammar, when given, comes first and removes every
/// token that would break it; free text gets the repetition penalty instead.
fn build_sampler(model: &LlamaModel, grammar: Option<&str>, temperature: f32) -> Result<LlamaSampler, String> {
    let mut samplers = Vec::new();
    match grammar {
        Some(grammar) => samplers.push(
            LlamaSampler::grammar(model, grammar, "root")
                .map_err(|err| format!("llama.cpp rejects the grammar: {err}"))?,
        ),
        None => samplers.push(LlamaSampler::penalties(model.n_vocab(), REPEAT_WINDOW, REPEAT_PENALTY, 0.0, 0.0)),
    }
    if temperature <= 0.0 {
        samplers.push(LlamaSampler::greedy());
    } else {
        samplers.push(LlamaSampler::top_k(TOP_K));
        samplers.push(LlamaSampler::temp(temperature));
        samplers.push(LlamaSampler::dist(SAMPLING_SEED));
    }
    Ok(LlamaSampler::chain_simple(samplers))
}

/// Removes and returns the longest valid UTF-8 prefix of `bytes`, leaving the start of a
/// character split across tokens for the next call. Invalid bytes become U+FFFD.
fn take_complete_utf8(bytes: &mut Vec<u8>) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            let text = text.to_string();
            bytes.clear();
            text
        }
        Err(err) => match err.error_len() {
            // Incomplete character at the end: keep it for later.
            None => {
                let valid = err.valid_up_to();
                let text = String::from_utf8_lossy(&bytes[..valid]).into_owned();
                bytes.drain(..valid);
                text
            }
            // Bytes that never make a character: replace them and go on.
            Some(_) => {
                let text = String::from_utf8_lossy(bytes).into_owned();
                bytes.clear();
                text
            }
        },
    }
}

fn role_name(role: ChatRole) -> &'static str {
    match role {
        ChatRole::System => "system",
        ChatRole::User => "user",
        ChatRole::Assistant => "assistant",
    }
}

/// ChatML, the template Qwen and SmolLM2 were trained on.
fn render_chatml(messages: &[ChatMessage]) -> String {
    let mut prompt = String::new();
    for message in messages {
        prompt.push_str("<|im_start|>");
        prompt.push_str(role_name(message.role));
        prompt.push('\n');
        prompt.push_str(&message.content);
        prompt.push_str("<|im_end|>\n");
    }
    prompt.push_str("<|im_start|>assistant\n");
    prompt
}

#[async_trait]
impl ChatModel for LlamaCppChat {
    fn id(&self) -> &str {
        &self.id
    }

    fn context_window(&self) -> usize {
        self.context_window
    }

    /// Exact: the model's own tokeniser.
    fn count_tokens(&self, text: &str) -> usize {
        self.engine.model.vocab().tokenize(text.as_bytes(), false, false).len()
    }

    async fn chat(&self, request: &ChatRequest, on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
        let span = info_span!(
            "llm.chat",
            backend = %self.id,
            n_messages = request.messages.len(),
            max_tokens = request.max_tokens,
            json = request.json_schema.is_some()
        );
        let grammar = match &request.json_schema {
            Some(schema) => Some(
                llama_cpp_2::json_schema_to_grammar(&schema.to_string())
                    .map_err(|err| LlmError::Schema { detail: err.to_string() })?,
            ),
            None => None,
        };
        let engine = Arc::clone(&self.engine);
        let request = request.clone();
        let threads = self.threads;
        let context_window = self.context_window;
        let backend_id = self.id.clone();
        // Pieces cross from the blocking thread to this task, which calls the sink: the sink
        // is borrowed and cannot travel to another thread.
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<String>();
        let worker = tokio::task::spawn_blocking(move || {
            let abandoned = || sender.is_closed();
            let mut emit = |piece: &str| sender.send(piece.to_string()).is_ok();
            engine.generate(&request, grammar.as_deref(), threads, context_window, &backend_id, &mut emit, &abandoned)
        });
        async {
            while let Some(piece) = receiver.recv().await {
                if let Some(sink) = on_token {
                    sink(&piece);
                }
            }
            worker.await.map_err(|err| LlmError::Worker(format!("llama.cpp generation: {err}")))?
        }
        .instrument(span)
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_characters_wait_for_their_last_byte() {
        let mut bytes = "añ".as_bytes()[..2].to_vec(); // "a" and the first byte of "ñ"
        assert_eq!(take_complete_utf8(&mut bytes), "a");
        assert_eq!(bytes.len(), 1);
        bytes.push("ñ".as_bytes()[1]);
        assert_eq!(take_complete_utf8(&mut bytes), "ñ");
        assert!(bytes.is_empty());
        let mut invalid = vec![0xFF, b'x'];
        assert_eq!(take_complete_utf8(&mut invalid), "\u{FFFD}x");
    }

    #[test]
    fn chatml_ends_where_the_assistant_speaks() {
        let prompt = render_chatml(&[ChatMessage::system("S"), ChatMessage::user("U")]);
        assert_eq!(prompt, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
    }
}
