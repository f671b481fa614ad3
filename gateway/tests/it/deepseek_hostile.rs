//! DeepSeek answers from a hostile endpoint (issue 23/6), with the real runner: a refusal, an
//! answer as another model, a stream that is only `message_stop`, and the key escaped and split
//! across deltas each fail the sub-session once (one send, no resend) with a specific error and
//! nothing of the answer passed on; stopping a sub-session or its session closes its upstream
//! request at once.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tests::deepseek::{FakeDeepseek, Step};

use crate::deepseek::{
    gateway_for, new_key, reply_turn, report, start_delegating, subsession_id, until_ended,
};
use crate::support::*;
use crate::writes::repo;

/// A whole stream whose one text block comes as `pieces` (raw JSON string contents, so they
/// may carry escapes), as model `{model}`.
fn stream_of(pieces: &[&str]) -> String {
    let mut events = vec![
        r#"{"type":"message_start","message":{"id":"msg_h","type":"message","role":"assistant","model":"{model}","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}"#.to_string(),
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.to_string(),
    ];
    for piece in pieces {
        events.push(format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{piece}"}}}}"#
        ));
    }
    events.push(r#"{"type":"content_block_stop","index":0}"#.to_string());
    events.push(r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}"#.to_string());
    events.push(r#"{"type":"message_stop"}"#.to_string());
    events
        .iter()
        .map(|e| {
            let kind: Value = serde_json::from_str(&e.replace("{model}", "m")).unwrap();
            format!("event: {}\ndata: {e}\n\n", kind["type"].as_str().unwrap())
        })
        .collect()
}

fn raw_sse(body: String) -> Step {
    Step::Raw {
        content_type: "text/event-stream".into(),
        body,
    }
}

#[tokio::test]
async fn hostile_answers_fail_the_sub_session_once_with_a_specific_error() {
    let fake = FakeDeepseek::start(Vec::new()).await.unwrap();
    let key = new_key();
    let gw = gateway_for(&fake, &key, &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let mut v = start_delegating(&chat, &root, "ds-hostile").await;
    let worktree = PathBuf::from(v["workspace"]["worktree_path"].as_str().unwrap());
    // The key with its first letter escaped, split across two deltas: its raw bytes never
    // hold it.
    let escaped = format!("\\u0073{}", &key[1..]);
    let (head, tail) = escaped.split_at(12);
    let split = raw_sse(stream_of(&["here: ", head, tail]));
    // Red team 34 B3: the key in fullwidth letters (ｓｋ－…) reads as the key.
    let fullwidth: String = key
        .chars()
        .map(|c| match c {
            '!'..='~' => char::from_u32(c as u32 - 0x21 + 0xFF01).unwrap_or(c),
            other => other,
        })
        .collect();
    let cases: Vec<(&str, Step, &str, Option<&str>)> = vec![
        (
            "refusal",
            Step::Refusal("I will not do that task.".into()),
            "DeepSeek refused the task (stop_reason \"refusal\")",
            Some("I will not do that task."),
        ),
        (
            "another model",
            Step::AsModel(
                "claude-sonnet-4-5".into(),
                Box::new(Step::Text("hi".into())),
            ),
            "DeepSeek answered as another model than \"deepseek-flash\"",
            None,
        ),
        (
            "message_stop only",
            raw_sse("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".into()),
            "DeepSeek's answer does not begin with message_start",
            None,
        ),
        (
            "escaped key split across deltas",
            split,
            "DeepSeek's answer contained the API key",
            None,
        ),
        (
            "the key in fullwidth letters",
            Step::Text(format!("the key: {fullwidth}")),
            "DeepSeek's answer contained the API key",
            None,
        ),
    ];
    let mut public = Vec::new();
    for (n, (case, step, words, result)) in cases.into_iter().enumerate() {
        fake.push(step);
        let before = fake.seen().len();
        let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "do it"}}]);
        v = reply_turn(&chat, &v, &format!("ds-h-start-{n}"), start).await;
        let id = subsession_id(&v);
        let (after, ended) = until_ended(&chat, v, &id, &format!("h{n}")).await;
        v = after;
        public.push(v.to_string());
        assert_eq!(ended["status"], "failed", "{case}: {ended}");
        let error = ended["error"].as_str().unwrap_or("");
        assert!(
            error.starts_with("a DeepSeek request failed: ") && error.contains(words),
            "{case}: {ended}"
        );
        assert_eq!(ended["result_text"].as_str(), result, "{case}: {ended}");
        assert_eq!(fake.seen().len(), before + 1, "{case}: one send, no resend");
        let sent = count_with(
            &gw,
            "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'deepseek_request_sent'",
            &id,
        );
        assert_eq!(sent, 1, "{case}: the runner's retry never left the gateway");
    }
    // The key reached no file (state, ledger, transcripts, worktree) and no public answer.
    assert_eq!(
        files_holding(gw.state_dir(), key.as_bytes()),
        Vec::<PathBuf>::new()
    );
    assert_eq!(
        files_holding(gw.state_dir(), escaped.as_bytes()),
        Vec::<PathBuf>::new()
    );
    assert_eq!(
        files_holding(&worktree, key.as_bytes()),
        Vec::<PathBuf>::new()
    );
    assert_eq!(
        files_holding(gw.state_dir(), fullwidth.as_bytes()),
        Vec::<PathBuf>::new()
    );
    for answer in &public {
        assert!(!answer.contains(&key[1..]), "{answer}");
        assert!(!answer.contains(&fullwidth), "{answer}");
    }
}

/// Wait until the fake has `n` requests.
async fn until_seen(fake: &FakeDeepseek, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while fake.seen().len() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "no model request arrived"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait until the fake saw `n` requests cut off; how long that took.
async fn until_cut_off(fake: &FakeDeepseek, n: usize, within: Duration) -> Duration {
    let started = std::time::Instant::now();
    while fake.cut_off() < n {
        assert!(
            started.elapsed() < within,
            "the upstream request is still open after {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

#[tokio::test]
async fn stopping_a_sub_session_or_its_session_closes_its_upstream_request_at_once() {
    let long = || {
        Step::Delay(
            Duration::from_secs(300),
            Box::new(Step::Text("late".into())),
        )
    };
    let fake = FakeDeepseek::start(vec![long(), long()]).await.unwrap();
    let gw = gateway_for(&fake, &new_key(), &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let v = start_delegating(&chat, &root, "ds-cancel").await;
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "think long"}}]);
    let v = reply_turn(&chat, &v, "ds-cancel-start", start).await;
    let first = subsession_id(&v);
    until_seen(&fake, 1).await;
    assert_eq!(fake.cut_off(), 0);
    let stop = json!([{"name": "deepseek_subagent_stop", "arguments": {"subsession_id": first}}]);
    let v = reply_turn(&chat, &v, "ds-cancel-stop", stop).await;
    assert_eq!(report(&v)["status"], "stopped", "{v}");
    // Closed by the stop itself, not by the 300 s answer or the route's timeout.
    until_cut_off(&fake, 1, Duration::from_secs(5)).await;
    let error = report(&v)["error"].as_str().unwrap_or("").to_string();
    assert_eq!(error, "stopped by deepseek_subagent_stop", "{v}");

    // A second one, stopped with its session.
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "again"}}]);
    let v = reply_turn(&chat, &v, "ds-cancel-start-2", start).await;
    until_seen(&fake, 2).await;
    let stopped = chat
        .stop(&session_id(&v), &lease_id(&v), "ds-cancel-session", None)
        .await
        .unwrap();
    assert_eq!(view(&stopped)["status"], "stopped", "{stopped}");
    until_cut_off(&fake, 2, Duration::from_secs(5)).await;
    assert_eq!(fake.seen().len(), 2, "nothing was sent again");
}

/// Issue 23/6, second attack: the key completed across answers (a Write of its start and a
/// marker, then Edits of the markers into the rest) is only whole in the file: the sub-session
/// fails naming the path, and the key reaches no public answer.
#[tokio::test]
async fn a_key_completed_across_two_writes_fails_the_sub_session_naming_the_file() {
    let fake = FakeDeepseek::start(Vec::new()).await.unwrap();
    let key = new_key();
    let gw = gateway_for(&fake, &key, &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let v = start_delegating(&chat, &root, "ds-split").await;
    let worktree = PathBuf::from(v["workspace"]["worktree_path"].as_str().unwrap());
    let target = worktree.join("k.txt");
    let path = target.to_string_lossy().to_string();
    // Pieces under the scan's window (a third of the key, at least 16 characters) each.
    let (a, b) = (key.len() / 3, 2 * key.len() / 3);
    fake.push(Step::ToolUse {
        name: "Write".into(),
        input: json!({"file_path": path, "content": format!("{}@@", &key[..a])}),
    });
    fake.push(Step::ToolUse {
        name: "Edit".into(),
        input: json!({"file_path": path, "old_string": "@@", "new_string": format!("{}##", &key[a..b])}),
    });
    fake.push(Step::ToolUse {
        name: "Edit".into(),
        input: json!({"file_path": path, "old_string": "##", "new_string": &key[b..]}),
    });
    fake.push(Step::Text("done".into()));
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "do it"}}]);
    let v = reply_turn(&chat, &v, "ds-split-start", start).await;
    let id = subsession_id(&v);
    let (v, ended) = until_ended(&chat, v, &id, "split").await;
    assert_eq!(ended["status"], "failed", "{ended}");
    let error = ended["error"].as_str().unwrap_or("");
    assert!(
        error.contains(&format!("{path} holds the DeepSeek API key"))
            && error.contains("kept as written"),
        "{ended}"
    );
    assert!(!v.to_string().contains(&key[1..]), "{v}");
    assert!(!ended.to_string().contains(&key[1..]), "{ended}");
}
