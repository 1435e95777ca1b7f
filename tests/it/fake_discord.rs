//! A stand-in for Discord on 127.0.0.1, speaking its real wire formats, so the production
//! serenity + poise client is what runs in tests.
//!
//! REST, reached two ways: through serenity's `HttpBuilder::proxy` (plain HTTP, the limiter
//! off), or as `https://discord.com` itself over TLS ([`FakeDiscord::https_client`]: a test CA
//! and a resolver pointing discord.com at 127.0.0.1), so that serenity's own rate limiter, the
//! default a user gets, runs against the rate-limit headers Discord sends. Every request is recorded
//! (method, path, JSON body, headers) and answered with plausible JSON: the gateway address,
//! the current user and application, 204 for interaction callbacks and typing, message
//! objects for webhook follow-ups, edits and channel messages, channel objects for threads.
//!
//! Gateway (`GET /gateway` answers `ws://127.0.0.1:…`): HELLO on connect, READY after
//! IDENTIFY, an ACK for every heartbeat, then whatever the test dispatches
//! (INTERACTION_CREATE, MESSAGE_CREATE), in order, with increasing sequence numbers.
//!
//! Waiting is event-driven: `wait_for` wakes on each new request and gives up after a
//! timeout, naming what it waited for and listing what did arrive.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::Message as WsMessage;

pub const APP_ID: u64 = 880_000_000_000_000_001;
pub const BOT_ID: u64 = 880_000_000_000_000_001;
pub const GUILD_ID: u64 = 880_000_000_000_000_100;
/// How long any one wait may take before the test fails (a cold debug build is slow).
pub const WAIT: Duration = Duration::from_secs(120);
const TIMESTAMP: &str = "2024-05-01T20:00:00.000000+00:00";
/// Discord's message-edit bucket: this many edits per window per channel.
const EDITS_PER_WINDOW: usize = 5;
const EDIT_WINDOW: Duration = Duration::from_secs(5);

pub use crate::http::Recorded;

impl Recorded {
    /// Whether this request carries a message (content, embeds or components), the bodies
    /// that must have `allowed_mentions`.
    pub fn message_body(&self) -> Option<&Value> {
        let body = if self.path.ends_with("/callback") { &self.body["data"] } else { &self.body };
        let sends_message = self.method == "POST" || self.method == "PATCH";
        let is_message_route = self.path.starts_with("/webhooks/")
            || (self.path.starts_with("/channels/")
                && self.path.contains("/messages")
                && !self.path.ends_with("/threads"))
            || self.path.ends_with("/callback");
        (sends_message && is_message_route && body.is_object()).then_some(body)
    }
}

#[derive(Default)]
struct State {
    requests: Vec<Recorded>,
    next_id: u64,
    /// thread id → parent channel id.
    threads: HashMap<u64, u64>,
    /// interaction token → channel id.
    tokens: HashMap<String, u64>,
    /// interaction token → when it stops working (Discord answers 401, code 50027).
    token_expiry: HashMap<String, SystemTime>,
    /// interaction id → when it was dispatched: the first response must come within 3 s.
    dispatched: HashMap<String, std::time::Instant>,
    /// interaction ids already acknowledged (a second callback is error 40060).
    acknowledged: std::collections::HashSet<String>,
    /// channel id → when its recent message edits happened (a burst gets a 429).
    edits: HashMap<String, Vec<std::time::Instant>>,
    /// interaction token → the id of its original (deferred) response message.
    originals: HashMap<String, u64>,
    /// Every body that broke one of Discord's limits, with why.
    violations: Vec<String>,
    identify: Option<Value>,
    /// When each of `requests` arrived.
    arrivals: Vec<std::time::Instant>,
    /// The next message edit is refused with a 429 saying to retry after this many seconds.
    limit_next_edit: Option<f64>,
    /// The `Retry-After` of the 429 being written.
    retry_after: Option<f64>,
    /// When set, a REST call (other than an interaction's own) must carry `Bot <this>`, or
    /// it gets Discord's 401.
    accepted_token: Option<String>,
    /// The application's flags (`GET /oauth2/applications/@me`); `None`: the Message Content
    /// intent switched on, as for an unverified bot ([`MESSAGE_CONTENT_LIMITED`]).
    application_flags: Option<u64>,
    /// The servers the bot is in (`GET /users/@me/guilds`); `None`: [`GUILD_ID`] alone.
    guilds: Option<Vec<u64>>,
}

/// Application flag: the Message Content intent on, for a bot in under 100 servers.
pub const MESSAGE_CONTENT_LIMITED: u64 = 1 << 19;
/// The privileged gateway intent a bot asks for to read message text.
const MESSAGE_CONTENT_INTENT: u64 = 1 << 15;

#[derive(Clone)]
pub struct FakeDiscord {
    pub rest_addr: SocketAddr,
    /// The same REST API over TLS, as `https://discord.com` ([`FakeDiscord::https_client`]).
    pub tls_addr: SocketAddr,
    pub gateway_addr: SocketAddr,
    state: Arc<Mutex<State>>,
    changed: Arc<watch::Sender<usize>>,
    events: mpsc::UnboundedSender<(String, Value)>,
}

impl FakeDiscord {
    pub async fn start() -> FakeDiscord {
        let rest = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let tls = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let gateway = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let (events, receiver) = mpsc::unbounded_channel();
        let fake = FakeDiscord {
            rest_addr: rest.local_addr().unwrap(),
            tls_addr: tls.local_addr().unwrap(),
            gateway_addr: gateway.local_addr().unwrap(),
            state: Arc::new(Mutex::new(State::default())),
            changed: Arc::new(watch::Sender::new(0)),
            events,
        };
        let server = fake.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = rest.accept().await {
                let server = server.clone();
                tokio::spawn(async move {
                    let _ = server.serve_rest(stream).await;
                });
            }
        });
        let server = fake.clone();
        let acceptor = tls_acceptor();
        tokio::spawn(async move {
            while let Ok((stream, _)) = tls.accept().await {
                let server = server.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Ok(stream) = acceptor.accept(stream).await {
                        let _ = server.serve_rest(stream).await;
                    }
                });
            }
        });
        let server = fake.clone();
        let receiver = Arc::new(tokio::sync::Mutex::new(receiver));
        tokio::spawn(async move {
            while let Ok((stream, _)) = gateway.accept().await {
                let server = server.clone();
                let receiver = Arc::clone(&receiver);
                tokio::spawn(async move {
                    let _ = server.serve_gateway(stream, receiver).await;
                });
            }
        });
        fake
    }

    pub fn rest_url(&self) -> String {
        format!("http://{}", self.rest_addr)
    }

    /// An HTTP client for which this stand-in *is* `https://discord.com`: discord.com resolves
    /// to its TLS port, and the test CA that signed its certificate is trusted (only here).
    pub fn https_client(&self) -> reqwest::Client {
        let ca = reqwest::Certificate::from_pem(include_bytes!("tls/ca.pem")).expect("the test CA parses");
        reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .resolve("discord.com", self.tls_addr)
            .build()
            .expect("a reqwest client")
    }

    /// Each request with when it arrived.
    pub fn requests_with_arrivals(&self) -> Vec<(Recorded, std::time::Instant)> {
        let state = self.state.lock().unwrap();
        state.requests.iter().cloned().zip(state.arrivals.iter().copied()).collect()
    }

    /// Refuses the next message edit with a 429 and its rate-limit headers, as Discord does
    /// when a bot outruns a bucket.
    pub fn limit_next_edit(&self, retry_after: f64) {
        self.state.lock().unwrap().limit_next_edit = Some(retry_after);
    }

    /// From now on only `token` is a valid bot token: any other gets Discord's 401.
    pub fn accept_only_token(&self, token: &str) {
        self.state.lock().unwrap().accepted_token = Some(token.to_string());
    }

    /// The application's flags from now on (0: the Message Content intent off).
    pub fn set_application_flags(&self, flags: u64) {
        self.state.lock().unwrap().application_flags = Some(flags);
    }

    /// The servers the bot is in from now on.
    pub fn set_guilds(&self, guilds: &[u64]) {
        self.state.lock().unwrap().guilds = Some(guilds.to_vec());
    }

    fn application_flags(&self) -> u64 {
        self.state.lock().unwrap().application_flags.unwrap_or(MESSAGE_CONTENT_LIMITED)
    }

    /// Whether a REST call is refused for its token: Discord answers 401 to a bot call
    /// without the right `Authorization: Bot …` (interaction webhooks carry their own token).
    fn unauthorized(&self, path: &str, headers: &[(String, String)]) -> bool {
        let state = self.state.lock().unwrap();
        let Some(token) = &state.accepted_token else { return false };
        if path.starts_with("/webhooks/") || path.starts_with("/interactions/") {
            return false;
        }
        let sent = headers.iter().find(|(name, _)| name == "authorization").map(|(_, value)| value.as_str());
        sent != Some(format!("Bot {token}").as_str())
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The IDENTIFY payload the bot sent, once it has.
    pub fn identify(&self) -> Option<Value> {
        self.state.lock().unwrap().identify.clone()
    }

    /// The first recorded request matching `matches`, waiting for it up to [`WAIT`].
    pub async fn wait_for(&self, what: &str, matches: impl Fn(&Recorded) -> bool) -> Recorded {
        let mut changed = self.changed.subscribe();
        let found = tokio::time::timeout(WAIT, async {
            loop {
                if let Some(found) = self.requests().into_iter().find(|r| matches(r)) {
                    return found;
                }
                changed.changed().await.expect("the fake lives as long as the test");
            }
        })
        .await;
        match found {
            Ok(found) => found,
            Err(_) => {
                let seen: Vec<String> =
                    self.requests().iter().map(|r| format!("{} {} {}", r.method, r.path, r.body)).collect();
                panic!("timed out waiting for {what}; requests so far:\n{}", seen.join("\n"));
            }
        }
    }

    /// Sends a dispatch event (`t`, `d`) on the gateway, after READY.
    pub fn dispatch(&self, event: &str, data: Value) {
        self.events.send((event.to_string(), data)).expect("the gateway task lives as long as the test");
    }

    /// A snowflake made now, as Discord makes them: milliseconds since Discord's epoch in the
    /// top bits, a counter in the low ones (the bot reads an interaction's age from its id).
    fn next_id(&self) -> u64 {
        self.id_aged(Duration::ZERO)
    }

    /// A snowflake made `age` ago.
    /// A fresh snowflake made `age` ago (an interaction a previous run took).
    pub fn snowflake_aged(&self, age: Duration) -> u64 {
        self.id_aged(age)
    }

    fn id_aged(&self, age: Duration) -> u64 {
        let mut state = self.state.lock().unwrap();
        state.next_id += 1;
        snowflake(SystemTime::now() - age, state.next_id)
    }

    /// An INTERACTION_CREATE for a slash command in the guild; returns its token.
    pub fn slash_command(&self, user: u64, roles: &[u64], channel: Value, name: &str, options: Value) -> String {
        self.slash_command_at(Venue::Guild(GUILD_ID), user, roles, channel, name, options)
    }

    /// A slash command at `venue`: another server, the bot's DM, a group DM.
    pub fn slash_command_at(
        &self,
        venue: Venue,
        user: u64,
        roles: &[u64],
        channel: Value,
        name: &str,
        options: Value,
    ) -> String {
        let data = json!({ "id": "770000000000000001", "name": name, "type": 1, "options": options });
        self.interaction(2, data, None, venue, user, roles, channel, Duration::ZERO)
    }

    /// A slash command whose interaction was created `age` ago (its token, valid 15 minutes
    /// from creation, is that much closer to expiring): what a question that waited in the
    /// queue looks like when its answer is ready.
    pub fn slash_command_aged(&self, age: Duration, user: u64, channel: Value, name: &str, options: Value) -> String {
        let data = json!({ "id": "770000000000000001", "name": name, "type": 1, "options": options });
        self.interaction(2, data, None, Venue::Guild(GUILD_ID), user, &[], channel, age)
    }

    /// An APPLICATION_COMMAND_AUTOCOMPLETE interaction: `partial` typed into `option` of
    /// `command`; returns its token (the choices come back in its callback, type 8).
    pub fn autocomplete(&self, user: u64, channel: Value, command: &str, option: &str, partial: &str) -> String {
        let data = json!({
            "id": "770000000000000001", "name": command, "type": 1,
            "options": [{ "name": option, "type": 3, "value": partial, "focused": true }],
        });
        self.interaction(4, data, None, Venue::Guild(GUILD_ID), user, &[], channel, Duration::ZERO)
    }

    /// An INTERACTION_CREATE for a click on a button with `custom_id` under a bot message;
    /// returns its token.
    pub fn button_click(&self, user: u64, channel: Value, custom_id: &str) -> String {
        self.button_click_at(Venue::Guild(GUILD_ID), user, channel, custom_id)
    }

    pub fn button_click_at(&self, venue: Venue, user: u64, channel: Value, custom_id: &str) -> String {
        let channel_id: u64 = channel["id"].as_str().and_then(|id| id.parse().ok()).expect("a channel id");
        let message = self.message_json(self.next_id(), channel_id, &json!({ "content": "" }));
        let data = json!({ "custom_id": custom_id, "component_type": 2 });
        self.interaction(3, data, Some(message), venue, user, &[], channel, Duration::ZERO)
    }

    /// Dispatches an interaction of `kind` (2: command, 3: component) at `venue`, with the
    /// envelope every interaction carries there (a member in a server, a user elsewhere);
    /// returns its token.
    #[allow(clippy::too_many_arguments)]
    fn interaction(
        &self,
        kind: u8,
        data: Value,
        message: Option<Value>,
        venue: Venue,
        user: u64,
        roles: &[u64],
        channel: Value,
        age: Duration,
    ) -> String {
        let id = self.id_aged(age);
        let token = format!("token-{id}");
        let channel_id: u64 = channel["id"].as_str().and_then(|id| id.parse().ok()).expect("a channel id");
        {
            let mut state = self.state.lock().unwrap();
            state.tokens.insert(token.clone(), channel_id);
            state.token_expiry.insert(token.clone(), SystemTime::now() - age + INTERACTION_TOKEN_LIFETIME);
            state.dispatched.insert(id.to_string(), std::time::Instant::now());
        }
        let mut interaction = json!({
            "id": id.to_string(),
            "application_id": APP_ID.to_string(),
            "type": kind,
            "token": token,
            "version": 1,
            "data": data,
            "channel_id": channel_id.to_string(),
            "channel": channel,
            "app_permissions": "2248473465835073",
            "locale": "es-ES",
            "entitlements": [],
            "attachment_size_limit": 8388608,
        });
        match venue {
            Venue::Guild(guild) => {
                interaction["guild_id"] = json!(guild.to_string());
                interaction["guild_locale"] = json!("es-ES");
                interaction["member"] = member(user, roles);
                interaction["authorizing_integration_owners"] = json!({ "0": guild.to_string() });
                interaction["context"] = json!(0);
            }
            Venue::BotDm => {
                interaction["user"] = user_json(user, false);
                interaction["authorizing_integration_owners"] = json!({ "0": GUILD_ID.to_string() });
                interaction["context"] = json!(1);
            }
            Venue::GroupDm => {
                interaction["user"] = user_json(user, false);
                interaction["authorizing_integration_owners"] = json!({ "1": user.to_string() });
                interaction["context"] = json!(2);
            }
        }
        if let Some(message) = message {
            interaction["message"] = message;
        }
        self.dispatch("INTERACTION_CREATE", interaction);
        token
    }

    /// A MESSAGE_CREATE by `user` in `channel`.
    pub fn message_create(&self, user: u64, channel: u64, content: &str) -> u64 {
        self.message_create_with(user, channel, content, &[], None)
    }

    /// A MESSAGE_CREATE by `user` in a guild channel that mentions `mentions` and replies to
    /// `replying_to` (a full message object, as Discord includes it), if any.
    pub fn message_create_with(
        &self,
        user: u64,
        channel: u64,
        content: &str,
        mentions: &[u64],
        replying_to: Option<Value>,
    ) -> u64 {
        let id = self.next_id();
        let mut member = member(user, &[]);
        member.as_object_mut().unwrap().remove("user");
        let mut message = message_envelope(id, channel, user_json(user, false), content, 0);
        message["guild_id"] = json!(GUILD_ID.to_string());
        message["member"] = member;
        message["mentions"] = mentions.iter().map(|&mentioned| user_json(mentioned, mentioned == BOT_ID)).collect();
        if let Some(replied) = replying_to {
            message["type"] = json!(19);
            message["message_reference"] = json!({
                "type": 0, "message_id": replied["id"].clone(), "channel_id": channel.to_string(),
                "guild_id": GUILD_ID.to_string(),
            });
            message["referenced_message"] = replied;
        }
        self.dispatch("MESSAGE_CREATE", message);
        id
    }

    /// A message the bot posted in `channel` with one embed of `colour` (the answer colour
    /// marks an answer), to reply to.
    pub fn bot_message(&self, channel: u64, description: &str, colour: u32) -> Value {
        let mut message = message_envelope(self.next_id(), channel, user_json(BOT_ID, true), "", 0);
        message["embeds"] = json!([{ "type": "rich", "description": description, "color": colour }]);
        message
    }

    /// Thread id → parent channel, for the threads the bot opened.
    pub fn threads(&self) -> HashMap<u64, u64> {
        self.state.lock().unwrap().threads.clone()
    }

    // --- REST ---------------------------------------------------------------------------

    async fn serve_rest<S: AsyncRead + AsyncWrite + Unpin>(&self, stream: S) -> std::io::Result<()> {
        let mut reader = BufReader::new(stream);
        loop {
            let Some(request) = crate::http::read_request(&mut reader).await? else {
                return Ok(());
            };
            let crate::http::Request { method, target, headers, body } = request;
            let path = target.split('?').next().unwrap_or("").trim_start_matches("/api/v10").to_string();
            let (status, payload) = if self.unauthorized(&path, &headers) {
                (401, json!({ "message": "401: Unauthorized", "code": 0 }).to_string())
            } else {
                self.answer(&method, &path, &body)
            };
            let limits = self.rate_limit_headers(&method, &path, status);
            {
                let mut state = self.state.lock().unwrap();
                state.requests.push(Recorded { method, path, body, headers });
                state.arrivals.push(std::time::Instant::now());
            }
            self.changed.send_modify(|n| *n += 1);
            let reason = match status {
                200 => "OK",
                201 => "Created",
                204 => "No Content",
                400 => "Bad Request",
                401 => "Unauthorized",
                429 => "Too Many Requests",
                _ => "Not Found",
            };
            let limits: String = limits.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
            let response = if status == 204 {
                format!("HTTP/1.1 204 {reason}\r\n{limits}\r\n")
            } else {
                format!(
                    "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n{limits}\r\n{payload}",
                    payload.len()
                )
            };
            reader.get_mut().write_all(response.as_bytes()).await?;
        }
    }

    fn answer(&self, method: &str, path: &str, body: &Value) -> (u16, String) {
        if let Some(channel) = edited_channel(method, path)
            && let Some(retry_after) = self.edit_refused(&channel)
        {
            self.state.lock().unwrap().violations.push(format!("{method} {path}: 429 (rate limited)"));
            return (
                429,
                json!({ "message": "You are being rate limited.", "retry_after": retry_after, "global": false })
                    .to_string(),
            );
        }
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let ok = |value: Value| (200, value.to_string());
        match (method, segments.as_slice()) {
            ("GET", ["gateway"]) | ("GET", ["gateway", "bot"]) => ok(json!({
                "url": format!("ws://{}", self.gateway_addr),
                "shards": 1,
                "session_start_limit": { "total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1 },
            })),
            ("GET", ["users", "@me"]) => ok(user_json(BOT_ID, true)),
            ("GET", ["oauth2", "applications", "@me"]) => ok(json!({
                "id": APP_ID.to_string(), "name": "Oráculo", "icon": null, "description": "",
                "bot_public": false, "bot_require_code_grant": false, "verify_key": "00",
                "owner": user_json(1, false), "flags": self.application_flags(),
            })),
            ("GET", ["users", "@me", "guilds"]) => {
                let guilds = self.state.lock().unwrap().guilds.clone().unwrap_or_else(|| vec![GUILD_ID]);
                ok(guilds
                    .iter()
                    .map(|id| {
                        json!({
                            "id": id.to_string(), "name": format!("Mesa {}", id % 1000), "icon": null,
                            "banner": null, "owner": false, "permissions": "309237730304", "features": [],
                        })
                    })
                    .collect())
            }
            ("PUT", ["applications", _, "commands"]) | ("PUT", ["applications", _, "guilds", _, "commands"]) => {
                ok(json!([]))
            }
            ("POST", ["interactions", id, _, "callback"]) => {
                let mut state = self.state.lock().unwrap();
                if !state.acknowledged.insert(id.to_string()) {
                    return (
                        400,
                        json!({ "message": "Interaction has already been acknowledged.", "code": 40060 }).to_string(),
                    );
                }
                let late = state.dispatched.get(*id).is_some_and(|at| at.elapsed() > INITIAL_RESPONSE_DEADLINE);
                if late {
                    return (404, json!({ "message": "Unknown interaction", "code": 10062 }).to_string());
                }
                drop(state);
                if let Some(data) =
                    body.get("data").filter(|data| data.get("content").is_some() || data.get("embeds").is_some())
                {
                    if let Err(why) = check_limits(data) {
                        return self.invalid(path, why);
                    }
                }
                (204, String::new())
            }
            ("POST" | "PATCH", _) if body.is_object() && check_limits(body).is_err() => {
                let why = check_limits(body).err().unwrap_or_default();
                self.invalid(path, why)
            }
            ("POST", ["webhooks", _, token, ..]) | ("PATCH", ["webhooks", _, token, ..])
                if self.token_expired(token) =>
            {
                (401, json!({ "message": "Invalid Webhook Token", "code": 50027 }).to_string())
            }
            ("POST", ["users", "@me", "channels"]) => {
                let user = body["recipient_id"].as_str().unwrap_or("0").to_string();
                let id = self.next_id();
                ok(json!({
                    "id": id.to_string(), "type": 1, "last_message_id": null, "flags": 0,
                    "recipients": [user_json(user.parse().unwrap_or(0), false)],
                }))
            }
            ("POST", ["webhooks", _, token]) => {
                let channel = self.channel_of(token);
                ok(self.message_json(self.next_id(), channel, body))
            }
            ("PATCH", ["webhooks", _, token, "messages", id]) | ("GET", ["webhooks", _, token, "messages", id]) => {
                let channel = self.channel_of(token);
                // `@original`, the deferred response, keeps one id for its whole life.
                let id = match id.parse() {
                    Ok(id) => id,
                    Err(_) => {
                        let fresh = self.next_id();
                        *self.state.lock().unwrap().originals.entry(token.to_string()).or_insert(fresh)
                    }
                };
                ok(self.message_json(id, channel, body))
            }
            ("DELETE", ["webhooks", ..]) | ("DELETE", ["channels", ..]) => (204, String::new()),
            ("POST", ["channels", channel, "messages", message, "threads"]) => {
                let parent: u64 = channel.parse().unwrap_or(0);
                // As Discord does: a thread started from a message takes the message's id.
                let id: u64 = message.parse().unwrap_or(0);
                self.state.lock().unwrap().threads.insert(id, parent);
                let thread = self.thread_json(id, parent, body["name"].as_str().unwrap_or(""));
                // As Discord does: the new thread also arrives on the gateway.
                let mut created = thread.clone();
                created["newly_created"] = json!(true);
                self.dispatch("THREAD_CREATE", created);
                (201, thread.to_string())
            }
            ("GET", ["channels", channel]) => {
                let id: u64 = channel.parse().unwrap_or(0);
                let parent = self.state.lock().unwrap().threads.get(&id).copied();
                match parent {
                    Some(parent) => ok(self.thread_json(id, parent, "hilo")),
                    None => ok(text_channel(id)),
                }
            }
            ("POST", ["channels", _, "typing"]) => (204, String::new()),
            ("POST", ["channels", channel, "messages"]) => {
                let channel = channel.parse().unwrap_or(0);
                ok(self.message_json(self.next_id(), channel, body))
            }
            ("PATCH", ["channels", channel, "messages", id]) => {
                let channel = channel.parse().unwrap_or(0);
                ok(self.message_json(id.parse().unwrap_or(0), channel, body))
            }
            _ => (404, json!({ "message": "404: Not Found", "code": 0 }).to_string()),
        }
    }

    /// A 400 for a body over one of Discord's limits, remembered for the test to see.
    fn invalid(&self, path: &str, why: String) -> (u16, String) {
        self.state.lock().unwrap().violations.push(format!("{path}: {why}"));
        (400, json!({ "message": "Invalid Form Body", "code": 50035, "errors": { "why": why } }).to_string())
    }

    /// Counts an edit of a message in `channel` (a channel id, or an interaction token for
    /// webhook edits); `true` when it is the sixth within five seconds (Discord's message
    /// edit limit is about five per five seconds per channel).
    /// Discord's message-edit bucket: 5 edits per 5 s per channel. `Some(retry_after)` when
    /// this edit is refused (a burst, or one the test asked to refuse), else it is counted.
    fn edit_refused(&self, channel: &str) -> Option<f64> {
        let mut state = self.state.lock().unwrap();
        if let Some(retry_after) = state.limit_next_edit.take() {
            state.retry_after = Some(retry_after);
            return Some(retry_after);
        }
        let edits = state.edits.entry(channel.to_string()).or_default();
        edits.retain(|at| at.elapsed() < EDIT_WINDOW);
        if edits.len() >= EDITS_PER_WINDOW {
            let retry_after = EDIT_WINDOW.saturating_sub(edits[0].elapsed()).as_secs_f64();
            state.retry_after = Some(retry_after);
            return Some(retry_after);
        }
        edits.push(std::time::Instant::now());
        None
    }

    /// The rate-limit headers Discord sends with a message edit's answer (`X-RateLimit-*`,
    /// and `Retry-After` on a 429): what serenity's own limiter reads to pace the next edit.
    fn rate_limit_headers(&self, method: &str, path: &str, status: u16) -> Vec<(&'static str, String)> {
        let Some(channel) = edited_channel(method, path) else {
            return Vec::new();
        };
        let mut state = self.state.lock().unwrap();
        let edits = state.edits.get(&channel).cloned().unwrap_or_default();
        let remaining = EDITS_PER_WINDOW.saturating_sub(edits.len());
        let reset_after = edits.first().map_or(EDIT_WINDOW, |first| EDIT_WINDOW.saturating_sub(first.elapsed()));
        let mut headers = vec![
            ("x-ratelimit-limit", EDITS_PER_WINDOW.to_string()),
            ("x-ratelimit-remaining", remaining.to_string()),
            ("x-ratelimit-reset-after", format!("{:.3}", reset_after.as_secs_f64())),
            ("x-ratelimit-bucket", format!("edits-{channel}")),
        ];
        if status == 429 {
            let retry_after = state.retry_after.take().unwrap_or(1.0);
            headers.push(("retry-after", format!("{retry_after:.3}")));
            headers.push(("x-ratelimit-scope", "user".to_string()));
        }
        headers
    }

    /// Bodies that broke a limit, and edits refused as a burst (429).
    pub fn violations(&self) -> Vec<String> {
        self.state.lock().unwrap().violations.clone()
    }

    fn token_expired(&self, token: &str) -> bool {
        self.state.lock().unwrap().token_expiry.get(token).is_some_and(|expiry| SystemTime::now() > *expiry)
    }

    fn channel_of(&self, token: &str) -> u64 {
        self.state.lock().unwrap().tokens.get(token).copied().unwrap_or(0)
    }

    /// A message as Discord returns it (embeds and components are not echoed: the bot only
    /// reads the id and channel back).
    fn message_json(&self, id: u64, channel: u64, body: &Value) -> Value {
        let content = body["content"].as_str().unwrap_or("");
        let mut message =
            message_envelope(id, channel, user_json(BOT_ID, true), content, body["flags"].as_u64().unwrap_or(0));
        message["application_id"] = json!(APP_ID.to_string());
        message["webhook_id"] = json!(APP_ID.to_string());
        message
    }

    fn thread_json(&self, id: u64, parent: u64, name: &str) -> Value {
        json!({
            "id": id.to_string(),
            "type": 11,
            "guild_id": GUILD_ID.to_string(),
            "parent_id": parent.to_string(),
            "owner_id": BOT_ID.to_string(),
            "name": name,
            "last_message_id": null,
            "rate_limit_per_user": 0,
            "message_count": 0,
            "member_count": 1,
            "flags": 0,
            "total_message_sent": 0,
            "thread_metadata": {
                "archived": false, "auto_archive_duration": 1440, "archive_timestamp": TIMESTAMP,
                "locked": false, "create_timestamp": TIMESTAMP,
            },
        })
    }

    // --- gateway ------------------------------------------------------------------------

    async fn serve_gateway(
        &self,
        stream: TcpStream,
        events: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<(String, Value)>>>,
    ) -> Result<(), tokio_tungstenite::tungstenite::Error> {
        let mut socket = tokio_tungstenite::accept_async(stream).await?;
        let send = |value: Value| WsMessage::Text(value.to_string());
        socket.send(send(json!({ "op": 10, "d": { "heartbeat_interval": 41250 } }))).await?;
        let mut sequence = 0u64;
        // Before READY: answer heartbeats, wait for IDENTIFY.
        loop {
            let Some(message) = socket.next().await else { return Ok(()) };
            let Ok(payload) = serde_json::from_str::<Value>(message?.to_text().unwrap_or("")) else { continue };
            match payload["op"].as_u64() {
                Some(1) => socket.send(send(json!({ "op": 11 }))).await?,
                Some(2) => {
                    let asks_content = payload["d"]["intents"].as_u64().unwrap_or(0) & MESSAGE_CONTENT_INTENT != 0;
                    if asks_content && self.application_flags() & (MESSAGE_CONTENT_LIMITED | (1 << 18)) == 0 {
                        // What Discord does when a bot asks for a privileged intent its
                        // application does not have switched on.
                        let frame = tokio_tungstenite::tungstenite::protocol::CloseFrame {
                            code: 4014.into(),
                            reason: "Disallowed intent(s).".into(),
                        };
                        let _ = socket.close(Some(frame)).await;
                        return Ok(());
                    }
                    self.state.lock().unwrap().identify = Some(payload["d"].clone());
                    self.changed.send_modify(|n| *n += 1);
                    sequence += 1;
                    let ready = json!({
                        "v": 10,
                        "user": user_json(BOT_ID, true),
                        "guilds": [{ "id": GUILD_ID.to_string(), "unavailable": true }],
                        "session_id": "fake-session",
                        "resume_gateway_url": format!("ws://{}", self.gateway_addr),
                        "shard": [0, 1],
                        "application": { "id": APP_ID.to_string(), "flags": 0 },
                    });
                    socket.send(send(json!({ "op": 0, "s": sequence, "t": "READY", "d": ready }))).await?;
                    break;
                }
                _ => {}
            }
        }
        let mut events = events.lock().await;
        loop {
            tokio::select! {
                message = socket.next() => {
                    let Some(message) = message else { return Ok(()) };
                    let message = message?;
                    if message.is_close() {
                        // Answer the close frame, as Discord does.
                        let _ = socket.close(None).await;
                        return Ok(());
                    }
                    if let Ok(payload) = serde_json::from_str::<Value>(message.to_text().unwrap_or(""))
                        && payload["op"] == 1
                    {
                        socket.send(send(json!({ "op": 11 }))).await?;
                    }
                }
                event = events.recv() => {
                    let Some((name, data)) = event else { return Ok(()) };
                    sequence += 1;
                    socket.send(send(json!({ "op": 0, "s": sequence, "t": name, "d": data }))).await?;
                }
            }
        }
    }
}

/// The fields every message object carries, with no mentions, attachments or embeds.
fn message_envelope(id: u64, channel: u64, author: Value, content: &str, flags: u64) -> Value {
    json!({
        "id": id.to_string(),
        "channel_id": channel.to_string(),
        "author": author,
        "content": content,
        "timestamp": TIMESTAMP,
        "edited_timestamp": null,
        "tts": false,
        "mention_everyone": false,
        "mentions": [],
        "mention_roles": [],
        "attachments": [],
        "embeds": [],
        "pinned": false,
        "type": 0,
        "flags": flags,
        "components": [],
    })
}

pub fn user_json(id: u64, bot: bool) -> Value {
    json!({
        "id": id.to_string(),
        "username": if bot { "oraculo".to_string() } else { format!("jugador{}", id % 1000) },
        "discriminator": "0",
        "global_name": null,
        "avatar": null,
        "bot": bot,
        "public_flags": 0,
    })
}

fn member(user: u64, roles: &[u64]) -> Value {
    json!({
        "user": user_json(user, false),
        "nick": null,
        "avatar": null,
        "roles": roles.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
        "joined_at": TIMESTAMP,
        "premium_since": null,
        "deaf": false,
        "mute": false,
        "flags": 0,
        "pending": false,
        "permissions": "2248473465835073",
    })
}

/// An interaction must get its first response (a reply or a deferral) this soon.
pub const INITIAL_RESPONSE_DEADLINE: Duration = Duration::from_secs(3);

/// Discord's message limits, checked on every body the bot sends: content 2000 characters,
/// 10 embeds of at most 6000 characters together (title 256, description 4096, 25 fields of
/// 256/1024, footer 2048), 5 rows of 5 buttons, custom ids of 100 and labels of 80.
/// Lengths are UTF-16 units, as Discord counts them.
fn check_limits(body: &Value) -> Result<(), String> {
    let len = |value: &Value| value.as_str().map(|text| text.encode_utf16().count()).unwrap_or(0);
    let over = |what: &str, value: &Value, limit: usize| {
        if len(value) > limit { Err(format!("{what}: {} > {limit}", len(value))) } else { Ok(()) }
    };
    // The items of an array, at most `limit` of them.
    let at_most = |value: &Value, what: &str, limit: usize| {
        let items = value.as_array().cloned().unwrap_or_default();
        if items.len() > limit { Err(format!("{} {what} > {limit}", items.len())) } else { Ok(items) }
    };
    over("content", &body["content"], 2000)?;
    let embeds = at_most(&body["embeds"], "embeds", 10)?;
    let mut total = 0;
    for embed in &embeds {
        over("embed title", &embed["title"], 256)?;
        over("embed description", &embed["description"], 4096)?;
        over("embed footer", &embed["footer"]["text"], 2048)?;
        total += len(&embed["title"]) + len(&embed["description"]) + len(&embed["footer"]["text"]);
        for field in &at_most(&embed["fields"], "fields", 25)? {
            over("field name", &field["name"], 256)?;
            over("field value", &field["value"], 1024)?;
            total += len(&field["name"]) + len(&field["value"]);
        }
    }
    if total > 6000 {
        return Err(format!("embeds total {total} > 6000"));
    }
    for row in &at_most(&body["components"], "rows", 5)? {
        for button in &at_most(&row["components"], "buttons in a row", 5)? {
            over("custom_id", &button["custom_id"], 100)?;
            over("button label", &button["label"], 80)?;
        }
    }
    Ok(())
}

/// How long an interaction's token works, from the interaction's creation (Discord's rule).
pub const INTERACTION_TOKEN_LIFETIME: Duration = Duration::from_secs(15 * 60);
/// Discord's epoch (2015-01-01), in milliseconds since the Unix one.
const DISCORD_EPOCH_MS: u64 = 1_420_070_400_000;

/// A snowflake for `at`, with `counter` in the low 22 bits.
fn snowflake(at: SystemTime, counter: u64) -> u64 {
    let unix_ms = at.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
    (unix_ms.saturating_sub(DISCORD_EPOCH_MS) << 22) | (counter & 0x3F_FFFF)
}

/// Where an interaction happens (Discord's interaction context types).
#[derive(Debug, Clone, Copy)]
pub enum Venue {
    /// A channel of this server (context 0).
    Guild(u64),
    /// The bot's own DM with the user (context 1).
    BotDm,
    /// A group DM or a DM between other users, through a user install (context 2).
    GroupDm,
}

/// A direct-message channel as an interaction's partial channel (type 1; 3 for a group DM).
pub fn private_channel(id: u64, group: bool) -> Value {
    json!({ "id": id.to_string(), "type": if group { 3 } else { 1 }, "permissions": "2248473465835073" })
}

/// A guild text channel filed under the category `category`.
pub fn text_channel_in(id: u64, category: u64) -> Value {
    let mut channel = text_channel(id);
    channel["parent_id"] = json!(category.to_string());
    channel
}

/// A guild text channel as an interaction's partial channel.
pub fn text_channel(id: u64) -> Value {
    json!({
        "id": id.to_string(),
        "type": 0,
        "guild_id": GUILD_ID.to_string(),
        "name": "mesa",
        "position": 0,
        "permission_overwrites": [],
        "nsfw": false,
        "parent_id": null,
        "permissions": "2248473465835073",
    })
}

/// The stand-in's TLS identity for `discord.com`, signed by the test CA (`tls/README.md`).
fn tls_acceptor() -> tokio_rustls::TlsAcceptor {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(include_bytes!("tls/discord.com.pem"))
        .collect::<Result<_, _>>()
        .expect("the stand-in's certificate parses");
    let key = PrivateKeyDer::from_pem_slice(include_bytes!("tls/discord.com.key")).expect("the stand-in's key parses");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS 1.2 and 1.3")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("a certificate and its key");
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// The channel of a message edit (`PATCH` of a channel message or of a webhook's message):
/// what Discord's edit bucket counts by.
fn edited_channel(method: &str, path: &str) -> Option<String> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method, segments.as_slice()) {
        ("PATCH", ["channels", channel, "messages", _]) | ("PATCH", ["webhooks", _, channel, "messages", _]) => {
            Some(channel.to_string())
        }
        _ => None,
    }
}
