//! This host as the sandbox sees it: the user gatewayctl runs as (root is warned about), user
//! namespaces, Landlock, seccomp, and the runner confinement a session started now would get.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::probe::{first_line, run_with_timeout};
use crate::check::{Check, ok, warn};

/// Root is not the owner the design assumes: a gateway run as root reads what root can read.
pub(super) fn user_check(euid: u32) -> Check {
    const NAME: &str = "user";
    if euid == 0 {
        warn(
            NAME,
            "running as root: a gateway run as root reads what root can read (other accounts' \
             private files outside the protected set, another gateway's token) and its sessions \
             act as root outside the sandbox's masks; these checks also describe root's setup, \
             not your account's",
            "run the gateway and gatewayctl as the account whose files the sessions work on (and \
             that holds the state dir), not as root",
        )
    } else {
        ok(NAME, format!("uid {euid}, not root"))
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn find_program(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.is_file())
}

pub(super) fn userns_check() -> Check {
    const NAME: &str = "sandbox: user namespaces";
    if !Path::new("/proc/self").exists() {
        return warn(
            NAME,
            "unknown (no /proc on this host)",
            "none needed off Linux",
        );
    }
    if read_trimmed("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return warn(
            NAME,
            "disabled (kernel.unprivileged_userns_clone = 0)",
            "sysctl -w kernel.unprivileged_userns_clone=1",
        );
    }
    if read_trimmed("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return warn(
            NAME,
            "disabled (user.max_user_namespaces = 0)",
            "sysctl -w user.max_user_namespaces=15000",
        );
    }
    let apparmor = read_trimmed("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
        .as_deref()
        == Some("1");
    let root = rustix::process::geteuid().is_root();
    let note = if root { " (as root)" } else { "" };
    match find_program("unshare") {
        Some(unshare) => match run_with_timeout(
            Command::new(unshare).args(["-Urn", "true"]),
            Duration::from_secs(5),
        ) {
            Ok((true, _, _)) => ok(NAME, format!("`unshare -Urn true` works{note}")),
            Ok((false, _, err)) => warn(
                NAME,
                format!(
                    "`unshare -Urn true` failed{note}: {}",
                    crate::table::clip(first_line(&err), 100)
                ),
                if apparmor {
                    "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)"
                } else {
                    "enable unprivileged user namespaces for this user"
                },
            ),
            Err(e) => warn(
                NAME,
                format!("unknown: unshare: {e}"),
                "check `unshare -Urn true` by hand",
            ),
        },
        None if apparmor => warn(
            NAME,
            "restricted by AppArmor (kernel.apparmor_restrict_unprivileged_userns = 1)",
            "allow user namespaces for the gateway in an AppArmor profile",
        ),
        None => ok(NAME, "enabled by sysctl (unshare(1) not found to try it)"),
    }
}

pub(super) fn landlock_check() -> Check {
    const NAME: &str = "sandbox: landlock";
    #[cfg(target_os = "linux")]
    {
        use rustix::io::Errno;
        let probe = sandbox::linux::landlock_abi_probe();
        if let Ok(abi) = probe
            && abi > 0
        {
            let used = abi.min(sandbox::spec::MAX_LANDLOCK_ABI);
            return ok(
                NAME,
                format!("available, ABI v{abi} (sandboxes enforce v{used})"),
            );
        }
        let errno = probe.err().and_then(|e| e.raw_os_error());
        match errno.map(Errno::from_raw_os_error) {
            Some(Errno::NOSYS) => warn(
                NAME,
                "not in this kernel (landlock syscall: ENOSYS)",
                "use a kernel built with CONFIG_SECURITY_LANDLOCK (5.13+, 6.12+ recommended)",
            ),
            Some(Errno::OPNOTSUPP) => warn(
                NAME,
                "built in but disabled at boot",
                "add landlock to the lsm= kernel parameter",
            ),
            _ if Path::new("/sys/kernel/security/landlock").exists() => {
                ok(NAME, "present (/sys/kernel/security/landlock)")
            }
            _ => warn(
                NAME,
                format!("unknown (probe failed: errno {})", errno.unwrap_or(0)),
                "check `dmesg | grep -i landlock`",
            ),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        if Path::new("/usr/bin/sandbox-exec").exists() {
            ok(NAME, "not applicable; Seatbelt (sandbox-exec) is present")
        } else {
            warn(NAME, "unknown on this OS", "none")
        }
    }
}

pub(super) fn seccomp_check() -> Check {
    const NAME: &str = "sandbox: seccomp";
    let Some(status) = std::fs::read_to_string("/proc/self/status").ok() else {
        return warn(
            NAME,
            "unknown (no /proc/self/status)",
            "none needed off Linux",
        );
    };
    match status.lines().find_map(|l| l.strip_prefix("Seccomp:")) {
        Some(mode) => {
            let filters = status
                .lines()
                .find_map(|l| l.strip_prefix("Seccomp_filters:"))
                .map(|f| format!(", {} filter(s)", f.trim()))
                .unwrap_or_default();
            ok(
                NAME,
                format!("supported (this process: mode {}{filters})", mode.trim()),
            )
        }
        None => warn(
            NAME,
            "not reported in /proc/self/status",
            "use a kernel built with CONFIG_SECCOMP_FILTER",
        ),
    }
}

/// What a session would get, probed as gatewayctl's own user in its own environment (a service
/// unit that restricts namespaces gives the gateway less): the same probe and words as the
/// SessionView's `network_boundary`.
pub(super) fn runner_check() -> Check {
    const NAME: &str = "sandbox: runner confinement";
    let boundary = sandbox::boundary::network_boundary();
    let field = |key: &str| boundary[key].as_str().unwrap_or("unknown").to_string();
    let detail = format!(
        "runner network {} and writes {} ({}); commands {}",
        field("runner"),
        field("runner_writes"),
        field("enforced_by"),
        field("commands_enforced_by"),
    );
    if boundary["degraded"] == serde_json::Value::Bool(false) {
        ok(NAME, detail)
    } else {
        warn(
            NAME,
            detail,
            "sessions start with network_boundary.degraded = true; full confinement needs user \
             namespaces (or root), Landlock ABI 4+ and seccomp on Linux, or sandbox-exec on macOS",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;

    #[test]
    fn warns_as_root() {
        assert_eq!(user_check(0).status, Status::Warn);
        assert!(user_check(0).detail.starts_with("running as root"));
        assert_eq!(user_check(1000).status, Status::Ok);
    }
}
