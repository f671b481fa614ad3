//! The SQL of the gateway's state database, one constant per schema version. It lives here so the
//! gateway (which migrates and writes) and `gatewayctl` (which only reads, and builds test
//! fixtures) share one definition without gatewayctl depending on the gateway.

/// Schema version 1: sessions, leases (hashes only), idempotency, turns, replies, actions and the
/// append-only event ledger.
pub const V1: &str = r#"
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

/// Schema version 2: the write intent (`PreparedWrite` JSON) of an action that reached
/// `prepared`, kept beside its outcome so a crash can be resolved from the real file.
pub const V2: &str = r#"
ALTER TABLE actions ADD COLUMN prepared TEXT;
CREATE INDEX actions_by_state ON actions(session_id, state);
"#;

/// Schema version 3: OAuth 2.1 for the ChatGPT connector. Registered clients, the grants the owner
/// approved, authorization codes and access/refresh tokens. Every secret is stored as its SHA-256
/// only. Only new tables: nothing of versions 1 and 2 changes.
pub const V3: &str = r#"
CREATE TABLE oauth_clients (
    client_id TEXT PRIMARY KEY,
    client_name TEXT,
    redirect_uris TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    revoked_at_ms INTEGER
);
CREATE TABLE oauth_grants (
    grant_id TEXT PRIMARY KEY,
    client_id TEXT NOT NULL REFERENCES oauth_clients(client_id),
    resource TEXT NOT NULL,
    scope TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    refreshed_at_ms INTEGER,
    revoked_at_ms INTEGER,
    revoked_reason TEXT
);
CREATE INDEX oauth_grants_by_client ON oauth_grants(client_id);
CREATE TABLE oauth_codes (
    code_hash TEXT PRIMARY KEY,
    client_id TEXT NOT NULL REFERENCES oauth_clients(client_id),
    redirect_uri TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    resource TEXT NOT NULL,
    scope TEXT NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    grant_id TEXT REFERENCES oauth_grants(grant_id)
);
CREATE TABLE oauth_tokens (
    token_hash TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    grant_id TEXT NOT NULL REFERENCES oauth_grants(grant_id),
    audience TEXT NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    rotated_at_ms INTEGER
);
CREATE INDEX oauth_tokens_by_grant ON oauth_tokens(grant_id);
"#;

/// Schema version 4: the ledger's hash chain (`common::ledger_chain`). Rows already present keep
/// no hash: the chain starts with the first event written after this migration.
pub const V4: &str = r#"
ALTER TABLE events ADD COLUMN hash TEXT;
"#;

/// Schema version 5: each ledger row's signature with the server key (`common::ledger_chain`
/// `row_mac`), so rows newer than the signed head cannot be forged. Rows already present keep
/// none; the signed head covers them.
pub const V5: &str = r#"
ALTER TABLE events ADD COLUMN mac TEXT;
"#;

/// Schema version 6: secrets stored keyed (`common::hash::stored_secret_hash`, red team 27b R2).
/// OAuth tokens and codes stored as plain SHA-256 cannot be told from rows a database writer
/// planted, so they are deleted and the grants they belonged to revoked, with the reason the
/// owner sees in `gatewayctl oauth grants`: the client authorizes again. Lease rows are re-keyed
/// by the gateway in the same transaction (a lease is derived from the server key, so a genuine
/// row can be told from a planted one: `gateway::state::secrets`). Idempotency rows gain the
/// server key's signature (`mac`): a replay hands out the lease of the session its answer names,
/// so only a signed answer is replayed; rows from before have none.
pub const V6: &str = r#"
ALTER TABLE idempotency ADD COLUMN mac TEXT;
UPDATE oauth_grants
   SET revoked_at_ms = CAST(strftime('%s', 'now') AS INTEGER) * 1000,
       revoked_reason = 'tokens stored before the keyed-hash upgrade; reconnect the client (gatewayctl oauth approve)'
 WHERE revoked_at_ms IS NULL;
DELETE FROM oauth_tokens;
DELETE FROM oauth_codes;
"#;

/// Schema version 7: the idempotency rows of one scope in claim order (issue 26). Each recorded
/// answer drops the answers that fell out of its scope's newest few; finding them had read every
/// row of the scope (one per `reply_and_wait` of a session), so each turn cost more than the one
/// before.
pub const V7: &str = r#"
CREATE INDEX idempotency_by_scope ON idempotency(scope);
"#;

/// Every migration in order: entry `i` brings a database from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6, V7];

#[cfg(feature = "sqlite")]
/// One row of `sqlite_master` as [`foreign_schema`] compares it: type, name, table, SQL (the
/// root page aside: it differs between any two databases).
type SchemaRow = (String, String, String, Option<String>);

#[cfg(feature = "sqlite")]
fn schema_rows(conn: &rusqlite::Connection) -> rusqlite::Result<Vec<SchemaRow>> {
    let mut stmt = conn.prepare("SELECT type, name, tbl_name, sql FROM sqlite_master")?;
    let rows = stmt.query_map([], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
    })?;
    rows.collect()
}

#[cfg(feature = "sqlite")]
/// A row of the database's schema that the migrations up to `version` did not make, or made
/// otherwise, named (`sqlite_master: trigger "forge" was not made by the gateway`). The schema
/// is code that runs inside the gateway's own transactions: a trigger would rewrite rows that
/// the gateway then seals and signs as its own (red team 24 B5), also when its row says
/// `TRIGGER` or anything else in its `type` column (SQLite builds the object from the SQL;
/// red team 25 B1), and a changed table definition changes what a column holds. So every row
/// must be exactly one the migrations make, compared with an in-memory database they built.
/// One the migrations make may be missing (a dropped append-only guard: the ledger's chain sees
/// any edit it would have stopped). A `version` past [`MIGRATIONS`] is compared with all of them.
pub fn foreign_schema(
    conn: &rusqlite::Connection,
    version: i64,
) -> rusqlite::Result<Option<ForeignSchema>> {
    let scratch = rusqlite::Connection::open_in_memory()?;
    let upto = usize::try_from(version).unwrap_or(0).min(MIGRATIONS.len());
    for sql in &MIGRATIONS[..upto] {
        scratch.execute_batch(sql)?;
    }
    let own = schema_rows(&scratch)?;
    Ok(schema_rows(conn)?
        .into_iter()
        .find(|row| !own.contains(row))
        .map(|(kind, name, _, _)| ForeignSchema { kind, name }))
}

/// A schema row the migrations did not make ([`foreign_schema`]): its `type` column as stored
/// and its name.
#[cfg(feature = "sqlite")]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignSchema {
    pub kind: String,
    pub name: String,
}

#[cfg(feature = "sqlite")]
impl std::fmt::Display for ForeignSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = format!(
            "sqlite_master: {} {:?} was not made by the gateway",
            self.kind, self.name
        );
        f.write_str(&crate::display::one_line(&text))
    }
}
