//! Process facts from `/proc` (Linux): identity `(boot id, pid, start time)`, parent, memory,
//! uptime. Everything answers `None` where `/proc` is missing (e.g. macOS), so callers can say
//! "unknown".

use serde::Serialize;

/// The fields of `/proc/<pid>/stat` gatewayctl uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    pub comm: String,
    /// Field 3: R, S, D, Z, …
    pub state: char,
    /// Field 4.
    pub ppid: i32,
    /// Field 22: start time in clock ticks since boot.
    pub start_time: u64,
}

/// Parse the text of `/proc/<pid>/stat`. The command name is parenthesised and may contain spaces
/// and parentheses, so fields are counted after the last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    Some(Stat {
        comm,
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// `/proc/<pid>/stat`, parsed.
pub fn stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// This boot's identity (`/proc/sys/kernel/random/boot_id`).
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

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
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|t| u64::try_from(t).ok())
        .filter(|t| *t > 0)
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
pub fn children(pid: i32) -> Vec<(i32, Stat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<(i32, Stat)> = dir
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|child| Some((child, stat(child)?)))
        .filter(|(_, st)| st.ppid == pid && st.state != 'Z')
        .collect();
    out.sort_by_key(|(child, _)| *child);
    out
}

/// Whether a recorded process is the one running now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Identity {
    /// Same pid, boot and start time: it is the recorded process.
    Verified,
    /// No such process (or only a zombie).
    NotRunning,
    /// The machine rebooted since the record was made.
    OtherBoot,
    /// The pid now belongs to another process.
    PidReused,
    /// `/proc` is not available here.
    Unknown,
}

impl Identity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Verified => "verified",
            Self::NotRunning => "not_running",
            Self::OtherBoot => "other_boot",
            Self::PidReused => "pid_reused",
            Self::Unknown => "unknown",
        }
    }

    /// A short phrase for tables.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Verified => "yes",
            Self::NotRunning => "no (not running)",
            Self::OtherBoot => "no (recorded in another boot)",
            Self::PidReused => "no (pid reused: start time differs)",
            Self::Unknown => "unknown (no /proc)",
        }
    }
}

/// Check a recorded `(boot id, pid, start time)` against the running system.
pub fn verify(pid: i32, start_time: u64, recorded_boot_id: &str) -> Identity {
    let Some(current_boot) = boot_id() else {
        return Identity::Unknown;
    };
    if current_boot != recorded_boot_id {
        return Identity::OtherBoot;
    }
    if pid <= 0 {
        return Identity::NotRunning;
    }
    match stat(pid) {
        None => Identity::NotRunning,
        Some(st) if st.state == 'Z' => Identity::NotRunning,
        Some(st) if st.start_time != start_time => Identity::PidReused,
        Some(_) => Identity::Verified,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_parses_after_the_last_parenthesis() {
        let text = "1234 (we ird) (x)) S 77 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        let st = parse_stat(text).unwrap();
        assert_eq!(st.comm, "we ird) (x)");
        assert_eq!(st.state, 'S');
        assert_eq!(st.ppid, 77);
        assert_eq!(st.start_time, 987654);
    }

    #[test]
    fn this_process_verifies_and_a_wrong_start_time_does_not() {
        let pid = std::process::id() as i32;
        let me = stat(pid).unwrap();
        let boot = boot_id().unwrap();
        assert_eq!(verify(pid, me.start_time, &boot), Identity::Verified);
        assert_eq!(verify(pid, me.start_time + 1, &boot), Identity::PidReused);
        assert_eq!(verify(pid, me.start_time, "other"), Identity::OtherBoot);
        assert_eq!(verify(i32::MAX, 1, &boot), Identity::NotRunning);
        assert!(rss_kib(pid).unwrap() > 0);
        assert!(process_uptime_seconds(me.start_time).is_some());
    }
}
