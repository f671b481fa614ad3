//! In-memory state of the consent step: authorization requests waiting for the owner's decision
//! (each with its CSRF token and its own attempt limit), and the owner's one-time approval codes
//! (hashes only), each good only for the requests that were waiting when the owner asked for it
//! — the ones `gatewayctl oauth approve` listed. Nothing here needs to survive a restart: a
//! client simply authorizes again.
//!
//! Binding codes to requests is what keeps strangers out of the owner's way (red-team O-2..O-4):
//! wrong codes typed on their own pages spend only their own pages' attempts, never the owner's
//! codes; a code cannot approve a page opened after it was issued; and the pages a live code
//! covers are never pushed out by a flood of new ones; nor is a page pushed out by pages of
//! another client (issue 24).

use std::collections::HashMap;
use std::time::Duration;

use rand::RngExt;

pub use super::limiter::REQUEST_TTL;
/// Consent pages one client may keep waiting at once.
pub const MAX_PAGES_PER_CLIENT: usize = super::limiter::PAGES_BURST as usize;
/// Pages of clients without a row (every freshly registered client, a stranger's included) kept
/// at once: the memory bound of the consent step. Reaching it refuses new pages of such clients
/// (429) and never pushes out a waiting one. Pages of clients with a row (ones the owner approved
/// before) are not counted: only the owner adds rows, so those are bounded by the owner.
pub const MAX_REQUESTS: usize = 1000;
/// How long an approval code stays usable.
pub const APPROVAL_CODE_TTL: Duration = Duration::from_secs(10 * 60);
/// Approval codes alive at once.
const MAX_APPROVAL_CODES: usize = 4;
/// Wrong approval codes tolerated on one consent page before that page is void.
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
    /// The client has a row (`super::Client::stored`): its pages are outside [`MAX_REQUESTS`].
    pub stored_client: bool,
}

/// The outcome of checking an approval code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalCheck {
    /// The code was live and is now spent.
    Accepted,
    /// Wrong, expired, spent or not issued for this page; this many attempts remain on it.
    Rejected { attempts_left: u32 },
    /// The page's attempt limit is reached: the page is void.
    Locked,
}

/// One live approval code.
#[derive(Debug)]
struct ApprovalCode {
    sha256: String,
    expires_at_ms: i64,
    /// The requests waiting when it was issued: the only ones it approves.
    covers: Vec<String>,
}

/// No consent page is waiting: a code would approve nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NothingWaiting;

#[derive(Debug, Default)]
pub struct Pending {
    requests: HashMap<String, AuthorizationRequest>,
    /// Wrong codes typed on each waiting request.
    failed_attempts: HashMap<String, u32>,
    approval_codes: Vec<ApprovalCode>,
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
        self.approval_codes.retain(|c| c.expires_at_ms > now_ms);
        let requests = &self.requests;
        self.failed_attempts
            .retain(|id, _| requests.contains_key(id));
    }

    fn covered(&self, request_id: &str) -> bool {
        self.approval_codes
            .iter()
            .any(|c| c.covers.iter().any(|id| id == request_id))
    }

    /// Keep `request` under a new id, or say in how many seconds a page may open. Pages of one
    /// client make way only for pages of the same client: when [`MAX_PAGES_PER_CLIENT`] of its
    /// pages wait, its oldest page no live code covers makes way; no page of another client is
    /// ever pushed out, so a stranger's flood cannot touch the owner's page (issue 24). When every
    /// page of the client is covered, or [`MAX_REQUESTS`] pages of clients without a row wait
    /// (and this client has none), the new page is refused.
    pub fn insert(&mut self, request: AuthorizationRequest, now_ms: i64) -> Result<String, u64> {
        self.purge(now_ms);
        let own: Vec<(&String, &AuthorizationRequest)> = self
            .requests
            .iter()
            .filter(|(_, r)| r.client_id == request.client_id)
            .collect();
        if own.len() >= MAX_PAGES_PER_CLIENT {
            let oldest_uncovered = own
                .iter()
                .filter(|(id, _)| !self.covered(id))
                .min_by_key(|(_, r)| r.expires_at_ms)
                .map(|(id, _)| (*id).clone());
            match oldest_uncovered {
                Some(id) => {
                    self.remove(&id);
                }
                None => return Err(self.seconds_until_one_expires(now_ms)),
            }
        }
        if !request.stored_client
            && self.requests.values().filter(|r| !r.stored_client).count() >= MAX_REQUESTS
        {
            return Err(self.seconds_until_one_expires(now_ms));
        }
        let id = common::hash::new_secret("req");
        self.requests.insert(id.clone(), request);
        Ok(id)
    }

    fn seconds_until_one_expires(&self, now_ms: i64) -> u64 {
        let soonest = self
            .requests
            .values()
            .map(|r| r.expires_at_ms)
            .min()
            .unwrap_or(now_ms);
        u64::try_from((soonest - now_ms) / 1000 + 1)
            .unwrap_or(1)
            .max(1)
    }

    /// The pages waiting now, oldest first: (client id, client name, redirect host, expiry).
    pub fn waiting_pages(&mut self, now_ms: i64) -> Vec<(String, String, String, i64)> {
        self.purge(now_ms);
        let mut pages: Vec<_> = self
            .requests
            .values()
            .map(|r| {
                let (name, host) = describe(r);
                (r.client_id.clone(), name, host, r.expires_at_ms)
            })
            .collect();
        pages.sort_by_key(|p| p.3);
        pages
    }

    pub fn get(&mut self, id: &str, now_ms: i64) -> Option<AuthorizationRequest> {
        self.purge(now_ms);
        self.requests.get(id).cloned()
    }

    pub fn remove(&mut self, id: &str) -> Option<AuthorizationRequest> {
        self.failed_attempts.remove(id);
        self.requests.remove(id)
    }

    /// (client name, redirect host) of each waiting request.
    #[cfg(test)]
    pub fn waiting(&mut self, now_ms: i64) -> Vec<(String, String)> {
        self.purge(now_ms);
        let mut out: Vec<_> = self.requests.values().map(describe).collect();
        out.sort();
        out
    }

    /// A new approval code `XXXX-XXXX` for the requests waiting now, and those requests as the
    /// owner must see them; none waiting: nothing to approve, no code.
    #[allow(clippy::type_complexity)]
    pub fn new_approval_code(
        &mut self,
        now_ms: i64,
    ) -> Result<(String, Duration, Vec<(String, String)>), NothingWaiting> {
        self.purge(now_ms);
        if self.requests.is_empty() {
            return Err(NothingWaiting);
        }
        let mut rng = rand::rng();
        let code: String = (0..CODE_LEN)
            .map(|_| char::from(CODE_ALPHABET[rng.random_range(0..CODE_ALPHABET.len())]))
            .collect();
        if self.approval_codes.len() >= MAX_APPROVAL_CODES {
            self.approval_codes.remove(0);
        }
        self.approval_codes.push(ApprovalCode {
            sha256: common::hash::sha256_hex(code.as_bytes()),
            expires_at_ms: now_ms + ms(APPROVAL_CODE_TTL),
            covers: self.requests.keys().cloned().collect(),
        });
        let mut covered: Vec<_> = self.requests.values().map(describe).collect();
        covered.sort();
        let shown = format!("{}-{}", &code[..4], &code[4..]);
        Ok((shown, APPROVAL_CODE_TTL, covered))
    }

    /// Check and spend an approval code typed on request `request_id`'s page. Only a live code
    /// issued while that request waited approves it; wrong attempts count on that page alone,
    /// and at the limit the page is void.
    pub fn check_approval_code(
        &mut self,
        request_id: &str,
        typed: &str,
        now_ms: i64,
    ) -> ApprovalCheck {
        self.purge(now_ms);
        let failed = self.failed_attempts.get(request_id).copied().unwrap_or(0);
        if failed >= MAX_APPROVAL_ATTEMPTS {
            self.remove(request_id);
            return ApprovalCheck::Locked;
        }
        let hash = common::hash::sha256_hex(normalize(typed).as_bytes());
        let mut found = None;
        for (i, code) in self.approval_codes.iter().enumerate() {
            // Every live code is compared (no early exit), each in constant time.
            let matches = common::hash::constant_time_eq(code.sha256.as_bytes(), hash.as_bytes());
            if matches && code.covers.iter().any(|id| id == request_id) {
                found = Some(i);
            }
        }
        if let Some(i) = found {
            self.approval_codes.remove(i);
            return ApprovalCheck::Accepted;
        }
        let failed = failed + 1;
        if failed >= MAX_APPROVAL_ATTEMPTS {
            self.remove(request_id);
            return ApprovalCheck::Locked;
        }
        self.failed_attempts.insert(request_id.to_string(), failed);
        ApprovalCheck::Rejected {
            attempts_left: MAX_APPROVAL_ATTEMPTS - failed,
        }
    }
}

/// (client name, redirect host) of a request, as the owner reads it.
fn describe(r: &AuthorizationRequest) -> (String, String) {
    let host = url::Url::parse(&r.redirect_uri)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    (r.client_name.clone(), host)
}
