//! The state dir's budget between two walks (red team 25 B7): a tool's output the gateway
//! stores counts at once, and past the budget only a short answer without tool calls is
//! delivered, so a turn can end but nothing grows the dir further.

use serde_json::json;

use super::harness::{Harness, code, read_finished, results_turn};
use crate::error::ErrorCode;
use crate::state_budget::OUTPUT_COST_FACTOR;

#[tokio::test]
async fn outputs_count_at_once_and_past_the_budget_only_an_answer_is_delivered() {
    let h = Harness::new();
    let view = h.start().await;
    let pid = h.pid(&view);
    h.runner_asks(pid, "f1").await;
    let view = h.status(&view).await.unwrap();
    let budget = &h.gateway.state_budget;
    budget.refresh_now();
    let before = budget.used_bytes();
    // Room for 2 MiB more, and no walk due for 30 s.
    budget.set_max_bytes(before + (2 << 20));
    assert!(budget.used_bytes() < before + (1 << 20));
    let path = h.project.join("a.txt");
    let calls = json!([{"name": "Read", "arguments": {"file_path": path}}]);
    h.reply(&view, "r1", "reading", calls.clone())
        .await
        .unwrap();
    let action = h.next_reply(pid).await.calls[0].action_id.clone();
    let output = "x".repeat(512 * 1024);
    h.event(pid, 3, read_finished(&action, &output)).await;
    assert!(
        budget.used_bytes() >= before + output.len() as u64 * OUTPUT_COST_FACTOR,
        "the stored output was not counted before the next walk"
    );
    h.event(pid, 4, results_turn("f2")).await;
    let view = h.status(&view).await.unwrap();
    // Past the budget (measured, so no walk in between can change it): tool calls are refused,
    // even in a short reply …
    budget.set_max_bytes(1);
    budget.refresh_now();
    let refused = h.reply(&view, "r2", "again", calls).await;
    assert_eq!(code(refused.clone()), ErrorCode::StorageFull);
    assert!(
        refused.unwrap_err().message.contains("without tool calls"),
        "the refusal says what still goes through"
    );
    // … and a short answer ends the turn.
    h.reply(&view, "r3", "done", json!([])).await.unwrap();
}

/// Red team 26 B4: prompts and replies count at once too (eight sessions of 700 KiB prompts and
/// answers took a 64 MiB budget to 263 MiB before the first walk).
#[tokio::test]
async fn prompts_and_replies_count_at_once() {
    use crate::state_budget::TEXT_COST_FACTOR;
    use crate::tools::PublicTool;
    let h = Harness::new();
    let budget = &h.gateway.state_budget;
    budget.refresh_now();
    let before = budget.used_bytes();
    budget.set_max_bytes(before + (64 << 20));
    let prompt = "p".repeat(300 * 1024);
    let view = h
        .call(
            PublicTool::Start,
            json!({"prompt": prompt, "working_directory": h.project, "idempotency_key": "big",
                   "wait_seconds": 0}),
        )
        .await
        .unwrap();
    let after_start = budget.used_bytes();
    assert!(after_start >= before + prompt.len() as u64 * TEXT_COST_FACTOR);
    let pid = h.pid(&view);
    h.runner_asks(pid, "f1").await;
    let view = h.status(&view).await.unwrap();
    // A reply's text and its calls' arguments (red team 27 B4: a Write's content).
    let answer = "a".repeat(60 * 1024);
    let content = "c".repeat(100 * 1024);
    let calls = json!([{"name": "RunCommand", "arguments": {"argv": ["echo", content]}}]);
    h.reply(&view, "r1", &answer, calls).await.unwrap();
    let charged = (answer.len() + content.len()) as u64 * TEXT_COST_FACTOR;
    assert!(budget.used_bytes() >= after_start + charged);
}

/// Red team 29 B1/B2: an idempotent answer the gateway records (a whole SessionView) counts at
/// once, also for recover and stop, which are never refused: eight sessions replying with a
/// 700 KiB `last_result` each were charged ~100 bytes a reply and took a 64 MiB budget to 222 MiB.
#[tokio::test]
async fn recorded_answers_count_at_once() {
    use crate::state_budget::ANSWER_COST_FACTOR;
    let h = Harness::new();
    let view = h.start().await;
    let token = view.recovery_token.clone().unwrap();
    let pid = h.pid(&view);
    h.runner_asks(pid, "f1").await;
    let view = h.status(&view).await.unwrap();
    let path = h.project.join("a.txt");
    let calls = json!([{"name": "Read", "arguments": {"file_path": path}}]);
    h.reply(&view, "r1", "reading", calls).await.unwrap();
    let action = h.next_reply(pid).await.calls[0].action_id.clone();
    h.event(pid, 3, read_finished(&action, &"x".repeat(256 * 1024)))
        .await;
    h.event(pid, 4, results_turn("f2")).await;
    let budget = &h.gateway.state_budget;
    budget.refresh_now();
    budget.set_max_bytes(budget.used_bytes() + (1 << 30));
    let before = budget.used_bytes();
    let answer = h.recover(&view, &token, "rec1").await.unwrap();
    let bytes = serde_json::to_string(&answer).unwrap().len() as u64;
    assert!(bytes > 256 * 1024);
    assert!(
        budget.used_bytes() >= before + bytes * ANSWER_COST_FACTOR * 9 / 10,
        "the recorded answer was not counted before the next walk"
    );
    // A replay stores nothing and is charged nothing.
    let charged = budget.used_bytes();
    h.recover(&view, &token, "rec1").await.unwrap();
    assert_eq!(budget.used_bytes(), charged);
}
