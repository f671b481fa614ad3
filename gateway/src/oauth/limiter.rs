//! How much of the OAuth surface strangers may take: the caps and windows of clients and consent
//! pages, and the rate limits of the anonymous endpoints. Behind a tunnel every client is 127.0.0.1, so
//! limits are not per address: registration has one global token bucket, and consent pages one
//! bucket per registered client (a stranger's flood of pages spends only its own clients'
//! buckets, never the one of the client the owner is connecting). A refusal is 429 with
//! `Retry-After`. The owner's decision (approval code), the token endpoint (PKCE, codes, refresh
//! tokens) and the admin socket are not limited: an approved flow always gets through.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Clients kept at once; registration is open to anyone who can reach the gateway.
pub const MAX_CLIENTS: i64 = 100;
/// How long a consent page stays usable: also the window in which a new client is never evicted.
pub const REQUEST_TTL: Duration = Duration::from_secs(10 * 60);

/// Registrations allowed in a burst.
pub const REGISTRATION_BURST: u32 = 10;
/// One more registration is allowed every this long. With the burst, at most 70 registrations fit
/// in a consent window (10 minutes): fewer than the 100 clients kept, so young clients alone can
/// never fill the table.
pub const REGISTRATION_EVERY: Duration = Duration::from_secs(10);
/// Consent pages one client may open in a burst (also the pages it may keep waiting at once).
pub const PAGES_BURST: u32 = 10;
/// One more consent page per client is allowed every this long.
pub const PAGES_EVERY: Duration = Duration::from_secs(10);

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
#[derive(Debug)]
pub struct Limits {
    registration: TokenBucket,
    pages: HashMap<String, TokenBucket>,
}

impl Limits {
    pub fn new(now: Instant) -> Limits {
        Limits {
            registration: TokenBucket::new(REGISTRATION_BURST, REGISTRATION_EVERY, now),
            pages: HashMap::new(),
        }
    }

    /// One anonymous registration, or the seconds to wait.
    pub fn register(&mut self, now: Instant) -> Result<(), u64> {
        self.registration.take(now)
    }

    /// One consent page for `client_id` (a registered client), or the seconds to wait.
    pub fn open_page(&mut self, client_id: &str, now: Instant) -> Result<(), u64> {
        // Buckets that filled up again hold nothing worth keeping: the map stays as small as the
        // set of clients that opened pages recently.
        if self.pages.len() > 256 {
            self.pages.retain(|_, b| !b.full(now));
        }
        self.pages
            .entry(client_id.to_string())
            .or_insert_with(|| TokenBucket::new(PAGES_BURST, PAGES_EVERY, now))
            .take(now)
    }
}
