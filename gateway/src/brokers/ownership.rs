//! Which broker belongs to which session: everything that ties a broker record to its session is
//! derived from the session id, never taken from the record alone — the runtime dir and socket
//! from the state dir and the session id, the secret from the server key, the session id and the
//! runner generation — so a database writer who moves a broker record to another session (or
//! edits one of its fields) gets it refused, not attached to the wrong session (red team 27, B3).
//! The broker's own handshake then proves it was started for that session and generation
//! (`common::hash::BrokerBinding`).

use std::path::{Path, PathBuf};

use common::hash::{BrokerBinding, constant_time_eq, hmac_hex};

use crate::state::BrokerRecord;

/// The broker runtime a session's record must describe: derived, never read from the record.
#[derive(Clone)]
pub struct BrokerOwner {
    pub session_id: String,
    pub generation: u32,
    /// `<state>/run/<first 12 hex digits of the id>`: the runner's HOME, the spec, the socket.
    pub runtime_dir: PathBuf,
    pub socket_path: PathBuf,
    /// The per-broker secret, derived from the server key (see [`broker_secret`]).
    pub secret: String,
}

impl std::fmt::Debug for BrokerOwner {
    // The secret stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerOwner")
            .field("session_id", &self.session_id)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl BrokerOwner {
    /// The runtime of generation `generation` of `session_id` under `state_dir`.
    pub fn derive(state_dir: &Path, server_key: &str, session_id: &str, generation: u32) -> Self {
        let runtime_dir = runtime_dir(state_dir, session_id);
        BrokerOwner {
            session_id: session_id.to_string(),
            generation,
            socket_path: runtime_dir.join("b.sock"),
            runtime_dir,
            secret: broker_secret(server_key, session_id, generation),
        }
    }

    /// What the broker's handshake must prove it serves.
    pub fn binding(&self) -> BrokerBinding<'_> {
        BrokerBinding {
            session_id: &self.session_id,
            generation: self.generation,
        }
    }

    /// Whether `record` describes this runtime: its generation, runtime dir, socket and secret
    /// are the derived ones. Its process identity (pid, start time, boot) cannot be derived; the
    /// handshake checks it (the socket's peer must be the recorded pid, and the broker behind the
    /// derived socket must prove this session and generation).
    pub fn check(&self, record: &BrokerRecord) -> Result<(), NotThisSessions> {
        if Path::new(&record.runtime_dir) != self.runtime_dir {
            return Err(NotThisSessions::RuntimeDir);
        }
        if Path::new(&record.socket_path) != self.socket_path {
            return Err(NotThisSessions::SocketPath);
        }
        if record.generation == 0 {
            return Err(NotThisSessions::Unbound);
        }
        if record.generation != self.generation {
            return Err(NotThisSessions::Generation);
        }
        if !constant_time_eq(record.secret.as_bytes(), self.secret.as_bytes()) {
            return Err(NotThisSessions::Secret);
        }
        Ok(())
    }
}

impl BrokerOwner {
    /// Whether `record` names this session's own places and secret, or is an older build's
    /// record at its own places (no generation): a record signals may be sent through.
    pub fn at_own_places(&self, record: &BrokerRecord) -> bool {
        matches!(self.check(record), Ok(()) | Err(NotThisSessions::Unbound))
    }
}

/// `<state>/run/<first 12 hex digits of the session id>`: short, so the socket path fits
/// `sun_path`.
pub fn runtime_dir(state_dir: &Path, session_id: &str) -> PathBuf {
    state_dir
        .join("run")
        .join(crate::runtime_area::session_dir_name(session_id))
}

/// The secret of generation `generation` of `session_id`'s broker: HMAC-SHA256 under the server
/// key, so only this gateway can compute it and a record moved to another session carries a
/// secret that session does not derive.
pub fn broker_secret(server_key: &str, session_id: &str, generation: u32) -> String {
    let message = common::hash::canonical_json(&serde_json::json!([
        "broker-secret:v1",
        session_id,
        generation
    ]));
    format!("brk_{}", hmac_hex(server_key, &message))
}

/// Why a broker record is not the session's own. The words go into the session's
/// `runtime_lost` reason and the log; none names a path, pid or secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotThisSessions {
    #[error(
        "the broker record was written by a gateway older than session-bound brokers, so its \
         broker cannot prove which session it serves"
    )]
    Unbound,
    #[error("the broker record names another runner generation than the one it was started for")]
    Generation,
    #[error("the broker record names another session's runtime directory")]
    RuntimeDir,
    #[error("the broker record names another session's socket")]
    SocketPath,
    #[error("the broker record holds a secret this session's broker does not have")]
    Secret,
}

/// Whether an attach error proves the record is not this session's broker (as opposed to a
/// broker that is merely gone or slow, or one of an older build at this session's own places):
/// the record failed the derivation, or the handshake proved it another's
/// (`ConnectError::disowns_record`). Such a record is dropped from the session, so nothing — no
/// signal, no re-attach — is ever sent through it again.
pub fn disowns(err: &anyhow::Error) -> bool {
    if let Some(refusal) = err.downcast_ref::<NotThisSessions>() {
        // At the session's own places: a broker of an older build, still this session's; it
        // is kept, so it can still be stopped before a new generation starts.
        return *refusal != NotThisSessions::Unbound;
    }
    err.downcast_ref::<super::ConnectError>()
        .is_some_and(super::ConnectError::disowns_record)
}

#[cfg(test)]
mod tests;
