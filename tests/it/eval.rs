//! `oraculo eval` end to end: every pipeline variant and the naive baseline over a real index,
//! answers from a scripted chat model speaking Ollama's wire format, and the report the
//! binary saves.

use oraculo::eval::{
    AnswerScope, EvalOptions, EvalQuestion, FULL_PIPELINE, FUSION_ONLY, NAIVE_BASELINE, NAIVE_DENSE, RunInfo, run_eval,
};
use oraculo::oracle::{AnswerSettings, Oracle};

use crate::fake_ollama::FakeOllama;
use crate::harness::{Ingested, ollama_chat, port_campaign};

fn bank() -> Vec<EvalQuestion> {
    let text = r#"
{"id": "puente", "kind": "fact", "question": "¿Qué le pasó a Tomás en el puente?", "expected": ["Sesión 7"], "key_facts": ["combate", "río"]}
{"id": "torneo", "kind": "unanswerable", "question": "¿Quién ganó el torneo de justas?", "forbidden": ["Umbravela"]}
{"id": "baika", "kind": "arc", "question": "¿Qué ha hecho Baika en la campaña?", "expected": ["Sesión 2", "Sesión 4", "Sesión 9"], "key_facts": ["red"]}
"#;
    oraculo::eval::bank::parse_and_check(text).unwrap()
}

#[tokio::test]
async fn eval_runs_every_variant_and_scores_the_answers() {
    let Ingested { fake, scratch, embedder } = Ingested::port().await;
    let chat = ollama_chat(fake.url());
    // No annotations: the rerank switches itself off without a call, so the only chat calls
    // are the three answers, in bank order.
    fake.enqueue_reply("Tomás cayó en combate defendiendo el puente [Sesión 7].");
    fake.enqueue_reply("Las notas no mencionan ningún torneo.");
    fake.enqueue_reply("Baika tejió una red encantada [Sesión 4] y perdió su barca [Sesión 2] [Sesión 42].");
    let oracle = Oracle::new(&scratch.index_dir(), embedder, chat, AnswerSettings::new(128));
    let options = EvalOptions { answers: AnswerScope::All, ablations: true, batch_size: 8, baseline_cache: None };
    let asked = std::sync::Mutex::new(Vec::new());
    let progress =
        |n: usize, total: usize, question: &EvalQuestion| asked.lock().unwrap().push((n, total, question.id.clone()));
    let report = run_eval(&oracle, &bank(), &options, RunInfo::default(), &progress).await.unwrap();

    assert_eq!(asked.into_inner().unwrap().iter().map(|(n, _, _)| *n).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(fake.chat_requests("/api/chat").len(), 3, "variants other than the full pipeline never call the model");
    let names: Vec<&str> = report.variants.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        [
            FULL_PIPELINE,
            FUSION_ONLY,
            "dense+bm25+entity+rerank, no time path",
            "dense",
            "bm25",
            "entity",
            "dense+bm25",
            "dense+entity",
            "bm25+entity",
            "bm25 [bm25 by best passage]",
            "dense+bm25+entity+time [bm25 by best passage]",
            "bm25 [bm25 by best two passages]",
            "dense+bm25+entity+time [bm25 by best two passages]",
            NAIVE_BASELINE,
            NAIVE_DENSE
        ]
    );
    assert_eq!(report.errors, 0);
    let row = |id: &str| report.rows.iter().find(|row| row.id == id).unwrap();

    // A path switched off is really off: nobody is named, so the entity path alone finds nothing.
    let puente = row("puente");
    assert!(puente.variants["entity"].pool.is_empty());
    assert_eq!(puente.variants["bm25"].top, ["Sesión 7"]);
    assert_eq!(puente.variants[FUSION_ONLY].top, ["Sesión 7"]);
    assert_eq!(puente.variants[NAIVE_BASELINE].top, ["Sesión 7"]);
    assert_eq!(puente.variants[NAIVE_DENSE].top, ["Sesión 7"]);
    assert_eq!(puente.rerank.as_deref(), Some("skipped: missing_annotation"));
    let answer = puente.answer.as_ref().unwrap();
    assert!(answer.supported && !answer.abstained);
    assert_eq!(
        (answer.key_facts_found.as_slice(), answer.key_facts_missing.as_slice()),
        (&["combate".to_string()][..], &["río".to_string()][..])
    );
    let timings = puente.timings.as_ref().unwrap();
    assert!(timings.generation_ms > 0.0 && timings.total_ms >= timings.generation_ms);

    // Named by the compendium: the entity path alone brings every session of hers.
    let baika = row("baika");
    assert_eq!(baika.variants["entity"].pool, ["Sesión 2", "Sesión 4", "Sesión 9"]);
    assert_eq!(baika.answer.as_ref().unwrap().invented_citations, ["Sesión 42"]);

    let torneo = row("torneo");
    assert!(torneo.answer.as_ref().unwrap().abstained);

    let answers = report.answers.as_ref().unwrap();
    // What stays is scored: the unanswerable one abstains with nothing quoted (no sentence of
    // the notes holds what it asks, «torneo», «justas»), so two of the three answers cite.
    assert_eq!((answers.answered, answers.cited, answers.supported, answers.answerable), (3, 2, 2, 2));
    assert_eq!(
        (answers.abstained_unanswerable, answers.unanswerable, answers.invented_citations, answers.leaks),
        (1, 1, 1, 0)
    );
    // Unanswerable questions count in no retrieval figure.
    let full = report.variant(FULL_PIPELINE).unwrap();
    assert_eq!(full.overall.questions, 2);
    assert_eq!(full.arc.questions, 1);
    assert!(report.latency.contains_key("generation") && report.latency.contains_key("total"));
    // A sample per kind: the second fact question is searched and scored, not answered.
    let two_facts = oraculo::eval::bank::parse_and_check(
        r#"{"id": "a", "kind": "fact", "question": "¿Qué le pasó a Tomás en el puente?", "expected": ["Sesión 7"]}
{"id": "b", "kind": "fact", "question": "¿Quién visita el puerto?", "expected": ["Sesión 6"]}"#,
    )
    .unwrap();
    fake.enqueue_reply("Cayó en combate [Sesión 7].");
    let sampled =
        EvalOptions { answers: AnswerScope::PerKind(1), ablations: false, batch_size: 8, baseline_cache: None };
    let partial = run_eval(&oracle, &two_facts, &sampled, RunInfo::default(), &|_, _, _| {}).await.unwrap();
    assert_eq!(fake.chat_requests("/api/chat").len(), 4);
    assert!(partial.rows[0].answer.is_some() && partial.rows[1].answer.is_none());
    assert_eq!(partial.rows[1].variants[FULL_PIPELINE].top, ["Sesión 6"]);
    assert_eq!(partial.answers.as_ref().unwrap().answered, 1);

    let table = report.render();
    for heading in ["Retrieval by kind", "Ablations", "Answers (3 generated)", "Latency per stage", "The bar"] {
        assert!(table.contains(heading), "{heading} missing from\n{table}");
    }
}

#[tokio::test]
async fn the_binary_saves_its_report_and_wants_a_bank_for_a_real_campaign() {
    let scratch = port_campaign();
    let fake = FakeOllama::start(&["bge-m3", "qwen2.5:14b"]).await;
    let bank_path = scratch.data.path().join("bank.jsonl");
    let text: String = bank().iter().map(|q| serde_json::to_string(q).unwrap() + "\n").collect();
    std::fs::write(&bank_path, text).unwrap();
    let out = scratch.data.path().join("report.json");
    let oraculo = |args: &[&str]| {
        let mut command = crate::harness::oraculo_command(&scratch, &fake, &["eval"]);
        command.args(args);
        command
    };
    let mut missing_bank = oraculo(&[]);
    let output = tokio::task::spawn_blocking(move || missing_bank.output().unwrap()).await.unwrap();
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--questions"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let mut eval = oraculo(&[
        "--questions",
        bank_path.to_str().unwrap(),
        "--retrieval-only",
        "--no-ablations",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let output = tokio::task::spawn_blocking(move || eval.output().unwrap()).await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(printed, saved);
    assert_eq!(saved["questions"], 3);
    assert_eq!(
        saved["variants"].as_array().unwrap().len(),
        3,
        "--no-ablations: the full pipeline, the fusion, and the pipeline without the time path"
    );
    assert!(saved["answers"].is_null(), "--retrieval-only generates nothing");
    assert_eq!(saved["rows"][0]["variants"][FUSION_ONLY]["top"][0], "Sesión 7");
    assert_eq!(saved["run"]["embedder"], "ollama:bge-m3");
}
