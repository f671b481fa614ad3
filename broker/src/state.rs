//! The broker's memory: the outbox of numbered events awaiting the gateway's acknowledgement, the
//! runner's model turns keyed by request fingerprint, the actions ChatGPT approved, and the live
//! runner's handle (which `runner` fills and stops).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use common::protocol::{ApprovedCall, BrokerEvent, BrokerSpec, ReplyRelease, Verdict};
use common::tools::ActionOutcome;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::executor::Executor;

/// One model turn the runner asked for, and ChatGPT's reply once released.
pub struct TurnSlot {
    pub reply: watch::Sender<Option<ReplyRelease>>,
}

/// An approved action and, once run, its outcome.
#[derive(Clone)]
pub struct ActionSlot {
    pub call: ApprovedCall,
    /// The outcome and the sequence number of the event that reports it to the gateway.
    pub outcome: Option<(ActionOutcome, u64)>,
}

#[derive(Default)]
struct Outbox {
    next_seq: u64,
    /// Events not yet acknowledged, by sequence number.
    pending: BTreeMap<u64, BrokerEvent>,
    /// Highest acknowledged sequence number (events are acknowledged in order).
    acked_upto: u64,
}

/// The layer budget when the gateway named none (an older gateway): 4 GiB.
const DEFAULT_LAYER_MB: u64 = 4096;

/// The live runner: its process group and whether it has exited.
pub struct RunnerHandle {
    pub pgid: rustix::process::Pid,
    pub exited: watch::Receiver<bool>,
}

/// State shared by the broker's tasks.
pub struct BrokerState {
    pub spec: BrokerSpec,
    pub executor: Executor,
    outbox: Mutex<Outbox>,
    /// Wakes the link task when an event is queued.
    pub outbox_changed: Notify,
    acked: watch::Sender<u64>,
    turns: Mutex<HashMap<String, std::sync::Arc<TurnSlot>>>,
    actions: Mutex<HashMap<String, ActionSlot>>,
    /// Serialises executions so one action cannot run twice concurrently.
    pub action_lock: tokio::sync::Mutex<()>,
    pub runner: tokio::sync::Mutex<Option<RunnerHandle>>,
    /// The runner's input, apart from `runner` so a slow write never blocks a stop.
    pub runner_stdin: tokio::sync::Mutex<Option<tokio::process::ChildStdin>>,
    /// Prompts already written to the runner: the gateway re-sends an undelivered prompt after a
    /// reconnect, and the runner must see each prompt once.
    pub delivered_prompts: Mutex<std::collections::HashSet<String>>,
    /// Cancelled when the broker should exit.
    pub shutdown: CancellationToken,
    /// How long an action's outcome waits for the gateway's acknowledgement before the runner is
    /// told to retry (the gateway may be restarting).
    pub action_ack_timeout: Duration,
    /// Protocol version negotiated with the gateway on the latest link (0: never linked).
    link_version: std::sync::atomic::AtomicU32,
    /// A sub-session's model requests: queued for the link, then waiting for their answer.
    egress: Mutex<Egress>,
    /// The gateway's verdicts on events that ask for one, by sequence number, until taken.
    verdicts: Mutex<HashMap<u64, Verdict>>,
}

/// Model requests of a DeepSeek sub-session's runner on their way through the gateway.
#[derive(Default)]
struct Egress {
    next_id: u64,
    /// Numbers the links that carry requests, so a closing link fails only its own.
    next_link: u64,
    /// Not yet sent on a link.
    queued: Vec<(u64, String)>,
    /// Waiting for the gateway's answer, with the link that carried each (none: still queued).
    waiting: HashMap<
        u64,
        (
            tokio::sync::oneshot::Sender<common::protocol::EgressResponse>,
            Option<u64>,
        ),
    >,
}

impl BrokerState {
    pub fn new(spec: BrokerSpec) -> anyhow::Result<Self> {
        let extra_protected: Vec<PathBuf> =
            spec.extra_protected.iter().map(PathBuf::from).collect();
        let mut policy = sandbox::path_policy::PathPolicy::new(
            PathBuf::from(&spec.owner_home),
            PathBuf::from(&spec.state_dir),
            extra_protected.clone(),
        );
        // Writes: the same set, plus where the gateway and Claude Code are installed; inside the
        // state dir only this session's own managed worktree is open (never another session's).
        let own_worktree = crate::places::own_worktree(&spec);
        // The broker runs from the gateway's pinned copy: the install path comes from the spec.
        let exe = match &spec.gateway_install_path {
            Some(path) => PathBuf::from(path),
            None => std::env::current_exe()
                .map_err(|e| anyhow::anyhow!("locating the gateway executable: {e}"))?,
        };
        let mut write_policy = policy
            .clone()
            .with_write_protected(sandbox::protected::write_protected(
                &exe,
                std::path::Path::new(&spec.claude_bin),
                std::path::Path::new(&spec.owner_home),
            ))
            .with_autorun_allowed(sandbox::protected::autorun::AutorunAllowed::from_names(
                spec.autorun_allowed.iter().map(String::as_str),
            ))
            .with_strict_hooks(spec.strict_hooks);
        if let Some(own) = &own_worktree {
            write_policy = write_policy.with_open_subtree(own.clone());
        }
        if let Some(target) = &spec.merge_target {
            write_policy = write_policy.with_merge_target(PathBuf::from(target));
        }
        if let Some(dir) = &spec.worktree_dir {
            policy = policy.with_open_subtree(PathBuf::from(dir));
        }
        // Commands run through `<this executable> sandbox-exec`, executed from this broker's own
        // image (the gateway's sealed copy, never a path a session could replace), with
        // per-command scratch dirs and the same protected paths masked. A broker re-adopted by a
        // restarted gateway keeps the image it was started from.
        // An image that cannot be verified leaves commands refused (`sandbox_unavailable`).
        let helper =
            match sandbox::pinned_exe::PinnedExe::adopt_own_image(spec.helper_sha256.as_deref()) {
                Ok(helper) => {
                    tracing::info!(
                        "sandbox helper: {} ({} bytes, sha256 {})",
                        helper.pinning_name(),
                        helper.size(),
                        spec.helper_sha256.as_deref().unwrap_or("unknown")
                    );
                    Some(std::sync::Arc::new(helper))
                }
                Err(err) => {
                    tracing::error!("sandbox helper not verified, commands are refused: {err}");
                    None
                }
            };
        let commands = crate::executor::CommandSandbox::new(
            helper,
            crate::places::command_scratch_root(&spec.state_dir, &spec.session_id),
            std::path::Path::new(&spec.owner_home),
            std::path::Path::new(&spec.state_dir),
            &extra_protected,
        )
        .with_own_worktree(own_worktree)
        .with_working_directory_identity(spec.working_directory_identity)
        .with_limits(sandbox::Limits {
            memory: spec.command_limits.memory_mb.map(|mb| mb * 1024 * 1024),
            scratch: spec.command_limits.scratch_mb.map(|mb| mb * 1024 * 1024),
            // All the gateway's commands in one bounded parent, this session's in one cgroup
            // reused by its commands.
            group: spec
                .command_limits
                .all_commands_memory_mb
                .zip(spec.command_limits.memory_group)
                .map(|(mb, gateway)| sandbox::MemoryGroup {
                    gateway,
                    bytes: mb.saturating_mul(1024 * 1024),
                    session: Some(sandbox::MemoryGroup::key(&spec.session_id)),
                }),
            ..sandbox::Limits::default()
        })
        .with_search_path(
            spec.command_path
                .clone()
                .unwrap_or_else(|| sandbox::command::FIXED_PATH.to_string()),
        )
        .with_layer(
            spec.command_limits
                .layer_mb
                .unwrap_or(DEFAULT_LAYER_MB)
                .saturating_mul(1024 * 1024),
        )
        .in_runtime_area(
            std::path::Path::new(&spec.state_dir),
            crate::places::session_dir_name(&spec.session_id),
        );
        let mut executor = Executor::new(policy, PathBuf::from(&spec.working_directory))
            .with_command_sandbox(commands)
            .with_write_policy(write_policy);
        if spec.profile != common::tools::CapabilityProfile::ReadOnly {
            let expected = spec.working_directory_identity.map(|id| (id.dev, id.ino));
            executor = executor.with_writes(expected);
        }
        // A layer left by an earlier broker of this session (a generation whose broker was
        // killed) goes: which real files that broker's writes changed since its last command is
        // lost with it, so its layer could hold stale copies.
        if let Some(layer) = executor.command_layer_in_place() {
            layer.discard();
        }
        Ok(BrokerState {
            spec,
            executor,
            outbox: Mutex::new(Outbox {
                next_seq: 1,
                ..Outbox::default()
            }),
            outbox_changed: Notify::new(),
            acked: watch::channel(0).0,
            turns: Mutex::new(HashMap::new()),
            actions: Mutex::new(HashMap::new()),
            action_lock: tokio::sync::Mutex::new(()),
            runner: tokio::sync::Mutex::new(None),
            runner_stdin: tokio::sync::Mutex::new(None),
            delivered_prompts: Mutex::new(std::collections::HashSet::new()),
            shutdown: CancellationToken::new(),
            link_version: std::sync::atomic::AtomicU32::new(0),
            egress: Mutex::default(),
            verdicts: Mutex::default(),
            action_ack_timeout: Duration::from_secs(600),
        })
    }

    /// The protocol version of the latest verified link.
    pub fn link_version(&self) -> u32 {
        self.link_version.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn set_link_version(&self, version: u32) {
        self.link_version
            .store(version, std::sync::atomic::Ordering::SeqCst);
    }

    /// Queue an event for the gateway; returns its sequence number.
    pub fn push_event(&self, event: BrokerEvent) -> u64 {
        let seq = {
            let mut outbox = lock(&self.outbox);
            let seq = outbox.next_seq;
            outbox.next_seq += 1;
            outbox.pending.insert(seq, event);
            seq
        };
        self.outbox_changed.notify_one();
        seq
    }

    /// Events with a sequence number above `after`, in order.
    pub fn events_after(&self, after: u64) -> Vec<(u64, BrokerEvent)> {
        let outbox = lock(&self.outbox);
        outbox
            .pending
            .range(after + 1..)
            .map(|(seq, event)| (*seq, event.clone()))
            .collect()
    }

    /// Highest sequence number acknowledged so far.
    pub fn acked_upto(&self) -> u64 {
        lock(&self.outbox).acked_upto
    }

    /// The gateway persisted everything up to `seq`.
    pub fn ack(&self, seq: u64) {
        let mut outbox = lock(&self.outbox);
        let keep = outbox.pending.split_off(&(seq + 1));
        outbox.pending = keep;
        outbox.acked_upto = outbox.acked_upto.max(seq);
        let upto = outbox.acked_upto;
        drop(outbox);
        self.acked.send_replace(upto);
    }

    /// Wait until event `seq` is acknowledged; false on timeout or shutdown.
    pub async fn wait_acked(&self, seq: u64, timeout: Duration) -> bool {
        let mut rx = self.acked.subscribe();
        let wait = rx.wait_for(|upto| *upto >= seq);
        tokio::select! {
            res = tokio::time::timeout(timeout, wait) => matches!(res, Ok(Ok(_))),
            () = self.shutdown.cancelled() => false,
        }
    }

    /// The gateway's verdict on event `seq` (it arrives just before the event's ack).
    pub fn record_verdict(&self, seq: u64, verdict: Verdict) {
        lock(&self.verdicts).insert(seq, verdict);
    }

    /// Wait for the gateway's verdict on event `seq`: `None` on timeout or shutdown; an event
    /// acknowledged without a verdict is refused (an ack alone approves nothing).
    pub async fn wait_verdict(&self, seq: u64, timeout: Duration) -> Option<Verdict> {
        if !self.wait_acked(seq, timeout).await {
            return None;
        }
        Some(
            lock(&self.verdicts)
                .remove(&seq)
                .unwrap_or(Verdict::Refused {
                    reason: "the gateway acknowledged it without approving it".into(),
                }),
        )
    }

    /// The slot for a runner request fingerprint, and whether it is new.
    pub fn turn_slot(&self, fingerprint: &str) -> (std::sync::Arc<TurnSlot>, bool) {
        let mut turns = lock(&self.turns);
        if let Some(slot) = turns.get(fingerprint) {
            return (slot.clone(), false);
        }
        let slot = std::sync::Arc::new(TurnSlot {
            reply: watch::channel(None).0,
        });
        turns.insert(fingerprint.to_string(), slot.clone());
        (slot, true)
    }

    /// Record a released reply: its calls become approved actions, and the waiting request (or a
    /// later retry of it) gets the reply.
    pub fn release_reply(&self, reply: ReplyRelease) {
        {
            let mut actions = lock(&self.actions);
            for call in &reply.calls {
                // A call the gateway carried out has its outcome already: it is durable, so
                // it needs no acknowledgement (event 0).
                actions
                    .entry(call.action_id.clone())
                    .or_insert_with(|| ActionSlot {
                        call: call.clone(),
                        outcome: call.outcome.clone().map(|outcome| (outcome, 0)),
                    });
            }
        }
        let (slot, _) = self.turn_slot(&reply.fingerprint);
        slot.reply.send_replace(Some(reply));
    }

    /// Approve a call a DeepSeek sub-session's runner made (the gateway recorded it).
    pub fn approve_delegated(&self, call: ApprovedCall) {
        lock(&self.actions)
            .entry(call.action_id.clone())
            .or_insert(ActionSlot {
                call,
                outcome: None,
            });
    }

    /// Queue a sub-session's model request for the gateway; the receiver gets its answer, or
    /// is dropped when the link that carried it closes.
    pub fn queue_egress(
        &self,
        body: String,
    ) -> tokio::sync::oneshot::Receiver<common::protocol::EgressResponse> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        {
            let mut egress = lock(&self.egress);
            egress.next_id += 1;
            let id = egress.next_id;
            egress.queued.push((id, body));
            egress.waiting.insert(id, (tx, None));
        }
        self.outbox_changed.notify_one();
        rx
    }

    /// A number for a new link carrying egress requests.
    pub fn new_egress_link(&self) -> u64 {
        let mut egress = lock(&self.egress);
        egress.next_link += 1;
        egress.next_link
    }

    /// Requests for `link` to send now; they are its own from here on.
    pub fn take_queued_egress(&self, link: u64) -> Vec<(u64, String)> {
        let mut egress = lock(&self.egress);
        let taken = std::mem::take(&mut egress.queued);
        for (id, _) in &taken {
            if let Some((_, carrier)) = egress.waiting.get_mut(id) {
                *carrier = Some(link);
            }
        }
        taken
    }

    /// The gateway's answer to a request.
    pub fn answer_egress(&self, response: common::protocol::EgressResponse) {
        if let Some((waiter, _)) = lock(&self.egress).waiting.remove(&response.request_id) {
            let _ = waiter.send(response);
        }
    }

    /// `link` closed: the requests it carried and no answer came for fail (the runner may retry
    /// them).
    pub fn fail_egress_of(&self, link: u64) {
        lock(&self.egress)
            .waiting
            .retain(|_, (_, carrier)| *carrier != Some(link));
    }

    pub fn action(&self, action_id: &str) -> Option<ActionSlot> {
        lock(&self.actions).get(action_id).cloned()
    }

    /// Remember an action's outcome, reported to the gateway as event `seq`.
    pub fn record_outcome(&self, action_id: &str, outcome: ActionOutcome, seq: u64) {
        if let Some(slot) = lock(&self.actions).get_mut(action_id) {
            slot.outcome = Some((outcome, seq));
        }
    }

    /// Stop everything: the runner first, then the broker.
    pub async fn finish(&self, reason: &str) {
        tracing::info!("broker finishing: {reason}");
        // The session's copy-on-write layer goes before the gateway hears this broker is
        // leaving (it may then kill it); a command still running keeps it for the final sweep,
        // an answered one's overlays go first.
        let settled = self.executor.command_cleanups().settle().await;
        if let Some(layer) = self.executor.command_layer_in_place()
            && (!settled || !layer.discard_if_idle())
        {
            tracing::info!("a command is still running: the layer is removed at exit");
        }
        let seq = self.push_event(BrokerEvent::BrokerExiting {
            reason: reason.to_string(),
        });
        self.wait_acked(seq, Duration::from_secs(5)).await;
        self.shutdown.cancel();
    }
}

pub(crate) use crate::lock;

#[cfg(test)]
mod tests {
    /// A layer an earlier broker of the session left (killed before its stop) is discarded
    /// when the next one starts: its record of written paths is gone.
    #[test]
    fn a_new_broker_discards_a_layer_left_by_an_earlier_one() {
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().join("state");
        let root = crate::places::command_scratch_root(&state_dir.display().to_string(), "ns_test");
        let leftover = root.join("layer/k/upper/stale.txt");
        std::fs::create_dir_all(leftover.parent().unwrap()).unwrap();
        std::fs::write(&leftover, "stale").unwrap();
        let state = crate::test_support::state(dir.path());
        assert_eq!(
            state.executor.command_layer().unwrap().dir(),
            root.join("layer")
        );
        assert!(!root.join("layer").exists());
        // The runtime area is this temp state dir's own (named by its hash).
        let _ = std::fs::remove_dir_all(root.parent().unwrap());
    }
}
