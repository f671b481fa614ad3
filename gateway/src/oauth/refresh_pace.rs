//! How often one grant may refresh (red team 29 B5): each refresh stores a new token pair and
//! keeps the spent one until it expires (~1.8 KiB), and nothing bounded the connected client's
//! refreshes (4210 in 30 s with the state budget full). Per grant, [`REFRESH_BURST`] at once,
//! then one per [`REFRESH_EVERY`] (a generic cell rate: the burst refills at that pace). A
//! refresh past it is refused with 429 and `Retry-After` before anything is consumed: the
//! refresh token stays valid, so its retry is no reuse. Kept in memory (a restart forgets it).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Refreshes a grant may make at once (a client that lost answers, tests, a reconnect).
pub const REFRESH_BURST: u32 = 10;
/// The pace after the burst: ten a minute (a client refreshes when its access token expires).
pub const REFRESH_EVERY: Duration = Duration::from_secs(6);
/// What one refresh stores in the state dir (two token rows, the spent one's mark and its
/// chain entry; RT29 measured 1.8 KiB), charged to the state budget.
pub const REFRESH_COST_BYTES: u64 = 2048;

/// Per grant, when its burst would be whole again (ms since the epoch).
#[derive(Default)]
pub struct RefreshPace {
    whole_at_ms: Mutex<HashMap<String, i64>>,
}

impl RefreshPace {
    /// Take one refresh of `grant_id` at `now_ms`; when the grant is over its pace, the seconds
    /// until one is allowed again (at least 1), and nothing is taken.
    pub fn take(&self, grant_id: &str, now_ms: i64) -> Result<(), u64> {
        let every = i64::try_from(REFRESH_EVERY.as_millis()).unwrap_or(i64::MAX);
        let tolerance = every.saturating_mul(i64::from(REFRESH_BURST - 1));
        let mut grants = self
            .whole_at_ms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Grants whose burst is whole again carry nothing worth keeping.
        grants.retain(|_, whole_at| *whole_at > now_ms);
        let whole_at = grants.get(grant_id).copied().unwrap_or(now_ms).max(now_ms);
        let allowed_at = whole_at.saturating_sub(tolerance);
        if now_ms < allowed_at {
            let wait_ms = allowed_at - now_ms;
            return Err(u64::try_from(wait_ms.saturating_add(999) / 1000)
                .unwrap_or(1)
                .max(1));
        }
        grants.insert(grant_id.to_string(), whole_at.saturating_add(every));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_per_interval_per_grant() {
        let pace = RefreshPace::default();
        let every = REFRESH_EVERY.as_millis() as i64;
        for _ in 0..REFRESH_BURST {
            pace.take("g1", 1_000).unwrap();
        }
        let wait = pace.take("g1", 1_000).unwrap_err();
        assert_eq!(wait, REFRESH_EVERY.as_secs());
        // Another grant has its own burst.
        pace.take("g2", 1_000).unwrap();
        // One more after the interval, not two.
        pace.take("g1", 1_000 + every).unwrap();
        assert!(pace.take("g1", 1_000 + every).is_err());
        // A grant idle for a whole burst's time has it all again.
        let later = 1_000 + every * (i64::from(REFRESH_BURST) + 1);
        for _ in 0..REFRESH_BURST {
            pace.take("g1", later).unwrap();
        }
        assert!(pace.take("g1", later).is_err());
    }
}
