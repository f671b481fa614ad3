//! One gateway per state dir (issue 23, item 2), with the real binary and runner: while a
//! gateway serves a live session, a second `gateway serve` on its state dir — HTTP or stdio —
//! exits non-zero at once naming the first, before it reads or adopts anything; the first's
//! session goes on untouched (still attached, its next reply runs its action). Red team 23i B1:
//! the same with `gateway.lock` removed first (the state dir itself is locked), and a gateway
//! whose state dir is moved away and replaced stops rather than serve a state it no longer holds.

use serde_json::json;

use crate::support::*;

/// A second `gateway serve` (HTTP or stdio) on `gw`'s state dir: it exits non-zero saying
/// another gateway serves the dir, before it adopts anything (no "re-adopted" in its log) or
/// listens.
async fn second_gateway_refused(gw: &GatewayProcess, stdio: bool) -> tests::ExitOutcome {
    let mut second = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("RUST_LOG", "info")
        .state_dir(gw.state_dir());
    if stdio {
        second = second.arg("--stdio");
    }
    let outcome = second
        .run_to_exit(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    assert_ne!(outcome.code(), Some(0), "stdio {stdio}: {outcome:?}");
    assert!(
        outcome
            .stderr
            .contains("another gateway is serving this state dir ("),
        "stdio {stdio}: {}",
        outcome.stderr
    );
    assert!(
        !outcome.stderr.contains("re-adopted"),
        "stdio {stdio}: it adopted the first's broker: {}",
        outcome.stderr
    );
    assert!(!outcome.stdout.contains("listening"), "{}", outcome.stdout);
    outcome
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_gateway_on_the_same_state_dir_exits_and_the_first_goes_on() {
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "Read a file", "lock-1").await;
    let first_pid = gw.pid().unwrap();
    for stdio in [false, true] {
        let outcome = second_gateway_refused(&gw, stdio).await;
        assert!(
            outcome.stderr.contains(&format!("pid {first_pid}")),
            "names the first: {}",
            outcome.stderr
        );
    }
    // The first gateway's session is untouched: attached, and its next reply runs.
    let status = chat
        .status(&session_id(&v), &lease_id(&v), 0)
        .await
        .unwrap();
    assert_eq!(view(&status)["runtime_attached"], true, "{status}");
    let file = std::fs::canonicalize(dir.path()).unwrap().join("notes.txt");
    let calls = json!([{"name": "Read", "arguments": {"file_path": file.to_string_lossy()}}]);
    let next = crate::writes::reply_calls(&chat, &v, "lock-r1", calls).await;
    let result = &next["pending_turn"]["tool_results"][0];
    assert_eq!(result["status"], "ok", "{result}");
    chat.stop(&session_id(&v), &lease_id(&v), "lock-stop", None)
        .await
        .unwrap();
}

/// Red team 23i B1: `rm <state>/gateway.lock` while the first serves a live session, then a
/// second start, HTTP and stdio: refused before it re-adopts or appends anything (its log has no
/// "re-adopted"), the first's session goes on (no `ledger_broken`), and verify agrees.
#[tokio::test(flavor = "multi_thread")]
async fn a_removed_lock_file_does_not_let_a_second_gateway_in() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "Read a file", "unlinked-1").await;
    for stdio in [false, true] {
        let _ = std::fs::remove_file(gw.state_dir().join("gateway.lock"));
        second_gateway_refused(&gw, stdio).await;
    }
    let file = std::fs::canonicalize(dir.path()).unwrap().join("notes.txt");
    let calls = json!([{"name": "Read", "arguments": {"file_path": file.to_string_lossy()}}]);
    let next = crate::writes::reply_calls(&chat, &v, "unlinked-r1", calls).await;
    let result = &next["pending_turn"]["tool_results"][0];
    assert_eq!(result["status"], "ok", "{result}");
    let verified = gatewayctl_json(&gw, &["verify"]);
    assert_eq!(verified["ok"], true, "{verified}");
    assert!(verified["latched_broken"].is_null(), "{verified}");
    // The first put its lock file back (it checks every second).
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let holder = std::fs::read_to_string(gw.state_dir().join("gateway.lock")).unwrap();
    assert!(
        holder.starts_with(&format!("pid {},", gw.pid().unwrap())),
        "{holder}"
    );
    chat.stop(&session_id(&v), &lease_id(&v), "unlinked-stop", None)
        .await
        .unwrap();
}

/// A gateway whose state dir is moved away and replaced by another directory notices within
/// seconds and stops (non-zero, saying why): the path is no longer the state it locked, and a
/// gateway started there must not share anything with it.
#[tokio::test(flavor = "multi_thread")]
async fn a_gateway_whose_state_dir_is_replaced_stops() {
    let base = tempfile::tempdir().unwrap();
    let state = base.path().join("state");
    let mut gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .state_dir(&state)
        .spawn()
        .await
        .unwrap();
    std::fs::rename(&state, base.path().join("moved")).unwrap();
    std::fs::create_dir(&state).unwrap();
    let status = gw
        .wait_exit(std::time::Duration::from_secs(20))
        .await
        .unwrap();
    assert_ne!(status.code(), Some(0), "{status:?}");
    let log = gw.stderr_log();
    assert!(
        log.contains(&format!(
            "gateway: the state dir {} is no longer the directory this gateway locked (it was \
             moved or replaced); stopping so that no two gateways write one state",
            state.display()
        )),
        "{log}"
    );
}
