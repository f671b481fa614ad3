//! The SQLite store: opening it safely (modes, WAL, full sync, migrations) and typed access to its
//! rows inside transactions. One connection behind a mutex: the gateway is the single writer.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use common::ledger_chain::{CoveredRow, RowRecord, Table};

use super::error::StoreError;
use super::fixed::Fixed;
use super::records::{ActionRecord, IdempotentAnswer, ReplyRecord, SessionRecord, TurnRecord};
use super::seals::{CheckError, Seals};
use super::{chain, schema};

/// The gateway's durable state.
pub struct Store {
    inner: Mutex<Inner>,
    /// Writes the signed ledger head after the commits that appended events.
    head: chain::HeadWriter,
    /// The server key: it signs the head and each ledger row.
    key: String,
    /// Where [`chain::BROKEN_FILE`] is written when the ledger is found broken.
    state_dir: std::path::PathBuf,
    /// Each session's facts from its start, as written or checked (loads use these).
    fixed: Fixed,
}

/// The connection, where the ledger chain stands, and whether it was found tampered with.
struct Inner {
    conn: Connection,
    anchor: chain::Anchor,
    /// Every row the gateway serves from, as it last wrote it (a row changed behind its back
    /// while it runs is found before the next transaction reads anything).
    seals: Seals,
    /// Once someone else changed the ledger or a sealed row, every transaction is refused
    /// (fail closed).
    broken: Option<String>,
}

/// Name of the database file inside the state dir.
pub const DATABASE_FILE: &str = "gateway.sqlite3";

/// A connection to the state database at `path` with the settings every writer of it uses —
/// the session store's and the OAuth store's (they are per connection, so each must set them):
/// durable commits, foreign keys, a 5 s wait on the other's lock, and deleted rows' bytes
/// zeroed in the pages that keep other rows (no extra I/O), so what retention or a revocation
/// removes is gone from the file, not left between live rows.
pub fn open_connection(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.pragma_update(None, "secure_delete", "FAST")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    // Every statement a turn runs stays parsed (rusqlite keeps 16 by default; a turn runs more).
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 128;

impl Store {
    /// Open (creating if needed) the database in `state_dir`, which must already exist with mode
    /// 0700. The file and its WAL companions are created 0600. The ledger chain is checked
    /// against the signed head first: a ledger changed behind the gateway's back is refused
    /// ([`StoreError::LedgerBroken`]), never re-anchored.
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        let path = state_dir.join(DATABASE_FILE);
        // Create the file ourselves so it is 0600 from its first byte; SQLite keeps the mode for
        // the -wal and -shm files it derives from it.
        sandbox::private_fs::open_private_file(
            &path,
            std::fs::OpenOptions::new().create(true).append(true),
        )
        .map_err(|source| StoreError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let mut conn = open_connection(&path)?;
        // The file's own settings, once. Before any table exists this makes a new database give
        // freed pages back on `incremental_vacuum` (retention, `content::reclaim_space`); an
        // older one records the wish and is switched by the first prune's `VACUUM`.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        let auth = state_dir.join("auth");
        sandbox::private_fs::ensure_private_dir_with(&auth, sandbox::private_fs::OpenDir::Restrict)
            .map_err(|err| StoreError::Io {
                path: auth.display().to_string(),
                source: std::io::Error::other(err.to_string()),
            })?;
        let key = crate::config::load_or_create_server_key(state_dir)
            .map_err(|err| StoreError::Schema(format!("server key: {err:#}")))?;
        // Before migrating: a foreign trigger would run inside the migration's own writes.
        let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        if let Some(foreign) = common::state_schema::foreign_schema(&conn, version)? {
            let why = foreign.to_string();
            chain::latch_broken(state_dir, &why);
            return Err(StoreError::LedgerBroken(why));
        }
        let found_version = schema::migrate(&mut conn, &key)?;
        let head_path = state_dir.join(common::ledger_chain::HEAD_FILE);
        let opened = match chain::open_check(&conn, state_dir, &key, found_version) {
            Err(StoreError::LedgerBroken(why)) => {
                chain::latch_broken(state_dir, &why);
                return Err(StoreError::LedgerBroken(why));
            }
            other => other?,
        };
        let mut anchor = opened.anchor;
        let fixed = Fixed::default();
        // Found broken before (by this open or a running gateway's write): a restart, or the
        // database put back behind the gateway's back, does not clear it.
        if let Ok(why) = std::fs::read_to_string(state_dir.join(chain::BROKEN_FILE)) {
            return Err(StoreError::LedgerBroken(format!(
                "found broken before ({}): {}",
                chain::BROKEN_FILE,
                common::display::one_line(why.trim())
            )));
        }
        // A head from before the v3 format: record every covered row and the pre-chain
        // commitment in the chain first (committed before the head that requires them). Else
        // the columns the mapping gained since rows were last recorded (red team 27b R3):
        // recorded now, checked by nothing before (the baseline's trust on first use).
        let records: Vec<(&str, Value)> = if opened.baseline_needed {
            let baseline = chain::baseline_events(&conn, &anchor.pre)?;
            let kind = common::ledger_chain::BASELINE;
            baseline.into_iter().map(|data| (kind, data)).collect()
        } else {
            let chunks = opened.unrecorded.chunks(chain::BASELINE_ROWS);
            let kind = common::ledger_chain::ROWS_RECORDED;
            chunks
                .map(|rows| (kind, RowRecord::event_data(rows)))
                .collect()
        };
        if !records.is_empty() {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let typed = Tx(
                &tx,
                RefCell::new(anchor.clone()),
                &key,
                RefCell::default(),
                &fixed,
            );
            for (kind, data) in &records {
                typed.append_event(None, kind, data)?;
            }
            anchor = typed.1.into_inner();
            tx.commit()?;
        }
        // Anchor what was found (rows a crash left after the head, a head of the older format,
        // or none yet) before appending anything.
        chain::write_head(&head_path, &key, &anchor)?;
        // The check passed: each session's facts as they stand now are the ones loads use.
        {
            let mut stmt = conn.prepare("SELECT data FROM sessions")?;
            for data in stmt.query_map([], |row| row.get::<_, String>(0))? {
                if let Ok(session) = from_json::<SessionRecord>(&data?) {
                    fixed.learn(&session);
                }
            }
        }
        let seals = Seals::start(&conn)?;
        Ok(Store {
            inner: Mutex::new(Inner {
                conn,
                anchor,
                seals,
                broken: None,
            }),
            head: chain::HeadWriter::start(head_path, key.clone())?,
            key,
            state_dir: state_dir.to_path_buf(),
            fixed,
        })
    }

    /// Run `f` in an immediate (write) transaction and commit it if `f` succeeds. The ledger's
    /// tail is compared with what this gateway last committed first: if someone else changed
    /// it, nothing is written, now or later ([`StoreError::LedgerBroken`]).
    pub fn write<T, E>(&self, f: impl FnOnce(&Tx<'_>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let mut guard = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let inner = &mut *guard;
        refuse_if_latched(&inner.broken)?;
        let tx = inner
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(StoreError::from)?;
        if let Err(why) = chain::check_tail(&tx, &inner.anchor) {
            drop(tx);
            return Err(self.latch(&mut inner.broken, why).into());
        }
        self.check_sealed(&mut inner.broken, &mut inner.seals, &tx)?;
        let typed = Tx(
            &tx,
            RefCell::new(inner.anchor.clone()),
            &self.key,
            RefCell::default(),
            &self.fixed,
        );
        let out = f(&typed)?;
        typed.append_records()?;
        let anchor = typed.1.into_inner();
        let staged = inner.seals.stage(&tx).map_err(StoreError::from)?;
        tx.commit().map_err(StoreError::from)?;
        inner.seals.apply(staged);
        if anchor != inner.anchor {
            inner.anchor = anchor.clone();
            self.head.publish(anchor);
        }
        Ok(out)
    }

    /// Someone else changed the ledger or a sealed row: say so, record it for the next open
    /// ([`chain::BROKEN_FILE`]), and refuse every transaction from now on.
    fn latch(&self, broken: &mut Option<String>, why: String) -> StoreError {
        tracing::error!(problem = %why, "the ledger was changed outside the gateway");
        chain::latch_broken(&self.state_dir, &why);
        *broken = Some(why.clone());
        StoreError::LedgerBroken(why)
    }

    /// Compare every sealed row with the database (another connection may have committed);
    /// a difference is latched like a broken chain.
    pub(super) fn check_sealed(
        &self,
        broken: &mut Option<String>,
        seals: &mut Seals,
        conn: &rusqlite::Connection,
    ) -> Result<(), StoreError> {
        match seals.check(conn) {
            Ok(()) => Ok(()),
            Err(CheckError::Differs(why)) => Err(self.latch(broken, why)),
            Err(CheckError::Sqlite(err)) => Err(err.into()),
        }
    }

    /// Wait until the signed head names the newest committed row (tests, measurements).
    pub fn flush_head(&self) {
        self.head.flush();
    }

    /// Run `f` in a read transaction.
    pub fn read<T, E>(&self, f: impl FnOnce(&Tx<'_>) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        let mut guard = self
            .inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let inner = &mut *guard;
        refuse_if_latched(&inner.broken)?;
        let anchor = inner.anchor.clone();
        let tx = inner.conn.transaction().map_err(StoreError::from)?;
        self.check_sealed(&mut inner.broken, &mut inner.seals, &tx)?;
        f(&Tx(
            &tx,
            RefCell::new(anchor),
            &self.key,
            RefCell::default(),
            &self.fixed,
        ))
    }
}

/// Refuse everything once the ledger was found broken (latched by [`Store::latch`]).
pub(super) fn refuse_if_latched(broken: &Option<String>) -> Result<(), StoreError> {
    match broken {
        Some(why) => Err(StoreError::LedgerBroken(why.clone())),
        None => Ok(()),
    }
}

/// Typed access to the database inside one transaction, where the ledger chain stands in it
/// (the head to sign once it commits), the server key that signs each row, the covered
/// columns the transaction changed (recorded in one `rows_recorded` event before it commits),
/// and the sessions' fixed facts.
pub struct Tx<'a>(
    &'a Transaction<'a>,
    RefCell<chain::Anchor>,
    &'a str,
    RefCell<Vec<RowRecord>>,
    &'a Fixed,
);

fn to_json<T: Serialize>(value: &T) -> Result<String, StoreError> {
    Ok(serde_json::to_string(value)?)
}

fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    Ok(serde_json::from_str(text)?)
}

/// A lease row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    pub session_id: String,
    pub generation: u32,
    pub expires_at_ms: i64,
    pub revoked: bool,
}

/// A claimed idempotency key: the hash of the request that claimed it, its session, its answer,
/// and whether the row carries the server key's signature over all of them (a replay hands out
/// the lease and recovery token of the session the answer names: only a signed answer is
/// replayed, red team 27b R2).
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotencyRow {
    pub request_hash: String,
    pub session_id: Option<String>,
    pub answer: IdempotentAnswer,
    pub signed: bool,
}

/// The signature of an idempotency row under `key`: HMAC of scope, idempotency key and request
/// hash (`fields`), session and the answer as stored, as a JSON array (unambiguous).
fn idempotency_mac(key: &str, fields: [&str; 3], session_id: Option<&str>, answer: &str) -> String {
    let [scope, idempotency_key, request_hash] = fields;
    let fields = serde_json::json!([scope, idempotency_key, request_hash, session_id, answer]);
    common::hash::hmac_hex(key, &format!("idempotency:v1:{fields}"))
}

/// An action row before its JSON columns are decoded: record, arguments, outcome, prepared.
type ActionRow = (ActionRecord, String, Option<String>, Option<String>);

impl Tx<'_> {
    // ---- sessions ----

    /// `sql` run with `params` through the connection's statement cache: the per-turn
    /// statements were parsed again at every call (about a tenth of the gateway's time per turn,
    /// issue 26).
    fn run(&self, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
        self.0.prepare_cached(sql)?.execute(params)
    }

    /// The one row `sql` selects, through the statement cache ([`Self::run`]).
    fn row<T>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
        f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        self.0.prepare_cached(sql)?.query_row(params, f)
    }

    pub fn put_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        self.4.learn(session);
        let before = self.covered(Table::Sessions, &session.id, &session.id)?;
        self.run(
            "INSERT INTO sessions (id, status, revision, created_at_ms, updated_at_ms, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(id) DO UPDATE SET status = ?2, revision = ?3, updated_at_ms = ?5, data = ?6",
            params![
                session.id,
                session.status.as_str(),
                session.revision as i64,
                session.created_at_ms,
                common::time::now_unix_ms(),
                to_json(session)?
            ],
        )?;
        self.note(Table::Sessions, &session.id, &session.id, before)
    }

    /// The record in the `data` column of the one row `sql` selects, if any.
    fn data_of<T: DeserializeOwned>(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<Option<T>, StoreError> {
        let data: Option<String> = self.row(sql, params, |row| row.get(0)).optional()?;
        data.map(|d| from_json(&d)).transpose()
    }

    pub fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.data_of("SELECT data FROM sessions WHERE id = ?1", [id])?
            .map(|session| self.4.apply(session))
            .transpose()
    }

    /// Sessions that are not terminal: each may hold a broker and a runner.
    pub fn live_session_count(&self) -> Result<usize, StoreError> {
        let n: i64 = self.row(
            "SELECT COUNT(*) FROM sessions WHERE status NOT IN ('stopped', 'failed', 'expired')",
            [],
            |row| row.get(0),
        )?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    pub fn sessions(&self) -> Result<Vec<SessionRecord>, StoreError> {
        let mut stmt = self
            .0
            .prepare_cached("SELECT data FROM sessions ORDER BY created_at_ms, id")?;
        let rows = stmt.query_map([], |row| row.get::<_, String>(0))?;
        let mut out = Vec::new();
        for row in rows {
            // A session added behind the gateway's back is left out (and refused when named).
            match self.4.apply(from_json(&row?)?) {
                Ok(session) => out.push(session),
                Err(err) => tracing::error!("{err}"),
            }
        }
        Ok(out)
    }

    // ---- leases ----

    pub fn insert_lease(
        &self,
        lease_hash: &str,
        session_id: &str,
        generation: u32,
        expires_at_ms: i64,
    ) -> Result<(), StoreError> {
        self.run(
            "INSERT INTO leases (lease_hash, session_id, generation, expires_at_ms) VALUES (?1, ?2, ?3, ?4)",
            params![lease_hash, session_id, generation, expires_at_ms],
        )?;
        Ok(())
    }

    pub fn lease(&self, lease_hash: &str) -> Result<Option<LeaseRow>, StoreError> {
        Ok(self
            .row(
                "SELECT session_id, generation, expires_at_ms, revoked FROM leases WHERE lease_hash = ?1",
                [lease_hash],
                |row| {
                    Ok(LeaseRow {
                        session_id: row.get(0)?,
                        generation: row.get(1)?,
                        expires_at_ms: row.get(2)?,
                        revoked: row.get::<_, i64>(3)? != 0,
                    })
                },
            )
            .optional()?)
    }

    pub fn renew_lease(&self, lease_hash: &str, expires_at_ms: i64) -> Result<(), StoreError> {
        self.run(
            "UPDATE leases SET expires_at_ms = ?2 WHERE lease_hash = ?1",
            params![lease_hash, expires_at_ms],
        )?;
        Ok(())
    }

    pub fn revoke_leases(&self, session_id: &str) -> Result<(), StoreError> {
        self.run(
            "UPDATE leases SET revoked = 1 WHERE session_id = ?1",
            [session_id],
        )?;
        Ok(())
    }

    // ---- idempotency ----

    pub fn idempotency(
        &self,
        scope: &str,
        key: &str,
    ) -> Result<Option<IdempotencyRow>, StoreError> {
        type Row = (String, Option<String>, String, Option<String>);
        let row: Option<Row> = self
            .row(
                "SELECT request_hash, session_id, answer, mac FROM idempotency
                 WHERE scope = ?1 AND key = ?2",
                [scope, key],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
            )
            .optional()?;
        row.map(|(request_hash, session_id, answer, mac)| {
            let fields = [scope, key, request_hash.as_str()];
            let expected = idempotency_mac(self.2, fields, session_id.as_deref(), &answer);
            let signed = mac.is_some_and(|mac| {
                common::hash::constant_time_eq(mac.as_bytes(), expected.as_bytes())
            });
            Ok(IdempotencyRow {
                request_hash,
                session_id,
                answer: IdempotentAnswer::from_json(from_json(&answer)?)?,
                signed,
            })
        })
        .transpose()
    }

    pub fn put_idempotency(
        &self,
        scope: &str,
        key: &str,
        request_hash: &str,
        session_id: Option<&str>,
        answer: &IdempotentAnswer,
    ) -> Result<(), StoreError> {
        let answer = to_json(&answer.to_json()?)?;
        let mac = idempotency_mac(self.2, [scope, key, request_hash], session_id, &answer);
        self.run(
            "INSERT INTO idempotency
             (scope, key, request_hash, session_id, answer, created_at_ms, mac)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                scope,
                key,
                request_hash,
                session_id,
                answer,
                common::time::now_unix_ms(),
                mac
            ],
        )?;
        Ok(())
    }

    /// Replace the answer of a claimed key: the bytes of the answer's JSON as stored (0 when
    /// the key was never claimed).
    pub fn replace_idempotency_answer(
        &self,
        scope: &str,
        key: &str,
        answer: &IdempotentAnswer,
    ) -> Result<u64, StoreError> {
        let Some(claimed) = self.idempotency(scope, key)? else {
            return Ok(0);
        };
        let answer = to_json(&answer.to_json()?)?;
        let fields = [scope, key, claimed.request_hash.as_str()];
        let mac = idempotency_mac(self.2, fields, claimed.session_id.as_deref(), &answer);
        self.run(
            "UPDATE idempotency SET answer = ?3, mac = ?4 WHERE scope = ?1 AND key = ?2",
            params![scope, key, answer, mac],
        )?;
        Ok(answer.len() as u64)
    }

    // ---- turns ----

    pub fn put_turn(&self, turn: &TurnRecord) -> Result<(), StoreError> {
        let before = self.covered(Table::Turns, &turn.session_id, &turn.turn_id)?;
        self.run(
            "INSERT INTO turns (turn_id, session_id, sequence, fingerprint, status, created_at_ms, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT(turn_id) DO UPDATE SET status = ?5, data = ?7",
            params![
                turn.turn_id,
                turn.session_id,
                turn.sequence as i64,
                turn.fingerprint,
                turn.status.as_str(),
                turn.created_at_ms,
                to_json(turn)?
            ],
        )?;
        self.note(Table::Turns, &turn.session_id, &turn.turn_id, before)
    }

    pub fn turn(&self, turn_id: &str) -> Result<Option<TurnRecord>, StoreError> {
        self.data_of("SELECT data FROM turns WHERE turn_id = ?1", [turn_id])
    }

    pub fn turn_by_fingerprint(
        &self,
        session_id: &str,
        fingerprint: &str,
    ) -> Result<Option<TurnRecord>, StoreError> {
        self.data_of(
            "SELECT data FROM turns WHERE session_id = ?1 AND fingerprint = ?2",
            [session_id, fingerprint],
        )
    }

    // ---- replies ----

    pub fn insert_reply(&self, reply: &ReplyRecord) -> Result<(), StoreError> {
        self.run(
            "INSERT INTO replies (session_id, reply_id, turn_id, request_hash, created_at_ms, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                reply.session_id,
                reply.reply_id,
                reply.turn_id,
                reply.request_hash,
                reply.created_at_ms,
                to_json(reply)?
            ],
        )?;
        self.note(Table::Replies, &reply.session_id, &reply.reply_id, None)
    }

    pub fn reply(
        &self,
        session_id: &str,
        reply_id: &str,
    ) -> Result<Option<ReplyRecord>, StoreError> {
        self.data_of(
            "SELECT data FROM replies WHERE session_id = ?1 AND reply_id = ?2",
            [session_id, reply_id],
        )
    }

    // ---- actions ----

    pub fn put_action(&self, action: &ActionRecord) -> Result<(), StoreError> {
        let outcome = action.outcome.as_ref().map(to_json).transpose()?;
        let prepared = action.prepared.as_ref().map(to_json).transpose()?;
        let before = self.covered(Table::Actions, &action.session_id, &action.action_id)?;
        self.run(
            "INSERT INTO actions (action_id, session_id, turn_id, call_index, name, arguments, state, outcome, updated_at_ms, prepared)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             ON CONFLICT(action_id) DO UPDATE SET state = ?7, outcome = ?8, updated_at_ms = ?9, prepared = ?10",
            params![
                action.action_id,
                action.session_id,
                action.turn_id,
                action.call_index,
                action.name,
                to_json(&action.arguments)?,
                action.state.as_str(),
                outcome,
                common::time::now_unix_ms(),
                prepared
            ],
        )?;
        self.note(
            Table::Actions,
            &action.session_id,
            &action.action_id,
            before,
        )
    }

    fn action_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ActionRow> {
        let state: String = row.get(6)?;
        Ok((
            ActionRecord {
                action_id: row.get(0)?,
                session_id: row.get(1)?,
                turn_id: row.get(2)?,
                call_index: row.get(3)?,
                name: row.get(4)?,
                arguments: Value::Null,
                // An unknown state (written by a newer build) is treated as unresolved.
                state: super::records::ActionState::from_name(&state)
                    .unwrap_or(super::records::ActionState::Prepared),
                outcome: None,
                prepared: None,
            },
            row.get(5)?,
            row.get(7)?,
            row.get(8)?,
        ))
    }

    fn finish_action(parts: ActionRow) -> Result<ActionRecord, StoreError> {
        let (mut action, arguments, outcome, prepared) = parts;
        action.arguments = from_json(&arguments)?;
        action.outcome = outcome.as_deref().map(from_json).transpose()?;
        action.prepared = prepared.as_deref().map(from_json).transpose()?;
        Ok(action)
    }

    const ACTION_COLUMNS: &'static str =
        "action_id, session_id, turn_id, call_index, name, arguments, state, outcome, prepared";

    /// Sessions with a write recorded as `prepared` and not reported finished.
    pub fn sessions_with_prepared_writes(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .0
            .prepare_cached("SELECT DISTINCT session_id FROM actions WHERE state = 'prepared'")?;
        let rows = stmt.query_map([], |row| row.get(0))?;
        Ok(rows.collect::<Result<Vec<String>, _>>()?)
    }

    /// Whether any action was approved in the turn.
    pub fn turn_has_actions(&self, turn_id: &str) -> Result<bool, StoreError> {
        Ok(self.row(
            "SELECT EXISTS (SELECT 1 FROM actions WHERE turn_id = ?1)",
            [turn_id],
            |row| row.get(0),
        )?)
    }

    /// The session's writes recorded as `prepared` and not reported finished.
    pub fn prepared_actions(&self, session_id: &str) -> Result<Vec<ActionRecord>, StoreError> {
        self.actions_where(
            "session_id = ?1 AND state = 'prepared' ORDER BY updated_at_ms",
            session_id,
        )
    }

    pub fn action(&self, action_id: &str) -> Result<Option<ActionRecord>, StoreError> {
        let sql = format!(
            "SELECT {} FROM actions WHERE action_id = ?1",
            Self::ACTION_COLUMNS
        );
        let parts = self
            .row(&sql, [action_id], Self::action_from_row)
            .optional()?;
        parts.map(Self::finish_action).transpose()
    }

    pub fn actions_for_turn(&self, turn_id: &str) -> Result<Vec<ActionRecord>, StoreError> {
        self.actions_where("turn_id = ?1 ORDER BY call_index", turn_id)
    }

    fn actions_where(&self, condition: &str, param: &str) -> Result<Vec<ActionRecord>, StoreError> {
        let sql = format!(
            "SELECT {} FROM actions WHERE {condition}",
            Self::ACTION_COLUMNS
        );
        let mut stmt = self.0.prepare_cached(&sql)?;
        let rows = stmt.query_map([param], Self::action_from_row)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(Self::finish_action(row?)?);
        }
        Ok(out)
    }

    // ---- ledger ----

    /// The covered columns of a row as stored now (`common::ledger_chain::db`, the mapping the
    /// check uses).
    fn covered(
        &self,
        table: Table,
        session: &str,
        id: &str,
    ) -> Result<Option<common::ledger_chain::Columns>, StoreError> {
        let row = common::ledger_chain::db::covered_row(self.0, table, session, id)?;
        Ok(row.as_ref().map(CoveredRow::columns))
    }

    /// Note the covered columns a write changed (compared with `before`), for the transaction's
    /// `rows_recorded` event.
    fn note(
        &self,
        table: Table,
        session: &str,
        id: &str,
        before: Option<common::ledger_chain::Columns>,
    ) -> Result<(), StoreError> {
        let Some(row) = common::ledger_chain::db::covered_row(self.0, table, session, id)? else {
            return Ok(());
        };
        if let Some(record) = RowRecord::changed(before.as_ref(), &row) {
            let mut pending = self.3.borrow_mut();
            match pending
                .iter_mut()
                .find(|r| (r.table, &r.session, &r.id) == (table, &record.session, &record.id))
            {
                Some(earlier) => earlier.columns.extend(record.columns),
                None => pending.push(record),
            }
        }
        Ok(())
    }

    /// Record the covered columns this transaction changed: one `rows_recorded` event (in the
    /// rows' session when they share one).
    fn append_records(&self) -> Result<(), StoreError> {
        let mut rows = std::mem::take(&mut *self.3.borrow_mut());
        let Some(first) = rows.first() else {
            return Ok(());
        };
        let session = rows
            .iter()
            .all(|r| r.session == first.session)
            .then(|| first.session.clone());
        if session.is_some() {
            // Named once, by the event.
            rows.iter_mut().for_each(|r| r.session.clear());
        }
        let data = RowRecord::event_data(&rows);
        self.append_event(
            session.as_deref(),
            common::ledger_chain::ROWS_RECORDED,
            &data,
        )
    }

    /// Append one event to the ledger, chained to the previous one and signed
    /// (`common::ledger_chain`). `data` must hold nothing secret.
    pub fn append_event(
        &self,
        session_id: Option<&str>,
        kind: &str,
        data: &Value,
    ) -> Result<(), StoreError> {
        let mut anchor = self.1.borrow_mut();
        // The tail was checked against the anchor when the transaction began, so the next seq
        // is the anchor's successor: nothing was handed out past it.
        let seq = anchor.seq + 1;
        let at_ms = common::time::now_unix_ms();
        let text = to_json(data)?;
        let hash =
            common::ledger_chain::link_hash(&anchor.hash, seq, session_id, at_ms, kind, &text);
        let mac = common::ledger_chain::row_mac(self.2, seq, &hash);
        self.run(
            "INSERT INTO events (seq, session_id, at_ms, kind, data, hash, mac)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![seq, session_id, at_ms, kind, text, hash, mac],
        )?;
        anchor.seq = seq;
        anchor.hash = hash;
        Ok(())
    }

    /// The data of every event of `kind` (oldest first), whatever its session: the chain was
    /// checked at open, so these are the facts this gateway recorded.
    pub fn events_of_kind(&self, kind: &str) -> Result<Vec<Value>, StoreError> {
        let mut stmt = self
            .0
            .prepare_cached("SELECT data FROM events WHERE kind = ?1 ORDER BY seq")?;
        let rows = stmt.query_map([kind], |row| row.get::<_, String>(0))?;
        let mut out = Vec::new();
        for row in rows {
            out.push(from_json(&row?)?);
        }
        Ok(out)
    }

    /// Events of one session, oldest first: `(seq, at_ms, kind, data)`.
    pub fn events(&self, session_id: &str) -> Result<Vec<(i64, i64, String, Value)>, StoreError> {
        let mut stmt = self.0.prepare_cached(
            "SELECT seq, at_ms, kind, data FROM events WHERE session_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([session_id], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get(2)?,
                row.get::<_, String>(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, at, kind, data) = row?;
            out.push((seq, at, kind, from_json(&data)?));
        }
        Ok(out)
    }
}

mod answers;
mod content;
pub use answers::DroppedAnswers;
pub use content::{Reclaimed, RemovedContent, database_file_bytes};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod chain_tests;

#[cfg(test)]
mod seals_tests;
