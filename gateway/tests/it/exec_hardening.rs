//! The gateway's own attack surface around commands: Git run on a user's repository (repository
//! config that would run programs, evaluated on the new branch too), the pinned sandbox helper
//! (an installed binary replaced while the gateway runs), and the live-session cap.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::*;
use crate::writes::{git, repo};

/// A shell script at `path` that creates `marker` and passes stdin through (a filter driver, a
/// hook, an fsmonitor hook: whatever git would run).
fn hostile_script(path: &Path, marker: &Path) {
    tests::executables::write(
        path,
        &format!("#!/bin/sh\ntouch '{}'\ncat\n", marker.display()),
    )
    .unwrap();
}

async fn start_worktree(chat: &ScriptedChatGpt, source: &Path, key: &str) -> Value {
    chat.start_with(
        "Edit",
        source,
        key,
        json!({"capability_profile": "worktree_write", "wait_seconds": 0}),
    )
    .await
    .unwrap()
}

fn ngw_branches(source: &Path) -> String {
    git(source, &["branch", "--list", "ngw/*"])
}

/// Config that only applies on the new branch or in the new worktree's git dir, defining what
/// checkout would run, is refused with the key named; nothing runs, nothing is left behind.
#[tokio::test(flavor = "multi_thread")]
async fn repository_config_for_the_new_branch_is_checked_before_checkout() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let outside = tempfile::tempdir().unwrap();
    let outside = std::fs::canonicalize(outside.path()).unwrap();
    let marker = outside.join("PWNED");
    let driver = outside.join("driver.sh");
    hostile_script(&driver, &marker);
    // (condition, included config, key named in the refusal)
    let variants: Vec<(&str, String, &str)> = vec![
        (
            "onbranch:ngw/**",
            format!("[filter \"evil\"]\n\tsmudge = {}\n", driver.display()),
            "filter.evil.smudge",
        ),
        (
            "gitdir:**/worktrees/**",
            format!(
                "[filter \"evil\"]\n\tclean = {0}\n\tsmudge = {0}\n",
                driver.display()
            ),
            "filter.evil.clean",
        ),
        (
            "onbranch:ngw/**",
            format!("[filter \"evil\"]\n\tprocess = {}\n", driver.display()),
            "filter.evil.process",
        ),
        (
            "onbranch:ngw/**",
            format!("[core]\n\tworktree = {}\n", outside.display()),
            "core.worktree",
        ),
        (
            "gitdir:**/worktrees/**",
            format!(
                "[hook \"x\"]\n\tcommand = {}\n\tevent = post-checkout\n",
                driver.display()
            ),
            "hook.x.command",
        ),
    ];
    for (i, (condition, included, key)) in variants.iter().enumerate() {
        let (_dir, source) = repo();
        std::fs::write(source.join(".gitattributes"), "* filter=evil\n").unwrap();
        git(&source, &["add", ".gitattributes"]);
        git(&source, &["commit", "-q", "-m", "attributes"]);
        let include = outside.join(format!("include-{i}"));
        std::fs::write(&include, included).unwrap();
        git(
            &source,
            &[
                "config",
                &format!("includeIf.{condition}.path"),
                include.to_str().unwrap(),
            ],
        );
        let r = start_worktree(&chat, &source, &format!("rc-{i}")).await;
        assert_eq!(tool_err_code(&r), "not_permitted", "{condition} {key}: {r}");
        let message = r["structuredContent"]["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("on the new branch sets {key}")),
            "{message}"
        );
        assert!(!marker.exists(), "{condition} {key}: the driver ran");
        // Nothing left: no session, no worktree, no branch, no worktree record in the source.
        assert_eq!(count(&gw, "SELECT COUNT(*) FROM sessions"), 0);
        let worktrees = std::fs::read_dir(gw.state_dir().join("worktrees"))
            .unwrap()
            .count();
        assert_eq!(worktrees, 0, "{key}");
        assert_eq!(ngw_branches(&source), "", "{key}");
        let records = std::fs::read_dir(source.join(".git/worktrees"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(records, 0, "{key}");
    }
}

/// What the command line switches off never runs, even set in the source's own config: hooks
/// (in `.git/hooks` and through `core.hooksPath`), fsmonitor, pager, editor, ssh. The start
/// succeeds and the worktree is checked out.
#[tokio::test(flavor = "multi_thread")]
async fn hooks_and_fsmonitor_of_the_repository_never_run() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let outside = tempfile::tempdir().unwrap();
    let outside = std::fs::canonicalize(outside.path()).unwrap();
    let (_dir, source) = repo();
    let mut markers = Vec::new();
    for hook in [
        "post-checkout",
        "reference-transaction",
        "post-index-change",
    ] {
        let marker = outside.join(format!("hook-{hook}"));
        hostile_script(&source.join(".git/hooks").join(hook), &marker);
        markers.push(marker);
    }
    let hooks = outside.join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let marker = outside.join("hookspath");
    hostile_script(&hooks.join("post-checkout"), &marker);
    markers.push(marker);
    let monitor = outside.join("fsmonitor.sh");
    let marker = outside.join("fsmonitor");
    hostile_script(&monitor, &marker);
    markers.push(marker);
    for (key, value) in [
        ("core.hooksPath", hooks.to_str().unwrap()),
        ("core.fsmonitor", monitor.to_str().unwrap()),
        ("core.pager", monitor.to_str().unwrap()),
        ("core.editor", monitor.to_str().unwrap()),
        ("core.sshCommand", monitor.to_str().unwrap()),
    ] {
        git(&source, &["config", key, value]);
    }
    let r = start_worktree(&chat, &source, "hooks").await;
    let v = view(&r);
    let worktree = PathBuf::from(v["working_directory"].as_str().unwrap());
    assert!(worktree.join("notes.txt").is_file(), "{v}");
    // (The test's own git must not run the source's fsmonitor either.)
    assert_eq!(
        git(
            &worktree,
            &["-c", "core.fsmonitor=false", "status", "--porcelain"]
        ),
        "",
        "the worktree is a clean checkout"
    );
    for marker in &markers {
        assert!(!marker.exists(), "{} ran", marker.display());
    }
    chat.stop(&session_id(&v), &lease_id(&v), "hooks-stop", None)
        .await
        .unwrap();
}

/// Anything the gateway's git runs is confined like a command: an alias that shells out (the
/// one kind of program the command line cannot list away) cannot write outside the worktree or
/// open a socket.
#[test]
fn the_gateways_git_runs_confined() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let home = root.join("home");
    let state = root.join("state");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let (_dir, source) = repo();
    let marker = root.join("outside");
    let policy = sandbox::path_policy::PathPolicy::new(home.clone(), state.clone(), vec![]);
    let runner = gateway::worktree::GitRunner::from_parts(pinned_gateway(), &home, &state, policy);
    let script = format!(
        "!touch '{}' 2>/dev/null || echo write-refused; cat '{}/.ssh/id_ed25519' 2>/dev/null || \
         echo key-hidden; python3 -c 'import socket; socket.socket()' 2>/dev/null || echo \
         no-socket",
        marker.display(),
        home.display()
    );
    let out = runner
        .run(
            &source,
            &["-c", &format!("alias.probe={script}"), "probe"],
            &[],
        )
        .unwrap();
    assert_eq!(out, "write-refused\nkey-hidden\nno-socket\n", "{out}");
    assert!(!marker.exists());
}

/// The gateway is installed where a session could replace it (its install dir is the session's
/// working directory). Replaced while the gateway runs — by rename, as a `Write` does, and then
/// overwritten in place — the next RunCommand still runs through the verified helper, confined, and
/// a new session's broker starts from the pinned image too: the replacement never runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_replaced_gateway_install_never_runs() {
    let install = tempfile::tempdir().unwrap();
    let install = std::fs::canonicalize(install.path()).unwrap();
    let exe = install.join("gateway");
    tests::executables::copy(Path::new(GATEWAY), &exe).unwrap();
    let gw = GatewayProcess::builder(&exe)
        .env("CLAUDE_BIN", tests::claude_bin())
        .spawn()
        .await
        .expect("gateway starts");
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let v = start_session(&chat, &install, "Run a command", "pin-1").await;

    let marker = install.join("PWNED");
    let fake = install.join("fake");
    tests::executables::write(
        &fake,
        &format!(
            "#!/bin/sh\ntouch '{}'\nprintf '\\036ngsbx1 {{\"error\":null,\"enforced\":{{}},\"cgroup\":null}}\\n'\nexec \"$@\"\n",
            marker.display()
        ),
    ).unwrap();
    std::fs::rename(&fake, &exe).unwrap();

    let calls = json!([{"name": "RunCommand", "arguments": {"argv": ["true"]}}]);
    let r = chat
        .reply(
            &session_id(&v),
            &lease_id(&v),
            &turn_id(&v),
            "pin-r1",
            None,
            Some(calls),
        )
        .await
        .unwrap();
    let v = view(&r);
    let result = &v["pending_turn"]["tool_results"][0];
    assert_eq!(result["status"], "ok", "{v}");
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("sandbox: linux:userns"), "{output}");
    assert!(!marker.exists(), "the replaced gateway ran");

    // Overwritten in place as well: a new session's broker and its commands still come from the
    // image pinned at start.
    std::fs::write(&exe, b"#!/bin/sh\ntouch PWNED\n").unwrap();
    let v2 = start_session(&chat, &install, "Run a command", "pin-2").await;
    let calls = json!([{"name": "RunCommand", "arguments": {"argv": ["true"]}}]);
    let r = chat
        .reply(
            &session_id(&v2),
            &lease_id(&v2),
            &turn_id(&v2),
            "pin-r2",
            None,
            Some(calls),
        )
        .await
        .unwrap();
    let v2 = view(&r);
    assert_eq!(
        v2["pending_turn"]["tool_results"][0]["status"], "ok",
        "{v2}"
    );
    assert!(!marker.exists(), "the replaced gateway ran");
    for (v, key) in [(&v, "pin-s1"), (&v2, "pin-s2")] {
        chat.stop(&session_id(v), &lease_id(v), key, None)
            .await
            .unwrap();
    }
}

/// `CLAUDE_TOOLS_MAX_LIVE_SESSIONS`: the start beyond the cap gets `busy`, says how many are live
/// and what to do, and leaves nothing behind (no session, no idempotency record, no worktree); a
/// stopped session frees its place.
#[tokio::test(flavor = "multi_thread")]
async fn starts_beyond_the_live_session_cap_are_busy() {
    let gw = gateway_with(&[("CLAUDE_TOOLS_MAX_LIVE_SESSIONS", "2")]).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let a = start_session(&chat, dir.path(), "a", "cap-a").await;
    let b = start_session(&chat, dir.path(), "b", "cap-b").await;
    let sessions = count(&gw, "SELECT COUNT(*) FROM sessions");
    let keys = count(&gw, "SELECT COUNT(*) FROM idempotency");
    let (_repo_dir, source) = repo();
    for (profile, key) in [("read_only", "cap-c"), ("worktree_write", "cap-d")] {
        let r = chat
            .start_with(
                "c",
                &source,
                key,
                json!({"capability_profile": profile, "wait_seconds": 0}),
            )
            .await
            .unwrap();
        assert_eq!(tool_err_code(&r), "busy", "{r}");
        let message = r["structuredContent"]["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(
                "2 sessions are live and this gateway allows at most 2 at once; nothing was started"
            ),
            "{message}"
        );
        assert!(message.contains("native_session_stop"), "{message}");
        assert!(
            message.contains("CLAUDE_TOOLS_MAX_LIVE_SESSIONS"),
            "{message}"
        );
        assert_eq!(count(&gw, "SELECT COUNT(*) FROM sessions"), sessions);
        assert_eq!(count(&gw, "SELECT COUNT(*) FROM idempotency"), keys);
        assert_eq!(
            std::fs::read_dir(gw.state_dir().join("worktrees"))
                .unwrap()
                .count(),
            0
        );
        assert_eq!(ngw_branches(&source), "");
    }
    chat.stop(&session_id(&a), &lease_id(&a), "cap-a-stop", None)
        .await
        .unwrap();
    let c = start_session(&chat, dir.path(), "c", "cap-c").await;
    for (v, key) in [(&b, "cap-b-stop"), (&c, "cap-c-stop")] {
        chat.stop(&session_id(v), &lease_id(v), key, None)
            .await
            .unwrap();
    }
}

/// The parts of the source's git dir the confined git may write must be real directories: a
/// symlink there (pointing where the gateway user could write) is refused before git runs.
#[tokio::test(flavor = "multi_thread")]
async fn symlinks_where_worktree_add_writes_are_refused() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let outside = tempfile::tempdir().unwrap();
    for (i, link) in ["worktrees", "refs/heads/ngw", "logs"].iter().enumerate() {
        let (_dir, source) = repo();
        let at = source.join(".git").join(link);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        let _ = std::fs::remove_dir_all(&at);
        std::os::unix::fs::symlink(outside.path(), &at).unwrap();
        let r = start_worktree(&chat, &source, &format!("sym-{i}")).await;
        assert_eq!(tool_err_code(&r), "not_permitted", "{link}: {r}");
        let message = r["structuredContent"]["error"]["message"].as_str().unwrap();
        assert!(message.contains("has a symlink or file at"), "{message}");
        assert_eq!(
            std::fs::read_dir(outside.path()).unwrap().count(),
            0,
            "{link}"
        );
    }
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM sessions"), 0);
}
