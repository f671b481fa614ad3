//! How much of the OAuth surface strangers may take: the windows and caps of consent pages, and
//! the rate limit of each client's pages. Behind a tunnel every client is 127.0.0.1, so nothing
//! can be limited per address.
//!
//! Registration has no limit at all (issue 24 item 1, outside red team O1): it stores nothing
//! (`registration.rs`), so there is no shared resource to protect, and any shared bucket in front
//! of it would be one a stranger drains to keep ChatGPT from registering. Its cost is bounded per
//! request (body size and time, a few URL parses, one HMAC) like any HTTP request's.
//!
//! Consent pages do take memory (`pending.rs`), so they are limited, but never in a way that
//! touches a page already waiting: each client has its own bucket here and its own cap there, a
//! page of one client never makes way for another client's, and the cap shared by all clients
//! refuses new pages instead of evicting. Client ids are free to mint now, so these buckets bound
//! what one client id does, not what one stranger does; the shared cap bounds the memory. A
//! refusal is 429 with `Retry-After`. The owner's decision (approval code), the token endpoint
//! (PKCE, codes, refresh tokens) and the admin socket are not limited: an approved flow always
//! gets through.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a consent page stays usable.
pub const REQUEST_TTL: Duration = Duration::from_secs(10 * 60);
/// Consent pages one client may open in a burst (also the pages it may keep waiting at once).
pub const PAGES_BURST: u32 = 10;
/// One more consent page per client is allowed every this long.
pub const PAGES_EVERY: Duration = Duration::from_secs(10);
/// Page buckets kept at once. A client id costs nothing to mint, so a flood could otherwise grow
/// the map without end; past this size it is cleared, which only gives clients fresh buckets
/// (their waiting pages stay capped by `pending`).
const MAX_PAGE_BUCKETS: usize = 4096;

/// A token bucket: `burst` tokens, one more every `every`.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    burst: u32,
    every: Duration,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    pub fn new(burst: u32, every: Duration, now: Instant) -> TokenBucket {
        TokenBucket {
            burst,
            every,
            tokens: f64::from(burst),
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at);
        let every = self.every.as_secs_f64().max(f64::EPSILON);
        self.tokens = (self.tokens + elapsed.as_secs_f64() / every).min(f64::from(self.burst));
        self.at = now;
    }

    /// Take one token, or say how long until one is there (whole seconds, at least 1).
    pub fn take(&mut self, now: Instant) -> Result<(), u64> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let wait = (1.0 - self.tokens) * self.every.as_secs_f64();
        // Truncation is intended: a whole number of seconds, rounded up, at least 1.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Err((wait.ceil() as u64).max(1))
    }

    /// Whether the bucket is full again (then it can be forgotten).
    fn full(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= f64::from(self.burst)
    }
}

/// The limits of the OAuth endpoints, shared by the handlers.
#[derive(Debug, Default)]
pub struct Limits {
    pages: HashMap<String, TokenBucket>,
}

impl Limits {
    /// One consent page for `client_id`, or the seconds to wait.
    pub fn open_page(&mut self, client_id: &str, now: Instant) -> Result<(), u64> {
        // Buckets that filled up again hold nothing worth keeping: the map stays as small as the
        // set of clients that opened pages recently.
        if self.pages.len() > 256 {
            self.pages.retain(|_, b| !b.full(now));
        }
        if self.pages.len() >= MAX_PAGE_BUCKETS {
            self.pages.clear();
        }
        self.pages
            .entry(client_id.to_string())
            .or_insert_with(|| TokenBucket::new(PAGES_BURST, PAGES_EVERY, now))
            .take(now)
    }
}

/// A warning strangers can trigger at will (a refused page, a wrong approval code): logged at
/// most once per period with the number left out since, so a flood cannot fill the log, which
/// is on the owner's disk too.
pub struct ThrottledWarning {
    every_ms: i64,
    /// When one was last logged, and how many were left out since.
    last: Mutex<(Option<i64>, u64)>,
}

impl ThrottledWarning {
    pub const fn new(every: Duration) -> ThrottledWarning {
        ThrottledWarning {
            // Periods of seconds: far from overflowing.
            #[allow(clippy::cast_possible_wrap)]
            every_ms: every.as_secs() as i64 * 1000,
            last: Mutex::new((None, 0)),
        }
    }

    /// `Some(left out since the last one)` when this one is to be logged.
    pub fn admit(&self, now_ms: i64) -> Option<u64> {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match last.0 {
            Some(at) if now_ms - at < self.every_ms => {
                last.1 += 1;
                None
            }
            _ => {
                let left_out = last.1;
                *last = (Some(now_ms), 0);
                Some(left_out)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttled_warning_is_logged_once_a_period_with_the_count_left_out() {
        let warning = ThrottledWarning::new(Duration::from_secs(10));
        assert_eq!(warning.admit(0), Some(0));
        for at in 1..=5 {
            assert_eq!(warning.admit(at * 1000), None);
        }
        assert_eq!(warning.admit(10_000), Some(5));
        assert_eq!(warning.admit(10_001), None);
        assert_eq!(warning.admit(30_000), Some(1));
    }
}
