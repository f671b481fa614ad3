//! The secrets the gateway hands out that the database refers to (leases), derived and stored
//! under the server key: a database writer without the key can neither compute a lease nor store
//! the hash of one they made up (red team 27b R2). Also the one-time re-keying of the lease rows
//! schema 6 finds stored as plain SHA-256.

use common::hash::{hmac_hex, sha256_hex, stored_secret_hash};
use rusqlite::{Transaction, params};

/// Lease id of generation `generation` of a session's lease (derived, so a replay can return it).
pub fn lease_id(key: &str, session_id: &str, generation: u32) -> String {
    let mac = hmac_hex(key, &format!("lease:{session_id}:{generation}"));
    format!("lease_{}", &mac[..40])
}

/// How a lease is stored and looked up: keyed, and bound to its session (a row moved to another
/// session never matches).
pub fn lease_hash(key: &str, session_id: &str, lease_id: &str) -> String {
    stored_secret_hash(key, &format!("lease:{session_id}"), lease_id)
}

/// Schema 6: re-key the lease rows stored as plain SHA-256. A lease is derived from the server
/// key, so a row is genuine exactly when its hash is the SHA-256 of the lease its session and
/// generation derive to; such rows are re-keyed (their holders keep working), every other row is
/// one nobody holding the key wrote, and is deleted. Returns (re-keyed, deleted).
pub(super) fn rekey_leases(tx: &Transaction<'_>, key: &str) -> rusqlite::Result<(usize, usize)> {
    let rows = {
        let mut stmt = tx.prepare("SELECT lease_hash, session_id, generation FROM leases")?;
        stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?
    };
    let (mut rekeyed, mut deleted) = (0, 0);
    for (stored, session_id, generation) in rows {
        let derived = u32::try_from(generation)
            .ok()
            .map(|g| lease_id(key, &session_id, g));
        match derived.filter(|id| {
            common::hash::constant_time_eq(sha256_hex(id.as_bytes()).as_bytes(), stored.as_bytes())
        }) {
            Some(id) => {
                tx.execute(
                    "UPDATE leases SET lease_hash = ?2 WHERE lease_hash = ?1",
                    params![stored, lease_hash(key, &session_id, &id)],
                )?;
                rekeyed += 1;
            }
            None => {
                tx.execute("DELETE FROM leases WHERE lease_hash = ?1", [&stored])?;
                deleted += 1;
            }
        }
    }
    Ok((rekeyed, deleted))
}
