//! All commands of a gateway together (issue 24 item 5): every command's memory cgroup sits in
//! one parent per gateway bounded by `CLAUDE_TOOLS_COMMANDS_MEMORY_MB`, so sessions each within
//! their own bound cannot together exhaust the host. Past it the kernel kills the largest
//! command, whose result says so (`all_commands_memory_exceeded`); the other session and the
//! gateway go on, and the parent goes when the gateway exits.

use super::*;

/// One process holding `mib` MiB (under the 128 MiB per-process limit) for `hold` seconds,
/// after waiting `wait` seconds.
fn hold(wait: f32, mib: usize, hold: f32) -> String {
    format!(
        "import time\ntime.sleep({wait})\nb = bytearray({mib} << 20)\nfor j in range(0, len(b), 4096): b[j] = 1\nprint('holding')\ntime.sleep({hold})\nprint('done')"
    )
}

/// The gateway's commands' parent cgroup, found through a command's own cgroup path.
fn parent_of_command(output: &str) -> Option<PathBuf> {
    let parent = sandbox::linux::cgroup::parent()?;
    let group = output
        .lines()
        .filter(|line| line.contains(":memory:") || line.starts_with("0::"))
        .find_map(|line| {
            line.split('/')
                .find(|part| part.starts_with(sandbox::linux::cgroup::GROUP_PREFIX))
        })?;
    Some(parent.dir().join(group))
}

/// Two sessions each run one command within its own bound (192 MiB), together over the
/// gateway's 200 MiB: one is killed with the aggregate's result, the other finishes, and both
/// sessions and the gateway go on. Where the host gives commands no memory cgroup (the
/// fallback), both finish and nothing names the aggregate.
#[tokio::test(flavor = "multi_thread")]
async fn commands_of_two_sessions_together_stay_within_the_gateway_bound() {
    let mut gw = gateway_with(&[
        ("CLAUDE_TOOLS_COMMAND_MEMORY_MB", "128"),
        ("CLAUDE_TOOLS_COMMAND_SCRATCH_MB", "64"),
        ("CLAUDE_TOOLS_COMMANDS_MEMORY_MB", "200"),
    ])
    .await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let (one, two) = (work_dir(), work_dir());
    let a = start_session(&chat, one.path(), "Hold memory", "all-a").await;
    let b = start_session(&chat, two.path(), "Hold memory too", "all-b").await;
    let cgroup = sandbox::host_support().memory_cgroup.is_some();
    let commands = a["network_boundary"]["commands"].as_str().unwrap();
    assert_eq!(
        commands.contains(
            "all commands of all sessions together within CLAUDE_TOOLS_COMMANDS_MEMORY_MB"
        ),
        cgroup,
        "{commands}"
    );
    let (sid_a, lease_a, sid_b, lease_b) =
        (session_id(&a), lease_id(&a), session_id(&b), lease_id(&b));
    let calls = |script: String| {
        json!([
            {"name": "RunCommand", "arguments": {"argv": ["python3", "-c", script]}},
            {"name": "RunCommand", "arguments": {"argv": ["cat", "/proc/self/cgroup"]}},
        ])
    };
    let (turn_a, turn_b) = (turn_id(&a), turn_id(&b));
    let (ra, rb) = tokio::join!(
        chat.reply(
            &sid_a,
            &lease_a,
            &turn_a,
            "all-a-1",
            Some("Hold."),
            Some(calls(hold(0.0, 110, 8.0)))
        ),
        chat.reply(
            &sid_b,
            &lease_b,
            &turn_b,
            "all-b-1",
            Some("Hold."),
            Some(calls(hold(2.0, 110, 3.0)))
        ),
    );
    let (va, vb) = (view(&ra.unwrap()), view(&rb.unwrap()));
    let result = |v: &serde_json::Value, i: usize| v["pending_turn"]["tool_results"][i].clone();
    let note = "note: the command was killed: all commands of this gateway's sessions together \
                reached their memory bound of 200 MiB (CLAUDE_TOOLS_COMMANDS_MEMORY_MB), and the \
                kernel killed the largest of them, this one; run it again when fewer commands run";
    let killed: Vec<bool> = [&va, &vb]
        .iter()
        .map(|v| result(v, 0)["output"].as_str().unwrap().contains(note))
        .collect();
    if cgroup {
        assert_eq!(killed.iter().filter(|k| **k).count(), 1, "{va}\n{vb}");
    } else {
        assert_eq!(killed, [false, false], "{va}\n{vb}");
    }
    for (v, was_killed) in [(&va, killed[0]), (&vb, killed[1])] {
        let first = result(v, 0);
        let output = first["output"].as_str().unwrap();
        if was_killed {
            assert_eq!(first["status"], "error", "{v}");
            assert!(!output.contains("done\n"), "{output}");
            // Not the command's own bound.
            assert!(!output.contains("went over its memory bound"), "{output}");
        } else {
            assert_eq!(first["status"], "ok", "{v}");
            assert!(output.contains("holding\ndone\n"), "{output}");
        }
    }
    // Both sessions' commands sat in the same parent, and the sessions go on.
    let groups: Vec<Option<PathBuf>> = [&va, &vb]
        .iter()
        .map(|v| parent_of_command(result(v, 1)["output"].as_str().unwrap()))
        .collect();
    if cgroup {
        assert!(groups[0].is_some(), "{va}");
        assert_eq!(groups[0], groups[1]);
    }
    let echo = json!([{"name": "RunCommand", "arguments": {"argv": ["/bin/echo", "still here"]}}]);
    for (sid, lease, v, key) in [
        (&sid_a, &lease_a, &va, "all-a-2"),
        (&sid_b, &lease_b, &vb, "all-b-2"),
    ] {
        let r = chat
            .reply(
                sid,
                lease,
                &turn_id(v),
                key,
                Some("Echo."),
                Some(echo.clone()),
            )
            .await
            .unwrap();
        let after = view(&r);
        let echoed = result(&after, 0);
        assert_eq!(echoed["status"], "ok", "{after}");
        assert!(
            echoed["output"].as_str().unwrap().contains("still here"),
            "{after}"
        );
        chat.stop(sid, lease, &format!("{key}-stop"), None)
            .await
            .unwrap();
    }
    // Stopped sessions' brokers remove their cgroups as they end; then the gateway's exit
    // removes the parent.
    if let Some(group) = &groups[0] {
        let sessions = || {
            std::fs::read_dir(group)
                .map(|entries| entries.flatten().filter(|e| e.path().is_dir()).count())
                .unwrap_or(0)
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while sessions() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(sessions(), 0, "the sessions' cgroups are left");
    }
    gw.signal(rustix::process::Signal::TERM).unwrap();
    gw.wait_exit(Duration::from_secs(20)).await.unwrap();
    if let Some(group) = &groups[0] {
        assert!(!group.exists(), "{} is left", group.display());
    }
}
