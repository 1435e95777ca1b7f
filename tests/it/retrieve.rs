//! Retrieval on the Obsidian-vault fixture, embedded with the real e5 model once and shared.

use std::path::PathBuf;

use oraculo::corpus::Visibility;
use oraculo::index::Index;
use oraculo::llm::embed::e5::E5Embedder;
use oraculo::retrieve::{
    Audience, CompendiumIndex, DEFAULT_K, PathSet, SearchRequest, SearchResult, Turn, TurnRole, path_depth, search,
};
use tempfile::TempDir;
use tokio::sync::OnceCell;

use crate::fake_ollama::FakeOllama;
use crate::harness::{Scratch, campaign_config, fixture, ingest_dir, ollama_embedder};

struct Shared {
    _data: TempDir,
    index_dir: PathBuf,
    embedder: E5Embedder,
}

static VAULT: OnceCell<Shared> = OnceCell::const_new();

/// The `boveda` fixture, ingested once for every test here (e5 in a debug build is slow).
async fn vault() -> &'static Shared {
    VAULT
        .get_or_init(|| async {
            let data = TempDir::new().unwrap();
            let embedder = crate::harness::e5();
            let index_dir = oraculo::index::campaign_index_dir(data.path(), &fixture("boveda"));
            ingest_dir(&index_dir, &fixture("boveda"), &campaign_config(&["Secretos"]), &embedder).await.unwrap();
            Shared { _data: data, index_dir, embedder }
        })
        .await
}

async fn ask(question: &str, history: &[Turn], audience: Audience) -> SearchResult {
    let shared = vault().await;
    let index = Index::open_existing(&shared.index_dir).await.unwrap();
    let compendium = CompendiumIndex::load(&index.store, audience).unwrap();
    let request = SearchRequest { question, history, audience, k: DEFAULT_K, paths: PathSet::ALL };
    search(&index, &compendium, &shared.embedder, &request).await.unwrap()
}

fn labels(result: &SearchResult, path: fn(&oraculo::retrieve::PathRanks) -> Option<usize>) -> Vec<String> {
    let mut found: Vec<(usize, String)> =
        result.candidates.iter().filter_map(|c| path(&c.ranks).map(|rank| (rank, c.label.to_string()))).collect();
    found.sort();
    found.into_iter().map(|(_, label)| label).collect()
}

#[tokio::test]
async fn a_paraphrase_is_found_by_the_dense_path_alone() {
    // Session 5 says Tomás "cayó en combate"; no note says "murió".
    let result = ask("¿Quién murió defendiendo el puente?", &[], Audience::Player).await;
    let dense = labels(&result, |r| r.dense);
    assert!(dense.iter().take(3).any(|l| l == "Sesión 5"), "dense: {dense:?}");
    let session_5 = result.candidates.iter().find(|c| c.label == "Sesión 5").unwrap();
    let only_words = ask("¿Quién murió?", &[], Audience::Player).await;
    assert!(labels(&only_words, |r| r.bm25).is_empty(), "no note has the word: BM25 finds nothing");
    assert!(session_5.ranks.dense.is_some());
}

#[tokio::test]
async fn an_invented_name_is_nailed_by_bm25() {
    let result = ask("¿Quién es Ulrico?", &[], Audience::Player).await;
    assert_eq!(labels(&result, |r| r.bm25), vec!["Sesión 3"]);
    assert!(result.entities.is_empty(), "Ulrico has no sheet: not an entity");
}

#[tokio::test]
async fn the_entity_path_brings_every_session_where_an_alias_appears() {
    // "La Tejedora" is a front-matter alias of Baika, who appears in all six sessions.
    let result = ask("¿Qué sabemos de la Tejedora?", &[], Audience::Player).await;
    assert_eq!(result.entities.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), vec!["Baika"]);
    let by_entity = labels(&result, |r| r.entity);
    for session in 1..=6 {
        let label = format!("Sesión {session}");
        assert!(by_entity.contains(&label), "{label} missing from {by_entity:?}");
    }
    assert!(by_entity.contains(&"Ficha: Baika".to_string()), "{by_entity:?}");
}

#[tokio::test]
async fn aliases_from_front_matter_and_links_resolve_without_case_or_accents() {
    for (question, entity) in [
        ("¿Dónde vive la tejedora?", "Baika"),
        ("háblame de BAIKA", "Baika"),
        ("¿qué es el dragon blanco?", "Vaskrith"),
        ("¿y vaskrith?", "Vaskrith"),
        ("¿A quién reza norkiel?", "Norkiel"),
    ] {
        let result = ask(question, &[], Audience::Player).await;
        assert!(result.entities.iter().any(|e| e.name == entity), "{question}: {:?}", result.entities);
    }
}

#[tokio::test]
async fn players_never_get_gm_only_fragments_from_any_path() {
    // "Umbravela" exists only in GM secrets.
    let player = ask("¿Qué es la Orden de Umbravela?", &[], Audience::Player).await;
    assert!(player.candidates.iter().all(|c| c.visibility == Visibility::Player), "{:#?}", player.candidates);
    let gm = ask("¿Qué es la Orden de Umbravela?", &[], Audience::Gm).await;
    let secret = gm.candidates.iter().find(|c| c.visibility == Visibility::DmOnly && c.ranks.bm25 == Some(1));
    assert!(secret.is_some(), "GM mode finds the secret by BM25: {:#?}", gm.candidates);
    // A generic question in player mode: not one GM-only candidate, whatever the path.
    for question in ["¿Qué pasó con Baika?", "secreto", "¿Quién traicionó al grupo?"] {
        let result = ask(question, &[], Audience::Player).await;
        assert!(result.candidates.iter().all(|c| c.visibility == Visibility::Player), "{question}");
    }
}

#[tokio::test]
async fn a_follow_up_is_searched_with_the_previous_question() {
    let history = vec![
        Turn { role: TurnRole::User, content: "¿Qué le pasó a Tomás Quebrahierro en el puente?".into() },
        Turn { role: TurnRole::Assistant, content: "Cayó en combate.".into() },
    ];
    let result = ask("¿Y después?", &history, Audience::Player).await;
    assert!(result.followup_expanded);
    assert!(result.search_query.contains("Quebrahierro"), "{}", result.search_query);
    assert_eq!(result.question, "¿Y después?");
    // A name in the question wins: no expansion.
    let named = ask("¿y qué hizo Baika?", &history, Audience::Player).await;
    assert!(!named.followup_expanded);
}

#[tokio::test]
async fn every_path_respects_the_depth_rule_and_the_pool_its_cap() {
    // Over 40 fragments, in three groups the paths find apart (Baika's rumours by entity, the
    // bridge's places by their words, twenty sessions by number), so that the depth of each
    // path and the pool's cap both bind.
    let mut files: Vec<(String, String)> = vec![("PNJs/Baika.md".into(), "# Baika\nHechicera del gremio.\n".into())];
    for n in 1..=20 {
        files.push((format!("Mundo/Rumor {n}.md"), format!("# Rumor {n}\nDicen que Baika guarda el secreto {n}.\n")));
        files.push((format!("Mundo/Lugar {n}.md"), format!("# Lugar {n}\nEl puente de la estatua número {n}.\n")));
        files.push((format!("Sesiones/Sesion {n}.md"), format!("# Sesión {n}\nLa partida viaja al norte {n}.\n")));
    }
    let files: Vec<(&str, &str)> = files.iter().map(|(path, text)| (path.as_str(), text.as_str())).collect();
    let scratch = Scratch::new(&files);
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    let summary =
        ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), &embedder).await.unwrap();
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    let compendium = CompendiumIndex::load(&index.store, Audience::Gm).unwrap();
    let k = DEFAULT_K;
    let request = SearchRequest {
        question: "Baika puente estatua en las sesiones 1 a 12",
        history: &[],
        audience: Audience::Gm,
        k,
        paths: PathSet::ALL,
    };
    let result = search(&index, &compendium, &embedder, &request).await.unwrap();
    assert!(summary.fragments > oraculo::retrieve::MAX_POOL, "{summary:?}");
    assert!(!result.candidates.is_empty());
    for candidate in &result.candidates {
        for rank in [candidate.ranks.dense, candidate.ranks.bm25, candidate.ranks.entity].into_iter().flatten() {
            assert!(rank <= path_depth(k), "{candidate:?}");
        }
    }
    // The depth binds: each path had more than it may bring, and stopped at its depth.
    let lengths = result.diagnostics.path_lengths;
    assert_eq!([lengths.dense, lengths.bm25, lengths.entity], [path_depth(k); 3], "{lengths:?}");
    assert!(result.candidates.len() <= oraculo::retrieve::MAX_POOL);
    // The cap binds: the paths brought more than the pool holds.
    assert_eq!(result.candidates.len(), oraculo::retrieve::MAX_POOL, "{lengths:?}");
    // Fused order: scores never increase, past the sessions the question names (they lead).
    let named = &result.time.named_sessions;
    assert!(!named.is_empty(), "{:?}", result.time);
    let fused: Vec<f64> = result
        .candidates
        .iter()
        .filter(|c| c.session.is_none_or(|session| !named.contains(&session)))
        .map(|c| c.rrf_score)
        .collect();
    assert!(fused.windows(2).all(|w| w[0] >= w[1]), "{fused:?}");
}

#[tokio::test]
async fn an_empty_fts_index_degrades_to_the_other_paths() {
    let scratch = Scratch::new(&[
        ("PNJs/Baika.md", "# Baika\nHechicera del gremio.\n"),
        ("Sesiones/Sesion 1.md", "# Sesión 1\nBaika vende redes en el puerto.\n"),
    ]);
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), &embedder).await.unwrap();
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    index.store.connection().execute("INSERT INTO fragments_fts (fragments_fts) VALUES ('delete-all')", []).unwrap();
    let compendium = CompendiumIndex::load(&index.store, Audience::Player).unwrap();
    let request = SearchRequest {
        question: "¿Qué vende Baika?",
        history: &[],
        audience: Audience::Player,
        k: 8,
        paths: PathSet::ALL,
    };
    let result = search(&index, &compendium, &embedder, &request).await.unwrap();
    assert!(result.candidates.iter().all(|c| c.ranks.bm25.is_none()));
    assert!(
        result.candidates.iter().any(|c| c.label == "Sesión 1" && c.ranks.dense.is_some() && c.ranks.entity.is_some())
    );
}

#[tokio::test]
async fn the_search_command_prints_its_json_contract() {
    let scratch = Scratch::new(&[
        ("PNJs/Baika.md", "---\naliases: [La Tejedora]\n---\n# Baika\nHechicera del gremio.\n"),
        ("Sesiones/Sesion 1.md", "# Sesión 1\nLa Tejedora vende redes en el puerto.\n"),
        ("Sesiones/Sesion 2.md", "# Sesión 2\nUna tormenta.\n"),
    ]);
    let fake = FakeOllama::start(&["bge-m3"]).await;
    let oraculo = |args: &[&str]| crate::harness::oraculo_command(&scratch, &fake, args);
    let mut ingest = oraculo(&["ingest", "--no-annotate", "--json"]);
    let ingest = tokio::task::spawn_blocking(move || ingest.output().unwrap()).await.unwrap();
    assert!(ingest.status.success(), "{}", String::from_utf8_lossy(&ingest.stderr));
    let history = scratch.data.path().join("history.json");
    std::fs::write(&history, r#"[{"role": "user", "content": "¿Quién es la Tejedora?"}]"#).unwrap();
    let history = history.to_str().unwrap().to_string();
    let mut search = oraculo(&["search", "--json", "--history", &history, "¿Y qué vende?"]);
    let output = tokio::task::spawn_blocking(move || search.output().unwrap()).await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["followup_expanded"], true);
    assert_eq!(json["search_query"], "¿Quién es la Tejedora? ¿Y qué vende?");
    assert_eq!(json["entities"][0]["name"], "Baika");
    let first = &json["candidates"][0];
    for key in ["fragment_id", "label", "source_path", "session", "ranks", "rrf_score"] {
        assert!(!first[key].is_null() || key == "session", "{key} missing in {first}");
    }
    assert_eq!(first["label"], "Sesión 1", "{json}");
    assert!(
        first["ranks"]["dense"].is_number()
            && first["ranks"]["bm25"].is_number()
            && first["ranks"]["entity"].is_number()
    );
    // The diagnostics say why (additive fields).
    let diagnostics = &json["diagnostics"];
    assert_eq!(diagnostics["followup"], serde_json::json!({"expanded": true, "reason": "opens with \"y\""}));
    let entity_path = &diagnostics["entity_path"];
    assert_eq!(entity_path["n_sessions"], 2, "{diagnostics}");
    assert_eq!(entity_path["entities"][0]["name"], "Baika");
    assert_eq!(entity_path["entities"][0]["n_sessions"], 1);
    assert_eq!(entity_path["entities"][0]["session_share"], 0.5);
    assert_eq!(entity_path["weight"], 0.5);
    assert_eq!(entity_path["arc"], false);
    assert!(diagnostics["path_lengths"]["entity"].as_u64().is_some_and(|n| n >= 1), "{diagnostics}");
    // «tejedora» and «vende» are both in the notes: the BM25 list keeps its full weight.
    assert_eq!(diagnostics["bm25_terms"], serde_json::json!({"in_notes": 2, "asked": 2, "weight": 1.0}));

    // The search goes through the bot's oracle but loads no chat model: with the embedded one
    // configured and no model file in this data dir, `search` still answers and `ask` cannot.
    let mut embedded_search = oraculo(&["search", "--json", "¿Qué vende la Tejedora?"]);
    embedded_search.env("ORACULO_CHAT", "embedded");
    let output = tokio::task::spawn_blocking(move || embedded_search.output().unwrap()).await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["candidates"][0]["label"], "Sesión 1", "{json}");
    let mut embedded_ask = oraculo(&["ask", "--json", "¿Qué vende la Tejedora?"]);
    embedded_ask.env("ORACULO_CHAT", "embedded");
    let output = tokio::task::spawn_blocking(move || embedded_ask.output().unwrap()).await.unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The embedded backend answers with the notes' own sentences (`chat.answer_style`'s
    // default): no chat model file is needed, none is loaded.
    assert!(output.status.success(), "no chat model is loaded for quotes: {stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["mode"], "extractive", "{json}");
    assert!(json["settled"]["text"].as_str().is_some_and(|text| text.contains("[Sesión 1]")), "{json}");

    // An empty question is refused by the oracle's rule, as the bot and `ask` refuse it; it is
    // not searched.
    let mut empty = oraculo(&["search", "--json", "  "]);
    let output = tokio::task::spawn_blocking(move || empty.output().unwrap()).await.unwrap();
    assert!(!output.status.success() && output.stdout.is_empty());
    assert!(String::from_utf8_lossy(&output.stderr).contains("the question is empty"), "{output:?}");

    // A question in another language than the notes matches only its names in BM25: that
    // list weighs by the share of its words the notes hold, so it cannot outvote the dense path.
    let mut english = oraculo(&["search", "--json", "What does the weaver sell at the harbour, Baika?"]);
    let output = tokio::task::spawn_blocking(move || english.output().unwrap()).await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let terms = &json["diagnostics"]["bm25_terms"];
    let (held, asked) = (terms["in_notes"].as_f64().unwrap(), terms["asked"].as_f64().unwrap());
    assert!(held == 1.0 && asked >= 3.0, "only «baika» is in the notes: {terms}");
    assert!((terms["weight"].as_f64().unwrap() - held / asked).abs() < 1e-9, "{terms}");
}

#[tokio::test]
async fn a_ubiquitous_entity_weighs_little_unless_the_question_is_about_its_story() {
    // Baika (alias «la Tejedora») is in every session of the vault: her share is 1.
    let fact = ask("¿Qué sabemos de la Tejedora?", &[], Audience::Player).await;
    let evidence = fact.diagnostics.entity_path.as_ref().expect("an entity is named");
    assert_eq!(evidence.entities[0].session_share, 1.0, "{evidence:?}");
    assert_eq!(evidence.weight, oraculo::retrieve::ENTITY_MIN_WEIGHT);
    assert!(!evidence.arc);
    // The same entity asked about as an arc: full weight, every session still in the pool.
    let arc = ask("¿Qué ha hecho la Tejedora a lo largo de la campaña?", &[], Audience::Player).await;
    let evidence = arc.diagnostics.entity_path.as_ref().expect("an entity is named");
    assert!(evidence.arc && evidence.weight == 1.0, "{evidence:?}");
    let by_entity = labels(&arc, |r| r.entity);
    for session in 1..=6 {
        assert!(by_entity.contains(&format!("Sesión {session}")), "Sesión {session} missing from {by_entity:?}");
    }
    // No entity named: no entity evidence; the follow-up rule says why it did not fire.
    let plain = ask("¿Quién murió defendiendo el puente?", &[], Audience::Player).await;
    assert!(plain.diagnostics.entity_path.is_none());
    assert_eq!(plain.diagnostics.followup.reason, "no previous user turn");
}

/// A small campaign whose NPCs go by Spanish titles, ingested with the real e5-small, and a
/// secret one under `Secretos/`.
async fn titled_campaign() -> (crate::harness::Scratch, E5Embedder) {
    let scratch = crate::harness::Scratch::new(&[
        (
            "Fichas/Leandro de Valdemora.md",
            "---\naliases:\n  - el Archiduque\n  - Leandro\n---\n# Leandro de Valdemora\n\nArchiduque de Puerto Salobre, joven y con prisa.\n",
        ),
        (
            "Fichas/Celia Urquijo.md",
            "---\naliases:\n  - la Abadesa\n---\n# Celia Urquijo\n\nAbadesa del monasterio de Piedraluz.\n",
        ),
        ("Secretos/Mirela.md", "---\naliases:\n  - la Regente\n---\n# Mirela\n\nGobierna la ciudad en la sombra.\n"),
        (
            "Sesiones/Sesión 1.md",
            "# Sesión 1\n\nEl archiduque contrata al grupo para buscar las caravanas perdidas: trescientas coronas, cien por adelantado.\n",
        ),
        ("Sesiones/Sesión 2.md", "# Sesión 2\n\nLa abadesa les enseña el mapa de las salinas y les pide discreción.\n"),
        ("Sesiones/Sesión 3.md", "# Sesión 3\n\nPelea con contrabandistas en los muelles; Odo pierde el sombrero.\n"),
    ]);
    let embedder = crate::harness::e5();
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&["Secretos"]), &embedder)
        .await
        .unwrap();
    (scratch, embedder)
}

#[tokio::test]
async fn a_title_asked_in_english_names_the_npc_the_spanish_notes_call_by_it() {
    let (scratch, embedder) = titled_campaign().await;
    let index = Index::open_existing(&scratch.index_dir()).await.unwrap();
    let players = CompendiumIndex::load(&index.store, Audience::Player).unwrap();
    let gm = CompendiumIndex::load(&index.store, Audience::Gm).unwrap();
    let ask = |question: &'static str, audience: Audience| {
        let (index, embedder) = (&index, &embedder);
        let compendium = if audience == Audience::Player { &players } else { &gm };
        async move {
            let request = SearchRequest { question, history: &[], audience, k: DEFAULT_K, paths: PathSet::ALL };
            search(index, compendium, embedder, &request).await.unwrap()
        }
    };
    let named = |result: &SearchResult| -> Vec<(String, String, Option<String>)> {
        result.entities.iter().map(|e| (e.name.clone(), e.alias.clone(), e.asked_as.clone())).collect()
    };

    let paid = ask("How much did the archduke pay the party in advance?", Audience::Player).await;
    assert_eq!(
        named(&paid),
        [("Leandro de Valdemora".into(), "el Archiduque".into(), Some("the archduke".into()))],
        "«archduke» is in no note: only its translation names him"
    );
    assert!(paid.entities[0].similarity.is_some_and(|cosine| cosine >= 0.90), "{:?}", paid.entities);
    assert!(labels(&paid, |r| r.entity).contains(&"Sesión 1".to_string()), "the entity path brings his session");

    let abbess = ask("What did the abbess show them?", Audience::Player).await;
    assert_eq!(named(&abbess), [("Celia Urquijo".into(), "la Abadesa".into(), Some("the abbess".into()))]);

    // Phrases that translate no title name nobody.
    let tavern = ask("What happened at the party in the tavern?", Audience::Player).await;
    assert!(tavern.entities.is_empty(), "{:?}", tavern.entities);
    // A misspelt title in the notes' own language is not a translation: not matched.
    let misspelt = ask("¿Cuánto pagó el archiduqe por adelantado?", Audience::Player).await;
    assert!(misspelt.entities.is_empty(), "{:?}", misspelt.entities);
    // A GM secret's title is the GM's alone: its translation names her for the GM, and nobody
    // for players, whose search refuses the GM's compendium outright.
    let regent = ask("Who is the Regent?", Audience::Player).await;
    assert!(regent.entities.is_empty(), "Player: {:?}", regent.entities);
    let regent = ask("Who is the Regent?", Audience::Gm).await;
    assert_eq!(named(&regent), [("Mirela".into(), "la Regente".into(), Some("the Regent".into()))]);
    let request = SearchRequest {
        question: "Who is the Regent?",
        history: &[],
        audience: Audience::Player,
        k: 8,
        paths: PathSet::ALL,
    };
    let refused = search(&index, &gm, &embedder, &request).await;
    assert!(matches!(refused, Err(oraculo::retrieve::RetrieveError::CompendiumForTheGm)), "{:?}", refused.err());
}
