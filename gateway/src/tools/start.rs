//! `native_session_start`: its arguments, the checks a start must pass before anything is created
//! (the working directory resolved by identity against the protected set, the profile's write
//! root, skill contexts frozen, capacity), and the handler: write the skill snapshot, record the
//! session and its first lease, launch its runtime, release the first prompt, wait for the first
//! turn.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::hash::sha256_hex;
use common::outcome::OutcomeCode;
use common::time::now_unix_ms;
use common::tools::{CapabilityProfile, SubagentPolicy};
use sandbox::path_policy::WorkingDirRefusal;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{DEFAULT_START_WAIT, check_key, check_prompt, wait_seconds};
use crate::error::{ErrorCode, ToolError};
use crate::session::{Gateway, Scope, ToolResult, WaitFor, within_budget};
use crate::state::{SessionRecord, SessionStatus, Tx, Workspace, WorkspaceKind};
use crate::view::SessionView;

pub(super) const DESCRIPTION: &str = "Start a new Claude Code session on the owner's computer in \
    which you are the only model: each of its turns comes back to you as pending_turn, answered \
    with native_session_reply_and_wait. Use once per task; for a follow-up in an idle session use \
    native_session_continue, to regain one use native_session_recover. Waits up to wait_seconds \
    (default 30) for the first turn. Profiles: read_only (default) offers Read, FindFiles, \
    SearchText (anywhere on the computer except protected places such as credential stores, \
    the gateway's state and .git) and RunCommand (sandboxed, no network); direct_write adds \
    Edit, Write, NotebookEdit that change files in working_directory itself: use it only when \
    the user explicitly asks for edits in place; worktree_write (preferred for changes) makes \
    them in a new Git worktree on a new branch, leaving the checkout untouched, and needs \
    working_directory to be the top level of a Git repository with no uncommitted changes. \
    Keep lease_id (every later call) and recovery_token (shown only here).";

/// Input of `native_session_start`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StartArgs {
    /// The user's request: the session's first prompt.
    pub prompt: String,
    /// Absolute path of the directory to work in (the user's project).
    pub working_directory: String,
    /// New unique string per intended session; resending the same key and input replays the
    /// first answer instead of starting a second session.
    pub idempotency_key: String,
    /// What the session may do, fixed for its life (see the tool description); default
    /// `read_only`.
    #[serde(default)]
    pub capability_profile: Option<CapabilityProfile>,
    /// `none` (default). `deepseek_explicit` (worktree_write only) adds the
    /// deepseek_subagent_start/get/stop tools: one delegated task at a time, run by DeepSeek in
    /// this session's worktree, audited like the session's own actions.
    #[serde(default)]
    pub subagent_policy: Option<SubagentPolicy>,
    /// Short human-readable name for the session.
    #[serde(default)]
    pub session_label: Option<String>,
    /// Skills for the whole session (at most 8, each pinned by the owner); prompt turns carry
    /// their instructions.
    #[serde(default)]
    #[schemars(length(max = 8))]
    pub skill_contexts: Option<Vec<SkillContext>>,
    /// Seconds to wait for the first pending_turn (0-50, default 30).
    #[serde(default)]
    #[schemars(range(min = 0, max = 50))]
    pub wait_seconds: Option<u64>,
}

/// A skill to freeze into a new session (`skill_contexts` of `native_session_start`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillContext {
    /// `personal:<name>` (~/.claude/skills/<name>/SKILL.md) or `project:<name>` (the same in
    /// working_directory).
    pub skill_id: String,
}

/// Checked input of `native_session_start`.
pub struct StartRequest {
    pub prompt: String,
    /// As given; the session works in it as resolved by identity.
    pub working_directory: String,
    pub idempotency_key: String,
    pub capability_profile: CapabilityProfile,
    pub subagent_policy: SubagentPolicy,
    pub session_label: Option<String>,
    pub skill_contexts: Vec<SkillContext>,
    pub wait_seconds: u64,
    /// Canonical hash of the request, without `wait_seconds`.
    pub request_hash: String,
}

impl StartRequest {
    /// The arguments with their defaults; nothing checked yet.
    pub fn from_args(args: StartArgs, request_hash: String) -> Result<Self, ToolError> {
        Ok(StartRequest {
            wait_seconds: wait_seconds(args.wait_seconds, DEFAULT_START_WAIT)?,
            prompt: args.prompt,
            working_directory: args.working_directory,
            idempotency_key: args.idempotency_key,
            capability_profile: args
                .capability_profile
                .unwrap_or(CapabilityProfile::ReadOnly),
            subagent_policy: args.subagent_policy.unwrap_or(SubagentPolicy::None),
            session_label: args.session_label,
            skill_contexts: args.skill_contexts.unwrap_or_default(),
            request_hash,
        })
    }
}

pub(super) async fn handle(
    gateway: &Arc<Gateway>,
    args: StartArgs,
    request_hash: String,
) -> ToolResult<SessionView> {
    start(gateway, StartRequest::from_args(args, request_hash)?).await
}

/// Start a session for a request whose arguments parsed.
pub async fn start(gateway: &Arc<Gateway>, mut req: StartRequest) -> ToolResult<SessionView> {
    let started = tokio::time::Instant::now();
    let request =
        crate::session::Request::new(Scope::Start, "", &req.idempotency_key, &req.request_hash);
    if let Some(view) = gateway.replayed(&request)? {
        return Ok(view);
    }
    // The session works in the directory as resolved by identity (the path checked).
    let resolved = check(gateway, &req)?;
    // Frozen now, from the resolved directory: nothing later reads the skill files again.
    let skills = freeze_skills(gateway, &req, &resolved)?;
    let source_directory = resolved.display().to_string();
    // Checked before anything is created (no worktree), and again in the transaction that
    // records the session, so concurrent starts cannot overshoot.
    gateway.store.read(|tx| ensure_capacity(gateway, tx))?;
    // A checkout's size is known only once it is made and measured: `worktree_write` starts
    // hold this from the check to that measurement, so concurrent ones cannot each pass the
    // check before any checkout counts (check-then-act).
    let one_checkout_at_a_time = match req.capability_profile {
        CapabilityProfile::WorktreeWrite => Some(gateway.worktree_starts.lock().await),
        _ => None,
    };
    gateway.state_budget.check("nothing was started")?;
    gateway.state_budget.charge_text(&req.prompt);

    let session_id = format!("ns_{}", uuid::Uuid::new_v4().simple());
    let state_dir = gateway.config.state_dir.clone();
    if !skills.is_empty() {
        // Before the session is recorded: a recorded session always finds its snapshot.
        crate::skills::write_snapshot(&state_dir, &session_id, &skills).map_err(|err| {
            tracing::error!(session = %session_id, "writing the skill snapshot: {err:#}");
            ToolError::new(
                ErrorCode::Internal,
                "the skill snapshot could not be saved; nothing was started. Try again",
            )
        })?;
    }
    let (workspace, worktree) =
        match prepare_workspace(gateway, &req, &source_directory, &session_id).await {
            Ok(prepared) => {
                if prepared.1.is_some() {
                    // A checkout of unknown size: measured now, before the next worktree start
                    // checks the budget.
                    let budget = gateway.state_budget.clone();
                    if tokio::task::spawn_blocking(move || budget.refresh_now())
                        .await
                        .is_err()
                    {
                        gateway.state_budget.measure_soon();
                    }
                }
                drop(one_checkout_at_a_time);
                prepared
            }
            Err(err) => {
                crate::skills::discard_snapshot(&state_dir, &session_id);
                return Err(err);
            }
        };
    let snapshot = skills.iter().map(|s| s.entry()).collect();
    let mut session = new_record(&req, &session_id, source_directory, workspace, snapshot);
    let prompt_id = format!("prompt_{}", uuid::Uuid::new_v4().simple());
    let created = gateway.store.write(|tx| {
        ensure_capacity(gateway, tx)?;
        gateway.claim(tx, &request, &session_id, 1)?;
        tx.put_session(&session)?;
        let expires = gateway.grant_lease(tx, &session_id, 1)?;
        let event = session.started(
            expires,
            prompt_id.clone(),
            sha256_hex(req.prompt.as_bytes()),
        );
        gateway.commit(tx, &mut session, &event)?;
        Ok::<_, ToolError>(())
    });
    if let Err(err) = created {
        crate::skills::discard_snapshot(&state_dir, &session_id);
        if let Some(worktree) = &worktree {
            crate::worktree::GitRunner::new(&gateway.config)
                .discard(Path::new(&session.source_directory), worktree);
        }
        // A concurrent identical start won the claim: answer as its replay.
        if let Some(view) = gateway.replayed(&request)? {
            return Ok(view);
        }
        return Err(err);
    }
    for skill in &session.skill_snapshot {
        // Ids and hashes only: a body is the user's (or the repository's) text.
        tracing::info!(session = %session_id, skill = %skill.skill_id,
            sha256 = %skill.content_sha256, "skill frozen");
    }

    if let Err(launch_error) = gateway.launch(&session, 1, false).await {
        let session = gateway.store.write(|tx| {
            let mut current = gateway.session(tx, &session_id)?;
            let event = current.launch_failed(launch_error);
            gateway.commit(tx, &mut current, &event)?;
            Ok::<_, ToolError>(current)
        })?;
        gateway.notify(&session);
    } else {
        let prompt = std::mem::take(&mut req.prompt);
        gateway.release_prompt(&session_id, prompt_id, prompt, None)?;
    }

    let session = gateway
        .wait_until(
            &session_id,
            within_budget(started, Duration::from_secs(req.wait_seconds)),
            WaitFor::NextTurn,
        )
        .await?;
    let lease_id = gateway.lease_id(&session_id, 1);
    let mut view = gateway.view(&session, Some(lease_id))?;
    gateway.remember(&request, &view, 1);
    view.recovery_token = Some(gateway.recovery_token(&session_id));
    Ok(view)
}

/// The record of a new session, `starting`, with lease generation 1 and its frozen skills.
fn new_record(
    req: &StartRequest,
    session_id: &str,
    source_directory: String,
    workspace: Workspace,
    skill_snapshot: Vec<crate::state::SkillSnapshotEntry>,
) -> SessionRecord {
    let working_directory = workspace
        .worktree_path
        .clone()
        .unwrap_or_else(|| source_directory.clone());
    let workspace_identity = crate::state::WorkspaceIdentity::measure(
        std::path::Path::new(&working_directory),
        req.capability_profile == CapabilityProfile::WorktreeWrite,
    );
    SessionRecord {
        id: session_id.to_string(),
        label: req.session_label.clone(),
        status: SessionStatus::Starting,
        revision: 0,
        profile: req.capability_profile,
        subagent_policy: req.subagent_policy,
        source_directory,
        working_directory,
        workspace,
        claude_session_id: uuid::Uuid::new_v4().to_string(),
        created_at_ms: now_unix_ms(),
        lease_generation: 1,
        lease_expires_at_ms: 0,
        current_run: None,
        pending_turn_id: None,
        last_result: None,
        launch_error: None,
        stop_request: None,
        terminal: None,
        recovery_required: false,
        workspace_identity,
        conversation_restart: None,
        restart_notice_pending: false,
        network_boundary: crate::boundary::network_boundary(),
        skill_snapshot,
        broker: None,
        turn_sequence: 0,
        last_reply_turn_id: None,
        closing_reply: None,
        undelivered_prompt: None,
        undelivered_reply_turn: None,
        subsessions: Vec::new(),
        delegation: None,
        content_pruned: None,
    }
}

/// Refuse a start this gateway cannot honour, before anything is created. Returns the working
/// directory resolved by identity (canonical), which the session uses.
pub(crate) fn check(gateway: &Gateway, req: &StartRequest) -> Result<PathBuf, ToolError> {
    check_prompt(&req.prompt)?;
    check_key("idempotency_key", &req.idempotency_key)?;
    if let Some(label) = &req.session_label {
        super::check_label(label)?;
    }
    if req.subagent_policy == SubagentPolicy::DeepseekExplicit
        && req.capability_profile != CapabilityProfile::WorktreeWrite
    {
        return Err(ToolError::invalid(format!(
            "subagent_policy deepseek_explicit needs capability_profile worktree_write (a \
             sub-session writes only in the session's own worktree), got {}",
            req.capability_profile.as_str()
        )));
    }
    if req.working_directory.len() > super::MAX_WORKING_DIRECTORY_BYTES {
        return Err(ToolError::invalid(format!(
            "working_directory is longer than {} bytes ({}); give the project's directory",
            super::MAX_WORKING_DIRECTORY_BYTES,
            super::shown(&req.working_directory)
        )));
    }
    let dir = Path::new(&req.working_directory);
    if !dir.is_absolute() {
        return Err(ToolError::invalid(format!(
            "working_directory must be an absolute path, got {}",
            super::shown(&req.working_directory)
        )));
    }
    if dir
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(ToolError::invalid(
            "working_directory must not contain `..` segments",
        ));
    }
    // Every profile: resolved by identity (canonical, opened without following anything, every
    // component's device and inode checked against the protected set and its mount aliases).
    let resolved = match gateway.config.start_policy().resolve_working_directory(dir) {
        Ok(resolved) => resolved,
        Err(refusal @ (WorkingDirRefusal::NotFound | WorkingDirRefusal::NotADirectory)) => {
            return Err(ToolError::invalid(format!(
                "{refusal} ({})",
                super::shown(&req.working_directory)
            )));
        }
        Err(refusal) if refusal.code() == OutcomeCode::NotPermitted => {
            return Err(ToolError::new(ErrorCode::NotPermitted, refusal.to_string()));
        }
        Err(refusal) => return Err(ToolError::invalid(refusal.to_string())),
    };
    if std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.file_type().is_symlink()) {
        return Err(ToolError::invalid(
            "working_directory is a symlink; give the real directory path",
        ));
    }
    if req.capability_profile == CapabilityProfile::DirectWrite {
        // The write root must itself be writable under the write policy: not protected, not an
        // install location, no `.git` or symlink component (the broker opens it the same way).
        if let Some(reason) =
            sandbox::protected::unfit_write_root(&resolved, &gateway.config.owner_home)
        {
            return Err(ToolError::new(
                ErrorCode::NotPermitted,
                format!("direct_write cannot use this working_directory: it {reason}"),
            ));
        }
        let policy = gateway.config.write_policy(None);
        if let Err(refusal) = sandbox::write_path::WriteRoot::open(&policy, &resolved) {
            return Err(ToolError::new(
                ErrorCode::NotPermitted,
                format!("direct_write cannot write in this working_directory: {refusal}"),
            ));
        }
    }
    Ok(resolved)
}

/// The start's skill contexts checked and frozen (see [`crate::skills::freeze`]): `personal:`
/// under the owner's HOME, `project:` under the resolved source directory.
fn freeze_skills(
    gateway: &Gateway,
    req: &StartRequest,
    source_directory: &Path,
) -> Result<Vec<crate::skills::FrozenSkill>, ToolError> {
    if req.skill_contexts.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = req
        .skill_contexts
        .iter()
        .map(|s| s.skill_id.clone())
        .collect();
    let policy = gateway.config.path_policy();
    let sources = crate::skills::SkillSources {
        allowlist: &gateway.config.skill_allowlist,
        policy: &policy,
        owner_home: &gateway.config.owner_home,
        source_directory,
    };
    crate::skills::freeze(&sources, &ids)
}

/// `busy` when `CLAUDE_TOOLS_MAX_LIVE_SESSIONS` sessions are already live (not terminal): each
/// holds a broker and a runner (about 180 MiB); `storage_full` when the disk holding command
/// layers has no room for one more full layer (`sandbox::layer::room_for_layer`: layers still
/// being deleted count).
fn ensure_capacity(gateway: &Gateway, tx: &Tx<'_>) -> ToolResult<()> {
    if let Some(layer_mb) = gateway.config.command_limits.layer_mb
        && layers_here()
    {
        let area = sandbox::protected::command_runtime_area(&gateway.config.state_dir);
        if let Err(no_room) =
            sandbox::layer::room_for_layer(&area, layer_mb.saturating_mul(1 << 20))
        {
            return Err(ToolError::new(
                ErrorCode::StorageFull,
                format!("nothing was started: {no_room}"),
            ));
        }
    }
    let live = tx.live_session_count()?;
    let max = gateway.config.max_live_sessions;
    if live >= max {
        return Err(ToolError::new(
            ErrorCode::Busy,
            format!(
                "{live} sessions are live and this gateway allows at most {max} at once; nothing \
                 was started. Stop a session you no longer need with native_session_stop (or let \
                 an idle one's lease expire), then start again; the owner can raise \
                 CLAUDE_TOOLS_MAX_LIVE_SESSIONS"
            ),
        ));
    }
    Ok(())
}

/// Whether this host gives commands a layer (overlays, or macOS's writable session dir).
fn layers_here() -> bool {
    let support = sandbox::host_support();
    support.copy_on_write() || support.session_dir()
}

/// Where a new session works: the directory itself (`read_only`, `direct_write`), or a new
/// managed worktree of it (`worktree_write`). Returns the `workspace` record and the worktree to
/// discard if the session is not recorded.
async fn prepare_workspace(
    gateway: &Gateway,
    req: &StartRequest,
    root: &str,
    session_id: &str,
) -> ToolResult<(Workspace, Option<crate::worktree::Worktree>)> {
    let root = root.to_string();
    match req.capability_profile {
        CapabilityProfile::ReadOnly => {
            Ok((Workspace::in_place(WorkspaceKind::ReadOnly, root), None))
        }
        CapabilityProfile::DirectWrite => {
            Ok((Workspace::in_place(WorkspaceKind::Direct, root), None))
        }
        CapabilityProfile::WorktreeWrite => {
            let source = PathBuf::from(&root);
            let dir = gateway.config.worktree_dir.clone();
            let id = session_id.to_string();
            let git = crate::worktree::GitRunner::new(&gateway.config);
            let worktree = tokio::task::spawn_blocking(move || {
                let base = git.check_source(&source)?;
                git.create(&source, &dir, &id, &base)
            })
            .await
            .map_err(|err| {
                ToolError::new(
                    ErrorCode::Internal,
                    format!(
                        "creating the worktree failed ({err}); nothing was started. Retry, or \
                         start with direct_write"
                    ),
                )
            })??;
            let workspace = Workspace {
                kind: WorkspaceKind::Worktree,
                root,
                worktree_path: Some(worktree.path.display().to_string()),
                branch: Some(worktree.branch.clone()),
                base_commit: Some(worktree.base_commit.clone()),
            };
            Ok((workspace, Some(worktree)))
        }
    }
}
