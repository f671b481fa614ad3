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
mod tests;
