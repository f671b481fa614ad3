//! Tests of request classification and fingerprinting against real captured runner requests.

use super::*;

fn fixture(name: &str) -> (Value, HeaderMap) {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/claude-code-2.1.332/"
    );
    let body: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}{name}")).unwrap()).unwrap();
    let all: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{dir}messages_request_headers.json")).unwrap(),
    )
    .unwrap();
    let mut headers = HeaderMap::new();
    for pair in all[name]["headers"].as_array().unwrap() {
        let key = pair[0].as_str().unwrap().to_ascii_lowercase();
        headers.insert(
            http::HeaderName::from_bytes(key.as_bytes()).unwrap(),
            pair[1].as_str().unwrap().parse().unwrap(),
        );
    }
    (body, headers)
}

/// A request read on its own (no earlier request to reuse).
fn read(body: &Value) -> Request {
    request::read(Bytes::from(serde_json::to_vec(body).unwrap()), None)
        .unwrap()
        .0
}

#[test]
fn first_prompt_is_a_prompt_turn() {
    let (body, headers) = fixture("main_first_prompt.json");
    match classify(&read(&body), &headers) {
        RequestKind::MainLoop(TurnContent::Prompt { text }) => {
            assert_eq!(text, "Please USE_TOOL to read the hostname")
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn tool_result_request_carries_the_results() {
    let (body, headers) = fixture("main_tool_result.json");
    match classify(&read(&body), &headers) {
        RequestKind::MainLoop(TurnContent::ToolResults { results }) => {
            assert_eq!(results.len(), 1);
            assert_eq!(results[0].tool_use_id, "toolu_act1");
            assert!(!results[0].is_error);
            assert_eq!(results[0].text, "vm\n");
        }
        other => panic!("unexpected {other:?}"),
    }
    let (body, headers) = fixture("main_tool_result_is_error.json");
    match classify(&read(&body), &headers) {
        RequestKind::MainLoop(TurnContent::ToolResults { results }) => assert!(results[0].is_error),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn second_prompt_takes_only_new_user_content() {
    let (body, headers) = fixture("main_second_prompt.json");
    let RequestKind::MainLoop(TurnContent::Prompt { text }) = classify(&read(&body), &headers)
    else {
        panic!("not a prompt turn");
    };
    let last = body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(text, text_of(&last["content"]));
    assert!(
        !text.contains("USE_TOOL"),
        "history leaked into the prompt: {text}"
    );
}

#[test]
fn side_requests_are_recognised() {
    for (name, purpose) in [
        ("side_prompt_suggestion.json", "prompt_suggestion"),
        ("side_compact_summary.json", "compact_summary"),
        ("side_compact_summary_retry.json", "compact_summary"),
    ] {
        let (body, headers) = fixture(name);
        assert_eq!(
            classify(&read(&body), &headers),
            RequestKind::Side(purpose),
            "{name}"
        );
    }
    let (body, headers) = fixture("main_first_prompt_mcp_failed.json");
    assert_eq!(
        classify(&read(&body), &headers),
        RequestKind::Side("no_gateway_tools")
    );
}

#[test]
fn fingerprint_ignores_cache_markers_but_not_content() {
    let (body, _) = fixture("main_tool_result.json");
    let mut moved = body.clone();
    moved["messages"][3]["content"][0]
        .as_object_mut()
        .unwrap()
        .remove("cache_control");
    assert_eq!(read(&body).fingerprint, read(&moved).fingerprint);
    let mut changed = body.clone();
    changed["messages"][0]["content"] = json!("something else");
    assert_ne!(read(&body).fingerprint, read(&changed).fingerprint);
}

#[test]
fn reply_becomes_text_then_tool_use_blocks() {
    let reply = ReplyRelease {
        turn_id: "turn_1".into(),
        fingerprint: "f".into(),
        text: "Reading.".into(),
        calls: vec![common::protocol::ApprovedCall {
            action_id: "act_9".into(),
            call_index: 0,
            name: "Read".into(),
            arguments: json!({"file_path": "/etc/hostname"}),
            outcome: None,
        }],
    };
    let answer = Answer {
        streaming: false,
        model: "m".into(),
        input_tokens: 10,
    };
    let message = answer.message_json(&reply);
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["content"][0],
        json!({"type": "text", "text": "Reading."})
    );
    assert_eq!(message["content"][1]["id"], "toolu_act_9");
    assert_eq!(message["content"][1]["name"], "mcp__gw__Read");
    let events = answer.stream_events(&reply);
    assert_eq!(events.len(), 3 * 2 + 2);
}

#[tokio::test]
async fn a_retried_request_attaches_to_the_same_turn() {
    let dir = tempfile::tempdir().unwrap();
    let state = crate::test_support::state(dir.path());
    let router = router(state.clone());
    let (body, _) = fixture("main_first_prompt.json");
    let mut body = body;
    body["stream"] = json!(false);
    let headers = [("x-api-key", crate::test_support::RUNNER_TOKEN)];
    let first = tokio::spawn(crate::test_support::post(
        router.clone(),
        "/v1/messages",
        &headers,
        &body,
    ));
    let retry = tokio::spawn(crate::test_support::post(
        router.clone(),
        "/v1/messages",
        &headers,
        &body,
    ));
    let fingerprint = loop {
        let turns: Vec<String> = state
            .events_after(0)
            .into_iter()
            .filter_map(|(_, e)| match e {
                BrokerEvent::TurnRequested(t) => Some(t.fingerprint),
                _ => None,
            })
            .collect();
        if !turns.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            assert_eq!(
                state
                    .events_after(0)
                    .iter()
                    .filter(|(_, e)| matches!(e, BrokerEvent::TurnRequested(_)))
                    .count(),
                1
            );
            break turns[0].clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    state.release_reply(ReplyRelease {
        turn_id: "turn_1".into(),
        fingerprint,
        text: "Hello from ChatGPT".into(),
        calls: Vec::new(),
    });
    for response in [first.await.unwrap(), retry.await.unwrap()] {
        assert_eq!(response.0, 200);
        let message: Value = serde_json::from_str(&response.1).unwrap();
        assert_eq!(message["content"][0]["text"], "Hello from ChatGPT");
        assert_eq!(message["stop_reason"], "end_turn");
    }
    // A third attempt after the answer gets the recorded reply at once.
    let (status, text) = crate::test_support::post(router, "/v1/messages", &headers, &body).await;
    assert_eq!(status, 200);
    assert!(text.contains("Hello from ChatGPT"));
}

#[tokio::test]
async fn wrong_api_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = crate::test_support::state(dir.path());
    let (body, _) = fixture("main_first_prompt.json");
    let (status, text) = crate::test_support::post(
        router(state.clone()),
        "/v1/messages",
        &[("x-api-key", "sk-ant-real")],
        &body,
    )
    .await;
    assert_eq!(status, 401);
    assert!(text.contains("authentication_error"));
    assert!(state.events_after(0).is_empty());
}
