//! What this gateway last wrote, row by row, in the tables it serves from: a digest of every row
//! of [`SEALED`], kept in memory, updated from the connection's own writes (SQLite's update hook
//! names each row a transaction inserts, updates or deletes) and compared with the database
//! whenever another connection has committed since (`PRAGMA data_version` changes exactly then).
//! So a row changed, added or removed behind the gateway's back while it runs is found before any
//! transaction reads from it, and nothing built on it is served. At rest (between two gateways),
//! the ledger chain's check at open is the guard; the seals start from what that check passed.
//!
//! The schema (`sqlite_master`) is sealed the same way, so a trigger another connection creates
//! is refused before it can run inside the gateway's own transactions.
//!
//! The gateway's own OAuth store writes through a second connection: its commits change
//! `data_version` too, and the comparison (a pass over the sealed tables) then finds nothing.
//! OAuth's own tables are not sealed here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use rusqlite::hooks::Action;
use rusqlite::types::ValueRef;
use sha2::{Digest, Sha256};

/// The tables whose rows are sealed: everything a session's answers, leases and replays are
/// built from.
pub(super) const SEALED: [&str; 8] = [
    "sessions",
    "leases",
    "idempotency",
    "turns",
    "replies",
    "actions",
    "events",
    // The schema itself (red team 24 B5): a trigger created by another connection would run
    // inside the gateway's transactions, its writes sealed as the gateway's own. The gateway
    // changes no schema after its open (a VACUUM takes the seals again).
    "sqlite_master",
];

type RowDigest = [u8; 32];

/// Rows the connection's own statements touched since the transaction began: (table index in
/// [`SEALED`], rowid). Filled by the update hook.
type Touched = Arc<Mutex<Vec<(usize, i64)>>>;

/// The seals of one database connection.
pub(super) struct Seals {
    /// Per sealed table: rowid → digest of the row as this gateway last wrote or checked it.
    rows: [HashMap<i64, RowDigest>; SEALED.len()],
    /// The connection's `data_version` when the seals last matched the database.
    data_version: i64,
    touched: Touched,
}

/// The new digests of the rows a transaction touched (`None`: deleted), applied once it commits.
pub(super) struct Staged(Vec<(usize, i64, Option<RowDigest>)>);

impl Seals {
    /// Seal every row of `conn` as it stands (after the open's check passed), and start noting
    /// the connection's own writes.
    pub fn start(conn: &Connection) -> rusqlite::Result<Seals> {
        let mut rows: [HashMap<i64, RowDigest>; SEALED.len()] = Default::default();
        for (index, table) in SEALED.iter().enumerate() {
            rows[index] = table_digests(conn, table)?;
        }
        let touched: Touched = Arc::default();
        let noted = touched.clone();
        conn.update_hook(Some(move |_: Action, db: &str, table: &str, rowid: i64| {
            if db != "main" {
                return;
            }
            if let Some(index) = SEALED.iter().position(|t| *t == table) {
                noted
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push((index, rowid));
            }
        }));
        Ok(Seals {
            rows,
            data_version: data_version(conn)?,
            touched,
        })
    }

    /// At the start of a transaction (`conn` is inside it): forget what an earlier transaction
    /// that did not commit touched, and if another connection committed since the seals last
    /// matched, compare every sealed row. `Err` names the first row that differs.
    pub fn check(&mut self, conn: &Connection) -> Result<(), CheckError> {
        self.touched
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clear();
        let version = data_version(conn)?;
        if version == self.data_version {
            return Ok(());
        }
        for (index, table) in SEALED.iter().enumerate() {
            let now = table_digests(conn, table)?;
            let sealed = &self.rows[index];
            let changed = sealed
                .iter()
                .find(|(rowid, digest)| now.get(rowid) != Some(digest))
                .map(|(rowid, _)| (*rowid, "changed or removed"));
            let added = || {
                now.keys()
                    .find(|rowid| !sealed.contains_key(rowid))
                    .map(|rowid| (*rowid, "added"))
            };
            if let Some((rowid, what)) = changed.or_else(added) {
                return Err(CheckError::Differs(format!(
                    "{table} row {rowid} was {what} outside the gateway while it ran"
                )));
            }
        }
        self.data_version = version;
        Ok(())
    }

    /// Before a transaction commits (`conn` is inside it): the digests of the rows it touched.
    pub fn stage(&self, conn: &Connection) -> rusqlite::Result<Staged> {
        let mut touched = std::mem::take(
            &mut *self
                .touched
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        touched.sort_unstable();
        touched.dedup();
        let mut staged = Vec::with_capacity(touched.len());
        for (index, rowid) in touched {
            staged.push((index, rowid, row_digest(conn, SEALED[index], rowid)?));
        }
        Ok(Staged(staged))
    }

    /// Once the transaction committed: its rows as sealed now.
    pub fn apply(&mut self, staged: Staged) {
        for (index, rowid, digest) in staged.0 {
            match digest {
                Some(digest) => self.rows[index].insert(rowid, digest),
                None => self.rows[index].remove(&rowid),
            };
        }
    }
}

/// Why [`Seals::check`] failed.
#[derive(Debug)]
pub(super) enum CheckError {
    /// A sealed row differs from what the gateway wrote.
    Differs(String),
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for CheckError {
    fn from(err: rusqlite::Error) -> Self {
        CheckError::Sqlite(err)
    }
}

fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA data_version", [], |row| row.get(0))
}

/// Every row of `table`: rowid → digest.
fn table_digests(conn: &Connection, table: &str) -> rusqlite::Result<HashMap<i64, RowDigest>> {
    // `table` is one of SEALED, never input.
    let mut stmt = conn.prepare(&format!("SELECT rowid, * FROM {table}"))?;
    let columns = stmt.column_count();
    let mut rows = stmt.query([])?;
    let mut out = HashMap::new();
    while let Some(row) = rows.next()? {
        let rowid: i64 = row.get(0)?;
        out.insert(rowid, digest(row, 1, columns)?);
    }
    Ok(out)
}

/// The digest of one row of `table`, `None` when it is gone.
fn row_digest(conn: &Connection, table: &str, rowid: i64) -> rusqlite::Result<Option<RowDigest>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT * FROM {table} WHERE rowid = ?1"))?;
    let columns = stmt.column_count();
    let mut rows = stmt.query([rowid])?;
    rows.next()?.map(|row| digest(row, 0, columns)).transpose()
}

/// SHA-256 of columns `from..to` of `row`, each tagged with its type and length (unambiguous).
fn digest(row: &rusqlite::Row<'_>, from: usize, to: usize) -> rusqlite::Result<RowDigest> {
    let mut hasher = Sha256::new();
    for index in from..to {
        match row.get_ref(index)? {
            ValueRef::Null => hasher.update(b"n"),
            ValueRef::Integer(i) => {
                hasher.update(b"i");
                hasher.update(i.to_le_bytes());
            }
            ValueRef::Real(r) => {
                hasher.update(b"r");
                hasher.update(r.to_bits().to_le_bytes());
            }
            ValueRef::Text(bytes) => tagged(&mut hasher, b"t", bytes),
            ValueRef::Blob(bytes) => tagged(&mut hasher, b"b", bytes),
        }
    }
    Ok(hasher.finalize().into())
}

fn tagged(hasher: &mut Sha256, tag: &[u8], bytes: &[u8]) {
    hasher.update(tag);
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}
