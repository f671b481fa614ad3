//! The state dir's disk budget, `CLAUDE_TOOLS_STATE_MAX_MB` (issue 24): past it, new starts,
//! continues and large replies are refused (`storage_full`) while status, stop and recover of
//! existing sessions keep working. Measured cheaply: the tree is walked once at start and then at
//! most every [`REFRESH`], on a background thread, never on a call's path; a call reads the last
//! measurement. The walk never follows a symlink and counts allocated blocks. Between two walks,
//! what the gateway stores for a tool's outcome is charged to an estimate at once (red team 25
//! B7: small replies of many commands with large outputs doubled a 64 MiB budget in 51 s while
//! the last walk said there was room), and a walk starts early once the estimate grew by a
//! thirty-second of the budget. So are prompts and replies, every recorded idempotent answer
//! (red team 29 B2) and OAuth refreshes (B5); what status, stop and recover may store past the
//! budget is bounded per session instead (`session::ANSWERS_KEPT`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crate::error::{ErrorCode, ToolError};

/// How stale a measurement may be before a call starts a new one in the background.
pub const REFRESH: Duration = Duration::from_secs(30);
/// What storing a tool's output of N bytes costs the state dir, as a multiple of N: the action
/// row, the runner's transcript (the result JSON-escaped, once as the tool result and again in
/// the conversation it resends), its WAL copy. Measured about 4 (red team 25 B7: 16 outputs of
/// 64 KiB grew the dir by about 4 MiB).
pub const OUTPUT_COST_FACTOR: u64 = 4;
/// What storing a prompt's or a reply's text of N bytes costs, as a multiple of N: its row and
/// the runner's transcript (red team 26 B4: eight sessions of 700 KiB prompts and answers took a
/// 64 MiB budget to 263 MiB before the first walk).
pub const TEXT_COST_FACTOR: u64 = 3;
/// What recording an idempotent answer of N bytes (a SessionView as JSON) costs, as a multiple
/// of N: its row (the WAL is reused after each checkpoint). Red team 29 measured 703 KiB of
/// growth per recover of a 701 KiB view; and replies that each recorded one were charged ~100
/// bytes, so eight sessions took a 64 MiB budget to 222 MiB (B2).
pub const ANSWER_COST_FACTOR: u64 = 1;
/// Recovers (and stops) a live session may make at once, and ended sessions together, whatever
/// the budget; then one per [`PACED_EVERY`] (`busy` over it). A live session's recover stores a
/// lease row and its events, ~5–8 KiB (red team 29: 727 recovers in 20 s past the budget); an
/// ended session's store nothing per call, but were a write rate before (red team 31/32 N1: 100
/// ended sessions filled a 64 MiB budget in 75–150 s). A client's retry loop makes a few a
/// minute: 8 at once and then 6 a minute never meet it.
pub const PACED_BURST: u32 = 8;
pub const PACED_EVERY: Duration = Duration::from_secs(10);

/// `busy` for a recover or stop over its pace: what, and when to come back.
pub fn paced(what: &str, wait_s: u64) -> ToolError {
    ToolError::new(
        ErrorCode::Busy,
        format!(
            "too many {what} calls lately: each {what} is paced (per live session; ended \
             sessions together), {PACED_BURST} at once then one per {} s, and this one came \
             after them; nothing was done. Send it again in {wait_s} s; status works now",
            PACED_EVERY.as_secs()
        ),
    )
}
/// What one recover stores (lease row, events), charged to the estimate.
pub const RECOVER_COST_BYTES: u64 = 8 * 1024;
/// Replies larger than this are refused past the budget; smaller ones (a verdict, a short answer)
/// still let a waiting session finish its turn.
pub const LARGE_REPLY_BYTES: usize = 64 * 1024;

const MIB: u64 = 1024 * 1024;

/// Default budget: a tenth of the file system holding the state dir, within 1 – 20 GiB.
pub fn default_max_mb(fs_total_mb: u64) -> u64 {
    (fs_total_mb / 10).clamp(1024, 20 * 1024)
}

/// Size of the file system holding `path`, MiB (0 when unknown).
pub fn fs_total_mb(path: &Path) -> u64 {
    let Ok(st) = rustix::fs::statvfs(path) else {
        return 0;
    };
    st.f_blocks.saturating_mul(st.f_frsize) / MIB
}

/// `CLAUDE_TOOLS_STATE_MAX_MB`, or the default sized from the state dir's file system.
pub fn max_mb_from_env(state_dir: &Path) -> anyhow::Result<u64> {
    Ok(
        match crate::limits::positive_env("CLAUDE_TOOLS_STATE_MAX_MB", 64, 1 << 30)? {
            Some(mb) => mb,
            None => default_max_mb(fs_total_mb(state_dir)),
        },
    )
}

struct Inner {
    dir: PathBuf,
    max_bytes: AtomicU64,
    used_bytes: AtomicU64,
    /// Charged since the last walk ([`StateBudget::charge`]).
    charged_bytes: AtomicU64,
    measured_at_ms: AtomicI64,
    refreshing: AtomicBool,
}

/// The budget and the last measurement.
#[derive(Clone)]
pub struct StateBudget {
    inner: Arc<Inner>,
}

impl StateBudget {
    /// A budget of `max_mb` MiB over `dir`, measured now.
    pub fn new(dir: &Path, max_mb: u64) -> StateBudget {
        let budget = StateBudget {
            inner: Arc::new(Inner {
                dir: dir.to_path_buf(),
                max_bytes: AtomicU64::new(max_mb.saturating_mul(MIB)),
                used_bytes: AtomicU64::new(0),
                charged_bytes: AtomicU64::new(0),
                measured_at_ms: AtomicI64::new(i64::MIN),
                refreshing: AtomicBool::new(false),
            }),
        };
        budget.refresh_now();
        budget
    }

    /// Measure now, on this thread.
    pub fn refresh_now(&self) {
        // Taken before the walk: what is charged during it may or may not be in it, so it stays
        // charged (counted twice at worst, until the next walk).
        let charged = self.inner.charged_bytes.load(Ordering::SeqCst);
        let used = sandbox::allocated_bytes(&self.inner.dir);
        self.inner.used_bytes.store(used, Ordering::SeqCst);
        // Saturating: two walks at once (prune's and a background one) each take theirs off.
        let _ = self
            .inner
            .charged_bytes
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_sub(charged))
            });
        self.inner
            .measured_at_ms
            .store(common::time::now_unix_ms(), Ordering::SeqCst);
    }

    /// The budget in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.inner.max_bytes.load(Ordering::SeqCst)
    }

    #[cfg(test)]
    pub fn set_max_bytes(&self, bytes: u64) {
        self.inner.max_bytes.store(bytes, Ordering::SeqCst);
    }

    /// Charge `bytes` the gateway is about to store (a tool's output, times
    /// [`OUTPUT_COST_FACTOR`]) to the estimate until the next walk.
    pub fn charge(&self, bytes: u64) {
        self.inner.charged_bytes.fetch_add(bytes, Ordering::SeqCst);
    }

    /// Charge a prompt's or a reply's text ([`TEXT_COST_FACTOR`]).
    pub fn charge_text(&self, text: &str) {
        self.charge((text.len() as u64).saturating_mul(TEXT_COST_FACTOR));
    }

    /// Walk again at the next look: something of unknown size was just written (a managed
    /// worktree's checkout).
    pub fn measure_soon(&self) {
        self.inner.measured_at_ms.store(i64::MIN, Ordering::SeqCst);
    }

    /// The last measurement plus what was charged since, starting a new walk in the background
    /// when it is stale or the charges grew past a thirty-second of the budget.
    pub fn used_bytes(&self) -> u64 {
        let age = common::time::now_unix_ms()
            .saturating_sub(self.inner.measured_at_ms.load(Ordering::SeqCst));
        let charged = self.inner.charged_bytes.load(Ordering::SeqCst);
        let stale = u128::try_from(age).unwrap_or(u128::MAX) > REFRESH.as_millis()
            || charged > self.max_bytes() / 32;
        if stale && !self.inner.refreshing.swap(true, Ordering::SeqCst) {
            let budget = self.clone();
            let spawned = std::thread::Builder::new()
                .name("state-budget".into())
                .spawn(move || {
                    budget.refresh_now();
                    budget.inner.refreshing.store(false, Ordering::SeqCst);
                });
            if spawned.is_err() {
                self.inner.refreshing.store(false, Ordering::SeqCst);
            }
        }
        self.inner
            .used_bytes
            .load(Ordering::SeqCst)
            .saturating_add(charged)
    }

    /// Whether the state dir is at or past its budget (nothing logged).
    pub fn is_full(&self) -> bool {
        self.used_bytes() >= self.max_bytes()
    }

    /// `storage_full` when the state dir is at or past its budget; `what` is what was refused
    /// ("nothing was started").
    pub fn check(&self, what: &str) -> Result<(), ToolError> {
        let used = self.used_bytes();
        let max = self.max_bytes();
        if used < max {
            return Ok(());
        }
        tracing::warn!(
            used_mb = used / MIB,
            max_mb = max / MIB,
            "state dir over its budget: refusing new work"
        );
        Err(ToolError::new(
            ErrorCode::StorageFull,
            format!(
                "the gateway's state dir holds {} MiB, at or past its budget of {} MiB \
                 (CLAUDE_TOOLS_STATE_MAX_MB); {what}. Status, stop and recover of existing \
                 sessions still work. The owner can free space with `gatewayctl prune --older-than \
                 0s` (every ended session's runner home, transcripts and database content; \
                 `--older-than 1d` keeps a day's) or raise CLAUDE_TOOLS_STATE_MAX_MB",
                used / MIB,
                max / MIB
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_budget_is_a_tenth_of_the_disk_within_bounds() {
        assert_eq!(default_max_mb(0), 1024);
        assert_eq!(default_max_mb(100 * 1024), 10 * 1024);
        assert_eq!(default_max_mb(10 << 20), 20 * 1024);
        assert!(fs_total_mb(Path::new("/")) > 0);
    }

    /// Charges count until the walk that follows them; one taken during a walk stays.
    #[test]
    fn charges_count_until_the_next_walk() {
        let dir = tempfile::tempdir().unwrap();
        let budget = StateBudget::new(dir.path(), 64);
        let walked = budget.used_bytes();
        budget.charge(MIB);
        assert_eq!(budget.used_bytes(), walked + MIB);
        budget.check("nothing was started").unwrap();
        budget.charge(64 * MIB);
        assert_eq!(
            budget.check("nothing was started").unwrap_err().code,
            ErrorCode::StorageFull
        );
        budget.refresh_now();
        assert!(budget.used_bytes() < MIB, "the walk replaces the estimate");
    }

    #[test]
    fn past_the_budget_new_work_is_refused_and_symlinks_are_not_followed() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("big"), vec![1u8; 4 << 20]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let budget = StateBudget::new(dir.path(), 1);
        assert!(budget.used_bytes() < MIB, "a symlink was followed");
        budget.check("nothing was started").unwrap();
        std::fs::write(dir.path().join("big"), vec![1u8; 2 << 20]).unwrap();
        budget.refresh_now();
        let err = budget.check("nothing was started").unwrap_err();
        assert_eq!(err.code, ErrorCode::StorageFull);
        assert!(
            err.message.contains("CLAUDE_TOOLS_STATE_MAX_MB"),
            "{}",
            err.message
        );
    }
}
