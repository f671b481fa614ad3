//! Durable state: the SQLite database the gateway alone writes (sessions, leases, idempotency
//! records, turns, replies, actions and the append-only event ledger), and the records stored in it.

mod chain;
mod ledger;
mod records;
mod schema;
mod store;

pub use ledger::{ActionEnd, ApprovedAction, LedgerEvent};
pub use records::*;
pub use schema::MigrationError;
pub use store::{DATABASE_FILE, Store, StoreError, Tx};
