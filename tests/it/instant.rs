//! The instant answer: the notes' own sentences, cited, shown in the answer's message as soon
//! as the search is done, then replaced by the model's answer; kept, with why, when the model
//! fails, abstains or runs out of time; shown at once to a question waiting in the queue;
//! absent with `chat.instant_answer = false`; and recorded by `oraculo ask --json`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use oraculo::llm::chat::ChatModel;
use oraculo::llm::chat::ollama::OllamaChat;
use oraculo::oracle::{AnswerSettings, AskRequest, InstantKept, Oracle, settle};
use oraculo::retrieve::Audience;
use serde_json::{Value, json};

use crate::answer::{chat_config, port_campaign};
use crate::discord::{
    CHANNEL, PLAYER, Reach, Table, ask_first_question, embed_text, is_final_answer_for,
    is_webhook_for,
};
use crate::fake_discord::text_channel;
use crate::fake_ollama::{FakeOllama, Fault};
use crate::harness::{Scratch, campaign_config, ingest_dir, ollama_embedder};

/// The footer line under the notes' sentences while the model writes.
const WRITING_LINE: &str = "El modelo está escribiendo su respuesta";

/// The interaction's messages with embeds, in the order they reached Discord, with when.
fn answer_bodies(table: &Table, token: &str) -> Vec<(Value, Instant)> {
    table
        .discord
        .requests_with_arrivals()
        .into_iter()
        .filter(|(r, _)| is_webhook_for(token, "PATCH")(r) || is_webhook_for(token, "POST")(r))
        .filter(|(r, _)| r.body["embeds"].as_array().is_some_and(|embeds| !embeds.is_empty()))
        .map(|(r, at)| (r.body, at))
        .collect()
}

fn footers(body: &Value) -> String {
    body["embeds"].as_array().into_iter().flatten().filter_map(|e| e["footer"]["text"].as_str()).collect::<Vec<_>>().join("\n")
}

/// The notes' own sentences, cited, as the extractive answer introduces them.
fn is_cited_notes(body: &Value) -> bool {
    let text = embed_text(body);
    text.contains("Esto es lo que dicen las notas") && text.contains("[Sesión")
}

/// `/oraculo` asked by the player in the usual channel; its token.
fn ask(table: &Table, question: &str) -> String {
    table.discord.slash_command(
        PLAYER,
        &[],
        text_channel(CHANNEL),
        "oraculo",
        json!([{ "name": "pregunta", "type": 3, "value": question }]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notes_sentences_come_first_and_the_model_s_answer_replaces_them() {
    let table = Table::start("").await;
    table.ollama.enqueue_reply("El archiduque huyó al norte con la corona robada [Sesión 1].");
    table.ollama.enqueue(Fault::Delay(Duration::ZERO)); // the question's embedding
    table.ollama.enqueue(Fault::Delay(Duration::from_secs(2))); // the model takes its time
    let token = ask_first_question(&table.discord);
    let done = table.discord.wait_for("the final answer", is_final_answer_for(&token)).await;

    let bodies = answer_bodies(&table, &token);
    let (first, _) = bodies.first().expect("the answer's message was shown");
    assert!(is_cited_notes(first), "the first text is the notes' own, cited: {first}");
    assert!(footers(first).contains("📜") && footers(first).contains(WRITING_LINE), "{first}");
    let final_text = embed_text(&done.body);
    assert!(final_text.contains("con la corona robada [Sesión 1]"), "the model's answer replaced them: {final_text}");
    assert!(!final_text.contains("Esto es lo que dicen las notas"), "{final_text}");
    assert!(!footers(&done.body).contains("📜"), "{}", done.body);
    assert!(done.body["components"].as_array().is_some_and(|rows| !rows.is_empty()), "source buttons: {}", done.body);
    table.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notes_sentences_stay_with_why_when_the_model_fails_or_abstains() {
    let table = Table::start("").await;

    // The model fails: its server answers 500.
    table.ollama.enqueue(Fault::Delay(Duration::ZERO));
    table.ollama.enqueue(Fault::Status(500, "out of memory".into()));
    let failed = ask_first_question(&table.discord);
    let done = table.discord.wait_for("the answer after a failure", is_final_answer_for(&failed)).await;
    assert!(is_cited_notes(&done.body), "{}", done.body);
    assert!(footers(&done.body).contains("el modelo no ha podido responder"), "{}", footers(&done.body));
    assert!(done.body["components"].as_array().is_some_and(|rows| !rows.is_empty()), "{}", done.body);

    // The model abstains: an answer that cites no note.
    table.ollama.enqueue_reply("No lo sé.");
    let abstained = ask(&table, "¿Qué hundió el barco del archiduque?");
    let done = table.discord.wait_for("the answer after an abstention", is_final_answer_for(&abstained)).await;
    assert!(is_cited_notes(&done.body), "{}", done.body);
    assert!(!embed_text(&done.body).contains("No lo sé"), "{}", done.body);
    assert!(footers(&done.body).contains("el modelo no encontró en ellas la respuesta"), "{}", footers(&done.body));
    table.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_question_shows_its_notes_while_another_answer_is_written() {
    let table = Table::start("").await;
    table.ollama.enqueue_reply("El archiduque huyó al norte [Sesión 1].");
    table.ollama.enqueue_reply("Una tormenta hundió su barco [Sesión 2].");
    table.ollama.enqueue(Fault::Delay(Duration::ZERO)); // the first question's embedding
    table.ollama.enqueue(Fault::Delay(Duration::from_secs(4))); // its answer holds the only slot
    let first = ask_first_question(&table.discord);
    table.discord.wait_for("the first question's notes", |r| is_webhook_for(&first, "PATCH")(r) && is_cited_notes(&r.body)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let second = ask(&table, "¿Qué hundió el barco frente al faro?");
    let waiting = table
        .discord
        .wait_for("the second question's notes while it waits", |r| {
            is_webhook_for(&second, "PATCH")(r) && is_cited_notes(&r.body)
        })
        .await;
    assert!(footers(&waiting.body).contains("⏳ En cola (posición 1)"), "{}", waiting.body);
    let first_done = table.discord.wait_for("the first answer", is_final_answer_for(&first)).await;
    let second_done = table.discord.wait_for("the second answer", is_final_answer_for(&second)).await;
    assert!(embed_text(&first_done.body).contains("huyó al norte [Sesión 1]"), "{}", first_done.body);
    assert!(embed_text(&second_done.body).contains("hundió su barco [Sesión 2]"), "{}", second_done.body);

    let arrival = |token: &str, what: &dyn Fn(&Value) -> bool| {
        answer_bodies(&table, token).into_iter().find(|(body, _)| what(body)).map(|(_, at)| at).unwrap()
    };
    let second_notes_at = arrival(&second, &is_cited_notes);
    let first_final_at = arrival(&first, &|body| embed_text(body).contains("huyó al norte [Sesión 1]"));
    assert!(second_notes_at < first_final_at, "the queued question's notes came while the first was written");
    table.bot.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_instant_answer_off_only_the_model_s_answer_is_shown() {
    let table = Table::start_adjusted("", Reach::Proxy, |config| config.answer.instant = false).await;
    table.ollama.enqueue_reply("El archiduque huyó al norte con la corona robada [Sesión 1].");
    let token = ask_first_question(&table.discord);
    let done = table.discord.wait_for("the final answer", is_final_answer_for(&token)).await;
    assert!(embed_text(&done.body).contains("con la corona robada [Sesión 1]"), "{}", done.body);
    let bodies: Vec<Value> = answer_bodies(&table, &token).into_iter().map(|(body, _)| body).collect();
    assert!(bodies.iter().all(|body| !is_cited_notes(body) && !footers(body).contains("📜")), "{bodies:?}");
    table.bot.stop().await;
}

/// The oracle alone: a model past its deadline leaves the instant answer, marked as such.
#[tokio::test]
async fn a_model_out_of_time_leaves_the_notes_sentences() {
    let scratch = port_campaign();
    let embeddings = FakeOllama::start(&["bge-m3"]).await;
    let embedder = Arc::new(ollama_embedder(&embeddings, "bge-m3").await);
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), embedder.as_ref()).await.unwrap();
    let slow = FakeOllama::start(&["qwen2.5:14b"]).await;
    let chat: Arc<dyn ChatModel> = Arc::new(OllamaChat::new(chat_config(slow.url(), Duration::from_secs(10))).unwrap());
    slow.enqueue(Fault::Delay(Duration::from_secs(6)));
    slow.enqueue_reply("Nunca llega [Sesión 7].");
    let settings = AnswerSettings { deadline: Duration::from_secs(1), ..AnswerSettings::new(256) };
    let oracle = Oracle::new(&scratch.index_dir(), embedder, chat, settings);
    let request = AskRequest { question: "¿Qué le pasó a Tomás en el puente?", history: &[], audience: Audience::Player };
    let shown = std::sync::Mutex::new(None);
    let on_instant = |instant: &oraculo::oracle::Answer| *shown.lock().unwrap() = Some(instant.text.clone());
    let (instant, model) = oracle.ask_instant_first(&request, &|_| {}, &on_instant, None).await.unwrap();
    let instant = instant.expect("the notes hold sentences on Tomás");
    assert_eq!(shown.lock().unwrap().as_deref(), Some(instant.text.as_str()), "shown before the model answered");
    assert!(instant.citations.iter().any(|c| c.valid), "{}", instant.text);
    assert!(model.out_of_time, "{:?}", model.fallback);
    let settled = settle(Some(instant.clone()), model);
    assert_eq!(settled.instant_kept, Some(InstantKept::ModelOutOfTime));
    assert_eq!(settled.answer.text, instant.text);
    assert!(!settled.joins_history(), "the notes' words are not an answer to follow up on");
}

#[tokio::test]
async fn ask_json_records_the_instant_answer_beside_the_model_s() {
    let scratch = Scratch::new(&[
        ("Sesiones/Sesion 1.md", "# Sesión 1\nLa Tejedora vende redes encantadas en el puerto.\n"),
        ("Sesiones/Sesion 2.md", "# Sesión 2\nUna tormenta hunde la barca de la Tejedora.\n"),
    ]);
    let fake = FakeOllama::start(&["bge-m3", "qwen2.5:14b"]).await;
    let oraculo = |args: &[&str]| crate::harness::oraculo_command(&scratch, &fake, args);
    let mut ingest = oraculo(&["ingest", "--no-annotate", "--json"]);
    let ingest = tokio::task::spawn_blocking(move || ingest.output().unwrap()).await.unwrap();
    assert!(ingest.status.success(), "{}", String::from_utf8_lossy(&ingest.stderr));
    fake.enqueue_reply("Vende redes encantadas [Sesión 1].");
    let mut ask = oraculo(&["ask", "--json", "¿Qué vende la Tejedora?"]);
    let output = tokio::task::spawn_blocking(move || ask.output().unwrap()).await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["text"], "Vende redes encantadas [Sesión 1].", "the model's answer, as before: {json}");
    assert!(json["citations"].as_array().is_some_and(|c| !c.is_empty()), "{json}");
    let instant = &json["instant"];
    assert_eq!(instant["mode"], "extractive", "{json}");
    assert!(instant["text"].as_str().is_some_and(|text| text.contains("redes encantadas")), "{json}");
    assert!(instant["citations"].as_array().is_some_and(|c| c.iter().any(|c| c["valid"] == true)), "{json}");
    assert_eq!(json["instant_kept"], Value::Null, "{json}");
}

/// p50 and p95 of `seconds` (nearest rank), for the measurement's report.
fn percentiles(seconds: &mut [f64]) -> (f64, f64) {
    seconds.sort_by(f64::total_cmp);
    let at = |p: f64| seconds[((p * seconds.len() as f64).ceil() as usize).clamp(1, seconds.len()) - 1];
    (at(0.50), at(0.95))
}

/// Seconds from `asked` to the first message of interaction `token` holding the notes' cited
/// sentences, and to its final layout.
async fn first_cited_and_final(table: &Table, token: &str, asked: Instant) -> (f64, f64) {
    table.discord.wait_for("the final answer", is_final_answer_for(token)).await;
    let bodies = answer_bodies(table, token);
    let first = bodies.iter().find(|(body, _)| embed_text(body).contains('[')).expect("cited text").1;
    let last = bodies.last().expect("the final layout").1;
    ((first - asked).as_secs_f64(), (last - asked).as_secs_f64())
}

/// The instant answer measured on the sample campaign: the embedded e5 embedder, the chat
/// model the Ollama stand-in (answers at once, or held 2 s to keep a question queued behind
/// it). Prints the key facts the instant answer holds against the extractive mode's, and the
/// seconds from the interaction to the first cited text, p50 and p95 over the bank's
/// answerable questions, alone and queued behind a running answer:
/// `cargo test --test it -- --ignored measure_the_instant_answer --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement over the sample bank: minutes"]
async fn measure_the_instant_answer_on_the_sample_campaign() {
    use oraculo::eval::score::AnswerScore;
    let scratch = Scratch::new(&[]);
    std::os::unix::fs::symlink(crate::harness::models_dir(), scratch.data.path().join("models")).unwrap();
    let campaign = oraculo::sample::materialize(&scratch.data.path().join("sample")).unwrap();
    let index_dir = oraculo::index::campaign_index_dir(scratch.data.path(), &campaign);
    let embedder: Arc<dyn oraculo::llm::Embedder> = Arc::new(crate::embedded::e5());
    ingest_dir(&index_dir, &campaign, &campaign_config(&[]), embedder.as_ref()).await.unwrap();
    let bank: Vec<_> = oraculo::eval::sample_bank()
        .unwrap()
        .into_iter()
        .filter(|q| q.kind != oraculo::eval::QuestionKind::Unanswerable && q.history.is_empty())
        .collect();

    // 1. Key facts: the instant answer against `--answer-mode extractive`, question by question.
    let fake = FakeOllama::start(&["qwen2.5:14b"]).await;
    let chat: Arc<dyn ChatModel> = Arc::new(OllamaChat::new(chat_config(fake.url(), Duration::from_secs(10))).unwrap());
    let oracle = Oracle::new(&index_dir, Arc::clone(&embedder), Arc::clone(&chat), AnswerSettings::new(256));
    let mut extractive = Oracle::new(&index_dir, Arc::clone(&embedder), chat, AnswerSettings::new(256));
    extractive.set_mode(oraculo::answer::AnswerMode::Extractive);
    let (mut facts, mut instant_found, mut extractive_found, mut same_text) = (0, 0, 0, 0);
    for question in bank.iter().filter(|q| !q.key_facts.is_empty()) {
        let request = AskRequest { question: &question.question, history: &[], audience: Audience::Player };
        let prepared = oracle.prepare_without_model(&request).await.unwrap();
        let instant = oracle.instant_answer(&prepared).map(|a| a.text).unwrap_or_default();
        let made = extractive.ask(&request, None).await.unwrap().text;
        facts += question.key_facts.len();
        instant_found += AnswerScore::new(question, &instant, vec![], vec![]).key_facts_found.len();
        extractive_found += AnswerScore::new(question, &made, vec![], vec![]).key_facts_found.len();
        same_text += usize::from(instant == made);
    }
    let n_scored = bank.iter().filter(|q| !q.key_facts.is_empty()).count();
    eprintln!(
        "key facts over {n_scored} answerable questions: instant {instant_found}/{facts}, extractive \
         {extractive_found}/{facts}; the same text for {same_text} of {n_scored}"
    );

    // 2. Through the Discord stand-in: alone, then queued behind a running answer.
    let discord = crate::fake_discord::FakeDiscord::start().await;
    let ollama = FakeOllama::start(&["fake-chat"]).await;
    ollama.reply_by(|_| "El archiduque huyó al norte [Sesión 1].".to_string());
    let campaign_section = format!("[campaign]\ndir = \"{}\"\n", campaign.display());
    let text =
        crate::discord::config_toml(scratch.data.path(), &campaign_section, &ollama, &discord, "questions_per_minute = 0")
            .replace("backend = \"ollama\"\nmodel = \"fake-embed\"\nbatch_size = 4\nwindow_words = 250", "backend = \"embedded\"");
    assert!(text.contains("backend = \"embedded\""), "{text}");
    let config = crate::discord::parse_config(&text);
    let table = Table::from_parts(scratch, ollama, discord, config).await;
    let (mut alone, mut alone_final, mut queued) = (Vec::new(), Vec::new(), Vec::new());
    for question in &bank {
        let asked = Instant::now();
        let token = ask(&table, &question.question);
        let (first, last) = first_cited_and_final(&table, &token, asked).await;
        alone.push(first);
        alone_final.push(last);
    }
    for question in &bank {
        table.ollama.enqueue(Fault::Delay(Duration::from_secs(2)));
        let running = ask(&table, FIRST_QUESTION_FOR_QUEUE);
        table.discord.wait_for("the running answer's notes", |r| is_webhook_for(&running, "PATCH")(r)).await;
        let asked = Instant::now();
        let token = ask(&table, &question.question);
        let (first, _) = first_cited_and_final(&table, &token, asked).await;
        queued.push(first);
    }
    let n = alone.len();
    let (a50, a95) = percentiles(&mut alone);
    let (f50, f95) = percentiles(&mut alone_final);
    let (q50, q95) = percentiles(&mut queued);
    eprintln!(
        "first cited text over {n} answerable questions: alone p50 {a50:.2} s p95 {a95:.2} s (final layout p50 \
         {f50:.2} s p95 {f95:.2} s, the stand-in model answering at once); queued behind a running answer p50 \
         {q50:.2} s p95 {q95:.2} s"
    );
    table.bot.stop().await;
}

/// The question that holds the model while the measured one waits.
const FIRST_QUESTION_FOR_QUEUE: &str = "¿Qué ofreció el archiduque al grupo?";
