//! A [`BrokerHost`] whose brokers live in the test: each spawn is recorded, each link is a pair
//! of channels the test drives (emit broker events, read what the gateway sent), and a broker
//! "process" is a flag that signals clear. Like a real broker, each serves the session and
//! generation it was spawned for, and a link to it is refused for any other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::protocol::{BrokerEvent, GatewayToBroker};
use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::brokers::{
    BrokerHost, BrokerOwner, BrokerSignal, ConnectError, LaunchSpec, Link, LinkEvent,
};
use crate::state::{BrokerRecord, LaunchError, LaunchErrorCode};

/// One spawn the gateway asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawned {
    pub session_id: String,
    pub pid: i32,
    pub generation: u32,
    pub resume: bool,
    pub system_prompt: String,
}

/// The test's side of one fake broker.
#[derive(Default)]
struct FakeBroker {
    alive: bool,
    /// The session and generation it was spawned for.
    serves: (String, u32),
    /// Where the broker's link delivers events to the gateway.
    events: Option<mpsc::UnboundedSender<LinkEvent>>,
    /// What the gateway sent, over every link so far.
    sent: Option<Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<GatewayToBroker>>>>,
    close: Option<CancellationToken>,
}

#[derive(Default)]
pub struct FakeHost {
    next_pid: AtomicI32,
    brokers: Mutex<HashMap<i32, FakeBroker>>,
    spawns: Mutex<Vec<Spawned>>,
    signals: Mutex<Vec<(i32, BrokerSignal)>>,
    /// The next spawn fails with this.
    pub fail_spawn: Mutex<Option<LaunchError>>,
    /// Connections are refused.
    pub refuse_connect: AtomicBool,
    /// Brokers ignore SIGTERM (hung).
    pub ignore_term: AtomicBool,
}

impl FakeHost {
    pub fn new() -> Arc<Self> {
        Arc::new(FakeHost {
            next_pid: AtomicI32::new(1000),
            ..FakeHost::default()
        })
    }

    pub fn spawns(&self) -> Vec<Spawned> {
        self.spawns.lock().unwrap().clone()
    }

    pub fn signals(&self) -> Vec<(i32, BrokerSignal)> {
        self.signals.lock().unwrap().clone()
    }

    pub fn alive(&self, pid: i32) -> bool {
        self.brokers
            .lock()
            .unwrap()
            .get(&pid)
            .is_some_and(|b| b.alive)
    }

    /// The broker reports `event` with sequence number `seq`.
    pub fn emit(&self, pid: i32, seq: u64, event: BrokerEvent) {
        let brokers = self.brokers.lock().unwrap();
        let events = brokers[&pid].events.as_ref().expect("broker has a link");
        events
            .send(LinkEvent::Event {
                seq,
                event: Box::new(event),
            })
            .expect("link is open");
    }

    /// The next message the gateway sent broker `pid`, within a few seconds.
    pub async fn next_sent(&self, pid: i32) -> GatewayToBroker {
        let sent = self.brokers.lock().unwrap()[&pid]
            .sent
            .clone()
            .expect("broker had a link");
        let mut sent = sent.lock().await;
        tokio::time::timeout(Duration::from_secs(5), sent.recv())
            .await
            .expect("the gateway sent something in time")
            .expect("link open")
    }

    /// Messages up to and including the acknowledgement of `seq` (what the gateway did after
    /// persisting event `seq`).
    pub async fn until_ack(&self, pid: i32, seq: u64) -> Vec<GatewayToBroker> {
        let mut seen = Vec::new();
        loop {
            let message = self.next_sent(pid).await;
            let done = matches!(message, GatewayToBroker::Ack { seq: s } if s == seq);
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    /// Everything already sent to `pid`, without waiting.
    pub async fn drain_sent(&self, pid: i32) -> Vec<GatewayToBroker> {
        let sent = self.brokers.lock().unwrap()[&pid].sent.clone();
        let Some(sent) = sent else { return Vec::new() };
        let mut sent = sent.lock().await;
        let mut out = Vec::new();
        while let Ok(message) = sent.try_recv() {
            out.push(message);
        }
        out
    }

    /// The broker process dies (its link closes with it).
    pub fn kill(&self, pid: i32) {
        let mut brokers = self.brokers.lock().unwrap();
        if let Some(broker) = brokers.get_mut(&pid) {
            broker.alive = false;
            if let Some(events) = broker.events.take() {
                let _ = events.send(LinkEvent::Closed { failed: false });
            }
        }
    }

    /// Only the link closes; the broker lives on.
    pub fn drop_link(&self, pid: i32) {
        let mut brokers = self.brokers.lock().unwrap();
        if let Some(events) = brokers.get_mut(&pid).and_then(|b| b.events.take()) {
            let _ = events.send(LinkEvent::Closed { failed: false });
        }
    }
}

impl BrokerHost for FakeHost {
    fn spawn<'a>(
        &'a self,
        spec: LaunchSpec<'a>,
    ) -> BoxFuture<'a, Result<BrokerRecord, LaunchError>> {
        Box::pin(async move {
            if let Some(error) = self.fail_spawn.lock().unwrap().take() {
                return Err(error);
            }
            let pid = self.next_pid.fetch_add(1, Ordering::SeqCst);
            self.spawns.lock().unwrap().push(Spawned {
                session_id: spec.session.session_id.clone(),
                pid,
                generation: spec.generation,
                resume: spec.resume,
                system_prompt: spec.system_prompt.to_string(),
            });
            self.brokers.lock().unwrap().insert(
                pid,
                FakeBroker {
                    alive: true,
                    serves: (spec.session.session_id.clone(), spec.generation),
                    ..FakeBroker::default()
                },
            );
            Ok(record_of(spec.owner, pid))
        })
    }

    fn connect<'a>(
        &'a self,
        owner: &'a BrokerOwner,
        record: &'a BrokerRecord,
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<Link, ConnectError>> {
        Box::pin(async move {
            if self.refuse_connect.load(Ordering::SeqCst) {
                return Err(ConnectError::SocketUnreachable(
                    std::io::ErrorKind::ConnectionRefused.into(),
                ));
            }
            let mut brokers = self.brokers.lock().unwrap();
            let broker = brokers.get_mut(&record.pid).filter(|b| b.alive).ok_or(
                ConnectError::NotRunning(sandbox::process::Identity::NotRunning),
            )?;
            // What the real handshake proves: the broker serves this session and generation.
            if broker.serves != (owner.session_id.clone(), owner.generation) {
                return Err(ConnectError::WrongSession);
            }
            let (outgoing, sent) = mpsc::unbounded_channel();
            let (events, incoming) = mpsc::unbounded_channel();
            let close = CancellationToken::new();
            broker.events = Some(events);
            broker.sent = Some(Arc::new(tokio::sync::Mutex::new(sent)));
            broker.close = Some(close.clone());
            Ok(Link {
                version: common::protocol::PROTOCOL_VERSION,
                outgoing,
                incoming,
                close,
            })
        })
    }

    fn find<'a>(&'a self, owner: &'a BrokerOwner) -> BoxFuture<'a, Option<BrokerRecord>> {
        Box::pin(async move {
            let brokers = self.brokers.lock().unwrap();
            let serves = (owner.session_id.clone(), owner.generation);
            brokers
                .iter()
                .find(|(_, b)| b.alive && b.serves == serves)
                .map(|(pid, _)| record_of(owner, *pid))
        })
    }

    fn is_alive(&self, record: &BrokerRecord) -> bool {
        self.alive(record.pid)
    }

    fn signal(&self, record: &BrokerRecord, signal: BrokerSignal) -> bool {
        if !self.alive(record.pid) {
            return false;
        }
        self.signals.lock().unwrap().push((record.pid, signal));
        if signal == BrokerSignal::Kill || !self.ignore_term.load(Ordering::SeqCst) {
            self.kill(record.pid);
        }
        true
    }
}

/// The record of fake broker `pid` of `owner`, as the real host writes one.
pub fn record_of(owner: &BrokerOwner, pid: i32) -> BrokerRecord {
    BrokerRecord {
        pid,
        start_time: 1,
        boot_id: "fake-boot".into(),
        socket_path: owner.socket_path.display().to_string(),
        runtime_dir: owner.runtime_dir.display().to_string(),
        secret: owner.secret.clone(),
        generation: owner.generation,
        next_event_seq: 1,
    }
}

/// A spawn failure as the real host reports a missing Claude Code.
pub fn runner_not_found() -> LaunchError {
    LaunchError::now(LaunchErrorCode::RunnerNotFound, "no runner")
}
