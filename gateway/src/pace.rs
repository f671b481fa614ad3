//! A pace per key (a generic cell rate): `burst` takes at once, then one per `every`; over it,
//! nothing is taken and the caller learns how long to wait. For what a caller can make the
//! gateway store where no budget refuses it: OAuth refreshes per grant, recovers and stops
//! (red team 29 B1, B5; 31/32 N1). Kept in memory (a restart forgets it).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

pub struct Pace {
    burst: u32,
    every: Duration,
    /// Per key, when its burst would be whole again (ms since the epoch).
    whole_at_ms: Mutex<HashMap<String, i64>>,
}

impl Pace {
    pub fn new(burst: u32, every: Duration) -> Pace {
        Pace {
            burst: burst.max(1),
            every,
            whole_at_ms: Mutex::new(HashMap::new()),
        }
    }

    /// Take one for `key` at `now_ms`; over the pace, the seconds until one is allowed again (at
    /// least 1), and nothing is taken.
    pub fn take(&self, key: &str, now_ms: i64) -> Result<(), u64> {
        let every = i64::try_from(self.every.as_millis()).unwrap_or(i64::MAX);
        let tolerance = every.saturating_mul(i64::from(self.burst - 1));
        let mut keys = self
            .whole_at_ms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Keys whose burst is whole again carry nothing worth keeping.
        keys.retain(|_, whole_at| *whole_at > now_ms);
        let whole_at = keys.get(key).copied().unwrap_or(now_ms).max(now_ms);
        let allowed_at = whole_at.saturating_sub(tolerance);
        if now_ms < allowed_at {
            let wait_ms = allowed_at - now_ms;
            return Err(u64::try_from(wait_ms.saturating_add(999) / 1000)
                .unwrap_or(1)
                .max(1));
        }
        keys.insert(key.to_string(), whole_at.saturating_add(every));
        Ok(())
    }

    /// Every key's burst whole again (a test's flood measures storage, not the pace).
    #[cfg(test)]
    pub fn clear(&self) {
        self.whole_at_ms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_per_interval_per_key() {
        let pace = Pace::new(10, Duration::from_secs(6));
        for _ in 0..10 {
            pace.take("g1", 1_000).unwrap();
        }
        assert_eq!(pace.take("g1", 1_000).unwrap_err(), 6);
        // Another key has its own burst.
        pace.take("g2", 1_000).unwrap();
        // One more after the interval, not two.
        pace.take("g1", 7_000).unwrap();
        assert!(pace.take("g1", 7_000).is_err());
        // A key idle for a whole burst's time has it all again.
        let later = 1_000 + 6_000 * 11;
        for _ in 0..10 {
            pace.take("g1", later).unwrap();
        }
        assert!(pace.take("g1", later).is_err());
    }
}
