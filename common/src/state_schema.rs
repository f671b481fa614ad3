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
