//! Retention through the real gateway (issue 24): `gatewayctl prune` removes an ended session's
//! runtime dir (the runner's HOME with its transcript) and its database content, keeps its
//! summary and ledger, shrinks the database and gives a budget filled through it back; a live
//! session is never touched; `--dry-run` removes nothing.

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn prune_removes_an_ended_sessions_files_and_keeps_its_ledger() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let ended = start_session(&chat, dir.path(), "look around", "pr-1").await;
    let live = start_session(&chat, dir.path(), "look around", "pr-2").await;
    let (ended_id, live_id) = (session_id(&ended), session_id(&live));
    let r = chat
        .stop(&ended_id, &lease_id(&ended), "pr-stop", None)
        .await
        .unwrap();
    tool_ok(&r);
    let run_dir = |id: &str| {
        gw.state_dir()
            .join("run")
            .join(&id["ns_".len().."ns_".len() + 12])
    };
    assert!(run_dir(&ended_id).is_dir() && run_dir(&live_id).is_dir());

    let dry = gatewayctl_json(&gw, &["prune", "--older-than", "0s", "--dry-run"]);
    assert_eq!(dry["ok"], true, "{dry}");
    assert!(run_dir(&ended_id).is_dir(), "a dry run removed files");
    let ids = |v: &serde_json::Value| -> Vec<String> {
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["session_id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&dry), vec![ended_id.clone()]);

    let done = gatewayctl_json(&gw, &["prune", "--older-than", "0s"]);
    assert_eq!(ids(&done), vec![ended_id.clone()], "{done}");
    assert!(done["bytes"].as_u64().unwrap() > 0);
    assert!(!run_dir(&ended_id).exists());
    assert!(
        run_dir(&live_id).is_dir(),
        "a live session's files were removed"
    );
    // The ledger stays: the owner still reads the ended session's events.
    let shown = gatewayctl_json(&gw, &["show", &ended_id]);
    assert!(!shown.to_string().is_empty());
    let events = gatewayctl_json(&gw, &["events", &ended_id]);
    assert!(events.to_string().contains("stop"), "{events}");
    // Nothing more to remove; the default age keeps everything recent.
    let again = gatewayctl_json(&gw, &["prune"]);
    assert!(ids(&again).is_empty(), "{again}");
    let text = gatewayctl_text_plain(&gw, &["prune", "--dry-run"]);
    insta::assert_snapshot!(text);
}

fn gatewayctl_text_plain(gw: &GatewayProcess, args: &[&str]) -> String {
    use clap::Parser;
    let state = gw.state_dir().to_string_lossy().to_string();
    let mut argv = vec!["gatewayctl", "--state-dir", state.as_str()];
    argv.extend_from_slice(args);
    let mut out = Vec::new();
    gatewayctl::run(gatewayctl::Cli::parse_from(argv), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// Bytes of the state database and its WAL.
fn database_bytes(gw: &GatewayProcess) -> u64 {
    ["gateway.sqlite3", "gateway.sqlite3-wal"]
        .iter()
        .map(|f| std::fs::metadata(gw.state_dir().join(f)).map_or(0, |m| m.len()))
        .sum()
}

/// Issue 24 item 3: a client fills the state dir's budget through the database (prompts and
/// labels at their documented bounds, 768 KiB and 200 characters), starts are refused with
/// `storage_full`, and the owner gets back under it with `gatewayctl prune`: the ended sessions'
/// content goes, the database file shrinks, the next start succeeds at once, `verify` stays
/// green and still names an edit; a live session keeps its content and a pruned one answers
/// status and recover with its summary and the `content_pruned` marker.
#[tokio::test(flavor = "multi_thread")]
async fn prune_gives_back_a_budget_filled_through_the_database() {
    let gw = gateway_with(&[("CLAUDE_TOOLS_STATE_MAX_MB", "64")]).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let live = start_session(&chat, dir.path(), "look around", "fill-live").await;
    let live_id = session_id(&live);
    let live_turns = || {
        count_with(
            &gw,
            "SELECT COUNT(*) FROM turns WHERE session_id = ?1",
            live_id.as_str(),
        )
    };
    assert_eq!(live_turns(), 1);
    let label: String = "L".repeat(200);
    let mut ended = Vec::new();
    let mut refused = None;
    for i in 0..60 {
        let mut prompt = format!("session {i}: summarise this text.\n");
        while prompt.len() + 12 <= 786_432 {
            prompt.push_str(&format!("w{:09} ", prompt.len()));
        }
        let extra = serde_json::json!({"wait_seconds": 50, "session_label": label});
        let r = chat
            .start_with(&prompt, dir.path(), &format!("fill-{i}"), extra)
            .await
            .unwrap();
        if r["isError"] == true {
            assert_eq!(tool_err_code(&r), "storage_full", "{r}");
            refused = Some(r);
            break;
        }
        let v = view(&r);
        let stop = chat
            .stop(
                &session_id(&v),
                &lease_id(&v),
                &format!("fill-stop-{i}"),
                None,
            )
            .await
            .unwrap();
        tool_ok(&stop);
        ended.push((session_id(&v), lease_id(&v), v["recovery_token"].clone()));
    }
    let refused = refused.expect("the budget was never reached");
    let message = refused["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("gatewayctl prune"), "{message}");
    let before = database_bytes(&gw);
    let sessions = ended.len();
    let needle = |i: usize| format!("session {i}: summarise this text.");
    assert!(
        !files_holding(gw.state_dir(), needle(0).as_bytes()).is_empty(),
        "the prompts are not on disk before the prune"
    );

    // A dry run removes nothing and says what would go.
    let dry = gatewayctl_json(&gw, &["prune", "--older-than", "0s", "--dry-run"]);
    assert_eq!(dry["dry_run"], true, "{dry}");
    assert_eq!(dry["database_bytes"], 0, "{dry}");
    assert!(
        dry["content_bytes"].as_u64().unwrap() > (sessions as u64) << 20,
        "{dry}"
    );
    let done = gatewayctl_json(&gw, &["prune", "--older-than", "0s"]);
    let after = database_bytes(&gw);
    let freed = done["database_bytes"].as_u64().unwrap();
    eprintln!(
        "{sessions} sessions filled the budget; prune: files {} B, content {} B; database \
         {before} B -> {after} B (reported freed {freed} B)",
        done["bytes"], done["content_bytes"]
    );
    assert!(
        after * 4 < before && freed > 16 << 20,
        "the database did not shrink: {before} -> {after}: {done}"
    );
    assert!(done["bytes"].as_u64().unwrap() > 0, "{done}");
    // The prompts are gone from the disk, not only from the tables: no file of the state dir
    // (database, WAL, runtime dirs) holds one, and the ledger never held them.
    for i in [0, sessions / 2, sessions - 1] {
        let holding = files_holding(gw.state_dir(), needle(i).as_bytes());
        assert!(
            holding.is_empty(),
            "{:?} is still in {holding:?}",
            needle(i)
        );
    }
    let pruned: Vec<&str> = done["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap())
        .collect();
    assert!(
        !pruned.contains(&live_id.as_str()),
        "a live session was pruned"
    );
    assert_eq!(live_turns(), 1, "a live session's content was pruned");

    // The next start succeeds at once (the budget was measured again by the prune).
    let r = chat
        .start_with(
            "hello",
            dir.path(),
            "after-prune",
            serde_json::json!({"wait_seconds": 0}),
        )
        .await
        .unwrap();
    tool_ok(&r);
    let verified = gatewayctl_json(&gw, &["verify"]);
    assert_eq!(verified["ok"], true, "{verified}");

    // The live session still has its pending turn; a pruned one answers with its summary.
    let v = view(&chat.status(&live_id, &lease_id(&live), 0).await.unwrap());
    assert_eq!(v["pending_turn"]["prompt"], "look around", "{v}");
    let (sid, lease, token) = &ended[0];
    let v = view(&chat.status(sid, lease, 0).await.unwrap());
    assert_eq!(v["status"], "stopped", "{v}");
    assert_eq!(v["session_label"], label.as_str(), "{v}");
    assert!(v["content_pruned"]["message"].is_string(), "{v}");
    assert!(
        v["pending_turn"].is_null() && v["last_result"].is_null(),
        "{v}"
    );
    let r = chat
        .recover(sid, token.as_str().unwrap(), "after-prune-recover", 0)
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "stopped", "{v}");
    assert!(v["content_pruned"].is_object(), "{v}");
    let events = gatewayctl_json(&gw, &["events", sid]);
    assert!(events.to_string().contains("content_pruned"), "{events}");

    // An edit of a remaining covered row is still named.
    drop(chat);
    let db = rusqlite::Connection::open(gw.state_dir().join("gateway.sqlite3")).unwrap();
    db.execute(
        "UPDATE sessions SET data = json_set(data, '$.label', 'forged') WHERE id = ?1",
        [sid],
    )
    .unwrap();
    let report = gatewayctl::verify::check(gw.state_dir()).unwrap();
    let first = &report.problems[0];
    assert_eq!(
        (first.id.as_str(), first.table),
        (sid.as_str(), common::ledger_chain::Table::Sessions),
        "{report:?}"
    );
    assert!(first.what.contains("`label`"), "{first:?}");
}
