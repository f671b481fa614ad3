//! What sessions discard in the command runtime area is deleted by the gateway, which outlives
//! them (issue 24): a stopped session's filled layer goes without a gateway restart, repeated
//! fill-and-stop does not grow the area, planted symlinks and chmod-000 dirs are deleted without
//! touching anything outside, a SIGTERM does not wait for a large deletion (the next start
//! finishes it while serving), and a start with no room for a layer is refused.

use super::*;

/// Entries in `dir` (0 when it is gone).
fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

/// Wait until `done`, at most `limit`; how long it took.
fn within(limit: Duration, what: &str, done: impl Fn() -> bool) -> Duration {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what} after {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    started.elapsed()
}

/// One session with the real runner: a command fills its layer with `files` empty files (and,
/// if `hostile`, a symlink to `outside` and a chmod-000 dir holding a file), then it is stopped.
/// Returns the session's dir in the area.
async fn fill_and_stop(
    chat: &ScriptedChatGpt,
    area: &Path,
    round: usize,
    files: usize,
    hostile: Option<&Path>,
) -> PathBuf {
    let dir = work_dir();
    let key = format!("discard-{round}");
    let v = start_session(chat, dir.path(), "Fill the layer", &key).await;
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let mut script = format!(
        "import os\nos.makedirs('fill')\nfor i in range({files}): open(f'fill/{{i}}', 'w').close()\n"
    );
    if let Some(outside) = hostile {
        script.push_str(&format!(
            "os.symlink({:?}, 'link')\nos.makedirs('locked/sub')\n\
             open('locked/sub/f', 'w').close()\nos.chmod('locked/sub', 0)\nos.chmod('locked', 0)\n",
            outside.display().to_string()
        ));
    }
    script.push_str("print('filled')");
    let calls = json!([{"name": "RunCommand", "arguments": {"argv": ["python3", "-c", script]}}]);
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            &format!("{key}-r"),
            Some("Filling."),
            Some(calls),
        )
        .await
        .unwrap();
    let v = view(&r);
    let result = &v["pending_turn"]["tool_results"][0];
    assert_eq!(result["status"], "ok", "{v}");
    assert!(
        result["output"].as_str().unwrap().contains("filled\n"),
        "{v}"
    );
    let short: String = sid.trim_start_matches("ns_").chars().take(12).collect();
    let session_dir = area.join(short);
    assert!(session_dir.join("layer").is_dir(), "{v}");
    assert!(!dir.path().join("fill").exists());
    chat.stop(&sid, &lease, &format!("{key}-stop"), None)
        .await
        .unwrap();
    session_dir
}

/// Stopped sessions' filled layers (20k files each, with the real runner) are gone within
/// seconds of the stop, without a gateway restart; three rounds leave the area as small as the
/// first; the symlink out of the layer and the chmod-000 dir are deleted and the file outside
/// keeps its bytes and mode.
#[tokio::test(flavor = "multi_thread")]
async fn stopped_sessions_layers_are_deleted_by_the_gateway_and_the_area_does_not_grow() {
    use std::os::unix::fs::PermissionsExt;
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let area = sandbox::protected::command_runtime_area(gw.state_dir());
    let trash = area.join(sandbox::layer::TRASH);
    let chat = chatgpt(&gw).await;
    let outside_dir = tempfile::tempdir().unwrap();
    let outside = outside_dir.path().join("owners-file");
    std::fs::write(&outside, "the owner's bytes").unwrap();
    std::fs::set_permissions(&outside, std::fs::Permissions::from_mode(0o640)).unwrap();
    let mut usage = Vec::new();
    for round in 0..3 {
        let hostile = (round == 0).then_some(outside.as_path());
        let session_dir = fill_and_stop(&chat, &area, round, 20_000, hostile).await;
        let took = within(Duration::from_secs(30), "the stopped session's dir", || {
            !session_dir.exists() && entries(&trash) == 0
        });
        eprintln!("round {round}: the layer was gone {took:?} after the stop answered");
        usage.push(sandbox::disk_usage(&area));
    }
    // Nothing of the three layers is left: the area holds its marker and an empty trash.
    for (round, used) in usage.iter().enumerate() {
        assert!(
            used.inodes <= usage[0].inodes + 2,
            "round {round}: {usage:?}"
        );
        assert!(used.inodes < 16, "round {round}: {usage:?}");
    }
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "the owner's bytes"
    );
    let mode = std::fs::metadata(&outside).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o640);
}

/// A SIGTERM does not wait for a large pending deletion (100k entries planted in the trash while
/// the gateway was down); the next start answers calls at once and its deleter finishes it.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_does_not_wait_for_a_large_deletion_and_the_next_start_finishes_it() {
    let mut gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let area = sandbox::protected::command_runtime_area(gw.state_dir());
    let trash = area.join(sandbox::layer::TRASH);
    gw.kill().await;
    sandbox::private_fs::ensure_private_dir(&trash).unwrap();
    let big = trash.join("layer-planted");
    for d in 0..1000 {
        let sub = big.join(format!("upper/d{d}"));
        std::fs::create_dir_all(&sub).unwrap();
        for f in 0..100 {
            std::fs::write(sub.join(format!("f{f}")), "").unwrap();
        }
    }
    gw.start().await.unwrap();
    // Serving while the deletion runs.
    let chat = chatgpt(&gw).await;
    let listed = chat.client.list_tools().await.unwrap();
    assert!(listed.to_string().contains("native_session_start"));
    gw.signal(rustix::process::Signal::TERM).unwrap();
    let signalled = Instant::now();
    gw.wait_exit(Duration::from_secs(5)).await.unwrap();
    let exit = signalled.elapsed();
    eprintln!("SIGTERM to exit with a 100k-entry deletion pending: {exit:?}");
    assert!(exit < Duration::from_secs(3), "{exit:?}");
    gw.start().await.unwrap();
    let chat = chatgpt(&gw).await;
    assert!(chat.client.list_tools().await.is_ok());
    within(Duration::from_secs(120), "the planted deletion", || {
        entries(&trash) == 0
    });
}

/// A layer budget the disk cannot hold: a start is refused (`storage_full`) with words naming
/// the budget and what to do, before anything runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_start_without_room_for_a_layer_is_refused_with_storage_full() {
    assert!(
        sandbox::host_support().copy_on_write(),
        "this host gives commands no layer: the refusal cannot be shown here"
    );
    let gw = gateway_with(&[("CLAUDE_TOOLS_COMMAND_LAYER_MB", "1073741824")]).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let r = chat.start("hello", dir.path(), "no-room").await.unwrap();
    assert_eq!(tool_err_code(&r), "storage_full", "{r}");
    let message = r["structuredContent"]["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("nothing was started: the disk holding command layers has ")
            && message.contains("less than one session layer's budget of 1073741824 MiB")
            && message.ends_with("the owner can lower CLAUDE_TOOLS_COMMAND_LAYER_MB"),
        "{message}"
    );
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM sessions"), 0);
}
