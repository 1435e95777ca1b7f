//! An embedder that remembers the vectors it made: the answering side embeds the same
//! sentences again and again (an entity's story for every question about it, the chosen
//! fragments' quotable sentences for a follow-up, the eval's variants of one question), and on
//! a CPU each is a forward pass of e5. Only what is asked is remembered, up to
//! [`REMEMBERED_TEXTS`]; the oldest half goes when it is full.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::llm::{EmbedRole, Embedder, LlmError, NameFloor, SupportFloor};

/// How many texts' vectors are kept: an entity's story over a long campaign is a few hundred
/// sentences, a question's quotable ones a few dozen, so this holds the last dozens of
/// questions' work; at e5's 384 dimensions it is ~6 MB, at bge-m3's 1,024 ~16 MB.
pub const REMEMBERED_TEXTS: usize = 4096;

/// `inner`, with the vectors of the last [`REMEMBERED_TEXTS`] texts kept by role and text.
pub struct Remembered {
    inner: Arc<dyn Embedder>,
    vectors: Mutex<Memory>,
}

#[derive(Default)]
struct Memory {
    by_text: HashMap<(EmbedRole, String), (Vec<f32>, u64)>,
    /// Counts every lookup: a text's last use, so the oldest can go first.
    clock: u64,
}

impl Memory {
    fn recall(&mut self, role: EmbedRole, text: &str) -> Option<Vec<f32>> {
        self.clock += 1;
        let clock = self.clock;
        // The key is owned; a lookup by borrowed parts would need a second map shape.
        let entry = self.by_text.get_mut(&(role, text.to_string()))?;
        entry.1 = clock;
        Some(entry.0.clone())
    }

    fn keep(&mut self, role: EmbedRole, text: String, vector: Vec<f32>) {
        self.clock += 1;
        self.by_text.insert((role, text), (vector, self.clock));
        if self.by_text.len() > REMEMBERED_TEXTS {
            let mut uses: Vec<u64> = self.by_text.values().map(|(_, used)| *used).collect();
            uses.sort_unstable();
            let newest_dropped = uses[uses.len() / 2];
            self.by_text.retain(|_, (_, used)| *used > newest_dropped);
        }
    }
}

impl Remembered {
    pub fn new(inner: Arc<dyn Embedder>) -> Remembered {
        Remembered { inner, vectors: Mutex::new(Memory::default()) }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        // A panic elsewhere while the memory was held leaves only a cache: keep using it.
        self.vectors.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl Embedder for Remembered {
    fn id(&self) -> &str {
        self.inner.id()
    }
    fn dimension(&self) -> usize {
        self.inner.dimension()
    }
    fn window_words(&self) -> usize {
        self.inner.window_words()
    }
    fn support_floor(&self) -> Option<SupportFloor> {
        self.inner.support_floor()
    }
    fn name_floor(&self) -> Option<NameFloor> {
        self.inner.name_floor()
    }

    /// The remembered vectors, and one call to the inner embedder for the rest (none when
    /// every text was remembered). What the inner embedder returns for them, wrong count or
    /// error, is returned as it is.
    async fn embed(&self, texts: &[String], role: EmbedRole) -> Result<Vec<Vec<f32>>, LlmError> {
        let mut vectors: Vec<Option<Vec<f32>>> = {
            let mut memory = self.memory();
            texts.iter().map(|text| memory.recall(role, text)).collect()
        };
        let missing: Vec<String> =
            texts.iter().zip(&vectors).filter(|(_, known)| known.is_none()).map(|(text, _)| text.clone()).collect();
        if missing.is_empty() {
            return Ok(vectors.into_iter().flatten().collect());
        }
        let made = self.inner.embed(&missing, role).await?;
        if made.len() != missing.len() {
            return Ok(made);
        }
        let mut memory = self.memory();
        let mut made = missing.into_iter().zip(made);
        for slot in vectors.iter_mut().filter(|slot| slot.is_none()) {
            if let Some((text, vector)) = made.next() {
                memory.keep(role, text, vector.clone());
                *slot = Some(vector);
            }
        }
        Ok(vectors.into_iter().flatten().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Each text's vector is its length and its role, and every text embedded is counted.
    #[derive(Default)]
    struct Counting {
        embedded: AtomicUsize,
        calls: AtomicUsize,
        short_by_one: bool,
    }

    #[async_trait]
    impl Embedder for Counting {
        fn id(&self) -> &str {
            "counting"
        }
        fn dimension(&self) -> usize {
            2
        }
        fn window_words(&self) -> usize {
            100
        }
        async fn embed(&self, texts: &[String], role: EmbedRole) -> Result<Vec<Vec<f32>>, LlmError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.embedded.fetch_add(texts.len(), Ordering::SeqCst);
            let side = if role == EmbedRole::Query { 1.0 } else { -1.0 };
            let mut vectors: Vec<Vec<f32>> = texts.iter().map(|text| vec![text.len() as f32, side]).collect();
            if self.short_by_one {
                vectors.pop();
            }
            Ok(vectors)
        }
    }

    fn texts(words: &[&str]) -> Vec<String> {
        words.iter().map(|word| word.to_string()).collect()
    }

    #[tokio::test]
    async fn a_text_is_embedded_once_per_role_and_the_vectors_keep_the_callers_order() {
        let inner = Arc::new(Counting::default());
        let remembered = Remembered::new(Arc::clone(&inner) as Arc<dyn Embedder>);
        let first = remembered.embed(&texts(&["a", "bb"]), EmbedRole::Passage).await.unwrap();
        assert_eq!(first, vec![vec![1.0, -1.0], vec![2.0, -1.0]]);
        // One known, one new, in between: only the new one reaches the embedder.
        let mixed = remembered.embed(&texts(&["bb", "cccc", "a"]), EmbedRole::Passage).await.unwrap();
        assert_eq!(mixed, vec![vec![2.0, -1.0], vec![4.0, -1.0], vec![1.0, -1.0]]);
        assert_eq!(inner.embedded.load(Ordering::SeqCst), 3);
        // All known: no call at all.
        remembered.embed(&texts(&["cccc", "a"]), EmbedRole::Passage).await.unwrap();
        assert_eq!(inner.calls.load(Ordering::SeqCst), 2);
        // The same text as a query is another vector.
        let query = remembered.embed(&texts(&["a"]), EmbedRole::Query).await.unwrap();
        assert_eq!(query, vec![vec![1.0, 1.0]]);
        assert_eq!(inner.embedded.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_wrong_count_is_returned_as_it_came_and_nothing_is_remembered() {
        let inner = Arc::new(Counting { short_by_one: true, ..Counting::default() });
        let remembered = Remembered::new(Arc::clone(&inner) as Arc<dyn Embedder>);
        let short = remembered.embed(&texts(&["a", "bb"]), EmbedRole::Passage).await.unwrap();
        assert_eq!(short.len(), 1, "the caller sees the embedder's mistake");
        remembered.embed(&texts(&["a", "bb"]), EmbedRole::Passage).await.unwrap();
        assert_eq!(inner.embedded.load(Ordering::SeqCst), 4, "nothing was remembered from the wrong answer");
    }

    #[tokio::test]
    async fn past_its_size_the_least_recently_used_half_goes() {
        let inner = Arc::new(Counting::default());
        let remembered = Remembered::new(Arc::clone(&inner) as Arc<dyn Embedder>);
        let many: Vec<String> = (0..REMEMBERED_TEXTS).map(|i| format!("t{i}")).collect();
        remembered.embed(&many, EmbedRole::Passage).await.unwrap();
        // The first text used again is now the newest; one more text overflows the memory.
        remembered.embed(&many[..1], EmbedRole::Passage).await.unwrap();
        remembered.embed(&texts(&["overflow"]), EmbedRole::Passage).await.unwrap();
        let embedded = inner.embedded.load(Ordering::SeqCst);
        assert_eq!(embedded, REMEMBERED_TEXTS + 1);
        remembered.embed(&many[..1], EmbedRole::Passage).await.unwrap();
        remembered.embed(&texts(&["overflow"]), EmbedRole::Passage).await.unwrap();
        assert_eq!(inner.embedded.load(Ordering::SeqCst), embedded, "the recently used stay");
        remembered.embed(&many[1..2], EmbedRole::Passage).await.unwrap();
        assert_eq!(inner.embedded.load(Ordering::SeqCst), embedded + 1, "the oldest went");
        assert!(remembered.memory().by_text.len() <= REMEMBERED_TEXTS);
    }
}
