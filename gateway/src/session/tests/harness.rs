//! A gateway over a temporary state dir and a [`FakeHost`], with the calls a scripted ChatGPT
//! makes and the events a scripted broker sends.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::protocol::{BrokerEvent, GatewayToBroker, ReplyRelease, TurnContent, TurnRequest};
use common::tools::CapabilityProfile;
use serde_json::{Value, json};

use super::fake_host::FakeHost;
use crate::config::{Config, HttpLimits};
use crate::error::{ErrorCode, ToolError};
use crate::session::{Gateway, Subsessions};
use crate::state::Store;
use crate::tools::PublicTool;
use crate::view::SessionView;

pub struct Harness {
    pub gateway: Arc<Gateway>,
    pub host: Arc<FakeHost>,
    /// The sub-session kind registered, kept for a restarted gateway.
    subsessions: Arc<dyn Subsessions>,
    pub project: PathBuf,
    /// Keeps the state dir, home and project alive.
    _dir: tempfile::TempDir,
}

/// What to change in the default test configuration.
pub struct Tuning {
    pub lease_ttl: Duration,
    pub max_live_sessions: usize,
    pub skill_allowlist: crate::skills::SkillAllowlist,
    /// Protected entries, relative to the test's temporary directory.
    pub extra_protected: Vec<PathBuf>,
    /// `DEEPSEEK_API_KEY` as the gateway read it.
    pub deepseek_key: Option<&'static str>,
    /// The sub-session kind registered (`None`: DeepSeek's, as `crate::open` registers it).
    pub subsessions: Option<Arc<dyn Subsessions>>,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            lease_ttl: Duration::from_secs(600),
            max_live_sessions: 8,
            skill_allowlist: Default::default(),
            extra_protected: Vec::new(),
            deepseek_key: Some("sk-test-key"),
            subsessions: None,
        }
    }
}

pub fn config(dir: &std::path::Path, tuning: &Tuning) -> Config {
    let state_dir = dir.join("state");
    for sub in ["auth", "run", "worktrees"] {
        crate::private_files::private_dir(&state_dir.join(sub)).unwrap();
    }
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    Config {
        worktree_dir: state_dir.join("worktrees"),
        state_dir,
        access_token: "token".into(),
        lease_ttl: tuning.lease_ttl,
        reply_wait: Duration::from_millis(200),
        claude_bin: PathBuf::from("/bin/true"),
        exe: Arc::new(
            sandbox::pinned_exe::PinnedExe::pin(std::path::Path::new("/bin/true")).unwrap(),
        ),
        install_path: PathBuf::from("/bin/true"),
        command_limits: Default::default(),
        command_path: sandbox::command::FIXED_PATH.into(),
        max_live_sessions: tuning.max_live_sessions,
        state_max_mb: 1 << 20,
        retention: Duration::from_secs(14 * 24 * 3600),
        owner_home: home,
        extra_protected: tuning.extra_protected.iter().map(|p| dir.join(p)).collect(),
        autorun_allowed: Default::default(),
        strict_hooks: false,
        instance_lock: None,
        allowed_hosts: Vec::new(),
        http: HttpLimits::default(),
        skill_allowlist: tuning.skill_allowlist.clone(),
        deepseek: crate::deepseek::route::DeepseekRoute::for_tests(
            "http://127.0.0.1:9/anthropic",
            tuning.deepseek_key,
        ),
    }
}

impl Harness {
    pub fn new() -> Self {
        Self::with(Tuning::default())
    }

    pub fn with(tuning: Tuning) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("project");
        std::fs::create_dir_all(&project).unwrap();
        std::fs::write(project.join("a.txt"), "hello\n").unwrap();
        let config = config(dir.path(), &tuning);
        let store = Store::open(&config.state_dir).unwrap();
        let host = FakeHost::new();
        // One server key for the store and the gateway, as `crate::open` has it.
        let key = crate::config::load_or_create_server_key(&config.state_dir).unwrap();
        let subsessions = tuning
            .subsessions
            .clone()
            .unwrap_or_else(|| Arc::new(crate::deepseek::Deepseek::new()));
        let gateway = Gateway::new(store, config, key, host.clone(), subsessions.clone());
        Harness {
            gateway,
            host,
            subsessions,
            project,
            _dir: dir,
        }
    }

    /// A second gateway over the same state and brokers: a restarted gateway.
    pub fn restarted(&self) -> Arc<Gateway> {
        // The first one's signed head written (one gateway per state dir; no two head writers).
        self.gateway.store.flush_head();
        let config = self.gateway.config.clone();
        let store = Store::open(&config.state_dir).unwrap();
        let key = crate::config::load_or_create_server_key(&config.state_dir).unwrap();
        Gateway::new(
            store,
            config,
            key,
            self.host.clone(),
            self.subsessions.clone(),
        )
    }

    pub async fn call(&self, tool: PublicTool, arguments: Value) -> Result<SessionView, ToolError> {
        tool.call(&self.gateway, arguments).await
    }

    /// A start that does not wait; the profile as given.
    pub async fn start_with(&self, key: &str, profile: CapabilityProfile) -> SessionView {
        self.call(
            PublicTool::Start,
            json!({
                "prompt": "look around",
                "working_directory": self.project,
                "idempotency_key": key,
                "capability_profile": profile,
                "wait_seconds": 0,
            }),
        )
        .await
        .unwrap()
    }

    pub async fn start(&self) -> SessionView {
        self.start_with("k1", CapabilityProfile::ReadOnly).await
    }

    /// The broker of the session's latest spawn.
    pub fn pid(&self, view: &SessionView) -> i32 {
        self.host
            .spawns()
            .iter()
            .rev()
            .find(|s| s.session_id == view.native_session_id)
            .expect("a broker was spawned")
            .pid
    }

    /// The broker reports an event and the gateway acknowledges it; what it sent meanwhile.
    pub async fn event(&self, pid: i32, seq: u64, event: BrokerEvent) -> Vec<GatewayToBroker> {
        self.host.emit(pid, seq, event);
        self.host.until_ack(pid, seq).await
    }

    /// The runner starts and asks for its first turn (events 1 and 2).
    pub async fn runner_asks(&self, pid: i32, fingerprint: &str) {
        self.event(
            pid,
            1,
            BrokerEvent::RunnerStarted {
                generation: 1,
                started_at_ms: 0,
                resumed: false,
            },
        )
        .await;
        self.event(pid, 2, prompt_turn(fingerprint, "look around"))
            .await;
    }

    pub async fn status(&self, view: &SessionView) -> Result<SessionView, ToolError> {
        self.call(
            PublicTool::Status,
            json!({
                "native_session_id": view.native_session_id,
                "lease_id": view.lease_id,
            }),
        )
        .await
    }

    pub async fn reply(
        &self,
        view: &SessionView,
        reply_id: &str,
        text: &str,
        calls: Value,
    ) -> Result<SessionView, ToolError> {
        let turn_id = view
            .pending_turn
            .as_ref()
            .map(|t| t.turn_id.clone())
            .unwrap_or_default();
        self.call(
            PublicTool::ReplyAndWait,
            json!({
                "native_session_id": view.native_session_id,
                "lease_id": view.lease_id,
                "turn_id": turn_id,
                "reply_id": reply_id,
                "text": text,
                "tool_calls": calls,
            }),
        )
        .await
    }

    pub async fn stop(
        &self,
        view: &SessionView,
        request_id: &str,
    ) -> Result<SessionView, ToolError> {
        self.call(
            PublicTool::Stop,
            json!({
                "native_session_id": view.native_session_id,
                "lease_id": view.lease_id,
                "request_id": request_id,
            }),
        )
        .await
    }

    pub async fn recover(
        &self,
        view: &SessionView,
        token: &str,
        id: &str,
    ) -> Result<SessionView, ToolError> {
        self.call(
            PublicTool::Recover,
            json!({
                "native_session_id": view.native_session_id,
                "recovery_token": token,
                "recovery_id": id,
            }),
        )
        .await
    }

    /// The next reply the gateway released to broker `pid`.
    pub async fn next_reply(&self, pid: i32) -> ReplyRelease {
        loop {
            if let GatewayToBroker::Reply(release) = self.host.next_sent(pid).await {
                return release;
            }
        }
    }

    /// A direct_write session whose first reply approved one Write of `content` to `a.txt`:
    /// its view, its broker, and the write's action id.
    pub async fn approved_write(&self, content: &str) -> (SessionView, i32, String) {
        let view = self.start_with("k1", CapabilityProfile::DirectWrite).await;
        let pid = self.pid(&view);
        self.runner_asks(pid, "f1").await;
        let view = self.status(&view).await.unwrap();
        let path = self.project.join("a.txt");
        let write =
            json!([{"name": "Write", "arguments": {"file_path": path, "content": content}}]);
        self.reply(&view, "r1", "w", write).await.unwrap();
        let action_id = self.next_reply(pid).await.calls[0].action_id.clone();
        (view, pid, action_id)
    }

    /// The ledger's event kinds of a session, oldest first (without the records of the
    /// covered rows' columns).
    pub fn ledger(&self, session_id: &str) -> Vec<String> {
        ledger_of(&self.gateway, session_id)
    }
}

/// The ledger's event kinds of a session as `gateway` reads them, oldest first (without the
/// records of the covered rows' columns). After [`Harness::restarted`], read through the
/// restarted gateway: to the first one, the second's writes are another writer's.
pub fn ledger_of(gateway: &Gateway, session_id: &str) -> Vec<String> {
    gateway
        .store
        .read(|tx| tx.events(session_id))
        .unwrap()
        .into_iter()
        .map(|(_, _, kind, _)| kind)
        .filter(|kind| kind != common::ledger_chain::ROWS_RECORDED)
        .collect()
}

/// A runner request for a prompt turn.
pub fn prompt_turn(fingerprint: &str, text: &str) -> BrokerEvent {
    BrokerEvent::TurnRequested(TurnRequest {
        fingerprint: fingerprint.into(),
        content: TurnContent::Prompt { text: text.into() },
    })
}

/// A runner request for a tool-results turn.
pub fn results_turn(fingerprint: &str) -> BrokerEvent {
    BrokerEvent::TurnRequested(TurnRequest {
        fingerprint: fingerprint.into(),
        content: TurnContent::ToolResults {
            results: Vec::new(),
        },
    })
}

/// The refusal's code.
/// The broker reports read-only action `action_id` done with `output`.
pub fn read_finished(action_id: &str, output: &str) -> BrokerEvent {
    BrokerEvent::ActionFinished {
        action_id: action_id.into(),
        outcome: common::tools::ActionOutcome {
            status: common::tools::ToolStatus::Ok,
            output: output.into(),
            truncated: false,
            error_code: None,
            receipt: common::tools::Receipt {
                action_id: action_id.into(),
                duration_ms: 1,
                ..Default::default()
            },
        },
        write: None,
    }
}

pub fn code<T: std::fmt::Debug>(result: Result<T, ToolError>) -> ErrorCode {
    result.expect_err("the call is refused").code
}
