//! A chat model behind an HTTP server (Ollama's `/api/chat`, an OpenAI-compatible
//! `/v1/chat/completions`): what every such backend does the same way, written once. A backend
//! says how its server is asked ([`Served`]: its edge, its window cache, how the window is
//! learnt and relearnt, one attempt at a streamed answer); the [`ChatModel`] around it is
//! here: the window asked once per process (`chat.n_ctx` first), a token estimate that errs high (the server's
//! tokeniser is out of reach), the retries while nothing has streamed, the span.

use async_trait::async_trait;
use tracing::{Instrument, debug, info, warn};

use super::{
    ChatModel, ChatRequest, ChatResponse, ContextWindow, DEFAULT_SERVER_N_CTX, TokenSink, WindowCache, WindowSource,
    chat_span, estimate_tokens,
};
use crate::llm::LlmError;
use crate::llm::http::Edge;

/// What every served backend holds.
#[derive(Debug)]
pub(super) struct Link {
    /// What a retry is logged as (`"Ollama chat"`).
    pub(super) what: &'static str,
    /// The server, as this backend reaches it.
    pub(super) edge: Edge,
    /// The window learnt from the server (or its refusal), once per process.
    pub(super) windows: WindowCache,
    /// Extra attempts after the first on a transient failure, while nothing has streamed.
    pub(super) retries: u32,
}

impl Link {
    pub(super) fn new(what: &'static str, edge: Edge, n_ctx: Option<usize>, retries: u32) -> Link {
        Link { what, edge, windows: WindowCache::new(n_ctx), retries }
    }
}

/// Where one attempt's answer goes as it streams: to the reader's sink, and into the answer.
/// Once any text has reached the reader the attempt is not retried (it would repeat it).
pub(super) struct Delivery<'s> {
    sink: Option<TokenSink<'s>>,
    pub(super) answer: ChatResponse,
    started: bool,
}

impl<'s> Delivery<'s> {
    fn new(sink: Option<TokenSink<'s>>) -> Delivery<'s> {
        Delivery { sink, answer: ChatResponse::default(), started: false }
    }

    /// A piece of the answer, passed on as it arrives.
    pub(super) fn push(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.started = true;
        if let Some(sink) = self.sink {
            sink(text);
        }
        self.answer.text.push_str(text);
    }
}

/// How one kind of server is asked for a chat answer.
#[async_trait]
pub(super) trait Served: Send + Sync {
    fn link(&self) -> &Link;
    /// The window the server says it serves, when it says (asked once per process, and only
    /// when `chat.n_ctx` is not set).
    async fn window_from_server(&self) -> Option<ContextWindow>;
    /// The window after the server refused a prompt as too long.
    async fn relearn_window(&self, refusal: &LlmError) -> ContextWindow;
    /// One attempt: the request sent (an error status comes back as the error it means), then
    /// its stream read into `out` as it arrives, with the token counts the server reports.
    async fn attempt(&self, request: &ChatRequest, out: &mut Delivery<'_>) -> Result<(), LlmError>;
}

#[async_trait]
impl<S: Served> ChatModel for S {
    fn id(&self) -> &str {
        self.link().edge.id()
    }

    fn context_window(&self) -> usize {
        self.link().windows.tokens()
    }

    /// `chat.n_ctx` when set, else what the server says, else [`DEFAULT_SERVER_N_CTX`].
    async fn window(&self) -> ContextWindow {
        let windows = &self.link().windows;
        windows
            .get_or_learn(async {
                if let Some(tokens) = windows.configured() {
                    return ContextWindow { tokens, source: WindowSource::Config };
                }
                match self.window_from_server().await {
                    Some(window) => {
                        info!(backend = %self.id(), tokens = window.tokens, source = ?window.source, "context window learnt from the server");
                        window
                    }
                    None => {
                        warn!(
                            backend = %self.id(),
                            tokens = DEFAULT_SERVER_N_CTX,
                            "the server does not say its context window; planning for the default (set chat.n_ctx)"
                        );
                        ContextWindow { tokens: DEFAULT_SERVER_N_CTX, source: WindowSource::Default }
                    }
                }
            })
            .await
    }

    async fn refresh_window(&self, refusal: &LlmError) -> ContextWindow {
        self.relearn_window(refusal).await
    }

    fn count_tokens(&self, text: &str) -> usize {
        estimate_tokens(text)
    }

    async fn chat(&self, request: &ChatRequest, on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
        let span = chat_span(self.id(), request);
        async {
            let link = self.link();
            let answer = crate::llm::with_retries(link.what, link.retries, || async {
                let mut out = Delivery::new(on_token);
                match self.attempt(request, &mut out).await {
                    Ok(()) => Ok(out.answer),
                    Err(err) => Err((err, !out.started)),
                }
            })
            .await?;
            debug!(prompt_tokens = answer.prompt_tokens, completion_tokens = answer.completion_tokens, "generated");
            Ok(answer)
        }
        .instrument(span)
        .await
    }
}
