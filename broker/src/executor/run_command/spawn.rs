//! Starting the confinement helper for one command: the pinned gateway executable as
//! `sandbox-exec` in its own process group, with a cleared environment, the spec on stdin, the
//! death signal armed and the status pipe on which it tells the command's end (Linux); macOS's
//! `/usr/bin/sandbox-exec` with the generated Seatbelt profile.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use sandbox::spec::ExecSpec;

use super::{CommandError, CommandSandbox};

/// The pinned helper's path for `execve`, checked unchanged (see [`PinnedExe::exec_path`]).
#[cfg(target_os = "linux")]
pub(super) fn helper_path(config: &CommandSandbox) -> Result<PathBuf, CommandError> {
    Ok(config
        .helper
        .as_ref()
        .ok_or(CommandError::NoHelper)?
        .exec_path()?)
}

/// Start the helper in its own process group with a cleared environment and the spec on stdin.
#[cfg(target_os = "linux")]
pub(super) fn spawn(config: &CommandSandbox, spec: &mut ExecSpec) -> Result<Spawned, CommandError> {
    spawn_helper(&helper_path(config)?, spec)
}

/// The helper, and the read end of its status pipe (`ExecSpec::status_fd`), if one was made.
pub(super) type Spawned = (Child, Option<OwnedFd>);

#[cfg(target_os = "linux")]
pub(super) fn spawn_helper(helper: &Path, spec: &mut ExecSpec) -> Result<Spawned, CommandError> {
    let (mut child, status) = start_helper(helper, spec)?;
    write_spec(child.stdin.take(), spec);
    Ok((child, status))
}

/// Write `spec` on the helper's stdin and close it (an empty one: the helper runs nothing and
/// says why in its report).
pub(super) fn write_spec(stdin: Option<std::process::ChildStdin>, spec: &ExecSpec) {
    let Some(mut stdin) = stdin else {
        return;
    };
    match serde_json::to_vec(spec) {
        // The helper died early; supervise() reports the missing report line.
        Ok(json) => {
            if let Err(err) = stdin.write_all(&json) {
                tracing::warn!("writing the command spec: {err}");
            }
        }
        Err(err) => tracing::warn!("encoding the command spec: {err}"),
    }
}

/// Start the helper with its stdin still open (the caller writes the spec); sets
/// `spec.status_fd` to its status pipe's number.
///
/// No command outlives its broker: the helper (and, through its own death signal, the pid
/// namespace it forks) is SIGKILLed when the spawning thread dies. That thread is either the one
/// that then supervises the command until it has ended (the helper, told or reaped, is SIGKILLed
/// then anyway), so it lives as long as the command may, or the broker's reaper thread (a helper
/// started ahead, `ahead`), which lives as long as the broker; either dies with the broker however
/// the broker ends. A broker already gone before the prctl (re-parented child) is caught by
/// comparing the parent pid.
#[cfg(target_os = "linux")]
pub(super) fn start_helper(helper: &Path, spec: &mut ExecSpec) -> Result<Spawned, CommandError> {
    use std::os::fd::AsRawFd;
    // The helper tells the command's end on this pipe before its own exit, which tears the
    // namespaces down (`ExecSpec::status_fd`). Both ends are close-on-exec here; the child clears
    // the flag on its copy of the write end only. Without a pipe the end is learnt by reaping.
    let status = std::io::pipe().ok();
    spec.status_fd = status.as_ref().map(|(_, write)| write.as_raw_fd());
    let status_fd = spec.status_fd;
    let mut cmd = std::process::Command::new(helper);
    cmd.arg("sandbox-exec")
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let broker = rustix::process::getpid();
    // SAFETY: prctl, getppid and fcntl are async-signal-safe raw syscalls, allocate nothing and
    // change only the child; the status fd is open in the parent until after the spawn.
    unsafe {
        cmd.pre_exec(move || {
            use rustix::process::{Signal, getppid, set_parent_process_death_signal};
            set_parent_process_death_signal(Some(Signal::KILL))?;
            if getppid() != Some(broker) {
                return Err(rustix::io::Errno::SRCH.into());
            }
            if let Some(fd) = status_fd {
                let fd = std::os::fd::BorrowedFd::borrow_raw(fd);
                rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
            }
            Ok(())
        });
    }
    let spawned = cmd.spawn();
    // Our copy of the write end goes now: the pipe's end then means the helper's is closed.
    let status = status.map(|(read, _write)| OwnedFd::from(read));
    let child = spawned.map_err(|source| CommandError::Spawn {
        program: helper.to_path_buf(),
        source,
    })?;
    Ok((child, status))
}

/// macOS: `/usr/bin/sandbox-exec` with the generated profile; its report is synthesised.
#[cfg(target_os = "macos")]
pub(super) fn spawn(config: &CommandSandbox, spec: &mut ExecSpec) -> Result<Spawned, CommandError> {
    let canonical = |path: &Path| {
        std::fs::canonicalize(path).map_err(|source| CommandError::Io {
            path: path.to_path_buf(),
            source,
        })
    };
    let seatbelt = sandbox::seatbelt::SeatbeltSpec {
        scratch: canonical(&spec.scratch)?,
        // Seatbelt matches resolved paths (`/private/tmp`, not `/tmp`).
        session_dir: spec
            .layer
            .as_ref()
            .map(|layer| canonical(&layer.dir))
            .transpose()?,
        denied: spec
            .masked
            .iter()
            .flat_map(|p| {
                let mut v = vec![p.clone()];
                if let Ok(c) = std::fs::canonicalize(p) {
                    v.push(c);
                }
                v
            })
            .collect(),
        visible: spec
            .visible
            .iter()
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect(),
    };
    let mut cmd = sandbox::seatbelt::command(
        &seatbelt,
        &config.owner_home,
        &spec.program,
        spec.argv.get(1..).unwrap_or(&[]),
    );
    cmd.env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&spec.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().map_err(|source| CommandError::Spawn {
        program: PathBuf::from("sandbox-exec"),
        source,
    })?;
    Ok((child, None))
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(super) fn spawn(
    _config: &CommandSandbox,
    _spec: &mut ExecSpec,
) -> Result<Spawned, CommandError> {
    Err(CommandError::Unsupported)
}
