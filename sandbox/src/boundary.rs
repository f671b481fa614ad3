//! What confines the runner and commands on this host, in the words the SessionView's
//! `network_boundary` and `gatewayctl doctor` use: one probe of the host decides both what the
//! gateway asks every broker to establish for its runner and how it is described, so the view
//! says what is enforced and degraded states say so plainly.

use serde_json::{Value, json};

/// The runner confinement this host supports (a broker must establish all of it, or it does
/// not start the runner). The gateway sends it as `common::protocol::RunnerConfinement`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunnerLayers {
    /// The broker in its own network namespace with only loopback up (Linux).
    pub network_namespace: bool,
    /// Landlock ABI to enforce on the runner.
    pub landlock_abi: Option<i32>,
    /// A seccomp filter, all capabilities dropped and `no_new_privs`.
    pub seccomp: bool,
    /// macOS: the runner under `sandbox-exec` with the generated runner profile.
    pub seatbelt: bool,
}

/// Probe this host for the runner confinement it supports.
pub fn runner_layers() -> RunnerLayers {
    #[cfg(target_os = "linux")]
    {
        let host = crate::host_support();
        RunnerLayers {
            network_namespace: crate::linux::runner::loopback_namespace_supported(),
            landlock_abi: host.enforced_landlock_abi(),
            seccomp: host.seccomp,
            seatbelt: false,
        }
    }
    #[cfg(target_os = "macos")]
    {
        RunnerLayers {
            seatbelt: std::path::Path::new(crate::seatbelt::SANDBOX_EXEC).exists(),
            ..RunnerLayers::default()
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        RunnerLayers::default()
    }
}

/// `network_boundary` for a session started now on this host.
pub fn network_boundary() -> Value {
    let host = crate::host_support();
    let network = match host.status() {
        "enforced" => "none: empty network namespace, no sockets",
        "degraded" => "degraded: partial confinement (see commands_enforced_by); no sockets",
        _ => "refused: this host cannot confine commands, so RunCommand refuses to run",
    };
    let commands = commands_text(&host, network);
    let runner = describe_runner(&runner_layers(), std::env::consts::OS);
    json!({
        "runner": runner.network,
        "runner_writes": runner.writes,
        "commands": commands,
        "enforced_by": runner.enforced_by,
        "commands_enforced_by": host.enforced_by(),
        "degraded": runner.degraded || host.status() != "enforced",
    })
}

/// `network_boundary.commands`: the network, where a command's writes go (the session's layer,
/// its writable dir on macOS, or nowhere: the read-only fallback) and what bounds its memory.
fn commands_text(host: &crate::HostSupport, network: &str) -> String {
    if !host.can_confine() {
        return network.to_string();
    }
    let memory = host.command_memory();
    if host.copy_on_write() {
        format!("{network}; writes go to the session's copy-on-write layer; {memory}")
    } else if host.session_dir() {
        format!(
            "{network}; writes: the project and HOME read-only (macOS has no copy-on-write \
             layer); build outputs and caches are redirected into a writable dir private to the \
             session, kept across its commands, discarded at stop or with fresh_layer, within \
             CLAUDE_TOOLS_COMMAND_LAYER_MB: CARGO_TARGET_DIR, GOCACHE, PYTHONPYCACHEPREFIX, \
             pytest's cache_dir, MYPY_CACHE_DIR, RUFF_CACHE_DIR, npm's cache, CACHE_DIR \
             (node_modules/.cache through find-cache-dir), CLANG_MODULE_CACHE_PATH, \
             XDG_CACHE_HOME, and NGW_BUILD_DIR for other build dirs (`cmake -B \
             \"$NGW_BUILD_DIR\"`); a command that writes into the project itself still fails \
             (make building build/, cargo writing a missing Cargo.lock, node_modules/.vite); \
             {memory}"
        )
    } else {
        format!(
            "{network}; writes: read-only file system (this host cannot mount a copy-on-write \
             layer for commands); {memory}"
        )
    }
}

/// The runner's part of `network_boundary`.
#[derive(Debug, PartialEq, Eq)]
struct RunnerBoundary {
    network: String,
    writes: String,
    enforced_by: String,
    degraded: bool,
}

fn describe_runner(plan: &RunnerLayers, os: &str) -> RunnerBoundary {
    if plan.seatbelt {
        // One outbound rule to the broker's loopback port; writes only in its private dirs.
        return RunnerBoundary {
            network: "loopback:broker-port-only".into(),
            writes: "private-dirs-only".into(),
            enforced_by: format!("{os}:seatbelt"),
            degraded: false,
        };
    }
    let port_rule = plan.landlock_abi.is_some_and(|abi| abi >= 4);
    let network = match (plan.network_namespace, port_rule) {
        (true, true) => "loopback:broker-port-only",
        (true, false) => {
            "loopback-only: the runner shares only the broker's loopback-only network \
             namespace; this host's Landlock has no port rules, so the port itself is not pinned"
        }
        (false, true) => {
            "degraded: TCP connect only to the broker's port number, but on any address, and UDP is \
             not restricted (no network namespace on this host)"
        }
        (false, false) => "unconfined: this host cannot restrict the runner's network",
    };
    let writes = if plan.landlock_abi.is_some() {
        "private-dirs-only"
    } else {
        "unconfined: this host has no Landlock, so the runner's writes are not restricted"
    };
    let mut layers = Vec::new();
    if plan.network_namespace {
        layers.push("netns".to_string());
    }
    if let Some(abi) = plan.landlock_abi {
        layers.push(format!("landlock(v{abi})"));
    }
    if plan.seccomp {
        layers.push("seccomp+nnp+caps".to_string());
    }
    let enforced_by = if layers.is_empty() {
        format!("{os}:none")
    } else {
        format!("{os}:{}", layers.join("+"))
    };
    RunnerBoundary {
        network: network.to_string(),
        writes: writes.to_string(),
        enforced_by,
        degraded: !(plan.network_namespace && port_rule && plan.seccomp),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(netns: bool, abi: Option<i32>, seccomp: bool) -> RunnerLayers {
        RunnerLayers {
            network_namespace: netns,
            landlock_abi: abi,
            seccomp,
            seatbelt: false,
        }
    }

    #[test]
    fn seatbelt_confinement_is_described_as_such() {
        let seatbelt = RunnerLayers {
            seatbelt: true,
            ..RunnerLayers::default()
        };
        let b = describe_runner(&seatbelt, "macos");
        assert_eq!(b.network, "loopback:broker-port-only");
        assert_eq!(b.enforced_by, "macos:seatbelt");
        assert!(!b.degraded);
    }

    #[test]
    fn full_confinement_is_not_degraded() {
        let b = describe_runner(&plan(true, Some(6), true), "linux");
        assert_eq!(b.network, "loopback:broker-port-only");
        assert_eq!(b.writes, "private-dirs-only");
        assert_eq!(b.enforced_by, "linux:netns+landlock(v6)+seccomp+nnp+caps");
        assert!(!b.degraded);
    }

    #[test]
    fn missing_layers_are_said_plainly() {
        let old_landlock = describe_runner(&plan(true, Some(3), true), "linux");
        assert!(old_landlock.degraded);
        assert!(old_landlock.network.starts_with("loopback-only"));
        assert_eq!(old_landlock.writes, "private-dirs-only");

        let no_netns = describe_runner(&plan(false, Some(6), true), "linux");
        assert!(no_netns.degraded);
        assert!(no_netns.network.starts_with("degraded"));

        let nothing = describe_runner(&plan(false, None, false), "macos");
        assert!(nothing.degraded);
        assert!(nothing.network.starts_with("unconfined"));
        assert!(nothing.writes.starts_with("unconfined"));
        assert_eq!(nothing.enforced_by, "macos:none");

        let no_seccomp = describe_runner(&plan(true, Some(6), false), "linux");
        assert!(no_seccomp.degraded);
    }

    fn host(os: &str) -> crate::HostSupport {
        crate::HostSupport {
            os: os.into(),
            namespaces: os == "linux",
            landlock_abi: (os == "linux").then_some(6),
            seccomp: os == "linux",
            seatbelt: os == "macos",
            root: false,
            overlay: os == "linux",
            memory_cgroup: None,
        }
    }

    #[test]
    fn commands_say_where_their_writes_go_on_each_host() {
        let linux = commands_text(&host("linux"), "none");
        assert!(
            linux.contains("writes go to the session's copy-on-write layer"),
            "{linux}"
        );
        let no_overlay = commands_text(
            &crate::HostSupport {
                overlay: false,
                ..host("linux")
            },
            "none",
        );
        assert!(
            no_overlay.contains("writes: read-only file system"),
            "{no_overlay}"
        );
        let macos = commands_text(&host("macos"), "none");
        for words in [
            "the project and HOME read-only (macOS has no copy-on-write layer)",
            "writable dir private to the session, kept across its commands",
            "fresh_layer",
            "CLAUDE_TOOLS_COMMAND_LAYER_MB",
            "CARGO_TARGET_DIR",
            "NGW_BUILD_DIR",
            "make building build/",
            "memory: not bounded by the sandbox on this OS",
        ] {
            assert!(macos.contains(words), "{words}: {macos}");
        }
        let none = commands_text(
            &crate::HostSupport {
                seatbelt: false,
                ..host("macos")
            },
            "refused",
        );
        assert_eq!(none, "refused");
    }

    #[test]
    fn commands_and_runner_name_the_same_enforced_landlock_abi() {
        // A 6.18 kernel offers v7; the sandboxes enforce (and the helper reports) v6.
        let host = crate::HostSupport {
            os: "linux".into(),
            namespaces: true,
            landlock_abi: Some(7),
            seccomp: true,
            seatbelt: false,
            root: false,
            overlay: true,
            memory_cgroup: Some("v1".into()),
        };
        assert_eq!(
            host.enforced_landlock_abi(),
            Some(crate::spec::MAX_LANDLOCK_ABI)
        );
        assert!(
            host.enforced_by().contains("landlock(v6)"),
            "{}",
            host.enforced_by()
        );
        let runner = describe_runner(&plan(true, host.enforced_landlock_abi(), true), "linux");
        assert!(runner.enforced_by.contains("landlock(v6)"));
    }
}
