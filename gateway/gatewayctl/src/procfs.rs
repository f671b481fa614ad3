//! Process facts gatewayctl shows from `/proc` (Linux): uptime, memory, children, and the words
//! for a process identity (which `sandbox::process` checks). Everything answers `None` where
//! `/proc` is missing (e.g. macOS), so callers can say "unknown".

use sandbox::process::{Identity, ProcStat, stat};

/// Seconds since boot (`/proc/uptime`).
pub fn uptime_seconds() -> Option<f64> {
    std::fs::read_to_string("/proc/uptime")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Clock ticks a second (`sysconf(_SC_CLK_TCK)`).
pub fn clock_ticks() -> Option<u64> {
    Some(rustix::param::clock_ticks_per_second()).filter(|t| *t > 0)
}

/// Resident memory of `pid` in KiB (`VmRSS` of `/proc/<pid>/status`).
pub fn rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// How long a process with this start time has been running, in whole seconds.
pub fn process_uptime_seconds(start_time_ticks: u64) -> Option<u64> {
    let since_boot = uptime_seconds()?;
    let started = start_time_ticks as f64 / clock_ticks()? as f64;
    let up = since_boot - started;
    (up >= 0.0).then_some(up as u64)
}

/// Live children of `pid` (processes whose parent it is), by scanning `/proc/*/stat`.
pub fn children(pid: i32) -> Vec<(i32, ProcStat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<(i32, ProcStat)> = dir
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|child| Some((child, stat(child)?)))
        .filter(|(_, st)| st.ppid == pid && !st.is_dead())
        .collect();
    out.sort_by_key(|(child, _)| *child);
    out
}

/// A short phrase for tables.
pub fn describe(identity: Identity) -> &'static str {
    match identity {
        Identity::Verified => "yes",
        Identity::NotRunning => "no (not running)",
        Identity::OtherBoot => "no (recorded in another boot)",
        Identity::PidReused => "no (pid reused: start time differs)",
        Identity::Unknown => "unknown (no /proc)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_an_uptime_and_a_child() {
        let pid = i32::try_from(std::process::id()).unwrap();
        let me = stat(pid).unwrap();
        assert!(rss_kib(pid).unwrap() > 0);
        assert!(process_uptime_seconds(me.start_time).is_some());
        assert_eq!(process_uptime_seconds(u64::MAX), None);
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let child_pid = i32::try_from(child.id()).unwrap();
        let found = children(pid)
            .iter()
            .any(|(p, st)| *p == child_pid && st.ppid == pid);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(found);
        assert!(!children(pid).iter().any(|(p, _)| *p == child_pid));
    }
}
