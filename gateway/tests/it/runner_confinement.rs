//! The runner's confinement seen from inside: a probe script takes Claude Code's place (as
//! `CLAUDE_BIN`) in a real gateway session and reports what it can reach and write; each result is
//! asserted with its specific errno. Also `network_boundary` in a real SessionView.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

/// A real Python interpreter by absolute path (the runner's PATH is fixed and shims need an
/// environment it does not have).
fn python() -> PathBuf {
    ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("the probe needs python3 in /usr/bin, /usr/local/bin or /bin")
}

/// The probe: tries each access and writes `{name: "ok" | errno name}` to `$HOME/probe.json`
/// (its HOME is one of the places it may write).
fn probe_script(gateway_port: u16, gateway_pid: u32, work_dir: &Path, state_dir: &Path) -> String {
    format!(
        r#"#!{python}
import errno, json, os, socket, uuid

def err(e):
    return errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__

def tcp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect((host, port))
        return "ok"
    except OSError as e:
        return err(e)
    finally:
        s.close()

def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return err(e)

def write(path):
    def f():
        with open(path, "w") as out:
            out.write("probe")
    return attempt(f)

def read(path):
    def f():
        with open(path, "rb") as inp:
            inp.read(1)
    return attempt(f)

def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"\x00" * 12, ("8.8.8.8", 53))
    finally:
        s.close()

def bind():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
    finally:
        s.close()

def unix_connect(path):
    def f():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            s.sendall(b'{{"op": "approve"}}\n')
        finally:
            s.close()
    return attempt(f)

def pair():
    for s in socket.socketpair():
        s.close()

def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    return None

broker_port = int(os.environ["ANTHROPIC_BASE_URL"].rsplit(":", 1)[1])
tag = uuid.uuid4().hex
home = os.environ["HOME"]
report = {{
    "broker_port": tcp("127.0.0.1", broker_port),
    "gateway_port": tcp("127.0.0.1", {gateway_port}),
    "other_host_broker_port": tcp("192.0.2.1", broker_port),
    "public_host_https": tcp("8.8.8.8", 443),
    "udp_dns": attempt(udp),
    "tcp_bind": attempt(bind),
    "write_work_dir": write(os.path.join({work_dir:?}, "probe-" + tag)),
    "write_tmp": write("/tmp/ng-probe-" + tag),
    "write_home": write(os.path.join(home, "probe-write-" + tag)),
    "write_tmpdir": write(os.path.join(os.environ["TMPDIR"], "probe-" + tag)),
    "read_work_dir": read(os.path.join({work_dir:?}, "notes.txt")),
    "read_server_key": read(os.path.join({state_dir:?}, "auth", "server-key")),
    "read_server_key_link": read({state_dir:?} + "-server-key-backup"),
    "signal_gateway": attempt(lambda: os.kill({gateway_pid}, 0)),
    "admin_socket": unix_connect(os.path.join({state_dir:?}, "run", "admin.sock")),
    "socketpair": attempt(pair),
    "no_new_privs": status("NoNewPrivs"),
    "cap_eff": status("CapEff"),
}}
with open(os.path.join(home, "probe.json.tmp"), "w") as out:
    json.dump(report, out)
os.rename(os.path.join(home, "probe.json.tmp"), os.path.join(home, "probe.json"))
"#,
        python = python().display(),
    )
}

/// Wait for the probe's report under the session's runtime dir.
async fn probe_report(state_dir: &Path) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = std::fs::read_dir(state_dir.join("run"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("home/probe.json"))
            .find(|p| p.is_file());
        if let Some(path) = found {
            return serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        }
        assert!(Instant::now() < deadline, "the probe wrote no report");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn probe_in_the_runners_place_reaches_only_the_broker_port() {
    let plan = gateway::boundary::runner_confinement();
    let full = plan.network_namespace && plan.landlock_abi.is_some_and(|a| a >= 6) && plan.seccomp;

    let scripts = tempfile::tempdir().unwrap();
    let probe = scripts.path().join("probe");
    let work = work_dir();
    // The gateway's port and pid are known once it runs; the probe reads its script only when the
    // broker starts it.
    std::fs::write(&probe, "").unwrap();
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", &probe)
        .spawn()
        .await
        .unwrap();
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let port: u16 = gw.addr().rsplit(':').next().unwrap().parse().unwrap();
    tests::executables::write(
        &probe,
        &probe_script(port, gw.pid().unwrap(), work.path(), gw.state_dir()),
    )
    .unwrap();

    // Red team 43 B1: an owner's hard link of a protected file, next to the state dir (a
    // directory the runner's read roots are split around: a rule on the link's inode opened the
    // protected path itself).
    let backup = RemovedOnDrop(PathBuf::from(format!(
        "{}-server-key-backup",
        gw.state_dir().display()
    )));
    std::fs::hard_link(gw.state_dir().join("auth/server-key"), &backup.0).unwrap();
    let chat = chatgpt(&gw).await;
    let result = chat
        .start_with(
            "probe",
            work.path(),
            "probe-start",
            serde_json::json!({"wait_seconds": 1}),
        )
        .await
        .unwrap();
    let v = view(&result);
    let boundary = &v["network_boundary"];

    if !full {
        // A host without the layers: the view must say so; nothing more to probe here.
        assert_eq!(boundary["degraded"], true, "{boundary}");
        eprintln!("runner confinement not fully supported on this host: {boundary}");
        return;
    }
    assert_eq!(
        boundary["runner"], "loopback:broker-port-only",
        "{boundary}"
    );
    assert_eq!(boundary["runner_writes"], "private-dirs-only", "{boundary}");
    assert_eq!(
        boundary["enforced_by"],
        format!(
            "linux:netns+landlock(v{})+seccomp+nnp+caps",
            plan.landlock_abi.unwrap()
        ),
        "{boundary}"
    );
    assert_eq!(boundary["degraded"], false, "{boundary}");
    // One truth (issue 23): commands are described with the ABI they enforce, the runner's.
    let commands = boundary["commands_enforced_by"].as_str().unwrap();
    assert!(
        commands.contains(&format!("landlock(v{})", plan.landlock_abi.unwrap())),
        "{boundary}"
    );

    let report = probe_report(gw.state_dir()).await;
    let expect = |key: &str, want: &str| {
        assert_eq!(report[key], want, "{key}: {report}");
    };
    // Network: the broker's port on loopback only. Landlock refuses any other TCP port before
    // the network is consulted (EACCES); the broker's port number on another host has no route
    // out of the loopback-only namespace (ENETUNREACH), nor has UDP.
    expect("broker_port", "ok");
    expect("gateway_port", "EACCES");
    expect("public_host_https", "EACCES");
    expect("other_host_broker_port", "ENETUNREACH");
    expect("udp_dns", "ENETUNREACH");
    expect("tcp_bind", "EACCES");
    // Files: writes only in the private dirs; reads everywhere but the protected set (the
    // gateway's state dir holds the server key).
    expect("write_work_dir", "EACCES");
    expect("write_tmp", "EACCES");
    expect("write_home", "ok");
    expect("write_tmpdir", "ok");
    expect("read_work_dir", "ok");
    expect("read_server_key", "EACCES");
    expect("read_server_key_link", "EACCES");
    // Landlock's signal scope: no signal reaches a process outside the runner's domain.
    expect("signal_gateway", "EPERM");
    // Issue 23: no UNIX socket at all (the gateway's admin socket, brokers', D-Bus are pathname
    // sockets Landlock cannot scope); its own socket pairs still work.
    expect("admin_socket", "EPERM");
    expect("socketpair", "ok");
    expect("no_new_privs", "1");
    expect("cap_eff", "0000000000000000");
    assert!(
        std::fs::read_dir(work.path())
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("probe-")),
        "the probe wrote into the working directory"
    );
}

/// A file removed when dropped, even if the test panics.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Whether process `pid` holds the pipe with inode `inode` open.
fn holds_pipe(pid: i32, inode: u64) -> bool {
    let wanted = format!("pipe:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy() == wanted))
}

/// Red team 23i B3: a descriptor the gateway's launcher leaks (here an inheritable pipe, as the
/// red team's connected Unix socket on fd 7) reaches the gateway but neither its brokers nor the
/// confined runner: the gateway marks every inherited descriptor close-on-exec first thing.
#[tokio::test(flavor = "multi_thread")]
async fn a_descriptor_the_launcher_leaks_reaches_no_broker_nor_runner() {
    use std::os::unix::fs::MetadataExt;
    // `pipe` without O_CLOEXEC: every process spawned from here on inherits the write end.
    let (read, write) = nix::unistd::pipe().unwrap();
    let inode = std::fs::File::from(write.try_clone().unwrap())
        .metadata()
        .unwrap()
        .ino();
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    drop((read, write));
    let gateway_pid = i32::try_from(gw.pid().unwrap()).unwrap();
    assert!(holds_pipe(gateway_pid, inode), "the gateway inherited it");
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "Read a file", "fd-leak-1").await;
    let processes = session_processes(gw.state_dir());
    assert!(processes.len() >= 2, "a broker and a runner: {processes:?}");
    for pid in processes {
        assert!(
            !holds_pipe(pid, inode),
            "process {pid} holds the leaked pipe"
        );
    }
    chat.stop(&session_id(&v), &lease_id(&v), "fd-leak-stop", None)
        .await
        .unwrap();
}

/// Red team 23i B4: the view's `commands_enforced_by` is what a command's receipt says it got,
/// word for word (as root a pids cgroup bounds commands: both say so).
#[tokio::test(flavor = "multi_thread")]
async fn the_view_describes_commands_as_their_receipts_do() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "Run true", "one-truth-1").await;
    let view_says = v["network_boundary"]["commands_enforced_by"]
        .as_str()
        .unwrap_or_else(|| panic!("no commands_enforced_by: {v}"))
        .to_string();
    let calls = serde_json::json!([{"name": "RunCommand", "arguments": {"argv": ["/bin/true"]}}]);
    let next = crate::writes::reply_calls(&chat, &v, "one-truth-r1", calls).await;
    let result = &next["pending_turn"]["tool_results"][0];
    assert_eq!(result["status"], "ok", "{result}");
    let output = result["output"].as_str().unwrap_or_default();
    let receipt_says = output
        .lines()
        .find_map(|l| l.strip_prefix("sandbox: "))
        .unwrap_or_else(|| panic!("no sandbox line: {output}"));
    assert_eq!(receipt_says, view_says);
    chat.stop(&session_id(&v), &lease_id(&v), "one-truth-stop", None)
        .await
        .unwrap();
}
