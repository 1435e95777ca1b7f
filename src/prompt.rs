//! The prompts, as versioned files under `prompts/`, and the messages built from them.
//!
//! A prompt file is a system prompt, a line `<!-- user -->`, and a template for the user
//! message with `{{name}}` placeholders. Placeholders are filled in one pass, so a question
//! or a note that happens to contain `{{material}}` is left alone.
//!
//! A file is never edited in place once it has been used: a new wording is a new file
//! (`answer.v2.md`) and a new version constant. The versions are part of the cache keys of
//! what the prompts produce (the annotation cache), so a new wording re-annotates.
//!
//! Every citation example in the prompts is digit-free on purpose, because a model copies an
//! example session number into answers that do not come from that session. A test scans every file under `prompts/` for it.

use crate::corpus::FragmentId;
use serde_json::json;

use crate::llm::chat::{ChatMessage, ChatRole};

use crate::answer::Context;

pub const ANSWER_PROMPT_VERSION: &str = "answer.v3";
pub const STRUCTURED_ANSWER_PROMPT_VERSION: &str = "answer-structured.v4";
pub const BRIEF_STRUCTURED_ANSWER_PROMPT_VERSION: &str = "answer-structured-brief.v1";
pub const ANNOTATE_PROMPT_VERSION: &str = "annotate.v1";
pub const RERANK_PROMPT_VERSION: &str = "rerank.v1";
/// Entity extraction for the compendium; cached with the annotations under this version.
pub const ENTITIES_PROMPT_VERSION: &str = "entities.v1";

/// `prompts/answer.v3.md`: the answer's system prompt and the user message carrying the
/// material and the question.
pub const ANSWER_PROMPT: &str = include_str!("../prompts/answer.v3.md");
/// `prompts/answer-structured.v4.md`: the answer as JSON sentences, each with its labels
/// (`answer::structured`). The system prompt comes first and never changes between
/// questions, so llama.cpp reuses its cached keys and values.
pub const STRUCTURED_ANSWER_PROMPT: &str = include_str!("../prompts/answer-structured.v4.md");
/// `prompts/answer-structured-brief.v1.md`: the same contract in a third of the words, for a
/// machine that would spend more than a quarter of the answer's time reading the full one
/// (about 850 tokens: 42 s at 20 prompt tokens a second). The schema holds the model to the
/// form either way; the brief prompt keeps the rules that decide what is written.
pub const BRIEF_STRUCTURED_ANSWER_PROMPT: &str = include_str!("../prompts/answer-structured-brief.v1.md");
/// `prompts/annotate.v1.md`: the one-or-two-sentence description of a fragment.
pub const ANNOTATE_PROMPT: &str = include_str!("../prompts/annotate.v1.md");
/// `prompts/rerank.v1.md`: the best ids among the candidates' annotations, as JSON.
pub const RERANK_PROMPT: &str = include_str!("../prompts/rerank.v1.md");
/// Asks for the named entities of a session fragment as JSON.
pub const ENTITIES_PROMPT: &str = include_str!("../prompts/entities.v1.md");

/// Every prompt file with its version, for tests and for `oraculo` to show.
pub const PROMPT_FILES: &[(&str, &str)] = &[
    (ANSWER_PROMPT_VERSION, ANSWER_PROMPT),
    (STRUCTURED_ANSWER_PROMPT_VERSION, STRUCTURED_ANSWER_PROMPT),
    (BRIEF_STRUCTURED_ANSWER_PROMPT_VERSION, BRIEF_STRUCTURED_ANSWER_PROMPT),
    (ANNOTATE_PROMPT_VERSION, ANNOTATE_PROMPT),
    (RERANK_PROMPT_VERSION, RERANK_PROMPT),
    (ENTITIES_PROMPT_VERSION, ENTITIES_PROMPT),
];

/// Earlier messages of a conversation sent with a question: three exchanges. Enough for a
/// follow-up ("¿y después?") to be understood, few enough not to crowd out the material.
pub const MAX_HISTORY_MESSAGES: usize = 6;

/// The answer conversation: system prompt, the bounded history (see [`bounded_history`]),
/// then one user message with the material and the question.
pub fn answer_messages(question: &str, history: &[ChatMessage], context: &Context) -> Vec<ChatMessage> {
    conversation(ANSWER_PROMPT, question, history, context)
}

/// The structured answer conversation: as [`answer_messages`], with the prompt that asks for
/// the JSON of `answer::structured`.
pub fn structured_answer_messages(
    question: &str,
    history: &[ChatMessage],
    context: &Context,
    prompt: StructuredPrompt,
) -> Vec<ChatMessage> {
    let file = match prompt {
        StructuredPrompt::Full => STRUCTURED_ANSWER_PROMPT,
        StructuredPrompt::Brief => BRIEF_STRUCTURED_ANSWER_PROMPT,
    };
    conversation(file, question, history, context)
}

/// Which wording of the structured answer's system prompt a question is asked with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StructuredPrompt {
    /// `answer-structured.v4`: the rules with two worked replies.
    Full,
    /// `answer-structured-brief.v1`: the rules alone, for a slow machine's time plan.
    Brief,
}

/// An answer prompt file's conversation: its system prompt first (the stable prefix a
/// backend can keep cached), the bounded history, then the material and the question.
fn conversation(
    prompt_file: &'static str,
    question: &str,
    history: &[ChatMessage],
    context: &Context,
) -> Vec<ChatMessage> {
    let (system, user) = split_prompt(prompt_file);
    let mut messages = vec![ChatMessage::system(system)];
    messages.extend(bounded_history(history));
    messages.push(ChatMessage::user(fill(user, &[("material", &context.text), ("question", question.trim())])));
    messages
}

/// What the model is told when its structured reply could not be used, before its one retry.
pub fn structured_retry_message(problem: &str) -> ChatMessage {
    ChatMessage::user(format!(
        "Esa respuesta no vale: {problem}. Responde otra vez con el objeto JSON pedido: \"in_notes\" y \"sentences\", \
         cada frase con al menos una etiqueta exacta del material."
    ))
}

/// The history the answer prompt carries: the last [`MAX_HISTORY_MESSAGES`] user and
/// assistant messages (system messages are dropped), starting with a user message so that
/// strict chat templates see the roles alternate.
pub fn bounded_history(history: &[ChatMessage]) -> Vec<ChatMessage> {
    let turns: Vec<&ChatMessage> = history
        .iter()
        .filter(|message| message.role == ChatRole::User || message.role == ChatRole::Assistant)
        .collect();
    let recent = &turns[turns.len().saturating_sub(MAX_HISTORY_MESSAGES)..];
    let first_user = recent.iter().position(|message| message.role == ChatRole::User).unwrap_or(recent.len());
    recent[first_user..].iter().map(|&message| message.clone()).collect()
}

/// The request for one fragment's annotation.
pub fn annotate_messages(label: &str, text: &str) -> Vec<ChatMessage> {
    let (system, user) = split_prompt(ANNOTATE_PROMPT);
    vec![ChatMessage::system(system), ChatMessage::user(fill(user, &[("label", label), ("text", text.trim())]))]
}

/// The rerank request: the question and each candidate's annotation under its id, asking
/// for the best `n` ids. Only annotations are shown, never fragment text: measured on a
/// 30-question bank, raw text dropped recall to 0.73 and annotations raised it to 0.93.
pub fn rerank_messages(question: &str, candidates: &[(FragmentId, &str)], n: usize) -> Vec<ChatMessage> {
    let (system, user) = split_prompt(RERANK_PROMPT);
    let n = n.to_string();
    let lines: Vec<String> = candidates
        .iter()
        .map(|(fragment_id, annotation)| {
            let annotation = annotation.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("- id {fragment_id}: {annotation}")
        })
        .collect();
    let candidates = lines.join("\n");
    let values = [("n", n.as_str()), ("question", question.trim()), ("candidates", candidates.as_str())];
    vec![ChatMessage::system(fill(system, &values)), ChatMessage::user(fill(user, &values))]
}

/// The request for one session fragment's named entities (the compendium's LLM source).
pub fn entities_messages(label: &str, text: &str) -> Vec<ChatMessage> {
    let (system, user) = split_prompt(ENTITIES_PROMPT);
    vec![ChatMessage::system(system), ChatMessage::user(fill(user, &[("label", label), ("text", text.trim())]))]
}

/// `{"entities": [{"name", "kind", "aliases", "description"}]}`.
pub fn entities_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "entities": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": { "type": "string" },
                        "kind": { "type": "string", "enum": ["pc", "npc", "place", "god", "faction", "item", "other"] },
                        "aliases": { "type": "array", "items": { "type": "string" } },
                        "description": { "type": "string" }
                    },
                    "required": ["name", "kind", "aliases", "description"]
                }
            }
        },
        "required": ["entities"]
    })
}

/// The JSON schema the rerank reply must satisfy: `{"ids": [integer, …]}`, at most `n`.
pub fn rerank_schema(n: usize) -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "ids": {
                "type": "array",
                "items": { "type": "integer" },
                "maxItems": n,
            },
        },
        "required": ["ids"],
        "additionalProperties": false,
    })
}

/// The line that separates a prompt file's system part from its user template.
const USER_MARKER: &str = "<!-- user -->";

/// (system prompt, user template) of a prompt file.
fn split_prompt(file: &'static str) -> (&'static str, &'static str) {
    let (system, user) = file.split_once(USER_MARKER).expect("every prompt file has a user part (tested)");
    (system.trim(), user.trim())
}

/// Replaces each `{{name}}` of `template` whose name is in `values`, in one left-to-right
/// pass: substituted text is never scanned again. Unknown placeholders stay as written.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut filled = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        filled.push_str(&rest[..open]);
        let after_open = &rest[open + 2..];
        let value = after_open.find("}}").and_then(|close| {
            values.iter().find(|(name, _)| *name == &after_open[..close]).map(|(_, value)| (close, value))
        });
        match value {
            Some((close, value)) => {
                filled.push_str(value);
                rest = &after_open[close + 2..];
            }
            None => {
                filled.push_str("{{");
                rest = after_open;
            }
        }
    }
    filled.push_str(rest);
    filled
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::answer::context::{ARC_BLOCK_NAME, FULL_BLOCK_NAME, SUMMARIES_BLOCK_NAME};

    /// Renders messages as `role: content` blocks separated by `---` lines and compares.
    fn check(messages: &[ChatMessage], expect: &str) {
        let rendered: Vec<String> =
            messages.iter().map(|message| format!("{}: {}", message.role.as_str(), message.content)).collect();
        assert_eq!(rendered.join("\n---\n"), expect.trim());
    }

    fn prompts_dir() -> PathBuf {
        // `file!()` is relative to the crate root, or absolute when the module is mounted by
        // `#[path]` from another crate.
        let this_file = Path::new(file!());
        let this_file = if this_file.is_absolute() {
            this_file.to_path_buf()
        } else {
            Path::new(env!("CARGO_MANIFEST_DIR")).join(this_file)
        };
        this_file.ancestors().nth(2).expect("src/prompt.rs is two levels down").join("prompts")
    }

    /// Every `[...]` in `text` that holds a digit.
    fn brackets_with_digits(text: &str) -> Vec<String> {
        let mut found = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find(['[', '【']) {
            let after_open = &rest[open..];
            let Some(close) = after_open.find([']', '】']) else { break };
            let inside = &after_open[..close];
            if inside.chars().any(|c| c.is_numeric()) {
                found.push(inside.to_string());
            }
            rest = &after_open[1..];
        }
        found
    }

    #[test]
    fn no_prompt_file_has_a_digit_inside_brackets() {
        let mut n_files = 0;
        for entry in std::fs::read_dir(prompts_dir()).expect("prompts/ is readable") {
            let path = entry.expect("prompts/ entries are readable").path();
            let text = std::fs::read_to_string(&path).expect("prompt files are UTF-8");
            assert_eq!(brackets_with_digits(&text), Vec::<String>::new(), "{}", path.display());
            let registered = PROMPT_FILES.iter().any(|(_, registered)| *registered == text);
            assert!(registered, "{} is not in PROMPT_FILES", path.display());
            n_files += 1;
        }
        assert_eq!(n_files, PROMPT_FILES.len());
        // The scanner itself finds what it must.
        assert_eq!(brackets_with_digits("[Sesión …] y [Sesión 12] y {\"ids\": [3]}"), ["[Sesión 12", "[3"]);
    }

    #[test]
    fn prompt_files_split_and_fill_completely() {
        for (version, file) in PROMPT_FILES {
            assert!(file.contains(USER_MARKER), "{version}");
            let (system, user) = split_prompt(file);
            assert!(!system.is_empty() && !user.is_empty(), "{version}");
        }
        let context = Context {
            arc: None,
            full: vec![],
            summaries: vec![],
            text: "MATERIAL".to_string(),
            shown_labels: vec![],
            dropped_for_budget: 0,
        };
        let built = [
            answer_messages("q", &[], &context),
            structured_answer_messages("q", &[], &context, StructuredPrompt::Full),
            structured_answer_messages("q", &[], &context, StructuredPrompt::Brief),
            annotate_messages("l", "t"),
            rerank_messages("q", &[(FragmentId(1), "a")], 8),
        ];
        for message in built.iter().flatten() {
            assert!(!message.content.contains("{{"), "unfilled placeholder in {}", message.content);
        }
    }

    #[test]
    fn the_structured_prompt_s_examples_are_answers_the_schema_accepts() {
        // A small model copies an example's shape: each example reply must be one that
        // `parse_structured` takes, with its labels among the example material's.
        let (system, _) = split_prompt(STRUCTURED_ANSWER_PROMPT);
        let example_labels: Vec<String> = system
            .match_indices("«[")
            .filter_map(|(at, _)| system[at + "«[".len()..].split_once(']').map(|(label, _)| label.to_string()))
            .collect();
        assert!(!example_labels.is_empty(), "the examples show their material with a label");
        let replies: Vec<&str> = system.lines().filter(|line| line.starts_with("{\"in_notes\"")).collect();
        let parsed: Vec<bool> = replies
            .iter()
            .map(|reply| match crate::answer::structured::parse_structured(reply, &example_labels) {
                Ok(answer) => answer.in_notes,
                Err(err) => panic!("{reply}: {err}"),
            })
            .collect();
        // One answered, one «not in the notes»: the model sees both shapes.
        assert_eq!(parsed, [true, false]);
    }

    #[test]
    fn answer_prompt_names_the_blocks_and_the_rules() {
        let (system, user) = split_prompt(ANSWER_PROMPT);
        for required in [
            ARC_BLOCK_NAME,
            FULL_BLOCK_NAME,
            SUMMARIES_BLOCK_NAME,
            "idioma de la pregunta",
            "[Sesión …]",
            "[Ficha: …]",
            "[Mundo: …]",
        ] {
            assert!(system.contains(required), "answer prompt lacks {required:?}");
        }
        // Both structured wordings name the story block and the summaries.
        for file in [STRUCTURED_ANSWER_PROMPT, BRIEF_STRUCTURED_ANSWER_PROMPT] {
            let (system, _) = split_prompt(file);
            for required in [ARC_BLOCK_NAME, SUMMARIES_BLOCK_NAME, "idioma de la pregunta"] {
                assert!(system.contains(required), "structured prompt lacks {required:?}");
            }
        }
        assert!(user.contains("{{material}}") && user.contains("{{question}}"));
        let material_at = user.find("{{material}}");
        assert!(material_at < user.find("{{question}}"), "the question comes after the material");
    }

    #[test]
    fn answer_messages_carry_history_then_material_and_question() {
        let context = Context {
            arc: None,
            full: vec![],
            summaries: vec![],
            text: "== Fragmentos completos ==\n\n### [Sesión 2]\nBaika llega a {{question}}.".to_string(),
            shown_labels: vec!["Sesión 2".to_string()],
            dropped_for_budget: 0,
        };
        let history = [
            ChatMessage::system("ignored"),
            ChatMessage::user("¿Quién es Baika?"),
            ChatMessage::assistant("Una ladrona [Ficha: Baika]."),
        ];
        let messages = answer_messages("  ¿y después?  ", &history, &context);
        let (system, _) = split_prompt(ANSWER_PROMPT);
        assert_eq!(messages[0], ChatMessage::system(system));
        check(
            &messages[1..],
            "
user: ¿Quién es Baika?
---
assistant: Una ladrona [Ficha: Baika].
---
user: # Material

== Fragmentos completos ==

### [Sesión 2]
Baika llega a {{question}}.

# Pregunta

¿y después?

(Recuerda: solo el material, en el idioma de la pregunta, y detrás de cada afirmación su etiqueta exacta entre corchetes.)",
        );
    }

    #[test]
    fn history_is_bounded_and_starts_with_a_user_message() {
        let history: Vec<ChatMessage> = (0..9)
            .map(|turn| {
                if turn % 2 == 0 {
                    ChatMessage::user(format!("u{turn}"))
                } else {
                    ChatMessage::assistant(format!("a{turn}"))
                }
            })
            .collect();
        // The last six are a3 u4 a5 u6 a7 u8: the leading assistant message goes.
        check(
            &bounded_history(&history),
            "user: u4\n---\nassistant: a5\n---\nuser: u6\n---\nassistant: a7\n---\nuser: u8",
        );
        check(&bounded_history(&[]), "");
    }

    #[test]
    fn annotate_and_rerank_messages() {
        let (annotate_system, _) = split_prompt(ANNOTATE_PROMPT);
        let messages = annotate_messages("Sesión 4", "Baika roba el ídolo.\n\n");
        assert_eq!(messages[0].content, annotate_system);
        check(&messages[1..], "user: Etiqueta: Sesión 4\n\nFragmento:\n\nBaika roba el ídolo.");

        let messages = rerank_messages(
            "¿Quién robó el ídolo?",
            &[(FragmentId(17), "Baika roba\nel ídolo."), (FragmentId(3), "Llegan a Vado.")],
            8,
        );
        assert!(messages[0].content.contains("Elige los 8 candidatos"), "{}", messages[0].content);
        check(
            &messages[1..],
            "user: Pregunta: ¿Quién robó el ídolo?\n\nCandidatos:\n- id 17: Baika roba el ídolo.\n- id 3: Llegan a Vado.",
        );
    }

    #[test]
    fn rerank_schema_limits_the_ids() {
        let schema = rerank_schema(8);
        assert_eq!(schema["properties"]["ids"]["maxItems"], 8);
        assert_eq!(schema["properties"]["ids"]["items"]["type"], "integer");
        assert_eq!(schema["required"], json!(["ids"]));
    }

    #[test]
    fn fill_is_one_pass() {
        assert_eq!(fill("a {{x}} b {{y}} {{z}} {{", &[("x", "{{y}}"), ("y", "Y")]), "a {{y}} b Y {{z}} {{");
    }
}
