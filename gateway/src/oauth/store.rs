//! The OAuth rows of the state database (schema v3): clients, grants, authorization codes, and
//! access/refresh tokens, every secret as its keyed hash only (`common::hash::stored_secret_hash`
//! under the server key: a database writer cannot plant a token or code of their own, red team
//! 27b R2; the hashing happens here, callers pass the secrets). Each protocol step (the owner's
//! approval, code exchange, refresh, revocation) is one immediate transaction, so a refusal leaves
//! nothing behind and two racing requests cannot both use one code or one refresh token.
//!
//! A client's row is written only by the owner: when they approve it (with its first code) or
//! revoke it. Registration stores nothing (its id is signed, `client_id.rs`), so nothing a
//! stranger does adds a row; rows of clients an older gateway registered (schema 3) are read
//! as before.
//!
//! The gateway opens its own connection for these tables beside the session store's (same file,
//! WAL): the gateway process stays the database's only writer; OAuth traffic just does not queue
//! behind session work on the session store's lock.

use common::admin::RevokedKind;
use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::OAuthError;
pub use super::error::OAuthStoreError;
use super::revoked::{GrantFacts, Ledger, Pending, Revoked};

/// A client's row: one the owner approved or revoked, or one an older gateway registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRow {
    pub client_id: String,
    pub client_name: Option<String>,
    pub redirect_uris: Vec<String>,
    pub created_at_ms: i64,
}

/// An authorization code as the consent step stores it.
#[derive(Debug, Clone)]
pub struct CodeRow {
    pub client_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub resource: String,
    pub scope: String,
    pub expires_at_ms: i64,
}

impl CodeRow {
    /// A digest of the request the code answers (client, redirect URI, PKCE challenge, resource,
    /// scope), carried inside the code under its keyed hash: the row's columns edited at rest
    /// (another challenge: red team 28 B6) no longer match the code.
    fn binding(&self) -> String {
        let fields = serde_json::json!([
            self.client_id,
            self.redirect_uri,
            self.code_challenge,
            self.resource,
            self.scope
        ]);
        let mut digest = common::hash::canonical_sha256(&fields);
        digest.truncate(32);
        digest
    }
}

/// What a token request presents besides its code or refresh token.
#[derive(Debug, Clone)]
pub struct TokenRequest<'a> {
    pub client_id: &'a str,
    /// `resource` (RFC 8707), if the client sent one.
    pub resource: Option<&'a str>,
    /// This gateway's resource: the audience of every token it issues.
    pub our_resource: &'a str,
    pub now_ms: i64,
    pub access_ttl_ms: i64,
    pub refresh_ttl_ms: i64,
}

/// A fresh access/refresh token pair (the plain values, returned once and never stored).
#[derive(Debug, Clone)]
pub struct IssuedTokens {
    pub access_token: String,
    pub refresh_token: String,
    pub expires_in_s: i64,
    pub scope: String,
}

/// What the store knows of a client id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientStatus {
    Active(ClientRow),
    /// The owner revoked it: refused even when its signature verifies.
    Revoked,
}

/// The OAuth tables, on the gateway's own connection.
pub struct OAuthStore {
    conn: Mutex<Connection>,
    /// The server key the secrets are hashed under.
    key: String,
    /// The revoked grants and clients as the chained ledger holds them (the columns are not
    /// trusted to keep a revocation: issue 27).
    revoked: Revoked,
    /// How often each grant may refresh (red team 29 B5).
    refresh_pace: crate::pace::Pace,
    /// The state dir's budget each refresh is charged to, once the gateway set it.
    state_budget: std::sync::OnceLock<crate::state_budget::StateBudget>,
}

/// Purposes of the stored hashes (`stored_secret_hash`): one kind never passes for another.
const CODE: &str = "oauth-code";
const ACCESS: &str = "oauth-access";
const REFRESH: &str = "oauth-refresh";

type Outcome<T> = Result<Result<T, OAuthError>, OAuthStoreError>;

impl OAuthStore {
    /// Open the state database of `state_dir` (created and migrated by the session store first);
    /// `key` is the server key, `ledger` the session store that chains revocations.
    pub fn open(
        state_dir: &Path,
        key: &str,
        ledger: std::sync::Arc<dyn Ledger>,
    ) -> Result<OAuthStore, OAuthStoreError> {
        let conn = crate::state::open_connection(&state_dir.join(crate::state::DATABASE_FILE))?;
        let revoked = Revoked::load(ledger, &conn)?;
        Ok(OAuthStore {
            conn: Mutex::new(conn),
            key: key.to_string(),
            revoked,
            refresh_pace: super::refresh_pace::refresh_pace(),
            state_budget: std::sync::OnceLock::new(),
        })
    }

    /// Charge each refresh's rows to `budget` (red team 29 B5: refreshes grew the state dir past
    /// a full budget, uncharged).
    pub fn charge_refreshes_to(&self, budget: crate::state_budget::StateBudget) {
        let _ = self.state_budget.set(budget);
    }

    fn hash(&self, purpose: &str, secret: &str) -> String {
        common::hash::stored_secret_hash(&self.key, purpose, secret)
    }

    /// Run `f` in an immediate transaction, committed when `f` returns `Ok` (whatever the OAuth
    /// outcome inside: a detected reuse revokes a grant *and* refuses the request). What `f`
    /// revokes is refused from before the commit and chained right after it (a failure to chain
    /// is an error: the answer is `server_error`, the next open chains it from the column).
    fn write<T>(
        &self,
        f: impl FnOnce(&Transaction<'_>, &mut Pending) -> Outcome<T>,
    ) -> Result<T, OAuthError> {
        let mut conn = self
            .conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(OAuthStoreError::from)?;
        let mut pending = Pending::default();
        let outcome = f(&tx, &mut pending)?;
        self.revoked.note(&pending);
        tx.commit().map_err(OAuthStoreError::from)?;
        // The OAuth connection's write lock is released: the session store may write now.
        drop(conn);
        self.revoked.record(&pending)?;
        outcome
    }

    /// Whether `client_id` has a row, and whether it is revoked (by the chain or the row).
    fn client_status_in(
        &self,
        conn: &Connection,
        client_id: &str,
    ) -> Result<Option<ClientStatus>, OAuthStoreError> {
        if self.revoked.client(client_id) {
            return Ok(Some(ClientStatus::Revoked));
        }
        client_status(conn, client_id)
    }

    fn client_active(&self, conn: &Connection, client_id: &str) -> Result<bool, OAuthStoreError> {
        Ok(matches!(
            self.client_status_in(conn, client_id)?,
            Some(ClientStatus::Active(_))
        ))
    }

    fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, OAuthStoreError>,
    ) -> Result<T, OAuthStoreError> {
        let conn = self
            .conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&conn)
    }

    /// Whether `client_id` has a row, and whether it is revoked.
    pub fn client_status(&self, client_id: &str) -> Result<Option<ClientStatus>, OAuthStoreError> {
        self.read(|conn| self.client_status_in(conn, client_id))
    }

    /// The owner approved `client` for the request `row` describes: its row written (first
    /// approval) or its redirect URI added, and a new code stored, in one transaction; the code
    /// is returned. A client revoked meanwhile is refused and nothing is written.
    pub fn approve(&self, client: &super::Client, row: &CodeRow) -> Result<String, OAuthError> {
        let code = bound_code(row);
        let code_hash = self.hash(CODE, &code);
        self.write(|tx, _| {
            match self.client_status_in(tx, &client.client_id)? {
                Some(ClientStatus::Revoked) => {
                    return Ok(Err(OAuthError::invalid_client(
                        "client_id was revoked by the gateway's owner meanwhile",
                    )));
                }
                Some(ClientStatus::Active(mut stored)) => {
                    if !stored.redirect_uris.contains(&row.redirect_uri) {
                        stored.redirect_uris.push(row.redirect_uri.clone());
                        tx.execute(
                            "UPDATE oauth_clients SET redirect_uris = ?2 WHERE client_id = ?1",
                            params![
                                client.client_id,
                                serde_json::to_string(&stored.redirect_uris)?
                            ],
                        )?;
                    }
                }
                None => {
                    tx.execute(
                        "INSERT INTO oauth_clients
                         (client_id, client_name, redirect_uris, created_at_ms)
                         VALUES (?1, ?2, ?3, ?4)",
                        params![
                            client.client_id,
                            client.client_name,
                            serde_json::to_string(&[&row.redirect_uri])?,
                            client.issued_at_ms
                        ],
                    )?;
                }
            }
            insert_code(tx, &code_hash, row)?;
            Ok(Ok(()))
        })?;
        Ok(code)
    }

    /// Exchange an authorization code: every check, then the grant and its first tokens, in one
    /// transaction. A code presented again revokes the grant it created (RFC 6749 §4.1.2).
    pub fn exchange_code(
        &self,
        code: &str,
        redirect_uri: &str,
        verifier: &str,
        request: &TokenRequest<'_>,
    ) -> Result<IssuedTokens, OAuthError> {
        let presented = code;
        let code_hash = &self.hash(CODE, code);
        let carried_expiry = embedded_expiry(code);
        self.write(|tx, pending| {
            if !self.client_active(tx, request.client_id)? {
                return Ok(Err(unknown_client()));
            }
            let row = tx
                .query_row(
                    "SELECT client_id, redirect_uri, code_challenge, resource, scope,
                            expires_at_ms, grant_id
                     FROM oauth_codes WHERE code_hash = ?1",
                    [code_hash],
                    |r| {
                        Ok((
                            CodeRow {
                                client_id: r.get(0)?,
                                redirect_uri: r.get(1)?,
                                code_challenge: r.get(2)?,
                                resource: r.get(3)?,
                                scope: r.get(4)?,
                                expires_at_ms: r.get(5)?,
                            },
                            r.get::<_, Option<String>>(6)?,
                        ))
                    },
                )
                .optional()?;
            let Some((code, used_by)) = row else {
                return Ok(Err(OAuthError::invalid_grant(
                    "the authorization code is not valid",
                )));
            };
            // Used, by the column or by the chain (a column reset at rest does not unuse it).
            if let Some(grant_id) = used_by.or_else(|| self.revoked.code_grant(code_hash)) {
                revoke_grant(
                    tx,
                    pending,
                    &grant_id,
                    request.now_ms,
                    "authorization code reused",
                )?;
                return Ok(Err(OAuthError::invalid_grant(
                    "the authorization code was already used; the tokens issued for it are \
                     revoked: authorize again",
                )));
            }
            // After the reuse check: a used code presented again revokes its grant, whatever its
            // row says now.
            if bound_part(presented) != Some(code.binding().as_str()) {
                return Ok(Err(OAuthError::invalid_grant(
                    "the authorization code does not match the request it was issued for: \
                     authorize again",
                )));
            }
            if code.client_id != request.client_id {
                return Ok(Err(OAuthError::invalid_grant(
                    "the authorization code was issued to another client",
                )));
            }
            // The expiry the code carries; the column only for a code of before this build.
            if carried_expiry.unwrap_or(code.expires_at_ms) <= request.now_ms {
                return Ok(Err(OAuthError::invalid_grant(
                    "the authorization code has expired: authorize again",
                )));
            }
            if code.redirect_uri != redirect_uri {
                return Ok(Err(OAuthError::invalid_grant(
                    "redirect_uri does not match the one of the authorization request",
                )));
            }
            if !super::credentials::pkce_matches(verifier, &code.code_challenge) {
                return Ok(Err(OAuthError::invalid_grant(
                    "code_verifier does not match the code_challenge of the authorization request",
                )));
            }
            if let Err(err) = same_resource(request, &code.resource) {
                return Ok(Err(err));
            }
            let grant_id = format!("grant_{}", uuid::Uuid::new_v4().simple());
            tx.execute(
                "INSERT INTO oauth_grants
                 (grant_id, client_id, resource, scope, redirect_uri, created_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    grant_id,
                    code.client_id,
                    code.resource,
                    code.scope,
                    code.redirect_uri,
                    request.now_ms
                ],
            )?;
            tx.execute(
                "UPDATE oauth_codes SET grant_id = ?2 WHERE code_hash = ?1",
                params![code_hash, grant_id],
            )?;
            let tokens = self.issue_tokens(tx, &grant_id, &code.scope, request)?;
            let expires = carried_expiry.unwrap_or(code.expires_at_ms);
            pending.granted.push((
                grant_id.clone(),
                GrantFacts {
                    client: code.client_id.clone(),
                    resource: code.resource.clone(),
                    scope: code.scope.clone(),
                },
            ));
            pending.codes.push((code_hash.clone(), grant_id, expires));
            Ok(Ok(tokens))
        })
    }

    /// Rotate a refresh token: the old one is spent, a new pair is issued. A spent refresh token
    /// presented again revokes the whole grant (reuse detection).
    pub fn refresh(
        &self,
        refresh: &str,
        request: &TokenRequest<'_>,
    ) -> Result<IssuedTokens, OAuthError> {
        let refresh_hash = &self.hash(REFRESH, refresh);
        self.write(|tx, pending| {
            if !self.client_active(tx, request.client_id)? {
                return Ok(Err(unknown_client()));
            }
            let row = tx
                .query_row(
                    "SELECT t.grant_id, t.expires_at_ms, t.rotated_at_ms, g.client_id,
                            g.resource, g.revoked_at_ms
                     FROM oauth_tokens t JOIN oauth_grants g ON g.grant_id = t.grant_id
                     WHERE t.token_hash = ?1 AND t.kind = 'refresh'",
                    [refresh_hash],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, Option<i64>>(2)?,
                            r.get::<_, String>(3)?,
                            r.get::<_, String>(4)?,
                            r.get::<_, Option<i64>>(5)?,
                        ))
                    },
                )
                .optional()?;
            let Some((grant_id, expires_at_ms, rotated, client_id, resource, revoked)) = row else {
                return Ok(Err(OAuthError::invalid_grant(
                    "the refresh token is not valid (unknown here, or issued before this \
                     gateway stored tokens keyed): authorize again",
                )));
            };
            // What the grant was made for, as chained when it was made: its row's client,
            // resource and scope are unsealed columns (red team 30 N7).
            let Some(facts) = self.revoked.grant_facts(&grant_id) else {
                return Ok(Err(OAuthError::invalid_grant(
                    "the refresh token's grant is not one this gateway recorded: authorize again",
                )));
            };
            if client_id != request.client_id || facts.client != request.client_id {
                return Ok(Err(OAuthError::invalid_grant(
                    "the refresh token was issued to another client",
                )));
            }
            // Bound to the grant it was issued for. One of before tokens named their grant is
            // refused (red team 28 B5: its row's grant is an unsealed column, so a revoked grant
            // could be revived at rest through it): the client authorizes again, once.
            match bound_part(refresh) {
                Some(bound) if bound == grant_id => {}
                Some(_) => {
                    return Ok(Err(OAuthError::invalid_grant(
                        "the refresh token does not belong to the grant its row names: \
                         authorize again",
                    )));
                }
                None => {
                    return Ok(Err(OAuthError::invalid_grant(
                        "the refresh token was issued by an older version of this gateway, \
                         before tokens named their grant: authorize again",
                    )));
                }
            }
            if revoked.is_some()
                || self.revoked.grant(&grant_id)
                || self.revoked.client(&facts.client)
            {
                return Ok(Err(OAuthError::invalid_grant(
                    "the grant of this refresh token was revoked: authorize again",
                )));
            }
            // Spent, by the column or by the chain (a column reset at rest does not unspend it).
            if rotated.is_some() || self.revoked.spent(refresh_hash) {
                revoke_grant(
                    tx,
                    pending,
                    &grant_id,
                    request.now_ms,
                    "refresh token reused",
                )?;
                return Ok(Err(OAuthError::invalid_grant(
                    "the refresh token was already used; the whole grant is revoked: authorize \
                     again",
                )));
            }
            if expiry(refresh, expires_at_ms) <= request.now_ms {
                return Ok(Err(OAuthError::invalid_grant(
                    "the refresh token has expired: authorize again",
                )));
            }
            if let Err(err) = same_resource(request, &resource)
                .and_then(|()| same_resource(request, &facts.resource))
            {
                return Ok(Err(err));
            }
            // Last, after every check that refuses the token itself (a spent one still revokes
            // the grant), and before anything is consumed.
            if let Err(retry_after_s) = self.refresh_pace.take(&grant_id, request.now_ms) {
                return Ok(Err(OAuthError::refresh_too_often(retry_after_s)));
            }
            tx.execute(
                "UPDATE oauth_tokens SET rotated_at_ms = ?2 WHERE token_hash = ?1",
                params![refresh_hash, request.now_ms],
            )?;
            pending
                .spent
                .push((refresh_hash.clone(), expiry(refresh, expires_at_ms)));
            tx.execute(
                "UPDATE oauth_grants SET refreshed_at_ms = ?2 WHERE grant_id = ?1",
                params![grant_id, request.now_ms],
            )?;
            let tokens = self.issue_tokens(tx, &grant_id, &facts.scope, request)?;
            Ok(Ok(tokens))
        })
        .inspect(|_| {
            if let Some(budget) = self.state_budget.get() {
                budget.charge(super::refresh_pace::REFRESH_COST_BYTES);
            }
        })
    }

    /// Whether the access token `token` is live for `audience` at `now_ms`.
    pub fn access_token_valid(
        &self,
        token: &str,
        audience: &str,
        now_ms: i64,
    ) -> Result<bool, OAuthStoreError> {
        let token_hash = self.hash(ACCESS, token);
        self.read(|conn| {
            let row = conn
                .query_row(
                    "SELECT t.audience, t.expires_at_ms, g.revoked_at_ms, c.revoked_at_ms,
                            g.grant_id, g.client_id
                     FROM oauth_tokens t
                     JOIN oauth_grants g ON g.grant_id = t.grant_id
                     JOIN oauth_clients c ON c.client_id = g.client_id
                     WHERE t.token_hash = ?1 AND t.kind = 'access'",
                    [&token_hash],
                    |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, Option<i64>>(2)?,
                            r.get::<_, Option<i64>>(3)?,
                            r.get::<_, String>(4)?,
                            r.get::<_, String>(5)?,
                        ))
                    },
                )
                .optional()?;
            // The expiry and the grant the token itself carries (bound by its keyed hash), not
            // the row's; a token of before this build carries neither and is refused (the
            // client refreshes).
            let (Some(expires), Some(bound)) = (embedded_expiry(token), bound_part(token)) else {
                return Ok(false);
            };
            // The grant's chained facts decide, not its row's columns (red team 30 N7).
            let Some(facts) = self.revoked.grant_facts(bound) else {
                return Ok(false);
            };
            Ok(matches!(row, Some((aud, _, None, None, grant, client))
                if aud == audience && facts.resource == audience && expires > now_ms
                    && grant == bound && client == facts.client
                    && !self.revoked.grant(&grant) && !self.revoked.client(&facts.client)))
        })
    }

    /// Revoke the grant or the client (with all its grants) named `id`; `None` if neither exists.
    /// `signed` is the client `id` names when it is a signed id this gateway issued: one the
    /// owner never approved has no row yet, and gets a revoked one, so it is refused from now on.
    pub fn revoke(
        &self,
        id: &str,
        signed: Option<&super::Client>,
        now_ms: i64,
    ) -> Result<Option<RevokedKind>, OAuthError> {
        self.write(|tx, pending| {
            let grant: Option<String> = tx
                .query_row(
                    "SELECT grant_id FROM oauth_grants WHERE grant_id = ?1",
                    [id],
                    |r| r.get(0),
                )
                .optional()?;
            if grant.is_some() {
                revoke_grant(tx, pending, id, now_ms, "revoked by the owner")?;
                return Ok(Ok(Some(RevokedKind::Grant)));
            }
            let client: Option<String> = tx
                .query_row(
                    "SELECT client_id FROM oauth_clients WHERE client_id = ?1",
                    [id],
                    |r| r.get(0),
                )
                .optional()?;
            if client.is_none() {
                let Some(signed) = signed else {
                    return Ok(Ok(None));
                };
                tx.execute(
                    "INSERT INTO oauth_clients
                     (client_id, client_name, redirect_uris, created_at_ms, revoked_at_ms)
                     VALUES (?1, ?2, '[]', ?3, ?4)",
                    params![id, signed.client_name, signed.issued_at_ms, now_ms],
                )?;
                pending.clients.push(id.to_string());
                pending.reason = "client revoked by the owner";
                return Ok(Ok(Some(RevokedKind::Client)));
            }
            tx.execute(
                "UPDATE oauth_clients SET revoked_at_ms = ?2
                 WHERE client_id = ?1 AND revoked_at_ms IS NULL",
                params![id, now_ms],
            )?;
            tx.execute(
                "UPDATE oauth_grants SET revoked_at_ms = ?2, revoked_reason = 'client revoked by the owner'
                 WHERE client_id = ?1 AND revoked_at_ms IS NULL",
                params![id, now_ms],
            )?;
            // The client's grants are refused through the client (every check consults both).
            pending.clients.push(id.to_string());
            pending.reason = "client revoked by the owner";
            Ok(Ok(Some(RevokedKind::Client)))
        })
    }
}

fn insert_code(
    tx: &Transaction<'_>,
    code_hash: &str,
    code: &CodeRow,
) -> Result<(), OAuthStoreError> {
    tx.execute(
        "INSERT INTO oauth_codes
         (code_hash, client_id, redirect_uri, code_challenge, resource, scope, expires_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            code_hash,
            code.client_id,
            code.redirect_uri,
            code.code_challenge,
            code.resource,
            code.scope,
            code.expires_at_ms
        ],
    )?;
    Ok(())
}

fn unknown_client() -> OAuthError {
    OAuthError::invalid_client("client_id is not a registered client of this gateway")
}

/// The resource a token request names (if any) and the one the grant was made for must both be
/// this gateway's resource.
fn same_resource(request: &TokenRequest<'_>, granted: &str) -> Result<(), OAuthError> {
    if let Some(asked) = request.resource
        && asked != granted
    {
        return Err(OAuthError::invalid_target(
            "resource is not the resource this grant was made for",
        ));
    }
    if granted != request.our_resource {
        return Err(OAuthError::invalid_target(
            "this grant was made for another resource (the gateway's public address changed): \
             authorize again",
        ));
    }
    Ok(())
}

fn client_status(
    conn: &Connection,
    client_id: &str,
) -> Result<Option<ClientStatus>, OAuthStoreError> {
    let row = conn
        .query_row(
            "SELECT client_id, client_name, redirect_uris, created_at_ms, revoked_at_ms
             FROM oauth_clients WHERE client_id = ?1",
            [client_id],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, i64>(3)?,
                    r.get::<_, Option<i64>>(4)?,
                ))
            },
        )
        .optional()?;
    row.map(|(client_id, client_name, uris, created_at_ms, revoked)| {
        Ok(match revoked {
            Some(_) => ClientStatus::Revoked,
            None => ClientStatus::Active(ClientRow {
                client_id,
                client_name,
                redirect_uris: serde_json::from_str(&uris)?,
                created_at_ms,
            }),
        })
    })
    .transpose()
}

/// Revoke a grant: its row now, the chained event once the transaction committed.
fn revoke_grant(
    tx: &Transaction<'_>,
    pending: &mut Pending,
    grant_id: &str,
    now_ms: i64,
    reason: &'static str,
) -> Result<(), OAuthStoreError> {
    pending.grants.push(grant_id.to_string());
    pending.reason = reason;
    tx.execute(
        "UPDATE oauth_grants SET revoked_at_ms = ?2, revoked_reason = ?3
         WHERE grant_id = ?1 AND revoked_at_ms IS NULL",
        params![grant_id, now_ms, reason],
    )?;
    Ok(())
}

impl OAuthStore {
    fn issue_tokens(
        &self,
        tx: &Transaction<'_>,
        grant_id: &str,
        scope: &str,
        request: &TokenRequest<'_>,
    ) -> Result<IssuedTokens, OAuthStoreError> {
        // Spent and expired tokens past any use: an expired refresh token is refused either way.
        tx.execute(
            "DELETE FROM oauth_tokens WHERE expires_at_ms < ?1",
            [request.now_ms],
        )?;
        let access_expires = request.now_ms + request.access_ttl_ms;
        let refresh_expires = request.now_ms + request.refresh_ttl_ms;
        let access_token = bound_token(
            super::credentials::ACCESS_TOKEN_KIND,
            grant_id,
            access_expires,
        );
        let refresh_token = bound_token(
            super::credentials::REFRESH_TOKEN_KIND,
            grant_id,
            refresh_expires,
        );
        let mut insert = tx.prepare(
            "INSERT INTO oauth_tokens (token_hash, kind, grant_id, audience, expires_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        )?;
        insert.execute(params![
            self.hash(ACCESS, &access_token),
            "access",
            grant_id,
            request.our_resource,
            access_expires
        ])?;
        insert.execute(params![
            self.hash(REFRESH, &refresh_token),
            "refresh",
            grant_id,
            request.our_resource,
            refresh_expires
        ])?;
        Ok(IssuedTokens {
            access_token,
            refresh_token,
            expires_in_s: request.access_ttl_ms / 1000,
            scope: scope.to_string(),
        })
    }
}

/// A refresh token stored for `grant_id` as a gateway of before this build left it: one that
/// names its grant (`<kind>_<secret>.<grant_id>.<expires_at_ms>`) or, with `names_grant` false,
/// one of before tokens named it (`<kind>_<secret>.<expires_at_ms>`).
#[cfg(test)]
impl OAuthStore {
    pub(super) fn store_refresh(
        &self,
        grant_id: &str,
        expires_at_ms: i64,
        names_grant: bool,
    ) -> String {
        let kind = super::credentials::REFRESH_TOKEN_KIND;
        let token = if names_grant {
            bound_token(kind, grant_id, expires_at_ms)
        } else {
            format!("{}.{expires_at_ms}", common::hash::new_secret(kind))
        };
        let hash = self.hash(REFRESH, &token);
        self.write(|tx, _| {
            tx.execute(
                "INSERT INTO oauth_tokens (token_hash, kind, grant_id, audience, expires_at_ms)
                 VALUES (?1, 'refresh', ?2, '', ?3)",
                params![hash, grant_id, expires_at_ms],
            )?;
            Ok(Ok(()))
        })
        .expect("storing a refresh token");
        token
    }
}

/// A new token bound to its grant and carrying its expiry:
/// `<kind>_<secret>.<grant_id>.<expires_at_ms>`. Its keyed hash covers both, so neither a later
/// expiry nor another grant (red team 27 B1: tokens pointed at a copy of their revoked grant
/// row worked again) can be written into its row.
fn bound_token(kind: &str, grant_id: &str, expires_at_ms: i64) -> String {
    format!(
        "{}.{grant_id}.{expires_at_ms}",
        common::hash::new_secret(kind)
    )
}

/// A new authorization code for `row`: `<kind>_<secret>.<binding>.<expires_at_ms>` (see
/// [`CodeRow::binding`]).
fn bound_code(row: &CodeRow) -> String {
    format!(
        "{}.{}.{}",
        common::hash::new_secret(super::credentials::CODE_KIND),
        row.binding(),
        row.expires_at_ms
    )
}

/// The middle part of a token of [`bound_token`]'s format (its grant) or a code of
/// [`bound_code`]'s (its binding).
fn bound_part(token: &str) -> Option<&str> {
    let mut parts = token.split('.');
    let (_, grant, _) = (parts.next()?, parts.next()?, parts.next()?);
    parts.next().is_none().then_some(grant)
}

/// The expiry a token or code carries (its last part; the column serves only the clean-up, and
/// the keyed hash covers the whole value, so the expiry cannot be pushed later at rest).
fn embedded_expiry(token: &str) -> Option<i64> {
    let (_, expires) = token.rsplit_once('.')?;
    expires.parse().ok()
}

/// The expiry that decides a refresh token: the one it carries; for one issued before tokens
/// carried it, the column's (trusted on first use: such a token is rotated at its next use).
fn expiry(token: &str, column: i64) -> i64 {
    embedded_expiry(token).unwrap_or(column)
}
