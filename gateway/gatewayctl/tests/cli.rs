//! Snapshot tests of `sessions`, `show`, `events` and `connector-url` on a fixture state dir.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use gatewayctl::Command;
use support::*;

/// Replace the digits after each `marker` with `[N]`.
fn redact_after(text: &str, marker: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(marker) {
        out.push_str(&rest[..i + marker.len()]);
        rest = &rest[i + marker.len()..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 {
            out.push_str("[N]");
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// Collapse runs of spaces (column padding that depends on a redacted value's width).
fn squeeze(text: &str) -> String {
    text.lines()
        .map(|l| {
            let mut out = String::new();
            for (i, part) in l.split("  ").filter(|p| !p.is_empty()).enumerate() {
                if i > 0 {
                    out.push_str("  ");
                }
                out.push_str(part.trim_start());
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn sessions_table() {
    let f = Fixture::new();
    let out = f.ok(false, Command::Sessions);
    assert!(!out.contains(SECRET));
    insta::assert_snapshot!(squeeze(&redact_after(&out, "pid ")));
}

#[test]
fn list_is_an_alias_of_sessions() {
    use clap::Parser;
    let cli = gatewayctl::Cli::try_parse_from(["gatewayctl", "list", "--json"]).unwrap();
    assert!(matches!(cli.command, Command::Sessions), "{cli:?}");
    assert!(cli.json);
}

#[test]
fn sessions_json() {
    let f = Fixture::new();
    let value = f.json(Command::Sessions);
    assert!(!value.to_string().contains(SECRET));
    insta::assert_json_snapshot!(value, {"[].runtime.broker_pid" => "[pid]"});
}

#[test]
fn show_table() {
    let f = Fixture::new();
    let out = f.ok(
        false,
        Command::Show {
            id: ACTIVE.into(),
            events: 5,
        },
    );
    assert!(!out.contains(SECRET) && !out.contains("22af0616"));
    insta::assert_snapshot!(redact_after(&redact_after(&out, "pid "), "start time "));
}

#[test]
fn show_json() {
    let f = Fixture::new();
    let value = f.json(Command::Show {
        id: ACTIVE.into(),
        events: 3,
    });
    assert!(!value.to_string().contains(SECRET) && !value.to_string().contains("secret"));
    insta::assert_json_snapshot!(value, {
        ".session.broker.pid" => "[pid]",
        ".session.broker.start_time" => "[ticks]",
        ".session.broker.boot_id" => "[boot id]",
        ".session.runtime.broker_pid" => "[pid]",
    });
}

#[test]
fn show_tolerates_unexpected_data() {
    let f = Fixture::new();
    let value = f.json(Command::Show {
        id: BROKEN.into(),
        events: 3,
    });
    insta::assert_json_snapshot!(value);
    let text = f.ok(
        false,
        Command::Show {
            id: BROKEN.into(),
            events: 3,
        },
    );
    assert!(text.contains("status             failed (revision 1)"));
}

#[test]
fn show_unknown_session_fails() {
    let f = Fixture::new();
    let (_, result) = f.run(
        false,
        Command::Show {
            id: "ns_nope".into(),
            events: 3,
        },
    );
    assert!(result.unwrap_err().contains("no session \"ns_nope\""));
}

fn events(id: &str, follow: bool, max_polls: Option<u64>) -> Command {
    Command::Events {
        id: id.into(),
        follow,
        max_polls,
        poll_ms: 50,
    }
}

#[test]
fn events_table_and_json() {
    let f = Fixture::new();
    insta::assert_snapshot!("events_table", f.ok(false, events(ACTIVE, false, None)));
    insta::assert_json_snapshot!("events_json", f.json(events(ACTIVE, false, None)));
}

/// Collects output and says (once) when the first batch has been flushed.
struct FirstFlush {
    out: Vec<u8>,
    flushed: Option<std::sync::mpsc::Sender<()>>,
}

impl std::io::Write for FirstFlush {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        if let Some(tx) = self.flushed.take() {
            let _ = tx.send(());
        }
        Ok(())
    }
}

#[test]
fn events_follow_sees_new_rows() {
    let f = Fixture::new();
    let writer = f.writer();
    let (tx, rx) = std::sync::mpsc::channel();
    // The row is appended only once the follower has printed what was there, so the test
    // cannot race the follower however slow the machine is.
    let appender = std::thread::spawn(move || {
        rx.recv().unwrap();
        writer
            .execute(
                "INSERT INTO events (session_id, at_ms, kind, data) VALUES (?1, ?2, 'runner_exited', '{\"exit_code\":0}')",
                rusqlite::params![ACTIVE, T0 + 60_000],
            )
            .unwrap();
    });
    let mut sink = FirstFlush {
        out: Vec::new(),
        flushed: Some(tx),
    };
    // 40 polls of 50 ms: two seconds for the insert to land after the first batch.
    gatewayctl::run(f.cli(true, events(ACTIVE, true, Some(40))), &mut sink).unwrap();
    appender.join().unwrap();
    let out = String::from_utf8(sink.out).unwrap();
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 11, "{out}");
    assert_eq!(lines[10]["kind"], "runner_exited");
    assert_eq!(lines[10]["seq"], 21);
}

#[test]
fn commands_never_change_the_database() {
    let f = Fixture::new();
    let db = f.state.join("gateway.sqlite3");
    let before = std::fs::read(&db).unwrap();
    f.ok(false, Command::Sessions);
    f.ok(true, Command::Sessions);
    f.ok(
        false,
        Command::Show {
            id: ACTIVE.into(),
            events: 100,
        },
    );
    f.ok(false, events(ACTIVE, true, Some(1)));
    assert_eq!(std::fs::read(&db).unwrap(), before);
    // SQLite may create its empty WAL companions on a read-only open; they must stay private.
    for suffix in ["-wal", "-shm"] {
        let path = f.state.join(format!("gateway.sqlite3{suffix}"));
        if let Ok(meta) = std::fs::metadata(&path) {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{path:?}");
        }
    }
}

#[test]
fn missing_database_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    let err = gatewayctl::run(
        gatewayctl::Cli {
            state_dir: Some(dir.path().to_path_buf()),
            json: false,
            command: Command::Sessions,
        },
        &mut out,
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("no state database"));
    assert!(!dir.path().join("gateway.sqlite3").exists());
}

#[test]
fn connector_url() {
    let f = Fixture::new();
    let cmd = |base: &str, token: Option<&str>| {
        Command::ConnectorUrl(gatewayctl::ConnectorArgs {
            public_base: base.into(),
            token: token.map(str::to_string),
        })
    };
    assert_eq!(
        f.ok(false, cmd("https://gw.example.net/", None)),
        format!("https://gw.example.net/mcp/{TOKEN}\n")
    );
    assert_eq!(
        f.ok(false, cmd("http://127.0.0.1:8787", Some("ngw_env"))),
        "http://127.0.0.1:8787/mcp/ngw_env\n"
    );
    let value = f.json(cmd("https://gw.example.net", None));
    assert!(value["warning"].as_str().unwrap().contains("access token"));
    let (out, result) = f.run(false, cmd("http://gw.example.net", None));
    assert!(out.is_empty());
    assert!(result.unwrap_err().contains("use https"));
}

#[test]
fn state_dir_resolution() {
    use std::path::{Path, PathBuf};
    let r = gatewayctl::resolve_state_dir;
    assert_eq!(
        r(Some(Path::new("/a")), Some(PathBuf::from("/b"))).unwrap(),
        PathBuf::from("/a")
    );
    assert_eq!(
        r(None, Some(PathBuf::from("/b"))).unwrap(),
        PathBuf::from("/b")
    );
    assert!(r(None, Some(PathBuf::from("rel"))).is_err());
    assert!(r(None, None).unwrap().ends_with("state"));
}

/// Issue 23, item 4: a label, a working directory, an event and a reply id holding escape
/// sequences, C1 controls, DEL, a forged row and bidi controls are shown escaped, in tables, the
/// `show` view, event lines and JSON alike; nothing reaches the terminal raw.
#[test]
fn hostile_data_is_shown_escaped() {
    let f = Fixture::new();
    let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31mred\u{7f}\nns_forged  idle\u{202e}gnp.exe";
    let db = f.writer();
    db.execute(
        "UPDATE sessions SET data = json_set(data, '$.label', ?1, '$.working_directory', ?1) \
         WHERE id = ?2",
        rusqlite::params![hostile, ACTIVE],
    )
    .unwrap();
    db.execute(
        "INSERT INTO events (session_id, at_ms, kind, data) VALUES (?1, ?2, ?3, json_object('reply_id', ?3))",
        rusqlite::params![ACTIVE, T0 + 20_000, hostile],
    )
    .unwrap();
    let raw = |text: &str| {
        text.chars()
            .any(|c| c != '\n' && common::display::is_unsafe(c))
    };
    let table = f.ok(false, Command::Sessions);
    let show = f.ok(
        false,
        Command::Show {
            id: ACTIVE.into(),
            events: 5,
        },
    );
    let events = f.ok(false, events(ACTIVE, false, None));
    let json = f.ok(true, Command::Sessions);
    for out in [&table, &show, &events, &json] {
        assert!(!raw(out), "raw control or bidi character in:\n{out}");
        assert!(
            !out.lines().any(|l| l.starts_with("ns_forged")),
            "forged row:\n{out}"
        );
    }
    // The JSON is still the same value.
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(value.to_string().contains('\u{202e}'));
    let ours = table.lines().find(|l| l.starts_with(ACTIVE)).unwrap();
    insta::assert_snapshot!(
        "sessions_table_hostile_label",
        squeeze(&redact_after(ours, "pid "))
    );
}

/// Issue 23, F9: invisible, blank-looking and stacked characters in a label (combining grapheme
/// joiner, a lone variation selector, braille blank, ideographic and no-break spaces, a mark
/// pile) are shown escaped in the sessions table; a mark on a letter and an emoji's variation
/// selector stay as they are.
#[test]
fn visual_spoofing_characters_are_shown_escaped() {
    let f = Fixture::new();
    let label = "a\u{34f}b \u{fe0f}c\u{2800}d\u{3000}e\u{a0}f\u{e000}g\u{301}\u{302}\u{303}\u{304}\u{305} \
                 Vie\u{323}\u{302}t \u{2714}\u{fe0f}";
    f.writer()
        .execute(
            "UPDATE sessions SET data = json_set(data, '$.label', ?1) WHERE id = ?2",
            rusqlite::params![label, ACTIVE],
        )
        .unwrap();
    let table = f.ok(false, Command::Sessions);
    let ours = table.lines().find(|l| l.starts_with(ACTIVE)).unwrap();
    for escaped in [
        "a\\u{34f}b",
        "\\u{fe0f}c",
        "c\\u{2800}d",
        "d\\u{3000}e",
        "e\\u{a0}f",
        "f\\u{e000}g",
        "g\u{301}\u{302}\u{303}\\u{304}\\u{305}",
        "Vie\u{323}\u{302}t",
        "\u{2714}\u{fe0f}",
    ] {
        assert!(ours.contains(escaped), "{escaped:?} not in {ours:?}");
    }
}
