//! Red team 31 N1 / 32 item 5 through the real gateway: whoever holds many ended sessions'
//! recovery tokens flooded recovers and stops below the state budget (unpaced, each storing a
//! key, an answer and, for a recover, a lease row and an event) until the owner's start was
//! refused `storage_full`; one prune gave a start back, each re-flood took it away in 5–6 s.
//! Now an ended session stores O(1) whatever is called on it, and recovers and stops are paced
//! whatever the budget (ended sessions together): the flood is told `busy` with its retry hint,
//! stores nothing per call, and the owner's start is accepted during and after it, also after a
//! prune and a second flood.

use serde_json::{Value, json};

use crate::support::*;

/// Ended sessions whose tokens the flood holds.
const SESSIONS: usize = 4;
/// Recovers and stops with new ids per ended session and flood: before the change, 4 × 2 × 60
/// calls stored ~2.5 MiB against the 1 MiB left below the budget.
const CALLS: usize = 60;

/// Rows of the tables a recover or stop can add to.
fn rows(gw: &GatewayProcess) -> [i64; 3] {
    ["idempotency", "leases", "events"].map(|t| count(gw, &format!("SELECT COUNT(*) FROM {t}")))
}

/// One flood over the ended sessions, as the red teams' scripts made it (each stop with the
/// lease of the latest recover): (calls carried out, `busy` refusals). Every refusal is the
/// pace's, saying when to come back.
async fn flood(
    chat: &ScriptedChatGpt,
    ended: &mut [(String, String, String)],
    round: &str,
) -> (usize, usize) {
    let (mut done, mut busy) = (0, 0);
    for i in 0..CALLS {
        for (sid, lease, token) in ended.iter_mut() {
            let recovered = chat
                .recover(sid, token, &format!("{round}-rec-{i}"), 0)
                .await
                .unwrap();
            if recovered["isError"] != true {
                *lease = lease_id(&view(&recovered));
            }
            let stopped = chat
                .stop(sid, lease, &format!("{round}-stop-{i}"), None)
                .await
                .unwrap();
            for r in [recovered, stopped] {
                if r["isError"] != true {
                    done += 1;
                    continue;
                }
                assert_eq!(tool_err_code(&r), "busy", "{r}");
                let message = r["structuredContent"]["error"]["message"]
                    .as_str()
                    .unwrap_or_default();
                assert!(
                    message.contains("ended sessions together")
                        && message.contains("Send it again in"),
                    "{message}"
                );
                busy += 1;
            }
        }
    }
    (done, busy)
}

fn accepted(r: &Value) {
    assert_ne!(r["isError"], true, "the owner's start was refused: {r}");
}

#[tokio::test(flavor = "multi_thread")]
async fn floods_of_ended_sessions_recovers_and_stops_never_lock_the_owner_out() {
    let gw = gateway_with(&[("CLAUDE_TOOLS_STATE_MAX_MB", "64")]).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let mut ended = Vec::new();
    for i in 0..SESSIONS {
        let v = start_session(&chat, dir.path(), "look around", &format!("ef-{i}")).await;
        let (sid, lease) = (session_id(&v), lease_id(&v));
        tool_ok(
            &chat
                .stop(&sid, &lease, &format!("ef-end-{i}"), None)
                .await
                .unwrap(),
        );
        // The first recover after the end rotates the lease once; the flood holds that one.
        let token = v["recovery_token"].as_str().unwrap().to_string();
        let r = chat
            .recover(&sid, &token, &format!("ef-first-{i}"), 0)
            .await
            .unwrap();
        ended.push((sid, lease_id(&view(&r)), token));
    }
    // The state dir 1 MiB below its budget (a filler file, measured by a prune that removes
    // nothing): the owner can still start.
    let size = sandbox::allocated_bytes(gw.state_dir());
    let filler = (64u64 << 20).saturating_sub(size + (1 << 20));
    std::fs::write(gw.state_dir().join("filler"), vec![7u8; filler as usize]).unwrap();
    gatewayctl_json(&gw, &["prune"]);
    let before = rows(&gw);

    let started = std::time::Instant::now();
    let (done, busy) = flood(&chat, &mut ended, "f1").await;
    let took = started.elapsed().as_secs() as usize;
    let grew = rows(&gw);
    eprintln!("flood 1 ({took} s): {done} carried out, {busy} busy; rows {before:?} -> {grew:?}");
    let r = chat
        .start_with(
            "owner",
            dir.path(),
            "ef-owner-1",
            json!({"wait_seconds": 0}),
        )
        .await
        .unwrap();
    accepted(&r);
    assert!(busy > 0, "the flood was never paced");
    // Two paces (recover, stop of ended sessions): 8 at once, then one per 10 s each.
    assert!(
        done <= 2 * (8 + took / 10 + 1),
        "{done} calls carried out in {took} s"
    );
    // An ended session keeps one last request per operation: recover's was kept by its first
    // recover, stop's by the flood's first stop of it. No lease row, no event.
    assert_eq!(grew[0] - before[0], SESSIONS as i64, "idempotency rows");
    assert_eq!(&grew[1..], &before[1..], "lease rows and events");

    // A prune, then a second flood once the pace has room again: the owner's start stays.
    gatewayctl_json(&gw, &["prune", "--older-than", "0s"]);
    tokio::time::sleep(std::time::Duration::from_secs(20)).await;
    let before = rows(&gw);
    let (done, busy) = flood(&chat, &mut ended, "f2").await;
    eprintln!("flood 2: {done} carried out, {busy} busy");
    assert!(done > 0 && busy > 0);
    assert_eq!(rows(&gw), before, "a second flood stored rows");
    let r = chat
        .start_with(
            "owner",
            dir.path(),
            "ef-owner-2",
            json!({"wait_seconds": 0}),
        )
        .await
        .unwrap();
    accepted(&r);
    let verified = gatewayctl_json(&gw, &["verify"]);
    assert_eq!(verified["ok"], true, "{verified}");
}
