//! Unit tests of the gateway process fixture against scripted stand-ins: the listening line, the
//! token, restarts on the same state, and early exits and silence reported with stderr.

use super::*;

#[test]
fn listening_line() {
    assert_eq!(
        parse_listening_line("listening http://127.0.0.1:4321/mcp").as_deref(),
        Some("http://127.0.0.1:4321/mcp")
    );
    assert_eq!(parse_listening_line("2025 INFO listening on x"), None);
    assert_eq!(parse_listening_line("starting"), None);
}

#[test]
fn tokens_are_random_and_long() {
    let a = random_token();
    assert_eq!(a.len(), 64);
    assert_ne!(a, random_token());
}

fn script(body: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake-gateway");
    crate::executables::write(&path, &format!("#!/bin/sh\n{body}\n")).unwrap();
    (dir, path)
}

#[tokio::test]
async fn spawn_parses_the_listening_line_and_restarts_on_the_same_state() {
    let (_d, bin) = script(
        "echo \"state=$CLAUDE_TOOLS_STATE_DIR args=$*\" >&2\necho booting\necho 'listening http://127.0.0.1:5555/mcp'\nexec sleep 60",
    );
    let mut gw = GatewayProcess::builder(&bin)
        .arg("--extra")
        .spawn()
        .await
        .unwrap();
    assert_eq!(gw.url(), "http://127.0.0.1:5555/mcp");
    assert_eq!(
        gw.capability_url(),
        format!("http://127.0.0.1:5555/mcp/{}", gw.token())
    );
    assert_eq!(gw.addr(), "127.0.0.1:5555");
    let state = gw.state_dir().to_path_buf();
    let first = gw.start_timing().unwrap();
    assert!(first.listening_at >= first.spawned_at);
    gw.restart().await.unwrap();
    assert_eq!(gw.state_dir(), state);
    assert_eq!(gw.generation(), 2);
    let second = gw.start_timing().unwrap();
    assert!(second.spawned_at > first.listening_at);
    assert!(second.listening_at >= second.spawned_at);
    let log = gw.stderr_log();
    assert!(log.contains(&format!("state={}", state.display())), "{log}");
    assert!(log.contains("serve --listen 127.0.0.1:0 --extra"), "{log}");
    assert!(log.contains("restart #2"));
    assert!(gw.kill().await.is_some());
}

#[tokio::test]
async fn stderr_goes_to_the_chosen_file() {
    let (dir, bin) = script(
        "echo 'to the chosen log' >&2\necho 'listening http://127.0.0.1:5556/mcp'\nexec sleep 60",
    );
    let log = dir.path().join("bench.log");
    let mut gw = GatewayProcess::builder(&bin)
        .stderr_path(&log)
        .spawn()
        .await
        .unwrap();
    assert_eq!(gw.stderr_path(), log);
    assert!(gw.kill().await.is_some());
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("to the chosen log")
    );
    assert!(!gw.work_dir().join("gateway.stderr.log").exists());
}

#[tokio::test]
async fn early_exit_reports_stderr() {
    let (_d, bin) = script("echo 'CLAUDE_TOOLS_STATE_DIR must be absolute' >&2\nexit 2");
    let err = GatewayProcess::builder(&bin)
        .spawn()
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("must be absolute"), "{err}");
    let out = GatewayProcess::builder(&bin)
        .state_dir("relative/state")
        .run_to_exit(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(out.code(), Some(2));
    assert!(out.stderr.contains("absolute"));
}

#[tokio::test]
async fn silent_gateway_times_out_with_stderr() {
    let (_d, bin) = script("echo 'stuck here' >&2\nexec sleep 60");
    let err = GatewayProcess::builder(&bin)
        .listen_timeout(Duration::from_millis(500))
        .spawn()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("stuck here") && err.contains("within"),
        "{err}"
    );
}

#[tokio::test]
async fn no_token_reads_the_generated_token_file() {
    let (_d, bin) = script(
        "mkdir -p \"$CLAUDE_TOOLS_STATE_DIR/auth\"\nprintf 'file-token\\n' > \"$CLAUDE_TOOLS_STATE_DIR/auth/access-token\"\necho \"token-env=${CLAUDE_TOOLS_GATEWAY_TOKEN:-unset}\" >&2\necho 'listening http://127.0.0.1:1/mcp'\nexec sleep 60",
    );
    let gw = GatewayProcess::builder(&bin)
        .no_token()
        .spawn()
        .await
        .unwrap();
    assert_eq!(gw.token(), "file-token");
    assert!(gw.stderr_log().contains("token-env=unset"));
}
