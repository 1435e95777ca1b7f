//! The MCP server over one or several campaigns' oracles, for one audience: seven read-only
//! tools, each label as a resource, and the prompt that tells a client model the citation rule.
//!
//! Every tool goes through the application layer the CLI and the bot use (`Notes::search`,
//! `app::ask_settled`, `timeline::timeline`, …), with the server's audience: what a player
//! may not read never reaches a tool, a resource, a listing or an error message here,
//! because nothing here reads the index but through those filtered calls.

use std::sync::Arc;

use rmcp::handler::server::router::prompt::PromptRouter;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock, GetPromptResult, Implementation, ListResourceTemplatesResult, ListResourcesResult,
    PaginatedRequestParams, PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{
    ErrorData as McpError, RoleServer, ServerHandler, prompt, prompt_handler, prompt_router, tool, tool_handler,
    tool_router,
};
use serde_json::json;
use tracing::Instrument;

use super::campaign::Campaign;
use super::failure::{Failure, session_asked};
use super::output::{
    CompendiumOutput, EntityEntry, OtherSource, SearchOutput, SessionEntry, SessionsOutput, SourceOutput, SourcePart,
    View, answer_text, timeline_text,
};
use super::params::{
    ASK_DESCRIPTION, AskParams, COMPENDIUM_DESCRIPTION, CampaignParams, CiteParams, QuestionParams, RECAP_DESCRIPTION,
    RecapParams, SEARCH_DESCRIPTION, SESSIONS_DESCRIPTION, SOURCE_DESCRIPTION, SessionAsked, SourceParams,
    TIMELINE_DESCRIPTION, TimelineParams,
};
use super::uri::{TEMPLATE, parse_source_uri, source_uri};
use crate::app::worker::LocalWorker;
use crate::config::Config;
use crate::corpus::{LabelLanguage, NoteKind, SessionNumber};
use crate::feedback::{AskedQuestions, FrontEnd, KeptAnswer};
use crate::llm::chat::ChatModel;
use crate::oracle::{AskRequest, Oracle, question_language};
use crate::retrieve::Audience;

/// Labels offered when the one asked for is not there.
const MAX_SUGGESTIONS: usize = 5;

/// What every request reads.
pub struct State {
    pub config: Config,
    pub audience: Audience,
    pub campaigns: Vec<Campaign>,
    /// Where the tools run: the oracle's futures are not `Send` (they hold the index's SQLite
    /// connection across awaits), so they run on a thread of their own, as the bot's do.
    worker: LocalWorker,
    /// The chat model, connected on the first answer that needs it, once (a model that
    /// cannot load is not retried: the server answers with the notes' own sentences and
    /// says why; restart it once the model is there).
    chat: tokio::sync::OnceCell<Result<Arc<dyn ChatModel>, String>>,
    /// One model answer at a time, as the bot's queue does with one GPU or CPU.
    answer_turn: tokio::sync::Mutex<()>,
}

impl State {
    pub fn new(config: Config, audience: Audience, campaigns: Vec<Campaign>, worker: LocalWorker) -> State {
        State {
            config,
            audience,
            campaigns,
            worker,
            chat: tokio::sync::OnceCell::new(),
            answer_turn: tokio::sync::Mutex::new(()),
        }
    }

    fn view(&self) -> View {
        View::of(self.audience)
    }
}

/// Every tool's answer or failure, as the client receives it.
type ToolAnswer = Result<CallToolResult, McpError>;

/// A tool's answer: the cited text, and the same as structured content.
fn answered(text: String, structured: serde_json::Value) -> ToolAnswer {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    Ok(result)
}

/// A value as structured content; a value that cannot be one is a failure, not a crash.
fn structured<T: serde::Serialize>(value: &T) -> Result<serde_json::Value, Failure> {
    serde_json::to_value(value).map_err(|err| Failure::new("failed", format!("the result could not be encoded: {err}")))
}

/// The server handler: the state, and the routers the macros build.
#[derive(Clone)]
pub struct OraculoServer {
    state: Arc<State>,
    tool_router: ToolRouter<OraculoServer>,
    prompt_router: PromptRouter<OraculoServer>,
}

impl OraculoServer {
    /// The server over `state`; each tool's description says which view it serves.
    pub fn new(state: State) -> OraculoServer {
        let view = View::of(state.audience).describe();
        let mut tool_router = Self::tool_router();
        for route in tool_router.map.values_mut() {
            let described = route.attr.description.as_deref().unwrap_or_default();
            route.attr.description = Some(format!("{described} {view}").into());
        }
        OraculoServer { state: Arc::new(state), tool_router, prompt_router: Self::prompt_router() }
    }

    /// The campaign a tool names, or the only one.
    fn campaign(&self, asked: Option<&str>) -> Result<&Campaign, Failure> {
        let campaigns = &self.state.campaigns;
        let names = || campaigns.iter().map(|c| format!("«{}»", c.name)).collect::<Vec<_>>().join(", ");
        match asked.map(str::trim).filter(|name| !name.is_empty()) {
            Some(name) => campaigns
                .iter()
                .find(|campaign| campaign.name == name)
                .or_else(|| campaigns.iter().find(|campaign| campaign.name.to_lowercase() == name.to_lowercase()))
                .ok_or_else(|| {
                    Failure::new(
                        "unknown_campaign",
                        format!("This server serves no campaign called «{name}»: pass one of {}.", names()),
                    )
                }),
            None => match campaigns.as_slice() {
                [only] => Ok(only),
                _ => Err(Failure::new(
                    "campaign_needed",
                    format!("This server serves several campaigns: pass `campaign`, one of {}.", names()),
                )),
            },
        }
    }

    /// The oracle that answers with the chat model, connected on first use; the searcher
    /// (the notes' own sentences) with why, when no model can be had.
    /// With `chat.answer_style = "quotes"` the notes' own sentences are the answer: no model
    /// is connected for it.
    async fn answering<'a>(&'a self, campaign: &'a Campaign) -> (&'a Oracle, Option<String>) {
        let state = &self.state;
        if state.config.answer.quotes() {
            return (&campaign.searcher, None);
        }
        let chat = state
            .chat
            .get_or_init(|| async {
                match crate::app::connect_chat(&state.config.chat, &state.config.data_dir).await {
                    Ok(chat) => Ok(chat),
                    Err(err) => {
                        tracing::warn!(error = %err, "no chat model: answers are the notes' own sentences");
                        Err(err.to_string())
                    }
                }
            })
            .await;
        let chat = match chat {
            Ok(chat) => Arc::clone(chat),
            Err(reason) => return (&campaign.searcher, Some(reason.clone())),
        };
        let answerer = campaign
            .answerer
            .get_or_init(|| async move { crate::app::campaign_oracle(&state.config, campaign.notes.clone(), chat) })
            .await;
        (answerer, None)
    }

    /// The labels of `campaign` the view may read that look like `asked`: the same words in
    /// another case, or one inside the other.
    async fn labels_like(&self, campaign: &Campaign, asked: &str) -> Vec<String> {
        let asked = asked.trim().to_lowercase();
        let Ok(sources) = campaign.notes.sources(self.state.audience).await else { return Vec::new() };
        sources
            .into_iter()
            .map(|source| String::from(source.label))
            .filter(|label| {
                let label = label.to_lowercase();
                !asked.is_empty() && (label.contains(&asked) || asked.contains(&label))
            })
            .take(MAX_SUGGESTIONS)
            .collect()
    }

    async fn search_tool(&self, params: QuestionParams) -> Result<ToolAnswer, Failure> {
        let campaign = self.campaign(params.campaign.as_deref())?;
        let request = AskRequest { question: &params.question, history: &[], audience: self.state.audience };
        let (search, found) =
            campaign.notes.search_passages(&request).await.map_err(|err| Failure::of_ask(err, campaign))?;
        let language = question_language(&params.question);
        let output = SearchOutput {
            campaign: campaign.name.clone(),
            view: self.state.view(),
            question: params.question.trim().to_string(),
            fragments: found,
            entities: search.entities.iter().map(|entity| entity.name.clone()).collect(),
            notice: search.time.notice(language == LabelLanguage::En),
            missing_paths: search
                .missing_paths
                .iter()
                .map(|missing| format!("{}: {}", missing.path.as_str(), missing.error))
                .collect(),
        };
        Ok(answered(output.text(language), structured(&output)?))
    }

    async fn ask_tool(&self, params: AskParams) -> Result<ToolAnswer, Failure> {
        let campaign = self.campaign(params.campaign.as_deref())?;
        crate::oracle::check_question(&params.question).map_err(|err| Failure::of_ask(err, campaign))?;
        let request = AskRequest { question: &params.question, history: &[], audience: self.state.audience };
        let (oracle, no_model) = if params.extractive.unwrap_or(false) {
            (&campaign.searcher, None)
        } else {
            self.answering(campaign).await
        };
        // One model answer at a time; the notes' own sentences wait for nobody.
        let _turn =
            if std::ptr::eq(oracle, &campaign.searcher) { None } else { Some(self.state.answer_turn.lock().await) };
        let asked = crate::app::ask_settled(oracle, &request).await.map_err(|err| Failure::of_ask(err, campaign))?;
        // Kept for the DM's report only when the config asks (`[feedback] keep_mcp`): an
        // assistant's questions are the DM's own work, not the players'.
        let feedback = self.state.config.feedback;
        if feedback.keep_mcp {
            let kept = KeptAnswer::of(&asked, self.state.audience, FrontEnd::Mcp, None);
            AskedQuestions::new(campaign.notes.index_dir(), feedback).keep(kept).await;
        }
        let language = question_language(&params.question);
        let mut json = crate::app::settled_json(&asked)
            .map_err(|err| Failure::new("failed", format!("the answer could not be encoded: {err}")))?;
        if let Some(object) = json.as_object_mut() {
            object.insert("campaign".into(), json!(campaign.name));
            object.insert("view".into(), json!(self.state.view()));
            object.insert("no_model".into(), json!(no_model));
        }
        Ok(answered(answer_text(&asked.answer, no_model.as_deref(), language), json))
    }

    async fn timeline_tool(&self, params: TimelineParams) -> Result<ToolAnswer, Failure> {
        let campaign = self.campaign(params.campaign.as_deref())?;
        if params.name.trim().is_empty() {
            return Err(Failure::new(
                "empty_name",
                "The name is empty: name someone or something of the campaign (a PC, an NPC, a place). Call `compendium` for the names there are.",
            ));
        }
        // The chat model's annotations, when it has made them, are the timeline's lines.
        let (oracle, _) = self.answering(campaign).await;
        let timeline = crate::timeline::timeline(oracle, &params.name, self.state.audience)
            .await
            .map_err(|err| Failure::of_time(err, campaign))?;
        let mut json = structured(&timeline)?;
        if let Some(object) = json.as_object_mut() {
            object.insert("campaign".into(), json!(campaign.name));
            object.insert("view".into(), json!(self.state.view()));
        }
        Ok(answered(timeline_text(&timeline, campaign.language), json))
    }

    async fn recap_tool(&self, params: RecapParams) -> Result<ToolAnswer, Failure> {
        let campaign = self.campaign(params.campaign.as_deref())?;
        let sources =
            campaign.notes.sources(self.state.audience).await.map_err(|err| Failure::of_ask(err, campaign))?;
        let mut known: Vec<SessionNumber> = sources.iter().filter_map(|source| source.session).collect();
        known.sort_unstable();
        known.dedup();
        let asked = session_asked(params.session.as_ref(), &known)?;
        let language = match params.language.as_deref().map(str::trim) {
            Some("es") => LabelLanguage::Es,
            Some("en") => LabelLanguage::En,
            Some(other) => {
                return Err(Failure::new(
                    "bad_language",
                    format!("«{other}» is no language of the recaps: pass \"es\" or \"en\"."),
                ));
            }
            None => match &params.session {
                Some(SessionAsked::Words(words)) if words.chars().any(char::is_alphabetic) => question_language(words),
                _ => campaign.language,
            },
        };
        let (oracle, no_model) = if params.extractive.unwrap_or(false) {
            (&campaign.searcher, None)
        } else {
            self.answering(campaign).await
        };
        let _turn =
            if std::ptr::eq(oracle, &campaign.searcher) { None } else { Some(self.state.answer_turn.lock().await) };
        let recap = crate::timeline::recap(oracle, asked, self.state.audience, language, None)
            .await
            .map_err(|err| Failure::of_time(err, campaign))?;
        let heading = match (language, recap.is_last) {
            (LabelLanguage::Es, true) => format!("Sesión {} (la última):", recap.session),
            (LabelLanguage::Es, false) => format!("Sesión {}:", recap.session),
            (LabelLanguage::En, true) => format!("Session {} (the last one):", recap.session),
            (LabelLanguage::En, false) => format!("Session {}:", recap.session),
        };
        let text = format!("{heading}\n\n{}", answer_text(&recap.answer, no_model.as_deref(), language));
        let json = json!({
            "campaign": campaign.name,
            "view": self.state.view(),
            "session": recap.session,
            "is_last": recap.is_last,
            "answer": structured(&recap.answer)?,
            "no_model": no_model,
        });
        Ok(answered(text, json))
    }

    async fn source_tool(&self, params: SourceParams) -> Result<ToolAnswer, Failure> {
        let campaign = self.campaign(params.campaign.as_deref())?;
        let output = self.read_label(campaign, &params.label).await?;
        Ok(answered(output.text(), structured(&output)?))
    }

    /// Every part of `label` the view may read; a label it may not read is unknown, with the
    /// same words as one that does not exist.
    async fn read_label(&self, campaign: &Campaign, label: &str) -> Result<SourceOutput, Failure> {
        let label = label.trim();
        if label.is_empty() {
            return Err(Failure::new(
                "empty_label",
                "The label is empty: pass one as a tool gave it, e.g. «Sesión 9». Call `sessions` for the labels there are.",
            ));
        }
        let fragments = campaign
            .notes
            .read_source(label, self.state.audience)
            .await
            .map_err(|err| Failure::of_ask(err, campaign))?;
        let Some(first) = fragments.first() else {
            let like = self.labels_like(campaign, label).await;
            let suggest =
                if like.is_empty() { String::new() } else { format!(" (did you mean: {}?)", like.join("; ")) };
            return Err(Failure::new(
                "unknown_label",
                format!(
                    "No note of «{}» is labelled «{label}»{suggest}. Call `sessions` for every label there is, and pass one as it is written there.",
                    campaign.name
                ),
            ));
        };
        Ok(SourceOutput {
            campaign: campaign.name.clone(),
            view: self.state.view(),
            label: first.fragment.label.clone(),
            kind: first.fragment.kind,
            session: first.fragment.session,
            source_path: first.fragment.source_path.clone(),
            parts: fragments
                .iter()
                .map(|stored| SourcePart {
                    part: stored.fragment.part,
                    heading_path: stored.fragment.heading_path.clone(),
                    line_start: stored.fragment.line_start,
                    line_end: stored.fragment.line_end,
                    text: stored.fragment.text.clone(),
                })
                .collect(),
        })
    }

    async fn sessions_tool(&self, params: CampaignParams) -> Result<ToolAnswer, Failure> {
        let campaign = self.campaign(params.campaign.as_deref())?;
        let sources =
            campaign.notes.sources(self.state.audience).await.map_err(|err| Failure::of_ask(err, campaign))?;
        let mut sessions = Vec::new();
        let mut other_sources = Vec::new();
        for source in sources {
            match (source.kind, source.session) {
                (NoteKind::Session, Some(session)) => sessions.push(SessionEntry {
                    session,
                    label: source.label,
                    source_path: source.source_path,
                    n_fragments: source.n_fragments,
                    n_words: source.n_words,
                }),
                _ => other_sources.push(OtherSource {
                    label: source.label,
                    kind: source.kind,
                    source_path: source.source_path,
                }),
            }
        }
        let output =
            SessionsOutput { campaign: campaign.name.clone(), view: self.state.view(), sessions, other_sources };
        Ok(answered(output.text(campaign.language), structured(&output)?))
    }

    async fn compendium_tool(&self, params: CampaignParams) -> Result<ToolAnswer, Failure> {
        let campaign = self.campaign(params.campaign.as_deref())?;
        let listing = campaign
            .notes
            .compendium_listing(self.state.audience)
            .await
            .map_err(|err| Failure::of_ask(err, campaign))?;
        let output = CompendiumOutput {
            campaign: campaign.name.clone(),
            view: self.state.view(),
            entities: listing
                .into_iter()
                .map(|entity| EntityEntry {
                    name: entity.name,
                    kind: entity.kind.as_str().to_string(),
                    aliases: entity.aliases,
                    description: entity.description,
                    sessions: entity.sessions,
                    other_labels: entity.other_labels,
                })
                .collect(),
        };
        Ok(answered(output.text(campaign.language), structured(&output)?))
    }

    /// The server's instructions to a client: what it serves and the citation rule.
    fn instructions(&self) -> String {
        let names: Vec<String> = self.state.campaigns.iter().map(|c| format!("«{}»", c.name)).collect();
        format!(
            "Oráculo answers questions about a tabletop campaign ({}) from the game master's own notes. \
             Answer only from what its tools return, and end every claim with the label of the note it rests on, \
             in brackets, exactly as the tools give it ([Sesión 9], [Ficha: Odo]); never cite a label no tool gave. \
             When the notes do not hold the answer, say so instead of guessing. Answer in the question's language. \
             Start with `search` (passages to answer from) or `ask` (Oráculo's own cited answer); `source` reads a label whole. {}",
            names.join(", "),
            self.state.view().describe()
        )
    }
}

impl OraculoServer {
    /// Runs a tool's body on the worker thread, and gives the client its answer, or its
    /// failure as a tool error.
    async fn on_worker<F, Fut>(&self, name: &'static str, body: F) -> ToolAnswer
    where
        F: FnOnce(OraculoServer) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<ToolAnswer, Failure>> + 'static,
    {
        let server = self.clone();
        let answered = self
            .state
            .worker
            .run(name, move || async move {
                let span = tracing::info_span!("mcp.tool", tool = name);
                match body(server).instrument(span).await {
                    Ok(answer) => answer,
                    Err(failure) => Ok(failure.into_result()),
                }
            })
            .await;
        answered.unwrap_or_else(|gone| {
            tracing::error!(error = %gone, tool = name, "the tools' thread is gone");
            Ok(Failure::new("failed", format!("{gone}: restart the server")).into_result())
        })
    }
}

#[tool_router]
impl OraculoServer {
    #[tool(description = SEARCH_DESCRIPTION, annotations(read_only_hint = true, open_world_hint = false))]
    async fn search(&self, Parameters(params): Parameters<QuestionParams>) -> ToolAnswer {
        self.on_worker("search", move |server| async move { server.search_tool(params).await }).await
    }

    #[tool(description = ASK_DESCRIPTION, annotations(read_only_hint = true, open_world_hint = false))]
    async fn ask(&self, Parameters(params): Parameters<AskParams>) -> ToolAnswer {
        self.on_worker("ask", move |server| async move { server.ask_tool(params).await }).await
    }

    #[tool(description = TIMELINE_DESCRIPTION, annotations(read_only_hint = true, open_world_hint = false))]
    async fn timeline(&self, Parameters(params): Parameters<TimelineParams>) -> ToolAnswer {
        self.on_worker("timeline", move |server| async move { server.timeline_tool(params).await }).await
    }

    #[tool(description = RECAP_DESCRIPTION, annotations(read_only_hint = true, open_world_hint = false))]
    async fn recap(&self, Parameters(params): Parameters<RecapParams>) -> ToolAnswer {
        self.on_worker("recap", move |server| async move { server.recap_tool(params).await }).await
    }

    #[tool(description = SOURCE_DESCRIPTION, annotations(read_only_hint = true, open_world_hint = false))]
    async fn source(&self, Parameters(params): Parameters<SourceParams>) -> ToolAnswer {
        self.on_worker("source", move |server| async move { server.source_tool(params).await }).await
    }

    #[tool(description = SESSIONS_DESCRIPTION, annotations(read_only_hint = true, open_world_hint = false))]
    async fn sessions(&self, Parameters(params): Parameters<CampaignParams>) -> ToolAnswer {
        self.on_worker("sessions", move |server| async move { server.sessions_tool(params).await }).await
    }

    #[tool(description = COMPENDIUM_DESCRIPTION, annotations(read_only_hint = true, open_world_hint = false))]
    async fn compendium(&self, Parameters(params): Parameters<CampaignParams>) -> ToolAnswer {
        self.on_worker("compendium", move |server| async move { server.compendium_tool(params).await }).await
    }
}

#[prompt_router]
impl OraculoServer {
    /// The citation rule for a client model, with the question when given.
    #[prompt(
        name = "cite_the_notes",
        description = "Tells the model to answer only from Oráculo's tools, cite the label after every claim, and say when the notes do not hold the answer."
    )]
    async fn cite_the_notes(&self, Parameters(params): Parameters<CiteParams>) -> Result<GetPromptResult, McpError> {
        let campaign = self
            .campaign(params.campaign.as_deref())
            .map_err(|failure| McpError::invalid_params(failure.message, None))?;
        let question = params.question.as_deref().map(str::trim).filter(|question| !question.is_empty());
        let language = question.map_or(campaign.language, question_language);
        let rule = match (language, self.state.view()) {
            (LabelLanguage::Es, view) => format!(
                "Responde sobre la campaña «{}» solo con lo que devuelven las herramientas de Oráculo (search, ask, timeline, recap, source, sessions, compendium). \
                 Termina cada afirmación con la etiqueta de la nota en que se apoya, entre corchetes y tal como la da la herramienta, p. ej. [Sesión 9] o [Ficha: Odo]; no cites ninguna etiqueta que no te haya dado una herramienta. \
                 Si las notas no contienen la respuesta, dilo («Las notas no lo dicen») en lugar de suponerla. Responde en el idioma de la pregunta. {}",
                campaign.name,
                match view {
                    View::Players => "Son las notas que pueden leer los jugadores: no contienen los secretos del DJ.",
                    View::Gm => "Estas notas incluyen los secretos del DJ: no muestres la respuesta a los jugadores.",
                }
            ),
            (LabelLanguage::En, view) => format!(
                "Answer about the campaign «{}» only from what Oráculo's tools return (search, ask, timeline, recap, source, sessions, compendium). \
                 End every claim with the label of the note it rests on, in brackets, exactly as the tool gives it, e.g. [Session 9] or [Sheet: Odo]; never cite a label no tool gave you. \
                 If the notes do not hold the answer, say so («The notes do not say») instead of guessing. Answer in the question's language. {}",
                campaign.name,
                match view {
                    View::Players => "These are the notes the players may read: they hold none of the GM's secrets.",
                    View::Gm => "These notes include the GM's secrets: do not show the answer to players.",
                }
            ),
        };
        let text = match (question, language) {
            (Some(question), LabelLanguage::Es) => format!("{rule}\n\nPregunta: {question}"),
            (Some(question), LabelLanguage::En) => format!("{rule}\n\nQuestion: {question}"),
            (None, _) => rule,
        };
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description("The citation rule of Oráculo's notes"))
    }
}

#[tool_handler(router = self.tool_router)]
#[prompt_handler(router = self.prompt_router)]
impl ServerHandler for OraculoServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_prompts().enable_resources().build())
            .with_server_info(Implementation::new("oraculo", env!("CARGO_PKG_VERSION")).with_title("Oráculo"))
            .with_instructions(self.instructions())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let span = tracing::info_span!("mcp.resources");
        async {
            let mut resources = Vec::new();
            for campaign in &self.state.campaigns {
                // A campaign with no index yet has no resource; the tools say how to build it.
                let sources = match campaign.notes.sources(self.state.audience).await {
                    Ok(sources) => sources,
                    Err(err) => {
                        tracing::warn!(campaign = %campaign.name, error = %err, "no resources listed");
                        continue;
                    }
                };
                for source in sources {
                    let session = source.session.map(|s| format!(", session {s}")).unwrap_or_default();
                    resources.push(
                        Resource::new(source_uri(&campaign.name, &source.label), source.label.clone())
                            .with_title(source.label.clone())
                            .with_description(format!(
                                "{}{session}: {} ({})",
                                source.kind.as_str(),
                                source.source_path,
                                campaign.name
                            ))
                            .with_mime_type("text/markdown"),
                    );
                }
            }
            Ok(ListResourcesResult::with_all_items(resources))
        }
        .instrument(span)
        .await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(TEMPLATE, "note")
                .with_description("One label's full text: the campaign's name and the label, each percent-encoded")
                .with_mime_type("text/markdown"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let span = tracing::info_span!("mcp.read_resource");
        async {
            let Some((campaign_name, label)) = parse_source_uri(&request.uri) else {
                return Err(McpError::resource_not_found(
                    format!("{} is not one of Oráculo's notes: list the resources for their URIs", request.uri),
                    Some(json!({ "uri": request.uri })),
                ));
            };
            let campaign = self.campaign(Some(&campaign_name)).map_err(|failure| {
                McpError::resource_not_found(failure.message, Some(json!({ "uri": request.uri })))
            })?;
            let output = self.read_label(campaign, &label).await.map_err(|failure| {
                McpError::resource_not_found(failure.message, Some(json!({ "uri": request.uri })))
            })?;
            let contents = ResourceContents::text(output.text(), request.uri.clone()).with_mime_type("text/markdown");
            Ok(ReadResourceResult::new(vec![contents]).into())
        }
        .instrument(span)
        .await
    }
}
