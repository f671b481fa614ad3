//! Red team 46: one mount inside the gateway's HOME (a FUSE mirror, a bind, a tmpfs) made every
//! command of every session fail — the kernel takes no directory holding mounts locked to the
//! command's namespace as an overlay's lower layer. The gateway runs here (real runner) in a
//! private mount namespace with a tmpfs inside its HOME and another inside the project: the
//! commands run, HOME's and the project's other directories stay copy-on-write (the real files
//! untouched), the mounts and the directories leading to them read-only (a stated limit), and
//! the result says so.

use std::path::Path;

use serde_json::json;

use super::*;
use crate::autorun::results;

#[tokio::test(flavor = "multi_thread")]
async fn mounts_inside_home_and_the_project_leave_commands_running() {
    let home = root_scratch_dir();
    let (disk, project) = (home.join("mnt/disk"), home.join("proj"));
    let (cache, data) = (home.join(".cache"), project.join("data"));
    for dir in [&disk, &cache, &data, &project.join("src")] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(project.join("src/main.txt"), "source\n").unwrap();
    // The gateway, exec'd in a private mount namespace where both mounts exist.
    let setup = format!(
        "mount -t tmpfs -o size=1m tmpfs {disk} && echo on-disk > {disk}/f && \
         mount -t tmpfs -o size=1m tmpfs {data}",
        disk = disk.display(),
        data = data.display(),
    );
    let gw = gateway_in_namespace(&home, &setup).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let v = start_session(&chat, &project, "build it", "k-mounts-inside").await;
    let script = "echo built > src/out.txt && cat src/main.txt && mkdir -p \"$HOME/.cache/tool\" \
                  && echo cached > \"$HOME/.cache/tool/x\" && cat \"$HOME/.cache/tool/x\" \
                  && cat \"$HOME/mnt/disk/f\" && (touch \"$HOME/mnt/disk/g\" 2>/dev/null \
                  || echo disk-read-only) && (touch data/x 2>/dev/null || echo data-read-only) && (touch top.txt 2>/dev/null || echo top-read-only)";
    let calls = json!([
        {"name": "RunCommand", "arguments": {"argv": ["sh", "-c", script]}},
        {"name": "RunCommand", "arguments": {"argv": ["cat", "src/out.txt"]}},
    ]);
    let v = crate::writes::reply_calls(&chat, &v, "r-mounts-inside", calls).await;
    let got = results(&v);
    let first = got[0]["output"].as_str().unwrap_or_default();
    assert_eq!(got[0]["receipt"]["exit_code"], 0, "{}", got[0]);
    for line in [
        "source\n",
        "cached\n",
        "on-disk\n",
        "disk-read-only\n",
        "data-read-only\n",
        "top-read-only\n",
    ] {
        assert!(first.contains(line), "{line:?} missing: {first}");
    }
    assert!(
        first.contains("note: mounts inside the command's copy-on-write directories")
            && first.contains(&disk.display().to_string())
            && first.contains(&data.display().to_string()),
        "{first}"
    );
    // The layer kept the first command's file for the second; the real tree has none of it.
    assert_eq!(got[1]["receipt"]["exit_code"], 0, "{}", got[1]);
    assert!(
        got[1]["output"]
            .as_str()
            .unwrap_or_default()
            .contains("built\n"),
        "{}",
        got[1]
    );
    assert!(!project.join("src/out.txt").exists());
    assert!(!cache.join("tool").exists());
    let _ = std::fs::remove_dir_all(&home);
}

/// The gateway with `HOME=home`, exec'd in a private mount namespace where `setup` (shell, no
/// single quotes) ran first.
async fn gateway_in_namespace(home: &Path, setup: &str) -> GatewayProcess {
    let wrapper = home.join("gateway-in-namespace");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec unshare -m --propagation private sh -c '{setup} && exec \"$0\" \
             \"$@\"' {GATEWAY} \"$@\"\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    GatewayProcess::builder(&wrapper)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("HOME", home)
        .spawn()
        .await
        .expect("gateway starts in its namespace")
}

/// Red team 47b B15: a bind mount of HOME (or of `~/.config`) as a `direct_write` working
/// directory wrote the home's real start-up files (`.config/autostart`, fish's config): the
/// root is judged under every path of it, so it is refused as the home it is.
#[tokio::test(flavor = "multi_thread")]
async fn a_bind_of_home_or_its_config_is_no_write_root() {
    let base = root_scratch_dir();
    let (home, bound, bound_config) = (base.join("home"), base.join("w"), base.join("cfg"));
    for dir in [&home.join(".config/fish"), &bound, &bound_config] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let setup = format!(
        "mount --bind {home} {bound} && mount --bind {home}/.config {config}",
        home = home.display(),
        bound = bound.display(),
        config = bound_config.display()
    );
    let gw = gateway_in_namespace(&home, &setup).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    for (wd, why) in [
        (&bound, "is a home directory"),
        (&bound_config, "inside a hidden directory of a home"),
    ] {
        let refused = chat
            .start_with(
                "edit my dotfiles",
                wd,
                &format!("k-bind-{}", wd.display()),
                json!({"capability_profile": "direct_write", "wait_seconds": 0}),
            )
            .await
            .unwrap();
        let message = refused["structuredContent"]["error"]["message"].to_string();
        assert!(message.contains(why), "{}: {refused}", wd.display());
    }
    assert!(!home.join(".config/autostart").exists());
    let _ = std::fs::remove_dir_all(&base);
}

/// A kept temp dir (canonical; the test removes it), after checking the test runs as root:
/// it mounts in a private mount namespace.
fn root_scratch_dir() -> std::path::PathBuf {
    assert_eq!(
        rustix::process::geteuid().as_raw(),
        0,
        "this test mounts in a private mount namespace: it needs root"
    );
    std::fs::canonicalize(tempfile::tempdir().unwrap().keep()).unwrap()
}
