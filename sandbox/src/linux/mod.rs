//! Linux confinement of one command, applied by the single-threaded `gateway sandbox-exec` helper
//! before it executes the command:
//!
//! 1. fds ≥ 3 closed, stdin → `/dev/null`; as root, a pids cgroup (the kernel does not enforce
//!    `RLIMIT_NPROC` for root).
//! 2. New user + mount + network + pid + IPC + UTS namespaces (uid/gid mapped to themselves); the
//!    helper forks and the command becomes pid 1 of the new pid namespace, so when it exits (or
//!    the helper dies: `PR_SET_PDEATHSIG`) the kernel kills everything left in it.
//! 3. In the mount namespace: masked paths covered (an empty tmpfs for directories — one shared by
//!    binds for those with nothing bound inside —, `/dev/null` for
//!    files; `/dev` by a private one holding only the allow-listed devices, see `devices`), the
//!    scratch dir bind-mounted onto itself — or, with a quota, a private tmpfs of that size over
//!    it, with HOME and TMPDIR made inside —, the spec's extra writable dirs (the gateway's own
//!    Git) bound onto themselves, a fresh `/proc`, every other reachable kernel pseudo file
//!    system covered (`pseudo_mounts`: a second procfs, `/sys`, a `/proc` file bound into the
//!    project), then every mount made read-only and nosuid (`mount_setattr(AT_RECURSIVE)`)
//!    except the scratch and writable mounts.
//! 4. rlimits (`RLIMIT_DATA` per process), all capabilities dropped, `no_new_privs`, Landlock
//!    (fully enforced or refused), seccomp (two filters), then one report line on stdout and
//!    `execve`.
//!
//! Memory (issue 24): before step 2 the helper raises its `oom_score_adj` and joins a memory
//! cgroup of its own where the host allows one (`cgroup`), bounding all of the command's
//! processes and pages together; without one, `/dev/zero` cannot be opened for writing (Landlock).
//!
//! Started ahead of its command (`ExecSpec::ahead`, issue 26): the helper reads a one-line spec,
//! joins the cgroups, enters every namespace of step 2 but the mount namespace, forks, and pid 1
//! waits on stdin for the command's spec; with it, pid 1 checks that the limits are the ones it
//! was prepared with, enters the mount namespace (the host's mount table as it is then) and goes
//! on from step 3 exactly as a helper started for the command.
//!
//! Without namespaces (hosts that forbid them) the command runs under Landlock (with masked paths
//! left out of the readable set) + seccomp + rlimits; the report says so. Without namespaces and
//! without Landlock the command is refused: the minimum is seccomp + no_new_privs + a read-only
//! file system.

pub mod cgroup;
mod devices;
mod landlock_rules;
mod mask_target;
mod namespaces;
mod overlay;
mod pseudo_mounts;
pub mod runner;
mod seccomp;
pub(crate) mod sys;

/// Highest Landlock ABI whose rights the sandbox requests (V7 adds only audit controls).
pub use landlock_rules::MAX_ABI as MAX_LANDLOCK_ABI;
#[cfg(test)]
pub(crate) use landlock_rules::read_roots_excluding;
pub use sys::landlock_abi_probe;

use std::ffi::CString;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::spec::{
    EXIT_SANDBOX_FAILED, Enforced, ExecSpec, HostSupport, MAX_SPEC_BYTES, REPORT_PREFIX, Report,
};

/// What this host supports, probed once per process.
pub fn host_support() -> HostSupport {
    static SUPPORT: OnceLock<HostSupport> = OnceLock::new();
    SUPPORT.get_or_init(probe).clone()
}

fn probe() -> HostSupport {
    let (namespaces, seccomp) = probe_in_child();
    let memory = cgroup::probe();
    let root = rustix::process::geteuid().is_root();
    HostSupport {
        os: "linux".into(),
        namespaces,
        landlock_abi: sys::landlock_abi(),
        seccomp,
        seatbelt: false,
        root,
        overlay: namespaces && overlay::probe(),
        memory_cgroup: memory.as_ref().map(|parent| parent.version().to_string()),
        // What the helper does (`helper_main`): the memory cgroup's v2 parent's pids, else, as
        // root, a pids cgroup of its own.
        pids_cgroup: matches!(memory, Some(cgroup::Parent::V2 { pids: true, .. }))
            || (root && sys::pids_cgroup_possible()),
    }
}

/// How many times a masked path whose object is replaced between the open and the mount is
/// tried (red team 42).
const MASK_ATTEMPTS: usize = 4;

const NAMESPACE_FLAGS: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS;

/// Fork a child that tries to create the namespaces and install a seccomp filter, and report
/// which worked. The child only makes raw syscalls (async-signal-safe) and `_exit`s.
fn probe_in_child() -> (bool, bool) {
    let filter = seccomp::guard_filter();
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: fork in a possibly multi-threaded process; the child below only calls
    // async-signal-safe functions (unshare, prctl, raw syscall, _exit) on memory prepared before
    // the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: see above; these calls affect only the child, which exits immediately.
        unsafe {
            let mut code = 0;
            if libc::unshare(NAMESPACE_FLAGS) == 0 {
                code |= 1;
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                && libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &prog as *const libc::sock_fprog,
                ) == 0
            {
                code |= 2;
            }
            libc::_exit(code);
        }
    }
    if pid < 0 {
        return (false, false);
    }
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child with a valid out-pointer.
        let ret = unsafe { libc::waitpid(pid, &mut status, 0) };
        if ret == pid {
            break;
        }
        if ret < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return (false, false);
        }
    }
    if !libc::WIFEXITED(status) {
        return (false, false);
    }
    let code = libc::WEXITSTATUS(status);
    (code & 1 != 0, code & 2 != 0)
}

/// Entry point of `gateway sandbox-exec`: read the [`ExecSpec`] from stdin, confine, execute.
/// Returns only on failure or (namespaces) with the command's exit status to pass on. Must run
/// single-threaded (before any async runtime starts).
pub fn helper_main() -> i32 {
    crate::timing::mark("helper");
    let spec = match read_spec() {
        Ok(spec) => spec,
        Err(message) => return fail(&Enforced::default(), Cgroups::default(), message),
    };
    // Started ahead: stdin stays open for the command's spec.
    if !spec.ahead
        && let Err(e) = sys::stdin_to_dev_null()
    {
        return fail(
            &Enforced::default(),
            Cgroups::default(),
            format!("stdin: {e}"),
        );
    }
    // The status pipe stays open on the helper's side only: close-on-exec, so the fallback's
    // `execve` closes it (its end is then learnt by reaping), and pid 1 closes it at once.
    let status = spec
        .status_fd
        .filter(|fd| *fd >= 3 && sys::set_cloexec(*fd).is_ok());
    sys::close_fds_from_3(status);
    crate::timing::mark("spec");
    let mut enforced = Enforced::default();
    // The OOM killer picks the command before anything else of the gateway's (inherited).
    cgroup::set_oom_score_adj(cgroup::COMMAND_OOM_SCORE_ADJ);
    let mut cgroup = Cgroups::default();
    let parent = spec
        .limits
        .memory
        .filter(|_| spec.limits.memory_cgroup)
        .and_then(|_| cgroup::parent());
    if let (Some(memory), Some(parent)) = (spec.limits.memory, &parent) {
        // Its scratch tmpfs pages are charged to it too: the bound is both together.
        let limit = memory.saturating_add(spec.limits.scratch.unwrap_or(0));
        match cgroup::join(parent, limit, spec.limits.nproc, spec.limits.group.as_ref()) {
            Ok(joined) => {
                enforced.memory_cgroup_mb = Some(limit / (1024 * 1024));
                enforced.pids_cgroup = joined.pids;
                cgroup.memory = Some(joined.dir);
                cgroup.before = Some(joined.before);
            }
            // The host promised the bound (the same probe): fail closed.
            Err(message) => return fail(&enforced, cgroup, message),
        }
    }
    crate::timing::mark("memcg");
    if rustix::process::geteuid().is_root() && spec.limits.root_pids_cgroup && !enforced.pids_cgroup
    {
        cgroup.pids = sys::join_pids_cgroup(spec.limits.nproc);
        enforced.pids_cgroup = cgroup.pids.is_some();
    }
    crate::timing::mark("pidscg");
    let entered = if spec.namespaces {
        // Started ahead, the mount namespace is made when the command comes: a copy of the
        // mount table as it is then, not as it was when the helper started.
        enter_namespaces(if spec.ahead {
            NAMESPACE_FLAGS & !libc::CLONE_NEWNS
        } else {
            NAMESPACE_FLAGS
        })
    } else {
        Namespaces::Unavailable
    };
    crate::timing::mark("unshare");
    if let Namespaces::Broken(message) = entered {
        return fail(&enforced, cgroup, message);
    }
    if let Namespaces::Entered = entered {
        enforced.user_namespace = true;
        enforced.network_namespace = true;
        // Started ahead, the command makes its own mount namespace; this side holds it (see
        // `hold_mount_namespace`), told when by this pipe (close-on-exec: never the command's).
        let made = if spec.ahead {
            std::io::pipe().ok()
        } else {
            None
        };
        // SAFETY: the helper is single-threaded (it runs before any runtime), so the child may
        // run ordinary code.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return fail(
                &enforced,
                cgroup,
                format!("fork: {}", std::io::Error::last_os_error()),
            );
        }
        if pid > 0 {
            let held = made.and_then(|(made, writer)| {
                // This side's writer closed first: a command that ends before making its
                // namespace closes the last one, and the read ends.
                drop(writer);
                hold_mount_namespace(pid, made)
            });
            // The child reports the phases so far; this side only its wait.
            crate::timing::take();
            let code = wait_and_forward(pid, status);
            drop(held);
            return code;
        }
        if let Some(fd) = status {
            // SAFETY: closing the status pipe's inherited copy, which this side never uses.
            unsafe { libc::close(fd) };
        }
        crate::timing::mark("fork");
        // The command's side: pid 1 of the new pid namespace.
        let _ =
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
        enforced.pid_namespace = true;
        let spec = match command_spec(spec, true) {
            Ok(spec) => spec,
            Err(message) => return fail(&enforced, cgroup, message),
        };
        if let Some((reader, mut made)) = made {
            drop(reader);
            let _ = made.write_all(&[1]);
        }
        if let Err(message) = setup_mounts(&spec, &mut enforced) {
            return fail(&enforced, cgroup, message);
        }
        crate::timing::mark("mounts");
        return confine_and_exec(&spec, enforced, cgroup, true);
    }
    match command_spec(spec, false) {
        Ok(spec) => confine_and_exec(&spec, enforced, cgroup, false),
        Err(message) => fail(&enforced, cgroup, message),
    }
}

/// Hold the mount namespace the command `pid` made (started ahead, it unshares its own when it
/// comes), once `made` says it exists: as its only holder, the command's exit tore its ~25
/// mounts down (an expedited RCU grace period and every superblock, about 0.5 ms) before
/// `waitpid` returned, on the answer's path. Held here, the teardown happens when the helper
/// exits, after the end was told. `None` (nothing held, the teardown stays where it was) when
/// the command ended before making it or its `/proc` entry cannot be opened.
fn hold_mount_namespace(
    pid: libc::pid_t,
    mut made: std::io::PipeReader,
) -> Option<std::os::fd::OwnedFd> {
    let mut byte = [0u8; 1];
    if made.read(&mut byte).ok()? != 1 {
        return None;
    }
    rustix::fs::open(
        format!("/proc/{pid}/ns/mnt").as_str(),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()
}

/// The spec on stdin: up to its first newline (a spec started ahead is one line, its command's
/// follows) or its end.
fn read_spec() -> Result<ExecSpec, String> {
    use std::io::BufRead;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_SPEC_BYTES as u64 + 1)
        .read_until(b'\n', &mut bytes)
        .map_err(|e| format!("reading the spec: {e}"))?;
    if bytes.len() > MAX_SPEC_BYTES {
        return Err("the spec is too large".into());
    }
    serde_json::from_slice(&bytes).map_err(|e| format!("parsing the spec: {e}"))
}

/// The spec the command runs with: `prepared` itself, or — started ahead
/// ([`ExecSpec::ahead`]) — the command's, read to stdin's end when the broker sends it, which
/// must agree on everything already done with `prepared` (a helper prepared for other limits
/// runs nothing). Stdin is `/dev/null` afterwards; `in_namespaces`: the mount namespace is
/// entered now. An empty stdin is the broker discarding the helper: nothing runs.
fn command_spec(prepared: ExecSpec, in_namespaces: bool) -> Result<ExecSpec, String> {
    let spec = read_command_spec(prepared, in_namespaces)?;
    // Every look of this process at paths steps around them, as the broker's do.
    crate::protected::found_hung_elsewhere(&spec.hung);
    Ok(spec)
}

fn read_command_spec(prepared: ExecSpec, in_namespaces: bool) -> Result<ExecSpec, String> {
    if prepared.masked_as_prepared {
        return Err("a spec names prepared masks without a prepared helper's".into());
    }
    if !prepared.ahead {
        return Ok(prepared);
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_SPEC_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("reading the command's spec: {e}"))?;
    // The phases before this one happened while no command waited.
    crate::timing::take();
    crate::timing::mark("command_spec");
    if bytes.is_empty() {
        return Err("discarded before a command came".into());
    }
    if bytes.len() > MAX_SPEC_BYTES {
        return Err("the command's spec is too large".into());
    }
    let mut spec: ExecSpec =
        serde_json::from_slice(&bytes).map_err(|e| format!("parsing the command's spec: {e}"))?;
    if spec.ahead
        || spec.limits != prepared.limits
        || spec.namespaces != prepared.namespaces
        || spec.status_fd != prepared.status_fd
    {
        return Err("the helper was prepared for other limits than the command's".into());
    }
    if spec.masked_as_prepared {
        if !spec.masked.is_empty() {
            return Err("the command's spec names masks besides the prepared ones".into());
        }
        spec.masked = prepared.masked;
        spec.masked_as_prepared = false;
    }
    sys::stdin_to_dev_null().map_err(|e| format!("stdin: {e}"))?;
    if in_namespaces {
        // SAFETY: unshare takes no pointers; single-threaded, it changes only this process.
        if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
            return Err(format!(
                "the mount namespace: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(spec)
}

/// Write the report line (error or not) on stdout.
fn report(report: &Report) {
    let json = serde_json::to_string(report).unwrap_or_else(|_| "{}".into());
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(format!("{REPORT_PREFIX}{json}\n").as_bytes());
    let _ = out.flush();
}

/// The cgroups the helper joined, named in its report for the broker to remove.
#[derive(Debug, Default)]
struct Cgroups {
    pids: Option<PathBuf>,
    memory: Option<PathBuf>,
    /// The memory cgroup's counters when this command joined it.
    before: Option<crate::spec::MemoryCounters>,
}

fn fail(enforced: &Enforced, cgroup: Cgroups, message: String) -> i32 {
    report(&Report {
        error: Some(message),
        enforced: enforced.clone(),
        cgroup: cgroup.pids,
        memory_cgroup: cgroup.memory,
        memory_before: cgroup.before,
    });
    EXIT_SANDBOX_FAILED
}

/// Outcome of trying to enter the namespaces.
enum Namespaces {
    Entered,
    /// `unshare` refused: nothing changed, the Landlock-only fallback may run.
    Unavailable,
    /// Inside the new user namespace but without an identity: must not run anything.
    Broken(String),
}

fn enter_namespaces(flags: libc::c_int) -> Namespaces {
    // The helper is single-threaded (it runs before any runtime), as CLONE_NEWUSER needs.
    match namespaces::unshare_as_self(flags) {
        Ok(()) => Namespaces::Entered,
        Err(namespaces::UnshareError::Unshare(_)) => Namespaces::Unavailable,
        Err(err @ namespaces::UnshareError::IdMap { .. }) => Namespaces::Broken(err.to_string()),
    }
}

/// Mount setup inside the new mount namespace (runs as pid 1 of the new pid namespace).
fn setup_mounts(spec: &ExecSpec, enforced: &mut Enforced) -> Result<(), String> {
    let e = |what: &str, err: std::io::Error| format!("{what}: {err}");
    sys::mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )
    .map_err(|err| e("making / private", err))?;
    let euid = rustix::process::geteuid().as_raw();
    let mut masked = 0;
    // Hung FUSE mounts first: every later look (the layer's, the masks') would block on them.
    for path in &spec.hung {
        if mask_target::cover_hung(path, euid)
            .map_err(|err| e(&format!("covering {}", path.display()), err))?
        {
            masked += 1;
        }
    }
    // Keep the scratch dir reachable even if a masked dir (the state dir) covers it.
    let scratch = std::fs::File::open(&spec.scratch).map_err(|err| e("opening scratch", err))?;
    use std::os::fd::AsRawFd;
    let scratch_fd_path = PathBuf::from(format!("/proc/self/fd/{}", scratch.as_raw_fd()));
    // Held open across the masks so they can be bound back where they were.
    let mut visible = Vec::new();
    for path in &spec.visible {
        let dir = std::fs::File::open(path)
            .map_err(|err| e(&format!("opening {}", path.display()), err))?;
        visible.push((path, dir));
    }
    let mut writable = Vec::new();
    for path in &spec.writable {
        let dir = std::fs::File::open(path)
            .map_err(|err| e(&format!("opening {}", path.display()), err))?;
        writable.push((path, dir));
    }
    // The copy-on-write layer: roots a mask covers (the managed worktree in the state dir) are
    // mounted after the masks, the others before, so masks inside them stay on top.
    let layer = match &spec.layer {
        Some(layer) => Some(overlay::OpenLayer::open(layer)?),
        None => None,
    };
    let under_mask = |path: &Path| spec.masked.iter().any(|m| path.starts_with(m));
    if let Some(layer) = &layer {
        for root in layer.roots.iter().filter(|r| !under_mask(&r.path)) {
            layer.mount(root)?;
        }
    }
    crate::timing::mark("mounts_layer");
    // `/dev` last: the file masks are bound from `/dev/null`.
    let private_dev = spec
        .masked
        .iter()
        .any(|m| m == Path::new(crate::protected::DEVICE_DIR));
    // Directory masks that nothing is made or bound inside share one empty tmpfs (bind mounts of
    // the first: a tmpfs per mask cost ~0.1 ms each, dozens per command); one that holds a
    // visible dir, a layer root, the scratch or a writable dir gets its own, since mount points
    // are made in it and must not appear in the others.
    let inner = |mask: &Path| {
        let roots = layer.iter().flat_map(|l| l.roots.iter().map(|r| &r.path));
        spec.visible
            .iter()
            .chain(&spec.writable)
            .chain(std::iter::once(&spec.scratch))
            .chain(roots)
            .any(|p| p != mask && p.starts_with(mask))
    };
    let mut shared: Option<&Path> = None;
    let mut survey = mask_target::Survey::new(&spec.masked);
    for path in spec
        .masked
        .iter()
        .filter(|m| *m != Path::new(crate::protected::DEVICE_DIR))
    {
        if crate::protected::is_hung_mount(path) || !survey.may_exist(path) {
            continue;
        }
        // Another account that swaps its own directory in and out (mkdir + rename) between the
        // open and the mount made the owner's command fail (red team 42): the path is tried
        // again with the object there now, a few times.
        for attempt in 1..=MASK_ATTEMPTS {
            // The object the path names, reached without another account's symlink, and mounted
            // on through its descriptor: what was checked is what gets covered.
            let Ok(Some(object)) = mask_target::open(path, euid) else {
                break;
            };
            let Ok(st) = rustix::fs::fstat(&object) else {
                break;
            };
            let target = PathBuf::from(format!("/proc/self/fd/{}", object.as_raw_fd()));
            let target = target.as_path();
            let is_dir =
                rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
            let result = if is_dir {
                match shared.filter(|_| !inner(path)) {
                    Some(source) => sys::mount(Some(source), target, None, libc::MS_BIND, None),
                    None => {
                        let made = sys::mount(
                            Some(Path::new("tmpfs")),
                            target,
                            Some("tmpfs"),
                            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                            Some("size=64k,mode=755"),
                        );
                        // Bound from by its name later: only an object of this account or root, whose
                        // name nobody else can swap.
                        if made.is_ok()
                            && shared.is_none()
                            && !inner(path)
                            && (st.st_uid == euid || st.st_uid == 0)
                        {
                            shared = Some(path);
                        }
                        made
                    }
                }
            } else {
                sys::mount(
                    Some(Path::new("/dev/null")),
                    target,
                    None,
                    libc::MS_BIND,
                    None,
                )
            };
            match result {
                Ok(()) => {
                    masked += 1;
                    break;
                }
                // Gone between the look and the mount (another gateway's state dir removed meanwhile):
                // nothing is left there to hide, exactly as if it had been missing at the look.
                Err(err)
                    if err.kind() == std::io::ErrorKind::NotFound
                        && std::fs::symlink_metadata(path)
                            .is_err_and(|gone| gone.kind() == std::io::ErrorKind::NotFound) =>
                {
                    break;
                }
                // Replaced meanwhile: again, with what is there now.
                Err(err)
                    if err.kind() == std::io::ErrorKind::NotFound && attempt < MASK_ATTEMPTS => {}
                // Still replaced at every try: another account's own object (its churn exposes
                // only its own files, which its mode keeps from the owner) is left; the owner's or
                // root's fails the command.
                Err(err)
                    if err.kind() == std::io::ErrorKind::NotFound
                        && st.st_uid != euid
                        && st.st_uid != 0 =>
                {
                    break;
                }
                Err(err) => return Err(e(&format!("masking {}", path.display()), err)),
            }
        }
    }
    crate::timing::mark("mounts_masks");
    let dev_writable = if private_dev {
        masked += 1;
        devices::private_dev(spec.limits.scratch)?
    } else {
        Vec::new()
    };
    crate::timing::mark("mounts_dev");
    // Bind the visible dirs back over the masks (still writable tmpfs: mount points can be made);
    // the read-only remount of `/` below covers them.
    if let Some(layer) = &layer {
        for root in layer.roots.iter().filter(|r| under_mask(&r.path)) {
            layer.mount(root)?;
        }
    }
    let layered = |path: &Path| {
        layer
            .as_ref()
            .is_some_and(|l| l.roots.iter().any(|r| r.path == path))
    };
    for (path, dir) in visible.iter().filter(|(path, _)| !layered(path)) {
        if std::fs::metadata(path).is_err() {
            std::fs::create_dir_all(path)
                .map_err(|err| e(&format!("mount point for {}", path.display()), err))?;
        }
        let fd_path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
        sys::mount(
            Some(&fd_path),
            path,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        )
        .map_err(|err| e(&format!("binding {}", path.display()), err))?;
    }
    drop(visible);
    // Re-create the scratch mount point if a mask hid it (the tmpfs is still writable now).
    if std::fs::metadata(&spec.scratch).is_err() {
        std::fs::create_dir_all(&spec.scratch).map_err(|err| e("scratch mount point", err))?;
    }
    if let Some(quota) = spec.limits.scratch {
        // All of the command's files together: a private tmpfs of the quota's size (inodes
        // bounded too, one per page), which nothing outside this mount namespace can see.
        let options = format!(
            "size={quota},nr_inodes={},mode=700",
            (quota / 4096).max(1024)
        );
        sys::mount(
            Some(Path::new("tmpfs")),
            &spec.scratch,
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(&options),
        )
        .map_err(|err| e("scratch tmpfs", err))?;
        for sub in crate::env::SCRATCH_DIRS {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(spec.scratch.join(sub))
                .map_err(|err| e("scratch dirs", err))?;
        }
        enforced.scratch_quota_mb = Some(quota / (1024 * 1024));
    } else {
        sys::mount(
            Some(&scratch_fd_path),
            &spec.scratch,
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        )
        .map_err(|err| e("binding scratch", err))?;
    }
    drop(scratch);
    // Extra writable dirs (the gateway's confined Git), bound onto themselves from descriptors
    // opened before the masks, like the scratch dir.
    for (path, dir) in &writable {
        if std::fs::metadata(path).is_err() {
            std::fs::create_dir_all(path)
                .map_err(|err| e(&format!("mount point for {}", path.display()), err))?;
        }
        let fd_path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
        sys::mount(Some(&fd_path), path, None, libc::MS_BIND, None)
            .map_err(|err| e(&format!("binding {}", path.display()), err))?;
    }
    crate::timing::mark("mounts_binds");
    // A fresh /proc for the new pid namespace: other processes are not even visible. Hosts that
    // forbid it (overmounted /proc) keep the old one, whose other-process entries are guarded by
    // ptrace checks across user namespaces.
    let _ = sys::mount(
        Some(Path::new("proc")),
        Path::new("/proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        None,
    );
    // Then no other kernel pseudo file system stays reachable (a second procfs, `/sys`, a
    // `/proc` file bound into the project): the read tools' list, found by type.
    let keep: Vec<&Path> = std::iter::once(Path::new("/proc"))
        .chain(private_dev.then_some(Path::new("/dev/pts")))
        .collect();
    let places = pseudo_mounts::Places {
        shown: std::iter::once(spec.cwd.as_path())
            .chain(
                layer
                    .iter()
                    .flat_map(|l| l.roots.iter().map(|r| r.path.as_path())),
            )
            .collect(),
    };
    masked += pseudo_mounts::cover(&keep, &places)?;
    crate::timing::mark("mounts_pseudo");
    sys::mount_setattr(
        Path::new("/"),
        true,
        sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID,
        0,
    )
    .map_err(|err| e("making / read-only", err))?;
    sys::mount_setattr(&spec.scratch, false, 0, sys::MOUNT_ATTR_RDONLY)
        .map_err(|err| e("making scratch writable", err))?;
    for path in &dev_writable {
        sys::mount_setattr(path, false, 0, sys::MOUNT_ATTR_RDONLY)
            .map_err(|err| e(&format!("making {} writable", path.display()), err))?;
    }
    for (path, _) in &writable {
        sys::mount_setattr(path, false, 0, sys::MOUNT_ATTR_RDONLY)
            .map_err(|err| e(&format!("making {} writable", path.display()), err))?;
    }
    drop(writable);
    if let Some(layer) = &layer {
        for root in &layer.roots {
            sys::mount_setattr(&root.path, false, 0, sys::MOUNT_ATTR_RDONLY).map_err(|err| {
                e(
                    &format!("making the layer over {} writable", root.path.display()),
                    err,
                )
            })?;
        }
        enforced.layer_roots = layer.roots.len();
    }
    enforced.mount_namespace = true;
    enforced.masked = masked;
    Ok(())
}

/// rlimits, capabilities, no_new_privs, Landlock, seccomp, report, execve.
fn confine_and_exec(
    spec: &ExecSpec,
    mut enforced: Enforced,
    cgroup: Cgroups,
    in_namespaces: bool,
) -> i32 {
    if let Err(err) = std::env::set_current_dir(&spec.cwd) {
        return fail(&enforced, cgroup, format!("cwd: {err}"));
    }
    if let Err(err) = sys::set_rlimits(&spec.limits, in_namespaces) {
        return fail(&enforced, cgroup, format!("rlimits: {err}"));
    }
    enforced.rlimits = true;
    crate::timing::mark("rlimits");
    enforced.memory_limit_mb = spec.limits.memory.map(|bytes| bytes / (1024 * 1024));
    enforced.capabilities_dropped = sys::drop_capabilities();
    if !enforced.capabilities_dropped {
        return fail(
            &enforced,
            cgroup,
            "capabilities could not be dropped".into(),
        );
    }
    enforced.no_new_privs = sys::no_new_privs();
    if !enforced.no_new_privs {
        return fail(&enforced, cgroup, "no_new_privs could not be set".into());
    }
    match sys::landlock_abi() {
        Some(abi) => {
            let roots = if in_namespaces {
                vec![PathBuf::from("/")]
            } else {
                let mut roots = landlock_rules::read_roots_excluding(&spec.masked);
                roots.extend(spec.visible.iter().cloned());
                roots
            };
            let mut writable: Vec<&Path> = vec![spec.scratch.as_path()];
            writable.extend(spec.writable.iter().map(PathBuf::as_path));
            if in_namespaces {
                // The private `/dev`'s own shm and pts mounts (`devices`).
                writable.extend(
                    [Path::new("/dev/shm"), Path::new("/dev/pts")]
                        .into_iter()
                        .filter(|p| {
                            spec.masked.iter().any(|m| m == Path::new("/dev")) && p.is_dir()
                        }),
                );
            }
            if in_namespaces && enforced.layer_roots > 0 {
                // Only mounted layers: without namespaces the roots are the real directories.
                if let Some(layer) = &spec.layer {
                    writable.extend(layer.roots.iter().map(PathBuf::as_path));
                }
            }
            let zero_writable = enforced.memory_cgroup_mb.is_some();
            match landlock_rules::restrict(&roots, &writable, abi, zero_writable) {
                Ok(level) => {
                    enforced.landlock_abi = Some(level);
                    enforced.shared_zero_refused = !zero_writable;
                }
                Err(error) => return fail(&enforced, cgroup, error.to_string()),
            }
        }
        None if in_namespaces => {}
        None => {
            return fail(
                &enforced,
                cgroup,
                "neither namespaces nor Landlock are available: the file system cannot be made read-only"
                    .into(),
            );
        }
    }
    crate::timing::mark("landlock");
    // Compiled once its one variant is known (with the layer mounted, chmod and utime only
    // change copies).
    let main = match seccomp::main_filter(enforced.layer_roots > 0) {
        Ok(filter) => filter,
        Err(error) => return fail(&enforced, cgroup, error.to_string()),
    };
    crate::timing::mark("seccomp_built");
    if let Err(error) = seccomp::apply(&main, &seccomp::guard_filter()) {
        return fail(&enforced, cgroup, error.to_string());
    }
    enforced.seccomp = true;
    if !enforced.meets_minimum() {
        return fail(
            &enforced,
            cgroup,
            "the minimum confinement was not reached".into(),
        );
    }
    let program = match CString::new(spec.program.as_os_str().as_bytes()) {
        Ok(p) => p,
        Err(_) => return fail(&enforced, cgroup, "program path contains NUL".into()),
    };
    let to_c = |s: &str| CString::new(s).ok();
    let argv: Option<Vec<CString>> = spec.argv.iter().map(|a| to_c(a)).collect();
    let envp: Option<Vec<CString>> = spec
        .env
        .iter()
        .map(|(k, v)| to_c(&format!("{k}={v}")))
        .collect();
    let (Some(argv), Some(envp)) = (argv, envp) else {
        return fail(&enforced, cgroup, "argv or env contains NUL".into());
    };
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|a| a.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    crate::timing::mark("exec");
    crate::timing::emit();
    report(&Report {
        error: None,
        enforced,
        cgroup: cgroup.pids,
        memory_cgroup: cgroup.memory,
        memory_before: cgroup.before,
    });
    // SAFETY: program, argv and envp are valid NUL-terminated strings in null-terminated arrays
    // that stay alive across the call; execve only returns on failure.
    unsafe { libc::execve(program.as_ptr(), argv_ptrs.as_ptr(), envp_ptrs.as_ptr()) };
    let err = std::io::Error::last_os_error();
    let _ = writeln!(
        std::io::stderr(),
        "sandbox-exec: cannot execute {}: {err}",
        spec.program.display()
    );
    if err.raw_os_error() == Some(libc::ENOENT) {
        127
    } else {
        126
    }
}

/// The helper's side after the fork: wait for the command and pass its status on (a signal is
/// re-raised so the broker sees it).
///
/// With a status pipe the end is told before the helper exits, since its exit is what tears the
/// mount namespace (~100 mounts) and the other namespaces down. The command is pid 1 of its pid
/// namespace: the kernel kills every other process of that namespace when pid 1 exits, and
/// `waitpid` returns only once they are all reaped (`zap_pid_ns_processes` waits until the
/// namespace holds no pid but pid 1's), so no process of the command is left when the broker
/// reads the line. The helper's stdout and stderr are closed first: with them the last writers
/// of the command's pipes are gone, and the broker drains them to their end.
fn wait_and_forward(pid: libc::pid_t, status_fd: Option<i32>) -> i32 {
    let Ok(status) = sys::wait_child(pid) else {
        return EXIT_SANDBOX_FAILED;
    };
    crate::timing::mark("waited");
    crate::timing::emit();
    let end = if libc::WIFEXITED(status) {
        Some(crate::spec::CommandEnd::Exited(libc::WEXITSTATUS(status)))
    } else if libc::WIFSIGNALED(status) {
        Some(crate::spec::CommandEnd::Signaled(libc::WTERMSIG(status)))
    } else {
        None
    };
    if let (Some(fd), Some(end)) = (status_fd, end) {
        let _ = std::io::stdout().flush();
        let line = end.line();
        // SAFETY: closing our own stdout and stderr (nothing is written on them after this) and
        // writing a short line from a live buffer to the status pipe, then closing it.
        unsafe {
            libc::close(1);
            libc::close(2);
            libc::write(fd, line.as_ptr().cast(), line.len());
            libc::close(fd);
        }
    }
    if libc::WIFEXITED(status) {
        return libc::WEXITSTATUS(status);
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: restoring the default action and raising a signal on ourselves; core dumps are
        // off (RLIMIT_CORE is 0 in the command, and the helper only re-raises).
        unsafe {
            let zero = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &zero);
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
        return 128 + sig;
    }
    EXIT_SANDBOX_FAILED
}
