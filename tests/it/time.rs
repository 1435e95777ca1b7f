//! Campaign time over a real index: sessions whose numbers are only in their file
//! names, a GM-only session after the last player one, and a campaign of world documents only.
//! The embedder is the Ollama stand-in; answers are extractive (no model).

use std::sync::Arc;
use std::time::Duration;

use oraculo::answer::AnswerMode;
use oraculo::corpus::{LabelLanguage, SessionNumber};
use oraculo::index::Index;
use oraculo::llm::chat::ollama::OllamaChat;
use oraculo::oracle::{AnswerSettings, AskRequest, Oracle};
use oraculo::retrieve::{Audience, CompendiumIndex, PathSet, SearchRequest, SearchResult, search};
use oraculo::timeline::{TimeError, recap, timeline};

use crate::fake_ollama::FakeOllama;
use crate::harness::{Scratch, ThroughTheEntry, campaign_config, chat_config, ingest_dir, ollama_embedder};

/// Six player sessions numbered only by their file names, a seventh in the GM's secret folder,
/// and Baika's sheet. Baika is in sessions 2, 4, 5 and (secretly) 7.
fn time_campaign() -> Scratch {
    Scratch::new(&[
        ("Sesiones/Sesion 1.md", "# Llegada\nEl grupo llega al puerto con doce monedas y una carta.\n"),
        ("Sesiones/Sesion 2.md", "# La red\nEn el mercado conocen a Baika, que teje redes encantadas.\n"),
        ("Sesiones/Sesion 3.md", "# El faro\nEl faro se apaga y el puerto queda a oscuras toda la noche.\n"),
        ("Sesiones/Sesion 4.md", "# La tormenta\nUna tormenta hunde la barca. Baika salva a Odo con su red.\n"),
        ("Sesiones/Sesion 5.md", "# El funeral\nFuneral en el muelle. Baika no viene y nadie sabe por qué.\n"),
        ("Sesiones/Sesion 6.md", "# La partida\nEl grupo abandona el puerto hacia el norte en una carreta.\n"),
        ("Secretos/Sesion 7.md", "# Lo que viene\nBaika es la espía del archiduque y traicionará al grupo.\n"),
        ("PNJs/Baika.md", "# Baika\nTejedora de redes del puerto.\n"),
    ])
}

struct Bench {
    _fake: FakeOllama,
    scratch: Scratch,
    oracle: Oracle,
}

async fn bench(scratch: Scratch) -> Bench {
    let fake = FakeOllama::start(&["bge-m3", "qwen2.5:14b"]).await;
    let embedder = ollama_embedder(&fake, "bge-m3").await;
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&["Secretos"]), &embedder)
        .await
        .unwrap();
    let chat = OllamaChat::new(chat_config(fake.url(), Duration::from_secs(10))).unwrap();
    let mut oracle = Oracle::new(&scratch.index_dir(), Arc::new(embedder), Arc::new(chat), AnswerSettings::new(512));
    oracle.set_mode(AnswerMode::Extractive);
    Bench { _fake: fake, scratch, oracle }
}

async fn search_as(bench: &Bench, question: &str, audience: Audience) -> SearchResult {
    let index = Index::open_existing(&bench.scratch.index_dir()).await.unwrap();
    let compendium = CompendiumIndex::load(&index.store, audience).unwrap();
    let request = SearchRequest { question, history: &[], audience, k: 8, paths: PathSet::ALL };
    search(&index, &compendium, bench.oracle.notes().embedder().as_ref(), &request).await.unwrap()
}

/// The labels the time path ranked, best first.
fn by_time(result: &SearchResult) -> Vec<String> {
    let mut ranked: Vec<(usize, String)> =
        result.candidates.iter().filter_map(|c| c.ranks.time.map(|rank| (rank, c.label.to_string()))).collect();
    ranked.sort();
    ranked.into_iter().map(|(_, label)| label).collect()
}

#[tokio::test]
async fn sessions_numbered_only_in_file_names_are_found_by_the_time_path() {
    let bench = bench(time_campaign()).await;
    let table: &[(&str, Audience, &[&str])] = &[
        ("¿Qué pasó en la sesión 4?", Audience::Player, &["Sesión 4"]),
        ("Resume la sesión 3", Audience::Player, &["Sesión 3"]),
        ("What happened in session 2?", Audience::Player, &["Sesión 2"]),
        ("¿Qué pasó entre la 2 y la 4?", Audience::Player, &["Sesión 2", "Sesión 3", "Sesión 4"]),
        // The last session a player may read is the sixth; the GM's is the seventh.
        ("¿Qué pasó la última sesión?", Audience::Player, &["Sesión 6"]),
        ("¿Qué pasó la última sesión?", Audience::Gm, &["Sesión 7"]),
        ("¿Qué pasó en la penúltima sesión?", Audience::Player, &["Sesión 5"]),
        ("¿Qué pasó hace dos sesiones?", Audience::Gm, &["Sesión 6"]),
        // A player asking for the secret session by number gets nothing from it.
        ("¿Qué pasó en la sesión 7?", Audience::Player, &[]),
        // Numbers that are not sessions.
        ("¿Quién llegó con 12 monedas?", Audience::Player, &[]),
    ];
    for (question, audience, expected) in table {
        let result = search_as(&bench, question, *audience).await;
        assert_eq!(by_time(&result), *expected, "{question} ({audience:?}): {:?}", result.time);
        if *audience == Audience::Player {
            assert!(result.candidates.iter().all(|c| c.label != "Sesión 7"), "{question}: a GM session leaked");
        }
    }
    let after =
        search_as(&bench, "¿Qué pasó justo después de la tormenta que hundió la barca?", Audience::Player).await;
    assert!(after.time.references.iter().any(|r| matches!(r, oraculo::retrieve::time::TimeReference::AfterEvent)));
    assert!(after.time.anchors.contains(&SessionNumber(4)), "{:?}", after.time);
    assert_eq!(by_time(&after).first().map(String::as_str), Some("Sesión 5"), "{:?}", after.time);
}

#[tokio::test]
async fn a_named_session_is_shown_and_a_missing_one_is_answered_naming_the_last() {
    let bench = bench(time_campaign()).await;
    let request = AskRequest { question: "¿Qué pasó en la sesión 3?", history: &[], audience: Audience::Player };
    let prepared = bench.oracle.read(&request, Default::default()).await.unwrap();
    assert!(prepared.chosen.iter().any(|c| c.label == "Sesión 3"));
    // The context reads in story order: sessions by number, the sheet after them.
    let shown: Vec<Option<u32>> = prepared.context.full.iter().map(|f| f.session.map(|s| s.0)).collect();
    let sessions: Vec<u32> = shown.iter().flatten().copied().collect();
    assert!(sessions.windows(2).all(|pair| pair[0] < pair[1]), "{shown:?}");
    assert!(shown.iter().skip_while(|s| s.is_some()).all(|s| s.is_none()), "{shown:?}");

    for (audience, last) in [(Audience::Player, "6"), (Audience::Gm, "7")] {
        let request = AskRequest { question: "¿Qué pasó en la sesión 400?", history: &[], audience };
        let answer = bench.oracle.ask(&request, None).await.unwrap();
        assert_eq!(answer.text, format!("La sesión 400 no está en las notas: la última que hay es la {last}."));
    }
    let request = AskRequest { question: "What happened in session 400?", history: &[], audience: Audience::Player };
    let answer = bench.oracle.ask(&request, None).await.unwrap();
    assert!(answer.text.starts_with("Session 400 is not in the notes"), "{}", answer.text);
}

#[tokio::test]
async fn timeline_in_story_order_within_the_audience() {
    let bench = bench(time_campaign()).await;
    let player = timeline(&bench.oracle, "baika", Audience::Player).await.unwrap();
    let sessions: Vec<u32> = player.entries.iter().map(|e| e.session.0).collect();
    assert_eq!(sessions, [2, 4, 5]);
    assert!(player.entries[0].first && !player.entries[0].last);
    assert!(player.entries[2].last && !player.entries[2].first);
    assert!(player.entries[1].line.contains("Baika salva a Odo"), "{:?}", player.entries[1]);
    assert!(player.entries.iter().all(|e| !e.line.contains("espía")));
    assert_eq!(player.other_labels, ["Ficha: Baika"]);
    let gm = timeline(&bench.oracle, "Baika", Audience::Gm).await.unwrap();
    let sessions: Vec<u32> = gm.entries.iter().map(|e| e.session.0).collect();
    assert_eq!(sessions, [2, 4, 5, 7]);
    match timeline(&bench.oracle, "Bai", Audience::Player).await {
        Err(TimeError::UnknownEntity { suggestions, .. }) => assert_eq!(suggestions, ["Baika"]),
        other => panic!("expected an unknown entity, got {other:?}"),
    }
}

#[tokio::test]
async fn recap_defaults_to_the_last_session_and_cites_it() {
    let bench = bench(time_campaign()).await;
    let last = recap(&bench.oracle, None, Audience::Player, LabelLanguage::Es, None).await.unwrap();
    assert_eq!(last.session, SessionNumber(6));
    assert!(last.is_last);
    assert!(last.answer.text.contains("[Sesión 6]"), "{}", last.answer.text);
    assert!(last.answer.citations.iter().all(|c| c.valid && c.label == "Sesión 6"));
    let gm = recap(&bench.oracle, None, Audience::Gm, LabelLanguage::En, None).await.unwrap();
    assert_eq!(gm.session, SessionNumber(7));
    match recap(&bench.oracle, Some(7), Audience::Player, LabelLanguage::Es, None).await {
        Err(TimeError::MissingSession { asked: 7, highest }) => assert_eq!(highest, SessionNumber(6)),
        other => panic!("a player's recap of a GM session: {other:?}"),
    }
}

#[tokio::test]
async fn a_campaign_without_sessions_says_so() {
    let bench = bench(Scratch::new(&[
        ("Mundo/Dioses.md", "# Dioses\nKesh el Hueco es el dios de la sal.\n"),
        ("Mundo/Puerto.md", "# Puerto Salobre\nUna ciudad de muelles y sal.\n"),
    ]))
    .await;
    assert!(matches!(timeline(&bench.oracle, "Kesh", Audience::Player).await, Err(TimeError::NoSessions)));
    assert!(matches!(
        recap(&bench.oracle, None, Audience::Player, LabelLanguage::Es, None).await,
        Err(TimeError::NoSessions)
    ));
    let request = AskRequest { question: "¿Qué pasó la última sesión?", history: &[], audience: Audience::Player };
    let answer = bench.oracle.ask(&request, None).await.unwrap();
    assert!(answer.text.contains("no tienen sesiones numeradas"), "{}", answer.text);
}
