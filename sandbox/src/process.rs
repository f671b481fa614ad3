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
mod tests {
    use super::*;

    fn own_pid() -> i32 {
        // Pids fit in i32 (pid_max is at most 2^22).
        std::process::id() as i32
    }

    #[test]
    fn fields_are_counted_after_the_last_parenthesis() {
        let text = "1234 (we ird) (x)) S 77 1230 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        let st = parse_stat(text).unwrap();
        assert_eq!(st.comm, "we ird) (x)");
        assert_eq!(st.state, 'S');
        assert_eq!(st.ppid, 77);
        assert_eq!(st.pgrp, 1230);
        assert_eq!(st.start_time, 987654);
        assert!(!st.is_dead());
    }

    #[test]
    fn a_command_name_that_fakes_fields_does_not_shift_them() {
        // A name built to look like the fields that follow it: counting from the first `)` would
        // read state Z and start time 1.
        let text = "42 (x) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 1 ) R 9 42 42 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 555 1 1";
        let st = parse_stat(text).unwrap();
        assert_eq!(st.state, 'R');
        assert_eq!(st.ppid, 9);
        assert_eq!(st.start_time, 555);
    }

    #[test]
    fn malformed_stat_lines_are_refused() {
        for bad in [
            "",
            "1234",
            "1234 (name",
            "1234 name) S 1 2",
            "1234 (name) S 1 2 3",
            "1234 (name) S x 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
            "1234 (name) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 notanumber",
            "1234 (name) SS 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5",
            "1234 (name) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5",
        ] {
            assert_eq!(parse_stat(bad), None, "{bad:?}");
        }
        assert_eq!(stat(0), None);
        assert_eq!(stat(-1), None);
        assert_eq!(process_start_time(-1), None);
    }

    #[test]
    fn this_process_has_a_stable_identity() {
        let pid = own_pid();
        let me = stat(pid).unwrap();
        // The main thread's state: it may be waiting for this test's thread.
        assert!(!me.is_dead(), "{me:?}");
        assert_eq!(process_start_time(pid), Some(me.start_time));
        assert_eq!(process_start_time(pid), Some(me.start_time));
        let boot = boot_id().unwrap();
        assert_eq!(boot.len(), 36, "{boot}");
        assert_eq!(boot_id().as_deref(), Some(boot.as_str()));
        assert_eq!(identify(pid, me.start_time, &boot), Identity::Verified);
        assert_eq!(identify(pid, me.start_time + 1, &boot), Identity::PidReused);
        assert_eq!(identify(pid, me.start_time, "other"), Identity::OtherBoot);
        assert_eq!(identify(i32::MAX, 1, &boot), Identity::NotRunning);
        assert_eq!(identify(0, me.start_time, &boot), Identity::NotRunning);
    }

    #[test]
    fn an_unreaped_child_has_no_start_time() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let zombie = loop {
            let st = stat(pid).unwrap();
            if st.state == 'Z' || std::time::Instant::now() > deadline {
                break st;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert_eq!(zombie.state, 'Z');
        assert!(zombie.is_dead());
        assert_eq!(zombie.ppid, own_pid());
        assert_eq!(process_start_time(pid), None);
        let boot = boot_id().unwrap();
        assert_eq!(
            identify(pid, zombie.start_time, &boot),
            Identity::NotRunning
        );
        child.wait().unwrap();
        assert_eq!(stat(pid), None);
    }
}
