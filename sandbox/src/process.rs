//! Process identity: a process is the recorded one only if the boot, its pid and its kernel start
//! time all match (a pid alone is reused). The one reader of `/proc/<pid>/stat`, the boot id and
//! macOS's equivalents, shared by the gateway (adopting and signalling brokers), gatewayctl and the
//! tests.

use serde::Serialize;

/// The fields of `/proc/<pid>/stat` the workspace uses (Linux; see proc(5)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 2, without its parentheses: the command name (may contain spaces and `)`).
    pub comm: String,
    /// Field 3: R, S, D, Z, X, …
    pub state: char,
    /// Field 4.
    pub ppid: i32,
    /// Field 5: the process group.
    pub pgrp: i32,
    /// Field 22: start time in clock ticks since boot.
    pub start_time: u64,
}

impl ProcStat {
    /// Exited but not reaped (`Z`), or dead (`X`): not a live process.
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// Parse the text of `/proc/<pid>/stat`. The command name is parenthesised and may contain spaces
/// and parentheses, so the fields after it are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<ProcStat> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let mut state_chars = fields.first()?.chars();
    let state = state_chars.next()?;
    if state_chars.next().is_some() {
        return None;
    }
    Some(ProcStat {
        comm,
        state,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        // Field 22 is the 20th after the command name (fields 3..).
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// `/proc/<pid>/stat`, parsed; `None` where there is no such process or no `/proc` (macOS).
pub fn stat(pid: i32) -> Option<ProcStat> {
    if pid <= 0 {
        return None;
    }
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The kernel's start time of `pid`, to tell a reused pid apart (Linux: clock ticks since boot);
/// `None` for no such process or one that exited and was not reaped yet.
#[cfg(target_os = "linux")]
pub fn process_start_time(pid: i32) -> Option<u64> {
    stat(pid).filter(|st| !st.is_dead()).map(|st| st.start_time)
}

/// The kernel's start time of `pid` in microseconds since the epoch (macOS).
#[cfg(target_os = "macos")]
pub fn process_start_time(pid: i32) -> Option<u64> {
    if pid <= 0 {
        return None;
    }
    // SAFETY: proc_bsdinfo is plain data (integers and byte arrays), for which all-zero is valid.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // SAFETY: `info` is valid and writable for `size` bytes for the duration of the call, and
    // proc_pidinfo writes at most `size` bytes.
    let written = unsafe {
        libc::proc_pidinfo(
            pid,
            libc::PROC_PIDTBSDINFO,
            0,
            (&mut info as *mut libc::proc_bsdinfo).cast(),
            size,
        )
    };
    (written == size).then(|| info.pbi_start_tvsec * 1_000_000 + info.pbi_start_tvusec)
}

/// Without a way to read a process's start time, no process identity can be verified.
#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn process_start_time(_pid: i32) -> Option<u64> {
    None
}

/// This boot's identity (Linux: `/proc/sys/kernel/random/boot_id`); `None` if it cannot be read.
#[cfg(target_os = "linux")]
pub fn boot_id() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// This boot's identity (macOS: `kern.bootsessionuuid`); `None` if it cannot be read.
#[cfg(target_os = "macos")]
pub fn boot_id() -> Option<String> {
    let mut buf = [0u8; 64];
    let mut len = buf.len();
    // SAFETY: the name is NUL-terminated; `buf` and `len` describe a valid writable buffer, and
    // no new value is set (null pointer, length 0).
    let rc = unsafe {
        libc::sysctlbyname(
            c"kern.bootsessionuuid".as_ptr(),
            buf.as_mut_ptr().cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return None;
    }
    let id = String::from_utf8_lossy(buf.get(..len.min(buf.len()))?)
        .trim_end_matches('\0')
        .to_string();
    (!id.is_empty()).then_some(id)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn boot_id() -> Option<String> {
    None
}

/// Whether a recorded process `(boot id, pid, start time)` is the one running now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Identity {
    /// Same boot, pid and start time: it is the recorded process.
    Verified,
    /// No such process (or only a zombie).
    NotRunning,
    /// The machine rebooted since the record was made.
    OtherBoot,
    /// The pid now belongs to another process.
    PidReused,
    /// This host's boot id cannot be read, so nothing can be verified.
    Unknown,
}

/// Check a recorded `(pid, start time, boot id)` against the running system.
pub fn identify(pid: i32, start_time: u64, recorded_boot_id: &str) -> Identity {
    let Some(current_boot) = boot_id() else {
        return Identity::Unknown;
    };
    if current_boot != recorded_boot_id {
        return Identity::OtherBoot;
    }
    match process_start_time(pid) {
        None => Identity::NotRunning,
        Some(start) if start != start_time => Identity::PidReused,
        Some(_) => Identity::Verified,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests;
