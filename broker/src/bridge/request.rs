//! Reading a runner's model request in time independent of its history: the body is split into
//! its top-level members and its messages without being parsed; only the messages that differ
//! from the previous request are parsed and hashed. The fingerprint stays what it always was, the
//! SHA-256 of the canonical JSON of `messages` without `cache_control`: the hasher's state after
//! each message is kept, and a request that repeats the previous one's bytes up to some message
//! resumes from that state.

use axum::body::Bytes;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Object members left out of the fingerprint at every level.
const UNHASHED_KEYS: &[&str] = &["cache_control"];

/// The body is not JSON (as far as this reader looks).
#[derive(Debug, PartialEq)]
pub struct NotJson;

/// Who wrote a message.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    User,
    Assistant,
    Other,
}

/// One message of the remembered request.
#[derive(Clone)]
struct Mark {
    start: usize,
    end: usize,
    role: Role,
    /// The fingerprint hasher after `[`, this message and those before it.
    hashed: Sha256,
}

/// What is kept of the previous request to read the next one.
pub struct Memo {
    body: Bytes,
    /// Offset of the messages array's `[`.
    array_at: usize,
    marks: Vec<Mark>,
}

/// What the bridge needs of a request.
pub struct Request {
    pub fingerprint: String,
    pub stream: bool,
    pub model: Option<String>,
    /// The messages after the last assistant message, parsed.
    pub tail: Vec<Value>,
    /// The names of the request's tools.
    pub tool_names: Vec<String>,
    /// Messages parsed and hashed for this request (the rest came from the memo).
    pub hashed_messages: usize,
}

/// Read `body`, reusing what `memo` (the previous request) already read; returns the request and
/// the memo for the next one.
pub fn read(body: Bytes, mut memo: Option<Memo>) -> Result<(Request, Memo), NotJson> {
    let bytes: &[u8] = &body;
    let mut at = skip_ws(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        // Not an object: valid JSON is read as an empty request.
        serde_json::from_slice::<serde::de::IgnoredAny>(bytes).map_err(|_| NotJson)?;
        let memo = Memo {
            body: body.clone(),
            array_at: usize::MAX,
            marks: Vec::new(),
        };
        return Ok((empty_request(), memo));
    }
    at += 1;
    let mut request = empty_request();
    let mut messages: Option<(usize, Vec<Mark>, usize)> = None;
    let mut other_messages: Option<Value> = None;
    let mut tools_span = None;
    loop {
        at = skip_ws(bytes, at);
        match bytes.get(at) {
            Some(b'}') => {
                at += 1;
                break;
            }
            Some(b'"') => {}
            _ => return Err(NotJson),
        }
        let key_end = skip_string(bytes, at)?;
        let key = key_text(&bytes[at..key_end])?;
        at = skip_ws(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            return Err(NotJson);
        }
        at = skip_ws(bytes, at + 1);
        let value_end = if key == "messages" && bytes.get(at) == Some(&b'[') {
            let (marks, end) = read_messages(&body, at, memo.take(), &mut request)?;
            messages = Some((at, marks, end));
            other_messages = None;
            end
        } else {
            let end = skip_value(bytes, at)?;
            match key.as_str() {
                "messages" => {
                    other_messages = Some(parse(&bytes[at..end])?);
                    messages = None;
                }
                "stream" => request.stream = parse(&bytes[at..end])?.as_bool().unwrap_or(false),
                "model" => request.model = parse(&bytes[at..end])?.as_str().map(str::to_string),
                "tools" => tools_span = Some((at, end)),
                _ => {}
            }
            end
        };
        at = skip_ws(bytes, value_end);
        match bytes.get(at) {
            Some(b',') => at += 1,
            Some(b'}') => {
                at += 1;
                break;
            }
            _ => return Err(NotJson),
        }
    }
    if skip_ws(bytes, at) != bytes.len() {
        return Err(NotJson);
    }
    if let Some((start, end)) = tools_span {
        request.tool_names = tool_names(&bytes[start..end])?;
    }
    let (array_at, marks) = match (messages, other_messages) {
        (Some((array_at, marks, _)), _) => {
            request.tail = tail(bytes, &marks)?;
            (array_at, marks)
        }
        (None, value) => {
            let value = value.unwrap_or(Value::Null);
            request.fingerprint = common::hash::canonical_sha256_without(&value, UNHASHED_KEYS);
            (usize::MAX, Vec::new())
        }
    };
    let memo = Memo {
        body,
        array_at,
        marks,
    };
    Ok((request, memo))
}

fn empty_request() -> Request {
    Request {
        fingerprint: common::hash::canonical_sha256_without(&Value::Null, UNHASHED_KEYS),
        stream: false,
        model: None,
        tail: Vec::new(),
        tool_names: Vec::new(),
        hashed_messages: 0,
    }
}

fn parse(bytes: &[u8]) -> Result<Value, NotJson> {
    serde_json::from_slice(bytes).map_err(|_| NotJson)
}

/// A member name: its bytes between the quotes, decoded only if it has escapes.
fn key_text(quoted: &[u8]) -> Result<String, NotJson> {
    let inner = &quoted[1..quoted.len() - 1];
    if inner.contains(&b'\\') {
        serde_json::from_slice(quoted).map_err(|_| NotJson)
    } else {
        std::str::from_utf8(inner)
            .map(str::to_string)
            .map_err(|_| NotJson)
    }
}

/// The messages array starting at `array_at`: each message's span, role and hasher state, and the
/// offset after the array. The fingerprint is finished into `request`.
fn read_messages(
    body: &Bytes,
    array_at: usize,
    memo: Option<Memo>,
    request: &mut Request,
) -> Result<(Vec<Mark>, usize), NotJson> {
    let bytes: &[u8] = body;
    // Reuse the previous request's messages up to the last one whose bytes, and the byte after
    // them (a scalar's end is seen there), are the same here.
    let mut marks = match memo.filter(|m| m.array_at == array_at) {
        Some(memo) => {
            let same = common_prefix(&memo.body, bytes);
            let reusable = memo.marks.partition_point(|m| m.end < same);
            let mut marks = memo.marks;
            marks.truncate(reusable);
            marks
        }
        None => Vec::new(),
    };
    let (mut hasher, mut at) = match marks.last() {
        Some(mark) => (mark.hashed.clone(), mark.end),
        None => {
            let mut hasher = Sha256::new();
            hasher.update(b"[");
            (hasher, array_at + 1)
        }
    };
    at = skip_ws(bytes, at);
    if marks.is_empty() && bytes.get(at) == Some(&b']') {
        hasher.update(b"]");
        request.fingerprint = hex::encode(hasher.finalize());
        return Ok((marks, at + 1));
    }
    if !marks.is_empty() {
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            Some(b']') => {
                hasher.update(b"]");
                request.fingerprint = hex::encode(hasher.finalize());
                return Ok((marks, at + 1));
            }
            _ => return Err(NotJson),
        }
    }
    loop {
        let start = at;
        let end = skip_value(bytes, start)?;
        let message = parse(&bytes[start..end])?;
        if !marks.is_empty() {
            hasher.update(b",");
        }
        common::hash::canonical_sha256_update(&message, UNHASHED_KEYS, &mut hasher);
        request.hashed_messages += 1;
        let role = match message.get("role").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            _ => Role::Other,
        };
        marks.push(Mark {
            start,
            end,
            role,
            hashed: hasher.clone(),
        });
        at = skip_ws(bytes, end);
        match bytes.get(at) {
            Some(b',') => at = skip_ws(bytes, at + 1),
            Some(b']') => break,
            _ => return Err(NotJson),
        }
    }
    hasher.update(b"]");
    request.fingerprint = hex::encode(hasher.finalize());
    Ok((marks, at + 1))
}

/// The messages after the last assistant message, parsed (a few, whatever the history).
fn tail(bytes: &[u8], marks: &[Mark]) -> Result<Vec<Value>, NotJson> {
    let from = marks
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .map_or(0, |i| i + 1);
    marks[from..]
        .iter()
        .map(|m| parse(&bytes[m.start..m.end]))
        .collect()
}

/// The `name` of each tool (other members are skipped, not kept).
fn tool_names(bytes: &[u8]) -> Result<Vec<String>, NotJson> {
    #[derive(serde::Deserialize)]
    struct Tool {
        #[serde(default)]
        name: Option<Value>,
    }
    let Ok(tools) = serde_json::from_slice::<Vec<Tool>>(bytes) else {
        // Not an array of objects: no tools (still JSON, or the body is refused).
        parse(bytes)?;
        return Ok(Vec::new());
    };
    Ok(tools
        .into_iter()
        .filter_map(|t| match t.name {
            Some(Value::String(name)) => Some(name),
            _ => None,
        })
        .collect())
}

/// Length of the common prefix of `a` and `b` (compared a block at a time).
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + BLOCK <= n && a[i..i + BLOCK] == b[i..i + BLOCK] {
        i += BLOCK;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while bytes
        .get(at)
        .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
    {
        at += 1;
    }
    at
}

/// The offset after the string starting (with its quote) at `at`.
fn skip_string(bytes: &[u8], at: usize) -> Result<usize, NotJson> {
    let mut i = at + 1;
    loop {
        let next = memchr::memchr2(b'"', b'\\', bytes.get(i..).ok_or(NotJson)?).ok_or(NotJson)?;
        i += next;
        if bytes[i] == b'\\' {
            i += 2;
        } else {
            return Ok(i + 1);
        }
    }
}

/// The offset after the JSON value starting at `at`. Strings and nesting are followed, nothing
/// is validated: a value the bridge uses is parsed afterwards.
fn skip_value(bytes: &[u8], at: usize) -> Result<usize, NotJson> {
    match bytes.get(at) {
        Some(b'"') => skip_string(bytes, at),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = at;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'"' => {
                        i = skip_string(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Ok(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            Err(NotJson)
        }
        Some(_) => {
            let len = bytes[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(bytes.len() - at);
            if len == 0 { Err(NotJson) } else { Ok(at + len) }
        }
        None => Err(NotJson),
    }
}

#[cfg(test)]
mod tests;
