//! DeepSeek sub-sessions in process: the egress answers only a live sub-session (a session's own
//! broker gets a refusal that never leaves the gateway), a `ds_` id is no session to the public
//! tools, and a sub-session's status follows its record.

use serde_json::json;

use super::harness::Harness;
use crate::error::ErrorCode;
use crate::tools::PublicTool;

#[tokio::test]
async fn the_egress_refuses_every_broker_but_a_running_sub_sessions() {
    let h = Harness::new();
    let view = h.start().await;
    let body = json!({"model": "claude-sonnet-4-5", "messages": []}).to_string();
    let response = h.gateway.egress(&view.native_session_id, 3, &body).await;
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
    let response = h.gateway.egress("ds_nope", 4, &body).await;
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
        child.stop_request = stop.then(|| crate::view::StopRequest::now("r"));
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
