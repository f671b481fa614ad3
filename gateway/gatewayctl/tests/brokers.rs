//! `brokers`: the recorded identities are checked against `/proc`. This test binary plays the
//! broker (its own pid, start time and boot id) and spawns a child to play the runner; it holds a
//! single test so no other test's children show up as runners.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use gatewayctl::{BrokersArgs, Command};
use support::*;

#[test]
fn brokers_verify_by_proc_identity() {
    let mut runner = std::process::Command::new("/bin/sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let f = Fixture::new();
    let args = BrokersArgs { handshake: false };

    let value = f.json(Command::Brokers(args.clone()));
    assert!(!value.to_string().contains(SECRET));
    let rows = value.as_array().unwrap();
    // The stopped session is terminal and the broken one has no broker: two rows.
    assert_eq!(rows.len(), 2, "{value:#}");
    assert_eq!(rows[0]["session_id"], ACTIVE);
    assert_eq!(rows[0]["verified"], true);
    assert_eq!(rows[0]["identity"], "verified");
    assert!(rows[0]["rss_kib"].as_u64().unwrap() > 0);
    assert!(rows[0]["uptime_seconds"].is_u64());
    assert_eq!(rows[0]["runner_alive"], true);
    let runners = rows[0]["runners"].as_array().unwrap();
    assert_eq!(runners.len(), 1, "{value:#}");
    assert_eq!(runners[0]["pid"], runner.id());
    assert_eq!(runners[0]["comm"], "sleep");
    assert_eq!(rows[1]["session_id"], IDLE);
    assert_eq!(rows[1]["verified"], false);
    assert_eq!(rows[1]["identity"], "pid_reused");
    assert!(rows[1]["rss_kib"].is_null());
    assert_eq!(rows[1]["runner_alive"], false);

    insta::assert_json_snapshot!(value, {
        "[].broker.pid" => "[pid]",
        "[].broker.start_time" => "[ticks]",
        "[].broker.boot_id" => "[boot id]",
        "[].uptime_seconds" => "[seconds]",
        "[].rss_kib" => "[kib]",
        "[].runners[].pid" => "[pid]",
        "[].runners[].rss_kib" => "[kib]",
    });

    let text = f.ok(false, Command::Brokers(args));
    assert!(text.contains(&format!("pid {}", runner.id())), "{text}");
    assert!(
        text.contains("no (pid reused: start time differs)"),
        "{text}"
    );
    assert!(text.contains("no socket was touched"), "{text}");

    let _ = runner.kill();
    let _ = runner.wait();
}

#[test]
fn handshake_is_skipped_for_unverified_brokers() {
    // A handshake is attempted only after the /proc identity matched; none matches here, so no
    // socket is touched.
    let f = Fixture::with_brokers(
        broker(i32::MAX, 1, "x", "a"),
        broker(i32::MAX, 1, "x", "b"),
        broker(i32::MAX, 1, "x", "c"),
    );
    let value = f.json(Command::Brokers(BrokersArgs { handshake: true }));
    for row in value.as_array().unwrap() {
        assert_eq!(row["verified"], false);
        assert_eq!(row["handshake"]["ok"], false);
        assert!(
            row["handshake"]["detail"]
                .as_str()
                .unwrap()
                .starts_with("skipped")
        );
    }
}

/// A fake broker on a Unix socket: answers one hello with the HMAC proof (or a wrong one) and
/// records every byte the client sends after its hello.
fn fake_broker(
    listener: std::os::unix::net::UnixListener,
    secret: &'static str,
) -> std::thread::JoinHandle<(serde_json::Value, usize)> {
    use std::io::{Read, Write};
    std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut len = [0u8; 4];
        conn.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        conn.read_exact(&mut body).unwrap();
        let hello: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let nonce = hello["nonce"].as_str().unwrap();
        let answer = serde_json::json!({
            "type": "hello", "protocol_version": common::protocol::PROTOCOL_VERSION,
            "build": "fake", "session_id": ACTIVE, "generation": 1,
            "proof": common::hash::broker_proof(
                secret,
                common::hash::BrokerBinding { session_id: ACTIVE, generation: 1 },
                nonce,
            ),
        });
        let bytes = serde_json::to_vec(&answer).unwrap();
        conn.write_all(&(bytes.len() as u32).to_be_bytes()).unwrap();
        conn.write_all(&bytes).unwrap();
        let mut rest = Vec::new();
        let _ = conn.read_to_end(&mut rest);
        (hello, rest.len())
    })
}

#[test]
fn handshake_proves_the_secret_and_sends_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let (pid, start, boot) = own_identity();
    let dead = broker(i32::MAX, 1, "x", "b");
    for (secret, ok) in [(SECRET, true), ("brk_wrong", false)] {
        let socket = dir.path().join(format!("{ok}.sock"));
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let mut record = broker(pid, start, &boot, "a");
        record["socket_path"] = socket.display().to_string().into();
        let f = Fixture::with_brokers(record, dead.clone(), dead.clone());
        let server = fake_broker(listener, secret);
        let value = f.json(Command::Brokers(BrokersArgs { handshake: true }));
        let (hello, extra) = server.join().unwrap();
        assert_eq!(hello["type"], "hello");
        assert!(hello["build"].as_str().unwrap().starts_with("gatewayctl"));
        assert_eq!(extra, 0, "nothing may follow the hello");
        let row = &value[0];
        assert_eq!(row["handshake"]["ok"], ok, "{value:#}");
        if !ok {
            assert_eq!(row["handshake"]["detail"], "broker failed the secret proof");
        }
    }
}
