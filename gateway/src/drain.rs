//! The graceful stop of `gateway serve` (SIGTERM, SIGINT): once draining, waiting calls answer
//! with the current SessionView at once, new tool calls are refused as `busy`, and the server
//! waits a bounded time for the calls in flight before it exits. Brokers and runners are not
//! touched: the next gateway re-adopts them.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Longest a stopping gateway waits for its calls in flight (ChatGPT abandons a call after about
/// 60 s; waits end at once when draining, so this only bounds work already under way).
pub const DRAIN_BOUND: Duration = Duration::from_secs(10);

/// Draining state and the count of tool calls in flight.
#[derive(Debug, Default)]
pub struct Drain {
    draining: CancellationToken,
    in_flight: Arc<watch::Sender<usize>>,
}

/// One tool call in flight; dropping it ends the call.
#[derive(Debug)]
pub struct InFlight(Arc<watch::Sender<usize>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Drain {
    /// Stop taking new calls and end waits.
    pub fn start(&self) {
        self.draining.cancel();
    }

    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// Resolves once draining started.
    pub async fn started(&self) {
        self.draining.cancelled().await;
    }

    /// Count a new tool call in, unless draining.
    pub fn enter(&self) -> Option<InFlight> {
        if self.is_draining() {
            return None;
        }
        self.in_flight.send_modify(|n| *n += 1);
        Some(InFlight(self.in_flight.clone()))
    }

    /// Wait until no call is in flight, at most `bound`; whether they all ended.
    pub async fn settled(&self, bound: Duration) -> bool {
        let mut rx = self.in_flight.subscribe();
        tokio::time::timeout(bound, rx.wait_for(|n| *n == 0))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn draining_refuses_new_calls_and_waits_for_the_ones_in_flight() {
        let drain = Drain::default();
        let call = drain.enter().expect("not draining yet");
        drain.start();
        assert!(
            drain.enter().is_none(),
            "a draining gateway takes no new call"
        );
        assert!(!drain.settled(Duration::from_millis(50)).await);
        drop(call);
        assert!(drain.settled(Duration::from_millis(50)).await);
    }
}
