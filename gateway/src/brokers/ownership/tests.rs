//! Unit tests of broker ownership: every derived field of a record checked, secrets per key,
//! session and generation, and which attach errors disown a record.

use super::*;

fn record(owner: &BrokerOwner) -> BrokerRecord {
    BrokerRecord {
        pid: 10,
        start_time: 1,
        boot_id: "boot".into(),
        socket_path: owner.socket_path.display().to_string(),
        runtime_dir: owner.runtime_dir.display().to_string(),
        secret: owner.secret.clone(),
        generation: owner.generation,
        next_event_seq: 1,
    }
}

#[test]
fn a_record_is_this_sessions_only_with_every_derived_field() {
    let state = Path::new("/state");
    let a = BrokerOwner::derive(state, "key", "ns_aaaaaaaaaaaaaaaa", 1);
    let b = BrokerOwner::derive(state, "key", "ns_bbbbbbbbbbbbbbbb", 1);
    assert_eq!(a.check(&record(&a)), Ok(()));
    assert_eq!(
        a.socket_path,
        Path::new("/state/run/aaaaaaaaaaaa/b.sock"),
        "the places spawn uses"
    );
    // The whole record of another session, and each of its fields alone.
    assert_eq!(a.check(&record(&b)), Err(NotThisSessions::RuntimeDir));
    let mut moved = record(&a);
    moved.socket_path = b.socket_path.display().to_string();
    assert_eq!(a.check(&moved), Err(NotThisSessions::SocketPath));
    let mut moved = record(&a);
    moved.secret = b.secret.clone();
    assert_eq!(a.check(&moved), Err(NotThisSessions::Secret));
    let mut moved = record(&a);
    moved.generation = 2;
    assert_eq!(a.check(&moved), Err(NotThisSessions::Generation));
    let mut old = record(&a);
    old.generation = 0;
    assert_eq!(a.check(&old), Err(NotThisSessions::Unbound));
    let mut old_elsewhere = record(&b);
    old_elsewhere.generation = 0;
    assert_eq!(
        a.check(&old_elsewhere),
        Err(NotThisSessions::RuntimeDir),
        "an unbound record counts as old only at the session's own places"
    );
    // Pid and start time are not derivable: the handshake checks them.
    let mut other_process = record(&a);
    other_process.pid = 11;
    assert_eq!(a.check(&other_process), Ok(()));
}

#[test]
fn secrets_differ_by_key_session_and_generation() {
    let base = broker_secret("key", "ns_a", 1);
    assert!(base.starts_with("brk_"));
    assert_eq!(base, broker_secret("key", "ns_a", 1));
    for other in [
        broker_secret("key2", "ns_a", 1),
        broker_secret("key", "ns_b", 1),
        broker_secret("key", "ns_a", 2),
    ] {
        assert_ne!(base, other);
    }
}

#[test]
fn only_errors_that_prove_another_owner_disown_a_record() {
    use super::super::ConnectError;
    let disowning = [
        anyhow::Error::from(NotThisSessions::Secret),
        NotThisSessions::RuntimeDir.into(),
        ConnectError::PeerNotRecorded.into(),
        ConnectError::WrongSession.into(),
        ConnectError::BadProof.into(),
    ];
    for err in &disowning {
        assert!(disowns(err), "{err:#}");
    }
    let gone_or_slow = [
        anyhow::Error::from(ConnectError::Timeout),
        ConnectError::NotRunning(sandbox::process::Identity::NotRunning).into(),
        ConnectError::HandshakeRefused("old".into()).into(),
        ConnectError::SocketUnreachable(std::io::ErrorKind::ConnectionRefused.into()).into(),
        anyhow::anyhow!("connection refused"),
        NotThisSessions::Unbound.into(),
    ];
    for err in &gone_or_slow {
        assert!(!disowns(err), "{err:#}");
    }
}
