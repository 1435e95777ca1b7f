//! The instant answer: the notes' own sentences, cited, shown in the answer's message as soon
//! as the search is done, then replaced by the model's answer; kept, with why, when the model
//! fails, abstains or runs out of time; shown at once to a question waiting in the queue;
//! absent with `chat.instant_answer = false`; and recorded by `oraculo ask --json`.

use std::time::Duration;

use oraculo::oracle::{AnswerEvent, AnswerOptions, AnswerSettings, AskRequest, InstantKept, Stage, no_events};
use oraculo::retrieve::Audience;
use serde_json::Value;

use crate::bot::{
    Reach, Table, answer_bodies, ask_first_question, ask_in_channel, embed_text, is_final_answer_for, is_webhook_for,
};
use crate::fake_ollama::{FakeOllama, Fault};
use crate::harness::{Ingested, Scratch, port_oracle_out_of_time};

/// The footer line under the notes' sentences while the model writes.
const WRITING_LINE: &str = "El modelo está escribiendo su respuesta";
/// Over the notes' sentences kept under the model's answer.
const NOTES_ALSO: &str = "Las notas dicen además:";

fn footers(body: &Value) -> String {
    body["embeds"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["footer"]["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The notes' own sentences, cited, as the extractive answer introduces them.
fn is_cited_notes(body: &Value) -> bool {
    let text = embed_text(body);
    text.contains("Esto es lo que dicen las notas") && text.contains("[Sesión")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notes_sentences_come_first_and_the_model_s_answer_replaces_them() {
    let table = Table::start("").await;
    table.ollama.enqueue_reply("El archiduque huyó al norte con la corona robada [Sesión 1].");
    table.ollama.enqueue(Fault::Delay(Duration::ZERO)); // the question's embedding
    table.ollama.enqueue(Fault::Delay(Duration::from_secs(2))); // the model takes its time
    let token = ask_first_question(&table.discord);
    let done = table.discord.wait_for("the final answer", is_final_answer_for(&token)).await;

    let bodies = answer_bodies(&table.discord, &token);
    let (first, _) = bodies.first().expect("the answer's message was shown");
    assert!(is_cited_notes(first), "the first text is the notes' own, cited: {first}");
    assert!(footers(first).contains("📜") && footers(first).contains(WRITING_LINE), "{first}");
    let final_text = embed_text(&done.body);
    assert!(final_text.contains("con la corona robada [Sesión 1]"), "the model's answer replaced them: {final_text}");
    assert!(!final_text.contains("Esto es lo que dicen las notas"), "{final_text}");
    // Under it, the notes' sentences it did not say: each one of those shown first.
    let (_, also) = final_text.split_once(NOTES_ALSO).expect("the notes' sentences kept under the answer");
    let kept: Vec<&str> = also.lines().filter(|line| line.starts_with("- «")).collect();
    assert!(!kept.is_empty(), "{final_text}");
    let first_text = embed_text(first);
    assert!(kept.iter().all(|line| first_text.contains(line)), "each was shown first: {kept:?} / {first_text}");
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
    let abstained = ask_in_channel(&table.discord, "¿Qué hundió el barco del archiduque?");
    let done = table.discord.wait_for("the answer after an abstention", is_final_answer_for(&abstained)).await;
    assert!(is_cited_notes(&done.body), "{}", done.body);
    assert!(!embed_text(&done.body).contains("No lo sé"), "{}", done.body);
    assert!(
        embed_text(&done.body).contains("Las notas no dicen la respuesta tal cual.\n\nEsto es lo que dicen"),
        "{}",
        done.body
    );
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
    table
        .discord
        .wait_for("the first question's notes", |r| is_webhook_for(&first, "PATCH")(r) && is_cited_notes(&r.body))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    let second = ask_in_channel(&table.discord, "¿Qué hundió el barco frente al faro?");
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
        answer_bodies(&table.discord, token).into_iter().find(|(body, _)| what(body)).map(|(_, at)| at).unwrap()
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
    let bodies: Vec<Value> = answer_bodies(&table.discord, &token).into_iter().map(|(body, _)| body).collect();
    assert!(bodies.iter().all(|body| !is_cited_notes(body) && !footers(body).contains("📜")), "{bodies:?}");
    table.bot.stop().await;
}

/// The oracle alone: a model past its deadline leaves the instant answer, marked as such.
#[tokio::test]
async fn a_model_out_of_time_leaves_the_notes_sentences() {
    let (_port, _slow, oracle) = port_oracle_out_of_time().await;
    let request =
        AskRequest { question: "¿Qué le pasó a Tomás en el puente?", history: &[], audience: Audience::Player };
    let shown = std::sync::Mutex::new(Vec::new());
    let on_event = |event: AnswerEvent<'_>| match event {
        AnswerEvent::Instant(instant) => shown.lock().unwrap().push(instant.map(|instant| instant.text.clone())),
        AnswerEvent::Stage(Stage::Writing { .. }) => shown.lock().unwrap().push(Some("writing".into())),
        _ => {}
    };
    let settled = oracle.answer(&request, AnswerOptions::new(&on_event)).await.unwrap();
    let instant = settled.instant.clone().expect("the notes hold sentences on Tomás");
    let shown = shown.into_inner().unwrap();
    assert_eq!(shown, [Some(instant.text.clone()), Some("writing".into())], "shown before the model answered");
    assert!(instant.citations.iter().any(|c| c.valid), "{}", instant.text);
    let model = settled.model.clone().expect("the model answered, late");
    assert!(model.out_of_time, "{:?}", model.fallback);
    assert_eq!(settled.instant_kept, Some(InstantKept::ModelOutOfTime));
    assert_eq!(settled.answer.text, instant.text);
    assert!(!settled.joins_history(), "the notes' words are not an answer to follow up on");
}

/// The oracle alone: the model's answer stays, and under it the instant answer's sentences
/// it did not say, cited; what it said again is not repeated, and only the model's own words
/// join the conversation.
#[tokio::test]
async fn the_notes_sentences_the_model_did_not_say_stay_under_its_answer() {
    let port = Ingested::port().await;
    let said = "Tomás cae en combate defendiendo el puente del puerto [Sesión 7].";
    port.fake.enqueue_reply(said);
    let oracle = port.oracle(port.ollama(), AnswerSettings::new(256));
    let request = AskRequest { question: "¿Qué le pasó a Tomás?", history: &[], audience: Audience::Player };
    let settled = oracle.answer(&request, AnswerOptions::new(&no_events)).await.unwrap();
    let (instant, model) = (settled.instant.clone(), settled.model.clone().unwrap());
    let instant = instant.expect("the notes hold sentences on Tomás");
    let quoted: Vec<&str> = instant.quoted.iter().map(|excerpt| excerpt.label.as_str()).collect();
    assert!(quoted.contains(&"Sesión 7") && quoted.contains(&"Sesión 8"), "{quoted:?}");
    assert_eq!(model.text, said);
    assert_eq!(settled.instant_kept, None);
    let added: Vec<&str> = settled.notes_added.iter().map(|excerpt| excerpt.label.as_str()).collect();
    assert!(added.contains(&"Sesión 8"), "the funeral, which the model did not say, stays: {added:?}");
    assert!(!added.contains(&"Sesión 7"), "the fall, which it said, is not said twice: {added:?}");
    let text = &settled.answer.text;
    assert!(text.starts_with(said) && text.contains(NOTES_ALSO), "{text}");
    assert_eq!(oraculo::eval::score::repeated_sentences(text), 0, "{text}");
    for label in &added {
        assert!(text.contains(&format!("] [{label}]")) || text.contains(&format!("» [{label}]")), "{text}");
        let cited = settled.answer.citations.iter().find(|c| c.label == *label).expect("cited like the rest");
        assert!(cited.valid && cited.fragment_id.is_some(), "{cited:?}");
    }
    assert_eq!(settled.turn_text(), said, "a follow-up builds on the model's own words");
    assert!(settled.joins_history());

    // The model says nothing the notes hold: their sentences stay, headed by why.
    port.fake.enqueue_reply("No lo sé.");
    let settled = oracle.answer(&request, AnswerOptions::new(&no_events)).await.unwrap();
    let instant = settled.instant.clone().unwrap();
    assert_eq!(settled.instant_kept, Some(InstantKept::ModelAbstained));
    assert_eq!(settled.answer.text, format!("Las notas no dicen la respuesta tal cual.\n\n{}", instant.text));
    assert!(settled.notes_added.is_empty() && !settled.joins_history());
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
    // What stays: the model's answer first, the notes' sentences it did not say under it.
    let settled = &json["settled"];
    assert!(
        settled["text"].as_str().is_some_and(|text| text.starts_with("Vende redes encantadas [Sesión 1].")),
        "{json}"
    );
    assert!(settled["notes_added"].as_array().is_some(), "{json}");
}
