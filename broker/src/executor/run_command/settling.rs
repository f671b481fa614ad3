//! The session's commands still being cleaned up after their answers: a helper that told its
//! command's end is reaped (its exit tears the command's namespaces down) and the command's
//! cgroups are removed off the caller's path, by one reaper thread. The session's next command
//! waits for that first ([`Settling::wait`]), so it never shares the session's memory cgroup or
//! copy-on-write layer with the previous command's helper.

use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sandbox::spec::Report;

use super::supervise::Unreaped;

/// How long a command waits for its session's previous ones to be cleaned up (the helper has
/// been SIGKILLed already; only the kernel's teardown of its namespaces is left).
pub const SETTLE_WAIT: Duration = Duration::from_secs(10);

/// One session's cleanups not finished yet (shared by the executor's clones).
#[derive(Debug, Default)]
pub struct Settling {
    pending: Mutex<usize>,
    settled: Condvar,
}

/// Work for the reaper thread: a cleanup, or starting the session's next helper (`ahead`).
struct Job {
    work: Box<dyn FnOnce() + Send>,
    settling: Arc<Settling>,
}

impl Job {
    fn run(self) {
        // Counted done however the work ends: a panic on the reaper thread must not leave the
        // session's later commands waiting for a cleanup that will never report (review).
        struct Done(Arc<Settling>);
        impl Drop for Done {
            fn drop(&mut self) {
                self.0.done();
            }
        }
        let _done = Done(self.settling);
        (self.work)();
    }
}

/// The broker's reaper thread, started at its first use; `None` if it could not be.
fn reaper() -> Option<&'static Sender<Job>> {
    static REAPER: OnceLock<Option<Sender<Job>>> = OnceLock::new();
    REAPER
        .get_or_init(|| {
            let (send, receive) = channel::<Job>();
            std::thread::Builder::new()
                .name("command-reaper".into())
                .spawn(move || {
                    for job in receive {
                        job.run();
                    }
                })
                .ok()
                .map(|_| send)
        })
        .as_ref()
}

impl Settling {
    /// One cleanup finished: wake the waiters once none is left.
    fn done(&self) {
        let mut pending = crate::lock(&self.pending);
        *pending = pending.saturating_sub(1);
        self.settled.notify_all();
    }

    /// Whether no cleanup is pending now.
    pub fn settled(&self) -> bool {
        *crate::lock(&self.pending) == 0
    }

    /// Wait (at most [`SETTLE_WAIT`]) off the async threads until no cleanup is pending;
    /// whether none is (a helper still unreaped may hold overlays on the session's layer).
    pub async fn settle(self: Arc<Self>) -> bool {
        if self.settled() {
            return true;
        }
        tokio::task::spawn_blocking(move || self.wait(SETTLE_WAIT))
            .await
            .unwrap_or(false)
    }

    /// Reap `unreaped` and remove its cgroups after the answer (on the caller's thread when no
    /// reaper thread can take it).
    pub(super) fn later(self: &Arc<Self>, unreaped: Unreaped, report: Option<Report>) {
        *crate::lock(&self.pending) += 1;
        let job = Job {
            work: Box::new(move || unreaped.finish(report.as_ref())),
            settling: Arc::clone(self),
        };
        let job = match reaper() {
            Some(reaper) => match reaper.send(job) {
                Ok(()) => return,
                Err(unsent) => unsent.0,
            },
            None => job,
        };
        job.run();
    }

    /// Run `work` on the reaper thread after the cleanups handed over before it, counted like
    /// them (the next command waits for it); nothing when there is no reaper thread — a helper
    /// started ahead must be started by a thread that lives as long as the broker. Whether it
    /// was handed over.
    #[cfg(target_os = "linux")]
    pub(super) fn then_on_reaper(self: &Arc<Self>, work: impl FnOnce() + Send + 'static) -> bool {
        let Some(reaper) = reaper() else {
            return false;
        };
        *crate::lock(&self.pending) += 1;
        let job = Job {
            work: Box::new(work),
            settling: Arc::clone(self),
        };
        match reaper.send(job) {
            Ok(()) => true,
            Err(_) => {
                // Never run: not pending either.
                self.done();
                false
            }
        }
    }

    /// Wait (at most `bound`) until every cleanup handed to [`Settling::later`] has finished;
    /// whether they all have.
    pub fn wait(&self, bound: Duration) -> bool {
        let until = Instant::now() + bound;
        let mut pending = crate::lock(&self.pending);
        while *pending > 0 {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            pending = match self.settled.wait_timeout(pending, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_ends_with_the_last_cleanup_or_at_its_bound() {
        let settling = Arc::new(Settling::default());
        assert!(settling.settled() && settling.wait(Duration::ZERO));
        *crate::lock(&settling.pending) = 2;
        assert!(!settling.wait(Duration::from_millis(20)));
        let finishing = Arc::clone(&settling);
        let finisher = std::thread::spawn(move || {
            for _ in 0..2 {
                std::thread::sleep(Duration::from_millis(30));
                finishing.done();
            }
        });
        let started = Instant::now();
        assert!(settling.wait(Duration::from_secs(10)));
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(settling.settled());
        finisher.join().unwrap();
    }
}
