//! Test helpers: a broker state with a throwaway spec, and HTTP calls into its routers.

use std::sync::Arc;

use axum::body::Body;
use common::protocol::BrokerSpec;
use common::tools::{CapabilityProfile, SubagentPolicy};
use http::Request;
use serde_json::Value;
use tower::ServiceExt;

use crate::state::BrokerState;

pub const RUNNER_TOKEN: &str = "rnr_test_token";

pub fn state(dir: &std::path::Path) -> Arc<BrokerState> {
    Arc::new(state_value(dir))
}

/// A broker state whose executor waits at most `timeout` for the gateway's acknowledgement.
pub fn state_with_ack_timeout(
    dir: &std::path::Path,
    timeout: std::time::Duration,
) -> Arc<BrokerState> {
    let mut state = state_value(dir);
    state.action_ack_timeout = timeout;
    Arc::new(state)
}

/// A DeepSeek sub-session's broker state (its calls are approved by the gateway's verdicts).
pub fn delegated_state(dir: &std::path::Path) -> Arc<BrokerState> {
    let mut spec = state_value(dir).spec;
    spec.delegation = Some(common::protocol::DelegationSpec {
        parent_session_id: "ns_parent".into(),
        runner_model: "sonnet".into(),
    });
    Arc::new(BrokerState::new(spec).unwrap())
}

fn state_value(dir: &std::path::Path) -> BrokerState {
    let spec = BrokerSpec {
        session_id: "ns_test".into(),
        claude_session_id: "00000000-0000-4000-8000-000000000000".into(),
        generation: 1,
        resume: false,
        profile: CapabilityProfile::ReadOnly,
        subagent_policy: SubagentPolicy::None,
        working_directory: dir.display().to_string(),
        working_directory_identity: None,
        runtime_dir: dir.display().to_string(),
        socket_path: dir.join("b.sock").display().to_string(),
        secret: "brk_secret".into(),
        runner_token: RUNNER_TOKEN.into(),
        claude_bin: "/nonexistent".into(),
        system_prompt: String::new(),
        owner_home: dir.join("home").display().to_string(),
        state_dir: dir.join("state").display().to_string(),
        extra_protected: Vec::new(),
        worktree_dir: None,
        runner_confinement: Default::default(),
        helper_sha256: None,
        gateway_install_path: None,
        command_limits: Default::default(),
        autorun_allowed: Vec::new(),
        strict_hooks: false,
        command_path: None,
        merge_target: None,
        delegation: None,
    };
    BrokerState::new(spec).unwrap()
}

/// POST `body` to `path` on `router`; returns status and body text. The future owns its inputs,
/// so it can be spawned.
pub fn post(
    router: axum::Router,
    path: &str,
    headers: &[(&str, &str)],
    body: &Value,
) -> impl std::future::Future<Output = (u16, String)> + Send + 'static {
    let mut request = Request::post(path).header("content-type", "application/json");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let request = request.body(Body::from(body.to_string())).unwrap();
    async move {
        let response = router.oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&bytes).to_string())
    }
}

/// The sequence number of the next frame on a gateway link, which must be an event and arrive
/// within 5 s.
pub async fn next_event_seq(
    link: &mut tokio_util::codec::Framed<
        tokio::net::UnixStream,
        tokio_util::codec::LengthDelimitedCodec,
    >,
) -> u64 {
    use futures::StreamExt;
    let frame = tokio::time::timeout(std::time::Duration::from_secs(5), link.next())
        .await
        .expect("no frame within 5 s")
        .expect("the link closed")
        .expect("unreadable frame");
    match common::codec::decode::<common::protocol::BrokerToGateway>(&frame) {
        Ok(common::protocol::BrokerToGateway::Event { seq, .. }) => seq,
        other => panic!("expected an event, got {other:?}"),
    }
}
