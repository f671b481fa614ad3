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
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            let mut right = right.split(' ');
            let fstype = right.next()?.to_string();
            let _source = right.next()?;
            let options = right.next().unwrap_or("").to_string();
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            Some(Mount {
                point: PathBuf::from(fields.get(4)?),
                root: (*fields.get(3)?).to_string(),
                fstype,
                options,
            })
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
    let Ok(c) = super::sys::cstring(dir) else {
        return false;
    };
    // SAFETY: a valid NUL-terminated path; access only reads it.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}

/// Whether a command here gets a memory cgroup: a probe that makes and removes one.
pub fn probe() -> Option<Parent> {
    let parent = parent()?;
    let dir = parent
        .dir()
        .join(format!("{PREFIX}probe-{}", std::process::id()));
    std::fs::create_dir(&dir).ok()?;
    let _ = std::fs::remove_dir(&dir);
    Some(parent)
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

/// A command cgroup the helper made and joined.
#[derive(Debug)]
pub struct Joined {
    pub dir: PathBuf,
    /// The v2 cgroup also bounds the process count (`pids.max`).
    pub pids: bool,
}

/// Make a command cgroup under `parent` bounded to `limit` bytes (no swap beyond it; v2: the
/// whole command is killed together when it is exceeded), with `pids.max` = `nproc` where the v2
/// parent enables pids, and move this process into it. The name is random: the command can read
/// its own cgroup path, and a pid there would be public.
pub fn join(parent: &Parent, limit: u64, nproc: u64) -> Result<Joined, String> {
    let mut random = [0u8; 8];
    // SAFETY: getrandom writes at most `random.len()` bytes into the buffer it is given.
    let got = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
    if got != random.len() as isize {
        return Err("the command's memory cgroup: no random name".into());
    }
    let dir = parent
        .dir()
        .join(format!("{PREFIX}{:016x}", u64::from_ne_bytes(random)));
    std::fs::create_dir(&dir).map_err(|e| format!("the command's memory cgroup: {e}"))?;
    let set = |file: &str, value: String| {
        std::fs::write(dir.join(file), value).map_err(|e| format!("the command's {file}: {e}"))
    };
    let result = (|| {
        let pids = match parent {
            Parent::V2 { pids, .. } => {
                set("memory.max", limit.to_string())?;
                // Absent without swap support: nothing to bound then.
                if dir.join("memory.swap.max").exists() {
                    set("memory.swap.max", "0".into())?;
                }
                set("memory.oom.group", "1".into())?;
                if *pids {
                    set("pids.max", nproc.to_string())?;
                }
                *pids
            }
            Parent::V1 { .. } => {
                set("memory.limit_in_bytes", limit.to_string())?;
                if dir.join("memory.memsw.limit_in_bytes").exists() {
                    set("memory.memsw.limit_in_bytes", limit.to_string())?;
                }
                false
            }
        };
        set("cgroup.procs", std::process::id().to_string())?;
        Ok(pids)
    })();
    match result {
        Ok(pids) => Ok(Joined { dir, pids }),
        Err(message) => {
            let _ = std::fs::remove_dir(&dir);
            Err(message)
        }
    }
}

/// How many processes of the cgroup at `dir` the kernel's OOM killer killed (v2
/// `memory.events`, v1 `memory.oom_control`).
pub fn oom_kills(dir: &Path) -> u64 {
    ["memory.events", "memory.oom_control"]
        .iter()
        .filter_map(|file| std::fs::read_to_string(dir.join(file)).ok())
        .flat_map(|text| {
            text.lines()
                .filter_map(|line| line.strip_prefix("oom_kill "))
                .filter_map(|n| n.trim().parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .max()
        .unwrap_or(0)
}

/// Whether `dir` is a command cgroup (a helper's report names it; anything else is never
/// touched).
fn is_command_cgroup(dir: &Path) -> bool {
    dir.starts_with("/sys/fs/cgroup")
        && dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(PREFIX))
        && !dir
            .components()
            .any(|c| c == std::path::Component::ParentDir)
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

/// What [`release`] found and did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Released {
    /// The memory cgroup's OOM killer killed a process of the command.
    pub oom_killed: bool,
    /// Cgroups that could not be removed (the next gateway start sweeps them).
    pub left: Vec<PathBuf>,
}

/// After a command: whether its memory cgroup's OOM killer struck, then both of its cgroups
/// (memory, and v1's pids) removed.
pub fn release(report: &crate::spec::Report) -> Released {
    let oom_killed = report
        .memory_cgroup
        .as_deref()
        .filter(|dir| is_command_cgroup(dir))
        .is_some_and(|dir| oom_kills(dir) > 0);
    let left = [&report.memory_cgroup, &report.cgroup]
        .into_iter()
        .flatten()
        .filter(|dir| !remove(dir))
        .cloned()
        .collect();
    Released { oom_killed, left }
}

/// Remove command cgroups a killed broker or helper left behind, older than a minute (a younger
/// one may be a helper's about to be joined); processes still in one whose broker is gone are
/// killed first ([`kill_orphaned`]) under this process's memory parent and
/// at the pids hierarchy's root (where root's pids cgroups are made). Returns how many.
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
            let old = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > Duration::from_secs(60));
            if !is_command_cgroup(&path) || !old {
                continue;
            }
            let mut empty = procs(&path).is_some_and(|p| p.is_empty());
            if !empty && kill_orphaned(&path) {
                empty = remove(&path);
            }
            if (empty && std::fs::remove_dir(&path).is_ok()) || !path.exists() {
                removed += 1;
            }
        }
    }
    removed
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
        for pid in &pids {
            // SAFETY: kill with a pid read from the cgroup and a constant signal.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
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
mod tests {
    use super::*;

    #[test]
    fn only_command_cgroups_are_touched() {
        assert!(is_command_cgroup(Path::new(
            "/sys/fs/cgroup/memory/x/native-gateway-cmd-0123456789abcdef"
        )));
        assert!(!is_command_cgroup(Path::new("/sys/fs/cgroup/memory/x")));
        assert!(!is_command_cgroup(Path::new(
            "/tmp/native-gateway-cmd-0123456789abcdef"
        )));
        assert!(!is_command_cgroup(Path::new(
            "/sys/fs/cgroup/../tmp/native-gateway-cmd-1"
        )));
    }

    /// Empty command cgroups older than a minute go; younger ones (a helper's about to be
    /// joined) stay. Where this process may make none, the probe says so too.
    #[test]
    fn orphans_are_swept_and_young_ones_kept() {
        let Some(parent) = parent() else {
            assert!(probe().is_none());
            return;
        };
        let dir = |age: &str| {
            parent
                .dir()
                .join(format!("{PREFIX}sweeptest-{age}-{}", std::process::id()))
        };
        let (old, young) = (dir("old"), dir("young"));
        std::fs::create_dir(&old).unwrap();
        std::fs::create_dir(&young).unwrap();
        let long_ago = std::time::SystemTime::now() - Duration::from_secs(7200);
        std::fs::File::open(&old)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
        sweep_orphans();
        assert!(!old.exists());
        assert!(young.exists());
        assert!(remove(&young));
        assert!(!remove(Path::new("/tmp")));
    }

    #[test]
    fn oom_kills_are_read_from_either_version() {
        let dir = std::env::temp_dir().join(format!("ngw-oom-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        assert_eq!(oom_kills(&dir), 2);
        std::fs::remove_file(dir.join("memory.oom_control")).unwrap();
        std::fs::write(
            dir.join("memory.events"),
            "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n",
        )
        .unwrap();
        assert_eq!(oom_kills(&dir), 1);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(oom_kills(&dir), 0);
    }
}
