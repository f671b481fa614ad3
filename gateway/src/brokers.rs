//! Starting a session's broker and keeping the verified link to it: spawn in its own session
//! (setsid) so a gateway exit does not signal it, verify it (socket peer uid and pid, recorded start
//! time, HMAC proof of its secret), then carry its events into the state and releases out to it.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use common::codec::{decode, encode, frame_codec};
use common::protocol::{
    BrokerSpec, BrokerToGateway, GatewayHello, GatewayToBroker, PROTOCOL_VERSION,
    PROTOCOL_VERSION_MIN,
};
use futures::{SinkExt, StreamExt};
use serde_json::json;
use tokio::net::UnixStream;
use tokio_util::codec::Framed;

use crate::config::{private_dir, write_private_file};
use crate::service::Gateway;
use crate::state::{BrokerRecord, SessionRecord, StoreError};
use crate::view::{LaunchError, LaunchErrorCode};

/// Unix socket paths must fit `sun_path` (104 bytes on macOS, 108 on Linux).
const MAX_SOCKET_PATH: usize = 100;
/// How long a freshly spawned broker may take to open its socket.
const SPAWN_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long re-adopting an existing broker may take (its socket exists or it is gone).
pub const ADOPT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

const SYSTEM_PROMPT: &str = "You are the local agent harness of Native Gateway. The user's messages \
and your answers come from ChatGPT, which decides every step. Use only the mcp__gw__ tools you are \
given, exactly as the assistant turn specifies, and do not add commentary of your own.";

/// Start a broker (runner generation `generation`; `resume` continues the recorded Claude Code
/// conversation) and attach to it. On failure, the launch error to show.
pub async fn launch(
    gateway: &Arc<Gateway>,
    session: &mut SessionRecord,
    generation: u32,
    resume: bool,
) -> Result<(), LaunchError> {
    let launch_error = LaunchError::now;
    let claude_bin = &gateway.config.claude_bin;
    if !is_executable(claude_bin) {
        return Err(launch_error(
            LaunchErrorCode::RunnerNotFound,
            "the Claude Code binary was not found or is not executable; set CLAUDE_BIN or run \
             scripts/install-claude-code, then start a new session",
        ));
    }
    match spawn(gateway, session, generation, resume).await {
        Ok(record) => {
            session.broker = Some(record.clone());
            // In the transaction that records it: a session that ended meanwhile (its lease
            // expired during the launch) does not get a new runtime.
            let saved = gateway.store.write(|tx| {
                let Some(mut stored) = tx.session(&session.id)? else {
                    return Ok::<_, crate::state::StoreError>(false);
                };
                if stored.status.is_terminal() {
                    return Ok(false);
                }
                stored.broker = Some(record.clone());
                tx.put_session(&stored)?;
                tx.append_event(Some(&session.id), "broker_spawned", &json!({}))?;
                Ok(true)
            });
            match saved {
                Ok(true) => {}
                Ok(false) => {
                    kill_verified(&record);
                    return Err(launch_error(
                        LaunchErrorCode::SessionTerminal,
                        "the session ended while its runtime was starting; start a new session",
                    ));
                }
                Err(err) => {
                    tracing::error!("recording broker: {err}");
                    kill_verified(&record);
                    return Err(launch_error(
                        LaunchErrorCode::Internal,
                        "the gateway could not record the session's runtime",
                    ));
                }
            }
            match attach(gateway.clone(), &session.id, &record, SPAWN_CONNECT_TIMEOUT).await {
                Ok(()) => Ok(()),
                Err(err) => {
                    tracing::error!(session = %session.id, "attaching broker: {err:#}");
                    Err(launch_error(
                        LaunchErrorCode::BrokerUnreachable,
                        "the session's runtime did not answer; start a new session",
                    ))
                }
            }
        }
        Err(err) => {
            tracing::error!(session = %session.id, "spawning broker: {err:#}");
            Err(launch_error(
                LaunchErrorCode::BrokerSpawnFailed,
                "the session's runtime could not be started; see the gateway log",
            ))
        }
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

async fn spawn(
    gateway: &Gateway,
    session: &SessionRecord,
    generation: u32,
    resume: bool,
) -> anyhow::Result<BrokerRecord> {
    let config = &gateway.config;
    // A short directory name keeps the socket path under the platform limit.
    let short: String = session
        .id
        .trim_start_matches("ns_")
        .chars()
        .take(12)
        .collect();
    let runtime_dir = config.state_dir.join("run").join(&short);
    private_dir(&runtime_dir)?;
    let socket_path = runtime_dir.join("b.sock");
    if socket_path.as_os_str().len() > MAX_SOCKET_PATH {
        bail!(
            "socket path would be {} bytes; use a shorter CLAUDE_TOOLS_STATE_DIR",
            socket_path.as_os_str().len()
        );
    }
    let secret = common::hash::new_secret("brk");
    let spec = BrokerSpec {
        session_id: session.id.clone(),
        claude_session_id: session.claude_session_id.clone(),
        generation,
        resume,
        profile: session.profile,
        subagent_policy: session.subagent_policy,
        working_directory: session.working_directory.clone(),
        runtime_dir: runtime_dir.display().to_string(),
        socket_path: socket_path.display().to_string(),
        secret: secret.clone(),
        runner_token: common::hash::new_secret("rnr"),
        claude_bin: config.claude_bin.display().to_string(),
        system_prompt: SYSTEM_PROMPT.to_string(),
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
    };
    let spec_path = runtime_dir.join("broker-spec.json");
    write_private_file(&spec_path, serde_json::to_string(&spec)?.as_bytes())?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(runtime_dir.join("broker.log"))
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
    // Crash tests arm the broker's write failpoints through the gateway's environment.
    #[cfg(feature = "failpoints")]
    if let Some(point) = std::env::var_os(broker::executor::failpoint::FAILPOINT_ENV) {
        cmd.env(broker::executor::failpoint::FAILPOINT_ENV, point);
    }
    // Safety: setsid is async-signal-safe and touches no memory of the parent; it only detaches
    // the child into its own session so signals to the gateway's group do not reach it.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
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
        boot_id: boot_id(),
        socket_path: socket_path.display().to_string(),
        runtime_dir: runtime_dir.display().to_string(),
        secret,
        next_event_seq: 1,
    })
}

/// The kernel's start time of `pid`, to tell a reused PID apart (Linux: clock ticks since boot).
#[cfg(target_os = "linux")]
pub fn process_start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name (which may contain spaces): state is field 3,
    // the start time field 22.
    let mut fields = stat.get(stat.rfind(')')? + 2..)?.split_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        // Exited, not yet reaped: not a live process.
        return None;
    }
    fields.nth(18)?.parse().ok()
}

/// The kernel's start time of `pid` in microseconds since the epoch (macOS).
#[cfg(target_os = "macos")]
pub fn process_start_time(pid: i32) -> Option<u64> {
    // Safety: proc_bsdinfo is plain data; proc_pidinfo writes at most `size` bytes into it.
    let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
    // Safety: the buffer is valid for `size` bytes for the duration of the call.
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

/// SIGTERM the broker of `record` if, and only if, the process is still the recorded one (same
/// boot, pid and start time). The broker stops its runner's group on SIGTERM.
pub fn signal_verified(record: &BrokerRecord) -> bool {
    send_verified(record, BrokerSignal::Term)
}

#[derive(Clone, Copy)]
enum BrokerSignal {
    Term,
    Kill,
}

/// Send `signal` to the recorded broker if, and only if, it is still that process (same boot,
/// pid and start time); whether it was sent. On Linux the check and the signal go through one
/// pidfd, which pins the process: a pid freed and reused between them cannot be hit.
fn send_verified(record: &BrokerRecord, signal: BrokerSignal) -> bool {
    if boot_id() != record.boot_id {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        use rustix::process::{Pid, PidfdFlags, pidfd_open, pidfd_send_signal};
        let Some(pid) = Pid::from_raw(record.pid) else {
            return false;
        };
        let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
            return false;
        };
        if process_start_time(record.pid) != Some(record.start_time) {
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
            BrokerSignal::Term => nix::sys::signal::Signal::SIGTERM,
            BrokerSignal::Kill => nix::sys::signal::Signal::SIGKILL,
        };
        process_start_time(record.pid) == Some(record.start_time)
            && nix::sys::signal::kill(nix::unistd::Pid::from_raw(record.pid), signal).is_ok()
    }
}

/// SIGKILL the broker of `record` if it is still the recorded process: for one that did not
/// stop on SIGTERM (hung or stopped). Its runner dies with it (`PR_SET_PDEATHSIG` on Linux).
pub fn kill_verified(record: &BrokerRecord) -> bool {
    send_verified(record, BrokerSignal::Kill)
}

/// Wait until the recorded broker process is gone (or `within` passes); whether it is gone.
pub async fn wait_gone(record: &BrokerRecord, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if process_start_time(record.pid) != Some(record.start_time) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// This boot's identity.
#[cfg(target_os = "linux")]
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// This boot's identity (macOS: `kern.bootsessionuuid`).
#[cfg(target_os = "macos")]
pub fn boot_id() -> String {
    let mut buf = [0u8; 64];
    let mut len = buf.len();
    // Safety: the name is NUL-terminated; buf and len describe a valid writable buffer.
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
        return String::new();
    }
    String::from_utf8_lossy(&buf[..len.min(buf.len())])
        .trim_end_matches('\0')
        .to_string()
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub fn boot_id() -> String {
    String::new()
}

/// Connect to a broker, verify it, and run the link until it closes. Once attached, releases the
/// broker may have missed (a persisted reply or prompt) are sent again; the broker ignores
/// duplicates.
pub async fn attach(
    gateway: Arc<Gateway>,
    session_id: &str,
    record: &BrokerRecord,
    connect_timeout: Duration,
) -> anyhow::Result<()> {
    let framed = connect_verified(record, connect_timeout).await?;
    let (mut sink, mut stream) = framed.split();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<GatewayToBroker>();
    let live = gateway.live(session_id);
    let link_id = live.set_link(tx.clone());
    gateway.on_attached(session_id);
    gateway.resend_releases(session_id);

    let writer = tokio::spawn(async move {
        while let Some(message) = rx.recv().await {
            let Ok(bytes) = encode(&message) else {
                continue;
            };
            if sink.send(bytes).await.is_err() {
                break;
            }
        }
    });
    let session_id = session_id.to_string();
    let broker_pid = record.pid;
    let record = record.clone();
    tokio::spawn(async move {
        // Acknowledgements are cumulative at the broker, so an event that could not be recorded
        // must not be followed by an ack of a later one: the link is dropped and re-made, and the
        // broker sends everything unacknowledged again, in order.
        let mut failed = false;
        while let Some(Ok(frame)) = stream.next().await {
            match decode::<BrokerToGateway>(&frame) {
                Ok(BrokerToGateway::Event { seq, event }) => {
                    match gateway.on_broker_event(&session_id, broker_pid, seq, event) {
                        Ok(()) => {
                            let _ = tx.send(GatewayToBroker::Ack { seq });
                        }
                        Err(err) => {
                            log_store_error(&err);
                            failed = true;
                            break;
                        }
                    }
                }
                Ok(other) => tracing::debug!("broker said {other:?}"),
                Err(err) => {
                    tracing::warn!("undecodable broker frame: {err}");
                    failed = true;
                    break;
                }
            }
        }
        writer.abort();
        // A newer link (a re-attach) may already have replaced this one.
        if !gateway.live(&session_id).clear_link(link_id) {
            return;
        }
        if failed {
            reattach_after_failure(gateway, session_id, record).await;
        } else {
            // A dying broker closes its socket just before it exits: give it a moment, so a dead
            // broker is told apart from a live one that merely lost its link.
            wait_gone(&record, Duration::from_secs(1)).await;
            gateway.on_link_lost(&session_id, record.pid);
        }
    });
    Ok(())
}

/// Re-make a link that was dropped because an event could not be recorded. Boxed: `attach`
/// spawns the task that calls this.
fn reattach_after_failure(
    gateway: Arc<Gateway>,
    session_id: String,
    record: BrokerRecord,
) -> futures::future::BoxFuture<'static, ()> {
    Box::pin(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if attach(gateway.clone(), &session_id, &record, ADOPT_CONNECT_TIMEOUT)
            .await
            .is_err()
        {
            gateway.on_link_lost(&session_id, record.pid);
        }
    })
}

fn log_store_error(err: &StoreError) {
    tracing::error!("persisting broker event: {err}");
}

async fn connect_verified(
    record: &BrokerRecord,
    timeout: Duration,
) -> anyhow::Result<Framed<UnixStream, tokio_util::codec::LengthDelimitedCodec>> {
    // Identity first: never talk to a process that merely reuses the recorded PID.
    if process_start_time(record.pid) != Some(record.start_time) || boot_id() != record.boot_id {
        bail!("broker process identity (boot, pid, start time) does not match the record");
    }
    let path = PathBuf::from(&record.socket_path);
    let deadline = tokio::time::Instant::now() + timeout;
    let stream = loop {
        match UnixStream::connect(&path).await {
            Ok(stream) => break stream,
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(err) => return Err(err).context("connecting to broker socket"),
        }
    };
    let cred = stream
        .peer_cred()
        .context("reading socket peer credentials")?;
    if cred.uid() != nix::unistd::getuid().as_raw() {
        bail!("broker socket peer runs as another user");
    }
    if cred.pid() != Some(record.pid) {
        bail!("broker socket peer is not the recorded broker process");
    }
    if boot_id() != record.boot_id
        || process_start_time(record.pid).unwrap_or(0) != record.start_time
    {
        bail!("broker process identity (boot, start time) does not match the record");
    }
    let mut framed = Framed::new(stream, frame_codec());
    let nonce = common::hash::new_secret("nonce");
    framed
        .send(encode(&GatewayToBroker::Hello(GatewayHello {
            protocol_min: PROTOCOL_VERSION_MIN,
            protocol_max: PROTOCOL_VERSION,
            build: env!("CARGO_PKG_VERSION").to_string(),
            nonce: nonce.clone(),
        }))?)
        .await?;
    let frame = tokio::time::timeout(timeout.max(Duration::from_secs(5)), framed.next())
        .await
        .context("broker handshake timed out")?
        .context("broker closed during handshake")??;
    let BrokerToGateway::Hello(hello) = decode::<BrokerToGateway>(&frame)? else {
        bail!("broker did not answer with a hello");
    };
    hello
        .verify(&record.secret, &nonce)
        .map_err(anyhow::Error::msg)?;
    framed
        .send(encode(&GatewayToBroker::Proof {
            proof: common::hash::gateway_proof(&record.secret, &hello.challenge),
        })?)
        .await?;
    Ok(framed)
}
