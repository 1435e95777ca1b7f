//! `oraculo doctor` against the Ollama and Discord stand-ins: the all-green install, and each ✗
//! it can report (a model not pulled, the Message Content intent off, a server the bot is not
//! in, a token Discord answers 401), with the fix it prints; and the bot refusing to start on
//! a ✗ that leaves it unable to answer, with the doctor's line.

use oraculo::config::Config;
use oraculo::doctor::{Check, Options, Status};

use crate::bot::{campaign_toml, discord_toml, ollama_config_toml, parse_config};
use crate::fake_discord::{FakeDiscord, GUILD_ID, WAIT};
use crate::fake_ollama::FakeOllama;
use crate::harness::{Scratch, campaign_config, ingest_dir, ollama_embedder};

const EMBED_MODEL: &str = "fake-embed";
const CHAT_MODEL: &str = "qwen2.5:14b";
/// Shaped as Discord makes bot tokens (the stand-in's bot id in base64, then two parts); no
/// real token.
const TOKEN: &str = "ODgwMDAwMDAwMDAwMDAwMDAx.GhIjKl.abcdefghijklmnopqrstuvwxyz0123456789AB";

const CRONICA: &str = "# Crónica\n\n## Sesión 1 — La feria\nEl archiduque Ardo huyó al norte.\n";

/// An install with everything in place: the chronicle ingested through the Ollama stand-in
/// (holding `pulled`), the Discord stand-in accepting [`TOKEN`] alone.
struct Install {
    scratch: Scratch,
    ollama: FakeOllama,
    discord: FakeDiscord,
}

impl Install {
    async fn new(pulled: &[&str]) -> Install {
        let scratch = Scratch::new(&[("Crónica.md", CRONICA)]);
        let ollama = FakeOllama::start(pulled).await;
        if pulled.contains(&EMBED_MODEL) {
            let embedder = ollama_embedder(&ollama, EMBED_MODEL).await;
            ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), &embedder).await.unwrap();
        }
        let discord = FakeDiscord::start().await;
        discord.accept_only_token(TOKEN);
        Install { scratch, ollama, discord }
    }

    fn config_text(&self, token: &str) -> String {
        let campaign = campaign_toml(self.scratch.campaign.path());
        let discord = discord_toml(token, &self.discord, "");
        ollama_config_toml(self.scratch.data.path(), &campaign, &self.ollama, CHAT_MODEL, &discord)
    }

    fn config(&self, token: &str) -> Config {
        parse_config(&self.config_text(token))
    }

    async fn diagnose(&self, token: &str) -> Vec<Check> {
        let options = Options { probe_models: true, discord_client: None };
        oraculo::doctor::diagnose(&self.config(token), &options).await
    }
}

fn the<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks.iter().find(|check| check.check == name).unwrap_or_else(|| panic!("no {name} check in {checks:#?}"))
}

fn failures(checks: &[Check]) -> Vec<&Check> {
    checks.iter().filter(|check| check.status == Status::Fail).collect()
}

#[tokio::test]
async fn an_install_with_everything_in_place_passes_every_check() {
    let install = Install::new(&[EMBED_MODEL, CHAT_MODEL]).await;
    let started = std::time::Instant::now();
    let checks = install.diagnose(TOKEN).await;
    eprintln!("doctor against the stand-ins: {:.2} s", started.elapsed().as_secs_f64());
    assert!(failures(&checks).is_empty(), "{checks:#?}");
    let index = the(&checks, "index");
    assert_eq!(index.status, Status::Ok, "{index:?}");
    assert_eq!(index.facts["fragments"], 1, "{index:?}");
    assert_eq!(index.facts["notes_changed_since"], 0);
    let embedder = the(&checks, "embedder");
    assert_eq!(embedder.facts["dimension"], crate::fake_ollama::FAKE_DIMENSION, "{embedder:?}");
    assert!(the(&checks, "chat").detail.contains("window"), "{checks:#?}");
    let application = the(&checks, "discord_application");
    assert_eq!(application.facts["application_id"], crate::fake_discord::APP_ID.to_string());
    let invite = the(&checks, "discord_invite");
    assert!(invite.detail.contains("permissions=309237730304"), "{invite:?}");
    assert_eq!(the(&checks, "discord_intent").status, Status::Ok);
    assert_eq!(the(&checks, "discord_guild").status, Status::Ok);
    for (name, status) in [("ollama_models", Status::Ok), ("discord_token", Status::Ok), ("discord_dm", Status::Ok)] {
        assert!(checks.iter().filter(|check| check.check == name).all(|check| check.status == status), "{name}");
    }
    let authorized =
        install.discord.requests().iter().all(|r| r.header("authorization") == Some(&format!("Bot {TOKEN}")));
    assert!(authorized, "every REST call carries the bot token");

    // A note edited after the ingest: still answering, with the ingest to run.
    install.scratch.write("Crónica.md", &format!("{CRONICA}\n## Sesión 2\nLlovió.\n"));
    let checks = install.diagnose(TOKEN).await;
    let index = the(&checks, "index");
    assert_eq!(index.status, Status::Warn, "{index:?}");
    assert!(index.detail.contains("1 changed"), "{index:?}");
    assert!(index.fix.as_deref().is_some_and(|fix| fix.starts_with("oraculo ingest --campaign")), "{index:?}");
}

#[tokio::test]
async fn a_model_not_pulled_is_named_with_its_exact_pull_line() {
    let install = Install::new(&[EMBED_MODEL]).await;
    let checks = install.diagnose(TOKEN).await;
    let missing: Vec<&Check> =
        checks.iter().filter(|c| c.check == "ollama_models" && c.status == Status::Fail).collect();
    assert_eq!(missing.len(), 1, "{checks:#?}");
    assert_eq!(missing[0].fix.as_deref(), Some("ollama pull qwen2.5:14b"));
    assert!(!missing[0].blocks_bot, "without the chat model the answers are extractive, still answers");

    let install = Install::new(&[CHAT_MODEL]).await;
    let checks = install.diagnose(TOKEN).await;
    let embedder = checks.iter().find(|c| c.check == "ollama_models" && c.status == Status::Fail).expect("a ✗");
    assert_eq!(embedder.fix.as_deref(), Some("ollama pull fake-embed"));
    assert!(embedder.blocks_bot, "without the embedder nothing is searched");
    assert_eq!(the(&checks, "index").status, Status::Fail, "nothing was ingested");
}

#[tokio::test]
async fn the_message_content_intent_off_is_a_failure_that_keeps_the_bot_from_starting() {
    let install = Install::new(&[EMBED_MODEL, CHAT_MODEL]).await;
    install.discord.set_application_flags(0);
    let checks = install.diagnose(TOKEN).await;
    let intent = the(&checks, "discord_intent");
    assert_eq!(intent.status, Status::Fail, "{intent:?}");
    assert!(intent.fix.as_deref().is_some_and(|fix| fix.contains("Message Content Intent")), "{intent:?}");
    assert_eq!(failures(&checks).len(), 1, "{checks:#?}");

    let error = bot_start_error(install.config(TOKEN)).await;
    assert!(error.contains("✗ the Message Content intent is off"), "{error}");
    assert!(error.contains("fix: Developer Portal"), "{error}");
    assert!(install.discord.identify().is_none(), "refused before connecting to the gateway");
}

#[tokio::test]
async fn a_listed_server_the_bot_is_not_in_is_named_with_the_invite() {
    let install = Install::new(&[EMBED_MODEL, CHAT_MODEL]).await;
    let elsewhere = GUILD_ID + 1;
    install.discord.set_guilds(&[elsewhere]);
    let checks = install.diagnose(TOKEN).await;
    let guild = the(&checks, "discord_guild");
    assert_eq!(guild.status, Status::Fail, "{guild:?}");
    assert!(guild.detail.contains(&GUILD_ID.to_string()), "{guild:?}");
    let fix = guild.fix.as_deref().unwrap_or_default();
    assert!(fix.contains("oauth2/authorize?client_id=") && fix.contains("permissions=309237730304"), "{fix}");
    assert_eq!(failures(&checks).len(), 1, "{checks:#?}");
}

#[tokio::test]
async fn a_token_discord_refuses_is_a_failure_that_keeps_the_bot_from_starting() {
    let install = Install::new(&[EMBED_MODEL, CHAT_MODEL]).await;
    let stale = "ODgwMDAwMDAwMDAwMDAwMDAx.ZzZzZz.reset-since-then-reset-since-then-0000";
    let checks = install.diagnose(stale).await;
    assert_eq!(the(&checks, "discord_token").status, Status::Ok, "well formed, yet refused");
    let login = the(&checks, "discord_login");
    assert_eq!(login.status, Status::Fail, "{login:?}");
    assert!(login.detail.contains("401"), "{login:?}");
    assert!(login.blocks_bot);
    assert!(checks.iter().all(|c| c.check != "discord_intent"), "nothing more is asked with a refused token");

    let error = bot_start_error(install.config(stale)).await;
    assert!(error.contains("✗ Discord refused the token (401 Unauthorized)"), "{error}");
    assert!(!error.contains(stale), "the token never shows: {error}");
}

#[tokio::test]
async fn the_command_prints_each_check_and_exits_non_zero_on_a_failure() {
    let install = Install::new(&[EMBED_MODEL, CHAT_MODEL]).await;
    install.discord.set_application_flags(0);
    let config = install.scratch.data.path().join("config.toml");
    std::fs::write(&config, install.config_text(TOKEN)).unwrap();
    // The binary runs on its own runtime, away from this test's (which serves the stand-ins).
    let (text, json) = tokio::task::spawn_blocking(move || {
        let run = |json: bool| {
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_oraculo"));
            command.arg("doctor").arg("--config").arg(&config).env_remove("ORACULO_CONFIG").env_remove("DISCORD_TOKEN");
            if json {
                command.arg("--json");
            }
            command.output().unwrap()
        };
        (run(false), run(true))
    })
    .await
    .unwrap();
    assert_eq!(text.status.code(), Some(1), "{}", String::from_utf8_lossy(&text.stderr));
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(stdout.contains("✓ config") && stdout.contains("✗ the Message Content intent is off"), "{stdout}");
    assert!(stdout.contains("1 check failed"), "{stdout}");
    assert!(!stdout.contains(TOKEN), "{stdout}");
    assert_eq!(json.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON object");
    assert_eq!(report["ok"], false);
    let intent = report["checks"].as_array().unwrap().iter().find(|c| c["check"] == "discord_intent").unwrap();
    assert_eq!(intent["status"], "fail");
    assert_eq!(intent["blocks_bot"], true);
}

/// What `oraculo bot` says when it refuses to start.
async fn bot_start_error(config: Config) -> String {
    let started = tokio::time::timeout(WAIT, oraculo::discord::run(config, std::future::pending())).await;
    format!("{:#}", started.expect("refused at once").expect_err("refused"))
}
