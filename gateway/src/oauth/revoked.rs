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
//!
//! A refresh token spent by rotation is recorded the same way (`oauth_refresh_spent`, the
//! SHA-256 of its keyed hash and its expiry): a `rotated_at_ms` reset at rest does not make it
//! usable again, its next use is a reuse and revokes the grant. Entries past their token's
//! expiry are not loaded (an expired token is refused anyway). An authorization code's use is
//! recorded likewise (`oauth_code_used`, with the grant it made): a `grant_id` reset at rest
//! does not make it usable again, its next use revokes that grant.
//!
//! A grant's facts — its client, resource and scope — are chained when it is made
//! (`oauth_granted`; a grant of before this build at the next open, trust on first use) and
//! decide every token check, not its row (red team 30 N7: a token's audience and its grant's
//! resource edited at rest made tokens of an old public address work again; a grant pointed at a
//! copy of its revoked client's row gave its access token back).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use serde_json::{Value, json};

use super::error::OAuthStoreError;

/// Kind of the ledger event that records revocations.
pub const OAUTH_REVOKED: &str = "oauth_revoked";
/// Kind of the ledger event that records refresh tokens spent by rotation.
pub const REFRESH_SPENT: &str = "oauth_refresh_spent";
/// Kind of the ledger event that records authorization codes exchanged.
pub const CODE_USED: &str = "oauth_code_used";
/// Kind of the ledger event that records grants made, with their facts.
pub const GRANTED: &str = "oauth_granted";

/// What a grant was made for, as chained when it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantFacts {
    pub client: String,
    pub resource: String,
    pub scope: String,
}

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
    /// Refresh tokens spent by rotation: (stored keyed hash, expiry).
    pub spent: Vec<(String, i64)>,
    /// Authorization codes exchanged: (stored keyed hash, the grant made, expiry).
    pub codes: Vec<(String, String, i64)>,
    /// Grants made: (grant id, its facts).
    pub granted: Vec<(String, GrantFacts)>,
}

impl Pending {
    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
            && self.clients.is_empty()
            && self.spent.is_empty()
            && self.codes.is_empty()
            && self.granted.is_empty()
    }
}

#[derive(Debug, Default)]
struct Ids {
    grants: HashSet<String>,
    clients: HashSet<String>,
    /// SHA-256 of a spent refresh token's stored hash → its expiry.
    spent: HashMap<String, i64>,
    /// SHA-256 of an exchanged code's stored hash → the grant it made.
    codes: HashMap<String, String>,
    /// Grant id → what it was made for.
    granted: HashMap<String, GrantFacts>,
}

/// What the ledger names a spent refresh token by (not the stored hash itself: a ledger
/// reader cannot look the row up by it).
fn spent_name(token_hash: &str) -> String {
    common::hash::sha256_hex(token_hash.as_bytes())
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
        let now = common::time::now_unix_ms();
        let spent = ledger.state().read(|tx| tx.events_of_kind(REFRESH_SPENT))?;
        for data in spent {
            let tokens = data.get("tokens").and_then(Value::as_array);
            for token in tokens.into_iter().flatten() {
                let name = token.get("token").and_then(Value::as_str);
                let expires = token.get("expires_at_ms").and_then(Value::as_i64);
                if let (Some(name), Some(expires)) = (name, expires)
                    && expires > now
                {
                    ids.spent.insert(name.to_string(), expires);
                }
            }
        }
        for data in ledger.state().read(|tx| tx.events_of_kind(CODE_USED))? {
            let codes = data.get("codes").and_then(Value::as_array);
            for code in codes.into_iter().flatten() {
                let field = |k: &str| code.get(k).and_then(Value::as_str).map(str::to_string);
                let expires = code.get("expires_at_ms").and_then(Value::as_i64);
                if let (Some(name), Some(grant), Some(expires)) =
                    (field("code"), field("grant"), expires)
                    && expires > now
                {
                    ids.codes.insert(name, grant);
                }
            }
        }
        for data in ledger.state().read(|tx| tx.events_of_kind(GRANTED))? {
            let grants = data.get("grants").and_then(Value::as_array);
            for grant in grants.into_iter().flatten() {
                let field = |k: &str| grant.get(k).and_then(Value::as_str).map(str::to_string);
                if let (Some(id), Some(client), Some(resource), Some(scope)) = (
                    field("grant"),
                    field("client"),
                    field("resource"),
                    field("scope"),
                ) {
                    // The first record of a grant holds: a later one cannot re-make it.
                    ids.granted.entry(id).or_insert(GrantFacts {
                        client,
                        resource,
                        scope,
                    });
                }
            }
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
            spent: column_spent(conn)?
                .into_iter()
                .filter(|(hash, expires)| {
                    *expires > now && !ids.spent.contains_key(&spent_name(hash))
                })
                .collect(),
            codes: column_codes(conn)?
                .into_iter()
                .filter(|(hash, _, expires)| {
                    *expires > now && !ids.codes.contains_key(&spent_name(hash))
                })
                .collect(),
            granted: column_grants(conn)?
                .into_iter()
                .filter(|(id, _)| !ids.granted.contains_key(id))
                .collect(),
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

    /// The grant the code stored as `code_hash` was exchanged for, if it was.
    pub fn code_grant(&self, code_hash: &str) -> Option<String> {
        self.ids().codes.get(&spent_name(code_hash)).cloned()
    }

    /// What the grant `grant_id` was made for, as chained; `None` for a grant the chain does not
    /// know (its tokens are refused).
    pub fn grant_facts(&self, grant_id: &str) -> Option<GrantFacts> {
        self.ids().granted.get(grant_id).cloned()
    }

    /// Whether the refresh token stored as `token_hash` was spent by a rotation.
    pub fn spent(&self, token_hash: &str) -> bool {
        self.ids().spent.contains_key(&spent_name(token_hash))
    }

    /// Refuse `pending`'s ids from now on (before their transaction commits: fail closed).
    pub fn note(&self, pending: &Pending) {
        let mut ids = self.ids();
        ids.grants.extend(pending.grants.iter().cloned());
        ids.clients.extend(pending.clients.iter().cloned());
        let spent = pending.spent.iter();
        ids.spent
            .extend(spent.map(|(hash, expires)| (spent_name(hash), *expires)));
        let codes = pending.codes.iter();
        ids.codes
            .extend(codes.map(|(hash, grant, _)| (spent_name(hash), grant.clone())));
        for (id, facts) in &pending.granted {
            ids.granted
                .entry(id.clone())
                .or_insert_with(|| facts.clone());
        }
    }

    /// Append `pending` to the chained ledger.
    pub fn record(&self, pending: &Pending) -> Result<(), OAuthStoreError> {
        if pending.is_empty() {
            return Ok(());
        }
        let reason = pending.reason;
        let grants = pending.grants.chunks(IDS_PER_EVENT);
        let clients = pending.clients.chunks(IDS_PER_EVENT);
        let spent = pending.spent.chunks(IDS_PER_EVENT);
        let events: Vec<(&str, Value)> = grants
            .map(|ids| json!({"grants": ids, "clients": [], "reason": reason}))
            .chain(clients.map(|ids| json!({"grants": [], "clients": ids, "reason": reason})))
            .map(|data| (OAUTH_REVOKED, data))
            .chain(spent.map(|tokens| {
                let tokens: Vec<Value> = tokens
                    .iter()
                    .map(|(hash, expires)| {
                        json!({"token": spent_name(hash), "expires_at_ms": expires})
                    })
                    .collect();
                (REFRESH_SPENT, json!({ "tokens": tokens }))
            }))
            .chain(pending.codes.chunks(IDS_PER_EVENT).map(|codes| {
                let codes: Vec<Value> = codes
                    .iter()
                    .map(|(hash, grant, expires)| {
                        json!({"code": spent_name(hash), "grant": grant, "expires_at_ms": expires})
                    })
                    .collect();
                (CODE_USED, json!({ "codes": codes }))
            }))
            .chain(pending.granted.chunks(IDS_PER_EVENT).map(|grants| {
                let grants: Vec<Value> = grants
                    .iter()
                    .map(|(id, f)| {
                        json!({"grant": id, "client": f.client, "resource": f.resource,
                               "scope": f.scope})
                    })
                    .collect();
                (GRANTED, json!({ "grants": grants }))
            }))
            .collect();
        self.ledger.state().write(|tx| {
            events
                .iter()
                .try_for_each(|(kind, data)| tx.append_event(None, kind, data))
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

/// Refresh tokens the columns say were spent: (stored hash, expiry).
fn column_spent(conn: &Connection) -> Result<Vec<(String, i64)>, OAuthStoreError> {
    let mut stmt = conn.prepare(
        "SELECT token_hash, expires_at_ms FROM oauth_tokens
         WHERE kind = 'refresh' AND rotated_at_ms IS NOT NULL",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Authorization codes the columns say were exchanged: (stored hash, grant, expiry).
fn column_codes(conn: &Connection) -> Result<Vec<(String, String, i64)>, OAuthStoreError> {
    let mut stmt = conn.prepare(
        "SELECT code_hash, grant_id, expires_at_ms FROM oauth_codes WHERE grant_id IS NOT NULL",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Every grant's facts as its row holds them (chained at the next open when the chain lacks them).
fn column_grants(conn: &Connection) -> Result<Vec<(String, GrantFacts)>, OAuthStoreError> {
    let mut stmt = conn.prepare("SELECT grant_id, client_id, resource, scope FROM oauth_grants")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            GrantFacts {
                client: r.get(1)?,
                resource: r.get(2)?,
                scope: r.get(3)?,
            },
        ))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}
