//! Supervising brokers: attaching to one (and carrying its link's events into state) only when its
//! record is the session's own (`brokers::ownership`), re-adopting them all when the gateway
//! starts, reporting a lost runtime (dropping a record that proved another session's, and
//! stopping the session's own broker its record no longer leads to), expiring leases, and seeing
//! a stop through — by signal, then by kill — so no hung broker keeps a session or a write in
//! limbo.

use std::sync::Arc;
use std::time::Duration;

use common::protocol::{GatewayToBroker, VERDICTS_SINCE_VERSION, Verdict};
use common::time::now_unix_ms;
use futures::StreamExt;

use super::Gateway;
use crate::brokers::{ADOPT_CONNECT_TIMEOUT, BrokerOwner, BrokerSignal, LinkEvent, wait_gone};
use crate::state::{BrokerRecord, LedgerEvent, SessionStatus, StoreError};

/// Brokers re-adopted at once at start-up.
const ADOPT_CONCURRENCY: usize = 16;
/// How long a broker has to carry out a stop or an expiry before the gateway stops it by signal:
/// above its own worst case (5 s grace for the runner, then up to 3 s for the gateway to take
/// its last event when it was stopped by a signal, without a link).
const STOP_ENFORCE_AFTER: Duration = Duration::from_secs(12);
/// Between SIGTERM and SIGKILL when the gateway stops a broker itself.
const BROKER_TERM_GRACE: Duration = Duration::from_secs(2);
/// How long a SIGKILLed broker may take to disappear.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How long a session's own broker that its record no longer leads to has to stop on SIGTERM
/// (its runner's 5 s grace, then its last report) before it is killed.
const UNREACHABLE_STOP_GRACE: Duration = Duration::from_secs(10);

/// How [`Gateway::stop_broker`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BrokerStop {
    /// Gone within the grace period (or already gone).
    Exited,
    /// It had to be killed.
    Killed,
    /// Still there after SIGKILL (stuck in the kernel).
    StillThere,
}

/// How a link answers the events it persisted.
pub(crate) struct EventAnswers {
    /// The protocol version the broker chose.
    pub(crate) version: u32,
    /// A broker too old for verdicts was refused something: nothing more is acknowledged.
    pub(crate) withhold_acks: bool,
}

impl EventAnswers {
    /// The verdict first (the broker reads an ack without one as a refusal), then the ack. A
    /// broker older than verdicts runs whatever is acknowledged: once it is refused something,
    /// nothing more is acknowledged on this link (acks are cumulative) and it is stopped.
    pub(crate) fn send(
        &mut self,
        outgoing: &tokio::sync::mpsc::UnboundedSender<GatewayToBroker>,
        seq: u64,
        verdict: Option<Verdict>,
    ) {
        let refused = matches!(verdict, Some(Verdict::Refused { .. }));
        if refused && self.version < VERDICTS_SINCE_VERSION && !self.withhold_acks {
            self.withhold_acks = true;
            tracing::warn!(
                "a broker of protocol {} was refused an action it cannot be told no to: \
                 stopping it",
                self.version
            );
            let _ = outgoing.send(GatewayToBroker::Stop {
                reason: "the gateway refused an action this broker cannot be told no to".into(),
            });
        }
        if let Some(verdict) = verdict {
            let _ = outgoing.send(GatewayToBroker::Verdict { seq, verdict });
        }
        if !self.withhold_acks {
            let _ = outgoing.send(GatewayToBroker::Ack { seq });
        }
    }
}

impl Gateway {
    /// Connect to a session's broker, verify it, and carry its link until it closes. Once
    /// attached, releases the broker may have missed (a persisted reply or prompt) are sent
    /// again; the broker ignores duplicates.
    pub(crate) async fn attach(
        self: &Arc<Self>,
        session_id: &str,
        record: &BrokerRecord,
        connect_timeout: Duration,
    ) -> anyhow::Result<()> {
        // The record must be the session's own before anything is sent to what it names.
        let owner = self.broker_owner(session_id, record.generation);
        owner.check(record)?;
        let link = self.host.connect(&owner, record, connect_timeout).await?;
        let live = self.live(session_id);
        let link_id = live.set_link(link.outgoing.clone());
        self.on_attached(session_id);
        self.resend_releases(session_id);
        let gateway = self.clone();
        let session_id = session_id.to_string();
        let record = record.clone();
        tokio::spawn(async move {
            let crate::brokers::Link {
                version,
                outgoing,
                mut incoming,
                close,
            } = link;
            let mut answers = EventAnswers {
                version,
                withhold_acks: false,
            };
            // Acknowledgements are cumulative at the broker, so an event that could not be
            // recorded must not be followed by an ack of a later one: the link is dropped and
            // re-made, and the broker sends everything unacknowledged again, in order.
            let mut failed = false;
            while let Some(event) = incoming.recv().await {
                match event {
                    LinkEvent::Event { seq, event } => {
                        match gateway.on_broker_event(&session_id, record.pid, seq, *event) {
                            Ok(verdict) => answers.send(&outgoing, seq, verdict),
                            Err(err) => {
                                tracing::error!("persisting broker event: {err}");
                                failed = true;
                                break;
                            }
                        }
                    }
                    LinkEvent::Egress { request_id, body } => {
                        let (gateway, outgoing) = (gateway.clone(), outgoing.clone());
                        let session_id = session_id.clone();
                        tokio::spawn(async move {
                            let response = gateway
                                .subsessions()
                                .model_request(&gateway, &session_id, request_id, &body)
                                .await;
                            let _ = outgoing.send(GatewayToBroker::EgressResponse(response));
                        });
                    }
                    LinkEvent::Closed { failed: unreadable } => {
                        failed = unreadable;
                        break;
                    }
                }
            }
            close.cancel();
            // A newer link (a re-attach) may already have replaced this one.
            if !gateway.live(&session_id).clear_link(link_id) {
                return;
            }
            if failed {
                gateway.reattach_after_failure(session_id, record).await;
            } else {
                // A dying broker closes its socket just before it exits: give it a moment, so a
                // dead broker is told apart from a live one that merely lost its link.
                wait_gone(gateway.host(), &record, Duration::from_secs(1)).await;
                gateway.on_link_lost(&session_id, record.pid);
            }
        });
        Ok(())
    }

    /// Re-make a link that was dropped because an event could not be recorded. Boxed: `attach`
    /// spawns the task that calls this.
    fn reattach_after_failure(
        self: Arc<Self>,
        session_id: String,
        record: BrokerRecord,
    ) -> futures::future::BoxFuture<'static, ()> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            if self
                .attach(&session_id, &record, ADOPT_CONNECT_TIMEOUT)
                .await
                .is_err()
            {
                self.on_link_lost(&session_id, record.pid);
            }
        })
    }

    /// Re-attach the session's recorded broker if it has no link; a broker that fails
    /// verification is reported as lost, never faked.
    pub(crate) async fn reattach_if_detached(self: &Arc<Self>, session_id: &str) {
        let Ok(session) = self.load(session_id) else {
            return;
        };
        if self.live(session_id).attached() || session.status.is_terminal() {
            return;
        }
        if let Some(record) = &session.broker
            && let Err(err) = self.attach(session_id, record, ADOPT_CONNECT_TIMEOUT).await
        {
            let run_generation = session.current_run.as_ref().map(|run| run.generation);
            self.adoption_refused(session_id, record, run_generation, &err)
                .await;
        }
    }

    /// The broker runtime generation `generation` of `session_id` must be: its places and
    /// secret derived from the session id and the server key, never read from a record.
    pub(crate) fn broker_owner(&self, session_id: &str, generation: u32) -> BrokerOwner {
        BrokerOwner::derive(
            &self.config.state_dir,
            &self.server_key,
            session_id,
            generation,
        )
    }

    /// The session's recorded broker was not (re-)attached: its run is lost, and said so. A
    /// record that proved not to be the session's own (`ownership::disowns`: moved from another
    /// session or edited) is dropped from the session in the same transition, so nothing is
    /// ever sent through it again; the broker it names is left alone (it serves its own
    /// session, whose own record decides its fate). Whatever the reason, the session's own
    /// broker — one that still answers at the session's derived socket and proves it serves this
    /// session (the recorded generation's or the current run's) — is stopped first: unreachable
    /// through its record, it must not keep a runner going beside the next generation on the
    /// same conversation, nor write while the session's prepared writes are settled.
    pub(crate) async fn adoption_refused(
        self: &Arc<Self>,
        session_id: &str,
        record: &BrokerRecord,
        run_generation: Option<u32>,
        err: &anyhow::Error,
    ) {
        let mut generations = vec![record.generation];
        generations.extend(run_generation);
        generations.dedup();
        let mut stopped = false;
        for generation in generations.into_iter().filter(|g| *g > 0) {
            stopped |= self.stop_unreachable_broker(session_id, generation).await;
        }
        if !crate::brokers::ownership::disowns(err) {
            self.mark_runtime_lost(session_id, &format!("{err:#}"));
            return;
        }
        tracing::error!(
            session = %session_id,
            "the recorded broker is not this session's, so it was not attached: {err:#}"
        );
        let why = format!(
            "the recorded broker is not this session's ({err:#}); the database was changed \
             outside the gateway, so nothing was attached to it{}. Continue the session to start \
             a new runner",
            if stopped {
                ", and the session's own runner was stopped"
            } else {
                ""
            }
        );
        let lost = self.transition(
            session_id,
            "recording a disowned broker record",
            |session| session.broker_disowned(&why),
        );
        if lost.is_some_and(|s| s.delegation.is_some() && s.stop_request.is_none()) {
            self.subsessions()
                .runtime_lost(self, session_id, "its broker failed verification");
        }
        self.resolve_prepared_writes(session_id);
        self.discard_runtime_dir_of(session_id);
    }

    /// Stop the broker that serves generation `generation` of `session_id` at the session's
    /// derived socket, if one is there and proves it (the same handshake as an attach, then
    /// SIGTERM through its pidfd, SIGKILL if it does not exit in time); whether one was found.
    /// Its unacknowledged events are not recorded: the session's run is reported lost, and
    /// writes it left prepared are settled from the files once it is gone.
    async fn stop_unreachable_broker(&self, session_id: &str, generation: u32) -> bool {
        let owner = self.broker_owner(session_id, generation);
        let Some(found) = self.host.find(&owner).await else {
            return false;
        };
        match self
            .host
            .connect(&owner, &found, ADOPT_CONNECT_TIMEOUT)
            .await
        {
            Ok(link) => link.close.cancel(),
            Err(err) => {
                tracing::info!(
                    session = %session_id,
                    "the broker at the session's socket did not prove it is the session's: {err:#}"
                );
                return false;
            }
        }
        tracing::warn!(
            session = %session_id,
            generation,
            "stopping the session's own broker, which its record no longer leads to"
        );
        self.host.signal(&found, BrokerSignal::Term);
        if !wait_gone(self.host(), &found, UNREACHABLE_STOP_GRACE).await {
            self.host.signal(&found, BrokerSignal::Kill);
            if !wait_gone(self.host(), &found, KILL_WAIT).await {
                self.record_event(session_id, LedgerEvent::BrokerDidNotExit {});
            }
        }
        true
    }

    /// Send again what a (re)attached broker may have missed: the persisted reply of the turn it
    /// has not confirmed, and a released prompt it has not confirmed. Both are idempotent at the
    /// broker.
    pub fn resend_releases(&self, session_id: &str) {
        let pending = self.store.read(|tx| {
            let Some(session) = tx.session(session_id)? else {
                return Ok::<_, StoreError>(None);
            };
            let mut reply = None;
            if let Some(turn_id) = &session.undelivered_reply_turn
                && let Some(turn) = tx.turn(turn_id)?
                && let Some(reply_id) = &turn.reply_id
                && let Some(stored) = tx.reply(session_id, reply_id)?
            {
                reply = Some(super::events::release_again(tx, &turn, stored)?);
            }
            // A prompt goes to the runner only as the ledger released it (by its SHA-256; rows
            // from before hashes hold the text): a record edited while the gateway runs is
            // checked by nothing else until the next open, and one written into the database
            // behind the gateway's back would reach ChatGPT as the owner's instruction.
            let mut prompt = session.undelivered_prompt.clone();
            if let Some(p) = &prompt {
                let sha256 = common::hash::sha256_hex(p.text.as_bytes());
                let released = tx.events(session_id)?.iter().any(|(_, _, kind, data)| {
                    kind == "prompt_released"
                        && data["prompt_id"] == p.prompt_id.as_str()
                        && (data["text_sha256"] == sha256.as_str()
                            || data["text"] == p.text.as_str())
                });
                if !released {
                    tracing::error!(
                        session_id,
                        "an undelivered prompt the ledger never released was not sent (the \
                         database was changed outside the gateway)"
                    );
                    prompt = None;
                }
            }
            Ok(Some((reply, prompt)))
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

    /// A verified broker link is up again: see [`crate::state::SessionRecord::reattached`].
    pub fn on_attached(&self, session_id: &str) {
        self.transition(session_id, "recording a re-attached runtime", |session| {
            session.reattached()
        });
    }

    /// The link to the session's broker `broker_pid` closed. If the session was still live, that
    /// is reported, not hidden: the runner is lost to this gateway until recovery. Nothing happens
    /// if a newer broker (a new generation, a re-attach) has taken over meanwhile.
    pub fn on_link_lost(&self, session_id: &str, broker_pid: i32) {
        let live = self.live(session_id);
        if live.attached() {
            return;
        }
        let forced = live.stop_enforced();
        let mut gone = false;
        let lost = self.transition(session_id, "recording lost runtime", |session| {
            let broker_gone = session
                .broker
                .as_ref()
                .is_none_or(|b| !self.host.is_alive(b));
            gone = broker_gone;
            session.link_lost(broker_pid, broker_gone, forced)
        });
        if gone && lost.is_some_and(|s| s.delegation.is_some() && s.stop_request.is_none()) {
            self.subsessions()
                .runtime_lost(self, session_id, "its broker exited");
        }
        // Only if the broker itself is gone (a live one finishes its writes and reports).
        self.resolve_prepared_writes(session_id);
        self.discard_runtime_dir_of(session_id);
    }

    /// The session's runtime is gone or failed verification: report it, do not hide it.
    pub(crate) fn mark_runtime_lost(&self, session_id: &str, why: &str) {
        let lost = self.transition(session_id, "recording lost runtime", |session| {
            session.runtime_lost(why)
        });
        if lost.is_some_and(|s| s.delegation.is_some() && s.stop_request.is_none()) {
            self.subsessions().runtime_lost(
                self,
                session_id,
                "its broker is gone or failed verification",
            );
        }
        self.resolve_prepared_writes(session_id);
        self.discard_runtime_dir_of(session_id);
    }

    /// At gateway start: re-adopt every live session's broker that passes verification, and
    /// report the others as lost. Brokers re-send the events the gateway has not acknowledged,
    /// which reconciles what happened while it was away.
    pub async fn adopt_all(self: &Arc<Self>) {
        // A delegation recorded but never launched is reported, not launched late.
        self.subsessions().settle_at_start(self);
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
            // Only a record at the session's own places: one moved from another session would
            // stop that session's broker.
            .filter(|(id, b)| self.broker_owner(id, b.generation).at_own_places(b))
            .filter(|(_, b)| self.host.is_alive(b))
            .collect();
        // Concurrently: a hung broker costs its handshake timeout, and N of them must not cost N
        // timeouts before the listener opens.
        // The runtime area's dirs of sessions whose broker is gone go (before the listener
        // opens: no session starts meanwhile).
        let running: std::collections::HashSet<String> = sessions
            .iter()
            .filter(|session| {
                session
                    .broker
                    .as_ref()
                    .is_some_and(|b| self.host.is_alive(b))
            })
            .map(|session| crate::runtime_area::session_dir_name(&session.id))
            .collect();
        crate::runtime_area::sweep(
            &self.config.owner_home,
            &self.config.state_dir,
            &running,
            &self.reaper,
        );
        let live = sessions
            .into_iter()
            .filter(|session| !session.status.is_terminal())
            .filter_map(|session| {
                let run_generation = session.current_run.as_ref().map(|run| run.generation);
                Some((session.id, session.broker?, run_generation))
            });
        futures::stream::iter(live)
            .for_each_concurrent(
                ADOPT_CONCURRENCY,
                |(session_id, record, run_generation)| async move {
                    match self
                        .attach(&session_id, &record, ADOPT_CONNECT_TIMEOUT)
                        .await
                    {
                        Ok(()) => {
                            tracing::info!(session = %session_id, "re-adopted broker");
                            self.record_event(&session_id, LedgerEvent::BrokerAdopted {});
                        }
                        Err(err) => {
                            tracing::warn!(session = %session_id, "broker not re-adopted: {err:#}");
                            self.adoption_refused(&session_id, &record, run_generation, &err)
                                .await;
                        }
                    }
                },
            )
            .await;
        for (session_id, record) in unfinished_stops {
            self.send_stop(
                &session_id,
                Some(&record),
                "stop requested before the gateway restarted",
            );
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

    /// Ask the session's broker to stop over its link or, without one, by SIGTERM to the
    /// verified process (it stops its runner's group).
    pub(crate) fn send_stop(&self, session_id: &str, record: Option<&BrokerRecord>, reason: &str) {
        let reason = reason.to_string();
        if !self.live(session_id).send(GatewayToBroker::Stop { reason })
            && let Some(record) = record
        {
            self.host.signal(record, BrokerSignal::Term);
        }
    }

    /// Expire every live session whose lease ran out: stop its runner, mark it `expired`, keep
    /// everything inspectable. Also forgets the in-memory side of sessions that ended.
    pub fn enforce_leases(self: &Arc<Self>) {
        let now = now_unix_ms();
        let Ok(sessions) = self.store.read(|tx| tx.sessions()) else {
            return;
        };
        let mut ended = std::collections::HashSet::new();
        for session in sessions {
            if session.status.is_terminal() {
                ended.insert(session.id);
                continue;
            }
            if session.lease_expires_at_ms > now {
                continue;
            }
            let Some(current) =
                self.transition(&session.id, "recording an expired lease", |s| s.expire(now))
            else {
                continue;
            };
            self.send_stop(&current.id, current.broker.as_ref(), "lease expired");
            self.enforce_stop(&current.id);
        }
        self.live.prune(|id| ended.contains(id));
    }

    /// A stop or expiry the broker has not carried out within [`STOP_ENFORCE_AFTER`] (it is
    /// hung, stopped, or has no link and ignores SIGTERM) is enforced by signal; then the session
    /// is final and the writes the broker left prepared are settled from the files. A broker
    /// that exits in time (after stopping its runner and reporting it) is only waited for.
    pub(crate) fn enforce_stop(self: &Arc<Self>, session_id: &str) {
        let gateway = self.clone();
        let session_id = session_id.to_string();
        tokio::spawn(async move {
            // Its sub-sessions stop first (a no-op when the stop already saw to them).
            gateway
                .subsessions()
                .stop_all(&gateway, &session_id, "its session is stopping")
                .await;
            let Ok(Some(record)) = gateway
                .store
                .read(|tx| tx.session(&session_id))
                .map(|session| session.and_then(|s| s.broker))
            else {
                return;
            };
            if !wait_gone(gateway.host(), &record, STOP_ENFORCE_AFTER).await {
                let stopped = gateway
                    .stop_broker(&session_id, &record, STOP_ENFORCE_AFTER, BROKER_TERM_GRACE)
                    .await;
                if stopped != BrokerStop::Exited {
                    // Its link is gone with it; if nothing made the session final, this does.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    gateway.transition(&session_id, "recording an enforced stop", |session| {
                        session.stop_enforced(stopped == BrokerStop::Killed)
                    });
                }
            }
            gateway.resolve_prepared_writes(&session_id);
            gateway.discard_runtime_dir_of(&session_id);
        });
    }

    /// Make sure the session's recorded broker is gone: SIGTERM (it stops its runner's group),
    /// up to `grace` for it to exit, then SIGKILL — a hung or stopped broker cannot keep a session
    /// or a prepared write in limbo. `waited` is how long it already had (for the ledger). A kill
    /// that was sent is recorded as `broker_killed`.
    pub(crate) async fn stop_broker(
        &self,
        session_id: &str,
        record: &BrokerRecord,
        waited: Duration,
        grace: Duration,
    ) -> BrokerStop {
        self.host.signal(record, BrokerSignal::Term);
        if wait_gone(self.host(), record, grace).await {
            return BrokerStop::Exited;
        }
        // Set before the kill, so the link's end (which follows it) can say what happened.
        self.live(session_id).mark_stop_enforced();
        if self.host.signal(record, BrokerSignal::Kill) {
            let after_seconds = (waited + grace).as_secs();
            self.record_event(session_id, LedgerEvent::BrokerKilled { after_seconds });
        }
        if wait_gone(self.host(), record, KILL_WAIT).await {
            BrokerStop::Killed
        } else {
            self.record_event(session_id, LedgerEvent::BrokerDidNotExit {});
            BrokerStop::StillThere
        }
    }
}
