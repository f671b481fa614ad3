//! `gatewayctl try` against a real `gateway serve` with the real Claude Code runner: the printed
//! session (snapshotted, ids, hashes, paths and times redacted), its receipts checked against
//! the files, and the messages a newcomer gets when no gateway runs, the token is wrong or the
//! session cannot start.
//!
//! The gateway binary is `$GATEWAY_BIN`, else `target/debug/gateway` next to this test (built by
//! `cargo test --workspace`, or `cargo build -p gateway`); a missing one fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use gatewayctl::{Cli, Command, TryArgs};
use tests::GatewayProcess;

fn gateway_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("GATEWAY_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    // target/<profile>/deps/try_session-<hash> → target/<profile>/gateway
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("gateway");
    assert!(
        bin.is_file(),
        "{} missing: build it first (cargo build -p gateway) or set GATEWAY_BIN",
        bin.display()
    );
    bin
}

/// Kills the brokers and runners of a state dir when dropped (they outlive the gateway).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let needle = self.0.to_string_lossy().to_string();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&needle) {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_raw(pid).unwrap(),
                    rustix::process::Signal::KILL,
                );
            }
        }
    }
}

fn try_cli(state_dir: &Path, dir: &Path, url: &str, token: Option<&str>) -> Cli {
    Cli {
        state_dir: Some(state_dir.to_path_buf()),
        json: false,
        command: Command::Try(TryArgs {
            dir: Some(dir.to_path_buf()),
            url: Some(url.to_string()),
            token: token.map(str::to_string),
        }),
    }
}

fn run(cli: Cli) -> (String, Result<(), String>) {
    let mut out = Vec::new();
    let result = gatewayctl::run(cli, &mut out).map_err(|e| format!("{e:#}"));
    (String::from_utf8(out).unwrap(), result)
}

#[test]
fn try_runs_one_read_only_session_with_the_real_runner() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // No token in the environment: the gateway writes <state>/auth/access-token, which try reads.
    let gw = runtime
        .block_on(
            GatewayProcess::builder(gateway_bin())
                .env("CLAUDE_BIN", tests::claude_bin())
                .no_token()
                .spawn(),
        )
        .unwrap();
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let dir = tempfile::tempdir().unwrap();
    let readme = dir.path().join("README.md");
    std::fs::write(&readme, "# Demo\n\nA tiny project to look at.\n").unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(dir.path().join("logo.bin"), [0u8, 1, 2, 3]).unwrap();
    let dir_path = std::fs::canonicalize(dir.path()).unwrap();

    // A wrong token is named as such, before any session starts.
    let (_, refused) = run(try_cli(gw.state_dir(), &dir_path, &gw.url(), Some("wrong")));
    let refused = refused.unwrap_err();
    assert!(refused.contains("refused the access token"), "{refused}");

    // Red team 39 F7: another listener (another account's, on the port the owner named) gets
    // nothing: the token goes only to the endpoint the state dir's gateway names.
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    squatter.set_nonblocking(true).unwrap();
    let squatted = format!("http://{}/mcp", squatter.local_addr().unwrap());
    let (_, refused) = run(try_cli(gw.state_dir(), &dir_path, &squatted, None));
    let refused = refused.unwrap_err();
    assert!(
        refused.contains("is not where the gateway of this state dir listens")
            && refused.contains(&gw.url()),
        "{refused}"
    );
    assert_eq!(
        squatter.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "the squatter was connected to"
    );

    let (out, result) = run(try_cli(gw.state_dir(), &dir_path, &gw.url(), None));
    assert!(result.is_ok(), "{result:?}\n{out}\n{}", gw.stderr_log());
    // Red team 39, class 9: doctor shows the running gateway's own confinement report.
    let doctor = std::process::Command::new(env!("CARGO_BIN_EXE_gatewayctl"))
        .args(["--json", "--state-dir"])
        .arg(gw.state_dir())
        .arg("doctor")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&doctor.stdout).unwrap();
    let runner = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "sandbox: runner confinement")
        .unwrap();
    assert!(
        runner["detail"]
            .as_str()
            .unwrap()
            .starts_with("the running gateway reports: runner network"),
        "{runner}"
    );

    // Without --url: the gateway's own endpoint.
    let mut cli = try_cli(gw.state_dir(), &dir_path, &gw.url(), None);
    if let Command::Try(args) = &mut cli.command {
        args.url = None;
    }
    let (out, result) = run(cli);
    assert!(result.is_ok(), "{result:?}\n{out}");
    assert!(out.contains(&gw.url()), "{out}");

    // What ran is real: the Read's receipt is the README's SHA-256, the session was stopped and
    // Claude Code ended on SIGTERM.
    let sha = common::hash::sha256_hex(&std::fs::read(&readme).unwrap());
    assert!(out.contains(&format!("sha256      {sha}")), "{out}");
    assert!(out.contains("+ FindFiles"), "{out}");
    assert!(
        out.contains(&format!("+ Read {{\"file_path\":\"{}", readme.display())),
        "{out}"
    );
    assert!(
        out.contains(
            "stopped: status stopped, runner exited (exit code 143: killed by SIGTERM (128 + 15), \
             as native_session_stop ends it)"
        ),
        "{out}"
    );

    // --json, through the capability URL without a token: the same session as one document,
    // and the token in the URL is not printed.
    let empty_state = tempfile::tempdir().unwrap();
    let mut cli = try_cli(empty_state.path(), &dir_path, &gw.capability_url(), None);
    cli.json = true;
    let (json, result) = run(cli);
    assert!(result.is_ok(), "{result:?}\n{json}");
    assert!(!json.contains(gw.token()), "the token is printed:\n{json}");
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["url"], format!("{}/<token>", gw.url()));
    assert_eq!(doc["turns"].as_array().map(Vec::len), Some(3), "{doc}");
    assert_eq!(
        doc["turns"][0]["sent"]["tool_calls"][0]["name"],
        "FindFiles"
    );
    assert_eq!(doc["turns"][1]["sent"]["tool_calls"][0]["name"], "Read");
    assert_eq!(
        doc["turns"][2]["pending"]["tool_results"][0]["receipt"]["sha256"],
        sha.as_str()
    );
    assert_eq!(doc["settled"]["status"], "idle");
    assert_eq!(doc["stopped"]["status"], "stopped");

    let session = out
        .split_whitespace()
        .find(|w| w.starts_with("ns_"))
        .expect("a session id")
        .to_string();
    let (dir_re, url_re, session_re) = (
        regex_escape(&dir_path.display().to_string()),
        regex_escape(&gw.url()),
        regex_escape(&session),
    );
    insta::with_settings!({filters => vec![
        (dir_re.as_str(), "[DIR]"),
        (url_re.as_str(), "[URL]"),
        (session_re.as_str(), "[SESSION]"),
        (r"act_[0-9a-f]+", "[ACTION]"),
        (r"\b[0-9a-f]{64}\b", "[SHA256]"),
        (r"in \d+ ms", "in [N] ms"),
        (r"runner confinement: .*", "runner confinement: [HOST]"),
        (r"(?m)^  commands: .*", "  commands: [HOST]"),
    ]}, {
        insta::assert_snapshot!(out);
    });
}

#[test]
fn try_without_a_gateway_says_how_to_start_one() {
    // A port nothing listens on: bound (so no other test's gateway can take it) but never
    // listening, so a connection is refused.
    use nix::sys::socket::{
        AddressFamily, SockFlag, SockType, SockaddrIn, bind, getsockname, socket,
    };
    let reserved = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    bind(
        std::os::fd::AsRawFd::as_raw_fd(&reserved),
        &SockaddrIn::new(127, 0, 0, 1, 0),
    )
    .unwrap();
    let port = getsockname::<SockaddrIn>(std::os::fd::AsRawFd::as_raw_fd(&reserved))
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let (_, result) = run(try_cli(dir.path(), dir.path(), &url, Some("token")));
    let err = result.unwrap_err();
    assert!(
        err.contains("no gateway is running with the state dir")
            && err.contains("the access token is sent only to that gateway")
            && err.contains("Start it with scripts/run"),
        "{err}"
    );

    // No token anywhere: the message says where it looked and what to do.
    let (_, result) = run(try_cli(dir.path(), dir.path(), &url, None));
    let err = result.unwrap_err();
    assert!(
        err.contains("no access token") && err.contains("scripts/run"),
        "{err}"
    );
}

fn regex_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[test]
fn try_shows_why_a_session_could_not_start() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let gw = runtime
        .block_on(
            GatewayProcess::builder(gateway_bin())
                .env("CLAUDE_BIN", "/nonexistent/claude")
                .spawn(),
        )
        .unwrap();
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let dir = tempfile::tempdir().unwrap();
    let (out, result) = run(try_cli(
        gw.state_dir(),
        dir.path(),
        &gw.url(),
        Some(gw.token()),
    ));
    let err = result.unwrap_err();
    assert!(err.contains("the session ended \"failed\""), "{err}\n{out}");
    assert!(
        out.contains("launch error") && out.contains("runner_not_found"),
        "{out}"
    );
    assert!(!out.contains("ChatGPT sends"), "{out}");
}

/// Red team 40: another account's socket at the state dir's admin path (a state dir in a shared
/// directory) named its own listener, and `try` sent the owner's token there. A socket served by
/// another uid is never asked.
#[test]
fn an_admin_socket_served_by_another_account_is_never_asked() {
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    assert!(
        rustix::process::geteuid().is_root(),
        "this test serves a socket as another account: run it as root (CI does)"
    );
    let shared = tempfile::tempdir().unwrap();
    let run_dir = shared.path().join("state/run");
    std::fs::create_dir_all(&run_dir).unwrap();
    for dir in [shared.path(), &shared.path().join("state"), &run_dir] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let socket = run_dir.join("admin.sock");
    let server = "import socket, os, sys\n\
        s = socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\nos.chmod(sys.argv[1], 0o777)\n\
        s.listen(1)\nprint('ready', flush=True)\nc, _ = s.accept()\n\
        print('ASKED' if c.recv(4096) else 'NOTHING', flush=True)\n";
    let mut squatter = std::process::Command::new("python3")
        .args(["-c", server])
        .arg(&socket)
        .uid(65534)
        .gid(65534)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(squatter.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "ready");
    let dir = tempfile::tempdir().unwrap();
    let (_, result) = run(try_cli(
        &shared.path().join("state"),
        dir.path(),
        "http://127.0.0.1:9/mcp",
        Some("ngw_owner"),
    ));
    let err = result.unwrap_err();
    assert!(
        err.contains("is served by another account's process (uid 65534)"),
        "{err}"
    );
    // It was connected to (to learn whose it is) and sent nothing.
    assert_eq!(lines.next().unwrap().unwrap(), "NOTHING");
    squatter.wait().unwrap();
}
