//! One gateway per state dir (issue 23, item 2), with the real binary and runner: while a
//! gateway serves a live session, a second `gateway serve` on its state dir — HTTP or stdio —
//! exits non-zero at once naming the first, before it reads or adopts anything; the first's
//! session goes on untouched (still attached, its next reply runs its action).

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_second_gateway_on_the_same_state_dir_exits_and_the_first_goes_on() {
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "Read a file", "lock-1").await;
    let first_pid = gw.pid().unwrap();
    for stdio in [false, true] {
        let mut second = GatewayProcess::builder(GATEWAY)
            .env("CLAUDE_BIN", tests::claude_bin())
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
                .contains("another gateway is serving this state dir"),
            "stdio {stdio}: {}",
            outcome.stderr
        );
        assert!(
            outcome.stderr.contains(&format!("pid {first_pid}")),
            "names the first: {}",
            outcome.stderr
        );
        // It adopted nothing: no line of its own about brokers, and no listening line.
        assert!(!outcome.stdout.contains("listening"), "{}", outcome.stdout);
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
