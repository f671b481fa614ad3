//! Failpoints of the durable write protocol, for crash and error tests. Compiled in only for
//! tests and with the `failpoints` cargo feature; otherwise [`hit`] is an empty inline function.
//!
//! A point is armed by the environment, `NATIVE_GATEWAY_FAILPOINT=<name>:<abort|error|stop>` (read
//! at every hit, so a child process started with it crashes where asked), or, in unit tests, for
//! the current thread only with [`arm_thread`] (the environment is process-wide and tests run in
//! parallel). `abort` calls `std::process::abort()` — no destructor runs, no temp file is
//! removed, exactly like a crash; `error` makes the step fail with an I/O error; `stop` sends the
//! process SIGSTOP — a hung process, alive and holding its sockets, until someone kills it.

use std::io;

/// Environment variable arming a failpoint: `<name>:<abort|error|stop>`.
pub const FAILPOINT_ENV: &str = "NATIVE_GATEWAY_FAILPOINT";

/// The steps of [`super::write::durable_write`] a failure can be injected after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failpoint {
    /// The current bytes were read and the new bytes computed; nothing is prepared.
    AfterRead,
    /// The journal accepted `prepared`; no temp file exists.
    AfterPrepared,
    /// The temp file was written but not synced.
    AfterTempWritten,
    /// The temp file was synced.
    AfterTempFsync,
    /// The target was checked against the expected hash and identity.
    AfterCas,
    /// The temp file was renamed over the target; the directory is not synced.
    AfterRename,
    /// The directory was synced; only the receipt is left.
    AfterDirFsync,
    /// Gateway: a write's `prepared` record is committed to the database, not yet acknowledged.
    GatewayAfterPreparedPersisted,
    /// Gateway: a write's `committed` (or `not_applied`) record is committed, not yet
    /// acknowledged.
    GatewayAfterFinishedPersisted,
    /// Gateway: a DeepSeek delegation (the start action and the sub-session's record) is
    /// committed; its sub-session is not launched yet.
    GatewayAfterDelegationPersisted,
    /// Gateway: a transaction that appended ledger events is committed; the signed ledger head
    /// naming its rows is not written yet.
    GatewayBeforeLedgerHead,
}

impl Failpoint {
    /// The gateway's points, after it persisted a write's records.
    pub const GATEWAY: [Failpoint; 4] = [
        Self::GatewayAfterPreparedPersisted,
        Self::GatewayAfterFinishedPersisted,
        Self::GatewayAfterDelegationPersisted,
        Self::GatewayBeforeLedgerHead,
    ];

    /// The broker's points, in the order of the write protocol.
    pub const ALL: [Failpoint; 7] = [
        Self::AfterRead,
        Self::AfterPrepared,
        Self::AfterTempWritten,
        Self::AfterTempFsync,
        Self::AfterCas,
        Self::AfterRename,
        Self::AfterDirFsync,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::AfterRead => "after_read",
            Self::AfterPrepared => "after_prepared",
            Self::AfterTempWritten => "after_temp_written",
            Self::AfterTempFsync => "after_temp_fsync",
            Self::AfterCas => "after_cas",
            Self::AfterRename => "after_rename",
            Self::AfterDirFsync => "after_dir_fsync",
            Self::GatewayAfterPreparedPersisted => "gateway_after_prepared_persisted",
            Self::GatewayAfterFinishedPersisted => "gateway_after_finished_persisted",
            Self::GatewayAfterDelegationPersisted => "gateway_after_delegation_persisted",
            Self::GatewayBeforeLedgerHead => "gateway_before_ledger_head",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .chain(Self::GATEWAY)
            .find(|p| p.name() == name)
    }
}

/// What an armed failpoint does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailAction {
    Abort,
    Error,
    Stop,
}

/// Parse `<name>:<abort|error|stop>`.
pub fn parse(spec: &str) -> Option<(Failpoint, FailAction)> {
    let (name, action) = spec.trim().split_once(':')?;
    let action = match action {
        "abort" => FailAction::Abort,
        "error" => FailAction::Error,
        "stop" => FailAction::Stop,
        _ => return None,
    };
    Some((Failpoint::from_name(name)?, action))
}

#[cfg(any(test, feature = "failpoints"))]
mod armed {
    use super::{FAILPOINT_ENV, FailAction, Failpoint, parse};
    use std::cell::Cell;
    use std::io;

    thread_local! {
        static THREAD: Cell<Option<(Failpoint, FailAction)>> = const { Cell::new(None) };
    }

    /// Arm (or with `None` disarm) a failpoint for the current thread only.
    pub fn arm_thread(point: Option<(Failpoint, FailAction)>) {
        THREAD.with(|t| t.set(point));
    }

    pub fn hit(point: Failpoint) -> io::Result<()> {
        let armed = THREAD.with(Cell::get).or_else(|| {
            std::env::var(FAILPOINT_ENV)
                .ok()
                .and_then(|spec| parse(&spec))
        });
        match armed {
            Some((p, FailAction::Abort)) if p == point => std::process::abort(),
            Some((p, FailAction::Stop)) if p == point => {
                // Execution resumes here only if someone sends SIGCONT.
                use rustix::process::{Signal, getpid, kill_process};
                kill_process(getpid(), Signal::STOP).map_err(io::Error::from)
            }
            Some((p, FailAction::Error)) if p == point => Err(io::Error::other(format!(
                "injected failure at failpoint {}",
                point.name()
            ))),
            _ => Ok(()),
        }
    }
}

#[cfg(any(test, feature = "failpoints"))]
pub use armed::arm_thread;

/// Fail here if this point is armed; a no-op in normal builds.
#[cfg(any(test, feature = "failpoints"))]
pub fn hit(point: Failpoint) -> io::Result<()> {
    armed::hit(point)
}

/// Fail here if this point is armed; a no-op in normal builds.
#[cfg(not(any(test, feature = "failpoints")))]
#[inline(always)]
pub fn hit(_point: Failpoint) -> io::Result<()> {
    Ok(())
}
