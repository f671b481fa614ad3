//! The one place that reads the ledger and the covered tables out of the state database for the
//! check (feature `sqlite`): the gateway's open and `gatewayctl verify` run the same queries
//! and row mapping. Read-only: nothing here writes.

use rusqlite::{Connection, OptionalExtension};

use super::{ActionRow, CoveredRow, EventRow, ReplyRow, SessionRow, TurnRow, Verifier};

/// `PRAGMA user_version`, the gateway's schema version.
pub fn schema_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |row| row.get(0))
}

/// Every ledger row in `seq` order, streamed to `each` (columns a schema before 4 or 5 lacks
/// read as `None`).
pub fn each_event(
    conn: &Connection,
    version: i64,
    mut each: impl FnMut(&EventRow),
) -> rusqlite::Result<()> {
    let hash = if version >= 4 { "hash" } else { "NULL" };
    let mac = if version >= 5 { "mac" } else { "NULL" };
    let sql = format!(
        "SELECT seq, session_id, at_ms, kind, data, {hash}, {mac} FROM events ORDER BY seq"
    );
    let mut stmt = conn.prepare(&sql)?;
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        each(&EventRow {
            seq: row.get(0)?,
            session_id: row.get(1)?,
            at_ms: row.get(2)?,
            kind: row.get(3)?,
            data: row.get(4)?,
            hash: row.get(5)?,
            mac: row.get(6)?,
        });
    }
    Ok(())
}

/// The highest seq SQLite's AUTOINCREMENT handed out for `events`.
pub fn issued(conn: &Connection) -> rusqlite::Result<Option<i64>> {
    conn.query_row(
        "SELECT seq FROM sqlite_sequence WHERE name = 'events'",
        [],
        |row| row.get(0),
    )
    .optional()
}

fn action_sql(version: i64) -> String {
    let prepared = if version >= 2 { "prepared" } else { "NULL" };
    format!(
        "SELECT action_id, session_id, turn_id, call_index, name, arguments, state, outcome, \
         {prepared} FROM actions"
    )
}

fn action(r: &rusqlite::Row<'_>) -> rusqlite::Result<CoveredRow> {
    Ok(CoveredRow::Action(ActionRow {
        action_id: r.get(0)?,
        session_id: r.get(1)?,
        turn_id: r.get(2)?,
        call_index: r.get(3)?,
        name: r.get(4)?,
        arguments: r.get(5)?,
        state: r.get(6)?,
        outcome: r.get(7)?,
        prepared: r.get(8)?,
    }))
}

const REPLY_SQL: &str = "SELECT session_id, reply_id, turn_id, request_hash, data FROM replies";

fn reply(r: &rusqlite::Row<'_>) -> rusqlite::Result<CoveredRow> {
    Ok(CoveredRow::Reply(ReplyRow {
        session_id: r.get(0)?,
        reply_id: r.get(1)?,
        turn_id: r.get(2)?,
        request_hash: r.get(3)?,
        data: r.get(4)?,
    }))
}

const SESSION_SQL: &str = "SELECT id, status, data FROM sessions";

fn session(r: &rusqlite::Row<'_>) -> rusqlite::Result<CoveredRow> {
    Ok(CoveredRow::Session(SessionRow {
        id: r.get(0)?,
        status: r.get(1)?,
        data: r.get(2)?,
    }))
}

const TURN_SQL: &str = "SELECT turn_id, session_id, sequence, fingerprint, status, data FROM turns";

fn turn(r: &rusqlite::Row<'_>) -> rusqlite::Result<CoveredRow> {
    Ok(CoveredRow::Turn(TurnRow {
        turn_id: r.get(0)?,
        session_id: r.get(1)?,
        sequence: r.get(2)?,
        fingerprint: r.get(3)?,
        status: r.get(4)?,
        data: r.get(5)?,
    }))
}

/// Every row of the covered tables, streamed to `each` (in a stable order).
pub fn each_covered_row(
    conn: &Connection,
    version: i64,
    mut each: impl FnMut(&CoveredRow),
) -> rusqlite::Result<()> {
    type Map = fn(&rusqlite::Row<'_>) -> rusqlite::Result<CoveredRow>;
    let queries: [(String, &str, Map); 4] = [
        (action_sql(version), "action_id", action),
        (REPLY_SQL.into(), "session_id, reply_id", reply),
        (SESSION_SQL.into(), "id", session),
        (TURN_SQL.into(), "turn_id", turn),
    ];
    for (sql, order, map) in queries {
        let mut stmt = conn.prepare(&format!("{sql} ORDER BY {order}"))?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            each(&map(row)?);
        }
    }
    Ok(())
}

/// The covered rows of one session in the tables retention may empty (`actions`, `replies`,
/// `turns`, in that order: the order their foreign keys let them be deleted in), streamed to
/// `each`. The session's own row is not among them: it stays.
pub fn session_content_rows(
    conn: &Connection,
    session_id: &str,
    mut each: impl FnMut(&CoveredRow),
) -> rusqlite::Result<()> {
    type Map = fn(&rusqlite::Row<'_>) -> rusqlite::Result<CoveredRow>;
    let queries: [(String, &str, Map); 3] = [
        (action_sql(5), "action_id", action),
        (REPLY_SQL.into(), "reply_id", reply),
        (TURN_SQL.into(), "turn_id", turn),
    ];
    for (sql, order, map) in queries {
        let mut stmt = conn.prepare(&format!("{sql} WHERE session_id = ?1 ORDER BY {order}"))?;
        let mut rows = stmt.query([session_id])?;
        while let Some(row) = rows.next()? {
            each(&map(row)?);
        }
    }
    Ok(())
}

/// The whole check of the database's side: every event, AUTOINCREMENT's counter and every
/// covered row, passed to `verifier` (then [`Verifier::finish`]). Run it inside one read
/// transaction for one consistent snapshot.
pub fn check(conn: &Connection, verifier: &mut Verifier) -> rusqlite::Result<()> {
    let version = schema_version(conn)?;
    if let Some(foreign) = crate::state_schema::foreign_schema(conn, version)? {
        verifier.foreign_schema(&foreign.kind, &foreign.name);
    }
    each_event(conn, version, |row| verifier.event(row))?;
    verifier.issued(issued(conn)?);
    each_covered_row(conn, version, |row| verifier.covered(row))
}

/// One covered row as stored now (the gateway compares a row's columns before and after it
/// writes it), by its session and id.
pub fn covered_row(
    conn: &Connection,
    table: super::Table,
    session_id: &str,
    id: &str,
) -> rusqlite::Result<Option<CoveredRow>> {
    use super::Table;
    let one = |sql: &str, map: fn(&rusqlite::Row<'_>) -> rusqlite::Result<CoveredRow>| {
        conn.query_row(sql, rusqlite::params![session_id, id], map)
            .optional()
    };
    match table {
        Table::Actions => one(
            &format!("{} WHERE ?1 = ?1 AND action_id = ?2", action_sql(5)),
            action,
        ),
        Table::Replies => one(
            &format!("{REPLY_SQL} WHERE session_id = ?1 AND reply_id = ?2"),
            reply,
        ),
        Table::Sessions => one(&format!("{SESSION_SQL} WHERE ?1 = ?1 AND id = ?2"), session),
        Table::Turns => one(&format!("{TURN_SQL} WHERE ?1 = ?1 AND turn_id = ?2"), turn),
        Table::Events | Table::LedgerHead | Table::Schema => Ok(None),
    }
}
