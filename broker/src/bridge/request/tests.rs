//! Tests of the request reader: its fingerprint equals the whole-body canonical hash, however
//! much of it came from the previous request, and odd bodies neither panic nor pass as JSON.

use super::*;
use serde_json::json;

/// The fingerprint by definition: canonical JSON of `messages` (null if absent), no markers.
fn reference(body: &[u8]) -> String {
    let value: Value = serde_json::from_slice(body).unwrap();
    common::hash::canonical_sha256_without(
        value.get("messages").unwrap_or(&Value::Null),
        UNHASHED_KEYS,
    )
}

/// A conversation of `turns` tool turns, the runner's cache marker on its last message.
fn conversation(turns: usize) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "Read \"a\\b\" then é ✓"})];
    for i in 0..turns {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("step {i}")},
            {"type": "tool_use", "id": format!("toolu_{i}"), "name": "mcp__gw__Read",
             "input": {"file_path": "/x", "offset": i, "ratio": 0.5, "flags": [true, null]}},
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i}"),
             "content": [{"type": "text", "text": format!("line {i}\n{{\"}}]")}]},
        ]}));
    }
    if let Some(Value::Array(blocks)) = messages.last_mut().map(|m| &mut m["content"]) {
        blocks[0]["cache_control"] = json!({"type": "ephemeral"});
    }
    json!({"model": "m", "messages": messages, "system": [{"type": "text", "text": "s"}],
           "tools": [{"name": "mcp__gw__Read", "input_schema": {}}], "stream": true})
}

#[test]
fn a_growing_conversation_hashes_only_its_new_messages() {
    let mut memo = None;
    for turns in 0..40 {
        let body = serde_json::to_vec(&conversation(turns)).unwrap();
        let (request, next) = read(Bytes::from(body.clone()), memo).unwrap();
        assert_eq!(request.fingerprint, reference(&body), "turn {turns}");
        assert!(request.stream);
        assert_eq!(request.model.as_deref(), Some("m"));
        assert_eq!(request.tool_names, ["mcp__gw__Read"]);
        assert_eq!(request.tail.len(), 1);
        if turns > 0 {
            // The new assistant and user messages, and the one that lost its cache marker.
            assert!(request.hashed_messages <= 3, "{}", request.hashed_messages);
        }
        memo = Some(next);
    }
}

#[test]
fn a_retry_hashes_nothing_and_gets_the_same_fingerprint() {
    let body = Bytes::from(serde_json::to_vec(&conversation(5)).unwrap());
    let (first, memo) = read(body.clone(), None).unwrap();
    let (retry, _) = read(body, Some(memo)).unwrap();
    assert_eq!(first.fingerprint, retry.fingerprint);
    assert_eq!(retry.hashed_messages, 0);
    assert_eq!(first.tail, retry.tail);
}

#[test]
fn a_resumed_runner_that_writes_keys_otherwise_gets_the_same_fingerprint() {
    let value = conversation(3);
    let compact = serde_json::to_vec(&value).unwrap();
    let pretty = serde_json::to_vec_pretty(&value).unwrap();
    let (a, memo) = read(Bytes::from(compact), None).unwrap();
    let (b, _) = read(Bytes::from(pretty.clone()), Some(memo)).unwrap();
    assert_eq!(a.fingerprint, b.fingerprint);
    assert_eq!(b.fingerprint, reference(&pretty));
    // Reversed key order inside a message.
    let reordered = br#"{"messages":[{"content":"hi","role":"user"}]}"#;
    let ordered = br#"{"messages":[{"role":"user","content":"hi"}]}"#;
    assert_eq!(
        read(Bytes::from_static(reordered), None)
            .unwrap()
            .0
            .fingerprint,
        read(Bytes::from_static(ordered), None)
            .unwrap()
            .0
            .fingerprint
    );
}

#[test]
fn an_earlier_message_changed_in_place_changes_the_fingerprint() {
    let body = serde_json::to_vec(&conversation(6)).unwrap();
    let (first, memo) = read(Bytes::from(body.clone()), None).unwrap();
    let text = String::from_utf8(body)
        .unwrap()
        .replacen("step 1", "step 9", 1);
    let (changed, _) = read(Bytes::from(text.clone()), Some(memo)).unwrap();
    assert_ne!(first.fingerprint, changed.fingerprint);
    assert_eq!(changed.fingerprint, reference(text.as_bytes()));
}

#[test]
fn odd_bodies_read_like_their_parsed_json() {
    let valid: &[&str] = &[
        "{}",
        " { } ",
        "[]",
        "5",
        r#"{"messages": null}"#,
        r#"{"messages": []}"#,
        r#"{"messages": [ ] , "stream": false}"#,
        r#"{"messages": [1, "two", [3], {"role": "assistant"}]}"#,
        r#"{"mess\u0061ges": [{"role": "user", "content": "x"}]}"#,
        r#"{"messages": [{"role": "user"}], "messages": {"a": 1}}"#,
        r#"{"messages": {"a": 1}, "messages": [{"role": "user"}]}"#,
        r#"{"tools": 3, "model": 7, "stream": "yes", "messages": [{"a": "\"]}"}]}"#,
    ];
    for body in valid {
        let (request, _) = read(Bytes::from_static(body.as_bytes()), None)
            .unwrap_or_else(|_| panic!("{body} refused"));
        assert_eq!(request.fingerprint, reference(body.as_bytes()), "{body}");
    }
    let invalid: &[&str] = &[
        "",
        "{",
        r#"{"messages": ["#,
        r#"{"messages": [{"role": "user"}"#,
        r#"{"messages": [{"role": "user"} {"role": "user"}]}"#,
        r#"{"messages": [{"role": "us"#,
        r#"{"messages": [{"role": "user"}]} trailing"#,
        r#"{"messages" [1]}"#,
        r#"{"stream": tru"#,
        r#"{"a": "\"#,
        "{\"messages\": [{\"a\": 1]}",
    ];
    for body in invalid {
        assert!(
            read(Bytes::from_static(body.as_bytes()), None).is_err(),
            "{body} read as JSON"
        );
    }
}

#[test]
fn a_scalar_message_that_grows_is_not_reused() {
    let (_, memo) = read(Bytes::from_static(br#"{"messages":[12]}"#), None).unwrap();
    let body = br#"{"messages":[123]}"#;
    let (request, _) = read(Bytes::from_static(body), Some(memo)).unwrap();
    assert_eq!(request.fingerprint, reference(body));
}

#[test]
fn the_tail_is_what_follows_the_last_assistant_message() {
    let body = br#"{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},
        {"role":"system","content":[]},{"role":"user","content":"c"}]}"#;
    let (request, _) = read(Bytes::from_static(body), None).unwrap();
    assert_eq!(request.tail.len(), 2);
    assert_eq!(request.tail[1]["content"], "c");
}
