//! The crate's own thread pool, used when the `rayon` feature is off: one worker per core but
//! one (the calling thread is the other), started by the first operation large enough to
//! split.
//!
//! A worker that runs out of tasks keeps looking for [`POLL`], yielding its core between looks,
//! then sleeps on a condition variable until a task comes; asleep it costs nothing. The look
//! is Rayon's too: operations in a loop come microseconds apart, and a helper woken from sleep
//! (tens of microseconds on a VM) would arrive after a mid-size operation is over.
//!
//! It runs the engine's helper tasks and nothing else. Those never block on one another (a
//! helper that starts late finds its loop closed and returns), so a queue that only one free
//! worker drains is never a deadlock, only a loop the caller finishes alone.
// With the `rayon` feature only the engine's tests start one of these.
#![cfg_attr(feature = "rayon", allow(dead_code))]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// A task for a worker; it must not panic (the engine's helpers catch their panics).
pub(crate) type Task = Box<dyn FnOnce() + Send>;

/// How long a worker that ran out of tasks looks for another before it sleeps.
const POLL: Duration = Duration::from_micros(100);

/// The most tasks the queue holds. Helpers are optional: a queue this long means the workers
/// are busy (or gone, in a forked child), and a helper that started that late would find its
/// loop closed; past it, a task is dropped unrun, so the queue never grows without bound.
const QUEUE_MAX: usize = 64;

/// Workers, and the queue they take tasks from.
pub(crate) struct Pool {
    queue: Arc<Queue>,
    workers: usize,
}

/// Tasks waiting for a worker.
struct Queue {
    state: Mutex<State>,
    /// Tasks queued, read without the lock by workers that look before they sleep.
    queued: AtomicUsize,
    ready: Condvar,
}

struct State {
    tasks: VecDeque<Task>,
    /// Workers waiting on `ready`: a spawn wakes one only when there is one.
    asleep: usize,
}

impl Pool {
    /// A pool with up to `workers` threads; fewer if the system refuses to start them (none
    /// at all leaves every operation serial, which is slower, not wrong).
    pub(crate) fn start(workers: usize) -> Pool {
        let queue = Arc::new(Queue {
            state: Mutex::new(State {
                tasks: VecDeque::new(),
                asleep: 0,
            }),
            queued: AtomicUsize::new(0),
            ready: Condvar::new(),
        });
        let workers = (0..workers)
            .take_while(|i| {
                let queue = Arc::clone(&queue);
                std::thread::Builder::new()
                    .name(format!("xla-bcast-{i}"))
                    .spawn(move || queue.work())
                    .is_ok()
            })
            .count();
        Pool { queue, workers }
    }

    /// Queues `task` for the next free worker, or drops it unrun when [`QUEUE_MAX`] are waiting.
    pub(crate) fn spawn(&self, task: Task) {
        let mut state = self.queue.lock();
        if state.tasks.len() >= QUEUE_MAX {
            return;
        }
        state.tasks.push_back(task);
        self.queue.queued.fetch_add(1, Ordering::Release);
        if state.asleep > 0 {
            self.queue.ready.notify_one();
        }
    }

    /// How many threads an operation may use: the workers and the caller.
    pub(crate) fn threads(&self) -> usize {
        self.workers + 1
    }
}

impl Queue {
    /// The queue's lock; no task runs under it, so a poisoned one still holds a whole queue.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A worker's life: run the next task; with none, look for [`POLL`], then sleep.
    fn work(&self) {
        let mut idle_since = Instant::now();
        loop {
            let mut state = self.lock();
            if let Some(task) = state.tasks.pop_front() {
                self.queued.fetch_sub(1, Ordering::Relaxed);
                drop(state);
                task();
                idle_since = Instant::now();
                continue;
            }
            if idle_since.elapsed() < POLL {
                drop(state);
                while self.queued.load(Ordering::Acquire) == 0 && idle_since.elapsed() < POLL {
                    std::thread::yield_now();
                }
                continue;
            }
            state.asleep += 1;
            while state.tasks.is_empty() {
                state = self.ready.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            state.asleep -= 1;
            idle_since = Instant::now();
        }
    }
}

/// The process's pool, started on first use.
pub(crate) fn global() -> &'static Pool {
    static GLOBAL: OnceLock<Pool> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Pool::start(cores - 1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A task runs whether its worker is looking for work or asleep, and tasks queued together
    /// all run.
    #[test]
    fn tasks_run_on_a_looking_or_sleeping_worker() {
        let pool = Pool::start(1);
        assert_eq!(pool.threads(), 2);
        let (done, ran) = mpsc::channel();
        let wait = Duration::from_secs(30);
        for pause in [Duration::ZERO, POLL * 20, Duration::ZERO, POLL * 20] {
            std::thread::sleep(pause);
            for i in 0..3 {
                let done = done.clone();
                pool.spawn(Box::new(move || done.send(i).unwrap()));
            }
            let got: Vec<i32> = (0..3).map(|_| ran.recv_timeout(wait).unwrap()).collect();
            assert_eq!(got, [0, 1, 2], "one worker runs its queue in order");
        }
        // An idle worker goes to sleep once it has looked for `POLL`.
        let start = Instant::now();
        while pool.queue.lock().asleep == 0 {
            assert!(
                start.elapsed() < wait,
                "the idle worker did not go to sleep"
            );
            std::thread::sleep(POLL);
        }
    }

    /// With no worker to drain it (none started, or a forked child's), the queue stops at
    /// [`QUEUE_MAX`], and a loop offered to it runs whole on the caller.
    #[test]
    fn a_queue_nobody_drains_stays_bounded() {
        let pool = Pool::start(0);
        assert_eq!(pool.threads(), 1);
        for _ in 0..3 * QUEUE_MAX {
            pool.spawn(Box::new(|| unreachable!("no worker runs it")));
        }
        assert_eq!(pool.queue.lock().tasks.len(), QUEUE_MAX);
        let ran = std::sync::atomic::AtomicUsize::new(0);
        crate::engine::parallel::for_each_index_on(&|t| pool.spawn(t), 100, 2, &|_| {
            ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        });
        assert_eq!(ran.into_inner(), 100);
    }
}
