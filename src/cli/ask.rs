//! `oraculo ask` and `oraculo chat`: a question answered from the notes, streamed on a terminal,
//! with its sources and a footer on how it was made.

use anyhow::Context;

use super::{ChatArgs, SearchArgs, render_error};
use crate::app::open_answerer;
use crate::oracle::{AnswerEvent, AnswerOptions, AskRequest, Oracle};
use crate::retrieve::{Audience, Turn, TurnRole};

pub(super) async fn ask(args: &SearchArgs) -> anyhow::Result<()> {
    let config = args.campaign.load_config()?;
    let history = read_history(args.history.as_deref())?;
    let mut oracle = open_answerer(&config).await?;
    oracle.set_k(args.k.max(1));
    if args.extractive {
        oracle.set_mode(crate::answer::AnswerMode::Extractive);
    }
    if let Some(speed) = args.pace {
        oracle.set_pace(speed);
    }
    let request = AskRequest {
        question: &args.question,
        history: &history,
        audience: if args.gm { Audience::Gm } else { Audience::Player },
    };
    if args.campaign.json {
        println!("{}", serde_json::to_string(&crate::app::answer_json(&oracle, &request).await?)?);
        return Ok(());
    }
    // The warnings (a rerank skipped, a model that failed) wait under the answer instead of
    // cutting into it on the screen.
    let _held_logs = crate::logging::hold_on_terminal();
    let answer = ask_streaming(&oracle, &request).await?;
    print_sources(&answer);
    println!("\n{}", render_footer(&answer));
    Ok(())
}

/// Asks, printing the notes' own sentences first (with `chat.instant_answer`), then the
/// model's answer under them as it streams (a structured answer sentence by sentence); the
/// final text is printed again only if it differs from what streamed: invented citations
/// marked, or the extractive answer that replaced a model's unusable one.
async fn ask_streaming(oracle: &Oracle, request: &AskRequest<'_>) -> anyhow::Result<crate::oracle::Answer> {
    use std::io::Write;
    let echo = super::Echo::default();
    let on_event = |event: AnswerEvent<'_>| match event {
        AnswerEvent::Instant(Some(instant)) => {
            println!("{}\n\n{}\n\n{}", INSTANT_HEADING, instant.text.trim(), MODEL_HEADING);
            let _ = std::io::stdout().flush();
        }
        AnswerEvent::Text(piece) => echo.print(piece),
        AnswerEvent::Stage(_) | AnswerEvent::Prepared(_) | AnswerEvent::Instant(None) => {}
    };
    let settled = oracle.answer(request, AnswerOptions::new(&on_event)).await?;
    let streamed = echo.into_printed();
    if let Some(why) = settled.instant_kept {
        println!("\n(the model's answer is not used: {}; the notes' sentences above stand)", instant_kept_reason(why));
        return Ok(settled.answer);
    }
    let model_text = settled.turn_text();
    if streamed.trim().is_empty() {
        println!("{model_text}");
    } else if streamed.trim() != model_text.trim() {
        println!();
        if settled.answer.fallback.is_some() {
            println!("\n(that answer could not be used; from the notes instead)");
        } else {
            println!("\n(checked: {} invented citation(s) marked [?])", settled.answer.invented_citations.len());
        }
        println!("{model_text}");
    } else {
        println!();
    }
    if !settled.notes_added.is_empty() {
        // Printed above already: the answer keeps them, and says which.
        let mut labels: Vec<&str> = settled.notes_added.iter().map(|excerpt| excerpt.label.as_str()).collect();
        labels.dedup();
        println!("\n(the answer keeps the notes' sentences above that it does not say: {})", labels.join(", "));
    }
    Ok(settled.answer)
}

/// Above the instant answer on a terminal.
const INSTANT_HEADING: &str = "── From the notes, as written (the model is writing its answer) ──";
/// Between the instant answer and the model's.
const MODEL_HEADING: &str = "── The model's answer ──";

/// Why the notes' sentences stand instead of the model's answer, for a terminal.
fn instant_kept_reason(why: crate::oracle::InstantKept) -> &'static str {
    match why {
        crate::oracle::InstantKept::ModelFailed => "the model failed",
        crate::oracle::InstantKept::ModelOutOfTime => "the model did not finish in time",
        crate::oracle::InstantKept::ModelAbstained => "the model found no answer in the notes",
    }
}

/// One line on how the answer was made: mode, model, time, and what limited the context.
pub(super) fn render_footer(answer: &crate::oracle::Answer) -> String {
    let seconds = answer.timings.total_ms / 1000.0;
    let mode = match answer.mode {
        crate::answer::AnswerMode::Structured => "structured",
        crate::answer::AnswerMode::Free => "free text",
        crate::answer::AnswerMode::Extractive => "extractive",
    };
    let model = match answer.mode {
        crate::answer::AnswerMode::Extractive => "no model".to_string(),
        _ => answer.chat_model.clone(),
    };
    let mut footer = format!("— {seconds:.1} s · {mode} · {model}");
    let plan = &answer.context_plan;
    if let (Some(budget), Some(prompt), Some(generated)) =
        (plan.answer_seconds, plan.prompt_tokens_per_s, plan.generated_tokens_per_s)
    {
        let story = if plan.arc_lines > 0 { format!("{} story line(s), ", plan.arc_lines) } else { String::new() };
        footer.push_str(&format!(
            " · planned for {budget:.0} s at {prompt:.0}/{generated:.1} tok/s ({story}{} fragment(s) as passages{})",
            plan.fragments_as_passages,
            if plan.prompt == crate::prompt::StructuredPrompt::Brief { ", brief prompt" } else { "" },
        ));
    }
    if let Some(reason) = &answer.fallback {
        footer.push_str(&format!("\n  (the model did not answer: {reason})"));
    }
    if let Some(reason) = &answer.cut_short {
        footer.push_str(&format!("\n  (the model was stopped: {reason}; the sentences it had written are shown)"));
    }
    for missing in &answer.missing_paths {
        footer.push_str(&format!(
            "\n  (searched without the {} path, which failed: {})",
            missing.path.as_str(),
            missing.error
        ));
    }
    footer
}

pub(super) fn print_sources(answer: &crate::oracle::Answer) {
    // In the answer's language, as the quotes above it: the rest of the terminal's frame
    // (the footer, the notices) is the DM's tool speaking, in English.
    let spanish = crate::oracle::question_language(&answer.question) == crate::corpus::LabelLanguage::Es;
    let valid: Vec<_> = answer.citations.iter().filter(|c| c.valid).collect();
    if valid.is_empty() {
        println!("\n{}", if spanish { "(ninguna fuente citada)" } else { "(no sources cited)" });
    } else {
        println!("\n{}", if spanish { "Fuentes:" } else { "Sources:" });
        // Quotes are their own excerpts: the answer above already shows each note's words.
        let quotes = !answer.quoted.is_empty();
        for citation in valid {
            println!("  [{}] {}", citation.label, citation.source_path.as_deref().unwrap_or(""));
            if let Some(excerpt) = citation.excerpt.as_ref().filter(|_| !quotes) {
                println!("      {excerpt}");
            }
        }
    }
    if !answer.invented_citations.is_empty() {
        println!("Invented citations removed: {}", answer.invented_citations.join("; "));
    }
}

pub(super) async fn chat(args: &ChatArgs) -> anyhow::Result<()> {
    use std::io::BufRead;
    let config = args.campaign.load_config()?;
    let oracle = open_answerer(&config).await?;
    let audience = if args.gm { Audience::Gm } else { Audience::Player };
    let mut history: Vec<Turn> = Vec::new();
    let mut last: Option<crate::oracle::Answer> = None;
    eprintln!("Oráculo: ask about the campaign. /fuentes shows the last answer's sources, /salir quits.");
    let stdin = std::io::stdin();
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            break;
        }
        let line = line.trim();
        match line {
            "" => continue,
            "/salir" | "/exit" | "/quit" => break,
            "/fuentes" | "/sources" => {
                match &last {
                    Some(answer) => print_sources(answer),
                    None => println!("(no answer yet)"),
                }
                continue;
            }
            _ => {}
        }
        let request = AskRequest { question: line, history: &history, audience };
        let _held_logs = crate::logging::hold_on_terminal();
        match ask_streaming(&oracle, &request).await {
            Ok(answer) => {
                if answer.joins_history() {
                    history.push(Turn { role: TurnRole::User, content: line.to_string() });
                    history.push(Turn { role: TurnRole::Assistant, content: answer.text.clone() });
                }
                last = Some(answer);
            }
            Err(err) => eprintln!("error: {}", render_error(&err)),
        }
    }
    Ok(())
}

/// Reads `--history`: a JSON list of turns.
pub(super) fn read_history(path: Option<&std::path::Path>) -> anyhow::Result<Vec<Turn>> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading history {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("history {}: expected a JSON list of {{\"role\", \"content\"}} turns", path.display()))
}
