//! Schema versions and migrations of the state database. A database is migrated forward one
//! version at a time inside a transaction; a database newer than this build is refused.

use rusqlite::Connection;

/// Version this build writes.
pub const SCHEMA_VERSION: i64 = 1;

/// Each entry migrates from version `index` to `index + 1`.
const MIGRATIONS: &[&str] = &[V1];

const V1: &str = r#"
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    revision INTEGER NOT NULL,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE TABLE leases (
    lease_hash TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    generation INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX leases_by_session ON leases(session_id);
CREATE TABLE idempotency (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    session_id TEXT,
    answer TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
);
CREATE TABLE turns (
    turn_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    sequence INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    data TEXT NOT NULL,
    UNIQUE (session_id, sequence),
    UNIQUE (session_id, fingerprint)
);
CREATE TABLE replies (
    session_id TEXT NOT NULL REFERENCES sessions(id),
    reply_id TEXT NOT NULL,
    turn_id TEXT NOT NULL REFERENCES turns(turn_id),
    request_hash TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, reply_id)
);
CREATE TABLE actions (
    action_id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    turn_id TEXT NOT NULL REFERENCES turns(turn_id),
    call_index INTEGER NOT NULL,
    name TEXT NOT NULL,
    arguments TEXT NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT,
    updated_at_ms INTEGER NOT NULL
);
CREATE INDEX actions_by_turn ON actions(turn_id, call_index);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT,
    at_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX events_by_session ON events(session_id, seq);
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'the event ledger is append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'the event ledger is append-only'); END;
"#;

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
