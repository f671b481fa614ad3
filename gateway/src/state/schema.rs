//! Schema versions and migrations of the state database. A database is migrated forward one
//! version at a time inside a transaction; a database newer than this build is refused.

use rusqlite::Connection;

/// Version this build writes.
pub const SCHEMA_VERSION: i64 = 2;

/// Each entry migrates from version `index` to `index + 1`.
const MIGRATIONS: &[&str] = &[common::state_schema::V1, common::state_schema::V2];

/// Bring the database to [`SCHEMA_VERSION`], or explain why it cannot be.
pub fn migrate(conn: &mut Connection) -> Result<(), String> {
    let current: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|e| format!("reading schema version: {e}"))?;
    if current > SCHEMA_VERSION {
        return Err(format!(
            "state database has schema version {current}, newer than this build's {SCHEMA_VERSION}; \
             run the newer gateway or restore a backup"
        ));
    }
    for version in current..SCHEMA_VERSION {
        let tx = conn.transaction().map_err(|e| e.to_string())?;
        let sql = MIGRATIONS[version as usize];
        tx.execute_batch(sql)
            .and_then(|()| tx.pragma_update(None, "user_version", version + 1))
            .and_then(|()| tx.commit())
            .map_err(|e| format!("migrating state database to version {}: {e}", version + 1))?;
    }
    Ok(())
}
