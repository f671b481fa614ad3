//! Answers from a hostile endpoint (issue 23/6): every malformed stream or message fails with
//! what is wrong, the key in every recognised form fails it, another model or a refusal fails
//! it, and what passes is re-emitted from what was parsed.

use serde_json::{Value, json};

use super::{Expected, Rejected, check, holds_key};

const KEY: &str = "sk-0123456789abcdef0123456789abcdef";
const MODEL: &str = "deepseek-flash";
const SSE: &str = "text/event-stream";

fn expected(streaming: bool) -> Expected<'static> {
    Expected {
        streaming,
        model: MODEL,
        key: Some(KEY),
    }
}

fn start(model: &str) -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
        "role": "assistant", "model": model, "content": [], "stop_reason": null,
        "usage": {"input_tokens": 1, "output_tokens": 1}}})
}

fn text_block(index: u64, pieces: &[&str]) -> Vec<Value> {
    let mut events = vec![json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "text", "text": ""}})];
    for piece in pieces {
        events.push(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "text_delta", "text": piece}}));
    }
    events.push(json!({"type": "content_block_stop", "index": index}));
    events
}

fn tool_block(index: u64, json_pieces: &[&str]) -> Vec<Value> {
    let mut events = vec![json!({"type": "content_block_start", "index": index,
        "content_block": {"type": "tool_use", "id": "toolu_1", "name": "mcp__gw__Write",
        "input": {}}})];
    for piece in json_pieces {
        events.push(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": piece}}));
    }
    events.push(json!({"type": "content_block_stop", "index": index}));
    events
}

fn end(stop_reason: &str) -> Vec<Value> {
    vec![
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason,
            "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ]
}

/// A stream of `events`, each as `event:` and `data:` lines.
fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

fn message(blocks: &[Vec<Value>], stop_reason: &str) -> Vec<Value> {
    let mut events = vec![start(MODEL)];
    for block in blocks {
        events.extend(block.iter().cloned());
    }
    events.extend(end(stop_reason));
    events
}

fn json_message(model: &str, content: Value, stop_reason: Value) -> String {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason, "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1}})
    .to_string()
}

fn malformed(content_type: &str, body: &str, streaming: bool) -> String {
    match check(content_type, body, &expected(streaming)) {
        Err(Rejected::Malformed(why)) => why,
        other => panic!("expected a malformed answer, got {other:?} for {body}"),
    }
}

#[test]
fn a_whole_stream_passes_re_emitted_from_what_was_parsed() {
    let events = message(
        &[
            text_block(0, &["Hel", "lo"]),
            tool_block(1, &["{\"a\":", "1}"]),
        ],
        "tool_use",
    );
    // Comments, ids, CRLF line ends, a ping and data without its own event line pass;
    // only the parsed events go on.
    let mut body = String::from(": a comment the runner never sees\r\n\r\n");
    for (n, event) in events.iter().enumerate() {
        if n == 1 {
            body.push_str("event: ping\r\ndata: {\"type\":\"ping\"}\r\n\r\n");
        }
        body.push_str(&format!("id: {n}\r\ndata: {event}\r\n\r\n"));
    }
    let out = check("text/event-stream; charset=utf-8", &body, &expected(true)).unwrap();
    assert!(!out.contains("comment"), "{out}");
    let back: Vec<Value> = out
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| serde_json::from_str(e.split_once("data: ").unwrap().1).unwrap())
        .collect();
    assert_eq!(back.len(), events.len() + 1);
    assert_eq!(back[0], events[0]);
    assert_eq!(back[1]["type"], "ping");
    assert_eq!(back[2..], events[1..]);
    // A JSON answer to a JSON request.
    let body = json_message(
        MODEL,
        json!([{"type": "text", "text": "hi"}]),
        json!("end_turn"),
    );
    let out = check("application/json", &body, &expected(false)).unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        serde_json::from_str::<Value>(&body).unwrap()
    );
}

#[test]
fn every_malformed_stream_fails_saying_what_is_wrong() {
    let ok = message(&[text_block(0, &["hi"])], "end_turn");
    let without = |n: usize| {
        let mut e = ok.clone();
        e.remove(n);
        e
    };
    let with = |n: usize, extra: Value| {
        let mut e = ok.clone();
        e.insert(n, extra);
        e
    };
    let mut bad_start = ok.clone();
    bad_start[0]["message"]
        .as_object_mut()
        .unwrap()
        .remove("usage");
    let mut no_model = ok.clone();
    no_model[0]["message"]
        .as_object_mut()
        .unwrap()
        .remove("model");
    let mut early_content = ok.clone();
    early_content[0]["message"]["content"] = json!([{"type": "text", "text": "x"}]);
    let mut skipped_index = ok.clone();
    for event in &mut skipped_index[1..4] {
        event["index"] = json!(1);
    }
    let mut wrong_delta = ok.clone();
    wrong_delta[2]["delta"] = json!({"type": "input_json_delta", "partial_json": "{}"});
    let mut unknown_block = ok.clone();
    unknown_block[1]["content_block"] = json!({"type": "server_tool_use", "id": "x"});
    let mut null_stop = ok.clone();
    null_stop[4]["delta"]["stop_reason"] = Value::Null;
    let mut odd_stop = ok.clone();
    odd_stop[4]["delta"]["stop_reason"] = json!("pause_everything");
    let cases: Vec<(Vec<Value>, &str)> = vec![
        (
            vec![json!({"type": "message_stop"})],
            "does not begin with message_start",
        ),
        (
            vec![start(MODEL), json!({"type": "message_stop"})],
            "stops without a message_delta",
        ),
        (vec![json!({"type": "message_start"})], "without a message"),
        (bad_start, "is not an assistant message"),
        (no_model, "names no model"),
        (early_content, "content outside content blocks"),
        (skipped_index, "opens a content block out of order"),
        (without(1), "delta for a block that is not open"),
        (wrong_delta, "does not fit its block"),
        (unknown_block, "content block of an unknown type"),
        (without(3), "message_delta out of order"),
        (with(5, ok[4].clone()), "message_delta out of order"),
        (
            with(6, json!({"type": "ping"})),
            "goes on after message_stop",
        ),
        (with(1, start(MODEL)), "a second message_start"),
        (with(2, json!({"type": "telemetry"})), "an unknown type"),
        (
            with(
                2,
                json!({"type": "error", "error": {"type": "overloaded_error"}}),
            ),
            "error event",
        ),
        (without(5), "broke off before its end"),
        (Vec::new(), "broke off before its end"),
        (null_stop, "has no stop_reason"),
        (odd_stop, "unknown stop_reason"),
        (
            message(&[tool_block(0, &["{\"a\":"])], "tool_use"),
            "input is not JSON",
        ),
        (
            message(&[tool_block(0, &["[1]"])], "tool_use"),
            "not an object",
        ),
    ];
    for (events, words) in cases {
        let why = malformed(SSE, &sse(&events), true);
        assert!(why.contains(words), "{words}: {why}");
    }
    // The framing itself.
    let framing = [
        ("data: {not json\n\n".to_string(), "data is not JSON"),
        ("data: [1]\n\n".to_string(), "without a type"),
        ("event: message_stop\n\n".to_string(), "without data"),
        (
            "event: ping\ndata: {\"type\":\"message_stop\"}\n\n".to_string(),
            "other than its data's type",
        ),
        ("garbage line\n\n".to_string(), "no event field"),
        (
            format!("{}data: {{\"type\":\"ping\"}}", sse(&ok[..5])),
            "broke off within an event",
        ),
    ];
    for (body, words) in framing {
        let why = malformed(SSE, &body, true);
        assert!(why.contains(words), "{words}: {why}");
    }
    // JSON answers: the required fields, and the kind the request asked for.
    let text = json!([{"type": "text", "text": "hi"}]);
    let json_cases = [
        (
            json_message(MODEL, text.clone(), Value::Null),
            "has no stop_reason",
        ),
        (json!({"type": "error"}).to_string(), "is not a message"),
        ("{".to_string(), "is not JSON"),
        (
            json_message(MODEL, json!([{"type": "text"}]), json!("end_turn")),
            "without its required fields",
        ),
        (
            json_message(
                MODEL,
                json!([{"type": "tool_use", "id": "t", "name": "n", "input": 1}]),
                json!("tool_use"),
            ),
            "without its required fields",
        ),
    ];
    for (body, words) in json_cases {
        let why = malformed("application/json", &body, false);
        assert!(why.contains(words), "{words}: {why}");
    }
    let body = json_message(MODEL, text, json!("end_turn"));
    assert!(malformed("application/json", &body, true).contains("asked for one"));
    assert!(malformed(SSE, &sse(&ok), false).contains("asked for one JSON message"));
}

#[test]
fn the_key_in_any_recognised_form_fails_the_answer() {
    let escaped: String = KEY
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    let (head, tail) = KEY.split_at(9);
    let spaced: String = KEY.chars().flat_map(|c| [c, ' ']).collect();
    let invisible: String = KEY.chars().flat_map(|c| [c, '\u{200b}']).collect();
    let hex: String = KEY.bytes().map(|b| format!("{b:02x}")).collect();
    let percent: String = KEY.bytes().map(|b| format!("%{b:02X}")).collect();
    use base64::Engine;
    let b64 =
        |prefix: &str| base64::engine::general_purpose::STANDARD.encode(format!("{prefix}{KEY}!"));
    let b64url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("xx{KEY}"));
    let text = |t: &str| message(&[text_block(0, &[t])], "end_turn");
    // Literal escapes in the decoded text: one more decoding gives the key.
    let twice: String = KEY
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    let xescaped: String = KEY.bytes().map(|b| format!("\\x{b:02x}")).collect();
    let entities: String = KEY.bytes().map(|b| format!("&#{b};")).collect();
    let hex_entities: String = KEY.bytes().map(|b| format!("&#x{b:x};")).collect();
    let streams: Vec<(&str, String)> = vec![
        ("plain", sse(&text(&format!("the key is {KEY}")))),
        // Escaped in the JSON of the frame: the raw bytes never hold it.
        (
            "escaped",
            sse(&text("X")).replace("\"text\":\"X\"", &format!("\"text\":\"{escaped}\"")),
        ),
        (
            "escaped s",
            sse(&text("X")).replace(
                "\"text\":\"X\"",
                &format!("\"text\":\"\\u0073{}\"", &KEY[1..]),
            ),
        ),
        (
            "split across deltas",
            sse(&message(&[text_block(0, &[head, tail])], "end_turn")),
        ),
        (
            "split across blocks",
            sse(&message(
                &[text_block(0, &[head]), text_block(1, &[tail])],
                "end_turn",
            )),
        ),
        (
            "escaped in a tool input split across deltas",
            sse(&message(
                &[tool_block(
                    0,
                    &["{\"content\":\"\\u00", &format!("73{}\"}}", &KEY[1..])],
                )],
                "tool_use",
            )),
        ),
        ("upper case", sse(&text(&KEY.to_uppercase()))),
        ("spaced", sse(&text(&spaced))),
        ("invisible characters between", sse(&text(&invisible))),
        ("hex", sse(&text(&hex))),
        ("percent-encoded", sse(&text(&percent))),
        ("base64", sse(&text(&b64("")))),
        ("base64 shifted by one", sse(&text(&b64("a")))),
        ("base64 shifted by two", sse(&text(&b64("ab")))),
        ("base64url", sse(&text(&b64url))),
        // Red team 41 6-B1: base32 (any alignment, either alphabet) and character codes.
        (
            "base32",
            sse(&text(&data_encoding::BASE32.encode(KEY.as_bytes()))),
        ),
        ("base32 shifted by three", {
            let shifted = data_encoding::BASE32.encode(format!("abc{KEY}").as_bytes());
            sse(&text(&shifted.to_lowercase()))
        }),
        ("base32hex shifted by one", {
            let shifted = data_encoding::BASE32HEX.encode(format!("a{KEY}").as_bytes());
            sse(&text(&shifted))
        }),
        ("decimal character codes", {
            let codes: Vec<String> = KEY.bytes().map(|b| b.to_string()).collect();
            sse(&text(&format!("[{}]", codes.join(", "))))
        }),
        // Issue 23/6, second attack: part of the key, and the key escaped once more.
        ("without its first character", sse(&text(&KEY[1..]))),
        (
            "without its last two characters",
            sse(&text(&KEY[..KEY.len() - 2])),
        ),
        ("hex without its first character", {
            let hex: String = KEY[1..].bytes().map(|b| format!("{b:02x}")).collect();
            sse(&text(&hex))
        }),
        ("escaped twice in a tool input", {
            let input = json!({"content": twice}).to_string();
            sse(&message(&[tool_block(0, &[&input])], "tool_use"))
        }),
        ("\\x escapes", sse(&text(&xescaped))),
        ("HTML entities", sse(&text(&entities))),
        ("HTML hex entities", sse(&text(&hex_entities))),
        ("as an object key", {
            let mut events = message(&[text_block(0, &["hi"])], "end_turn");
            events[4]["usage"][KEY] = json!(1);
            sse(&events)
        }),
        ("in the message id", {
            let mut events = text("hi");
            events[0]["message"]["id"] = json!(KEY);
            sse(&events)
        }),
    ];
    for (form, body) in streams {
        if form.starts_with("escaped") || form.starts_with("split") {
            assert!(!body.contains(KEY), "{form}: the raw bytes do not hold it");
        }
        assert_eq!(
            check(SSE, &body, &expected(true)),
            Err(Rejected::Key),
            "{form}: {body}"
        );
    }
    let body = json_message(
        MODEL,
        json!([{"type": "text", "text": "X"}]),
        json!("end_turn"),
    )
    .replace("\"X\"", &format!("\"{escaped}\""));
    assert_eq!(
        check("application/json", &body, &expected(false)),
        Err(Rejected::Key)
    );
    // Text that merely resembles it passes; a short key is matched exactly and by case only.
    let near = sse(&text("sk-0123456789ab and 56789abcdef012"));
    assert!(check(SSE, &near, &expected(true)).is_ok());
    // Red team 39: the key in two halves, reversed, or rot13 fails it.
    let rot13: String = KEY
        .chars()
        .map(|c| match c {
            'a'..='z' => (((c as u8 - b'a' + 13) % 26) + b'a') as char,
            c => c,
        })
        .collect();
    let reversed: String = KEY.chars().rev().collect();
    for form in [
        format!("A: {} B: {}", &KEY[..18], &KEY[18..]),
        reversed,
        rot13,
    ] {
        let body = sse(&text(&form));
        assert_eq!(
            check(SSE, &body, &expected(true)),
            Err(Rejected::Key),
            "{form}"
        );
    }
    // Too short a part of the key (under `max(16, n / 3)` of its characters) passes.
    let part = sse(&text(&format!("{} \\u0073 &amp; &#xZZ; \\q", &KEY[..15])));
    assert!(check(SSE, &part, &expected(true)).is_ok());
    assert_eq!(
        super::unescape("\\u0073\\x6b&#45;&#x30;&amp;&lt;&bogus;\\\\u0073"),
        "sk-0&<&bogus;\\u0073"
    );
    assert!(holds_key("a KEY here", "key"));
    assert!(!holds_key("k e y", "key"));
    assert!(!holds_key("anything", ""));
}

/// Red team 34 B3: the key in characters that read like its own — fullwidth, mathematical bold,
/// circled, Cyrillic and Greek look-alikes, mixed with ASCII and spaced out — is the key; other
/// text in those scripts is not.
#[test]
fn the_key_in_look_alike_letters_fails_the_answer() {
    let fullwidth: String = KEY
        .chars()
        .map(|c| match c {
            '!'..='~' => char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap(),
            other => other,
        })
        .collect();
    let bold: String = KEY
        .chars()
        .map(|c| match c {
            'a'..='z' => char::from_u32(c as u32 - 'a' as u32 + 0x1D41A).unwrap(),
            '0'..='9' => char::from_u32(c as u32 - '0' as u32 + 0x1D7CE).unwrap(),
            other => other,
        })
        .collect();
    let circled: String = KEY
        .chars()
        .map(|c| match c {
            'a'..='z' => char::from_u32(c as u32 - 'a' as u32 + 0x24D0).unwrap(),
            other => other,
        })
        .collect();
    // Cyrillic а, с, е, о, р, ѕ, х and Greek ο for their Latin twins.
    let cyrillic: String = KEY
        .chars()
        .map(|c| match c {
            'a' => 'а',
            'c' => 'с',
            'e' => 'е',
            'o' => 'ο',
            's' => 'ѕ',
            other => other,
        })
        .collect();
    assert_ne!(cyrillic, KEY, "the key has letters with look-alikes");
    let spaced: String = fullwidth.chars().flat_map(|c| [c, ' ']).collect();
    let tail: String = fullwidth.chars().skip(3).collect();
    for form in [&fullwidth, &bold, &circled, &cyrillic, &spaced, &tail] {
        assert!(holds_key(&format!("the key: {form}."), KEY), "{form}");
        let here = format!("here {form}");
        let body = sse(&message(&[text_block(0, &[&here])], "end_turn"));
        assert_eq!(
            check(SSE, &body, &expected(true)),
            Err(Rejected::Key),
            "{form}"
        );
    }
    for other in [
        "ｈｅｌｌｏ ｗｏｒｌｄ",
        "𝐝𝐞𝐞𝐩𝐬𝐞𝐞𝐤 𝐟𝐥𝐚𝐬𝐡",
        "привет, мир",
        "ⓢⓚ-ⓝⓞⓣ",
    ] {
        assert!(!holds_key(other, KEY), "{other}");
    }
}

#[test]
fn another_model_or_a_refusal_fails_the_answer() {
    for (answered, ok) in [
        (MODEL, true),
        ("deepseek-flash-2026-01-01", true),
        ("deepseek-flash@latest", true),
        ("DeepSeek-V4.1-Flash-1017", true),
        ("deepseek-v4-flash", true),
        ("deepseek-flashy", false),
        ("deepseek-v4-pro", false),
        ("deepseek-flash-pro", false),
        ("gpt-4o-deepseek-flash", false),
        ("claude-k-deepseek-flash", false),
        ("DEEPSEEK_FLASH", true),
        ("flash", false),
        ("other-flash", false),
        ("claude-sonnet-4-5", false),
        ("", false),
    ] {
        let mut events = message(&[text_block(0, &["hi"])], "end_turn");
        events[0] = start(answered);
        let result = check(SSE, &sse(&events), &expected(true));
        if ok {
            assert!(result.is_ok(), "{answered}: {result:?}");
        } else {
            assert_eq!(result, Err(Rejected::Model(answered.into())), "{answered}");
        }
        let body = json_message(
            answered,
            json!([{"type": "text", "text": "hi"}]),
            json!("end_turn"),
        );
        assert_eq!(
            check("application/json", &body, &expected(false)).is_ok(),
            ok,
            "{answered}"
        );
    }
    // An answer with nothing the runner can act on (it would re-send) fails once.
    let thinking = vec![
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "thinking", "thinking": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        json!({"type": "content_block_stop", "index": 0}),
    ];
    for events in [message(&[], "end_turn"), message(&[thinking], "end_turn")] {
        let why = malformed(SSE, &sse(&events), true);
        assert!(why.contains("has no text and no tool call"), "{why}");
    }
    let empty = json_message(MODEL, json!([]), json!("end_turn"));
    let why = malformed("application/json", &empty, false);
    assert!(why.contains("has no text and no tool call"), "{why}");
    let refusal = message(&[text_block(0, &["I will ", "not do that."])], "refusal");
    assert_eq!(
        check(SSE, &sse(&refusal), &expected(true)),
        Err(Rejected::Refusal("I will not do that.".into()))
    );
    let body = json_message(
        MODEL,
        json!([{"type": "text", "text": "No."}]),
        json!("refusal"),
    );
    assert_eq!(
        check("application/json", &body, &expected(false)),
        Err(Rejected::Refusal("No.".into()))
    );
}
