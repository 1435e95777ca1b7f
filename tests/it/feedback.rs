//! What the players asked, kept for the DM: the 👍/👎 under an answer through the
//! Discord stand-in, the DM's report (`/oraculo_informe`, `oraculo asked`), the bank from real
//! play read back by `oraculo eval`, and what is not kept (past `keep_days`, the askers' ids).

use std::path::Path;

use oraculo::corpus::{Label, SessionNumber};
use oraculo::feedback::{AskedQuestions, FrontEnd, KeptAnswer, now_unix};
use oraculo::retrieve::Audience;
use serde_json::{Value, json};

use crate::bot::{
    CHANNEL, CHAT_MODEL, CRONICA, DM, PLAYER, RunningBot, ask_in_channel, config_with, indexed_campaign,
    is_callback_for, is_final_answer_for, is_webhook_for, ollama_config_toml, wait_for_guild_commands,
};
use crate::fake_discord::{FakeDiscord, text_channel};
use crate::fake_ollama::FakeOllama;
use crate::harness::Scratch;

const GM_CHANNEL: u64 = 700_000_000_000_000_700;
const OTHER_PLAYER: u64 = 700_000_000_000_000_003;
const PLAYER_QUESTION: &str = "¿Dónde escondió Ardo la corona?";
const GM_QUESTION: &str = "¿Quién paga en secreto al archiduque?";
const DAY: i64 = 24 * 60 * 60;

/// The kept question's id that the 👍/👎 buttons of a final answer carry.
fn verdict_id(body: &Value) -> i64 {
    let ids: Vec<&str> = body["components"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|row| row["components"].as_array().into_iter().flatten())
        .filter_map(|button| button["custom_id"].as_str())
        .collect();
    let up = ids.iter().find_map(|id| id.strip_prefix("oraculo:veredicto:")?.strip_suffix(":up"));
    up.unwrap_or_else(|| panic!("no 👍 under the answer: {ids:?}")).parse().unwrap()
}

/// Every verdict stored, as the SQLite file holds it: (verdict, reason, voter_id).
fn stored_verdicts(index_dir: &Path) -> Vec<(String, Option<String>, Option<String>)> {
    let connection = rusqlite_connection(index_dir);
    let mut statement =
        connection.prepare("SELECT verdict, reason, voter_id FROM answer_verdicts ORDER BY given_at, voter").unwrap();
    statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?))).unwrap().map(Result::unwrap).collect()
}

/// The campaign's index file, opened as a DM with `sqlite3` would.
fn rusqlite_connection(index_dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(index_dir.join("index.sqlite")).unwrap()
}

/// Every text of the feedback tables, as one string: what a search for a user id reads.
fn feedback_text(index_dir: &Path) -> String {
    let connection = rusqlite_connection(index_dir);
    let mut text = String::new();
    for sql in [
        "SELECT id || question || COALESCE(search_query, '') || answer_text || cited_labels || shown_labels || \
         entities || sessions || COALESCE(asker, '') || audience FROM asked_questions",
        "SELECT voter || COALESCE(voter_id, '') || verdict || COALESCE(reason, '') FROM answer_verdicts",
    ] {
        let mut statement = connection.prepare(sql).unwrap();
        for row in statement.query_map([], |row| row.get::<_, String>(0)).unwrap() {
            text.push_str(&row.unwrap());
            text.push('\n');
        }
    }
    text
}

/// A button pressed by `user` in `channel`: the bot's response to it.
async fn press(discord: &FakeDiscord, user: u64, channel: u64, custom_id: &str) -> Value {
    let token = discord.button_click(user, text_channel(channel), custom_id);
    discord.wait_for(custom_id, is_callback_for(&token)).await.body
}

/// `/oraculo_informe` used by `user` in `channel`: the text of its ephemeral messages, or of
/// the refusal.
async fn report_in(discord: &FakeDiscord, user: u64, channel: u64) -> String {
    let token = discord.slash_command(user, &[], text_channel(channel), "oraculo_informe", json!([]));
    let first = discord.wait_for("the report's first response", is_callback_for(&token)).await;
    assert_eq!(first.body["data"]["flags"], 64, "ephemeral: {}", first.body);
    if first.body["type"] == 4 {
        return first.body["data"]["content"].as_str().unwrap_or_default().to_string();
    }
    let report = discord.wait_for("the report", is_webhook_for(&token, "POST")).await;
    assert_eq!(report.body["flags"], 64, "ephemeral: {}", report.body);
    report.body["content"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verdicts_are_kept_one_per_player_and_a_gm_question_stays_out_of_the_players_report() {
    let (scratch, ollama) = indexed_campaign(&[("Crónica.md", CRONICA)], &[]).await;
    let discord = FakeDiscord::start().await;
    let extra = format!("gm_channel_ids = [{GM_CHANNEL}]");
    let bot = RunningBot::start(config_with(&scratch, &ollama, &discord, &extra));
    wait_for_guild_commands(&discord).await;

    // A player's question, answered: the buttons under the answer name what was kept.
    ollama.enqueue_reply("El archiduque Ardo huyó al norte con la corona robada [Sesión 1].");
    let token = ask_in_channel(&discord, PLAYER_QUESTION);
    let answer = discord.wait_for("the player's answer", is_final_answer_for(&token)).await;
    let id = verdict_id(&answer.body);

    // 👎, then «it was in the notes»: asked and answered ephemerally, stored once.
    let asked = press(&discord, PLAYER, CHANNEL, &format!("oraculo:veredicto:{id}:down")).await;
    assert_eq!((asked["type"].as_u64(), asked["data"]["flags"].as_u64()), (Some(4), Some(64)), "{asked}");
    assert!(asked["data"]["content"].as_str().unwrap().contains("¿Qué estaba mal?"), "{asked}");
    assert!(asked.to_string().contains(&format!("oraculo:porque:{id}:in_the_notes")), "{asked}");
    let thanked = press(&discord, PLAYER, CHANNEL, &format!("oraculo:porque:{id}:in_the_notes")).await;
    assert_eq!(thanked["type"], 7, "the question is replaced by the thanks: {thanked}");
    let index_dir = scratch.index_dir();
    assert_eq!(stored_verdicts(&index_dir), [("down".to_string(), Some("in_the_notes".to_string()), None)]);

    // A second press changes it; another player's is kept apart.
    let changed = press(&discord, PLAYER, CHANNEL, &format!("oraculo:veredicto:{id}:up")).await;
    assert_eq!(changed["data"]["flags"], 64, "{changed}");
    assert_eq!(stored_verdicts(&index_dir), [("up".to_string(), None, None)]);
    press(&discord, PLAYER, CHANNEL, &format!("oraculo:veredicto:{id}:down")).await;
    press(&discord, PLAYER, CHANNEL, &format!("oraculo:porque:{id}:in_the_notes")).await;
    press(&discord, OTHER_PLAYER, CHANNEL, &format!("oraculo:veredicto:{id}:down")).await;
    press(&discord, OTHER_PLAYER, CHANNEL, &format!("oraculo:porque:{id}:in_the_notes")).await;
    let verdicts = stored_verdicts(&index_dir);
    assert_eq!(verdicts.len(), 2, "one per player: {verdicts:?}");
    assert!(verdicts.iter().all(|(verdict, reason, _)| verdict == "down" && reason.as_deref() == Some("in_the_notes")));

    // The DM asks in the GM channel: kept, apart.
    ollama.enqueue_reply("Las notas no lo dicen.");
    let token = discord.slash_command(
        DM,
        &[],
        text_channel(GM_CHANNEL),
        "oraculo",
        json!([{ "name": "pregunta", "type": 3, "value": GM_QUESTION }]),
    );
    discord.wait_for("the GM's answer", is_final_answer_for(&token)).await;

    // The report: the DM only; in a players' channel, the players' questions only.
    let refused = report_in(&discord, PLAYER, CHANNEL).await;
    assert!(refused.contains("Solo el DM"), "{refused}");
    let players_view = report_in(&discord, DM, CHANNEL).await;
    assert!(players_view.contains(PLAYER_QUESTION), "{players_view}");
    assert!(!players_view.contains(GM_QUESTION), "a GM question in a players' view: {players_view}");
    let gm_view = report_in(&discord, DM, GM_CHANNEL).await;
    assert!(gm_view.contains(PLAYER_QUESTION) && gm_view.contains(GM_QUESTION), "{gm_view}");

    // keep_askers is off: no user id anywhere in what was kept.
    let kept = feedback_text(&index_dir);
    for user in [PLAYER, OTHER_PLAYER, DM] {
        assert!(!kept.contains(&user.to_string()), "user {user} stored: {kept}");
    }
    // Nothing of it was posted in a channel: every response was to the interaction.
    let posted: Vec<String> = discord
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.starts_with("/channels/") && r.path.ends_with("/messages"))
        .map(|r| r.body.to_string())
        .collect();
    assert!(posted.iter().all(|body| !body.contains("Anotado")), "{posted:?}");
    bot.stop().await;
}

/// A question kept as the bot keeps one, asked `days_ago`.
fn kept(question: &str, entities: &[&str], not_in_notes: bool, days_ago: i64) -> KeptAnswer {
    KeptAnswer {
        asked_at: now_unix() - days_ago * DAY,
        audience: Audience::Player,
        front_end: FrontEnd::Discord,
        question: question.to_string(),
        search_query: None,
        answer_text: if not_in_notes { "Las notas no lo dicen." } else { "Huyó al norte [Sesión 1]." }.to_string(),
        cited: if not_in_notes { Vec::new() } else { vec![Label::new("Sesión 1")] },
        shown: vec![Label::new("Sesión 1"), Label::new("Sesión 2")],
        entities: entities.iter().map(|entity| entity.to_string()).collect(),
        sessions: Vec::new(),
        not_in_notes,
        asker: Some(PLAYER),
    }
}

/// Thirty questions of a month of play: three unanswered about Baika (the same one twice),
/// two about the faro's keeper, one naming session 2, twenty answered (four liked), and four
/// past `keep_days`.
async fn a_month_of_questions(index_dir: &Path) -> AskedQuestions {
    let config = oraculo::config::FeedbackConfig { keep_askers: false, keep_days: 30, keep_mcp: false };
    let asked = AskedQuestions::new(index_dir, config);
    let mut questions = vec![
        kept("¿Dónde está Baika?", &["Baika"], true, 20),
        kept("¿dónde está Baika", &["Baika"], true, 10),
        kept("¿Qué quiere Baika?", &["Baika"], true, 3),
        kept("¿Quién es el farero?", &["Farero"], true, 12),
        kept("¿Qué vio el farero?", &["Farero"], true, 2),
    ];
    let mut session_two = kept("¿Qué pasó en la sesión 2?", &[], true, 5);
    session_two.sessions = vec![SessionNumber(2)];
    questions.push(session_two);
    for n in 0..20 {
        questions.push(kept(&format!("¿Qué hizo Ardo en la feria {n}?"), &["Ardo"], false, 1 + n % 25));
    }
    for n in 0..4 {
        questions.push(kept(&format!("¿Una pregunta vieja {n}?"), &["Vieja"], true, 40 + n));
    }
    assert_eq!(questions.len(), 30);
    let mut ids = Vec::new();
    for question in questions {
        ids.push(asked.keep(question).await.expect("kept"));
    }
    // Four of the answered ones liked.
    for id in &ids[6..10] {
        asked.judge(*id, PLAYER, oraculo::feedback::Verdict::Up, None).await.unwrap();
    }
    asked
}

/// `oraculo …` on the campaign, with a config of the Ollama stand-in and `[feedback]`
/// `keep_days = 30`; its stdout, failing the test on a failure.
async fn oraculo(scratch: &Scratch, ollama: &FakeOllama, args: &[&str]) -> String {
    let campaign = crate::bot::campaign_toml(scratch.campaign.path());
    let toml =
        ollama_config_toml(scratch.data.path(), &campaign, ollama, CHAT_MODEL, "") + "\n[feedback]\nkeep_days = 30\n";
    let config = scratch.data.path().join("feedback.toml");
    std::fs::write(&config, toml).unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_oraculo"));
    command.args(args).arg("--config").arg(&config);
    for (name, _) in std::env::vars().filter(|(name, _)| name.starts_with("ORACULO_")) {
        command.env_remove(name);
    }
    let output = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "oraculo {args:?} failed: {stderr}");
    String::from_utf8(output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oraculo_asked_groups_the_unanswered_and_writes_a_bank_eval_reads() {
    let (scratch, ollama) = indexed_campaign(&[("Crónica.md", CRONICA)], &[]).await;
    let index_dir = scratch.index_dir();
    a_month_of_questions(&index_dir).await;

    // Grouped by entity, most asked first; what is past keep_days is gone, from the file too.
    let report: Value = serde_json::from_str(&oraculo(&scratch, &ollama, &["asked", "--json"]).await).unwrap();
    assert_eq!((report["n_questions"].as_u64(), report["n_unanswered"].as_u64()), (Some(26), Some(6)), "{report}");
    let groups: Vec<(&str, u64)> = report["unanswered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|group| (group["named"].as_str().unwrap(), group["asked"].as_u64().unwrap()))
        .collect();
    assert_eq!(groups, [("Baika", 3), ("Farero", 2), ("2", 1)], "{report}");
    let baika = &report["unanswered"][0]["questions"];
    assert_eq!(baika[0]["asked"], 2, "the same question twice, counted once as asked twice: {baika}");
    assert_eq!(baika[0]["question"], "¿dónde está Baika", "as last asked");
    assert_eq!(report["weeks"].as_array().unwrap().iter().map(|w| w["asked"].as_u64().unwrap()).sum::<u64>(), 26);
    let old: i64 = rusqlite_connection(&index_dir)
        .query_row("SELECT COUNT(*) FROM asked_questions WHERE asked_at < ?1", [now_unix() - 30 * DAY], |row| {
            row.get(0)
        })
        .unwrap();
    assert_eq!(old, 0, "nothing is kept past keep_days");
    assert!(!feedback_text(&index_dir).contains("pregunta vieja"));
    assert!(!feedback_text(&index_dir).contains(&PLAYER.to_string()), "keep_askers is off");
    let text = oraculo(&scratch, &ollama, &["asked"]).await;
    let (baika_at, farero_at) = (text.find("Baika —").unwrap(), text.find("Farero —").unwrap());
    assert!(baika_at < farero_at, "{text}");

    // The bank: every distinct question once, the liked ones with their labels; eval reads it.
    let bank = scratch.data.path().join("play.jsonl");
    oraculo(&scratch, &ollama, &["asked", "--bank", bank.to_str().unwrap()]).await;
    let lines: Vec<Value> =
        std::fs::read_to_string(&bank).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    assert_eq!(lines.len(), 25, "26 kept, one asked twice");
    let liked: Vec<&Value> = lines.iter().filter(|line| line["from_play"] == "cited_and_liked").collect();
    assert_eq!(liked.len(), 4);
    assert!(liked.iter().all(|line| line["expected"] == json!(["Sesión 1"])));
    assert!(lines.iter().filter(|line| line["from_play"] == "to_fill").all(|line| line["expected"] == json!([])));
    let eval = oraculo(
        &scratch,
        &ollama,
        &["eval", "--retrieval-only", "--no-ingest", "--no-ablations", "--json", "--questions", bank.to_str().unwrap()],
    )
    .await;
    let eval: Value = serde_json::from_str(&eval).unwrap();
    assert_eq!((eval["questions"].as_u64(), eval["errors"].as_u64()), (Some(25), Some(0)), "{}", eval["run"]);
}
