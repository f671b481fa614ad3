//! Warnings strangers can trigger at will (a refused consent page, a wrong approval code),
//! logged at most once a period with the count left out, so a flood cannot fill the log. The
//! rest of the OAuth surface's answer to floods is to keep nothing shared (see `oauth/mod.rs`).

use std::sync::Mutex;
use std::time::Duration;

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
