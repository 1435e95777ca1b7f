//! The embedded embedder end to end: real e5-small weights, real LanceDB rows.

use oraculo::index::Index;
use oraculo::llm::{EmbedRole, Embedder};

use crate::harness::{Scratch, campaign_config, e5, ingest_dir, prose};

#[tokio::test]
async fn embedded_e5_ingest_writes_one_row_per_window_and_finds_a_paraphrase() {
    let scratch = Scratch::new(&[
        ("Sesiones/Sesion 1.md", "# Sesión 1\nEl capitán Ardo cayó en combate defendiendo el puente del río.\n"),
        ("Sesiones/Sesion 2.md", "# Sesión 2\nEn el mercado compraron cuerdas, antorchas y pan para el viaje.\n"),
        ("Sesiones/Sesion 3.md", &format!("# Sesión 3\n{}\n", prose("palabra", 300))),
    ]);
    let embedder = e5();
    let summary =
        ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), &embedder).await.unwrap();
    assert_eq!(summary.fragments, 3);
    // 300 words in windows of 250 overlapping by 50: two windows for session 3.
    assert_eq!(summary.windows_embedded, 4);

    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    let table = index.vector_table().unwrap().unwrap();
    assert_eq!(table, "vectors_e5_small_q4_384");
    assert_eq!(index.vectors.count_rows(&table).await.unwrap(), 4);

    let query = embedder.embed(&["¿Quién murió?".to_string()], EmbedRole::Query).await.unwrap().remove(0);
    let hits = index.vectors.search(&table, &query, None, 4).await.unwrap();
    let fragments = index.store.fragments(None).unwrap();
    let best = fragments.iter().find(|f| f.fragment.content_hash == hits[0].content_hash).unwrap();
    assert_eq!(best.fragment.label, "Sesión 1", "hits: {hits:?}");
}
