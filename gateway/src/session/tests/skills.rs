//! Skill contexts: every refusal at start (with its code, naming the id and the reason, never
//! the body, nothing persisted), and a frozen snapshot that prompt turns, replays and every
//! runner generation's system prompt carry verbatim after the files changed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::protocol::BrokerEvent;
use common::skills::content_sha256;
use serde_json::{Value, json};

use super::harness::{Harness, Tuning, prompt_turn};
use crate::error::{ErrorCode, ToolError};
use crate::skills::SkillAllowlist;
use crate::tools::PublicTool;
use crate::view::{SessionView, SkillContextView, TurnKind};

/// Marks every skill body, so a leak is found by searching for it.
const MARK: &str = "SKILLBODY-7f3a";
/// The personal skill, with a BOM and CRLF line ends.
const PERSONAL: &[u8] = b"\xEF\xBB\xBFAlways SKILLBODY-7f3a cite files.\r\nBe brief.\r\n";
/// The project skill, with front matter (dropped from the instructions).
const PROJECT: &[u8] =
    b"---\nname: review\nallowed-tools: Bash\n---\nReview SKILLBODY-7f3a carefully.\n";

fn pin(id: &str, bytes: &[u8]) -> Value {
    json!({"skill_id": id, "content_sha256": content_sha256(bytes)})
}

/// A harness whose allowlist pins `pins`, with the two standard skills in place, plus the
/// protected entries (relative to the temporary dir) `protect`.
fn harness(pins: Vec<Value>, protect: &[&str]) -> Harness {
    let mut all = vec![
        pin("personal:style", PERSONAL),
        pin("project:review", PROJECT),
    ];
    all.extend(pins);
    let h = Harness::with(Tuning {
        skill_allowlist: SkillAllowlist::parse(&Value::from(all).to_string()).unwrap(),
        extra_protected: protect.iter().map(PathBuf::from).collect(),
        ..Tuning::default()
    });
    write_skill(&home_skills(&h), "style", PERSONAL);
    write_skill(&h.project.join(".claude/skills"), "review", PROJECT);
    h
}

fn home_skills(h: &Harness) -> PathBuf {
    h.gateway.config.owner_home.join(".claude/skills")
}

fn write_skill(root: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("SKILL.md"), bytes).unwrap();
    dir.join("SKILL.md")
}

fn start_args(h: &Harness, key: &str, ids: &[&str], wait: u64) -> Value {
    let skills: Vec<Value> = ids.iter().map(|id| json!({"skill_id": id})).collect();
    json!({"prompt": "look around", "working_directory": h.project, "idempotency_key": key,
           "skill_contexts": skills, "wait_seconds": wait})
}

async fn start(h: &Harness, ids: &[&str]) -> Result<SessionView, ToolError> {
    h.call(PublicTool::Start, start_args(h, "k1", ids, 0)).await
}

/// Every file under the state dir that holds a skill body, with its mode.
fn files_with_bodies(dir: &Path) -> Vec<(PathBuf, u32)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        // A file the store removes meanwhile (a WAL or journal) holds nothing any more.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            found.extend(files_with_bodies(&path));
        } else if std::fs::read(&path)
            .unwrap_or_default()
            .windows(MARK.len())
            .any(|w| w == MARK.as_bytes())
        {
            found.push((path, meta.permissions().mode() & 0o777));
        }
    }
    found
}

fn expected_contexts() -> Vec<SkillContextView> {
    vec![
        SkillContextView {
            skill_id: "personal:style".into(),
            content_sha256: content_sha256(PERSONAL),
            instructions: format!("Always {MARK} cite files.\nBe brief.\n"),
        },
        SkillContextView {
            skill_id: "project:review".into(),
            content_sha256: content_sha256(PROJECT),
            instructions: format!("Review {MARK} carefully.\n"),
        },
    ]
}

#[tokio::test]
async fn bad_skill_contexts_are_refused_with_their_code_and_nothing_is_persisted() {
    let h = harness(
        vec![
            pin("project:changed", b"old\n"),
            pin("project:missing", b"x\n"),
            pin("project:linked", PROJECT),
            pin("project:linkdir", PROJECT),
            pin("project:hard", PROJECT),
            pin("project:big", b"x\n"),
            pin("project:binary", b"x\n"),
            pin("project:guarded", PROJECT),
        ],
        &["project/.claude/skills/guarded"],
    );
    let skills = h.project.join(".claude/skills");
    write_skill(&skills, "changed", format!("new {MARK}\n").as_bytes());
    let real = write_skill(&h.project, "elsewhere", PROJECT);
    std::fs::create_dir_all(skills.join("linked")).unwrap();
    std::os::unix::fs::symlink(&real, skills.join("linked/SKILL.md")).unwrap();
    std::os::unix::fs::symlink(real.parent().unwrap(), skills.join("linkdir")).unwrap();
    let hard = write_skill(&skills, "hard", PROJECT);
    std::fs::hard_link(&hard, h.project.join("hard-link")).unwrap();
    write_skill(&skills, "big", &vec![b'a'; 64 * 1024 + 1]);
    write_skill(&skills, "binary", b"\xFF\xFE");
    write_skill(&skills, "guarded", PROJECT);
    let nine: Vec<String> = (0..9).map(|i| format!("project:s{i}")).collect();
    let nine: Vec<&str> = nine.iter().map(String::as_str).collect();
    use ErrorCode::{InvalidArgument as Invalid, NotPermitted as Refused};
    let cases: Vec<(Vec<&str>, ErrorCode, &str)> = vec![
        (nine, Invalid, "at most 8 items"),
        (
            vec!["project:review", "project:review"],
            Invalid,
            "listed twice",
        ),
        (vec!["project:a/b"], Invalid, "one path segment"),
        (vec!["project:.."], Invalid, "one path segment"),
        (vec!["personal:../../etc"], Invalid, "one path segment"),
        (
            vec!["review"],
            Invalid,
            "must start with `personal:` or `project:`",
        ),
        (
            vec!["project:other"],
            Refused,
            "not on this gateway's skill allowlist",
        ),
        (
            vec!["project:changed"],
            Refused,
            "differs from the pinned version",
        ),
        (vec!["project:missing"], Refused, "does not exist"),
        (vec!["project:linked"], Refused, "symbolic link"),
        (vec!["project:linkdir"], Refused, "symbolic link"),
        (vec!["project:hard"], Refused, "hard links"),
        (vec!["project:big"], Refused, "at most 65536 bytes"),
        (vec!["project:binary"], Refused, "not UTF-8"),
        (vec!["project:guarded"], Refused, "protected location"),
    ];
    for (ids, expected, says) in cases {
        let err = start(&h, &ids).await.expect_err("refused");
        assert_eq!(err.code, expected, "{ids:?}: {}", err.message);
        assert!(err.message.contains(says), "{ids:?}: {}", err.message);
        if expected == Refused {
            assert!(
                err.message.contains(ids[0]),
                "names the id: {}",
                err.message
            );
        }
        assert!(!err.message.contains(MARK), "{}", err.message);
        assert!(!err.message.contains(h.project.to_str().unwrap()));
    }
    assert!(h.gateway.store.read(|tx| tx.sessions()).unwrap().is_empty());
    assert!(h.host.spawns().is_empty());
    assert!(!h.gateway.config.state_dir.join("sessions").exists());
    assert!(files_with_bodies(&h.gateway.config.state_dir).is_empty());
}

#[tokio::test]
async fn skills_together_are_bounded() {
    let names: Vec<String> = (0..5).map(|i| format!("project:k{i}")).collect();
    let body = vec![b'a'; 60 * 1024];
    let h = harness(names.iter().map(|n| pin(n, &body)).collect(), &[]);
    for name in &names {
        write_skill(&h.project.join(".claude/skills"), &name[8..], &body);
    }
    let ids: Vec<&str> = names.iter().map(String::as_str).collect();
    let err = start(&h, &ids).await.expect_err("refused");
    assert_eq!(err.code, ErrorCode::NotPermitted);
    assert!(err.message.contains("project:k4"), "{}", err.message);
    assert!(err.message.contains("together exceed"), "{}", err.message);
    assert!(start(&h, &ids[..4]).await.is_ok());
}

#[tokio::test]
async fn the_snapshot_is_frozen_and_every_prompt_turn_and_generation_gets_it() {
    let h = harness(Vec::new(), &[]);
    let ids = ["personal:style", "project:review"];
    // The start waits for its first turn, so its recorded answer has a prompt turn.
    let gateway = h.gateway.clone();
    let args = start_args(&h, "k1", &ids, 5);
    let call = tokio::spawn(async move { PublicTool::Start.call(&gateway, args).await });
    let pid = loop {
        if let Some(spawn) = h.host.spawns().first()
            && h.gateway.live(&spawn.session_id).attached()
        {
            break spawn.pid;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    h.runner_asks(pid, "f1").await;
    let view = call.await.unwrap().unwrap();
    let entries: Vec<_> = view.skill_snapshot.iter().map(|s| &s.skill_id).collect();
    assert_eq!(entries, ids);
    assert_eq!(
        view.skill_snapshot[1].content_sha256,
        content_sha256(PROJECT)
    );
    let turn = view.pending_turn.clone().unwrap();
    assert_eq!(turn.skill_contexts, expected_contexts());
    // Only the 0600 snapshot holds bodies: not the database (ledger, idempotent answers).
    let state = h.gateway.config.state_dir.clone();
    let snapshot = crate::skills::snapshot_path(&state, &view.native_session_id);
    assert_eq!(files_with_bodies(&state), vec![(snapshot.clone(), 0o600)]);
    let dir_mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode(snapshot.parent().unwrap()), 0o700);
    let started = h
        .gateway
        .store
        .read(|tx| tx.events(&view.native_session_id));
    let started = format!("{:?}", started.unwrap());
    assert!(started.contains(&content_sha256(PERSONAL)) && !started.contains(MARK));
    let replay = h
        .call(PublicTool::Start, start_args(&h, "k1", &ids, 5))
        .await
        .unwrap();
    assert!(replay.replay);
    assert_eq!(
        replay.pending_turn.unwrap().skill_contexts,
        expected_contexts()
    );

    // The files change and go: nothing in the session changes.
    write_skill(&home_skills(&h), "style", b"Changed.\n");
    std::fs::remove_file(h.project.join(".claude/skills/review/SKILL.md")).unwrap();
    let answered = h.reply(&view, "r1", "done", json!([])).await.unwrap();
    h.event(
        pid,
        3,
        BrokerEvent::RunnerTurnEnded {
            result: None,
            subtype: "success".into(),
            is_error: false,
        },
    )
    .await;
    let lease = json!(answered.lease_id);
    let next = |key: &str| {
        json!({"native_session_id": view.native_session_id, "lease_id": lease,
               "prompt": "next", "idempotency_key": key, "wait_seconds": 0})
    };
    h.call(PublicTool::Continue, next("c1")).await.unwrap();
    h.event(pid, 4, prompt_turn("f2", "next")).await;
    let second = h.status(&view).await.unwrap().pending_turn.unwrap();
    assert_eq!((second.kind, second.sequence), (TurnKind::Prompt, 2));
    assert_eq!(second.skill_contexts, expected_contexts());

    // The runner dies; the next generation resumes with the same system prompt.
    let exited = BrokerEvent::RunnerExited {
        exit_code: Some(1),
        signal: None,
        at_ms: 0,
    };
    h.event(pid, 5, exited).await;
    h.call(PublicTool::Continue, next("c2")).await.unwrap();
    let spawns = h.host.spawns();
    assert_eq!(
        (spawns.len(), spawns[1].generation, spawns[1].resume),
        (2, 2, true)
    );
    assert_eq!(spawns[1].system_prompt, spawns[0].system_prompt);
    for context in expected_contexts() {
        assert!(spawns[0].system_prompt.contains(&context.instructions));
    }
    assert!(
        !spawns[0].system_prompt.contains("Changed.")
            && !spawns[0].system_prompt.contains("allowed-tools")
    );
    let started = BrokerEvent::RunnerStarted {
        generation: 2,
        started_at_ms: 0,
        resumed: true,
    };
    h.event(spawns[1].pid, 1, started).await;
    h.event(spawns[1].pid, 2, prompt_turn("f3", "next")).await;
    let third = h.status(&view).await.unwrap().pending_turn.unwrap();
    assert_eq!(third.skill_contexts, expected_contexts());
}

#[tokio::test]
async fn sessions_without_skills_carry_none() {
    let h = harness(Vec::new(), &[]);
    let view = h.start().await;
    h.runner_asks(h.pid(&view), "f1").await;
    let turn = h.status(&view).await.unwrap().pending_turn.unwrap();
    assert!(turn.skill_contexts.is_empty() && view.skill_snapshot.is_empty());
    let json = serde_json::to_value(&turn).unwrap();
    assert!(json.get("skill_contexts").is_none(), "omitted when empty");
    assert!(!h.host.spawns()[0].system_prompt.contains("skill"));
}

#[tokio::test]
async fn a_lost_snapshot_fails_closed_instead_of_going_on_without_the_skills() {
    let h = harness(Vec::new(), &[]);
    let view = start(&h, &["project:review"]).await.unwrap();
    let pid = h.pid(&view);
    h.runner_asks(pid, "f1").await;
    let state = h.gateway.config.state_dir.clone();
    std::fs::remove_file(crate::skills::snapshot_path(
        &state,
        &view.native_session_id,
    ))
    .unwrap();
    let err = h
        .status(&view)
        .await
        .expect_err("no turn without its skills");
    assert_eq!(err.code, ErrorCode::Internal);
    assert!(
        err.message.contains("frozen skills could not be read"),
        "{}",
        err.message
    );
    assert!(!err.message.contains(state.to_str().unwrap()));
    let exited = BrokerEvent::RunnerExited {
        exit_code: Some(1),
        signal: None,
        at_ms: 0,
    };
    h.event(pid, 3, exited).await;
    let args = json!({"native_session_id": view.native_session_id, "lease_id": view.lease_id,
                      "prompt": "next", "idempotency_key": "c1", "wait_seconds": 0});
    let err = h
        .call(PublicTool::Continue, args)
        .await
        .expect_err("no runner without them");
    assert_eq!(err.code, ErrorCode::Internal);
    assert_eq!(h.host.spawns().len(), 1, "no new generation started");
}
