//! macOS command confinement: a generated Seatbelt (SBPL) profile for `/usr/bin/sandbox-exec`.
//! Deny by default; reads allowed except credential stores, Keychains and the gateway state dir;
//! writes only under the scratch dir and the session's writable dir (where build outputs and
//! caches are redirected: macOS has no copy-on-write layer), and the allow-listed devices; the
//! project and HOME stay read-only; no network; no mach lookups of security
//! services (only the directory-services lookup libc needs); signals and process info only
//! within the sandbox. Paths never appear in the profile text: they are `-D` parameters, so no
//! path can inject SBPL or hit the ~1 KiB string-literal limit.
//!
//! [`runner_profile`] is the Claude Code runner's variant: writes only in its private dirs and one
//! outbound rule, `(remote ip "localhost:<port>")` to the broker; the broker starts the runner
//! through it on macOS (`broker::confine`).
//!
//! The generator is plain code, unit-tested on every OS; only [`command`] is macOS-specific.

use std::path::PathBuf;

/// The only `sandbox-exec` we run (absolute, never looked up on a PATH).
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Global mach services a command may look up: user/group lookups through libinfo. Nothing from
/// the security stack (`com.apple.SecurityServer`, `com.apple.securityd*`, `com.apple.trustd*`),
/// no `cfprefsd` (it writes preferences on the caller's behalf), no launch services.
const MACH_ALLOWED: &[&str] = &["com.apple.system.opendirectoryd.libinfo"];

/// What the profile confines a command to. Paths should be canonical (`/private/var`, not
/// `/var`); give both spellings when in doubt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatbeltSpec {
    /// The command's own scratch dir: writable.
    pub scratch: PathBuf,
    /// The session's writable dir (build outputs and caches, kept across its commands), in the
    /// denied runtime area like the scratch dir: writable too. `None`: the scratch dir only.
    pub session_dir: Option<PathBuf>,
    /// Paths (files or directories) the command may not read: credential stores, Keychains, the
    /// gateway state dir.
    pub denied: Vec<PathBuf>,
    /// Directories inside denied ones the command may read again (a worktree session's
    /// worktree, in the state dir). Never writable.
    pub visible: Vec<PathBuf>,
}

/// Rules every profile starts with: deny by default; processes, signals and process info only
/// within the sandbox; reading is allowed (denials come last and win).
fn base_rules(p: &mut String) {
    p.push_str("(version 1)\n");
    p.push_str("(deny default)\n");
    p.push_str("(allow process-exec)\n");
    p.push_str("(allow process-fork)\n");
    p.push_str("(allow signal (target same-sandbox))\n");
    p.push_str("(allow process-info* (target same-sandbox))\n");
    p.push_str("(allow sysctl-read)\n");
    p.push_str("(allow user-preference-read)\n");
    p.push_str("(allow ipc-posix-sem)\n");
    p.push_str("(allow file-read*)\n");
}

/// The mach services a process needs to run at all (no security services).
fn mach_rules(p: &mut String) {
    p.push_str("(allow mach-lookup");
    for name in MACH_ALLOWED {
        p.push_str(&format!(" (global-name \"{name}\")"));
    }
    p.push_str(")\n");
}

/// One `(<action> (<filter> (param "<NAME>_<i>")))` rule per parameter `i < count`.
fn param_rules(p: &mut String, action: &str, filter: &str, name: &str, count: usize) {
    for i in 0..count {
        p.push_str(&format!("({action} ({filter} (param \"{name}_{i}\")))\n"));
    }
}

/// The SBPL profile text (paths referenced as parameters; see [`params`]).
pub fn profile(spec: &SeatbeltSpec) -> String {
    let mut p = String::new();
    base_rules(&mut p);
    mach_rules(&mut p);
    // Denials last: in SBPL the last matching rule wins.
    param_rules(
        &mut p,
        "deny file-read* file-write*",
        "subpath",
        "DENIED",
        spec.denied.len(),
    );
    // The scratch dir lies in the protected command runtime area (denied above): its own
    // scratch is the one place of it the command reads and writes.
    p.push_str("(allow file-read* file-write* (subpath (param \"SCRATCH\")))\n");
    // Its session's dir is the other one; the area's other sessions stay denied.
    if spec.session_dir.is_some() {
        p.push_str("(allow file-read* file-write* (subpath (param \"SESSION_DIR\")))\n");
    }
    param_rules(
        &mut p,
        "allow file-read*",
        "subpath",
        "VISIBLE",
        spec.visible.len(),
    );
    p.push_str("(deny file-read* file-write* (subpath (param \"KEYCHAINS\")))\n");
    p.push_str("(deny file-read* file-write* (subpath \"/Library/Keychains\"))\n");
    device_rules(&mut p);
    p
}

/// The allow-listed devices (`protected::DEVICE_FILES` and the fd links; `/dev` itself is
/// denied with the masked set), given back last: read, write and ioctl, nothing else of `/dev`.
fn device_rules(p: &mut String) {
    p.push_str("(allow file-read* file-write-data file-ioctl");
    for device in crate::protected::DEVICE_FILES {
        p.push_str(&format!(" (literal \"{device}\")"));
    }
    for (link, _) in crate::protected::DEVICE_LINKS {
        match *link {
            "/dev/ptmx" => {}
            "/dev/fd" => p.push_str(" (subpath \"/dev/fd\")"),
            other => p.push_str(&format!(" (literal \"{other}\")")),
        }
    }
    p.push_str(")\n");
}

/// The `-D` parameters the profile references.
pub fn params(spec: &SeatbeltSpec, home: &std::path::Path) -> Vec<(String, String)> {
    let mut out = vec![("SCRATCH".to_string(), spec.scratch.display().to_string())];
    if let Some(dir) = &spec.session_dir {
        out.push(("SESSION_DIR".to_string(), dir.display().to_string()));
    }
    for (i, path) in spec.denied.iter().enumerate() {
        out.push((format!("DENIED_{i}"), path.display().to_string()));
    }
    for (i, path) in spec.visible.iter().enumerate() {
        out.push((format!("VISIBLE_{i}"), path.display().to_string()));
    }
    out.push((
        "KEYCHAINS".to_string(),
        home.join("Library/Keychains").display().to_string(),
    ));
    out
}

/// The exact argv for `sandbox-exec`: `-p <profile> -DKEY=VALUE… -- <program> <args…>`.
pub fn sandbox_exec_args(
    spec: &SeatbeltSpec,
    home: &std::path::Path,
    program: &std::path::Path,
    args: &[String],
) -> Vec<String> {
    let mut out = vec!["-p".to_string(), profile(spec)];
    for (key, value) in params(spec, home) {
        out.push(format!("-D{key}={value}"));
    }
    out.push("--".to_string());
    out.push(program.display().to_string());
    out.extend(args.iter().cloned());
    out
}

/// What the runner's profile confines Claude Code to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerSeatbeltSpec {
    /// Its private dirs (HOME, TMPDIR): the only writable places, even beneath a denied path.
    pub writable: Vec<PathBuf>,
    /// Unreadable: credential stores, the gateway state dir.
    pub denied: Vec<PathBuf>,
    /// Files beneath a denied path it must read (its MCP config).
    pub readable: Vec<PathBuf>,
    /// Directories beneath a denied path it must read (a worktree session's worktree).
    pub visible: Vec<PathBuf>,
    /// The broker's loopback port, the one outbound destination.
    pub broker_port: u16,
}

/// The runner's SBPL profile (paths referenced as parameters; see [`runner_params`]). The port is
/// a number, so it may appear in the text.
pub fn runner_profile(spec: &RunnerSeatbeltSpec) -> String {
    let mut p = String::new();
    base_rules(&mut p);
    mach_rules(&mut p);
    // The one outbound rule: the broker's port on loopback, no `local ip` rule.
    p.push_str(&format!(
        "(allow network-outbound (remote ip \"localhost:{}\"))\n",
        spec.broker_port
    ));
    // Denials after the broad read allow, then the private dirs and files allowed back: in SBPL
    // the last matching rule wins, and the private dirs live under the (denied) state dir.
    param_rules(
        &mut p,
        "deny file-read* file-write*",
        "subpath",
        "DENIED",
        spec.denied.len(),
    );
    p.push_str("(deny file-read* file-write* (subpath (param \"KEYCHAINS\")))\n");
    p.push_str("(deny file-read* file-write* (subpath \"/Library/Keychains\"))\n");
    param_rules(
        &mut p,
        "allow file-read* file-write*",
        "subpath",
        "WRITABLE",
        spec.writable.len(),
    );
    param_rules(
        &mut p,
        "allow file-read*",
        "literal",
        "READABLE",
        spec.readable.len(),
    );
    param_rules(
        &mut p,
        "allow file-read*",
        "subpath",
        "VISIBLE",
        spec.visible.len(),
    );
    device_rules(&mut p);
    p
}

/// The `-D` parameters [`runner_profile`] references.
pub fn runner_params(spec: &RunnerSeatbeltSpec, home: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let groups = [
        ("WRITABLE", &spec.writable),
        ("DENIED", &spec.denied),
        ("READABLE", &spec.readable),
        ("VISIBLE", &spec.visible),
    ];
    for (prefix, paths) in groups {
        for (i, path) in paths.iter().enumerate() {
            out.push((format!("{prefix}_{i}"), path.display().to_string()));
        }
    }
    out.push((
        "KEYCHAINS".to_string(),
        home.join("Library/Keychains").display().to_string(),
    ));
    out
}

/// The argv for `sandbox-exec` running the runner: `-p <profile> -DKEY=VALUE… --` (the runner's
/// program and arguments follow).
pub fn runner_sandbox_exec_args(spec: &RunnerSeatbeltSpec, home: &std::path::Path) -> Vec<String> {
    let mut out = vec!["-p".to_string(), runner_profile(spec)];
    for (key, value) in runner_params(spec, home) {
        out.push(format!("-D{key}={value}"));
    }
    out.push("--".to_string());
    out
}

/// A `Command` running `program args…` under the profile (macOS only).
#[cfg(target_os = "macos")]
pub fn command(
    spec: &SeatbeltSpec,
    home: &std::path::Path,
    program: &std::path::Path,
    args: &[String],
) -> std::process::Command {
    let mut cmd = std::process::Command::new(SANDBOX_EXEC);
    cmd.args(sandbox_exec_args(spec, home, program, args));
    cmd
}

#[cfg(test)]
mod tests;
