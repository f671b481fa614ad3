//! Property tests of the bridge's reading of the runner's requests and of the answers it writes
//! (JSON and SSE): no panic on any request shape, bounded forwarded text, and answers that are
//! well-formed for any reply. `PROPTEST_CASES` sets the number of cases.

use proptest::prelude::*;

use super::*;

/// JSON shaped like a runner request: messages with roles and content blocks, tools, noise.
fn request() -> impl Strategy<Value = Value> {
    let text = prop_oneof![
        ".{0,60}",
        Just("[SUGGESTION MODE: x".to_string()),
        Just("CRITICAL: Respond with TEXT ONLY".to_string()),
    ];
    let block = prop_oneof![
        text.clone().prop_map(|t| json!({"type": "text", "text": t})),
        (".{0,20}", any::<bool>(), text.clone()).prop_map(|(id, e, t)| json!(
            {"type": "tool_result", "tool_use_id": id, "is_error": e, "content": t}
        )),
        (".{0,20}", text.clone()).prop_map(|(id, t)| json!(
            {"type": "tool_result", "tool_use_id": id, "content": [{"type": "text", "text": t}, {"type": "image"}]}
        )),
        Just(json!({"type": 7})),
        Just(json!(null)),
        Just(json!({"content": {"nested": true}})),
    ];
    let content = prop_oneof![
        text.prop_map(Value::String),
        prop::collection::vec(block, 0..5).prop_map(Value::Array),
        Just(json!(42)),
        Just(Value::Null),
    ];
    let role = prop_oneof![
        Just(json!("user")),
        Just(json!("assistant")),
        Just(json!("system")),
        Just(json!(3)),
    ];
    let message = prop_oneof![
        (role, content).prop_map(|(r, c)| json!({"role": r, "content": c})),
        Just(json!("not an object")),
        Just(json!({})),
    ];
    let tool = prop_oneof![
        Just(json!({"name": format!("{RUNNER_TOOL_PREFIX}Read")})),
        Just(json!({"name": "Bash"})),
        Just(json!({"name": 1})),
        Just(json!(null)),
    ];
    (
        prop::collection::vec(message, 0..6),
        prop::collection::vec(tool, 0..3),
        any::<bool>(),
    )
        .prop_map(|(messages, tools, tools_as_array)| {
            let tools = if tools_as_array {
                Value::Array(tools)
            } else {
                json!({"not": "an array"})
            };
            json!({"model": "m", "messages": messages, "tools": tools, "stream": true})
        })
}

fn reply() -> impl Strategy<Value = ReplyRelease> {
    let arguments = prop_oneof![
        Just(json!({})),
        ".{0,40}".prop_map(|s| json!({"file_path": s})),
        (any::<i64>(), any::<f64>())
            .prop_map(|(i, f)| json!({"n": i, "f": f, "list": [null, "\r\n"]})),
    ];
    (
        ".{0,200}",
        prop::collection::vec((".{0,30}", any::<u32>(), ".{0,20}", arguments), 0..4),
    )
        .prop_map(|(text, calls)| ReplyRelease {
            turn_id: "turn_1".into(),
            fingerprint: "f".into(),
            text,
            calls: calls
                .into_iter()
                .map(
                    |(action_id, call_index, name, arguments)| common::protocol::ApprovedCall {
                        action_id,
                        call_index,
                        name,
                        arguments,
                        outcome: None,
                    },
                )
                .collect(),
        })
}

proptest! {
    /// Any request: a kind, never a panic; forwarded text stays within its bound.
    #[test]
    fn classify_never_panics_and_bounds_text(body in request(), fallback in any::<bool>()) {
        let mut headers = HeaderMap::new();
        if fallback {
            headers.insert("anthropic-beta", http::HeaderValue::from_static("fallback-credit-1"));
        }
        let suffix = "\n[truncated by the gateway]".len();
        let Ok((read, _)) = request::read(Bytes::from(body.to_string()), None) else {
            return Err(TestCaseError::fail(format!("a JSON object was refused: {body}")));
        };
        match classify(&read, &headers) {
            RequestKind::MainLoop(TurnContent::Prompt { text }) => {
                prop_assert!(text.len() <= MAX_FORWARDED_TEXT + suffix);
            }
            RequestKind::MainLoop(TurnContent::ToolResults { results }) => {
                for r in results {
                    prop_assert!(r.text.len() <= MAX_FORWARDED_RESULT_TEXT + suffix);
                }
            }
            _ => {}
        }
    }

    /// Any bytes at all (the reader scans them without parsing): a request or NotJson, never a
    /// panic; valid JSON of any kind is never refused.
    #[test]
    fn reading_any_bytes_never_panics(raw in prop::collection::vec(any::<u8>(), 0..300), s in ".{0,200}") {
        let _ = request::read(Bytes::from(raw), None);
        let valid = serde_json::from_str::<Value>(&s).is_ok();
        let read = request::read(Bytes::from(s.clone()), None);
        if valid {
            prop_assert!(read.is_ok(), "valid JSON refused: {s:?}");
        }
    }

    /// The fingerprint read with the previous request's memo is the one read from scratch, for a
    /// next request that extends, cuts, edits or reformats the previous one's messages.
    #[test]
    fn a_memo_never_changes_the_fingerprint(first in request(), second in request(), cut in 0usize..6, pretty in any::<bool>()) {
        let mut next = first.clone();
        if let (Some(mine), Some(more)) = (
            next.get_mut("messages").and_then(Value::as_array_mut),
            second.get("messages").and_then(Value::as_array),
        ) {
            let keep = mine.len().saturating_sub(cut);
            mine.truncate(keep);
            mine.extend(more.iter().cloned());
        }
        let text = |v: &Value| if pretty {
            serde_json::to_string_pretty(v).unwrap_or_default()
        } else {
            v.to_string()
        };
        let (Ok((_, memo)), Ok((fresh, _))) = (
            request::read(Bytes::from(first.to_string()), None),
            request::read(Bytes::from(text(&next)), None),
        ) else {
            return Err(TestCaseError::fail("a JSON object was refused"));
        };
        let Ok((resumed, _)) = request::read(Bytes::from(text(&next)), Some(memo)) else {
            return Err(TestCaseError::fail("refused with a memo"));
        };
        prop_assert_eq!(resumed.fingerprint, fresh.fingerprint);
        prop_assert_eq!(resumed.tail, fresh.tail);
    }

    /// Clipping cuts on a character boundary, keeps a prefix, and marks what it cut.
    #[test]
    fn clip_keeps_a_marked_prefix(text in ".{0,100}", max in 0usize..120) {
        let clipped = clip_to(text.clone(), max);
        if text.len() <= max {
            prop_assert_eq!(clipped, text);
        } else {
            let kept = clipped.strip_suffix("\n[truncated by the gateway]").unwrap_or("");
            prop_assert!(kept.len() <= max);
            prop_assert!(text.starts_with(kept));
        }
    }

    /// Any reply: the JSON answer and every SSE event are well-formed and one line each.
    #[test]
    fn answers_are_well_formed_for_any_reply(reply in reply()) {
        let answer = Answer { streaming: true, model: "m".into(), input_tokens: 1 };
        let message = answer.message_json(&reply);
        let blocks = message["content"].as_array().map_or(0, Vec::len);
        prop_assert_eq!(blocks, Answer::content_blocks(&reply).len());
        let events = answer.stream_events(&reply);
        prop_assert_eq!(events.len(), blocks * 3 + 2);
        for block in Answer::content_blocks(&reply) {
            let data = block.to_string();
            prop_assert!(!data.contains('\n') && !data.contains('\r'));
        }
    }
}
