//! Resolving references against the campaign: the sessions there are (as the asker may read
//! them), the anchors of an event and an entity's appearances, and the fragments they bring.

use std::collections::HashMap;

use rusqlite::params;

use super::{
    ANCHOR_CANDIDATES, ANCHOR_SESSIONS, APPEARANCE_SESSIONS, MAX_RANGE_SESSIONS, TimeDiagnostics, TimeReference,
};
use crate::corpus::{FragmentId, Label, SessionNumber, Visibility};
use crate::index::{IndexError, Store};

/// The time path's ranked list (fragment ids) and what it did. `prior` is the other paths'
/// fusion, best first, where «antes de X» / «después de X» find X; `entity_ids` the
/// entities the question names (for first and last appearances). Visibility is applied in
/// the query: a session the asker may not read is neither listed nor counted as the last.
pub fn search_time(
    store: &Store,
    references: &[TimeReference],
    prior: &[FragmentId],
    entity_ids: &[i64],
    visibility: Option<Visibility>,
    depth: usize,
) -> Result<(Vec<FragmentId>, TimeDiagnostics), IndexError> {
    let _span = tracing::info_span!("retrieve.time", n_references = references.len(), depth).entered();
    if references.is_empty() {
        return Ok((Vec::new(), TimeDiagnostics::default()));
    }
    let timeline = SessionFragments::load(store, visibility)?;
    let anchors: Vec<SessionNumber> =
        if references.iter().any(|r| matches!(r, TimeReference::AfterEvent | TimeReference::BeforeEvent)) {
            let mut anchors: Vec<SessionNumber> = Vec::new();
            for id in prior.iter().take(ANCHOR_CANDIDATES) {
                if let Some(&session) = timeline.session_of.get(id)
                    && !anchors.contains(&session)
                    && anchors.len() < ANCHOR_SESSIONS
                {
                    anchors.push(session);
                }
            }
            anchors
        } else {
            Vec::new()
        };
    let appearances =
        if references.iter().any(|r| matches!(r, TimeReference::FirstAppearance | TimeReference::LastAppearance)) {
            entity_sessions(store, entity_ids, visibility)?
        } else {
            Vec::new()
        };
    let mut diagnostics = resolve(references, &timeline.sessions, &anchors, &appearances);
    diagnostics.sessions.truncate(depth);
    let ids: Vec<FragmentId> = diagnostics
        .sessions
        .iter()
        .flat_map(|session| timeline.fragments.get(session).cloned().unwrap_or_default())
        .take(depth)
        .collect();
    tracing::debug!(n_sessions = diagnostics.sessions.len(), n_fragments = ids.len(), "time path");
    Ok((ids, diagnostics))
}

/// Resolves `references` against the sessions there are (ascending): the sessions to bring,
/// best first, and what was missing or clamped. Pure.
pub fn resolve(
    references: &[TimeReference],
    known: &[SessionNumber],
    anchors: &[SessionNumber],
    appearances: &[SessionNumber],
) -> TimeDiagnostics {
    let mut diagnostics = TimeDiagnostics {
        references: references.to_vec(),
        highest_session: known.last().copied(),
        anchors: anchors.to_vec(),
        ..TimeDiagnostics::default()
    };
    let add = |list: &mut Vec<SessionNumber>, session: SessionNumber| {
        if !list.contains(&session) {
            list.push(session);
        }
    };
    let mut sessions: Vec<SessionNumber> = Vec::new();
    let mut named: Vec<SessionNumber> = Vec::new();
    for reference in references {
        let brought: Vec<SessionNumber> = match *reference {
            TimeReference::Session { number } => {
                if known.contains(&SessionNumber(number)) {
                    vec![SessionNumber(number)]
                } else {
                    diagnostics.missing.push(number);
                    Vec::new()
                }
            }
            TimeReference::Range { from, to } => {
                let (low, high) = (from.min(to), from.max(to));
                let inside: Vec<SessionNumber> =
                    known.iter().copied().filter(|s| (low..=high).contains(&s.0)).collect();
                let past_the_notes =
                    known.last().is_none_or(|last| high > last.0) || known.first().is_none_or(|first| low < first.0);
                if from > to || past_the_notes || inside.len() > MAX_RANGE_SESSIONS {
                    diagnostics.clamped = true;
                }
                if inside.is_empty() {
                    diagnostics.missing.push(low);
                }
                inside.into_iter().take(MAX_RANGE_SESSIONS).collect()
            }
            TimeReference::Back { sessions: back } => {
                match known.len().checked_sub(1 + back as usize).and_then(|position| known.get(position)) {
                    Some(&session) => vec![session],
                    None => Vec::new(),
                }
            }
            TimeReference::Last { count } => {
                let count = (count as usize).min(MAX_RANGE_SESSIONS);
                known[known.len().saturating_sub(count)..].iter().rev().copied().collect()
            }
            TimeReference::AfterEvent | TimeReference::BeforeEvent => {
                let after = matches!(reference, TimeReference::AfterEvent);
                let mut brought = Vec::new();
                for (position, anchor) in anchors.iter().enumerate() {
                    let neighbour = if after {
                        known.iter().copied().find(|s| s > anchor)
                    } else {
                        known.iter().rev().copied().find(|s| s < anchor)
                    };
                    if let Some(neighbour) = neighbour {
                        brought.push(neighbour);
                        if position == 0 {
                            add(&mut named, neighbour);
                        }
                    }
                    brought.push(*anchor);
                }
                brought
            }
            TimeReference::FirstAppearance => appearances.iter().copied().take(APPEARANCE_SESSIONS).collect(),
            TimeReference::LastAppearance => appearances.iter().rev().copied().take(APPEARANCE_SESSIONS).collect(),
        };
        for session in brought {
            if reference.names_sessions() {
                add(&mut named, session);
            }
            add(&mut sessions, session);
        }
    }
    diagnostics.sessions = sessions;
    diagnostics.named_sessions = named;
    diagnostics
}

/// Keeps the fragments of the sessions the question names among the `k` chosen: each one
/// missing replaces the lowest-ranked chosen fragment of a session not named, up to
/// `k - k/4` of them (the rest stays the rerank's). `pool` is the fused pool, where the
/// named fragments are found (so visibility was already applied).
pub fn keep_named_sessions<C: Clone>(
    chosen: &mut Vec<C>,
    pool: &[C],
    named: &[SessionNumber],
    k: usize,
    session_of: impl Fn(&C) -> (FragmentId, Option<SessionNumber>),
) -> usize {
    if named.is_empty() || k == 0 {
        return 0;
    }
    let max_named = k - k / 4;
    let is_named = |candidate: &C| session_of(candidate).1.is_some_and(|session| named.contains(&session));
    let mut wanted: Vec<&C> = Vec::new();
    for session in named {
        for candidate in pool.iter().filter(|c| session_of(c).1 == Some(*session)) {
            if wanted.len() < max_named {
                wanted.push(candidate);
            }
        }
    }
    let mut added = 0;
    for candidate in wanted {
        let id = session_of(candidate).0;
        if chosen.iter().any(|c| session_of(c).0 == id) {
            continue;
        }
        if chosen.len() >= k {
            match chosen.iter().rposition(|c| !is_named(c)) {
                Some(position) => {
                    chosen.remove(position);
                }
                None => break,
            }
        }
        chosen.push(candidate.clone());
        added += 1;
    }
    added
}

/// The sessions an audience may read, ascending, and each one's fragment ids in part order.
#[derive(Debug, Default)]
pub struct SessionFragments {
    pub sessions: Vec<SessionNumber>,
    pub fragments: HashMap<SessionNumber, Vec<FragmentId>>,
    pub session_of: HashMap<FragmentId, SessionNumber>,
}

impl SessionFragments {
    /// One query over the session fragments the visibility allows.
    pub fn load(store: &Store, visibility: Option<Visibility>) -> Result<SessionFragments, IndexError> {
        let mut statement = store.connection().prepare_cached(
            "SELECT id, session FROM fragments
             WHERE kind = 'session' AND session IS NOT NULL AND (?1 IS NULL OR visibility = ?1)
             ORDER BY session, part, id",
        )?;
        let rows = statement.query_map(params![visibility.map(Visibility::as_str)], |row| {
            Ok((row.get::<_, FragmentId>(0)?, row.get::<_, u32>(1)?))
        })?;
        let mut loaded = SessionFragments::default();
        for row in rows {
            let (id, session) = row?;
            let session = SessionNumber(session);
            if loaded.sessions.last() != Some(&session) {
                loaded.sessions.push(session);
            }
            loaded.fragments.entry(session).or_default().push(id);
            loaded.session_of.insert(id, session);
        }
        Ok(loaded)
    }
}

/// The sessions where any of `entity_ids` is mentioned in a fragment the visibility allows,
/// ascending.
pub fn entity_sessions(
    store: &Store,
    entity_ids: &[i64],
    visibility: Option<Visibility>,
) -> Result<Vec<SessionNumber>, IndexError> {
    let mut statement = store.connection().prepare_cached(
        "SELECT DISTINCT f.session FROM entity_mentions m JOIN fragments f ON f.id = m.fragment_id
         WHERE m.entity_id = ?1 AND f.session IS NOT NULL AND f.kind = 'session'
           AND (?2 IS NULL OR f.visibility = ?2)",
    )?;
    let mut sessions: Vec<SessionNumber> = Vec::new();
    for entity_id in entity_ids {
        let rows =
            statement.query_map(params![entity_id, visibility.map(Visibility::as_str)], |row| row.get::<_, u32>(0))?;
        for row in rows {
            sessions.push(SessionNumber(row?));
        }
    }
    sessions.sort_unstable();
    sessions.dedup();
    Ok(sessions)
}

/// The session fragments that mention `entity_id` and the visibility allows, by session and
/// part: `(id, session, label, content hash)`.
pub fn entity_session_fragments(
    store: &Store,
    entity_id: i64,
    visibility: Option<Visibility>,
) -> Result<Vec<(FragmentId, SessionNumber, Label, String)>, IndexError> {
    let mut statement = store.connection().prepare_cached(
        "SELECT f.id, f.session, f.label, f.content_hash FROM entity_mentions m JOIN fragments f ON f.id = m.fragment_id
         WHERE m.entity_id = ?1 AND f.session IS NOT NULL AND f.kind = 'session'
           AND (?2 IS NULL OR f.visibility = ?2)
         ORDER BY f.session, f.part, f.id",
    )?;
    let rows = statement.query_map(params![entity_id, visibility.map(Visibility::as_str)], |row| {
        Ok((row.get::<_, FragmentId>(0)?, SessionNumber(row.get::<_, u32>(1)?), row.get(2)?, row.get(3)?))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use TimeReference::*;

    fn sessions(numbers: &[u32]) -> Vec<SessionNumber> {
        numbers.iter().map(|&n| SessionNumber(n)).collect()
    }

    #[track_caller]
    fn check_resolved(references: &[TimeReference], anchors: &[u32], expected: &[u32], missing: &[u32], clamped: bool) {
        let known = sessions(&[1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 40]);
        let resolved = resolve(references, &known, &sessions(anchors), &sessions(&[2, 7, 12]));
        assert_eq!(resolved.sessions, sessions(expected), "{references:?}");
        assert_eq!(resolved.missing, missing, "{references:?}");
        assert_eq!(resolved.clamped, clamped, "{references:?}");
        assert_eq!(resolved.highest_session, Some(SessionNumber(40)));
    }

    #[test]
    fn resolution_against_the_sessions_there_are() {
        check_resolved(&[Session { number: 12 }], &[], &[12], &[], false);
        // A session that does not exist is missing; the notice names the highest.
        check_resolved(&[Session { number: 400 }], &[], &[], &[400], false);
        check_resolved(&[Session { number: 4 }], &[], &[], &[4], false);
        // Reversed and huge ranges are clamped.
        check_resolved(&[Range { from: 14, to: 10 }], &[], &[10, 11, 12, 13, 14], &[], true);
        check_resolved(&[Range { from: 1, to: 400 }], &[], &[1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13], &[], true);
        check_resolved(&[Range { from: 100, to: 400 }], &[], &[], &[100], true);
        // Relative: from the highest there is, over the sessions there are.
        check_resolved(&[Back { sessions: 0 }], &[], &[40], &[], false);
        check_resolved(&[Back { sessions: 1 }], &[], &[20], &[], false);
        check_resolved(&[Back { sessions: 99 }], &[], &[], &[], false);
        check_resolved(&[Last { count: 3 }], &[], &[40, 20, 19], &[], false);
        // Before and after: the neighbour of each anchor, then the anchor.
        check_resolved(&[AfterEvent], &[3, 12], &[5, 3, 13, 12], &[], false);
        check_resolved(&[BeforeEvent], &[5], &[3, 5], &[], false);
        check_resolved(&[AfterEvent], &[40], &[40], &[], false);
        check_resolved(&[FirstAppearance], &[], &[2, 7], &[], false);
        check_resolved(&[LastAppearance], &[], &[12, 7], &[], false);
    }

    #[test]
    fn notices_name_the_highest_session() {
        let known = sessions(&[1, 2, 40]);
        let missing = resolve(&[Session { number: 400 }], &known, &[], &[]);
        assert!(missing.answers_alone());
        assert_eq!(
            missing.notice(false).as_deref(),
            Some("La sesión 400 no está en las notas: la última que hay es la 40.")
        );
        assert_eq!(
            missing.notice(true).as_deref(),
            Some("Session 400 is not in the notes: the last session there is 40.")
        );
        let partly = resolve(&[Session { number: 2 }, Session { number: 400 }], &known, &[], &[]);
        assert!(!partly.answers_alone());
        assert!(partly.notice(false).is_some());
        let none = resolve(&[Back { sessions: 0 }], &[], &[], &[]);
        assert!(none.answers_alone());
        assert!(none.notice(false).is_some_and(|notice| notice.contains("no tienen sesiones")));
        let fine = resolve(&[Session { number: 2 }], &known, &[], &[]);
        assert_eq!(fine.notice(false), None);
        assert!(!resolve(&[AfterEvent], &[], &[], &[]).answers_alone());
    }

    #[test]
    fn named_sessions_are_kept_among_the_chosen() {
        // (id, session); the pool in fusion order.
        let pool: Vec<(i64, Option<SessionNumber>)> =
            (1..=12).map(|id| (id, Some(SessionNumber(id as u32)))).chain([(13, None)]).collect();
        let key = |c: &(i64, Option<SessionNumber>)| (FragmentId(c.0), c.1);
        let mut chosen: Vec<_> = pool[..8].to_vec();
        let added = keep_named_sessions(&mut chosen, &pool, &sessions(&[11]), 8, key);
        assert_eq!(added, 1);
        let ids: Vec<i64> = chosen.iter().map(|c| c.0).collect();
        assert_eq!(ids, [1, 2, 3, 4, 5, 6, 7, 11]);
        // At most k - k/4 named; the rest stay.
        let mut chosen: Vec<_> = pool[..8].to_vec();
        keep_named_sessions(&mut chosen, &pool, &sessions(&[9, 10, 11, 12]), 8, key);
        let ids: Vec<i64> = chosen.iter().map(|c| c.0).collect();
        assert_eq!(ids, [1, 2, 3, 4, 9, 10, 11, 12]);
        // Already there: nothing moves.
        let mut chosen: Vec<_> = pool[..8].to_vec();
        assert_eq!(keep_named_sessions(&mut chosen, &pool, &sessions(&[2]), 8, key), 0);
    }
}
