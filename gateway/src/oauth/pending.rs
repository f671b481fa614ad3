//! In-memory state of the consent step: authorization requests waiting for the owner's decision
//! (each with its CSRF token), and the owner's one-time approval codes (hashes only) with the
//! attempt limit. Nothing here needs to survive a restart: a client simply authorizes again.

use std::collections::HashMap;
use std::time::Duration;

use rand::Rng;

/// How long a consent page stays usable.
pub const REQUEST_TTL: Duration = Duration::from_secs(10 * 60);
/// Authorization requests kept at once (the authorization page is public).
pub const MAX_REQUESTS: usize = 64;
/// How long an approval code stays usable.
pub const APPROVAL_CODE_TTL: Duration = Duration::from_secs(10 * 60);
/// Approval codes alive at once.
const MAX_APPROVAL_CODES: usize = 4;
/// Wrong approval codes tolerated before every outstanding code is void.
pub const MAX_APPROVAL_ATTEMPTS: u32 = 5;
/// Letters and digits that cannot be mistaken for one another (no 0/O, 1/I/L).
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
const CODE_LEN: usize = 8;

/// An authorization request the page was shown for, waiting for Approve or Deny.
#[derive(Debug, Clone)]
pub struct AuthorizationRequest {
    pub csrf: String,
    pub client_id: String,
    pub client_name: String,
    pub redirect_uri: String,
    pub state: Option<String>,
    pub code_challenge: String,
    pub resource: String,
    pub scope: String,
    pub expires_at_ms: i64,
}

/// The outcome of checking an approval code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalCheck {
    /// The code was live and is now spent.
    Accepted,
    /// Wrong, expired or spent; this many attempts remain.
    Rejected { attempts_left: u32 },
    /// The attempt limit is reached: every outstanding code is now void.
    Locked,
}

#[derive(Debug, Default)]
pub struct Pending {
    requests: HashMap<String, AuthorizationRequest>,
    /// SHA-256 of each live approval code, with its expiry.
    approval_codes: Vec<(String, i64)>,
    failed_attempts: u32,
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// An approval code as typed: case, spaces and dashes do not matter.
fn normalize(code: &str) -> String {
    code.chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

impl Pending {
    fn purge(&mut self, now_ms: i64) {
        self.requests.retain(|_, r| r.expires_at_ms > now_ms);
        self.approval_codes.retain(|(_, exp)| *exp > now_ms);
    }

    /// Keep `request` under a new id; the oldest goes when [`MAX_REQUESTS`] are waiting.
    pub fn insert(&mut self, request: AuthorizationRequest, now_ms: i64) -> String {
        self.purge(now_ms);
        if self.requests.len() >= MAX_REQUESTS
            && let Some(oldest) = self
                .requests
                .iter()
                .min_by_key(|(_, r)| r.expires_at_ms)
                .map(|(id, _)| id.clone())
        {
            self.requests.remove(&oldest);
        }
        let id = common::hash::new_secret("req");
        self.requests.insert(id.clone(), request);
        id
    }

    pub fn get(&mut self, id: &str, now_ms: i64) -> Option<AuthorizationRequest> {
        self.purge(now_ms);
        self.requests.get(id).cloned()
    }

    pub fn remove(&mut self, id: &str) -> Option<AuthorizationRequest> {
        self.requests.remove(id)
    }

    /// (client name, redirect host) of each waiting request.
    pub fn waiting(&mut self, now_ms: i64) -> Vec<(String, String)> {
        self.purge(now_ms);
        let mut out: Vec<_> = self
            .requests
            .values()
            .map(|r| {
                let host = url::Url::parse(&r.redirect_uri)
                    .ok()
                    .and_then(|u| u.host_str().map(str::to_string))
                    .unwrap_or_default();
                (r.client_name.clone(), host)
            })
            .collect();
        out.sort();
        out
    }

    /// A new approval code `XXXX-XXXX`; a fresh code also restores the attempt budget.
    pub fn new_approval_code(&mut self, now_ms: i64) -> (String, Duration) {
        self.purge(now_ms);
        let mut rng = rand::rng();
        let code: String = (0..CODE_LEN)
            .map(|_| char::from(CODE_ALPHABET[rng.random_range(0..CODE_ALPHABET.len())]))
            .collect();
        if self.approval_codes.len() >= MAX_APPROVAL_CODES {
            self.approval_codes.remove(0);
        }
        self.approval_codes.push((
            common::hash::sha256_hex(code.as_bytes()),
            now_ms + ms(APPROVAL_CODE_TTL),
        ));
        self.failed_attempts = 0;
        let shown = format!("{}-{}", &code[..4], &code[4..]);
        (shown, APPROVAL_CODE_TTL)
    }

    /// Check and spend an approval code. Wrong attempts count across all codes; at the limit every
    /// outstanding code is void until the owner asks for a new one.
    pub fn check_approval_code(&mut self, typed: &str, now_ms: i64) -> ApprovalCheck {
        self.purge(now_ms);
        if self.failed_attempts >= MAX_APPROVAL_ATTEMPTS {
            return ApprovalCheck::Locked;
        }
        let hash = common::hash::sha256_hex(normalize(typed).as_bytes());
        let mut found = None;
        for (i, (live, _)) in self.approval_codes.iter().enumerate() {
            // Every live code is compared (no early exit), each in constant time.
            if common::hash::constant_time_eq(live.as_bytes(), hash.as_bytes()) {
                found = Some(i);
            }
        }
        if let Some(i) = found {
            self.approval_codes.remove(i);
            return ApprovalCheck::Accepted;
        }
        self.failed_attempts += 1;
        if self.failed_attempts >= MAX_APPROVAL_ATTEMPTS {
            self.approval_codes.clear();
            return ApprovalCheck::Locked;
        }
        ApprovalCheck::Rejected {
            attempts_left: MAX_APPROVAL_ATTEMPTS - self.failed_attempts,
        }
    }
}
