//! The gateway's end of a broker's socket handshake, the one copy the gateway (attaching) and
//! gatewayctl (probing) share: the recorded process identity (boot, pid, start time) is checked,
//! the socket is connected, its peer must be our uid and the recorded pid, the identity is checked
//! again (the pid could have been reused meanwhile), then a hello with a fresh nonce must come
//! back with the HMAC proof of the recorded secret. Attaching also proves the gateway to the
//! broker; probing never does, so a probe cannot displace the gateway's verified link.

use std::path::Path;
use std::time::Duration;

use common::codec::{CodecError, decode, encode, frame_codec};
use common::protocol::{
    BrokerHello, BrokerToGateway, GatewayHello, GatewayToBroker, HelloRejected, PROTOCOL_VERSION,
    PROTOCOL_VERSION_MIN,
};
use futures::{SinkExt, StreamExt};
use sandbox::process::Identity;
use tokio::net::UnixStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// A verified link to a broker: length-delimited frames of JSON (`common::codec`).
pub type BrokerLink = Framed<UnixStream, LengthDelimitedCodec>;

/// The least time a broker gets to answer the hello, however short the connect window.
const MIN_HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a socket that is not there yet (a broker still starting) is tried again.
const CONNECT_RETRY: Duration = Duration::from_millis(20);

/// Why a broker link was not made. None of these names a path, pid or secret.
#[derive(Debug, thiserror::Error)]
pub enum BrokerLinkError {
    /// The recorded process is not the one running (before connecting, or after the peer check).
    #[error("broker process identity (boot, pid, start time) does not match the record")]
    IdentityMismatch(Identity),
    /// The socket could not be connected within the connect window.
    #[error("connecting to the broker socket: {0}")]
    Connect(std::io::Error),
    /// The socket's peer credentials could not be read.
    #[error("reading the broker socket's peer credentials: {0}")]
    PeerCredentials(std::io::Error),
    #[error("the broker socket's peer runs as another user")]
    PeerUid,
    #[error("the broker socket's peer is not the recorded broker process")]
    PeerPid,
    #[error("the broker handshake timed out")]
    Timeout,
    #[error("the broker closed the connection during the handshake")]
    Closed,
    #[error("the broker did not answer with a hello")]
    NotHello,
    #[error(transparent)]
    Verify(#[from] HelloRejected),
    #[error("broker link: {0}")]
    Io(#[from] std::io::Error),
    #[error("broker link: {0}")]
    Codec(#[from] CodecError),
}

/// Connect to the broker recorded as `(pid, start_time, boot_id)` at `socket_path`, verify it
/// holds `secret`, and prove the gateway holds it too. The socket is tried again until
/// `connect_timeout` passes (a broker just spawned may not have opened it yet); the hello gets at
/// least 5 s. `build` is the version text sent in the hello.
pub async fn connect_broker(
    socket_path: &Path,
    pid: i32,
    start_time: u64,
    boot_id: &str,
    secret: &str,
    connect_timeout: Duration,
    build: &str,
) -> Result<BrokerLink, BrokerLinkError> {
    let expected = Expected {
        pid,
        start_time,
        boot_id,
    };
    let (mut link, hello) = open_and_hello(
        socket_path,
        &expected,
        secret,
        connect_timeout,
        connect_timeout.max(MIN_HELLO_TIMEOUT),
        build,
    )
    .await?;
    link.send(encode(&GatewayToBroker::Proof {
        proof: common::hash::gateway_proof(secret, &hello.challenge),
    })?)
    .await?;
    Ok(link)
}

/// Check the broker recorded as `(pid, start_time, boot_id)` the same way, but send no proof of
/// our own and close at once: the broker keeps its verified gateway link, and answers with the
/// version and build it runs. One connection attempt; the whole probe takes at most `timeout`.
pub async fn probe_broker(
    socket_path: &Path,
    pid: i32,
    start_time: u64,
    boot_id: &str,
    secret: &str,
    timeout: Duration,
    build: &str,
) -> Result<BrokerHello, BrokerLinkError> {
    let expected = Expected {
        pid,
        start_time,
        boot_id,
    };
    let probe = open_and_hello(
        socket_path,
        &expected,
        secret,
        Duration::ZERO,
        timeout,
        build,
    );
    let (link, hello) = tokio::time::timeout(timeout, probe)
        .await
        .map_err(|_| BrokerLinkError::Timeout)??;
    drop(link);
    Ok(hello)
}

struct Expected<'a> {
    pid: i32,
    start_time: u64,
    boot_id: &'a str,
}

impl Expected<'_> {
    fn check(&self) -> Result<(), BrokerLinkError> {
        match sandbox::process::identify(self.pid, self.start_time, self.boot_id) {
            Identity::Verified => Ok(()),
            other => Err(BrokerLinkError::IdentityMismatch(other)),
        }
    }
}

/// Everything up to and including the verified hello.
async fn open_and_hello(
    socket_path: &Path,
    expected: &Expected<'_>,
    secret: &str,
    connect_timeout: Duration,
    hello_timeout: Duration,
    build: &str,
) -> Result<(BrokerLink, BrokerHello), BrokerLinkError> {
    // Identity first: never talk to a process that merely reuses the recorded pid.
    expected.check()?;
    let stream = connect(socket_path, connect_timeout).await?;
    let cred = stream
        .peer_cred()
        .map_err(BrokerLinkError::PeerCredentials)?;
    if cred.uid() != nix::unistd::getuid().as_raw() {
        return Err(BrokerLinkError::PeerUid);
    }
    if cred.pid() != Some(expected.pid) {
        return Err(BrokerLinkError::PeerPid);
    }
    // The peer is the recorded pid now; that pid must still be the recorded process.
    expected.check()?;
    let mut link = Framed::new(stream, frame_codec());
    let nonce = common::hash::new_secret("nonce");
    link.send(encode(&GatewayToBroker::Hello(GatewayHello {
        protocol_min: PROTOCOL_VERSION_MIN,
        protocol_max: PROTOCOL_VERSION,
        build: build.to_string(),
        nonce: nonce.clone(),
    }))?)
    .await?;
    let frame = tokio::time::timeout(hello_timeout, link.next())
        .await
        .map_err(|_| BrokerLinkError::Timeout)?
        .ok_or(BrokerLinkError::Closed)??;
    let BrokerToGateway::Hello(hello) = decode::<BrokerToGateway>(&frame)? else {
        return Err(BrokerLinkError::NotHello);
    };
    hello.verify(secret, &nonce)?;
    Ok((link, hello))
}

/// Connect, trying again until `within` passes.
async fn connect(socket_path: &Path, within: Duration) -> Result<UnixStream, BrokerLinkError> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match UnixStream::connect(socket_path).await {
            Ok(stream) => return Ok(stream),
            Err(_) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(CONNECT_RETRY).await;
            }
            Err(err) => return Err(BrokerLinkError::Connect(err)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::UnixListener;

    const SECRET: &str = "brk_secret";

    /// This test process's recorded identity: in-process listeners have it as their peer.
    fn me() -> (i32, u64, String) {
        let pid = std::process::id() as i32;
        let start = sandbox::process::process_start_time(pid).unwrap();
        (pid, start, sandbox::process::boot_id().unwrap())
    }

    async fn connect_as(
        path: &Path,
        (pid, start, boot): &(i32, u64, String),
        secret: &str,
    ) -> Result<BrokerLink, BrokerLinkError> {
        connect_broker(
            path,
            *pid,
            *start,
            boot,
            secret,
            Duration::from_secs(2),
            "test",
        )
        .await
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
            session_id: "ns_fake".into(),
            proof: common::hash::broker_proof(secret, &hello.nonce),
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

        let mut link = connect_as(&path, &me, &state.spec.secret).await.unwrap();
        let hello = probe_broker(
            &path,
            me.0,
            me.1,
            &me.2,
            &state.spec.secret,
            Duration::from_secs(3),
            "probe",
        )
        .await
        .unwrap();
        assert_eq!(hello.protocol_version, PROTOCOL_VERSION);
        assert_eq!(hello.session_id, "ns_test");

        let seq =
            state.push_event(common::protocol::BrokerEvent::BrokerExiting { reason: "x".into() });
        assert_eq!(crate::test_support::next_event_seq(&mut link).await, seq);
        state.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_broker_without_the_recorded_secret_fails_the_proof() {
        let dir = tempfile::tempdir().unwrap();
        let state = crate::test_support::state(dir.path());
        let _serving = crate::link::serve(state.clone()).await.unwrap();
        let path = std::path::PathBuf::from(&state.spec.socket_path);
        let err = connect_as(&path, &me(), "brk_other").await.unwrap_err();
        assert!(
            matches!(err, BrokerLinkError::Verify(HelloRejected::BadProof)),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "broker failed the secret proof");
        state.shutdown.cancel();
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
        let err = connect_broker(
            &missing,
            pid,
            start,
            &boot,
            SECRET,
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
        let err = probe_broker(
            &silent.join("fake.sock"),
            me.0,
            me.1,
            &me.2,
            SECRET,
            Duration::from_millis(300),
            "probe",
        )
        .await
        .unwrap_err();
        assert!(matches!(err, BrokerLinkError::Timeout), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(3));
        drop(listener);
    }
}
