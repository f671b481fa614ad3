//! Broker processes: spawning one in its own session (setsid, so a gateway exit does not signal
//! it) from the pinned gateway image, and checking and signalling it by identity (boot, pid, start
//! time, and on Linux its command line naming the record's own spec) so neither a reused pid nor
//! a record pointed at another session's broker is mistaken for it. No session logic: see
//! `session::supervision`.

use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, bail};
use common::protocol::BrokerSpec;
use futures::future::BoxFuture;
use sandbox::process::{Identity, boot_id, identify, process_start_time};

use super::{BrokerHost, BrokerOwner, BrokerSignal, ConnectError, LaunchSpec, Link};
use crate::private_files::{private_dir, write_private_file};
use crate::state::{BrokerRecord, LaunchError, LaunchErrorCode};

/// Unix socket paths must fit `sun_path` (104 bytes on macOS, 108 on Linux).
const MAX_SOCKET_PATH: usize = 100;

/// Brokers as real processes of this host.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessHost;

impl BrokerHost for ProcessHost {
    fn spawn<'a>(
        &'a self,
        spec: LaunchSpec<'a>,
    ) -> BoxFuture<'a, Result<BrokerRecord, LaunchError>> {
        Box::pin(async move {
            if !is_executable(&spec.config.claude_bin) {
                return Err(LaunchError::now(
                    LaunchErrorCode::RunnerNotFound,
                    "the Claude Code binary was not found or is not executable; set CLAUDE_BIN or \
                     run scripts/install-claude-code, then start a new session",
                ));
            }
            spawn(&spec).await.map_err(|err| {
                tracing::error!(session = %spec.session.session_id, "spawning broker: {err:#}");
                LaunchError::now(
                    LaunchErrorCode::BrokerSpawnFailed,
                    "the session's runtime could not be started; see the gateway log",
                )
            })
        })
    }

    fn connect<'a>(
        &'a self,
        owner: &'a BrokerOwner,
        record: &'a BrokerRecord,
        timeout: std::time::Duration,
    ) -> BoxFuture<'a, Result<Link, ConnectError>> {
        Box::pin(super::link::connect(owner, record, timeout))
    }

    fn find<'a>(&'a self, owner: &'a BrokerOwner) -> BoxFuture<'a, Option<BrokerRecord>> {
        Box::pin(async move {
            let stream = tokio::net::UnixStream::connect(&owner.socket_path)
                .await
                .ok()?;
            let pid = stream.peer_cred().ok()?.pid()?;
            // Closed at once: the broker drops a connection that sends no hello.
            drop(stream);
            Some(BrokerRecord {
                pid,
                start_time: process_start_time(pid)?,
                boot_id: boot_id()?,
                socket_path: owner.socket_path.display().to_string(),
                runtime_dir: owner.runtime_dir.display().to_string(),
                secret: owner.secret.clone(),
                generation: owner.generation,
                next_event_seq: 0,
            })
        })
    }

    fn is_alive(&self, record: &BrokerRecord) -> bool {
        is_recorded_broker(record)
    }

    fn signal(&self, record: &BrokerRecord, signal: BrokerSignal) -> bool {
        send_verified(record, signal)
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

async fn spawn(launch: &LaunchSpec<'_>) -> anyhow::Result<BrokerRecord> {
    let (config, session, owner) = (launch.config, &launch.session, launch.owner);
    let (generation, resume) = (launch.generation, launch.resume);
    anyhow::ensure!(
        owner.session_id == session.session_id && owner.generation == generation,
        "the broker's derived places and secret are not this launch's"
    );
    // Derived from the session id (a short directory name keeps the socket path under the
    // platform limit): at adoption, a record naming other places is refused.
    let runtime_dir = owner.runtime_dir.clone();
    private_dir(&runtime_dir)?;
    let socket_path = owner.socket_path.clone();
    if socket_path.as_os_str().len() > MAX_SOCKET_PATH {
        bail!(
            "socket path would be {} bytes; use a shorter CLAUDE_TOOLS_STATE_DIR",
            socket_path.as_os_str().len()
        );
    }
    // Derived from the server key, the session id and the generation: a record moved to another
    // session carries a secret that session does not derive.
    let secret = owner.secret.clone();
    let spec = BrokerSpec {
        session_id: session.session_id.clone(),
        claude_session_id: session.claude_session_id.clone(),
        generation,
        resume,
        profile: session.profile,
        subagent_policy: session.subagent_policy,
        working_directory: session.working_directory.clone(),
        working_directory_identity: session.working_directory_identity,
        runtime_dir: runtime_dir.display().to_string(),
        socket_path: socket_path.display().to_string(),
        secret: secret.clone(),
        runner_token: common::hash::new_secret("rnr"),
        claude_bin: config.claude_bin.display().to_string(),
        system_prompt: launch.system_prompt.to_string(),
        owner_home: config.owner_home.display().to_string(),
        state_dir: config.state_dir.display().to_string(),
        extra_protected: config
            .extra_protected
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        worktree_dir: Some(config.worktree_dir.display().to_string()),
        runner_confinement: crate::boundary::runner_confinement(),
        helper_sha256: Some(config.exe.sha256().to_string()),
        gateway_install_path: Some(config.install_path.display().to_string()),
        command_limits: config.command_limits,
        autorun_allowed: config
            .autorun_allowed
            .names()
            .into_iter()
            .map(str::to_string)
            .collect(),
        strict_hooks: config.strict_hooks,
        command_path: Some(config.command_path.clone()),
        merge_target: session.merge_target.clone(),
        delegation: session.delegation.clone(),
    };
    let spec_path = runtime_dir.join(SPEC_FILE);
    write_private_file(&spec_path, serde_json::to_string(&spec)?.as_bytes())?;
    let log = sandbox::private_fs::open_private_file(
        &runtime_dir.join("broker.log"),
        std::fs::OpenOptions::new().create(true).append(true),
    )
    .context("opening broker log")?;

    // The pinned image, by descriptor: a replaced install file is never what starts.
    let exe = config.exe.exec_path().context("the gateway executable")?;
    let mut cmd = tokio::process::Command::new(&exe);
    cmd.arg("broker")
        .arg("--spec")
        .arg(&spec_path)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &config.owner_home)
        .stdin(Stdio::null())
        .stdout(Stdio::from(log.try_clone()?))
        .stderr(Stdio::from(log))
        .kill_on_drop(false);
    if let Ok(filter) = std::env::var("RUST_LOG") {
        cmd.env("RUST_LOG", filter);
    }
    // The owner's values the broker's write rules read, under a prefix: the broker reads them
    // without running with them (an LD_PRELOAD, a BASH_ENV), and its own children get cleared
    // environments of their own: nothing here reaches the runner or a command.
    cmd.envs(sandbox::protected::autorun::owner_env::handed(
        std::env::vars_os(),
    ));
    // Crash tests arm the broker's write failpoints through the gateway's environment.
    #[cfg(feature = "failpoints")]
    if let Some(point) = std::env::var_os(broker::executor::failpoint::FAILPOINT_ENV) {
        cmd.env(broker::executor::failpoint::FAILPOINT_ENV, point);
    }
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent; it only detaches
    // the child into its own session so signals to the gateway's group do not reach it.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    let mut child = cmd.spawn().context("spawning broker")?;
    let pid = child.id().context("broker exited at once")? as i32;
    // Reap the broker when it exits, so it never lingers as a zombie of ours.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(BrokerRecord {
        pid,
        start_time: process_start_time(pid)
            .context("reading the broker's start time (needed to verify it later)")?,
        boot_id: boot_id().context("reading this boot's id (needed to verify the broker later)")?,
        socket_path: socket_path.display().to_string(),
        runtime_dir: runtime_dir.display().to_string(),
        secret,
        generation,
        next_event_seq: 1,
    })
}

/// The file a broker's command line names (`gateway broker --spec <this>`).
const SPEC_FILE: &str = "broker-spec.json";

/// Whether the recorded broker process is still there (same boot, pid and start time) and, on
/// Linux, runs as the broker of the record's runtime dir: its command line is `<exe> broker
/// --spec <runtime dir>/broker-spec.json`, as [`spawn`] started it. A database writer can copy
/// another broker's pid and start time into a record, not that broker's command line, so no
/// session signals or waits on another session's broker (a zombie's empty command line reads
/// as gone, which it is).
fn is_recorded_broker(record: &BrokerRecord) -> bool {
    if identify(record.pid, record.start_time, &record.boot_id) != Identity::Verified {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::ffi::OsStrExt;
        let Ok(cmdline) = std::fs::read(format!("/proc/{}/cmdline", record.pid)) else {
            return false;
        };
        let spec = Path::new(&record.runtime_dir).join(SPEC_FILE);
        let args: Vec<&[u8]> = cmdline.split(|byte| *byte == 0).collect();
        let expected: [&[u8]; 3] = [b"broker", b"--spec", spec.as_os_str().as_bytes()];
        args.get(1..4) == Some(&expected[..])
    }
    // macOS: identity only (its command line is not read here).
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

/// Send `signal` to the recorded broker if, and only if, it is still that process (same boot,
/// pid and start time); whether it was sent. On Linux the check and the signal go through one
/// pidfd, which pins the process: a pid freed and reused between them cannot be hit.
fn send_verified(record: &BrokerRecord, signal: BrokerSignal) -> bool {
    let verified = || is_recorded_broker(record);
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{Pid, PidfdFlags, pidfd_open, pidfd_send_signal};
        let Some(pid) = Pid::from_raw(record.pid) else {
            return false;
        };
        let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
            return false;
        };
        // Checked with the process pinned by its pidfd.
        if !verified() {
            return false;
        }
        let signal = match signal {
            BrokerSignal::Term => rustix::process::Signal::TERM,
            BrokerSignal::Kill => rustix::process::Signal::KILL,
        };
        pidfd_send_signal(&pidfd, signal).is_ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let signal = match signal {
            BrokerSignal::Term => rustix::process::Signal::TERM,
            BrokerSignal::Kill => rustix::process::Signal::KILL,
        };
        verified()
            && rustix::process::Pid::from_raw(record.pid)
                .is_some_and(|pid| rustix::process::kill_process(pid, signal).is_ok())
    }
}
