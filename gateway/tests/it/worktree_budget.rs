//! Concurrent `worktree_write` starts against the state dir's budget (issue 24, check-then-act):
//! each passed the budget check before any checkout was measured, so N starts overshot by N
//! checkouts. Now they go one at a time through check, checkout and its measurement: with less
//! room than one checkout, one start is accepted and the others are refused `storage_full`.

use serde_json::json;

use crate::support::*;

/// Concurrent starts.
const STARTS: usize = 4;
/// The committed file each checkout copies.
const CHECKOUT_BYTES: usize = 4 << 20;

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_worktree_starts_cannot_overshoot_the_budget() {
    let gw = gateway_with(&[("CLAUDE_TOOLS_STATE_MAX_MB", "64")]).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let (_repo, source) = crate::writes::repo();
    let big: Vec<u8> = (0..CHECKOUT_BYTES)
        .map(|i| (i * 7919 % 251) as u8)
        .collect();
    std::fs::write(source.join("big.bin"), big).unwrap();
    for args in [&["add", "-A"][..], &["commit", "-q", "-m", "big"][..]] {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&source)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }
    let mut chats = Vec::new();
    for _ in 0..STARTS {
        chats.push(chatgpt(&gw).await);
    }
    // Half a checkout of room below the budget (a filler, measured by a prune).
    let size = sandbox::allocated_bytes(gw.state_dir());
    let filler = (64u64 << 20).saturating_sub(size + (CHECKOUT_BYTES as u64 / 2));
    std::fs::write(gw.state_dir().join("filler"), vec![7u8; filler as usize]).unwrap();
    gatewayctl_json(&gw, &["prune"]);

    let starts = chats.iter().enumerate().map(|(i, chat)| {
        let source = source.clone();
        async move {
            let extra = json!({"capability_profile": "worktree_write", "wait_seconds": 0});
            chat.start_with("edit", &source, &format!("wb-{i}"), extra)
                .await
                .unwrap()
        }
    });
    let answers = futures::future::join_all(starts).await;
    let mut accepted = 0;
    for r in &answers {
        if r["isError"] == true {
            assert_eq!(tool_err_code(r), "storage_full", "{r}");
            let message = r["structuredContent"]["error"]["message"]
                .as_str()
                .unwrap_or_default();
            assert!(message.contains("nothing was started"), "{message}");
        } else {
            accepted += 1;
        }
    }
    let worktrees = count(&gw, "SELECT COUNT(*) FROM sessions");
    eprintln!("{STARTS} concurrent worktree starts: {accepted} accepted, {worktrees} sessions");
    assert_eq!(
        accepted, 1,
        "{accepted} of {STARTS} concurrent worktree starts accepted"
    );
}
