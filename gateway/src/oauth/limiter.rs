//! How much of the OAuth surface strangers may take: nothing shared. Behind a tunnel every client
//! is 127.0.0.1, so nothing could be limited per address anyway.
//!
//! Registration stores nothing (`registration.rs`, signed client ids) and neither does opening a
//! consent page (`request_id.rs`, signed request ids; issue 24 item 1): there is no shared
//! resource to protect, so neither is limited, and any shared bucket in front of them would be
//! one a stranger drains to keep ChatGPT out. A bucket per client id would not help either: ids
//! are free to mint, and a stranger who learned ChatGPT's id could keep ChatGPT's pages refused.
//! Each request's cost is bounded like any HTTP request's (body size and time, a few URL parses,
//! a database read, two HMACs). What remains in memory (`approvals.rs`) grows only with the
//! owner's `gatewayctl oauth approve` calls. This module keeps the consent window and the
//! throttle of warnings strangers can trigger.

use std::sync::Mutex;
use std::time::Duration;

/// How long a consent page stays usable.
pub const REQUEST_TTL: Duration = Duration::from_secs(10 * 60);

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
