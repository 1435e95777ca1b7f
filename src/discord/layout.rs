//! An answer as Discord messages, within Discord's limits exactly: plain data, no serenity.
//!
//! The layout ([`answer_messages`], [`source_messages`], [`split_text`]) is checked by tests
//! against every limit; `builders` turns a [`Message`] into serenity's builders, each with
//! mentions switched off.
//!
//! Lengths are counted in UTF-16 code units ([`discord_len`]), which is never less than the
//! characters Discord counts, so a piece that fits here fits there.
//!
//! Layout: the answer goes in embed descriptions (4096 each, twice a message's 2000 of
//! content), split at paragraph, then line, then sentence, then word boundaries, never
//! inside a citation. The valid citations follow as fields of a "Sources" embed (label and a
//! short excerpt); invented citations are never listed. Embeds are packed into messages of
//! at most 10 embeds and 6000 characters; the last message carries a button per source.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::locale::Lang;
use crate::answer::parse_citations;
use crate::oracle::CitationSource;

/// A message's `content`.
pub const CONTENT_LIMIT: usize = 2000;
/// An embed's title.
pub const TITLE_LIMIT: usize = 256;
/// An embed's description.
pub const DESCRIPTION_LIMIT: usize = 4096;
/// A field's name.
pub const FIELD_NAME_LIMIT: usize = 256;
/// A field's value.
pub const FIELD_VALUE_LIMIT: usize = 1024;
/// Fields per embed.
pub const FIELDS_PER_EMBED: usize = 25;
/// An embed's footer text.
pub const FOOTER_LIMIT: usize = 2048;
/// Embeds per message.
pub const EMBEDS_PER_MESSAGE: usize = 10;
/// Characters across all embeds of one message (titles, descriptions, fields, footers).
pub const EMBED_TOTAL_LIMIT: usize = 6000;
/// A thread's name.
pub const THREAD_NAME_LIMIT: usize = 100;
/// A button's label.
pub const BUTTON_LABEL_LIMIT: usize = 80;
/// A component's custom id.
pub const CUSTOM_ID_LIMIT: usize = 100;
/// Buttons per action row, and action rows per message.
pub const BUTTONS_PER_ROW: usize = 5;
pub const ROWS_PER_MESSAGE: usize = 5;

/// The custom id of a "read this source" button: this prefix, then the label.
pub const SOURCE_BUTTON_PREFIX: &str = "oraculo:fuente:";
/// Embed colours: the answer, and its sources.
pub(super) const ANSWER_COLOUR: u32 = 0x7b5ea7;
const SOURCES_COLOUR: u32 = 0x4f6d7a;

/// Length as Discord limits it (UTF-16 code units: never less than its character count).
pub fn discord_len(text: &str) -> usize {
    text.encode_utf16().count()
}

/// One embed, as plain data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Embed {
    pub title: Option<String>,
    pub description: Option<String>,
    pub fields: Vec<Field>,
    pub footer: Option<String>,
    pub colour: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub value: String,
}

impl Embed {
    /// What counts toward a message's 6000 characters.
    pub fn total_len(&self) -> usize {
        let optional = |text: &Option<String>| text.as_deref().map_or(0, discord_len);
        optional(&self.title)
            + optional(&self.description)
            + optional(&self.footer)
            + self.fields.iter().map(|field| discord_len(&field.name) + discord_len(&field.value)).sum::<usize>()
    }
}

/// One message, as plain data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    pub content: String,
    pub embeds: Vec<Embed>,
    /// Labels that get a "read the source" button.
    pub source_buttons: Vec<String>,
    /// The kept question whose 👍/👎 buttons this message carries (an answer's last message;
    /// `discord/feedback.rs`): a row of its own, under the sources' buttons.
    pub verdict: Option<i64>,
}

impl Message {
    /// A plain notice (an error, "queued"), clipped to the content limit.
    pub fn notice(text: &str) -> Message {
        Message { content: clip(text, CONTENT_LIMIT), ..Message::default() }
    }
}

/// The answer's messages: the text in embed descriptions, then its valid sources.
pub fn answer_messages(text: &str, citations: &[CitationSource], n_invented: usize, lang: Lang) -> Vec<Message> {
    let text = if text.trim().is_empty() { lang.empty_answer() } else { text.trim().to_string() };
    let mut embeds: Vec<Embed> = split_text(&text, DESCRIPTION_LIMIT)
        .into_iter()
        .map(|piece| Embed { description: Some(piece), colour: ANSWER_COLOUR, ..Embed::default() })
        .collect();
    if n_invented > 0
        && let Some(last) = embeds.last_mut()
    {
        last.footer = Some(clip(&lang.invented_footer(n_invented), FOOTER_LIMIT));
    }
    let sources = valid_sources(citations);
    embeds.extend(source_embeds(&sources, lang));
    let mut messages = pack(embeds);
    if let Some(last) = messages.last_mut() {
        last.source_buttons = sources
            .iter()
            .map(|source| source.label.clone())
            .filter(|label| source_button_id(label).is_some())
            .take(BUTTONS_PER_ROW * ROWS_PER_MESSAGE)
            .collect();
    }
    messages
}

/// Says under the answer's text that some retrieval paths failed.
pub fn mark_partial_search(messages: &mut [Message], missing_paths: &[&str], lang: Lang) {
    if !missing_paths.is_empty() {
        add_footer_note(messages, &lang.partial_search_footer(missing_paths));
    }
}

/// Adds `note` to the footer of the answer's last text embed.
pub fn add_footer_note(messages: &mut [Message], note: &str) {
    let last_text = messages
        .iter_mut()
        .flat_map(|message| message.embeds.iter_mut())
        .filter(|embed| embed.colour == ANSWER_COLOUR && embed.description.is_some())
        .last();
    if let Some(embed) = last_text {
        let footer = match embed.footer.take() {
            Some(footer) => format!("{footer}\n{note}"),
            None => note.to_string(),
        };
        embed.footer = Some(clip(&footer, FOOTER_LIMIT));
    }
}

/// The notes' own sentences while the model writes (or waits for its turn): the instant
/// answer's text, cited, with `line` under it saying so. Sources and buttons come with the
/// final layout.
pub fn instant_message(text: &str, line: &str) -> Message {
    Message {
        embeds: vec![Embed {
            description: Some(clip(text.trim(), DESCRIPTION_LIMIT)),
            colour: ANSWER_COLOUR,
            footer: Some(clip(line, FOOTER_LIMIT)),
            ..Embed::default()
        }],
        ..Message::default()
    }
}

/// The answer while it is written: the text so far (its end, when longer than one embed),
/// with a footer saying it is not finished. No sources or buttons until it is.
pub fn preview_message(text_so_far: &str, lang: Lang) -> Message {
    let text = text_so_far.trim();
    let room = DESCRIPTION_LIMIT - 2;
    let shown = if discord_len(text) > room {
        let mut used = 0;
        let mut tail: Vec<char> = Vec::new();
        for c in text.chars().rev() {
            used += c.len_utf16();
            if used > room {
                break;
            }
            tail.push(c);
        }
        format!("…{}", tail.into_iter().rev().collect::<String>())
    } else if text.is_empty() {
        lang.searching()
    } else {
        text.to_string()
    };
    let footer = if text.is_empty() { None } else { Some(clip(&lang.writing(), FOOTER_LIMIT)) };
    Message {
        embeds: vec![Embed { description: Some(shown), colour: ANSWER_COLOUR, footer, ..Embed::default() }],
        ..Message::default()
    }
}

/// Where an answer is before its first word: searching the notes, then reading N of them
/// and writing (on a CPU, a minute or more), so the asker sees it is working and why.
pub fn stage_message(stage: crate::oracle::Stage, lang: Lang) -> Message {
    let description = match stage {
        crate::oracle::Stage::Searching => lang.searching(),
        crate::oracle::Stage::Writing { notes } => lang.reading_notes(notes),
    };
    Message {
        embeds: vec![Embed { description: Some(description), colour: ANSWER_COLOUR, ..Embed::default() }],
        ..Message::default()
    }
}

/// A source read in full: its parts' text under its label, as many messages as it takes.
pub fn source_messages(label: &str, parts: &[String], lang: Lang) -> Vec<Message> {
    let text = parts.iter().map(|part| part.trim()).filter(|part| !part.is_empty()).collect::<Vec<_>>().join("\n\n");
    let text = if text.is_empty() { "—".to_string() } else { text };
    let first_title = clip(label, TITLE_LIMIT);
    let continued = lang.source_continued();
    let continued_title =
        format!("{} {continued}", clip(label, TITLE_LIMIT.saturating_sub(discord_len(&continued) + 1)));
    let embeds = split_text(&text, DESCRIPTION_LIMIT)
        .into_iter()
        .enumerate()
        .map(|(index, piece)| Embed {
            title: Some(if index == 0 { first_title.clone() } else { continued_title.clone() }),
            description: Some(piece),
            colour: SOURCES_COLOUR,
            ..Embed::default()
        })
        .collect();
    pack(embeds)
}

/// Sessions per page of a `/cronologia` timeline: one embed each, so a long campaign's
/// timeline reads page by page (up to ten pages a message, the rest in the next ones).
pub const TIMELINE_PAGE_ENTRIES: usize = 10;

/// An entity's timeline as pages: one line per session, in order, each citing its label,
/// first and last appearance marked; every line and page within Discord's limits.
pub fn timeline_messages(timeline: &crate::timeline::Timeline, lang: Lang) -> Vec<Message> {
    let lines: Vec<String> = timeline
        .entries
        .iter()
        .map(|entry| {
            let mark = match (entry.first, entry.last) {
                (true, true) => format!(" · *{}*", lang.only_appearance()),
                (true, false) => format!(" · *{}*", lang.first_appearance()),
                (false, true) => format!(" · *{}*", lang.last_appearance()),
                _ => String::new(),
            };
            let line = clip(&entry.line, FIELD_VALUE_LIMIT);
            format!("**{}** — {line} [{}]{mark}", entry.session, entry.label)
        })
        .collect();
    if lines.is_empty() {
        return vec![Message::notice(&lang.entity_in_no_session(&timeline.entity, &timeline.other_labels))];
    }
    let pages: Vec<&[String]> = lines.chunks(TIMELINE_PAGE_ENTRIES).collect();
    let n_pages = pages.len();
    let mut embeds: Vec<Embed> = Vec::new();
    for (page_idx, page) in pages.into_iter().enumerate() {
        let title = clip(&lang.timeline_title(&timeline.entity, page_idx + 1, n_pages), TITLE_LIMIT);
        // A page over the description limit (very long lines) goes on in another embed.
        for (piece_idx, piece) in split_text(&page.join("\n"), DESCRIPTION_LIMIT).into_iter().enumerate() {
            embeds.push(Embed {
                title: (piece_idx == 0).then(|| title.clone()),
                description: Some(piece),
                colour: ANSWER_COLOUR,
                ..Embed::default()
            });
        }
    }
    if !timeline.other_labels.is_empty()
        && let Some(last) = embeds.last_mut()
    {
        last.footer = Some(clip(&lang.also_in(&timeline.other_labels), FOOTER_LIMIT));
    }
    pack(embeds)
}

/// A thread's name from the question: one line, within 100 characters.
pub fn thread_name(question: &str, lang: Lang) -> String {
    let one_line = question.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.is_empty() {
        return lang.thread_fallback_name();
    }
    clip(&one_line, THREAD_NAME_LIMIT)
}

/// The custom id of the button for `label`; `None` when the label is too long for one.
pub fn source_button_id(label: &str) -> Option<String> {
    let id = format!("{SOURCE_BUTTON_PREFIX}{label}");
    (discord_len(&id) <= CUSTOM_ID_LIMIT).then_some(id)
}

/// The label a source button's custom id names.
pub fn label_from_button_id(custom_id: &str) -> Option<&str> {
    custom_id.strip_prefix(SOURCE_BUTTON_PREFIX).filter(|label| !label.is_empty())
}

/// Cuts `text` into pieces of at most `limit`, preferring (latest first within the window) a
/// paragraph break, then a line break, then a sentence end, then a space; never inside a
/// citation, unless one citation alone exceeds the limit.
pub fn split_text(text: &str, limit: usize) -> Vec<String> {
    let text = text.trim();
    let citations: Vec<Range<usize>> = parse_citations(text).into_iter().map(|span| span.range).collect();
    let inside_citation =
        |position: usize| citations.iter().any(|range| range.start < position && position < range.end);
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let rest = &text[start..];
        if discord_len(rest) <= limit {
            pieces.push(rest.trim().to_string());
            break;
        }
        let window_end = start + prefix_within(rest, limit);
        let mut cut = best_boundary(text, start, window_end, &inside_citation).unwrap_or(window_end);
        if inside_citation(cut)
            && let Some(citation) = citations.iter().find(|range| range.start < cut && cut < range.end)
            && citation.start > start
        {
            cut = citation.start;
        }
        pieces.push(text[start..cut].trim().to_string());
        start = cut + text[cut..].len() - text[cut..].trim_start().len();
    }
    pieces.retain(|piece| !piece.is_empty());
    pieces
}

/// `text` cut to at most `limit`, at a word when one is near the end, with "…" when cut.
pub fn clip(text: &str, limit: usize) -> String {
    if discord_len(text) <= limit {
        return text.to_string();
    }
    let ellipsis = '…';
    let budget = limit.saturating_sub(ellipsis.len_utf16());
    let mut cut = prefix_within(text, budget);
    // Back to a space if one is in the last fifth, so words stay whole.
    if let Some(space) = text[..cut].rfind(char::is_whitespace)
        && space >= cut - cut / 5
        && space > 0
    {
        cut = space;
    }
    format!("{}{ellipsis}", text[..cut].trim_end())
}

/// The byte length of the longest prefix of `text` whose Discord length is at most `limit`
/// (at least one character, so that splitting always advances).
fn prefix_within(text: &str, limit: usize) -> usize {
    let mut used = 0;
    for (index, c) in text.char_indices() {
        used += c.len_utf16();
        if used > limit {
            return if index == 0 { c.len_utf8() } else { index };
        }
    }
    text.len()
}

static PARAGRAPH: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\n[ \t]*\n").expect("a valid regex"));

/// The latest good cut in `text[start..end]`, by preference tier; `None` if there is none.
fn best_boundary(text: &str, start: usize, end: usize, inside_citation: &dyn Fn(usize) -> bool) -> Option<usize> {
    let window = &text[start..end];
    let good = |position: usize| position > start && !inside_citation(position);
    let paragraphs = PARAGRAPH.find_iter(window).map(|m| start + m.start());
    if let Some(cut) = paragraphs.filter(|&p| good(p)).last() {
        return Some(cut);
    }
    let lines = window.match_indices('\n').map(|(i, _)| start + i);
    if let Some(cut) = lines.rev().find(|&p| good(p)) {
        return Some(cut);
    }
    // After the punctuation (and any closing quote or bracket), before the space: a sentence
    // end at the window's edge may be a number cut in two («3.» of «3.5»).
    let sentences = crate::text::sentence_ends(window).into_iter().filter(|&p| p < window.len()).map(|p| start + p);
    if let Some(cut) = sentences.filter(|&p| good(p)).last() {
        return Some(cut);
    }
    let spaces = window.char_indices().filter(|(_, c)| c.is_whitespace()).map(|(i, _)| start + i);
    spaces.rev().find(|&p| good(p))
}

/// Valid citations, one per label, in the answer's order: the only ones shown as sources.
fn valid_sources(citations: &[CitationSource]) -> Vec<&CitationSource> {
    let mut seen = std::collections::HashSet::new();
    citations.iter().filter(|citation| citation.valid && seen.insert(citation.label.as_str())).collect()
}

/// The "Sources" embeds: a field per source, split so each embed stays within 25 fields and
/// 6000 characters.
fn source_embeds(sources: &[&CitationSource], lang: Lang) -> Vec<Embed> {
    let title = lang.sources_title();
    let new_embed = || Embed { title: Some(title.clone()), colour: SOURCES_COLOUR, ..Embed::default() };
    let mut embeds: Vec<Embed> = Vec::new();
    for source in sources {
        let field = source_field(source);
        let field_len = discord_len(&field.name) + discord_len(&field.value);
        let needs_new = match embeds.last() {
            None => true,
            Some(embed) => embed.fields.len() >= FIELDS_PER_EMBED || embed.total_len() + field_len > EMBED_TOTAL_LIMIT,
        };
        if needs_new {
            embeds.push(new_embed());
        }
        if let Some(embed) = embeds.last_mut() {
            embed.fields.push(field);
        }
    }
    embeds
}

fn source_field(source: &CitationSource) -> Field {
    let mut value = String::new();
    if let Some(excerpt) = source.excerpt.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
        value.push_str(excerpt);
    }
    if let Some(path) = &source.source_path {
        let path_line = format!("— {path}");
        // The path survives a long excerpt: the excerpt is clipped to leave room for it.
        let room = FIELD_VALUE_LIMIT.saturating_sub(discord_len(&path_line) + 1);
        value = if value.is_empty() { String::new() } else { format!("{}\n", clip(&value, room)) };
        value.push_str(&path_line);
    }
    if value.is_empty() {
        value.push('—');
    }
    Field { name: clip(&source.label, FIELD_NAME_LIMIT), value: clip(&value, FIELD_VALUE_LIMIT) }
}

/// Greedy packing: a new message when the next embed would pass 10 embeds or 6000 characters.
fn pack(embeds: Vec<Embed>) -> Vec<Message> {
    let mut messages = Vec::new();
    let mut current = Message::default();
    let mut used = 0;
    for embed in embeds {
        let len = embed.total_len();
        if !current.embeds.is_empty() && (current.embeds.len() >= EMBEDS_PER_MESSAGE || used + len > EMBED_TOTAL_LIMIT)
        {
            messages.push(std::mem::take(&mut current));
            used = 0;
        }
        used += len;
        current.embeds.push(embed);
    }
    if !current.embeds.is_empty() {
        messages.push(current);
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::{FragmentId, Label};

    #[test]
    fn a_preview_shows_the_text_so_far_within_one_embed() {
        let preview = preview_message("El archiduque huyó", Lang::Es);
        let embed = &preview.embeds[0];
        assert_eq!(embed.description.as_deref(), Some("El archiduque huyó"));
        assert!(embed.footer.as_deref().is_some_and(|f| f.contains("Escribiendo")), "{:?}", embed.footer);
        assert!(preview.source_buttons.is_empty(), "no sources before the answer is checked");
        let long = "palabra ".repeat(1000);
        let preview = preview_message(&long, Lang::En);
        let description = preview.embeds[0].description.clone().unwrap_or_default();
        assert!(
            discord_len(&description) <= DESCRIPTION_LIMIT && description.starts_with('…'),
            "{}",
            description.len()
        );
        let waiting = preview_message("", Lang::En);
        assert!(waiting.embeds[0].description.as_deref().is_some_and(|d| d.contains("Searching")));
    }

    #[test]
    fn a_partial_search_is_said_under_the_answer() {
        let citations = Vec::new();
        let mut messages = answer_messages("El archiduque huyó [Sesión 1].", &citations, 1, Lang::Es);
        mark_partial_search(&mut messages, &["dense"], Lang::Es);
        let footer = messages[0].embeds[0].footer.clone().unwrap_or_default();
        assert!(footer.contains("[?]") && footer.contains("vía dense no respondió"), "{footer}");
        let mut whole = answer_messages("Todo bien [Sesión 1].", &citations, 0, Lang::En);
        mark_partial_search(&mut whole, &[], Lang::En);
        assert_eq!(whole[0].embeds[0].footer, None, "nothing to say when every path answered");
    }

    #[test]
    fn a_long_timeline_is_paged_within_the_limits() {
        use crate::corpus::SessionNumber;
        use crate::timeline::{LineSource, Timeline, TimelineEntry};
        let entries: Vec<TimelineEntry> = (1..=23)
            .map(|n| TimelineEntry {
                session: SessionNumber(n),
                label: Label::new(format!("Sesión {n}")),
                fragment_id: FragmentId(i64::from(n)),
                line: "Baika teje una red. ".repeat(if n == 7 { 200 } else { 3 }),
                source: LineSource::Sentence,
                first: n == 1,
                last: n == 23,
            })
            .collect();
        let timeline = Timeline {
            entity: "Baika".into(),
            kind: "npc".into(),
            aliases: vec![],
            entries,
            other_labels: vec!["Ficha: Baika".into()],
            highest_session: Some(SessionNumber(40)),
        };
        let messages = timeline_messages(&timeline, Lang::Es);
        check_limits(&messages);
        let embeds: Vec<&Embed> = messages.iter().flat_map(|m| m.embeds.iter()).collect();
        let titles: Vec<&str> = embeds.iter().filter_map(|e| e.title.as_deref()).collect();
        assert_eq!(titles, ["Cronología: Baika (1/3)", "Cronología: Baika (2/3)", "Cronología: Baika (3/3)"]);
        let text: String = embeds.iter().filter_map(|e| e.description.clone()).collect::<Vec<_>>().join("\n");
        let first = text.find("**1** —").unwrap();
        let last = text.find("**23** —").unwrap();
        assert!(first < text.find("**2** —").unwrap() && text.find("**22** —").unwrap() < last);
        assert!(text.contains("[Sesión 1] · *primera aparición*"), "{text}");
        assert!(text.contains("[Sesión 23] · *última aparición*"), "{text}");
        assert_eq!(embeds.last().unwrap().footer.as_deref(), Some("También en: Ficha: Baika"));
        let nothing = Timeline { entries: vec![], ..timeline };
        let said = timeline_messages(&nothing, Lang::En);
        assert!(said[0].content.contains("appears in no session"), "{:?}", said);
    }

    /// Asserts every Discord limit on `messages`.
    fn check_limits(messages: &[Message]) {
        assert!(!messages.is_empty());
        for message in messages {
            assert!(!message.content.is_empty() || !message.embeds.is_empty(), "an empty message: {message:?}");
            assert!(discord_len(&message.content) <= CONTENT_LIMIT);
            assert!(message.embeds.len() <= EMBEDS_PER_MESSAGE);
            let total: usize = message.embeds.iter().map(Embed::total_len).sum();
            assert!(total <= EMBED_TOTAL_LIMIT, "{total} characters across embeds");
            for embed in &message.embeds {
                assert!(embed.title.as_deref().is_none_or(|t| discord_len(t) <= TITLE_LIMIT));
                assert!(
                    embed.description.as_deref().is_none_or(|d| discord_len(d) <= DESCRIPTION_LIMIT && !d.is_empty())
                );
                assert!(embed.footer.as_deref().is_none_or(|f| discord_len(f) <= FOOTER_LIMIT));
                assert!(embed.fields.len() <= FIELDS_PER_EMBED);
                for field in &embed.fields {
                    assert!(!field.name.is_empty() && discord_len(&field.name) <= FIELD_NAME_LIMIT);
                    assert!(!field.value.is_empty() && discord_len(&field.value) <= FIELD_VALUE_LIMIT);
                }
            }
            assert!(message.source_buttons.len() <= BUTTONS_PER_ROW * ROWS_PER_MESSAGE);
            for label in &message.source_buttons {
                assert!(source_button_id(label).is_some_and(|id| discord_len(&id) <= CUSTOM_ID_LIMIT));
            }
        }
    }

    fn citation(label: &str, valid: bool, excerpt: &str) -> CitationSource {
        CitationSource {
            label: label.to_string(),
            valid,
            source_path: valid.then(|| format!("Sesiones/{label}.md")),
            session: None,
            kind: None,
            fragment_id: valid.then_some(FragmentId(1)),
            excerpt: valid.then(|| excerpt.to_string()),
            count: 1,
        }
    }

    /// The answer text the messages show, in order.
    fn shown_text(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .flat_map(|m| m.embeds.iter())
            .filter(|e| e.title.is_none())
            .filter_map(|e| e.description.clone())
            .collect()
    }

    fn long_answer(n_paragraphs: usize) -> String {
        (0..n_paragraphs)
            .map(|p| {
                (0..12)
                    .map(|s| {
                        format!("El archiduque cruzó el paso número {p}-{s} con su escolta de lanceros [Sesión {s}].")
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    #[test]
    fn long_answers_and_huge_excerpts_stay_within_every_limit() {
        let text = long_answer(40); // ~40 × 1000 characters
        let huge_excerpt = "ñandú ".repeat(800); // 4800 characters
        let mut citations: Vec<CitationSource> =
            (0..60).map(|i| citation(&format!("Sesión {i} {}", "x".repeat(i * 5)), true, &huge_excerpt)).collect();
        citations.push(citation("Sesión 999", false, ""));
        let messages = answer_messages(&text, &citations, 3, Lang::Es);
        check_limits(&messages);
        assert!(messages.len() > 5);
        // Nothing lost: the pieces are the answer, in order.
        let joined = shown_text(&messages).join(" ");
        let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(squash(&joined), squash(&text));
        // Every valid source listed once; the invented one never.
        let fields: Vec<&Field> = messages.iter().flat_map(|m| &m.embeds).flat_map(|e| &e.fields).collect();
        assert_eq!(fields.len(), 60);
        assert!(fields.iter().all(|f| !f.name.contains("999")));
        assert!(
            fields[0].value.ends_with("— Sesiones/Sesión 0 .md"),
            "the path survives clipping: {}",
            fields[0].value
        );
        let footers: Vec<&String> = messages.iter().flat_map(|m| &m.embeds).filter_map(|e| e.footer.as_ref()).collect();
        assert_eq!(footers.len(), 1);
        assert!(footers[0].contains('3'));
        // Buttons only on the last message, only for labels that fit a custom id.
        assert!(messages[..messages.len() - 1].iter().all(|m| m.source_buttons.is_empty()));
        assert!(!messages.last().unwrap().source_buttons.is_empty());
    }

    #[test]
    fn a_short_answer_is_one_message_with_its_sources() {
        let citations = [citation("Sesión 3", true, "Baika vendió el mapa."), citation("Sesión 77", false, "")];
        let messages = answer_messages("Baika vendió el mapa [Sesión 3] [?].", &citations, 1, Lang::En);
        check_limits(&messages);
        assert_eq!(messages.len(), 1);
        let message = &messages[0];
        assert_eq!(message.embeds.len(), 2);
        assert_eq!(message.embeds[1].title.as_deref(), Some("Sources"));
        assert_eq!(message.embeds[1].fields.len(), 1);
        assert_eq!(message.embeds[1].fields[0].name, "Sesión 3");
        assert_eq!(message.source_buttons, vec!["Sesión 3".to_string()]);
        // Empty answers still say something.
        let empty = answer_messages("  ", &[], 0, Lang::Es);
        check_limits(&empty);
        assert!(empty[0].embeds[0].description.as_deref().unwrap().contains("no devolvió"));
    }

    #[test]
    fn splitting_prefers_paragraphs_then_sentences_and_never_cuts_a_citation() {
        // Paragraphs: the cut falls between them.
        let text = format!("{}\n\n{}", "a".repeat(50), "b".repeat(50));
        assert_eq!(split_text(&text, 80), vec!["a".repeat(50), "b".repeat(50)]);
        // One paragraph: the cut falls after a sentence.
        let text = "Primera frase corta. Segunda frase que es bastante más larga que la anterior.";
        assert_eq!(
            split_text(text, 40),
            vec!["Primera frase corta.", "Segunda frase que es bastante más larga", "que la anterior."]
        );
        // A citation straddling every candidate cut stays whole.
        let text = format!("{} [Sesión 12; Ficha: Baika la Tuerta] fin.", "palabra".repeat(5));
        for limit in 36..60 {
            let pieces = split_text(&text, limit);
            assert!(pieces.iter().all(|p| discord_len(p) <= limit), "{limit}: {pieces:?}");
            let whole = pieces.iter().filter(|p| p.contains("[Sesión 12; Ficha: Baika la Tuerta]")).count();
            assert_eq!(whole, 1, "{limit}: {pieces:?}");
        }
        // Long unbroken text is still cut, within the limit, nothing lost.
        let text = "x".repeat(10_000);
        let pieces = split_text(&text, DESCRIPTION_LIMIT);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), text);
        // Astral characters count twice.
        let pieces = split_text(&"🐉".repeat(3000), DESCRIPTION_LIMIT);
        assert!(pieces.iter().all(|p| discord_len(p) <= DESCRIPTION_LIMIT));
        assert_eq!(pieces.concat().chars().count(), 3000);
    }

    #[test]
    fn long_answers_split_never_inside_a_citation() {
        let text = long_answer(30);
        for piece in split_text(&text, DESCRIPTION_LIMIT) {
            assert!(discord_len(&piece) <= DESCRIPTION_LIMIT);
            // Every bracket opened in a piece closes in it.
            assert_eq!(piece.matches('[').count(), piece.matches(']').count(), "{piece}");
        }
    }

    #[test]
    fn sources_read_in_full_are_split_within_limits() {
        let parts = vec!["Primera parte. ".repeat(500), "Segunda parte.".to_string()];
        let messages = source_messages(&"Ficha: ".repeat(60), &parts, Lang::Es);
        check_limits(&messages);
        assert!(messages.len() >= 2);
        let titles: Vec<&str> = messages.iter().flat_map(|m| &m.embeds).filter_map(|e| e.title.as_deref()).collect();
        assert!(titles[1].ends_with("(continúa)"));
    }

    #[test]
    fn thread_names_fit_and_button_ids_round_trip() {
        assert_eq!(thread_name("¿Qué pasó\ncon el archiduque?", Lang::Es), "¿Qué pasó con el archiduque?");
        let long = thread_name(&"palabra ".repeat(40), Lang::Es);
        assert!(discord_len(&long) <= THREAD_NAME_LIMIT && long.ends_with('…'), "{long}");
        assert_eq!(thread_name("   ", Lang::En), "Oracle");
        let id = source_button_id("Sesión 3").unwrap();
        assert_eq!(label_from_button_id(&id), Some("Sesión 3"));
        assert_eq!(source_button_id(&"x".repeat(100)), None);
        assert_eq!(label_from_button_id("otra:cosa"), None);
    }
}
