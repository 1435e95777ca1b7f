//! LLM work, one question at a time (or `concurrency` at a time), first come first served.
//!
//! A question either starts at once or waits with a known position, which the asker is
//! shown. A per-user rate limit refuses a question before it queues, saying how long to
//! wait. Nothing is dropped: a question that gets in is answered or told why not.
//!
//! The work itself runs on a [`LocalWorker`]: the oracle's futures hold the index's SQLite
//! connection across awaits, so they are not `Send` and cannot run on the bot's multi-threaded
//! runtime; a dedicated thread with its own single-threaded runtime runs them instead.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

/// The thread the oracle's futures (which are not `Send`) run on: the application layer's (the
/// MCP server runs its tools on one too).
pub use crate::app::worker::{LocalWorker, WorkerGone};

/// The window the per-user rate limit counts questions in.
pub const RATE_WINDOW: Duration = Duration::from_secs(60);
/// Sources (`/fuente`, a source button) one user may read per question they may ask: an
/// answer cites a few notes and a player opens some of them, but reading every label in turn
/// is scraping, not reading.
pub const SOURCES_PER_QUESTION: u32 = 3;
/// Users remembered by the rate limiter before the idle ones are forgotten.
const RATE_USERS_KEPT: usize = 1024;

/// The queue of LLM work.
#[derive(Debug)]
pub struct Queue {
    slots: Arc<Mutex<Slots>>,
    limiter: Mutex<RateLimiter>,
    /// Sources read, counted apart from questions (a source is cheap, a question is not).
    source_limiter: Mutex<RateLimiter>,
}

#[derive(Debug)]
struct Slots {
    capacity: usize,
    running: usize,
    /// First in, first served; a waiter that left has a closed channel and is skipped. Each
    /// is told its position whenever the queue moves.
    waiters: VecDeque<(oneshot::Sender<Slot>, watch::Sender<usize>)>,
    /// Woken when a slot is given back: background work may take it.
    freed: Arc<tokio::sync::Notify>,
    /// Woken when a question starts waiting: background work gives its slot back.
    wanted: Arc<tokio::sync::Notify>,
}

impl Slots {
    /// Drops the waiters that left and tells the others their (1-based) positions.
    fn renumber(&mut self) {
        self.waiters.retain(|(waiter, _)| !waiter.is_closed());
        for (index, (_, position)) in self.waiters.iter().enumerate() {
            position.send_if_modified(|current| {
                let moved = *current != index + 1;
                *current = index + 1;
                moved
            });
        }
    }
}

/// Questions asked by a message (a mention, a reply, a message in one of the bot's threads)
/// while they wait in the queue, by the asking message's id: deleting that message withdraws
/// the question, and the queue moves on without it.
#[derive(Debug, Default, Clone)]
pub struct Withdrawals {
    waiting: Arc<Mutex<HashMap<u64, watch::Sender<bool>>>>,
}

/// One question that may be withdrawn; dropping it (the question started, or ended) stops
/// watching.
#[derive(Debug)]
pub struct Withdrawal {
    message: u64,
    withdrawn: watch::Receiver<bool>,
    waiting: Arc<Mutex<HashMap<u64, watch::Sender<bool>>>>,
}

impl Withdrawals {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, watch::Sender<bool>>> {
        self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Watches the question asked by `message`.
    pub fn watch(&self, message: u64) -> Withdrawal {
        let (sender, withdrawn) = watch::channel(false);
        self.lock().insert(message, sender);
        Withdrawal { message, withdrawn, waiting: Arc::clone(&self.waiting) }
    }

    /// `message` was deleted: its question, if it is still waiting, leaves. Whether one did.
    pub fn withdraw(&self, message: u64) -> bool {
        match self.lock().remove(&message) {
            Some(sender) => {
                sender.send_replace(true);
                true
            }
            None => false,
        }
    }
}

impl Withdrawal {
    /// Resolves when the asking message is deleted; never otherwise.
    pub async fn withdrawn(&mut self) {
        if self.withdrawn.wait_for(|withdrawn| *withdrawn).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Withdrawal {
    fn drop(&mut self) {
        let mut waiting = self.waiting.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Only this question's own entry (a later question by the same message id cannot be).
        if waiting.get(&self.message).is_some_and(|sender| sender.subscribe().same_channel(&self.withdrawn)) {
            waiting.remove(&self.message);
        }
    }
}

/// The right to run one piece of LLM work; dropping it hands the slot to the next waiter.
#[derive(Debug)]
pub struct Slot {
    slots: Option<Arc<Mutex<Slots>>>,
}

/// Where a question stands once admitted.
pub enum Admission {
    /// A slot was free: run now.
    Now(Slot),
    /// Every slot is busy: `position` questions (this one included) are waiting.
    Queued(Waiting),
}

/// A place in the queue; dropping it leaves the queue.
pub struct Waiting {
    position: watch::Receiver<usize>,
    receiver: oneshot::Receiver<Slot>,
    slots: Arc<Mutex<Slots>>,
}

impl Drop for Waiting {
    /// Leaving the queue moves everyone behind up at once.
    fn drop(&mut self) {
        self.receiver.close();
        lock(&self.slots).renumber();
    }
}

/// What happened to a waiting question.
pub enum QueueEvent {
    /// Its turn: run now.
    Started(Slot),
    /// The questions before it moved on: its new position.
    Moved(usize),
}

/// The queue went away while waiting (the bot is stopping).
#[derive(Debug, thiserror::Error)]
#[error("the question queue is closed")]
pub struct QueueClosed;

fn lock(slots: &Mutex<Slots>) -> MutexGuard<'_, Slots> {
    // Nothing panics while holding this lock; recover the state if something ever did.
    slots.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Drop for Slot {
    fn drop(&mut self) {
        let Some(slots) = self.slots.take() else {
            return;
        };
        let mut state = lock(&slots);
        while let Some((waiter, _)) = state.waiters.pop_front() {
            match waiter.send(Slot { slots: Some(Arc::clone(&slots)) }) {
                Ok(()) => {
                    state.renumber();
                    return;
                }
                // That waiter left: disarm the slot it did not take, and try the next one.
                Err(mut unclaimed) => unclaimed.slots = None,
            }
        }
        state.running = state.running.saturating_sub(1);
        state.freed.notify_waiters();
    }
}

impl Waiting {
    /// 1 for the next question to run.
    pub fn position(&self) -> usize {
        *self.position.borrow()
    }

    /// Waits for a slot.
    pub async fn start(mut self) -> Result<Slot, QueueClosed> {
        (&mut self.receiver).await.map_err(|_| QueueClosed)
    }

    /// Waits for the slot or for the queue to move, whichever comes first.
    pub async fn next(&mut self) -> Result<QueueEvent, QueueClosed> {
        tokio::select! {
            biased;
            slot = &mut self.receiver => slot.map(QueueEvent::Started).map_err(|_| QueueClosed),
            changed = self.position.changed() => match changed {
                Ok(()) => Ok(QueueEvent::Moved(*self.position.borrow_and_update())),
                // Handed a slot (its place is gone): the slot is on its way.
                Err(_) => (&mut self.receiver).await.map(QueueEvent::Started).map_err(|_| QueueClosed),
            },
        }
    }
}

impl Queue {
    /// `concurrency` questions at once; `per_minute` questions per user per minute (0: no limit).
    pub fn new(concurrency: usize, per_minute: u32) -> Queue {
        Queue {
            slots: Arc::new(Mutex::new(Slots {
                capacity: concurrency.max(1),
                running: 0,
                waiters: VecDeque::new(),
                freed: Arc::default(),
                wanted: Arc::default(),
            })),
            limiter: Mutex::new(RateLimiter::new(per_minute, RATE_WINDOW)),
            source_limiter: Mutex::new(RateLimiter::new(per_minute.saturating_mul(SOURCES_PER_QUESTION), RATE_WINDOW)),
        }
    }

    /// Counts a source read by `user` (`/fuente`, a source button): `Err(wait)` when over
    /// `SOURCES_PER_QUESTION` times the question limit.
    pub fn check_source_rate(&self, user: u64) -> Result<(), Duration> {
        match self.source_limiter.lock() {
            Ok(mut limiter) => limiter.admit(user, Instant::now()),
            Err(_) => Ok(()),
        }
    }

    /// Counts a question by `user` against the rate limit: `Err(wait)` when over it.
    pub fn check_rate(&self, user: u64) -> Result<(), Duration> {
        match self.limiter.lock() {
            Ok(mut limiter) => limiter.admit(user, Instant::now()),
            // A poisoned limiter limits nobody rather than everybody.
            Err(_) => Ok(()),
        }
    }

    /// Takes a slot now, or a place at the end of the queue.
    pub fn enter(&self) -> Admission {
        let mut state = lock(&self.slots);
        state.renumber();
        if state.running < state.capacity && state.waiters.is_empty() {
            state.running += 1;
            return Admission::Now(Slot { slots: Some(Arc::clone(&self.slots)) });
        }
        let (sender, receiver) = oneshot::channel();
        let (position_sender, position) = watch::channel(state.waiters.len() + 1);
        state.waiters.push_back((sender, position_sender));
        state.wanted.notify_waiters();
        Admission::Queued(Waiting { position, receiver, slots: Arc::clone(&self.slots) })
    }

    /// The turns background work (a watched vault's annotations) takes on the same model.
    pub fn background(&self) -> BackgroundTurns {
        BackgroundTurns { slots: Arc::clone(&self.slots) }
    }
}

/// A wake-up can slip between a look at the queue and the wait that follows it: background
/// work looks again at least this often.
const BACKGROUND_RECHECK: Duration = Duration::from_millis(250);

/// Slots for background work, at the lowest priority: one is taken only while no question
/// waits, and a question that starts waiting is told to whoever holds one.
#[derive(Debug, Clone)]
pub struct BackgroundTurns {
    slots: Arc<Mutex<Slots>>,
}

impl BackgroundTurns {
    /// Waits for a slot no question wants.
    pub async fn turn(&self) -> Slot {
        loop {
            let freed = {
                let mut state = lock(&self.slots);
                state.renumber();
                if state.running < state.capacity && state.waiters.is_empty() {
                    state.running += 1;
                    return Slot { slots: Some(Arc::clone(&self.slots)) };
                }
                Arc::clone(&state.freed)
            };
            let _ = tokio::time::timeout(BACKGROUND_RECHECK, freed.notified()).await;
        }
    }

    /// Resolves once a question waits for a slot.
    pub async fn question_waiting(&self) {
        loop {
            let wanted = {
                let mut state = lock(&self.slots);
                state.renumber();
                if !state.waiters.is_empty() {
                    return;
                }
                Arc::clone(&state.wanted)
            };
            let _ = tokio::time::timeout(BACKGROUND_RECHECK, wanted.notified()).await;
        }
    }
}

#[async_trait::async_trait]
impl crate::watch::ModelTurns for BackgroundTurns {
    async fn background_turn(&self) -> Box<dyn Send + Sync> {
        Box::new(self.turn().await)
    }
    async fn question_waiting(&self) {
        BackgroundTurns::question_waiting(self).await
    }
}

/// Questions per user within a sliding window.
#[derive(Debug)]
pub struct RateLimiter {
    per_window: u32,
    window: Duration,
    asked: HashMap<u64, VecDeque<Instant>>,
}

impl RateLimiter {
    pub fn new(per_window: u32, window: Duration) -> RateLimiter {
        RateLimiter { per_window, window, asked: HashMap::new() }
    }

    /// Admits a question by `user` at `now`, or says how long until one more is allowed.
    pub fn admit(&mut self, user: u64, now: Instant) -> Result<(), Duration> {
        if self.per_window == 0 {
            return Ok(());
        }
        let window = self.window;
        if self.asked.len() > RATE_USERS_KEPT {
            self.asked.retain(|_, times| times.back().is_some_and(|&last| now.duration_since(last) < window));
        }
        let times = self.asked.entry(user).or_default();
        while times.front().is_some_and(|&first| now.duration_since(first) >= window) {
            times.pop_front();
        }
        if times.len() >= self.per_window as usize {
            let oldest = times.front().copied().unwrap_or(now);
            return Err(window.saturating_sub(now.duration_since(oldest)));
        }
        times.push_back(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_limit_is_per_user_and_slides() {
        let start = Instant::now();
        let mut limiter = RateLimiter::new(2, Duration::from_secs(60));
        assert!(limiter.admit(1, start).is_ok());
        assert!(limiter.admit(1, start + Duration::from_secs(10)).is_ok());
        let wait = limiter.admit(1, start + Duration::from_secs(20)).unwrap_err();
        assert_eq!(wait, Duration::from_secs(40));
        assert!(limiter.admit(2, start + Duration::from_secs(20)).is_ok(), "another user is not limited");
        assert!(limiter.admit(1, start + Duration::from_secs(61)).is_ok(), "the first question left the window");
        let mut unlimited = RateLimiter::new(0, Duration::from_secs(60));
        assert!((0..100).all(|_| unlimited.admit(1, start).is_ok()));
    }

    #[test]
    fn sources_have_their_own_limit_apart_from_questions() {
        let queue = Queue::new(1, 2);
        assert!((0..6).all(|_| queue.check_source_rate(1).is_ok()), "three sources per question allowed");
        assert!(queue.check_source_rate(1).is_err(), "the seventh source in a minute waits");
        assert!(queue.check_rate(1).is_ok(), "reading sources does not use up questions");
        assert!(queue.check_source_rate(2).is_ok(), "another user is not limited");
        let unlimited = Queue::new(1, 0);
        assert!((0..100).all(|_| unlimited.check_source_rate(1).is_ok()));
    }

    #[tokio::test]
    async fn questions_queue_in_order_with_their_position() {
        let queue = Queue::new(1, 0);
        let Admission::Now(first) = queue.enter() else { panic!("a free slot runs at once") };
        let Admission::Queued(second) = queue.enter() else { panic!("the slot is busy") };
        let Admission::Queued(third) = queue.enter() else { panic!("the slot is busy") };
        assert_eq!((second.position(), third.position()), (1, 2));

        let third = tokio::spawn(third.start());
        let second = tokio::spawn(second.start());
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), second).await.unwrap().unwrap().unwrap();
        assert!(!third.is_finished(), "the third waits for the second");
        drop(second);
        let third = tokio::time::timeout(Duration::from_secs(5), third).await.unwrap().unwrap().unwrap();
        drop(third);
        // The queue is empty again: the next one runs at once.
        assert!(matches!(queue.enter(), Admission::Now(_)));
    }

    #[tokio::test]
    async fn the_worker_runs_futures_that_are_not_send_and_cancels_dropped_ones() {
        let worker = LocalWorker::start("test").unwrap();
        let value = worker
            .run("test", || async {
                let not_send = std::rc::Rc::new(41);
                tokio::task::yield_now().await;
                *not_send + 1
            })
            .await
            .unwrap();
        assert_eq!(value, 42);

        let (started, started_rx) = oneshot::channel::<()>();
        let (dropped, dropped_rx) = oneshot::channel::<()>();
        struct SignalOnDrop(Option<oneshot::Sender<()>>);
        impl Drop for SignalOnDrop {
            fn drop(&mut self) {
                if let Some(sender) = self.0.take() {
                    let _ = sender.send(());
                }
            }
        }
        let pending = tokio::spawn(async move {
            worker
                .run("test", move || async move {
                    let _guard = SignalOnDrop(Some(dropped));
                    let _ = started.send(());
                    std::future::pending::<()>().await;
                })
                .await
        });
        started_rx.await.unwrap();
        pending.abort();
        tokio::time::timeout(Duration::from_secs(5), dropped_rx).await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_waiting_question_hears_its_position_move() {
        let queue = Queue::new(1, 0);
        let Admission::Now(running) = queue.enter() else { panic!() };
        let Admission::Queued(first) = queue.enter() else { panic!() };
        let Admission::Queued(mut second) = queue.enter() else { panic!() };
        let Admission::Queued(mut third) = queue.enter() else { panic!() };
        assert_eq!((second.position(), third.position()), (2, 3));
        // The one ahead leaves (its asker deleted the question): everyone behind moves up.
        drop(first);
        let Admission::Queued(fourth) = queue.enter() else { panic!() };
        assert_eq!(fourth.position(), 3, "the departed place is not counted");
        let moved = tokio::time::timeout(Duration::from_secs(5), third.next()).await.unwrap().unwrap();
        assert!(matches!(moved, QueueEvent::Moved(2)));
        // The running one finishes: the first in line starts, the rest move up.
        drop(running);
        let started = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if let QueueEvent::Started(slot) = second.next().await.unwrap() {
                    return slot;
                }
            }
        })
        .await
        .unwrap();
        let moved = tokio::time::timeout(Duration::from_secs(5), third.next()).await.unwrap().unwrap();
        assert!(matches!(moved, QueueEvent::Moved(1)));
        assert_eq!(fourth.position(), 2);
        drop(started);
    }

    #[tokio::test]
    async fn background_work_waits_for_a_free_slot_and_hears_a_question_arrive() {
        let queue = Queue::new(1, 0);
        let background = queue.background();
        let Admission::Now(question) = queue.enter() else { panic!("a free slot runs at once") };
        let turn = tokio::spawn({
            let background = background.clone();
            async move { background.turn().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!turn.is_finished(), "background work waits while a question runs");
        drop(question);
        let turn = tokio::time::timeout(Duration::from_secs(5), turn).await.unwrap().unwrap();
        // A question arrives while the background holds the slot: it is told, and gets the
        // slot as soon as the background gives it back.
        let Admission::Queued(waiting) = queue.enter() else { panic!("the background holds the slot") };
        tokio::time::timeout(Duration::from_secs(5), background.question_waiting()).await.expect("told");
        drop(turn);
        let slot = tokio::time::timeout(Duration::from_secs(5), waiting.start()).await.unwrap().unwrap();
        // With a question running, background work does not start.
        assert!(tokio::time::timeout(Duration::from_millis(300), background.turn()).await.is_err());
        drop(slot);
    }

    #[tokio::test]
    async fn leaving_the_queue_frees_the_place() {
        let queue = Queue::new(1, 0);
        let Admission::Now(running) = queue.enter() else { panic!() };
        let Admission::Queued(gone) = queue.enter() else { panic!() };
        drop(gone);
        let Admission::Queued(next) = queue.enter() else { panic!() };
        assert_eq!(next.position(), 1);
        drop(running);
        let slot = tokio::time::timeout(Duration::from_secs(5), next.start()).await.unwrap().unwrap();
        drop(slot);
        assert!(matches!(queue.enter(), Admission::Now(_)), "every slot came back");
    }

    #[tokio::test]
    async fn a_deleted_question_is_withdrawn_once_and_only_while_watched() {
        let withdrawals = Withdrawals::default();
        let mut watched = withdrawals.watch(42);
        assert!(!withdrawals.withdraw(7), "no question was asked by message 7");
        assert!(withdrawals.withdraw(42));
        tokio::time::timeout(Duration::from_secs(1), watched.withdrawn()).await.expect("withdrawn");
        assert!(!withdrawals.withdraw(42), "once");
        // A question that started (its watch dropped) can no longer be withdrawn.
        let started = withdrawals.watch(43);
        drop(started);
        assert!(!withdrawals.withdraw(43));
        // Not withdrawn: never resolves.
        let mut waiting = withdrawals.watch(44);
        assert!(tokio::time::timeout(Duration::from_millis(50), waiting.withdrawn()).await.is_err());
    }
}
