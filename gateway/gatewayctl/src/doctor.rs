//! `doctor`: checks of the Claude Code binary, the state dir's modes and owner, the user it runs
//! as (root is warned about), this host's sandbox support and the confinement a session started
//! now would get, and the launchd/systemd service files (`service_file`). Each check is OK, WARN or FAIL with a one-line fix; any FAIL makes the command fail.

mod commands;

use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::check::{Check, Status, fail, ok, warn};
use crate::db::{DATABASE_FILE, Db, KNOWN_SCHEMA_VERSION};
use crate::{DoctorArgs, Reported, write_json};

const VERSION_TIMEOUT: Duration = Duration::from_secs(15);

/// `doctor`.
pub fn run(
    state_dir: &Path,
    args: &DoctorArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut checks = claude_checks(args);
    checks.extend(state_checks(state_dir, args));
    if !args.skip_host_probes {
        checks.push(user_check(nix::unistd::geteuid().as_raw()));
        checks.push(userns_check());
        checks.push(landlock_check());
        checks.push(seccomp_check());
        checks.push(runner_check());
        checks.push(commands::layer_check());
        checks.push(commands::memory_check());
        checks.extend(commands::path_checks(state_dir, args.home.as_deref()));
        checks.extend(protected_set_checks(state_dir, args.home.as_deref()));
    }
    checks.extend(crate::service_file::checks(args));
    checks.push(crate::oauth::auth_check(state_dir));
    checks.extend(crate::autorun::checks(state_dir));

    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    let (oks, warns, fails) = (count(Status::Ok), count(Status::Warn), count(Status::Fail));
    if json {
        write_json(
            out,
            &json!({
                "checks": checks,
                "summary": {"ok": oks, "warn": warns, "fail": fails},
            }),
        )?;
    } else {
        let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &checks {
            writeln!(
                out,
                "{:<4}  {:<width$}  {}",
                c.status.as_str(),
                c.name,
                c.detail
            )?;
            if let Some(fix) = &c.fix {
                writeln!(out, "{:<4}  {:<width$}  fix: {fix}", "", "")?;
            }
        }
        writeln!(out)?;
        writeln!(out, "{oks} ok, {warns} warn, {fails} fail")?;
    }
    if fails > 0 {
        return Err(Reported(format!("doctor: {fails} check(s) failed")).into());
    }
    Ok(())
}

// ---- Claude Code ----

/// Run a command with a timeout; its exit success and stdout/stderr text.
fn run_with_timeout(
    cmd: &mut Command,
    timeout: Duration,
) -> Result<(bool, String, String), String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run: {e}"))?;
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(64 * 1024).read_to_string(&mut text);
            }
            let _ = tx.send(text);
        });
        rx
    };
    let stdout = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(25)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {}s", timeout.as_secs()));
            }
            Err(e) => return Err(format!("waiting: {e}")),
        }
    };
    let grace = Duration::from_secs(2);
    let out = stdout.recv_timeout(grace).unwrap_or_default();
    let err = stderr.recv_timeout(grace).unwrap_or_default();
    Ok((status.success(), out, err))
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// `scripts/install-claude-code`, whose `CLAUDE_CODE_VERSION` default is the one pin of the
/// Claude Code version (the turn bridge is tested against it).
const INSTALL_CLAUDE_CODE: &str = include_str!("../../../scripts/install-claude-code");

/// The Claude Code version `scripts/install-claude-code` installs.
pub fn pinned_claude_code_version() -> Option<&'static str> {
    INSTALL_CLAUDE_CODE.lines().find_map(|line| {
        line.trim()
            .strip_prefix("CLAUDE_CODE_VERSION=\"${CLAUDE_CODE_VERSION:-")?
            .strip_suffix("}\"")
    })
}

/// Where `scripts/run` (through `scripts/install-claude-code`) installs Claude Code in a checkout.
fn scripts_run_claude(checkout: &Path) -> PathBuf {
    checkout.join(".tools/claude-code/node_modules/.bin/claude")
}

/// The checkout gatewayctl was built in (an ancestor of its binary holding
/// `scripts/install-claude-code`), else the current directory.
fn default_checkout() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .find(|dir| dir.join("scripts/install-claude-code").is_file())
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok())
}

/// Claude Code as the gateway finds it (`CLAUDE_BIN`, else `$HOME/.npm-global/bin/claude`), and
/// the copy `scripts/run` installed, which it passes as `CLAUDE_BIN` when none is set.
fn claude_checks(args: &DoctorArgs) -> Vec<Check> {
    const NAME: &str = "claude code";
    const RUN_NAME: &str = "claude code (scripts/run)";
    const FIX: &str = "run scripts/install-claude-code and set CLAUDE_BIN to the path it prints";
    if let Some(bin) = args
        .claude_bin
        .as_ref()
        .filter(|b| !b.as_os_str().is_empty())
    {
        return vec![claude_binary_check(NAME, bin)];
    }
    let installed = args
        .checkout
        .clone()
        .or_else(default_checkout)
        .map(|dir| scripts_run_claude(&dir))
        .filter(|p| p.is_file());
    let Some(home) = &args.home else {
        return vec![fail(NAME, "CLAUDE_BIN and HOME are both unset", FIX)];
    };
    let default = home.join(".npm-global").join("bin").join("claude");
    match installed {
        _ if default.exists() => {
            let mut checks = vec![claude_binary_check(NAME, &default)];
            if let Some(installed) = installed {
                checks.push(claude_binary_check(RUN_NAME, &installed));
            }
            checks
        }
        Some(installed) => vec![
            warn(
                NAME,
                format!(
                    "CLAUDE_BIN is unset and {} does not exist: scripts/run uses the copy it \
                     installed, but `gateway serve` started any other way (a service) finds none",
                    default.display()
                ),
                format!("export CLAUDE_BIN={}", installed.display()),
            ),
            claude_binary_check(RUN_NAME, &installed),
        ],
        None => vec![fail(
            NAME,
            format!(
                "{}: not found, CLAUDE_BIN is unset, and scripts/run has installed none",
                default.display()
            ),
            FIX,
        )],
    }
}

fn claude_binary_check(name: &str, path: &Path) -> Check {
    const FIX: &str = "run scripts/install-claude-code and set CLAUDE_BIN to the path it prints";
    let shown = path.display();
    let Ok(meta) = std::fs::metadata(path) else {
        return fail(name, format!("{shown}: not found"), FIX);
    };
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return fail(name, format!("{shown}: not an executable file"), FIX);
    }
    match run_with_timeout(Command::new(path).arg("--version"), VERSION_TIMEOUT) {
        Ok((true, out, _)) if !first_line(&out).is_empty() => {
            let line = first_line(&out);
            let version = line.split_whitespace().next().unwrap_or("");
            match pinned_claude_code_version() {
                Some(pinned) if version != pinned => warn(
                    name,
                    format!("{shown}: {line}, not the pinned {pinned}"),
                    format!(
                        "the gateway is tested with Claude Code {pinned}: {FIX} \
                         (scripts/install-claude-code holds the pin)"
                    ),
                ),
                _ => ok(name, format!("{shown}: {line}")),
            }
        }
        Ok((_, out, err)) => fail(
            name,
            format!(
                "{shown} --version failed: {}",
                crate::table::clip(
                    first_line(if err.trim().is_empty() { &out } else { &err }),
                    120
                )
            ),
            FIX,
        ),
        Err(e) => fail(name, format!("{shown} --version: {e}"), FIX),
    }
}

// ---- state dir ----

/// Check that `path` is ours and grants nothing beyond `mode`.
fn private_check(name: &str, path: &Path, want_dir: bool, mode: u32, missing: Check) -> Check {
    let shown = path.display();
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return missing,
        Err(e) => {
            return fail(
                name,
                format!("{shown}: {e}"),
                "check the path and its permissions",
            );
        }
    };
    if meta.file_type().is_symlink() {
        return warn(
            name,
            format!("{shown} is a symbolic link"),
            "point CLAUDE_TOOLS_STATE_DIR at the real directory",
        );
    }
    if want_dir != meta.is_dir() {
        let kind = if want_dir { "a directory" } else { "a file" };
        return fail(name, format!("{shown} is not {kind}"), "move it aside");
    }
    let uid = nix::unistd::getuid().as_raw();
    if meta.uid() != uid {
        return fail(
            name,
            format!("{shown} is owned by uid {}, not {uid}", meta.uid()),
            format!("chown {uid} {shown}"),
        );
    }
    let actual = meta.permissions().mode() & 0o7777;
    if actual & !mode != 0 {
        return fail(
            name,
            format!("{shown}: mode {actual:04o}, want {mode:04o}"),
            format!("chmod {mode:o} {shown}"),
        );
    }
    ok(name, format!("{shown}: mode {actual:04o}, owner uid {uid}"))
}

fn state_checks(state_dir: &Path, args: &DoctorArgs) -> Vec<Check> {
    let first_start = "the gateway creates it on first start";
    let mut checks = vec![private_check(
        "state dir",
        state_dir,
        true,
        0o700,
        warn(
            "state dir",
            format!("{}: does not exist yet", state_dir.display()),
            format!("start the gateway once ({first_start}), or pass --state-dir"),
        ),
    )];
    if !state_dir.is_dir() {
        return checks;
    }
    for sub in ["auth", "run"] {
        let name = format!("state dir {sub}/");
        let path = state_dir.join(sub);
        let missing = warn(&name, format!("{}: missing", path.display()), first_start);
        checks.push(private_check(&name, &path, true, 0o700, missing));
    }

    let db_path = state_dir.join(DATABASE_FILE);
    let missing = warn(
        "database",
        format!("{}: missing", db_path.display()),
        first_start,
    );
    let mut db_check = private_check("database", &db_path, false, 0o600, missing);
    if db_check.status == Status::Ok {
        match Db::open(state_dir).and_then(|db| db.schema_version()) {
            Ok(v) if v > KNOWN_SCHEMA_VERSION => {
                db_check = warn(
                    "database",
                    format!(
                        "{}: schema v{v}, newer than this gatewayctl (v{KNOWN_SCHEMA_VERSION})",
                        db_path.display()
                    ),
                    "rebuild gatewayctl from the same checkout as the gateway",
                );
            }
            Ok(v) => db_check.detail.push_str(&format!(", schema v{v}")),
            Err(e) => {
                db_check = fail(
                    "database",
                    format!("{}: {e:#}", db_path.display()),
                    "check the file; restore a backup if it is damaged",
                );
            }
        }
    }
    checks.push(db_check);
    for suffix in ["-wal", "-shm"] {
        let path = state_dir.join(format!("{DATABASE_FILE}{suffix}"));
        if path.exists() {
            let name = format!("database {suffix}");
            let skip = ok(&name, "absent");
            checks.push(private_check(&name, &path, false, 0o600, skip));
        }
    }

    let token_path = state_dir.join("auth").join("access-token");
    let token_in_env = args.token.as_deref().is_some_and(|t| !t.is_empty());
    let missing = if token_in_env {
        ok(
            "access token",
            "from CLAUDE_TOOLS_GATEWAY_TOKEN (no token file needed)",
        )
    } else {
        warn(
            "access token",
            format!("{}: missing", token_path.display()),
            first_start,
        )
    };
    let mut token_check = private_check("access token", &token_path, false, 0o600, missing);
    if token_in_env && token_path.exists() && token_check.status == Status::Ok {
        token_check
            .detail
            .push_str(" (not used: the gateway takes CLAUDE_TOOLS_GATEWAY_TOKEN)");
    }
    checks.push(token_check);
    let key_path = state_dir.join("auth").join("server-key");
    let missing = warn(
        "server key",
        format!("{}: missing", key_path.display()),
        first_start,
    );
    checks.push(private_check(
        "server key",
        &key_path,
        false,
        0o600,
        missing,
    ));
    checks
}

// ---- user ----

/// Root is not the owner the design assumes: a gateway run as root reads what root can read.
fn user_check(euid: u32) -> Check {
    const NAME: &str = "user";
    if euid == 0 {
        warn(
            NAME,
            "running as root: a gateway run as root reads what root can read (other accounts' \
             private files outside the protected set, another gateway's token) and its sessions \
             act as root outside the sandbox's masks; these checks also describe root's setup, \
             not your account's",
            "run the gateway and gatewayctl as the account whose files the sessions work on (and \
             that holds the state dir), not as root",
        )
    } else {
        ok(NAME, format!("uid {euid}, not root"))
    }
}

// ---- sandbox support ----

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn find_program(name: &str) -> Option<PathBuf> {
    ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.is_file())
}

fn userns_check() -> Check {
    const NAME: &str = "sandbox: user namespaces";
    if !Path::new("/proc/self").exists() {
        return warn(
            NAME,
            "unknown (no /proc on this host)",
            "none needed off Linux",
        );
    }
    if read_trimmed("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return warn(
            NAME,
            "disabled (kernel.unprivileged_userns_clone = 0)",
            "sysctl -w kernel.unprivileged_userns_clone=1",
        );
    }
    if read_trimmed("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return warn(
            NAME,
            "disabled (user.max_user_namespaces = 0)",
            "sysctl -w user.max_user_namespaces=15000",
        );
    }
    let apparmor = read_trimmed("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
        .as_deref()
        == Some("1");
    let root = nix::unistd::geteuid().is_root();
    let note = if root { " (as root)" } else { "" };
    match find_program("unshare") {
        Some(unshare) => match run_with_timeout(
            Command::new(unshare).args(["-Urn", "true"]),
            Duration::from_secs(5),
        ) {
            Ok((true, _, _)) => ok(NAME, format!("`unshare -Urn true` works{note}")),
            Ok((false, _, err)) => warn(
                NAME,
                format!(
                    "`unshare -Urn true` failed{note}: {}",
                    crate::table::clip(first_line(&err), 100)
                ),
                if apparmor {
                    "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1)"
                } else {
                    "enable unprivileged user namespaces for this user"
                },
            ),
            Err(e) => warn(
                NAME,
                format!("unknown: unshare: {e}"),
                "check `unshare -Urn true` by hand",
            ),
        },
        None if apparmor => warn(
            NAME,
            "restricted by AppArmor (kernel.apparmor_restrict_unprivileged_userns = 1)",
            "allow user namespaces for the gateway in an AppArmor profile",
        ),
        None => ok(NAME, "enabled by sysctl (unshare(1) not found to try it)"),
    }
}

fn landlock_check() -> Check {
    const NAME: &str = "sandbox: landlock";
    #[cfg(target_os = "linux")]
    {
        const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
        // SAFETY: landlock_create_ruleset with a null attribute pointer, size 0 and the VERSION flag
        // only returns the ABI number (or an error); no memory is read or written.
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        if abi > 0 {
            let used = abi.min(i64::from(sandbox::spec::MAX_LANDLOCK_ABI));
            return ok(
                NAME,
                format!("available, ABI v{abi} (sandboxes enforce v{used})"),
            );
        }
        let errno = std::io::Error::last_os_error().raw_os_error();
        match errno {
            Some(libc::ENOSYS) => warn(
                NAME,
                "not in this kernel (landlock syscall: ENOSYS)",
                "use a kernel built with CONFIG_SECURITY_LANDLOCK (5.13+, 6.12+ recommended)",
            ),
            Some(libc::EOPNOTSUPP) => warn(
                NAME,
                "built in but disabled at boot",
                "add landlock to the lsm= kernel parameter",
            ),
            _ if Path::new("/sys/kernel/security/landlock").exists() => {
                ok(NAME, "present (/sys/kernel/security/landlock)")
            }
            _ => warn(
                NAME,
                format!("unknown (probe failed: errno {})", errno.unwrap_or(0)),
                "check `dmesg | grep -i landlock`",
            ),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        if Path::new("/usr/bin/sandbox-exec").exists() {
            ok(NAME, "not applicable; Seatbelt (sandbox-exec) is present")
        } else {
            warn(NAME, "unknown on this OS", "none")
        }
    }
}

fn seccomp_check() -> Check {
    const NAME: &str = "sandbox: seccomp";
    let Some(status) = std::fs::read_to_string("/proc/self/status").ok() else {
        return warn(
            NAME,
            "unknown (no /proc/self/status)",
            "none needed off Linux",
        );
    };
    match status.lines().find_map(|l| l.strip_prefix("Seccomp:")) {
        Some(mode) => {
            let filters = status
                .lines()
                .find_map(|l| l.strip_prefix("Seccomp_filters:"))
                .map(|f| format!(", {} filter(s)", f.trim()))
                .unwrap_or_default();
            ok(
                NAME,
                format!("supported (this process: mode {}{filters})", mode.trim()),
            )
        }
        None => warn(
            NAME,
            "not reported in /proc/self/status",
            "use a kernel built with CONFIG_SECCOMP_FILTER",
        ),
    }
}

/// What a session would get, probed as gatewayctl's own user in its own environment (a service
/// unit that restricts namespaces gives the gateway less): the same probe and words as the
/// SessionView's `network_boundary`.
fn runner_check() -> Check {
    const NAME: &str = "sandbox: runner confinement";
    let boundary = sandbox::boundary::network_boundary();
    let field = |key: &str| boundary[key].as_str().unwrap_or("unknown").to_string();
    let detail = format!(
        "runner network {} and writes {} ({}); commands {}",
        field("runner"),
        field("runner_writes"),
        field("enforced_by"),
        field("commands_enforced_by"),
    );
    if boundary["degraded"] == serde_json::Value::Bool(false) {
        ok(NAME, detail)
    } else {
        warn(
            NAME,
            detail,
            "sessions start with network_boundary.degraded = true; full confinement needs user \
             namespaces (or root), Landlock ABI 4+ and seccomp on Linux, or sandbox-exec on macOS",
        )
    }
}

// ---- protected set ----

/// The one protected set (`sandbox::protected`), by category: how many entries each has and which
/// exist on this host (the read tools refuse them, commands and the runner never see them), then
/// the gateway's own entries and the mount-table aliases found. Informational: always OK.
fn protected_set_checks(state_dir: &Path, home: Option<&Path>) -> Vec<Check> {
    use sandbox::protected;
    let home = home.unwrap_or(Path::new("/"));
    let shown = |path: &Path| match path.strip_prefix(home) {
        Ok(rest) if home != Path::new("/") => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    };
    let rows = protected::rows(home);
    // Each category once, in the order it first appears (a category's entries are not all
    // adjacent in the catalogue).
    let mut categories: Vec<&str> = Vec::new();
    for row in &rows {
        if !categories.contains(&row.category) {
            categories.push(row.category);
        }
    }
    let mut checks = Vec::new();
    for category in categories {
        let in_category: Vec<_> = rows.iter().filter(|r| r.category == category).collect();
        let present: Vec<String> = in_category
            .iter()
            .filter(|r| r.present)
            .map(|r| shown(&r.path))
            .collect();
        let detail = format!(
            "{} entries; present here: {}",
            in_category.len(),
            if present.is_empty() {
                "none".to_string()
            } else {
                present.join(", ")
            }
        );
        checks.push(ok(&format!("protected: {category}"), detail));
    }
    let extra: Vec<PathBuf> = std::env::var("CLAUDE_TOOLS_PROTECTED_PATHS")
        .unwrap_or_default()
        .split(':')
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    // The whole set also holds the catalogue under other accounts' homes, other gateways' state
    // dirs and registries, and mount-table aliases: shown as one total, not taken apart.
    let all = protected::protected_paths(home, state_dir, &extra);
    checks.push(ok(
        "protected: gateway",
        format!(
            "the state dir, the command runtime area {}, {} owner extra(s) (CLAUDE_TOOLS_PROTECTED_PATHS), \
             {} host key file(s); {} paths in all with other accounts' homes, other gateways' \
             state dirs and mount aliases; install locations of the gateway and Claude Code are \
             never writable by a session",
            protected::command_runtime_area(state_dir).display(),
            extra.len(),
            protected::host_key_files().len(),
            all.len(),
        ),
    ));
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_comes_from_install_claude_code() {
        let pinned =
            pinned_claude_code_version().expect("CLAUDE_CODE_VERSION default in the script");
        assert!(
            pinned.split('.').count() == 3 && pinned.split('.').all(|p| p.parse::<u32>().is_ok()),
            "{pinned}"
        );
    }

    #[test]
    fn warns_as_root() {
        assert_eq!(user_check(0).status, Status::Warn);
        assert!(user_check(0).detail.starts_with("running as root"));
        assert_eq!(user_check(1000).status, Status::Ok);
    }

    #[test]
    fn times_out() {
        let r = run_with_timeout(
            Command::new("/bin/sh").args(["-c", "sleep 5"]),
            Duration::from_millis(200),
        );
        assert!(r.unwrap_err().contains("timed out"));
        let (ok, out, _) = run_with_timeout(
            Command::new("/bin/sh").args(["-c", "echo 1.2.3"]),
            VERSION_TIMEOUT,
        )
        .unwrap();
        assert!(ok);
        assert_eq!(out.trim(), "1.2.3");
    }
}
