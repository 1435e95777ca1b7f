//! Questions and a busy bot: a question in flight when the bot process is killed
//! is answered by the next start, exactly once; a full queue tells the asker when to come
//! back; a burst of fifty (a benchmark, `--ignored`) loses none.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::bot::{
    CHANNEL, CRONICA, FIRST_QUESTION, PLAYER, RunningBot, ask_first_question, config_toml, config_with, embed_text,
    indexed_campaign, is_callback_for, is_final_answer_for, is_preview, is_webhook_for, wait_for_guild_commands,
};
use crate::fake_discord::{FakeDiscord, text_channel};
use crate::fake_ollama::Fault;
use crate::harness::Scratch;

/// `oraculo bot` as its own process, on the config at `config`, its log in `log`.
fn bot_process(config: &std::path::Path, log: &std::path::Path) -> Child {
    let log = std::fs::File::create(log).unwrap();
    Command::new(env!("CARGO_BIN_EXE_oraculo"))
        .arg("bot")
        .arg("--config")
        .arg(config)
        .env_remove("DISCORD_TOKEN")
        .env_remove("ORACULO_DISCORD_TOKEN")
        .env_remove("ORACULO_CONFIG")
        .env("ORACULO_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("the oraculo binary starts")
}

fn questions_in_flight(scratch: &Scratch) -> i64 {
    let sqlite = rusqlite::Connection::open(scratch.index_dir().join("index.sqlite")).unwrap();
    sqlite.query_row("SELECT count(*) FROM questions_in_flight", [], |row| row.get(0)).unwrap()
}

/// Waits (up to 10 s) until no question is left in flight: each is removed just after its
/// last message is posted.
async fn until_none_in_flight(scratch: &Scratch) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while questions_in_flight(scratch) > 0 {
        assert!(Instant::now() < deadline, "{} question(s) left in flight", questions_in_flight(scratch));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_in_flight_when_the_bot_is_killed_is_answered_after_the_restart_exactly_once() {
    let (scratch, ollama) = indexed_campaign(&[("Crónica.md", CRONICA)], &[]).await;
    let discord = FakeDiscord::start().await;
    let config = scratch.data.path().join("config.toml");
    let campaign = format!("[campaign]\ndir = \"{}\"\n", scratch.campaign.path().display());
    std::fs::write(&config, config_toml(scratch.data.path(), &campaign, &ollama, &discord, "")).unwrap();
    let log = scratch.data.path().join("bot-1.log");
    let mut first = bot_process(&config, &log);
    wait_for_guild_commands(&discord).await;

    // The model writes slowly, as on a CPU: the process is killed while it writes.
    ollama.enqueue_reply("El archiduque Ardo huyó al norte tras la feria [Sesión 1]. Su barco se hundió [Sesión 2].");
    ollama.enqueue(Fault::Delay(Duration::ZERO));
    ollama.enqueue(Fault::Slow(Duration::from_secs(5)));
    let token = ask_first_question(&discord);
    discord.wait_for("the deferral", is_callback_for(&token)).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while ollama.chat_requests("/api/chat").is_empty() {
        assert!(Instant::now() < deadline, "the model was never asked: {}", std::fs::read_to_string(&log).unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let finals_before = discord.requests().iter().filter(|r| is_final_answer_for(&token)(r)).count();
    assert_eq!(finals_before, 0, "killed before its answer was posted");
    assert_eq!(questions_in_flight(&scratch), 1, "the question is still written down");

    // The next start takes it up: the deferred response is edited into the answer.
    ollama.enqueue_reply("El archiduque Ardo huyó al norte tras la feria [Sesión 1].");
    let log = scratch.data.path().join("bot-2.log");
    let mut second = bot_process(&config, &log);
    let answer = discord.wait_for("the answer after the restart", is_final_answer_for(&token)).await;
    assert!(
        answer.path.ends_with("/messages/@original"),
        "through the interaction, as if nothing happened: {}",
        answer.path
    );
    assert!(embed_text(&answer.body).contains("huyó al norte"), "{}", answer.body);
    // Exactly once: nothing more arrives for it, and nothing is left to take up.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let finals: Vec<_> = discord.requests().into_iter().filter(|r| is_final_answer_for(&token)(r)).collect();
    assert_eq!(finals.len(), 1, "{finals:?}");
    let in_channel = discord
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == format!("/channels/{CHANNEL}/messages"))
        .filter(|r| embed_text(&r.body).contains("huyó al norte"))
        .count();
    assert_eq!(in_channel, 0, "not posted again in the channel");
    until_none_in_flight(&scratch).await;
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(log_text.contains("answering the questions a restart interrupted"), "{log_text}");
    let leaks: Vec<&str> = log_text.lines().filter(|line| line.contains(token.as_str())).collect();
    assert!(leaks.is_empty(), "the interaction's token is never logged: {leaks:#?}");
    second.kill().unwrap();
    second.wait().unwrap();
}

/// A question whose interaction expired while the bot was down is answered in its channel,
/// saying which question it answers, without pinging anyone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_whose_token_expired_during_the_restart_is_answered_in_its_channel() {
    let (scratch, ollama) = indexed_campaign(&[("Crónica.md", CRONICA)], &[]).await;
    let discord = FakeDiscord::start().await;
    // Written down by a run that died 20 minutes ago, its token expired since.
    let interaction = discord.snowflake_aged(Duration::from_secs(20 * 60));
    let delivery = json!({
        "user": PLAYER,
        "location": { "surface": "Guild", "guild": crate::fake_discord::GUILD_ID, "channel": CHANNEL, "parent": null },
        "place": { "Channel": CHANNEL },
        "lang": "Es",
        "interaction": [interaction, "expired-token"],
        "asking_message": null,
    });
    {
        let sqlite = rusqlite::Connection::open(scratch.index_dir().join("index.sqlite")).unwrap();
        let asked_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() - 1200;
        sqlite
            .execute(
                "INSERT INTO questions_in_flight (asked_at, conversation, question, delivery) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![
                    asked_at as i64,
                    format!("discord:channel:{CHANNEL}"),
                    FIRST_QUESTION,
                    delivery.to_string()
                ],
            )
            .unwrap();
    }
    ollama.enqueue_reply("El archiduque Ardo huyó al norte tras la feria [Sesión 1].");
    let bot = RunningBot::start(config_with(&scratch, &ollama, &discord, ""));
    let answer = discord
        .wait_for("the answer in the channel", |r| {
            r.path.starts_with(&format!("/channels/{CHANNEL}/messages"))
                && !is_preview(&r.body)
                && embed_text(&r.body).contains("huyó al norte")
        })
        .await;
    let first = discord
        .requests()
        .into_iter()
        .find(|r| r.method == "POST" && r.path == format!("/channels/{CHANNEL}/messages"))
        .unwrap();
    for message in [&first.body, &answer.body] {
        let content = message["content"].as_str().unwrap_or_default();
        assert!(content.contains("se reinició") && content.contains(FIRST_QUESTION), "which question: {message}");
    }
    assert_eq!(answer.body["allowed_mentions"]["parse"], json!([]), "never a ping: {}", answer.body);
    assert!(discord.requests().iter().all(|r| !r.path.contains("expired-token")), "the expired token is not used");
    until_none_in_flight(&scratch).await;
    bot.stop().await;
}

/// `queue_limit = 2`, one answer at a time, every question from one channel: the first runs,
/// the second waits (the channel's half of the room), the third is told the bot is busy and
/// when to come back, and no question is left without a message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_tells_the_asker_when_to_come_back() {
    let (scratch, ollama) = indexed_campaign(&[("Crónica.md", CRONICA)], &[]).await;
    let discord = FakeDiscord::start().await;
    ollama.reply_by(|_| "El archiduque Ardo huyó al norte tras la feria [Sesión 1].".to_string());
    ollama.enqueue(Fault::Delay(Duration::ZERO));
    ollama.enqueue(Fault::Slow(Duration::from_millis(400)));
    let extra = "questions_per_minute = 0\nconcurrency = 1\nqueue_limit = 2";
    let bot = RunningBot::start(config_with(&scratch, &ollama, &discord, extra));
    wait_for_guild_commands(&discord).await;
    let first = ask_first_question(&discord);
    discord.wait_for("the first deferral", is_callback_for(&first)).await;
    while ollama.chat_requests("/api/chat").is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let second = ask_first_question(&discord);
    discord
        .wait_for("the second one queued", |r| {
            is_webhook_for(&second, "PATCH")(r) && r.body.to_string().contains("posición 1")
        })
        .await;
    let third = ask_first_question(&discord);
    let busy = discord.wait_for("the third one told", is_callback_for(&third)).await;
    assert_eq!(busy.body["type"], 4, "told at once, not deferred: {}", busy.body);
    assert_eq!(busy.body["data"]["flags"], 64, "to the asker alone: {}", busy.body);
    let text = busy.body["data"]["content"].as_str().unwrap();
    assert!(
        text.contains("Ya esperan 1 preguntas de este canal") && text.contains("Vuelve a preguntar en unos"),
        "{text}"
    );
    // The first two are answered; the third gets nothing more.
    for token in [&first, &second] {
        discord.wait_for("an answer", is_final_answer_for(token)).await;
    }
    let after: Vec<Value> =
        discord.requests().into_iter().filter(|r| r.path.contains(third.as_str())).map(|r| r.body).collect();
    assert_eq!(after.len(), 1, "told once, nothing else: {after:?}");
    until_none_in_flight(&scratch).await;
    bot.stop().await;
}

/// A burst, measured: 50 questions at once from 10 players in 5 channels, one
/// answered at a time; every one gets its answer. Prints the process's memory peak and the
/// p50/p95 time from asking to the final answer. A benchmark, not a timed test:
/// `cargo test --release --test it -- --ignored burst_of_fifty --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a benchmark: run it with --ignored, in release"]
async fn burst_of_fifty_questions_memory_and_wait() {
    let (scratch, ollama) = indexed_campaign(&[("Crónica.md", CRONICA)], &[]).await;
    let marker = regex::Regex::new(r"Q\d+").unwrap();
    ollama.reply_by(move |messages| {
        let last = messages.as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or("");
        let asked = marker.find_iter(last).last().map(|m| m.as_str().to_string()).unwrap_or_default();
        format!("{asked}: el archiduque Ardo huyó al norte tras la feria [Sesión 1].")
    });
    let discord = FakeDiscord::start().await;
    let extra = "questions_per_minute = 0\nconcurrency = 1";
    let bot = RunningBot::start(config_with(&scratch, &ollama, &discord, extra));
    wait_for_guild_commands(&discord).await;
    let before = peak_rss_kib();
    let started = Instant::now();
    let asked: Vec<(String, String)> = (0..50u64)
        .map(|n| {
            let mark = format!("Q{n}");
            let options =
                json!([{ "name": "pregunta", "type": 3, "value": format!("¿Qué pasó con el archiduque? ({mark})") }]);
            let token = discord.slash_command(PLAYER + n % 10, &[], text_channel(CHANNEL + n % 5), "oraculo", options);
            (token, mark)
        })
        .collect();
    let mut waits = Vec::new();
    let mut busy = 0;
    for (token, mark) in &asked {
        let told = discord
            .wait_for("every question's last message", |r| {
                r.path.split('/').any(|segment| segment == token)
                    && r.message_body().is_some()
                    && !is_preview(&r.body)
                    && (embed_text(&r.body).contains(mark.as_str())
                        || r.body["content"].as_str().is_some_and(|c| c.contains("ocupado")))
            })
            .await;
        busy += usize::from(!embed_text(&told.body).contains(mark.as_str()));
        waits.push(started.elapsed());
    }
    waits.sort();
    let at = |share: f64| waits[((waits.len() - 1) as f64 * share).round() as usize].as_secs_f64();
    println!(
        "burst of 50: all told ({} answered, {busy} told busy); wait p50 {:.2} s, p95 {:.2} s, last {:.2} s; \
         memory peak {} MiB (before the burst {} MiB)",
        50 - busy,
        at(0.5),
        at(0.95),
        at(1.0),
        peak_rss_kib() / 1024,
        before / 1024
    );
    bot.stop().await;
}

/// The process's peak resident memory (VmHWM), in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
