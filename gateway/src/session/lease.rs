//! Leases and recovery tokens: derived from the server key (so the store holds only their keyed
//! hashes, `state::secrets`, and a replay can return them again), checked and renewed on every
//! call, rotated by recovery.

use common::hash::{constant_time_eq, hmac_hex, sha256_hex};
use common::time::now_unix_ms;

use super::{Gateway, ToolResult};
use crate::error::{ErrorCode, ToolError};
use crate::state::{SessionRecord, StoreError, Tx};

impl Gateway {
    /// The lease id of generation `generation` of a session's lease.
    pub(crate) fn lease_id(&self, session_id: &str, generation: u32) -> String {
        crate::state::secrets::lease_id(&self.server_key, session_id, generation)
    }

    /// The session's recovery token (shown once, in start's answer).
    pub(crate) fn recovery_token(&self, session_id: &str) -> String {
        let mac = hmac_hex(&self.server_key, &format!("recovery:{session_id}"));
        format!("rec_{mac}")
    }

    /// Record lease `generation` of a session, expiring a lease TTL from now; the expiry.
    pub(crate) fn grant_lease(
        &self,
        tx: &Tx<'_>,
        session_id: &str,
        generation: u32,
    ) -> Result<i64, StoreError> {
        let expires = now_unix_ms() + self.config.lease_ttl.as_millis() as i64;
        let lease_id = self.lease_id(session_id, generation);
        tx.insert_lease(
            &crate::state::secrets::lease_hash(&self.server_key, session_id, &lease_id),
            session_id,
            generation,
            expires,
        )?;
        Ok(expires)
    }

    /// Renew `lease_id` of a session in place (a lease TTL from now): an ended session's recover
    /// hands its post-end lease out again without a new row.
    pub(crate) fn renew_lease(
        &self,
        tx: &Tx<'_>,
        session_id: &str,
        lease_id: &str,
    ) -> Result<(), StoreError> {
        let expires = now_unix_ms() + self.config.lease_ttl.as_millis() as i64;
        let hash = crate::state::secrets::lease_hash(&self.server_key, session_id, lease_id);
        tx.renew_lease(&hash, expires)
    }

    /// Check the lease, renew it, and return the session.
    pub(crate) fn authenticate(
        &self,
        session_id: &str,
        lease_id: &str,
    ) -> ToolResult<SessionRecord> {
        let now = now_unix_ms();
        let ttl = self.config.lease_ttl.as_millis() as i64;
        self.store.write(|tx| {
            let mut session = self.session(tx, session_id)?;
            if session.delegation.is_some() {
                // A sub-session has no lease: it is reached through its session's tools.
                return Err(ToolError::new(
                    ErrorCode::NotFound,
                    format!(
                        "{session_id:?} is a DeepSeek sub-session, not a session; use \
                         deepseek_subagent_get in the session that started it"
                    ),
                ));
            }
            // Keyed: a row a database writer stored for a lease of their own making never matches.
            // Only the session's current generation counts, whatever the row's `revoked` says:
            // the generation is in the chained record, the column is not, so a revocation (by
            // `recover`) cannot be undone by an edit made while the gateway is stopped.
            let hash = crate::state::secrets::lease_hash(&self.server_key, session_id, lease_id);
            let lease = tx.lease(&hash)?;
            let Some(lease) = lease.filter(|l| {
                l.session_id == session_id && l.generation == session.lease_generation && !l.revoked
            }) else {
                return Err(ToolError::new(
                    ErrorCode::LeaseInvalid,
                    "this lease_id is not the session's current lease; use the lease_id from the \
                     latest answer, or call native_session_recover with the recovery token",
                ));
            };
            if lease.expires_at_ms <= now {
                return Err(ToolError::new(
                    ErrorCode::LeaseExpired,
                    "the lease expired, and with it the session: its runner is stopped. Start a \
                     new session; native_session_recover with the recovery token gives a lease to \
                     read the final state",
                ));
            }
            tx.renew_lease(&hash, now + ttl)?;
            session.lease_renewed(now + ttl);
            tx.put_session(&session)?;
            Ok(session)
        })
    }

    /// Check a recovery token against an existing session (constant time).
    pub(crate) fn check_recovery_token(
        &self,
        session_id: &str,
        recovery_token: &str,
    ) -> ToolResult<SessionRecord> {
        let session = self.load(session_id)?;
        let expected = self.recovery_token(session_id);
        if !constant_time_eq(
            sha256_hex(expected.as_bytes()).as_bytes(),
            sha256_hex(recovery_token.as_bytes()).as_bytes(),
        ) {
            return Err(ToolError::new(
                ErrorCode::RecoveryDenied,
                "the recovery token does not match this session; nothing was changed. Use the \
                 recovery_token of native_session_start's answer for this native_session_id; \
                 without it, start a new session",
            ));
        }
        Ok(session)
    }
}
