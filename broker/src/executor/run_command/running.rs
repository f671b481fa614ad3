//! The commands running under this broker, so that none outlives it (issue 24): every shutdown
//! path SIGKILLs their process groups and waits until their supervisors have reaped them and
//! removed their cgroups ([`stop_all`]). (An abrupt death is covered by the helper's death signal.)

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Process groups (the helper's pid) not yet reaped: safe to signal.
static GROUPS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());
/// Commands whose supervisor has not finished (reaped, cgroups released).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// One supervised command, from its spawn until its result is dropped (after its cgroups are
/// released).
pub(super) struct Flight(i32);

impl Flight {
    pub(super) fn start(pgid: i32) -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut groups) = GROUPS.lock() {
            groups.insert(pgid);
        }
        Flight(pgid)
    }

    /// About to reap the helper: its group id may be reused afterwards, never signal it again.
    pub(super) fn reaping(&self) {
        if let Ok(mut groups) = GROUPS.lock() {
            groups.remove(&self.0);
        }
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        self.reaping();
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// SIGKILL every running command's process group, then wait (at most `wait`) for their
/// supervisors to finish. Returns how many were still running at the end.
pub fn stop_all(wait: Duration) -> usize {
    if let Ok(groups) = GROUPS.lock() {
        for pgid in groups.iter() {
            // A process group we created and have not reaped (the lock keeps the supervisor from
            // reaping it meanwhile).
            if let Some(pgid) = rustix::process::Pid::from_raw(*pgid) {
                let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
            }
        }
    }
    let until = Instant::now() + wait;
    while IN_FLIGHT.load(Ordering::SeqCst) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    IN_FLIGHT.load(Ordering::SeqCst)
}
