//! Structured answers: the model fills a JSON schema instead of writing free text.
//!
//! `{"in_notes": bool, "sentences": [{"text": "…", "sources": ["<label>", …]}, …]}`, where
//! every source is an enum of exactly the labels shown. A grammar (llama.cpp), `format`
//! (Ollama) or `response_format` (OpenAI-compatible servers) holds the model to it, so a
//! small model cites the way the schema lets it, never a label it was not shown
//! (`docs/models.md`: the 1.5B cited reliably only this way).
//!
//! The answer is rendered as ordinary text with `[label]` after each sentence, so the
//! citation check, the answer object, the CLI and the bot see what free text gives them.
//! [`SentenceStream`] picks complete sentences out of the JSON while it streams, so a
//! reader sees each sentence as soon as it is written, not after the closing brace.
//!
//! A reply that breaks the contract (invalid JSON, no sentences, a label outside the enum
//! from a server that ignores the schema, "not in the notes" together with sentences, a
//! sentence with no label) is a [`StructuredError`]; the oracle retries once, then answers
//! extractively.

use serde::Deserialize;
use serde_json::json;

use crate::corpus::LabelLanguage;

/// Sentences a structured answer may hold: a direct answer, not a copy of the material.
/// Also bounds how long a small model can run on.
pub const MAX_SENTENCES: usize = 8;
/// Characters one sentence may take in the schema (`maxLength`): a sentence, not a page. The
/// grammar closes the string there, so a small model that runs on inside a sentence (SmolLM2
/// against a real llama-server did, until `max_tokens` cut the JSON) still returns valid JSON.
pub const MAX_SENTENCE_CHARS: usize = 400;

/// One sentence of a structured answer and the labels it rests on.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Sentence {
    pub text: String,
    pub sources: Vec<String>,
}

/// A reply that honours the schema and the labels shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructuredAnswer {
    /// False: the model says the notes do not hold the answer (and wrote no sentence).
    pub in_notes: bool,
    pub sentences: Vec<Sentence>,
}

/// Why a structured reply cannot be used as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StructuredError {
    #[error("the reply is not the JSON object the schema asks for ({0})")]
    InvalidJson(String),
    #[error("the reply says the notes hold the answer but gives no sentence")]
    NoSentences,
    #[error("the reply says the answer is not in the notes, yet gives {0} sentence(s)")]
    NotInNotesWithSentences(usize),
    #[error("sentence {0} is empty")]
    EmptySentence(usize),
    #[error("sentence {0} cites no label")]
    SentenceWithoutLabel(usize),
    #[error("sentence {index} cites `{label}`, which is not among the labels shown")]
    UnknownLabel { index: usize, label: String },
}

impl StructuredError {
    /// What is wrong, quoting nothing of the reply (in a GM answer, its words are GM text):
    /// what the logs say.
    pub fn without_reply_text(&self) -> String {
        match self {
            StructuredError::InvalidJson(_) => "the reply is not the JSON object the schema asks for".to_string(),
            StructuredError::UnknownLabel { index, .. } => {
                format!("sentence {index} cites a label that is not among the labels shown")
            }
            other => other.to_string(),
        }
    }
}

#[derive(Deserialize)]
struct RawAnswer {
    in_notes: bool,
    sentences: Vec<Sentence>,
}

/// The schema of a structured answer whose sources are exactly `shown_labels`.
///
/// Two shapes, one per value of the flag, so a grammar-constrained model cannot say "not in
/// the notes" and then write a sentence anyway (SmolLM2 against a real llama-server did, and
/// the answer fell back to extractive): `{"in_notes": true, "sentences": [1..8]}` or
/// `{"in_notes": false, "sentences": []}`. llama.cpp's grammar, Ollama's `format` and
/// llama-server's `response_format` all read `anyOf` and `const`; a server that ignores the
/// schema is still caught by [`parse_structured`].
/// With nothing shown, only the second shape is offered (an empty enum would be invalid).
/// `max_sentences` and `max_sentence_chars` bound the answer (at most [`MAX_SENTENCES`] and
/// [`MAX_SENTENCE_CHARS`]): a slow machine's plan asks for fewer, shorter sentences, and the
/// grammar then closes the JSON within the time it has.
pub fn answer_schema(shown_labels: &[String], max_sentences: usize, max_sentence_chars: usize) -> serde_json::Value {
    let max_sentences = max_sentences.clamp(1, MAX_SENTENCES);
    let max_sentence_chars = max_sentence_chars.clamp(1, MAX_SENTENCE_CHARS);
    let not_in_notes = json!({
        "type": "object",
        "properties": {
            "in_notes": { "const": false },
            "sentences": { "type": "array", "maxItems": 0 }
        },
        "required": ["in_notes", "sentences"],
        "additionalProperties": false
    });
    if shown_labels.is_empty() {
        return json!({ "anyOf": [not_in_notes] });
    }
    let answered = json!({
        "type": "object",
        "properties": {
            "in_notes": { "const": true },
            "sentences": {
                "type": "array",
                "minItems": 1,
                "maxItems": max_sentences,
                "items": {
                    "type": "object",
                    "properties": {
                        "text": { "type": "string", "minLength": 1, "maxLength": max_sentence_chars },
                        "sources": {
                            "type": "array",
                            "items": { "type": "string", "enum": shown_labels },
                            "minItems": 1,
                            "maxItems": 3
                        }
                    },
                    "required": ["text", "sources"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["in_notes", "sentences"],
        "additionalProperties": false
    });
    json!({ "anyOf": [answered, not_in_notes] })
}

/// Parses and checks a structured reply against the labels shown. Tolerates what servers
/// add around JSON (a Markdown code fence, spaces); nothing else.
pub fn parse_structured(reply: &str, shown_labels: &[String]) -> Result<StructuredAnswer, StructuredError> {
    let body = strip_code_fence(reply.trim());
    let raw: RawAnswer = serde_json::from_str(body).map_err(|err| StructuredError::InvalidJson(err.to_string()))?;
    match (raw.in_notes, raw.sentences.len()) {
        (true, 0) => return Err(StructuredError::NoSentences),
        (false, n) if n > 0 => return Err(StructuredError::NotInNotesWithSentences(n)),
        _ => {}
    }
    for (index, sentence) in raw.sentences.iter().enumerate() {
        if sentence.text.trim().is_empty() {
            return Err(StructuredError::EmptySentence(index + 1));
        }
        if sentence.sources.is_empty() {
            return Err(StructuredError::SentenceWithoutLabel(index + 1));
        }
        if let Some(label) = sentence.sources.iter().find(|label| !shown_labels.contains(label)) {
            return Err(StructuredError::UnknownLabel { index: index + 1, label: label.clone() });
        }
    }
    Ok(StructuredAnswer { in_notes: raw.in_notes, sentences: raw.sentences })
}

/// The answer as text: each sentence followed by its labels in one bracket (before its
/// final full stop), or the "not in the notes" line in the question's language.
pub fn render_structured(answer: &StructuredAnswer, language: LabelLanguage) -> String {
    if !answer.in_notes {
        return not_in_notes(language).to_string();
    }
    answer.sentences.iter().map(render_sentence).collect::<Vec<_>>().join(" ")
}

/// What the answer says when the notes hold nothing on the question.
pub fn not_in_notes(language: LabelLanguage) -> &'static str {
    match language {
        LabelLanguage::Es => "Las notas no dicen nada sobre esto.",
        LabelLanguage::En => "The notes do not say anything about this.",
    }
}

/// `Tomás cayó en el puente.` + [Sesión 7] → `Tomás cayó en el puente [Sesión 7].`
pub fn render_sentence(sentence: &Sentence) -> String {
    let text = sentence.text.trim();
    let mut labels: Vec<&str> = Vec::new();
    for label in &sentence.sources {
        if !labels.contains(&label.as_str()) {
            labels.push(label);
        }
    }
    let bracket = format!("[{}]", labels.join("; "));
    match text.strip_suffix(['.', '!', '?']) {
        Some(body) => {
            let end = &text[body.len()..];
            format!("{} {bracket}{end}", body.trim_end())
        }
        None => format!("{text} {bracket}"),
    }
}

/// Share of their content words two sentences must have in common (of all the words either
/// holds) for the later one to be a repeat: a near-copy of one passage with a name dropped or
/// a clause moved scores 0.8 to 1, a sentence that adds a place or a reason to an earlier one
/// about half. A small model on a slow machine copied one passage twice into one answer.
const REPEAT_OVERLAP: f64 = 0.7;

/// The ellipses that mark text a passage or the notes left out, or a sentence cut off.
const ELLIPSES: [&str; 4] = ["(…)", "[…]", "…", "..."];

/// The text a structured sentence may show: the gap marks it copied from a passage removed
/// («(…)», «[…]» inside it), and, when it ends in an ellipsis (a copy of a passage cut off
/// mid-sentence: «…y muy pocas sobre sus…»), trimmed back to its last complete sentence.
/// `None` when nothing complete is left: a fragment of a sentence is never the answer.
pub fn complete_sentence_text(text: &str) -> Option<String> {
    let mut text = text.trim().to_string();
    let cut_off = ELLIPSES.iter().any(|mark| text.ends_with(mark));
    for mark in ["(…)", "[…]", "(...)", "[...]"] {
        text = text.replace(mark, " ");
    }
    if cut_off {
        let body = text.trim_end().trim_end_matches(['…', '.']).trim_end();
        // The last sentence end before the cut, if the sentence holds one.
        let last_end = body
            .char_indices()
            .rfind(|&(at, c)| {
                matches!(c, '.' | '!' | '?') && body[at + c.len_utf8()..].starts_with(char::is_whitespace)
            })
            .map(|(at, c)| at + c.len_utf8());
        text = body[..last_end?].to_string();
    }
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    text.chars().any(char::is_alphanumeric).then_some(text)
}

/// The sentences of one answer so far, to tell a repeat ([`REPEAT_OVERLAP`]) from a new one.
#[derive(Debug, Default)]
pub struct Repeats {
    seen: Vec<std::collections::HashSet<String>>,
}

impl Repeats {
    /// Whether `text` says something new, remembering it when it does; a repeat of an earlier
    /// sentence is not admitted.
    pub fn admit(&mut self, text: &str) -> bool {
        if self.says_again(text) {
            return false;
        }
        self.seen.push(Repeats::words(text));
        true
    }

    /// Whether `text` repeats a sentence admitted before, remembering nothing.
    pub fn says_again(&self, text: &str) -> bool {
        let words = Repeats::words(text);
        let repeats = |earlier: &std::collections::HashSet<String>| {
            let shared = earlier.intersection(&words).count();
            let either = earlier.union(&words).count();
            either > 0 && shared as f64 / either as f64 >= REPEAT_OVERLAP
        };
        self.seen.iter().any(repeats)
    }

    fn words(text: &str) -> std::collections::HashSet<String> {
        crate::text::fold(text)
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| word.chars().count() >= 3 && !crate::lexicon::is_stopword(word))
            .map(str::to_string)
            .collect()
    }
}

fn strip_code_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else { return text };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    rest.strip_suffix("```").unwrap_or(rest).trim()
}

/// Picks complete sentences out of a structured reply while it streams: feed it every
/// piece, and it returns each sentence object as soon as its closing brace arrives.
/// It only finds; [`parse_structured`] still judges the whole reply at the end.
#[derive(Debug, Default)]
pub struct SentenceStream {
    buffer: String,
    /// Byte offset in `buffer` up to which the array has been scanned.
    scanned: usize,
    phase: StreamPhase,
    in_string: bool,
    escaped: bool,
    /// Nesting inside the sentences array (objects and arrays alike).
    depth: usize,
    object_start: usize,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum StreamPhase {
    #[default]
    BeforeArray,
    InArray,
    Done,
}

impl SentenceStream {
    pub fn new() -> SentenceStream {
        SentenceStream::default()
    }

    /// Adds `piece` and returns the sentences it completed.
    pub fn push(&mut self, piece: &str) -> Vec<Sentence> {
        self.buffer.push_str(piece);
        let mut complete = Vec::new();
        if self.phase == StreamPhase::BeforeArray {
            let Some(start) = array_start(&self.buffer) else { return complete };
            self.scanned = start;
            self.phase = StreamPhase::InArray;
        }
        if self.phase == StreamPhase::Done {
            return complete;
        }
        let mut offset = self.scanned;
        for (relative, c) in self.buffer[self.scanned..].char_indices() {
            offset = self.scanned + relative + c.len_utf8();
            if self.in_string {
                match (self.escaped, c) {
                    (true, _) => self.escaped = false,
                    (false, '\\') => self.escaped = true,
                    (false, '"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match c {
                '"' => self.in_string = true,
                '{' | '[' => {
                    if self.depth == 0 {
                        self.object_start = self.scanned + relative;
                    }
                    self.depth += 1;
                }
                '}' | ']' if self.depth == 0 => {
                    self.phase = StreamPhase::Done;
                    break;
                }
                '}' | ']' => {
                    self.depth -= 1;
                    if self.depth == 0
                        && let Ok(sentence) = serde_json::from_str::<Sentence>(&self.buffer[self.object_start..offset])
                    {
                        complete.push(sentence);
                    }
                }
                _ => {}
            }
        }
        self.scanned = offset;
        complete
    }
}

/// Byte offset just after the `[` that opens the `"sentences"` array, once it has arrived.
fn array_start(buffer: &str) -> Option<usize> {
    let key = buffer.find("\"sentences\"")?;
    let rest = &buffer[key + "\"sentences\"".len()..];
    let after_colon = rest.trim_start().strip_prefix(':')?;
    let after_bracket = after_colon.trim_start().strip_prefix('[')?;
    Some(buffer.len() - after_bracket.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Vec<String> {
        vec!["Sesión 7".to_string(), "Ficha: Baika".to_string()]
    }

    /// Parses `reply` against [`labels`] and renders it in Spanish, or shows the error.
    fn check(reply: &str, expect: &str) {
        let got = match parse_structured(reply, &labels()) {
            Ok(answer) => render_structured(&answer, LabelLanguage::Es),
            Err(err) => format!("error: {err}"),
        };
        assert_eq!(got, expect, "{reply}");
    }

    #[test]
    fn replies_and_their_defined_outcomes() {
        check(
            r#"{"in_notes": true, "sentences": [{"text": "Tomás cayó en el puente.", "sources": ["Sesión 7"]},
                {"text": "Baika teje redes", "sources": ["Ficha: Baika", "Sesión 7", "Ficha: Baika"]}]}"#,
            "Tomás cayó en el puente [Sesión 7]. Baika teje redes [Ficha: Baika; Sesión 7]",
        );
        check(r#"{"in_notes": false, "sentences": []}"#, "Las notas no dicen nada sobre esto.");
        check("```json\n{\"in_notes\": false, \"sentences\": []}\n```", "Las notas no dicen nada sobre esto.");
        check(
            "{\"in_notes\": true, \"sentences\": [",
            "error: the reply is not the JSON object the schema asks for (EOF while parsing a list at line 1 column 33)",
        );
        check(
            "",
            "error: the reply is not the JSON object the schema asks for (EOF while parsing a value at line 1 column 0)",
        );
        check(
            r#"{"in_notes": true, "sentences": []}"#,
            "error: the reply says the notes hold the answer but gives no sentence",
        );
        check(
            r#"{"in_notes": false, "sentences": [{"text": "x", "sources": ["Sesión 7"]}]}"#,
            "error: the reply says the answer is not in the notes, yet gives 1 sentence(s)",
        );
        check(
            r#"{"in_notes": true, "sentences": [{"text": "x", "sources": ["Sesión 99"]}]}"#,
            "error: sentence 1 cites `Sesión 99`, which is not among the labels shown",
        );
        check(r#"{"in_notes": true, "sentences": [{"text": "x", "sources": []}]}"#, "error: sentence 1 cites no label");
        check(
            r#"{"in_notes": true, "sentences": [{"text": "  ", "sources": ["Sesión 7"]}]}"#,
            "error: sentence 1 is empty",
        );
    }

    #[test]
    fn the_schema_lists_exactly_the_labels_shown() {
        let schema = answer_schema(&labels(), MAX_SENTENCES, MAX_SENTENCE_CHARS);
        let answered = &schema["anyOf"][0];
        let sentences = &answered["properties"]["sentences"];
        let sources = &sentences["items"]["properties"]["sources"];
        assert_eq!(sources["items"]["enum"], json!(["Sesión 7", "Ficha: Baika"]));
        assert_eq!(sources["minItems"], 1);
        // A sentence is bounded, so a model that runs on inside one still closes the JSON.
        let text = &sentences["items"]["properties"]["text"];
        assert_eq!(
            (text["minLength"].as_u64(), text["maxLength"].as_u64()),
            (Some(1), Some(MAX_SENTENCE_CHARS as u64))
        );
        // The flag and the sentences cannot disagree: true needs a sentence, false allows none.
        assert_eq!(
            (answered["properties"]["in_notes"]["const"].clone(), sentences["minItems"].clone()),
            (json!(true), json!(1))
        );
        let abstains = &schema["anyOf"][1];
        assert_eq!(abstains["properties"]["in_notes"]["const"], json!(false));
        assert_eq!(abstains["properties"]["sentences"]["maxItems"], 0);
        for shape in schema["anyOf"].as_array().into_iter().flatten() {
            assert_eq!(shape["required"], json!(["in_notes", "sentences"]));
        }
        // Nothing shown: no enum (it would be empty), only "not in the notes".
        let empty = answer_schema(&[], MAX_SENTENCES, MAX_SENTENCE_CHARS);
        // A plan's bounds, within the contract's.
        let planned = answer_schema(&labels(), 3, 280);
        let items = &planned["anyOf"][0]["properties"]["sentences"];
        assert_eq!(
            (items["maxItems"].as_u64(), items["items"]["properties"]["text"]["maxLength"].as_u64()),
            (Some(3), Some(280))
        );
        let unbounded = answer_schema(&labels(), 99, 9999);
        let items = &unbounded["anyOf"][0]["properties"]["sentences"];
        assert_eq!(items["maxItems"].as_u64(), Some(MAX_SENTENCES as u64));
        assert_eq!(empty["anyOf"].as_array().map(Vec::len), Some(1));
        assert_eq!(empty["anyOf"][0]["properties"]["in_notes"]["const"], json!(false));
        assert!(!empty.to_string().contains("enum"));
    }

    #[test]
    fn a_sentence_cut_off_by_an_ellipsis_keeps_only_what_is_complete() {
        let complete = |text: &str| complete_sentence_text(text);
        assert_eq!(complete("Leandro desapareció en la fiesta."), Some("Leandro desapareció en la fiesta.".into()));
        // Gap marks copied from a passage go; the sentence stays.
        assert_eq!(
            complete("Los recibe en su despacho (…) y se frota las manos."),
            Some("Los recibe en su despacho y se frota las manos.".into())
        );
        assert_eq!(complete("Está nervioso [...] y pálido."), Some("Está nervioso y pálido.".into()));
        // A copy cut mid-sentence is trimmed back to its last full stop, or dropped.
        assert_eq!(
            complete("Está distinto de como lo vieron. Habla mucho y muy pocas sobre sus…"),
            Some("Está distinto de como lo vieron.".into())
        );
        assert_eq!(complete("El archiduque los recibe y muy pocas sobre sus…"), None);
        assert_eq!(complete("Y entonces..."), None);
        assert_eq!(complete(" (…) "), None);
        // A decimal point or an abbreviation is no sentence end to cut back to.
        assert_eq!(complete("Pagó 2.5 coronas por sus…"), None);
    }

    #[test]
    fn a_repeated_sentence_is_not_admitted_and_one_that_adds_something_is() {
        let mut repeats = Repeats::default();
        assert!(repeats.admit(
            "El archiduque Leandro de Valdemora los recibe en su despacho, nervioso, pálido, frotándose las manos."
        ));
        // The same passage copied again with a name dropped.
        assert!(
            !repeats.admit(
                "El archiduque de Valdemora los recibe en su despacho, nervioso y pálido, frotándose las manos."
            )
        );
        // A sentence about him that says something else.
        assert!(repeats.admit("El archiduque desapareció durante la Fiesta de las Mareas."));
        // The earlier event with its consequence added is new.
        assert!(repeats.admit("Desapareció en la Fiesta de las Mareas y volvió como el Heraldo de la Marea Baja."));
        assert!(!repeats.admit("el archiduque DESAPARECIÓ durante la fiesta de las mareas"));
    }

    #[test]
    fn sentences_stream_as_each_one_closes() {
        let reply = r#"{"in_notes": true, "sentences": [{"text": "Dijo \"adiós}\" y [se fue].", "sources": ["Sesión 7"]}, {"text": "Ñu", "sources": ["Ficha: Baika"]}]}"#;
        // Fed a few characters at a time, as tokens arrive.
        let mut stream = SentenceStream::new();
        let mut seen: Vec<(usize, String)> = Vec::new();
        let chars: Vec<char> = reply.chars().collect();
        for (step, piece) in chars.chunks(3).enumerate() {
            for sentence in stream.push(&piece.iter().collect::<String>()) {
                seen.push((step * 3, render_sentence(&sentence)));
            }
        }
        let texts: Vec<&str> = seen.iter().map(|(_, text)| text.as_str()).collect();
        assert_eq!(texts, ["Dijo \"adiós}\" y [se fue] [Sesión 7].", "Ñu [Ficha: Baika]"]);
        // The first sentence came out as soon as it closed, long before the reply ended.
        assert!(seen[0].0 + 40 < chars.len(), "{seen:?}");
        // Nothing after the array closes, and nothing before it opens.
        assert!(stream.push(r#"{"text": "x", "sources": []}"#).is_empty());
        assert!(SentenceStream::new().push(r#"{"in_notes": false, "#).is_empty());
    }
}
