//! Whether a quoted answer's quotes are the notes' own words: each quote, character for
//! character, in a fragment its label names, as the players may read it.

use std::collections::HashMap;

use crate::answer::passages::{Excerpt, links_as_text, unlink};
use crate::index::{Index, IndexError};
use crate::retrieve::Audience;

/// The quotes of `quoted` not found word for word in the player-visible fragments of the
/// label each names: links as their text and runs of spaces as one, as a quote reads them; a
/// quote cut short («…») by the words before the cut.
pub(super) fn misquoted(index: &Index, quoted: &[Excerpt]) -> Result<Vec<String>, IndexError> {
    let mut notes: HashMap<&str, Vec<String>> = HashMap::new();
    let mut misquoted = Vec::new();
    for excerpt in quoted {
        let label = excerpt.label.as_str();
        if !notes.contains_key(label) {
            let fragments = index.store.fragments_of_label(label, Audience::Player.visibility_filter())?;
            notes.insert(label, fragments.iter().map(|stored| as_quoted(&stored.fragment.text)).collect());
        }
        let said = words_said(&excerpt.text);
        if !notes[label].iter().any(|note| note.contains(&said)) {
            misquoted.push(format!("{label}: «{}»", excerpt.text));
        }
    }
    Ok(misquoted)
}

/// A note as a quote reads it: each line without its quote marks (`>`) and list bullet
/// (`- `, `* `, `+ `, `1. `, `1) `), Markdown links as their text, then wiki links as their
/// shown text (`passages::unlink`), as the quotes are made; the lines joined; then [`plain`].
fn as_quoted(note: &str) -> String {
    static BULLET: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"^(?:[-*+]|\d{1,3}[.)])\s+").expect("the bullet pattern is valid")
    });
    let lines: Vec<String> = links_as_text(note)
        .lines()
        .map(|line| {
            let unquoted = line.trim().trim_start_matches(|c: char| c == '>' || c.is_whitespace());
            unlink(&BULLET.replace(unquoted, ""))
        })
        .collect();
    plain(&lines.join("\n"))
}

/// What of a quote the note must hold: all of it, or, cut short, its words before the cut
/// (the cut may have dropped a comma or colon after them); then [`plain`].
fn words_said(quote: &str) -> String {
    let quote = quote.trim_end();
    let said = match quote.strip_suffix('…') {
        Some(before) => before.trim_end().trim_end_matches([',', ';', ':']),
        None => quote,
    };
    plain(said)
}

/// Text compared aside from emphasis (`*`, `_`) and link brackets (`[`, `]`, `(`, `)`,
/// which a quote writes as parentheses), one space between words.
fn plain(text: &str) -> String {
    let kept: String = text.chars().filter(|c| !matches!(c, '*' | '_' | '[' | ']' | '(' | ')')).collect();
    kept.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quote_cut_short_is_held_to_its_words_before_the_cut() {
        assert_eq!(words_said("El grupo  llega al puerto de…"), "El grupo llega al puerto de");
        assert_eq!(words_said("Dijo esto, …"), "Dijo esto");
        assert_eq!(words_said("Llueve."), "Llueve.");
    }

    #[test]
    fn a_note_is_read_as_its_quotes_read_it_and_no_word_is_spared() {
        let note = "## Sesión 13\n\nLo que cuenta **Yusuf** de sí mismo:\n- Es cartógrafo;\n  trabaja para [[Capitanía|la capitanía]].\n\
                    > Dorian, en la pasarela: «Lo siento».\n1. Vio a [Nela](Nela.md) con Odo.\n";
        let read = as_quoted(note);
        for quote in [
            "Lo que cuenta **Yusuf** de sí mismo: Es cartógrafo; trabaja para la capitanía.",
            "Dorian, en la pasarela: «Lo siento».",
            "Vio a Nela con Odo.",
            "trabaja para (Capitanía|la capitanía).",
        ] {
            let said = words_said(quote);
            if quote.contains('|') {
                // A quote naming the link's target, not what the note shows, is no quote of it.
                assert!(!read.contains(&said), "{quote}");
            } else {
                assert!(read.contains(&said), "«{quote}» in «{read}»");
            }
        }
        assert!(!read.contains(&words_said("Es cartógrafo y marino.")));
    }
}
