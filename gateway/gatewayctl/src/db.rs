//! Read-only access to the gateway's state database. Rows are decoded leniently: every field of a
//! session's JSON `data` is optional, so a newer or older gateway's records still display.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use rusqlite::{Connection, OpenFlags, OptionalExtension};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What `show` and `events` list: the session's events, without the chain's own records of
/// row columns (`rows_recorded`, `ledger_baseline`), which `verify` reads and nobody else does.
const SESSION_EVENTS: &str = "kind NOT IN ('rows_recorded', 'ledger_baseline')";

/// Name of the database file inside the state dir (as the gateway names it).
pub const DATABASE_FILE: &str = "gateway.sqlite3";

/// Schema version this build of gatewayctl was written against.
pub const KNOWN_SCHEMA_VERSION: i64 = 6;

/// A read-only connection to the state database.
pub struct Db {
    conn: Connection,
    pub path: PathBuf,
}

/// The runner generation of a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunInfo {
    pub generation: Option<u64>,
    pub state: Option<String>,
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i64>,
}

/// The private broker record of a session. The secret is read (for `--handshake`) but never
/// serialized or printed.
#[derive(Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BrokerInfo {
    pub pid: i32,
    pub start_time: u64,
    pub boot_id: String,
    pub socket_path: String,
    pub runtime_dir: String,
    #[serde(skip_serializing)]
    pub secret: String,
    /// The runner generation the broker was started for (its handshake proves it).
    pub generation: u32,
}

impl std::fmt::Debug for BrokerInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerInfo")
            .field("pid", &self.pid)
            .field("start_time", &self.start_time)
            .field("boot_id", &self.boot_id)
            .field("socket_path", &self.socket_path)
            .field("runtime_dir", &self.runtime_dir)
            .field("secret", &"<redacted>")
            .field("generation", &self.generation)
            .finish()
    }
}

/// One session row: the indexed columns plus what could be read from its JSON `data`.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub id: String,
    pub status: String,
    pub revision: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub label: Option<String>,
    pub profile: Option<String>,
    pub subagent_policy: Option<String>,
    pub source_directory: Option<String>,
    pub working_directory: Option<String>,
    pub workspace: Option<Value>,
    pub claude_session_id: Option<String>,
    pub lease_generation: Option<u64>,
    pub lease_expires_at_ms: Option<i64>,
    pub current_run: Option<RunInfo>,
    pub pending_turn_id: Option<String>,
    pub last_result: Option<Value>,
    pub launch_error: Option<Value>,
    pub stop_request: Option<Value>,
    pub terminal: Option<Value>,
    pub recovery_required: Option<bool>,
    pub network_boundary: Option<Value>,
    /// Skills frozen at start: ids and hashes (the record holds no bodies).
    pub skill_snapshot: Option<Value>,
    pub broker: Option<BrokerInfo>,
    /// Retention removed the session's content (turns, replies, actions): when.
    pub content_pruned: Option<Value>,
    /// Why `data` could not be read, if it could not.
    pub data_error: Option<String>,
}

impl Session {
    /// No further work can happen in this session.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status.as_str(), "stopped" | "failed" | "expired")
    }
}

/// One turn of a session.
#[derive(Debug, Clone)]
pub struct Turn {
    pub turn_id: String,
    pub sequence: i64,
    pub status: String,
    pub created_at_ms: i64,
    pub kind: Option<String>,
    pub reply_id: Option<String>,
}

/// One approved action.
#[derive(Debug, Clone)]
pub struct Action {
    pub action_id: String,
    pub turn_id: String,
    pub turn_sequence: Option<i64>,
    pub call_index: i64,
    pub name: String,
    pub arguments: Value,
    pub state: String,
    pub outcome: Option<Value>,
    pub updated_at_ms: i64,
}

/// One ledger event.
#[derive(Debug, Clone)]
pub struct Event {
    pub seq: i64,
    pub at_ms: i64,
    pub kind: String,
    pub data: Value,
}

fn field<T: DeserializeOwned>(data: &Value, key: &str) -> Option<T> {
    data.get(key)
        .filter(|v| !v.is_null())
        .and_then(|v| serde_json::from_value(v.clone()).ok())
}

fn json_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

impl Db {
    /// Open `<state_dir>/gateway.sqlite3` read-only. Never creates or migrates anything.
    pub fn open(state_dir: &Path) -> anyhow::Result<Db> {
        let path = state_dir.join(DATABASE_FILE);
        if !path.is_file() {
            bail!(
                "no state database at {} (has the gateway started with this state dir?)",
                path.display()
            );
        }
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .with_context(|| format!("opening {} read-only", path.display()))?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.pragma_update(None, "query_only", "ON")?;
        let db = Db { conn, path };
        let version = db.schema_version()?;
        if version == 0 {
            bail!(
                "{} has no schema yet (the gateway has not finished its first start)",
                db.path.display()
            );
        }
        Ok(db)
    }

    /// `PRAGMA user_version`, the gateway's schema version.
    pub fn schema_version(&self) -> anyhow::Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |row| row.get(0))?)
    }

    fn session_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Session> {
        let data: String = row.get(5)?;
        let mut session = Session {
            id: row.get(0)?,
            status: row.get(1)?,
            revision: row.get(2)?,
            created_at_ms: row.get(3)?,
            updated_at_ms: row.get(4)?,
            ..Session::default()
        };
        match serde_json::from_str::<Value>(&data) {
            Ok(d) => {
                session.label = field(&d, "label");
                session.profile = field(&d, "profile");
                session.subagent_policy = field(&d, "subagent_policy");
                session.source_directory = field(&d, "source_directory");
                session.working_directory = field(&d, "working_directory");
                session.workspace = field(&d, "workspace");
                session.claude_session_id = field(&d, "claude_session_id");
                session.lease_generation = field(&d, "lease_generation");
                session.lease_expires_at_ms = field(&d, "lease_expires_at_ms");
                session.current_run = field(&d, "current_run");
                session.pending_turn_id = field(&d, "pending_turn_id");
                session.last_result = field(&d, "last_result");
                session.launch_error = field(&d, "launch_error");
                session.stop_request = field(&d, "stop_request");
                session.terminal = field(&d, "terminal");
                session.recovery_required = field(&d, "recovery_required");
                session.network_boundary = field(&d, "network_boundary");
                session.skill_snapshot = field(&d, "skill_snapshot");
                session.broker = field(&d, "broker");
                session.content_pruned = field(&d, "content_pruned");
            }
            Err(err) => session.data_error = Some(format!("session data is not JSON: {err}")),
        }
        Ok(session)
    }

    const SESSION_COLUMNS: &'static str =
        "id, status, revision, created_at_ms, updated_at_ms, data";

    /// All sessions, oldest first.
    pub fn sessions(&self) -> anyhow::Result<Vec<Session>> {
        let sql = format!(
            "SELECT {} FROM sessions ORDER BY created_at_ms, id",
            Self::SESSION_COLUMNS
        );
        let mut stmt = self.conn.prepare(&sql)?;
        let rows = stmt.query_map([], Self::session_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// One session, if it exists.
    pub fn session(&self, id: &str) -> anyhow::Result<Option<Session>> {
        let sql = format!(
            "SELECT {} FROM sessions WHERE id = ?1",
            Self::SESSION_COLUMNS
        );
        Ok(self
            .conn
            .query_row(&sql, [id], Self::session_from_row)
            .optional()?)
    }

    /// The session, or an error naming the id.
    pub fn require_session(&self, id: &str) -> anyhow::Result<Session> {
        self.session(id)?
            .with_context(|| format!("no session {id:?} in {}", self.path.display()))
    }

    /// Turns of a session in sequence order.
    pub fn turns(&self, session_id: &str) -> anyhow::Result<Vec<Turn>> {
        let mut stmt = self.conn.prepare(
            "SELECT turn_id, sequence, status, created_at_ms, data FROM turns
             WHERE session_id = ?1 ORDER BY sequence",
        )?;
        let rows = stmt.query_map([session_id], |row| {
            let data = json_text(&row.get::<_, String>(4)?);
            Ok(Turn {
                turn_id: row.get(0)?,
                sequence: row.get(1)?,
                status: row.get(2)?,
                created_at_ms: row.get(3)?,
                kind: data
                    .get("body")
                    .and_then(|b| field::<String>(b, "kind"))
                    .or_else(|| field(&data, "kind")),
                reply_id: field(&data, "reply_id"),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Run `f` inside one read transaction: every query it makes sees the same snapshot.
    pub fn snapshot<T>(&self, f: impl FnOnce(&Db) -> anyhow::Result<T>) -> anyhow::Result<T> {
        self.conn.execute_batch("BEGIN DEFERRED")?;
        let out = f(self);
        self.conn.execute_batch("COMMIT")?;
        out
    }

    /// The connection, for the ledger check (`common::ledger_chain::db`, read-only like
    /// every query here).
    pub fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Actions of a session in turn and call order.
    pub fn actions(&self, session_id: &str) -> anyhow::Result<Vec<Action>> {
        let mut stmt = self.conn.prepare(
            "SELECT a.action_id, a.turn_id, t.sequence, a.call_index, a.name, a.arguments,
                    a.state, a.outcome, a.updated_at_ms
             FROM actions a LEFT JOIN turns t ON t.turn_id = a.turn_id
             WHERE a.session_id = ?1 ORDER BY t.sequence, a.call_index, a.action_id",
        )?;
        let rows = stmt.query_map([session_id], |row| {
            Ok(Action {
                action_id: row.get(0)?,
                turn_id: row.get(1)?,
                turn_sequence: row.get(2)?,
                call_index: row.get(3)?,
                name: row.get(4)?,
                arguments: json_text(&row.get::<_, String>(5)?),
                state: row.get(6)?,
                outcome: row.get::<_, Option<String>>(7)?.map(|o| json_text(&o)),
                updated_at_ms: row.get(8)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Events of a session with `seq > after`, oldest first (the chain's own records left out:
    /// [`SESSION_EVENTS`]).
    pub fn events_after(&self, session_id: &str, after: i64) -> anyhow::Result<Vec<Event>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT seq, at_ms, kind, data FROM events
             WHERE session_id = ?1 AND seq > ?2 AND {SESSION_EVENTS} ORDER BY seq"
        ))?;
        let rows = stmt.query_map(rusqlite::params![session_id, after], |row| {
            Ok(Event {
                seq: row.get(0)?,
                at_ms: row.get(1)?,
                kind: row.get(2)?,
                data: json_text(&row.get::<_, String>(3)?),
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The last `limit` events of a session, oldest first, and how many there are in all.
    pub fn last_events(&self, session_id: &str, limit: usize) -> anyhow::Result<(Vec<Event>, i64)> {
        let total: i64 = self.conn.query_row(
            &format!("SELECT COUNT(*) FROM events WHERE session_id = ?1 AND {SESSION_EVENTS}"),
            [session_id],
            |row| row.get(0),
        )?;
        let mut stmt = self.conn.prepare(&format!(
            "SELECT seq, at_ms, kind, data FROM events
             WHERE session_id = ?1 AND {SESSION_EVENTS} ORDER BY seq DESC LIMIT ?2"
        ))?;
        let rows = stmt.query_map(
            rusqlite::params![session_id, i64::try_from(limit).unwrap_or(i64::MAX)],
            |row| {
                Ok(Event {
                    seq: row.get(0)?,
                    at_ms: row.get(1)?,
                    kind: row.get(2)?,
                    data: json_text(&row.get::<_, String>(3)?),
                })
            },
        )?;
        let mut events: Vec<Event> = rows.collect::<Result<_, _>>()?;
        events.reverse();
        Ok((events, total))
    }
}

/// One registered OAuth client (schema v3).
#[derive(Debug, Clone)]
pub struct OAuthClient {
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
    pub created_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
    pub active_grants: i64,
}

/// One OAuth grant: a client the owner approved (schema v3). No token or hash is read.
#[derive(Debug, Clone)]
pub struct OAuthGrant {
    pub grant_id: String,
    pub client_id: String,
    pub client_name: Option<String>,
    pub resource: String,
    pub scope: String,
    pub created_at_ms: i64,
    pub refreshed_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
    pub revoked_reason: Option<String>,
}

/// The revocations the gateway chained in the ledger (`oauth_revoked` events, issue 27): they
/// hold whatever the OAuth columns say since, so the listings show what the gateway enforces.
const CHAINED_REVOCATIONS: &str = "WITH chained(id, is_client, seq, at_ms, reason) AS (
    SELECT j.value, 0, e.seq, e.at_ms, json_extract(e.data, '$.reason')
    FROM events e, json_each(e.data, '$.grants') j WHERE e.kind = 'oauth_revoked'
    UNION ALL
    SELECT j.value, 1, e.seq, e.at_ms, json_extract(e.data, '$.reason')
    FROM events e, json_each(e.data, '$.clients') j WHERE e.kind = 'oauth_revoked')";

/// The chained revocations that revoke grant `g`: its own, or its client's.
const OF_GRANT: &str =
    "WHERE (NOT is_client AND id = g.grant_id) OR (is_client AND id = g.client_id)";

impl Db {
    /// Whether the OAuth tables exist (a state dir last served by a gateway from before them has
    /// none). Asked of the schema itself, not inferred from the version number.
    fn has_oauth_tables(&self) -> anyhow::Result<bool> {
        Ok(self
            .conn
            .query_row(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'oauth_grants'",
                [],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// OAuth clients, oldest first.
    pub fn oauth_clients(&self) -> anyhow::Result<Vec<OAuthClient>> {
        if !self.has_oauth_tables()? {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn.prepare(&format!(
            "{CHAINED_REVOCATIONS}
             SELECT c.client_id, c.client_name, c.redirect_uris, c.created_at_ms,
                    COALESCE(c.revoked_at_ms, (SELECT MIN(at_ms) FROM chained
                                               WHERE is_client AND id = c.client_id)),
                    (SELECT COUNT(*) FROM oauth_grants g
                     WHERE g.client_id = c.client_id AND g.revoked_at_ms IS NULL
                       AND NOT EXISTS (SELECT 1 FROM chained
                                       WHERE (NOT is_client AND id = g.grant_id)
                                          OR (is_client AND id = c.client_id)))
             FROM oauth_clients c ORDER BY c.created_at_ms, c.client_id"
        ))?;
        let rows = stmt.query_map([], |r| {
            let uris: String = r.get(2)?;
            Ok(OAuthClient {
                client_id: r.get(0)?,
                client_name: r.get(1)?,
                redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
                created_at_ms: r.get(3)?,
                revoked_at_ms: r.get(4)?,
                active_grants: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// OAuth grants, oldest first.
    pub fn oauth_grants(&self) -> anyhow::Result<Vec<OAuthGrant>> {
        if !self.has_oauth_tables()? {
            return Ok(Vec::new());
        }
        let mut stmt = self.conn.prepare(&format!(
            "{CHAINED_REVOCATIONS}
             SELECT g.grant_id, g.client_id, c.client_name, g.resource, g.scope, g.created_at_ms,
                    g.refreshed_at_ms,
                    COALESCE(g.revoked_at_ms, (SELECT MIN(at_ms) FROM chained {OF_GRANT})),
                    COALESCE(g.revoked_reason,
                             (SELECT reason FROM chained {OF_GRANT} ORDER BY seq LIMIT 1))
             FROM oauth_grants g LEFT JOIN oauth_clients c ON c.client_id = g.client_id
             ORDER BY g.created_at_ms, g.grant_id"
        ))?;
        let rows = stmt.query_map([], |r| {
            Ok(OAuthGrant {
                grant_id: r.get(0)?,
                client_id: r.get(1)?,
                client_name: r.get(2)?,
                resource: r.get(3)?,
                scope: r.get(4)?,
                created_at_ms: r.get(5)?,
                refreshed_at_ms: r.get(6)?,
                revoked_at_ms: r.get(7)?,
                revoked_reason: r.get(8)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn session_events_leave_out_every_chain_record_kind() {
        for kind in [
            common::ledger_chain::ROWS_RECORDED,
            common::ledger_chain::BASELINE,
        ] {
            assert!(
                super::SESSION_EVENTS.contains(&format!("'{kind}'")),
                "{kind}"
            );
        }
    }
}
