//! How often one grant may refresh (red team 29 B5): each refresh stores a new token pair and
//! keeps the spent one until it expires (~1.8 KiB), and nothing bounded the connected client's
//! refreshes (4210 in 30 s with the state budget full). Per grant, [`REFRESH_BURST`] at once,
//! then one per [`REFRESH_EVERY`] (`crate::pace::Pace`). A
//! refresh past it is refused with 429 and `Retry-After` before anything is consumed: the
//! refresh token stays valid, so its retry is no reuse. Kept in memory (a restart forgets it).

use std::time::Duration;

/// Refreshes a grant may make at once (a client that lost answers, tests, a reconnect).
pub const REFRESH_BURST: u32 = 10;
/// The pace after the burst: ten a minute (a client refreshes when its access token expires).
pub const REFRESH_EVERY: Duration = Duration::from_secs(6);
/// What one refresh stores in the state dir (two token rows, the spent one's mark and its
/// chain entry; RT29 measured 1.8 KiB), charged to the state budget.
pub const REFRESH_COST_BYTES: u64 = 2048;

/// The pace of a grant's refreshes, keyed by grant id.
pub fn refresh_pace() -> crate::pace::Pace {
    crate::pace::Pace::new(REFRESH_BURST, REFRESH_EVERY)
}
