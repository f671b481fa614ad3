//! The command's memory cgroup (issue 24): one cgroup per command, made and joined by the helper
//! before it enters its namespaces, so every process and every page the command charges — heap,
//! shared mappings of `/dev/zero`, memfds, tmpfs files — counts against one bound, which no
//! per-process rlimit does. cgroup v2 where the gateway prepared a delegated subtree
//! ([`prepare_delegated`]: its cgroup, writable to it, split into a leaf for itself and one
//! cgroup per command beside it), else cgroup v1's memory hierarchy under the helper's own memory
//! cgroup where it may write there (root). The broker reads the OOM count and removes the
//! cgroup when the command has ended ([`release`]); the gateway sweeps orphans at start
//! ([`sweep_orphans`]). Also the OOM killer's order: commands and runners get a high
//! `oom_score_adj`, the gateway a low one where it may lower it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::spec::{MemoryCounters, MemoryGroup};

/// Name prefix of every command cgroup (pids and memory alike).
pub const PREFIX: &str = "native-gateway-cmd-";
/// The cgroup v2 leaf the gateway (and the brokers it starts) moves into, so that its parent may
/// enable controllers for the command cgroups beside it (v2 forbids processes in inner nodes).
pub const GATEWAY_LEAF: &str = "native-gateway";
/// `oom_score_adj` of commands: the first the OOM killer picks.
pub const COMMAND_OOM_SCORE_ADJ: i32 = 1000;
/// `oom_score_adj` of runners: after commands, before everything else of the gateway's.
pub const RUNNER_OOM_SCORE_ADJ: i32 = 900;
/// `oom_score_adj` the gateway asks for itself (granted to root / `CAP_SYS_RESOURCE` only).
pub const GATEWAY_OOM_SCORE_ADJ: i32 = -500;

/// Which hierarchy holds command cgroups on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parent {
    /// cgroup v2: `dir` enables the memory controller for its children.
    V2 { dir: PathBuf, pids: bool },
    /// cgroup v1: the memory hierarchy's cgroup of the calling process.
    V1 { dir: PathBuf },
}

impl Parent {
    pub fn dir(&self) -> &Path {
        match self {
            Parent::V2 { dir, .. } | Parent::V1 { dir } => dir,
        }
    }

    /// `v2` or `v1`, for reports and doctor.
    pub fn version(&self) -> &'static str {
        match self {
            Parent::V2 { .. } => "v2",
            Parent::V1 { .. } => "v1",
        }
    }
}

/// One cgroup mount: its mount point, the path it shows of the hierarchy, its super options.
struct Mount {
    point: PathBuf,
    root: String,
    fstype: String,
    options: String,
}

fn mounts() -> Vec<Mount> {
    crate::protected::read_mount_table()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.fs_type == "cgroup" || m.fs_type == "cgroup2")
        .map(|m| Mount {
            point: m.mount_point,
            root: m.root.to_string_lossy().into_owned(),
            fstype: m.fs_type,
            options: m.super_options,
        })
        .collect()
}

/// The calling process's cgroup in the hierarchy whose `/proc/self/cgroup` controller list
/// satisfies `wanted` ("" is v2's line), as a directory under its mount.
fn own_dir(wanted: impl Fn(&str) -> bool, mount: &Mount) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = text.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let _id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        wanted(controllers).then(|| path.to_string())
    })?;
    let root = mount.root.trim_end_matches('/');
    let relative = path.strip_prefix(root).unwrap_or(&path);
    // ".." or a deleted cgroup: no place to make children.
    if relative.contains("..") || relative.ends_with(" (deleted)") {
        return None;
    }
    Some(mount.point.join(relative.trim_start_matches('/')))
}

fn v2_mount(all: &[Mount]) -> Option<&Mount> {
    all.iter().find(|m| m.fstype == "cgroup2")
}

fn controllers(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Where this process would make command cgroups, or `None` (the fallback bounds apply). v2:
/// the parent of the gateway's leaf, if it enables memory for its children and the caller may
/// write it; v1: the caller's memory cgroup, if the caller may write it.
pub fn parent() -> Option<Parent> {
    let all = mounts();
    if let Some(mount) = v2_mount(&all)
        && let Some(own) = own_dir(|c| c.is_empty(), mount)
        && own.file_name().is_some_and(|n| n == GATEWAY_LEAF)
        && let Some(dir) = own.parent()
    {
        let enabled = controllers(&dir.join("cgroup.subtree_control"));
        if enabled.iter().any(|c| c == "memory") && writable(dir) {
            return Some(Parent::V2 {
                dir: dir.to_path_buf(),
                pids: enabled.iter().any(|c| c == "pids"),
            });
        }
    }
    let mount = all
        .iter()
        .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "memory"))?;
    let dir = own_dir(|c| c.split(',').any(|c| c == "memory"), mount)?;
    (dir.join("memory.limit_in_bytes").exists() && writable(&dir)).then_some(Parent::V1 { dir })
}

fn writable(dir: &Path) -> bool {
    use rustix::fs::Access;
    rustix::fs::access(dir, Access::WRITE_OK | Access::EXEC_OK).is_ok()
}

/// Whether a command here gets a memory cgroup: a probe that makes and removes one.
pub fn probe() -> Option<Parent> {
    let parent = parent()?;
    let dir = parent
        .dir()
        .join(format!("{PREFIX}probe-{}", std::process::id()));
    std::fs::create_dir(&dir).ok()?;
    let _ = std::fs::remove_dir(&dir);
    // v1 needs hierarchical accounting for the bound of all commands together (always on
    // since Linux 6.1; children inherit it).
    match &parent {
        Parent::V1 { dir } if !hierarchical(dir) => None,
        _ => Some(parent),
    }
}

/// The cgroup v2 layout command cgroups need, made at gateway start: if the gateway's cgroup is
/// delegated to it (writable, memory available), it moves itself into a leaf, [`GATEWAY_LEAF`],
/// and enables memory (and pids) for its cgroup's children. Brokers started afterwards inherit
/// the leaf. Returns whether the layout is in place; on v1 hosts or without delegation nothing
/// changes.
pub fn prepare_delegated() -> bool {
    let all = mounts();
    let Some(mount) = v2_mount(&all) else {
        return false;
    };
    let Some(own) = own_dir(|c| c.is_empty(), mount) else {
        return false;
    };
    let (dir, leaf) = if own.file_name().is_some_and(|n| n == GATEWAY_LEAF) {
        match own.parent() {
            Some(dir) => (dir.to_path_buf(), own.clone()),
            None => return false,
        }
    } else {
        (own.clone(), own.join(GATEWAY_LEAF))
    };
    let available = controllers(&dir.join("cgroup.controllers"));
    if !available.iter().any(|c| c == "memory") || !writable(&dir) {
        return false;
    }
    if own != leaf {
        let made = std::fs::create_dir(&leaf).is_ok() || leaf.is_dir();
        if !made
            || std::fs::write(leaf.join("cgroup.procs"), std::process::id().to_string()).is_err()
        {
            return false;
        }
    }
    let mut wanted = "+memory".to_string();
    if available.iter().any(|c| c == "pids") {
        wanted.push_str(" +pids");
    }
    std::fs::write(dir.join("cgroup.subtree_control"), wanted).is_ok()
        || controllers(&dir.join("cgroup.subtree_control"))
            .iter()
            .any(|c| c == "memory")
}

/// Name prefix of a gateway's parent of command cgroups, bounding all its commands together.
pub const GROUP_PREFIX: &str = "native-gateway-all-";

/// The parent cgroup of the gateway named `gateway` (see [`MemoryGroup`]).
pub fn group_dir(parent: &Parent, gateway: u64) -> PathBuf {
    parent.dir().join(format!("{GROUP_PREFIX}{gateway:016x}"))
}

/// The session's cgroup in its gateway's parent, where the group has one per session.
pub fn session_dir(parent: &Parent, group: &MemoryGroup) -> Option<PathBuf> {
    group
        .session
        .map(|session| group_dir(parent, group.gateway).join(format!("{PREFIX}s{session:016x}")))
}

/// Write `value` into `dir/file` unless it already holds it (a reused cgroup's limits are
/// usually unchanged: no write, and no reclaim a lower v1 limit would start).
fn set(dir: &Path, file: &str, value: &str) -> Result<(), String> {
    if std::fs::read_to_string(dir.join(file)).is_ok_and(|now| now.trim() == value) {
        return Ok(());
    }
    std::fs::write(dir.join(file), value).map_err(|e| format!("the memory cgroup's {file}: {e}"))
}

/// cgroup v1's memory bound and its memory+swap bound, equal (no swap beyond it). The second
/// may never be below the first, so the order depends on whether the bound goes up or down.
fn set_v1_limit(dir: &Path, bytes: u64) -> Result<(), String> {
    let value = bytes.to_string();
    let memsw = dir.join("memory.memsw.limit_in_bytes").exists();
    let order: &[&str] = if memsw {
        &["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"]
    } else {
        &["memory.limit_in_bytes"]
    };
    let first = order.iter().try_for_each(|file| set(dir, file, &value));
    if first.is_ok() || !memsw {
        return first;
    }
    order
        .iter()
        .rev()
        .try_for_each(|file| set(dir, file, &value))
}

/// Make (or find) the gateway's parent cgroup and bound it to `bytes`: all its commands
/// together, hierarchically (v2 always; v1 only with `memory.use_hierarchy`, which is then
/// required). Past it the kernel's OOM killer picks a command under it (the largest: all have
/// the same `oom_score_adj`); nothing outside it is touched.
pub fn ensure_group(parent: &Parent, gateway: u64, bytes: u64) -> Result<PathBuf, String> {
    let dir = group_dir(parent, gateway);
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("the commands' memory cgroup: {e}")),
    }
    match parent {
        Parent::V2 { pids, .. } => {
            set(&dir, "memory.max", &bytes.to_string())?;
            if dir.join("memory.swap.max").exists() {
                set(&dir, "memory.swap.max", "0")?;
            }
            let enabled = controllers(&dir.join("cgroup.subtree_control"));
            let mut wanted = Vec::new();
            if !enabled.iter().any(|c| c == "memory") {
                wanted.push("+memory");
            }
            if *pids && !enabled.iter().any(|c| c == "pids") {
                wanted.push("+pids");
            }
            if !wanted.is_empty() {
                std::fs::write(dir.join("cgroup.subtree_control"), wanted.join(" "))
                    .map_err(|e| format!("the commands' cgroup.subtree_control: {e}"))?;
            }
        }
        Parent::V1 { .. } => {
            if !hierarchical(&dir) {
                let _ = std::fs::write(dir.join("memory.use_hierarchy"), "1");
                if !hierarchical(&dir) {
                    return Err("the commands' memory cgroup: hierarchical accounting \
                                (memory.use_hierarchy) is off"
                        .into());
                }
            }
            set_v1_limit(&dir, bytes)?;
        }
    }
    Ok(dir)
}

fn hierarchical(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("memory.use_hierarchy")).is_ok_and(|v| v.trim() == "1")
}

/// Remove the gateway's parent cgroup if nothing is left in it (gateway exit: brokers that
/// outlive the gateway keep their sessions' cgroups in it, and with them the bound).
pub fn remove_group(parent: &Parent, gateway: u64) -> bool {
    std::fs::remove_dir(group_dir(parent, gateway)).is_ok()
}

/// A command cgroup the helper made (or, a session's, found) and joined.
#[derive(Debug)]
pub struct Joined {
    pub dir: PathBuf,
    /// The v2 cgroup also bounds the process count (`pids.max`).
    pub pids: bool,
    /// Its counters when the command joined it.
    pub before: MemoryCounters,
}

fn random_name() -> Result<String, String> {
    let mut random = [0u8; 8];
    let got = rustix::rand::getrandom(&mut random, rustix::rand::GetRandomFlags::empty());
    if got.ok() != Some(random.len()) {
        return Err("the command's memory cgroup: no random name".into());
    }
    Ok(format!("{PREFIX}{:016x}", u64::from_ne_bytes(random)))
}

/// Make a command cgroup bounded to `limit` bytes (no swap beyond it; v2: the whole command is
/// killed together when it is exceeded), with `pids.max` = `nproc` where the v2 parent enables
/// pids, and move this process into it. With a `group`: under the gateway's parent
/// ([`ensure_group`]), and the session's cgroup, reused, where the group names one; else under
/// `parent` itself. A per-command name is random: the command can read its own cgroup path,
/// and a pid there would be public.
pub fn join(
    parent: &Parent,
    limit: u64,
    nproc: u64,
    group: Option<&MemoryGroup>,
) -> Result<Joined, String> {
    // A gateway's start sweeps empty cgroups older than a minute, a session's idle one
    // included: made again, once.
    match join_once(parent, limit, nproc, group) {
        Err((_, true)) => join_once(parent, limit, nproc, group).map_err(|(m, _)| m),
        other => other.map_err(|(message, _)| message),
    }
}

/// [`join`] once; the error says whether a directory vanished meanwhile (worth a retry).
fn join_once(
    parent: &Parent,
    limit: u64,
    nproc: u64,
    group: Option<&MemoryGroup>,
) -> Result<Joined, (String, bool)> {
    let made = make(parent, limit, nproc, group)?;
    let mut before = counters(&made.dir);
    if let Parent::V1 { .. } = parent {
        // The high-water mark was just reset: whether this command reaches the bound.
        before.own_limit = 0;
    }
    match enter(&made.dir) {
        Ok(()) => Ok(Joined {
            dir: made.dir,
            pids: made.pids,
            before,
        }),
        Err(e) => {
            if made.new {
                let _ = std::fs::remove_dir(&made.dir);
            }
            let vanished = !made.dir.exists();
            Err((
                format!("joining the command's memory cgroup: {e}"),
                vanished,
            ))
        }
    }
}

/// Move the calling process into the cgroup at `dir`. On v1, a single-threaded process (the
/// helper) moves its one thread by writing `0` (itself) to `tasks`: moving a whole process
/// (`cgroup.procs`), or any thread named by its id, takes the global thread-group lock for
/// writing, which may wait for an RCU grace period (13 ms p50 measured on a loaded 2-vCPU
/// host, the largest single cost of a command); the calling thread alone does not. Anything
/// else, and v2, through `cgroup.procs`.
pub(super) fn enter(dir: &Path) -> std::io::Result<()> {
    let tasks = dir.join("tasks");
    if single_threaded() && tasks.exists() {
        return std::fs::write(tasks, "0");
    }
    std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
}

/// Whether this process has one thread (`/proc/self/stat`'s 20th field).
fn single_threaded() -> bool {
    std::fs::read_to_string("/proc/self/stat").is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|end| stat.get(end + 1..))
            .and_then(|rest| rest.split_whitespace().nth(17))
            == Some("1")
    })
}

/// A command cgroup made (or found) and bounded, not yet joined.
#[derive(Debug)]
struct Made {
    dir: PathBuf,
    /// Made now (removed again if joining it fails).
    new: bool,
    pids: bool,
}

fn make(
    parent: &Parent,
    limit: u64,
    nproc: u64,
    group: Option<&MemoryGroup>,
) -> Result<Made, (String, bool)> {
    let plain = |message: String| (message, false);
    let (dir, shared) = match group {
        Some(group) => {
            let base = ensure_group(parent, group.gateway, group.bytes).map_err(plain)?;
            match session_dir(parent, group) {
                Some(dir) => (dir, true),
                None => (base.join(random_name().map_err(plain)?), false),
            }
        }
        None => (parent.dir().join(random_name().map_err(plain)?), false),
    };
    let new = match std::fs::create_dir(&dir) {
        Ok(()) => true,
        Err(e) if shared && e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => {
            let vanished = e.kind() == std::io::ErrorKind::NotFound;
            return Err((format!("the command's memory cgroup: {e}"), vanished));
        }
    };
    let bounded = match parent {
        Parent::V2 { pids, .. } => (|| {
            set(&dir, "memory.max", &limit.to_string())?;
            // Absent without swap support: nothing to bound then.
            if dir.join("memory.swap.max").exists() {
                set(&dir, "memory.swap.max", "0")?;
            }
            set(&dir, "memory.oom.group", "1")?;
            if *pids {
                set(&dir, "pids.max", &nproc.to_string())?;
            }
            Ok(*pids)
        })(),
        Parent::V1 { .. } => set_v1_limit(&dir, limit).and_then(|()| {
            // A session's cgroup: the high-water mark from here on is this command's.
            if !new {
                for file in [
                    "memory.max_usage_in_bytes",
                    "memory.memsw.max_usage_in_bytes",
                ] {
                    if dir.join(file).exists() {
                        std::fs::write(dir.join(file), "0")
                            .map_err(|e| format!("the memory cgroup's {file}: {e}"))?;
                    }
                }
            }
            Ok(false)
        }),
    };
    match bounded {
        Ok(pids) => Ok(Made { dir, new, pids }),
        Err(message) => {
            if new {
                let _ = std::fs::remove_dir(&dir);
            }
            let vanished = !dir.exists();
            Err((message, vanished))
        }
    }
}

/// The kill counters of the memory cgroup at `dir`: v2 `memory.events` (`oom` counts only the
/// cgroup whose own bound was reached, and its ancestors); v1 `memory.oom_control`, and for its
/// own bound the high-water mark (`memory.max_usage_in_bytes`, or the memory+swap one, reset
/// when a command joins) within [`V1_SLACK`] of the bound (v1's `failcnt` stays 0 on Linux 6.x).
/// Zero where a file is missing.
pub fn counters(dir: &Path) -> MemoryCounters {
    let read = |file: &str| std::fs::read_to_string(dir.join(file)).ok();
    let number = |file: &str| read(file).and_then(|text| text.trim().parse::<u64>().ok());
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    if let Some(events) = read("memory.events") {
        return MemoryCounters {
            oom_kills: field(&events, "oom_kill "),
            own_limit: field(&events, "oom "),
        };
    }
    let peak = [
        "memory.max_usage_in_bytes",
        "memory.memsw.max_usage_in_bytes",
    ]
    .iter()
    .filter_map(|file| number(file))
    .max();
    let reached = match (peak, number("memory.limit_in_bytes")) {
        (Some(peak), Some(limit)) => peak.saturating_add(V1_SLACK) >= limit,
        _ => false,
    };
    MemoryCounters {
        oom_kills: read("memory.oom_control").map_or(0, |text| field(&text, "oom_kill ")),
        own_limit: u64::from(reached),
    }
}

/// How close to its bound a v1 cgroup's high-water mark counts as having reached it (charges
/// come in batches of 64 pages).
pub const V1_SLACK: u64 = 512 * 1024;

/// Whether `dir` is a command cgroup (a helper's report names it; anything else is never
/// touched).
fn is_command_cgroup(dir: &Path) -> bool {
    named(dir, PREFIX)
}

fn named(dir: &Path, prefix: &str) -> bool {
    dir.starts_with("/sys/fs/cgroup")
        && dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(prefix))
        && !dir
            .components()
            .any(|c| c == std::path::Component::ParentDir)
}

/// A session's cgroup ([`session_dir`]): kept across its commands.
fn is_session_cgroup(dir: &Path) -> bool {
    named(dir, &format!("{PREFIX}s"))
        && dir.parent().is_some_and(|group| named(group, GROUP_PREFIX))
}

/// Remove a command cgroup once its processes are gone (a few tries: the last ones may still be
/// exiting). False: not a command cgroup (left alone) or still there.
pub fn remove(dir: &Path) -> bool {
    if !is_command_cgroup(dir) {
        return false;
    }
    for _ in 0..100 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Which bound the kernel killed a command at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Its own memory cgroup's.
    Command,
    /// The gateway's parent's: all its commands together ([`ensure_group`]).
    AllCommands,
}

/// What [`release`] found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Released {
    /// The OOM killer killed a process of the command, at this bound.
    pub oom_killed: Option<Bound>,
    /// Cgroups that could not be removed (the next gateway start sweeps them).
    pub left: Vec<PathBuf>,
}

/// After a command: whether the OOM killer struck in its memory cgroup since it joined, and at
/// which bound (its own reached: its own; else its gateway's parent's); then its cgroups
/// removed (memory, unless the session's, kept for its next command; v1's pids).
pub fn release(report: &crate::spec::Report) -> Released {
    Released {
        oom_killed: oom_killed(report),
        left: remove_command_cgroups(report),
    }
}

/// Whether, and at which bound, the OOM killer ended the command since it joined its memory
/// cgroup (read once the command's processes are gone).
pub fn oom_killed(report: &crate::spec::Report) -> Option<Bound> {
    let before = report.memory_before.unwrap_or_default();
    report
        .memory_cgroup
        .as_deref()
        .filter(|dir| is_command_cgroup(dir))
        .and_then(|dir| {
            let after = counters(dir);
            (after.oom_kills > before.oom_kills).then_some(
                if after.own_limit > before.own_limit || !grouped(dir) {
                    Bound::Command
                } else {
                    Bound::AllCommands
                },
            )
        })
}

/// Whether the command had a memory cgroup of its own (not its session's): it can be removed
/// only once the helper, which is in it too, is reaped.
pub fn own_memory_cgroup(report: &crate::spec::Report) -> bool {
    report
        .memory_cgroup
        .as_deref()
        .is_some_and(|dir| is_command_cgroup(dir) && !is_session_cgroup(dir))
}

/// Remove the command's own cgroups (never a session's, kept for its next command) once the
/// helper is reaped; the ones that could not be removed.
pub fn remove_command_cgroups(report: &crate::spec::Report) -> Vec<PathBuf> {
    [&report.memory_cgroup, &report.cgroup]
        .into_iter()
        .flatten()
        .filter(|dir| !is_session_cgroup(dir) && !remove(dir))
        .cloned()
        .collect()
}

/// Whether a command cgroup sits in a gateway's parent.
fn grouped(dir: &Path) -> bool {
    dir.parent().is_some_and(|group| named(group, GROUP_PREFIX))
}

/// A session's cgroup removed when its broker ends (its last command has been reaped).
pub fn remove_session(group: &MemoryGroup) -> bool {
    parent().is_some_and(|parent| remove_session_at(&parent, group))
}

fn remove_session_at(parent: &Parent, group: &MemoryGroup) -> bool {
    session_dir(parent, group).is_some_and(|dir| remove(&dir))
}

/// Whether a directory entry is older than a minute (a younger one may be a helper's about to
/// be joined).
fn old(entry: &std::fs::DirEntry) -> bool {
    entry
        .metadata()
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > Duration::from_secs(60))
}

/// Remove command cgroups older than a minute that a killed broker or helper left behind, or
/// an idle session's (its next command makes it again); processes still in one whose broker
/// is gone are killed first ([`kill_orphaned`]). Looked for under this process's memory
/// parent, in the gateways' parents there (then removed too once empty: a live gateway's helper
/// makes its own again), and at the pids hierarchy's root (where root's pids cgroups are made).
/// Returns how many.
pub fn sweep_orphans() -> usize {
    let mut dirs: Vec<PathBuf> = parent()
        .map(|p| p.dir().to_path_buf())
        .into_iter()
        .collect();
    dirs.extend(
        ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"]
            .iter()
            .map(PathBuf::from),
    );
    let mut removed = 0;
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if named(&path, GROUP_PREFIX) {
                // Its age before its children go (removing one makes it young again).
                let was_old = old(&entry);
                removed += sweep_commands(&path);
                if was_old && std::fs::remove_dir(&path).is_ok() {
                    removed += 1;
                }
            } else if is_command_cgroup(&path) && old(&entry) && sweep_one(&path) {
                removed += 1;
            }
        }
    }
    removed
}

/// The old command cgroups in a gateway's parent.
fn sweep_commands(group: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(group) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| is_command_cgroup(&entry.path()) && old(entry))
        .filter(|entry| sweep_one(&entry.path()))
        .count()
}

fn sweep_one(path: &Path) -> bool {
    let mut empty = procs(path).is_some_and(|p| p.is_empty());
    if !empty && kill_orphaned(path) {
        empty = remove(path);
    }
    (empty && std::fs::remove_dir(path).is_ok()) || !path.exists()
}

fn procs(dir: &Path) -> Option<Vec<libc::pid_t>> {
    let text = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
    Some(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

fn parent_pid(pid: libc::pid_t) -> Option<libc::pid_t> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last ')'.
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Leftover command cgroup whose processes outlived their broker (issue 24): none of them is the
/// child of a live broker (`gateway broker`) or gateway process (same executable as this one): a
/// running command's helper is their child, an orphan's parent is init or a subreaper. Then every process in it is SIGKILLed. True when it was killed.
fn kill_orphaned(dir: &Path) -> bool {
    let Some(pids) = procs(dir) else {
        return false;
    };
    let own = std::fs::read_link("/proc/self/exe").ok();
    let gateway = |ppid: libc::pid_t| {
        let broker = std::fs::read(format!("/proc/{ppid}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(b"broker".as_slice()));
        broker || (own.is_some() && std::fs::read_link(format!("/proc/{ppid}/exe")).ok() == own)
    };
    let supervised = pids
        .iter()
        .any(|pid| parent_pid(*pid).is_some_and(|ppid| !pids.contains(&ppid) && gateway(ppid)));
    if supervised {
        return false;
    }
    if std::fs::write(dir.join("cgroup.kill"), "1").is_err() {
        // No cgroup.kill (v1, kernel < 5.14): one by one (a fork in between is caught by the
        // next start's sweep; the pids bound keeps that small).
        for pid in pids
            .iter()
            .filter_map(|pid| rustix::process::Pid::from_raw(*pid))
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    true
}

/// Set the calling process's `oom_score_adj` (raising is always allowed; lowering needs
/// `CAP_SYS_RESOURCE`). Best effort: false when refused.
pub fn set_oom_score_adj(value: i32) -> bool {
    std::fs::write("/proc/self/oom_score_adj", value.to_string()).is_ok()
}

#[cfg(test)]
mod tests;
