//! The quoted answer: the notes' own sentences that answer a question, ranked sentence by
//! sentence, each cited to its note. What a CPU answers with (`chat.answer_style = "quotes"`),
//! what the instant answer shows, and the extractive answer.
//!
//! Over the chosen fragments (best first), every sentence ([`sentences`], the one splitter) is
//! scored by several signals, fused by reciprocal rank as the retrieval paths are:
//! - what the question asks beyond the names it names ([`QueryTerms::asked_score`]);
//! - all its terms, names included ([`QueryTerms::score`]);
//! - its meaning: the embedder's similarity of the sentence to the question, computed by the
//!   caller ([`quote_candidates`] says which sentences are worth embedding);
//! - a number, when the question asks how much, how many or when;
//! - its fragment's rank.
//!
//! A sentence that cannot stand alone («Él…», "Then…") is quoted with the one before it. The
//! best sentences holding a term of the question are kept, at most [`MAX_EXCERPTS`], at most
//! [`QUOTES_PER_FRAGMENT`] a fragment, and shown in story order (fragment, then place).
//!
//! Pure: text in, ranking out.

use crate::corpus::Label;

use super::passages::{
    EXCERPT_MAX_CHARS, Excerpt, MAX_EXCERPTS, is_a_title, leads_into_next, links_as_text, sentences,
    sentences_by_section,
};
use super::terms::{QueryTerms, states_quantity};
use crate::text::{goes_on, shorten};

/// RRF damping, as the retrieval paths are fused (`retrieve::fuse`): 60 is the standard value
/// and the one measured there.
pub const QUOTE_RRF_K: f64 = 60.0;
/// Sentences quoted from one fragment, so that the top one does not fill the answer alone:
/// three of the five, since the best note often holds the answer a sentence or two after the
/// ones that match the question's names (two lost 6 of the sample bank's 121 key facts,
/// none on CRD3 or the players' vault; `eval/README.md`).
pub const QUOTES_PER_FRAGMENT: usize = 3;
/// Quotes an answer gives at most when they are short: as many as fit in the characters of
/// [`MAX_EXCERPTS`] full ones, so that notes kept as one-line bullets say as much as notes
/// in paragraphs.
pub const MAX_SHORT_QUOTES: usize = 8;
/// Quotes an answer of only the nearest sentences gives at most: where the notes speak of
/// whom the question names, not an answer (on the banks they held none of the answers
/// missed), so a glance, not a page.
pub const NEAREST_QUOTES: usize = 3;
/// Sentences the embedder scores at most, the lexically best: 48 short sentences embed in a
/// few hundred milliseconds with e5-small on a CPU, where all of eight session fragments
/// (~500) took seconds.
pub const EMBEDDED_QUOTES_MAX: usize = 48;
/// A quote is cut (at a word) beyond this many characters: a sentence and the one it leans
/// on, never a page.
const QUOTE_MAX_CHARS: usize = 2 * EXCERPT_MAX_CHARS;

/// First words after which a sentence does not stand alone: what they point at is in the
/// sentence before («Él huyó.», "Then they left."). Lowercase, accents kept («El» is an article).
const LEANING_OPENERS: [&str; 17] = [
    "él", "ella", "ellos", "ellas", "allí", "allá", "ahí", "entonces", "he", "she", "they", "there", "then", "it",
    "his", "her", "their",
];

/// A quote in the making: sentences `first..=last` of fragment `fragment`, as one text: its
/// own sentence, with the one before when it leans on it and the one after when it announces it.
#[derive(Debug, Clone)]
struct Unit {
    fragment: usize,
    first: usize,
    last: usize,
    text: String,
    /// The sentence ranked (the one it leans on, or the one it announces, only comes along).
    own: String,
}

/// The signals of one unit (higher is better; `None`: not known).
#[derive(Debug, Clone, Copy)]
struct Signals {
    /// What the question asks that it holds: its words, and a number where one is asked.
    asked: u32,
    /// Its words alone.
    asked_words: u32,
    all_terms: u32,
    similarity: Option<f32>,
    number: bool,
    /// Its own sentence holds a term of the question: a leaning sentence that holds none
    /// would only repeat the sentence before it.
    own_holds_term: bool,
    /// Its own sentence names an entity the question names.
    names: bool,
    /// The question asks how much or how many, and it states a quantity ([`states_quantity`]).
    quantity: bool,
}

/// The quoted answer's sentences, and whether they answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Quotes {
    /// Sentences holding what the question asks (or, when it asks nothing beyond the names
    /// it names, naming them). Empty: the notes do not say it.
    Answer(Vec<Excerpt>),
    /// No sentence holds what the question asks beyond the names it names, in its words:
    /// the nearest sentences naming them, said to be no more than that. «¿Qué le regaló
    /// Nela a Odo?» is answered by «Era un laúd… Candela II», which says no «regaló»;
    /// «What did the party eat at Nela's wedding?» by nothing the notes hold: the reader
    /// tells which, and is not told «nothing» when the answer is there in other words.
    Nearest(Vec<Excerpt>),
}

impl Quotes {
    pub fn excerpts(&self) -> &[Excerpt] {
        match self {
            Quotes::Answer(excerpts) | Quotes::Nearest(excerpts) => excerpts,
        }
    }

    pub fn into_excerpts(self) -> Vec<Excerpt> {
        match self {
            Quotes::Answer(excerpts) | Quotes::Nearest(excerpts) => excerpts,
        }
    }

    /// Whether the sentences are only the nearest, not an answer.
    pub fn nearest_only(&self) -> bool {
        matches!(self, Quotes::Nearest(excerpts) if !excerpts.is_empty())
    }
}

/// Whether `sentence` opens with a word that points at the sentence before it.
pub fn leans_on_previous(sentence: &str) -> bool {
    let first = sentence
        .split(|c: char| !c.is_alphanumeric())
        .find(|word| !word.is_empty())
        .map(str::to_lowercase)
        .unwrap_or_default();
    LEANING_OPENERS.contains(&first.as_str())
}

/// Each fragment's quotable units: each sentence, with the one before it when it leans on it.
fn units_of(fragments: &[(&str, &str)]) -> Vec<Unit> {
    let mut units = Vec::new();
    for (fragment, (_, text)) in fragments.iter().enumerate() {
        // Links as their text before the split: `[Jaleas Ocre](https://…)` is words, not a URL.
        let own = sentences_by_section(&links_as_text(text));
        for (at, (sentence, section)) in own.iter().enumerate() {
            // A title is no answer: it names a scene and says nothing of it («**El banquete.**»).
            if is_a_title(sentence) {
                continue;
            }
            // What a sentence leans on, or announces, is in its section: a heading between
            // them is a new subject, and the two are not one quote.
            let same_section = |other: usize| own[other].1 == *section;
            let first = if at > 0 && leans_on_previous(sentence) && same_section(at - 1) {
                at - 1
            } else {
                announced_by(&own, at).unwrap_or(at)
            };
            let last =
                if at + 1 < own.len() && leads_into_next(sentence) && same_section(at + 1) { at + 1 } else { at };
            let text = own[first..=last].iter().map(|(sentence, _)| sentence.as_str()).collect::<Vec<_>>().join(" ");
            units.push(Unit { fragment, first, last, text, own: sentence.clone() });
        }
    }
    units
}

/// Where a sentence opening in lowercase continues the one announcing its list («…con tres
/// banderas colgadas detrás de la mesa larga:» before «- el faro sobre una ola…»): that
/// announcing sentence, in its section, when it and the items between fit in a quote. Alone
/// such an item says what it is but not of what («el faro… que trae la capitana Brisa
/// Aldana»).
fn announced_by(own: &[(String, usize)], at: usize) -> Option<usize> {
    let (sentence, section) = &own[at];
    if !goes_on(sentence) {
        return None;
    }
    let mut chars = sentence.chars().count();
    for before in (0..at).rev() {
        let (text, its_section) = &own[before];
        chars += text.chars().count() + 1;
        if its_section != section || chars > QUOTE_MAX_CHARS {
            return None;
        }
        if leads_into_next(text) {
            return Some(before);
        }
    }
    None
}

fn holds_number(text: &str) -> bool {
    text.chars().any(|c| c.is_ascii_digit())
}

fn signals_of(unit: &Unit, terms: &QueryTerms, similarity: &dyn Fn(&str) -> Option<f32>) -> Signals {
    let held = terms.held_by(&unit.text);
    Signals {
        asked: held.asked,
        asked_words: held.asked_words,
        all_terms: held.all,
        similarity: similarity(&unit.text),
        number: terms.asks_number() && holds_number(&unit.text),
        own_holds_term: terms.score(&unit.own) > 0,
        names: terms.names_in(&unit.own),
        quantity: terms.asks_quantity() && states_quantity(&unit.text),
    }
}

/// Whether a unit may be quoted at all: it holds a term of the question. When the question
/// asks something beyond the names it names, a unit only naming them still may, as long as
/// some unit [`answers`] it ([`rank_quotes`] checks that first).
fn is_eligible(signals: &Signals) -> bool {
    // The unit's text holds its own sentence, so what that holds the unit holds too.
    signals.own_holds_term
}

/// Whether the unit answers what the question asks beyond its names: it holds a word of it,
/// or the number asked beside a name or word of the question («¿Cuántos hijos tiene Celia?»
/// is not answered by «6 frascos»). A question asking how many is answered only by a
/// quantity beside a word of it: «hijos de salineros» says no number, and «desde la sesión
/// 11» names a session (`eval/README.md`, «Quoted answers»: three unanswerable questions of
/// the five banks quoted sentences like these as their answer).
fn answers(signals: &Signals, asks_quantity: bool, words_held: bool) -> bool {
    if asks_quantity {
        // Where no sentence holds a word it asks (asked in another language than the notes'),
        // a quantity beside a name it names: "How much did the archduke pay?" of «El archiduque
        // ofrece 300 coronas».
        return signals.quantity && (signals.asked_words > 0 || (!words_held && signals.names));
    }
    signals.asked_words > 0 || (signals.number && signals.all_terms > 0)
}

/// Reciprocal-rank fusion of the units' signals: for each signal, a unit with a value
/// (a positive count, a known similarity, a number) ranks by it (ties share the rank), and
/// adds `1 / (QUOTE_RRF_K + rank)`; every unit adds its fragment's rank.
fn fused_scores(units: &[Unit], signals: &[Signals]) -> Vec<f64> {
    let mut fused = vec![0.0; units.len()];
    let mut add_signal = |values: Vec<Option<f64>>| {
        for (at, value) in values.iter().enumerate() {
            let Some(value) = value else { continue };
            let better = values.iter().filter(|other| other.is_some_and(|other| other > *value)).count();
            fused[at] += 1.0 / (QUOTE_RRF_K + 1.0 + better as f64);
        }
    };
    let positive = |count: u32| (count > 0).then_some(f64::from(count));
    add_signal(signals.iter().map(|s| positive(s.asked)).collect());
    add_signal(signals.iter().map(|s| positive(s.all_terms)).collect());
    add_signal(signals.iter().map(|s| s.similarity.map(f64::from)).collect());
    add_signal(signals.iter().map(|s| s.number.then_some(1.0)).collect());
    add_signal(units.iter().map(|unit| Some(-(unit.fragment as f64))).collect());
    fused
}

/// The units whose signals `keep` accepts, best first by [`fused_scores`] (ties in reading
/// order): the one ranking the quotes, the sentences worth embedding and an event's
/// sentences are all taken from.
fn best_first(units: &[Unit], signals: &[Signals], keep: impl Fn(&Signals) -> bool) -> Vec<usize> {
    let fused = fused_scores(units, signals);
    let mut ranked: Vec<usize> = (0..units.len()).filter(|&at| keep(&signals[at])).collect();
    ranked.sort_by(|&a, &b| fused[b].total_cmp(&fused[a]).then(a.cmp(&b)));
    ranked
}

/// The units of `fragments` worth embedding for the question: those that may be quoted,
/// the best [`EMBEDDED_QUOTES_MAX`] by the signals without meaning. The caller embeds them
/// and passes the similarities to [`rank_quotes`].
pub fn quote_candidates(fragments: &[(&str, &str)], terms: &QueryTerms) -> Vec<String> {
    let units = units_of(fragments);
    let signals: Vec<Signals> = units.iter().map(|unit| signals_of(unit, terms, &|_| None)).collect();
    let mut texts: Vec<String> = Vec::new();
    for at in best_first(&units, &signals, is_eligible) {
        if texts.len() == EMBEDDED_QUOTES_MAX {
            break;
        }
        if !texts.contains(&units[at].text) {
            texts.push(units[at].text.clone());
        }
    }
    texts
}

/// The quoted answer's sentences from `fragments` (label, text; best first) for `terms`, with
/// `similarity` (a unit's text → its similarity to the question, where it was embedded).
/// Empty: the notes do not say it, because no sentence holds a term of the question, or the
/// question asks something beyond the names it names and no sentence holds that. Meaning
/// ranks, but never makes a sentence an answer on its own: with e5-small a sentence only
/// naming the entity runs as near an unanswerable question («¿Qué desayunó Sor Amaranta?»,
/// 0.877) as the answer to an answerable one (0.868; `eval/README.md`, «Quoted answers»).
pub fn rank_quotes(fragments: &[(&str, &str)], terms: &QueryTerms, similarity: &dyn Fn(&str) -> Option<f32>) -> Quotes {
    let _span = tracing::info_span!("answer.quotes", n_fragments = fragments.len()).entered();
    let units = units_of(fragments);
    let signals: Vec<Signals> = units.iter().map(|unit| signals_of(unit, terms, similarity)).collect();
    // How near the question the sentences came (`eval/README.md`, «Quoted answers»): the
    // nearest holding a word of what is asked, and the nearest holding none.
    let nearest = |asked: bool| {
        let near = signals.iter().filter(|s| (s.asked > 0) == asked).filter_map(|s| s.similarity);
        near.fold(None, |best: Option<f32>, x| Some(best.map_or(x, |best| best.max(x))))
    };
    tracing::debug!(nearest_asked = ?nearest(true), nearest_unasked = ?nearest(false), "sentences weighed");
    let words_held = signals.iter().any(|signal| signal.asked_words > 0);
    let answered =
        !terms.asks_beyond_names() || signals.iter().any(|signal| answers(signal, terms.asks_quantity(), words_held));
    // Where none answers, the nearest are those naming what the question names; for a
    // question asking how many, those holding a word of it too: the notes speak of it, with
    // no number («the Thunderbird» for "how much did we get for the thunderbird").
    let is_nearest = |signal: &Signals| signal.names || (terms.asks_quantity() && signal.asked_words > 0);
    if !answered {
        tracing::debug!(n_units = units.len(), "no sentence holds what the question asks");
        if !signals.iter().any(is_nearest) {
            return Quotes::Answer(Vec::new());
        }
    }
    // A sentence only naming the entity may come along with those that answer: kept only to
    // answers, it lost key facts on the sample bank (two, 61 → 59 of 121: across languages
    // the answer often shares only the name), `eval/README.md`.
    let may_quote = |signal: &Signals| if answered { is_eligible(signal) } else { is_nearest(signal) };
    let ranked = best_first(&units, &signals, may_quote);
    // The nearest point at where the notes speak of whom it names; they are no answer.
    let most = if answered { MAX_SHORT_QUOTES } else { NEAREST_QUOTES };
    let picked = pick_units(&units, &ranked, most);
    tracing::debug!(n_units = units.len(), n_eligible = ranked.len(), n_quoted = picked.len(), "sentences ranked");
    let excerpts = picked
        .into_iter()
        .map(|(fragment, first, last)| {
            let text = sentences(&links_as_text(fragments[fragment].1))[first..=last].join(" ");
            Excerpt { label: Label::new(fragments[fragment].0), text: shorten(&text, QUOTE_MAX_CHARS) }
        })
        .collect();
    if answered { Quotes::Answer(excerpts) } else { Quotes::Nearest(excerpts) }
}

/// A sentence holding what a question asks ([`asked_sentences`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AskedSentence {
    /// How much of the question it holds: its terms' weights, names counting double.
    pub held: u32,
    /// Its fragment's place among those given, and its own (first) sentence's within it.
    pub fragment: usize,
    pub sentence: usize,
    pub excerpt: Excerpt,
}

/// The sentences of `fragments` (label, text; best first) holding a word `terms` asks beyond
/// its names (or, when it asks nothing more, naming them), best first by the quotes' ranking:
/// what a comparison of two events picks each event's sentence from (`answer::compare`).
/// «el regreso del archiduque» is not told by «la hermana del archiduque».
pub fn asked_sentences(
    fragments: &[(&str, &str)],
    terms: &QueryTerms,
    similarity: &dyn Fn(&str) -> Option<f32>,
) -> Vec<AskedSentence> {
    let units = units_of(fragments);
    let signals: Vec<Signals> = units.iter().map(|unit| signals_of(unit, terms, similarity)).collect();
    let holds = |signal: &Signals| if terms.asks_beyond_names() { signal.asked_words > 0 } else { signal.names };
    best_first(&units, &signals, holds)
        .into_iter()
        .map(|at| AskedSentence {
            held: signals[at].all_terms,
            fragment: units[at].fragment,
            sentence: units[at].first,
            excerpt: Excerpt {
                label: Label::new(fragments[units[at].fragment].0),
                text: shorten(&units[at].text, QUOTE_MAX_CHARS),
            },
        })
        .collect()
}

/// The characters of a picked span: its units' texts as the fragment holds them (at most
/// what a quote shows).
fn span_chars(units: &[Unit], (fragment, first, last): (usize, usize, usize)) -> usize {
    let inside = units.iter().filter(|unit| unit.fragment == fragment && unit.first >= first && unit.last <= last);
    inside.map(|unit| unit.own.chars().count() + 1).sum::<usize>().min(QUOTE_MAX_CHARS)
}

/// The best units in `ranked` order within the limits, as (fragment, first, last) sentence
/// spans in story order: a unit overlapping one already picked of its fragment
/// joins it (a leaning sentence and the one it leans on are one quote).
fn pick_units(units: &[Unit], ranked: &[usize], most: usize) -> Vec<(usize, usize, usize)> {
    let mut picked: Vec<(usize, usize, usize)> = Vec::new();
    for &at in ranked {
        let unit = &units[at];
        let joins = picked
            .iter_mut()
            .find(|(fragment, first, last)| *fragment == unit.fragment && unit.first <= *last && *first <= unit.last);
        if let Some(span) = joins {
            (span.1, span.2) = (span.1.min(unit.first), span.2.max(unit.last));
            continue;
        }
        // Five quotes; more only while they are short enough to read as five (notes kept
        // as bullets quote an item each, a fraction of a paragraph).
        let read = |spans: &[(usize, usize, usize)]| spans.iter().map(|&span| span_chars(units, span)).sum::<usize>();
        let room = picked.len() < MAX_EXCERPTS.min(most)
            || (picked.len() < most && read(&picked) + unit.text.chars().count() <= MAX_EXCERPTS * EXCERPT_MAX_CHARS);
        if !room {
            continue;
        }
        if picked.iter().filter(|(fragment, ..)| *fragment == unit.fragment).count() < QUOTES_PER_FRAGMENT {
            picked.push((unit.fragment, unit.first, unit.last));
        }
    }
    picked.sort_unstable();
    // A span that grew into the next one of its fragment is one quote with it.
    let mut merged: Vec<(usize, usize, usize)> = Vec::with_capacity(picked.len());
    for span in picked {
        match merged.last_mut() {
            Some(last) if last.0 == span.0 && span.1 <= last.2 => last.2 = last.2.max(span.2),
            _ => merged.push(span),
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranks `fragments` for `question` (entity names `names`, similarities `near`: a
    /// sentence's text holding the key gets the value) and compares the quotes as
    /// `label: text` lines.
    fn check(fragments: &[(&str, &str)], question: &str, names: &[&str], near: &[(&str, f32)], expect: &[&str]) {
        let terms = QueryTerms::new(question, names);
        let similarity = |text: &str| near.iter().find(|(key, _)| text.contains(key)).map(|(_, value)| *value);
        let ranked = rank_quotes(fragments, &terms, &similarity);
        assert!(!ranked.nearest_only(), "{question}: {ranked:?}");
        assert_eq!(as_lines(ranked.excerpts()), expect, "{question}");
    }

    fn as_lines(excerpts: &[Excerpt]) -> Vec<String> {
        excerpts.iter().map(|excerpt| format!("{}: {}", excerpt.label, excerpt.text)).collect()
    }

    const PORT: &str = "El archiduque Leandro recibe al grupo en su palacio. \
        El archiduque pasea por la terraza. \
        El archiduque mira el mar. \
        El archiduque ofrece 300 coronas por las caravanas perdidas. \
        Rook no se fía del archiduque.";

    #[test]
    fn a_quantity_question_quotes_the_sentence_with_the_number() {
        check(
            &[("Sesión 2", PORT)],
            "¿Cuánto ofreció el archiduque?",
            &["archiduque"],
            &[],
            &[
                "Sesión 2: El archiduque Leandro recibe al grupo en su palacio.",
                "Sesión 2: El archiduque pasea por la terraza.",
                "Sesión 2: El archiduque ofrece 300 coronas por las caravanas perdidas.",
            ],
        );
    }

    #[test]
    fn a_question_asking_how_many_is_answered_only_by_a_quantity_beside_its_words() {
        let question = "¿Cuántos hijos tiene la abadesa Celia Urquijo?";
        // Its word without a number, a number naming a session: the nearest, not an answer.
        let abbey = [(
            "Mundo: Monasterio",
            "La comunidad la dirige la abadesa Celia Urquijo. Los acólitos suelen ser hijos de salineros. \
             La abadesa Celia volvió a verlos en la sesión 11.",
        )];
        let terms = QueryTerms::new(question, &["Celia Urquijo"]);
        assert!(rank_quotes(&abbey, &terms, &|_| None).nearest_only());
        // A number, in digits or in words, beside the word asked answers it.
        for told in ["Celia Urquijo tuvo dos hijos.", "Celia Urquijo tuvo 2 hijos."] {
            check(&[("Ficha: Celia", told)], question, &["Celia Urquijo"], &[], &[&format!("Ficha: Celia: {told}")]);
        }
        // Asked in another language than the notes', no word of it can be held: a quantity
        // beside a name it names answers.
        check(
            &[("Sesión 1", "El archiduque ofrece 300 coronas.")],
            "How much did the archduke pay?",
            &["archiduque"],
            &[],
            &["Sesión 1: El archiduque ofrece 300 coronas."],
        );
        // Its word with no number anywhere: the notes speak of it, so the nearest, not «nothing».
        let ship = [("Sesión 25", "The party takes the Thunderbird in tow. Rulkorf has heard of the Thunderbird.")];
        let terms = QueryTerms::new("how much did we get for the thunderbird", &[]);
        let nearest = rank_quotes(&ship, &terms, &|_| None);
        assert!(nearest.nearest_only() && nearest.excerpts().len() == 2, "{nearest:?}");
        assert!(states_quantity("a dozen arrows") && states_quantity("ofrece 300 coronas"));
        assert!(!states_quantity("he once saw one ship"));
        assert!(!states_quantity("desde la sesión 11") && !states_quantity("Session 80 was long."));
        // "how many" asks for a number; "The Many" is no answer to it, "many-eyed" asks none.
        check(
            &[("Sesión 98", "The Mines of the Many is the fourteenth episode.")],
            "How many siblings?",
            &[],
            &[],
            &[],
        );
        assert!(QueryTerms::new("How many siblings does Yeza have?", &[]).asks_quantity());
        assert!(!QueryTerms::new("When did the many-eyed monster strike?", &[]).asks_quantity());
        assert_eq!(QueryTerms::new("whats the name of the village", &[]).score("whats up"), 0);
    }

    #[test]
    fn a_sentence_that_leans_on_the_one_before_is_quoted_with_it() {
        let notes = "Llueve en Salobre. El grupo encuentra a la abadesa Celia en el claustro. \
            Ella les entrega el mapa de las Salinas.";
        check(
            &[("Sesión 4", notes)],
            "¿Quién les entregó el mapa?",
            &[],
            &[],
            &[
                "Sesión 4: El grupo encuentra a la abadesa Celia en el claustro. Ella les entrega el mapa de las Salinas.",
            ],
        );
        assert!(
            leans_on_previous("Él huyó.") && leans_on_previous("Then they left.") && leans_on_previous("«Allí, nada.")
        );
        assert!(!leans_on_previous("El archiduque huyó.") && !leans_on_previous("Italia queda lejos."));
    }

    #[test]
    fn a_sentence_leans_on_the_one_before_only_within_its_section() {
        let notes = [(
            "Sesión 14",
            "## The council\n\nThe council learns of the horn.\n\n## Pre-show\n\n\
             There will be a giveaway at 3500 subscribers.\n",
        )];
        check(
            &notes,
            "What giveaway will there be?",
            &[],
            &[],
            &["Sesión 14: There will be a giveaway at 3500 subscribers."],
        );
    }

    #[test]
    fn a_sentence_that_announces_the_next_is_quoted_with_it() {
        let notes =
            "Lucio cuenta que el archiduque tenía pesadillas:\n\n- Soñaba con un pozo lleno de sal.\n- Oía voces.";
        check(
            &[("Sesión 10", notes)],
            "¿Qué pesadillas tenía el archiduque?",
            &["archiduque"],
            &[],
            &["Sesión 10: Lucio cuenta que el archiduque tenía pesadillas: Soñaba con un pozo lleno de sal."],
        );
        assert!(leads_into_next("Lucio cuenta: ") && !leads_into_next("Hora: las tres."));
    }

    #[test]
    fn a_list_item_in_lowercase_is_quoted_with_the_sentence_announcing_its_list() {
        let notes = "**El refectorio**\n\nLa reunión es en el refectorio, con tres banderas detrás de la mesa:\n\n\
            - el faro de la **Orden del Faro**, que trae la capitana Brisa Aldana;\n\
            - el ancla negra de la Hermandad, que trae a Nela Nieto;\n\
            - el cristal de Oruela, con la abadesa Celia Urquijo presidiendo.\n\n\
            Celia habla primero.\n\n- Pan y sal.";
        check(
            &[("Sesión 36", notes)],
            "¿Quién presidía con el cristal de Oruela?",
            &[],
            &[],
            &[
                "Sesión 36: La reunión es en el refectorio, con tres banderas detrás de la mesa: el faro de la **Orden del \
               Faro**, que trae la capitana Brisa Aldana; el ancla negra de la Hermandad, que trae a Nela Nieto; el \
               cristal de Oruela, con la abadesa Celia Urquijo presidiendo.",
            ],
        );
        let own = sentences_by_section(notes);
        let at = |start: &str| own.iter().position(|(sentence, _)| sentence.starts_with(start)).expect(start);
        assert_eq!(announced_by(&own, at("el ancla")), Some(at("La reunión")));
        // An item in capitals stands alone; so does one no sentence announces.
        assert_eq!(announced_by(&own, at("Pan y sal")), None);
        assert_eq!(announced_by(&own, at("Celia habla")), None);
    }

    #[test]
    fn the_sentences_holding_an_event_are_those_holding_a_word_it_asks_best_first() {
        let notes = [
            ("Sesión 14", "Llueve en el puerto. Arde La Gaviota Coja por el incendio. Gaspar mira."),
            ("Sesión 21", "El incendio de la Gaviota aún humea en la memoria de todos."),
        ];
        let terms = QueryTerms::new("el incendio de La Gaviota Coja", &[]);
        let found = asked_sentences(&notes, &terms, &|_| None);
        let places: Vec<(usize, usize, u32)> = found.iter().map(|s| (s.fragment, s.sentence, s.held)).collect();
        // «Llueve…» and «Gaspar mira.» hold none of its words; the sentence holding three
        // leads the one holding two.
        assert_eq!(places, [(0, 1, 3), (1, 0, 2)]);
        assert_eq!(found[0].excerpt.text, "Arde La Gaviota Coja por el incendio.");
    }

    #[test]
    fn a_title_in_emphasis_alone_is_never_quoted() {
        let notes = "**El banquete.**\n\nIria vio bajo el guante de Verónica una mano de sal.\n\n*El puerto*";
        check(
            &[("Sesión 20", notes)],
            "¿Qué vio Iria en el banquete del puerto?",
            &["Iria"],
            &[],
            &["Sesión 20: Iria vio bajo el guante de Verónica una mano de sal."],
        );
        for title in
            ["**El banquete.**", "*La traición de los muelles*", "__La última sala__", "**Qué hacen con Dorian**"]
        {
            assert!(is_a_title(title), "{title}");
        }
        for sentence in ["**Gastos:** 50 coronas a Quesada.", "Es **Dorian Quesada**.", "**Uno** y **dos**.", "**.**"] {
            assert!(!is_a_title(sentence), "{sentence}");
        }
        // Every emphasis mark, with or without a closing point inside or outside it, is a title
        // alone; with words beside it, a sentence.
        for mark in ["*", "**", "_", "__"] {
            for title in
                [format!("{mark}El carro{mark}"), format!("{mark}El carro.{mark}"), format!("{mark}El carro{mark}.")]
            {
                assert!(is_a_title(&title), "{title}");
                assert!(!is_a_title(&format!("{title} Salen al amanecer.")), "{title} + words");
                assert!(!is_a_title(&format!("Es {title}")), "words + {title}");
            }
        }
    }

    #[test]
    fn not_in_the_notes_only_when_no_sentence_holds_what_is_asked_nor_names_what_it_names() {
        // Every sentence names him; none says what he ate: the nearest, said to be only that.
        let ate = QueryTerms::new("¿Qué comió el archiduque?", &["archiduque"]);
        let nearest = rank_quotes(&[("Sesión 2", PORT), ("Sesión 3", PORT)], &ate, &|_| None);
        assert!(nearest.nearest_only(), "{nearest:?}");
        assert_eq!(nearest.excerpts().len(), NEAREST_QUOTES);
        // Asking only about him: the sentences naming him answer.
        let who = QueryTerms::new("¿Quién es el archiduque?", &["archiduque"]);
        let answer = rank_quotes(&[("Sesión 2", PORT)], &who, &|_| None);
        assert!(!answer.nearest_only());
        assert_eq!(answer.excerpts().len(), QUOTES_PER_FRAGMENT);
        // No word of it and no name it names: not in the notes, however near in meaning.
        check(&[("Sesión 2", PORT)], "¿Qué comió la gaviota?", &[], &[("palacio", 0.99)], &[]);
        check(&[("Sesión 2", PORT)], "¿y qué?", &[], &[], &[]);
    }

    #[test]
    fn the_nearest_are_only_sentences_naming_what_the_question_names_ranked_by_meaning() {
        let party = [(
            "Sesión 23",
            "A media mañana bajó Nela con un bulto envuelto en una manta de barco. \
             Era un laúd, con un nombre grabado: Candela II. \
             Odo se quedó callado y tocó la primera canción con Candela II. \
             La tonelería olía a brea.",
        )];
        let terms = QueryTerms::new("¿Qué le regaló Nela a Odo?", &["Nela", "Odo"]);
        let near = [("tocó", 0.9), ("bulto", 0.8), ("laúd", 0.95), ("brea", 0.99)];
        let similarity = |text: &str| near.iter().find(|(key, _)| text.contains(key)).map(|(_, value)| *value);
        let nearest = rank_quotes(&party, &terms, &similarity);
        assert!(nearest.nearest_only());
        // The lute's sentence names neither and the tar's is nearest of all: neither is quoted.
        assert_eq!(
            as_lines(nearest.excerpts()),
            [
                "Sesión 23: A media mañana bajó Nela con un bulto envuelto en una manta de barco.",
                "Sesión 23: Odo se quedó callado y tocó la primera canción con Candela II.",
            ]
        );
    }

    #[test]
    fn meaning_alone_never_makes_a_sentence_the_answer() {
        // However near the embedder finds them, sentences holding no word of what is asked do
        // not answer it: e5-small finds a sentence naming Sor Amaranta as near «¿Qué desayunó
        // Sor Amaranta?» as an answer is to its question.
        let notes = [("Sesión 26", "Sor Amaranta falló su prueba. El Pozo se quedó con su nombre.")];
        let terms = QueryTerms::new("¿Qué desayunó Sor Amaranta?", &["Sor Amaranta"]);
        assert!(rank_quotes(&notes, &terms, &|_| Some(0.99)).nearest_only());
    }

    #[test]
    fn meaning_decides_between_sentences_the_words_cannot_tell_apart() {
        let tower = [(
            "Sesión 1",
            "La torre arde al alba. La torre tiene tres pisos. La torre se derrumba. La torre es gris. La torre llora sal.",
        )];
        // Each holds «torre»; the embedder finds the collapse nearest, then the salt, then the fire.
        let near = [("derrumba", 0.9), ("llora", 0.85), ("arde", 0.8), ("pisos", 0.1), ("gris", 0.05)];
        check(
            &tower,
            "¿Qué le pasó a la torre?",
            &[],
            &near,
            &["Sesión 1: La torre arde al alba.", "Sesión 1: La torre se derrumba.", "Sesión 1: La torre llora sal."],
        );
        // Without meaning, the first three in the notes.
        check(
            &tower,
            "¿Qué le pasó a la torre?",
            &[],
            &[],
            &[
                "Sesión 1: La torre arde al alba.",
                "Sesión 1: La torre tiene tres pisos.",
                "Sesión 1: La torre se derrumba.",
            ],
        );
        // At most three a fragment, the best fragments first, in story order; five in all,
        // or eight while they read as five full quotes.
        let labels_for = |sentence: &str| -> Vec<String> {
            let many: Vec<(String, String)> =
                (1..=5).map(|n| (format!("Sesión {n}"), format!("{sentence} {sentence} {sentence}"))).collect();
            let many: Vec<(&str, &str)> = many.iter().map(|(l, t)| (l.as_str(), t.as_str())).collect();
            let quoted = rank_quotes(&many, &QueryTerms::new("¿Qué le pasó a la torre?", &[]), &|_| None);
            quoted.excerpts().iter().map(|excerpt| excerpt.label.to_string()).collect()
        };
        let long = format!("La torre cae{}.", " y cae".repeat(EXCERPT_MAX_CHARS / 6));
        assert_eq!(labels_for(&long), ["Sesión 1", "Sesión 1", "Sesión 1", "Sesión 2", "Sesión 2"]);
        assert_eq!(labels_for("La torre cae.").len(), MAX_SHORT_QUOTES);
        assert_eq!(
            labels_for("La torre cae.")[..6],
            ["Sesión 1", "Sesión 1", "Sesión 1", "Sesión 2", "Sesión 2", "Sesión 2"]
        );
    }

    #[test]
    fn links_render_as_their_text_and_candidates_are_the_quotable_units() {
        let notes = "El grupo visita las [Jaleas Ocre](https://example.org/j). [[PNJs/Baika|La Tejedora]] teje.";
        check(
            &[("Sesión 5", notes)],
            "¿Qué visitaron en las Jaleas?",
            &[],
            &[],
            &["Sesión 5: El grupo visita las Jaleas Ocre."],
        );
        let terms = QueryTerms::new("¿Qué teje la Tejedora?", &[]);
        assert_eq!(quote_candidates(&[("Sesión 5", notes)], &terms), ["La Tejedora teje."]);
    }
}
