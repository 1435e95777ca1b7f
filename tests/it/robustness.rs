//! Bad input and interrupted ingests: warnings that name the file, and an index that stays
//! usable whatever happens midway.

use std::process::Stdio;
use std::time::Duration;

use oraculo::index::Bm25Unit;
use oraculo::index::Index;

use crate::fake_ollama::{FakeOllama, Fault};
use crate::harness::{CountingEmbedder, Scratch, campaign_config, ingest_dir, ollama_embedder, prose, sessions};

fn warning_for<'a>(summary: &'a oraculo::ingest::IngestSummary, path: &str) -> &'a str {
    summary
        .warnings
        .iter()
        .find(|w| w.path == path)
        .map(|w| w.message.as_str())
        .unwrap_or_else(|| panic!("no warning for {path}: {:#?}", summary.warnings))
}

#[tokio::test]
async fn bad_input_is_reported_by_file_and_the_ingest_goes_on() {
    let scratch = Scratch::new(&[
        ("Sesiones/Sesion 1.md", "# Sesión 1\nLos héroes zarpan.\n"),
        ("vacia.md", ""),
        ("solo espacios.md", "  \n\n \n"),
        ("sin cabeceras.md", "Texto sin ninguna cabecera, solo prosa del mundo.\n"),
        ("roto.md", "---\ntitle: [sin cerrar\n---\nEl texto se conserva.\n"),
        ("Sesiones/Sesion 2.md", "# Sesión 2\nPrimera versión.\n"),
        ("Otras/Sesión 2.md", "# Sesión 2\nSegunda versión.\n"),
    ]);
    std::fs::write(scratch.campaign.path().join("binario.md"), [0x89, b'P', b'N', b'G', 0, 0, 1, 2]).unwrap();
    std::fs::write(scratch.campaign.path().join("latin1.md"), b"# Notas\nCaf\xe9 del puerto.\n").unwrap();
    let huge = std::fs::File::create(scratch.campaign.path().join("enorme.md")).unwrap();
    huge.set_len(50 * 1024 * 1024).unwrap();
    let mut deep = String::new();
    for level in 0..40 {
        deep.push_str(&format!("nivel{level}/"));
    }
    scratch.write(&format!("{deep}profunda.md"), "# Profunda\nUna nota muy escondida.\n");
    std::os::unix::fs::symlink(scratch.campaign.path(), scratch.campaign.path().join("bucle")).unwrap();

    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    let summary = ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), &embedder)
        .await
        .expect("bad notes never abort an ingest");

    assert!(warning_for(&summary, "vacia.md").contains("empty"));
    assert!(warning_for(&summary, "solo espacios.md").contains("empty"));
    assert!(warning_for(&summary, "binario.md").contains("binary"));
    assert!(warning_for(&summary, "latin1.md").contains("UTF-8"));
    assert!(warning_for(&summary, "enorme.md").contains("limit"));
    assert!(warning_for(&summary, "bucle").contains("loop"));
    assert!(!warning_for(&summary, "roto.md").is_empty());
    assert!(warning_for(&summary, "Sesiones/Sesion 2.md").contains("Otras/Sesión 2.md"));

    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    let sources = index.store.sources().unwrap();
    let labels: Vec<&str> = sources.iter().map(|s| s.label.as_str()).collect();
    // Both claims to session 2 are kept, under labels that tell them apart.
    let session_2: Vec<&&str> = labels.iter().filter(|l| l.starts_with("Sesión 2")).collect();
    assert_eq!(session_2.len(), 2, "{labels:?}");
    assert_ne!(session_2[0], session_2[1]);
    // The broken front matter's text, the headerless note, the deep note and the Latin-1
    // note are all kept.
    assert_eq!(index.store.match_fts(Bm25Unit::Fragment, "conserva", None, 5).unwrap().len(), 1);
    assert_eq!(index.store.match_fts(Bm25Unit::Fragment, "prosa", None, 5).unwrap().len(), 1);
    assert_eq!(index.store.match_fts(Bm25Unit::Fragment, "escondida", None, 5).unwrap().len(), 1);
    assert_eq!(index.store.match_fts(Bm25Unit::Fragment, "puerto", None, 5).unwrap().len(), 1);
    // The stored diagnostics are what `sources` shows later.
    assert_eq!(index.store.diagnostics().unwrap().len(), summary.warnings.len());
}

#[tokio::test]
async fn a_failure_midway_leaves_the_old_index_and_the_next_run_completes_it() {
    let scratch = Scratch::of(&sessions(1..=6, |n| format!("viejo{n} {}\n", prose("v", 20))));
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let config = campaign_config(&[]);
    let healthy = ollama_embedder(&fake, "bge-m3").await;
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, &healthy).await.unwrap();

    // Every session changes; the embedder dies on its second call (batches of 4 windows).
    for (path, text) in sessions(1..=6, |n| format!("nuevo{n} {}\n", prose("n", 20))) {
        scratch.write(&path, &text);
    }
    let dying = CountingEmbedder::failing_from(ollama_embedder(&fake, "bge-m3").await, 1);
    let err = ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, dying.as_ref()).await.unwrap_err();
    assert!(err.to_string().contains("previous index is unchanged"), "{err}");

    // The old index answers exactly as before: old text found, new text not visible.
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    assert_eq!(index.store.match_fts(Bm25Unit::Fragment, "viejo3", None, 5).unwrap().len(), 1);
    assert!(index.store.match_fts(Bm25Unit::Fragment, "nuevo3", None, 5).unwrap().is_empty());
    assert_eq!(index.store.sources().unwrap().len(), 6);
    drop(index);

    // The next run embeds only what the failed run did not commit.
    let retry = CountingEmbedder::new(ollama_embedder(&fake, "bge-m3").await);
    let summary = ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, retry.as_ref()).await.unwrap();
    assert_eq!(dying.texts(), 4, "the first batch was committed before the failure");
    assert_eq!(summary.windows_embedded, 2, "only the two windows the failed run never stored");
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    assert_eq!(index.store.match_fts(Bm25Unit::Fragment, "nuevo3", None, 5).unwrap().len(), 1);
    let table = index.vector_table().unwrap().unwrap();
    assert_eq!(index.vectors.count_rows(&table).await.unwrap(), 6, "the old vectors were dropped");
}

#[tokio::test]
async fn killing_the_ingest_process_midway_leaves_a_usable_index() {
    let files = sessions(1..=12, |n| format!("marea{n} {}\n", prose("m", 30)));
    let scratch = Scratch::of(&files[..6]);
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let config_file = scratch.data.path().join("config.toml");
    std::fs::write(&config_file, "[embedder]\nbackend = \"ollama\"\nbatch_size = 4\nwindow_words = 250\n").unwrap();
    let run = |json: bool| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_oraculo"));
        command
            .args(["ingest", "--no-annotate", "--campaign"])
            .arg(scratch.campaign.path())
            .arg("--data")
            .arg(scratch.data.path())
            .arg("--config")
            .arg(&config_file)
            .env("ORACULO_OLLAMA_URL", fake.url())
            .env_remove("ORACULO_CONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if json {
            command.arg("--json");
        }
        command
    };
    let first = run(true).output().await.unwrap();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));

    // Six more sessions; Ollama stalls after the probe and one batch, and the process is
    // killed while it waits.
    for (path, text) in &files[6..] {
        scratch.write(path, text);
    }
    let served_before = fake.requests().len();
    fake.enqueue(Fault::Delay(Duration::ZERO)); // the probe
    fake.enqueue(Fault::Delay(Duration::ZERO)); // the first batch of four
    fake.enqueue(Fault::Delay(Duration::from_secs(60)));
    let mut child = run(true).spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while fake.requests().len() < served_before + 3 {
        assert!(std::time::Instant::now() < deadline, "the ingest never reached its third request");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().await.unwrap();

    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    assert_eq!(index.store.sources().unwrap().len(), 6, "the killed run made nothing visible");
    assert_eq!(index.store.match_fts(Bm25Unit::Fragment, "marea3", None, 5).unwrap().len(), 1);
    assert!(index.store.match_fts(Bm25Unit::Fragment, "marea9", None, 5).unwrap().is_empty());
    drop(index);

    let resumed = run(true).output().await.unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(summary["windows_embedded"], 2, "four of the six new windows were already stored: {summary}");
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    assert_eq!(index.store.sources().unwrap().len(), 12);
    let table = index.vector_table().unwrap().unwrap();
    assert_eq!(index.vectors.count_rows(&table).await.unwrap(), 12);
}

#[tokio::test]
async fn a_second_ingest_of_the_same_campaign_is_refused_while_one_runs() {
    let scratch = Scratch::new(&[("a.md", "# A\ntexto\n")]);
    let index = Index::open(&scratch.index_dir()).await.unwrap();
    let _held = index.lock_for_ingest().unwrap();
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    let err =
        ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), &embedder).await.unwrap_err();
    assert!(err.to_string().contains("another ingest"), "{err}");
}

/// A command that only prints, whose reader has gone (`oraculo secrets | head -0`), ends as
/// any Unix tool does, by SIGPIPE, instead of panicking «failed printing to stdout».
#[cfg(unix)]
#[test]
fn a_printing_command_ends_quietly_when_its_reader_is_gone() {
    use std::os::unix::process::ExitStatusExt;
    let data = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    // The reader is gone before the command writes a word.
    drop(reader);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_oraculo"))
        .args(["secrets", "--data"])
        .arg(data.path())
        .env_remove("ORACULO_CONFIG")
        .env_remove("ORACULO_CAMPAIGN")
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(output.status.signal(), Some(libc::SIGPIPE), "{:?}: {stderr}", output.status);
}
