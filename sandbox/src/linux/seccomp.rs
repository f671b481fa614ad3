//! The seccomp filters of commands and of the runner (deny → `EPERM`). Both: tracing and
//! cross-process memory and descriptors, io_uring, leaving the process group (setsid, setpgid),
//! mounts, namespaces, bpf, perf, keyrings, kexec, modules and reboot. Commands also: every
//! `socket()` (socketpair stays allowed), the metadata calls Landlock cannot restrict (chmod,
//! chown, xattrs, utime) and shared memory that `RLIMIT_DATA` does not count (memfd_create,
//! memfd_secret, SysV shm, message queues and semaphores, shared anonymous and `MAP_GROWSDOWN`
//! `mmap`; the stack's hard rlimit is set in `sys`); the runner: `socket()` outside IPv4, IPv6 and
//! netlink (no UNIX socket, see `RUNNER_SOCKET_FAMILIES`). A second hand-written filter denies
//! x32 syscall numbers (seccompiler's arch check misses them) and answers `clone3` with `ENOSYS`
//! so libc falls back to `clone`, whose namespace flags the first filter can inspect.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// Syscalls denied to commands and to the runner on every architecture.
const DENIED_COMMON: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    438, // pidfd_getfd: another process's descriptors (a socket it holds)
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_setsid,
    libc::SYS_setpgid,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    428, // open_tree
    429, // move_mount
    430, // fsopen
    431, // fsconfig
    432, // fsmount
    433, // fspick
    442, // mount_setattr
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_reboot,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_acct,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_quotactl,
    libc::SYS_vhangup,
];

/// Syscalls denied to commands only: every `socket()`, and the metadata calls Landlock cannot
/// restrict (the runner may change metadata in its private dirs, and needs TCP to the broker).
const DENIED_COMMAND: &[libc::c_long] = &[
    libc::SYS_socket,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    452, // fchmodat2
    libc::SYS_fchown,
    libc::SYS_fchownat,
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    463, // setxattrat
    466, // removexattrat
    libc::SYS_utimensat,
    // Shared memory is not counted by RLIMIT_DATA: without these a command could allocate past
    // its memory limit (files in its scratch tmpfs are bounded by the quota).
    libc::SYS_memfd_create,
    447, // memfd_secret
    libc::SYS_shmget,
    libc::SYS_shmat,
    // System V message queues and semaphores: kernel memory no rlimit counts, and (without an
    // IPC namespace) kept after the command ends. (PostgreSQL's SysV IPC cannot run here.)
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_semget,
];

/// Legacy syscalls that exist on x86_64 only, denied to both.
#[cfg(target_arch = "x86_64")]
const DENIED_ARCH: &[libc::c_long] = &[libc::SYS_kexec_file_load, libc::SYS_iopl, libc::SYS_ioperm];
#[cfg(not(target_arch = "x86_64"))]
const DENIED_ARCH: &[libc::c_long] = &[libc::SYS_kexec_file_load];

/// Legacy metadata syscalls that exist on x86_64 only, denied to commands.
#[cfg(target_arch = "x86_64")]
const DENIED_ARCH_COMMAND: &[libc::c_long] = &[
    libc::SYS_chmod,
    libc::SYS_chown,
    libc::SYS_lchown,
    libc::SYS_utime,
    libc::SYS_utimes,
    libc::SYS_futimesat,
];
#[cfg(not(target_arch = "x86_64"))]
const DENIED_ARCH_COMMAND: &[libc::c_long] = &[];

/// Socket families the runner may create: IPv4/IPv6 (the broker's port; the network namespace and
/// Landlock bound where they lead) and netlink (interface queries, which see only the namespace's
/// loopback). Not UNIX (issue 23): Landlock below ABI 9 cannot restrict connecting to pathname
/// sockets, and every one on the host — the gateway's admin socket, brokers' sockets, D-Bus (a
/// session bus starts programs), Docker — works across network namespaces; `socketpair` stays
/// allowed (the runner's own pipes), and a connected pair cannot be pointed elsewhere. Packet,
/// vsock (which crosses network namespaces), Bluetooth and the rest are refused.
const RUNNER_SOCKET_FAMILIES: &[libc::c_int] = &[libc::AF_INET, libc::AF_INET6, libc::AF_NETLINK];

/// `clone` flags that create namespaces.
const CLONE_NS_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// Why a seccomp filter could not be built or installed.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// A filter could not be compiled (this architecture, a condition or a rule).
    #[error("seccomp: {0}")]
    Build(#[from] seccompiler::BackendError),
    /// The main filter could not be installed.
    #[error("seccomp: {0}")]
    Install(seccompiler::Error),
    /// The x32 / `clone3` guard could not be installed (the main filter already was).
    #[error("seccomp guard: {0}")]
    InstallGuard(seccompiler::Error),
}

/// The command's main deny-list filter. `layered`: the command's writable mounts are its
/// scratch and the session's copy-on-write layer, never a real file, so changing modes and
/// times there is harmless and builds need it (`touch`, `install`, `cp -p`, std's `fs::copy`);
/// without the layer (and always in the Landlock-only fallback, where the real files are
/// mounted) they stay denied.
pub fn main_filter(layered: bool) -> Result<BpfProgram, SeccompError> {
    command_filter(layered)
}

/// Mode and time changes, allowed to a command that writes only to its scratch and its layer.
const LAYER_METADATA: &[libc::c_long] = &[
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    452, // fchmodat2
    libc::SYS_utimensat,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_chmod,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_utimes,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_futimesat,
];

/// The runner's main filter: the common deny list, and `socket()` only for
/// [`RUNNER_SOCKET_FAMILIES`].
pub fn runner_filter() -> Result<BpfProgram, SeccompError> {
    runner_only_filter()
}

/// Install both filters on the calling thread (no_new_privs must already be set).
pub fn apply(main: &BpfProgram, guard: &BpfProgram) -> Result<(), SeccompError> {
    seccompiler::apply_filter(main).map_err(SeccompError::Install)?;
    seccompiler::apply_filter(guard).map_err(SeccompError::InstallGuard)?;
    Ok(())
}

fn command_filter(layered: bool) -> Result<BpfProgram, SeccompError> {
    let denied = DENIED_COMMON
        .iter()
        .chain(DENIED_ARCH)
        .chain(DENIED_COMMAND)
        .chain(DENIED_ARCH_COMMAND)
        .filter(|nr| !(layered && LAYER_METADATA.contains(nr)));
    // Shared anonymous mappings are shared memory too (not counted by RLIMIT_DATA).
    let shared_anonymous = (libc::MAP_SHARED | libc::MAP_ANONYMOUS) as u64;
    let condition = SeccompCondition::new(
        3,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(shared_anonymous),
        shared_anonymous,
    )?;
    // A `MAP_GROWSDOWN` mapping is counted as stack, not data: refused (glibc's thread stacks do
    // not use it).
    let growsdown = SeccompCondition::new(
        3,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::MaskedEq(libc::MAP_GROWSDOWN as u64),
        libc::MAP_GROWSDOWN as u64,
    )?;
    let mut extra = BTreeMap::new();
    extra.insert(
        libc::SYS_mmap,
        vec![
            SeccompRule::new(vec![condition])?,
            SeccompRule::new(vec![growsdown])?,
        ],
    );
    deny_filter(denied, extra)
}

fn runner_only_filter() -> Result<BpfProgram, SeccompError> {
    let mut conditions = Vec::new();
    for family in RUNNER_SOCKET_FAMILIES {
        conditions.push(SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            *family as u64,
        )?);
    }
    let mut extra = BTreeMap::new();
    extra.insert(libc::SYS_socket, vec![SeccompRule::new(conditions)?]);
    deny_filter(DENIED_COMMON.iter().chain(DENIED_ARCH), extra)
}

/// `denied` unconditionally, the `extra` conditional rules, and `clone` with namespace flags, all
/// answered `EPERM`.
fn deny_filter<'a>(
    denied: impl Iterator<Item = &'a libc::c_long>,
    extra: BTreeMap<i64, Vec<SeccompRule>>,
) -> Result<BpfProgram, SeccompError> {
    let mut rules = extra;
    for nr in denied {
        rules.insert(*nr, Vec::new());
    }
    let mut clone_rules = Vec::new();
    for flag in CLONE_NS_FLAGS {
        let condition = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(*flag),
            *flag,
        )?;
        clone_rules.push(SeccompRule::new(vec![condition])?);
    }
    rules.insert(libc::SYS_clone, clone_rules);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        TargetArch::try_from(std::env::consts::ARCH)?,
    )?;
    Ok(BpfProgram::try_from(filter)?)
}

/// BPF_LD | BPF_W | BPF_ABS (BPF_LD and BPF_W are 0).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JGE_K: u16 = 0x05 | 0x30;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;

fn stmt(code: u16, k: u32) -> sock_filter {
    sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// The x32 guard and `clone3` → `ENOSYS`.
pub fn guard_filter() -> BpfProgram {
    #[cfg(target_arch = "x86_64")]
    {
        const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
        const X32_SYSCALL_BIT: u32 = 0x4000_0000;
        vec![
            stmt(BPF_LD_W_ABS, OFFSET_ARCH),
            jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, 0, 5),
            stmt(BPF_LD_W_ABS, OFFSET_NR),
            jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1),
            stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::EPERM as u32),
            jump(BPF_JEQ_K, libc::SYS_clone3 as u32, 0, 1),
            stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
            stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
        ]
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        vec![
            stmt(BPF_LD_W_ABS, OFFSET_NR),
            jump(BPF_JEQ_K, libc::SYS_clone3 as u32, 0, 1),
            stmt(BPF_RET_K, SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
            stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_compile() {
        let main = main_filter(false).unwrap();
        assert!(main.len() > DENIED_COMMON.len());
        let layered = main_filter(true).unwrap();
        assert!(layered.len() < main.len());
        assert!(main.len() < 4096);
        let guard = guard_filter();
        assert_eq!(guard.last().unwrap().k, SECCOMP_RET_ALLOW);
        let runner = runner_filter().unwrap();
        assert!(runner.len() > DENIED_COMMON.len());
        assert!(runner.len() < main.len() + 16);
    }
}
