//! How the state store fails ([`StoreError`]), apart from the store so that the modules the
//! store uses (its fixed facts, the chain) can name it without importing the store.

/// Failures of the state store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("state record is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("state database schema: {0}")]
    Schema(String),
    #[error(transparent)]
    Migration(#[from] super::schema::MigrationError),
    /// The ledger was changed outside the gateway: it appends nothing more.
    #[error(
        "the ledger fails its integrity check ({0}); the gateway appends nothing to it. Run \
         `gatewayctl verify` to see the first bad row, keep the state dir as evidence and restore \
         it from a backup, or start over with a new state dir"
    )]
    LedgerBroken(String),
    #[error("state file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}
