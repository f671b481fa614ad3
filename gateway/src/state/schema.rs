//! Schema versions and migrations of the state database. A database is migrated forward one
//! version at a time inside a transaction; a database newer than this build is refused.

use rusqlite::Connection;

/// Version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

// Each entry migrates from version `index` to `index + 1`.
use common::state_schema::MIGRATIONS;

/// Why the database cannot be brought to [`SCHEMA_VERSION`].
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    #[error(
        "state database has schema version {found}, newer than this build's {SCHEMA_VERSION}; \
         run the newer gateway or restore a backup"
    )]
    Newer { found: i64 },
    #[error("reading schema version: {0}")]
    Version(#[source] rusqlite::Error),
    #[error("migrating state database to version {to}: {source}")]
    Step { to: i64, source: rusqlite::Error },
}

/// Bring the database to [`SCHEMA_VERSION`], or explain why it cannot be; returns the version
/// it was found at. `key` is the server key: version 6 re-keys the lease rows with it.
pub fn migrate(conn: &mut Connection, key: &str) -> Result<i64, MigrationError> {
    let current: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(MigrationError::Version)?;
    if current > SCHEMA_VERSION {
        return Err(MigrationError::Newer { found: current });
    }
    for version in current..SCHEMA_VERSION {
        let to = version + 1;
        let step = |source| MigrationError::Step { to, source };
        let tx = conn.transaction().map_err(step)?;
        let sql = MIGRATIONS[version as usize];
        tx.execute_batch(sql)
            .and_then(|()| match to {
                6 => super::secrets::rekey_leases(&tx, key).and_then(|(rekeyed, deleted)| {
                    tracing::info!(rekeyed, deleted, "lease rows re-keyed (schema 6)");
                    let revoked: i64 = tx.query_row(
                        "SELECT COUNT(*) FROM oauth_grants WHERE revoked_reason LIKE \
                         'tokens stored before the keyed-hash upgrade%'",
                        [],
                        |row| row.get(0),
                    )?;
                    if revoked > 0 {
                        tracing::warn!(
                            revoked,
                            "OAuth grants revoked: their tokens were stored before keyed \
                             hashes. Reconnect ChatGPT and approve it with `gatewayctl oauth \
                             approve`"
                        );
                    }
                    Ok(())
                }),
                _ => Ok(()),
            })
            .and_then(|()| tx.pragma_update(None, "user_version", to))
            .and_then(|()| tx.commit())
            .map_err(step)?;
    }
    Ok(current)
}
