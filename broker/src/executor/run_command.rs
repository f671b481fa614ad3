//! `RunCommand`: an exact argv, checked by the sandbox crate's policy (executable resolution, deny
//! list), run through the `gateway sandbox-exec` helper (Linux: namespaces, read-only mounts,
//! Landlock, seccomp, rlimits; macOS: a Seatbelt profile) in its own process group, with a private
//! scratch dir that is removed afterwards.
//!
//! Bounds: wall time (default 120 s, at most 600 s; then the whole group gets SIGTERM, a short
//! grace, SIGKILL), stdout and stderr up to 64 KiB each (the rest is drained and counted, not
//! kept), the process count (RLIMIT_NPROC, or a pids cgroup as root), memory per process
//! (RLIMIT_DATA; shared memory refused) and per command (a memory cgroup where the host allows
//! one: `memory_limit_exceeded`) and the scratch files together (a tmpfs of the quota's size). The helper is the gateway executable pinned at start, executed by descriptor; a missing
//! or malformed report line is `confinement_unconfirmed`, never "not run". Once the main process has
//! exited its group is killed, and pipes still held open are drained for at most
//! [`DRAIN_AFTER_EXIT`]. Commands never write files for the session: where the host can mount
//! overlays they write into the session's copy-on-write layer (`layer`), kept across its commands
//! and discarded at stop; on macOS the same dir is writable instead, with build outputs and
//! caches redirected into it; elsewhere the file system is read-only to them except their scratch
//! dir.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::outcome::OutcomeCode;
use common::tools::{ActionOutcome, MAX_TOOL_OUTPUT_BYTES, Receipt, RunCommandArgs, ToolStatus};
use sandbox::command::CommandRefusal;
use sandbox::pinned_exe::{PinError, PinnedExe};
use sandbox::private_fs::PrivateDirError;
use sandbox::spec::{ExecSpec, Limits};

use super::Executor;

mod ahead;
mod area;
mod layer;
mod outcome;
mod running;
mod settling;
mod spawn;
mod supervise;

pub use running::stop_all as stop_running_commands;
pub use settling::Settling as CommandCleanups;

pub use ahead::Ahead as PreparedHelper;
pub use layer::SessionLayer;

use area::{AREA_WAIT, FollowArea, Placed, layer_at, placed};
use outcome::finish;
use spawn::spawn;
#[cfg(target_os = "linux")]
use spawn::{helper_path, spawn_helper};
#[cfg(target_os = "linux")]
use supervise::Ending;
pub use supervise::ReportProblem;
use supervise::{KilledAt, oom_killed, own_memory_cgroup, release_cgroups, supervise};

/// Bytes kept of each stream.
const STREAM_LIMIT: usize = MAX_TOOL_OUTPUT_BYTES;
/// Grace between SIGTERM and SIGKILL on timeout.
const KILL_GRACE: Duration = Duration::from_millis(500);
/// How long pipes are still read after the main process exited and its group was killed.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);
/// Longest report line accepted from the helper.
const MAX_REPORT_BYTES: usize = 16 * 1024;
/// Room for the header and section markers within the 64 KiB output.
const HEADER_RESERVE: usize = 1024;

/// Why a command was not run, or why its run cannot be trusted ([`run_confined`]).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cwd {given:?} does not exist")]
    CwdMissing { given: String },
    #[error("cwd {given:?} is outside the session's working directory")]
    CwdOutside { given: String },
    #[error("cwd {given:?} is not a directory")]
    CwdNotADirectory { given: String },
    /// The runtime area or the session's scratch root is not a private directory of ours.
    #[error(transparent)]
    PrivateDir(#[from] PrivateDirError),
    /// A scratch dir could not be made or resolved.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the scratch root overlaps the working directory")]
    ScratchOverlapsWorkingDirectory,
    #[error("no verified sandbox helper is configured")]
    NoHelper,
    /// The pinned helper changed (or cannot be checked) since the gateway started.
    #[error(transparent)]
    Helper(#[from] PinError),
    #[error("encoding the spec: {0}")]
    EncodeSpec(serde_json::Error),
    #[error("spawning {}: {source}", program.display())]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("no command sandbox on this OS")]
    Unsupported,
    /// The helper's report was missing or malformed: something may have run.
    #[error("its confinement could not be confirmed ({0}); it may have run")]
    Unconfirmed(ReportProblem),
    /// The helper refused before executing anything (its report's words): nothing ran.
    #[error("not run: confinement could not be established ({0})")]
    NotConfined(String),
}

/// Where and how commands are confined. Built by the broker from its spec; see
/// [`Executor::with_command_sandbox`].
#[derive(Debug, Clone)]
pub struct CommandSandbox {
    /// The `gateway` executable (it has the hidden `sandbox-exec` subcommand), pinned when the
    /// gateway started: executed from its descriptor, never from a path. `None`: commands are
    /// refused. (macOS runs `/usr/bin/sandbox-exec` instead.)
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    helper: Option<Arc<PinnedExe>>,
    /// Where the session's scratch root and layer are now (they move to a new runtime area when
    /// the gateway replaces one that went: [`CommandSandbox::in_runtime_area`]). Shared by the
    /// executor's clones.
    placed: Arc<Mutex<Placed>>,
    /// The runtime area the scratch root is in, followed from the state dir's record.
    follow: Option<FollowArea>,
    /// Hidden from commands (`sandbox::masked_paths`: sorted, without duplicates).
    masked: Vec<PathBuf>,
    /// The owner's home (rustup toolchains are found read-only through it).
    owner_home: PathBuf,
    /// Try namespaces (off only to test the Landlock-only fallback).
    namespaces: bool,
    limits: Limits,
    /// The session's own managed worktree: the one directory bound back over the masks.
    own_worktree: Option<PathBuf>,
    /// Where bare executable names are looked up (the owner's filtered PATH).
    search_path: String,
    /// The working directory's identity recorded at the session's start: commands run only
    /// while the directory is that one (`None`: an older gateway, not checked).
    expected_wd: Option<common::protocol::DirIdentity>,
    /// The session's commands still being cleaned up after their answers (shared by clones).
    settling: Arc<settling::Settling>,
    /// The helper started ahead for the session's next command (shared by clones).
    ahead: Arc<ahead::Ahead>,
    /// Start each command's helper ahead (off by [`CommandSandbox::started_per_command`]).
    prepare_ahead: bool,
}

impl CommandSandbox {
    /// `helper`: the pinned gateway executable; `scratch_root`: e.g. `<runtime_dir>/cmd`; `home`
    /// and `state_dir`: the owner's home and the gateway state dir (masked, with the credential
    /// stores); `extra_masked`: the owner's extra protected paths.
    pub fn new(
        helper: Option<Arc<PinnedExe>>,
        scratch_root: PathBuf,
        home: &Path,
        state_dir: &Path,
        extra_masked: &[PathBuf],
    ) -> Self {
        Self {
            helper,
            placed: placed(scratch_root),
            follow: None,
            masked: sandbox::masked_paths(home, state_dir, extra_masked),
            owner_home: home.to_path_buf(),
            namespaces: true,
            limits: Limits::default(),
            own_worktree: None,
            search_path: sandbox::command::FIXED_PATH.to_string(),
            expected_wd: None,
            settling: Arc::default(),
            ahead: Arc::default(),
            prepare_ahead: true,
        }
    }

    /// The default when the broker configured nothing: no verified helper (commands are
    /// refused), scratch under `<state_dir>/run/cmd`.
    pub(super) fn from_policy(policy: &sandbox::path_policy::PathPolicy) -> Self {
        Self {
            helper: None,
            placed: placed(policy.state_dir().join("run").join("cmd")),
            follow: None,
            masked: sandbox::masked_paths(policy.home(), policy.state_dir(), &[]),
            owner_home: policy.home().to_path_buf(),
            namespaces: true,
            limits: Limits::default(),
            own_worktree: None,
            search_path: sandbox::command::FIXED_PATH.to_string(),
            expected_wd: None,
            settling: Arc::default(),
            ahead: Arc::default(),
            prepare_ahead: true,
        }
    }

    /// Run without namespaces (Landlock + seccomp only), to exercise the fallback.
    pub fn without_namespaces(mut self) -> Self {
        self.namespaces = false;
        self
    }

    /// Start each command's helper when the command comes, never ahead (the bench's baseline).
    pub fn started_per_command(mut self) -> Self {
        self.prepare_ahead = false;
        self
    }

    /// The session's own managed worktree (a `worktree_write` session): commands see it
    /// although the state dir holding it is masked.
    pub fn with_own_worktree(mut self, worktree: Option<PathBuf>) -> Self {
        self.own_worktree = worktree;
        self
    }

    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Where bare executable names are found (`sandbox::command::command_path`).
    pub fn with_search_path(mut self, search_path: String) -> Self {
        self.search_path = search_path;
        self
    }

    /// Give the session a copy-on-write layer of `budget` bytes, in `<scratch root>/layer`
    /// (used where the host can mount overlays; see [`SessionLayer`]).
    pub fn with_layer(self, budget: u64) -> Self {
        {
            let mut placed = lock(&self.placed);
            placed.layer = Some(Arc::new(layer_at(&placed.scratch_root, budget)));
        }
        self
    }

    /// Run commands only while the working directory is the one the session started in (like
    /// writes, `sandbox::write_path::WriteRefusal::RootReplaced`).
    pub fn with_working_directory_identity(
        mut self,
        identity: Option<common::protocol::DirIdentity>,
    ) -> Self {
        self.expected_wd = identity;
        self
    }

    /// The session's layer, if it has one.
    pub fn layer(&self) -> Option<Arc<SessionLayer>> {
        lock(&self.placed).layer.clone()
    }

    /// Start the helper of the session's next command on the reaper thread, after the
    /// cleanups handed to it so far (`ahead`).
    #[cfg(target_os = "linux")]
    fn prepare_next(&self, masked: Vec<PathBuf>) {
        let Ok(helper) = helper_path(self) else {
            return;
        };
        let ahead = Arc::clone(&self.ahead);
        let (limits, namespaces) = (self.limits, self.namespaces);
        self.settling
            .then_on_reaper(move || ahead.prepare(&helper, limits, namespaces, masked));
    }
}

use crate::lock;

impl Executor {
    /// Where this session's command scratch dirs are made, if its runtime area is still the one
    /// checked.
    pub fn command_scratch_root(&self) -> Option<PathBuf> {
        self.commands.scratch_root_in_place()
    }

    /// The limits every command of the session gets.
    pub fn command_limits(&self) -> &Limits {
        &self.commands.limits
    }

    /// The session's copy-on-write layer, if commands have one.
    pub fn command_layer(&self) -> Option<Arc<SessionLayer>> {
        self.commands.layer()
    }

    /// The session's layer, if its runtime area is still the one checked (to remove it).
    pub fn command_layer_in_place(&self) -> Option<Arc<SessionLayer>> {
        self.commands.layer_in_place()
    }

    /// The helper started ahead for the session's next command (the broker discards it at
    /// shutdown, before the session's memory cgroup goes).
    pub fn prepared_helper(&self) -> Arc<PreparedHelper> {
        Arc::clone(&self.commands.ahead)
    }

    /// The session's commands still being cleaned up after their answers: the layer is
    /// discarded only once none is (its overlays are still mounted until then).
    pub fn command_cleanups(&self) -> Arc<CommandCleanups> {
        Arc::clone(&self.commands.settling)
    }

    /// Configure how `RunCommand` is confined (helper executable, scratch root, masks).
    pub fn with_command_sandbox(mut self, commands: CommandSandbox) -> Self {
        self.commands = commands;
        self
    }
}

/// A refusal before anything ran.
fn rejected(
    action_id: &str,
    code: OutcomeCode,
    message: String,
    started: Instant,
) -> ActionOutcome {
    ActionOutcome {
        status: ToolStatus::Rejected,
        output: message,
        truncated: false,
        error_code: Some(code),
        receipt: Receipt {
            action_id: action_id.to_string(),
            duration_ms: millis(started.elapsed()),
            ..Receipt::default()
        },
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Run one `RunCommand` action. Never panics.
pub(super) fn run(
    exec: &Executor,
    action_id: &str,
    args: &RunCommandArgs,
    started: Instant,
) -> ActionOutcome {
    sandbox::timing::take();
    sandbox::timing::mark("run");
    let config = &exec.commands;
    // Also the state dirs of gateways registered after the session started.
    let mut masked = exec.policy.with_late_masks(&config.masked);
    let Ok(wd) = std::fs::canonicalize(exec.working_directory()) else {
        return rejected(
            action_id,
            OutcomeCode::NotFound,
            "the working directory no longer exists".into(),
            started,
        );
    };
    if let Some(expected) = config.expected_wd
        && common::protocol::DirIdentity::of(exec.working_directory()) != Some(expected)
    {
        return rejected(
            action_id,
            OutcomeCode::NotPermitted,
            format!(
                "the command was not run: {} is no longer the directory this session started in \
                 (it was replaced or moved). Start a new session on the directory",
                sandbox::escape::path_for_display(exec.working_directory())
            ),
            started,
        );
    }
    let cwd = match resolve_cwd(&wd, args.cwd.as_deref()) {
        Ok(cwd) => cwd,
        Err(refusal) => {
            return rejected(
                action_id,
                OutcomeCode::InvalidArgument,
                refusal.to_string(),
                started,
            );
        }
    };
    let resolved = match sandbox::command::check(&args.argv, &wd, &cwd, &config.search_path) {
        Ok(resolved) => resolved,
        Err(refusal) => {
            return rejected(
                action_id,
                refusal.code(),
                refusal_message(&refusal),
                started,
            );
        }
    };
    let support = sandbox::host_support();
    if !support.can_confine() {
        return rejected(
            action_id,
            OutcomeCode::SandboxUnavailable,
            format!(
                "the command was not run: this host cannot confine commands (namespaces: {}, \
                 landlock: {:?}, seccomp: {}, seatbelt: {}); commands are refused rather than \
                 run unconfined",
                support.namespaces, support.landlock_abi, support.seccomp, support.seatbelt
            ),
            started,
        );
    }
    sandbox::timing::mark("checked");
    // The previous command's helper reaped and cgroups removed: this one joins the same session
    // cgroup and mounts the same layer.
    if !config.settling.wait(settling::SETTLE_WAIT) {
        tracing::error!("RunCommand: the previous command's helper was not reaped in time");
        return rejected(
            action_id,
            OutcomeCode::SandboxUnavailable,
            "the command was not run: the session's previous command is still being cleaned up; \
             run it again in a moment"
                .into(),
            started,
        );
    }
    sandbox::timing::mark("settled");
    // The session's places in the runtime area as it is now (never a name another account took
    // after the area went: RT29 B3).
    let (scratch_root, session_layer, moved) = match config.places(AREA_WAIT) {
        Ok(places) => places,
        Err(gone) => {
            tracing::error!("RunCommand: {}", gone.0);
            return rejected(
                action_id,
                OutcomeCode::SandboxUnavailable,
                gone.to_string(),
                started,
            );
        }
    };
    // A new area is masked like the one the broker started with (the path policy protects it
    // from the next tool call on, when the state dir's record is read again).
    if let Some(area) = scratch_root.parent()
        && !masked.iter().any(|m| m == area)
    {
        masked.push(area.to_path_buf());
    }
    // The copy-on-write layer where this host can mount it; on macOS the session's writable
    // dir in its place; else today's read-only view.
    let session_dir = support.session_dir();
    let layer = session_layer
        .as_deref()
        .filter(|_| (config.namespaces && support.copy_on_write()) || session_dir);
    let mut notes: Vec<String> = moved.into_iter().collect();
    let turn = match layer {
        Some(layer) => {
            let view = if session_dir {
                layer::View::SessionDir
            } else {
                let roots = layer::roots(
                    &config.owner_home,
                    &wd,
                    config.own_worktree.as_deref(),
                    &masked,
                    layer.dir(),
                );
                notes.extend(roots.note());
                layer::View::Overlays(roots.dirs)
            };
            match layer.begin(view, args.fresh_layer) {
                Ok(turn) => Some(turn),
                Err(refusal) => {
                    let code = match refusal {
                        layer::LayerRefusal::OverBudget { .. } => OutcomeCode::LayerOverBudget,
                        layer::LayerRefusal::Broken => OutcomeCode::SandboxUnavailable,
                        layer::LayerRefusal::NoRoom(_) => OutcomeCode::StorageFull,
                    };
                    return rejected(
                        action_id,
                        code,
                        format!("the command was not run: {refusal}"),
                        started,
                    );
                }
            }
        }
        None => {
            if args.fresh_layer {
                notes.push("fresh_layer: this host gives commands no layer to discard".into());
            }
            None
        }
    };
    if let Some(note) = turn.as_ref().and_then(|t| t.note.clone()) {
        notes.push(note);
    }
    // With namespaces and a quota the helper mounts a fresh tmpfs over the scratch dir and makes
    // HOME and TMPDIR inside it: the on-disk subdirs would only be hidden (and cost mkdirs).
    let subdirs = !(config.namespaces && support.namespaces && config.limits.scratch.is_some());
    let mut scratch = match Scratch::create(
        &scratch_root,
        config.follow.is_none(),
        action_id,
        &wd,
        &masked,
        subdirs,
    ) {
        Ok(scratch) => scratch,
        Err(message) => {
            tracing::error!("RunCommand scratch: {message}");
            return rejected(
                action_id,
                OutcomeCode::SandboxUnavailable,
                "the command was not run: its private scratch dir could not be created".into(),
                started,
            );
        }
    };
    sandbox::timing::mark("scratch");
    let mut spec = ExecSpec {
        program: resolved.program.clone(),
        argv: resolved.argv.clone(),
        cwd: cwd.clone(),
        env: sandbox::env::command_env(
            &scratch.path,
            sandbox::env::EnvShape {
                owner_home: Some(&config.owner_home),
                writes: match &turn {
                    Some(turn) if session_dir => sandbox::env::Writes::SessionDir(&turn.spec.dir),
                    Some(_) => sandbox::env::Writes::Layer,
                    None => sandbox::env::Writes::ScratchOnly,
                },
                path: &config.search_path,
            },
        ),
        scratch: scratch.path.clone(),
        // A managed worktree lives in the (masked) state dir; the command must still see it.
        visible: sandbox::visible_under_masks(&masked, &wd, config.own_worktree.as_deref()),
        masked,
        writable: Vec::new(),
        limits: config.limits,
        layer: turn.as_ref().map(|t| t.spec.clone()),
        namespaces: config.namespaces,
        status_fd: None,
        ahead: false,
        masked_as_prepared: false,
        hung: sandbox::protected::hung_mounts(),
    };
    #[cfg(target_os = "linux")]
    if let Err(problem) = helper_path(config) {
        tracing::error!("RunCommand helper: {problem}");
        return rejected(
            action_id,
            OutcomeCode::SandboxUnavailable,
            format!("the command was not run: {problem}"),
            started,
        );
    }
    let spawned = match config.ahead.take(&mut spec) {
        Some(prepared) => Ok(prepared),
        None => spawn(config, &mut spec),
    };
    let (child, status) = match spawned {
        Ok(spawned) => spawned,
        Err(message) => {
            tracing::error!("RunCommand helper: {message}");
            return rejected(
                action_id,
                OutcomeCode::SandboxUnavailable,
                "the command was not run: the sandbox helper could not be started".into(),
                started,
            );
        }
    };
    sandbox::timing::mark("spawned");
    let mut guard = turn.as_ref().map(layer::LayerTurn::guard);
    let mut run = supervise(child, status, args.timeout(), started, &mut || {
        guard.as_mut().is_some_and(|g| g.over_budget())
    });
    // macOS: the report is the broker's own (Seatbelt reports nothing); its profile allowed
    // the session dir.
    if session_dir
        && spec.layer.is_some()
        && let Some(report) = run.report.as_mut()
    {
        report.enforced.session_dir = true;
    }
    let stopped_by_guard = run.stopped_by_guard;
    if let Some((walks, walking)) = guard.as_ref().map(layer::LayerGuard::walks) {
        tracing::debug!(
            walks,
            walking_ms = walking.as_millis(),
            "the layer guard's walks"
        );
    }
    sandbox::timing::mark("exited");
    // Every process of the command is gone here (reaped, or told by the helper: `CommandEnd`);
    // a told helper is reaped, and the command's cgroups removed, after the answer.
    let killed = match run.unreaped.take() {
        Some(unreaped) => {
            let killed = oom_killed(run.report.as_ref());
            // A memory cgroup of the command's own (no session's: an older broker spec) is
            // gone when the answer comes, as before.
            if own_memory_cgroup(run.report.as_ref()) {
                unreaped.finish(run.report.as_ref());
            } else {
                config.settling.later(unreaped, run.report.clone());
            }
            killed
        }
        None => release_cgroups(run.report.as_ref()),
    };
    // After that cleanup, the next command's helper (off this answer's path).
    #[cfg(target_os = "linux")]
    if config.prepare_ahead && spec.namespaces && support.namespaces {
        config.prepare_next(std::mem::take(&mut spec.masked));
    }
    sandbox::timing::mark("released");
    let own_bound = run
        .report
        .as_ref()
        .and_then(|r| r.enforced.memory_cgroup_mb);
    let memory_code = match (killed, own_bound) {
        (Some(KilledAt::Command), Some(mb)) => {
            notes.push(format!(
                "the command went over its memory bound: its processes together may use {mb} \
                 MiB (CLAUDE_TOOLS_COMMAND_MEMORY_MB plus the scratch quota), and the kernel \
                 killed it"
            ));
            Some(OutcomeCode::MemoryLimitExceeded)
        }
        (Some(KilledAt::AllCommands), Some(_)) => {
            let all = config.limits.group.map_or(0, |g| g.bytes >> 20);
            notes.push(format!(
                "the command was killed: all commands of this gateway's sessions together \
                 reached their memory bound of {all} MiB (CLAUDE_TOOLS_COMMANDS_MEMORY_MB), and \
                 the kernel killed the largest of them, this one; run it again when fewer \
                 commands run"
            ));
            Some(OutcomeCode::AllCommandsMemoryExceeded)
        }
        _ => None,
    };
    // The helper mounted no tmpfs over the shared mount point (it fell back to Landlock only):
    // what the command wrote there goes with it.
    if run
        .report
        .as_ref()
        .is_none_or(|r| r.enforced.scratch_quota_mb.is_none())
    {
        scratch.remove = true;
    }
    drop(scratch);
    if stopped_by_guard && let Some(excess) = guard.as_ref().and_then(|g| g.exceeded()) {
        notes.push(format!(
            "the command was stopped: with its writes the session's layer {excess}"
        ));
    }
    // (Over its budget too, the budget is what the session can act on.)
    let disk_low = stopped_by_guard
        && guard
            .as_ref()
            .is_some_and(|g| g.exceeded().is_none() && g.disk_low().is_some());
    if stopped_by_guard && let Some(low) = guard.as_ref().and_then(|g| g.disk_low()) {
        notes.push(format!(
            "the command was stopped: {low}, and its writes were growing the session's layer; \
             the layers of all live sessions count: stop sessions you no longer need, or run \
             with `fresh_layer: true` to drop this session's earlier build outputs; the owner \
             can lower CLAUDE_TOOLS_COMMAND_LAYER_MB"
        ));
    }
    if let Some(over) = turn.and_then(layer::LayerTurn::finish) {
        notes.push(over);
    }
    sandbox::timing::mark("cleaned");
    let stamps = sandbox::timing::take();
    if !stamps.is_empty() {
        notes.push(format!("timing: {stamps}"));
    }
    let mut outcome = finish(action_id, &cwd, run, args.timeout(), started, &notes);
    if stopped_by_guard && outcome.status != ToolStatus::Rejected {
        outcome.status = ToolStatus::Error;
        outcome.error_code = Some(if disk_low {
            OutcomeCode::StorageFull
        } else {
            OutcomeCode::LayerOverBudget
        });
    } else if let Some(code) = memory_code
        && outcome.status == ToolStatus::Error
    {
        outcome.error_code = Some(code);
    }
    outcome
}

fn refusal_message(refusal: &CommandRefusal) -> String {
    format!("the command was not run: {refusal}")
}

/// `cwd`: absolute inside the working directory, or relative to it; must be a directory.
fn resolve_cwd(wd: &Path, cwd: Option<&str>) -> Result<PathBuf, CommandError> {
    let Some(given) = cwd else {
        return Ok(wd.to_path_buf());
    };
    let joined = if given.starts_with('/') {
        PathBuf::from(given)
    } else {
        wd.join(given)
    };
    let given = given.to_string();
    let Ok(canonical) = std::fs::canonicalize(&joined) else {
        return Err(CommandError::CwdMissing { given });
    };
    if !canonical.starts_with(wd) {
        return Err(CommandError::CwdOutside { given });
    }
    if !canonical.is_dir() {
        return Err(CommandError::CwdNotADirectory { given });
    }
    Ok(canonical)
}

/// The session's scratch mount point (in its scratch root) where the helper mounts each
/// command's private tmpfs: never written on disk, so it is kept across commands.
pub const SCRATCH_MOUNT_POINT: &str = "mnt";

/// The per-command scratch dir; removed on drop unless it is the session's mount point.
struct Scratch {
    path: PathBuf,
    /// Removed on drop: a per-command dir, or a mount point a command wrote to after all.
    remove: bool,
}

impl Scratch {
    /// `make_area`: the root's parent may be made here (fixed places); else it is the checked
    /// runtime area, which only the gateway makes (a name that went is never made again).
    fn create(
        root: &Path,
        make_area: bool,
        action_id: &str,
        wd: &Path,
        masked: &[PathBuf],
        subdirs: bool,
    ) -> Result<Self, CommandError> {
        use std::os::unix::fs::DirBuilderExt;
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        // The runtime area is in shared `/tmp`: it and the session's root must be ours, 0700.
        if let Some(area) = root.parent() {
            if make_area {
                sandbox::private_fs::ensure_private_dir(area)?;
            } else {
                sandbox::private_fs::check_private_dir(area)?;
            }
        }
        sandbox::private_fs::ensure_private_dir(root)?;
        let root = std::fs::canonicalize(root).map_err(|source| CommandError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        // A scratch root inside the working directory is fine only where the command's
        // writes stay invisible to the session: inside a masked (protected) place, e.g. the
        // runtime dir in a state dir that lies in a direct-write checkout.
        if wd.starts_with(&root)
            || (root.starts_with(wd) && !masked.iter().any(|m| root.starts_with(m)))
        {
            return Err(CommandError::ScratchOverlapsWorkingDirectory);
        }
        if !subdirs {
            // Namespaces and a quota: a fresh tmpfs in the command's own mount namespace covers
            // it, so one mount point serves every command (a mkdir and an rmdir fewer each;
            // the rmdir cost 4 ms p50 on a loaded disk). Emptied if a command ever wrote to it.
            let path = root.join(SCRATCH_MOUNT_POINT);
            sandbox::private_fs::ensure_private_dir(&path)?;
            let used = std::fs::read_dir(&path)
                .map_err(|source| CommandError::Io {
                    path: path.clone(),
                    source,
                })?
                .next()
                .is_some();
            if used {
                let _ = std::fs::remove_dir_all(&path);
                sandbox::private_fs::ensure_private_dir(&path)?;
            }
            return Ok(Self {
                path,
                remove: false,
            });
        }
        let safe: String = action_id
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .take(64)
            .collect();
        // No pid in the name: it is the command's HOME, which its output may show.
        let name = format!(
            "{safe}-{}-{}",
            uuid::Uuid::new_v4().simple(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let path = root.join(name);
        // A plain exclusive mkdir inside the checked private root, unsynced: a command's scratch
        // outlives no crash, and a directory fsync per command would cost every command.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|source| CommandError::Io {
                path: path.clone(),
                source,
            })?;
        let scratch = Self { path, remove: true };
        for sub in sandbox::env::SCRATCH_DIRS {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(scratch.path.join(sub))
                .map_err(|source| CommandError::Io {
                    path: PathBuf::from(sub),
                    source,
                })?;
        }
        Ok(scratch)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !self.remove {
            return;
        }
        if let Err(err) = std::fs::remove_dir_all(&self.path) {
            tracing::warn!("removing command scratch {}: {err}", self.path.display());
        }
    }
}

/// What a confined run of [`run_confined`] produced.
#[derive(Debug)]
pub struct ConfinedRun {
    /// The exit code (`None`: killed by a signal, or timed out).
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    /// Up to 64 KiB of each stream; `truncated` when either had more.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub truncated: bool,
}

/// Run `spec` through the pinned helper and wait at most `timeout` (the gateway's own confined
/// Git). Err: the helper could not start, refused (nothing ran), or did not confirm its
/// confinement (something may have run: the caller must treat its effects as unknown).
#[cfg(target_os = "linux")]
pub fn run_confined(
    helper: &PinnedExe,
    spec: &ExecSpec,
    timeout: Duration,
) -> Result<ConfinedRun, CommandError> {
    let path = helper.exec_path()?;
    let mut spec = spec.clone();
    let (child, status) = spawn_helper(&path, &mut spec)?;
    let mut run = supervise(child, status, timeout, Instant::now(), &mut || false);
    // The gateway's own Git: its helper is reaped before the answer.
    if let Some(unreaped) = run.unreaped.take() {
        unreaped.finish(run.report.as_ref());
    } else {
        release_cgroups(run.report.as_ref());
    }
    match &run.report {
        None => {
            let problem = run.report_problem.unwrap_or(ReportProblem::Missing);
            return Err(CommandError::Unconfirmed(problem));
        }
        Some(report) => {
            if let Some(problem) = &report.error {
                return Err(CommandError::NotConfined(problem.clone()));
            }
        }
    }
    let (exit_code, timed_out) = match run.ending {
        Ending::Exited(code) => (Some(code), false),
        Ending::TimedOut => (None, true),
        Ending::Signaled(_) | Ending::Unknown => (None, false),
    };
    Ok(ConfinedRun {
        exit_code,
        timed_out,
        truncated: run.stdout.truncated() || run.stderr.truncated(),
        stdout: run.stdout.kept,
        stderr: run.stderr.kept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_must_stay_inside_the_working_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let wd = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir(wd.join("sub")).unwrap();
        std::fs::write(wd.join("file"), "x").unwrap();
        assert_eq!(resolve_cwd(&wd, None).unwrap(), wd);
        assert_eq!(resolve_cwd(&wd, Some("sub")).unwrap(), wd.join("sub"));
        let abs = wd.join("sub").display().to_string();
        assert_eq!(resolve_cwd(&wd, Some(&abs)).unwrap(), wd.join("sub"));
        let refused = |cwd: &str| resolve_cwd(&wd, Some(cwd)).unwrap_err();
        for outside in ["..", "/"] {
            assert!(matches!(refused(outside), CommandError::CwdOutside { .. }));
        }
        assert_eq!(refused("nope").to_string(), r#"cwd "nope" does not exist"#);
        assert_eq!(
            refused("file").to_string(),
            r#"cwd "file" is not a directory"#
        );
        std::os::unix::fs::symlink("/", wd.join("escape")).unwrap();
        assert_eq!(
            refused("escape").to_string(),
            r#"cwd "escape" is outside the session's working directory"#
        );
    }

    /// The gateway's own Git quotes these after "git: ".
    #[test]
    fn confined_run_errors_keep_their_words() {
        let unconfirmed = CommandError::Unconfirmed(ReportProblem::EndedEarly);
        assert_eq!(
            unconfirmed.to_string(),
            "its confinement could not be confirmed (the sandbox helper ended before \
             reporting); it may have run"
        );
        let refused = CommandError::NotConfined("landlock: no_new_privs not set".into());
        assert_eq!(
            refused.to_string(),
            "not run: confinement could not be established (landlock: no_new_privs not set)"
        );
    }
}
