//! The quoted answer (`chat.answer_style = "quotes"`): the notes' own sentences, ranked
//! sentence by sentence, are the answer at once. No request reaches the chat model; the
//! sentence with the number answers a how-much question; a sentence that leans on the one
//! before is quoted with it; every quote is the note's own words, under the label of its note.

use std::sync::Arc;

use oraculo::answer::AnswerStyle;
use oraculo::answer::passages::links_as_text;
use oraculo::llm::Embedder;
use oraculo::llm::chat::NoChat;
use oraculo::oracle::{AnswerOptions, AnswerSettings, AskRequest, Oracle, Settled, no_events};
use oraculo::retrieve::Audience;

use crate::harness::{Ingested, Scratch, campaign_config, e5, ingest_dir, sessions};

/// What each session says: the number is in session 3, the leaning sentence in session 5.
fn campaign() -> Scratch {
    let bodies = [
        "El grupo llega a Puerto Salobre bajo la lluvia y busca posada en el muelle.",
        "El archiduque Leandro recibe al grupo en su palacio de la Colina.",
        "El archiduque ofrece 300 coronas por las caravanas perdidas del Camino Blanco. \
         Rook no se fía del archiduque.",
        "Una tormenta hunde la barca de Baika frente al faro.",
        "El grupo encuentra a la abadesa Celia en el claustro. Ella les entrega el mapa de las Salinas de Oruel. \
         Llueve toda la noche sobre el [monasterio viejo](https://example.org/monasterio).",
        "El grupo abandona el puerto hacia el norte.",
    ];
    let mut files = sessions(1..=bodies.len(), |n| format!("{}\n", bodies[n - 1]));
    files.push(("PNJs/Leandro.md".into(), "# Leandro\nArchiduque de Puerto Salobre.\n".into()));
    Scratch::of(&files)
}

async fn ask_quoted(ingested: &Ingested, question: &str) -> Settled {
    let settings = AnswerSettings { style: AnswerStyle::Quotes, ..AnswerSettings::new(256) };
    let oracle = ingested.oracle(ingested.ollama(), settings);
    let request = AskRequest { question, history: &[], audience: Audience::Player };
    oracle.answer(&request, AnswerOptions::new(&no_events)).await.unwrap()
}

/// A note as a quote reads it: links as their text, one space between words.
fn as_quoted(note: &str) -> String {
    links_as_text(note).split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Every quoted sentence is, character for character, in the note its label names.
fn assert_quotes_are_the_notes_words(ingested: &Ingested, settled: &Settled) {
    let answer = &settled.answer;
    assert!(!answer.quoted.is_empty(), "{}", answer.text);
    for excerpt in &answer.quoted {
        let source = answer
            .citations
            .iter()
            .find(|citation| citation.valid && citation.label == excerpt.label.as_str())
            .unwrap_or_else(|| panic!("{} is cited: {:?}", excerpt.label, answer.citations));
        let path = source.source_path.as_deref().expect("a cited note has its path");
        let full = ingested.scratch.campaign.path().join(path);
        let note = std::fs::read_to_string(&full).unwrap_or_else(|err| panic!("{}: {err}", full.display()));
        assert!(as_quoted(&note).contains(&excerpt.text), "«{}» is not in {path}:\n{note}", excerpt.text);
        assert!(answer.text.contains(&format!("- «{}» [{}]", excerpt.text, excerpt.label)), "{}", answer.text);
    }
}

#[tokio::test]
async fn a_quantity_question_is_answered_by_the_sentence_with_the_number_and_no_model_is_asked() {
    let ingested = Ingested::over(campaign()).await;
    let settled = ask_quoted(&ingested, "¿Cuánto ofrece el archiduque por las caravanas?").await;
    let text = &settled.answer.text;
    assert!(text.starts_with("Esto es lo que dicen las notas:\n"), "{text}");
    assert!(
        text.contains("«El archiduque ofrece 300 coronas por las caravanas perdidas del Camino Blanco.» [Sesión 3]"),
        "{text}"
    );
    assert_quotes_are_the_notes_words(&ingested, &settled);
    assert_eq!(ingested.fake.requests_to("/api/chat"), 0, "no rerank and no generation");
    assert!(settled.instant_kept.is_none() && settled.model.is_none(), "{settled:?}");
    assert!(settled.joins_history(), "the quotes are the answer a follow-up builds on");
    assert_eq!(settled.turn_text(), text);

    let english = ask_quoted(&ingested, "How much does the archduke offer for the caravans?").await;
    assert!(english.answer.text.starts_with("This is what the notes say:\n"), "{}", english.answer.text);
}

#[tokio::test]
async fn a_sentence_that_leans_on_the_one_before_is_quoted_with_it() {
    let ingested = Ingested::over(campaign()).await;
    let settled = ask_quoted(&ingested, "¿Quién les dio el mapa de las Salinas?").await;
    let text = &settled.answer.text;
    assert!(
        text.contains(
            "«El grupo encuentra a la abadesa Celia en el claustro. Ella les entrega el mapa de las Salinas de Oruel.» \
             [Sesión 5]"
        ),
        "{text}"
    );
    assert_quotes_are_the_notes_words(&ingested, &settled);
    // A link reads as its text.
    let rain = ask_quoted(&ingested, "¿Dónde llovió toda la noche?").await;
    assert!(rain.answer.text.contains("sobre el monasterio viejo.» [Sesión 5]"), "{}", rain.answer.text);
    assert_quotes_are_the_notes_words(&ingested, &rain);
    assert_eq!(ingested.fake.requests_to("/api/chat"), 0);
}

#[tokio::test]
async fn a_question_the_notes_do_not_answer_says_so() {
    let ingested = Ingested::over(campaign()).await;
    // Nothing says what he ate; the sentences naming him are the nearest, and said to be only that.
    let nearest = ask_quoted(&ingested, "¿Qué desayunó Leandro?").await;
    assert!(
        nearest.answer.text.starts_with(
            "Las notas no lo dicen con las palabras de la pregunta; esto es lo más cercano que dicen:\n- «"
        ),
        "{}",
        nearest.answer.text
    );
    assert!(nearest.answer.nearest_only && nearest.not_in_the_notes());
    assert_quotes_are_the_notes_words(&ingested, &nearest);
    assert!(nearest.answer.quoted.iter().all(|quote| quote.text.contains("Leandro")), "{:?}", nearest.answer.quoted);
    // Nor does any sentence name what it asks of: nothing.
    let settled = ask_quoted(&ingested, "¿Qué desayunó la gaviota?").await;
    assert_eq!(settled.answer.text, "Las notas no dicen nada sobre esta pregunta.");
    assert!(settled.answer.quoted.is_empty() && !settled.answer.citations.iter().any(|c| c.valid));
    assert!(!settled.answer.nearest_only && settled.not_in_the_notes());
    // Asked in English of Spanish notes, no word can match: it says where to look.
    let english = ask_quoted(&ingested, "What did the seagull eat?").await;
    assert_eq!(
        english.answer.text,
        "I find nothing in the notes in the question's words; they are written in Spanish: try asking in Spanish."
    );
    assert!(english.not_in_the_notes());
    assert_eq!(ingested.fake.requests_to("/api/chat"), 0);
}

/// e5 decides between sentences the words cannot tell apart: each names the tower, and only
/// one, the last, says how it fell; three a note are quoted, and without meaning the first
/// three would be.
#[tokio::test]
async fn e5_picks_the_sentence_that_means_the_question() {
    let scratch = Scratch::of(&sessions([1], |_| {
        "La torre tiene tres pisos de piedra gris. La torre guarda el archivo del gremio. \
         La torre mira al puerto desde la colina. La torre se derrumba entre llamas y polvo.\n"
            .to_string()
    }));
    let embedder: Arc<dyn Embedder> = Arc::new(e5());
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), embedder.as_ref()).await.unwrap();
    let settings = AnswerSettings { style: AnswerStyle::Quotes, ..AnswerSettings::new(256) };
    let oracle = Oracle::new(&scratch.index_dir(), embedder, Arc::new(NoChat), settings);
    let request = AskRequest { question: "¿Cómo se destruyó la torre?", history: &[], audience: Audience::Player };
    let settled = oracle.answer(&request, AnswerOptions::new(&no_events)).await.unwrap();
    let quoted: Vec<&str> = settled.answer.quoted.iter().map(|excerpt| excerpt.text.as_str()).collect();
    assert_eq!(quoted.len(), 3, "{quoted:?}");
    assert!(quoted.contains(&"La torre se derrumba entre llamas y polvo."), "{quoted:?}");
}
