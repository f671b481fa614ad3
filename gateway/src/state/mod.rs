//! Durable state: the SQLite database the gateway alone writes (sessions, leases, idempotency
//! records, turns, replies, actions and the append-only event ledger), and the records stored in it.

mod chain;
mod error;
mod fixed;
mod ledger;
mod parts;
mod records;
mod schema;
mod seals;
pub mod secrets;
mod store;

pub use error::StoreError;
pub use ledger::{ActionEnd, ApprovedAction, LedgerEvent, arguments_digest};
pub use parts::*;
pub use records::*;
pub use schema::MigrationError;
pub use store::{
    DATABASE_FILE, DroppedAnswers, Reclaimed, RemovedContent, Store, Tx, database_file_bytes,
    open_connection,
};

/// A state database as a gateway from before the ledger chain left it (schema version 3), with
/// `rows` (SQL) in it: what the migration tests start from.
#[cfg(test)]
pub(crate) fn database_before_the_chain(dir: &std::path::Path, rows: &str) {
    let db = rusqlite::Connection::open(dir.join(DATABASE_FILE)).unwrap();
    for sql in [
        common::state_schema::V1,
        common::state_schema::V2,
        common::state_schema::V3,
    ] {
        db.execute_batch(sql).unwrap();
    }
    db.pragma_update(None, "user_version", 3).unwrap();
    db.execute_batch(rows).unwrap();
}
