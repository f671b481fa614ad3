//! Schema versions and migrations of the state database. A database is migrated forward one
//! version at a time inside a transaction; a database newer than this build is refused.

use rusqlite::Connection;

/// Version this build writes.
pub const SCHEMA_VERSION: i64 = 6;

/// Each entry migrates from version `index` to `index + 1`.
const MIGRATIONS: &[&str] = &[
    common::state_schema::V1,
    common::state_schema::V2,
    common::state_schema::V3,
    common::state_schema::V4,
    common::state_schema::V5,
    common::state_schema::V6,
];

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

/// The triggers the migrations make (name, SQL as SQLite stores it): the ledger's append-only
/// guards.
fn own_triggers() -> rusqlite::Result<Vec<(String, String)>> {
    let scratch = Connection::open_in_memory()?;
    scratch.execute_batch(common::state_schema::V1)?;
    let mut stmt = scratch.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")?;
    let rows = stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

/// A trigger the migrations did not make, or one of theirs redefined (red team 24 B5): it would
/// run inside the gateway's own transactions, and what it wrote would be sealed and signed as the
/// gateway's. `Some(what)` names it. A missing guard is not reported here: without it an edit
/// of a ledger row is still found by the chain.
pub(super) fn foreign_trigger(conn: &Connection) -> rusqlite::Result<Option<String>> {
    let own = own_triggers()?;
    let mut stmt = conn.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")?;
    let found = stmt
        .query_map([], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(found.into_iter().find_map(|(name, sql)| {
        let ours = own
            .iter()
            .any(|(n, s)| *n == name && Some(s) == sql.as_ref());
        (!ours).then(|| format!("sqlite_master: trigger {name:?} was not made by the gateway"))
    }))
}
