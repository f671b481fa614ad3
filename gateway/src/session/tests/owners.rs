//! Who changes a session: only `session/transitions.rs` assigns a `SessionRecord`'s fields (its
//! constructors aside: a struct literal assigns nothing). The gateway's sources, tests aside,
//! are scanned for any other assignment, compound assignment, mutating method (`take`, `push`,
//! `as_mut`, …) or `&mut` borrow of one of those fields; the scanner is tested on small inputs
//! too, so it can fail. `revision` is left out: `Gateway::commit` bumps it with every
//! persisted change.

use std::path::{Path, PathBuf};

/// The fields of `SessionRecord` only its transitions change.
const FIELDS: &[&str] = &[
    "label",
    "status",
    "profile",
    "subagent_policy",
    "source_directory",
    "working_directory",
    "claude_session_id",
    "created_at_ms",
    "lease_generation",
    "lease_expires_at_ms",
    "current_run",
    "pending_turn_id",
    "last_result",
    "launch_error",
    "stop_request",
    "terminal",
    "recovery_required",
    "network_boundary",
    "skill_snapshot",
    "broker",
    "turn_sequence",
    "last_reply_turn_id",
    "closing_reply",
    "undelivered_prompt",
    "undelivered_reply_turn",
    "subsessions",
    "conversation_restart",
    "restart_notice_pending",
    "workspace_identity",
    "delegation",
    "content_pruned",
];

/// Another record's field of the same name, by what is assigned to it (`turn.status =
/// TurnStatus::…`).
const OTHER_RECORDS: &[(&str, &str)] = &[("status", "TurnStatus::")];

/// Methods that change what they are called on.
const MUTATING: &[&str] = &[
    "take(",
    "push(",
    "retain(",
    "as_mut(",
    "as_deref_mut(",
    "get_or_insert",
    "insert(",
    "remove(",
    "clear(",
    "extend(",
    "replace(",
    "truncate(",
    "pop(",
    "drain(",
    "iter_mut(",
    "append(",
    "sort",
    "dedup",
];

/// The code of a source file on one line: comments dropped, and a method chain split over
/// lines (`session\n    .broker\n    .as_mut()`) joined.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("//") {
            continue;
        }
        // A trailing comment, when the `//` is outside a string (an even number of quotes
        // before it).
        let line = match line.find(" //") {
            Some(at) if line[..at].matches('"').count() % 2 == 0 => &line[..at],
            _ => line,
        };
        code.push_str(line);
        code.push(' ');
    }
    let mut joined = code.replace(" .", ".").replace(". ", ".");
    while joined.contains("&mut  ") {
        joined = joined.replace("&mut  ", "&mut ");
    }
    joined
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Each change of a record's field in `text`: a short excerpt of the code around it.
fn changes(text: &str) -> Vec<String> {
    let code = code_of(text);
    let mut found = Vec::new();
    for field in FIELDS {
        let needle = format!(".{field}");
        let mut from = 0;
        while let Some(at) = code[from..].find(&needle).map(|i| i + from) {
            from = at + needle.len();
            let rest = &code[from..];
            if rest.starts_with(is_ident) {
                continue;
            }
            let after = rest.trim_start();
            let assigned =
                (after.starts_with('=') && !after.starts_with("==") && !after.starts_with("=>"))
                    || ["+=", "-=", "*=", "|=", "&="]
                        .iter()
                        .any(|op| after.starts_with(op));
            let other_record = OTHER_RECORDS.iter().any(|(name, rhs)| {
                name == field && after.trim_start_matches('=').trim_start().starts_with(rhs)
            });
            let mutated = rest
                .strip_prefix('.')
                .is_some_and(|call| MUTATING.iter().any(|m| call.starts_with(m)));
            let borrowed = {
                // The path this field ends, as far back as identifiers and dots go.
                let start = code[..at]
                    .rfind(|c: char| !is_ident(c) && c != '.')
                    .map_or(0, |i| i + 1);
                code[..start].ends_with("&mut ")
            };
            if (assigned && !other_record) || mutated || borrowed {
                let begin = code[..at]
                    .char_indices()
                    .rev()
                    .nth(40)
                    .map_or(0, |(i, _)| i);
                let end = code[from..]
                    .char_indices()
                    .nth(30)
                    .map_or(code.len(), |(i, _)| from + i);
                found.push(code[begin..end].to_string());
            }
        }
    }
    found
}

/// The gateway's source files, tests and the transitions aside, and `state/fixed.rs`: loading a
/// record there puts back its start facts (profile, policy, directories) from the gateway's
/// memory, which no transition changes (red team 27b R3).
fn sources(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "tests" {
                sources(&path, out)?;
            }
        } else if name.ends_with(".rs")
            && name != "tests.rs"
            && !path.ends_with("session/transitions.rs")
            && !path.ends_with("state/fixed.rs")
        {
            out.push(path);
        }
    }
    Ok(())
}

#[test]
fn only_the_transitions_change_a_session_record() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files)?;
    assert!(
        files.len() > 50,
        "the scan found too few sources: {files:?}"
    );
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        for change in changes(&text) {
            let shown = file
                .strip_prefix(&root)
                .unwrap_or(&file)
                .display()
                .to_string();
            problems.push(format!("{shown}: …{change}…"));
        }
    }
    assert!(
        problems.is_empty(),
        "a SessionRecord field changed outside session/transitions.rs (add a transition there \
         that returns its LedgerEvent, and call it):\n{}",
        problems.join("\n")
    );
    Ok(())
}

#[test]
fn the_scan_finds_every_kind_of_change() {
    let bad = [
        "session.status = SessionStatus::Idle;",
        "s.pending_turn_id = None;",
        "session.turn_sequence += 1;",
        "child.delegation.as_mut()",
        "session\n        .broker\n        .as_mut()\n        .filter(|b| b.pid == pid)",
        "parent.subsessions.push(id);",
        "let notice = std::mem::take(&mut session.restart_notice_pending);",
        "let t = session.closing_reply.take();",
        "f(&mut self.current_run);",
    ];
    for code in bad {
        assert_eq!(changes(code).len(), 1, "not found in {code:?}");
    }
}

#[test]
fn reads_and_other_records_are_not_changes() {
    let fine = [
        "if session.status == SessionStatus::Idle {}",
        "turn.status = TurnStatus::Answered;",
        "let pending = session.pending_turn_id.clone();",
        "let running = session.current_run.as_ref().is_some();",
        "let n = session.turn_sequence + 1;",
        "// session.status = SessionStatus::Idle;",
        "let s = session.status; // then session.status = x",
        "view.status_text = String::new();",
        "let b = &session.broker;",
        "Some(now) if now.working_directory != recorded.working_directory => {}",
        "SessionRecord { status: SessionStatus::Starting, ..parent.clone() }",
    ];
    for code in fine {
        assert_eq!(changes(code), Vec::<String>::new(), "in {code:?}");
    }
}
