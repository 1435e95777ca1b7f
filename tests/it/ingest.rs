//! Ingest into real SQLite + LanceDB: labels, FTS, vectors, GM flags, incremental re-ingest.

use oraculo::corpus::Visibility;
use oraculo::index::Bm25Unit;
use oraculo::index::Index;

use crate::fake_ollama::{FAKE_DIMENSION, FakeOllama};
use crate::harness::{CountingEmbedder, Scratch, campaign_config, ingest_dir, ollama_embedder, prose};

const CRONICA: &str = "# Crónica de Galerna

Notas de la campaña.

## Sesión 1 — El puerto
Los héroes llegan al puerto de Galerna. Norkiel les vende un mapa.

## Sesión 2 — La tormenta
Una tormenta hunde el barco. Ya lo vimos en la sesión 1: el mapa era falso.
%%Norkiel trabaja para el archiduque.%%

## Sesión 3: El faro
El dragón blanco ataca el faro.
";

const BAIKA: &str = "---
aliases: [La Tejedora]
---
# Baika
Hechicera del gremio. Odia al archiduque.
";

fn mini() -> Scratch {
    Scratch::new(&[
        ("Crónica.md", CRONICA),
        ("PNJs/Baika.md", BAIKA),
        ("Lugares/Galerna.md", "# Galerna\nCiudad portuaria del norte.\n"),
        ("Secretos/Plan.md", "# El plan\nEl archiduque quiere el trono.\n"),
    ])
}

#[tokio::test]
async fn ingest_labels_fragments_fts_vectors_and_gm_flags() {
    let scratch = mini();
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    let summary = ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&["Secretos"]), &embedder)
        .await
        .unwrap();
    assert_eq!(summary.files, 4);
    assert_eq!(summary.sessions, 3, "{summary:#?}");
    assert_eq!(summary.sheets, 1);
    // The chronicle's preamble, Galerna and the secret plan.
    assert_eq!(summary.world_documents, 3, "{summary:#?}");
    // The %% comment and the secret folder.
    assert_eq!(summary.dm_only_fragments, 2, "{summary:#?}");

    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    let sources = index.store.sources().unwrap();
    let labels: Vec<&str> = sources.iter().map(|s| s.label.as_str()).collect();
    for expected in ["Sesión 1", "Sesión 2", "Sesión 3", "Ficha: Baika", "Mundo: Galerna"] {
        assert!(labels.contains(&expected), "{expected} missing from {labels:?}");
    }
    let session_2 = sources.iter().find(|s| s.label == "Sesión 2").unwrap();
    assert_eq!(session_2.source_path, "Crónica.md");
    assert_eq!(session_2.session.map(|s| s.0), Some(2));

    // Accent-less queries find accented text.
    let hits = index.store.match_fts(Bm25Unit::Fragment, "dragon", None, 10).unwrap();
    assert_eq!(hits.len(), 1);
    let hits = index.store.match_fts(Bm25Unit::Fragment, "tormenta", None, 10).unwrap();
    assert_eq!(hits.len(), 1);

    // GM flags: the secret comment is stored apart from the player text, flagged.
    let player = index.store.fragments(Some(Visibility::Player)).unwrap();
    assert!(player.iter().all(|f| !f.fragment.text.contains("trabaja para el archiduque")));
    assert!(player.iter().all(|f| !f.fragment.text.contains("quiere el trono")));
    let dm_only = index.store.fragments(Some(Visibility::DmOnly)).unwrap();
    assert!(
        dm_only
            .iter()
            .any(|f| f.fragment.text.contains("trabaja para el archiduque") && f.fragment.label == "Sesión 2")
    );
    assert!(dm_only.iter().any(|f| f.fragment.text.contains("quiere el trono")));
    assert!(index.store.match_fts(Bm25Unit::Fragment, "trono", Some(Visibility::Player), 10).unwrap().is_empty());
    assert_eq!(index.store.match_fts(Bm25Unit::Fragment, "trono", None, 10).unwrap().len(), 1);

    // One vector row per window: every fragment here is one window.
    let table = index.vector_table().unwrap().expect("the ingest recorded its vector table");
    assert_eq!(index.vectors.count_rows(&table).await.unwrap(), summary.fragments);
    assert_eq!(summary.windows_embedded, summary.fragments);
    assert!(table.contains(&FAKE_DIMENSION.to_string()));
}

#[tokio::test]
async fn reingest_embeds_only_what_changed_and_forgets_deleted_files() {
    let scratch = mini();
    scratch.write("Sesiones/Sesion 4.md", &format!("# Sesión 4\n{}\n", prose("larga", 600)));
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = CountingEmbedder::new(ollama_embedder(&fake, "bge-m3").await);
    let config = campaign_config(&["Secretos"]);
    let first = ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, embedder.as_ref()).await.unwrap();
    // 600 words in windows of 250 overlapping by 50: three windows for session 4.
    assert_eq!(first.windows_embedded, first.fragments - 1 + 3);

    let before = embedder.calls();
    let unchanged =
        ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, embedder.as_ref()).await.unwrap();
    assert_eq!(embedder.calls(), before, "an unchanged campaign costs no embedding call");
    assert_eq!((unchanged.files_changed, unchanged.windows_embedded, unchanged.embedding_calls), (0, 0, 0));

    // Touch one file: only its fragment is embedded again.
    scratch.write("Lugares/Galerna.md", "# Galerna\nCiudad portuaria del norte, ahora en llamas.\n");
    let texts_before = embedder.texts();
    let touched = ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, embedder.as_ref()).await.unwrap();
    assert_eq!(touched.files_changed, 1);
    assert_eq!(embedder.texts() - texts_before, 1);
    assert_eq!(touched.vectors_dropped, 1, "the old Galerna vector is an orphan now");
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    assert_eq!(index.store.match_fts(Bm25Unit::Fragment, "llamas", None, 10).unwrap().len(), 1);

    // Delete a file: its fragments, FTS rows and vectors go.
    std::fs::remove_file(scratch.campaign.path().join("Sesiones/Sesion 4.md")).unwrap();
    let deleted = ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, embedder.as_ref()).await.unwrap();
    assert_eq!(deleted.files_removed, 1);
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    assert!(index.store.sources().unwrap().iter().all(|s| s.label != "Sesión 4"));
    assert!(index.store.match_fts(Bm25Unit::Fragment, "larga5", None, 10).unwrap().is_empty());
    let table = index.vector_table().unwrap().unwrap();
    assert_eq!(index.vectors.count_rows(&table).await.unwrap(), deleted.fragments);
}

#[tokio::test]
async fn switching_embedder_reembeds_cleanly() {
    let scratch = mini();
    let fake = FakeOllama::start(&["bge-m3", "nomic-embed-text"]).await;
    let config = campaign_config(&[]);
    let first = ollama_embedder(&fake, "bge-m3").await;
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, &first).await.unwrap();
    let second = CountingEmbedder::new(ollama_embedder(&fake, "nomic-embed-text").await);
    let summary = ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, second.as_ref()).await.unwrap();
    assert_eq!(summary.windows_embedded, summary.fragments, "every fragment is embedded again");
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    let table = index.vector_table().unwrap().unwrap();
    assert!(table.contains("nomic"), "{table}");
    let bge_table = oraculo::index::vector_table_name("ollama:bge-m3", crate::fake_ollama::FAKE_DIMENSION);
    assert_eq!(index.vectors.count_rows(&bge_table).await.unwrap(), 0, "the old embedder's table is gone");
}

#[tokio::test]
async fn ollama_down_or_model_missing_reads_as_a_fix() {
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let config = |url: String, model: &str| oraculo::llm::embed::ollama::OllamaEmbedderConfig {
        server: oraculo::llm::ModelServer {
            url,
            model: model.into(),
            timeout: std::time::Duration::from_secs(5),
            retries: 0,
        },
        batch_size: 4,
        window_words: None,
    };
    let err = oraculo::llm::embed::ollama::OllamaEmbedder::connect(config(fake.url(), "mxbai")).await.unwrap_err();
    assert!(err.to_string().contains("ollama pull mxbai"), "{err}");

    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let err = oraculo::llm::embed::ollama::OllamaEmbedder::connect(config(format!("http://{closed}"), "bge-m3"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ollama serve"), "{err}");
}

#[tokio::test]
async fn ollama_retries_a_transient_error() {
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let mut cfg = oraculo::llm::embed::ollama::OllamaEmbedderConfig {
        server: oraculo::llm::ModelServer {
            url: fake.url(),
            model: "bge-m3".into(),
            timeout: std::time::Duration::from_secs(5),
            retries: 2,
        },
        batch_size: 4,
        window_words: None,
    };
    fake.enqueue(crate::fake_ollama::Fault::Status(500, "loading model".into()));
    let embedder =
        oraculo::llm::embed::ollama::OllamaEmbedder::connect(cfg.clone()).await.expect("second attempt succeeds");
    assert_eq!(oraculo::llm::Embedder::dimension(&embedder), FAKE_DIMENSION);
    cfg.server.retries = 0;
    fake.enqueue(crate::fake_ollama::Fault::BadJson);
    let err = oraculo::llm::embed::ollama::OllamaEmbedder::connect(cfg).await.unwrap_err();
    assert!(err.to_string().contains("does not parse"), "{err}");
}

/// A note saved many times leaves no trail of annotations: the extractive ones of texts no
/// fragment holds are removed at each ingest, and the model's orphans are kept only up to a
/// bound (an edit undone still finds its annotation).
#[tokio::test]
async fn annotations_of_texts_gone_do_not_pile_up() {
    let scratch = Scratch::new(&[("Sesión 1.md", "# Sesión 1\nEl faro de Norkiel, la primera vez.\n")]);
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    let config = campaign_config(&[]);
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, &embedder).await.unwrap();
    let count = |model: &str| -> i64 {
        let sqlite = rusqlite::Connection::open(scratch.index_dir().join("index.sqlite")).unwrap();
        sqlite.query_row("SELECT count(*) FROM annotations WHERE model = ?1", [model], |row| row.get(0)).unwrap()
    };
    // A model annotated the first version.
    {
        let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
        let hashes = index.store.content_hashes().unwrap();
        index.store.put_annotation(&hashes[0], "qwen2.5:14b", "annotate.v1", "El faro de Norkiel.").unwrap();
    }
    let mut pruned = 0;
    for save in 2..=80 {
        scratch.write("Sesión 1.md", &format!("# Sesión 1\nEl faro de Norkiel, guardado {save} veces.\n"));
        let summary = ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, &embedder).await.unwrap();
        pruned += summary.annotations_pruned;
    }
    assert_eq!(count(oraculo::index::store::EXTRACTIVE_ANNOTATOR), 1, "one extractive annotation, the current text's");
    assert_eq!(count("qwen2.5:14b"), 1, "the model's orphan is kept, under the bound");
    assert_eq!(pruned, 79, "each save removed the extractive annotation of the text it replaced");
    // A hundred more orphans (texts long gone): the oldest beyond the bound are removed.
    {
        let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
        for gone in 0..100 {
            index.store.put_annotation(&format!("gone-{gone}"), "qwen2.5:14b", "annotate.v1", "…").unwrap();
        }
    }
    scratch.write("Sesión 1.md", "# Sesión 1\nEl faro de Norkiel, por última vez.\n");
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &config, &embedder).await.unwrap();
    assert_eq!(count("qwen2.5:14b"), oraculo::index::store::ORPHANED_ANNOTATIONS_KEPT as i64);
}
