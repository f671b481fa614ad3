//! DeepSeek sub-sessions in process: the egress answers only a live sub-session (a session's own
//! broker gets a refusal that never leaves the gateway), a `ds_` id is no session to the public
//! tools, a sub-session's status follows its record, and its calls and write intents get
//! explicit verdicts.

use common::protocol::{BrokerEvent, Verdict};
use serde_json::json;

use super::harness::Harness;
use crate::error::ErrorCode;
use crate::tools::PublicTool;

#[tokio::test]
async fn the_egress_refuses_every_broker_but_a_running_sub_sessions() {
    let h = Harness::new();
    let view = h.start().await;
    let body = json!({"model": "claude-sonnet-4-5", "messages": []}).to_string();
    let response = h
        .gateway
        .subsessions()
        .model_request(&h.gateway, &view.native_session_id, 3, &body)
        .await;
    assert_eq!(response.request_id, 3);
    assert_eq!(response.status, 400);
    assert!(
        response
            .body
            .contains("only a running DeepSeek sub-session may send model requests"),
        "{}",
        response.body
    );
    // Refused before sending: the configured upstream (nothing listens there) was not tried.
    assert!(!response.body.contains("could not connect"));
    // Recorded in the ledger, without the key.
    let events = h
        .gateway
        .store
        .read(|tx| tx.events(&view.native_session_id))
        .unwrap();
    let request = events
        .iter()
        .find(|(_, _, kind, _)| kind == "deepseek_request")
        .expect("the refused request is recorded");
    assert!(!request.3.to_string().contains("sk-test-key"));
    // An unknown id is refused the same way.
    let response = h
        .gateway
        .subsessions()
        .model_request(&h.gateway, "ds_nope", 4, &body)
        .await;
    assert_eq!(response.status, 400);
}

#[tokio::test]
async fn a_sub_session_id_is_not_a_session_to_the_public_tools() {
    let h = Harness::new();
    let view = h.start().await;
    // A sub-session record, as a delegation leaves it.
    let mut child = h.gateway.load(&view.native_session_id).unwrap();
    child.id = "ds_0123456789abcdef".into();
    child.delegation = Some(crate::state::Delegation {
        parent_session_id: view.native_session_id.clone(),
        start_action_id: "act_x".into(),
        task_sha256: "0".repeat(64),
        runner_model: "sonnet".into(),
        end: None,
        in_flight: Vec::new(),
    });
    h.gateway.store.write(|tx| tx.put_session(&child)).unwrap();
    let lease = view.lease_id.clone().unwrap();
    for (tool, args) in [
        (
            PublicTool::Status,
            json!({"native_session_id": child.id, "lease_id": lease}),
        ),
        (
            PublicTool::Stop,
            json!({"native_session_id": child.id, "lease_id": lease, "request_id": "s1"}),
        ),
        (
            PublicTool::Continue,
            json!({"native_session_id": child.id, "lease_id": lease, "prompt": "p",
                "idempotency_key": "c1"}),
        ),
    ] {
        let err = h.call(tool, args).await.unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound, "{tool:?}: {err}");
        assert!(err.message.contains("is a DeepSeek sub-session"), "{err}");
    }
    // Its status follows its record: how it ended, else where its runtime is.
    use crate::state::{SessionStatus, SubsessionStatus};
    for (status, stop, expected) in [
        (SessionStatus::Starting, false, SubsessionStatus::Starting),
        (SessionStatus::Running, false, SubsessionStatus::Running),
        (SessionStatus::Idle, false, SubsessionStatus::Running),
        (SessionStatus::Stopped, true, SubsessionStatus::Stopped),
        (SessionStatus::Stopped, false, SubsessionStatus::Lost),
        (SessionStatus::Failed, false, SubsessionStatus::Lost),
    ] {
        child.status = status;
        child.stop_request = stop.then(|| crate::state::StopRequest::now("r"));
        assert_eq!(child.subsession_status(), expected, "{status:?} {stop}");
    }
    if let Some(delegation) = child.delegation.as_mut() {
        delegation.end = Some(crate::state::SubsessionEnd {
            status: SubsessionStatus::Succeeded,
            at_ms: 0,
            result_text: None,
            error: None,
        });
    }
    assert_eq!(child.subsession_status(), SubsessionStatus::Succeeded);
    assert!(!child.subsession_active());
}

/// A running sub-session of the harness's session, its broker `pid` (events are fed to the
/// gateway directly); the record.
async fn running_subsession(h: &Harness, pid: i32) -> crate::state::SessionRecord {
    subsession_of(h, h.start().await, pid)
}

/// A running sub-session of session `view`, as [`running_subsession`].
fn subsession_of(
    h: &Harness,
    view: crate::view::SessionView,
    pid: i32,
) -> crate::state::SessionRecord {
    let mut child = h.gateway.load(&view.native_session_id).unwrap();
    child.id = format!("ds_{pid:016}");
    child.status = crate::state::SessionStatus::Running;
    child.delegation = Some(crate::state::Delegation {
        parent_session_id: view.native_session_id.clone(),
        start_action_id: "act_start".into(),
        task_sha256: "0".repeat(64),
        runner_model: "sonnet".into(),
        end: None,
        in_flight: Vec::new(),
    });
    if let Some(broker) = child.broker.as_mut() {
        broker.pid = pid;
        broker.next_event_seq = 1;
    }
    h.gateway
        .store
        .write(|tx| {
            tx.put_session(&child)?;
            tx.put_turn(&crate::deepseek::delegated_turn(&child.id, "task"))
        })
        .unwrap();
    child
}

fn delegated_read(action_id: &str, path: &std::path::Path) -> BrokerEvent {
    BrokerEvent::DelegatedCall {
        action_id: action_id.into(),
        tool_use_id: format!("toolu_{action_id}"),
        name: "Read".into(),
        arguments: json!({"file_path": path}),
    }
}

fn refused_because(verdict: Option<Verdict>, words: &str) {
    match verdict {
        Some(Verdict::Refused { reason }) => assert!(reason.contains(words), "{reason}"),
        other => panic!("expected a refusal naming {words:?}, got {other:?}"),
    }
}

/// Issue 23/6: the gateway's answer to a delegated call or a write intent is an explicit
/// verdict decided from what it recorded; after a stop nothing of the sub-session is approved,
/// a re-sent event gets the same answer, and an unknown broker or action a refusal.
#[tokio::test]
async fn delegated_calls_and_write_intents_get_explicit_verdicts() {
    let h = Harness::new();
    let pid = 4242;
    let child = running_subsession(&h, pid).await;
    let file = h.project.join("a.txt");
    let event = |seq, e| h.gateway.on_broker_event(&child.id, pid, seq, e).unwrap();

    assert_eq!(
        event(1, delegated_read("act_1", &file)),
        Some(Verdict::Approved)
    );
    // Re-sent after a reconnect (already applied): the same answer from the record.
    assert_eq!(
        event(1, delegated_read("act_1", &file)),
        Some(Verdict::Approved)
    );
    // Events that ask for nothing get no verdict.
    let started = BrokerEvent::RunnerStarted {
        generation: 1,
        started_at_ms: 0,
        resumed: false,
    };
    assert_eq!(event(2, started), None);
    // A write intent for an action nobody approved.
    let prepared = |action_id: &str| common::protocol::PreparedWrite {
        action_id: action_id.into(),
        path: file.display().to_string(),
        pre_sha256: None,
        post_sha256: "0".repeat(64),
        temp_name: ".ngw-tmp-x".into(),
        pre_identity: None,
    };
    refused_because(
        event(3, BrokerEvent::WritePrepared(prepared("act_nope"))),
        "no approved action of this session",
    );
    // Another broker's events are never approved.
    refused_because(
        h.gateway
            .on_broker_event(&child.id, pid + 1, 9, delegated_read("act_9", &file))
            .unwrap(),
        "not the session's current runtime",
    );

    // The sub-session is stopped: its calls and writes are refused, the approved one too.
    h.gateway.transition(&child.id, "test stop", |c| {
        Some(c.stop_requested("stop", true))
    });
    refused_because(event(4, delegated_read("act_2", &file)), "has ended");
    refused_because(event(1, delegated_read("act_1", &file)), "has ended");
    refused_because(
        event(5, BrokerEvent::WritePrepared(prepared("act_1"))),
        "has ended",
    );
    let stored = |id: &str| h.gateway.store.read(|tx| tx.action(id)).unwrap();
    assert!(stored("act_2").is_none(), "a refused call is no action");
    assert_eq!(
        stored("act_1").map(|a| a.state),
        Some(crate::state::ActionState::Approved),
        "a refused intent prepares nothing"
    );
    let kinds = h.ledger(&child.id);
    assert_eq!(
        kinds
            .iter()
            .filter(|k| *k == "write_prepare_refused")
            .count(),
        2,
        "{kinds:?}"
    );
}

/// A verdict goes before its ack; a broker older than verdicts that is refused something gets
/// no further ack on that link (acks are cumulative: the next would approve it) and a stop.
#[test]
fn verdicts_precede_acks_and_an_old_broker_is_never_acknowledged_a_refusal() {
    use crate::session::supervision::EventAnswers;
    use common::protocol::GatewayToBroker;
    let refused = || {
        Some(Verdict::Refused {
            reason: "no".into(),
        })
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut drain = || {
        let mut sent = Vec::new();
        while let Ok(m) = rx.try_recv() {
            sent.push(m);
        }
        sent
    };
    let mut current = EventAnswers {
        version: common::protocol::PROTOCOL_VERSION,
        withhold_acks: false,
    };
    current.send(&tx, 1, refused());
    current.send(&tx, 2, None);
    assert_eq!(
        drain(),
        vec![
            GatewayToBroker::Verdict {
                seq: 1,
                verdict: Verdict::Refused {
                    reason: "no".into()
                }
            },
            GatewayToBroker::Ack { seq: 1 },
            GatewayToBroker::Ack { seq: 2 },
        ]
    );
    let mut old = EventAnswers {
        version: common::protocol::VERDICTS_SINCE_VERSION - 1,
        withhold_acks: false,
    };
    old.send(&tx, 1, Some(Verdict::Approved));
    old.send(&tx, 2, refused());
    old.send(&tx, 3, None);
    let sent = drain();
    assert!(
        matches!(sent[1], GatewayToBroker::Ack { seq: 1 }),
        "{sent:?}"
    );
    assert!(matches!(sent[2], GatewayToBroker::Stop { .. }), "{sent:?}");
    assert!(
        !sent[2..]
            .iter()
            .any(|m| matches!(m, GatewayToBroker::Ack { .. })),
        "{sent:?}"
    );
}

/// The record of sub-session `id`, which must have failed, and its error.
fn failed_with(h: &Harness, id: &str) -> (crate::state::SessionRecord, String) {
    let ended = h.gateway.load(id).unwrap();
    let end = ended
        .delegation
        .as_ref()
        .and_then(|d| d.end.clone())
        .unwrap();
    assert_eq!(end.status, crate::state::SubsessionStatus::Failed);
    (ended, end.error.unwrap_or_default())
}

/// Issue 23/6 (second attack): the key reaches effects only through a delegated call or a file.
/// A call whose arguments hold it once more escaped is refused, never recorded with its
/// arguments, and fails the sub-session; a committed write that leaves it in its file (a key
/// completed by a second write) fails the sub-session naming the path. No error holds the key.
#[tokio::test]
async fn a_key_in_a_delegated_call_or_a_written_file_fails_the_sub_session() {
    const KEY: &str = "sk-0123456789abcdef0123456789abcdef";
    let h = Harness::with(super::harness::Tuning {
        deepseek_key: Some(KEY),
        ..Default::default()
    });
    let pid = 4343;
    let writing = h.start_with("kw", common::tools::CapabilityProfile::DirectWrite);
    let child = subsession_of(&h, writing.await, pid);
    let file = h.project.join("k.txt");
    // Every character escaped in the decoded string: one more decoding gives the key.
    let twice: String = KEY
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    let call = BrokerEvent::DelegatedCall {
        action_id: "act_k".into(),
        tool_use_id: "toolu_k".into(),
        name: "Write".into(),
        arguments: json!({"file_path": file, "content": twice}),
    };
    let verdict = h.gateway.on_broker_event(&child.id, pid, 1, call).unwrap();
    assert!(
        matches!(verdict, Some(Verdict::Refused { .. })),
        "{verdict:?}"
    );
    assert!(
        h.gateway
            .store
            .read(|tx| tx.action("act_k"))
            .unwrap()
            .is_none()
    );
    let (_, error) = failed_with(&h, &child.id);
    assert!(
        error.contains(
            "a delegated call (Write) was refused: its arguments hold the DeepSeek API key"
        ),
        "{error}"
    );
    let kinds = h.ledger(&child.id);
    assert!(kinds.contains(&"unapproved_call".to_string()), "{kinds:?}");
    assert!(
        !kinds.contains(&"delegated_call_approved".to_string()),
        "{kinds:?}"
    );

    // A second sub-session whose Write and Edit put the key together in one file.
    let h = Harness::with(super::harness::Tuning {
        deepseek_key: Some(KEY),
        ..Default::default()
    });
    let writing = h.start_with("kw", common::tools::CapabilityProfile::DirectWrite);
    let child = subsession_of(&h, writing.await, pid);
    let file = h.project.join("split.txt");
    let write = BrokerEvent::DelegatedCall {
        action_id: "act_w".into(),
        tool_use_id: "toolu_w".into(),
        name: "Write".into(),
        arguments: json!({"file_path": file, "content": &KEY[..15]}),
    };
    assert_eq!(
        h.gateway.on_broker_event(&child.id, pid, 1, write).unwrap(),
        Some(Verdict::Approved)
    );
    std::fs::write(&file, KEY).unwrap();
    let finished = BrokerEvent::ActionFinished {
        action_id: "act_w".into(),
        outcome: common::tools::ActionOutcome {
            status: common::tools::ToolStatus::Ok,
            output: String::new(),
            truncated: false,
            error_code: None,
            receipt: common::tools::Receipt {
                action_id: "act_w".into(),
                path: Some(file.display().to_string()),
                post_sha256: Some(common::hash::sha256_hex(KEY.as_bytes())),
                ..Default::default()
            },
        },
        write: Some(common::protocol::WriteEnd::Committed),
    };
    h.gateway
        .on_broker_event(&child.id, pid, 2, finished)
        .unwrap();
    let (ended, error) = failed_with(&h, &child.id);
    assert!(
        error.contains(&format!("{} holds the DeepSeek API key", file.display()))
            && error.contains("kept as written"),
        "{error}"
    );
    assert!(!error.contains(&KEY[1..]), "{error}");
    // The session's own Read of that file: its output never carries the key on.
    let parent_id = ended.delegation.as_ref().unwrap().parent_session_id.clone();
    let mut parent = h.gateway.load(&parent_id).unwrap();
    parent.subsessions.push(child.id.clone());
    let mut read = common::tools::ActionOutcome {
        status: common::tools::ToolStatus::Ok,
        output: format!("1\t{}", &KEY[2..]),
        truncated: false,
        error_code: None,
        receipt: Default::default(),
    };
    h.gateway
        .subsessions()
        .screen_outcome(&h.gateway, &parent, &mut read);
    assert!(
        read.output
            .starts_with("output withheld: it holds the DeepSeek API key"),
        "{}",
        read.output
    );
}
