//! The time to the first text a player sees (measures; its checks only guard the run): the bot
//! against the Discord stand-in of the integration tests (`tests/it/fake_discord.rs`), over the
//! sample campaign (`eval/campaign/`) embedded by the real e5-small.
//!
//! - `embedded`: answers by the embedded 1.5B in-process, one `/oraculo`. Prints the time to
//!   the first status, to the first answer text and to the final layout, the edits, and any
//!   body over a limit. Minutes on a CPU; skipped when the model file is missing
//!   (`scripts/fetch-models.sh --chat 1.5b`).
//! - `instant`: the instant answer, the chat model the Ollama stand-in (answers at once, or held
//!   2 s to keep a question queued behind it). Prints the key facts the instant answer holds
//!   against the extractive mode's, and the seconds from the interaction to the first cited
//!   text, p50 and p95 over the bank's answerable questions, alone and queued behind a running
//!   answer.
//!
//! Run: `cargo bench --bench first_text` (release; both), or name the ones to run:
//! `cargo bench --bench first_text -- instant` (`embedded`, `instant`; none named: all). The
//! models are read from `ORACULO_DATA`'s `models/`, else the default data dir's.

#[path = "../tests/it/bot.rs"]
#[allow(dead_code)]
mod bot;
#[path = "../tests/it/fake_discord.rs"]
#[allow(dead_code)]
mod fake_discord;
#[path = "../tests/it/fake_ollama.rs"]
#[allow(dead_code)]
mod fake_ollama;
#[path = "../tests/it/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "../tests/it/http.rs"]
#[allow(dead_code)]
mod http;

use std::sync::Arc;
use std::time::{Duration, Instant};

use oraculo::eval::score::AnswerScore;
use oraculo::llm::embed::e5::E5Embedder;
use oraculo::oracle::{AnswerOptions, AnswerSettings, AskRequest, Oracle};
use oraculo::retrieve::Audience;

use crate::bot::{
    DM, RunningBot, TOKEN, Table, answer_bodies, ask_first_question, ask_in_channel, campaign_toml, config_toml,
    discord_toml, embed_text, is_final_answer_for, is_webhook_for, parse_config, wait_for_guild_commands,
};
use crate::fake_discord::{FakeDiscord, Recorded};
use crate::fake_ollama::{FakeOllama, Fault};
use crate::harness::{Scratch, campaign_config, data_dir, e5, ingest_dir, models_dir, ollama_chat};

/// The question that holds the model while the measured one waits.
const FIRST_QUESTION_FOR_QUEUE: &str = "¿Qué ofreció el archiduque al grupo?";

fn main() {
    let named: Vec<String> = std::env::args().skip(1).filter(|arg| !arg.starts_with('-')).collect();
    let runs = |group: &str| named.is_empty() || named.iter().any(|name| name == group);
    let e5_path = E5Embedder::default_path(&data_dir());
    if !e5_path.exists() {
        eprintln!("skipped: {} is missing (scripts/fetch-models.sh)", e5_path.display());
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    if runs("embedded") {
        runtime.block_on(measure_first_text_with_the_embedded_model());
    }
    if runs("instant") {
        runtime.block_on(measure_the_instant_answer_on_the_sample_campaign());
    }
}

/// A scratch data dir reading the fetched models, with the sample campaign materialized in
/// it, and the campaign's folder and index folder.
fn sample_campaign() -> (Scratch, std::path::PathBuf, std::path::PathBuf) {
    let scratch = Scratch::new(&[]);
    std::os::unix::fs::symlink(models_dir(), scratch.data.path().join("models")).unwrap();
    let campaign = oraculo::sample::materialize(&scratch.data.path().join("sample")).unwrap();
    let index_dir = oraculo::index::campaign_index_dir(scratch.data.path(), &campaign);
    (scratch, campaign, index_dir)
}

/// The sample campaign embedded by e5-small, answers by the 1.5B in-process, one `/oraculo`
/// through the Discord stand-in.
async fn measure_first_text_with_the_embedded_model() {
    let gguf = models_dir().join(oraculo::llm::chat::llama_cpp::QWEN_1_5B_FILE);
    if !gguf.exists() {
        eprintln!("embedded: skipped, {} is missing (scripts/fetch-models.sh --chat 1.5b)", gguf.display());
        return;
    }
    let (scratch, campaign, index_dir) = sample_campaign();
    let embedder = e5();
    let ingest_started = Instant::now();
    let summary = ingest_dir(&index_dir, &campaign, &campaign_config(&[]), &embedder).await.unwrap();
    eprintln!(
        "sample campaign: {} fragments, {} windows embedded in {:.0} s",
        summary.fragments,
        summary.windows_embedded,
        ingest_started.elapsed().as_secs_f64()
    );
    assert!(summary.fragments > 40, "{summary:?}");

    let discord = FakeDiscord::start().await;
    let text = format!(
        "data_dir = \"{data}\"\n{campaign}[embedder]\nbackend = \"embedded\"\n[chat]\nbackend = \"embedded\"\n\
         gguf = \"{gguf}\"\n{discord}",
        data = scratch.data.path().display(),
        campaign = campaign_toml(&campaign),
        gguf = gguf.display(),
        discord = discord_toml(TOKEN, &discord, ""),
    );
    assert!(text.contains(&format!("dm_user_ids = [{DM}]")), "{text}");
    let bot = RunningBot::start(parse_config(&text));
    wait_for_guild_commands(&discord).await;
    let asked = Instant::now();
    let token = ask_first_question(&discord);
    let (mut first_status, mut first_text) = (None, None);
    let final_answer = loop {
        let requests = discord.requests();
        let mine: Vec<&Recorded> = requests.iter().filter(|r| is_webhook_for(&token, "PATCH")(r)).collect();
        if first_status.is_none() && !mine.is_empty() {
            first_status = Some(asked.elapsed());
        }
        let has_text = |r: &&Recorded| {
            r.body["embeds"][0]["description"].as_str().is_some_and(|d| !d.starts_with('🔎') && !d.starts_with('📚'))
        };
        if first_text.is_none() && mine.iter().any(has_text) {
            first_text = Some(asked.elapsed());
        }
        if let Some(done) = requests.iter().find(|r| is_final_answer_for(&token)(r)) {
            break done.clone();
        }
        assert!(asked.elapsed() < Duration::from_secs(600), "no answer in 10 minutes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let total = asked.elapsed();
    let edits = discord.requests().iter().filter(|r| is_webhook_for(&token, "PATCH")(r)).count();
    eprintln!(
        "embedded 1.5B through the stand-in: first status after {:.1} s, first answer text after {:.1} s, \
         final layout after {:.1} s; {edits} edits of the message; over a limit: {:?}\nanswer: {}",
        first_status.unwrap_or_default().as_secs_f64(),
        first_text.unwrap_or_default().as_secs_f64(),
        total.as_secs_f64(),
        discord.violations(),
        embed_text(&final_answer.body)
    );
    assert!(discord.violations().iter().all(|v| v.contains("429")), "{:?}", discord.violations());
    bot.stop().await;
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
    let bodies = answer_bodies(&table.discord, token);
    let first = bodies.iter().find(|(body, _)| embed_text(body).contains('[')).expect("cited text").1;
    let last = bodies.last().expect("the final layout").1;
    ((first - asked).as_secs_f64(), (last - asked).as_secs_f64())
}

/// The instant answer on the sample campaign: its key facts against the extractive mode's,
/// then the first cited text through the Discord stand-in, alone and queued.
async fn measure_the_instant_answer_on_the_sample_campaign() {
    let (scratch, campaign, index_dir) = sample_campaign();
    let embedder: Arc<dyn oraculo::llm::Embedder> = Arc::new(e5());
    ingest_dir(&index_dir, &campaign, &campaign_config(&[]), embedder.as_ref()).await.unwrap();
    let bank: Vec<_> = oraculo::eval::sample_bank()
        .unwrap()
        .into_iter()
        .filter(|q| q.kind != oraculo::eval::QuestionKind::Unanswerable && q.history.is_empty())
        .collect();

    // 1. Key facts: the instant answer against `--answer-mode extractive`, question by question.
    let fake = FakeOllama::start(&["qwen2.5:14b"]).await;
    let chat = ollama_chat(fake.url());
    let oracle = Oracle::new(&index_dir, Arc::clone(&embedder), Arc::clone(&chat), AnswerSettings::new(256));
    let mut extractive = Oracle::new(&index_dir, Arc::clone(&embedder), chat, AnswerSettings::new(256));
    extractive.set_mode(oraculo::answer::AnswerMode::Extractive);
    let (mut facts, mut instant_found, mut extractive_found, mut same_text) = (0, 0, 0, 0);
    for question in bank.iter().filter(|q| !q.key_facts.is_empty()) {
        let request = AskRequest { question: &question.question, history: &[], audience: Audience::Player };
        let settled = oracle.answer(&request, AnswerOptions::new(&oraculo::oracle::no_events)).await.unwrap();
        let instant = settled.instant.map(|a| a.text).unwrap_or_default();
        let settled = extractive.answer(&request, AnswerOptions::new(&oraculo::oracle::no_events)).await.unwrap();
        let made = settled.model.unwrap_or(settled.answer).text;
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
    let discord = FakeDiscord::start().await;
    let ollama = FakeOllama::start(&["fake-chat"]).await;
    ollama.reply_by(|_| "El archiduque huyó al norte [Sesión 1].".to_string());
    let text =
        config_toml(scratch.data.path(), &campaign_toml(&campaign), &ollama, &discord, "questions_per_minute = 0")
            .replace(
                "backend = \"ollama\"\nmodel = \"fake-embed\"\nbatch_size = 4\nwindow_words = 250",
                "backend = \"embedded\"",
            );
    assert!(text.contains("backend = \"embedded\""), "{text}");
    let table = Table::from_parts(scratch, ollama, discord, parse_config(&text)).await;
    let (mut alone, mut alone_final, mut queued) = (Vec::new(), Vec::new(), Vec::new());
    for question in &bank {
        let asked = Instant::now();
        let token = ask_in_channel(&table.discord, &question.question);
        let (first, last) = first_cited_and_final(&table, &token, asked).await;
        alone.push(first);
        alone_final.push(last);
    }
    for question in &bank {
        table.ollama.enqueue(Fault::Delay(Duration::from_secs(2)));
        let running = ask_in_channel(&table.discord, FIRST_QUESTION_FOR_QUEUE);
        table.discord.wait_for("the running answer's notes", |r| is_webhook_for(&running, "PATCH")(r)).await;
        let asked = Instant::now();
        let token = ask_in_channel(&table.discord, &question.question);
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
