//! Test fixture: a state dir laid out like the gateway's (0700 dirs, 0600 files) with a database of
//! the gateway's schema (v1, copied from gateway/src/state/schema.rs) and realistic rows.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use gatewayctl::{Cli, Command};
use rusqlite::{Connection, params};
use serde_json::{Value, json};

/// The gateway's schema v1, from the one shared definition.
pub const SCHEMA_V1: &str = common::state_schema::V1;

pub const ACTIVE: &str = "ns_ca78f92185254b1db24f5ef7121fb74d";
pub const IDLE: &str = "ns_0b1e4f2a9c7d4e0f8a6b5c4d3e2f1a0b";
pub const STOPPED: &str = "ns_5f0d6c1b2a394857a6b7c8d9e0f1a2b3";
pub const BROKEN: &str = "ns_ffffffffffffffffffffffffffffffff";
pub const SECRET: &str = "brk_455b7084e8130098adf3c1b0923729707c7249ad23d841617fd93dc3bc1412a7";
pub const TOKEN: &str = "ngw_3a0c6d2f8e1b47a59c6d2e8f1a3b5c7d9e0f2a4b6c8d0e2f4a6b8c0d2e4f6a8b";

/// 2026-11-29T18:52:49.662Z
pub const T0: i64 = 1_795_978_369_662;
/// 2099-01-01T00:00:00Z: a lease far in the future.
pub const FUTURE: i64 = 4_070_908_800_000;
/// 2020-01-01T00:00:00Z: a lease in the past.
pub const PAST: i64 = 1_577_836_800_000;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub state: PathBuf,
}

fn private_dir(path: &Path) {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700)).unwrap();
}

fn private_file(path: &Path, contents: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    f.write_all(contents).unwrap();
}

/// This process's `/proc` identity: `(pid, start time, boot id)`.
pub fn own_identity() -> (i32, u64, String) {
    let pid = std::process::id() as i32;
    let st = sandbox::process::stat(pid).unwrap();
    (pid, st.start_time, sandbox::process::boot_id().unwrap())
}

pub fn broker(pid: i32, start_time: u64, boot_id: &str, short: &str) -> Value {
    json!({
        "pid": pid,
        "start_time": start_time,
        "boot_id": boot_id,
        "socket_path": format!("/state/run/{short}/b.sock"),
        "runtime_dir": format!("/state/run/{short}"),
        "secret": SECRET,
        "generation": 1,
        "next_event_seq": 7
    })
}

fn network() -> Value {
    json!({"commands": "not_available", "degraded": true, "enforced_by": "none", "runner": "unconfined",
           "detail": "OS confinement is not built yet"})
}

#[allow(clippy::too_many_arguments)]
fn session(
    id: &str,
    label: Option<&str>,
    status: &str,
    revision: i64,
    lease_expires: i64,
    run: Value,
    broker: Value,
    extra: Value,
) -> Value {
    let mut s = json!({
        "id": id, "label": label, "status": status, "revision": revision,
        "profile": "read_only", "subagent_policy": "none",
        "source_directory": "/home/owner/project", "working_directory": "/home/owner/project",
        "workspace": {"kind": "read_only", "root": "/home/owner/project"},
        "claude_session_id": "6b651128-831d-496a-b7b2-29af7afa1656",
        "created_at_ms": T0, "lease_generation": 1, "lease_expires_at_ms": lease_expires,
        "current_run": run, "pending_turn_id": null, "last_result": null, "launch_error": null,
        "stop_request": null, "terminal": null, "recovery_required": false,
        "network_boundary": network(), "skill_snapshot": [], "broker": broker,
        "turn_sequence": 0, "last_reply_turn_id": null, "closing_reply": null
    });
    if let (Some(obj), Value::Object(more)) = (s.as_object_mut(), extra) {
        obj.extend(more);
    }
    s
}

impl Fixture {
    /// The state dir with sessions whose brokers are this test process (verified), a record with
    /// a wrong start time (pid reused) and one from another boot.
    pub fn new() -> Fixture {
        let (pid, start, boot) = own_identity();
        Self::with_brokers(
            broker(pid, start, &boot, "ca78f9218525"),
            broker(pid, start + 1, &boot, "0b1e4f2a9c7d"),
            broker(
                pid,
                start,
                "00000000-0000-0000-0000-000000000000",
                "5f0d6c1b2a39",
            ),
        )
    }

    pub fn with_brokers(active: Value, idle: Value, stopped: Value) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        private_dir(&state);
        private_dir(&state.join("auth"));
        private_dir(&state.join("run"));
        private_file(&state.join("auth/access-token"), TOKEN.as_bytes());
        private_file(
            &state.join("auth/server-key"),
            b"key_0123456789abcdef0123456789abcdef",
        );
        private_file(&state.join("gateway.sqlite3"), b"");
        let conn = Connection::open(state.join("gateway.sqlite3")).unwrap();
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.execute_batch(SCHEMA_V1).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();

        let put = |s: &Value, created: i64, updated: i64| {
            conn.execute(
                "INSERT INTO sessions (id, status, revision, created_at_ms, updated_at_ms, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![s["id"].as_str(), s["status"].as_str(), s["revision"].as_i64(), created, updated, s.to_string()],
            )
            .unwrap();
        };
        let alive_run =
            json!({"generation": 1, "state": "alive", "started_at": "2026-11-29T18:52:49.687Z"});
        put(
            &session(
                ACTIVE,
                Some("review parser"),
                "waiting_for_gpt",
                6,
                FUTURE,
                alive_run.clone(),
                active,
                json!({"pending_turn_id": "turn_98334896db574baf877bdc5e238e421e", "turn_sequence": 2,
                       "last_reply_turn_id": "turn_98334896db574baf877bdc5e238e421e"}),
            ),
            T0,
            T0 + 11_415,
        );
        put(
            &session(
                IDLE,
                None,
                "idle",
                9,
                PAST,
                alive_run,
                idle,
                json!({"last_result": {"turn_id": "turn_c1", "text": "The parser looks fine.", "at": "2026-11-29T18:55:00.000Z"},
                       "recovery_required": true}),
            ),
            T0 + 1_000,
            T0 + 130_000,
        );
        put(
            &session(
                STOPPED,
                None,
                "stopped",
                12,
                PAST,
                json!({"generation": 1, "state": "exited", "started_at": "2026-11-29T18:52:49.687Z", "exit_code": 143}),
                stopped,
                json!({"stop_request": {"reason": "owner", "at": "2026-11-29T19:00:00.000Z"},
                       "terminal": {"reason": "stopped", "exit_code": 143, "at": "2026-11-29T19:00:01.000Z"}}),
            ),
            T0 + 2_000,
            T0 + 500_000,
        );
        // A row whose data a future gateway wrote differently: shown, not fatal.
        conn.execute(
            "INSERT INTO sessions (id, status, revision, created_at_ms, updated_at_ms, data) VALUES (?1, 'failed', 1, ?2, ?2, ?3)",
            params![BROKEN, T0 + 3_000, r#"{"id": 7, "label": ["not", "text"], "profile": "read_only", "new_field": true}"#],
        )
        .unwrap();

        let turn = |id: &str, seq: i64, status: &str, at: i64, body: Value, reply: Option<&str>| {
            let data = json!({"turn_id": id, "session_id": ACTIVE, "sequence": seq, "fingerprint": format!("fp{seq}"),
                              "status": status, "created_at_ms": at, "body": body, "reply_id": reply});
            conn.execute(
                "INSERT INTO turns (turn_id, session_id, sequence, fingerprint, status, created_at_ms, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![id, ACTIVE, seq, format!("fp{seq}"), status, at, data.to_string()],
            )
            .unwrap();
        };
        turn(
            "turn_2290a3b09898492f9805c2a7f5f3c218",
            1,
            "answered",
            T0 + 825,
            json!({"kind": "prompt", "text": "hi"}),
            Some("r2"),
        );
        turn(
            "turn_98334896db574baf877bdc5e238e421e",
            2,
            "pending",
            T0 + 11_414,
            json!({"kind": "tool_results", "previous_turn_id": "turn_2290a3b09898492f9805c2a7f5f3c218",
                   "runner_results": [{"tool_use_id": "toolu_act_ca8c4a53941646bdb8d9faa1affa8ed4", "is_error": false, "text": "     1\thello"}]}),
            None,
        );
        let action = |id: &str,
                      index: i64,
                      name: &str,
                      args: Value,
                      state: &str,
                      outcome: Option<Value>| {
            conn.execute(
                "INSERT INTO actions (action_id, session_id, turn_id, call_index, name, arguments, state, outcome, updated_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![id, ACTIVE, "turn_2290a3b09898492f9805c2a7f5f3c218", index, name, args.to_string(), state,
                        outcome.map(|o| o.to_string()), T0 + 11_384],
            )
            .unwrap();
        };
        action(
            "act_ca8c4a53941646bdb8d9faa1affa8ed4",
            0,
            "Read",
            json!({"file_path": "/home/owner/project/hello.txt"}),
            "committed",
            Some(
                json!({"status": "ok", "output": "     1\thello", "truncated": false,
                        "receipt": {"action_id": "act_ca8c4a53941646bdb8d9faa1affa8ed4", "path": "/home/owner/project/hello.txt",
                                    "sha256": "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", "duration_ms": 0}}),
            ),
        );
        action(
            "act_1d2e3f4a5b6c4d7e8f9a0b1c2d3e4f5a",
            1,
            "SearchText",
            json!({"pattern": "TODO", "path": "/home/owner/project"}),
            "committed",
            Some(
                json!({"status": "error", "output": "no such directory", "truncated": false, "error_code": "not_found",
                        "receipt": {"action_id": "act_1d2e3f4a5b6c4d7e8f9a0b1c2d3e4f5a", "duration_ms": 3}}),
            ),
        );
        action(
            "act_9f8e7d6c5b4a49388271605f4e3d2c1b",
            2,
            "FindFiles",
            json!({"pattern": "**/*.rs"}),
            "approved",
            None,
        );

        let events: &[(i64, &str, Value)] = &[
            (
                0,
                "session_started",
                json!({"profile": "read_only", "prompt_id": "prompt_837e", "prompt_sha256": "8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4", "working_directory": "/home/owner/project"}),
            ),
            (16, "broker_spawned", json!({})),
            (
                41,
                "prompt_released",
                json!({"prompt_id": "prompt_837e", "text": "hi"}),
            ),
            (53, "runner_started", json!({"generation": 1})),
            (65, "prompt_delivered", json!({"prompt_id": "prompt_837e"})),
            (
                825,
                "turn_pending",
                json!({"sequence": 1, "turn_id": "turn_2290a3b09898492f9805c2a7f5f3c218"}),
            ),
            (
                11_317,
                "reply_accepted",
                json!({"actions": [{"action_id": "act_ca8c4a53941646bdb8d9faa1affa8ed4", "arguments": {"file_path": "/home/owner/project/hello.txt"}, "name": "Read"}], "reply_id": "r2", "text_sha256": "0b0b4745def2d7c9734169914e21dcf52deba7045a7546f8d8f1742921bb4529", "turn_id": "turn_2290a3b09898492f9805c2a7f5f3c218"}),
            ),
            (
                11_318,
                "reply_delivered",
                json!({"turn_id": "turn_2290a3b09898492f9805c2a7f5f3c218"}),
            ),
            (
                11_384,
                "action_committed",
                json!({"action_id": "act_ca8c4a53941646bdb8d9faa1affa8ed4", "status": "ok"}),
            ),
            (
                11_415,
                "turn_pending",
                json!({"sequence": 2, "turn_id": "turn_98334896db574baf877bdc5e238e421e"}),
            ),
        ];
        for (offset, kind, data) in events {
            conn.execute(
                "INSERT INTO events (session_id, at_ms, kind, data) VALUES (?1, ?2, ?3, ?4)",
                params![ACTIVE, T0 + offset, kind, data.to_string()],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO events (session_id, at_ms, kind, data) VALUES (?1, ?2, 'unrelated', '{}')",
                params![IDLE, T0 + offset],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO leases (lease_hash, session_id, generation, expires_at_ms) VALUES ('22af0616', ?1, 1, ?2)",
            params![ACTIVE, FUTURE],
        )
        .unwrap();
        drop(conn);
        Fixture { dir, state }
    }

    /// A writable connection, as the gateway would hold.
    pub fn writer(&self) -> Connection {
        Connection::open(self.state.join("gateway.sqlite3")).unwrap()
    }

    pub fn cli(&self, json: bool, command: Command) -> Cli {
        Cli {
            state_dir: Some(self.state.clone()),
            json,
            command,
        }
    }

    /// Run a command; its output and whether it succeeded.
    pub fn run(&self, json: bool, command: Command) -> (String, Result<(), String>) {
        let mut out = Vec::new();
        let result =
            gatewayctl::run(self.cli(json, command), &mut out).map_err(|e| format!("{e:#}"));
        (String::from_utf8(out).unwrap(), result)
    }

    /// Run a command that must succeed; its output.
    pub fn ok(&self, json: bool, command: Command) -> String {
        let (out, result) = self.run(json, command);
        if let Err(e) = result {
            panic!("command failed: {e}\n{out}");
        }
        out
    }

    pub fn json(&self, command: Command) -> Value {
        serde_json::from_str(&self.ok(true, command)).unwrap()
    }
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
