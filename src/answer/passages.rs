//! The parts of a fragment that matter for a question: passages when a whole fragment costs
//! more time than a CPU has, and excerpts when no model can answer at all.
//!
//! - [`select_passages`]: the paragraphs of a fragment holding the question's terms and
//!   entities, under their headings, within a token share. The fragment stays the source
//!   (its label is what the model cites); only what it shows is narrowed.
//! - [`extract_excerpts`] / [`render_extractive`]: the extractive answer, 2 to 5 short
//!   sentences from the top fragments, each with its label. Instant, always cited, nothing
//!   invented.
//!
//! Pure: text in, text out; the oracle decides when each is used.

use std::collections::HashSet;
use std::ops::Range;

use crate::corpus::{Label, LabelLanguage, is_fence};

use crate::text::{ends_sentence, goes_on, list_item_text, sentence_ends, shorten};

use super::terms::{QueryTerms, content_words};

/// Excerpts an extractive answer gives at most: enough to show where the answer is, few
/// enough to read at a glance.
pub const MAX_EXCERPTS: usize = 5;
/// Excerpts an extractive answer gives when the fragments have that many sentences.
pub const MIN_EXCERPTS: usize = 2;
/// Excerpts taken from one fragment, so that the top one does not fill the answer alone.
const EXCERPTS_PER_FRAGMENT: usize = 2;
/// An excerpt is cut (at a word) beyond this many characters: a sentence, not a page.
pub const EXCERPT_MAX_CHARS: usize = 280;
/// A sentence shorter than this is read with the next one ("Llegan al puerto. Allí…").
const EXCERPT_MIN_CHARS: usize = 60;
/// What lying in the fragment's best dense window adds to a paragraph's score: as much as a
/// question word, less than an entity's name (2), so words and names still lead.
const DENSE_MATCH_WEIGHT: u32 = 1;
/// A paragraph longer than this many words is chosen from in pieces of whole sentences up
/// to this long: a long campaign's synopses run 500 to 800 words a paragraph, and a share of
/// ~250 tokens then showed only the opening of the one paragraph that fit, cut at a word,
/// while the sentence naming the answer lay further on. About three sentences of notes.
const PIECE_MAX_WORDS: usize = 80;
/// What a gap between two selected paragraphs looks like in the material.
pub const GAP_MARK: &str = "(…)";

/// One paragraph of a fragment with the headings above it.
#[derive(Debug)]
struct Paragraph<'a> {
    /// Heading lines (as written) enclosing it inside the fragment.
    headings: Vec<&'a str>,
    text: String,
    /// Its words among the fragment's whitespace-separated words (where a dense window lies).
    words: Range<usize>,
    /// For a piece of a long paragraph after its first ([`pieces`]): what joins it to the
    /// piece before (a space after a sentence, a line break after a line), so that two pieces
    /// shown together read as the one paragraph they are.
    continues: Option<char>,
}

fn paragraphs(text: &str) -> Vec<Paragraph<'_>> {
    struct Open<'a> {
        lines: Vec<&'a str>,
        first_word: usize,
    }
    fn flush<'a>(
        current: &mut Open<'a>,
        next_word: usize,
        headings: &[(usize, &'a str)],
        found: &mut Vec<Paragraph<'a>>,
    ) {
        if !current.lines.is_empty() {
            let headings_now = headings.iter().map(|(_, line)| *line).collect();
            found.push(Paragraph {
                headings: headings_now,
                text: current.lines.join("\n"),
                words: current.first_word..next_word,
                continues: None,
            });
            current.lines.clear();
        }
    }
    let mut found: Vec<Paragraph<'_>> = Vec::new();
    let mut headings: Vec<(usize, &str)> = Vec::new();
    let mut current = Open { lines: Vec::new(), first_word: 0 };
    let mut next_word = 0;
    for line in text.lines() {
        let trimmed = line.trim();
        let level = trimmed.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&level) && trimmed[level..].starts_with(' ') {
            flush(&mut current, next_word, &headings, &mut found);
            headings.retain(|(outer, _)| *outer < level);
            headings.push((level, trimmed));
        } else if trimmed.is_empty() {
            flush(&mut current, next_word, &headings, &mut found);
        } else {
            if current.lines.is_empty() {
                current.first_word = next_word;
            }
            current.lines.push(line);
        }
        next_word += line.split_whitespace().count();
    }
    flush(&mut current, next_word, &headings, &mut found);
    found
}

/// `paragraphs` with each one longer than `max_words` cut into pieces of whole sentences (or
/// whole lines, for a list) of at most `max_words` words; a longer sentence is a piece of its
/// own. Each piece keeps the paragraph's headings and knows where its words lie.
fn pieces(paragraphs: Vec<Paragraph<'_>>, max_words: usize) -> Vec<Paragraph<'_>> {
    let mut found = Vec::with_capacity(paragraphs.len());
    for paragraph in paragraphs {
        if paragraph.words.len() <= max_words {
            found.push(paragraph);
            continue;
        }
        // Each word, and whether it ends its line (a piece may end after it, or after a
        // sentence's last word).
        let mut words: Vec<(&str, bool)> = Vec::new();
        for line in paragraph.text.lines() {
            let line_words: Vec<&str> = line.split_whitespace().collect();
            let n = line_words.len();
            words.extend(line_words.into_iter().enumerate().map(|(at, word)| (word, at + 1 == n)));
        }
        let mut start = 0;
        let mut last_end = 0;
        for (at, &(word, ends_line)) in words.iter().enumerate() {
            let end = at + 1;
            if ends_line || ends_sentence(word) {
                if end - start > max_words && last_end > start {
                    found.push(piece(&paragraph, &words, start..last_end));
                    start = last_end;
                }
                last_end = end;
            }
        }
        if start < words.len() {
            found.push(piece(&paragraph, &words, start..words.len()));
        }
    }
    found
}

/// `words[range]` of `paragraph` as a piece: its lines kept, its words placed in the fragment.
fn piece<'a>(paragraph: &Paragraph<'a>, words: &[(&str, bool)], range: Range<usize>) -> Paragraph<'a> {
    let mut text = String::new();
    let mut after_line_end = false;
    for &(word, ends_line) in &words[range.clone()] {
        if !text.is_empty() {
            text.push(if after_line_end { '\n' } else { ' ' });
        }
        text.push_str(word);
        after_line_end = ends_line;
    }
    let first = paragraph.words.start;
    let continues = range.start.checked_sub(1).map(|before| if words[before].1 { '\n' } else { ' ' });
    Paragraph { headings: paragraph.headings.clone(), text, words: first + range.start..first + range.end, continues }
}

/// The paragraphs of `text` that matter for `terms`, within `max_tokens`: the best scoring
/// first (ties: the earlier), shown in their original order under their headings, a
/// [`GAP_MARK`] where paragraphs were left out. A paragraph mostly inside `dense_match` (the
/// words of the fragment's window nearest the question) scores [`DENSE_MATCH_WEIGHT`] more:
/// the passage that means the question without sharing its words. A text that fits is
/// returned whole; when not even one paragraph fits, the best one is cut at a word.
pub fn select_passages(
    text: &str,
    terms: &QueryTerms,
    dense_match: Option<Range<usize>>,
    max_tokens: usize,
    count_tokens: &dyn Fn(&str) -> usize,
) -> String {
    if count_tokens(text) <= max_tokens {
        return text.to_string();
    }
    let paragraphs = pieces(paragraphs(text), PIECE_MAX_WORDS);
    let in_dense_match = |paragraph: &Paragraph<'_>| {
        dense_match.as_ref().is_some_and(|window| {
            let inside = paragraph.words.end.min(window.end).saturating_sub(paragraph.words.start.max(window.start));
            !paragraph.words.is_empty() && 2 * inside >= paragraph.words.len()
        })
    };
    let mut ranked: Vec<(u32, usize)> = paragraphs
        .iter()
        .enumerate()
        .map(|(idx, paragraph)| {
            let dense = if in_dense_match(paragraph) { DENSE_MATCH_WEIGHT } else { 0 };
            // Read under its headings: a section headed «El Heraldo de la Marea Baja» is
            // about him in every paragraph, though only one may name him.
            let under_headings = format!("{}\n{}", paragraph.headings.join("\n"), paragraph.text);
            (terms.score(&under_headings) + dense, idx)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));

    let mut chosen: Vec<usize> = Vec::new();
    let mut used = 0;
    for &(_, idx) in &ranked {
        let paragraph = &paragraphs[idx];
        let cost =
            count_tokens(&paragraph.text) + paragraph.headings.iter().map(|h| count_tokens(h)).sum::<usize>() + 2;
        if used + cost <= max_tokens {
            used += cost;
            chosen.push(idx);
        }
    }
    if chosen.is_empty() {
        let Some(&(_, best)) = ranked.first() else { return String::new() };
        return cut_to_tokens(&paragraphs[best].text, terms, max_tokens, count_tokens);
    }
    chosen.sort_unstable();

    let mut rendered: Vec<String> = Vec::new();
    let mut shown_headings: Vec<&str> = Vec::new();
    let mut previous: Option<usize> = None;
    for idx in chosen {
        let paragraph = &paragraphs[idx];
        let skipped = match previous {
            Some(previous) => idx > previous + 1,
            None => idx > 0,
        };
        if skipped {
            rendered.push(GAP_MARK.to_string());
        }
        for heading in &paragraph.headings {
            if !shown_headings.contains(heading) {
                rendered.push(heading.to_string());
                shown_headings.push(heading);
            }
        }
        match rendered.last_mut() {
            // The next piece of the paragraph just shown: the same paragraph, one line.
            Some(shown) if !skipped && let Some(joiner) = paragraph.continues => {
                shown.push(joiner);
                shown.push_str(&paragraph.text);
            }
            _ => rendered.push(paragraph.text.clone()),
        }
        previous = Some(idx);
    }
    if previous.is_some_and(|last| last + 1 < paragraphs.len()) {
        rendered.push(GAP_MARK.to_string());
    }
    rendered.join("\n\n")
}

/// What of `text` (a paragraph or a piece of one that alone exceeds `max_tokens`) fits,
/// ending at a sentence's end: the whole sentences from its best-scoring one on while they
/// fit (a passage the model reads mid-sentence gets copied mid-sentence), and the first
/// words only when no sentence of it fits.
fn cut_to_tokens(text: &str, terms: &QueryTerms, max_tokens: usize, count_tokens: &dyn Fn(&str) -> usize) -> String {
    let all = sentences(text);
    let best = (0..all.len()).max_by(|&a, &b| terms.score(&all[a]).cmp(&terms.score(&all[b])).then(b.cmp(&a)));
    if let Some(best) = best {
        let mut end = best;
        let fits = |end: usize| count_tokens(&all[best..=end].join(" ")) + 2 <= max_tokens;
        if fits(best) {
            while end + 1 < all.len() && fits(end + 1) {
                end += 1;
            }
            let shown = all[best..=end].join(" ");
            return if end + 1 < all.len() { format!("{shown} {GAP_MARK}") } else { shown };
        }
    }
    cut_at_a_word(text, max_tokens, count_tokens)
}

/// The first words of `text` that fit `max_tokens`, with a closing [`GAP_MARK`].
fn cut_at_a_word(text: &str, max_tokens: usize, count_tokens: &dyn Fn(&str) -> usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let (mut low, mut high) = (0, words.len());
    // The longest prefix that fits, by bisection (token counts grow with the prefix).
    while low < high {
        let middle = (low + high).div_ceil(2);
        if count_tokens(&words[..middle].join(" ")) + 2 <= max_tokens {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    if low == 0 {
        return String::new();
    }
    format!("{} {GAP_MARK}", words[..low].join(" "))
}

/// Words an extractive annotation takes at most: the model's annotations run about 38.
const CENTRAL_MAX_WORDS: usize = 45;
/// What each mention of a campaign entity adds to a sentence's centrality: a name is what a
/// headline is about.
const CENTRAL_NAME_WEIGHT: f64 = 1.0;
/// What the first sentences of a fragment add: a session's notes open by saying where the
/// party is and what it is doing.
const CENTRAL_OPENING_BONUS: f64 = 0.5;

/// A fragment's extractive annotation: its one or two most central sentences, by its own
/// words and entities, in the order it tells them. A sentence is central when it holds the
/// words the fragment repeats (each word's weight is the log of how often the fragment says
/// it: a word said once adds nothing) and names its entities (`names_in` counts them);
/// long sentences do not win by length (the sum is over the square root of its words).
/// Made at ingest at no model cost, it is the headline the summaries show where no model
/// annotation exists.
pub fn central_sentences(text: &str, names_in: &dyn Fn(&str) -> usize) -> String {
    let all = sentences(text);
    if all.is_empty() {
        return String::new();
    }
    let mut frequency: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for word in content_words(text) {
        *frequency.entry(word).or_default() += 1;
    }
    let centrality = |idx: usize| {
        let sentence = &all[idx];
        let distinct: HashSet<String> = content_words(sentence).collect();
        let words: f64 = distinct.iter().map(|word| (*frequency.get(word).unwrap_or(&1) as f64).ln()).sum();
        let names = names_in(sentence) as f64 * CENTRAL_NAME_WEIGHT;
        let opening = if idx < 2 { CENTRAL_OPENING_BONUS } else { 0.0 };
        (words + names) / (sentence.split_whitespace().count().max(1) as f64).sqrt() + opening
    };
    let mut ranked: Vec<(f64, usize)> = (0..all.len()).map(|idx| (centrality(idx), idx)).collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut picked: Vec<usize> = Vec::new();
    let mut n_words = 0;
    for &(_, idx) in &ranked {
        let words = all[idx].split_whitespace().count();
        if picked.len() == 2 || (!picked.is_empty() && n_words + words > CENTRAL_MAX_WORDS) {
            continue;
        }
        picked.push(idx);
        n_words += words;
    }
    picked.sort_unstable();
    let text = picked.iter().map(|&idx| all[idx].as_str()).collect::<Vec<_>>().join(" ");
    shorten(&text, EXCERPT_MAX_CHARS)
}

/// One sentence of the notes, with the label it comes from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Excerpt {
    pub label: Label,
    pub text: String,
}

/// The extractive answer's excerpts from `fragments` (label, text; best first): the
/// sentences holding the most of the question's terms, at most [`EXCERPTS_PER_FRAGMENT`] a
/// fragment and [`MAX_EXCERPTS`] in all; when fewer than [`MIN_EXCERPTS`] match, the first
/// sentences of the top fragments fill in. Ordered by fragment, then by place in it.
pub fn extract_excerpts(fragments: &[(&str, &str)], terms: &QueryTerms) -> Vec<Excerpt> {
    let sentences: Vec<Vec<String>> = fragments.iter().map(|(_, text)| sentences(text)).collect();
    // (what the question asks that it holds, its whole score), fragment, sentence.
    let mut scored: Vec<((u32, u32), usize, usize)> = Vec::new();
    for (fragment_idx, fragment_sentences) in sentences.iter().enumerate() {
        for (sentence_idx, sentence) in fragment_sentences.iter().enumerate() {
            let score = terms.score(sentence);
            if score > 0 {
                scored.push(((terms.asked_score(sentence), score), fragment_idx, sentence_idx));
            }
        }
    }
    // A sentence holding what the question asks comes before those that only name its entity.
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut picked: Vec<(usize, usize)> = Vec::new();
    for (_, fragment_idx, sentence_idx) in scored {
        if picked.len() == MAX_EXCERPTS {
            break;
        }
        if picked.iter().filter(|(f, _)| *f == fragment_idx).count() < EXCERPTS_PER_FRAGMENT {
            picked.push((fragment_idx, sentence_idx));
        }
    }
    // Too few matches: the opening sentences of the top fragments say where to look.
    for fragment_idx in 0..sentences.len() {
        if picked.len() >= MIN_EXCERPTS {
            break;
        }
        if !sentences[fragment_idx].is_empty() && !picked.iter().any(|(f, _)| *f == fragment_idx) {
            picked.push((fragment_idx, 0));
        }
    }
    picked.sort_unstable();
    picked
        .into_iter()
        .map(|(fragment_idx, sentence_idx)| {
            let fragment_sentences = &sentences[fragment_idx];
            let mut text = fragment_sentences[sentence_idx].clone();
            if text.chars().count() < EXCERPT_MIN_CHARS
                && let Some(next) = fragment_sentences.get(sentence_idx + 1)
            {
                text = format!("{text} {next}");
            }
            let text = links_as_text(&text);
            Excerpt { label: Label::new(fragments[fragment_idx].0), text: shorten(&text, EXCERPT_MAX_CHARS) }
        })
        .collect()
}

/// A Markdown link `[Jaleas Ocre](https://…)` as its text, as a reader sees it: a quoted
/// line shows what the note says, not where it points.
pub fn links_as_text(text: &str) -> String {
    static LINK: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"!?\[(?P<text>[^\[\]\n]*)\]\([^()\n]*\)").expect("the link pattern is valid")
    });
    LINK.replace_all(text, "$text").into_owned()
}

/// The extractive answer as text: an introduction in the question's language (saying the
/// model could not answer, when that is why), then one line per excerpt with its label.
pub fn render_extractive(excerpts: &[Excerpt], language: LabelLanguage, model_failed: bool) -> String {
    render_quotes(excerpts, language, Framing { model_failed, ..Framing::default() })
}

/// Whose story an answer quotes: the entity's name, and the other names its lines call it
/// by that the introduction says (`answer::arc::other_names_quoted`).
#[derive(Debug, Clone, Copy)]
pub struct QuotedAbout<'a> {
    pub entity: &'a str,
    pub other_names: &'a [String],
}

/// What the introduction of quoted sentences says besides «this is what the notes say».
#[derive(Debug, Clone, Copy, Default)]
pub struct Framing<'a> {
    /// The model was asked and could not answer.
    pub model_failed: bool,
    /// The sentences are only the nearest the notes hold, not an answer
    /// (`answer::quotes::Quotes::Nearest`).
    pub nearest_only: bool,
    /// The quotes tell this entity's story.
    pub about: Option<QuotedAbout<'a>>,
    /// The language the notes are written in, when it is not the question's: their words
    /// are not the question's, so «nothing in the question's words» says where to look.
    pub notes_in: Option<LabelLanguage>,
}

/// Quoted sentences as an answer: an introduction in the question's language, as `framing`
/// says («Esto es lo que dicen las notas de Leandro de Valdemora, a quien también llaman «el
/// Heraldo de la Marea Baja»:»; «Las notas no lo dicen con las palabras de la pregunta; esto
/// es lo más cercano que dicen:»), then one line per excerpt with its label. None: «not in
/// the notes».
pub fn render_quotes(excerpts: &[Excerpt], language: LabelLanguage, framing: Framing<'_>) -> String {
    // Notes in another language share no word with the question: neither «nothing» nor
    // «not in the question's words» is the whole truth without saying so.
    let other_language = framing.notes_in.filter(|notes| *notes != language).map(|notes| match (language, notes) {
        (LabelLanguage::Es, LabelLanguage::En) => "están escritas en inglés: prueba a preguntarlo en inglés",
        (LabelLanguage::Es, _) => "están escritas en otro idioma: prueba a preguntarlo en el suyo",
        (LabelLanguage::En, LabelLanguage::Es) => "they are written in Spanish: try asking in Spanish",
        (LabelLanguage::En, _) => "they are written in another language: try asking in theirs",
    });
    if excerpts.is_empty() {
        return match (language, other_language) {
            (LabelLanguage::Es, Some(hint)) => {
                format!("No encuentro nada en las notas con las palabras de la pregunta; {hint}.")
            }
            (LabelLanguage::En, Some(hint)) => format!("I find nothing in the notes in the question's words; {hint}."),
            (LabelLanguage::Es, None) => "Las notas no dicen nada sobre esta pregunta.".to_string(),
            (LabelLanguage::En, None) => "The notes do not say anything about this question.".to_string(),
        };
    }
    let (failed, said, not_said, nearest, of, called, and) = match language {
        LabelLanguage::Es => (
            "El modelo de lenguaje no ha podido responder; ",
            "esto es lo que dicen las notas",
            "las notas no lo dicen con las palabras de la pregunta",
            "esto es lo más cercano que dicen",
            "de",
            ", a quien también llaman",
            "y",
        ),
        LabelLanguage::En => (
            "The language model could not answer; ",
            "this is what the notes say",
            "the notes do not say it in the question's words",
            "this is the nearest they say",
            "of",
            ", also called",
            "and",
        ),
    };
    let mut intro = match (framing.nearest_only, other_language) {
        (true, Some(hint)) => format!("{not_said} ({hint}); {nearest}"),
        (true, None) => format!("{not_said}; {nearest}"),
        (false, _) => said.to_string(),
    };
    if let Some(about) = framing.about {
        intro = format!("{intro} {of} {}", about.entity);
        if !about.other_names.is_empty() {
            let names: Vec<String> = about.other_names.iter().map(|name| format!("«{name}»")).collect();
            intro = format!("{intro}{called} {}", join_as_list(&names, and));
        }
    }
    let intro = if framing.model_failed { format!("{failed}{intro}") } else { upper_first(&intro) };
    format!("{intro}:\n{}", quoted_lines(excerpts))
}

/// `text` with its first letter in capitals.
fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `items` as a reader lists them: «a», «a y b», «a, b y c».
fn join_as_list(items: &[String], and: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} {and} {last}", init.join(", ")),
    }
}

/// The notes' sentences as an answer quotes them, one line each: `- «…» [Sesión 9]`.
pub fn quoted_lines(excerpts: &[Excerpt]) -> String {
    let lines: Vec<String> =
        excerpts.iter().map(|excerpt| format!("- «{}» [{}]", excerpt.text, excerpt.label)).collect();
    lines.join("\n")
}

/// The model's answer with the notes' sentences it did not say under it, quoted and cited
/// (`oracle::settle`: what the notes' sentences shown first said stays in the answer).
pub fn render_with_notes_also(answer: &str, also: &[Excerpt], language: LabelLanguage) -> String {
    if also.is_empty() {
        return answer.to_string();
    }
    let intro = match language {
        LabelLanguage::Es => "Las notas dicen además:",
        LabelLanguage::En => "The notes also say:",
    };
    format!("{}\n\n{intro}\n{}", answer.trim_end(), quoted_lines(also))
}

/// The sentence over the notes' sentences kept when the model found no answer in them: they
/// are what the notes hold nearest the question, not an answer.
pub fn not_said_as_such(language: LabelLanguage) -> &'static str {
    match language {
        LabelLanguage::Es => "Las notas no dicen la respuesta tal cual.",
        LabelLanguage::En => "The notes do not say the answer as such.",
    }
}

/// Words a paragraph's opening needs to tell a scene in a recap.
const RECAP_MIN_WORDS: usize = 4;

/// A session's extractive recap: [`MAX_EXCERPTS`] paragraphs' openings spread evenly from
/// its first to its last, in order, each with its label, so the excerpts tell the session
/// from beginning to end rather than what matches a question's words. A paragraph of a
/// session's notes is a scene, and its first sentence says what it is («Subida al faro…»);
/// one shorter than [`EXCERPT_MIN_CHARS`] is read with the next («Yo no pude llegar.» alone
/// says nothing).
pub fn recap_excerpts(fragments: &[(&str, &str)]) -> Vec<Excerpt> {
    let openings: Vec<(&str, String)> = fragments
        .iter()
        .flat_map(|(label, text)| {
            paragraphs(text).into_iter().filter_map(move |paragraph| {
                let own = sentences(&paragraph.text);
                let first = own.first()?;
                let opening = match own.get(1) {
                    Some(next) if first.chars().count() < EXCERPT_MIN_CHARS => format!("{first} {next}"),
                    _ => first.clone(),
                };
                Some((*label, opening))
            })
        })
        .collect();
    // A list in lowercase («- el faro sobre una ola…») goes on with the sentence announcing
    // it: it opens no scene, and the announcing opening is read with its first item.
    let mut joined: Vec<(&str, String)> = Vec::with_capacity(openings.len());
    for (label, opening) in openings {
        match joined.last_mut() {
            Some((last_label, last)) if *last_label == label && goes_on(&opening) && leads_into_next(last) => {
                last.push(' ');
                last.push_str(&opening);
            }
            _ => joined.push((label, opening)),
        }
    }
    let openings = joined;
    // A lone name in bold («**Rook**») heads what follows; it tells nothing, unless nothing else
    // does; nor does a paragraph going on with one before it.
    let telling: Vec<(&str, String)> = openings
        .iter()
        .filter(|(_, opening)| opening.split_whitespace().count() >= RECAP_MIN_WORDS && !goes_on(opening))
        .cloned()
        .collect();
    let openings = if telling.is_empty() { openings } else { telling };
    if openings.is_empty() {
        return Vec::new();
    }
    let n_picked = openings.len().min(MAX_EXCERPTS);
    let mut picked: Vec<usize> =
        (0..n_picked).map(|i| if n_picked == 1 { 0 } else { i * (openings.len() - 1) / (n_picked - 1) }).collect();
    picked.dedup();
    picked
        .into_iter()
        .map(|idx| Excerpt {
            label: Label::new(openings[idx].0),
            text: shorten(&links_as_text(&openings[idx].1), EXCERPT_MAX_CHARS),
        })
        .collect()
}

/// The sentences of a Markdown fragment, on one line each, without heading marks, list
/// bullets, quote marks or wiki-link brackets (which the citation check would read as
/// labels). Headings are not sentences.
///
/// A list item ends where the next one starts, with or without a point: notes kept as
/// bullets («- Having lost a third of the crew…» under «- The dwarf is stumped…») say one
/// thing an item, and read together they were one sentence of hundreds of words. A line
/// that is no item continues the one before (a paragraph wrapped by hand, an item's second line).
pub(crate) fn sentences(text: &str) -> Vec<String> {
    sentences_by_section(text).into_iter().map(|(sentence, _)| sentence).collect()
}

/// [`sentences`], each with the number of the section it is in (the sentences under one
/// run of headings share it; it changes at each heading), so that what is read together
/// stays within a section.
pub(crate) fn sentences_by_section(text: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let mut section = 0;
    let mut headings_before: Option<Vec<&str>> = None;
    // Fenced code (an Obsidian `dataview` query, a stat block's YAML) is no sentence; a fence
    // may hold blank lines, so whether one is open carries from paragraph to paragraph.
    let mut in_code = false;
    for paragraph in paragraphs(text) {
        if headings_before.as_ref().is_some_and(|before| *before != paragraph.headings) {
            section += 1;
        }
        headings_before = Some(paragraph.headings.clone());
        // The paragraph's items (or its one run of text), each as its lines joined.
        let mut items: Vec<String> = Vec::new();
        for line in paragraph.text.lines() {
            if is_fence(line) {
                in_code = !in_code;
                continue;
            }
            if in_code {
                continue;
            }
            let line = line.trim().trim_start_matches('>').trim_start();
            let item = list_item_text(line);
            let plain = unlink(item.unwrap_or(line));
            match items.last_mut() {
                Some(last) if item.is_none() => {
                    last.push(' ');
                    last.push_str(&plain);
                }
                _ => items.push(plain),
            }
        }
        for item in items {
            let mut start = 0;
            for end in sentence_ends(&item) {
                push_sentence(&mut found, &item[start..end], section);
                start = end;
            }
            push_sentence(&mut found, &item[start..], section);
        }
    }
    found
}

/// Whether `sentence` announces what follows it («Lucio cuenta que tenía pesadillas:» before a
/// list): alone it promises something it does not say, so it is read with the next one.
pub(crate) fn leads_into_next(sentence: &str) -> bool {
    sentence.trim_end().ends_with(':')
}

/// Whether `sentence` is one span of emphasis and nothing else: a title the notes set in bold
/// or italics on its own line («**El banquete.**», «*La traición de los muelles*»), which names
/// what follows and says nothing of it; not a sentence that opens with a bold word
/// («**Gastos:** 50 coronas.»).
pub(crate) fn is_a_title(sentence: &str) -> bool {
    let sentence = sentence.trim();
    let marks = |c: char| c == '*' || c == '_';
    let closed = sentence.trim_end_matches('.');
    let inner = closed.trim_start_matches(marks).trim_end_matches(marks);
    sentence.starts_with(marks)
        && closed.ends_with(marks)
        && !inner.contains(marks)
        && inner.chars().any(char::is_alphanumeric)
}

fn push_sentence(found: &mut Vec<(String, usize)>, sentence: &str, section: usize) {
    let sentence = sentence.split_whitespace().collect::<Vec<_>>().join(" ");
    if sentence.chars().any(char::is_alphanumeric) {
        found.push((sentence, section));
    }
}

/// `[[Target|shown]]` → `shown`, `[[Target]]` → `Target`; other brackets become parentheses.
pub(crate) fn unlink(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find("[[") {
        plain.push_str(&rest[..open]);
        let inside = &rest[open + 2..];
        match inside.find("]]") {
            Some(close) => {
                let link = &inside[..close];
                plain.push_str(link.rsplit('|').next().unwrap_or(link));
                rest = &inside[close + 2..];
            }
            None => {
                rest = inside;
            }
        }
    }
    plain.push_str(rest);
    plain.replace('[', "(").replace(']', ")")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recap_spreads_the_scenes_openings_from_the_first_to_the_last() {
        let scene = |n: usize| format!("La escena {n} empieza en el muelle con toda la compañía reunida. Luego sigue.");
        let text = format!(
            "# La noche\n{}\n\nCorto. Se lee con la siguiente.\n\n**Rook**\n\n{}\n\n{}\n\n{}\n\n{}\n\n{}",
            scene(1),
            scene(3),
            scene(4),
            scene(5),
            scene(6),
            scene(7)
        );
        let excerpts = recap_excerpts(&[("Sesión 9", text.as_str())]);
        let texts: Vec<String> = excerpts.iter().map(|e| e.text.clone()).collect();
        let opening = |n: usize| format!("La escena {n} empieza en el muelle con toda la compañía reunida.");
        // Seven paragraphs that tell something (a lone bold name does not), five spread from
        // the first to the last: each its first sentence, the short one with the next.
        let short = "Corto. Se lee con la siguiente.".to_string();
        assert_eq!(texts, [opening(1), short, opening(4), opening(5), opening(7)]);
        assert!(excerpts.iter().all(|e| e.label == "Sesión 9"));
        assert_eq!(recap_excerpts(&[("Sesión 1", "Solo una frase.")]).len(), 1);
        assert!(recap_excerpts(&[("Sesión 1", "# Solo un título")]).is_empty());
        // A list in lowercase goes on with the sentence announcing it; alone it opens no scene.
        let list = "La reunión es en el refectorio, con tres banderas detrás:\n\n- el faro de la Orden;\n- el ancla.\n\n\
            - la sal de los monjes del monasterio;\n\nEl abad habla primero y todos callan.";
        let texts: Vec<String> = recap_excerpts(&[("Sesión 36", list)]).into_iter().map(|e| e.text).collect();
        assert_eq!(
            texts,
            [
                "La reunión es en el refectorio, con tres banderas detrás: el faro de la Orden; el ancla.",
                "El abad habla primero y todos callan."
            ]
        );
    }

    #[test]
    fn an_extractive_annotation_is_the_fragment_s_most_central_sentences_in_order() {
        let text = "## Sesión 9\n\
            Llueve sobre Puerto Salobre desde el alba. Los héroes llegan tarde a la Fiesta de las Mareas.\n\n\
            Compran pan.\n\n\
            En mitad de la fiesta, el archiduque Leandro desaparece del salón: la fiesta se detiene y la guardia \
            busca al archiduque por todo el palacio.\n\n\
            Nadie encuentra rastro del archiduque; solo una mancha de sal junto a la puerta.";
        let names = |sentence: &str| sentence.matches("archiduque").count() + sentence.matches("Leandro").count();
        let annotation = central_sentences(text, &names);
        // The sentence the fragment is about (its repeated words, its names), in the order told.
        assert!(annotation.contains("En mitad de la fiesta, el archiduque Leandro desaparece"), "{annotation}");
        assert!(!annotation.contains("Llueve"), "{annotation}");
        assert!(!annotation.contains("Compran pan"), "{annotation}");
        assert!(annotation.split_whitespace().count() <= CENTRAL_MAX_WORDS, "{annotation}");
        assert!(!annotation.contains('#'), "headings are not sentences: {annotation}");
        // Nothing to say of a heading alone; one sentence is its own annotation.
        assert_eq!(central_sentences("# Solo un título", &names), "");
        assert_eq!(central_sentences("Una frase sola.", &names), "Una frase sola.");
    }

    #[test]
    fn a_paragraph_too_long_for_its_share_is_cut_at_a_sentence_end() {
        // One 60-word paragraph of five sentences; room for about two of them.
        let paragraph = "Llegan al puerto al alba y buscan posada cerca del muelle viejo. \
            El mercado está cerrado por la feria de las redes y nadie vende pan. \
            La abadesa Celia les entrega el mapa de las Salinas de Oruel en secreto. \
            Rook se queda fuera vigilando los carros toda la noche sin dormir. \
            Al amanecer parten hacia el paso de montaña con la carga intacta.";
        let terms = QueryTerms::new("¿Qué les entregó la abadesa?", &["Celia"]);
        let shown = select_passages(paragraph, &terms, None, 32, &words);
        assert!(shown.starts_with("La abadesa Celia les entrega el mapa"), "the best sentence first: {shown}");
        let body = shown.trim_end_matches(GAP_MARK).trim_end();
        assert!(body.ends_with('.'), "ends at a sentence end: {shown}");
        assert!(words(&shown) <= 32, "{shown}");
        // A sentence longer than the whole share is the one case cut at a word.
        let long = "palabra ".repeat(50);
        let cut = select_passages(&long, &terms, None, 10, &words);
        assert!(cut.ends_with(GAP_MARK) && words(&cut) <= 10, "{cut}");
    }

    /// One token per word: what the tests count with.
    fn words(text: &str) -> usize {
        text.split_whitespace().count()
    }

    const SESSION: &str = "\
## El puerto
Llegan a Salobre al alba. El mercado está cerrado por la feria.

Compran cuerdas y pan en la lonja.

### La audiencia
El archiduque Aldric los recibe en su palacio y les encarga recuperar la corona.

Rook se queda fuera vigilando los carros.";

    fn check_passages(question: &str, entities: &[&str], max_tokens: usize, expect: &str) {
        let terms = QueryTerms::new(question, entities);
        assert_eq!(select_passages(SESSION, &terms, None, max_tokens, &words), expect.trim());
    }

    #[test]
    fn passages_keep_the_best_dense_match_when_no_word_is_shared() {
        // «¿Quién montó guardia?» shares no word with the session; the dense path's nearest
        // window (words 38..46: the last paragraph) is the passage that means it.
        let terms = QueryTerms::new("¿Quién montó guardia?", &[]);
        let without = select_passages(SESSION, &terms, None, 16, &words);
        assert!(without.contains("Compran cuerdas"), "{without}");
        let with = select_passages(SESSION, &terms, Some(38..46), 16, &words);
        assert_eq!(with, "(…)\n\n## El puerto\n\n### La audiencia\n\nRook se queda fuera vigilando los carros.");
        // Words still lead: a paragraph holding the question's terms beats the dense match.
        let terms = QueryTerms::new("¿Dónde compraron las cuerdas?", &[]);
        let with = select_passages(SESSION, &terms, Some(38..46), 12, &words);
        assert!(with.contains("Compran cuerdas") && !with.contains("Rook"), "{with}");
    }

    #[test]
    fn a_long_paragraph_is_chosen_from_by_its_sentences() {
        // A synopsis paragraph of ~250 words whose answer («Kiri») is in its last sentences:
        // whole, it does not fit a share of 100, and cut at a word it showed only its opening.
        let filler =
            |tag: &str| format!("The party walks through the {tag} and talks about the road ahead for a while.");
        let mut sentences: Vec<String> = (0..14).map(|i| filler(&format!("swamp{i}"))).collect();
        sentences
            .push("In the hut they find a kenku girl who calls herself Kiri and speaks in borrowed voices.".into());
        sentences.push("She is four years old, she says, in her mother's voice.".into());
        let synopsis = format!("## Episode 20\n{}\n\nThey camp at the edge of the bog.", sentences.join(" "));
        let terms = QueryTerms::new("What is the name of the kenku girl?", &[]);
        let shown = select_passages(&synopsis, &terms, None, 100, &words);
        assert!(shown.contains("calls herself Kiri"), "{shown}");
        assert!(shown.starts_with("(…)\n\n## Episode 20\n\n"), "the opening is left out: {shown}");
        // Two pieces of one paragraph shown together are one paragraph again.
        let shown = select_passages(&synopsis, &terms, None, 200, &words);
        assert!(shown.contains("Kiri and speaks in borrowed voices. She is four"), "{shown}");
        // A list is cut at its lines, and its pieces keep them.
        let list: String =
            (0..30).map(|i| format!("- Item {i} of the loot from the wreck, kept by Odo.\n")).collect::<String>()
                + "- The brass key of the lighthouse, kept by Rook.";
        let terms = QueryTerms::new("Who kept the brass key?", &[]);
        let shown = select_passages(&list, &terms, None, 40, &words);
        assert_eq!(shown, "(…)\n\n- The brass key of the lighthouse, kept by Rook.");
        let cut = pieces(paragraphs(&list), PIECE_MAX_WORDS);
        assert_eq!(cut.len(), 6, "six items of 12 words a piece, then the key");
        assert!(cut[..5].iter().all(|piece| piece.text.lines().count() == 6 && piece.words.len() == 72));
        assert_eq!(cut[1].continues, Some('\n'));
        assert_eq!(cut[1].words, 72..144, "each piece knows where its words lie (the dense window)");
    }

    #[test]
    fn a_paragraph_is_read_under_its_headings() {
        // The answer («dos voces») is in a paragraph that names nobody the question names;
        // its section's heading does. Before, the short line naming Leandro won the budget.
        let session = "# Fiesta\n\nLa regente sale a la tarima con Leandro en la cabeza.\n\n\
### El Heraldo de la Marea Baja\n\nY habló con dos voces a la vez, una grave y otra fina.\n\n\
### Después\n\n—¡Leandro! Hermano.";
        let terms = QueryTerms::new("¿Cómo se presentó el Heraldo de la Marea Baja?", &["Leandro"]);
        let passages = select_passages(session, &terms, None, 28, &words);
        assert!(passages.contains("dos voces"), "{passages}");
        assert!(passages.contains("### El Heraldo de la Marea Baja"), "{passages}");
        // The heading counts once: a paragraph repeating the heading's words gains nothing.
        assert_eq!(terms.score("Heraldo Marea Baja\nHeraldo"), terms.score("Heraldo Marea Baja"));
    }

    #[test]
    fn each_list_item_is_its_own_sentence_with_or_without_its_point() {
        for marker in ["- ", "* ", "+ ", "1. ", "12) "] {
            for point in ["", ".", "!"] {
                let notes = format!(
                    "{marker}The dwarf is stumped{point}\n    {marker}Having lost a third of the crew{point}\n\
                     {marker}The crew rigs the ship\n  and tows it{point}\nThey sail at dawn."
                );
                // A line that is no item goes on with the item before it.
                let last = match point {
                    "" => vec!["The crew rigs the ship and tows it They sail at dawn.".to_string()],
                    _ => vec![format!("The crew rigs the ship and tows it{point}"), "They sail at dawn.".into()],
                };
                let mut expected =
                    vec![format!("The dwarf is stumped{point}"), format!("Having lost a third of the crew{point}")];
                expected.extend(last);
                assert_eq!(sentences(&notes), expected, "{notes:?}");
            }
        }
        // Text that is no list is split only where its sentences end.
        assert_eq!(sentences("Uno dos\ntres cuatro. Cinco."), ["Uno dos tres cuatro.", "Cinco."]);
        // A year opening a line numbers no item.
        assert_eq!(sentences("1999. Fue un año malo."), ["1999.", "Fue un año malo."]);
        // A task's box is the list's mark.
        for task_box in ["[ ]", "[x]", "[X]"] {
            let notes = format!("- {task_box} Question the banshee Agatha\n- {task_box} Find a guide.");
            assert_eq!(sentences(&notes), ["Question the banshee Agatha", "Find a guide."], "{notes:?}");
        }
    }

    #[test]
    fn fenced_code_is_no_sentence_even_with_blank_lines_inside() {
        let notes = "Kleb keeps a journal.\n```dataview\nTABLE WITHOUT ID arc AS \"Story Arc\"\n\nFROM \"sessions\"\n```\n\n\
            ~~~statblock\nname: Flameskull\n~~~\nThe party rests.";
        assert_eq!(sentences(notes), ["Kleb keeps a journal.", "The party rests."]);
    }

    #[test]
    fn a_story_is_introduced_as_its_entity_s_with_the_other_names_its_quotes_use() {
        let excerpts = vec![Excerpt { label: Label::new("Sesión 31"), text: "El Heraldo lee un bando.".into() }];
        let names = vec!["el Heraldo de la Marea Baja".to_string(), "el Heraldo".to_string()];
        let about = QuotedAbout { entity: "Leandro de Valdemora", other_names: &names };
        let of = |about| Framing { about: Some(about), ..Framing::default() };
        assert_eq!(
            render_quotes(&excerpts, LabelLanguage::Es, of(about)),
            "Esto es lo que dicen las notas de Leandro de Valdemora, a quien también llaman \
             «el Heraldo de la Marea Baja» y «el Heraldo»:\n- «El Heraldo lee un bando.» [Sesión 31]"
        );
        let one = QuotedAbout { entity: "Kleb", other_names: &names[..1] };
        let failed = Framing { model_failed: true, ..of(one) };
        assert!(render_quotes(&excerpts, LabelLanguage::En, failed).starts_with(
            "The language model could not answer; this is what the notes say of Kleb, also called \
             «el Heraldo de la Marea Baja»:\n"
        ));
        let none = QuotedAbout { entity: "Kleb", other_names: &[] };
        assert!(
            render_quotes(&excerpts, LabelLanguage::En, of(none)).starts_with("This is what the notes say of Kleb:\n")
        );
        // Only the nearest: said so, in the question's language.
        let nearest = Framing { nearest_only: true, ..of(none) };
        assert!(render_quotes(&excerpts, LabelLanguage::Es, nearest).starts_with(
            "Las notas no lo dicen con las palabras de la pregunta; esto es lo más cercano que dicen de Kleb:\n"
        ));
        // Notes in another language: said where the words would be.
        let other = Framing { notes_in: Some(LabelLanguage::En), ..nearest };
        assert!(render_quotes(&excerpts, LabelLanguage::Es, other).starts_with(
            "Las notas no lo dicen con las palabras de la pregunta (están escritas en inglés: prueba a preguntarlo en \
             inglés); esto es lo más cercano que dicen de Kleb:\n"
        ));
        assert_eq!(
            render_quotes(&[], LabelLanguage::En, Framing { notes_in: Some(LabelLanguage::Es), ..Framing::default() }),
            "I find nothing in the notes in the question's words; they are written in Spanish: try asking in Spanish."
        );
        // The notes in the question's own language change nothing.
        let same = Framing { notes_in: Some(LabelLanguage::Es), ..nearest };
        assert_eq!(
            render_quotes(&excerpts, LabelLanguage::Es, same),
            render_quotes(&excerpts, LabelLanguage::Es, nearest)
        );
        // Nothing quoted: «not in the notes», whoever it was about.
        assert_eq!(render_quotes(&[], LabelLanguage::En, nearest), render_extractive(&[], LabelLanguage::En, false));
    }

    #[test]
    fn passages_keep_the_paragraphs_that_hold_the_question() {
        // Fits: whole.
        check_passages("¿Qué pasó con el archiduque?", &[], 1000, SESSION);
        // The audience paragraph, under its heading path, gaps marked.
        check_passages(
            "¿Qué pasó con el archiduque?",
            &["Aldric"],
            24,
            "
(…)

## El puerto

### La audiencia

El archiduque Aldric los recibe en su palacio y les encarga recuperar la corona.

(…)",
        );
        // Only the paragraph that holds the term, under its heading.
        check_passages(
            "¿Dónde compraron las cuerdas?",
            &[],
            12,
            "
(…)

## El puerto

Compran cuerdas y pan en la lonja.

(…)",
        );
        // Nothing fits whole: the best paragraph, cut at a word.
        check_passages("archiduque", &[], 6, "El archiduque Aldric los (…)");
    }

    #[test]
    fn excerpts_are_the_sentences_that_answer_each_with_its_label() {
        let fragments = [
            ("Sesión 1", SESSION),
            ("Sesión 9", "El archiduque desaparece sin dejar rastro. Nadie sabe adónde fue."),
            ("Ficha: Rook", "# Rook\nExplorador del grupo, desconfiado."),
        ];
        let terms = QueryTerms::new("¿Qué pasó con el archiduque?", &[]);
        let excerpts = extract_excerpts(&fragments, &terms);
        let rendered = render_extractive(&excerpts, LabelLanguage::Es, false);
        assert_eq!(
            rendered,
            "Esto es lo que dicen las notas:
- «El archiduque Aldric los recibe en su palacio y les encarga recuperar la corona.» [Sesión 1]
- «El archiduque desaparece sin dejar rastro. Nadie sabe adónde fue.» [Sesión 9]"
        );
        // No term matches: the opening sentences of the first two fragments.
        let excerpts = extract_excerpts(&fragments, &QueryTerms::new("¿Quién ganó?", &[]));
        assert_eq!(excerpts.len(), 2);
        assert_eq!(excerpts[0].label, "Sesión 1");
        assert!(excerpts[0].text.starts_with("Llegan a Salobre al alba."), "{excerpts:?}");
        // Nothing at all: a plain statement, in the question's language.
        assert_eq!(
            render_extractive(&[], LabelLanguage::En, true),
            "The notes do not say anything about this question."
        );
        let failed = render_extractive(&excerpts, LabelLanguage::En, true);
        assert!(failed.starts_with("The language model could not answer; this is what the notes say:"), "{failed}");
    }

    #[test]
    fn excerpts_are_short_and_hold_no_link_brackets() {
        let long = format!("El [[PNJs/Baika|la Tejedora]] dijo {} y se fue.", "muchas cosas ".repeat(40));
        let excerpts = extract_excerpts(&[("Sesión 2", &long)], &QueryTerms::new("Tejedora", &[]));
        assert_eq!(excerpts.len(), 1);
        assert!(excerpts[0].text.starts_with("El la Tejedora dijo muchas"), "{:?}", excerpts[0]);
        assert!(excerpts[0].text.chars().count() <= EXCERPT_MAX_CHARS && excerpts[0].text.ends_with('…'));
        assert!(!excerpts[0].text.contains('['));
        assert_eq!(shorten("uno dos tres", 100), "uno dos tres");
        assert_eq!(shorten("uno dos, tres", 10), "uno dos…");
    }

    #[test]
    fn the_line_that_answers_comes_before_lines_that_only_name_the_place() {
        let fragments = [
            ("Mundo: Jaleas", "Las Jaleas son una cueva húmeda. En las Jaleas vive un cieno."),
            (
                "Sesión 4",
                "El grupo vuelve a las Jaleas. En las Jaleas hallan un cofre con gemas por valor de 450 po, \
                 que reparten. Rook cartografía las [Jaleas Ocre](https://example.org/jaleas) al salir.",
            ),
        ];
        let terms = QueryTerms::new("¿Cuánto valían las gemas de las Jaleas?", &["Jaleas"]);
        let excerpts = extract_excerpts(&fragments, &terms);
        assert!(excerpts.iter().any(|e| e.text.contains("450 po")), "{excerpts:?}");
        let first_with_asked = excerpts.iter().position(|e| e.text.contains("450")).unwrap();
        // Ordered by fragment, then place; the 450 line is picked although the world note's
        // lines name the place too.
        assert_eq!(excerpts[first_with_asked].label, "Sesión 4");
        assert_eq!(terms.asked_score("En las Jaleas vive un cieno."), 0, "a name is not what is asked");
        assert_eq!(terms.asked_score("hallan gemas por valor de 450 po"), 2, "«gemas» and a number for «cuánto»");
        assert_eq!(links_as_text("las [Jaleas Ocre](https://x.org/j) y ![mapa](m.png)"), "las Jaleas Ocre y mapa");
    }
}
