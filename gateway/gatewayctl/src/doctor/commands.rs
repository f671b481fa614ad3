//! What RunCommand gets on this host: the copy-on-write layer, its memory bound, the PATH and the
//! usual tools on it.

use std::path::{Path, PathBuf};

use crate::check::{Check, ok, warn};

/// Whether commands get the session's copy-on-write layer (overlays in their user namespace).
///
/// Where a gateway runs, its own report decides (red team 45 F2: a gateway in a user namespace
/// gives its commands a read-only file system while this shell could mount a layer).
pub(super) fn layer_check(running: Option<&common::admin::Confinement>) -> Check {
    const NAME: &str = "sandbox: command layer";
    let host = sandbox::host_support();
    if let Some(gateway) = running
        && !gateway.commands_enforced_by.contains("overlay")
    {
        return warn(
            NAME,
            format!(
                "the running gateway's commands get no copy-on-write layer (commands {}): they \
                 see the file system read-only, so builds and tests that write fail",
                common::display::one_line(&gateway.commands_enforced_by)
            ),
            "lift the restriction the gateway runs under (user namespaces for its user, its \
             service unit or container profile), then restart it",
        );
    }
    if host.copy_on_write() {
        ok(
            NAME,
            "copy-on-write: commands write into a layer private to their session (overlayfs in \
             the command's user namespace), kept across its commands, discarded at stop",
        )
    } else if host.session_dir() {
        warn(
            NAME,
            "macOS: no copy-on-write layer; commands see the project and HOME read-only, with \
             build outputs and caches (CARGO_TARGET_DIR, GOCACHE, Python bytecode, pytest's, \
             npm's and node_modules/.cache) redirected into a writable dir private to the \
             session, kept across its commands and discarded at stop; builds that write into \
             the project itself (make's build/, a missing Cargo.lock) fail",
            "run the gateway on Linux >= 5.11 for a copy-on-write layer",
        )
    } else {
        warn(
            NAME,
            "unavailable: commands see the file system read-only, so builds and tests that \
             write (cargo, make, npm) fail",
            "Linux >= 5.11 with overlayfs and user namespaces allowed for the gateway's user",
        )
    }
}

/// What bounds a command's memory here (issue 24): a memory cgroup per command, or only the
/// per-process limit. gatewayctl probes from its own cgroup; the gateway's may differ (a service's
/// delegated cgroup), and its log says what it found at start.
pub(super) fn memory_check() -> Check {
    const NAME: &str = "sandbox: command memory";
    let host = sandbox::host_support();
    if host.memory_cgroup.is_some() {
        ok(NAME, host.command_memory())
    } else {
        warn(
            NAME,
            host.command_memory(),
            "run the gateway as root, or in a delegated cgroup v2 subtree (the systemd unit's \
             Delegate=yes, or `systemd-run --user --scope -p Delegate=yes gateway serve …`)",
        )
    }
}

/// The PATH commands get (from gatewayctl's own environment, as the gateway takes it from its
/// own at start: a service's environment may differ) and where the usual tools resolve on it.
pub(super) fn path_checks(state_dir: &Path, home: Option<&Path>) -> Vec<Check> {
    let owner = std::env::var("CLAUDE_TOOLS_COMMAND_PATH")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .or_else(|| std::env::var("PATH").ok());
    let home = home
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/"));
    let policy = sandbox::path_policy::PathPolicy::new(home, state_dir.to_path_buf(), vec![]);
    let search = sandbox::command::command_path(owner.as_deref(), |p| policy.is_protected(p));
    let tools: Vec<String> = ["cargo", "python3", "node", "npm", "go", "make", "git"]
        .iter()
        .map(|tool| {
            match sandbox::command::resolve_executable(
                tool,
                Path::new("/"),
                Path::new("/"),
                &search,
            ) {
                Ok(path) => format!("{tool} {}", sandbox::escape::path_for_display(&path)),
                Err(_) => format!("{tool} not found"),
            }
        })
        .collect();
    vec![
        ok(
            "commands: PATH",
            format!(
                "{} (CLAUDE_TOOLS_COMMAND_PATH or the gateway's PATH at start; relative, \
                 world-writable and protected directories dropped)",
                sandbox::escape::path_for_display(Path::new(&search))
            ),
        ),
        ok("commands: tools", tools.join(", ")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;

    /// Red team 45 F2: the running gateway's report decides the command layer's line.
    #[test]
    fn a_gateway_whose_commands_get_no_layer_is_a_warning() {
        let reported = |commands: &str| common::admin::Confinement {
            runner: "loopback only".into(),
            runner_writes: "denied".into(),
            enforced_by: "linux:netns+landlock(v6)+seccomp".into(),
            commands_enforced_by: commands.into(),
            degraded: true,
        };
        let without = layer_check(Some(&reported("linux:landlock(v6)+seccomp+nnp+caps")));
        assert_eq!(without.status, Status::Warn);
        assert!(
            without
                .detail
                .starts_with("the running gateway's commands get no copy-on-write layer"),
            "{}",
            without.detail
        );
        let with = layer_check(Some(&reported("linux:userns+mountns+seccomp+overlay")));
        assert!(
            !with.detail.starts_with("the running gateway's"),
            "{}",
            with.detail
        );
    }
}
