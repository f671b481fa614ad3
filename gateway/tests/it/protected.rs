//! The one protected set through the public surface, with the real runner (issue 11): protected
//! working directories and their aliases refused at start; Read and RunCommand refuse or never
//! see a bind-mount alias of `~/.ssh`, private SSH host keys, the state dir and other commands'
//! scratch; a direct-write session whose root holds the state dir cannot write another
//! session's worktree, the state dir or Claude Code's install location; a file name with a
//! newline cannot forge a FindFiles line.
//!
//! The gateway runs in a private mount namespace (`unshare --mount`, as root; elsewhere with a
//! mapped root user) where the test binds `~/.ssh` and `<state>/run` elsewhere and puts a fake
//! private host key in `/etc/ssh`: nothing of the host's mount table changes.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::*;

/// A gateway in its own mount namespace with `binds` (source, target) made before it starts.
async fn gateway_with_binds(
    state: &Path,
    home: &Path,
    binds: &[(PathBuf, PathBuf)],
    wrapper_dir: &Path,
) -> GatewayProcess {
    let mut script = String::from("#!/bin/sh\nset -e\n");
    for (source, target) in binds {
        script.push_str(&format!(
            "mount --bind '{}' '{}'\n",
            source.display(),
            target.display()
        ));
    }
    script.push_str(&format!("exec '{GATEWAY}' \"$@\"\n"));
    let inner = wrapper_dir.join("inner.sh");
    tests::executables::write(&inner, &script).unwrap();
    let root = rustix::process::geteuid().is_root();
    let user = if root { "" } else { "--user --map-root-user " };
    let outer = wrapper_dir.join("gateway-in-namespace.sh");
    tests::executables::write(
        &outer,
        &format!(
            "#!/bin/sh\nexec unshare {user}--mount --propagation private /bin/sh '{}' \"$@\"\n",
            inner.display()
        ),
    )
    .unwrap();
    GatewayProcess::builder(&outer)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("HOME", home)
        .state_dir(state)
        .spawn()
        .await
        .expect("gateway starts in its mount namespace (needs unshare and mount)")
}

/// Removes the command runtime area a test planted (it is in `/tmp`, outside the temp dirs).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn err_message(result: &Value) -> String {
    result
        .pointer("/structuredContent/error/message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn results(v: &Value) -> Vec<Value> {
    v["pending_turn"]["tool_results"]
        .as_array()
        .unwrap_or_else(|| panic!("no tool results in {v}"))
        .clone()
}

fn output(r: &Value) -> String {
    r["output"].as_str().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn protected_places_are_refused_at_start_and_invisible_to_reads_and_commands() {
    let tree = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tree.path()).unwrap();
    let home = root.join("home");
    let ssh = home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(ssh.join("id_ed25519"), "SSH-ALIAS-SECRET-5521\n").unwrap();
    std::fs::create_dir_all(home.join(".gnupg/private-keys-v1.d")).unwrap();
    std::fs::write(
        home.join(".gnupg/private-keys-v1.d/k.key"),
        "GPG-SECRET-1\n",
    )
    .unwrap();
    std::fs::write(home.join(".pgpass"), "db:5432:*:u:PGPASS-SECRET\n").unwrap();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::write(
        home.join(".claude/.credentials.json"),
        "CLAUDE-LOGIN-SECRET\n",
    )
    .unwrap();
    std::fs::write(home.join(".claude.json"), "CLAUDE-JSON-SECRET\n").unwrap();
    std::fs::write(home.join(".bash_history"), "export TOKEN=HISTORY-SECRET\n").unwrap();
    std::fs::create_dir_all(home.join(".cloudflared")).unwrap();
    std::fs::write(home.join(".cloudflared/cert.pem"), "TUNNEL-SECRET\n").unwrap();
    // The state dir in a parent reached through a symlink too.
    let parent = root.join("real-parent");
    let state = parent.join("state");
    std::fs::create_dir_all(state.join("run")).unwrap();
    std::os::unix::fs::symlink(&parent, root.join("linked-parent")).unwrap();
    // Aliases: `~/.ssh` and `<state>/run` bound elsewhere; a fake private host key in /etc/ssh
    // (a copy of the real dir with one more file, bound over it in the namespace only).
    let ssh_alias = root.join("keys-alias");
    let run_alias = root.join("run-alias");
    let etc_ssh = root.join("etc-ssh");
    std::fs::create_dir_all(&ssh_alias).unwrap();
    std::fs::create_dir_all(&run_alias).unwrap();
    std::fs::create_dir_all(&etc_ssh).unwrap();
    std::fs::write(etc_ssh.join("ssh_host_ed25519_key"), "HOST-KEY-SECRET-77\n").unwrap();
    std::fs::write(
        etc_ssh.join("ssh_host_ed25519_key.pub"),
        "ssh-ed25519 PUBLIC\n",
    )
    .unwrap();
    let wrapper = root.join("wrapper");
    std::fs::create_dir_all(&wrapper).unwrap();
    let gw = gateway_with_binds(
        &state,
        &home,
        &[
            (ssh.clone(), ssh_alias.clone()),
            (state.join("run"), run_alias.clone()),
            (etc_ssh.clone(), PathBuf::from("/etc/ssh")),
        ],
        &wrapper,
    )
    .await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;

    // Another command's scratch as it would be while that command runs.
    let area = sandbox::protected::command_runtime_area(&state);
    let planted = area.join("othersession/act_x/home");
    sandbox::private_fs::ensure_private_dir(&planted).unwrap();
    std::fs::write(planted.join("secret.txt"), "SCRATCH-SECRET-3\n").unwrap();
    let _area_cleanup = RemoveOnDrop(area.clone());

    // 1. Protected working directories and their aliases, for every profile.
    let s = |p: &Path| p.display().to_string();
    let pid = gw.pid().expect("gateway pid");
    let refused_at_start = [
        s(&state.join("auth")),
        format!("/proc/self/root{}", s(&state.join("auth"))),
        format!("/proc/{pid}/root{}", s(&state.join("run"))),
        s(&root.join("linked-parent/state/run")),
        s(&home.join(".gnupg/private-keys-v1.d")),
        s(&home.join(".cloudflared")),
        s(&ssh_alias),
        s(&run_alias),
        s(&state.join("worktrees")),
        s(&sandbox::protected::command_runtime_area(&state)),
    ];
    for (i, dir) in refused_at_start.iter().enumerate() {
        for profile in ["read_only", "direct_write"] {
            let r = chat
                .start_with(
                    "look",
                    Path::new(dir),
                    &format!("pw-{i}-{profile}"),
                    json!({"capability_profile": profile, "wait_seconds": 0}),
                )
                .await
                .unwrap();
            assert_eq!(tool_err_code(&r), "not_permitted", "{dir} ({profile}): {r}");
            let message = err_message(&r);
            assert!(
                message.contains("protected location")
                    || message.contains("kernel pseudo file system"),
                "{dir}: {message}"
            );
            // The message names the reason, never the resolved (internal) path.
            assert!(!message.contains(&s(&state)), "{dir}: {message}");
        }
    }
    let r = chat
        .start_with(
            "look",
            Path::new("/proc/sys"),
            "pw-proc",
            json!({"wait_seconds": 0}),
        )
        .await
        .unwrap();
    assert_eq!(tool_err_code(&r), "not_permitted", "{r}");
    assert!(err_message(&r).contains("kernel pseudo file system"), "{r}");
    // Nothing was recorded for any of them.
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM sessions"), 0);

    // 2. A session in an ordinary directory: Read refuses what commands never see.
    let work = work_dir();
    // A directory named `evil\n` holding `etc/x`: unescaped, its listing line would read as
    // `<wd>/evil` and `/etc/x`.
    std::fs::create_dir_all(work.path().join("evil\n/etc")).unwrap();
    std::fs::write(work.path().join("evil\n/etc/x"), "forged\n").unwrap();
    let v = start_session(&chat, work.path(), "Look", "pw-session").await;
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let alias_key = s(&ssh_alias.join("id_ed25519"));
    let token = s(&state.join("auth/access-token"));
    let calls = json!([
        {"name": "Read", "arguments": {"file_path": alias_key}},
        {"name": "RunCommand", "arguments": {"argv": ["cat", alias_key]}},
        {"name": "Read", "arguments": {"file_path": "/etc/ssh/ssh_host_ed25519_key"}},
        {"name": "RunCommand", "arguments": {"argv": ["sh", "-c",
            "cat /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub"]}},
        {"name": "RunCommand", "arguments": {"argv": ["sh", "-c",
            format!("cat {}/* {}/* {}/.pgpass {}/.cloudflared/*", s(&run_alias), s(&state.join("auth")), s(&home), s(&home))]}},
        {"name": "Read", "arguments": {"file_path": s(&planted.join("secret.txt"))}},
        {"name": "FindFiles", "arguments": {"path": s(&area)}},
        {"name": "RunCommand", "arguments": {"argv": ["sh", "-c",
            format!("ls -a {}; cat {}", s(&area), s(&planted.join("secret.txt")))]}},
        {"name": "FindFiles", "arguments": {"path": s(work.path())}},
        {"name": "RunCommand", "arguments": {"argv": ["cat", token]}},
        {"name": "Read", "arguments": {"file_path": format!("/proc/self/root{token}")}},
        {"name": "FindFiles", "arguments": {"path": "/tmp", "max_depth": 1}},
        {"name": "RunCommand", "arguments": {"argv": ["sh", "-c", format!(
            "cat {h}/.claude/.credentials.json {h}/.claude.json {h}/.bash_history; cat /proc/self/root{token}",
            h = s(&home))]}},
        {"name": "Read", "arguments": {"file_path": s(&home.join(".claude.json"))}},
    ]);
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            "pw-r1",
            Some("Looking."),
            Some(calls),
        )
        .await
        .unwrap();
    let v = view(&r);
    let r = results(&v);
    assert_eq!(r.len(), 14, "{v}");
    // Read of the bind-mount alias: refused by identity.
    assert_eq!(r[0]["status"], "error", "{}", r[0]);
    assert!(output(&r[0]).starts_with("not_permitted"), "{}", r[0]);
    // The command sees the alias masked (an empty directory).
    assert!(!output(&r[1]).contains("SSH-ALIAS-SECRET"), "{}", r[1]);
    assert_ne!(r[1]["receipt"]["exit_code"], 0, "{}", r[1]);
    // The private host key: refused by Read, empty for commands; the public one is readable.
    assert!(output(&r[2]).starts_with("not_permitted"), "{}", r[2]);
    assert!(!output(&r[3]).contains("HOST-KEY-SECRET"), "{}", r[3]);
    assert!(output(&r[3]).contains("ssh-ed25519 PUBLIC"), "{}", r[3]);
    // The state dir's alias, the state dir and credential files: nothing of them.
    for secret in [
        "PGPASS-SECRET",
        "TUNNEL-SECRET",
        "key_",
        "brk_",
        "rnr_",
        gw.token(),
    ] {
        assert!(!output(&r[4]).contains(secret), "{secret}: {}", r[4]);
    }
    // Another command's scratch: refused to Read and FindFiles, invisible to commands.
    assert!(output(&r[5]).starts_with("not_permitted"), "{}", r[5]);
    assert!(output(&r[6]).starts_with("not_permitted"), "{}", r[6]);
    assert!(!output(&r[7]).contains("SCRATCH-SECRET"), "{}", r[7]);
    // `ls` of the area lists only this command's own scratch mount point.
    let listed = output(&r[7]);
    let stdout = listed.split("--- stderr ---").next().unwrap_or_default();
    assert!(!stdout.contains("othersession"), "{}", r[7]);
    assert!(listed.contains("No such file or directory"), "{}", r[7]);
    // The forged name is one escaped line; no line is the forged path.
    let listing = output(&r[8]);
    let escaped = format!("\"{}/evil\\n/etc/x\"", s(work.path()));
    assert!(listing.lines().any(|l| l == escaped), "{listing}");
    assert!(!listing.lines().any(|l| l == "/etc/x"), "{listing}");
    // The gateway's access token.
    assert!(!output(&r[9]).contains(gw.token()), "{}", r[9]);
    assert_ne!(r[9]["receipt"]["exit_code"], 0, "{}", r[9]);
    // The state dir through `/proc/self/root`: a magic link, never followed by Read.
    assert!(output(&r[10]).starts_with("not_permitted"), "{}", r[10]);
    // A listing of /tmp does not show the command runtime area, nor any of this account's (a
    // name another account took after an area went, as `run_command::area_gone` does meanwhile,
    // is not an area).
    assert_eq!(r[11]["status"], "ok", "{}", r[11]);
    let euid = rustix::process::geteuid().as_raw();
    let ours = |line: &str| {
        use std::os::unix::fs::MetadataExt;
        let path = line.trim_end_matches(" -> (symlink)");
        std::fs::symlink_metadata(path).is_ok_and(|m| m.uid() == euid)
    };
    assert!(
        !output(&r[11])
            .lines()
            .any(|l| l.contains("ngw-run-") && ours(l)),
        "{}",
        r[11]
    );
    // Claude Code's own login files and the shell history: masked for commands, refused to Read.
    for secret in [
        "CLAUDE-LOGIN-SECRET",
        "CLAUDE-JSON-SECRET",
        "HISTORY-SECRET",
        gw.token(),
    ] {
        assert!(!output(&r[12]).contains(secret), "{secret}: {}", r[12]);
    }
    assert!(output(&r[13]).starts_with("not_permitted"), "{}", r[13]);
    chat.stop(&sid, &lease, "pw-stop", None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_direct_write_root_holding_the_state_dir_cannot_write_into_it() {
    // A checkout whose `./state` is the gateway's state dir (scripts/run's default), and a
    // Claude Code link inside it: the session writes the checkout, never the state dir, another
    // session's worktree or the install location.
    let tree = tempfile::tempdir().unwrap();
    let checkout = std::fs::canonicalize(tree.path()).unwrap().join("checkout");
    let state = checkout.join("state");
    std::fs::create_dir_all(checkout.join("tools")).unwrap();
    let claude_link = checkout.join("tools/claude");
    std::os::unix::fs::symlink(tests::claude_bin(), &claude_link).unwrap();
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", &claude_link)
        .state_dir(&state)
        .spawn()
        .await
        .expect("gateway starts");
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let other = state.join("worktrees/ns_0therSession");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("lib.rs"), "fn other() {}\n").unwrap();
    let chat = chatgpt(&gw).await;
    let r = chat
        .start_with(
            "Write",
            &checkout,
            "dw-start",
            json!({"capability_profile": "direct_write", "wait_seconds": 50}),
        )
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "waiting_for_gpt", "{v}");
    let (sid, lease) = (session_id(&v), lease_id(&v));
    let s = |p: &Path| p.display().to_string();
    let real_claude = std::fs::canonicalize(tests::claude_bin()).unwrap();
    let calls = json!([
        {"name": "Write", "arguments": {"file_path": s(&other.join("lib.rs")), "content": "owned\n"}},
        {"name": "Write", "arguments": {"file_path": s(&other.join("new.rs")), "content": "owned\n"}},
        {"name": "Write", "arguments": {"file_path": s(&state.join("auth/access-token")), "content": "x"}},
        {"name": "Write", "arguments": {"file_path": s(&state.join("run/planted")), "content": "x"}},
        {"name": "Write", "arguments": {"file_path": s(&claude_link), "content": "#!/bin/sh\n"}},
        {"name": "Write", "arguments": {"file_path": s(&checkout.join("ok.txt")), "content": "fine\n"}},
        {"name": "Edit", "arguments": {"file_path": s(&real_claude), "old_string": "a", "new_string": "b"}},
    ]);
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            "dw-r1",
            Some("Writing."),
            Some(calls),
        )
        .await
        .unwrap();
    let v = view(&r);
    let r = results(&v);
    assert_eq!(r.len(), 7, "{v}");
    for (i, what) in [
        (0, "protected"),
        (1, "protected"),
        (2, "protected"),
        (3, "protected"),
    ] {
        assert_eq!(r[i]["status"], "error", "{}", r[i]);
        assert!(output(&r[i]).starts_with("not_permitted"), "{}", r[i]);
        assert!(output(&r[i]).contains(what), "{}", r[i]);
    }
    assert!(output(&r[4]).starts_with("not_permitted"), "{}", r[4]);
    assert!(
        output(&r[4]).contains("where the gateway or Claude Code is installed"),
        "{}",
        r[4]
    );
    assert_eq!(r[5]["status"], "ok", "{}", r[5]);
    // The real Claude Code lies outside this root: refused either way, and untouched.
    assert_eq!(r[6]["status"], "error", "{}", r[6]);
    assert_eq!(
        std::fs::read_to_string(other.join("lib.rs")).unwrap(),
        "fn other() {}\n"
    );
    assert!(!other.join("new.rs").exists());
    assert!(!state.join("run/planted").exists());
    assert!(
        std::fs::symlink_metadata(&claude_link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(checkout.join("ok.txt")).unwrap(),
        "fine\n"
    );
    chat.stop(&sid, &lease, "dw-stop", None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn direct_write_never_reaches_code_that_runs_later() {
    // Red-team R1: a write root of `/` or a home would let a session plant start-up files that
    // run later, outside every sandbox. Such roots are refused at start, and so are a home's
    // hidden directories and its `bin`.
    let tree = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tree.path()).unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(home.join(".config/app")).unwrap();
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("HOME", &home)
        .state_dir(root.join("state"))
        .spawn()
        .await
        .expect("gateway starts");
    let chat = chatgpt(&gw).await;
    let dw = json!({"capability_profile": "direct_write", "wait_seconds": 50});
    for (i, (dir, reason)) in [
        (PathBuf::from("/"), "whole file system"),
        (home.clone(), "home directory"),
        (root.clone(), "home directory"),
        (PathBuf::from("/etc"), "system directory"),
    ]
    .into_iter()
    .enumerate()
    {
        let r = chat
            .start_with("Write", &dir, &format!("dw-unfit-{i}"), dw.clone())
            .await
            .unwrap();
        assert_eq!(tool_err_code(&r), "not_permitted", "{dir:?}: {r}");
        assert!(err_message(&r).contains(reason), "{dir:?}: {r}");
    }
    // Inside a home's hidden directories (tools' code: `.pth` files, shims) and in the home's
    // `bin`: refused as roots too; the autorun entries are unit-tested in the sandbox crate.
    std::fs::create_dir_all(home.join("bin")).unwrap();
    std::fs::create_dir_all(home.join(".local/lib")).unwrap();
    for (i, (dir, reason)) in [
        (home.join(".config"), "hidden directory"),
        (home.join(".local/lib"), "hidden directory"),
        (home.join("bin"), "runs code later"),
    ]
    .into_iter()
    .enumerate()
    {
        let r = chat
            .start_with("Write", &dir, &format!("dw-hidden-{i}"), dw.clone())
            .await
            .unwrap();
        assert_eq!(tool_err_code(&r), "not_permitted", "{dir:?}: {r}");
        assert!(err_message(&r).contains(reason), "{dir:?}: {r}");
    }
    // A project in the home is fine.
    std::fs::create_dir_all(home.join("project")).unwrap();
    let r = chat
        .start_with("Write", &home.join("project"), "dw-project", dw.clone())
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "waiting_for_gpt", "{v}");
    let (sid, lease) = (session_id(&v), lease_id(&v));
    chat.stop(&sid, &lease, "dw-c-stop", None).await.unwrap();
}

/// Red team 26 B5 and 27 B2: a link the owner made in a start-up place of the home into a project
/// (an autostart entry; a dangling one naming a file a build makes) makes its target the auto-run
/// class `startup_links`: a Write is refused naming the link and what to do, nothing is
/// written, and the owner's opt-in for the class opens exactly those targets.
#[tokio::test(flavor = "multi_thread")]
async fn targets_of_links_in_start_up_places_are_refused_naming_the_link() {
    use std::os::unix::fs::symlink;
    let tree = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tree.path()).unwrap();
    let (home, project) = (root.join("home"), root.join("project"));
    let autostart = home.join(".config/autostart");
    std::fs::create_dir_all(&autostart).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("a.desktop"), "[Desktop Entry]\n").unwrap();
    symlink(project.join("a.desktop"), autostart.join("a.desktop")).unwrap();
    symlink(
        project.join("build/gen.desktop"),
        autostart.join("gen.desktop"),
    )
    .unwrap();
    let write = |rel: &str| {
        json!({"name": "Write", "arguments": {
            "file_path": project.join(rel).to_string_lossy(), "content": "Exec=sh\n"}})
    };
    for allowed in ["", "startup_links"] {
        let gw = GatewayProcess::builder(GATEWAY)
            .env("CLAUDE_BIN", tests::claude_bin())
            .env("HOME", &home)
            .env("CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES", allowed)
            .state_dir(root.join(format!("state{}", allowed.len())))
            .spawn()
            .await
            .expect("gateway starts");
        let chat = chatgpt(&gw).await;
        let key = format!("sl{}", allowed.len());
        let v = crate::writes::start_profile(&chat, &project, "direct_write", &key).await;
        let calls = json!([
            write("a.desktop"),
            write("build/gen.desktop"),
            write("plain.txt")
        ]);
        let next = crate::writes::reply_calls(&chat, &v, &format!("{key}-r"), calls).await;
        let got = next["pending_turn"]["tool_results"].as_array().unwrap();
        assert_eq!(got.len(), 3, "{next}");
        assert_eq!(got[2]["status"], "ok", "{next}");
        for (result, link) in got.iter().zip(["a.desktop", "gen.desktop"]) {
            if !allowed.is_empty() {
                assert_eq!(result["status"], "ok", "{link}: {result}");
                continue;
            }
            assert_refused_naming_link(result, &format!(".config/autostart/{link}"));
        }
        let written = std::fs::read_to_string(project.join("a.desktop")).unwrap();
        assert_eq!(written == "Exec=sh\n", !allowed.is_empty(), "{written}");
        assert_eq!(project.join("build").exists(), !allowed.is_empty());
        chat.stop(&session_id(&v), &lease_id(&v), &format!("{key}-s"), None)
            .await
            .unwrap();
    }
}

/// A Write refused as the target of the owner's link `~/<link>` in a start-up place: the
/// refusal names the link, says how to undo it and names the opt-in.
fn assert_refused_naming_link(result: &Value, link: &str) {
    let output = result["output"].as_str().unwrap_or_default();
    assert_eq!(result["status"], "error", "{link}: {result}");
    assert!(output.starts_with("not_permitted"), "{output}");
    let named = format!("is the target of ~/{link}, a link in a start-up place");
    assert!(output.contains(&named), "{output}");
    assert!(output.contains("remove the link"), "{output}");
    let opt_in = "CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES=startup_links";
    assert!(output.contains(opt_in), "{output}");
}

/// Red team 28 B3: a chain of links from a start-up place (`autostart/chain.desktop -> ~/mid ->
/// project/build/chain.desktop`, dangling) and a link the owner makes while the session is live
/// (`~/.gdbinit -> project/gdbinit`, a dot link of the home: B4) are refused naming the link,
/// and the files stay as they were.
#[tokio::test(flavor = "multi_thread")]
async fn chained_and_late_links_from_start_up_places_are_refused() {
    use std::os::unix::fs::symlink;
    let tree = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tree.path()).unwrap();
    let (home, project) = (root.join("home"), root.join("project"));
    std::fs::create_dir_all(home.join(".config/autostart")).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    symlink(project.join("build/chain.desktop"), home.join("mid")).unwrap();
    symlink(
        home.join("mid"),
        home.join(".config/autostart/chain.desktop"),
    )
    .unwrap();
    std::fs::write(project.join("gdbinit"), "set pagination off\n").unwrap();
    // Red team 30 N1: a link inside a linked start-up directory.
    std::fs::create_dir_all(home.join("dot/tmux")).unwrap();
    symlink(project.join("tmux.conf"), home.join("dot/tmux/tmux.conf")).unwrap();
    symlink(home.join("dot/tmux"), home.join(".config/tmux")).unwrap();
    let site = home.join(".local/lib/python3.11/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    let write = |rel: &str| {
        json!({"name": "Write", "arguments": {
            "file_path": project.join(rel).to_string_lossy(), "content": "shell id\n"}})
    };
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("HOME", &home)
        .state_dir(root.join("state"))
        .spawn()
        .await
        .expect("gateway starts");
    let chat = chatgpt(&gw).await;
    let v = crate::writes::start_profile(&chat, &project, "direct_write", "late-sl").await;
    // Made after the session started (its broker derived the links then).
    symlink(project.join("gdbinit"), home.join(".gdbinit")).unwrap();
    // Red team 30 N4: a `.pth` link in the user site-packages, made late too.
    symlink(project.join("dev.pth"), site.join("dev.pth")).unwrap();
    let calls = json!([
        write("plain.txt"),
        write("build/chain.desktop"),
        write("gdbinit"),
        write("tmux.conf"),
        write("dev.pth"),
    ]);
    let next = crate::writes::reply_calls(&chat, &v, "late-sl-r", calls).await;
    let got = next["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(got.len(), 5, "{next}");
    assert_eq!(got[0]["status"], "ok", "{next}");
    for (result, link) in got.iter().skip(1).zip([
        ".config/autostart/chain.desktop",
        ".gdbinit",
        // The config name tmux reads, through the owner's `~/.config/tmux -> ~/dot/tmux`
        // (a target is refused before it exists, red team 51).
        ".config/tmux/tmux.conf",
        ".local/lib/python3.11/site-packages/dev.pth",
    ]) {
        assert_refused_naming_link(result, link);
    }
    let kept = std::fs::read_to_string(project.join("gdbinit")).unwrap();
    assert_eq!(kept, "set pagination off\n");
    assert!(!project.join("build").exists());
    assert!(!project.join("tmux.conf").exists() && !project.join("dev.pth").exists());
    chat.stop(&session_id(&v), &lease_id(&v), "late-sl-s", None)
        .await
        .unwrap();
}

/// Red team 28 B2, the findable part: the owner's `~/.gitconfig` makes a directory of a shared
/// hooks repository (no repository of its own: `.git` nowhere in or above it) every
/// repository's hooks dir; a session on it cannot rewrite a hook there, the hook is unchanged,
/// and other files stay writable.
#[tokio::test(flavor = "multi_thread")]
async fn a_global_hooks_path_into_a_root_that_is_no_repository_is_refused() {
    let tree = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tree.path()).unwrap();
    let (home, shared) = (root.join("home"), root.join("shared"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(shared.join("githooks")).unwrap();
    let hook = shared.join("githooks/pre-commit");
    std::fs::write(&hook, "#!/bin/sh\nexit 0\n").unwrap();
    let config = format!(
        "[core]\n\thooksPath = {}\n",
        shared.join("githooks").display()
    );
    std::fs::write(home.join(".gitconfig"), config).unwrap();
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("HOME", &home)
        .state_dir(root.join("state"))
        .spawn()
        .await
        .expect("gateway starts");
    let chat = chatgpt(&gw).await;
    let v = crate::writes::start_profile(&chat, &shared, "direct_write", "ghp").await;
    let write = |path: &std::path::Path| {
        json!({"name": "Write", "arguments": {
            "file_path": path.to_string_lossy(), "content": "#!/bin/sh\nid\n"}})
    };
    let calls = json!([write(&hook), write(&shared.join("README.md"))]);
    let next = crate::writes::reply_calls(&chat, &v, "ghp-r", calls).await;
    let got = next["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(got.len(), 2, "{next}");
    let output = got[0]["output"].as_str().unwrap_or_default();
    assert_eq!(got[0]["status"], "error", "{next}");
    assert!(output.starts_with("not_permitted"), "{output}");
    assert!(output.contains("is an auto-run place"), "{output}");
    assert!(output.contains("git_hooks"), "{output}");
    assert!(output.contains("core.hooksPath"), "{output}");
    assert_eq!(got[1]["status"], "ok", "{next}");
    assert_eq!(
        std::fs::read_to_string(&hook).unwrap(),
        "#!/bin/sh\nexit 0\n"
    );
    chat.stop(&session_id(&v), &lease_id(&v), "ghp-s", None)
        .await
        .unwrap();
}

/// Red team 30 N2: for a root that is no repository, the owner's `~/.gitconfig` names places
/// by git's `~name/` spelling (its hooks dir), by its template directory (whose `hooks/` and
/// `config` every `git clone` copies) and by the programs it runs in every repository
/// (`core.fsmonitor`); each is refused with its class and reason, nothing is written, and
/// other files stay writable.
#[tokio::test(flavor = "multi_thread")]
async fn the_global_git_configs_template_programs_and_user_paths_are_refused() {
    let uid = rustix::process::geteuid().as_raw().to_string();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let (name, own_home) = passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|f| f.len() >= 7 && f[2] == uid)
        .map(|f| (f[0].to_string(), std::path::PathBuf::from(f[5])))
        .expect("this account in /etc/passwd");
    let tree = tempfile::Builder::new()
        .prefix("rt30n2-")
        .tempdir_in(&own_home)
        .unwrap();
    let root = std::fs::canonicalize(tree.path()).unwrap();
    let (home, shared) = (root.join("home"), root.join("shared"));
    for dir in [
        &home,
        &shared.join("githooks"),
        &shared.join("template/hooks"),
    ] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let original = "#!/bin/sh\nexit 0\n";
    let files = [
        "githooks/pre-commit",
        "template/hooks/post-checkout",
        "fsmon",
    ];
    for rel in files {
        std::fs::write(shared.join(rel), original).unwrap();
    }
    std::fs::write(shared.join("template/config"), "[core]\n").unwrap();
    let below = shared
        .strip_prefix(&own_home)
        .unwrap()
        .display()
        .to_string();
    let config = format!(
        "[core]\n\thooksPath = ~{name}/{below}/githooks\n\tfsmonitor = {}\n\
         [init]\n\ttemplateDir = {}\n",
        shared.join("fsmon").display(),
        shared.join("template").display()
    );
    std::fs::write(home.join(".gitconfig"), config).unwrap();
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("HOME", &home)
        .state_dir(root.join("state"))
        .spawn()
        .await
        .expect("gateway starts");
    let chat = chatgpt(&gw).await;
    let v = crate::writes::start_profile(&chat, &shared, "direct_write", "gtp").await;
    let write = |rel: &str| {
        json!({"name": "Write", "arguments": {
            "file_path": shared.join(rel).to_string_lossy(), "content": "#!/bin/sh\nid\n"}})
    };
    let calls = json!([
        write(files[0]),
        write(files[1]),
        write(files[2]),
        write("template/config"),
        write("README.md"),
    ]);
    let next = crate::writes::reply_calls(&chat, &v, "gtp-r", calls).await;
    let got = next["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(got.len(), 5, "{next}");
    let expected = [
        ("git_hooks", "core.hooksPath"),
        ("git_hooks", "hooks"),
        ("git_hooks", "core.fsmonitor"),
        ("vcs_config", "template directory"),
    ];
    for (result, (class, why)) in got.iter().zip(expected) {
        let output = result["output"].as_str().unwrap_or_default();
        assert_eq!(result["status"], "error", "{next}");
        assert!(output.starts_with("not_permitted"), "{output}");
        assert!(output.contains("is an auto-run place"), "{output}");
        assert!(output.contains(class), "{class}: {output}");
        assert!(output.contains(why), "{why}: {output}");
    }
    assert_eq!(got[4]["status"], "ok", "{next}");
    for rel in files {
        assert_eq!(std::fs::read_to_string(shared.join(rel)).unwrap(), original);
    }
    chat.stop(&session_id(&v), &lease_id(&v), "gtp-s", None)
        .await
        .unwrap();
}

/// Another gateway of the same account on this host (red-team F3): its state dir — token, server
/// key, database, transcripts — is as protected as this gateway's own, for the read tools and
/// for commands, because every gateway lists its state dir in the account's registry.
#[tokio::test]
async fn another_gateways_state_dir_is_protected_too() {
    let other = gateway().await;
    let key_file = other.state_dir().join("auth/server-key");
    let secret = std::fs::read_to_string(&key_file).unwrap();
    assert!(
        secret.trim().len() >= 32,
        "the other gateway has a server key"
    );
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "look around", "k-other-gw").await;
    let key = key_file.to_string_lossy().to_string();
    let state = other.state_dir().to_string_lossy().to_string();
    other_gateway_is_closed_to(&chat, &v, "r-other-gw", &key, &state, secret.trim()).await;
}

/// Every read tool and two commands aimed at another gateway's state dir `state` and its file
/// `file` (holding `secret`) from the session `v`: refused, masked, nothing leaked.
async fn other_gateway_is_closed_to(
    chat: &ScriptedChatGpt,
    v: &Value,
    reply_id: &str,
    file: &str,
    state: &str,
    secret: &str,
) {
    let calls = json!([
        {"name": "Read", "arguments": {"file_path": file}},
        {"name": "FindFiles", "arguments": {"path": state}},
        {"name": "SearchText", "arguments": {"query": secret, "path": state}},
        {"name": "RunCommand", "arguments": {"argv": ["cat", file]}},
        {"name": "RunCommand", "arguments": {"argv": ["ls", "-la", state]}},
    ]);
    let v = crate::writes::reply_calls(chat, v, reply_id, calls).await;
    let results = results(&v);
    for read in &results[..3] {
        assert_eq!(read["status"], "error", "{read}");
        assert!(output(read).starts_with("not_permitted"), "{read}");
    }
    // The file cannot be read; the state dir shows as an empty mask.
    assert_ne!(results[3]["receipt"]["exit_code"], 0, "{}", results[3]);
    let listing = output(&results[4]);
    assert!(
        !listing.contains("auth") && !listing.contains("run"),
        "{listing}"
    );
    assert!(!v.to_string().contains(secret), "the secret leaked: {v}");
}

/// Issue 23, item 8: the registry is the account's, not `$HOME`'s. A gateway started with another
/// HOME lists its state dir in the account's registry (the passwd home of its uid), so a gateway
/// of the same account with the usual HOME still protects it — and (red team 43a B5) that HOME
/// too, as an account's home: its keys are closed to Read and to commands, and a `direct_write`
/// session cannot be rooted at it.
#[tokio::test]
async fn a_gateway_started_with_another_home_is_protected_too() {
    let elsewhere = tempfile::tempdir().unwrap();
    let secret = "other-home-private-key-4711";
    let their_key = elsewhere.path().join(".ssh/id_ed25519");
    std::fs::create_dir_all(their_key.parent().unwrap()).unwrap();
    std::fs::write(&their_key, secret).unwrap();
    let other = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("HOME", elsewhere.path())
        .spawn()
        .await
        .expect("gateway starts");
    let key_file = other.state_dir().join("auth/server-key");
    assert!(
        !elsewhere
            .path()
            .join(sandbox::protected::instances::REGISTRY)
            .exists(),
        "registered under $HOME instead of the account's home"
    );
    let gw = gateway().await;
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "look around", "k-other-home").await;
    let calls = json!([
        {"name": "Read", "arguments": {"file_path": key_file.to_string_lossy()}},
        {"name": "Read", "arguments": {"file_path": their_key.to_string_lossy()}},
        {"name": "RunCommand", "arguments": {"argv": ["cat", their_key.to_string_lossy()]}},
    ]);
    let v = crate::writes::reply_calls(&chat, &v, "r-other-home", calls).await;
    let got = results(&v);
    for read in &got[..2] {
        assert_eq!(read["status"], "error", "{read}");
        assert!(output(read).starts_with("not_permitted"), "{read}");
    }
    assert_ne!(got[2]["receipt"]["exit_code"], 0, "{}", got[2]);
    assert!(
        !v.to_string().contains(secret),
        "the other home's key leaked: {v}"
    );
    let refused = chat
        .start_with(
            "edit my dotfiles",
            elsewhere.path(),
            "k-other-home-root",
            json!({"capability_profile": "direct_write", "wait_seconds": 0}),
        )
        .await
        .unwrap();
    let message = refused["structuredContent"]["error"]["message"].to_string();
    assert!(message.contains("is a home directory"), "{refused}");
}

/// Red team 23i B2: a gateway of the account started while a session runs (after its broker
/// built its protected set) is protected from that session's next call on — Read, FindFiles,
/// SearchText and a new command — not only from sessions started after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_gateway_started_after_a_session_is_protected_from_it() {
    let gw = gateway().await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let dir = work_dir();
    let v = start_session(&chat, dir.path(), "look around", "k-later-gw").await;
    // Registered now, with the session's broker and runner already running.
    let later = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .no_token()
        .spawn()
        .await
        .expect("gateway starts");
    let token_file = later.state_dir().join("auth/access-token");
    let token = later.token().to_string();
    assert!(token.len() >= 20, "the later gateway made its token");
    let (file, state) = (
        token_file.to_string_lossy().to_string(),
        later.state_dir().to_string_lossy().to_string(),
    );
    other_gateway_is_closed_to(&chat, &v, "r-later-gw", &file, &state, &token).await;
}
