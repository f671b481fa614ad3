//! The session core's sub-session hooks with a kind of the test's own: the core calls each hook at
//! its point, for a sub-session's events only, and does what it answers (a screened-out call is
//! unrecorded and fails the sub-session, a screened outcome is what gets recorded) — nothing of it
//! depends on DeepSeek.

use std::sync::{Arc, Mutex};

use common::protocol::{BrokerEvent, EgressResponse, Verdict};
use common::tools::ActionOutcome;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::harness::{Harness, Tuning};
use crate::session::{Gateway, ScreenedOut, Subsessions};
use crate::state::{ActionRecord, SessionRecord, StoreError, Tx};

/// A sub-session kind that records which hook was called, refuses calls whose arguments hold
/// `"forbidden"`, and marks every outcome it screens.
#[derive(Default)]
struct Recording {
    calls: Mutex<Vec<String>>,
}

impl Recording {
    fn note(&self, what: String) {
        self.calls.lock().unwrap().push(what);
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl Subsessions for Recording {
    fn system_prompt(&self) -> &str {
        "recording kind"
    }

    fn screen_call(&self, _: &Gateway, name: &str, arguments: &Value) -> Result<(), ScreenedOut> {
        self.note(format!("screen_call {name}"));
        if !arguments.to_string().contains("forbidden") {
            return Ok(());
        }
        Err(ScreenedOut {
            reason: "the recording kind forbids it".into(),
            error: format!("{name} was forbidden"),
        })
    }

    fn screen_outcome(&self, _: &Gateway, session: &SessionRecord, outcome: &mut ActionOutcome) {
        self.note(format!("screen_outcome {}", session.id));
        outcome.output = format!("screened: {}", outcome.output);
    }

    fn screen_write(&self, _: &Gateway, action: &ActionRecord) -> Option<String> {
        self.note(format!("screen_write {}", action.action_id));
        None
    }

    fn turn_ended(&self, _: &Arc<Gateway>, child_id: &str, result: Option<String>, error: bool) {
        self.note(format!("turn_ended {child_id} {result:?} {error}"));
    }

    fn fail(&self, _: &Arc<Gateway>, child_id: &str, error: String) {
        self.note(format!("fail {child_id} {error}"));
    }

    fn runtime_lost(&self, _: &Gateway, child_id: &str, why: &str) {
        self.note(format!("runtime_lost {child_id} {why}"));
    }

    fn model_request<'a>(
        &'a self,
        _: &'a Gateway,
        session_id: &'a str,
        request_id: u64,
        _: &'a str,
    ) -> BoxFuture<'a, EgressResponse> {
        self.note(format!("model_request {session_id}"));
        Box::pin(async move {
            EgressResponse {
                request_id,
                status: 418,
                content_type: "text/plain".into(),
                body: String::new(),
            }
        })
    }

    fn stop_all<'a>(&'a self, _: &'a Arc<Gateway>, id: &'a str, _: &'a str) -> BoxFuture<'a, ()> {
        self.note(format!("stop_all {id}"));
        Box::pin(async {})
    }

    fn settle_at_start(&self, _: &Gateway) {
        self.note("settle_at_start".into());
    }

    fn summaries(
        &self,
        _: &Tx<'_>,
        _: &SessionRecord,
    ) -> Result<Vec<crate::view::DeepseekSubsession>, StoreError> {
        Ok(Vec::new())
    }
}

fn finished(action_id: &str) -> BrokerEvent {
    super::harness::read_finished(action_id, "hello")
}

#[tokio::test]
async fn the_core_hands_a_sub_session_to_its_kind_at_each_point() {
    let kind = Arc::new(Recording::default());
    let h = Harness::with(Tuning {
        subsessions: Some(kind.clone()),
        ..Default::default()
    });
    assert_eq!(kind.calls(), Vec::<String>::new(), "nothing before a call");
    // A session's own events reach no hook but the outcome screen.
    let view = h.start().await;
    let pid = h.pid(&view);
    let turn_ended = BrokerEvent::RunnerTurnEnded {
        subtype: "success".into(),
        is_error: false,
        result: Some("done".into()),
    };
    let session = h.gateway.load(&view.native_session_id).unwrap();
    let seq = session.broker.as_ref().unwrap().next_event_seq;
    let on = |id: &str, pid, seq, event| h.gateway.on_broker_event(id, pid, seq, event).unwrap();
    on(&session.id, pid, seq, turn_ended.clone());
    assert_eq!(kind.calls(), Vec::<String>::new());

    // A sub-session of it, as a delegation leaves it.
    let mut child = session.clone();
    child.id = "ds_00000000000000000000000000000001".into();
    child.status = crate::state::SessionStatus::Running;
    child.delegation = Some(crate::state::Delegation {
        parent_session_id: session.id.clone(),
        start_action_id: "act_start".into(),
        task_sha256: "0".repeat(64),
        runner_model: "sonnet".into(),
        end: None,
        in_flight: Vec::new(),
    });
    if let Some(broker) = child.broker.as_mut() {
        broker.next_event_seq = 1;
    }
    h.gateway
        .store
        .write(|tx| {
            tx.put_session(&child)?;
            tx.put_turn(&crate::deepseek::delegated_turn(&child.id, "task"))
        })
        .unwrap();
    let read = |action_id: &str, arguments: Value| BrokerEvent::DelegatedCall {
        action_id: action_id.into(),
        tool_use_id: format!("toolu_{action_id}"),
        name: "Read".into(),
        arguments,
    };
    let file = h.project.join("a.txt").display().to_string();
    // Let through: recorded and approved; its outcome is what the screen made of it.
    let approved = on(&child.id, pid, 1, read("act_1", json!({"file_path": file})));
    assert_eq!(approved, Some(Verdict::Approved));
    on(&child.id, pid, 2, finished("act_1"));
    let stored = h.gateway.store.read(|tx| tx.action("act_1")).unwrap();
    assert_eq!(stored.unwrap().outcome.unwrap().output, "screened: hello");
    // Screened out: never recorded, refused, and the sub-session fails with the kind's error.
    let forbidden = read("act_2", json!({"file_path": "/forbidden"}));
    assert!(matches!(
        on(&child.id, pid, 3, forbidden),
        Some(Verdict::Refused { .. })
    ));
    assert!(
        h.gateway
            .store
            .read(|tx| tx.action("act_2"))
            .unwrap()
            .is_none()
    );
    let events = h.gateway.store.read(|tx| tx.events(&child.id)).unwrap();
    let unapproved = events
        .iter()
        .find(|(_, _, kind, _)| kind == "unapproved_call")
        .expect("the refusal is in the ledger");
    assert_eq!(unapproved.3["reason"], "the recording kind forbids it");
    on(&child.id, pid, 4, turn_ended);
    assert_eq!(
        kind.calls(),
        vec![
            "screen_call Read".to_string(),
            format!("screen_outcome {}", child.id),
            "screen_call Read".to_string(),
            format!("fail {} Read was forbidden", child.id),
            format!("turn_ended {} Some(\"done\") false", child.id),
        ]
    );

    // A restarted gateway settles the kind's half-done work before re-adopting anything.
    let before = kind.calls().len();
    let restarted = h.restarted();
    restarted.adopt_all().await;
    assert_eq!(
        kind.calls().get(before).map(String::as_str),
        Some("settle_at_start")
    );
    // Its runner's prompt is the kind's.
    assert_eq!(restarted.subsessions().system_prompt(), "recording kind");
}
