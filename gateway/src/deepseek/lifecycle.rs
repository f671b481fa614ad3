//! A sub-session's life after its delegation is persisted: the gateway's calls (start, get,
//! stop) carried out and recorded, launching it, its end (verified against its receipts), lost
//! runtimes, stops, settling a delegation a crash left unlaunched, and forwarding its model
//! requests on the route. Private to `deepseek`: the session core reaches it only through the
//! hooks `super::Deepseek` implements.

use std::sync::Arc;
use std::time::Duration;

use common::hash::sha256_hex;
use common::outcome::OutcomeCode;
use common::protocol::ReplyRelease;
use common::time::{now_unix_ms, rfc3339_ms};
use common::tools::{ActionOutcome, GatewayToolArgs, LogicalTool, Receipt, ToolStatus};
use serde_json::{Value, json};

use super::{egress, gateway_args};
use crate::error::ToolError;
use crate::session::{Gateway, ToolResult};
use crate::state::{
    ActionEnd, ActionRecord, ActionState, LedgerEvent, SessionRecord, SessionStatus, StoreError,
    SubsessionStatus, Tx,
};

/// Longest final text a `deepseek_subagent_get` carries.
const MAX_RESULT_TEXT: usize = 16 * 1024;
/// Most actions a `deepseek_subagent_get` lists (it says how many there were).
const MAX_LISTED_ACTIONS: usize = 200;
/// How long stopping a sub-session may take before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(8);

/// Check the files a sub-session changed against its receipts: each path's last committed
/// write must be what the file holds now. The first mismatch, in words naming the path.
pub(super) fn verify_receipts(actions: &[ActionRecord]) -> Result<(), String> {
    let mut last: Vec<(String, String)> = Vec::new();
    for action in actions {
        let is_write = LogicalTool::from_name(&action.name).is_some_and(LogicalTool::writes);
        if !is_write {
            continue;
        }
        match action.state {
            ActionState::Committed => {}
            ActionState::NotApplied => continue,
            other => {
                let path = action
                    .prepared
                    .as_ref()
                    .map_or("(unknown path)", |p| p.path.as_str());
                return Err(format!(
                    "the write to {path} is {} (it did not finish)",
                    other.as_str()
                ));
            }
        }
        let Some(receipt) = action.outcome.as_ref().map(|o| &o.receipt) else {
            continue;
        };
        if let (Some(path), Some(post)) = (&receipt.path, &receipt.post_sha256) {
            // Its writes to one file chain: each found what the one before left.
            if let Some((_, previous)) = last.iter().find(|(p, _)| p == path)
                && receipt.pre_sha256.as_ref() != Some(previous)
            {
                return Err(format!(
                    "{path} changed between the sub-session's writes: one left sha256 \
                     {previous}, the next found {}",
                    receipt.pre_sha256.as_deref().unwrap_or("no file")
                ));
            }
            last.retain(|(p, _)| p != path);
            last.push((path.clone(), post.clone()));
        }
    }
    for (path, expected) in last {
        let found = read_nofollow(&path).map(|bytes| sha256_hex(&bytes));
        match found {
            Some(found) if found == expected => {}
            Some(found) => {
                return Err(format!(
                    "{path} holds sha256 {found}, not {expected} as the sub-session's last write \
                     receipt says"
                ));
            }
            None => {
                return Err(format!(
                    "{path} is missing or unreadable, but the sub-session's last write receipt \
                     says sha256 {expected}"
                ));
            }
        }
    }
    Ok(())
}

fn read_nofollow(path: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// The first file a sub-session wrote (any write action of it, committed or not) that now
/// holds the DeepSeek key in a recognised form ([`super::answer::holds_key`]): the key split
/// across writes (a Write, then an Edit that completes it) is only whole in the file. The file
/// is kept as it is (a restore could undo the owner's own later edits); the sub-session fails
/// naming the path, never the key.
pub(super) fn key_in_written_files(actions: &[ActionRecord], key: &str) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for action in actions {
        if !LogicalTool::from_name(&action.name).is_some_and(LogicalTool::writes) {
            continue;
        }
        let path = action
            .outcome
            .as_ref()
            .and_then(|o| o.receipt.path.as_deref())
            .or_else(|| action.prepared.as_ref().map(|p| p.path.as_str()));
        let Some(path) = path.filter(|p| !seen.contains(p)) else {
            continue;
        };
        seen.push(path);
        if let Some(bytes) = read_nofollow(path)
            && super::answer::holds_key(&String::from_utf8_lossy(&bytes), key)
        {
            return Some(path.to_string());
        }
    }
    None
}

/// The error of a sub-session whose written file holds the key.
fn key_in_file_error(path: &str) -> String {
    format!(
        "result verification: {path} holds the DeepSeek API key (in some form); the file is \
         kept as written: remove or fix it before using it"
    )
}

/// What `deepseek_subagent_get` shows of a sub-session.
fn report(gateway: &Gateway, tx: &Tx<'_>, child: &SessionRecord) -> Result<Value, StoreError> {
    let actions = tx.actions_for_turn(&child.id)?;
    let end = child.delegation.as_ref().and_then(|d| d.end.as_ref());
    let listed: Vec<Value> = actions
        .iter()
        .take(MAX_LISTED_ACTIONS)
        .map(|a| {
            let receipt = a.outcome.as_ref().map(|o| &o.receipt);
            let path = receipt
                .and_then(|r| r.path.clone())
                .or_else(|| a.prepared.as_ref().map(|p| p.path.clone()));
            json!({
                "name": a.name,
                "path": path,
                "pre_sha256": receipt.and_then(|r| r.pre_sha256.clone()),
                "post_sha256": receipt.and_then(|r| r.post_sha256.clone()),
                "status": a.outcome.as_ref().map_or(json!(a.state.as_str()), |o| json!(o.status)),
            })
        })
        .collect();
    let mut result_text = end.and_then(|e| e.result_text.clone());
    let mut truncated = false;
    if let Some(text) = result_text.as_mut() {
        truncated = common::tools::clip_utf8(text, MAX_RESULT_TEXT);
    }
    Ok(json!({
        "subsession_id": child.id,
        "status": child.subsession_status().as_str(),
        "started_at": rfc3339_ms(child.created_at_ms),
        "ended_at": end.map(|e| rfc3339_ms(e.at_ms)),
        "result_text": result_text,
        "result_truncated": truncated,
        "actions": listed,
        "actions_total": actions.len(),
        "error": end.and_then(|e| e.error.clone()),
        "route": gateway.config.deepseek.describe(),
        "egress": format!(
            "model requests only, through the gateway to {} (the runner has no network and no key)",
            gateway.config.deepseek.public_endpoint()
        ),
    }))
}

fn outcome(action_id: &str, status: ToolStatus, value: &Value, started: i64) -> ActionOutcome {
    let mut output = serde_json::to_string_pretty(value).unwrap_or_default();
    let truncated = common::tools::clip_utf8(&mut output, common::tools::MAX_TOOL_OUTPUT_BYTES);
    ActionOutcome {
        status,
        output,
        truncated,
        error_code: (status != ToolStatus::Ok).then_some(OutcomeCode::SubagentFailed),
        receipt: Receipt {
            action_id: action_id.to_string(),
            duration_ms: u64::try_from(now_unix_ms() - started).unwrap_or(0),
            ..Receipt::default()
        },
    }
}

impl Gateway {
    /// Carry out the reply's gateway calls (start, get, stop) once the reply is persisted and
    /// before it is released: each outcome is recorded, then travels with the release.
    pub(crate) async fn carry_out_gateway_calls(
        self: &Arc<Self>,
        parent_id: &str,
        release: &mut ReplyRelease,
    ) -> ToolResult<()> {
        for call in &mut release.calls {
            let Some(args) = gateway_args(call) else {
                continue;
            };
            let started = now_unix_ms();
            let (status, child_id) = match args {
                GatewayToolArgs::SubsessionStart(_) => {
                    let child_id = self.store.read(|tx| {
                        let parent = self.session(tx, parent_id)?;
                        Ok::<_, ToolError>(parent.subsessions.last().cloned().unwrap_or_default())
                    })?;
                    // Crash tests: the delegation is durable, nothing is launched.
                    let _ = broker::executor::failpoint::hit(
                        broker::executor::failpoint::Failpoint::GatewayAfterDelegationPersisted,
                    );
                    (self.launch_subsession(&child_id).await, child_id)
                }
                GatewayToolArgs::SubsessionStop(stop) => {
                    self.stop_subsession(&stop.subsession_id, "stopped by deepseek_subagent_stop")
                        .await;
                    (ToolStatus::Ok, stop.subsession_id)
                }
                GatewayToolArgs::SubsessionGet(get) => (ToolStatus::Ok, get.subsession_id),
            };
            call.outcome = Some(self.record_gateway_outcome(
                parent_id,
                &call.action_id,
                &child_id,
                status,
                started,
            )?);
        }
        Ok(())
    }

    /// Record a gateway call's outcome (the sub-session's report) on its action.
    fn record_gateway_outcome(
        &self,
        parent_id: &str,
        action_id: &str,
        child_id: &str,
        status: ToolStatus,
        started: i64,
    ) -> ToolResult<ActionOutcome> {
        let recorded = self.store.write(|tx| {
            let child = self.session(tx, child_id)?;
            let value = report(self, tx, &child)?;
            let outcome = outcome(action_id, status, &value, started);
            if let Some(mut action) = tx.action(action_id)? {
                action.state = ActionState::Committed;
                action.outcome = Some(outcome.clone());
                tx.put_action(&action)?;
            }
            tx.record(
                parent_id,
                &LedgerEvent::ActionCommitted(ActionEnd {
                    action_id: action_id.to_string(),
                    status: outcome.status,
                    receipt: outcome.receipt.clone(),
                }),
            )?;
            Ok::<_, ToolError>(outcome)
        })?;
        Ok(recorded)
    }

    /// Start a persisted sub-session: its broker and runner, then its task as the first prompt.
    /// Failing to start fails the sub-session (not its session): `Error` and the reason.
    async fn launch_subsession(self: &Arc<Self>, child_id: &str) -> ToolStatus {
        let Ok(child) = self.load(child_id) else {
            return ToolStatus::Error;
        };
        if child.status != SessionStatus::Starting {
            return ToolStatus::Error;
        }
        let failed = |why: String| {
            self.finish_subsession(child_id, SubsessionStatus::Failed, None, Some(why));
            ToolStatus::Error
        };
        if self.config.deepseek.api_key.is_none() {
            return failed(
                "DEEPSEEK_API_KEY is not set in the gateway's environment: the owner sets it and \
                 restarts the gateway. Nothing was started; the session goes on."
                    .into(),
            );
        }
        if let Err(error) = self.launch(&child, 1, false).await {
            return failed(format!(
                "the sub-session could not start: {}",
                error.message
            ));
        }
        let task = self
            .store
            .read(|tx| {
                let start = child.delegation.as_ref().map(|d| d.start_action_id.clone());
                Ok::<_, StoreError>(match start {
                    Some(id) => tx.action(&id)?,
                    None => None,
                })
            })
            .ok()
            .flatten()
            .and_then(|a| {
                a.arguments
                    .get("task")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
        let Some(task) = task else {
            return failed("the delegated task could not be read back".into());
        };
        let prompt_id = format!("prm_{}", uuid::Uuid::new_v4().simple());
        if let Err(err) = self.release_prompt(child_id, prompt_id, task, None) {
            // Stopped while it was launching: the stop records how it ended.
            if self.load(child_id).is_ok_and(|c| c.stop_request.is_some()) {
                return ToolStatus::Error;
            }
            return failed(format!(
                "the task could not be handed over: {}",
                err.message
            ));
        }
        if let Some(parent) = child.delegation.as_ref().map(|d| &d.parent_session_id) {
            self.record_event(
                parent,
                LedgerEvent::SubsessionLaunched {
                    subsession_id: child_id.to_string(),
                },
            );
        }
        ToolStatus::Ok
    }

    /// Record how a sub-session ended (once), in its ledger and its session's, and wake the
    /// session's waiters.
    pub(super) fn finish_subsession(
        &self,
        child_id: &str,
        status: SubsessionStatus,
        result_text: Option<String>,
        error: Option<String>,
    ) {
        let done = self.store.write(|tx| {
            let Some(mut child) = tx.session(child_id)? else {
                return Ok::<_, StoreError>(None);
            };
            let Some(event) = child.subsession_ended(status, result_text, error) else {
                return Ok(None);
            };
            self.commit(tx, &mut child, &event)?;
            let parent_id = child
                .delegation
                .as_ref()
                .map(|d| d.parent_session_id.clone())
                .unwrap_or_default();
            let parent = match tx.session(&parent_id)? {
                Some(mut parent) => {
                    self.commit(tx, &mut parent, &event)?;
                    Some(parent)
                }
                None => None,
            };
            Ok(Some((child, parent)))
        });
        if matches!(done, Ok(Some(_))) {
            self.live(child_id).cancel_egress();
        }
        match done {
            Ok(Some((child, parent))) => {
                self.notify(&child);
                if let Some(parent) = parent {
                    self.notify(&parent);
                }
            }
            Ok(None) => {}
            Err(err) => tracing::error!(subsession = %child_id, "recording its end: {err}"),
        }
    }

    /// The sub-session's runner ended its turn: the task is done. Its writes are checked
    /// against their receipts (a mismatch fails it, naming the path), then it is stopped.
    pub(super) fn on_subsession_turn_ended(
        self: &Arc<Self>,
        child_id: &str,
        result: Option<String>,
        is_error: bool,
    ) {
        let actions = self
            .store
            .read(|tx| tx.actions_for_turn(child_id))
            .unwrap_or_default();
        let stopping = self
            .load(child_id)
            .ok()
            .and_then(|child| child.stop_request.map(|stop| stop.reason));
        let key = self.config.deepseek.api_key.as_ref().map(|k| k.expose());
        let leaked = key.and_then(|key| key_in_written_files(&actions, key));
        // The result text reaches ChatGPT: one that holds the key is dropped.
        let result =
            result.filter(|text| !key.is_some_and(|key| super::answer::holds_key(text, key)));
        let (status, error) = match verify_receipts(&actions) {
            Err(why) => (
                SubsessionStatus::Failed,
                Some(format!("result verification: {why}")),
            ),
            Ok(()) if leaked.is_some() => (
                SubsessionStatus::Failed,
                leaked.as_deref().map(key_in_file_error),
            ),
            // A stop already under way cut its model request: the error is the stop's doing.
            Ok(()) if is_error && stopping.is_some() => (SubsessionStatus::Stopped, stopping),
            Ok(()) if is_error => (
                SubsessionStatus::Failed,
                Some("the sub-session's runner ended with an error (see result_text)".into()),
            ),
            Ok(()) => (SubsessionStatus::Succeeded, None),
        };
        self.finish_subsession(child_id, status, result, error);
        self.stop_ended_runtime(child_id, "the delegated task is finished");
        self.enforce_stop(child_id);
    }

    /// The first file sub-session `child_id` wrote that holds the DeepSeek key, if any.
    pub(super) fn key_leak_in_files(&self, child_id: &str) -> Option<String> {
        let key = self.config.deepseek.api_key.as_ref()?;
        let actions = self
            .store
            .read(|tx| tx.actions_for_turn(child_id))
            .unwrap_or_default();
        key_in_written_files(&actions, key.expose())
    }

    /// The error for a sub-session whose write just committed leaves the DeepSeek key in its
    /// file (checked at each write, so a key completed by a later write fails the sub-session
    /// before ChatGPT can read it, and again at its end).
    pub(super) fn key_leak_in_write(&self, action: &ActionRecord) -> Option<String> {
        let key = self.config.deepseek.api_key.as_ref()?;
        key_in_written_files(std::slice::from_ref(action), key.expose())
            .map(|path| key_in_file_error(&path))
    }

    /// A tool's output for a session that delegated to DeepSeek (e.g. a Read of a file its
    /// sub-session wrote) never carries the DeepSeek key on to the database and ChatGPT: such an
    /// output is replaced by a notice.
    pub(super) fn withhold_deepseek_key(
        &self,
        session: &SessionRecord,
        outcome: &mut ActionOutcome,
    ) {
        let Some(key) = &self.config.deepseek.api_key else {
            return;
        };
        if session.subsessions.is_empty() && session.delegation.is_none() {
            return;
        }
        if super::answer::holds_key(&outcome.output, key.expose()) {
            outcome.output = "output withheld: it holds the DeepSeek API key (in some form), \
                              e.g. from a file a DeepSeek sub-session wrote; fix that file"
                .into();
            outcome.truncated = false;
        }
    }

    /// Fail a running sub-session now (the key in its call or its file) and stop its runtime.
    pub(super) fn fail_subsession(self: &Arc<Self>, child_id: &str, error: String) {
        self.finish_subsession(child_id, SubsessionStatus::Failed, None, Some(error));
        self.stop_ended_runtime(child_id, "the sub-session failed");
        self.enforce_stop(child_id);
    }

    /// Tell an ended sub-session's broker to stop its runner and exit.
    fn stop_ended_runtime(&self, child_id: &str, reason: &str) {
        let record = self.load(child_id).ok().and_then(|c| c.broker);
        self.send_stop(child_id, record.as_ref(), reason);
    }

    /// The sub-session's runtime is gone (its broker died or failed verification): it is
    /// `lost`, never re-run; its prepared writes are settled from the files by the caller.
    pub(super) fn on_subsession_lost(&self, child_id: &str, why: &str) {
        if let Some(path) = self.key_leak_in_files(child_id) {
            let error = format!("{} (and its runtime is gone)", key_in_file_error(&path));
            return self.finish_subsession(child_id, SubsessionStatus::Failed, None, Some(error));
        }
        self.finish_subsession(
            child_id,
            SubsessionStatus::Lost,
            None,
            Some(format!("its runtime is gone ({why}); it is not run again")),
        );
    }

    /// Stop a sub-session and wait until its broker is gone (killed after a grace period), so
    /// the stop is observed before it is recorded.
    pub(super) async fn stop_subsession(self: &Arc<Self>, child_id: &str, reason: &str) {
        let attached = self.live(child_id).attached();
        // Durable first: the broker's exit that follows is then a stop, not a lost runtime.
        self.transition(child_id, "recording a sub-session's stop", |child| {
            (child.subsession_active() && child.stop_request.is_none())
                .then(|| child.stop_requested(reason, attached))
        });
        // Its model requests in flight end now, not when DeepSeek answers or times out.
        self.live(child_id).cancel_egress();
        let Ok(child) = self.load(child_id) else {
            return;
        };
        if let Some(record) = &child.broker {
            self.send_stop(child_id, Some(record), reason);
            if !crate::brokers::wait_gone(self.host(), record, STOP_GRACE).await {
                self.stop_broker(child_id, record, STOP_GRACE, Duration::from_secs(2))
                    .await;
            }
        }
        // Recorded once the broker is gone (a sub-session that ended by itself keeps its end);
        // a file of it holding the key fails it.
        match self.key_leak_in_files(child_id) {
            Some(path) => self.finish_subsession(
                child_id,
                SubsessionStatus::Failed,
                None,
                Some(key_in_file_error(&path)),
            ),
            None => self.finish_subsession(
                child_id,
                SubsessionStatus::Stopped,
                None,
                Some(reason.to_string()),
            ),
        }
        self.resolve_prepared_writes(child_id);
    }

    /// Stop every running sub-session of `parent_id` (before the session itself stops).
    pub(super) async fn stop_subsessions(self: &Arc<Self>, parent_id: &str, reason: &str) {
        let Ok(parent) = self.load(parent_id) else {
            return;
        };
        for child_id in &parent.subsessions {
            if self.load(child_id).is_ok_and(|c| c.subsession_active()) {
                self.stop_subsession(child_id, reason).await;
            }
        }
    }

    /// At gateway start, before re-adoption: a delegation persisted but never launched (the
    /// gateway stopped in between) is reported not started — it is never launched late, so
    /// never twice — and every start action gets its outcome.
    pub(super) fn settle_unlaunched_subsessions(&self) {
        let Ok(sessions) = self.store.read(|tx| tx.sessions()) else {
            return;
        };
        for child in sessions.iter().filter(|s| s.delegation.is_some()) {
            if child.status == SessionStatus::Starting && child.broker.is_none() {
                self.finish_subsession(
                    &child.id,
                    SubsessionStatus::Failed,
                    None,
                    Some(
                        "not started: the gateway stopped between recording the delegation and \
                         launching it; it is not launched again. Start a new one if needed."
                            .into(),
                    ),
                );
            }
            let Some(delegation) = &child.delegation else {
                continue;
            };
            let missing = self
                .store
                .read(|tx| tx.action(&delegation.start_action_id))
                .ok()
                .flatten()
                .is_some_and(|a| a.outcome.is_none());
            if missing {
                let status = match self.load(&child.id).map(|c| c.subsession_status()) {
                    Ok(SubsessionStatus::Failed | SubsessionStatus::Lost) => ToolStatus::Error,
                    _ => ToolStatus::Ok,
                };
                let _ = self.record_gateway_outcome(
                    &delegation.parent_session_id,
                    &delegation.start_action_id,
                    &child.id,
                    status,
                    now_unix_ms(),
                );
            }
        }
    }

    /// One model request of a sub-session's runner, forwarded on the route; recorded in the
    /// sub-session's ledger. Only a live sub-session's broker gets an answer from DeepSeek: any
    /// other broker's request is refused without leaving the gateway.
    pub(super) async fn egress(
        &self,
        client: Option<&reqwest::Client>,
        session_id: &str,
        request_id: u64,
        body: &str,
    ) -> common::protocol::EgressResponse {
        let request_sha256 = sha256_hex(body.as_bytes());
        // Durable before anything leaves: a gateway that dies while the request is out leaves
        // it in the ledger, and the runner's resend after the restart is recorded as one.
        let sent = self.store.write(|tx| {
            let Some(mut child) = tx.session(session_id)? else {
                return Ok::<_, StoreError>(None);
            };
            let Some(event) = child.deepseek_request_sent(&request_sha256) else {
                return Ok(None);
            };
            tx.put_session(&child)?;
            tx.record(session_id, &event)?;
            Ok(Some(()))
        });
        let allowed = matches!(sent, Ok(Some(_)));
        if let Err(err) = &sent {
            tracing::error!(subsession = %session_id, "recording a DeepSeek request: {err}");
        }
        // Held while the request is out (the entry stays), and cancelled when the sub-session
        // stops or ends: dropping the request closes the upstream connection at once.
        let live = self.live(session_id);
        let mut cancelled = false;
        let (response, record) = match client {
            Some(client) if allowed => tokio::select! {
                answered = egress::forward(client, &self.config.deepseek, request_id, body) => answered,
                () = live.egress_cancelled() => {
                    cancelled = true;
                    let mut refused = egress::refused(
                        "cancelled: the sub-session stopped or ended while its request was out",
                    );
                    refused.0.request_id = request_id;
                    refused
                }
            },
            _ => {
                let why = if allowed {
                    "the gateway's HTTPS client could not start; see the gateway log"
                } else {
                    "only a running DeepSeek sub-session may send model requests through the gateway"
                };
                let mut refused = egress::refused(why);
                refused.0.request_id = request_id;
                refused
            }
        };
        let failure = record.error.clone();
        let result_text = record.result_text.clone();
        let answered = LedgerEvent::DeepseekRequest {
            request_sha256: request_sha256.clone(),
            requested_model: record.requested_model,
            sent_model: record.sent_model,
            status: record.status,
            duration_ms: record.duration_ms,
            error: record.error,
        };
        let recorded = self.store.write(|tx| {
            if let Some(mut child) = tx.session(session_id)?
                && child.deepseek_request_answered(&request_sha256)
            {
                tx.put_session(&child)?;
            }
            tx.record(session_id, &answered)
        });
        if let Err(err) = recorded {
            tracing::error!(subsession = %session_id, "recording a DeepSeek answer: {err}");
        }
        // A failed request fails the sub-session before its runner hears of it: no retry
        // leaves the gateway (the runner's own retries are refused above), nothing falls back.
        // A cancelled request ends nothing: whoever cancelled it records the end.
        if allowed
            && !cancelled
            && let Some(why) = failure
        {
            self.finish_subsession(
                session_id,
                SubsessionStatus::Failed,
                result_text,
                Some(format!("a DeepSeek request failed: {why}")),
            );
            self.stop_ended_runtime(session_id, "a DeepSeek request failed");
        }
        response
    }
}
