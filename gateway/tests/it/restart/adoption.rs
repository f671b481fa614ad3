//! A restarted gateway attaches a session only to the broker started for it (red team 27, B3):
//! broker records forged, swapped between two live sessions, copied from one into another, or with
//! a single field moved from another's (socket, secret, pid and start time) are refused, the
//! session's run reported `lost` with a reason that says so, its own broker stopped, the other
//! session's broker left alone — and no session ever gets a tool result from another's broker:
//! each lists its own working directory.

use std::time::Duration;

use serde_json::{Value, json};

use super::{alive, broker_record, wait_for};
use crate::support::*;

/// A working directory that tells itself apart: `<name>.marker` beside the usual files.
fn marked_dir(name: &str) -> tempfile::TempDir {
    let dir = work_dir();
    std::fs::write(dir.path().join(format!("{name}.marker")), name).unwrap();
    dir
}

/// Replace each listed session's `broker` field in the database (the gateway is not running).
fn put_brokers(gw: &GatewayProcess, records: &[(String, Value)]) {
    let db = rusqlite::Connection::open(gw.state_dir().join("gateway.sqlite3")).unwrap();
    for (sid, broker) in records {
        let data: String = db
            .query_row("SELECT data FROM sessions WHERE id = ?1", [sid], |r| {
                r.get(0)
            })
            .unwrap();
        let mut record: Value = serde_json::from_str(&data).unwrap();
        record["broker"] = broker.clone();
        db.execute(
            "UPDATE sessions SET data = ?2 WHERE id = ?1",
            rusqlite::params![sid, record.to_string()],
        )
        .unwrap();
    }
}

/// The reasons of the session's `runtime_lost` events.
fn lost_reasons(gw: &GatewayProcess, sid: &str) -> Vec<String> {
    let db = state_db(gw);
    let mut stmt = db
        .prepare("SELECT data FROM events WHERE kind = 'runtime_lost' AND session_id = ?1")
        .unwrap();
    stmt.query_map([sid], |r| r.get::<_, String>(0))
        .unwrap()
        .map(|data| {
            let data: Value = serde_json::from_str(&data.unwrap()).unwrap();
            data["reason"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

/// The session's run is reported lost because its record is not its broker's, and nothing is
/// pending from whatever broker the record named.
async fn assert_disowned(gw: &GatewayProcess, chat: &ScriptedChatGpt, v: &Value) {
    let sid = session_id(v);
    let s = view(&chat.status(&sid, &lease_id(v), 0).await.unwrap());
    assert_eq!(s["runtime_attached"], false, "{s}");
    assert_eq!(s["recovery_required"], true, "{s}");
    assert_eq!(s["current_run"]["state"], "lost", "{s}");
    assert_eq!(s["status"], "idle", "{s}");
    assert!(s["pending_turn"].is_null(), "{s}");
    let reasons = lost_reasons(gw, &sid);
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].starts_with("the recorded broker is not this session's (")
            && reasons[0].contains("the database was changed outside the gateway"),
        "{reasons:?}"
    );
    assert!(
        broker_record(gw, &sid).is_null(),
        "the foreign record is dropped"
    );
}

/// Answer the session's pending turn with a FindFiles of its working directory; the listing.
async fn list_working_directory(chat: &ScriptedChatGpt, v: &Value, reply_id: &str) -> String {
    let (sid, lease) = (session_id(v), lease_id(v));
    let calls = json!([{"name": "FindFiles", "arguments": {}}]);
    let r = view(
        &chat
            .reply(&sid, &lease, &turn_id(v), reply_id, None, Some(calls))
            .await
            .unwrap(),
    );
    assert_eq!(r["pending_turn"]["kind"], "tool_results", "{r}");
    let result = &r["pending_turn"]["tool_results"][0];
    assert_eq!(result["status"], "ok", "{result}");
    result["output"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn forged_broker_records_are_refused() {
    let mut gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let a = start_session(&chat, dir.path(), "a", "rs-forge-a").await;
    let b = start_session(&chat, dir.path(), "b", "rs-forge-b").await;
    gw.kill().await;

    // Session a: a start time that is not the broker's (a reused PID looks like this).
    // Session b: the right process, but a secret that is not the broker's.
    let mut ra = broker_record(&gw, &session_id(&a));
    ra["start_time"] = json!(1);
    let mut rb = broker_record(&gw, &session_id(&b));
    rb["secret"] = json!("brk_forged");
    put_brokers(&gw, &[(session_id(&a), ra), (session_id(&b), rb)]);
    gw.start().await.unwrap();
    let chat = chatgpt(&gw).await;
    for v in [&a, &b] {
        let s = view(&chat.status(&session_id(v), &lease_id(v), 0).await.unwrap());
        assert_eq!(s["runtime_attached"], false, "{s}");
        assert_eq!(s["recovery_required"], true);
        assert_eq!(s["current_run"]["state"], "lost");
        assert!(s["pending_turn"].is_null());
    }
    assert_eq!(
        count(
            &gw,
            "SELECT COUNT(*) FROM events WHERE kind = 'runtime_lost'"
        ),
        2
    );
    assert_disowned(&gw, &chat, &b).await;
}

/// Two live sessions on two directories, their broker records swapped (SIGTERM'd gateway):
/// neither is attached to the other's broker; both are reported lost, both brokers (each found
/// at its own session's socket) stopped; `continue` then runs a's turn in a's own directory.
#[tokio::test(flavor = "multi_thread")]
async fn swapped_broker_records_attach_neither_session_to_the_others_broker() {
    let mut gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let (dir_a, dir_b) = (marked_dir("alpha"), marked_dir("bravo"));
    let a = start_session(&chat, dir_a.path(), "a", "rs-swap-a").await;
    let b = start_session(&chat, dir_b.path(), "b", "rs-swap-b").await;
    let (sa, sb) = (session_id(&a), session_id(&b));
    let (ra, rb) = (broker_record(&gw, &sa), broker_record(&gw, &sb));
    let (pa, pb) = (ra["pid"].as_i64().unwrap(), rb["pid"].as_i64().unwrap());
    gw.signal(rustix::process::Signal::TERM).unwrap();
    gw.wait_exit(Duration::from_secs(20)).await.unwrap();
    assert!(alive(pa) && alive(pb), "brokers outlive the gateway");

    put_brokers(&gw, &[(sa.clone(), rb), (sb.clone(), ra)]);
    gw.start().await.unwrap();
    let chat = chatgpt(&gw).await;
    assert_disowned(&gw, &chat, &a).await;
    assert_disowned(&gw, &chat, &b).await;
    let reasons = lost_reasons(&gw, &sa);
    assert!(
        reasons[0].contains("another session's runtime directory")
            && reasons[0].contains("the session's own runner was stopped"),
        "{reasons:?}"
    );
    assert!(
        wait_for(|| !alive(pa) && !alive(pb), Duration::from_secs(20)).await,
        "each session's own broker, unreachable through its record, is stopped"
    );

    // A new generation of a, in a's directory.
    let v = view(
        &chat
            .continue_(&sa, &lease_id(&a), "list", "rs-swap-c", Some(50))
            .await
            .unwrap(),
    );
    assert_eq!(v["current_run"]["generation"], 2, "{v}");
    let listing = list_working_directory(&chat, &v, "rs-swap-r").await;
    assert!(
        listing.contains("alpha.marker") && !listing.contains("bravo.marker"),
        "{listing}"
    );
    chat.stop(&sa, &lease_id(&a), "rs-swap-s", None)
        .await
        .unwrap();
}

/// One donor session, and four whose records take something of the donor's (kill -9): its whole
/// record, its socket path, its secret, its pid and start time. Each of the four is refused and
/// its own broker stopped; the donor is re-adopted, its broker never signalled, and its turn
/// still lists its own directory.
#[tokio::test(flavor = "multi_thread")]
async fn broker_records_taking_another_sessions_fields_are_refused() {
    let mut gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let donor_dir = marked_dir("donor");
    let donor = start_session(&chat, donor_dir.path(), "d", "rs-move-d").await;
    let donor_record = broker_record(&gw, &session_id(&donor));
    let donor_pid = donor_record["pid"].as_i64().unwrap();
    let victim_dir = marked_dir("victim");
    let moves: [&[&str]; 4] = [&[], &["socket_path"], &["secret"], &["pid", "start_time"]];
    let mut victims = Vec::new();
    let mut edits = Vec::new();
    for (i, moved) in moves.iter().enumerate() {
        let v = start_session(&chat, victim_dir.path(), "v", &format!("rs-move-{i}")).await;
        let own = broker_record(&gw, &session_id(&v));
        let mut record = if moved.is_empty() {
            donor_record.clone()
        } else {
            own.clone()
        };
        for field in *moved {
            record[*field] = donor_record[*field].clone();
        }
        edits.push((session_id(&v), record));
        victims.push((v, own["pid"].as_i64().unwrap()));
    }
    gw.kill().await;
    put_brokers(&gw, &edits);
    gw.start().await.unwrap();
    let chat = chatgpt(&gw).await;

    for ((v, own_pid), moved) in victims.iter().zip(moves) {
        assert_disowned(&gw, &chat, v).await;
        assert!(
            wait_for(|| !alive(*own_pid), Duration::from_secs(20)).await,
            "{moved:?}: the victim's own broker is stopped"
        );
    }
    let s = view(
        &chat
            .status(&session_id(&donor), &lease_id(&donor), 0)
            .await
            .unwrap(),
    );
    assert_eq!(s["runtime_attached"], true, "{s}");
    assert_eq!(s["recovery_required"], false, "{s}");
    assert!(alive(donor_pid));
    assert_eq!(
        broker_record(&gw, &session_id(&donor))["pid"].as_i64(),
        Some(donor_pid)
    );
    assert!(lost_reasons(&gw, &session_id(&donor)).is_empty());
    let listing = list_working_directory(&chat, &s, "rs-move-r").await;
    assert!(
        listing.contains("donor.marker") && !listing.contains("victim.marker"),
        "{listing}"
    );
    chat.stop(&session_id(&donor), &lease_id(&donor), "rs-move-s", None)
        .await
        .unwrap();
}
