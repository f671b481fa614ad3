//! Tests of the client end of the broker handshake against the real broker end and fake brokers.

use super::*;
use tokio::net::UnixListener;

const SECRET: &str = "brk_secret";
/// The session and generation the fake brokers serve.
const FAKE: BrokerBinding<'static> = BrokerBinding {
    session_id: "ns_fake",
    generation: 1,
};
/// The session and generation of `test_support`'s real broker.
const REAL: BrokerBinding<'static> = BrokerBinding {
    session_id: "ns_test",
    generation: 1,
};

fn recorded<'a>(
    path: &'a Path,
    (pid, start, boot): &'a (i32, u64, String),
    secret: &'a str,
    binding: BrokerBinding<'a>,
) -> RecordedBroker<'a> {
    RecordedBroker {
        socket_path: path,
        pid: *pid,
        start_time: *start,
        boot_id: boot,
        secret,
        binding,
    }
}

/// This test process's recorded identity: in-process listeners have it as their peer.
fn me() -> (i32, u64, String) {
    let pid = std::process::id() as i32;
    let start = sandbox::process::process_start_time(pid).unwrap();
    (pid, start, sandbox::process::boot_id().unwrap())
}

async fn connect_as(
    path: &Path,
    me: &(i32, u64, String),
    secret: &str,
) -> Result<BrokerLink, BrokerLinkError> {
    connect_bound(path, me, secret, FAKE).await
}

async fn connect_bound(
    path: &Path,
    me: &(i32, u64, String),
    secret: &str,
    binding: BrokerBinding<'_>,
) -> Result<BrokerLink, BrokerLinkError> {
    connect_broker(
        &recorded(path, me, secret, binding),
        Duration::from_secs(2),
        "test",
    )
    .await
    .map(|(link, _)| link)
}

/// A broker that answers the first frame with `answer(hello)` (or nothing) and then waits.
fn fake_broker(
    dir: &Path,
    answer: impl FnOnce(GatewayHello) -> Option<BrokerToGateway> + Send + 'static,
) -> std::path::PathBuf {
    let path = dir.join("fake.sock");
    let listener = UnixListener::bind(&path).unwrap();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut link = Framed::new(stream, frame_codec());
        let frame = link.next().await.unwrap().unwrap();
        let GatewayToBroker::Hello(hello) = decode(&frame).unwrap() else {
            panic!("the client did not start with a hello");
        };
        match answer(hello) {
            Some(reply) => link.send(encode(&reply).unwrap()).await.unwrap(),
            None => drop(link),
        }
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    path
}

fn honest_hello(hello: &GatewayHello, secret: &str) -> BrokerToGateway {
    BrokerToGateway::Hello(BrokerHello {
        protocol_version: PROTOCOL_VERSION,
        build: "fake".into(),
        session_id: FAKE.session_id.into(),
        generation: FAKE.generation,
        proof: common::hash::broker_proof(secret, FAKE, &hello.nonce),
        challenge: "challenge-1".into(),
        refused: None,
    })
}

/// Against the real broker end: the link is verified both ways, so the broker sends it its
/// events; a probe afterwards is answered and does not take the link over.
#[tokio::test]
async fn the_real_broker_accepts_the_link_and_a_probe_does_not_displace_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = crate::test_support::state(dir.path());
    let _serving = crate::link::serve(state.clone()).await.unwrap();
    let path = std::path::PathBuf::from(&state.spec.socket_path);
    let me = me();

    let mut link = connect_bound(&path, &me, &state.spec.secret, REAL)
        .await
        .unwrap();
    let hello = probe_broker(
        &recorded(&path, &me, &state.spec.secret, REAL),
        Duration::from_secs(3),
        "probe",
    )
    .await
    .unwrap();
    assert_eq!(hello.protocol_version, PROTOCOL_VERSION);
    assert_eq!(hello.session_id, "ns_test");

    let seq = state.push_event(common::protocol::BrokerEvent::BrokerExiting { reason: "x".into() });
    assert_eq!(crate::test_support::next_event_seq(&mut link).await, seq);
    state.shutdown.cancel();
}

#[tokio::test]
async fn a_broker_without_the_recorded_secret_fails_the_proof() {
    let dir = tempfile::tempdir().unwrap();
    let state = crate::test_support::state(dir.path());
    let _serving = crate::link::serve(state.clone()).await.unwrap();
    let path = std::path::PathBuf::from(&state.spec.socket_path);
    let err = connect_bound(&path, &me(), "brk_other", REAL)
        .await
        .unwrap_err();
    assert!(
        matches!(err, BrokerLinkError::Verify(HelloRejected::BadProof)),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "broker failed the secret proof");
    state.shutdown.cancel();
}

/// The real broker holds the recorded secret, but it was started for another session or runner
/// generation than the one it is recorded for (a record moved between sessions): refused, by
/// the hello's own words and, were those forged, by the bound proof.
#[tokio::test]
async fn a_broker_of_another_session_or_generation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = crate::test_support::state(dir.path());
    let _serving = crate::link::serve(state.clone()).await.unwrap();
    let path = std::path::PathBuf::from(&state.spec.socket_path);
    for other in [
        BrokerBinding {
            session_id: "ns_other",
            generation: 1,
        },
        BrokerBinding {
            session_id: "ns_test",
            generation: 2,
        },
    ] {
        let err = connect_bound(&path, &me(), &state.spec.secret, other)
            .await
            .unwrap_err();
        assert!(
            matches!(err, BrokerLinkError::Verify(HelloRejected::OtherSession)),
            "{other:?}: {err:?}"
        );
        assert_eq!(
            err.to_string(),
            "the broker serves another session or runner generation than the one it is \
             recorded for"
        );
    }
    state.shutdown.cancel();

    // A broker that claims the expected session but proves the secret for its own: bad proof.
    let lying = dir.path().join("lying");
    std::fs::create_dir(&lying).unwrap();
    let path = fake_broker(&lying, |hello| {
        let theirs = BrokerBinding {
            session_id: "ns_theirs",
            generation: 1,
        };
        Some(BrokerToGateway::Hello(BrokerHello {
            protocol_version: PROTOCOL_VERSION,
            build: "fake".into(),
            session_id: FAKE.session_id.into(),
            generation: FAKE.generation,
            proof: common::hash::broker_proof(SECRET, theirs, &hello.nonce),
            challenge: "challenge-1".into(),
            refused: None,
        }))
    });
    let err = connect_as(&path, &me(), SECRET).await.unwrap_err();
    assert!(
        matches!(err, BrokerLinkError::Verify(HelloRejected::BadProof)),
        "{err:?}"
    );
}

/// The recorded pid is a live process with the right start time, but the socket is served
/// by another one (this test): refused before any frame is sent.
#[tokio::test]
async fn a_socket_served_by_another_process_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let hello_seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = hello_seen.clone();
    let path = fake_broker(dir.path(), move |hello| {
        seen.store(true, std::sync::atomic::Ordering::SeqCst);
        Some(honest_hello(&hello, SECRET))
    });
    let mut other = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let other_pid = other.id() as i32;
    let other_start = sandbox::process::process_start_time(other_pid).unwrap();
    let boot = sandbox::process::boot_id().unwrap();
    let result = connect_as(&path, &(other_pid, other_start, boot), SECRET).await;
    other.kill().unwrap();
    other.wait().unwrap();
    let err = result.unwrap_err();
    assert!(matches!(err, BrokerLinkError::PeerPid), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the broker socket's peer is not the recorded broker process"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!hello_seen.load(std::sync::atomic::Ordering::SeqCst));
}

/// A record whose start time or boot differs is refused before the socket is touched (the
/// socket here does not exist, which would otherwise be a connect error).
#[tokio::test]
async fn a_record_of_another_process_or_boot_is_refused_before_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none.sock");
    let (pid, start, boot) = me();
    for (record, identity) in [
        ((pid, start + 1, boot.clone()), Identity::PidReused),
        (
            (pid, start, "another-boot".to_string()),
            Identity::OtherBoot,
        ),
        ((i32::MAX, start, boot.clone()), Identity::NotRunning),
    ] {
        let err = connect_as(&missing, &record, SECRET).await.unwrap_err();
        assert!(
            matches!(err, BrokerLinkError::IdentityMismatch(got) if got == identity),
            "{err:?}"
        );
    }
    let me = (pid, start, boot);
    let err = connect_broker(
        &recorded(&missing, &me, SECRET, FAKE),
        Duration::from_millis(100),
        "test",
    )
    .await
    .unwrap_err();
    assert!(matches!(err, BrokerLinkError::Connect(_)), "{err:?}");
}

#[tokio::test]
async fn bad_answers_get_their_own_errors() {
    let me = me();
    let dir = tempfile::tempdir().unwrap();

    let refusing = dir.path().join("refusing");
    std::fs::create_dir(&refusing).unwrap();
    let path = fake_broker(&refusing, |hello| {
        let BrokerToGateway::Hello(mut answer) = honest_hello(&hello, SECRET) else {
            unreachable!()
        };
        answer.refused = Some("no common protocol version".into());
        Some(BrokerToGateway::Hello(answer))
    });
    let err = connect_as(&path, &me, SECRET).await.unwrap_err();
    assert!(
        matches!(&err, BrokerLinkError::Verify(HelloRejected::Refused(r)) if r == "no common protocol version"),
        "{err:?}"
    );

    let other_frame = dir.path().join("other");
    std::fs::create_dir(&other_frame).unwrap();
    let path = fake_broker(&other_frame, |_| {
        Some(BrokerToGateway::Unsupported {
            message_type: "hello".into(),
        })
    });
    let err = connect_as(&path, &me, SECRET).await.unwrap_err();
    assert!(matches!(err, BrokerLinkError::NotHello), "{err:?}");

    let closing = dir.path().join("closing");
    std::fs::create_dir(&closing).unwrap();
    let path = fake_broker(&closing, |_| None);
    let err = connect_as(&path, &me, SECRET).await.unwrap_err();
    assert!(matches!(err, BrokerLinkError::Closed), "{err:?}");

    let silent = dir.path().join("silent");
    std::fs::create_dir(&silent).unwrap();
    let listener = UnixListener::bind(silent.join("fake.sock")).unwrap();
    let started = std::time::Instant::now();
    let silent_socket = silent.join("fake.sock");
    let err = probe_broker(
        &recorded(&silent_socket, &me, SECRET, FAKE),
        Duration::from_millis(300),
        "probe",
    )
    .await
    .unwrap_err();
    assert!(matches!(err, BrokerLinkError::Timeout), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
    drop(listener);
}
