//! The owner's one-time approval codes (hashes only), each bound to the one consent page the
//! owner named by its page code (`gatewayctl oauth approve <page code>`) and opened before the
//! code was issued; the pages approved or voided, until they expire; and a short list of pages
//! opened lately, shown to the owner and nothing else. Consent pages themselves are not kept
//! (`request_id.rs`): nothing here grows with what strangers do (issue 24 item 1).
//!
//! - Codes: at most [`MAX_APPROVAL_CODES`] live, only the admin socket adds one.
//! - Decided pages: one entry per approval or voided page, and each spends a live code, so they
//!   grow only with the owner's `approve` calls; they keep an approved request id from being
//!   used twice.
//! - Wrong attempts are counted on the code that names the page: a page no live code names cannot
//!   be approved by any code, so typing there is refused without counting anything; guessing a
//!   code is possible only on the named page, [`MAX_APPROVAL_ATTEMPTS`] times.
//! - The list of pages opened lately: at most [`RECENT_PAGES`], the oldest pushed out. A flood
//!   pushes the owner's page out of this list, never out of approval: the list only helps the
//!   owner read which client a page code belongs to.
//!
//! Nothing here needs to survive a restart: a client simply authorizes again.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use rand::RngExt;

pub use super::request_id::REQUEST_TTL;
/// How long an approval code stays usable.
pub const APPROVAL_CODE_TTL: Duration = Duration::from_secs(10 * 60);
/// Approval codes alive at once (issuing another retires the oldest).
pub const MAX_APPROVAL_CODES: usize = 4;
/// Wrong approval codes tolerated on one consent page before that page is void.
pub const MAX_APPROVAL_ATTEMPTS: u32 = 5;
/// Pages opened lately that `gatewayctl oauth clients` and `approve` can name.
pub const RECENT_PAGES: usize = 32;
/// Letters and digits that cannot be mistaken for one another (no 0/O, 1/I/L).
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
const CODE_LEN: usize = 8;

/// A consent page as the owner reads it: its page code, client, and where the answer goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenPage {
    pub page: String,
    /// Its request id's SHA-256 (a decided page is no longer listed).
    pub digest: [u8; 32],
    pub client_id: String,
    pub client_name: String,
    pub redirect_host: String,
    pub expires_at_ms: i64,
}

/// The page an approval is typed on: its page code, when it opened, and its request id's
/// SHA-256.
#[derive(Debug, Clone, Copy)]
pub struct PageRef<'a> {
    pub page: &'a str,
    pub issued_at_ms: i64,
    pub digest: &'a [u8; 32],
}

/// The outcome of checking an approval code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalCheck {
    /// The code was live and named this page; both are now spent.
    Accepted,
    /// Wrong, expired or spent; this many attempts remain on this page.
    Rejected { attempts_left: u32 },
    /// The page's attempt limit is reached: the page is void.
    Locked,
    /// No live code names this page (none was asked for, or only before it opened): nothing
    /// typed here can approve it, and nothing was counted.
    NotNamed,
    /// The page's own page code was typed instead of the approval code: nothing was counted.
    PageCodeTyped,
    /// This page was approved or voided already.
    Decided,
}

/// `approve` named something that is not a page code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotAPageCode;

/// One live approval code.
#[derive(Debug)]
struct ApprovalCode {
    sha256: String,
    issued_at_ms: i64,
    expires_at_ms: i64,
    /// The page code it approves (only a page opened before `issued_at_ms`).
    page: String,
    /// Wrong codes typed on that page.
    failed: u32,
}

#[derive(Debug, Default)]
pub struct Approvals {
    codes: Vec<ApprovalCode>,
    /// SHA-256 of each approved or voided request id → when that request expires.
    decided: HashMap<[u8; 32], i64>,
    recent: VecDeque<SeenPage>,
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

impl Approvals {
    fn purge(&mut self, now_ms: i64) {
        self.codes.retain(|c| c.expires_at_ms > now_ms);
        self.decided.retain(|_, expires| *expires > now_ms);
        self.recent.retain(|p| p.expires_at_ms > now_ms);
    }

    /// Remember that `page` opened, for the owner's listings only.
    pub fn note_page(&mut self, page: SeenPage, now_ms: i64) {
        self.purge(now_ms);
        if self.recent.len() >= RECENT_PAGES {
            self.recent.pop_front();
        }
        self.recent.push_back(page);
    }

    /// The pages opened lately, still open and not decided, oldest first.
    pub fn recent_pages(&mut self, now_ms: i64) -> Vec<SeenPage> {
        self.purge(now_ms);
        self.recent
            .iter()
            .filter(|p| !self.decided.contains_key(&p.digest))
            .cloned()
            .collect()
    }

    /// A new approval code `XXXX-XXXX` for the page the owner named by its page code (typed in
    /// any case, with or without the dash), and that page as the gateway saw it lately (`None`
    /// when a flood pushed it out of the list, or it never opened).
    #[allow(clippy::type_complexity)]
    pub fn new_approval_code(
        &mut self,
        typed_page: &str,
        now_ms: i64,
    ) -> Result<(String, String, Duration, Option<SeenPage>), NotAPageCode> {
        let page = super::request_id::parse_page_code(typed_page).ok_or(NotAPageCode)?;
        self.purge(now_ms);
        let mut rng = rand::rng();
        let code: String = (0..CODE_LEN)
            .map(|_| char::from(CODE_ALPHABET[rng.random_range(0..CODE_ALPHABET.len())]))
            .collect();
        if self.codes.len() >= MAX_APPROVAL_CODES {
            self.codes.remove(0);
        }
        self.codes.push(ApprovalCode {
            sha256: common::hash::sha256_hex(code.as_bytes()),
            issued_at_ms: now_ms,
            expires_at_ms: now_ms + ms(APPROVAL_CODE_TTL),
            page: page.clone(),
            failed: 0,
        });
        let seen = self.recent.iter().rev().find(|p| p.page == page).cloned();
        let shown = format!("{}-{}", &code[..4], &code[4..]);
        Ok((shown, page, APPROVAL_CODE_TTL, seen))
    }

    /// Whether the page was approved or voided already.
    pub fn decided(&mut self, digest: &[u8; 32], now_ms: i64) -> bool {
        self.purge(now_ms);
        self.decided.contains_key(digest)
    }

    /// Check and spend an approval code typed on `page`. Only a live code that names the page,
    /// issued after the page opened, approves it; wrong attempts count on that code alone, and
    /// at the limit the page is void.
    pub fn check_approval_code(
        &mut self,
        page: PageRef<'_>,
        typed: &str,
        now_ms: i64,
    ) -> ApprovalCheck {
        self.purge(now_ms);
        if self.decided.contains_key(page.digest) {
            return ApprovalCheck::Decided;
        }
        let expires = page.issued_at_ms.saturating_add(ms(REQUEST_TTL));
        let naming: Vec<usize> = (0..self.codes.len())
            .filter(|&i| {
                let code = &self.codes[i];
                code.page == page.page && page.issued_at_ms <= code.issued_at_ms
            })
            .collect();
        if naming.is_empty() {
            return ApprovalCheck::NotNamed;
        }
        if super::request_id::parse_page_code(typed).as_deref() == Some(page.page) {
            return ApprovalCheck::PageCodeTyped;
        }
        let hash = common::hash::sha256_hex(normalize(typed).as_bytes());
        let mut found = None;
        for &i in &naming {
            // Every naming code is compared (no early exit), each in constant time.
            if common::hash::constant_time_eq(self.codes[i].sha256.as_bytes(), hash.as_bytes()) {
                found = Some(i);
            }
        }
        if let Some(i) = found {
            self.codes.remove(i);
            self.decided.insert(*page.digest, expires);
            return ApprovalCheck::Accepted;
        }
        let mut most_failed = 0;
        for &i in &naming {
            self.codes[i].failed += 1;
            most_failed = most_failed.max(self.codes[i].failed);
        }
        if most_failed >= MAX_APPROVAL_ATTEMPTS {
            let mut i = 0;
            self.codes.retain(|_| {
                i += 1;
                !naming.contains(&(i - 1))
            });
            self.decided.insert(*page.digest, expires);
            return ApprovalCheck::Locked;
        }
        ApprovalCheck::Rejected {
            attempts_left: MAX_APPROVAL_ATTEMPTS - most_failed,
        }
    }

    /// Deny: the page is decided (bounded like approvals: only a page a live code names is
    /// remembered, and its codes are retired; any other page cannot be approved anyway until
    /// the owner names it).
    pub fn deny(&mut self, page: PageRef<'_>, now_ms: i64) {
        self.purge(now_ms);
        let before = self.codes.len();
        self.codes
            .retain(|c| !(c.page == page.page && page.issued_at_ms <= c.issued_at_ms));
        if self.codes.len() != before {
            let expires = page.issued_at_ms.saturating_add(ms(REQUEST_TTL));
            self.decided.insert(*page.digest, expires);
        }
    }
}

#[cfg(test)]
mod tests;
