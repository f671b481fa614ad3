//! Retention through the real gateway (issue 24): `gatewayctl prune` removes an ended session's
//! runtime dir (the runner's HOME with its transcript) and keeps its ledger; a live session's
//! files are never touched; `--dry-run` removes nothing.

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
