//! The session's next command's helper, started ahead (issue 26 item 2): once a command has been
//! cleaned up, the reaper thread starts the helper the next one will use. It joins the session's
//! cgroups, enters its user, network, pid, IPC and UTS namespaces and forks its pid 1, which waits
//! on stdin for the command's spec ([`sandbox::spec::ExecSpec::ahead`]); the next `RunCommand`
//! sends it that spec instead of starting a helper, which took the helper's start-up and those
//! phases (≈2 ms) off the answer's path. Everything a command's spec decides — the mount
//! namespace (a copy of the mount table when the spec comes), the masks of the protected set as
//! it is then, the layer, Landlock, seccomp, argv and environment — is set up only from that
//! spec, exactly as for a helper started for it.
//!
//! Invariants: at most one prepared helper per session, in the session's [`Settling`] count
//! while it is being started (so the next command takes it rather than starting a second helper
//! into the same memory cgroup); started by the broker's long-lived reaper thread, whose death
//! signal it carries, so it never outlives its broker; discarded (stdin closed: it reports and
//! exits, and its cgroups are removed like a command's) when the session's executor goes or the
//! broker shuts down, after which none is started again.
//!
//! [`Settling`]: super::settling::Settling

use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{Child, ChildStdin};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sandbox::spec::{ExecSpec, Limits};

use super::spawn::Spawned;
use super::supervise::{release_cgroups, supervise};
use crate::lock;

/// How long a discarded helper may take to report and exit.
const DISCARD_WAIT: Duration = Duration::from_secs(5);

/// A session's prepared helper, if any (shared by the executor's clones).
#[derive(Debug, Default)]
pub struct Ahead {
    slot: Mutex<Slot>,
}

#[derive(Debug, Default)]
struct Slot {
    prepared: Option<Prepared>,
    /// Shut down: nothing is prepared any more.
    closed: bool,
    /// How many commands were handed to a prepared helper (tests and the bench read it).
    taken: u64,
}

/// A helper waiting for its command's spec.
#[derive(Debug)]
struct Prepared {
    child: Child,
    stdin: ChildStdin,
    status: Option<OwnedFd>,
    /// What it was prepared with: a command's spec must agree (the helper checks it too).
    limits: Limits,
    namespaces: bool,
    status_fd: Option<i32>,
    /// The masks its spec named: a command with the same ones sends none
    /// ([`ExecSpec::masked_as_prepared`]).
    masked: Vec<PathBuf>,
}

impl Ahead {
    /// Start a helper for the session's next command (on the reaper thread). A previous one
    /// still waiting is discarded first; nothing happens once the session shut down.
    /// `masked`: the previous command's masks, which the next one most likely repeats.
    #[cfg(target_os = "linux")]
    pub(super) fn prepare(
        &self,
        helper: &std::path::Path,
        limits: Limits,
        namespaces: bool,
        masked: Vec<PathBuf>,
    ) {
        use std::io::Write;
        let old = {
            let mut slot = lock(&self.slot);
            if slot.closed {
                return;
            }
            slot.prepared.take()
        };
        if let Some(old) = old {
            old.discard();
        }
        let mut spec = ExecSpec {
            program: "/".into(),
            argv: Vec::new(),
            cwd: "/".into(),
            env: Vec::new(),
            scratch: "/".into(),
            masked,
            visible: Vec::new(),
            writable: Vec::new(),
            limits,
            layer: None,
            namespaces,
            status_fd: None,
            ahead: true,
            masked_as_prepared: false,
            hung: Vec::new(),
        };
        let (mut child, status) = match super::spawn::start_helper(helper, &mut spec) {
            Ok(started) => started,
            Err(err) => {
                tracing::debug!("preparing the next command's helper: {err}");
                return;
            }
        };
        let Some(stdin) = child.stdin.take() else {
            // (Never: it is piped.) Nothing may be left running.
            let _ = child.kill();
            let _ = child.wait();
            return;
        };
        let mut prepared = Prepared {
            child,
            stdin,
            status,
            limits,
            namespaces,
            status_fd: spec.status_fd,
            masked: Vec::new(),
        };
        match serde_json::to_vec(&spec) {
            Ok(mut line) => {
                line.push(b'\n');
                if let Err(err) = prepared.stdin.write_all(&line) {
                    tracing::debug!("preparing the next command's helper: {err}");
                }
            }
            Err(_) => return prepared.discard(),
        }
        prepared.masked = spec.masked;
        let mut slot = lock(&self.slot);
        if slot.closed {
            drop(slot);
            prepared.discard();
            return;
        }
        slot.prepared = Some(prepared);
    }

    /// The prepared helper with `spec` sent to it, if one is waiting with the same limits and
    /// has not ended; `spec.status_fd` becomes its status pipe's number. `None`: start one.
    pub(super) fn take(&self, spec: &mut ExecSpec) -> Option<Spawned> {
        let mut prepared = {
            let mut slot = lock(&self.slot);
            let prepared = slot.prepared.take()?;
            if prepared.limits != spec.limits || prepared.namespaces != spec.namespaces {
                drop(slot);
                prepared.discard();
                return None;
            }
            prepared
        };
        if !matches!(prepared.child.try_wait(), Ok(None)) {
            // It ended while waiting (killed): reap it, and start one for this command.
            prepared.discard();
            return None;
        }
        lock(&self.slot).taken += 1;
        spec.status_fd = prepared.status_fd;
        // Compared as bytes, not as `Path`s (which parse their components: ~0.1 ms here).
        let same = prepared.masked.len() == spec.masked.len()
            && prepared
                .masked
                .iter()
                .zip(&spec.masked)
                .all(|(a, b)| a.as_os_str() == b.as_os_str());
        if same {
            let masked = std::mem::take(&mut spec.masked);
            spec.masked_as_prepared = true;
            super::spawn::write_spec(Some(prepared.stdin), spec);
            spec.masked = masked;
            spec.masked_as_prepared = false;
        } else {
            super::spawn::write_spec(Some(prepared.stdin), spec);
        }
        Some((prepared.child, prepared.status))
    }

    /// Discard the prepared helper and prepare none again (the broker is shutting down).
    pub fn close(&self) {
        let prepared = {
            let mut slot = lock(&self.slot);
            slot.closed = true;
            slot.prepared.take()
        };
        if let Some(prepared) = prepared {
            prepared.discard();
        }
    }

    /// How many commands a prepared helper ran.
    pub fn taken(&self) -> u64 {
        lock(&self.slot).taken
    }

    /// The waiting helper's process id, if one waits (tests look for it after a discard).
    pub fn waiting(&self) -> Option<u32> {
        lock(&self.slot).prepared.as_ref().map(|p| p.child.id())
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.close();
    }
}

impl Prepared {
    /// Close its stdin: it reports that no command came and exits; reap it and remove the
    /// cgroups it joined, as after a command.
    fn discard(self) {
        drop(self.stdin);
        let mut run = supervise(
            self.child,
            self.status,
            DISCARD_WAIT,
            Instant::now(),
            &mut || false,
        );
        match run.unreaped.take() {
            Some(unreaped) => unreaped.finish(run.report.as_ref()),
            None => {
                release_cgroups(run.report.as_ref());
            }
        }
    }
}
