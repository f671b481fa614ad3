//! The gateway's side of the ledger chain (`common::ledger_chain`): the anchor it appends after
//! (checked against its signed head when the store opens, and against the database's tail in
//! every write transaction, so rows removed, added or re-hashed behind its back are refused,
//! never re-anchored), and the thread that writes the signed head after the commits.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};

use common::ledger_chain::{GENESIS, Head, Verifier};
use rusqlite::{Connection, OptionalExtension};

use super::StoreError;

/// Where the chain stands: it begins at `start_seq`; its newest row is `seq` with `hash`
/// ([`GENESIS`] and `start_seq - 1` while nothing is chained); `pre` is the count and digest of
/// the rows from before the chain, which the signed head commits to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Anchor {
    pub start_seq: i64,
    pub seq: i64,
    pub hash: String,
    pub pre: (u64, String),
}

/// What the open found: where the chain stands, and whether the head predates the format that
/// commits to the pre-chain rows and the covered rows' records (then this open writes the
/// baseline: `baseline_needed`).
pub(super) struct Opened {
    pub anchor: Anchor,
    pub baseline_needed: bool,
    /// Columns the row mapping covers that the rows' records predate (recorded by the open).
    pub unrecorded: Vec<common::ledger_chain::RowRecord>,
}

/// Check the whole chain against the signed head in `state_dir` (rows after the head must carry
/// the server key's row signature: a crash between a commit and its head write leaves such
/// rows, nobody else can make them) and every row of the tables the events record against
/// them (`common::ledger_chain::db::check`, the same check as `gatewayctl verify`: nothing
/// built on a forged row runs), and return where it stands. `found_version` is the schema
/// version before this open's migration: only a ledger migrated from before the chain (< 4)
/// may have rows and no head.
pub(super) fn open_check(
    conn: &Connection,
    state_dir: &Path,
    key: &str,
    found_version: i64,
) -> Result<Opened, StoreError> {
    let head = Head::read(state_dir);
    let (head_start, head_v3) = match &head {
        common::ledger_chain::HeadFile::Present(h) => (h.start_seq, h.pre_count.is_some()),
        _ => (None, false),
    };
    let mut verifier = Verifier::new(head, Some(key));
    if found_version < 4 {
        verifier.head_may_be_missing();
    }
    let mut covered_rows = false;
    common::ledger_chain::db::check(conn, &mut verifier)?;
    if !head_v3 {
        common::ledger_chain::db::each_covered_row(conn, 5, |_| covered_rows = true)?;
    }
    let issued = common::ledger_chain::db::issued(conn)?;
    let mut report = verifier.finish();
    let unrecorded = std::mem::take(&mut report.unrecorded);
    if let Some(problem) = report.problems.first() {
        return Err(StoreError::LedgerBroken(describe(problem)));
    }
    let pre = report.pre_chain.clone();
    let baseline_needed = !head_v3 && (report.newest_seq.is_some() || covered_rows);
    let anchor = match report.tail {
        Some((seq, hash)) => Anchor {
            start_seq: head_start.or(report.first_chained).unwrap_or(seq),
            seq,
            hash,
            pre,
        },
        None => {
            let newest = report.newest_seq.unwrap_or(0);
            let start_seq = head_start.unwrap_or(newest.max(issued.unwrap_or(0)) + 1);
            Anchor {
                start_seq,
                seq: start_seq - 1,
                hash: GENESIS.to_string(),
                pre,
            }
        }
    };
    Ok(Opened {
        anchor,
        baseline_needed,
        unrecorded,
    })
}

/// Rows per `ledger_baseline` event (a large state dir is recorded in several).
pub(super) const BASELINE_ROWS: usize = 256;

/// The baseline of a ledger whose head predates the v3 format: every covered row's column
/// digests, with the pre-chain commitment, as `ledger_baseline` events (`kind`, `data`).
pub(super) fn baseline_events(
    conn: &Connection,
    pre: &(u64, String),
) -> rusqlite::Result<Vec<serde_json::Value>> {
    let mut records = Vec::new();
    common::ledger_chain::db::each_covered_row(conn, 5, |row| {
        records.extend(common::ledger_chain::RowRecord::changed(None, row));
    })?;
    let data = |rows: &[common::ledger_chain::RowRecord]| serde_json::json!({"pre_count": pre.0, "pre_sha256": pre.1, "rows": rows});
    if records.is_empty() {
        return Ok(vec![data(&[])]);
    }
    Ok(records.chunks(BASELINE_ROWS).map(data).collect())
}

/// A problem as one line for the log and the error (ids come from the database: one line).
pub(super) fn describe(problem: &common::ledger_chain::Problem) -> String {
    let table = serde_json::to_value(problem.table).unwrap_or_default();
    common::display::one_line(&format!(
        "{} {}: {}",
        table.as_str().unwrap_or("?"),
        problem.id,
        problem.what
    ))
    .into_owned()
}

pub(super) use common::ledger_chain::BROKEN_FILE;

/// Record that the ledger was found broken (best effort: the refusal itself does not depend on
/// it). The reason is one line of row ids and what is wrong, no secrets.
pub(super) fn latch_broken(state_dir: &Path, why: &str) {
    let path = state_dir.join(BROKEN_FILE);
    let line = format!("{}\n", common::display::one_line(why));
    let written = sandbox::private_fs::write_private_file(&path, line.as_bytes());
    if let Err(err) = written {
        tracing::error!(error = %err, "latching the broken ledger");
    }
}

/// Compare the database's tail with `anchor` (what this gateway last committed) inside a write
/// transaction: any difference means someone else changed the ledger.
pub(super) fn check_tail(conn: &Connection, anchor: &Anchor) -> Result<(), String> {
    let newest: Option<(i64, Option<String>)> = conn
        .query_row(
            "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()
        .map_err(|err| format!("reading the ledger's tail: {err}"))?;
    let issued = common::ledger_chain::db::issued(conn)
        .map_err(|err| format!("reading the ledger's sequence: {err}"))?;
    let chained = anchor.hash != GENESIS;
    let newest_seq = newest.as_ref().map_or(0, |(seq, _)| *seq);
    let newest_hash = newest.as_ref().and_then(|(_, hash)| hash.as_deref());
    if chained && (newest_seq != anchor.seq || newest_hash != Some(anchor.hash.as_str())) {
        return Err(format!(
            "the newest ledger row is seq {newest_seq}{}, but this gateway last appended seq {} \
             (rows deleted, added or re-hashed)",
            if newest_hash.is_some() {
                ""
            } else {
                " without a hash"
            },
            anchor.seq
        ));
    }
    if !chained && newest_hash.is_some() {
        return Err(format!(
            "a chained row (seq {newest_seq}) appeared that this gateway did not append"
        ));
    }
    let handed_out = newest_seq.max(issued.unwrap_or(0));
    if handed_out != anchor.seq {
        return Err(format!(
            "the ledger's sequence is at {handed_out}, but this gateway last appended seq {} \
             (rows deleted or added)",
            anchor.seq
        ));
    }
    Ok(())
}

/// Replace the signed head atomically (temporary file, fsync, rename).
pub(super) fn write_head(path: &Path, key: &str, anchor: &Anchor) -> Result<(), StoreError> {
    use std::io::Write;
    let head = Head::committed(key, anchor.start_seq, anchor.seq, &anchor.hash, &anchor.pre);
    let tmp = path.with_extension("tmp");
    let io = |source| StoreError::Io {
        path: path.display().to_string(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    file.write_all(head.to_text().as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    // No fsync of the directory: a rename lost to a power cut leaves an older head, and the rows
    // after it carry their row signatures.
    std::fs::rename(&tmp, path).map_err(io)
}

#[derive(Default)]
struct Pending {
    /// The newest anchor committed and not yet written.
    next: Option<Anchor>,
    /// A write is under way.
    busy: bool,
    stop: bool,
}

/// The thread that writes the signed head after commits, coalescing: while one head is being
/// synced, newer commits only replace the next one to write. The database commit is the
/// durability point; the head may lag it by the rows committed during one head write.
pub(super) struct HeadWriter {
    shared: Arc<(Mutex<Pending>, Condvar)>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl HeadWriter {
    pub(super) fn start(path: PathBuf, key: String) -> Result<HeadWriter, StoreError> {
        let shared = Arc::new((Mutex::new(Pending::default()), Condvar::new()));
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name("ledger-head".into())
            .spawn(move || run(&theirs, &path, &key))
            .map_err(|source| StoreError::Io {
                path: "ledger-head writer thread".into(),
                source,
            })?;
        Ok(HeadWriter {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// A transaction that appended events committed: its anchor is the next head.
    pub(super) fn publish(&self, anchor: Anchor) {
        let (lock, cv) = &*self.shared;
        lock.lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .next = Some(anchor);
        cv.notify_all();
    }

    /// Wait until every published anchor is written.
    pub(super) fn flush(&self) {
        let (lock, cv) = &*self.shared;
        let mut state = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while state.next.is_some() || state.busy {
            state = cv
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }
}

impl Drop for HeadWriter {
    /// Write the last head, then stop the thread.
    fn drop(&mut self) {
        {
            let (lock, cv) = &*self.shared;
            lock.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .stop = true;
            cv.notify_all();
        }
        let thread = self
            .thread
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

fn run(shared: &(Mutex<Pending>, Condvar), path: &Path, key: &str) {
    let (lock, cv) = shared;
    loop {
        let anchor = {
            let mut state = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            loop {
                if let Some(next) = state.next.take() {
                    state.busy = true;
                    break next;
                }
                if state.stop {
                    return;
                }
                state = cv
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
        };
        // Crash tests: the commit is durable, its head is not written.
        let _ = broker::executor::failpoint::hit(
            broker::executor::failpoint::Failpoint::GatewayBeforeLedgerHead,
        );
        // A failed write leaves the older head: the rows after it carry their signatures, and
        // the next commit tries again.
        if let Err(err) = write_head(path, key, &anchor) {
            tracing::error!(error = %err, "writing the signed ledger head");
        }
        let mut state = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.busy = false;
        cv.notify_all();
    }
}
