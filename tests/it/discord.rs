//! The real poise bot against a local stand-in for Discord (tests/it/fake_discord.rs) and for
//! Ollama (embeddings and scripted chat replies): a slash question, its thread, a follow-up
//! in the thread, and `/reingest` refused to a player and run for the DM.

use std::path::Path;

use oraculo::config::{CliOverrides, Config, RawConfig};
use serde_json::{Value, json};

use crate::fake_discord::{APP_ID, FakeDiscord, GUILD_ID, Recorded, WAIT, text_channel};
use crate::fake_ollama::FakeOllama;
use crate::support::{Scratch, campaign_config, ingest_dir, ollama_embedder};

const EMBED_MODEL: &str = "fake-embed";
const CHAT_MODEL: &str = "fake-chat";
const TOKEN: &str = "test-token-do-not-log";
const DM: u64 = 700_000_000_000_000_001;
const PLAYER: u64 = 700_000_000_000_000_002;
const CHANNEL: u64 = 700_000_000_000_000_100;

const CRONICA: &str = "# Crónica de Galerna

## Sesión 1 — La feria
El archiduque Ardo huyó al norte tras la feria de las redes, con la corona robada.

## Sesión 2 — La tormenta
Una tormenta hundió el barco del archiduque frente al faro. @everyone <@&123>
";

const FIRST_QUESTION: &str = "¿Qué pasó con el archiduque?";

fn config(scratch: &Scratch, ollama: &FakeOllama, discord: &FakeDiscord) -> Config {
    let text = format!(
        r#"
data_dir = "{data}"
[campaign]
dir = "{campaign}"
secret_paths = ["Secretos"]
[embedder]
backend = "ollama"
model = "{EMBED_MODEL}"
batch_size = 4
window_words = 250
[ollama]
url = "{ollama}"
timeout_secs = 30
retries = 0
[chat]
backend = "ollama"
model = "{CHAT_MODEL}"
[discord]
token = "{TOKEN}"
dm_user_ids = [{DM}]
guild_ids = [{GUILD_ID}]
proxy_url = "{rest}"
"#,
        data = scratch.data.path().display(),
        campaign = scratch.campaign.path().display(),
        ollama = ollama.url(),
        rest = discord.rest_url(),
    );
    let raw = RawConfig::parse(&text, Path::new("config.toml")).unwrap();
    Config::from_layers(raw, &|_| None, &CliOverrides::default()).unwrap()
}

fn is_callback_for(token: &str) -> impl Fn(&Recorded) -> bool + '_ {
    move |r| {
        r.method == "POST" && r.path.starts_with("/interactions/") && r.path.ends_with(&format!("/{token}/callback"))
    }
}

fn is_webhook_for<'a>(token: &'a str, method: &'static str) -> impl Fn(&Recorded) -> bool + 'a {
    move |r| r.method == method && r.path.starts_with(&format!("/webhooks/{APP_ID}/{token}"))
}

/// The text of every embed of a message body: titles, descriptions, field names and values.
fn embed_text(body: &Value) -> String {
    let mut text = String::new();
    for embed in body["embeds"].as_array().into_iter().flatten() {
        for key in ["title", "description"] {
            text.push_str(embed[key].as_str().unwrap_or(""));
            text.push('\n');
        }
        for field in embed["fields"].as_array().into_iter().flatten() {
            text.push_str(field["name"].as_str().unwrap_or(""));
            text.push('\n');
            text.push_str(field["value"].as_str().unwrap_or(""));
            text.push('\n');
        }
    }
    text
}

fn field_names(body: &Value) -> Vec<String> {
    body["embeds"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|embed| embed["fields"].as_array().cloned().unwrap_or_default())
        .filter_map(|field| field["name"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bot_answers_threads_follow_ups_and_guards_reingest() {
    // Warnings (a payload serenity could not read, a failed request) show when the test fails.
    oraculo::logging::init();
    // The campaign, indexed beforehand with the same embedder the bot will use.
    let scratch =
        Scratch::new(&[("Crónica.md", CRONICA), ("Secretos/Plan.md", "# El plan\nEl archiduque quiere el trono.\n")]);
    let ollama = FakeOllama::start(&[EMBED_MODEL, CHAT_MODEL]).await;
    let embedder = ollama_embedder(&ollama, EMBED_MODEL).await;
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&["Secretos"]), &embedder)
        .await
        .unwrap();

    let discord = FakeDiscord::start().await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let bot = tokio::spawn(oraculo::discord::run(config(&scratch, &ollama, &discord), async move {
        let _ = stopped.await;
    }));

    // Connected: IDENTIFY with the configured token and intents, commands registered in the guild.
    let registered = discord
        .wait_for("the commands registered in the guild", |r| {
            r.method == "PUT" && r.path == format!("/applications/{APP_ID}/guilds/{GUILD_ID}/commands")
        })
        .await;
    let names: Vec<&str> = registered.body.as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["oraculo", "fuente", "reingest"]);
    assert_eq!(registered.body[0]["name_localizations"]["en-US"], "oracle");
    assert_eq!(registered.body[0]["options"][0]["name_localizations"]["en-US"], "question");
    assert_eq!(registered.header("authorization"), Some(format!("Bot {TOKEN}").as_str()));
    let identify = discord.identify().expect("identified before registering");
    let intents = identify["intents"].as_u64().unwrap();
    assert_ne!(intents & (1 << 15), 0, "MESSAGE_CONTENT, to read follow-ups in threads");
    assert_ne!(intents & (1 << 9), 0, "GUILD_MESSAGES, to receive them");

    // 1. /oraculo in a channel: deferred at once, then the answer with its cited source.
    ollama.enqueue_reply(
        "El archiduque Ardo huyó al norte tras la feria [Sesión 1]. Su barco se hundió [Sesión 2]; \
         lo vio @everyone <@&123> [Sesión 99].",
    );
    let question_token = discord.slash_command(
        PLAYER,
        &[],
        text_channel(CHANNEL),
        "oraculo",
        json!([{ "name": "pregunta", "type": 3, "value": FIRST_QUESTION }]),
    );
    let deferred = discord.wait_for("the deferred response", is_callback_for(&question_token)).await;
    assert_eq!(deferred.body["type"], 5, "deferred within Discord's 3 seconds: {}", deferred.body);
    let answer = discord.wait_for("the answer follow-up", is_webhook_for(&question_token, "POST")).await;
    let text = embed_text(&answer.body);
    assert!(text.contains("huyó al norte"), "{text}");
    let sources = field_names(&answer.body);
    assert_eq!(sources, ["Sesión 1", "Sesión 2"], "valid citations only, never the invented one");
    assert!(answer.body["components"][0]["components"][0]["custom_id"].as_str().unwrap().ends_with("Sesión 1"));

    // 2. A thread on the answer, named from the question.
    let thread_request = discord
        .wait_for("the thread on the answer", |r| {
            r.method == "POST"
                && r.path.starts_with(&format!("/channels/{CHANNEL}/messages/"))
                && r.path.ends_with("/threads")
        })
        .await;
    assert_eq!(thread_request.body["name"], FIRST_QUESTION);
    let (&thread, _) = discord.threads().iter().next().expect("the fake opened one thread");

    // 3. A message in the thread is a follow-up, answered with the thread's history.
    let chats_before = ollama.chat_requests("/api/chat").len();
    ollama.enqueue_reply("Después se refugió en el faro [Sesión 2].");
    let followup_id = discord.message_create(PLAYER, thread, "¿Y después?");
    let followup = discord
        .wait_for("the follow-up answer in the thread", |r| {
            r.method == "POST" && r.path == format!("/channels/{thread}/messages")
        })
        .await;
    assert!(embed_text(&followup.body).contains("se refugió en el faro"), "{}", followup.body);
    assert_eq!(followup.body["message_reference"]["message_id"], followup_id.to_string());
    let chats = ollama.chat_requests("/api/chat");
    assert_eq!(chats.len(), chats_before + 1);
    let followup_prompt = chats.last().unwrap().body["messages"].to_string();
    assert!(followup_prompt.contains("¿Qué pasó con el archiduque?"), "the thread's history: {followup_prompt}");
    assert!(followup_prompt.contains("¿Y después?"));
    assert!(!followup_prompt.contains("quiere el trono"), "GM-only notes never reach a player channel");

    // 4. A cited source in full, only to the asker: by /fuente, and by the answer's button.
    let source_token = discord.slash_command(
        PLAYER,
        &[],
        text_channel(CHANNEL),
        "fuente",
        json!([{ "name": "etiqueta", "type": 3, "value": "Sesión 2" }]),
    );
    let deferred = discord.wait_for("the source's deferral", is_callback_for(&source_token)).await;
    assert_eq!((deferred.body["type"].as_u64(), deferred.body["data"]["flags"].as_u64()), (Some(5), Some(64)));
    let source = discord.wait_for("the source", is_webhook_for(&source_token, "POST")).await;
    assert_eq!(source.body["flags"], 64, "ephemeral: {}", source.body);
    assert!(embed_text(&source.body).contains("Una tormenta hundió el barco"), "{}", source.body);
    let button_token = discord.button_click(PLAYER, text_channel(CHANNEL), "oraculo:fuente:Sesión 1");
    let deferred = discord.wait_for("the button's deferral", is_callback_for(&button_token)).await;
    assert_eq!((deferred.body["type"].as_u64(), deferred.body["data"]["flags"].as_u64()), (Some(5), Some(64)));
    let source = discord.wait_for("the source behind the button", is_webhook_for(&button_token, "POST")).await;
    assert_eq!(source.body["flags"], 64, "ephemeral: {}", source.body);
    assert!(embed_text(&source.body).contains("huyó al norte tras la feria de las redes"), "{}", source.body);

    // 5. /reingest from a player: refused, ephemerally, and nothing runs.
    let refused_token = discord.slash_command(PLAYER, &[], text_channel(CHANNEL), "reingest", json!([]));
    let refused = discord.wait_for("the refusal", is_callback_for(&refused_token)).await;
    assert_eq!(refused.body["type"], 4, "{}", refused.body);
    assert_eq!(refused.body["data"]["flags"], 64, "ephemeral: {}", refused.body);
    assert!(refused.body["data"]["content"].as_str().unwrap().contains("Solo el DM"), "{}", refused.body);

    // 6. /reingest from the DM: deferred ephemerally, runs in the background, reports a summary.
    let reingest_token = discord.slash_command(DM, &[], text_channel(CHANNEL), "reingest", json!([]));
    let deferred = discord.wait_for("the reingest's deferral", is_callback_for(&reingest_token)).await;
    assert_eq!(deferred.body["type"], 5);
    assert_eq!(deferred.body["data"]["flags"], 64, "ephemeral: {}", deferred.body);
    let summary = discord
        .wait_for("the reingest summary", |r| {
            is_webhook_for(&reingest_token, "PATCH")(r) && r.body["content"].as_str().is_some_and(|c| c.contains('✅'))
        })
        .await;
    assert!(summary.body["content"].as_str().unwrap().contains("2 archivos"), "{}", summary.body);
    assert!(summary.path.ends_with("/messages/@original"));

    // The refused one never ran: its interaction got the refusal and nothing else.
    let refused_requests: Vec<Recorded> =
        discord.requests().into_iter().filter(|r| r.path.contains(&refused_token)).collect();
    assert_eq!(refused_requests.len(), 1, "{refused_requests:?}");

    // No message the bot sent may ping anyone.
    let empty = json!({ "parse": [], "users": [], "roles": [], "replied_user": false });
    let messages: Vec<(String, Value)> = discord
        .requests()
        .iter()
        .filter_map(|r| r.message_body().map(|body| (format!("{} {}", r.method, r.path), body.clone())))
        .collect();
    assert!(messages.len() >= 9, "{messages:?}");
    for (route, body) in &messages {
        assert_eq!(body["allowed_mentions"], empty, "{route}: {body}");
    }

    // Shutdown: the bot drains and returns.
    stop.send(()).unwrap();
    let stopped = tokio::time::timeout(WAIT, bot).await.expect("the bot stops").unwrap();
    stopped.unwrap();
}
