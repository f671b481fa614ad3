//! One RunCommand session end to end with the real Claude Code runner.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn run_command_end_to_end_with_real_runner() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "Run two commands", "rc-e2e-start").await;
    let sid = session_id(&v);
    let lease = lease_id(&v);
    assert_eq!(
        v["pending_turn"]["allowed_tools"],
        json!(["Read", "FindFiles", "SearchText", "RunCommand"])
    );
    let calls = json!([
        {"name": "RunCommand", "arguments": {"argv": ["/bin/echo", "hi"]}},
        {"name": "RunCommand", "arguments": {"argv": ["git", "status"]}},
    ]);
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            "rc-e2e-reply-1",
            Some("Running them."),
            Some(calls),
        )
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "waiting_for_gpt", "{v}");
    assert_eq!(v["pending_turn"]["kind"], "tool_results", "{v}");
    let results = v["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{v}");
    assert_eq!(results[0]["name"], "RunCommand");
    assert_eq!(results[0]["status"], "ok", "{v}");
    assert!(
        results[0]["output"]
            .as_str()
            .unwrap()
            .contains("--- stdout ---\nhi\n"),
        "{v}"
    );
    assert_eq!(results[0]["receipt"]["exit_code"], 0, "{v}");
    assert!(results[0]["receipt"]["duration_ms"].is_u64());
    // The work dir is not a repository: git says so, and its exit code is in the receipt.
    assert_eq!(results[1]["receipt"]["exit_code"], 128, "{v}");
    assert!(
        results[1]["output"]
            .as_str()
            .unwrap()
            .contains("not a git repository"),
        "{v}"
    );
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            "rc-e2e-reply-2",
            Some("Done."),
            None,
        )
        .await
        .unwrap();
    assert_eq!(view(&r)["status"], "idle", "{r}");
    chat.stop(&sid, &lease, "rc-e2e-stop", None).await.unwrap();
}

/// Issue 24 item 4: another account that takes the runtime area's old predictable name before
/// the gateway starts (a 0777 directory of its own, or a symlink) no longer stops any command:
/// the gateway makes its area under an unpredictable name, records it in the state dir, and
/// that area is protected like the state dir.
#[tokio::test(flavor = "multi_thread")]
async fn a_squatted_runtime_area_name_never_stops_commands() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    for squat in ["foreign-dir", "symlink"] {
        let state_tmp = tempfile::Builder::new()
            .prefix("gw-state-")
            .tempdir()
            .unwrap();
        let state = state_tmp.path().to_path_buf();
        let legacy = sandbox::protected::legacy_runtime_area(&state);
        let decoy = state_tmp.path().join("decoy");
        match squat {
            "foreign-dir" => {
                std::fs::create_dir(&legacy).unwrap();
                std::fs::set_permissions(&legacy, std::fs::Permissions::from_mode(0o777)).unwrap();
                std::os::unix::fs::chown(&legacy, Some(65534), Some(65534)).unwrap();
            }
            _ => {
                std::fs::create_dir(&decoy).unwrap();
                std::os::unix::fs::symlink(&decoy, &legacy).unwrap();
            }
        }
        let _squat_cleanup = Removed(legacy.clone());
        let gw = GatewayProcess::builder(GATEWAY)
            .env("CLAUDE_BIN", tests::claude_bin())
            .state_dir(&state)
            .spawn()
            .await
            .expect("gateway starts");
        let _cleanup = Cleanup(gw.state_dir().to_path_buf());
        let area = sandbox::protected::command_runtime_area(&state);
        let _area_cleanup = Removed(area.clone());
        assert_ne!(area, legacy, "{squat}");
        let meta = std::fs::symlink_metadata(&area).unwrap();
        assert!(meta.is_dir() && meta.mode() & 0o777 == 0o700, "{squat}");
        let chat = chatgpt(&gw).await;
        let dir = work_dir();
        let v = start_session(&chat, dir.path(), "Run commands", &format!("sq-{squat}")).await;
        let (sid, lease) = (session_id(&v), lease_id(&v));
        let calls: Vec<_> = (0..5)
            .map(|i| json!({"name": "RunCommand", "arguments": {"argv": ["/bin/echo", format!("run {i}")]}}))
            .collect();
        let r = chat
            .reply(
                &sid,
                &lease,
                &turn_id(&v),
                &format!("sq-{squat}-reply"),
                Some("Running them."),
                Some(json!(calls)),
            )
            .await
            .unwrap();
        let v = view(&r);
        let results = v["pending_turn"]["tool_results"].as_array().unwrap();
        let ok = results.iter().filter(|r| r["status"] == "ok").count();
        assert_eq!(ok, 5, "{squat}: {v}");
        for (i, result) in results.iter().enumerate() {
            let out = result["output"].as_str().unwrap();
            assert!(out.contains(&format!("run {i}\n")), "{squat}: {out}");
        }
        // The squatted name is left as it was; the area is in the protected set.
        let after = std::fs::symlink_metadata(&legacy).unwrap();
        assert_eq!(after.is_symlink(), squat == "symlink");
        let policy = PathPolicy::new(PathBuf::from("/nonexistent-home"), state.clone(), vec![]);
        assert!(policy.is_protected(&area.join("x")));
        assert!(policy.is_protected(&legacy.join("x")));
        chat.stop(&sid, &lease, &format!("sq-{squat}-stop"), None)
            .await
            .unwrap();
    }
}

/// Removes a path in `/tmp` a test made or planted (an area's overlay work dirs included).
pub(super) struct Removed(pub(super) PathBuf);

impl Drop for Removed {
    fn drop(&mut self) {
        sandbox::layer::remove(&self.0);
    }
}
