//! Property tests of the parsers in `common` that read what others send: the broker link's frame
//! codec and messages, logical-tool arguments, and SKILL.md files. Properties: no panic on any
//! input, refusals are typed errors, round trips where there is an encoder. `PROPTEST_CASES`
//! sets the number of cases (proptest's default in CI; `scripts/fuzz` runs many more).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::BytesMut;
use common::codec::{decode, encode, frame_codec};
use common::protocol::{ApprovedCall, BrokerToGateway, GatewayToBroker, ReplyRelease};
use common::tools::LogicalTool;
use proptest::prelude::*;
use serde_json::Value;
use tokio_util::codec::{Decoder, Encoder};

/// Any JSON value, a few levels deep, with keys that sometimes hit real field names.
fn json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("file_path".to_string()),
        Just("path".to_string()),
        Just("pattern".to_string()),
        Just("query".to_string()),
        Just("command".to_string()),
        Just("content".to_string()),
        Just("old_string".to_string()),
        Just("new_string".to_string()),
        Just("offset".to_string()),
        Just("limit".to_string()),
        Just("type".to_string()),
        ".{0,12}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,40}".prop_map(Value::String),
        Just(Value::String("/tmp/x".into())),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Any bytes fed to the frame codec in any chunking: frames or a typed error, never a panic,
    /// and no frame longer than the codec's limit.
    #[test]
    fn frame_codec_never_panics(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..8)) {
        let mut codec = frame_codec();
        let mut buf = BytesMut::new();
        for chunk in chunks {
            buf.extend_from_slice(&chunk);
            while let Ok(Some(frame)) = codec.decode(&mut buf) {
                let _ = decode::<GatewayToBroker>(&frame);
                let _ = decode::<BrokerToGateway>(&frame);
            }
        }
    }

    /// Any bytes as one frame's payload: a message or a typed error.
    #[test]
    fn message_decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let frame = BytesMut::from(&bytes[..]);
        let _ = decode::<GatewayToBroker>(&frame);
        let _ = decode::<BrokerToGateway>(&frame);
    }

    /// Any JSON as a message: a message or a typed error.
    #[test]
    fn message_decode_of_json_never_panics(value in json()) {
        let frame = BytesMut::from(value.to_string().as_bytes());
        let _ = decode::<GatewayToBroker>(&frame);
        let _ = decode::<BrokerToGateway>(&frame);
    }

    /// A reply goes through encode, the frame codec and decode unchanged.
    #[test]
    fn reply_release_round_trips(
        turn_id in ".{0,40}",
        fingerprint in "[0-9a-f]{0,64}",
        text in ".{0,200}",
        calls in prop::collection::vec((".{0,20}", any::<u32>(), ".{0,12}", json()), 0..4),
    ) {
        let reply = ReplyRelease {
            turn_id,
            fingerprint,
            text,
            calls: calls
                .into_iter()
                .map(|(action_id, call_index, name, arguments)| ApprovedCall {
                    action_id,
                    call_index,
                    name,
                    arguments,
                    outcome: None,
                })
                .collect(),
        };
        let payload = encode(&reply).unwrap();
        let mut codec = frame_codec();
        let mut wire = BytesMut::new();
        codec.encode(payload, &mut wire).unwrap();
        let frame = codec.decode(&mut wire).unwrap().unwrap();
        let back: ReplyRelease = decode(&frame).unwrap();
        // Floats may not survive JSON exactly; compare through JSON text.
        prop_assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&reply).unwrap()
        );
    }

    /// Any JSON as the arguments of any logical tool: parsed arguments or a typed refusal.
    #[test]
    fn tool_arguments_never_panic(value in json()) {
        for tool in LogicalTool::ALL {
            let _ = tool.parse_args(&value);
        }
    }

    /// Any bytes as a SKILL.md: a skill or a typed refusal; normalising is idempotent.
    #[test]
    fn skill_files_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let _ = common::skills::parse_skill_file(&bytes);
        let once = common::skills::normalise(&bytes);
        prop_assert_eq!(common::skills::normalise(&once), once);
    }

    /// Front matter shaped like the real thing, with arbitrary lines inside.
    #[test]
    fn skill_front_matter_never_panics(
        lines in prop::collection::vec(prop_oneof![
            "name: .{0,30}",
            "description: .{0,60}",
            "[a-z-]{1,12}: .{0,20}",
            "  - .{0,20}",
            ".{0,30}",
        ], 0..8),
        crlf in any::<bool>(),
        bom in any::<bool>(),
        body in ".{0,80}",
    ) {
        let eol = if crlf { "\r\n" } else { "\n" };
        let mut text = String::new();
        if bom {
            text.push('\u{feff}');
        }
        text.push_str("---");
        text.push_str(eol);
        for line in lines {
            text.push_str(&line);
            text.push_str(eol);
        }
        text.push_str("---");
        text.push_str(eol);
        text.push_str(&body);
        let _ = common::skills::parse_skill_file(text.as_bytes());
    }
}

/// Regression (found by `reply_release_round_trips`): without serde_json's exact float parsing a
/// float in approved arguments came back from the link one ULP off.
#[test]
fn a_float_in_arguments_crosses_the_link_exactly() {
    let value: Value = serde_json::from_str("[-6.4863047023158704e-223]").unwrap();
    let reply = ReplyRelease {
        turn_id: String::new(),
        fingerprint: String::new(),
        text: String::new(),
        calls: vec![ApprovedCall {
            action_id: String::new(),
            call_index: 0,
            name: String::new(),
            arguments: Value::Array(vec![Value::from(-6.486_304_702_315_870_4e-223)]),
            outcome: None,
        }],
    };
    let frame = BytesMut::from(&encode(&reply).unwrap()[..]);
    let back: ReplyRelease = decode(&frame).unwrap();
    assert_eq!(back, reply);
    assert_eq!(value, reply.calls[0].arguments);
}
