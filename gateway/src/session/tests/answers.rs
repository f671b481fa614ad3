//! Recorded idempotent answers are bounded per session and operation and charged (red team 29
//! B1/B2): recover and stop, which work past the state budget, stored a whole SessionView (up to
//! ~1 MiB) for every new key, without limit and uncharged. Now the newest
//! [`crate::session::ANSWERS_KEPT`] of each replay byte for byte, older ones are refused saying
//! why, and `gatewayctl prune` drops a live session's older answers.

use std::time::Duration;

use common::tools::CapabilityProfile;
use serde_json::json;

use super::harness::{Harness, read_finished, results_turn};

use crate::error::ErrorCode;
use crate::session::ANSWERS_KEPT;
use crate::view::SessionView;

/// (answers recorded in full, their bytes) of `scope`.
fn recorded(h: &Harness, scope: &str) -> (i64, i64) {
    let db =
        rusqlite::Connection::open(h.gateway.config.state_dir.join(crate::state::DATABASE_FILE))
            .unwrap();
    db.query_row(
        "SELECT COUNT(*), COALESCE(SUM(LENGTH(answer)), 0) FROM idempotency
         WHERE scope = ?1 AND answer NOT LIKE '%\"dropped\":true%'",
        [scope],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )
    .unwrap()
}

/// A session waiting on a tool-results turn that carries `output_bytes` of output: its view is
/// about that large; and its recovery token.
async fn bulky_session(h: &Harness, output_bytes: usize) -> (SessionView, String) {
    let view = h.start().await;
    let token = view.recovery_token.clone().unwrap();
    let pid = h.pid(&view);
    h.runner_asks(pid, "f1").await;
    let view = h.status(&view).await.unwrap();
    let path = h.project.join("a.txt");
    let calls = json!([{"name": "Read", "arguments": {"file_path": path}}]);
    h.reply(&view, "r1", "reading", calls).await.unwrap();
    let action = h.next_reply(pid).await.calls[0].action_id.clone();
    h.event(pid, 3, read_finished(&action, &"x".repeat(output_bytes)))
        .await;
    h.event(pid, 4, results_turn("f2")).await;
    let view = h.status(&view).await.unwrap();
    assert!(serde_json::to_string(&view).unwrap().len() > output_bytes);
    (view, token)
}

fn same_answer(mut replayed: SessionView, original: &SessionView) {
    assert!(replayed.replay, "a replay says so");
    replayed.replay = false;
    assert_eq!(
        &replayed, original,
        "the replay answers what the call answered"
    );
}

fn no_longer_kept<T: std::fmt::Debug>(result: Result<T, crate::error::ToolError>) {
    let err = result.expect_err("an answer no longer kept is refused");
    assert_eq!(err.code, ErrorCode::IdempotencyConflict);
    assert!(err.message.contains("no longer kept"), "{}", err.message);
    assert!(
        err.message.contains("status"),
        "says what to do: {}",
        err.message
    );
}

#[tokio::test]
async fn recover_keeps_its_last_answers_replays_them_unchanged_and_refuses_older_ones() {
    let h = Harness::new();
    let (view, token) = bulky_session(&h, 256 * 1024).await;
    let scope = format!("recover:{}", view.native_session_id);
    let mut answers = Vec::new();
    for i in 0..ANSWERS_KEPT + 6 {
        // More than a burst: the answers kept are measured here, the pace below.
        h.gateway.recovery_pace.clear();
        answers.push(h.recover(&view, &token, &format!("rec{i}")).await.unwrap());
    }
    let (kept, bytes) = recorded(&h, &scope);
    assert_eq!(kept as usize, ANSWERS_KEPT);
    assert!(bytes > 256 * 1024 * ANSWERS_KEPT as i64 && bytes < 2 * 256 * 1024 * 8);
    // The newest replay the bytes they answered, oldest first and newest last …
    for i in (answers.len() - ANSWERS_KEPT..answers.len()).rev() {
        let replayed = h.recover(&view, &token, &format!("rec{i}")).await.unwrap();
        same_answer(replayed, &answers[i]);
    }
    // … older ones are refused (not carried out again: the lease did not rotate).
    let generation = h
        .gateway
        .load(&view.native_session_id)
        .unwrap()
        .lease_generation;
    for i in 0..answers.len() - ANSWERS_KEPT {
        no_longer_kept(h.recover(&view, &token, &format!("rec{i}")).await);
    }
    let now = h
        .gateway
        .load(&view.native_session_id)
        .unwrap()
        .lease_generation;
    assert_eq!(now, generation);
    // Their keys are still theirs: other arguments under one of them are a conflict as ever.
    let other = h.recover(&view, "rec_wrong_token", "rec0").await;
    assert!(other.is_err());
}

/// Red team 31/32 N1: only the stop that ended the session records its answer; later stops of
/// the ended session record none (their last key is kept in one place and replays).
#[tokio::test]
async fn stops_of_an_ended_session_record_only_the_ending_ones_answer() {
    let h = Harness::new();
    let (view, _) = bulky_session(&h, 128 * 1024).await;
    let scope = format!("stop:{}", view.native_session_id);
    let mut answers = Vec::new();
    for i in 0..ANSWERS_KEPT + 4 {
        answers.push(h.stop(&view, &format!("s{i}")).await.unwrap());
    }
    assert_eq!(recorded(&h, &scope).0 as usize, 1);
    let last = answers.len() - 1;
    // An ended session's last stop answers the session as stored: its lease renewed since.
    let mut replayed = h.stop(&view, &format!("s{last}")).await.unwrap();
    replayed
        .lease_expires_at
        .clone_from(&answers[last].lease_expires_at);
    same_answer(replayed, &answers[last]);
    same_answer(h.stop(&view, "s0").await.unwrap(), &answers[0]);
}

#[tokio::test]
async fn prune_drops_a_live_sessions_older_answers_but_the_newest_of_each_operation() {
    let h = Harness::new();
    let (view, token) = bulky_session(&h, 128 * 1024).await;
    let scope = format!("recover:{}", view.native_session_id);
    let mut answers = Vec::new();
    for i in 0..3 {
        answers.push(h.recover(&view, &token, &format!("rec{i}")).await.unwrap());
    }
    assert_eq!(recorded(&h, &scope).0, 3);
    // A dry run drops nothing.
    let dry = crate::prune::prune(&h.gateway, Duration::ZERO, true).unwrap();
    assert_eq!(dry.live_answers.answers, 0);
    assert_eq!(recorded(&h, &scope).0, 3);
    // Answers younger than the age stay.
    let young = crate::prune::prune(&h.gateway, Duration::from_secs(3600), false).unwrap();
    assert_eq!(young.live_answers.answers, 0);
    let done = crate::prune::prune(&h.gateway, Duration::ZERO, false).unwrap();
    // rec0 and rec1 of recover, r1 of reply (the reply scope keeps nothing newer: it is its
    // newest, so it stays); the session's start answer is its own and stays.
    assert_eq!(done.live_answers.answers, 2, "{done:?}");
    assert!(done.database_bytes > 0 && done.live_answers.bytes > 2 * 128 * 1024);
    assert_eq!(recorded(&h, &scope).0, 1);
    same_answer(h.recover(&view, &token, "rec2").await.unwrap(), &answers[2]);
    no_longer_kept(h.recover(&view, &token, "rec0").await);
    // The session goes on.
    assert!(h.status(&answers[2]).await.is_ok());
}

/// A recover stores a lease row and events: a session recovers `PACED_BURST` times at once,
/// then is told `busy` and when to come back, whatever the state budget (red team 31/32 N1:
/// below it nothing was paced); replays and status are never paced. Stops of an ended session
/// too.
#[tokio::test]
async fn recover_is_paced_per_session_below_and_past_the_budget_and_replays_are_not() {
    use crate::state_budget::PACED_BURST;
    let h = Harness::new();
    let view = h.start().await;
    let token = view.recovery_token.clone().unwrap();
    for i in 0..PACED_BURST {
        h.recover(&view, &token, &format!("under{i}"))
            .await
            .unwrap();
    }
    let err = h
        .recover(&view, &token, "under-too-many")
        .await
        .expect_err("paced below the budget");
    assert_eq!(err.code, ErrorCode::Busy);
    h.gateway.recovery_pace.clear();
    let budget = &h.gateway.state_budget;
    budget.set_max_bytes(1);
    budget.refresh_now();
    let mut last = None;
    for i in 0..PACED_BURST {
        last = Some(h.recover(&view, &token, &format!("rec{i}")).await.unwrap());
    }
    let err = h
        .recover(&view, &token, "one-too-many")
        .await
        .expect_err("paced");
    assert_eq!(err.code, ErrorCode::Busy);
    assert!(
        err.message.contains("Send it again in 10 s"),
        "{}",
        err.message
    );
    assert!(err.message.contains("status works"), "{}", err.message);
    let last_key = format!("rec{}", PACED_BURST - 1);
    same_answer(
        h.recover(&view, &token, &last_key).await.unwrap(),
        last.as_ref().unwrap(),
    );
    let last = last.unwrap();
    assert!(h.status(&last).await.is_ok());
    // The stop of the live session has its own pace; of the ended one, new keys share one.
    h.stop(&last, "s-live").await.unwrap();
    for i in 0..PACED_BURST {
        h.stop(&last, &format!("s{i}")).await.unwrap();
    }
    let err = h.stop(&last, "s-too-many").await.expect_err("paced");
    assert_eq!(err.code, ErrorCode::Busy);
    assert!(err.message.contains("stop"), "{}", err.message);
    let newest = format!("s{}", PACED_BURST - 1);
    assert!(
        h.stop(&last, &newest).await.unwrap().replay,
        "a replay is not paced"
    );
}

/// Red team 31 N1: the holder of many ended sessions' tokens multiplied a per-session pace past
/// the budget (6,248 recovers and stops a minute over 300 sessions). Ended sessions share one
/// pace; a live session keeps its own.
#[tokio::test]
async fn past_the_budget_ended_sessions_share_one_pace_and_a_live_one_keeps_its_own() {
    use crate::state_budget::PACED_BURST;
    let h = Harness::new();
    let mut ended = Vec::new();
    for i in 0..2 {
        let view = h
            .start_with(&format!("start{i}"), CapabilityProfile::ReadOnly)
            .await;
        let token = view.recovery_token.clone().unwrap();
        let stopped = h.stop(&view, &format!("end{i}")).await.unwrap();
        ended.push((stopped, token));
    }
    let live = h
        .start_with("start-live", CapabilityProfile::ReadOnly)
        .await;
    let live_token = live.recovery_token.clone().unwrap();
    let budget = &h.gateway.state_budget;
    budget.set_max_bytes(1);
    budget.refresh_now();
    // The first recover after the end rotates the lease, paced per session; the later ones
    // hand it back and share the ended sessions' pace.
    let (first, first_token) = &ended[0];
    for i in 0..=PACED_BURST {
        h.recover(first, first_token, &format!("a{i}"))
            .await
            .unwrap();
    }
    let (second, second_token) = &ended[1];
    let rotated = h.recover(second, second_token, "b0").await.unwrap();
    assert_ne!(
        rotated.lease_id, second.lease_id,
        "another ended session's flood does not hold back the rotation that cuts a lease off"
    );
    let err = h
        .recover(second, second_token, "b1")
        .await
        .expect_err("the ended sessions' pace is used up");
    assert_eq!(err.code, ErrorCode::Busy);
    assert!(
        err.message.contains("ended sessions together"),
        "{}",
        err.message
    );
    h.recover(&live, &live_token, "live0").await.unwrap();
}
