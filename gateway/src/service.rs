//! The gateway's session logic behind the six public tools: validation, leases, idempotency, the
//! turn hand-off with each session's broker, and the SessionView. Every state change is one SQLite
//! transaction that also appends to the ledger, and wakes whoever waits on the session.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use broker::executor::failpoint::Failpoint;
use common::hash::{canonical_json, canonical_sha256, hmac_hex, sha256_hex};
use common::protocol::{
    ApprovedCall, BrokerEvent, GatewayToBroker, PromptRelease, ReplyRelease, TurnContent, WriteEnd,
};
use common::time::{now_unix_ms, rfc3339_ms};
use common::tools::{CapabilityProfile, LogicalTool, SubagentPolicy, ToolStatus};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::config::Config;
use crate::error::{ErrorCode, ToolError};
use crate::state::{
    ActionRecord, ActionState, BrokerRecord, CurrentRun, LastResult, ReplyRecord, SessionRecord,
    SessionStatus, Store, StoreError, TurnBody, TurnRecord, TurnStatus, Tx,
};
use crate::view::{
    CurrentRunView, LastResultView, LaunchError, LaunchErrorCode, NetworkBoundary, PendingTurn,
    REPLY_BUDGET_BYTES, SessionView, StopRequest, Terminal, ToolResultView, Workspace,
    WorkspaceKind,
};

/// Broker events that are recorded in the ledger but change nothing ChatGPT sees, so they do not
/// bump the session's revision (and do not wake `status` waiters).
const LEDGER_ONLY_EVENTS: &[&str] = &[
    "reply_delivered",
    "prompt_delivered",
    "action_committed",
    "write_prepared",
    "write_not_applied",
    "unapproved_call",
    "side_request_answered_locally",
    "broker_exiting",
    "turn_request_retried",
    "turn_request_ignored",
    "unknown_broker_event",
];

/// Most tool calls in one reply.
const MAX_CALLS_PER_REPLY: usize = 64;
/// Longest a start waits for the runner's first turn by default.
pub const DEFAULT_START_WAIT: u64 = 30;
/// Longest `stop` waits for the runner to exit.
const STOP_WAIT: Duration = Duration::from_secs(15);
/// How long a broker has to carry out a stop or an expiry before the gateway stops it by signal:
/// above its own worst case (5 s grace for the runner, then up to 3 s for the gateway to take
/// its last event when it was stopped by a signal, without a link).
const STOP_ENFORCE_AFTER: Duration = Duration::from_secs(12);
/// Brokers re-adopted at once at start-up.
const ADOPT_CONCURRENCY: usize = 16;
/// Between SIGTERM and SIGKILL when the gateway stops a broker itself.
const BROKER_TERM_GRACE: Duration = Duration::from_secs(2);
/// How long a SIGKILLed broker may take to disappear.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// `terminal.detail` of a stop the gateway had to finish by killing the broker.
const FORCED_STOP_DETAIL: &str = "the broker did not stop in time and was killed, with its runner";

/// How [`Gateway::stop_broker`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BrokerStop {
    /// Gone within the grace period (or already gone).
    Exited,
    /// It had to be killed.
    Killed,
    /// Still there after SIGKILL (stuck in the kernel).
    StillThere,
}
/// Every call answers within this budget, whatever it had to do first (launching a broker,
/// re-attaching one): ChatGPT abandons a tool call after about 60 s.
const CALL_BUDGET: Duration = Duration::from_secs(50);

/// How long a call that began at `started` may still wait, at most `wanted`.
fn within_budget(started: tokio::time::Instant, wanted: Duration) -> Duration {
    wanted.min(CALL_BUDGET.saturating_sub(started.elapsed()))
}

/// What the gateway keeps in memory per session: a revision signal for waiters, the broker link,
/// and a lock that serialises public operations on the session.
pub struct LiveSession {
    revision: watch::Sender<u64>,
    /// The current broker link and its number (a re-attach replaces it).
    link: Mutex<Option<(u64, mpsc::UnboundedSender<GatewayToBroker>)>>,
    next_link_id: std::sync::atomic::AtomicU64,
    pub op_lock: tokio::sync::Mutex<()>,
    /// The gateway is killing this session's broker to finish a stop: the link's end then says
    /// so in the session's final state.
    stop_enforced: std::sync::atomic::AtomicBool,
}

impl LiveSession {
    fn send(&self, message: GatewayToBroker) -> bool {
        let link = self.link.lock().unwrap_or_else(|p| p.into_inner());
        link.as_ref()
            .is_some_and(|(_, tx)| tx.send(message).is_ok())
    }

    pub fn attached(&self) -> bool {
        let link = self.link.lock().unwrap_or_else(|p| p.into_inner());
        link.as_ref().is_some_and(|(_, tx)| !tx.is_closed())
    }

    /// Make `tx` the session's broker link; returns its number.
    pub fn set_link(&self, tx: mpsc::UnboundedSender<GatewayToBroker>) -> u64 {
        let id = self
            .next_link_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *self.link.lock().unwrap_or_else(|p| p.into_inner()) = Some((id, tx));
        self.revision.send_modify(|_| {});
        id
    }

    /// Drop link `id` if it is still the current one; returns whether it was.
    pub fn clear_link(&self, id: u64) -> bool {
        let mut link = self.link.lock().unwrap_or_else(|p| p.into_inner());
        if link.as_ref().is_some_and(|(current, _)| *current == id) {
            *link = None;
            drop(link);
            self.revision.send_modify(|_| {});
            return true;
        }
        false
    }
}

/// The gateway core shared by the MCP layer and the broker links.
pub struct Gateway {
    pub store: Store,
    pub config: Config,
    server_key: String,
    live: Mutex<HashMap<String, Arc<LiveSession>>>,
    /// Set when `gateway serve` is stopping: waits end at once, new calls are refused.
    pub drain: crate::drain::Drain,
}

/// A skill to freeze into a new session (`skill_contexts` of `native_session_start`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillContext {
    /// The skill's id.
    pub skill_id: String,
}

/// Validated input of `native_session_start`.
pub struct StartRequest {
    pub prompt: String,
    pub working_directory: String,
    pub idempotency_key: String,
    pub capability_profile: CapabilityProfile,
    pub subagent_policy: SubagentPolicy,
    pub session_label: Option<String>,
    pub skill_contexts: Vec<SkillContext>,
    pub wait_seconds: u64,
    /// Canonical hash of the request, without `wait_seconds`.
    pub request_hash: String,
}

/// One tool call in a reply, as ChatGPT sent it.
pub struct ReplyCall {
    pub name: String,
    pub arguments: Value,
}

type ToolResult<T> = Result<T, ToolError>;

fn store_err(err: StoreError) -> ToolError {
    ToolError::from(err)
}

impl Gateway {
    pub fn new(store: Store, config: Config, server_key: String) -> Arc<Gateway> {
        Arc::new(Gateway {
            store,
            config,
            server_key,
            live: Mutex::new(HashMap::new()),
            drain: crate::drain::Drain::default(),
        })
    }

    pub fn live(&self, session_id: &str) -> Arc<LiveSession> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.entry(session_id.to_string())
            .or_insert_with(|| {
                Arc::new(LiveSession {
                    revision: watch::channel(0).0,
                    link: Mutex::new(None),
                    next_link_id: std::sync::atomic::AtomicU64::new(1),
                    op_lock: tokio::sync::Mutex::new(()),
                    stop_enforced: std::sync::atomic::AtomicBool::new(false),
                })
            })
            .clone()
    }

    fn lease_id(&self, session_id: &str, generation: u32) -> String {
        format!(
            "lease_{}",
            &hmac_hex(
                &self.server_key,
                &format!("lease:{session_id}:{generation}")
            )[..40]
        )
    }

    fn recovery_token(&self, session_id: &str) -> String {
        format!(
            "rec_{}",
            hmac_hex(&self.server_key, &format!("recovery:{session_id}"))
        )
    }

    /// Load a session or answer `not_found`.
    pub(crate) fn session(&self, tx: &Tx<'_>, session_id: &str) -> ToolResult<SessionRecord> {
        tx.session(session_id)?.ok_or_else(|| {
            ToolError::new(
                ErrorCode::NotFound,
                format!(
                    "no session {session_id:?}; check native_session_id or start a new session"
                ),
            )
        })
    }

    /// Persist a changed session: bump its revision and append the ledger event.
    pub(crate) fn commit(
        &self,
        tx: &Tx<'_>,
        session: &mut SessionRecord,
        kind: &str,
        data: Value,
    ) -> Result<(), StoreError> {
        session.revision += 1;
        tx.put_session(session)?;
        tx.append_event(Some(&session.id), kind, &data)
    }

    pub(crate) fn notify(&self, session: &SessionRecord) {
        self.live(&session.id)
            .revision
            .send_replace(session.revision);
    }

    /// Check the lease, renew it, and return the session.
    fn authenticate(&self, session_id: &str, lease_id: &str) -> ToolResult<SessionRecord> {
        let now = now_unix_ms();
        let ttl = self.config.lease_ttl.as_millis() as i64;
        self.store.write(|tx| {
            let mut session = self.session(tx, session_id)?;
            let hash = sha256_hex(lease_id.as_bytes());
            let lease = tx.lease(&hash)?;
            let Some(lease) = lease.filter(|l| l.session_id == session_id && !l.revoked) else {
                return Err(ToolError::new(
                    ErrorCode::LeaseInvalid,
                    "this lease_id is not the session's current lease; use the lease_id from the \
                     latest answer, or call native_session_recover with the recovery token",
                ));
            };
            if lease.expires_at_ms <= now {
                return Err(ToolError::new(
                    ErrorCode::LeaseExpired,
                    "the lease expired, and with it the session: its runner is stopped. Start a \
                     new session; native_session_recover with the recovery token gives a lease to \
                     read the final state",
                ));
            }
            tx.renew_lease(&hash, now + ttl)?;
            session.lease_expires_at_ms = now + ttl;
            tx.put_session(&session)?;
            Ok(session)
        })
    }

    /// The answer recorded under (scope, key): a replay of the same request, or a conflict.
    /// A request still in progress (claimed, answer not yet recorded) replays the current view.
    fn replayed(
        &self,
        scope: &str,
        key: &str,
        request_hash: &str,
    ) -> ToolResult<Option<SessionView>> {
        let row = self
            .store
            .read(|tx| tx.idempotency(scope, key).map_err(store_err))?;
        let Some(row) = row else { return Ok(None) };
        if row.request_hash != request_hash {
            return Err(ToolError::new(
                ErrorCode::IdempotencyConflict,
                format!(
                    "{key:?} was already used for a different request; use a new key for a new \
                     request, or resend the original arguments to get its answer again"
                ),
            ));
        }
        let mut view: SessionView = if row.answer.get("in_progress").is_some() {
            let sid = row.session_id.unwrap_or_default();
            let session = self.store.read(|tx| self.session(tx, &sid))?;
            self.view(&session, None)?
        } else {
            serde_json::from_value(row.answer.clone()).map_err(|e| {
                ToolError::new(
                    ErrorCode::Internal,
                    format!(
                        "the stored answer of this request is unreadable ({e}); send the request \
                         again with a new key"
                    ),
                )
            })?
        };
        let generation = row.answer["lease_generation"].as_u64().unwrap_or(1) as u32;
        view.replay = true;
        view.lease_id = Some(self.lease_id(&view.native_session_id, generation));
        if scope == "start" {
            view.recovery_token = Some(self.recovery_token(&view.native_session_id));
        }
        Ok(Some(view))
    }

    /// Claim (scope, key) for a request inside the transaction that carries it out, so a
    /// concurrent duplicate can never run it twice. Err(conflict-or-replay) if already claimed.
    fn claim(
        &self,
        tx: &Tx<'_>,
        scope: &str,
        key: &str,
        request_hash: &str,
        session_id: &str,
        generation: u32,
    ) -> ToolResult<()> {
        if tx.idempotency(scope, key)?.is_some() {
            return Err(ToolError::new(
                ErrorCode::Busy,
                "an identical request is already being handled; send it again to get its answer",
            ));
        }
        tx.put_idempotency(
            scope,
            key,
            request_hash,
            Some(session_id),
            &json!({"in_progress": true, "lease_generation": generation}),
        )?;
        Ok(())
    }

    /// Record the answer of a claimed request. Lease id and recovery token are not stored; they
    /// are derived again on replay.
    fn remember(&self, scope: &str, key: &str, view: &SessionView, generation: u32) {
        let mut answer = serde_json::to_value(view).unwrap_or(Value::Null);
        answer["lease_id"] = Value::Null;
        answer["replay"] = json!(false);
        if let Some(map) = answer.as_object_mut() {
            map.remove("recovery_token");
        }
        answer["lease_generation"] = json!(generation);
        if let Err(err) = self
            .store
            .write(|tx| tx.replace_idempotency_answer(scope, key, &answer))
        {
            tracing::error!("recording idempotent answer: {err}");
        }
    }

    /// Build the public view of a session.
    pub fn view(
        &self,
        session: &SessionRecord,
        lease_id: Option<String>,
    ) -> ToolResult<SessionView> {
        let pending_turn = match &session.pending_turn_id {
            Some(turn_id) => self
                .store
                .read(|tx| self.pending_turn_view(tx, session, turn_id))?,
            None => None,
        };
        Ok(SessionView {
            native_session_id: session.id.clone(),
            session_label: session.label.clone(),
            status: session.status.as_str().to_string(),
            revision: session.revision,
            replay: false,
            route: "chatgpt-main".into(),
            fallback: "none".into(),
            lease_id,
            lease_expires_at: Some(rfc3339_ms(session.lease_expires_at_ms)),
            recovery_token: None,
            capability_profile: session.profile,
            subagent_policy: session.subagent_policy,
            source_directory: session.source_directory.clone(),
            working_directory: session.working_directory.clone(),
            workspace: session.workspace.clone(),
            claude_session_id: session.claude_session_id.clone(),
            current_run: session.current_run.as_ref().map(|run| CurrentRunView {
                generation: run.generation,
                state: run.state.clone(),
                started_at: run.started_at.clone(),
                exit_code: run.exit_code,
            }),
            runtime_attached: self.live(&session.id).attached(),
            recovery_required: session.recovery_required,
            pending_turn,
            last_result: session.last_result.as_ref().map(|r| LastResultView {
                turn_id: r.turn_id.clone(),
                text: r.text.clone(),
                at: r.at.clone(),
            }),
            launch_error: session.launch_error.clone(),
            stop_request: session.stop_request.clone(),
            terminal: session.terminal.clone(),
            network_boundary: session.network_boundary.clone(),
            skill_snapshot: session.skill_snapshot.clone(),
            deepseek_route: "disabled".into(),
            deepseek_subsessions: Vec::new(),
            active_deepseek_subsession_id: None,
        })
    }

    fn pending_turn_view(
        &self,
        tx: &Tx<'_>,
        session: &SessionRecord,
        turn_id: &str,
    ) -> ToolResult<Option<PendingTurn>> {
        let Some(turn) = tx.turn(turn_id)? else {
            return Ok(None);
        };
        let allowed_tools = LogicalTool::offered(session.profile, session.subagent_policy)
            .into_iter()
            .map(|t| t.name().to_string())
            .collect();
        let (kind, prompt, tool_results) = match &turn.body {
            TurnBody::Prompt {
                text,
                interrupted_turn_id,
            } => {
                // Results of calls an interrupted runner never reported (a write resolved after
                // a crash, a call that never ran) come with the next prompt turn.
                let results = match interrupted_turn_id {
                    Some(id) => Some(
                        tx.actions_for_turn(id)?
                            .into_iter()
                            .map(|action| tool_result_view(&action, &[]))
                            .collect(),
                    ),
                    None => None,
                };
                ("prompt", Some(text.clone()), results)
            }
            TurnBody::ToolResults {
                previous_turn_id,
                runner_results,
            } => {
                let results = tx
                    .actions_for_turn(previous_turn_id)?
                    .into_iter()
                    .map(|action| tool_result_view(&action, runner_results))
                    .collect();
                ("tool_results", None, Some(results))
            }
        };
        Ok(Some(PendingTurn {
            turn_id: turn.turn_id,
            sequence: turn.sequence,
            kind: kind.into(),
            prompt,
            tool_results,
            allowed_tools,
            reply_budget_bytes: REPLY_BUDGET_BYTES,
        }))
    }

    /// Wait until `done` holds for the session, the timeout passes, or nothing can change any more.
    async fn wait_until(
        &self,
        session_id: &str,
        timeout: Duration,
        done: impl Fn(&SessionRecord) -> bool,
    ) -> ToolResult<SessionRecord> {
        let mut rx = self.live(session_id).revision.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            rx.borrow_and_update();
            let session = self.store.read(|tx| self.session(tx, session_id))?;
            if done(&session) || session.status.is_terminal() {
                return Ok(session);
            }
            // A stopping gateway answers waits with the state as it is, at once.
            tokio::select! {
                changed = tokio::time::timeout_at(deadline, rx.changed()) => match changed {
                    Ok(Ok(())) => continue,
                    _ => return Ok(session),
                },
                () = self.drain.started() => return Ok(session),
            }
        }
    }

    // ---------------------------------------------------------------- the six operations

    pub async fn start(self: &Arc<Self>, req: StartRequest) -> ToolResult<SessionView> {
        let started = tokio::time::Instant::now();
        if let Some(view) = self.replayed("start", &req.idempotency_key, &req.request_hash)? {
            return Ok(view);
        }
        let resolved = crate::validate::start(self, &req)?;
        // The session works in the directory as resolved by identity (the path checked).
        let mut req = req;
        req.working_directory = resolved.display().to_string();
        // Checked before anything is created (no worktree), and again in the transaction that
        // records the session, so concurrent starts cannot overshoot.
        self.store.read(|tx| self.ensure_session_capacity(tx))?;

        let session_id = format!("ns_{}", uuid::Uuid::new_v4().simple());
        let (working_directory, workspace, worktree) =
            self.prepare_workspace(&req, &session_id).await?;
        let now = now_unix_ms();
        let lease_expires_at_ms = now + self.config.lease_ttl.as_millis() as i64;
        let mut session = SessionRecord {
            id: session_id.clone(),
            label: req.session_label.clone(),
            status: SessionStatus::Starting,
            revision: 0,
            profile: req.capability_profile,
            subagent_policy: req.subagent_policy,
            source_directory: req.working_directory.clone(),
            working_directory,
            workspace,
            claude_session_id: uuid::Uuid::new_v4().to_string(),
            created_at_ms: now,
            lease_generation: 1,
            lease_expires_at_ms,
            current_run: None,
            pending_turn_id: None,
            last_result: None,
            launch_error: None,
            stop_request: None,
            terminal: None,
            recovery_required: false,
            network_boundary: network_boundary(),
            skill_snapshot: Vec::new(),
            broker: None,
            turn_sequence: 0,
            last_reply_turn_id: None,
            closing_reply: None,
            undelivered_prompt: None,
            undelivered_reply_turn: None,
        };
        let lease_id = self.lease_id(&session_id, 1);
        let prompt_id = format!("prompt_{}", uuid::Uuid::new_v4().simple());
        let created = self.store.write(|tx| {
            self.ensure_session_capacity(tx)?;
            self.claim(
                tx,
                "start",
                &req.idempotency_key,
                &req.request_hash,
                &session_id,
                1,
            )?;
            tx.put_session(&session)?;
            tx.insert_lease(
                &sha256_hex(lease_id.as_bytes()),
                &session_id,
                1,
                lease_expires_at_ms,
            )?;
            self.commit(
                tx,
                &mut session,
                "session_started",
                json!({
                    "profile": req.capability_profile.as_str(),
                    "working_directory": req.working_directory,
                    "prompt_id": prompt_id,
                    "prompt_sha256": sha256_hex(req.prompt.as_bytes()),
                }),
            )?;
            Ok::<_, ToolError>(())
        });
        if let Err(err) = created {
            if let Some(worktree) = &worktree {
                crate::worktree::GitRunner::new(&self.config)
                    .discard(Path::new(&req.working_directory), worktree);
            }
            // A concurrent identical start won the claim: answer as its replay.
            if let Some(view) = self.replayed("start", &req.idempotency_key, &req.request_hash)? {
                return Ok(view);
            }
            return Err(err);
        }

        let launched = crate::brokers::launch(self, &mut session, 1, false).await;
        if let Err(launch_error) = launched {
            self.store.write(|tx| {
                let mut current = self.session(tx, &session_id)?;
                current.status = SessionStatus::Failed;
                current.launch_error = Some(launch_error.clone());
                current.terminal = Some(Terminal::launch_error());
                self.commit(tx, &mut current, "launch_failed", json!(launch_error))?;
                session = current;
                Ok::<_, ToolError>(())
            })?;
            self.notify(&session);
        } else {
            self.release_prompt(&session_id, prompt_id, req.prompt.clone(), None)?;
        }

        let session = self
            .wait_until(
                &session_id,
                within_budget(started, Duration::from_secs(req.wait_seconds)),
                |s| s.pending_turn_id.is_some() || s.status == SessionStatus::Idle,
            )
            .await?;
        let mut view = self.view(&session, Some(lease_id))?;
        self.remember("start", &req.idempotency_key, &view, 1);
        view.recovery_token = Some(self.recovery_token(&session_id));
        Ok(view)
    }

    /// `busy` when `CLAUDE_TOOLS_MAX_LIVE_SESSIONS` sessions are already live (not terminal):
    /// each holds a broker and a runner (about 180 MiB).
    fn ensure_session_capacity(&self, tx: &Tx<'_>) -> ToolResult<()> {
        let live = tx.live_session_count()?;
        let max = self.config.max_live_sessions;
        if live >= max {
            return Err(ToolError::new(
                ErrorCode::Busy,
                format!(
                    "{live} sessions are live and this gateway allows at most {max} at once; \
                     nothing was started. Stop a session you no longer need with \
                     native_session_stop (or let an idle one's lease expire), then start again; \
                     the owner can raise CLAUDE_TOOLS_MAX_LIVE_SESSIONS"
                ),
            ));
        }
        Ok(())
    }

    /// Where a new session works: the directory itself (`read_only`, `direct_write`), or a new
    /// managed worktree of it (`worktree_write`). Returns the working directory, the
    /// `workspace` record, and the worktree to discard if the session is not recorded.
    async fn prepare_workspace(
        &self,
        req: &StartRequest,
        session_id: &str,
    ) -> ToolResult<(String, Workspace, Option<crate::worktree::Worktree>)> {
        let root = req.working_directory.clone();
        match req.capability_profile {
            CapabilityProfile::ReadOnly => Ok((
                root.clone(),
                Workspace::in_place(WorkspaceKind::ReadOnly, root.clone()),
                None,
            )),
            CapabilityProfile::DirectWrite => {
                let workspace = Workspace::in_place(WorkspaceKind::Direct, root.clone());
                Ok((root, workspace, None))
            }
            CapabilityProfile::WorktreeWrite => {
                let source = PathBuf::from(&root);
                let dir = self.config.worktree_dir.clone();
                let id = session_id.to_string();
                let git = crate::worktree::GitRunner::new(&self.config);
                let worktree = tokio::task::spawn_blocking(move || {
                    let base = git.check_source(&source)?;
                    git.create(&source, &dir, &id, &base)
                })
                .await
                .map_err(|err| {
                    ToolError::new(
                        ErrorCode::Internal,
                        format!(
                            "creating the worktree failed ({err}); nothing was started. Retry, or \
                             start with direct_write"
                        ),
                    )
                })??;
                let path = worktree.path.display().to_string();
                let workspace = Workspace {
                    kind: WorkspaceKind::Worktree,
                    root,
                    worktree_path: Some(path.clone()),
                    branch: Some(worktree.branch.clone()),
                    base_commit: Some(worktree.base_commit.clone()),
                };
                Ok((path, workspace, Some(worktree)))
            }
        }
    }

    /// Persist a prompt (claiming its idempotency key, if any) and release it to the broker.
    fn release_prompt(
        &self,
        session_id: &str,
        prompt_id: String,
        text: String,
        claim: Option<(&str, &str, &str)>,
    ) -> ToolResult<()> {
        let session = self.store.write(|tx| {
            let mut session = self.session(tx, session_id)?;
            if let Some((scope, key, request_hash)) = claim {
                self.claim(
                    tx,
                    scope,
                    key,
                    request_hash,
                    session_id,
                    session.lease_generation,
                )?;
            }
            session.status = SessionStatus::Running;
            session.undelivered_prompt = Some(PromptRelease {
                prompt_id: prompt_id.clone(),
                text: text.clone(),
            });
            self.commit(
                tx,
                &mut session,
                "prompt_released",
                json!({
                    "prompt_id": prompt_id, "text": text,
                }),
            )?;
            Ok::<_, ToolError>(session)
        })?;
        self.notify(&session);
        if !self
            .live(session_id)
            .send(GatewayToBroker::Prompt(PromptRelease { prompt_id, text }))
        {
            return Err(ToolError::new(
                ErrorCode::Busy,
                "the session's runtime is not attached right now; call native_session_status, \
                 and native_session_recover if it stays detached",
            ));
        }
        Ok(())
    }

    pub async fn continue_session(
        self: &Arc<Self>,
        session_id: &str,
        lease_id: &str,
        prompt: String,
        idempotency_key: &str,
        wait_seconds: u64,
        request_hash: &str,
    ) -> ToolResult<SessionView> {
        let started = tokio::time::Instant::now();
        let scope = format!("continue:{session_id}");
        let live = self.live(session_id);
        let _op = live.op_lock.lock().await;
        let session = self.authenticate(session_id, lease_id)?;
        if let Some(view) = self.replayed(&scope, idempotency_key, request_hash)? {
            return Ok(view);
        }
        if prompt.trim().is_empty() {
            return Err(ToolError::invalid(
                "prompt must not be empty; send the user's next request as prompt",
            ));
        }
        if prompt.len() as u64 > REPLY_BUDGET_BYTES {
            return Err(ToolError::invalid(
                "prompt is larger than 768 KiB; shorten it",
            ));
        }
        ensure_not_terminal(&session)?;
        if session.status != SessionStatus::Idle {
            return Err(ToolError::new(
                ErrorCode::Busy,
                format!(
                    "the session is {} — continue is possible only when it is idle; answer the \
                     pending turn with native_session_reply_and_wait or wait with native_session_status",
                    session.status.as_str()
                ),
            ));
        }
        self.ensure_runner(&session).await?;
        let prompt_id = format!("prompt_{}", uuid::Uuid::new_v4().simple());
        self.release_prompt(
            session_id,
            prompt_id,
            prompt,
            Some((&scope, idempotency_key, request_hash)),
        )?;
        drop(_op);
        let session = self
            .wait_until(
                session_id,
                within_budget(started, Duration::from_secs(wait_seconds)),
                |s| s.pending_turn_id.is_some() || s.status == SessionStatus::Idle,
            )
            .await?;
        let view = self.view(&session, Some(lease_id.to_string()))?;
        self.remember(&scope, idempotency_key, &view, session.lease_generation);
        Ok(view)
    }

    /// Make sure a verified broker with a live runner is attached before a prompt is released:
    /// re-attach the recorded broker if it is still ours, or start a new runner generation that
    /// resumes the same Claude Code conversation.
    async fn ensure_runner(self: &Arc<Self>, session: &SessionRecord) -> ToolResult<()> {
        let live = self.live(&session.id);
        let runner_alive = session
            .current_run
            .as_ref()
            .is_some_and(|run| run.state == "alive");
        if runner_alive
            && !live.attached()
            && let Some(record) = &session.broker
            && let Err(err) = crate::brokers::attach(
                self.clone(),
                &session.id,
                record,
                crate::brokers::ADOPT_CONNECT_TIMEOUT,
            )
            .await
        {
            self.mark_runtime_lost(&session.id, &format!("{err:#}"));
        }
        let session = self.store.read(|tx| self.session(tx, &session.id))?;
        let runner_alive = session
            .current_run
            .as_ref()
            .is_some_and(|run| run.state == "alive");
        if runner_alive && live.attached() {
            return Ok(());
        }
        // The runner is gone: a new generation resumes the recorded conversation. Completed
        // actions are in its transcript; nothing is re-executed.
        if let Some(record) = &session.broker {
            // Two runners must never share one transcript, and the old broker's prepared writes
            // are settled only once it is gone: it gets 8 s, then SIGKILL.
            let stopped = self
                .stop_broker(&session.id, record, Duration::ZERO, Duration::from_secs(8))
                .await;
            if stopped == BrokerStop::StillThere {
                return Err(ToolError::new(
                    ErrorCode::Busy,
                    "the session's previous runtime did not exit even when killed (it may be stuck \
                     in the kernel); no new runner is started beside it. Try again later or stop \
                     the session",
                ));
            }
        }
        // Writes the old broker left `prepared` are settled from the files before anything new
        // runs; an indeterminate one ends the session here.
        self.resolve_prepared_writes(&session.id);
        let session = self.store.read(|tx| self.session(tx, &session.id))?;
        ensure_not_terminal(&session)?;
        let generation = session.current_run.as_ref().map_or(0, |run| run.generation) + 1;
        // Releases of the old generation are not the new runner's: its broker approves nothing
        // from before and gets only the prompt that follows.
        let mut session = self.store.write(|tx| {
            let mut current = self.session(tx, &session.id)?;
            current.undelivered_prompt = None;
            current.undelivered_reply_turn = None;
            tx.put_session(&current)?;
            Ok::<_, ToolError>(current)
        })?;
        if let Err(launch_error) =
            crate::brokers::launch(self, &mut session, generation, true).await
        {
            let message = launch_error.message.clone();
            let stored = self.store.write(|tx| {
                let mut current = self.session(tx, &session.id)?;
                current.launch_error = Some(launch_error.clone());
                self.commit(
                    tx,
                    &mut current,
                    "generation_launch_failed",
                    json!(launch_error),
                )?;
                Ok::<_, ToolError>(current)
            })?;
            self.notify(&stored);
            return Err(ToolError::new(
                ErrorCode::Internal,
                format!("{message}; nothing was sent to the runner"),
            ));
        }
        let stored = self.store.write(|tx| {
            let mut current = self.session(tx, &session.id)?;
            current.recovery_required = false;
            current.launch_error = None;
            current.undelivered_prompt = None;
            current.undelivered_reply_turn = None;
            self.commit(
                tx,
                &mut current,
                "runner_generation_started",
                json!({"generation": generation}),
            )?;
            Ok::<_, ToolError>(current)
        })?;
        self.notify(&stored);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub async fn reply(
        self: &Arc<Self>,
        session_id: &str,
        lease_id: &str,
        turn_id: &str,
        reply_id: &str,
        text: String,
        calls: Vec<ReplyCall>,
        request_hash: &str,
    ) -> ToolResult<SessionView> {
        let started = tokio::time::Instant::now();
        let scope = format!("reply:{session_id}");
        let live = self.live(session_id);
        let _op = live.op_lock.lock().await;
        let session = self.authenticate(session_id, lease_id)?;
        if let Some(view) = self.replayed(&scope, reply_id, request_hash)? {
            return Ok(view);
        }
        ensure_not_terminal(&session)?;
        let size = text.len()
            + calls
                .iter()
                .map(|c| c.name.len() + canonical_json(&c.arguments).len())
                .sum::<usize>();
        if size as u64 > REPLY_BUDGET_BYTES {
            return Err(ToolError::new(
                ErrorCode::ReplyTooLarge,
                format!(
                    "the reply is {size} bytes; text plus tool calls must stay within {REPLY_BUDGET_BYTES} bytes — split the work over several turns"
                ),
            ));
        }
        if session.pending_turn_id.as_deref() != Some(turn_id) {
            let message = match &session.pending_turn_id {
                Some(pending) => {
                    format!("turn {turn_id:?} is not the pending turn; answer {pending:?}")
                }
                None => format!(
                    "turn {turn_id:?} is not pending: the session has no turn waiting for a reply \
                     (status {}); call native_session_status, or native_session_continue when idle",
                    session.status.as_str()
                ),
            };
            return Err(ToolError::new(ErrorCode::TurnMismatch, message));
        }
        if calls.len() > MAX_CALLS_PER_REPLY {
            return Err(ToolError::invalid(format!(
                "at most {MAX_CALLS_PER_REPLY} tool calls per reply; send the rest in the next turn"
            )));
        }
        let mut approved = Vec::with_capacity(calls.len());
        for (index, call) in calls.iter().enumerate() {
            let offered = LogicalTool::offered(session.profile, session.subagent_policy);
            let tool = LogicalTool::from_name(&call.name).filter(|t| offered.contains(t));
            let Some(tool) = tool else {
                let names: Vec<&str> = offered.iter().map(|t| t.name()).collect();
                let why = match LogicalTool::from_name(&call.name) {
                    Some(t) if t.permitted(session.profile, session.subagent_policy) => {
                        "is not available in this build".to_string()
                    }
                    Some(_) => {
                        format!("is not permitted in a {} session", session.profile.as_str())
                    }
                    None => "is not a known tool".to_string(),
                };
                return Err(ToolError::new(
                    ErrorCode::NotPermitted,
                    format!(
                        "tool_calls[{index}]: {:?} {why}; this session may call {}. Nothing was approved.",
                        call.name,
                        names.join(", ")
                    ),
                ));
            };
            if let Err(message) = tool.parse_args(&call.arguments) {
                return Err(ToolError::invalid(format!(
                    "tool_calls[{index}] ({}): {message}. Nothing was approved.",
                    call.name
                )));
            }
            approved.push(ApprovedCall {
                action_id: format!("act_{}", uuid::Uuid::new_v4().simple()),
                call_index: index as u32,
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
        }

        // Persist the reply and its approved actions before the broker may release them.
        let (session, release) = self.store.write(|tx| {
            let mut session = self.session(tx, session_id)?;
            // The runner may have gone since the checks above: check again where it counts.
            ensure_not_terminal(&session)?;
            if session.pending_turn_id.as_deref() != Some(turn_id) {
                return Err(ToolError::new(
                    ErrorCode::TurnMismatch,
                    format!("turn {turn_id:?} is no longer pending; call native_session_status"),
                ));
            }
            self.claim(tx, &scope, reply_id, request_hash, session_id, session.lease_generation)?;
            let mut turn = tx.turn(turn_id)?.ok_or_else(|| ToolError::new(ErrorCode::TurnMismatch, "the turn is no longer pending; call native_session_status"))?;
            turn.status = TurnStatus::Answered;
            turn.reply_id = Some(reply_id.to_string());
            tx.put_turn(&turn)?;
            tx.insert_reply(&ReplyRecord {
                session_id: session_id.to_string(),
                reply_id: reply_id.to_string(),
                turn_id: turn_id.to_string(),
                request_hash: request_hash.to_string(),
                text: text.clone(),
                calls: approved.clone(),
                created_at_ms: now_unix_ms(),
            })?;
            for call in &approved {
                tx.put_action(&ActionRecord {
                    action_id: call.action_id.clone(),
                    session_id: session_id.to_string(),
                    turn_id: turn_id.to_string(),
                    call_index: call.call_index,
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    state: ActionState::Approved,
                    outcome: None,
                    prepared: None,
                })?;
            }
            session.pending_turn_id = None;
            session.status = SessionStatus::Running;
            session.undelivered_reply_turn = Some(turn_id.to_string());
            session.closing_reply = approved.is_empty().then(|| LastResult {
                turn_id: turn_id.to_string(),
                text: text.clone(),
                at: common::time::now_rfc3339(),
            });
            self.commit(tx, &mut session, "reply_accepted", json!({
                "turn_id": turn_id, "reply_id": reply_id,
                "text_sha256": sha256_hex(text.as_bytes()),
                "actions": approved.iter().map(|c| json!({"action_id": c.action_id, "name": c.name, "arguments": c.arguments})).collect::<Vec<_>>(),
            }))?;
            let release = ReplyRelease {
                turn_id: turn_id.to_string(),
                fingerprint: turn.fingerprint.clone(),
                text: text.clone(),
                calls: approved.clone(),
            };
            Ok::<_, ToolError>((session, release))
        })?;
        self.notify(&session);
        live.send(GatewayToBroker::Reply(release));
        drop(_op);

        let session = self
            .wait_until(
                session_id,
                within_budget(started, self.config.reply_wait),
                |s| s.pending_turn_id.is_some() || s.status == SessionStatus::Idle,
            )
            .await?;
        let view = self.view(&session, Some(lease_id.to_string()))?;
        self.remember(&scope, reply_id, &view, session.lease_generation);
        Ok(view)
    }

    pub async fn status(
        self: &Arc<Self>,
        session_id: &str,
        lease_id: &str,
        wait_seconds: u64,
    ) -> ToolResult<SessionView> {
        let session = self.authenticate(session_id, lease_id)?;
        let since = session.revision;
        let session = if wait_seconds > 0 {
            self.wait_until(session_id, Duration::from_secs(wait_seconds), |s| {
                s.revision != since
            })
            .await?
        } else {
            session
        };
        self.view(&session, Some(lease_id.to_string()))
    }

    pub async fn stop(
        self: &Arc<Self>,
        session_id: &str,
        lease_id: &str,
        request_id: &str,
        reason: Option<String>,
        request_hash: &str,
    ) -> ToolResult<SessionView> {
        let started = tokio::time::Instant::now();
        let scope = format!("stop:{session_id}");
        let live = self.live(session_id);
        let _op = live.op_lock.lock().await;
        let session = self.authenticate(session_id, lease_id)?;
        if let Some(view) = self.replayed(&scope, request_id, request_hash)? {
            return Ok(view);
        }
        if !session.status.is_terminal() {
            let reason = reason.unwrap_or_else(|| "requested by ChatGPT".to_string());
            let attached = live.attached();
            let session = self.store.write(|tx| {
                let mut session = self.session(tx, session_id)?;
                self.claim(
                    tx,
                    &scope,
                    request_id,
                    request_hash,
                    session_id,
                    session.lease_generation,
                )?;
                session.stop_request = Some(StopRequest::now(reason.clone()));
                session.status = if attached {
                    SessionStatus::Stopping
                } else {
                    SessionStatus::Stopped
                };
                if !attached {
                    session.terminal = Some(Terminal::stopped(
                        Some("the runtime was not attached; nothing was running to stop"),
                        None,
                        None,
                        common::time::now_rfc3339(),
                    ));
                }
                session.pending_turn_id = None;
                self.commit(
                    tx,
                    &mut session,
                    "stop_requested",
                    json!({"reason": reason}),
                )?;
                Ok::<_, ToolError>(session)
            })?;
            self.notify(&session);
            if !live.send(GatewayToBroker::Stop { reason })
                && let Some(record) = &session.broker
            {
                // No link: stop the verified broker (and with it the runner's group) by signal.
                crate::brokers::signal_verified(record);
            }
            self.enforce_stop(session_id);
            drop(_op);
            self.wait_until(session_id, within_budget(started, STOP_WAIT), |s| {
                s.status.is_terminal()
            })
            .await?;
        } else {
            self.store.write(|tx| {
                self.claim(
                    tx,
                    &scope,
                    request_id,
                    request_hash,
                    session_id,
                    session.lease_generation,
                )
            })?;
        }
        let session = self.store.read(|tx| self.session(tx, session_id))?;
        let view = self.view(&session, Some(lease_id.to_string()))?;
        self.remember(&scope, request_id, &view, session.lease_generation);
        Ok(view)
    }

    pub async fn recover(
        self: &Arc<Self>,
        session_id: &str,
        recovery_token: &str,
        recovery_id: &str,
        wait_seconds: u64,
        request_hash: &str,
    ) -> ToolResult<SessionView> {
        let started = tokio::time::Instant::now();
        let scope = format!("recover:{session_id}");
        let live = self.live(session_id);
        let _op = live.op_lock.lock().await;
        let session = self.store.read(|tx| self.session(tx, session_id))?;
        let expected = self.recovery_token(session_id);
        if !common::hash::constant_time_eq(
            sha256_hex(expected.as_bytes()).as_bytes(),
            sha256_hex(recovery_token.as_bytes()).as_bytes(),
        ) {
            return Err(ToolError::new(
                ErrorCode::RecoveryDenied,
                "the recovery token does not match this session; nothing was changed. Use the \
                 recovery_token of native_session_start's answer for this native_session_id; \
                 without it, start a new session",
            ));
        }
        if let Some(view) = self.replayed(&scope, recovery_id, request_hash)? {
            return Ok(view);
        }
        // Verify the broker before trusting it again (invariant 2); a runtime that fails is
        // reported as lost, never faked.
        if !live.attached()
            && !session.status.is_terminal()
            && let Some(record) = &session.broker
            && let Err(err) = crate::brokers::attach(
                self.clone(),
                session_id,
                record,
                crate::brokers::ADOPT_CONNECT_TIMEOUT,
            )
            .await
        {
            self.mark_runtime_lost(session_id, &format!("{err:#}"));
        }
        let attached = live.attached();
        let generation = session.lease_generation + 1;
        let lease_id = self.lease_id(session_id, generation);
        let expires = now_unix_ms() + self.config.lease_ttl.as_millis() as i64;
        let session = self.store.write(|tx| {
            let mut session = self.session(tx, session_id)?;
            self.claim(
                tx,
                &scope,
                recovery_id,
                request_hash,
                session_id,
                generation,
            )?;
            tx.revoke_leases(session_id)?;
            tx.insert_lease(
                &sha256_hex(lease_id.as_bytes()),
                session_id,
                generation,
                expires,
            )?;
            session.lease_generation = generation;
            session.lease_expires_at_ms = expires;
            if !attached && !session.status.is_terminal() {
                session.recovery_required = true;
                if let Some(run) = session.current_run.as_mut().filter(|r| r.state == "alive") {
                    run.state = "lost".into();
                }
            }
            self.commit(
                tx,
                &mut session,
                "lease_rotated",
                json!({"generation": generation, "runtime_attached": attached}),
            )?;
            Ok::<_, ToolError>(session)
        })?;
        self.notify(&session);
        drop(_op);
        let session = if wait_seconds > 0 {
            let since = session.revision;
            self.wait_until(
                session_id,
                within_budget(started, Duration::from_secs(wait_seconds)),
                |s| s.revision != since,
            )
            .await?
        } else {
            session
        };
        let view = self.view(&session, Some(lease_id))?;
        self.remember(&scope, recovery_id, &view, generation);
        Ok(view)
    }

    // ---------------------------------------------------------------- broker events

    /// Persist one broker event; returns whether it was applied (false for a duplicate).
    /// `broker_pid` names the broker the event came from: events of a broker that is no longer
    /// the session's (an older generation still winding down) are acknowledged but not applied.
    pub fn on_broker_event(
        &self,
        session_id: &str,
        broker_pid: i32,
        seq: u64,
        event: BrokerEvent,
    ) -> Result<(), StoreError> {
        let mut after = AfterEvent::default();
        let session = self.store.write(|tx| {
            let Some(mut session) = tx.session(session_id)? else {
                return Ok(None);
            };
            let Some(broker) = session.broker.as_mut().filter(|b| b.pid == broker_pid) else {
                return Ok(None);
            };
            if seq < broker.next_event_seq {
                return Ok(None); // Already applied before a reconnect.
            }
            broker.next_event_seq = seq + 1;
            let (kind, data) = self.apply_event(tx, &mut session, event, &mut after)?;
            if !LEDGER_ONLY_EVENTS.contains(&kind) {
                self.commit(tx, &mut session, kind, data)?;
            } else {
                // Recorded in the ledger only: nothing ChatGPT sees has changed.
                tx.put_session(&session)?;
                tx.append_event(Some(&session.id), kind, &data)?;
            }
            Ok::<_, StoreError>(Some(session))
        })?;
        if let Some(point) = after.failpoint {
            // Crash tests: the record is durable, the broker has no acknowledgement yet.
            let _ = broker::executor::failpoint::hit(point);
        }
        if let Some(session) = session {
            self.notify(&session);
        }
        if let Some(reply) = after.resend {
            self.live(session_id).send(GatewayToBroker::Reply(reply));
        }
        if let Some(reason) = after.stop {
            self.live(session_id).send(GatewayToBroker::Stop { reason });
        }
        Ok(())
    }

    fn apply_event(
        &self,
        tx: &Tx<'_>,
        session: &mut SessionRecord,
        event: BrokerEvent,
        after: &mut AfterEvent,
    ) -> Result<(&'static str, Value), StoreError> {
        after.failpoint = match &event {
            BrokerEvent::WritePrepared(_) => Some(Failpoint::GatewayAfterPreparedPersisted),
            BrokerEvent::ActionFinished { write: Some(_), .. } => {
                Some(Failpoint::GatewayAfterFinishedPersisted)
            }
            _ => None,
        };
        Ok(match event {
            BrokerEvent::RunnerStarted {
                generation,
                started_at_ms,
                resumed,
            } => {
                session.current_run = Some(CurrentRun {
                    generation,
                    state: "alive".into(),
                    started_at: rfc3339_ms(started_at_ms),
                    exit_code: None,
                    signal: None,
                });
                (
                    "runner_started",
                    json!({"generation": generation, "resumed": resumed}),
                )
            }
            BrokerEvent::RunnerLaunchFailed { message } => {
                let error = LaunchError::now(LaunchErrorCode::RunnerLaunchFailed, message);
                let data = json!(error);
                session.launch_error = Some(error);
                session.status = SessionStatus::Failed;
                session.terminal = Some(Terminal::launch_error());
                ("launch_failed", data)
            }
            BrokerEvent::TurnRequested(request) => {
                if let Some(turn) = tx.turn_by_fingerprint(&session.id, &request.fingerprint)? {
                    // A retry of a request we already know: re-send the reply if it has one.
                    if let Some(reply_id) = &turn.reply_id
                        && let Some(reply) = tx.reply(&session.id, reply_id)?
                    {
                        after.resend = Some(ReplyRelease {
                            turn_id: turn.turn_id.clone(),
                            fingerprint: turn.fingerprint.clone(),
                            text: reply.text,
                            calls: reply.calls,
                        });
                    }
                    return Ok(("turn_request_retried", json!({"turn_id": turn.turn_id})));
                }
                if session.status.is_terminal() || session.status == SessionStatus::Stopping {
                    return Ok((
                        "turn_request_ignored",
                        json!({"reason": "session is stopping"}),
                    ));
                }
                session.turn_sequence += 1;
                let body = match request.content {
                    TurnContent::Prompt { text } => {
                        // The last turn's calls were answered by no tool-results turn.
                        let interrupted = match &session.last_reply_turn_id {
                            Some(id) if tx.turn_has_actions(id)? => Some(id.clone()),
                            _ => None,
                        };
                        TurnBody::Prompt {
                            text,
                            interrupted_turn_id: interrupted,
                        }
                    }
                    TurnContent::ToolResults { results } => TurnBody::ToolResults {
                        previous_turn_id: session.last_reply_turn_id.clone().unwrap_or_default(),
                        runner_results: results,
                    },
                };
                let turn = TurnRecord {
                    turn_id: format!("turn_{}", uuid::Uuid::new_v4().simple()),
                    session_id: session.id.clone(),
                    sequence: session.turn_sequence,
                    fingerprint: request.fingerprint,
                    status: TurnStatus::Pending,
                    created_at_ms: now_unix_ms(),
                    body,
                    reply_id: None,
                };
                tx.put_turn(&turn)?;
                session.pending_turn_id = Some(turn.turn_id.clone());
                session.last_reply_turn_id = Some(turn.turn_id.clone());
                session.status = SessionStatus::WaitingForGpt;
                (
                    "turn_pending",
                    json!({"turn_id": turn.turn_id, "sequence": turn.sequence}),
                )
            }
            BrokerEvent::ReplyDelivered { turn_id } => {
                if session.undelivered_reply_turn.as_deref() == Some(turn_id.as_str()) {
                    session.undelivered_reply_turn = None;
                }
                ("reply_delivered", json!({"turn_id": turn_id}))
            }
            BrokerEvent::PromptDelivered { prompt_id } => {
                if session
                    .undelivered_prompt
                    .as_ref()
                    .is_some_and(|p| p.prompt_id == prompt_id)
                {
                    session.undelivered_prompt = None;
                }
                ("prompt_delivered", json!({"prompt_id": prompt_id}))
            }
            BrokerEvent::WritePrepared(prepared) => {
                if let Some(mut action) = tx
                    .action(&prepared.action_id)?
                    .filter(|a| a.session_id == session.id && a.state == ActionState::Approved)
                {
                    action.state = ActionState::Prepared;
                    action.prepared = Some(prepared.clone());
                    tx.put_action(&action)?;
                }
                (
                    "write_prepared",
                    json!({
                        "action_id": prepared.action_id,
                        "path": prepared.path,
                        "pre_sha256": prepared.pre_sha256,
                        "post_sha256": prepared.post_sha256,
                    }),
                )
            }
            BrokerEvent::ActionFinished {
                action_id,
                outcome,
                write,
            } => {
                let mut state = ActionState::Committed;
                if let Some(mut action) = tx
                    .action(&action_id)?
                    .filter(|a| a.session_id == session.id)
                {
                    let is_write = LogicalTool::from_name(&action.name).is_some_and(|t| t.writes());
                    state = match write {
                        Some(WriteEnd::Committed) => ActionState::Committed,
                        Some(WriteEnd::NotApplied) => ActionState::NotApplied,
                        Some(WriteEnd::Indeterminate) => ActionState::Indeterminate,
                        // A write that failed before its temp file existed (or was refused
                        // before it was prepared) changed nothing.
                        None if is_write && outcome.status != ToolStatus::Ok => {
                            ActionState::NotApplied
                        }
                        None => ActionState::Committed,
                    };
                    action.state = state;
                    action.outcome = Some(outcome.clone());
                    tx.put_action(&action)?;
                    if state == ActionState::Indeterminate {
                        stop_for_indeterminate_write(session, &action);
                        after.stop = Some("a write ended in an unknown state".into());
                    }
                }
                let kind = match state {
                    ActionState::NotApplied => "write_not_applied",
                    ActionState::Indeterminate => "write_indeterminate",
                    _ => "action_committed",
                };
                (
                    kind,
                    json!({"action_id": action_id, "status": outcome.status, "receipt": outcome.receipt}),
                )
            }
            BrokerEvent::UnapprovedCall {
                tool_use_id,
                name,
                reason,
            } => (
                "unapproved_call",
                json!({"tool_use_id": tool_use_id, "name": name, "reason": reason}),
            ),
            BrokerEvent::SideRequest {
                purpose,
                fingerprint,
            } => (
                "side_request_answered_locally",
                json!({"purpose": purpose, "fingerprint": fingerprint}),
            ),
            BrokerEvent::RunnerTurnEnded { subtype, is_error } => {
                if session.status == SessionStatus::Running && session.pending_turn_id.is_none() {
                    session.status = SessionStatus::Idle;
                    if let Some(closing) = session.closing_reply.take() {
                        session.last_result = Some(closing);
                    }
                }
                (
                    "runner_turn_ended",
                    json!({"subtype": subtype, "is_error": is_error}),
                )
            }
            BrokerEvent::RunnerExited {
                exit_code,
                signal,
                at_ms,
            } => {
                if let Some(run) = session.current_run.as_mut() {
                    run.state = "exited".into();
                    run.exit_code = exit_code;
                    run.signal = signal;
                }
                if session.status == SessionStatus::Expired {
                    // The lease ran out and the gateway stopped the runner: keep `expired`, add
                    // the exit it observed.
                    if let Some(terminal) = session.terminal.as_mut() {
                        terminal.exit_code = exit_code;
                        terminal.signal = signal;
                    }
                } else if session.stop_request.is_some() {
                    session.status = SessionStatus::Stopped;
                    session.terminal = Some(Terminal::stopped(
                        None,
                        exit_code,
                        signal,
                        rfc3339_ms(at_ms),
                    ));
                } else if !session.status.is_terminal() {
                    // The runner died on its own: say so. `continue` may start a new generation.
                    session.recovery_required = true;
                    session.status = SessionStatus::Idle;
                }
                session.pending_turn_id = None;
                (
                    "runner_exited",
                    json!({"exit_code": exit_code, "signal": signal}),
                )
            }
            BrokerEvent::BrokerExiting { reason } => ("broker_exiting", json!({"reason": reason})),
            BrokerEvent::Unknown => ("unknown_broker_event", json!({})),
        })
    }
}

/// What to do once a broker event is persisted.
#[derive(Default)]
struct AfterEvent {
    /// Re-send this reply (the runner retried a request that already has one).
    resend: Option<ReplyRelease>,
    /// Stop the runner, for this reason.
    stop: Option<String>,
    /// Crash tests: the failpoint to hit after the record is durable.
    failpoint: Option<Failpoint>,
}

/// A write ended in an unknown state: the session stops with `recovery_required` and
/// `terminal` saying which write, and nothing is written again.
pub(crate) fn stop_for_indeterminate_write(session: &mut SessionRecord, action: &ActionRecord) {
    let path = action.prepared.as_ref().map(|p| p.path.clone());
    session.status = SessionStatus::Failed;
    session.recovery_required = true;
    session.pending_turn_id = None;
    session.terminal = Some(Terminal::write_indeterminate(
        action.action_id.clone(),
        path,
    ));
}

/// What confines the runner and commands on this host, said plainly.
fn network_boundary() -> NetworkBoundary {
    crate::boundary::network_boundary()
}

fn ensure_not_terminal(session: &SessionRecord) -> ToolResult<()> {
    if session.status.is_terminal() {
        return Err(ToolError::new(
            ErrorCode::SessionTerminal,
            format!(
                "the session is {}; start a new session to do more work",
                session.status.as_str()
            ),
        ));
    }
    Ok(())
}

/// One entry of `tool_results`: the ledger's record of the action, or `not_executed` with what the
/// runner said when the action never ran.
fn tool_result_view(
    action: &ActionRecord,
    runner_results: &[common::protocol::RunnerToolResult],
) -> ToolResultView {
    match &action.outcome {
        Some(outcome) => ToolResultView {
            call_index: action.call_index,
            name: action.name.clone(),
            status: outcome.status,
            output: outcome.output.clone(),
            truncated: outcome.truncated,
            receipt: Some(outcome.receipt.clone()),
        },
        None => {
            let tool_use_id = format!("toolu_{}", action.action_id);
            let said = runner_results
                .iter()
                .find(|r| r.tool_use_id == tool_use_id)
                .map(|r| format!("the runner reported: {}", r.text))
                .unwrap_or_else(|| "the runner reported no result for it".to_string());
            let mut output = format!("not executed; {said}");
            let truncated =
                common::tools::clip_utf8(&mut output, common::tools::MAX_TOOL_OUTPUT_BYTES);
            ToolResultView {
                call_index: action.call_index,
                name: action.name.clone(),
                status: ToolStatus::NotExecuted,
                output,
                truncated,
                receipt: None,
            }
        }
    }
}

/// Canonical hash of a request's arguments without the fields that do not change its meaning.
pub fn request_hash(arguments: &Value, ignore: &[&str]) -> String {
    let mut args = arguments.clone();
    if let Some(map) = args.as_object_mut() {
        for key in ignore {
            map.remove(*key);
        }
    }
    canonical_sha256(&args)
}

impl Gateway {
    /// Send again what a (re)attached broker may have missed: the persisted reply of the turn it
    /// has not confirmed, and a released prompt it has not confirmed. Both are idempotent at the
    /// broker.
    pub fn resend_releases(&self, session_id: &str) {
        let pending = self.store.read(|tx| {
            let Some(session) = tx.session(session_id)? else {
                return Ok::<_, StoreError>(None);
            };
            let reply = match &session.undelivered_reply_turn {
                Some(turn_id) => match tx.turn(turn_id)? {
                    Some(turn) => match &turn.reply_id {
                        Some(reply_id) => {
                            tx.reply(session_id, reply_id)?.map(|reply| ReplyRelease {
                                turn_id: turn.turn_id.clone(),
                                fingerprint: turn.fingerprint.clone(),
                                text: reply.text,
                                calls: reply.calls,
                            })
                        }
                        None => None,
                    },
                    None => None,
                },
                None => None,
            };
            Ok(Some((reply, session.undelivered_prompt.clone())))
        });
        let Ok(Some((reply, prompt))) = pending else {
            return;
        };
        let live = self.live(session_id);
        if let Some(reply) = reply {
            live.send(GatewayToBroker::Reply(reply));
        }
        if let Some(prompt) = prompt {
            live.send(GatewayToBroker::Prompt(prompt));
        }
    }

    /// At gateway start: re-adopt every live session's broker that passes verification, and
    /// report the others as lost. Brokers re-send the events the gateway has not acknowledged,
    /// which reconciles what happened while it was away.
    pub async fn adopt_all(self: &Arc<Self>) {
        let sessions = match self.store.read(|tx| tx.sessions()) {
            Ok(sessions) => sessions,
            Err(err) => {
                tracing::error!("listing sessions for re-adoption: {err}");
                return;
            }
        };
        // A stop the previous gateway did not see through: the broker of a stopping or finished
        // session that is still there gets the stop again, and the same deadline.
        let unfinished_stops: Vec<(String, BrokerRecord)> = sessions
            .iter()
            .filter(|session| {
                session.status.is_terminal() || session.status == SessionStatus::Stopping
            })
            .filter_map(|session| Some((session.id.clone(), session.broker.clone()?)))
            .filter(|(_, b)| crate::brokers::process_start_time(b.pid) == Some(b.start_time))
            .collect();
        // Concurrently: a hung broker costs its handshake timeout, and N of them must not cost N
        // timeouts before the listener opens.
        let live = sessions
            .into_iter()
            .filter(|session| !session.status.is_terminal())
            .filter_map(|session| Some((session.id, session.broker?)));
        futures::stream::iter(live)
            .for_each_concurrent(ADOPT_CONCURRENCY, |(session_id, record)| async move {
                match crate::brokers::attach(
                    self.clone(),
                    &session_id,
                    &record,
                    crate::brokers::ADOPT_CONNECT_TIMEOUT,
                )
                .await
                {
                    Ok(()) => {
                        tracing::info!(session = %session_id, "re-adopted broker");
                        self.record_event(&session_id, "broker_adopted", json!({}));
                    }
                    Err(err) => {
                        tracing::warn!(session = %session_id, "broker not re-adopted: {err:#}");
                        self.mark_runtime_lost(&session_id, &format!("{err:#}"));
                    }
                }
            })
            .await;
        for (session_id, record) in unfinished_stops {
            let reason = "stop requested before the gateway restarted".to_string();
            if !self
                .live(&session_id)
                .send(GatewayToBroker::Stop { reason })
            {
                crate::brokers::signal_verified(&record);
            }
            self.enforce_stop(&session_id);
        }
        // Writes their (now dead) brokers left `prepared`, terminal sessions' included: one
        // query finds the few sessions that have any.
        match self.store.read(|tx| tx.sessions_with_prepared_writes()) {
            Ok(ids) => {
                for id in ids {
                    self.resolve_prepared_writes(&id);
                }
            }
            Err(err) => tracing::error!("listing prepared writes: {err}"),
        }
        self.enforce_leases();
    }

    /// The session's runtime is gone or failed verification: report it, do not hide it.
    fn mark_runtime_lost(&self, session_id: &str, why: &str) {
        let res = self.store.write(|tx| {
            let Some(mut session) = tx.session(session_id)? else {
                return Ok::<_, StoreError>(None);
            };
            if session.status.is_terminal() {
                return Ok(None);
            }
            session.recovery_required = true;
            if let Some(run) = session.current_run.as_mut().filter(|r| r.state == "alive") {
                run.state = "lost".into();
            }
            session.pending_turn_id = None;
            if matches!(
                session.status,
                SessionStatus::Running | SessionStatus::WaitingForGpt | SessionStatus::Starting
            ) {
                session.status = SessionStatus::Idle;
            }
            self.commit(tx, &mut session, "runtime_lost", json!({"reason": why}))?;
            Ok(Some(session))
        });
        self.notify_written(res, "recording lost runtime");
        self.resolve_prepared_writes(session_id);
    }

    /// Expire every live session whose lease ran out: stop its runner (through the broker, or by
    /// signalling the verified broker process), mark it `expired`, keep everything inspectable.
    pub fn enforce_leases(self: &Arc<Self>) {
        let now = now_unix_ms();
        let Ok(sessions) = self.store.read(|tx| tx.sessions()) else {
            return;
        };
        for session in sessions {
            if session.status.is_terminal() || session.lease_expires_at_ms > now {
                continue;
            }
            let expired = self.store.write(|tx| {
                let Some(mut current) = tx.session(&session.id)? else {
                    return Ok::<_, StoreError>(None);
                };
                if current.status.is_terminal() || current.lease_expires_at_ms > now {
                    return Ok(None);
                }
                let at = common::time::now_rfc3339();
                current.status = SessionStatus::Expired;
                current.pending_turn_id = None;
                current.stop_request = Some(StopRequest {
                    reason: "lease expired".into(),
                    at: at.clone(),
                });
                current.terminal = Some(Terminal::lease_expired(at));
                self.commit(tx, &mut current, "lease_expired", json!({}))?;
                Ok(Some(current))
            });
            let Ok(Some(current)) = expired else { continue };
            self.notify(&current);
            let live = self.live(&current.id);
            if !live.send(GatewayToBroker::Stop {
                reason: "lease expired".into(),
            }) && let Some(record) = &current.broker
            {
                crate::brokers::signal_verified(record);
            }
            self.enforce_stop(&current.id);
        }
    }

    /// A stop or expiry the broker has not carried out within [`STOP_ENFORCE_AFTER`] (it is
    /// hung, stopped, or has no link and ignores SIGTERM) is enforced by signal; then the session
    /// is final and the writes the broker left prepared are settled from the files. A broker
    /// that exits in time (after stopping its runner and reporting it) is only waited for.
    fn enforce_stop(self: &Arc<Self>, session_id: &str) {
        let gateway = self.clone();
        let session_id = session_id.to_string();
        tokio::spawn(async move {
            let Ok(Some(record)) = gateway
                .store
                .read(|tx| tx.session(&session_id))
                .map(|session| session.and_then(|s| s.broker))
            else {
                return;
            };
            if !crate::brokers::wait_gone(&record, STOP_ENFORCE_AFTER).await {
                let stopped = gateway
                    .stop_broker(&session_id, &record, STOP_ENFORCE_AFTER, BROKER_TERM_GRACE)
                    .await;
                if stopped != BrokerStop::Exited {
                    // Its link is gone with it; if nothing made the session final, this does.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    gateway.finish_forced_stop(&session_id, stopped);
                }
            }
            gateway.resolve_prepared_writes(&session_id);
        });
    }

    /// Make sure the session's recorded broker is gone: SIGTERM (it stops its runner's group),
    /// up to `grace` for it to exit, then SIGKILL — a hung or stopped broker cannot keep a session
    /// or a prepared write in limbo. `waited` is how long it already had (for the ledger). A kill
    /// that was sent is recorded as `broker_killed`.
    async fn stop_broker(
        &self,
        session_id: &str,
        record: &BrokerRecord,
        waited: Duration,
        grace: Duration,
    ) -> BrokerStop {
        crate::brokers::signal_verified(record);
        if crate::brokers::wait_gone(record, grace).await {
            return BrokerStop::Exited;
        }
        // Set before the kill, so the link's end (which follows it) can say what happened.
        let live = self.live(session_id);
        live.stop_enforced
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if crate::brokers::kill_verified(record) {
            let after = (waited + grace).as_secs();
            self.record_event(session_id, "broker_killed", json!({"after_seconds": after}));
        }
        if crate::brokers::wait_gone(record, KILL_WAIT).await {
            BrokerStop::Killed
        } else {
            self.record_event(session_id, "broker_did_not_exit", json!({}));
            BrokerStop::StillThere
        }
    }

    /// Append a ledger-only event (nothing ChatGPT sees changes); a failure is logged.
    fn record_event(&self, session_id: &str, kind: &str, data: Value) {
        if let Err(err) = self
            .store
            .write(|tx| tx.append_event(Some(session_id), kind, &data))
        {
            tracing::error!("recording {kind}: {err}");
        }
    }

    /// Tell waiters about a session a write changed (`Ok(None)`: nothing changed); a failed write
    /// is logged as `what`.
    fn notify_written(&self, written: Result<Option<SessionRecord>, StoreError>, what: &str) {
        match written {
            Ok(Some(session)) => self.notify(&session),
            Ok(None) => {}
            Err(err) => tracing::error!("{what}: {err}"),
        }
    }

    /// After the gateway killed a stopping session's broker: the session is `stopped` if nothing
    /// else made it final (a broker stuck in the kernel never closes its link).
    fn finish_forced_stop(&self, session_id: &str, stopped: BrokerStop) {
        let res = self.store.write(|tx| {
            let Some(mut session) = tx.session(session_id)? else {
                return Ok::<_, StoreError>(None);
            };
            if session.status.is_terminal() {
                return Ok(None);
            }
            let detail = match stopped {
                BrokerStop::StillThere => {
                    "the broker did not stop and could not be killed; its runner may still exist"
                }
                _ => FORCED_STOP_DETAIL,
            };
            session.status = SessionStatus::Stopped;
            session.pending_turn_id = None;
            if let Some(run) = session.current_run.as_mut().filter(|r| r.state == "alive") {
                run.state = "lost".into();
            }
            session.terminal = Some(Terminal::stopped(
                Some(detail),
                None,
                None,
                common::time::now_rfc3339(),
            ));
            self.commit(tx, &mut session, "stop_enforced", json!({"detail": detail}))?;
            Ok(Some(session))
        });
        self.notify_written(res, "recording an enforced stop");
    }

    /// A verified broker link is up again: a run that was only "lost" to this gateway (the link,
    /// not the runner, went away) is alive; if the runner did exit meanwhile, the broker's
    /// re-sent `RunnerExited` event says so next.
    pub fn on_attached(&self, session_id: &str) {
        let res = self.store.write(|tx| {
            let Some(mut session) = tx.session(session_id)? else {
                return Ok::<_, StoreError>(None);
            };
            let Some(run) = session.current_run.as_mut().filter(|r| r.state == "lost") else {
                return Ok(None);
            };
            run.state = "alive".into();
            session.recovery_required = false;
            self.commit(tx, &mut session, "runtime_reattached", json!({}))?;
            Ok(Some(session))
        });
        if let Ok(Some(session)) = res {
            self.notify(&session);
        }
    }

    /// The link to the session's broker `broker_pid` closed. If the session was still live, that
    /// is reported, not hidden: the runner is lost to this gateway until recovery. Nothing happens
    /// if a newer broker (a new generation, a re-attach) has taken over meanwhile.
    pub fn on_link_lost(&self, session_id: &str, broker_pid: i32) {
        if self.live(session_id).attached() {
            return;
        }
        let res = self.store.write(|tx| {
            let Some(mut session) = tx.session(session_id)? else {
                return Ok(None);
            };
            if session.status.is_terminal()
                || session.broker.as_ref().is_some_and(|b| b.pid != broker_pid)
            {
                return Ok(None);
            }
            if session.stop_request.is_some() {
                session.status = SessionStatus::Stopped;
                if session.terminal.is_none() {
                    let forced = self
                        .live(session_id)
                        .stop_enforced
                        .load(std::sync::atomic::Ordering::SeqCst);
                    session.terminal = Some(Terminal::stopped(
                        forced.then_some(FORCED_STOP_DETAIL),
                        None,
                        None,
                        common::time::now_rfc3339(),
                    ));
                }
            } else {
                session.recovery_required = true;
                if let Some(run) = session.current_run.as_mut().filter(|r| r.state == "alive") {
                    run.state = "lost".into();
                }
                // A broker that is gone takes its runner's pending request with it: nobody can
                // answer that turn any more. A live broker keeps it for a re-attach.
                let broker_gone = session.broker.as_ref().is_none_or(|b| {
                    crate::brokers::process_start_time(b.pid) != Some(b.start_time)
                });
                if broker_gone {
                    session.pending_turn_id = None;
                    if matches!(
                        session.status,
                        SessionStatus::Running
                            | SessionStatus::WaitingForGpt
                            | SessionStatus::Starting
                    ) {
                        session.status = SessionStatus::Idle;
                    }
                }
            }
            self.commit(tx, &mut session, "runtime_detached", json!({}))?;
            Ok::<_, StoreError>(Some(session))
        });
        self.notify_written(res, "recording lost runtime");
        // Only if the broker itself is gone (a live one finishes its writes and reports).
        self.resolve_prepared_writes(session_id);
    }
}
