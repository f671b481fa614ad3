//! What the broker hands the `gateway sandbox-exec` helper (an [`ExecSpec`], JSON on its stdin)
//! and what the helper reports back before it executes the command (a [`Report`], the first line
//! of its stdout), plus what the host supports ([`HostSupport`]).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Marks the helper's report line; the command's own output follows it.
pub const REPORT_PREFIX: &str = "\u{1e}ngsbx1 ";
/// Exit status of the helper when it refused to run the command (confinement failed).
pub const EXIT_SANDBOX_FAILED: i32 = 125;
/// Largest spec the helper reads.
pub const MAX_SPEC_BYTES: usize = 8 * 1024 * 1024;

/// Resource bounds set with `setrlimit` (and a pids cgroup where the process is root).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Processes (`RLIMIT_NPROC`, counted inside the command's user namespace).
    pub nproc: u64,
    /// Largest file the command may write, bytes (`RLIMIT_FSIZE`; it can only write to scratch).
    pub fsize: u64,
    /// Open files (`RLIMIT_NOFILE`).
    pub nofile: u64,
    /// As root, bound the process count with a pids cgroup (the kernel does not enforce
    /// `RLIMIT_NPROC` for root). Joining a cgroup-v1 hierarchy costs ~30 ms per command.
    #[serde(default = "default_true")]
    pub root_pids_cgroup: bool,
    /// Memory each process of the command may allocate, bytes (`RLIMIT_DATA`: heap and private
    /// writable mappings; root cannot raise it either, its capabilities are dropped).
    #[serde(default)]
    pub memory: Option<u64>,
    /// Size of the command's scratch file system, bytes: with namespaces the scratch dir is a
    /// tmpfs of this size (all of the command's files together); without, only `fsize` per file.
    #[serde(default)]
    pub scratch: Option<u64>,
    /// With `memory` set, bound the whole command with a memory cgroup where the host allows one
    /// (tests turn this off to exercise the fallback).
    #[serde(default = "default_true")]
    pub memory_cgroup: bool,
    /// The gateway-wide parent the command's memory cgroup goes under, and whether the session's
    /// commands share one (`None`: a cgroup per command directly under the helper's own).
    #[serde(default)]
    pub group: Option<MemoryGroup>,
}

/// Where a command's memory cgroup sits (issue 24): under one parent per gateway (its state
/// dir), bounding all that gateway's commands together, in the session's cgroup, reused by
/// its commands (one at a time) so that ending a command leaves no dying cgroup behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryGroup {
    /// Names the gateway's parent cgroup (a hash of its state dir: a restarted gateway and the
    /// brokers it re-adopts find the same one).
    pub gateway: u64,
    /// The bound of all the gateway's commands together, bytes.
    pub bytes: u64,
    /// Names the session's cgroup (a hash of its id); `None`: one cgroup per command.
    pub session: Option<u64>,
}

impl MemoryGroup {
    /// A stable 64-bit name for a string (a state dir, a session id): the start of its SHA-256.
    pub fn key(text: &str) -> u64 {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(text.as_bytes());
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(bytes)
    }
}

fn default_true() -> bool {
    true
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            nproc: 256,
            fsize: 256 * 1024 * 1024,
            nofile: 1024,
            root_pids_cgroup: true,
            memory: None,
            scratch: None,
            memory_cgroup: true,
            group: None,
        }
    }
}

/// One command for the helper to confine and execute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecSpec {
    /// Absolute path to `execve`.
    pub program: PathBuf,
    /// Full argv (`argv[0]` included).
    pub argv: Vec<String>,
    /// Directory to run in.
    pub cwd: PathBuf,
    /// The complete environment (nothing is inherited).
    pub env: Vec<(String, String)>,
    /// The only writable directory.
    pub scratch: PathBuf,
    /// Paths hidden from the command (credential stores, the gateway state dir). Directories get
    /// an empty read-only tmpfs, files an empty file; with Landlock only, they are left out of the
    /// readable set.
    pub masked: Vec<PathBuf>,
    /// Directories inside masked ones that the command must still read (the managed worktree a
    /// `worktree_write` session works in, which lives in the state dir): bound back read-only
    /// over the mask; with Landlock only, added to the readable set.
    #[serde(default)]
    pub visible: Vec<PathBuf>,
    /// Directories the command may write besides its scratch (the gateway's own confined Git:
    /// the new worktree and the parts of the source's `.git` that `git worktree add` writes).
    /// RunCommand never sets this.
    #[serde(default)]
    pub writable: Vec<PathBuf>,
    pub limits: Limits,
    /// The session's copy-on-write layer (namespaces only): every `roots` directory is an overlay
    /// whose writes land in the layer. `None`: the file system is read-only but for the scratch.
    #[serde(default)]
    pub layer: Option<LayerSpec>,
    /// Try user/mount/network/pid namespaces (tests turn this off to exercise the fallback).
    pub namespaces: bool,
    /// An inherited pipe's write end (its number in the helper) on which the helper writes the
    /// command's [`CommandEnd`] once the command's pid namespace is empty, before the helper's own
    /// exit tears its namespaces down: the broker answers on it and reaps the helper afterwards.
    /// Never seen by the command. `None`: the broker learns the end by reaping the helper.
    #[serde(default)]
    pub status_fd: Option<i32>,
    /// Started ahead of its command (issue 26): this spec is one line, and only `limits`,
    /// `namespaces` and `status_fd` are used — the helper joins its cgroups, enters its user,
    /// network, pid, IPC and UTS namespaces and forks its pid 1, which then waits on stdin for
    /// the command's own spec (the same three fields, `ahead` false). Everything else — the mount
    /// namespace, the masks, Landlock, seccomp — is set up from that spec when it comes. Its
    /// `masked` (the previous command's) is only parsed ahead, for [`Self::masked_as_prepared`].
    #[serde(default)]
    pub ahead: bool,
    /// A command's spec for a helper started ahead whose spec named the same `masked` paths, byte
    /// for byte (the broker compares them): `masked` is empty here and the helper takes the
    /// prepared list. The list (~1,100 paths here) rarely changes between two commands, and
    /// writing and parsing it cost the answer ≈0.4 ms. Refused in any other spec.
    #[serde(default)]
    pub masked_as_prepared: bool,
    /// FUSE mount points the broker found hung (`protected::is_hung_mount`), all in `masked`:
    /// each is covered by an empty tmpfs through its parent before anything else is mounted or
    /// looked at, and nothing at or below it is looked at (a `stat` there never returns).
    #[serde(default)]
    pub hung: Vec<PathBuf>,
}

/// How the command (pid 1 of its pid namespace) ended, as the helper writes it on
/// [`ExecSpec::status_fd`]: written only after the kernel has killed and reaped every other
/// process of that namespace, so no process of the command is left when the broker reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandEnd {
    Exited(i32),
    Signaled(i32),
}

impl CommandEnd {
    /// Longest line [`CommandEnd::line`] writes.
    pub const MAX_LINE: usize = 32;

    /// `exit <code>\n` or `signal <number>\n`.
    pub fn line(self) -> String {
        match self {
            Self::Exited(code) => format!("exit {code}\n"),
            Self::Signaled(sig) => format!("signal {sig}\n"),
        }
    }

    /// The whole status pipe's content: exactly one line; anything else is no answer.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
        let (kind, number) = text.split_once(' ')?;
        let number: i32 = number.parse().ok()?;
        match kind {
            "exit" => Some(Self::Exited(number)),
            "signal" => Some(Self::Signaled(number)),
            _ => None,
        }
    }
}

/// A session's copy-on-write layer: `dir` holds one `<key>/upper` + `<key>/work` pair per root
/// ([`layer_key`]), made by the broker; the helper mounts an overlay of each root over itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerSpec {
    pub dir: PathBuf,
    /// Directories the command sees copy-on-write, none inside another, none holding `dir`.
    pub roots: Vec<PathBuf>,
}

/// The name of a root's upper/work pair in the layer dir: stable for the session, so a root's
/// writes persist across its commands.
pub fn layer_key(root: &std::path::Path) -> String {
    // FNV-1a over the path's bytes: stable across processes and builds (std's hasher is not
    // promised to be), collisions only between roots of one session.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in root.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The layers the helper established for one command.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforced {
    pub user_namespace: bool,
    /// `/` recursively read-only in a private mount namespace, scratch the only writable mount.
    pub mount_namespace: bool,
    /// An empty network namespace (loopback down).
    pub network_namespace: bool,
    /// A private pid namespace (the command cannot see or signal outside processes).
    pub pid_namespace: bool,
    /// How many masked paths were hidden.
    pub masked: usize,
    /// Landlock ABI version enforced (fully), if any.
    pub landlock_abi: Option<i32>,
    pub seccomp: bool,
    pub no_new_privs: bool,
    pub capabilities_dropped: bool,
    pub rlimits: bool,
    /// A pids cgroup bounds the process count (used when running as root, where the kernel does
    /// not enforce `RLIMIT_NPROC`).
    pub pids_cgroup: bool,
    /// The memory limit set (`RLIMIT_DATA`), MiB.
    #[serde(default)]
    pub memory_limit_mb: Option<u64>,
    /// The command's memory cgroup bounds all its processes and pages together to this, MiB
    /// (the memory limit plus the scratch quota, whose tmpfs pages it charges too).
    #[serde(default)]
    pub memory_cgroup_mb: Option<u64>,
    /// Without a memory cgroup: writable shared mappings of `/dev/zero` are refused (`/dev/full`,
    /// which reads as zeros and cannot be mapped, stands in for it; Landlock-only: it cannot be
    /// opened for writing).
    #[serde(default)]
    pub shared_zero_refused: bool,
    /// The scratch dir is a tmpfs of this size, MiB (`None`: no quota beyond the per-file limit).
    #[serde(default)]
    pub scratch_quota_mb: Option<u64>,
    /// How many directories the command saw copy-on-write (the session's layer); 0: none.
    #[serde(default)]
    pub layer_roots: usize,
    /// macOS: the session's writable dir was writable too, with build outputs and caches
    /// redirected into it (set by the broker, whose Seatbelt profile allowed it).
    #[serde(default)]
    pub session_dir: bool,
}

impl Enforced {
    /// Short description for `network_boundary.enforced_by` and the command output header, e.g.
    /// `linux:userns+mountns+netns+pidns+landlock(v7)+seccomp+nnp+caps+rlimits`.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let flags = [
            (self.user_namespace, "userns"),
            (self.mount_namespace, "mountns"),
            (self.network_namespace, "netns"),
            (self.pid_namespace, "pidns"),
        ];
        parts.extend(
            flags
                .iter()
                .filter(|(on, _)| *on)
                .map(|(_, n)| n.to_string()),
        );
        if let Some(abi) = self.landlock_abi {
            parts.push(format!("landlock(v{abi})"));
        }
        let rest = [
            (self.seccomp, "seccomp"),
            (self.no_new_privs, "nnp"),
            (self.capabilities_dropped, "caps"),
            (self.rlimits, "rlimits"),
            (self.pids_cgroup, "pids-cgroup"),
            (self.memory_cgroup_mb.is_some(), "memcg"),
            (self.layer_roots > 0, "overlay"),
        ];
        parts.extend(
            rest.iter()
                .filter(|(on, _)| *on)
                .map(|(_, n)| n.to_string()),
        );
        format!("linux:{}", parts.join("+"))
    }

    /// Whether the file system is confined read-only (by the mount namespace or Landlock).
    pub fn filesystem_read_only(&self) -> bool {
        self.mount_namespace || self.landlock_abi.is_some()
    }

    /// Whether network access is denied by a kernel mechanism beyond seccomp.
    pub fn network_isolated(&self) -> bool {
        self.network_namespace || self.landlock_abi.is_some_and(|abi| abi >= 4)
    }

    /// The documented minimum: seccomp + no_new_privs + a read-only file system (namespaces or
    /// Landlock).
    pub fn meets_minimum(&self) -> bool {
        self.seccomp && self.no_new_privs && self.filesystem_read_only()
    }
}

/// The helper's verdict, written as one line before the command runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// `None`: confinement established, the command is about to run.
    pub error: Option<String>,
    pub enforced: Enforced,
    /// The pids cgroup the helper created (the broker removes it after the command).
    pub cgroup: Option<PathBuf>,
    /// The memory cgroup the helper created and joined (the broker reads its OOM count and
    /// removes it after the command).
    #[serde(default)]
    pub memory_cgroup: Option<PathBuf>,
    /// The memory cgroup's kill counters when the command joined it (a session's cgroup is
    /// reused: what this command did is the difference).
    #[serde(default)]
    pub memory_before: Option<crate::spec::MemoryCounters>,
}

/// A memory cgroup's counters: OOM kills in it, and its own bound (not an ancestor's) reached
/// (v2: how often, `memory.events` `oom`; v1: whether, its high-water mark).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryCounters {
    pub oom_kills: u64,
    pub own_limit: u64,
}

/// Highest Landlock ABI whose rights the sandboxes request (V7 adds only audit controls): what
/// the runner and every command enforce is `min(kernel ABI, this)`, and what the view says too.
pub const MAX_LANDLOCK_ABI: i32 = 6;

/// What the host offers for confinement (probed once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSupport {
    /// `linux`, `macos` or another OS name.
    pub os: String,
    /// Unprivileged (or root) user + mount + network + pid namespaces can be created.
    pub namespaces: bool,
    /// Landlock ABI version the kernel offers (`None`: not built or not enabled).
    pub landlock_abi: Option<i32>,
    /// seccomp filters are available.
    pub seccomp: bool,
    /// `/usr/bin/sandbox-exec` exists (macOS).
    pub seatbelt: bool,
    /// The process runs as root (RLIMIT_NPROC is not enforced; a pids cgroup is used instead).
    pub root: bool,
    /// Overlays can be mounted in a command's user namespace (Linux): commands get a
    /// copy-on-write layer; without it they see the file system read-only.
    #[serde(default)]
    pub overlay: bool,
    /// Commands get a memory cgroup bounding all their processes together (`v1`, `v2`), `None`:
    /// only the per-process `RLIMIT_DATA` and the refusal of shared memory.
    #[serde(default)]
    pub memory_cgroup: Option<String>,
    /// A pids cgroup bounds each command's process count: its memory cgroup's v2 parent enables
    /// pids, or (root, where `RLIMIT_NPROC` is not enforced) one can be made for it.
    #[serde(default)]
    pub pids_cgroup: bool,
}

impl HostSupport {
    /// Whether a command can be confined to at least the documented minimum.
    pub fn can_confine(&self) -> bool {
        match self.os.as_str() {
            "linux" => {
                self.seccomp && (self.namespaces || self.landlock_abi.is_some_and(|abi| abi >= 1))
            }
            "macos" => self.seatbelt,
            _ => false,
        }
    }

    /// The Landlock ABI a sandbox here enforces (the kernel's, capped at [`MAX_LANDLOCK_ABI`]):
    /// the one number the view, the runner and a command's report all give (issue 23).
    pub fn enforced_landlock_abi(&self) -> Option<i32> {
        self.landlock_abi.map(|abi| abi.min(MAX_LANDLOCK_ABI))
    }

    /// What the helper enforces for a command on this host (Linux), in the terms of its report:
    /// the view and doctor describe commands with [`Enforced::summary`] of this, the very
    /// function a command's receipt uses (red team 23i B4: the two were written separately, and
    /// a root gateway's receipts said `pids-cgroup` where the view did not).
    pub fn expected_enforced(&self) -> Enforced {
        let ns = self.namespaces;
        Enforced {
            user_namespace: ns,
            mount_namespace: ns,
            network_namespace: ns,
            pid_namespace: ns,
            landlock_abi: self.enforced_landlock_abi(),
            seccomp: self.seccomp,
            no_new_privs: true,
            capabilities_dropped: true,
            rlimits: true,
            pids_cgroup: self.pids_cgroup,
            // Only whether there is one shows in the summary; the size is per command.
            memory_cgroup_mb: self.memory_cgroup.as_ref().map(|_| 0),
            layer_roots: usize::from(self.copy_on_write()),
            ..Enforced::default()
        }
    }

    /// Recommended `network_boundary.enforced_by` text for commands on this host.
    pub fn enforced_by(&self) -> String {
        match self.os.as_str() {
            "linux" => self.expected_enforced().summary(),
            "macos" if self.seatbelt => "macos:seatbelt".to_string(),
            other => format!("{other}:none"),
        }
    }

    /// What bounds a command's memory here, in the words of `network_boundary.commands` and
    /// `gatewayctl doctor`.
    pub fn command_memory(&self) -> String {
        match (self.os.as_str(), &self.memory_cgroup) {
            ("linux", Some(version)) => format!(
                "memory: bounded per command across all its processes and shared mappings (a \
                 cgroup {version} memory cgroup of CLAUDE_TOOLS_COMMAND_MEMORY_MB plus the scratch \
                 quota; the command is killed past it), and all commands of all sessions \
                 together within CLAUDE_TOOLS_COMMANDS_MEMORY_MB (default half the host's \
                 memory: a parent cgroup; past it the largest command is killed)"
            ),
            ("linux", None) => "memory: per process only (RLIMIT_DATA and a hard RLIMIT_STACK \
                 of CLAUDE_TOOLS_COMMAND_MEMORY_MB each; shared memory, System V IPC, \
                 MAP_GROWSDOWN mappings and writable shared mappings of /dev/zero refused): a \
                 command of several processes may use that much in each, and kernel memory \
                 (socket buffers, pipes) is not counted (no memory cgroup can be made here)"
                .to_string(),
            _ => "memory: not bounded by the sandbox on this OS".to_string(),
        }
    }

    /// Whether commands get the session's copy-on-write layer (overlays in their namespaces).
    pub fn copy_on_write(&self) -> bool {
        self.os == "linux" && self.namespaces && self.overlay
    }

    /// Whether commands get, instead, a writable dir private to the session with well-known
    /// build outputs and caches redirected into it, the rest read-only (macOS under Seatbelt,
    /// which has no overlays).
    pub fn session_dir(&self) -> bool {
        self.os == "macos" && self.seatbelt
    }

    /// `enforced`, `degraded` or `unavailable`, for `network_boundary.status`.
    pub fn status(&self) -> &'static str {
        if !self.can_confine() {
            "unavailable"
        } else if self.os == "linux" && !(self.namespaces && self.landlock_abi.is_some()) {
            "degraded"
        } else {
            "enforced"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CommandEnd;

    #[test]
    fn command_ends_round_trip_and_nothing_else_parses() {
        for end in [
            CommandEnd::Exited(0),
            CommandEnd::Exited(255),
            CommandEnd::Signaled(9),
        ] {
            assert!(end.line().len() <= CommandEnd::MAX_LINE);
            assert_eq!(CommandEnd::parse(end.line().as_bytes()), Some(end));
        }
        for bad in [
            &b""[..],
            b"exit 0",
            b"exit 0\nexit 1\n",
            b"exit x\n",
            b"quit 0\n",
            b"\xff\n",
        ] {
            assert_eq!(CommandEnd::parse(bad), None, "{bad:?}");
        }
    }
}
