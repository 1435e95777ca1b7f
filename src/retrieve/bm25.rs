//! BM25 over fragment text (SQLite FTS5): nails invented proper nouns literally.
//!
//! User text never reaches `MATCH` raw: it is cut into words, stopwords (Spanish and
//! English) dropped, and each remaining word quoted as an FTS5 string, OR-ed together. No
//! question can raise an FTS5 syntax error, and an empty index simply returns nothing.

use crate::corpus::{Visibility, fold};
use crate::index::{IndexError, Store};
use crate::lexicon::is_stopword;

/// The FTS5 expression for `question`, or `None` when nothing in it is worth matching.
pub fn fts_query(question: &str) -> Option<String> {
    let mut terms: Vec<String> = Vec::new();
    for word in question.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let folded = fold(word);
        if folded.chars().count() < 2 || is_stopword(&folded) || terms.contains(&folded) {
            continue;
        }
        terms.push(folded);
    }
    if terms.is_empty() {
        return None;
    }
    // Folded words are alphanumeric only: quoting them cannot break out of the string.
    Some(terms.iter().map(|t| format!("\"{t}\"")).collect::<Vec<_>>().join(" OR "))
}

/// Fragment ids, best BM25 first.
pub fn search_bm25(
    store: &Store,
    question: &str,
    visibility: Option<Visibility>,
    depth: usize,
) -> Result<Vec<i64>, IndexError> {
    let _span = tracing::info_span!("retrieve.bm25", depth).entered();
    let Some(query) = fts_query(question) else {
        return Ok(Vec::new());
    };
    Ok(store.match_fts(&query, visibility, depth)?.into_iter().map(|(id, _)| id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(question: &str, expected: Option<&str>) {
        assert_eq!(fts_query(question).as_deref(), expected, "{question}");
    }

    #[test]
    fn questions_become_safe_fts_expressions() {
        check("¿Qué pasó con Norkiel?", Some("\"norkiel\""));
        check("¿Dónde está el Puerto de Galerna?", Some("\"puerto\" OR \"galerna\""));
        check("What happened to the dragon?", Some("\"dragon\""));
        // FTS5 operators and syntax characters are just text.
        check("\"Norkiel\" AND -Galerna* OR NEAR(x:y)", Some("\"norkiel\" OR \"galerna\" OR \"near\""));
        check("norkiel norkiel NORKIEL", Some("\"norkiel\""));
    }

    #[test]
    fn nothing_worth_matching_is_no_query() {
        check("", None);
        check("¿¿??", None);
        check("¿Qué es lo que pasó?", None);
        check("what is it", None);
    }
}
