//! Issue 12, "never show a player what the DM marked secret": each way a secret could reach a
//! player, attacked through the real index.

use std::sync::Arc;
use std::time::Duration;

use oraculo::index::Index;
use oraculo::llm::chat::ChatModel;
use oraculo::llm::ollama_chat::OllamaChat;
use oraculo::oracle::{AnswerSettings, AskRequest, Oracle, Pipeline};
use oraculo::retrieve::{Audience, CompendiumIndex, PathSet, SearchRequest, search};

use crate::answer::chat_config;
use crate::fake_ollama::FakeOllama;
use crate::support::{Scratch, campaign_config, ingest_dir, ollama_embedder};

/// A word found only in GM-only text.
const CANARY: &str = "Umbravela";

#[tokio::test]
async fn issue_12_a_reingest_between_search_and_answer_shows_no_secret() {
    // One chronicle: its fragments hold the highest ids, the ones a plain rowid hands out again.
    let scratch = Scratch::new(&[(
        "Crónica.md",
        "## Sesión 1\nEl grupo llega al puerto de Galerna.\n\n## Sesión 2\nEl grupo conoce al capitán del faro.\n",
    )]);
    let fake = FakeOllama::start(&["bge-m3", "qwen2.5:14b"]).await;
    let embedder = Arc::new(ollama_embedder(&fake, "bge-m3").await);
    let config = campaign_config(&[]);
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, embedder.as_ref()).await.unwrap();
    let chat: Arc<dyn ChatModel> = Arc::new(OllamaChat::new(chat_config(fake.url(), Duration::from_secs(10))).unwrap());
    let oracle = Oracle::new(&scratch.index_dir(), embedder.clone(), chat, AnswerSettings::new(256));

    // A player searches…
    let question = "¿Quién es el capitán del faro?";
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    let compendium = CompendiumIndex::load(&index.store).unwrap();
    let request = SearchRequest { question, history: &[], audience: Audience::Player, k: 8, paths: PathSet::ALL };
    let searched = search(&index, &compendium, embedder.as_ref(), &request).await.unwrap();
    assert!(searched.candidates.iter().any(|c| c.label == "Sesión 2"), "{:?}", searched.candidates);

    // …the DM rewrites the chronicle and reingests before the answer is prepared: session 2 is
    // gone and session 1 has a GM-only part, which a reused id would hand to "Sesión 2".
    scratch.write(
        "Crónica.md",
        &format!(
            "## Sesión 1\nEl grupo llega al puerto de Galerna.\n%%El capitán del faro es {CANARY}, el traidor.%%\n"
        ),
    );
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, embedder.as_ref()).await.unwrap();

    let ask = AskRequest { question, history: &[], audience: Audience::Player };
    let prepared = oracle.prepare_from_search(&index, &compendium, &ask, searched, false).await.unwrap();
    assert!(!prepared.context.text.contains(CANARY), "{}", prepared.context.text);
    for shown in &prepared.context.full {
        assert!(!shown.text.contains(CANARY), "{}", shown.text);
    }
    // Nothing the stale search found is shown: each id now holds other text or none.
    assert!(prepared.context.full.is_empty(), "{:?}", prepared.context.full);
    fake.enqueue_reply("El capitán del faro [Sesión 2] [Sesión 1].");
    let answer = oracle.generate(&prepared, None).await.unwrap();
    for citation in &answer.citations {
        assert!(!citation.excerpt.as_deref().unwrap_or("").contains(CANARY), "{citation:?}");
    }

    // A fresh search after the reingest finds the new player text, never the secret.
    let no_rerank = Pipeline { paths: PathSet::ALL, rerank: false };
    let fresh = oracle.prepare(&index, &compendium, &ask, no_rerank).await.unwrap();
    assert!(!fresh.context.text.contains(CANARY), "{}", fresh.context.text);
    assert!(fresh.context.full.iter().any(|shown| shown.label == "Sesión 1"), "{:?}", fresh.context.full);
}

#[tokio::test]
async fn issue_12_hidden_folders_are_never_read_even_with_an_empty_ignore_list() {
    let scratch = Scratch::new(&[
        ("Sesiones/Sesion 1.md", "# Sesión 1\nEl grupo llega al puerto.\n"),
        (".trash/Sesion 2.md", &format!("# Sesión 2\nBorrado: {CANARY}.\n")),
        ("Notas/.borrador/idea.md", &format!("# Idea\n{CANARY} a medias.\n")),
        ("Notas/.oculto.md", &format!("# Oculto\n{CANARY}.\n")),
    ]);
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    let mut config = campaign_config(&[]);
    config.ignore = vec!["Borradores".to_string()];
    let summary = ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, &embedder).await.unwrap();
    assert_eq!(summary.files, 1, "{summary:#?}");
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    for stored in index.store.fragments(None).unwrap() {
        assert!(!stored.fragment.text.contains(CANARY), "{}", stored.fragment.source_path);
    }
}

#[cfg(unix)]
#[tokio::test]
async fn issue_12_the_index_is_its_owners_alone() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new(&[("Secretos/Plan.md", &format!("# Plan\n{CANARY}.\n"))]);
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    // A data dir that does not exist yet: created private, like everything under it.
    let data_dir = scratch.data.path().join("oraculo");
    let index_dir = oraculo::index::campaign_index_dir(&data_dir, scratch.campaign.path());
    ingest_dir(&index_dir, scratch.campaign.path(), &campaign_config(&["Secretos"]), &embedder).await.unwrap();
    let mode = |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    for dir in [data_dir.clone(), data_dir.join("campaigns"), index_dir.clone()] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
    for file in [index_dir.join("index.sqlite"), index_dir.join("ingest.lock")] {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }

    // An index from before (world-readable) is made private when it is opened again.
    std::fs::set_permissions(&index_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(index_dir.join("index.sqlite"), std::fs::Permissions::from_mode(0o644)).unwrap();
    drop(Index::open_existing(&index_dir).await.unwrap());
    assert_eq!(mode(&index_dir), 0o700);
    assert_eq!(mode(&index_dir.join("index.sqlite")), 0o600);
}
