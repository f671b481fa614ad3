//! Signed consent requests: what the authorization endpoint puts in the consent page instead of
//! keeping the request in memory (issue 24 item 1). A request id is `ngr_` + base64url(`version`
//! ‖ `payload` ‖ `mac`) (`sealed.rs`, its own MAC label), the payload the compact JSON of
//! everything the decision needs — client id, redirect URI, PKCE challenge and method, `state`,
//! scope, resource, issue time — and the page code, 8 random characters that name the page to
//! the owner (`gatewayctl oauth approve <page code>`) and to an approval code. Opening a page
//! therefore spends nothing shared, and no cap can be filled; the decision post verifies the MAC
//! before it reads a byte of the payload, then the issue time (10 minutes).
//!
//! The page's CSRF token is not stored either: it is an HMAC of the request id under the server
//! key with its own label, so only this gateway can compute it, and it is in the form and in the
//! page's `SameSite=Strict` cookie like before.

use std::time::Duration;

use base64::Engine;
use rand::RngExt;
use serde::{Deserialize, Serialize};

use super::sealed::{SealError, Sealer, keyed_mac};

/// How long a consent page stays usable: its request id expires this long after its issue time.
pub const REQUEST_TTL: Duration = Duration::from_secs(10 * 60);

/// Prefix of every request id.
pub const PREFIX: &str = "ngr_";
/// The encoding this gateway issues; an id of another version is refused by name.
pub const VERSION: u8 = 1;
/// Longest request id accepted before anything is decoded: the largest request (a client id of
/// [`super::client_id::MAX_LEN`], a redirect URI of 2000 bytes, a `state` of 1024 bytes each
/// escaped to six in JSON, the resource), as base64, with margin.
pub const MAX_LEN: usize = 24 * 1024;
/// What the request id's MAC covers first.
const MAC_LABEL: &[u8] = b"oauth-consent-request\0";
/// What the CSRF token's MAC covers first.
const CSRF_LABEL: &[u8] = b"oauth-consent-csrf\0";
/// Letters and digits of page codes: lower case (approval codes are upper case, so the two are
/// not mistaken for one another), none that look alike (no 0/o, 1/i/l).
const PAGE_ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
/// Characters of a page code (≈ 40 bits).
pub const PAGE_CODE_LEN: usize = 8;

/// An authorization request the consent page was shown for, as its request id carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsentRequest {
    #[serde(rename = "c")]
    pub client_id: String,
    #[serde(rename = "u")]
    pub redirect_uri: String,
    #[serde(rename = "x")]
    pub code_challenge: String,
    /// Always `S256` (the only method accepted); kept so the code row says what was checked.
    #[serde(rename = "m")]
    pub code_challenge_method: String,
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(rename = "o")]
    pub scope: String,
    #[serde(rename = "r")]
    pub resource: String,
    /// When the page was opened (ms since the epoch).
    #[serde(rename = "t")]
    pub issued_at_ms: i64,
    /// The page code: random, shown on the page, named by the owner's approval code.
    #[serde(rename = "p")]
    pub page: String,
}

/// A fresh page code.
pub fn new_page_code() -> String {
    let mut rng = rand::rng();
    (0..PAGE_CODE_LEN)
        .map(|_| char::from(PAGE_ALPHABET[rng.random_range(0..PAGE_ALPHABET.len())]))
        .collect()
}

/// A page code as the owner types it (any case, spaces and dashes ignored), if it is one.
pub fn parse_page_code(typed: &str) -> Option<String> {
    let code: String = typed
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    (code.len() == PAGE_CODE_LEN && code.bytes().all(|b| PAGE_ALPHABET.contains(&b)))
        .then_some(code)
}

/// A page code as the page and gatewayctl show it: `abcd-efgh`.
pub fn show_page_code(code: &str) -> String {
    match (code.get(..4), code.get(4..)) {
        (Some(head), Some(tail)) => format!("{head}-{tail}"),
        _ => code.to_string(),
    }
}

/// Why a request id is refused. Each has a stable code (shown on the error page) and says what
/// to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RequestIdError {
    #[error(
        "request_oversized: the request id is longer than any this gateway issues. Start again \
         from your client."
    )]
    Oversized,
    #[error(
        "request_malformed: the request id is not one this gateway issued (not well-formed, or \
         cut short). Start again from your client."
    )]
    Malformed,
    #[error(
        "request_forged: the request id was not issued by this gateway or was altered (its \
         signature does not verify). Start again from your client."
    )]
    Forged,
    #[error(
        "request_version: the request id was issued in format version {0}, which this gateway \
         does not read. Start again from your client."
    )]
    UnknownVersion(u8),
    #[error(
        "request_expired: this authorization request expired (a consent page lasts 10 minutes). \
         Start again from your client."
    )]
    Expired,
}

/// Issues and verifies request ids and their CSRF tokens under the server key.
pub struct RequestIds {
    sealer: Sealer,
    key: Vec<u8>,
}

impl RequestIds {
    pub fn new(server_key: &str) -> RequestIds {
        RequestIds {
            sealer: Sealer::new(server_key, MAC_LABEL, PREFIX, MAX_LEN),
            key: server_key.as_bytes().to_vec(),
        }
    }

    /// The request id for `request`.
    pub fn issue(&self, request: &ConsentRequest) -> String {
        self.issue_version(VERSION, request)
    }

    /// The id in encoding `version` (tests issue others to see them refused).
    pub fn issue_version(&self, version: u8, request: &ConsentRequest) -> String {
        // A struct of strings and numbers: serialising it cannot fail.
        let payload = serde_json::to_vec(request).unwrap_or_default();
        self.sealer.seal(version, &payload)
    }

    /// The request `id` carries, if this gateway issued it unchanged and it has not expired at
    /// `now_ms`: the length, the MAC (constant time), the version, then the payload and its age.
    pub fn verify(&self, id: &str, now_ms: i64) -> Result<ConsentRequest, RequestIdError> {
        let (version, payload) = self.sealer.open(id).map_err(|err| match err {
            SealError::Oversized => RequestIdError::Oversized,
            SealError::Malformed => RequestIdError::Malformed,
            SealError::Forged => RequestIdError::Forged,
        })?;
        if version != VERSION {
            return Err(RequestIdError::UnknownVersion(version));
        }
        let request: ConsentRequest =
            serde_json::from_slice(&payload).map_err(|_| RequestIdError::Malformed)?;
        let ttl = i64::try_from(REQUEST_TTL.as_millis()).unwrap_or(i64::MAX);
        if now_ms >= request.issued_at_ms.saturating_add(ttl) {
            return Err(RequestIdError::Expired);
        }
        Ok(request)
    }

    /// The CSRF token of the page with request id `id`.
    pub fn csrf(&self, id: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(keyed_mac(
            &self.key,
            CSRF_LABEL,
            id.as_bytes(),
        ))
    }
}

/// The SHA-256 of a request id: how the approvals remember a decided page.
pub fn digest(id: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(id.as_bytes()).into()
}

#[cfg(test)]
mod tests;
