//! Phase timestamps of one RunCommand, for the bench's breakdown (issue 26): with the `timing`
//! feature the helper and the broker note `CLOCK_MONOTONIC` (one clock for both processes) at
//! each phase; without it [`mark`] does nothing and nothing is ever emitted.

/// Marks the helper's line of timestamps on its stderr.
pub const PREFIX: &str = "\u{1e}ngw-timing";

#[cfg(feature = "timing")]
static STAMPS: std::sync::Mutex<Vec<(&'static str, u64)>> = std::sync::Mutex::new(Vec::new());

/// Note that `phase` ended now.
#[inline]
pub fn mark(phase: &'static str) {
    #[cfg(feature = "timing")]
    if let Ok(mut stamps) = STAMPS.lock() {
        stamps.push((phase, now_ns()));
    }
    let _ = phase;
}

/// The stamps so far as `phase=ns` words (empty without the feature), and forget them.
pub fn take() -> String {
    #[cfg(feature = "timing")]
    if let Ok(mut stamps) = STAMPS.lock() {
        return std::mem::take(&mut *stamps)
            .iter()
            .map(|(phase, ns)| format!("{phase}={ns}"))
            .collect::<Vec<_>>()
            .join(" ");
    }
    String::new()
}

/// Write the stamps so far on stderr as one line (the helper, before `execve` and after the
/// command ended); nothing without the feature.
pub fn emit() {
    #[cfg(feature = "timing")]
    {
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "{PREFIX} {}", take());
    }
}

/// `CLOCK_MONOTONIC`, ns.
pub fn now_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}
