//! A thread that runs the oracle's futures, which are not `Send` (they hold the index's SQLite
//! connection across awaits): the bot's answers and ingests, and the MCP server's tools.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::{mpsc, oneshot};

/// A job for the worker: builds its (not `Send`) future on the worker's thread.
type LocalJob = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// A thread with a single-threaded runtime that runs futures which are not `Send`, several
/// at a time (interleaved at their awaits). Cloning shares the thread; it ends when the last
/// clone is dropped.
#[derive(Clone)]
pub struct LocalWorker {
    jobs: mpsc::UnboundedSender<LocalJob>,
}

/// The worker thread is gone (it could not start, or a job panicked it away).
#[derive(Debug, thiserror::Error)]
#[error("the {0} worker thread is not running")]
pub struct WorkerGone(pub &'static str);

impl std::fmt::Debug for LocalWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalWorker").finish_non_exhaustive()
    }
}

impl LocalWorker {
    /// Starts the thread, named `oraculo-{name}`.
    pub fn start(name: &'static str) -> std::io::Result<LocalWorker> {
        let (jobs, mut receiver) = mpsc::unbounded_channel::<LocalJob>();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        std::thread::Builder::new().name(format!("oraculo-{name}")).spawn(move || {
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, async move {
                while let Some(job) = receiver.recv().await {
                    tokio::task::spawn_local(job());
                }
            });
        })?;
        Ok(LocalWorker { jobs })
    }

    /// Runs the future `make` builds on the worker and returns its output. Dropping the
    /// returned future cancels the work at its next await.
    pub async fn run<T, F, Fut>(&self, name: &'static str, make: F) -> Result<T, WorkerGone>
    where
        T: Send + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = T> + 'static,
    {
        let (sender, receiver) = oneshot::channel();
        let job: LocalJob = Box::new(move || {
            Box::pin(async move {
                let mut sender = sender;
                tokio::select! {
                    output = make() => { let _ = sender.send(output); }
                    () = sender.closed() => {}
                }
            })
        });
        self.jobs.send(job).map_err(|_| WorkerGone(name))?;
        receiver.await.map_err(|_| WorkerGone(name))
    }
}
