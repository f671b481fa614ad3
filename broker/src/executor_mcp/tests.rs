//! Invariant 3 at the executor: only approved actions run, with identical arguments, at most once,
//! and their outcome reaches the runner only after the gateway acknowledged it.

use std::time::Duration;

use common::protocol::{ApprovedCall, BrokerEvent, ReplyRelease};
use serde_json::{Value, json};

use crate::test_support::{post, state};

fn call(tool_use_id: Option<&str>, name: &str, arguments: Value) -> Value {
    let mut params = json!({"name": name, "arguments": arguments});
    if let Some(id) = tool_use_id {
        params["_meta"] = json!({"claudecode/toolUseId": id});
    }
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
}

const BEARER: &str = "Bearer rnr_test_token";

fn headers(auth: &str) -> Vec<(&str, &str)> {
    vec![
        ("host", "127.0.0.1"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", auth),
    ]
}

fn result_text(body: &str) -> (bool, String) {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    let result = &v["result"];
    (
        result["isError"].as_bool().unwrap_or(false),
        result["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

fn count(state: &crate::state::BrokerState, pred: impl Fn(&BrokerEvent) -> bool) -> usize {
    state
        .events_after(0)
        .iter()
        .filter(|(_, e)| pred(e))
        .count()
}

/// POST one `tools/call` with the runner's token; the answer's body.
async fn run_tool(router: &axum::Router, request: Value) -> String {
    post(router.clone(), "/mcp", &headers(BEARER), &request)
        .await
        .1
}

/// ChatGPT approved `Read` with `args` as action `act_1`.
fn approve_read(state: &crate::state::BrokerState, args: &Value) {
    state.release_reply(ReplyRelease {
        turn_id: "turn_1".into(),
        fingerprint: "f1".into(),
        text: String::new(),
        calls: vec![ApprovedCall {
            action_id: "act_1".into(),
            call_index: 0,
            name: "Read".into(),
            arguments: args.clone(),
            outcome: None,
        }],
    });
}

#[tokio::test]
async fn only_approved_identical_calls_run_and_only_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    std::fs::write(&file, "hello\n").unwrap();
    let state = state(dir.path());
    let router = super::router(state.clone());
    let args = json!({"file_path": file.display().to_string()});

    // Wrong runner token: 401 before anything else.
    let (status, _) = post(
        router.clone(),
        "/mcp",
        &headers("Bearer nope"),
        &call(Some("toolu_act_1"), "Read", args.clone()),
    )
    .await;
    assert_eq!(status, 401);

    // Nothing approved yet.
    let body = run_tool(&router, call(Some("toolu_act_1"), "Read", args.clone())).await;
    let (is_error, text) = result_text(&body);
    assert!(is_error && text.contains("unapproved_call"), "{body}");
    // No tool use id at all.
    let body = run_tool(&router, call(None, "Read", args.clone())).await;
    assert!(result_text(&body).1.contains("unapproved_call"), "{body}");
    assert_eq!(
        count(&state, |e| matches!(e, BrokerEvent::UnapprovedCall { .. })),
        2
    );

    approve_read(&state, &args);

    // Approved id, but other arguments or another tool: refused.
    let other = json!({"file_path": file.display().to_string(), "limit": 1});
    let body = run_tool(&router, call(Some("toolu_act_1"), "Read", other)).await;
    assert!(result_text(&body).1.contains("arguments differ"), "{body}");
    let body = run_tool(
        &router,
        call(Some("toolu_act_1"), "SearchText", args.clone()),
    )
    .await;
    assert!(result_text(&body).1.contains("unapproved_call"), "{body}");
    assert_eq!(
        count(&state, |e| matches!(e, BrokerEvent::ActionFinished { .. })),
        0
    );

    // The approved call runs, but its result waits for the gateway's acknowledgement.
    let pending = tokio::spawn(post(
        router.clone(),
        "/mcp",
        &headers(BEARER),
        &call(
            Some("toolu_act_1"),
            "Read",
            json!({"file_path": file.display().to_string()}),
        ),
    ));
    let seq = loop {
        if let Some((seq, _)) = state
            .events_after(0)
            .into_iter()
            .find(|(_, e)| matches!(e, BrokerEvent::ActionFinished { .. }))
        {
            break seq;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !pending.is_finished(),
        "the runner got a result the gateway had not recorded"
    );
    state.ack(seq);
    let (_, body) = pending.await.unwrap();
    let (is_error, text) = result_text(&body);
    assert!(!is_error, "{body}");
    assert!(text.contains("hello"), "{body}");

    // A repeat gets the recorded outcome; the action does not run again.
    std::fs::write(&file, "changed\n").unwrap();
    let body = run_tool(&router, call(Some("toolu_act_1"), "Read", args.clone())).await;
    assert!(result_text(&body).1.contains("hello"), "{body}");
    assert_eq!(
        count(&state, |e| matches!(e, BrokerEvent::ActionFinished { .. })),
        0,
        "acked events left the outbox"
    );
    assert!(
        state
            .events_after(seq)
            .iter()
            .all(|(_, e)| !matches!(e, BrokerEvent::ActionFinished { .. }))
    );
}

#[tokio::test]
async fn a_repeat_after_an_ack_timeout_waits_for_the_gateway_too() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    std::fs::write(&file, "hello\n").unwrap();
    let state = crate::test_support::state_with_ack_timeout(dir.path(), Duration::from_millis(200));
    let router = super::router(state.clone());
    let args = json!({"file_path": file.display().to_string()});
    approve_read(&state, &args);
    let request = call(Some("toolu_act_1"), "Read", args);
    // The gateway never acknowledges: the call fails, and so does its repeat, which must not
    // hand out the outcome the gateway has not recorded.
    for attempt in 0..2 {
        let (status, body) = post(router.clone(), "/mcp", &headers(BEARER), &request).await;
        let v: Value = serde_json::from_str(&body).unwrap();
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("did not record the result")),
            "attempt {attempt}: {status} {body}"
        );
    }
    let finished: Vec<u64> = state
        .events_after(0)
        .into_iter()
        .filter(|(_, e)| matches!(e, BrokerEvent::ActionFinished { .. }))
        .map(|(seq, _)| seq)
        .collect();
    assert_eq!(finished.len(), 1, "the action ran once");
    state.ack(finished[0]);
    let (_, body) = post(router, "/mcp", &headers(BEARER), &request).await;
    let (is_error, text) = result_text(&body);
    assert!(!is_error && text.contains("hello"), "{body}");
}

#[tokio::test]
async fn tools_list_offers_only_the_profile_tools() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(dir.path());
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let (status, body) = post(super::router(state), "/mcp", &headers(BEARER), &request).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Read", "FindFiles", "SearchText", "RunCommand"]);
}

/// Issue 23/6: a sub-session's call runs only on the gateway's explicit `Approved`: a refusal
/// (the sub-session was stopped meanwhile), an ack without a verdict, or a gateway too old to
/// give verdicts run nothing.
#[tokio::test]
async fn a_delegated_call_runs_only_on_an_approved_verdict() {
    use common::protocol::Verdict;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.txt");
    std::fs::write(&file, "hello\n").unwrap();
    let state = crate::test_support::delegated_state(dir.path());
    let router = super::router(state.clone());
    let args = json!({"file_path": file.display().to_string()});
    // Linked at an older protocol: refused before anything is asked.
    let (is_error, text) =
        result_text(&run_tool(&router, call(Some("toolu_old"), "Read", args.clone())).await);
    assert!(is_error && text.contains("protocol 0"), "{text}");
    state.set_link_version(common::protocol::PROTOCOL_VERSION);

    let answers = [
        (
            "toolu_refused",
            Some(Verdict::Refused {
                reason: "the sub-session has ended".into(),
            }),
            "the gateway refused this call: the sub-session has ended",
        ),
        (
            "toolu_bare_ack",
            None,
            "acknowledged it without approving it",
        ),
    ];
    for (tool_use_id, verdict, words) in answers {
        let pending = tokio::spawn({
            let router = router.clone();
            let request = call(Some(tool_use_id), "Read", args.clone());
            async move { run_tool(&router, request).await }
        });
        let seq = wait_delegated(&state, tool_use_id).await;
        if let Some(verdict) = verdict {
            state.record_verdict(seq, verdict);
        }
        state.ack(seq);
        let (is_error, text) = result_text(&pending.await.unwrap());
        assert!(is_error && text.contains(words), "{tool_use_id}: {text}");
    }
    assert_eq!(
        count(&state, |e| matches!(e, BrokerEvent::ActionFinished { .. })),
        0,
        "nothing ran"
    );

    let pending = tokio::spawn({
        let router = router.clone();
        let request = call(Some("toolu_ok"), "Read", args.clone());
        async move { run_tool(&router, request).await }
    });
    let seq = wait_delegated(&state, "toolu_ok").await;
    state.record_verdict(seq, Verdict::Approved);
    state.ack(seq);
    let finished = loop {
        let found: Vec<u64> = state
            .events_after(seq)
            .into_iter()
            .filter(|(_, e)| matches!(e, BrokerEvent::ActionFinished { .. }))
            .map(|(s, _)| s)
            .collect();
        if let Some(s) = found.first() {
            break *s;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    state.ack(finished);
    let (is_error, text) = result_text(&pending.await.unwrap());
    assert!(!is_error && text.contains("hello"), "{text}");
}

/// The sequence number of the `DelegatedCall` event for `tool_use_id`, once queued.
async fn wait_delegated(state: &crate::state::BrokerState, tool_use_id: &str) -> u64 {
    for _ in 0..250 {
        let found = state.events_after(0).into_iter().find(|(_, e)| {
            matches!(e, BrokerEvent::DelegatedCall { tool_use_id: t, .. } if t == tool_use_id)
        });
        if let Some((seq, _)) = found {
            return seq;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("no DelegatedCall for {tool_use_id}");
}

/// Issue 23/6: a call whose event the link could not carry never reaches it: the MCP endpoint
/// bounds request bodies (4 MiB) well under the frame limit, and the executor checks the event's
/// frame before queuing it anyway.
#[tokio::test]
async fn a_delegated_call_too_large_for_the_link_never_reaches_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = crate::test_support::delegated_state(dir.path());
    state.set_link_version(common::protocol::PROTOCOL_VERSION);
    let router = super::router(state.clone());
    // Quotes double when escaped: the event's frame would be over the limit.
    let path = "\"".repeat(common::codec::MAX_FRAME_BYTES / 2 + 1);
    let request = call(Some("toolu_big"), "Read", json!({"file_path": path}));
    let (status, body) = post(router, "/mcp", &headers(BEARER), &request).await;
    assert_eq!(status, http::StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(state.events_after(0).is_empty(), "nothing was queued");
}

#[tokio::test]
async fn the_gateways_own_tools_are_answered_from_their_release_and_never_run_here() {
    let dir = tempfile::tempdir().unwrap();
    let state = state(dir.path());
    let router = super::router(state.clone());
    let args = json!({"subsession_id": "ds_1"});
    let carried_out = common::tools::ActionOutcome {
        status: common::tools::ToolStatus::Ok,
        output: "{\"status\": \"running\"}".into(),
        truncated: false,
        error_code: None,
        receipt: common::tools::Receipt {
            action_id: "act_get".into(),
            ..Default::default()
        },
    };
    let gateway_call = |action_id: &str, name: &str, outcome| ApprovedCall {
        action_id: action_id.into(),
        call_index: 0,
        name: name.into(),
        arguments: args.clone(),
        outcome,
    };
    state.release_reply(ReplyRelease {
        turn_id: "turn_1".into(),
        fingerprint: "f1".into(),
        text: String::new(),
        calls: vec![
            gateway_call("act_get", "deepseek_subagent_get", Some(carried_out)),
            gateway_call("act_stop", "deepseek_subagent_stop", None),
        ],
    });
    // With its outcome: answered from it at once, nothing reported (the gateway has it).
    let get = call(Some("toolu_act_get"), "deepseek_subagent_get", args.clone());
    let (is_error, text) = result_text(&run_tool(&router, get).await);
    assert!(!is_error && text.contains("running"), "{text}");
    assert_eq!(state.events_after(0).len(), 0);
    // Without it (a release no gateway of this build sends): nothing runs, the refusal is
    // reported like any outcome and reaches the runner once recorded.
    let stop = call(
        Some("toolu_act_stop"),
        "deepseek_subagent_stop",
        args.clone(),
    );
    let pending = tokio::spawn(post(router.clone(), "/mcp", &headers(BEARER), &stop));
    let seq = loop {
        if let Some((seq, BrokerEvent::ActionFinished { outcome, .. })) =
            state.events_after(0).into_iter().next()
        {
            assert_eq!(outcome.status, common::tools::ToolStatus::Error);
            assert_eq!(
                outcome.error_code,
                Some(common::outcome::OutcomeCode::Internal)
            );
            break seq;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    state.ack(seq);
    let (is_error, text) = result_text(&pending.await.unwrap().1);
    assert!(
        is_error && text.contains("came without its outcome"),
        "{text}"
    );
}
