//! The first answer at any CPU speed: an arc question opens with the entity's story (one
//! line per session, in story order), the plan keeps what the question depends on at every
//! speed, a structured answer never repeats itself or shows a sentence cut off, and a model
//! stopped at its deadline keeps what it had written. Speeds are fixed (a model that reports
//! one), never measured; the chat model is the Ollama stand-in or an in-process double.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use oraculo::answer::AnswerMode;
use oraculo::llm::LlmError;
use oraculo::llm::chat::{ChatModel, ChatRequest, ChatResponse, ModelSpeed, PacedChat, TokenSink};
use oraculo::oracle::{AnswerSettings, DEADLINE_SLACK, Oracle};
use oraculo::prompt::StructuredPrompt;
use oraculo::retrieve::Audience;
use serde_json::json;

use crate::harness::{
    FixedSpeed, Ingested, Scratch, ask_streamed, campaign_config, e5, ingest_dir, sessions, structured,
};

const ARC_QUESTION: &str = "¿Qué pasó con el archiduque?";

/// A campaign where the archduke appears in sessions 1, 3 and 5 (first greeted, then gone,
/// then back as someone else) among sessions that never name him.
fn archduke_campaign() -> Scratch {
    let mut files: Vec<(String, String)> = vec![
        (
            "Fichas/Leandro de Valdemora.md".into(),
            "---\naliases: [el Archiduque, el Heraldo de la Marea Baja]\ntipo: pnj\n---\n# Leandro de Valdemora\n\
             Archiduque de Puerto Salobre, señor de la Colina del Palacio.\n"
                .into(),
        ),
        (
            "Sesiones/Sesion 1.md".into(),
            "# Sesión 1\nEl grupo llega a Puerto Salobre bajo la lluvia y busca posada en el puerto. \
             El archiduque Leandro los recibe en la lonja y les ofrece trescientas coronas por encontrar las caravanas \
             perdidas. Odo regatea sin éxito y acaban cenando sopa en la posada.\n"
                .into(),
        ),
        (
            "Sesiones/Sesion 3.md".into(),
            "# Sesión 3\nEn la Fiesta de las Mareas el archiduque abre el baile con su hermana en los jardines del palacio. \
             Los músicos tocan junto a la fuente hasta medianoche y el vino corre por las mesas. \
             A las once, Leandro de Valdemora desaparece de sus aposentos, cerrados por dentro, sin dejar más rastro \
             que un charco de salmuera en la alfombra. La guardia registra el palacio entero hasta el alba.\n"
                .into(),
        ),
        (
            "Sesiones/Sesion 5.md".into(),
            "# Sesión 5\nUn año después, en la misma fiesta, el Heraldo de la Marea Baja baja de la tarima: es Leandro, \
             cambiado, con la piel cubierta de sal, y nadie se atreve a hablarle. Destierra a su hermana de la ciudad.\n"
                .into(),
        ),
    ];
    files.extend(sessions([2, 4, 6, 7, 8, 9, 10, 11], |n| {
        format!(
            "El grupo recorre el Camino Blanco hacia la sierra, jornada {n}, sin novedad entre pinos \
                 y rocas grises. Acampan junto a un arroyo y montan guardia por turnos.\n"
        )
    }));
    Scratch::of(&files)
}

async fn bench() -> Ingested {
    Ingested::over(archduke_campaign()).await
}

impl Ingested {
    /// A structured oracle over the stand-in, its model reporting `speed`.
    fn oracle_at(&self, prompt_tokens_per_s: f64, generated_tokens_per_s: f64) -> Oracle {
        let speed = ModelSpeed { prompt_tokens_per_s, generated_tokens_per_s };
        let chat = Arc::new(FixedSpeed { inner: self.ollama(), speed, window: Some(8192) });
        self.oracle(chat, AnswerSettings { mode: AnswerMode::Structured, ..AnswerSettings::new(512) })
    }

    /// The material of the last prompt the stand-in received.
    fn last_material(&self) -> String {
        let request = self.fake.chat_requests("/api/chat").pop().expect("the model was asked");
        let messages = request.body["messages"].as_array().expect("messages").clone();
        messages.last().and_then(|m| m["content"].as_str()).unwrap_or_default().to_string()
    }
}

/// Where each of `needles` first appears in `text`, in order; panics on one missing.
fn positions(text: &str, needles: &[&str]) -> Vec<usize> {
    needles.iter().map(|needle| text.find(needle).unwrap_or_else(|| panic!("{needle:?} not in:\n{text}"))).collect()
}

#[tokio::test]
async fn an_arc_question_is_answered_from_the_entitys_story_with_the_sentence_that_says_what_happened() {
    // The real e5-small: the sentence of session 3 that says what happened to him, not the
    // first one that names him.
    let scratch = archduke_campaign();
    let embedder: Arc<dyn oraculo::llm::Embedder> = Arc::new(e5());
    ingest_dir(&scratch.index_dir(), scratch.campaign.path(), &campaign_config(&[]), embedder.as_ref()).await.unwrap();
    let settings = AnswerSettings { mode: AnswerMode::Extractive, ..AnswerSettings::new(256) };
    let oracle = Oracle::new(&scratch.index_dir(), embedder, Arc::new(oraculo::llm::chat::NoChat), settings);
    let (answer, _) = ask_streamed(&oracle, ARC_QUESTION).await;
    assert_eq!(answer.mode, AnswerMode::Extractive);
    let story: Vec<&str> = answer.story_shown.iter().map(|line| line.label.as_str()).collect();
    assert!(!story.is_empty(), "an arc question has a story: {answer:#?}");
    let text = &answer.text;
    // One line per session he appears in, in story order, each cited to its session.
    let at = positions(text, &["[Sesión 1]", "[Sesión 3]", "[Sesión 5]"]);
    assert!(at.windows(2).all(|pair| pair[0] < pair[1]), "{text}");
    for absent in ["[Sesión 2]", "[Sesión 4]", "[Sesión 6]"] {
        assert!(!text.contains(absent), "{absent} does not name him: {text}");
    }
    let line_of = |label: &str| text.lines().find(|line| line.contains(label)).unwrap_or_default();
    assert!(line_of("[Sesión 3]").contains("desaparece"), "the sentence that says what happened: {text}");
    assert!(line_of("[Sesión 5]").contains("Heraldo"), "{text}");
    for citation in &answer.citations {
        assert!(citation.valid && citation.source_path.is_some() && citation.excerpt.is_some(), "{citation:?}");
    }
    assert_eq!(answer.citations.len(), 3, "{:?}", answer.citations);

    // A question that is not about his story has none.
    let (fact, _) = ask_streamed(&oracle, "¿Cuántas coronas ofreció el archiduque?").await;
    assert!(fact.story_shown.is_empty(), "{fact:#?}");

    // The timeline finds him as a user types him: no article, any case.
    for typed in ["archiduque", "ARCHIDUQUE", "el archiduque", "Heraldo de la Marea Baja"] {
        let timeline = oraculo::timeline::timeline(&oracle, typed, Audience::Player).await.unwrap();
        assert_eq!(timeline.entity, "Leandro de Valdemora", "{typed}");
        let sessions: Vec<u32> = timeline.entries.iter().map(|entry| entry.session.0).collect();
        assert_eq!(sessions, [1, 3, 5], "{typed}");
    }
}

#[tokio::test]
async fn the_story_opens_the_material_and_its_sessions_are_citable() {
    let bench = bench().await;
    let oracle = bench.oracle_at(20.0, 6.2);
    bench.fake.enqueue_reply(&structured(&[
        ("Leandro desapareció de sus aposentos durante la Fiesta de las Mareas.", &["Sesión 3"]),
        ("Un año después volvió como el Heraldo de la Marea Baja.", &["Sesión 5"]),
    ]));
    let (answer, streamed) = ask_streamed(&oracle, ARC_QUESTION).await;
    let material = bench.last_material();
    // The story block first, titled with his other names, then the full material.
    assert!(
        material.contains(
            "== Cronología de Leandro de Valdemora (otros nombres: el Archiduque, el Heraldo de la Marea Baja)"
        ),
        "{material}"
    );
    let story_at = material.find("== Cronología").unwrap();
    let story_lines = positions(&material, &["- [Sesión 1]", "- [Sesión 3]", "- [Sesión 5]"]);
    assert!(story_at < story_lines[0] && story_lines.windows(2).all(|pair| pair[0] < pair[1]), "{material}");
    if let Some(full_at) = material.find("== Fragmentos completos") {
        assert!(story_lines[2] < full_at, "the story comes before the full material: {material}");
    }
    // The story's sessions are labels the schema lets the model cite, and the answer's
    // citations resolve to them.
    let request = bench.fake.chat_requests("/api/chat").pop().unwrap();
    let enum_labels = &request.body["format"]["anyOf"][0]["properties"]["sentences"]["items"]["properties"]["sources"]
        ["items"]["enum"];
    for label in ["Sesión 1", "Sesión 3", "Sesión 5"] {
        assert!(enum_labels.as_array().unwrap().iter().any(|shown| shown == label), "{label} in {enum_labels}");
    }
    assert_eq!(answer.mode, AnswerMode::Structured, "{answer:#?}");
    assert_eq!(
        answer.text,
        "Leandro desapareció de sus aposentos durante la Fiesta de las Mareas [Sesión 3]. \
         Un año después volvió como el Heraldo de la Marea Baja [Sesión 5]."
    );
    assert_eq!(streamed.trim(), answer.text);
    let five = answer.citations.iter().find(|c| c.label == "Sesión 5").expect("cited");
    assert!(five.valid && five.source_path.as_deref() == Some("Sesiones/Sesion 5.md"), "{five:?}");
    assert!(five.excerpt.as_deref().is_some_and(|excerpt| excerpt.contains("Heraldo")), "{five:?}");
    // At 20 prompt tokens a second the brief prompt is read.
    assert_eq!(answer.context_plan.prompt, StructuredPrompt::Brief, "{:?}", answer.context_plan);
    assert_eq!(answer.context_plan.arc_lines, answer.story_shown.len());
}

#[tokio::test]
async fn a_structured_answer_never_repeats_itself_nor_shows_a_sentence_cut_off() {
    let bench = bench().await;
    let oracle = bench.oracle_at(1000.0, 300.0);
    bench.fake.enqueue_reply(&structured(&[
        ("Leandro desapareció de sus aposentos durante la Fiesta de las Mareas.", &["Sesión 3"]),
        // The same passage copied again, a name added and a word changed.
        ("Leandro de Valdemora desapareció de sus aposentos en la Fiesta de las Mareas.", &["Sesión 3"]),
        // Copied from a passage cut mid-sentence, with nothing complete in it.
        ("Volvió cubierto de sal y nadie se atrevió a hablarle ni a sus…", &["Sesión 5"]),
        // Cut after a complete sentence: that sentence stays.
        ("Un año después volvió como el Heraldo de la Marea Baja. Destierra a su hermana y muy pocas…", &["Sesión 5"]),
    ]));
    let (answer, streamed) = ask_streamed(&oracle, ARC_QUESTION).await;
    assert_eq!(
        answer.text,
        "Leandro desapareció de sus aposentos durante la Fiesta de las Mareas [Sesión 3]. \
         Un año después volvió como el Heraldo de la Marea Baja [Sesión 5]."
    );
    assert_eq!(streamed.trim(), answer.text, "what streamed is what the answer holds");
    assert_eq!(answer.repeated.len(), 1, "{:?}", answer.repeated);
    assert!(answer.ungrounded.iter().any(|dropped| dropped.contains("cut off")), "{:?}", answer.ungrounded);
    assert!(!answer.text.contains('…'), "{}", answer.text);
}

#[tokio::test]
async fn at_every_speed_the_plan_keeps_the_story_and_the_named_session_within_its_time() {
    let bench = bench().await;
    for (prompt, generated) in [(20.0, 6.2), (40.0, 12.4), (80.0, 24.8)] {
        let oracle = bench.oracle_at(prompt, generated);
        // An arc question: every session of the story is in the material.
        bench.fake.enqueue_reply(&structured(&[("Desapareció.", &["Sesión 3"])]));
        let (answer, _) = ask_streamed(&oracle, ARC_QUESTION).await;
        let material = bench.last_material();
        positions(&material, &["- [Sesión 1]", "- [Sesión 3]", "- [Sesión 5]"]);
        let plan = &answer.context_plan;
        assert_eq!(plan.limited_by, "time", "{prompt}: {plan:?}");
        // The slowest reads the brief prompt, the fastest the full one.
        if prompt == 20.0 {
            assert_eq!(plan.prompt, StructuredPrompt::Brief, "{plan:?}");
        } else if prompt == 80.0 {
            assert_eq!(plan.prompt, StructuredPrompt::Full, "{plan:?}");
        }
        // What the model is sent and may write fits the budget at this speed.
        let request = bench.fake.chat_requests("/api/chat").pop().unwrap();
        let sent: usize = request.body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|message| oracle.chat().count_tokens(message["content"].as_str().unwrap_or_default()))
            .sum();
        let seconds = sent as f64 / prompt + plan.writing_seconds().expect("a time plan");
        assert!(seconds <= 90.0 * DEADLINE_SLACK, "{prompt}: {seconds:.0} s planned ({sent} tokens) {plan:?}");
        let max_items = &request.body["format"]["anyOf"][0]["properties"]["sentences"]["maxItems"];
        assert_eq!(max_items.as_u64(), Some(plan.max_sentences as u64), "{prompt}");

        // A question about a session: that session is shown, whatever the speed.
        bench.fake.enqueue_reply(&structured(&[("Viajan por el Camino Blanco.", &["Sesión 4"])]));
        let (answer, _) = ask_streamed(&oracle, "¿Qué pasó en la sesión 4?").await;
        assert!(answer.fragments_shown.iter().any(|shown| shown.label == "Sesión 4"), "{prompt}: {answer:#?}");
        assert!(bench.last_material().contains("[Sesión 4]"), "{prompt}");
    }
}

/// Two scripted models on this machine, each known by how fast it is.
enum LocalChat {
    /// Writes its first sentence at once (when `writes_first`), then stalls (a machine far
    /// slower than it said): the deadline must stop it and keep the sentence.
    Stalling { writes_first: bool },
    /// Answers at once, three pieces, as a fast machine would.
    Instant,
}

#[async_trait]
impl ChatModel for LocalChat {
    fn id(&self) -> &str {
        match self {
            LocalChat::Stalling { .. } => "stalling",
            LocalChat::Instant => "instant",
        }
    }
    fn context_window(&self) -> usize {
        if matches!(self, LocalChat::Instant) { 4096 } else { 8192 }
    }
    fn count_tokens(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
    async fn speed(&self) -> Option<ModelSpeed> {
        let stalling = ModelSpeed { prompt_tokens_per_s: 20.0, generated_tokens_per_s: 6.2 };
        matches!(self, LocalChat::Stalling { .. }).then_some(stalling)
    }
    async fn chat(&self, request: &ChatRequest, on_token: Option<TokenSink<'_>>) -> Result<ChatResponse, LlmError> {
        let LocalChat::Stalling { writes_first } = *self else {
            for piece in ["uno ", "dos ", "tres"] {
                if let Some(sink) = on_token {
                    sink(piece);
                }
            }
            let text = "uno dos tres".into();
            return Ok(ChatResponse {
                text,
                prompt_tokens: Some(20),
                completion_tokens: Some(3),
                ..Default::default()
            });
        };
        let schema = request.json_schema.as_ref().expect("a structured request");
        let labels = &schema["anyOf"][0]["properties"]["sentences"]["items"]["properties"]["sources"]["items"]["enum"];
        let label = labels.as_array().and_then(|labels| labels.iter().find(|l| *l == "Sesión 3")).cloned();
        if let (true, Some(label), Some(sink)) = (writes_first, label, on_token) {
            let first = json!({ "text": "Leandro desaparece de sus aposentos.", "sources": [label] });
            sink(&format!("{{\"in_notes\": true, \"sentences\": [{first}, "));
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
        Err(LlmError::BadResponse { backend: "stalling".into(), detail: "never reached".into() })
    }
}

#[tokio::test]
async fn a_model_stopped_at_its_deadline_keeps_the_sentences_it_had_written() {
    let bench = bench().await;
    for writes_first in [true, false] {
        // Half a second to answer: the deadline is at 0.6 s, the model would take a minute.
        let settings = AnswerSettings { mode: AnswerMode::Structured, answer_seconds: 0.5, ..AnswerSettings::new(256) };
        let oracle = bench.oracle(Arc::new(LocalChat::Stalling { writes_first }), settings);
        let started = Instant::now();
        let (answer, streamed) = ask_streamed(&oracle, ARC_QUESTION).await;
        assert!(started.elapsed() < Duration::from_secs(30), "the deadline stopped the model");
        assert_eq!(answer.context_plan.deadline_seconds, Some(0.5 * DEADLINE_SLACK));
        if writes_first {
            assert_eq!(answer.mode, AnswerMode::Structured, "{answer:#?}");
            assert_eq!(answer.text, "Leandro desaparece de sus aposentos [Sesión 3].");
            assert_eq!(streamed.trim(), answer.text);
            assert!(answer.cut_short.as_deref().is_some_and(|why| why.contains("had not finished")), "{answer:#?}");
            assert!(answer.fallback.is_none());
        } else {
            // Nothing written: the notes' own sentences (the story), saying why.
            assert_eq!(answer.mode, AnswerMode::Extractive, "{answer:#?}");
            assert!(answer.fallback.as_deref().is_some_and(|why| why.contains("had not finished")), "{answer:#?}");
            assert!(answer.text.contains("[Sesión 3]") && answer.text.contains("[Sesión 5]"), "{}", answer.text);
        }
    }
}

#[tokio::test]
async fn a_paced_model_answers_no_faster_than_its_pace_and_reports_it() {
    let pace = ModelSpeed { prompt_tokens_per_s: 100.0, generated_tokens_per_s: 20.0 };
    let paced = PacedChat::new(Arc::new(LocalChat::Instant), pace);
    assert_eq!(paced.speed().await, Some(pace));
    // Ten words of prompt (plus the template's markers) at 100 a second, three tokens at 20.
    let request = ChatRequest {
        messages: vec![oraculo::llm::chat::ChatMessage::user("una dos tres cuatro cinco seis siete ocho nueve diez")],
        json_schema: None,
        max_tokens: 16,
        temperature: 0.0,
    };
    let pieces = Mutex::new(Vec::<(Duration, String)>::new());
    let started = Instant::now();
    let sink = |piece: &str| pieces.lock().unwrap().push((started.elapsed(), piece.to_string()));
    let response = paced.chat(&request, Some(&sink)).await.unwrap();
    let elapsed = started.elapsed();
    assert_eq!(response.text, "uno dos tres");
    let pieces = pieces.into_inner().unwrap();
    let texts: Vec<&str> = pieces.iter().map(|(_, piece)| piece.as_str()).collect();
    assert_eq!(texts, ["uno ", "dos ", "tres"], "in order");
    let to_read = paced.count_message_tokens(&request.messages) as f64 / 100.0;
    // Never earlier than the pace: the first piece after the prompt is read, each next one
    // a token's time later, the reply after its last token.
    assert!(pieces[0].0.as_secs_f64() >= to_read - 1e-3, "{pieces:?}");
    assert!(pieces[2].0.as_secs_f64() >= to_read + 2.0 / 20.0 - 1e-3, "{pieces:?}");
    assert!(elapsed.as_secs_f64() >= to_read + 3.0 / 20.0 - 1e-3, "{elapsed:?}");
}
