//! This host as the sandbox sees it: the user gatewayctl runs as (root is warned about), user
//! namespaces, Landlock, seccomp, and the runner confinement a session started now would get.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::probe::{first_line, run_with_timeout};
use common::admin::Confinement;

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

/// What a session gets: the running gateway's own report when one serves the state dir (its
/// process may have less than gatewayctl's: a service unit's syscall filter, a container
/// profile — red team 39, class 9), else probed as gatewayctl's own user in its own environment;
/// the same words as the SessionView's `network_boundary`. Where both exist and differ, that is
/// said: the gateway's is what its sessions get.
///
/// A gateway that serves the state dir but does not answer (it refused gatewayctl, its answer
/// is not understood) is not "no gateway" (red team 43b B3: a gateway in a user namespace was
/// shown as absent, with this shell's full confinement as OK): that is a warning saying so.
pub(super) fn runner_check(
    running: &Result<common::admin::GatewayStatus, crate::oauth::AdminError>,
) -> Check {
    let own = Confinement::of_boundary(&sandbox::boundary::network_boundary());
    match running {
        Ok(status) => runner_check_of(&own, status.confinement.as_ref()),
        Err(crate::oauth::AdminError::NotRunning(_)) => runner_check_of(&own, None),
        Err(err) => unanswered_check(&own, &err.to_string()),
    }
}

/// A gateway serves the state dir but did not say what its sessions get.
fn unanswered_check(own: &Confinement, why: &str) -> Check {
    warn(
        "sandbox: runner confinement",
        format!(
            "a gateway serves this state dir but did not report what its sessions get ({}); \
             probed here (its sessions may get less): {}",
            common::display::one_line(why),
            own.summary()
        ),
        "see each session's network_boundary in its SessionView; run gatewayctl from the \
         account, namespace and container the gateway runs in",
    )
}

/// [`runner_check`] from gatewayctl's own probe and the running gateway's report.
fn runner_check_of(own: &Confinement, running: Option<&Confinement>) -> Check {
    const NAME: &str = "sandbox: runner confinement";
    let (shown, whose) = match running {
        Some(gateway) => (gateway, "the running gateway reports"),
        None => (own, "no gateway runs with this state dir; probed here"),
    };
    let mut detail = format!("{whose}: {}", shown.summary());
    if let Some(gateway) = running
        && gateway != own
    {
        detail.push_str(&format!(
            "; gatewayctl's own process here gets more ({}): the gateway runs with less than \
             this shell (a service unit's SystemCallFilter or RestrictNamespaces, a container \
             profile), and what it reports is what its sessions get",
            own.summary()
        ));
        return warn(
            NAME,
            detail,
            "lift the restriction the gateway runs under (its service unit or container \
             profile), then restart it",
        );
    }
    if !shown.degraded {
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

    /// Red team 39, class 9: a gateway under a syscall filter reported no Landlock while doctor
    /// said Landlock was there. The running gateway's report is what doctor shows; a
    /// difference from its own probe is a warning naming both.
    #[test]
    fn the_running_gateway_s_confinement_is_the_one_shown() {
        let full = Confinement {
            runner: "loopback only".into(),
            runner_writes: "denied".into(),
            enforced_by: "linux:userns+netns+landlock(v6)+seccomp".into(),
            commands_enforced_by: "linux:userns+mountns+landlock(v6)+seccomp".into(),
            degraded: false,
        };
        let less = Confinement {
            enforced_by: "linux:netns+seccomp+nnp+caps".into(),
            commands_enforced_by: "unavailable".into(),
            degraded: true,
            ..full.clone()
        };
        let check = runner_check_of(&full, Some(&less));
        assert_eq!(check.status, Status::Warn);
        assert!(
            check.detail.starts_with("the running gateway reports: ")
                && check.detail.contains("linux:netns+seccomp+nnp+caps")
                && check
                    .detail
                    .contains("gatewayctl's own process here gets more"),
            "{}",
            check.detail
        );
        let same = runner_check_of(&full, Some(&full));
        assert_eq!(same.status, Status::Ok);
        assert!(same.detail.starts_with("the running gateway reports: "));
        let alone = runner_check_of(&full, None);
        assert_eq!(alone.status, Status::Ok);
        assert!(
            alone
                .detail
                .starts_with("no gateway runs with this state dir")
        );
        assert_eq!(runner_check_of(&less, None).status, Status::Warn);
    }

    /// Red team 43b B3: a gateway that serves but refuses to answer is never "no gateway".
    #[test]
    fn a_gateway_that_does_not_answer_is_a_warning_not_absent() {
        let own = Confinement {
            runner: "loopback only".into(),
            runner_writes: "denied".into(),
            enforced_by: "linux:userns+netns+landlock(v6)+seccomp".into(),
            commands_enforced_by: "linux:userns+mountns+landlock(v6)+seccomp".into(),
            degraded: false,
        };
        let check = unanswered_check(&own, "refused: forbidden\n(forged line)");
        assert_eq!(check.status, Status::Warn);
        assert!(
            check
                .detail
                .starts_with("a gateway serves this state dir but did not report")
                && !check.detail.contains("no gateway runs")
                && !check.detail.contains('\n'),
            "{}",
            check.detail
        );
    }

    #[test]
    fn warns_as_root() {
        assert_eq!(user_check(0).status, Status::Warn);
        assert!(user_check(0).detail.starts_with("running as root"));
        assert_eq!(user_check(1000).status, Status::Ok);
    }
}
