//! The embedded chat backend: llama.cpp in this process (the `llama-cpp-2` crate), reading a
//! GGUF file. The default on a fresh machine: no server, one file fetched by
//! `scripts/fetch-models.sh`.
//!
//! The model is loaded once and shared; one generation runs at a time (a second request
//! waits), each in a fresh context sized to its prompt, on a blocking thread. JSON-schema
//! requests are constrained by a GBNF grammar made from the schema, so the output parses.
//! Token counts are exact: they come from the model's own tokeniser.

mod prompt;
mod sampling;

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::token::LlamaToken;

use async_trait::async_trait;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use tracing::{Instrument, debug, info_span, warn};

use super::{ChatMessage, ChatModel, ChatRequest, ChatResponse, ModelSpeed, TokenSink, chat_span};
use crate::llm::LlmError;
use sampling::{build_sampler, take_complete_utf8};

/// Qwen2.5-Coder-1.5B-Instruct Q4_K_M: the embedded model meant for real use (the only
/// small one that answered a Spanish question correctly; ~20 tok/s on 2 cores).
pub const QWEN_1_5B_FILE: &str = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
/// Qwen2.5-Coder-0.5B-Instruct Q4_K_M: loads and generates, answers wrongly.
pub const QWEN_0_5B_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
/// SmolLM2-135M-Instruct Q4_1: fast and incoherent; the tests' model, and the fallback.
pub const SMOLLM2_135M_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Prompt tokens decoded per batch (llama.cpp's default micro-batch).
const PROMPT_BATCH: usize = 512;
/// Contexts kept alive between generations, each with the tokens its KV cache holds, so a
/// prompt that starts like an earlier one (the same system prompt, the same conversation)
/// reads only what is new. Two: the answers and the rerank/annotation calls alternate, and
/// each keeps its own prefix warm. ~230 MB of KV cache each for the 1.5B at 8192 tokens.
const CACHED_CONTEXTS: usize = 2;
/// A cached context is reused for a prompt that shares at least this many tokens with it;
/// below that a free slot is taken first.
const MIN_REUSED_TOKENS: usize = 32;
/// The calibration prompt's length, in tokens: long enough to time prompt reading, short
/// enough to cost a few seconds on a CPU.
const PROBE_PROMPT_TOKENS: usize = 192;
/// Tokens generated one by one to time generation during calibration.
const PROBE_GENERATED_TOKENS: usize = 8;
/// A generation updates the measured speeds only when it read at least this many prompt
/// tokens (or generated this many): shorter runs are dominated by fixed costs.
const MIN_MEASURED_TOKENS: usize = 64;

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
    /// Where measured speeds are remembered between runs (`remember_speed_in`).
    speed_file: Option<PathBuf>,
}

struct Engine {
    /// One generation at a time (the CPU is the limit), in one of the cached contexts.
    /// Declared before `model`: fields drop in order, and every cached context borrows the
    /// model, so they must go first.
    cache: Mutex<ContextCache>,
    model: LlamaModel,
    /// The GGUF's own template when llama.cpp recognises it; `None`: ChatML.
    template: Option<LlamaChatTemplate>,
    /// Prompt and generation speed on this machine: calibrated, then updated by every
    /// generation long enough to time.
    speed: Mutex<Option<ModelSpeed>>,
}

#[derive(Default)]
struct ContextCache {
    slots: Vec<CachedContext>,
    /// Ticks on every use, for least-recently-used replacement.
    clock: u64,
}

struct CachedContext {
    /// Borrows `Engine::model` for as long as the engine lives (see `Engine::new_context`).
    context: LlamaContext<'static>,
    /// The tokens whose keys and values the context holds, from position 0.
    tokens: Vec<LlamaToken>,
    last_used: u64,
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
            return Err(LlmError::ModelFileMissing {
                path: path_text.clone(),
                fix: "run `scripts/fetch-models.sh` (add `--chat 1.5b` for the model meant for real use), or set chat.gguf"
                    .into(),
            });
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
            engine: Arc::new(Engine {
                cache: Mutex::new(ContextCache::default()),
                model,
                template,
                speed: Mutex::new(None),
            }),
            speed_file: None,
        })
    }

    /// Where the speeds of `config`'s model and thread count are remembered in `data_dir`:
    /// `models/<gguf stem>.t<threads>.speed.json`.
    pub fn speed_path(data_dir: &Path, config: &LlamaCppConfig) -> PathBuf {
        let stem = config.gguf.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        data_dir.join("models").join(format!("{stem}.t{}.speed.json", config.threads))
    }

    /// Remembers the measured speeds in `path` (JSON) and starts from what it holds, so a new
    /// process plans its first answer from this machine's real speed without calibrating.
    pub fn remember_speed_in(mut self, path: PathBuf) -> LlamaCppChat {
        let stored =
            std::fs::read_to_string(&path).ok().and_then(|text| serde_json::from_str::<ModelSpeed>(&text).ok());
        if let Some(speed) = stored.filter(ModelSpeed::is_plausible) {
            *self.engine.speed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(speed);
        }
        self.speed_file = Some(path);
        self
    }

    fn save_speed(&self) {
        let (Some(path), Some(speed)) = (&self.speed_file, self.engine.current_speed()) else { return };
        let written =
            serde_json::to_string(&speed).map_err(std::io::Error::other).and_then(|json| std::fs::write(path, json));
        if let Err(err) = written {
            debug!(path = %path.display(), %err, "cannot remember the measured speed");
        }
    }
}

impl Engine {
    fn current_speed(&self) -> Option<ModelSpeed> {
        *self.speed.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Folds one timed run into the speeds: an even blend with what was known, so one run on
    /// a busy machine does not replace everything measured before.
    fn record_speed(&self, prompt: Option<f64>, generation: Option<f64>) {
        let mut speed = self.speed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let blend = |old: f64, new: Option<f64>| new.map_or(old, |new| (old + new) / 2.0);
        *speed = match (*speed, prompt, generation) {
            (Some(old), _, _) => Some(ModelSpeed {
                prompt_tokens_per_s: blend(old.prompt_tokens_per_s, prompt),
                generated_tokens_per_s: blend(old.generated_tokens_per_s, generation),
            }),
            (None, Some(prompt), generation) => Some(ModelSpeed {
                prompt_tokens_per_s: prompt,
                // Generation runs ~3x slower than prompt reading on a CPU (measured: 60-86
                // against ~20 tok/s for the 1.5B), until a run says otherwise.
                generated_tokens_per_s: generation.unwrap_or(prompt / 3.0),
            }),
            (None, None, _) => None,
        };
    }

    /// A context of `context_window` tokens borrowing this engine's model.
    fn new_context(&self, context_window: usize, threads: usize) -> Result<LlamaContext<'static>, String> {
        let n_ctx = NonZeroU32::new(context_window as u32).ok_or("the context window is 0")?;
        let threads = i32::try_from(threads).unwrap_or(i32::MAX);
        let params = LlamaContextParams::default()
            .with_n_ctx(Some(n_ctx))
            .with_n_batch(PROMPT_BATCH as u32)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let context =
            self.model.new_context(backend()?, params).map_err(|err| format!("cannot create a context: {err}"))?;
        // SAFETY: the context is only ever stored in `self.cache`, which is declared before
        // `self.model` and therefore dropped before it; the engine lives in an `Arc` and is
        // never moved out of it. The context thus never outlives the model it borrows.
        Ok(unsafe { std::mem::transmute::<LlamaContext<'_>, LlamaContext<'static>>(context) })
    }

    /// Times prompt reading and generation on a short filler prompt, in a context of its
    /// own (blocking; a few seconds on a CPU), and records the result.
    fn calibrate(&self, threads: usize) -> Result<ModelSpeed, String> {
        let _cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let filler =
            "La compañía cruzó el puerto de Salobre al alba y el archiduque les habló de la corona. ".repeat(16);
        let mut tokens = self.model.vocab().tokenize(filler.as_bytes(), true, true);
        tokens.truncate(PROBE_PROMPT_TOKENS);
        let mut context =
            self.new_context((PROBE_PROMPT_TOKENS + PROBE_GENERATED_TOKENS + 64).next_multiple_of(256), threads)?;
        let mut batch = LlamaBatch::new(PROMPT_BATCH, 1);
        for (position, token) in tokens.iter().enumerate() {
            batch.add(*token, position as i32, &[0], position + 1 == tokens.len()).map_err(|err| err.to_string())?;
        }
        let started = Instant::now();
        context.decode(&mut batch).map_err(|err| format!("calibration: {err}"))?;
        let prompt = tokens.len() as f64 / started.elapsed().as_secs_f64().max(1e-6);
        let started = Instant::now();
        for step in 0..PROBE_GENERATED_TOKENS {
            batch.clear();
            batch.add(tokens[step], (tokens.len() + step) as i32, &[0], true).map_err(|err| err.to_string())?;
            context.decode(&mut batch).map_err(|err| format!("calibration: {err}"))?;
        }
        let generation = PROBE_GENERATED_TOKENS as f64 / started.elapsed().as_secs_f64().max(1e-6);
        self.record_speed(Some(prompt), Some(generation));
        debug!(prompt_tokens_per_s = prompt, generated_tokens_per_s = generation, "calibrated");
        self.current_speed().ok_or_else(|| "no speed recorded".to_string())
    }

    /// Runs one generation to the end (blocking). `emit` gets each piece of text; when it
    /// returns false, or `abandoned` true between two prompt batches (the caller dropped the
    /// request, e.g. on its own timeout), generation stops and frees the CPU.
    ///
    /// The prompt is read into the cached context that already holds the longest part of it
    /// (the same system prompt and history), and only the rest is decoded.
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
        // A panic in an earlier generation leaves at worst a cached context whose token list
        // is longer than what it decoded; it is cleared below on any error. Poisoning is
        // therefore harmless.
        let mut cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
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
        let mut sampler = build_sampler(&self.model, grammar, request.temperature).map_err(fail)?;

        cache.clock += 1;
        let clock = cache.clock;
        let slot_idx = match choose_slot(&cache.slots, &prompt_tokens) {
            Some(idx) => idx,
            None => {
                let context = self.new_context(context_window, threads).map_err(fail)?;
                cache.slots.push(CachedContext { context, tokens: Vec::new(), last_used: clock });
                cache.slots.len() - 1
            }
        };
        let slot = &mut cache.slots[slot_idx];
        slot.last_used = clock;
        let result = self.generate_in(slot, &prompt_tokens, budget, &mut sampler, emit, abandoned);
        if result.is_err() {
            slot.context.clear_kv_cache();
            slot.tokens.clear();
        }
        let run = result.map_err(fail)?;
        let measured_prompt = (run.n_decoded_prompt >= MIN_MEASURED_TOKENS)
            .then(|| run.n_decoded_prompt as f64 / run.prompt_seconds.max(1e-9));
        let measured_generation = (run.n_generated >= MIN_MEASURED_TOKENS / 4)
            .then(|| run.n_generated as f64 / run.generation_seconds.max(1e-9));
        drop(cache);
        self.record_speed(measured_prompt, measured_generation);
        if run.n_generated == budget {
            warn!(backend = backend_id, budget, "the answer stopped at max_tokens");
        }
        debug!(
            n_prompt,
            n_reused = n_prompt - run.n_decoded_prompt,
            n_generated = run.n_generated,
            prompt_tokens_per_s = run.n_decoded_prompt as f64 / run.prompt_seconds.max(1e-9),
            generated_tokens_per_s = run.n_generated as f64 / run.generation_seconds.max(1e-9),
            stopped_by_caller = run.stopped_by_caller,
            "generated"
        );
        Ok(ChatResponse {
            text: run.text,
            prompt_tokens: Some(n_prompt),
            completion_tokens: Some(run.n_generated),
            cached_prompt_tokens: Some(n_prompt - run.n_decoded_prompt),
        })
    }

    /// The prompt into `slot` (reusing the prefix it holds), then the generation.
    fn generate_in(
        &self,
        slot: &mut CachedContext,
        prompt_tokens: &[LlamaToken],
        budget: usize,
        sampler: &mut LlamaSampler,
        emit: &mut dyn FnMut(&str) -> bool,
        abandoned: &dyn Fn() -> bool,
    ) -> Result<GenerationRun, String> {
        let n_prompt = prompt_tokens.len();
        let vocab = self.model.vocab();
        // Keep what the slot shares with this prompt, but decode at least the last prompt
        // token again: its logits are what the first answer token is sampled from.
        let mut reused = common_prefix(&slot.tokens, prompt_tokens).min(n_prompt - 1);
        let removed = slot.context.clear_kv_cache_seq(Some(0), Some(reused as u32), None).unwrap_or(false);
        if !removed {
            slot.context.clear_kv_cache();
            reused = 0;
        }
        slot.tokens.truncate(reused);

        let started = Instant::now();
        let mut batch = LlamaBatch::new(PROMPT_BATCH, 1);
        for chunk in prompt_tokens[reused..].chunks(PROMPT_BATCH) {
            if abandoned() {
                debug!(n_prompt, "request abandoned while reading the prompt");
                return Ok(GenerationRun::abandoned(n_prompt - reused));
            }
            batch.clear();
            for token in chunk {
                let position = slot.tokens.len() + batch.n_tokens() as usize;
                batch
                    .add(*token, position as i32, &[0], position + 1 == n_prompt)
                    .map_err(|err| format!("prompt batch: {err}"))?;
            }
            slot.context.decode(&mut batch).map_err(|err| format!("reading the prompt: {err}"))?;
            slot.tokens.extend_from_slice(chunk);
        }
        let prompt_seconds = started.elapsed().as_secs_f64();

        let started = Instant::now();
        let mut text = String::new();
        let mut pending_bytes: Vec<u8> = Vec::new();
        let mut n_generated = 0usize;
        let mut stopped_by_caller = false;
        while n_generated < budget {
            let token = sampler.sample(&slot.context, batch.n_tokens() - 1);
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
            batch.add(token, slot.tokens.len() as i32, &[0], true).map_err(|err| format!("generation batch: {err}"))?;
            slot.context.decode(&mut batch).map_err(|err| format!("generating: {err}"))?;
            slot.tokens.push(token);
        }
        if !pending_bytes.is_empty() {
            let rest = String::from_utf8_lossy(&pending_bytes).into_owned();
            text.push_str(&rest);
            emit(&rest);
        }
        Ok(GenerationRun {
            text,
            n_decoded_prompt: n_prompt - reused,
            prompt_seconds,
            n_generated,
            generation_seconds: started.elapsed().as_secs_f64(),
            stopped_by_caller,
        })
    }
}

/// What one generation did, for the response and the speed record.
struct GenerationRun {
    text: String,
    /// Prompt tokens actually decoded (the rest came from the cached context).
    n_decoded_prompt: usize,
    prompt_seconds: f64,
    n_generated: usize,
    generation_seconds: f64,
    stopped_by_caller: bool,
}

impl GenerationRun {
    fn abandoned(n_decoded_prompt: usize) -> GenerationRun {
        GenerationRun {
            text: String::new(),
            n_decoded_prompt: n_decoded_prompt.min(MIN_MEASURED_TOKENS - 1),
            prompt_seconds: 0.0,
            n_generated: 0,
            generation_seconds: 0.0,
            stopped_by_caller: true,
        }
    }
}

fn common_prefix(cached: &[LlamaToken], prompt: &[LlamaToken]) -> usize {
    cached.iter().zip(prompt).take_while(|(a, b)| a == b).count()
}

/// The cached context to read `prompt` into: the one sharing the longest prefix with it
/// when that is at least [`MIN_REUSED_TOKENS`]; else `None` while a slot is free (the
/// caller creates one); else the least recently used.
fn choose_slot(slots: &[CachedContext], prompt: &[LlamaToken]) -> Option<usize> {
    let best = slots
        .iter()
        .enumerate()
        .map(|(idx, slot)| (common_prefix(&slot.tokens, prompt), idx))
        .max_by_key(|&(shared, idx)| (shared, std::cmp::Reverse(idx)));
    match best {
        Some((shared, idx)) if shared >= MIN_REUSED_TOKENS => Some(idx),
        _ if slots.len() < CACHED_CONTEXTS => None,
        _ => slots.iter().enumerate().min_by_key(|(_, slot)| slot.last_used).map(|(idx, _)| idx),
    }
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

    fn is_smoke_test(&self) -> bool {
        self.path.file_name().is_some_and(|name| name == SMOLLM2_135M_FILE)
    }

    /// The longest start of the rendered conversation one of the cached contexts holds (a
    /// conversation the oracle has not finished building shares its system prompt and history).
    /// Never waits: while a generation runs, 0.
    fn cached_prefix_tokens(&self, messages: &[ChatMessage]) -> usize {
        let Ok(prompt) = self.engine.render(messages) else { return 0 };
        let tokens = self.engine.model.vocab().tokenize(prompt.as_bytes(), true, true);
        // A generation in progress holds the cache: rather than wait for it, assume nothing.
        let Ok(cache) = self.engine.cache.try_lock() else { return 0 };
        cache.slots.iter().map(|slot| common_prefix(&slot.tokens, &tokens)).max().unwrap_or(0)
    }

    /// Measured here: remembered from an earlier run, else calibrated now (a few seconds).
    async fn speed(&self) -> Option<ModelSpeed> {
        if let Some(speed) = self.engine.current_speed() {
            return Some(speed);
        }
        let engine = Arc::clone(&self.engine);
        let threads = self.threads;
        let calibrated = tokio::task::spawn_blocking(move || engine.calibrate(threads)).await;
        match calibrated {
            Ok(Ok(speed)) => {
                self.save_speed();
                Some(speed)
            }
            Ok(Err(err)) => {
                warn!(%err, "cannot time the embedded model; the context is planned by its window alone");
                None
            }
            Err(err) => {
                warn!(%err, "the calibration thread failed");
                None
            }
        }
    }

    async fn chat(&self, request: &ChatRequest, on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
        let span = chat_span(&self.id, request);
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
        let response = async {
            while let Some(piece) = receiver.recv().await {
                if let Some(sink) = on_token {
                    sink(&piece);
                }
            }
            worker.await.map_err(|err| LlmError::Worker(format!("llama.cpp generation: {err}")))?
        }
        .instrument(span)
        .await;
        self.save_speed();
        response
    }
}
