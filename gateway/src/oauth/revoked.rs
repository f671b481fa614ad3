//! OAuth revocations as facts of the chained ledger (issue 27): every grant or client revoked
//! (by the owner, by reuse detection, by schema 6's upgrade) is an `oauth_revoked` event, and the
//! set of revoked ids, loaded from those events at open, is consulted on every token check. The
//! OAuth tables are outside the chain: a `revoked_at_ms` set back to NULL while the gateway is
//! stopped changes nothing, since a revocation is never taken back.
//!
//! Order: the id joins the in-memory set before the OAuth transaction commits, the event is
//! appended right after it; a column revoked but not chained (revoked before this build, or a
//! crash between the two commits) is recorded at the next open (trust on first use, like the
//! ledger baseline). The set only grows: a revocation found in either place holds.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use serde_json::{Value, json};

use super::store::OAuthStoreError;

/// Kind of the ledger event that records revocations.
pub const OAUTH_REVOKED: &str = "oauth_revoked";

/// Ids per event when many are recorded at once (the first open of an existing state dir).
const IDS_PER_EVENT: usize = 500;

/// Where the revocations are chained: the gateway's session store.
pub trait Ledger: Send + Sync {
    fn state(&self) -> &crate::state::Store;
}

impl Ledger for crate::state::Store {
    fn state(&self) -> &crate::state::Store {
        self
    }
}

impl Ledger for crate::session::Gateway {
    fn state(&self) -> &crate::state::Store {
        &self.store
    }
}

/// Revocations one OAuth transaction makes (chained once it committed).
#[derive(Debug, Default)]
pub struct Pending {
    pub grants: Vec<String>,
    pub clients: Vec<String>,
    pub reason: &'static str,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty() && self.clients.is_empty()
    }
}

#[derive(Debug, Default)]
struct Ids {
    grants: HashSet<String>,
    clients: HashSet<String>,
}

/// The revoked grant and client ids, as the chain and the columns say.
pub struct Revoked {
    ledger: Arc<dyn Ledger>,
    ids: Mutex<Ids>,
}

impl Revoked {
    /// Load the chained revocations, and chain the ones only the columns hold.
    pub fn load(ledger: Arc<dyn Ledger>, conn: &Connection) -> Result<Revoked, OAuthStoreError> {
        let events = ledger.state().read(|tx| tx.events_of_kind(OAUTH_REVOKED))?;
        let mut ids = Ids::default();
        for data in events {
            ids.grants.extend(strings(&data, "grants"));
            ids.clients.extend(strings(&data, "clients"));
        }
        let unchained = Pending {
            grants: column_revoked(conn, "SELECT grant_id FROM oauth_grants")?
                .into_iter()
                .filter(|id| !ids.grants.contains(id))
                .collect(),
            clients: column_revoked(conn, "SELECT client_id FROM oauth_clients")?
                .into_iter()
                .filter(|id| !ids.clients.contains(id))
                .collect(),
            reason: "revoked in the database before it was chained",
        };
        let revoked = Revoked {
            ledger,
            ids: Mutex::new(ids),
        };
        revoked.note(&unchained);
        revoked.record(&unchained)?;
        Ok(revoked)
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, Ids> {
        self.ids
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn grant(&self, grant_id: &str) -> bool {
        self.ids().grants.contains(grant_id)
    }

    pub fn client(&self, client_id: &str) -> bool {
        self.ids().clients.contains(client_id)
    }

    /// Refuse `pending`'s ids from now on (before their transaction commits: fail closed).
    pub fn note(&self, pending: &Pending) {
        let mut ids = self.ids();
        ids.grants.extend(pending.grants.iter().cloned());
        ids.clients.extend(pending.clients.iter().cloned());
    }

    /// Append `pending` to the chained ledger.
    pub fn record(&self, pending: &Pending) -> Result<(), OAuthStoreError> {
        if pending.is_empty() {
            return Ok(());
        }
        let data: Vec<Value> =
            pending
                .grants
                .chunks(IDS_PER_EVENT)
                .map(|grants| json!({"grants": grants, "clients": [], "reason": pending.reason}))
                .chain(pending.clients.chunks(IDS_PER_EVENT).map(
                    |clients| json!({"grants": [], "clients": clients, "reason": pending.reason}),
                ))
                .collect();
        self.ledger.state().write(|tx| {
            data.iter()
                .try_for_each(|data| tx.append_event(None, OAUTH_REVOKED, data))
        })?;
        Ok(())
    }
}

fn strings<'a>(data: &'a Value, field: &str) -> impl Iterator<Item = String> + 'a {
    data.get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|id| id.as_str().map(str::to_string))
}

/// The ids `select` names whose `revoked_at_ms` is set.
fn column_revoked(conn: &Connection, select: &str) -> Result<Vec<String>, OAuthStoreError> {
    let mut stmt = conn.prepare(&format!("{select} WHERE revoked_at_ms IS NOT NULL"))?;
    let ids = stmt.query_map([], |r| r.get::<_, String>(0))?;
    Ok(ids.collect::<Result<_, _>>()?)
}
