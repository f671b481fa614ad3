//! `doctor` on fixture state dirs and on the shipped service files, filled by
//! scripts/install-service: they pass; a unit with `KillMode=control-group` or a plist without
//! `AbandonProcessGroup` fails.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use gatewayctl::{Command, DoctorArgs};
use support::*;

const GATEWAY_BIN: &str = "/opt/native-gateway/bin/gateway";
const PUBLIC_BASE: &str = "https://gw.example.net";

fn fake_claude(dir: &Path) -> PathBuf {
    let path = dir.join("claude");
    tests::executables::write(&path, "#!/bin/sh\necho \"2.1.332 (Claude Code)\"\n").unwrap();
    path
}

/// Fill a template with scripts/install-service, as an owner would.
fn install_service(f: &Fixture, kind: &str) -> PathBuf {
    let out = f.dir.path().join(if kind == "--launchd" {
        "local.native-gateway.plist"
    } else {
        "native-gateway.service"
    });
    let status = std::process::Command::new(repo_root().join("scripts/install-service"))
        .args([kind, "--public-base", PUBLIC_BASE, "--out"])
        .arg(&out)
        .env("CLAUDE_TOOLS_STATE_DIR", &f.state)
        .env("GATEWAY_BIN", GATEWAY_BIN)
        .env("CLAUDE_BIN", fake_claude(f.dir.path()))
        .env("HOME", f.dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    out
}

fn doctor(f: &Fixture, service_files: Vec<PathBuf>) -> Command {
    Command::Doctor(DoctorArgs {
        service_file: service_files,
        claude_bin: Some(fake_claude(f.dir.path())),
        checkout: Some(f.dir.path().to_path_buf()),
        home: Some(f.dir.path().to_path_buf()),
        token: None,
        skip_host_probes: true,
    })
}

fn redact(f: &Fixture, text: &str) -> String {
    let uid = rustix::process::getuid().as_raw();
    text.replace(&f.dir.path().display().to_string(), "[TMP]")
        .replace(&format!("uid {uid}"), "uid [UID]")
        .replace(&format!("chown {uid} "), "chown [UID] ")
}

#[test]
fn doctor_passes_on_a_good_state_dir_and_filled_service_files() {
    let f = Fixture::new();
    let unit = install_service(&f, "--systemd");
    let plist = install_service(&f, "--launchd");
    let (out, result) = f.run(false, doctor(&f, vec![unit.clone(), plist.clone()]));
    assert!(result.is_ok(), "{out}");
    assert!(!out.contains("FAIL") && !out.contains("WARN"), "{out}");
    insta::assert_snapshot!("doctor_ok_table", redact(&f, &out));
    let (json, _) = f.run(true, doctor(&f, vec![unit, plist]));
    insta::assert_snapshot!("doctor_ok_json", redact(&f, &json));
}

#[test]
fn doctor_fails_on_kill_mode_control_group() {
    let f = Fixture::new();
    let unit = install_service(&f, "--systemd");
    let text = std::fs::read_to_string(&unit)
        .unwrap()
        .replace("KillMode=process", "KillMode=control-group");
    std::fs::write(&unit, text).unwrap();
    let (out, result) = f.run(false, doctor(&f, vec![unit]));
    assert!(result.unwrap_err().contains("1 check(s) failed"));
    assert!(out.contains("FAIL  systemd KillMode"), "{out}");
    assert!(
        out.contains("fix: set KillMode=process in [Service]"),
        "{out}"
    );

    // Leaving it out is the same: the default is control-group.
    let unit = install_service(&f, "--systemd");
    let text = std::fs::read_to_string(&unit)
        .unwrap()
        .replace("KillMode=process", "");
    std::fs::write(&unit, text).unwrap();
    let (out, result) = f.run(false, doctor(&f, vec![unit]));
    assert!(result.is_err());
    assert!(out.contains("KillMode=control-group (default)"), "{out}");
}

#[test]
fn doctor_fails_on_a_plist_without_abandon_process_group() {
    let f = Fixture::new();
    let plist = install_service(&f, "--launchd");
    let text = std::fs::read_to_string(&plist)
        .unwrap()
        .replace("<key>AbandonProcessGroup</key>\n  <true/>", "");
    assert!(!text.contains("AbandonProcessGroup</key>"));
    std::fs::write(&plist, text).unwrap();
    let (out, result) = f.run(false, doctor(&f, vec![plist]));
    assert!(result.unwrap_err().contains("1 check(s) failed"));
    assert!(out.contains("FAIL  launchd AbandonProcessGroup"), "{out}");
}

#[test]
fn doctor_fails_on_unfilled_templates_and_relative_state_dirs() {
    let f = Fixture::new();
    let templates = vec![
        repo_root().join("scripts/native-gateway.service"),
        repo_root().join("scripts/native-gateway.plist"),
    ];
    let (out, result) = f.run(false, doctor(&f, templates));
    assert!(result.is_err());
    assert!(
        out.contains("unfilled placeholders @GATEWAY_BIN@ @STATE_DIR@"),
        "{out}"
    );

    let unit = f.dir.path().join("relative.service");
    std::fs::write(
        &unit,
        "[Service]\nExecStart=/opt/gw serve\nEnvironment=CLAUDE_TOOLS_STATE_DIR=state\nKillMode=process\nRestart=always\n",
    )
    .unwrap();
    let (out, result) = f.run(false, doctor(&f, vec![unit]));
    assert!(result.is_err());
    assert!(out.contains("FAIL  systemd state dir"), "{out}");
}

#[test]
fn doctor_fails_on_loose_modes() {
    let f = Fixture::new();
    std::fs::set_permissions(&f.state, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        f.state.join("auth/access-token"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let unit = install_service(&f, "--systemd");
    let (out, result) = f.run(false, doctor(&f, vec![unit]));
    assert!(result.unwrap_err().contains("2 check(s) failed"));
    insta::assert_snapshot!(redact(&f, &out));
}

#[test]
fn doctor_without_service_files_or_claude() {
    let f = Fixture::new();
    let (out, result) = f.run(
        false,
        Command::Doctor(DoctorArgs {
            service_file: Vec::new(),
            claude_bin: None,
            checkout: Some(f.dir.path().to_path_buf()),
            home: Some(f.dir.path().to_path_buf()),
            token: Some("ngw_from_env".into()),
            skip_host_probes: true,
        }),
    );
    assert!(result.is_err());
    assert!(
        out.contains("FAIL  claude code") && out.contains(".npm-global/bin/claude: not found"),
        "{out}"
    );
    assert!(
        out.contains("WARN  service file") && out.contains("none installed"),
        "{out}"
    );
}

#[test]
fn doctor_host_probes_answer() {
    let f = Fixture::new();
    let unit = install_service(&f, "--systemd");
    let mut args = match doctor(&f, vec![unit]) {
        Command::Doctor(a) => a,
        _ => unreachable!(),
    };
    args.skip_host_probes = false;
    let value: serde_json::Value =
        serde_json::from_str(&f.run(true, Command::Doctor(args)).0).unwrap();
    let names: Vec<&str> = value["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .filter(|n| n.starts_with("sandbox:"))
        .collect();
    assert_eq!(
        names,
        [
            "sandbox: user namespaces",
            "sandbox: landlock",
            "sandbox: seccomp",
            "sandbox: runner confinement",
            "sandbox: command layer",
            "sandbox: command memory"
        ]
    );
    let check = |name: &str| {
        value["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} check"))
            .clone()
    };
    // This host mounts overlays in user namespaces: commands get their copy-on-write layer.
    let layer = check("sandbox: command layer");
    assert_eq!(layer["status"], "OK", "{layer}");
    // What bounds a command's memory here, in the SessionView's words: a memory cgroup where
    // this process may make one (root with cgroup v1 here), else the per-process fallback.
    let memory = check("sandbox: command memory");
    let (status, said) = match sandbox::host_support().memory_cgroup {
        Some(_) => ("OK", "memory: bounded per command across all its processes"),
        None => ("WARN", "memory: per process only"),
    };
    assert_eq!(memory["status"], status, "{memory}");
    assert!(
        memory["detail"].as_str().unwrap().starts_with(said),
        "{memory}"
    );
    // The PATH commands get, and where the usual tools resolve on it (`sh`-level tools this
    // test host surely has: git and make).
    let path = check("commands: PATH");
    assert!(
        path["detail"].as_str().unwrap().contains("/usr/bin"),
        "{path}"
    );
    let tools = check("commands: tools")["detail"]
        .as_str()
        .unwrap()
        .to_string();
    for tool in ["cargo", "python3", "node", "npm", "go", "make", "git"] {
        assert!(tools.contains(&format!("{tool} ")), "{tools}");
    }
    assert!(tools.contains("git /"), "{tools}");
    assert!(tools.contains("make /"), "{tools}");
    // This host confines runners fully (as the runner-confinement probe test asserts too): the
    // check says so in the SessionView's words.
    let runner = value["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "sandbox: runner confinement")
        .unwrap();
    assert_eq!(runner["status"], "OK", "{runner}");
    let detail = runner["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("no gateway runs with this state dir; probed here: runner network loopback:broker-port-only and writes private-dirs-only (linux:netns+landlock(v"),
        "{detail}"
    );
    for check in value["checks"].as_array().unwrap() {
        if check["name"].as_str().unwrap().starts_with("sandbox:") {
            assert_ne!(check["status"], "FAIL", "{check}");
        }
    }
    // Run as root (as CI is), doctor says so.
    let user = value["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "user")
        .unwrap();
    let root = rustix::process::geteuid().is_root();
    assert_eq!(user["status"], if root { "WARN" } else { "OK" }, "{user}");
}

#[test]
fn doctor_shows_the_protected_set() {
    let f = Fixture::new();
    // A home with a few credential stores: doctor names the ones present, by category.
    let home = f.dir.path();
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::create_dir_all(home.join(".cloudflared")).unwrap();
    std::fs::write(home.join(".pgpass"), "x").unwrap();
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    std::fs::write(home.join(".claude/.credentials.json"), "{}").unwrap();
    std::os::unix::fs::symlink(home.join("dotfiles/gdbinit"), home.join(".gdbinit")).unwrap();
    let mut args = match doctor(&f, vec![]) {
        Command::Doctor(a) => a,
        _ => unreachable!(),
    };
    args.skip_host_probes = false;
    let value: serde_json::Value =
        serde_json::from_str(&f.run(true, Command::Doctor(args)).0).unwrap();
    let checks = value["checks"].as_array().unwrap();
    let detail = |name: &str| -> String {
        checks
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {value}"))["detail"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(detail("protected: ssh and gpg keys").contains("~/.ssh"));
    assert!(detail("protected: tunnels and VPNs").contains("~/.cloudflared"));
    assert!(
        detail("protected: password managers, database and vault tokens").contains("~/.pgpass")
    );
    assert!(detail("protected: model CLIs").contains("~/.claude/.credentials.json"));
    assert!(detail("protected: shell and REPL histories").contains("entries; present here: none"));
    assert!(detail("protected: gateway").contains("/tmp/ngw-run-"));
    let links = detail("protected: start-up links");
    // The home's one link; the host's system configs (`/etc/crontab`, units) may add theirs.
    assert!(
        links.contains("~/.gdbinit") && links.matches("~/").count() == 1,
        "{links}"
    );
    let mut names = Vec::new();
    for check in checks {
        let name = check["name"].as_str().unwrap();
        if name.starts_with("protected:") {
            assert_eq!(check["status"], "OK", "{check}");
            // Each category once (they used to repeat when its entries were not adjacent).
            assert!(!names.contains(&name), "{name} shown twice");
            names.push(name);
        }
    }
}

/// A `~/.config` or other start-up tree (`~/.vim`, red team 30 N5) too deep to look at whole:
/// every write is refused, and doctor says so and how to get out.
#[test]
fn doctor_warns_of_a_config_dir_too_large_to_check_for_links() {
    for place in [".config", ".vim"] {
        let check = startup_links_check(|home| {
            let mut deep = home.join(place);
            for level in 0..=sandbox::protected::autorun::startup_links::MAX_CONFIG_DEPTH + 1 {
                deep.push(format!("l{level}"));
            }
            std::fs::create_dir_all(&deep).unwrap();
        });
        assert_eq!(check["status"], "WARN", "{check}");
        let detail = check["detail"].as_str().unwrap();
        assert!(
            detail.contains(&format!("~/{place} holds more than")),
            "{check}"
        );
        let fix = check["fix"].as_str().unwrap_or_default();
        assert!(
            fix.contains("CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES=startup_links"),
            "{check}"
        );
    }
}

/// A start-up link named through `/proc/<pid>/…` (red team 30 N6): doctor names it.
#[test]
fn doctor_warns_of_a_startup_link_through_proc() {
    let check = startup_links_check(|home| {
        std::os::unix::fs::symlink("/proc/1/root/etc/x", home.join(".pdbrc")).unwrap();
    });
    assert_eq!(check["status"], "WARN", "{check}");
    let detail = check["detail"].as_str().unwrap();
    assert!(
        detail.contains("~/.pdbrc names its target through /proc"),
        "{check}"
    );
}

/// The start-up links check of a doctor run over a home `setup` prepared.
fn startup_links_check(setup: impl Fn(&std::path::Path)) -> serde_json::Value {
    let f = Fixture::new();
    setup(f.dir.path());
    let mut args = match doctor(&f, vec![]) {
        Command::Doctor(a) => a,
        _ => unreachable!(),
    };
    args.skip_host_probes = false;
    let value: serde_json::Value =
        serde_json::from_str(&f.run(true, Command::Doctor(args)).0).unwrap();
    value["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "protected: start-up links")
        .unwrap_or_else(|| panic!("no start-up links check in {value}"))
        .clone()
}
