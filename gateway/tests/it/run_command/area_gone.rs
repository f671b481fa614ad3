//! RT29 B3: the runtime area of a running gateway is removed (a `/tmp` cleaner) and another
//! account takes its name — a directory open to all, a private directory of its own, a symlink to
//! the owner's project. Commands go on in a live session and in a new one (the gateway makes a
//! new area under a fresh name), nothing is written at the taken name, and the project a symlink
//! points at is neither written to nor made protected.

use super::*;
use std::os::unix::fs::PermissionsExt;

use super::end_to_end::Removed;

/// One RunCommand in the session; its result.
async fn run_one(
    chat: &ScriptedChatGpt,
    sid: &str,
    lease: &str,
    turn: &str,
    key: &str,
) -> serde_json::Value {
    let calls = json!([{"name": "RunCommand", "arguments": {"argv": ["/bin/echo", key]}}]);
    let r = chat
        .reply(sid, lease, turn, key, Some("Running it."), Some(calls))
        .await
        .unwrap();
    view(&r)
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_area_taken_while_the_gateway_runs_is_replaced_not_used() {
    let root = rustix::process::geteuid().is_root();
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let state = gw.state_dir().to_path_buf();
    let chat = chatgpt(&gw).await;
    let live_dir = work_dir();
    let v = start_session(&chat, live_dir.path(), "Run commands", "ag-live").await;
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let mut turn = turn_id(&v);
    let mut areas = vec![sandbox::protected::command_runtime_area(&state)];
    let mut _removed = vec![];
    for squat in ["open-dir", "private-dir", "symlink"] {
        let area = areas.last().unwrap().clone();
        let project = work_dir();
        let before = listing(project.path());
        // The cleaner, then the other account (65534) at the name.
        sandbox::layer::remove(&area);
        match squat {
            "symlink" => std::os::unix::fs::symlink(project.path(), &area).unwrap(),
            _ => {
                std::fs::create_dir(&area).unwrap();
                let mode = if squat == "open-dir" { 0o777 } else { 0o700 };
                std::fs::set_permissions(&area, std::fs::Permissions::from_mode(mode)).unwrap();
            }
        }
        if root {
            std::os::unix::fs::lchown(&area, Some(65534), Some(65534)).unwrap();
        }
        _removed.push(Removed(area.clone()));
        // The live session's next command, then a new session's (in the project the symlink
        // names: it is not protected for that).
        let v = run_one(&chat, &sid, &lease, &turn, &format!("ag-live-{squat}")).await;
        let result = &v["pending_turn"]["tool_results"][0];
        assert_eq!(result["status"], "ok", "{squat}: live session: {v}");
        assert!(
            result["output"].as_str().unwrap().contains("clean layer"),
            "{squat}: {v}"
        );
        turn = turn_id(&v);
        let n = start_session(&chat, project.path(), "Run one", &format!("ag-new-{squat}")).await;
        let (nsid, nlease) = (session_id(&n), lease_id(&n));
        let key = format!("ag-new-{squat}-run");
        let v = run_one(&chat, &nsid, &nlease, &turn_id(&n), &key).await;
        let result = &v["pending_turn"]["tool_results"][0];
        assert_eq!(result["status"], "ok", "{squat}: new session: {v}");
        assert!(result["output"].as_str().unwrap().contains(&key), "{v}");
        chat.stop(&nsid, &nlease, &format!("ag-new-{squat}-stop"), None)
            .await
            .unwrap();
        // A new area under a fresh name; nothing at the taken name, the project as it was.
        let new = sandbox::protected::command_runtime_area(&state);
        assert!(!areas.contains(&new), "{squat}: {new:?} reused");
        assert!(
            sandbox::protected::verify_area(&new, &state).is_ok(),
            "{squat}"
        );
        let meta = std::fs::symlink_metadata(&area).unwrap();
        assert_eq!(meta.is_symlink(), squat == "symlink");
        if squat != "symlink" {
            assert_eq!(
                listing(&area),
                Vec::<String>::new(),
                "{squat}: written into"
            );
        }
        assert_eq!(
            listing(project.path()),
            before,
            "{squat}: the project was written to"
        );
        // The new area is protected in the live session too (its broker started before it).
        let read = json!([{"name": "Read", "arguments": {"file_path": new.join(".state-dir")}}]);
        let r = chat
            .reply(
                &sid,
                &lease,
                &turn,
                &format!("ag-read-{squat}"),
                None,
                Some(read),
            )
            .await
            .unwrap();
        let v = view(&r);
        let result = &v["pending_turn"]["tool_results"][0];
        assert_eq!(result["status"], "error", "{squat}: {v}");
        let out = result["output"].as_str().unwrap();
        assert!(
            out.starts_with("not_permitted: ") && out.contains("is a protected location"),
            "{squat}: {out}"
        );
        turn = turn_id(&v);
        areas.push(new.clone());
        _removed.push(Removed(new));
    }
    chat.stop(&sid, &lease, "ag-live-stop", None).await.unwrap();
}
