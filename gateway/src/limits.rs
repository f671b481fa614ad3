//! Resource limits sized from the host unless the owner sets them: per-command memory and scratch
//! (handed to every broker in its spec), the number of live sessions, and how long ended
//! sessions' files are kept.

use std::time::Duration;

use anyhow::{Context, bail};
use common::protocol::CommandLimits;

/// Physical memory of this host, MiB (0 when unknown).
pub fn host_memory_mb() -> u64 {
    // rustix has no sysconf(_SC_PHYS_PAGES) (its sysinfo is Linux-only): libc on every OS.
    // SAFETY: sysconf with constant names only reads system configuration.
    let (pages, page_size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || page_size <= 0 {
        return 0;
    }
    (pages as u64).saturating_mul(page_size as u64) / (1024 * 1024)
}

/// Default memory limit of one command: an eighth of the host's memory, within 512 MiB – 4 GiB.
pub fn default_command_memory_mb(host_mb: u64) -> u64 {
    (host_mb / 8).clamp(512, 4096)
}

/// Default scratch quota of one command (its files live in memory): a 32nd of the host's memory,
/// within 128 – 512 MiB.
pub fn default_command_scratch_mb(host_mb: u64) -> u64 {
    (host_mb / 32).clamp(128, 512)
}

/// Free space of the file system holding `path`, MiB (0 when unknown).
pub fn free_disk_mb(path: &std::path::Path) -> u64 {
    let Ok(stat) = rustix::fs::statvfs(path) else {
        return 0;
    };
    stat.f_bavail.saturating_mul(stat.f_frsize) / (1024 * 1024)
}

/// Default budget of one session's copy-on-write layer (build outputs, caches, tool state): a
/// quarter of the free space where layers live, within 256 MiB – 16 GiB.
pub fn default_command_layer_mb(free_mb: u64) -> u64 {
    (free_mb / 4).clamp(256, 16 * 1024)
}

/// Default number of live sessions: one per 256 MiB of half the host's memory (a session with its
/// runner takes about 180 MiB), within 2 – 64.
pub fn default_max_live_sessions(host_mb: u64) -> usize {
    usize::try_from((host_mb / 2 / 256).clamp(2, 64)).unwrap_or(2)
}

pub(crate) fn positive_env(name: &str, min: u64, max: u64) -> anyhow::Result<Option<u64>> {
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => {
            let n: u64 = v
                .trim()
                .parse()
                .with_context(|| format!("{name} must be a whole number, got {v:?}"))?;
            if !(min..=max).contains(&n) {
                bail!("{name} must be between {min} and {max}, got {n}");
            }
            Ok(Some(n))
        }
        _ => Ok(None),
    }
}

/// Default bound of all the gateway's commands together: half the host's memory, and at least
/// one command's own bound (its memory and scratch).
pub fn default_all_commands_memory_mb(host_mb: u64, command_mb: u64) -> u64 {
    (host_mb / 2).max(command_mb)
}

/// `CLAUDE_TOOLS_COMMAND_MEMORY_MB`, `CLAUDE_TOOLS_COMMAND_SCRATCH_MB`,
/// `CLAUDE_TOOLS_COMMAND_LAYER_MB` and `CLAUDE_TOOLS_COMMANDS_MEMORY_MB` (all commands
/// together, in a parent cgroup named after `state_dir`), or the host defaults.
pub fn command_limits_from_env(state_dir: &std::path::Path) -> anyhow::Result<CommandLimits> {
    let host = host_memory_mb();
    let memory = positive_env("CLAUDE_TOOLS_COMMAND_MEMORY_MB", 16, 1 << 22)?
        .unwrap_or_else(|| default_command_memory_mb(host));
    let scratch = positive_env("CLAUDE_TOOLS_COMMAND_SCRATCH_MB", 1, 1 << 22)?
        .unwrap_or_else(|| default_command_scratch_mb(host));
    // Layers live in the command runtime area, in /tmp.
    let layer = positive_env("CLAUDE_TOOLS_COMMAND_LAYER_MB", 1, 1 << 30)?
        .unwrap_or_else(|| default_command_layer_mb(free_disk_mb(std::path::Path::new("/tmp"))));
    let all = positive_env("CLAUDE_TOOLS_COMMANDS_MEMORY_MB", 16, 1 << 22)?
        .unwrap_or_else(|| default_all_commands_memory_mb(host, memory + scratch));
    Ok(CommandLimits {
        memory_mb: Some(memory),
        scratch_mb: Some(scratch),
        layer_mb: Some(layer),
        all_commands_memory_mb: Some(all),
        memory_group: Some(sandbox::MemoryGroup::key(&state_dir.display().to_string())),
    })
}

/// At gateway start (issue 24): the gateway asks to be the OOM killer's last pick (granted to
/// root only; commands and runners raise their own score), lays out a delegated cgroup v2
/// subtree for command cgroups where it has one, sweeps command cgroups a killed broker left,
/// and logs what bounds a command's memory here.
pub fn prepare_command_memory() {
    #[cfg(target_os = "linux")]
    {
        use sandbox::linux::cgroup;
        if !cgroup::set_oom_score_adj(cgroup::GATEWAY_OOM_SCORE_ADJ) {
            tracing::debug!("oom_score_adj: not allowed to lower it");
        }
        let delegated = cgroup::prepare_delegated();
        let swept = cgroup::sweep_orphans();
        if swept > 0 {
            tracing::info!("removed {swept} command cgroups left by earlier commands");
        }
        tracing::info!(
            delegated,
            "command {}",
            sandbox::host_support().command_memory()
        );
    }
}

/// After the config is read: the parent cgroup of all this gateway's commands made with its
/// bound (a helper makes it again if it goes meanwhile), and the log says whether it is in
/// force. Returns whether it is.
pub fn prepare_all_commands_memory(limits: &CommandLimits) -> bool {
    #[cfg(target_os = "linux")]
    if let (Some(mb), Some(gateway), Some(parent)) = (
        limits.all_commands_memory_mb,
        limits.memory_group,
        sandbox::host_support()
            .memory_cgroup
            .and_then(|_| sandbox::linux::cgroup::parent()),
    ) {
        return match sandbox::linux::cgroup::ensure_group(&parent, gateway, mb << 20) {
            Ok(_) => {
                tracing::info!("all commands together: at most {mb} MiB (a parent cgroup)");
                true
            }
            Err(err) => {
                tracing::error!("all commands together: {err}; commands will be refused");
                false
            }
        };
    }
    let _ = limits;
    false
}

/// At gateway exit: its commands' parent cgroup removed, unless brokers that outlive the
/// gateway (re-adopted at its next start) still keep their sessions' cgroups in it.
pub fn release_all_commands_memory(limits: &CommandLimits) {
    #[cfg(target_os = "linux")]
    if let (Some(gateway), Some(parent)) = (limits.memory_group, sandbox::linux::cgroup::parent()) {
        let removed = sandbox::linux::cgroup::remove_group(&parent, gateway);
        tracing::debug!(removed, "the commands' parent cgroup at exit");
    }
    let _ = limits;
}

/// `CLAUDE_TOOLS_MAX_LIVE_SESSIONS`, or the host default.
pub fn max_live_sessions_from_env() -> anyhow::Result<usize> {
    Ok(
        match positive_env("CLAUDE_TOOLS_MAX_LIVE_SESSIONS", 1, 10_000)? {
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => default_max_live_sessions(host_memory_mb()),
        },
    )
}

/// Default retention of ended sessions' files.
pub const DEFAULT_RETENTION_DAYS: u64 = 14;

/// `CLAUDE_TOOLS_RETENTION_DAYS`, or the default.
pub fn retention_from_env() -> anyhow::Result<Duration> {
    let days = crate::limits::positive_env("CLAUDE_TOOLS_RETENTION_DAYS", 1, 36_500)?
        .unwrap_or(DEFAULT_RETENTION_DAYS);
    Ok(Duration::from_secs(days * 24 * 3600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_scale_with_the_host_within_bounds() {
        assert_eq!(default_command_memory_mb(2048), 512);
        assert_eq!(default_command_memory_mb(16384), 2048);
        assert_eq!(default_command_memory_mb(1 << 20), 4096);
        assert_eq!(default_command_scratch_mb(2048), 128);
        assert_eq!(default_command_scratch_mb(8192), 256);
        assert_eq!(default_command_scratch_mb(65536), 512);
        assert_eq!(default_command_layer_mb(0), 256);
        assert_eq!(default_command_layer_mb(8 * 1024), 2048);
        assert_eq!(default_command_layer_mb(1 << 30), 16 * 1024);
        assert_eq!(default_all_commands_memory_mb(24 * 1024, 3584), 12 * 1024);
        assert_eq!(default_all_commands_memory_mb(2048, 640), 1024);
        assert_eq!(default_all_commands_memory_mb(1024, 640), 640);
        assert_eq!(default_max_live_sessions(1024), 2);
        assert_eq!(default_max_live_sessions(16384), 32);
        assert_eq!(default_max_live_sessions(1 << 20), 64);
        assert!(host_memory_mb() > 0);
    }
}
