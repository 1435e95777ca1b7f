//! LLM work, one question at a time (or `concurrency` at a time), first come first served.
//!
//! A question either starts at once, waits with a known position (which the asker is shown),
//! or is told the bot is busy and how long the questions before it will take. The queue is
//! bounded twice: by count (`discord.queue_limit`: each waiting question holds its prepared
//! notes in memory) and by time (no question is let in to wait longer than
//! [`MAX_EXPECTED_WAIT`], measured from the answers just given). One rule keeps it fair between
//! places: no channel, thread or direct message holds more than [`PLACE_SHARE`] of the room,
//! so one busy channel leaves the rest open for the others. A per-user rate limit refuses a
//! question before it queues, saying how long to wait. Nothing is dropped: a question that
//! gets in is answered or told why not.
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
/// No question is let in to wait longer than this: an interaction's token lives 15 minutes,
/// and an answer due later would have to leave its interaction for a plain channel message.
pub const MAX_EXPECTED_WAIT: Duration = Duration::from_secs(10 * 60);
/// The share of the queue's room one place (a channel, a thread, a direct message) may hold:
/// one busy channel leaves the other half open for the rest of the server.
pub const PLACE_SHARE: f64 = 0.5;
/// How much the latest answer's time weighs in the running mean the expected wait is told
/// from: a few answers are enough to follow a model that got slower or faster.
const SERVICE_TIME_WEIGHT: f64 = 0.3;

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
    /// Questions that may wait at once.
    waiting_limit: usize,
    /// The running mean of a question's time holding its slot; `None` until one has been
    /// answered (then only the count bounds the queue).
    service: Option<Duration>,
    /// What a question is told to expect before any was answered (`chat.answer_seconds`).
    first_guess: Duration,
    /// First in, first served; a waiter that left has a closed channel and is skipped. Each
    /// is told its position whenever the queue moves.
    waiters: VecDeque<Waiter>,
    /// Woken when a slot is given back: background work may take it.
    freed: Arc<tokio::sync::Notify>,
    /// Woken when a question starts waiting: background work gives its slot back.
    wanted: Arc<tokio::sync::Notify>,
}

/// One waiting question: its slot's way in, its position, and the place it was asked in.
#[derive(Debug)]
struct Waiter {
    slot: oneshot::Sender<Slot>,
    position: watch::Sender<usize>,
    place: u64,
}

impl Slots {
    /// Drops the waiters that left and tells the others their (1-based) positions.
    fn renumber(&mut self) {
        self.waiters.retain(|waiter| !waiter.slot.is_closed());
        for (index, Waiter { position, .. }) in self.waiters.iter().enumerate() {
            position.send_if_modified(|current| {
                let moved = *current != index + 1;
                *current = index + 1;
                moved
            });
        }
    }

    /// How many questions may wait now: the count limit, and no more than fit in
    /// [`MAX_EXPECTED_WAIT`] at the measured pace.
    fn room(&self) -> usize {
        let by_time = match self.service {
            Some(service) if !service.is_zero() => {
                let answers = MAX_EXPECTED_WAIT.as_secs_f64() / service.as_secs_f64() * self.capacity as f64;
                answers.floor().min(usize::MAX as f64) as usize
            }
            _ => usize::MAX,
        };
        self.waiting_limit.min(by_time).max(1)
    }

    /// The room one place may hold: [`PLACE_SHARE`] of the queue's, at least one question.
    fn place_room(&self) -> usize {
        ((self.room() as f64 * PLACE_SHARE).ceil() as usize).max(1)
    }

    /// The time until the questions waiting now have had their turns.
    fn expected_wait(&self) -> Duration {
        let per_answer = self.service.unwrap_or(self.first_guess);
        let rounds = self.waiters.len().div_ceil(self.capacity).max(1);
        per_answer.saturating_mul(u32::try_from(rounds).unwrap_or(u32::MAX))
    }

    /// A question held its slot for `held`: the mean follows.
    fn served(&mut self, held: Duration) {
        self.service = Some(match self.service {
            None => held,
            Some(mean) => mean.mul_f64(1.0 - SERVICE_TIME_WEIGHT) + held.mul_f64(SERVICE_TIME_WEIGHT),
        });
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
    /// When a question took it (background work's slots are not timed).
    taken: Option<Instant>,
}

/// Where a question stands once admitted.
pub enum Admission {
    /// A slot was free: run now.
    Now(Slot),
    /// Every slot is busy: `position` questions (this one included) are waiting.
    Queued(Waiting),
    /// No room: the asker is told to come back.
    Busy(Busy),
}

/// Why a question was not let in, and when to come back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Busy {
    /// Questions waiting already (in the whole queue, or in this place).
    pub waiting: usize,
    /// The time the questions waiting now should take.
    pub wait: Duration,
    /// Whether the asker's own place holds its share (the rest of the server still has room).
    pub place_full: bool,
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
        if let Some(taken) = self.taken {
            state.served(taken.elapsed());
        }
        while let Some(Waiter { slot: waiter, .. }) = state.waiters.pop_front() {
            match waiter.send(Slot { slots: Some(Arc::clone(&slots)), taken: Some(Instant::now()) }) {
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
    /// `concurrency` questions at once; `per_minute` questions per user per minute (0: no limit);
    /// as many waiting as [`MAX_EXPECTED_WAIT`] allows (see [`Queue::with_room`]).
    pub fn new(concurrency: usize, per_minute: u32) -> Queue {
        Queue {
            slots: Arc::new(Mutex::new(Slots {
                capacity: concurrency.max(1),
                running: 0,
                waiting_limit: usize::MAX,
                service: None,
                first_guess: Duration::from_secs(60),
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

    /// At most `waiting_limit` questions waiting (`discord.queue_limit`); `first_guess` is an
    /// answer's time told before any was measured (`chat.answer_seconds`).
    pub fn with_room(self, waiting_limit: usize, first_guess: Duration) -> Queue {
        {
            let mut state = lock(&self.slots);
            state.waiting_limit = waiting_limit.max(1);
            state.first_guess = first_guess;
        }
        self
    }

    /// Whether a question asked in `place` now would be told the queue has no room: a look
    /// before the slash command is acknowledged, so the refusal can be the asker's alone.
    /// [`Queue::enter`] decides again (a question may take the last place between the two).
    pub fn busy_for(&self, place: u64) -> Option<Busy> {
        let mut state = lock(&self.slots);
        state.renumber();
        if state.running < state.capacity && state.waiters.is_empty() {
            return None;
        }
        let wait = state.expected_wait();
        if state.waiters.len() >= state.room() {
            return Some(Busy { waiting: state.waiters.len(), wait, place_full: false });
        }
        let in_place = state.waiters.iter().filter(|waiter| waiter.place == place).count();
        (in_place >= state.place_room()).then_some(Busy { waiting: in_place, wait, place_full: true })
    }

    /// Takes a slot now, a place at the end of the queue, or is told the queue is full (or
    /// that `place`, the channel, thread or direct message asked in, holds its share of it).
    pub fn enter(&self, place: u64) -> Admission {
        let mut state = lock(&self.slots);
        state.renumber();
        if state.running < state.capacity && state.waiters.is_empty() {
            state.running += 1;
            return Admission::Now(Slot { slots: Some(Arc::clone(&self.slots)), taken: Some(Instant::now()) });
        }
        drop(state);
        if let Some(busy) = self.busy_for(place) {
            return Admission::Busy(busy);
        }
        let mut state = lock(&self.slots);
        let (sender, receiver) = oneshot::channel();
        let (position_sender, position) = watch::channel(state.waiters.len() + 1);
        state.waiters.push_back(Waiter { slot: sender, position: position_sender, place });
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
                    return Slot { slots: Some(Arc::clone(&self.slots)), taken: None };
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

    const PLACE: u64 = 1;

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
        let Admission::Now(first) = queue.enter(PLACE) else { panic!("a free slot runs at once") };
        let Admission::Queued(second) = queue.enter(PLACE) else { panic!("the slot is busy") };
        let Admission::Queued(third) = queue.enter(PLACE) else { panic!("the slot is busy") };
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
        assert!(matches!(queue.enter(PLACE), Admission::Now(_)));
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
        let Admission::Now(running) = queue.enter(PLACE) else { panic!() };
        let Admission::Queued(first) = queue.enter(PLACE) else { panic!() };
        let Admission::Queued(mut second) = queue.enter(PLACE) else { panic!() };
        let Admission::Queued(mut third) = queue.enter(PLACE) else { panic!() };
        assert_eq!((second.position(), third.position()), (2, 3));
        // The one ahead leaves (its asker deleted the question): everyone behind moves up.
        drop(first);
        let Admission::Queued(fourth) = queue.enter(PLACE) else { panic!() };
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
        let Admission::Now(question) = queue.enter(PLACE) else { panic!("a free slot runs at once") };
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
        let Admission::Queued(waiting) = queue.enter(PLACE) else { panic!("the background holds the slot") };
        tokio::time::timeout(Duration::from_secs(5), background.question_waiting()).await.expect("told");
        drop(turn);
        let slot = tokio::time::timeout(Duration::from_secs(5), waiting.start()).await.unwrap().unwrap();
        // With a question running, background work does not start.
        assert!(tokio::time::timeout(Duration::from_millis(300), background.turn()).await.is_err());
        drop(slot);
    }

    #[tokio::test]
    async fn a_full_queue_says_so_and_no_place_holds_more_than_its_share() {
        let queue = Queue::new(1, 0).with_room(4, Duration::from_secs(30));
        let (channel, thread, other) = (10, 11, 12);
        let Admission::Now(_running) = queue.enter(channel) else { panic!("a free slot runs at once") };
        let Admission::Queued(_a) = queue.enter(channel) else { panic!("room for two of this channel") };
        let Admission::Queued(_b) = queue.enter(channel) else { panic!("room for two of this channel") };
        // This channel holds half the room: its third question is told to come back…
        assert_eq!(queue.busy_for(thread), None, "a look: another place has room");
        let looked = queue.busy_for(channel).expect("a look: this channel's share is full");
        let Admission::Busy(busy) = queue.enter(channel) else { panic!("the channel's share is full") };
        assert_eq!(looked, busy, "the look and the entry agree");
        assert!(busy.place_full);
        assert_eq!(busy.waiting, 2);
        assert_eq!(busy.wait, Duration::from_secs(60), "two answers ahead at the first guess of 30 s each");
        // …while another place still gets in, until the whole queue is full.
        let Admission::Queued(_c) = queue.enter(thread) else { panic!("another place has room") };
        let Admission::Queued(_d) = queue.enter(other) else { panic!("another place has room") };
        let Admission::Busy(full) = queue.enter(13) else { panic!("four wait: the queue is full") };
        assert!(!full.place_full);
        assert_eq!(full.waiting, 4);
        // A place that leaves frees its room at once.
        drop(_a);
        assert!(matches!(queue.enter(channel), Admission::Queued(_)));
    }

    #[tokio::test]
    async fn the_queue_lets_in_no_more_than_ten_minutes_of_answers_at_the_measured_pace() {
        let queue = Queue::new(2, 0).with_room(50, Duration::from_secs(30));
        // Before any answer is measured, only the count bounds it.
        assert_eq!(lock(&queue.slots).room(), 50);
        // Answers measured at 200 s each, two at a time: six fit in ten minutes.
        lock(&queue.slots).served(Duration::from_secs(200));
        assert_eq!(lock(&queue.slots).room(), 6);
        assert_eq!(lock(&queue.slots).place_room(), 3);
        // The mean follows the model: faster answers let more wait.
        for _ in 0..20 {
            lock(&queue.slots).served(Duration::from_secs(20));
        }
        assert!(lock(&queue.slots).room() >= 50, "bounded by the count again");
        let slow = Queue::new(1, 0).with_room(50, Duration::from_secs(30));
        lock(&slow.slots).served(Duration::from_secs(1200));
        assert_eq!(lock(&slow.slots).room(), 1, "always room for one: its wait is told as it moves");
        // A slot held and given back is measured.
        let timed = Queue::new(1, 0);
        let Admission::Now(slot) = timed.enter(PLACE) else { panic!() };
        drop(slot);
        assert!(lock(&timed.slots).service.is_some_and(|mean| mean < Duration::from_secs(5)));
        // Background work's turns are not answers: they are not measured.
        let background = Queue::new(1, 0);
        drop(background.background().turn().await);
        assert_eq!(lock(&background.slots).service, None);
    }

    #[tokio::test]
    async fn leaving_the_queue_frees_the_place() {
        let queue = Queue::new(1, 0);
        let Admission::Now(running) = queue.enter(PLACE) else { panic!() };
        let Admission::Queued(gone) = queue.enter(PLACE) else { panic!() };
        drop(gone);
        let Admission::Queued(next) = queue.enter(PLACE) else { panic!() };
        assert_eq!(next.position(), 1);
        drop(running);
        let slot = tokio::time::timeout(Duration::from_secs(5), next.start()).await.unwrap().unwrap();
        drop(slot);
        assert!(matches!(queue.enter(PLACE), Admission::Now(_)), "every slot came back");
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
