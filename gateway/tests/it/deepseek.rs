//! DeepSeek explicit sub-sessions with the real runner: the pinned Claude Code as the
//! sub-session's runner against a scripted fake DeepSeek reached through the configured base URL.
//! A delegated task writes in the worktree with receipts (result verified), the barrier and the
//! write lock, the fixed route with no fallback on an HTTP error, a gateway killed while the
//! sub-session runs (re-adopted, result delivered once), a crash between recording the
//! delegation and launching it (reported not started, never launched), and a scan proving the key
//! is in no state file, process environment, command line or public answer.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tests::deepseek::{FakeDeepseek, Step};

use crate::support::*;
use crate::writes::{repo, sha_of};

/// A key of the test's own: the scan for it must not find another test's gateway.
pub(crate) fn new_key() -> String {
    format!("sk-fake-{}", uuid::Uuid::new_v4().simple())
}

fn deepseek_env(fake: &FakeDeepseek, key: &str) -> Vec<(&'static str, String)> {
    vec![
        ("CLAUDE_TOOLS_DEEPSEEK_BASE_URL", fake.base_url()),
        ("DEEPSEEK_API_KEY", key.to_string()),
    ]
}

pub(crate) async fn gateway_for(
    fake: &FakeDeepseek,
    key: &str,
    extra: &[(&str, &str)],
) -> GatewayProcess {
    let env = deepseek_env(fake, key);
    let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.extend_from_slice(extra);
    gateway_with(&all).await
}

pub(crate) async fn start_delegating(chat: &ScriptedChatGpt, root: &Path, key: &str) -> Value {
    let r = chat
        .start_with(
            "Delegate a task",
            root,
            key,
            json!({"capability_profile": "worktree_write", "subagent_policy": "deepseek_explicit", "wait_seconds": 50}),
        )
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "waiting_for_gpt", "{v}");
    v
}

/// Reply with `calls`; the view with the next pending turn.
pub(crate) async fn reply_turn(
    chat: &ScriptedChatGpt,
    v: &Value,
    reply_id: &str,
    calls: Value,
) -> Value {
    crate::writes::reply_calls(chat, v, reply_id, calls).await
}

/// A reply that must be refused with `code`; the refusal's message.
async fn reply_refused(
    chat: &ScriptedChatGpt,
    v: &Value,
    reply_id: &str,
    calls: Value,
    code: &str,
) -> String {
    let r = chat
        .reply(
            &session_id(v),
            &lease_id(v),
            &turn_id(v),
            reply_id,
            None,
            Some(calls),
        )
        .await
        .unwrap();
    assert_eq!(tests::tool_err_code(&r), code, "{r}");
    r.to_string()
}

/// The first tool result's output, parsed (the gateway's report of a sub-session).
pub(crate) fn report(v: &Value) -> Value {
    let output = v["pending_turn"]["tool_results"][0]["output"]
        .as_str()
        .unwrap_or("");
    serde_json::from_str(output).unwrap_or_else(|_| panic!("not a report: {v}"))
}

/// Ask for the sub-session's report until it has ended (each ask is one reply and turn).
pub(crate) async fn until_ended(
    chat: &ScriptedChatGpt,
    mut v: Value,
    id: &str,
    tag: &str,
) -> (Value, Value) {
    for round in 0..40 {
        let get = json!([{"name": "deepseek_subagent_get", "arguments": {"subsession_id": id}}]);
        v = reply_turn(chat, &v, &format!("{tag}-get-{round}"), get).await;
        let report = report(&v);
        if !matches!(report["status"].as_str(), Some("starting" | "running")) {
            return (v, report);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    panic!("the sub-session did not end: {v}");
}

pub(crate) fn subsession_id(start_turn: &Value) -> String {
    report(start_turn)["subsession_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Processes other than `except` whose environment or command line holds `needle`.
fn processes_holding(needle: &[u8], except: u32) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == except || pid == std::process::id() {
            continue;
        }
        for file in ["environ", "cmdline"] {
            if let Ok(bytes) = std::fs::read(entry.path().join(file))
                && bytes.windows(needle.len()).any(|w| w == needle)
            {
                found.push(format!("{pid}/{file}"));
            }
        }
    }
    found
}

#[tokio::test]
async fn a_delegated_task_runs_on_deepseek_confined_and_audited() {
    let fake = FakeDeepseek::start(Vec::new()).await.unwrap();
    let key = new_key();
    let gw = gateway_for(&fake, &key, &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let mut public = Vec::new();
    let v = start_delegating(&chat, &root, "ds-e2e").await;
    public.push(v.to_string());
    assert!(
        v["deepseek_route"]
            .as_str()
            .is_some_and(|r| r.contains("sonnet,opus->deepseek-flash") && r.contains("no fallback")),
        "{v}"
    );
    assert_eq!(v["deepseek_subsessions"], json!([]));
    let worktree = v["workspace"]["worktree_path"]
        .as_str()
        .unwrap()
        .to_string();
    let target = Path::new(&worktree).join("from_deepseek.txt");
    // DeepSeek thinks a while first, so the write lock is seen in force.
    let write = Step::ToolUse {
        name: "Write".into(),
        input: json!({"file_path": target.to_string_lossy(), "content": "written by the sub-session\n"}),
    };
    fake.push(Step::Delay(Duration::from_secs(4), Box::new(write)));
    fake.push(Step::Text("I wrote from_deepseek.txt.".into()));

    // The barrier: a start must be alone in its reply.
    let barrier = json!([
        {"name": "deepseek_subagent_start", "arguments": {"task": "write a file"}},
        {"name": "Read", "arguments": {"file_path": format!("{worktree}/notes.txt")}},
    ]);
    let refused = reply_refused(&chat, &v, "ds-barrier", barrier, "invalid_argument").await;
    assert!(refused.contains("must be the only call"), "{refused}");

    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "Create from_deepseek.txt in the worktree."}}]);
    let v = reply_turn(&chat, &v, "ds-start", start).await;
    public.push(v.to_string());
    let started = report(&v);
    assert!(
        matches!(started["status"].as_str(), Some("starting" | "running")),
        "{started}"
    );
    let id = subsession_id(&v);
    assert!(id.starts_with("ds_"), "{id}");

    // The write lock: while it runs, no writes, commands or second start; reads stay allowed.
    let running = chat
        .status(&session_id(&v), &lease_id(&v), 0)
        .await
        .unwrap();
    assert_eq!(view(&running)["active_deepseek_subsession_id"], json!(id));
    for (n, locked) in [
        json!({"name": "Write", "arguments": {"file_path": format!("{worktree}/x.txt"), "content": "x"}}),
        json!({"name": "RunCommand", "arguments": {"argv": ["true"]}}),
        json!({"name": "deepseek_subagent_start", "arguments": {"task": "a second one"}}),
    ]
    .into_iter()
    .enumerate()
    {
        let busy = reply_refused(&chat, &v, &format!("ds-locked-{n}"), json!([locked]), "busy").await;
        assert!(busy.contains(&id), "{busy}");
    }
    assert!(!Path::new(&worktree).join("x.txt").exists());

    let (v, ended) = until_ended(&chat, v, &id, "e2e").await;
    public.push(v.to_string());
    assert_eq!(ended["status"], "succeeded", "{ended}");
    assert_eq!(
        ended["result_text"], "I wrote from_deepseek.txt.",
        "{ended}"
    );
    let actions = ended["actions"].as_array().unwrap();
    let write = actions
        .iter()
        .find(|a| a["name"] == "Write")
        .expect("a Write action");
    assert_eq!(write["status"], "ok", "{ended}");
    assert_eq!(write["post_sha256"], json!(sha_of(&target)), "{ended}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "written by the sub-session\n"
    );
    // The source repository is untouched: the sub-session wrote in the worktree only.
    assert!(!root.join("from_deepseek.txt").exists());

    // The route: every request reached the fake with the Flash id and the key, none a
    // sub-session control tool.
    let seen = fake.seen();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(
        seen.iter().any(|r| r.stream),
        "Claude Code streams: {seen:?}"
    );
    for request in &seen {
        assert_eq!(request.model, "deepseek-flash", "{request:?}");
        assert_eq!(request.api_key.as_deref(), Some(key.as_str()));
        assert!(request.tool_names.iter().any(|t| t == "mcp__gw__Write"));
        assert!(!request.tool_names.iter().any(|t| t.contains("deepseek")));
    }

    // Audited: the sub-session's ledger has its approved call, its receipt and its requests.
    let delegated = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'delegated_call_approved'",
        &id,
    );
    assert_eq!(delegated, 1);
    let requests = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'deepseek_request'",
        &id,
    );
    assert_eq!(requests as usize, seen.len());
    let ended_events = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE kind = 'subsession_ended' AND session_id = ?1",
        &id,
    );
    assert_eq!(ended_events, 1, "the end is recorded once");

    // The SessionView summarises it.
    let now = view(
        &chat
            .status(&session_id(&v), &lease_id(&v), 0)
            .await
            .unwrap(),
    );
    public.push(now.to_string());
    assert_eq!(now["active_deepseek_subsession_id"], Value::Null, "{now}");
    assert_eq!(now["deepseek_subsessions"][0]["subsession_id"], json!(id));
    assert_eq!(now["deepseek_subsessions"][0]["status"], "succeeded");
    assert_eq!(now["deepseek_subsessions"][0]["write_count"], 1);

    // The key: nowhere but in the gateway's own environment.
    assert_eq!(
        files_holding(gw.state_dir(), key.as_bytes()),
        Vec::<PathBuf>::new()
    );
    assert_eq!(
        files_holding(Path::new(&worktree), key.as_bytes()),
        Vec::<PathBuf>::new()
    );
    assert_eq!(
        processes_holding(key.as_bytes(), gw.pid().unwrap()),
        Vec::<String>::new()
    );
    for answer in &public {
        assert!(!answer.contains(&key), "{answer}");
    }
    assert!(!gw.stderr_log().contains(&key));

    let stopped = chat
        .stop(&session_id(&v), &lease_id(&v), "ds-stop", None)
        .await
        .unwrap();
    assert_eq!(view(&stopped)["status"], "stopped", "{stopped}");
}

#[tokio::test]
async fn an_http_error_fails_the_subsession_and_nothing_falls_back() {
    let fake = FakeDeepseek::start(vec![Step::Status(503)]).await.unwrap();
    let gw = gateway_for(&fake, &new_key(), &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let v = start_delegating(&chat, &root, "ds-err").await;
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "anything"}}]);
    let v = reply_turn(&chat, &v, "ds-err-start", start).await;
    let id = subsession_id(&v);
    let (v, ended) = until_ended(&chat, v, &id, "err").await;
    assert_eq!(ended["status"], "failed", "{ended}");
    assert!(
        ended["error"]
            .as_str()
            .is_some_and(|e| e.contains("HTTP 503")),
        "{ended}"
    );
    // One request, to DeepSeek only: no retry, no other tier, no other provider.
    let seen = fake.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].model, "deepseek-flash");
    let failures = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'deepseek_request' \
         AND json_extract(data, '$.status') = 400 AND json_extract(data, '$.error') LIKE '%HTTP 503%'",
        &id,
    );
    assert_eq!(failures, 1);
    // The session goes on: a read still works.
    let read = json!([{"name": "Read", "arguments": {"file_path": root.join("notes.txt").to_string_lossy()}}]);
    let v = reply_turn(&chat, &v, "ds-err-read", read).await;
    assert_eq!(v["pending_turn"]["tool_results"][0]["status"], "ok", "{v}");
}

/// The delegation picks the tier its runner runs as: Fable reaches the Pro model (Sonnet and Opus
/// the Flash one), the ledger records the tier and the model, and a failed Pro request falls
/// back to nothing.
#[tokio::test]
async fn a_fable_delegation_runs_on_the_pro_model_and_the_ledger_says_so() {
    let fake = FakeDeepseek::start(vec![Step::Status(503)]).await.unwrap();
    let gw = gateway_for(&fake, &new_key(), &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let v = start_delegating(&chat, &root, "ds-pro").await;
    let start = json!([{"name": "deepseek_subagent_start",
        "arguments": {"task": "anything hard", "tier": "fable"}}]);
    let v = reply_turn(&chat, &v, "ds-pro-start", start).await;
    let id = subsession_id(&v);
    let (_v, ended) = until_ended(&chat, v, &id, "pro").await;
    assert_eq!(ended["status"], "failed", "{ended}");
    let seen = fake.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].model, "deepseek-v4-pro", "{seen:?}");
    let delegated = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE kind = 'subsession_delegated' \
         AND json_extract(data, '$.subsession_id') = ?1 \
         AND json_extract(data, '$.tier') = 'fable' \
         AND json_extract(data, '$.deepseek_model') = 'deepseek-v4-pro'",
        &id,
    );
    assert_eq!(delegated, 1, "the ledger records the tier and the model");
}

#[tokio::test]
async fn a_gateway_killed_while_it_runs_readopts_it_and_delivers_the_result_once() {
    let fake = FakeDeepseek::start(Vec::new()).await.unwrap();
    let mut gw = gateway_for(&fake, &new_key(), &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let v = start_delegating(&chat, &root, "ds-kill").await;
    let worktree = v["workspace"]["worktree_path"]
        .as_str()
        .unwrap()
        .to_string();
    let target = Path::new(&worktree).join("after_restart.txt");
    fake.push(Step::ToolUse {
        name: "Write".into(),
        input: json!({"file_path": target.to_string_lossy(), "content": "survived\n"}),
    });
    fake.push(Step::Text("done after the restart".into()));
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "write after_restart.txt"}}]);
    let v = reply_turn(&chat, &v, "ds-kill-start", start).await;
    let id = subsession_id(&v);
    // kill -9 at once: the sub-session's first model request finds no gateway and waits.
    gw.kill().await;
    gw.restart().await.unwrap();
    let chat = chatgpt(&gw).await;
    let adopted = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'broker_adopted'",
        &id,
    );
    assert_eq!(adopted, 1, "the sub-session's broker is re-adopted");
    let (_v, ended) = until_ended(&chat, v, &id, "kill").await;
    assert_eq!(ended["status"], "succeeded", "{ended}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "survived\n");
    let ends = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'subsession_ended'",
        &id,
    );
    assert_eq!(ends, 1, "the result is delivered once");
    assert_eq!(fake.remaining(), 0);
}

/// A model request out at DeepSeek when the gateway is killed (red-team F2): it is in the ledger
/// (recorded before it left), the runner's resend after the restart is recorded as a resend, and
/// the sub-session finishes once.
#[tokio::test]
async fn a_request_in_flight_when_the_gateway_dies_stays_in_the_ledger() {
    let fake = FakeDeepseek::start(vec![
        Step::Delay(
            Duration::from_secs(6),
            Box::new(Step::Text("lost with the gateway".into())),
        ),
        Step::Text("answered after the restart".into()),
    ])
    .await
    .unwrap();
    let mut gw = gateway_for(&fake, &new_key(), &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let v = start_delegating(&chat, &root, "ds-inflight").await;
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "answer"}}]);
    let v = reply_turn(&chat, &v, "ds-inflight-start", start).await;
    let id = subsession_id(&v);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while fake.seen().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no model request arrived"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    gw.kill().await;
    gw.restart().await.unwrap();
    let chat = chatgpt(&gw).await;
    let (_v, ended) = until_ended(&chat, v, &id, "inflight").await;
    assert_eq!(ended["status"], "succeeded", "{ended}");
    assert_eq!(
        ended["result_text"], "answered after the restart",
        "{ended}"
    );
    let db = state_db(&gw);
    let sent: Vec<(String, bool)> = db
        .prepare(
            "SELECT json_extract(data, '$.request_sha256'), json_extract(data, '$.resent') \
             FROM events WHERE session_id = ?1 AND kind = 'deepseek_request_sent' ORDER BY seq",
        )
        .unwrap()
        .query_map([&id], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0].0, sent[1].0, "the same request, sent again");
    assert_eq!((sent[0].1, sent[1].1), (false, true), "{sent:?}");
    let answered = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'deepseek_request'",
        &id,
    );
    assert_eq!(answered, 1, "only the resend was answered to this gateway");
    assert_eq!(fake.seen().len(), 2);
}

#[tokio::test]
async fn a_crash_between_recording_and_launching_reports_it_not_started() {
    let fake = FakeDeepseek::start(vec![Step::Text("must never be asked".into())])
        .await
        .unwrap();
    let mut gw = gateway_for(
        &fake,
        &new_key(),
        &[(
            "NATIVE_GATEWAY_FAILPOINT",
            "gateway_after_delegation_persisted:abort",
        )],
    )
    .await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let v = start_delegating(&chat, &root, "ds-crash").await;
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "never run"}}]);
    let crashed = chat
        .reply(
            &session_id(&v),
            &lease_id(&v),
            &turn_id(&v),
            "ds-crash-start",
            None,
            Some(start),
        )
        .await;
    assert!(
        crashed.is_err(),
        "the gateway aborted before answering: {crashed:?}"
    );
    gw.wait_exit(Duration::from_secs(10)).await.unwrap();
    gw.restart().await.unwrap();
    let chat = chatgpt(&gw).await;
    let now = chat
        .wait_until(
            &session_id(&v),
            &lease_id(&v),
            Duration::from_secs(60),
            |v| !v["pending_turn"].is_null(),
        )
        .await
        .unwrap();
    let summary = &now["deepseek_subsessions"][0];
    assert_eq!(summary["status"], "failed", "{now}");
    assert_eq!(now["active_deepseek_subsession_id"], Value::Null);
    let report = report(&now);
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains("not started")),
        "{report}"
    );
    assert!(fake.seen().is_empty(), "it was never launched");
    let id = summary["subsession_id"].as_str().unwrap();
    let spawned = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'broker_spawned'",
        id,
    );
    assert_eq!(spawned, 0);
}

/// The sub-session's broker pid, from the state database.
fn broker_pid(gw: &GatewayProcess, subsession: &str) -> i32 {
    state_db(gw)
        .query_row(
            "SELECT json_extract(data, '$.broker.pid') FROM sessions WHERE id = ?1",
            [subsession],
            |r| r.get(0),
        )
        .unwrap()
}

fn actions_of(gw: &GatewayProcess, session: &str) -> i64 {
    count_with(
        gw,
        "SELECT COUNT(*) FROM actions WHERE session_id = ?1",
        session,
    )
}

#[tokio::test]
async fn bad_sub_session_controls_are_refused_and_nothing_is_approved() {
    let fake = FakeDeepseek::start(vec![Step::Text("done".into())])
        .await
        .unwrap();
    let gw = gateway_for(&fake, &new_key(), &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    // Another session's sub-session: its id is foreign to the first session.
    let other = start_delegating(&chat, &root, "ds-other").await;
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "say done"}}]);
    let other = reply_turn(&chat, &other, "ds-other-start", start).await;
    let foreign = subsession_id(&other);

    let v = start_delegating(&chat, &root, "ds-bad").await;
    let sid = session_id(&v);
    let cases = [
        (
            json!([{"name": "deepseek_subagent_get", "arguments": {"subsession_id": foreign}}]),
            "not_found",
            "is not a sub-session of this session",
        ),
        (
            json!([{"name": "deepseek_subagent_stop", "arguments": {"subsession_id": foreign}}]),
            "not_found",
            "is not a sub-session of this session",
        ),
        (
            json!([{"name": "deepseek_subagent_get", "arguments": {"subsession_id": "ds_nope"}}]),
            "not_found",
            "is not a sub-session of this session",
        ),
        (
            json!([{"name": "deepseek_subagent_get", "arguments": {"subsession_id": sid}}]),
            "not_found",
            "is not a sub-session of this session",
        ),
        (
            json!([{"name": "deepseek_subagent_start", "arguments": {"task": ""}}]),
            "invalid_argument",
            "task must not be empty",
        ),
        (
            json!([{"name": "deepseek_subagent_start", "arguments": {"task": "x".repeat(32 * 1024 + 1)}}]),
            "invalid_argument",
            "larger than 32768",
        ),
        (
            json!([{"name": "deepseek_subagent_start", "arguments": {"task": "t", "model": "gpt-5"}}]),
            "invalid_argument",
            "unknown field",
        ),
        (
            json!([{"name": "deepseek_subagent_start", "arguments": {"task": "t", "tier": "haiku"}}]),
            "invalid_argument",
            "unknown variant",
        ),
        (
            json!([{"name": "deepseek_subagent_start", "arguments": {"task": "t"}}, {"name": "deepseek_subagent_get", "arguments": {"subsession_id": foreign}}]),
            "invalid_argument",
            "must be the only call",
        ),
    ];
    for (n, (calls, code, words)) in cases.into_iter().enumerate() {
        let message = reply_refused(&chat, &v, &format!("ds-bad-{n}"), calls, code).await;
        assert!(message.contains(words), "{words}: {message}");
    }
    assert_eq!(actions_of(&gw, &sid), 0, "nothing was approved");
    let now = view(&chat.status(&sid, &lease_id(&v), 0).await.unwrap());
    assert_eq!(now["deepseek_subsessions"], json!([]), "{now}");

    // Without deepseek_explicit the controls are not the session's tools.
    let plain = chat
        .start_with(
            "p",
            &root,
            "ds-plain",
            json!({"capability_profile": "worktree_write", "wait_seconds": 50}),
        )
        .await
        .unwrap();
    let plain = view(&plain);
    assert_eq!(plain["deepseek_route"], "disabled");
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "t"}}]);
    let message = reply_refused(&chat, &plain, "ds-plain-start", start, "not_permitted").await;
    assert!(message.contains("deepseek_subagent_start"), "{message}");
    // deepseek_explicit needs worktree_write.
    let wrong = chat
        .start_with(
            "p",
            &root,
            "ds-wrong",
            json!({"capability_profile": "read_only", "subagent_policy": "deepseek_explicit"}),
        )
        .await
        .unwrap();
    assert_eq!(tests::tool_err_code(&wrong), "invalid_argument", "{wrong}");
}

#[tokio::test]
async fn without_a_key_the_start_fails_and_the_session_goes_on() {
    let fake = FakeDeepseek::start(Vec::new()).await.unwrap();
    let gw = GatewayProcess::builder(env!("CARGO_BIN_EXE_gateway"))
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("CLAUDE_TOOLS_DEEPSEEK_BASE_URL", fake.base_url())
        .env_remove("DEEPSEEK_API_KEY")
        .spawn()
        .await
        .unwrap();
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let v = start_delegating(&chat, &root, "ds-nokey").await;
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "anything"}}]);
    let v = reply_turn(&chat, &v, "ds-nokey-start", start).await;
    let result = &v["pending_turn"]["tool_results"][0];
    assert_eq!(result["status"], "error", "{result}");
    let report = report(&v);
    assert_eq!(report["status"], "failed", "{report}");
    assert!(
        report["error"]
            .as_str()
            .is_some_and(|e| e.contains("DEEPSEEK_API_KEY is not set")),
        "{report}"
    );
    assert_eq!(v["status"], "waiting_for_gpt", "the session goes on: {v}");
    assert!(fake.seen().is_empty());
    let spawned = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'broker_spawned'",
        report["subsession_id"].as_str().unwrap(),
    );
    assert_eq!(spawned, 0, "nothing was started");
}

#[tokio::test]
async fn stops_end_a_running_sub_session_before_its_session() {
    let long = || Step::Delay(Duration::from_secs(60), Box::new(Step::Text("late".into())));
    let fake = FakeDeepseek::start(vec![long(), long()]).await.unwrap();
    let gw = gateway_for(&fake, &new_key(), &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let v = start_delegating(&chat, &root, "ds-stop").await;
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "think long"}}]);
    let v = reply_turn(&chat, &v, "ds-stop-start", start).await;
    let first = subsession_id(&v);
    let pid = broker_pid(&gw, &first);
    let stop = json!([{"name": "deepseek_subagent_stop", "arguments": {"subsession_id": first}}]);
    let v = reply_turn(&chat, &v, "ds-stop-1", stop).await;
    assert_eq!(report(&v)["status"], "stopped", "{v}");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "its broker is gone"
    );

    // A second one, stopped with its session.
    let start =
        json!([{"name": "deepseek_subagent_start", "arguments": {"task": "think long again"}}]);
    let v = reply_turn(&chat, &v, "ds-stop-start-2", start).await;
    let second = subsession_id(&v);
    let pid = broker_pid(&gw, &second);
    let stopped = chat
        .stop(&session_id(&v), &lease_id(&v), "ds-stop-session", None)
        .await
        .unwrap();
    let stopped = view(&stopped);
    assert_eq!(stopped["status"], "stopped", "{stopped}");
    assert_eq!(
        stopped["deepseek_subsessions"][1]["status"], "stopped",
        "{stopped}"
    );
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "its broker is gone"
    );
    // The sub-session's end is recorded before the session's stop.
    let db = state_db(&gw);
    let order: Vec<String> = db
        .prepare("SELECT kind FROM events WHERE session_id = ?1 AND kind IN ('subsession_ended', 'stop_requested') ORDER BY seq")
        .unwrap()
        .query_map([session_id(&v)], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        order,
        ["subsession_ended", "subsession_ended", "stop_requested"]
    );
}

#[tokio::test]
async fn a_sub_session_whose_broker_dies_is_lost_and_never_run_again() {
    let long = Step::Delay(Duration::from_secs(60), Box::new(Step::Text("late".into())));
    let fake = FakeDeepseek::start(vec![long]).await.unwrap();
    let gw = gateway_for(&fake, &new_key(), &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let v = start_delegating(&chat, &root, "ds-lost").await;
    let start = json!([{"name": "deepseek_subagent_start", "arguments": {"task": "think long"}}]);
    let v = reply_turn(&chat, &v, "ds-lost-start", start).await;
    let id = subsession_id(&v);
    let pid = broker_pid(&gw, &id);
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let (v, ended) = until_ended(&chat, v, &id, "lost").await;
    assert_eq!(ended["status"], "lost", "{ended}");
    assert!(
        ended["error"]
            .as_str()
            .is_some_and(|e| e.contains("not run again")),
        "{ended}"
    );
    let spawned = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'broker_spawned'",
        &id,
    );
    assert_eq!(spawned, 1, "never re-run");
    // The write lock is released: the session may write again.
    let worktree = v["workspace"]["worktree_path"]
        .as_str()
        .unwrap()
        .to_string();
    let write = json!([{"name": "Write", "arguments": {"file_path": format!("{worktree}/after.txt"), "content": "ok"}}]);
    let v = reply_turn(&chat, &v, "ds-lost-write", write).await;
    assert_eq!(v["pending_turn"]["tool_results"][0]["status"], "ok", "{v}");
}

#[tokio::test]
async fn a_file_changed_behind_the_receipts_fails_the_result_naming_it() {
    let fake = FakeDeepseek::start(Vec::new()).await.unwrap();
    let gw = gateway_for(&fake, &new_key(), &[]).await;
    let chat = chatgpt(&gw).await;
    let (_dir, root) = repo();
    let v = start_delegating(&chat, &root, "ds-verify").await;
    let worktree = v["workspace"]["worktree_path"]
        .as_str()
        .unwrap()
        .to_string();
    let target = Path::new(&worktree).join("checked.txt");
    fake.push(Step::ToolUse {
        name: "Write".into(),
        input: json!({"file_path": target.to_string_lossy(), "content": "by the sub-session\n"}),
    });
    fake.push(Step::Delay(
        Duration::from_secs(5),
        Box::new(Step::Text("done".into())),
    ));
    let start =
        json!([{"name": "deepseek_subagent_start", "arguments": {"task": "write checked.txt"}}]);
    let v = reply_turn(&chat, &v, "ds-verify-start", start).await;
    let id = subsession_id(&v);
    // Someone else changes the file after the sub-session wrote it.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !target.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the sub-session never wrote"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    std::fs::write(&target, "changed behind its back\n").unwrap();
    let (_v, ended) = until_ended(&chat, v, &id, "verify").await;
    assert_eq!(ended["status"], "failed", "{ended}");
    let error = ended["error"].as_str().unwrap_or("");
    assert!(error.contains("result verification"), "{ended}");
    assert!(
        error.contains(&target.to_string_lossy().to_string()),
        "{ended}"
    );
}
