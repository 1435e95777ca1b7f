//! The real poise bot against a local stand-in for Discord (tests/it/fake_discord.rs) and for
//! Ollama (embeddings and scripted chat replies): a slash question, its thread, a follow-up
//! in the thread, and `/reingest` refused to a player and run for the DM.

use serde_json::{Value, json};

use crate::bot::{
    CHANNEL, CHAT_MODEL, CRONICA, DM, EMBED_MODEL, FIRST_QUESTION, PLAYER, Reach, RunningBot, TOKEN, Table,
    ask_first_question, config, config_toml, config_with, embed_text, final_saying, indexed_campaign, is_callback_for,
    is_final_answer_for, is_final_message_in, is_preview, is_webhook_for, parse_config, player_command,
    wait_for_guild_commands,
};
use crate::fake_discord::{
    APP_ID, BOT_ID, FakeDiscord, GUILD_ID, Recorded, Venue, WAIT, private_channel, text_channel, text_channel_in,
};
use crate::fake_ollama::{FakeOllama, Fault};
use crate::harness::{Scratch, campaign_config, ingest_dir, ollama_embedder};

/// The sources of the scripted answer to the first question: the note it cites, and the note
/// of the sentence shown first that it did not say, kept under it (`oracle::settle`).
const ANSWER_SOURCES: [&str; 2] = ["Sesión 1", "Sesión 2"];

/// A GM note, in the campaign's secret folder.
const PLAN: (&str, &str) = ("Secretos/Plan.md", "# El plan\nEl archiduque quiere el trono.\n");

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
    // The campaign, indexed beforehand with the same embedder the bot will use.
    let (scratch, ollama) = indexed_campaign(&[("Crónica.md", CRONICA), PLAN], &["Secretos"]).await;

    let discord = FakeDiscord::start().await;
    let bot = RunningBot::start(config(&scratch, &ollama, &discord));

    // Connected: IDENTIFY with the configured token and intents, commands registered in the guild.
    let registered = discord
        .wait_for("the commands registered in the guild", |r| {
            r.method == "PUT" && r.path == format!("/applications/{APP_ID}/guilds/{GUILD_ID}/commands")
        })
        .await;
    let names: Vec<&str> = registered.body.as_array().unwrap().iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["oraculo", "fuente", "reingest", "cronologia", "resumen", "oraculo_informe"]);
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
    // The question's embedding comes first (no fault), then the answer streams as on a CPU.
    ollama.enqueue(Fault::Delay(std::time::Duration::ZERO));
    ollama.enqueue(Fault::Slow(std::time::Duration::from_millis(150)));
    let question_token = ask_first_question(&discord);
    let deferred = discord.wait_for("the deferred response", is_callback_for(&question_token)).await;
    assert_eq!(deferred.body["type"], 5, "deferred within Discord's 3 seconds: {}", deferred.body);
    // Streamed: the answer's message shows the text so far, then becomes the final layout.
    let preview = discord.wait_for("the answer's first preview", is_webhook_for(&question_token, "PATCH")).await;
    // Before the model's text: the notes' own sentences, cited, at once (on a CPU the model
    // reads for a minute first), marked as such.
    assert!(embed_text(&preview.body).contains("Esto es lo que dicen las notas"), "{}", preview.body);
    assert!(embed_text(&preview.body).contains("[Sesión 1]"), "{}", preview.body);
    assert!(preview.body.to_string().contains("📜 Frases de las notas, tal cual"), "{}", preview.body);
    assert!(preview.path.ends_with("/messages/@original"), "the first message replaces the deferral: {}", preview.path);
    assert!(is_preview(&preview.body), "the first message is a preview: {}", preview.body);
    assert!(field_names(&preview.body).is_empty(), "no sources before the citations are checked");
    let answer = discord.wait_for("the answer's final layout", is_final_answer_for(&question_token)).await;
    assert_eq!(answer.method, "PATCH", "the preview is edited into the answer, not posted again");
    assert!(answer.path.ends_with("/messages/@original"), "{}", answer.path);
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
    let first = discord
        .wait_for("the follow-up answer in the thread", |r| {
            r.method == "POST" && r.path == format!("/channels/{thread}/messages")
        })
        .await;
    assert_eq!(first.body["message_reference"]["message_id"], followup_id.to_string());
    assert_eq!(first.body["message_reference"]["fail_if_not_exists"], false, "a deleted question loses no answer");
    let followup = discord.wait_for("the follow-up's final layout", is_final_message_in(thread)).await;
    assert!(embed_text(&followup.body).contains("se refugió en el faro"), "{}", followup.body);
    let chats = ollama.chat_requests("/api/chat");
    assert_eq!(chats.len(), chats_before + 1);
    let followup_prompt = chats.last().unwrap().body["messages"].to_string();
    assert!(followup_prompt.contains("¿Qué pasó con el archiduque?"), "the thread's history: {followup_prompt}");
    assert!(followup_prompt.contains("¿Y después?"));
    assert!(!followup_prompt.contains("quiere el trono"), "GM-only notes never reach a player channel");

    // 4. A cited source in full, only to the asker: by /fuente, and by the answer's button.
    let source_token = player_command(&discord, "fuente", "etiqueta", "Sesión 2");
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
    bot.stop().await;
}

/// Through the real bot: the bot answers only in its configured
/// server (nothing in another one), in direct messages only to the DM (who reads GM notes
/// there), never in a group DM; a category listed as a GM channel makes no channel a GM
/// channel; sources are rate limited like questions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bot_answers_only_where_it_is_configured() {
    const CATEGORY: u64 = 700_000_000_000_000_300;
    const OTHER_GUILD: u64 = 880_000_000_000_000_999;
    let (scratch, ollama) = indexed_campaign(&[("Crónica.md", CRONICA), PLAN], &["Secretos"]).await;
    let discord = FakeDiscord::start().await;
    // The category is listed where a GM channel should be; one question per minute, so three
    // sources per minute.
    let extra = format!("gm_channel_ids = [{CATEGORY}]\nquestions_per_minute = 1");
    let bot = RunningBot::start(config_with(&scratch, &ollama, &discord, &extra));

    // Registered with explicit contexts: servers in the guild, the bot's DM globally; a
    // guild install only (no user install into group DMs).
    let in_guild = discord
        .wait_for("the guild commands", |r| {
            r.method == "PUT" && r.path == format!("/applications/{APP_ID}/guilds/{GUILD_ID}/commands")
        })
        .await;
    let global = discord
        .wait_for("the global commands", |r| r.method == "PUT" && r.path == format!("/applications/{APP_ID}/commands"))
        .await;
    for command in in_guild.body.as_array().unwrap() {
        assert_eq!(command["contexts"], json!([0]), "{command}");
        assert_eq!(command["integration_types"], json!([0]), "{command}");
    }
    for command in global.body.as_array().unwrap() {
        assert_eq!(command["contexts"], json!([1]), "{command}");
        assert_eq!(command["integration_types"], json!([0]), "{command}");
    }

    let fuente = |label: &str| json!([{ "name": "etiqueta", "type": 3, "value": label }]);
    // 1. Another server: nothing at all is sent back, for a command or a button.
    let foreign = discord.slash_command_at(
        Venue::Guild(OTHER_GUILD),
        PLAYER,
        &[],
        text_channel(CHANNEL),
        "oraculo",
        json!([{ "name": "pregunta", "type": 3, "value": FIRST_QUESTION }]),
    );
    let foreign_button =
        discord.button_click_at(Venue::Guild(OTHER_GUILD), PLAYER, text_channel(CHANNEL), "oraculo:fuente:Sesión 1");

    // 2. A group DM, even from the DM: refused, ephemerally, with nothing of the notes.
    let group =
        discord.slash_command_at(Venue::GroupDm, DM, &[], private_channel(42, true), "fuente", fuente("Mundo: Plan"));
    let refused = discord.wait_for("the group DM's refusal", is_callback_for(&group)).await;
    assert_eq!((refused.body["type"].as_u64(), refused.body["data"]["flags"].as_u64()), (Some(4), Some(64)));
    assert!(refused.body["data"]["content"].as_str().unwrap().contains("servidor de la campaña"), "{}", refused.body);

    // 3. The bot's DM: a player is refused; the DM reads GM-only notes there.
    let stranger = discord.slash_command_at(
        Venue::BotDm,
        PLAYER,
        &[],
        private_channel(43, false),
        "fuente",
        fuente("Mundo: Plan"),
    );
    let refused = discord.wait_for("a player's DM refused", is_callback_for(&stranger)).await;
    assert_eq!(refused.body["type"], 4, "{}", refused.body);
    let dm =
        discord.slash_command_at(Venue::BotDm, DM, &[], private_channel(44, false), "fuente", fuente("Mundo: Plan"));
    let source = discord.wait_for("the DM's source in the bot's DM", is_webhook_for(&dm, "POST")).await;
    assert!(embed_text(&source.body).contains("quiere el trono"), "{}", source.body);

    // 4. A channel filed under the category listed as a GM channel is a player channel.
    let categorised =
        discord.slash_command(DM, &[], text_channel_in(CHANNEL, CATEGORY), "fuente", fuente("Mundo: Plan"));
    let source = discord.wait_for("the source under the category", is_webhook_for(&categorised, "POST")).await;
    assert!(!embed_text(&source.body).contains("quiere el trono"), "{}", source.body);

    // 5. Sources are rate limited: three a minute for a player allowed one question a minute.
    for n in 0..3 {
        let token = discord.slash_command(PLAYER, &[], text_channel(CHANNEL), "fuente", fuente("Sesión 1"));
        let source = discord.wait_for("a source within the limit", is_webhook_for(&token, "POST")).await;
        assert!(embed_text(&source.body).contains("huyó al norte"), "source {n}: {}", source.body);
    }
    let over = discord.slash_command(PLAYER, &[], text_channel(CHANNEL), "fuente", fuente("Sesión 2"));
    let refused = discord.wait_for("the fourth source refused", is_callback_for(&over)).await;
    assert!(refused.body["data"]["content"].as_str().unwrap().contains("Demasiadas fuentes"), "{}", refused.body);
    let over_button = discord.button_click(PLAYER, text_channel(CHANNEL), "oraculo:fuente:Sesión 2");
    let refused = discord.wait_for("a source button over the limit", is_callback_for(&over_button)).await;
    assert!(refused.body["data"]["content"].as_str().unwrap().contains("Demasiadas fuentes"), "{}", refused.body);

    // Everything after the foreign interactions was answered: they never got anything.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let answered_foreign: Vec<Recorded> = discord
        .requests()
        .into_iter()
        .filter(|r| r.path.contains(&format!("/{foreign}/")) || r.path.contains(&format!("/{foreign_button}/")))
        .collect();
    assert!(answered_foreign.is_empty(), "a server not configured got answers: {answered_foreign:?}");
    assert!(ollama.chat_requests("/api/chat").is_empty(), "no question ran");

    bot.stop().await;
}

/// Without a server list the bot does not start (it would answer in any
/// server that invites it), and says what to set.
#[tokio::test]
async fn the_bot_refuses_to_start_without_its_servers() {
    let scratch = Scratch::new(&[("Crónica.md", CRONICA)]);
    let text = format!(
        "data_dir = \"{}\"\n[campaign]\ndir = \"{}\"\n[discord]\ntoken = \"{TOKEN}\"\ndm_user_ids = [{DM}]\n",
        scratch.data.path().display(),
        scratch.campaign.path().display(),
    );
    let config = parse_config(&text);
    let started = tokio::time::timeout(WAIT, oraculo::discord::run(config, std::future::pending())).await;
    let error = format!("{:#}", started.expect("refused at once").expect_err("no servers configured"));
    assert!(error.contains("discord.guild_ids is empty"), "{error}");
    assert!(!error.contains(TOKEN), "the token never shows: {error}");
}

/// The canary through the bot: the canary vault indexed and annotated by a model that echoes
/// what it reads, and a player asking about every canary in a player channel, following up in
/// the answer's thread, reading every source and label there is, clicking source buttons,
/// autocompleting labels and names, asking for every timeline and every recap. No body the bot
/// sends to the player holds a canary (other than the words the player typed, which are taken
/// out first), and neither does any prompt a player's question sent. The same questions in
/// GM channels bring each one back: the echo would show a leak.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_canary_reaches_a_player_through_discord() {
    use crate::canary::{CANARIES, VAULT_CAMPAIGN_TOML, canaries_in, vault, vault_config};
    const GM_CHANNEL: u64 = 700_000_000_000_000_500;
    oraculo::logging::init();
    let scratch = vault();
    let ollama = FakeOllama::start(&[EMBED_MODEL, CHAT_MODEL]).await;
    ollama.echo_prompts();
    let embedder = ollama_embedder(&ollama, EMBED_MODEL).await;
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &vault_config(), &embedder).await.unwrap();
    let index = oraculo::index::Index::open_existing(&scratch.index_dir()).await.unwrap();
    let chat_config = crate::harness::chat_config(ollama.url(), std::time::Duration::from_secs(10));
    let chat = oraculo::llm::chat::ollama::OllamaChat::new({
        let mut config = chat_config;
        config.server.model = CHAT_MODEL.to_string();
        config
    })
    .unwrap();
    let annotated = oraculo::ingest::annotate_fragments(&index, &chat, &oraculo::ingest::Quiet).await;
    assert!(annotated.error.is_none() && annotated.missing == 0, "{annotated:?}");
    let every_label: Vec<String> =
        index.store.sources().unwrap().into_iter().map(|source| source.label.into()).collect();
    drop(index);
    let annotation_prompts = ollama.chat_requests("/api/chat").len();

    let discord = FakeDiscord::start().await;
    // One GM channel per canary: an echoed answer in a channel's history would be echoed again
    // by the next question there.
    let findable: Vec<&str> =
        CANARIES.iter().filter(|(_, _, findable)| *findable).map(|(canary, _, _)| *canary).collect();
    let gm_channels: Vec<String> = (0..findable.len()).map(|n| (GM_CHANNEL + n as u64).to_string()).collect();
    let extra = format!("gm_channel_ids = [{}]\nquestions_per_minute = 0", gm_channels.join(", "));
    let campaign = format!("[campaign]\ndir = \"{}\"\n{VAULT_CAMPAIGN_TOML}", scratch.campaign.path().display());
    let bot = RunningBot::start(parse_config(&config_toml(scratch.data.path(), &campaign, &ollama, &discord, &extra)));
    wait_for_guild_commands(&discord).await;

    // The questions and names the player types: taken out of every body before looking for
    // canaries.
    let mut typed: Vec<String> = Vec::new();
    let question = |text: &str| json!([{ "name": "pregunta", "type": 3, "value": text }]);
    let mut questions: Vec<String> = CANARIES.iter().map(|(canary, _, _)| format!("¿Quién es {canary}?")).collect();
    questions.extend(
        ["¿Qué pasó en el faro?", "¿Qué hay en la cueva del islote?", "¿Quién es el espía del puerto?"]
            .map(String::from),
    );
    // Each in its own channel, for the same reason as the GM's; asked side by side, a round at a
    // time (each answer's last edit waits out the edit pace while the next is written).
    let channels: Vec<u64> = (0..questions.len()).map(|n| CHANNEL + 1 + n as u64).collect();
    let asked: Vec<(&str, u64)> = questions.iter().map(String::as_str).zip(channels).collect();
    ask_side_by_side(&discord, &asked, &question).await;
    typed.extend(questions.iter().cloned());
    // A follow-up in the thread opened on an answer.
    let thread = discord
        .wait_for("a thread", |r| r.method == "POST" && r.path.ends_with("/threads"))
        .await
        .path
        .split('/')
        .nth(4)
        .and_then(|id| id.parse::<u64>().ok())
        .expect("the thread's message id");
    let followup = "¿Y quién vive en la cueva?";
    discord.message_create(PLAYER, thread, followup);
    discord.wait_for("the follow-up's answer", is_final_message_in(thread)).await;
    typed.push(followup.to_string());
    // Every label, by /fuente and by button (a GM-only one reads as missing: its reply names
    // only the label the player typed), and autocomplete (checked as it is: nothing typed
    // there is a whole label).
    assert!(!every_label.is_empty(), "the vault has labels to ask for");
    let mut asked_labels: Vec<(String, String)> = Vec::new();
    for label in &every_label {
        let token = player_command(&discord, "fuente", "etiqueta", &label);
        discord.wait_for("a source", is_webhook_for(&token, "POST")).await;
        asked_labels.push((token, label.clone()));
        let token = discord.button_click(PLAYER, text_channel(CHANNEL), &format!("oraculo:fuente:{label}"));
        discord.wait_for("a source button", is_webhook_for(&token, "POST")).await;
        asked_labels.push((token, label.clone()));
    }
    let mut entity_names: Vec<String> = Vec::new();
    for partial in ["", "a", "e", "o", "Ficha", "Mundo", "Sesión"] {
        for (command, option) in [("fuente", "etiqueta"), ("cronologia", "nombre")] {
            let token = discord.autocomplete(PLAYER, text_channel(CHANNEL), command, option, partial);
            let choices = discord.wait_for("autocomplete choices", is_callback_for(&token)).await;
            assert_eq!(choices.body["type"], 8, "{}", choices.body);
            let leaked = canaries_in(&choices.body.to_string());
            assert!(leaked.is_empty(), "{command} autocomplete {partial:?} leaks {leaked:?}: {}", choices.body);
            if command == "cronologia" {
                let offered = choices.body["data"]["choices"].as_array().cloned().unwrap_or_default();
                entity_names.extend(offered.iter().filter_map(|choice| choice["value"].as_str().map(str::to_string)));
            }
        }
    }
    entity_names.sort();
    entity_names.dedup();
    assert!(!entity_names.is_empty(), "the compendium offers names");
    // Every timeline the player can ask for, and the canaries' own names (an unknown name is
    // answered with suggestions: none of them may be a secret).
    let mut asked_names: Vec<(String, String)> = Vec::new();
    for name in entity_names.iter().map(String::as_str).chain(CANARIES.iter().map(|(canary, _, _)| *canary)) {
        let token = player_command(&discord, "cronologia", "nombre", name);
        discord.wait_for("a timeline", is_webhook_for(&token, "POST")).await;
        asked_names.push((token, name.to_string()));
    }
    // Every recap: each session, and the last one.
    for session in (1..=10).map(|n| json!([{ "name": "sesion", "type": 4, "value": n }])).chain([json!([])]) {
        let token = discord.slash_command(PLAYER, &[], text_channel(CHANNEL), "resumen", session);
        discord.wait_for("a recap", is_webhook_for(&token, "POST")).await;
    }
    let player_prompts = ollama.chat_requests("/api/chat")[annotation_prompts..].to_vec();

    // The positive control: each canary's question in a GM channel shows the model its note,
    // and the first canary's answer (an echo) brings it back to the GM.
    // Asked side by side too: each question's prompts are told apart by the question they hold.
    let gm_questions: Vec<String> = findable.iter().map(|canary| format!("¿Quién es {canary}?")).collect();
    let gm_asked: Vec<(&str, u64)> =
        gm_questions.iter().map(String::as_str).zip(gm_channels.iter().map(|c| c.parse().unwrap())).collect();
    let asked_before = ollama.chat_requests("/api/chat").len();
    let gm_answers = ask_side_by_side(&discord, &gm_asked, &question).await;
    let gm_prompts = ollama.chat_requests("/api/chat")[asked_before..].to_vec();
    let mut gm_tokens: Vec<String> = Vec::new();
    for (n, ((canary, gm_question), (gm_token, gm_answer))) in
        findable.iter().zip(&gm_questions).zip(gm_answers).enumerate()
    {
        let prompts: String = gm_prompts
            .iter()
            .map(|prompt| prompt.body.to_string())
            .filter(|body| body.contains(gm_question.as_str()))
            .map(|body| body.replace(gm_question.as_str(), ""))
            .collect();
        assert!(prompts.contains(canary), "a GM channel's prompt shows the GM's notes ({canary}): {prompts}");
        if n == 0 {
            let shown = gm_answer.body.to_string().replace(gm_question.as_str(), "");
            assert!(shown.contains(canary), "the echo shows GM notes in a GM channel: {}", gm_answer.body);
        }
        gm_tokens.push(gm_token);
    }

    // A player's follow-up after the GM channels' questions: no GM state carries over.
    let after_gm = "¿Y qué más pasó allí?";
    discord.message_create(PLAYER, thread, after_gm);
    discord
        .wait_for("the follow-up after the GM question", |r| {
            is_final_message_in(thread)(r) && embed_text(&r.body).contains(after_gm)
        })
        .await;
    typed.push(after_gm.to_string());

    let player_bodies: Vec<(String, String)> = discord
        .requests()
        .into_iter()
        .filter(|r| {
            r.method != "GET"
                && !r.path.split('/').any(|segment| {
                    gm_tokens.iter().any(|token| token == segment) || gm_channels.iter().any(|gm| gm == segment)
                })
        })
        .map(|r| {
            let mut body = r.body.to_string();
            for text in &typed {
                body = body.replace(text.as_str(), "");
            }
            // A source's reply may name the label its own request typed, a timeline's the name
            // typed, and nothing else.
            for (token, said) in asked_labels.iter().chain(&asked_names) {
                if r.path.split('/').any(|segment| segment == token) {
                    body = body.replace(said.as_str(), "");
                }
            }
            (format!("{} {}", r.method, r.path), body)
        })
        .collect();
    assert!(player_bodies.len() > 100, "{}", player_bodies.len());
    for (route, body) in &player_bodies {
        let leaked = canaries_in(body);
        assert!(leaked.is_empty(), "{route} leaks {leaked:?}: {body}");
    }
    // Every prompt a player's question or recap sent: the reranks over annotations, the answers.
    assert!(player_prompts.len() > questions.len(), "{}", player_prompts.len());
    for prompt in &player_prompts {
        let mut body = prompt.body.to_string();
        for text in &typed {
            body = body.replace(text.as_str(), "");
        }
        let leaked = canaries_in(&body);
        assert!(leaked.is_empty(), "a player's prompt leaks {leaked:?}: {body}");
    }

    bot.stop().await;
}

/// Questions the bot is in the middle of at once: the queue lets in this many and more from
/// other places (`discord.queue_limit` is 50), and each answer waits out its own edit pace.
const SIDE_BY_SIDE: usize = 16;

/// `asked` (a question and its channel), asked by the player a round of [`SIDE_BY_SIDE`] at a
/// time; each answer's token and final message, in `asked`'s order.
async fn ask_side_by_side(
    discord: &FakeDiscord,
    asked: &[(&str, u64)],
    options: &impl Fn(&str) -> Value,
) -> Vec<(String, crate::http::Recorded)> {
    let mut answers = Vec::new();
    for round in asked.chunks(SIDE_BY_SIDE) {
        let tokens: Vec<String> = round
            .iter()
            .map(|(text, channel)| discord.slash_command(PLAYER, &[], text_channel(*channel), "oraculo", options(text)))
            .collect();
        for token in tokens {
            let answer = discord.wait_for("an answer", is_final_answer_for(&token)).await;
            answers.push((token, answer));
        }
    }
    answers
}

/// A channel that was a GM channel and is one no more: the GM's exchanges stored there (answered
/// from GM notes) never reach the prompt of a player's question in it, after the bot restarts
/// with the new configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_that_stops_being_a_gm_channel_feeds_no_gm_turn_to_its_players() {
    const CANARY: &str = "Pelgrumo";
    const GM_CHANNEL: u64 = 700_000_000_000_000_600;
    let (scratch, ollama) = indexed_campaign(
        &[("Crónica.md", CRONICA), ("Secretos/Plan.md", &format!("# El plan\n{CANARY} traicionará al archiduque.\n"))],
        &["Secretos"],
    )
    .await;
    ollama.echo_prompts();
    let ask = |discord: &FakeDiscord, text: &str| {
        discord.slash_command(
            PLAYER,
            &[],
            text_channel(GM_CHANNEL),
            "oraculo",
            json!([{ "name": "pregunta", "type": 3, "value": text }]),
        )
    };

    // A GM channel: the answer echoes the GM's notes, and joins the channel's history.
    let discord = FakeDiscord::start().await;
    let bot = RunningBot::start(config_with(&scratch, &ollama, &discord, &format!("gm_channel_ids = [{GM_CHANNEL}]")));
    wait_for_guild_commands(&discord).await;
    let gm_question = format!("¿Qué planea {CANARY}?");
    let token = ask(&discord, &gm_question);
    let answer = discord.wait_for("the GM's answer", is_final_answer_for(&token)).await;
    assert!(embed_text(&answer.body).replace(&gm_question, "").contains("traicionará"), "{}", answer.body);
    bot.stop().await;

    // The same channel, now a player channel: its history holds no GM turn for a player.
    let discord = FakeDiscord::start().await;
    let bot = RunningBot::start(config(&scratch, &ollama, &discord));
    wait_for_guild_commands(&discord).await;
    let asked_before = ollama.chat_requests("/api/chat").len();
    let followup = "¿Y qué más pasó?";
    let token = ask(&discord, followup);
    let answer = discord.wait_for("the player's answer", is_final_answer_for(&token)).await;
    assert!(!answer.body.to_string().contains(CANARY), "{}", answer.body);
    let prompts = ollama.chat_requests("/api/chat");
    assert!(prompts.len() > asked_before, "the player's question was asked");
    for prompt in &prompts[asked_before..] {
        let body = prompt.body.to_string();
        assert!(!body.contains(CANARY) && !body.contains("traicionará"), "a GM turn reached a player's prompt: {body}");
    }
    bot.stop().await;
}

/// A question whose interaction token is about to expire (it waited ~14½
/// minutes) is answered with an ordinary channel message, with the bot's token, and its
/// thread opens on that message; the stand-in refuses the webhook once the token expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_outlives_its_interaction_token() {
    let table = Table::start("").await;
    let (ollama, discord) = (&table.ollama, &table.discord);

    ollama.enqueue_reply("El archiduque Ardo huyó al norte tras la feria [Sesión 1].");
    let age = std::time::Duration::from_secs(14 * 60 + 30);
    let token = discord.slash_command_aged(
        age,
        PLAYER,
        text_channel(CHANNEL),
        "oraculo",
        json!([{ "name": "pregunta", "type": 3, "value": FIRST_QUESTION }]),
    );
    discord.wait_for("the deferral", is_callback_for(&token)).await;
    let answer = discord.wait_for("the answer as a channel message", is_final_message_in(CHANNEL)).await;
    assert!(embed_text(&answer.body).contains("huyó al norte"), "{}", answer.body);
    assert_eq!(field_names(&answer.body), ANSWER_SOURCES);
    discord.wait_for("the thread on the channel message", |r| r.method == "POST" && r.path.ends_with("/threads")).await;
    let through_webhook: Vec<Recorded> =
        discord.requests().into_iter().filter(|r| r.path.starts_with(&format!("/webhooks/{APP_ID}/{token}"))).collect();
    assert!(through_webhook.is_empty(), "nothing through a token about to expire: {through_webhook:?}");

    table.bot.stop().await;
}

/// Without `proxy_url` the bot runs as a user's bot does, with serenity's own
/// rate limiter, here against the stand-in answering as `https://discord.com` over TLS: the
/// commands register, an answer streams and lands, and an edit refused with a 429 (its
/// `Retry-After` and `X-RateLimit-*` headers) is waited out and sent again by the limiter,
/// never reaching the bot as an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serenity_s_own_rate_limiter_runs_against_discord_over_tls() {
    let table = Table::start_reaching("", Reach::DiscordCom).await;
    let (ollama, discord) = (&table.ollama, &table.discord);
    let registered = discord
        .requests()
        .into_iter()
        .find(|r| r.method == "PUT" && r.path.ends_with("/commands"))
        .expect("the commands were registered");
    assert_eq!(registered.header("host"), Some("discord.com"), "reached as discord.com, over TLS");
    assert_eq!(registered.header("authorization"), Some(format!("Bot {TOKEN}").as_str()));

    // The first edit of the answer's message is refused once, for 0.6 s.
    discord.limit_next_edit(0.6);
    ollama.enqueue_reply("El archiduque Ardo huyó al norte tras la feria [Sesión 1].");
    let token = ask_first_question(discord);
    let answer = discord.wait_for("the final answer", is_final_answer_for(&token)).await;
    assert!(embed_text(&answer.body).contains("huyó al norte"), "{}", answer.body);
    assert_eq!(field_names(&answer.body), ANSWER_SOURCES);

    // serenity waited out the Retry-After and sent the same edit again: one 429, no error.
    let edits: Vec<(Recorded, std::time::Instant)> = discord
        .requests_with_arrivals()
        .into_iter()
        .filter(|(request, _)| is_webhook_for(&token, "PATCH")(request))
        .collect();
    assert!(edits.len() >= 2, "{edits:?}");
    let ((refused, refused_at), (retried, retried_at)) = (&edits[0], &edits[1]);
    assert_eq!(refused.body, retried.body, "the refused edit, sent again");
    let waited = retried_at.duration_since(*refused_at);
    assert!(waited >= std::time::Duration::from_millis(550), "retried after {waited:?}, before its Retry-After");
    let refusals: Vec<String> = discord.violations().into_iter().filter(|v| v.contains("429")).collect();
    assert_eq!(refusals.len(), 1, "{refusals:?}");

    table.bot.stop().await;
}

/// `@Oráculo <question>` in a channel is a question, answered as a reply in
/// the channel's conversation; replying to one of the bot's answers continues it; a bare
/// mention gets a short help; a reply to a bot message that is not an answer is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mentions_and_replies_ask_and_continue() {
    const ANSWER_COLOUR: u32 = 0x7b5ea7;
    let table = Table::start("").await;
    let (ollama, discord) = (&table.ollama, &table.discord);
    // 1. A mention with a question.
    ollama.enqueue_reply("El archiduque huyó al norte [Sesión 1].");
    let asked = discord.message_create_with(PLAYER, CHANNEL, &format!("<@{BOT_ID}> {FIRST_QUESTION}"), &[BOT_ID], None);
    let first = discord
        .wait_for("the reply to the mention", |r| {
            r.method == "POST" && r.body["message_reference"]["message_id"] == asked.to_string()
        })
        .await;
    assert_eq!(first.path, format!("/channels/{CHANNEL}/messages"));
    let answer = discord.wait_for("the mention's answer", final_saying("huyó al norte")).await;
    assert_eq!(field_names(&answer.body), ANSWER_SOURCES);
    let prompt = ollama.chat_requests("/api/chat").last().unwrap().body["messages"].to_string();
    assert!(
        prompt.contains(FIRST_QUESTION) && !prompt.contains(&BOT_ID.to_string()),
        "the mention is not the question: {prompt}"
    );

    // 2. A reply to a bot message that is not an answer (a notice): ignored.
    let notice = discord.bot_message(CHANNEL, "⏳ En cola", 0);
    let ignored = discord.message_create_with(PLAYER, CHANNEL, "¿y eso?", &[], Some(notice));
    // 3. A reply to an answer continues the channel's conversation.
    ollama.enqueue_reply("Su barco se hundió frente al faro [Sesión 2].");
    let answered = discord.bot_message(CHANNEL, "El archiduque huyó al norte [Sesión 1].", ANSWER_COLOUR);
    let followup = discord.message_create_with(PLAYER, CHANNEL, "¿Y después?", &[], Some(answered));
    discord
        .wait_for("the reply answers the reply", |r| {
            r.method == "POST" && r.body["message_reference"]["message_id"] == followup.to_string()
        })
        .await;
    let answer = discord.wait_for("the reply's answer", final_saying("se hundió")).await;
    // The note it cites, then the one of a sentence shown first that it did not say (a
    // follow-up of «¿Qué pasó con el archiduque?» is read as that story's question).
    assert_eq!(field_names(&answer.body), ["Sesión 2", "Sesión 1"]);
    let prompt = ollama.chat_requests("/api/chat").last().unwrap().body["messages"].to_string();
    assert!(prompt.contains(FIRST_QUESTION), "the conversation's history goes with it: {prompt}");

    // 4. A bare mention: a short help.
    let bare = discord.message_create_with(PLAYER, CHANNEL, &format!("<@{BOT_ID}>"), &[BOT_ID], None);
    let help = discord
        .wait_for("the help", |r| r.method == "POST" && r.body["message_reference"]["message_id"] == bare.to_string())
        .await;
    assert!(help.body["content"].as_str().unwrap_or("").contains("/oraculo"), "{}", help.body);
    let answered_ignored: Vec<Recorded> = discord
        .requests()
        .into_iter()
        .filter(|r| r.body["message_reference"]["message_id"] == ignored.to_string())
        .collect();
    assert!(answered_ignored.is_empty(), "a reply to a notice is not a question: {answered_ignored:?}");
    assert_eq!(ollama.chat_requests("/api/chat").len(), 2, "two questions, two answers");

    // 5. The model's stream cut mid-answer (its server killed): the notes' own sentences are
    //    stay, saying why, and the exchange does not join the conversation.
    ollama.enqueue_reply("Una tormenta hundió el barco del archiduque frente al faro [Sesión 2].");
    ollama.enqueue(Fault::Delay(std::time::Duration::ZERO)); // the question's embedding
    ollama.enqueue(Fault::CutMidToken);
    let cut_question = "¿Qué hundió la tormenta?";
    discord.message_create_with(PLAYER, CHANNEL, &format!("<@{BOT_ID}> {cut_question}"), &[BOT_ID], None);
    let kept = discord.wait_for("the notes' own sentences", final_saying("Esto es lo que dicen las notas")).await;
    assert!(kept.body.to_string().contains("el modelo no ha podido responder"), "{}", kept.body);
    ollama.enqueue_reply("Nada más consta [Sesión 1].");
    let answered = discord.bot_message(CHANNEL, "El archiduque huyó al norte [Sesión 1].", ANSWER_COLOUR);
    discord.message_create_with(PLAYER, CHANNEL, "¿Algo más?", &[], Some(answered));
    discord.wait_for("the next answer", final_saying("Nada más consta")).await;
    let prompt = ollama.chat_requests("/api/chat").last().unwrap().body["messages"].to_string();
    assert!(
        prompt.contains(FIRST_QUESTION) && !prompt.contains(cut_question),
        "the history holds the answered turns only: {prompt}"
    );

    table.bot.stop().await;
}

/// The burst, through the stricter stand-in: 20 questions from 5 users in 2 channels at
/// once, one answered at a time, a quarter of them asked 14½ minutes ago (their tokens about
/// to expire). Every question gets exactly its own answer, in its own channel; no body breaks
/// a Discord limit; queue notices follow the queue. Prints the edits per answer and the time
/// to the first visible text (a measurement for the closing note, not a timed assertion).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_twenty_questions_loses_none() {
    oraculo::logging::init();
    let scratch = Scratch::new(&[("Crónica.md", CRONICA)]);
    let ollama = FakeOllama::start(&[EMBED_MODEL, CHAT_MODEL]).await;
    // Each answer names the question it answers (the marker in the last user message).
    let marker = regex::Regex::new(r"Q\d+-U\d+").unwrap();
    ollama.reply_by(move |messages| {
        let last = messages.as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or("");
        let asked = marker.find_iter(last).last().map(|m| m.as_str().to_string()).unwrap_or_default();
        format!("{asked}: el archiduque Ardo huyó al norte tras la feria [Sesión 1].")
    });
    let embedder = ollama_embedder(&ollama, EMBED_MODEL).await;
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), &embedder).await.unwrap();
    let discord = FakeDiscord::start().await;
    let extra = "questions_per_minute = 0\nconcurrency = 1";
    let bot = RunningBot::start(config_with(&scratch, &ollama, &discord, extra));
    wait_for_guild_commands(&discord).await;

    let started = std::time::Instant::now();
    let mut asked: Vec<(String, String, u64)> = Vec::new();
    for n in 0..20u64 {
        let user = PLAYER + n % 5;
        let channel = CHANNEL + n % 2;
        let mark = format!("Q{n}-U{}", n % 5);
        let options =
            json!([{ "name": "pregunta", "type": 3, "value": format!("¿Qué pasó con el archiduque? ({mark})") }]);
        let token = if n % 4 == 3 {
            discord.slash_command_aged(
                std::time::Duration::from_secs(14 * 60 + 30),
                user,
                text_channel(channel),
                "oraculo",
                options,
            )
        } else {
            discord.slash_command(user, &[], text_channel(channel), "oraculo", options)
        };
        asked.push((token, mark, channel));
    }
    let mut first_text_ms = Vec::new();
    for (token, mark, channel) in &asked {
        let final_answer = discord
            .wait_for("every answer", |r| {
                let via_token = r.path.split('/').any(|segment| segment == token);
                let via_channel = r.path.starts_with(&format!("/channels/{channel}/messages"));
                (via_token || via_channel) && !is_preview(&r.body) && embed_text(&r.body).contains(mark.as_str())
            })
            .await;
        let text = embed_text(&final_answer.body);
        let others: Vec<&str> = asked
            .iter()
            .map(|(_, other, _)| other.as_str())
            .filter(|other| other != mark && text.contains(&format!("{other}:")))
            .collect();
        assert!(others.is_empty(), "{mark} got another's answer {others:?}: {text}");
        assert_eq!(field_names(&final_answer.body), ANSWER_SOURCES, "{mark}");
        first_text_ms.push(started.elapsed().as_millis());
    }
    let requests = discord.requests();
    let delivered_in_wrong_channel: Vec<String> = requests
        .iter()
        .filter(|r| r.path.starts_with("/channels/") && r.message_body().is_some())
        .filter_map(|r| {
            let channel: u64 = r.path.split('/').nth(2)?.parse().ok()?;
            let text = embed_text(&r.body);
            asked
                .iter()
                .find(|(_, mark, asked_in)| text.contains(&format!("{mark}:")) && *asked_in != channel)
                .map(|(_, mark, _)| mark.clone())
        })
        .collect();
    assert!(delivered_in_wrong_channel.is_empty(), "answers in the wrong channel: {delivered_in_wrong_channel:?}");
    let limits: Vec<String> = discord.violations().into_iter().filter(|v| !v.contains("429")).collect();
    assert!(limits.is_empty(), "bodies over Discord's limits: {limits:?}");
    let queue_edits = requests.iter().filter(|r| r.method == "PATCH" && r.body.to_string().contains("⏳")).count();
    assert!(queue_edits > 0, "queue notices follow the queue");
    let edits = requests.iter().filter(|r| r.method == "PATCH" && r.message_body().is_some()).count();
    let rate_limited = discord.violations().iter().filter(|v| v.contains("429")).count();
    println!(
        "burst: 20 answers in {:.1} s; message edits {edits} ({:.1} per answer, {queue_edits} of them queue positions); \
         429s {rate_limited}; last answer complete after {} ms",
        started.elapsed().as_secs_f64(),
        edits as f64 / 20.0,
        first_text_ms.last().copied().unwrap_or_default()
    );

    bot.stop().await;
}

/// `[[campaigns]]`, two tables in one server, each in its own channel with
/// its own notes and DM; a channel of no campaign gets a clear ephemeral message; `/reingest`
/// reindexes the campaign of the place it is used in, and only that campaign's DM may run it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bot_serves_several_campaigns_each_in_its_channels() {
    const CHANNEL_B: u64 = 700_000_000_000_000_200;
    const CHANNEL_NONE: u64 = 700_000_000_000_000_300;
    const DM_B: u64 = 700_000_000_000_000_009;
    oraculo::logging::init();
    let galerna = Scratch::new(&[("Crónica.md", CRONICA)]);
    let dragon = Scratch::new(&[
        ("Sesiones/Sesión 1.md", "# Sesión 1\nEl dragón Vorn duerme bajo la montaña de ceniza.\n"),
        ("Sesiones/Sesión 2.md", "# Sesión 2\nLos enanos sellan la puerta de Vorn con runas.\n"),
    ]);
    let ollama = FakeOllama::start(&[EMBED_MODEL, CHAT_MODEL]).await;
    let embedder = ollama_embedder(&ollama, EMBED_MODEL).await;
    // Both indexes in one data dir, as the bot finds them.
    let data_dir = galerna.data.path();
    ingest_dir(&galerna.index_dir(), galerna.campaign.path(), &campaign_config(&[]), &embedder).await.unwrap();
    let dragon_index = oraculo::index::campaign_index_dir(data_dir, dragon.campaign.path());
    ingest_dir(&dragon_index, dragon.campaign.path(), &campaign_config(&[]), &embedder).await.unwrap();

    let discord = FakeDiscord::start().await;
    let campaigns = format!(
        "[[campaigns]]\nname = \"Galerna\"\ndir = \"{}\"\nchannel_ids = [{CHANNEL}]\n\n\
         [[campaigns]]\nname = \"Vorn\"\ndir = \"{}\"\ndm_user_ids = [{DM_B}]\nchannel_ids = [{CHANNEL_B}]\n",
        galerna.campaign.path().display(),
        dragon.campaign.path().display(),
    );
    let config = parse_config(&config_toml(data_dir, &campaigns, &ollama, &discord, ""));
    assert_eq!(config.campaigns.len(), 2);
    let bot = RunningBot::start(config);
    wait_for_guild_commands(&discord).await;
    let ask = |channel: u64, question: &str| {
        discord.slash_command(
            PLAYER,
            &[],
            text_channel(channel),
            "oraculo",
            json!([{ "name": "pregunta", "type": 3, "value": question }]),
        )
    };

    // 1. Each channel answers from its own campaign's notes: the source shown is that one's.
    ollama.enqueue_reply("Huyó al norte [Sesión 1].");
    let token = ask(CHANNEL, FIRST_QUESTION);
    let answer = discord.wait_for("Galerna's answer", is_final_answer_for(&token)).await;
    let text = embed_text(&answer.body);
    assert!(text.contains("tras la feria de las redes") && !text.contains("Vorn"), "{text}");
    ollama.enqueue_reply("Duerme bajo la montaña [Sesión 1].");
    let token = ask(CHANNEL_B, "¿Dónde duerme el dragón?");
    let answer = discord.wait_for("Vorn's answer", is_final_answer_for(&token)).await;
    let text = embed_text(&answer.body);
    assert!(text.contains("montaña de ceniza") && !text.contains("archiduque"), "{text}");

    // 2. A channel that belongs to no campaign: told so, ephemerally; no model is asked.
    let asked_before = ollama.chat_requests("/api/chat").len();
    let token = ask(CHANNEL_NONE, FIRST_QUESTION);
    let refused = discord.wait_for("the no-campaign notice", is_callback_for(&token)).await;
    assert_eq!(refused.body["data"]["flags"], 64, "ephemeral: {}", refused.body);
    let notice = refused.body["data"]["content"].as_str().unwrap_or_default();
    assert!(notice.contains("no pertenece a ninguna campaña"), "{}", refused.body);
    assert_eq!(ollama.chat_requests("/api/chat").len(), asked_before);

    // 3. /reingest in Vorn's channel: Galerna's DM is not Vorn's DM; Vorn's DM reindexes Vorn
    // (two files), not Galerna (one).
    let refused_token = discord.slash_command(DM, &[], text_channel(CHANNEL_B), "reingest", json!([]));
    let refused = discord.wait_for("the reingest refusal", is_callback_for(&refused_token)).await;
    assert!(refused.body["data"]["content"].as_str().unwrap_or_default().contains("Solo el DM"), "{}", refused.body);
    let reingest_token = discord.slash_command(DM_B, &[], text_channel(CHANNEL_B), "reingest", json!([]));
    let summary = discord
        .wait_for("Vorn's reingest summary", |r| {
            is_webhook_for(&reingest_token, "PATCH")(r) && r.body["content"].as_str().is_some_and(|c| c.contains('✅'))
        })
        .await;
    assert!(summary.body["content"].as_str().unwrap().contains("2 archivos"), "{}", summary.body);

    bot.stop().await;
}

/// A question asked by a message leaves the queue when its author deletes
/// that message: its queue notice is deleted, the model never sees it, and the questions
/// behind it move up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_question_leaves_the_queue() {
    let table = Table::start("").await;
    let (ollama, discord) = (&table.ollama, &table.discord);
    let replies_to = |asked: u64| {
        move |r: &Recorded| r.method == "POST" && r.body["message_reference"]["message_id"] == asked.to_string()
    };

    // 1. A slow first question holds the only slot (concurrency 1).
    ollama.enqueue_reply("El archiduque huyó al norte [Sesión 1].");
    ollama.enqueue(Fault::Delay(std::time::Duration::ZERO)); // its embedding
    ollama.enqueue(Fault::Delay(std::time::Duration::from_secs(3))); // its answer
    discord.message_create_with(PLAYER, CHANNEL, &format!("<@{BOT_ID}> {FIRST_QUESTION}"), &[BOT_ID], None);
    discord.wait_for("the first question started", |r| r.path == format!("/channels/{CHANNEL}/typing")).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;

    // 2. A second one waits, told its position; its author deletes it.
    let second = discord.message_create_with(PLAYER, CHANNEL, &format!("<@{BOT_ID}> ¿Y la tormenta?"), &[BOT_ID], None);
    let notice = discord.wait_for("the queue notice", replies_to(second)).await;
    assert!(notice.body.to_string().contains("En cola (posición 1)"), "{}", notice.body);
    discord.dispatch(
        "MESSAGE_DELETE",
        json!({ "id": second.to_string(), "channel_id": CHANNEL.to_string(), "guild_id": GUILD_ID.to_string() }),
    );
    discord
        .wait_for("the notice deleted", |r| {
            r.method == "DELETE" && r.path.starts_with(&format!("/channels/{CHANNEL}/messages/"))
        })
        .await;
    discord.wait_for("the first answer", final_saying("huyó al norte")).await;

    // 3. The queue moved on: a third question is answered at once, and the withdrawn one
    // never reached the model.
    ollama.enqueue_reply("Una tormenta hundió su barco [Sesión 2].");
    let third =
        discord.message_create_with(PLAYER, CHANNEL, &format!("<@{BOT_ID}> ¿Qué hundió el barco?"), &[BOT_ID], None);
    discord.wait_for("the third answer", final_saying("hundió su barco")).await;
    let prompts: Vec<String> =
        ollama.chat_requests("/api/chat").iter().map(|r| r.body["messages"].to_string()).collect();
    assert_eq!(prompts.len(), 2, "two questions answered, the withdrawn one never asked");
    assert!(prompts.iter().all(|prompt| !prompt.contains("¿Y la tormenta?")), "{prompts:?}");
    let third_replies: Vec<Recorded> = discord.requests().into_iter().filter(|r| replies_to(third)(r)).collect();
    assert!(third_replies.iter().all(|r| !r.body.to_string().contains("En cola")), "{third_replies:?}");

    table.bot.stop().await;
}

/// What a player sees, on the sample campaign: the notes' own sentences at once, then the
/// model's answer (the 1.5B model's words from a real run, scripted here) checked, with its
/// sources and buttons. The two payloads are written to `$CARGO_TARGET_TMPDIR/readme-picture/`,
/// which `scripts/render-discord-message.py` draws as the README's picture.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_player_sees_on_the_sample_campaign() {
    oraculo::logging::init();
    let scratch = Scratch::new(&[]);
    oraculo::sample::materialize(scratch.campaign.path()).unwrap();
    let ollama = FakeOllama::start(&[EMBED_MODEL, CHAT_MODEL]).await;
    let embedder = ollama_embedder(&ollama, EMBED_MODEL).await;
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), &embedder).await.unwrap();
    let discord = FakeDiscord::start().await;
    let bot = RunningBot::start(config(&scratch, &ollama, &discord));
    wait_for_guild_commands(&discord).await;

    ollama.enqueue_reply("El archiduque Leandro de Valdemora desapareció sin signos de lucha [Sesión 9].");
    ollama.enqueue(Fault::Delay(std::time::Duration::ZERO));
    ollama.enqueue(Fault::Slow(std::time::Duration::from_millis(300)));
    let token = ask_first_question(&discord);
    let instant = discord
        .wait_for("the notes' own sentences", |r| {
            is_webhook_for(&token, "PATCH")(r) && embed_text(&r.body).contains("Esto es lo que dicen las notas")
        })
        .await;
    let answer = discord.wait_for("the answer", is_final_answer_for(&token)).await;
    let instant_text = embed_text(&instant.body);
    assert!(instant_text.contains("[Sesión 9]"), "the sentence that answers, cited: {instant_text}");
    let answer_text = embed_text(&answer.body);
    assert!(answer_text.contains("sin signos de lucha [Sesión 9]"), "{answer_text}");
    assert!(field_names(&answer.body).contains(&"Sesión 9".to_string()), "{}", answer.body);
    let pictured = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("readme-picture");
    std::fs::create_dir_all(&pictured).unwrap();
    std::fs::write(pictured.join("1-instant.json"), serde_json::to_string_pretty(&instant.body).unwrap()).unwrap();
    std::fs::write(pictured.join("2-answer.json"), serde_json::to_string_pretty(&answer.body).unwrap()).unwrap();
    bot.stop().await;
}

/// One way to answer: `oraculo ask` and `/oraculo` call the same entry, so the same
/// question over the same notes and the same model's words settles into the same answer: the
/// same text (the model's, with the notes' sentences it did not say under it) and the same
/// sources.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_the_bot_settle_the_same_answer() {
    let (scratch, ollama) = indexed_campaign(&[("Crónica.md", CRONICA), PLAN], &["Secretos"]).await;
    let discord = FakeDiscord::start().await;
    let campaign =
        format!("[campaign]\ndir = \"{}\"\nsecret_paths = [\"Secretos\"]\n", scratch.campaign.path().display());
    let toml = config_toml(scratch.data.path(), &campaign, &ollama, &discord, "");
    let config_path = scratch.data.path().join("same-answer.toml");
    std::fs::write(&config_path, &toml).unwrap();
    const SAID: &str = "El archiduque Ardo huyó al norte tras la feria [Sesión 1].";

    ollama.enqueue_reply(SAID);
    let mut ask = std::process::Command::new(env!("CARGO_BIN_EXE_oraculo"));
    ask.args(["ask", "--json", "--config"]).arg(&config_path).arg(FIRST_QUESTION);
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("ORACULO_")) {
        ask.env_remove(name);
    }
    let output = tokio::task::spawn_blocking(move || ask.output().unwrap()).await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let cli_text = json["settled"]["text"].as_str().expect("the settled answer").trim().to_string();
    assert!(cli_text.starts_with(SAID), "the model's words first: {cli_text}");
    // The sources the bot lists are the valid citations of what stays.
    let cli_sources: Vec<String> = json["citations"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["valid"] == true)
        .filter_map(|c| c["label"].as_str().map(str::to_string))
        .collect();

    ollama.enqueue_reply(SAID);
    let bot = RunningBot::start(parse_config(&toml));
    wait_for_guild_commands(&discord).await;
    let token = ask_first_question(&discord);
    let answer = discord.wait_for("the answer's final layout", is_final_answer_for(&token)).await;
    let bot_text = answer.body["embeds"][0]["description"].as_str().unwrap_or_default().trim().to_string();
    assert_eq!(bot_text, cli_text, "the bot posts what the CLI prints");
    let bot_sources = field_names(&answer.body);
    for source in &bot_sources {
        assert!(cli_sources.contains(source) || cli_text.contains(&format!("[{source}]")), "{source}: {cli_sources:?}");
    }
    assert!(bot_sources.contains(&"Sesión 1".to_string()), "{bot_sources:?}");
    bot.stop().await;
}
