//! Red team 29 B1 through the real gateway: past a full state budget, recover and stop keep
//! working (by design) but each stored the whole SessionView as its idempotent answer — with a
//! 700 KiB `last_result`, 703 KiB per call, without limit. Now a session keeps the answers of its
//! last `ANSWERS_KEPT` (4) calls of each operation, so a flood of new keys leaves the state dir
//! within a bound (documented in decisions.md, "State dir budget"); the newest replay unchanged,
//! older ones are refused saying why, and `gatewayctl prune` frees a live session's old answers.
//! Recovers and stops are paced too (a live session's recover stores a lease row and events);
//! stops of the ended session store nothing per call.

use serde_json::{Value, json};

use crate::support::*;

/// Calls of each flood: before the bound, 60 × 703 KiB = 41 MiB each.
const CALLS: usize = 60;
/// What the state dir may grow by during one flood: the four answers kept (4 × ~0.7 MiB), the
/// WAL, the freed pages of the dropped ones awaiting reuse, and ~7 KiB of lease row and events
/// per recover carried out (8 at once past the budget, then one per 5 s) — measured 5–7 MiB.
const FLOOD_BOUND: u64 = 12 << 20;

/// A long text the session's turn ends with (its `last_result`).
fn long_answer() -> String {
    let mut text = String::from("Here is the summary.\n");
    while text.len() + 12 <= 700 * 1024 {
        text.push_str(&format!("w{:09} ", text.len()));
    }
    text
}

fn structured(r: &Value) -> Value {
    let mut v = view(r);
    v.as_object_mut().unwrap().remove("replay");
    v
}

fn no_longer_kept(r: &Value) {
    assert_eq!(tool_err_code(r), "idempotency_conflict", "{r}");
    let message = r["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("no longer kept"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn recover_and_stop_floods_past_a_full_budget_stay_within_a_bound() {
    let gw = gateway_with(&[("CLAUDE_TOOLS_STATE_MAX_MB", "64")]).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let started = start_session(&chat, dir.path(), "say something long", "ab-1").await;
    let (sid, lease) = (session_id(&started), lease_id(&started));
    let token = started["recovery_token"].as_str().unwrap().to_string();
    let answer = long_answer();
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&started),
            "ab-answer",
            Some(&answer),
            None,
        )
        .await
        .unwrap();
    let idle = view(&r);
    assert_eq!(idle["status"], "idle", "{idle}");
    assert_eq!(
        idle["last_result"]["text"].as_str().unwrap().len(),
        answer.len()
    );

    // The budget is full (a 70 MiB file in a 64 MiB budget, measured by a prune that removes
    // nothing): a new start is refused, recover and stop are not.
    std::fs::write(gw.state_dir().join("filler"), vec![7u8; 70 << 20]).unwrap();
    gatewayctl_json(&gw, &["prune"]);
    let refused = chat
        .start_with("new", dir.path(), "ab-refused", json!({"wait_seconds": 0}))
        .await
        .unwrap();
    assert_eq!(tool_err_code(&refused), "storage_full", "{refused}");

    let size = || sandbox::allocated_bytes(gw.state_dir());
    let full_answers = |scope: String| {
        count_with(
            &gw,
            "SELECT COUNT(*) FROM idempotency WHERE scope = ?1 AND LENGTH(answer) > 128",
            scope,
        )
    };

    // A recover flood: the first go through (each records a 0.7 MiB answer, 4 kept), then the
    // session is paced (`busy`, saying when to come back): it stores a lease row and events.
    let before = size();
    let mut recovered: Vec<(usize, Value)> = Vec::new();
    for i in 0..CALLS {
        let r = chat
            .recover(&sid, &token, &format!("ab-rec-{i}"), 0)
            .await
            .unwrap();
        if r["isError"] == true {
            assert_eq!(tool_err_code(&r), "busy", "{r}");
            let message = r["structuredContent"]["error"]["message"].as_str().unwrap();
            assert!(message.contains("Send it again in"), "{message}");
        } else {
            recovered.push((i, structured(&r)));
        }
    }
    let grew = size().saturating_sub(before);
    eprintln!(
        "{CALLS} recovers past the budget, {} carried out: state dir grew by {} KiB",
        recovered.len(),
        grew >> 10
    );
    assert!(
        (8..=12).contains(&recovered.len()),
        "{} recovers carried out past the budget",
        recovered.len()
    );
    assert!(
        grew < FLOOD_BOUND,
        "recover flood grew the state dir by {grew} bytes"
    );
    assert_eq!(full_answers(format!("recover:{sid}")), 4);

    // The newest answers replay unchanged (replays are never paced); an older one is refused,
    // nothing done.
    for (i, answered) in recovered.iter().rev().take(4) {
        let r = chat
            .recover(&sid, &token, &format!("ab-rec-{i}"), 0)
            .await
            .unwrap();
        assert_eq!(view(&r)["replay"], true);
        assert_eq!(&structured(&r), answered, "replay of ab-rec-{i}");
    }
    let (oldest, _) = recovered[0];
    no_longer_kept(
        &chat
            .recover(&sid, &token, &format!("ab-rec-{oldest}"), 0)
            .await
            .unwrap(),
    );
    let (newest, newest_answer) = recovered.last().unwrap().clone();
    let lease = newest_answer["lease_id"].as_str().unwrap().to_string();
    let still = chat.status(&sid, &lease, 0).await.unwrap();
    assert_eq!(
        view(&still)["status"],
        "idle",
        "the refused replay changed the session"
    );

    // The owner's prune frees the live session's older answers, the newest of each stays.
    let pruned = gatewayctl_json(&gw, &["prune", "--older-than", "0s"]);
    assert!(
        pruned["database_bytes"].as_u64().unwrap() >= 3 * 700 * 1024,
        "{pruned}"
    );
    assert_eq!(full_answers(format!("recover:{sid}")), 1);
    let r = chat
        .recover(&sid, &token, &format!("ab-rec-{newest}"), 0)
        .await
        .unwrap();
    assert_eq!(structured(&r), newest_answer);
    let (second, _) = recovered[recovered.len() - 2];
    no_longer_kept(
        &chat
            .recover(&sid, &token, &format!("ab-rec-{second}"), 0)
            .await
            .unwrap(),
    );

    // Stop, then a flood of stops with new request ids on the ended session: paced like the
    // recovers (ended sessions together), and none records its key or answer (red team 31/32
    // N1): only the stop that ended the session keeps its answer.
    let before = size();
    let mut stops: Vec<(usize, Value)> = Vec::new();
    for i in 0..CALLS {
        let r = chat
            .stop(&sid, &lease, &format!("ab-stop-{i}"), None)
            .await
            .unwrap();
        if r["isError"] == true {
            assert_eq!(tool_err_code(&r), "busy", "{r}");
        } else {
            stops.push((i, structured(&r)));
        }
    }
    let grew = size().saturating_sub(before);
    eprintln!(
        "{CALLS} stops past the budget, {} carried out: state dir grew by {} KiB",
        stops.len(),
        grew >> 10
    );
    assert!((8..=12).contains(&stops.len()), "{} stops", stops.len());
    assert!(
        grew < FLOOD_BOUND,
        "stop flood grew the state dir by {grew} bytes"
    );
    assert_eq!(stops[0].1["status"], "stopped");
    assert_eq!(full_answers(format!("stop:{sid}")), 1);
    // The last stop replays the session as stored (its lease renewed since); the ending one
    // replays its recorded answer.
    let without_expiry = |mut v: Value| {
        v.as_object_mut().unwrap().remove("lease_expires_at");
        v
    };
    let (last, answered) = stops.last().unwrap();
    let r = chat
        .stop(&sid, &lease, &format!("ab-stop-{last}"), None)
        .await
        .unwrap();
    assert_eq!(view(&r)["replay"], true);
    assert_eq!(
        without_expiry(structured(&r)),
        without_expiry(answered.clone())
    );
    let r = chat.stop(&sid, &lease, "ab-stop-0", None).await.unwrap();
    assert_eq!(view(&r)["replay"], true);
    assert_eq!(structured(&r), stops[0].1);
}
