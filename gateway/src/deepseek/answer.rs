//! What a 2xx DeepSeek answer must be before anything of it reaches the runner. The answer is
//! parsed whole (an event stream event by event, or one JSON message), checked as a state
//! machine (`message_start` first with a message object, content blocks opened, filled and
//! closed in order, one `message_delta` with a known `stop_reason`, `message_stop` last), and
//! re-emitted from what was parsed: comments, unknown fields of the framing and escapes never
//! pass as raw bytes. Then, on the decoded and reassembled text: the API key in no form we can
//! recognise (see [`holds_key`]), the model the request's tier asked for, and no refusal.

use base64::Engine;
use serde_json::Value;

/// Why an answer is not passed on; each fails the request once, and the sub-session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejected {
    /// Not a whole, well-formed message (what is wrong, in words, never its content).
    Malformed(String),
    /// The decoded answer holds the API key.
    Key,
    /// Answered by another model than the request's tier (the id, if it is a plain one).
    Model(String),
    /// `stop_reason: "refusal"`, with the text the model gave.
    Refusal(String),
}

/// What the answer must match.
pub struct Expected<'a> {
    /// The request asked for a stream (`"stream": true`).
    pub streaming: bool,
    /// The DeepSeek model id sent.
    pub model: &'a str,
    pub key: Option<&'a str>,
}

const STOP_REASONS: [&str; 5] = [
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "refusal",
];

fn malformed(why: &str) -> Rejected {
    Rejected::Malformed(why.to_string())
}

/// Check a 2xx answer; the body to pass on, re-emitted from what was parsed.
pub fn check(content_type: &str, body: &str, expected: &Expected<'_>) -> Result<String, Rejected> {
    let is_stream = content_type
        .trim()
        .to_ascii_lowercase()
        .starts_with("text/event-stream");
    if is_stream != expected.streaming {
        return Err(malformed(if expected.streaming {
            "is not an event stream, but the request asked for one"
        } else {
            "is an event stream, but the request asked for one JSON message"
        }));
    }
    let (message, out) = if is_stream {
        let events = sse_events(body)?;
        let message = assemble(&events)?;
        let out: String = events
            .iter()
            .map(|event| format!("event: {}\ndata: {event}\n\n", kind(event)))
            .collect();
        (message, out)
    } else {
        let value: Value = serde_json::from_str(body).map_err(|_| malformed("is not JSON"))?;
        (whole_message(&value)?, value.to_string())
    };
    if let Some(key) = expected.key
        && holds_key(&message.decoded, key)
    {
        return Err(Rejected::Key);
    }
    if !same_model(&message.model, expected.model) {
        return Err(Rejected::Model(message.model));
    }
    if message.stop_reason == "refusal" {
        return Err(Rejected::Refusal(message.text));
    }
    Ok(out)
}

/// An answer as the runner would see it.
#[derive(Default)]
struct Message {
    model: String,
    stop_reason: String,
    /// The text blocks, joined.
    text: String,
    /// Every decoded string of the answer in order (keys and values), then each block's
    /// reassembled content, then all blocks' content joined: what the key is looked for in.
    decoded: String,
}

/// The answer came from the model asked for, or its family: the same id, or a DeepSeek model
/// of the same tier (a dated or tagged version of it too) (DeepSeek serves `deepseek-flash` as
/// e.g. `DeepSeek-V4.1-Flash-1017`): it starts with `deepseek` (any case) and has the same tier
/// words (`flash`, `pro`) as the id sent, and none of the other (`gpt-4o-deepseek-flash` fails).
fn same_model(answered: &str, expected: &str) -> bool {
    if answered == expected {
        return true;
    }
    let words = |id: &str| -> Vec<String> {
        id.to_ascii_lowercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .map(str::to_string)
            .collect()
    };
    let tiers = |words: &[String]| -> Vec<&'static str> {
        ["flash", "pro"]
            .into_iter()
            .filter(|t| words.iter().any(|w| w == t))
            .collect()
    };
    let (got, sent) = (words(answered), words(expected));
    answered.to_ascii_lowercase().starts_with("deepseek")
        && !tiers(&sent).is_empty()
        && tiers(&got) == tiers(&sent)
}

/// An answer the runner can act on has a text or a tool call: one without (no blocks, or
/// thinking only) would make it re-send, so it fails here, once.
fn has_answer(kinds: impl IntoIterator<Item = String>) -> Result<(), Rejected> {
    if kinds.into_iter().any(|k| k == "text" || k == "tool_use") {
        Ok(())
    } else {
        Err(malformed(
            "has no text and no tool call (an empty answer, or thinking only)",
        ))
    }
}

fn kind(event: &Value) -> &str {
    event.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The data of each event of a stream, in order; every line must be an event field.
fn sse_events(body: &str) -> Result<Vec<Value>, Rejected> {
    let body = body.replace("\r\n", "\n").replace('\r', "\n");
    let mut events = Vec::new();
    let mut name: Option<&str> = None;
    let mut data: Vec<&str> = Vec::new();
    for line in body.split('\n') {
        if line.is_empty() {
            if !data.is_empty() {
                let event: Value = serde_json::from_str(&data.join("\n"))
                    .map_err(|_| malformed("has an event whose data is not JSON"))?;
                if !event.is_object() || event.get("type").and_then(Value::as_str).is_none() {
                    return Err(malformed("has an event without a type"));
                }
                if name.is_some_and(|n| n != kind(&event)) {
                    return Err(malformed("names an event other than its data's type"));
                }
                events.push(event);
            } else if name.is_some() {
                return Err(malformed("has an event without data"));
            }
            name = None;
            data.clear();
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => name = Some(value),
            "data" => data.push(value),
            "id" | "retry" => {}
            _ => return Err(malformed("has a line that is no event field")),
        }
    }
    if !data.is_empty() {
        return Err(malformed("broke off within an event"));
    }
    Ok(events)
}

/// One content block being streamed.
struct Block {
    kind: String,
    /// Text, thinking (and signature) as streamed.
    content: String,
    /// A tool call's input as streamed (`partial_json`, joined).
    input_json: String,
}

/// Walk a stream's events in order, as the state machine of one message.
fn assemble(events: &[Value]) -> Result<Message, Rejected> {
    let mut message = Message::default();
    let mut blocks: Vec<Block> = Vec::new();
    let mut open: Option<usize> = None;
    let mut delta_seen = false;
    let mut stopped = false;
    for (n, event) in events.iter().enumerate() {
        if stopped {
            return Err(malformed("goes on after message_stop"));
        }
        collect_strings(event, &mut message.decoded);
        let index = event.get("index").and_then(Value::as_u64);
        match (n, kind(event)) {
            (0, "message_start") => {
                let start = event
                    .get("message")
                    .ok_or_else(|| malformed("has a message_start without a message"))?;
                message_fields(start, &mut message)?;
                if start["content"].as_array().is_none_or(|c| !c.is_empty()) {
                    return Err(malformed("starts with content outside content blocks"));
                }
            }
            (0, _) => return Err(malformed("does not begin with message_start")),
            (_, "message_start") => return Err(malformed("has a second message_start")),
            (_, "ping") => {}
            (_, "error") => return Err(malformed("carried an error event")),
            (_, "content_block_start") => {
                if open.is_some() || delta_seen || index != Some(blocks.len() as u64) {
                    return Err(malformed("opens a content block out of order"));
                }
                let block = event
                    .get("content_block")
                    .ok_or_else(|| malformed("opens a content block without one"))?;
                check_block(block, true)?;
                let content = ["text", "thinking"]
                    .iter()
                    .find_map(|f| block.get(*f).and_then(Value::as_str))
                    .unwrap_or("")
                    .to_string();
                blocks.push(Block {
                    kind: kind(block).to_string(),
                    content,
                    input_json: String::new(),
                });
                open = index.map(|i| i as usize);
            }
            (_, "content_block_delta") => {
                let block = match open {
                    Some(i) if index == Some(i as u64) => &mut blocks[i],
                    _ => return Err(malformed("has a delta for a block that is not open")),
                };
                let delta = &event["delta"];
                let (field, target) = match (block.kind.as_str(), kind(delta)) {
                    ("text", "text_delta") => ("text", &mut block.content),
                    ("thinking", "thinking_delta") => ("thinking", &mut block.content),
                    ("thinking", "signature_delta") => ("signature", &mut block.content),
                    ("tool_use", "input_json_delta") => ("partial_json", &mut block.input_json),
                    _ => return Err(malformed("has a delta that does not fit its block")),
                };
                let piece = delta
                    .get(field)
                    .and_then(Value::as_str)
                    .ok_or_else(|| malformed("has a delta without its text"))?;
                target.push_str(piece);
            }
            (_, "content_block_stop") => {
                let Some(i) = open.filter(|i| index == Some(*i as u64)) else {
                    return Err(malformed("closes a block that is not open"));
                };
                let block = &blocks[i];
                if block.kind == "tool_use" && !block.input_json.trim().is_empty() {
                    let input: Value = serde_json::from_str(&block.input_json)
                        .map_err(|_| malformed("has a tool call whose input is not JSON"))?;
                    if !input.is_object() {
                        return Err(malformed("has a tool call whose input is not an object"));
                    }
                }
                open = None;
            }
            (_, "message_delta") => {
                if open.is_some() || delta_seen {
                    return Err(malformed("has a message_delta out of order"));
                }
                delta_seen = true;
                message.stop_reason = stop_reason(&event["delta"])?;
            }
            (_, "message_stop") => {
                if !delta_seen {
                    return Err(malformed("stops without a message_delta (no stop_reason)"));
                }
                stopped = true;
            }
            _ => return Err(malformed("carried an event of an unknown type")),
        }
    }
    if events.is_empty() || !stopped {
        return Err(malformed("broke off before its end (no message_stop)"));
    }
    has_answer(blocks.iter().map(|b| b.kind.clone()))?;
    let mut all = String::new();
    for block in &blocks {
        if block.kind == "text" {
            message.text.push_str(&block.content);
        }
        let mut pieces = block.content.clone();
        pieces.push_str(&block.input_json);
        if let Ok(input) = serde_json::from_str::<Value>(&block.input_json) {
            collect_strings(&input, &mut pieces);
        }
        message.decoded.push('\n');
        message.decoded.push_str(&pieces);
        all.push_str(&pieces);
    }
    message.decoded.push('\n');
    message.decoded.push_str(&all);
    Ok(message)
}

/// The fields a message object must have: `type`, `role`, `id`, `model`, `content`, `usage`.
fn message_fields(message: &Value, into: &mut Message) -> Result<(), Rejected> {
    let ok = message.get("type").and_then(Value::as_str) == Some("message")
        && message.get("role").and_then(Value::as_str) == Some("assistant")
        && message.get("id").and_then(Value::as_str).is_some()
        && message.get("content").is_some_and(Value::is_array)
        && message.get("usage").is_some_and(Value::is_object);
    if !ok {
        return Err(malformed(
            "is not an assistant message (type, role, id, content and usage are required)",
        ));
    }
    into.model = message
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("names no model"))?
        .to_string();
    Ok(())
}

fn stop_reason(holder: &Value) -> Result<String, Rejected> {
    match holder.get("stop_reason").and_then(Value::as_str) {
        Some(reason) if STOP_REASONS.contains(&reason) => Ok(reason.to_string()),
        Some(_) => Err(malformed("has an unknown stop_reason")),
        None => Err(malformed("has no stop_reason")),
    }
}

/// A content block of a known type with its fields (`streamed`: as `content_block_start`
/// opens it, its content still to come).
fn check_block(block: &Value, streamed: bool) -> Result<(), Rejected> {
    let string = |field: &str| block.get(field).and_then(Value::as_str).is_some();
    let ok = match kind(block) {
        "text" => string("text"),
        "thinking" => string("thinking"),
        "redacted_thinking" => string("data"),
        "tool_use" => {
            string("id")
                && string("name")
                && block.get("input").is_some_and(|i| {
                    i.is_object()
                        && (!streamed || i.as_object().is_some_and(serde_json::Map::is_empty))
                })
        }
        _ => return Err(malformed("has a content block of an unknown type")),
    };
    if ok {
        Ok(())
    } else {
        Err(malformed("has a content block without its required fields"))
    }
}

/// A non-streamed answer: one whole message.
fn whole_message(value: &Value) -> Result<Message, Rejected> {
    let mut message = Message::default();
    if value.get("type").and_then(Value::as_str) != Some("message") {
        return Err(malformed("is not a message"));
    }
    message_fields(value, &mut message)?;
    message.stop_reason = stop_reason(value)?;
    has_answer(
        value["content"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| kind(b).to_string()),
    )?;
    collect_strings(value, &mut message.decoded);
    let mut all = String::new();
    for block in value["content"].as_array().into_iter().flatten() {
        check_block(block, false)?;
        let mut pieces = String::new();
        collect_strings(block, &mut pieces);
        if kind(block) == "text" {
            message.text.push_str(block["text"].as_str().unwrap_or(""));
        }
        all.push_str(&pieces);
    }
    message.decoded.push('\n');
    message.decoded.push_str(&all);
    Ok(message)
}

/// Every string of `value` (object keys too), decoded, each on a line of its own.
pub(crate) fn collect_strings(value: &Value, into: &mut String) {
    match value {
        Value::String(s) => {
            into.push_str(s);
            into.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|v| collect_strings(v, into)),
        Value::Object(map) => {
            for (k, v) in map {
                into.push_str(k);
                into.push('\n');
                collect_strings(v, into);
            }
        }
        _ => {}
    }
}

/// Keys with fewer letters and digits than this are matched only exactly and ignoring case.
const MIN_FUZZY_KEY: usize = 16;

/// Letters and digits only, lower case: what is left of a text once case, spacing,
/// punctuation and invisible characters are taken out.
fn skeleton(text: &str) -> String {
    text.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Whether `decoded` holds the key: as it is, and after one more round of unescaping (JSON
/// `\uXXXX`, `\xNN`, HTML entities), which a tool or a later decoder may apply. In scope: the
/// key — or any long-enough part of it ([`key_windows`]) — as is after JSON decoding (any
/// escape), split across deltas, blocks or strings, in any letter case, with anything but
/// letters and digits between its characters, reversed or rot13 (red team 39), and its base64
/// (standard or URL-safe, any alignment), base32 (standard or extended-hex, any alignment), hex
/// (so percent-encoding too) and decimal character code forms, and in look-alike characters
/// ([`looks_like`]: fullwidth, mathematical, circled, Cyrillic and Greek letters). Out of scope,
/// said in docs/design/decisions.md: other encodings (ascii85, octal, ciphers, interleaved with
/// other letters, ASCII look-alikes such as `l` for `1`) and pieces shorter than a window sent
/// apart:
/// the endpoint already holds the key, this keeps it from reaching others by accident or by the
/// obvious ways.
pub fn holds_key(decoded: &str, key: &str) -> bool {
    if key.is_empty() {
        return false;
    }
    let unescaped = unescape(decoded);
    holds_key_as_is(decoded, key)
        || holds_key_as_is(&unescaped, key)
        || holds_key_folded(decoded, key)
        || holds_key_folded(&unescaped, key)
}

/// The text as it reads, not as it is spelled: compatibility forms folded (NFKC: fullwidth
/// `ｓｋ`, mathematical `𝐬𝐤`, circled letters) and then every character replaced by the
/// prototype of its confusables (UTS #39's skeleton: Cyrillic `ѕ` and `к` read as `s` and `k`;
/// red team 34 B3 passed the key in fullwidth and bold-math letters).
fn looks_like(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let compatible: String = text.nfkc().collect();
    unicode_security::skeleton(&compatible).collect()
}

/// Whether `decoded` holds the key or a long-enough part of it in look-alike characters: both
/// read through [`looks_like`], then compared as [`holds_key_as_is`] compares them.
fn holds_key_folded(decoded: &str, key: &str) -> bool {
    // ASCII text was read whole by `holds_key_as_is` (and a skeleton of megabytes of it would
    // cost for nothing).
    if decoded.is_ascii() {
        return false;
    }
    let text = looks_like(decoded);
    if text
        .to_lowercase()
        .contains(&looks_like(key).to_lowercase())
    {
        return true;
    }
    if skeleton(key).len() < MIN_FUZZY_KEY {
        return false;
    }
    let text = skeleton(&text);
    key_windows(key).iter().any(|window| {
        let form = skeleton(&looks_like(window));
        form.len() >= MIN_FUZZY_KEY && text.contains(form.as_str())
    })
}

fn holds_key_as_is(decoded: &str, key: &str) -> bool {
    let lower = decoded.to_lowercase();
    if decoded.contains(key) || lower.contains(&key.to_lowercase()) {
        return true;
    }
    if skeleton(key).len() < MIN_FUZZY_KEY {
        return false;
    }
    let text = skeleton(decoded);
    key_windows(key).iter().any(|window| {
        lower.contains(&window.to_lowercase())
            || key_forms(window)
                .iter()
                .any(|form| form.len() >= MIN_FUZZY_KEY && text.contains(form.as_str()))
    })
}

/// The parts of the key that count as the key: every run of `max(16, n / 3)` of its `n`
/// characters (a third of the key gives it away: red team 39 sent it in two halves, which the
/// earlier `n - 4` let through); the whole key when it is shorter.
fn key_windows(key: &str) -> Vec<&str> {
    let bounds: Vec<usize> = key
        .char_indices()
        .map(|(i, _)| i)
        .chain([key.len()])
        .collect();
    let n = bounds.len() - 1;
    let width = (n / 3).max(MIN_FUZZY_KEY);
    if width >= n {
        return vec![key];
    }
    (0..=n - width)
        .map(|start| &key[bounds[start]..bounds[start + width]])
        .collect()
}

/// A part of the key as the letters and digits of its recognised encodings: as is, reversed,
/// rot13, hex, decimal character codes, base64 and base32 at each alignment.
fn key_forms(part: &str) -> Vec<String> {
    let hex: String = part.bytes().map(|b| format!("{b:02x}")).collect();
    // `115, 107, 45` and `[115 107 45]` alike: only the digits are compared (red team 41 6-B1).
    let decimal: String = part.bytes().map(|b| b.to_string()).collect();
    let reversed: String = part.chars().rev().collect();
    let rot13: String = part
        .chars()
        .map(|c| match c {
            'a'..='z' => (((c as u8 - b'a' + 13) % 26) + b'a') as char,
            'A'..='Z' => (((c as u8 - b'A' + 13) % 26) + b'A') as char,
            c => c,
        })
        .collect();
    let mut forms = vec![
        skeleton(part),
        skeleton(&reversed),
        skeleton(&rot13),
        hex,
        decimal,
    ];
    // Base32 (RFC 4648, and its extended-hex alphabet: 5 bytes to 8 characters; red team 41
    // 6-B1) and base64 (standard or URL-safe: 3 bytes to 4 characters).
    for encoding in [&data_encoding::BASE32, &data_encoding::BASE32HEX] {
        aligned_forms(part.as_bytes(), (5, 8), |b| encoding.encode(b), &mut forms);
    }
    for engine in [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::URL_SAFE,
    ] {
        aligned_forms(part.as_bytes(), (3, 4), |b| engine.encode(b), &mut forms);
    }
    forms
}

/// `part` in a block encoding of `group.0` bytes to `group.1` characters, at each alignment:
/// only the groups made of the part's bytes alone, which are the same wherever it sits.
fn aligned_forms(
    part: &[u8],
    group: (usize, usize),
    encode: impl Fn(&[u8]) -> String,
    forms: &mut Vec<String>,
) {
    let (bytes, chars) = group;
    for offset in 0..bytes {
        let mut input = vec![0u8; offset];
        input.extend_from_slice(part);
        let encoded = encode(&input);
        let start = if offset == 0 { 0 } else { chars };
        let end = encoded.len().saturating_sub(chars);
        if end > start {
            forms.push(skeleton(&encoded[start..end]));
        }
    }
}

/// One round of unescaping: `\uXXXX`, `\xNN`, `\\`, and HTML entities (`&#NN;`, `&#xHH;`,
/// `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`); anything else is kept as it is.
pub fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some((decoded, used)) = escape_at(rest) {
            out.push(decoded);
            rest = &rest[used..];
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// The character an escape at the start of `text` stands for, and its length.
fn escape_at(text: &str) -> Option<(char, usize)> {
    let hex_char = |digits: &str| {
        u32::from_str_radix(digits, 16)
            .ok()
            .and_then(char::from_u32)
    };
    let fixed = |len: usize| {
        text.get(2..len)
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if text.starts_with("\\\\") {
        return Some(('\\', 2));
    }
    if text.starts_with("\\u") || text.starts_with("\\U") {
        return fixed(6).and_then(hex_char).map(|c| (c, 6));
    }
    if text.starts_with("\\x") || text.starts_with("\\X") {
        return fixed(4).and_then(hex_char).map(|c| (c, 4));
    }
    if !text.starts_with('&') {
        return None;
    }
    let (end, _) = text.char_indices().take(12).find(|(_, c)| *c == ';')?;
    let name = &text[1..end];
    let c = if let Some(number) = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
        hex_char(number)?
    } else if let Some(number) = name.strip_prefix('#') {
        number.parse::<u32>().ok().and_then(char::from_u32)?
    } else {
        match name {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => return None,
        }
    };
    Some((c, end + 1))
}

#[cfg(test)]
mod tests;
