//! A question comparing two events in time, answered from the chosen notes: each event's
//! sentence, in the order their sessions tell them (`answer::compare`).

use crate::answer::compare::{Told, comparison_of, render_order, told};
use crate::answer::passages::Excerpt;
use crate::answer::quotes::asked_sentences;
use crate::answer::terms::QueryTerms;
use crate::text::fold;

use super::Prepared;
use super::generate::quotable_fragments;

impl Prepared {
    /// The answer's text and its quotes when the question compares two events in time and
    /// the chosen notes tell each in a session; `None` otherwise (it is answered as any other).
    pub(super) fn compared(&self) -> Option<(String, Vec<Excerpt>)> {
        let comparison = comparison_of(&self.question)?;
        let fragments = quotable_fragments(self);
        let session_of = |fragment: usize| {
            let label = fragments.get(fragment)?.0;
            let candidate = self.chosen.iter().find(|candidate| candidate.label.as_str() == label)?;
            candidate.session.map(|session| session.0)
        };
        let similarity = |text: &str| self.quote_similarity.get(text).copied();
        let event_told = |event: &str| -> Option<Told> {
            // The names the question names, as far as this event names them.
            let folded = fold(event);
            let names: Vec<&str> = self
                .search
                .entities
                .iter()
                .flat_map(|entity| {
                    [Some(entity.name.as_str()), Some(entity.alias.as_str()), entity.asked_as.as_deref()]
                })
                .flatten()
                .filter(|name| folded.contains(&fold(name)))
                .collect();
            let terms = QueryTerms::new(event, &names);
            if terms.is_empty() {
                return None;
            }
            told(&asked_sentences(&fragments, &terms, &similarity), terms.weight(), &session_of)
        };
        let [event, other] = comparison.events();
        let (first, second) = (event_told(event)?, event_told(other)?);
        let language = crate::lexicon::language_of(&self.question);
        let text = render_order(&comparison, [&first, &second], language)?;
        tracing::info!(first = first.session, second = second.session, "two events compared by their sessions");
        Some((text, vec![first.excerpt, second.excerpt]))
    }
}
