//! Managed Git worktrees of `worktree_write` sessions (DESIGN §5, §6): the source must be the
//! clean top level of a repository; the gateway adds a retained worktree on a new branch under
//! its worktree dir and never touches the source checkout's files, HEAD or index.
//!
//! Every git command the gateway runs on a user's repository runs confined: through the pinned
//! `sandbox-exec` helper, like RunCommand (no network, the credential stores and the state dir
//! masked, read-only everywhere except the new worktree and the few directories of the source's
//! `.git` that `git worktree add` writes). Git runs with a fixed environment: no system or global
//! config, no optional locks (so `status` never rewrites the source's index), hooks, fsmonitor,
//! pagers, editors, credential helpers, ssh and every transport switched off on the command line
//! (which outranks the repository's config). What the command line cannot switch off — filter
//! drivers, a redirected work tree, config-defined hooks — is refused, and the check is made twice:
//! on the source, and on the new worktree before anything is checked out there (its branch and
//! git dir can select other config through `includeIf "onbranch:…"`/`"gitdir:…"`). The worktree
//! is added with `--no-checkout` and filled by a separate `reset --hard` after that check.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::Config;
use crate::error::{ErrorCode, ToolError};

/// What [`GitRunner::create`] made, as recorded in the session's `workspace`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    pub path: PathBuf,
    pub branch: String,
    pub base_commit: String,
}

/// Configuration given on git's command line: it outranks every config file, includes too.
const COMMAND_LINE_CONFIG: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    ("submodule.recurse", "false"),
    ("core.sshCommand", "false"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
];

/// How long one git command may take (a large checkout included).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const GIT_TIMEOUT: Duration = Duration::from_secs(300);
/// The command's scratch (HOME, TMPDIR) quota.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const GIT_SCRATCH_BYTES: u64 = 64 << 20;

/// Repository config keys that make git run a program, or write elsewhere, in the commands the
/// gateway runs, and that the command line cannot switch off: refused. (Hooks, fsmonitor, pagers,
/// editors, credential helpers, ssh and transports are switched off above; textconv,
/// `diff.external`, merge drivers and gpg programs are never reached by the commands run here, and
/// would run confined if they were.)
pub fn refused_config_key(key: &str) -> Option<&'static str> {
    let key = key.to_ascii_lowercase();
    if key.starts_with("filter.")
        && (key.ends_with(".clean") || key.ends_with(".smudge") || key.ends_with(".process"))
    {
        return Some("defines a filter driver, which checking out would run");
    }
    if key == "core.worktree" {
        return Some("moves the work tree elsewhere, where checking out would write");
    }
    if key.starts_with("hook.") {
        return Some("defines a hook in config, which git may run");
    }
    None
}

/// Runs the gateway's git commands on users' repositories, confined.
pub struct GitRunner {
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    helper: std::sync::Arc<sandbox::pinned_exe::PinnedExe>,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    masked: Vec<PathBuf>,
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    scratch_root: PathBuf,
    policy: sandbox::path_policy::PathPolicy,
}

/// A per-command scratch dir (HOME, TMPDIR), removed on drop.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn invalid(message: String) -> ToolError {
    ToolError::invalid(message)
}

/// Why a confined git command did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("this host cannot confine the gateway's git commands")]
    CannotConfine,
    /// The command could not be set up or started.
    #[error("{0}")]
    Setup(String),
    #[error("git did not finish within {0} s")]
    Timeout(u64),
    #[error("git's output was larger than expected")]
    OutputTooLarge,
    /// Git ran and failed: its first line of stderr.
    #[error("{0}")]
    Failed(String),
}

fn internal(message: String) -> ToolError {
    ToolError::new(ErrorCode::Internal, message)
}

impl GitRunner {
    pub fn new(config: &Config) -> Self {
        Self {
            helper: config.exe.clone(),
            masked: sandbox::masked_paths(
                &config.owner_home,
                &config.state_dir,
                &config.extra_protected,
            ),
            scratch_root: config.state_dir.join("run").join("git"),
            policy: config.path_policy(),
        }
    }

    /// A runner with an explicit helper and protected set (tests).
    pub fn from_parts(
        helper: std::sync::Arc<sandbox::pinned_exe::PinnedExe>,
        owner_home: &Path,
        state_dir: &Path,
        policy: sandbox::path_policy::PathPolicy,
    ) -> Self {
        Self {
            helper,
            masked: sandbox::masked_paths(owner_home, state_dir, &[]),
            scratch_root: state_dir.join("run").join("git"),
            policy,
        }
    }

    /// Run `git <args>` in `dir`, confined, allowed to write only `writable`; stdout on success,
    /// a short reason otherwise.
    pub fn run(&self, dir: &Path, args: &[&str], writable: &[PathBuf]) -> Result<String, GitError> {
        let mut argv: Vec<String> = vec!["git".into()];
        for (key, value) in COMMAND_LINE_CONFIG {
            argv.push("-c".into());
            argv.push(format!("{key}={value}"));
        }
        argv.push("-C".into());
        argv.push(dir.display().to_string());
        argv.extend(args.iter().map(|a| a.to_string()));
        self.run_argv(dir, argv, writable)
    }

    #[cfg(target_os = "linux")]
    fn run_argv(
        &self,
        dir: &Path,
        argv: Vec<String>,
        writable: &[PathBuf],
    ) -> Result<String, GitError> {
        use sandbox::private_fs::{OpenDir, create_private_dir, ensure_private_dir_with};
        if !sandbox::host_support().can_confine() {
            return Err(GitError::CannotConfine);
        }
        let program = sandbox::command::resolve_executable(
            "git",
            Path::new("/"),
            Path::new("/"),
            sandbox::command::FIXED_PATH,
        )
        .map_err(|e| GitError::Setup(e.to_string()))?;
        ensure_private_dir_with(&self.scratch_root, OpenDir::Restrict)
            .map_err(|e| GitError::Setup(format!("git scratch: {e}")))?;
        let scratch = Scratch(
            self.scratch_root
                .join(uuid::Uuid::new_v4().simple().to_string()),
        );
        for sub in [None, Some("home"), Some("tmp")] {
            let path = sub.map_or_else(|| scratch.0.clone(), |s| scratch.0.join(s));
            create_private_dir(&path).map_err(|e| GitError::Setup(format!("git scratch: {e}")))?;
        }
        let mut env: Vec<(String, String)> = sandbox::env::command_env(
            &scratch.0,
            sandbox::env::EnvShape {
                owner_home: None,
                writes: sandbox::env::Writes::ScratchOnly,
                path: sandbox::command::FIXED_PATH,
            },
        );
        env.extend(
            [
                ("GIT_ALLOW_PROTOCOL", ""),
                ("GIT_SSH_COMMAND", "false"),
                ("GIT_NO_LAZY_FETCH", "1"),
                ("GIT_NO_REPLACE_OBJECTS", "1"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        // Under the masks (the worktree dir lies in the state dir) they must stay readable too.
        // These are paths the gateway chose (the validated source and the new session's
        // worktree), never a session's input, so each may be bound back as its own.
        let mut visible = Vec::new();
        for path in std::iter::once(dir).chain(writable.iter().map(PathBuf::as_path)) {
            visible.extend(sandbox::visible_under_masks(&self.masked, path, Some(path)));
        }
        let spec = sandbox::ExecSpec {
            program,
            argv,
            cwd: dir.to_path_buf(),
            env,
            scratch: scratch.0.clone(),
            masked: self.masked.clone(),
            visible,
            writable: writable.to_vec(),
            limits: sandbox::Limits {
                // A checkout may write large files; the session's own commands keep their limit.
                fsize: 1 << 40,
                scratch: Some(GIT_SCRATCH_BYTES),
                ..sandbox::Limits::default()
            },
            // The gateway's git writes exactly the dirs above, for real.
            layer: None,
            namespaces: true,
            status_fd: None,
            ahead: false,
            masked_as_prepared: false,
            hung: sandbox::protected::hung_mounts(),
        };
        let run = broker::executor::run_confined(&self.helper, &spec, GIT_TIMEOUT)
            .map_err(|problem| GitError::Setup(format!("git: {problem}")))?;
        drop(scratch);
        if run.timed_out {
            return Err(GitError::Timeout(GIT_TIMEOUT.as_secs()));
        }
        if run.truncated {
            return Err(GitError::OutputTooLarge);
        }
        if run.exit_code == Some(0) {
            return Ok(String::from_utf8_lossy(&run.stdout).into_owned());
        }
        let stderr = String::from_utf8_lossy(&run.stderr);
        let first = stderr.lines().next().unwrap_or("").trim();
        Err(GitError::Failed(if first.is_empty() {
            format!("git exited with {:?}", run.exit_code)
        } else {
            first.to_string()
        }))
    }

    /// Other OSes: no command sandbox for the gateway's own git (macOS commands use Seatbelt
    /// profiles the gateway does not build for itself); the same fixed environment and checks.
    #[cfg(not(target_os = "linux"))]
    fn run_argv(
        &self,
        dir: &Path,
        argv: Vec<String>,
        _writable: &[PathBuf],
    ) -> Result<String, GitError> {
        let mut cmd = std::process::Command::new("git");
        cmd.env_clear()
            .env("PATH", sandbox::command::FIXED_PATH)
            .env("LC_ALL", "C")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_ALLOW_PROTOCOL", "")
            .env("GIT_PAGER", "cat")
            .args(argv.get(1..).unwrap_or(&[]))
            .current_dir(dir)
            .stdin(std::process::Stdio::null());
        let out = cmd
            .output()
            .map_err(|err| GitError::Setup(format!("git could not be started: {err}")))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let first = stderr.lines().next().unwrap_or("").trim();
            Err(GitError::Failed(if first.is_empty() {
                format!("git exited with {}", out.status)
            } else {
                first.to_string()
            }))
        }
    }

    /// Refuse a repository whose effective config in `dir` (includes evaluated there: its branch,
    /// its git dir) would make git run a program or write elsewhere.
    fn check_config(
        &self,
        dir: &Path,
        writable: &[PathBuf],
        context: &str,
    ) -> Result<(), ToolError> {
        let keys = self
            .run(
                dir,
                &["config", "--includes", "--null", "--name-only", "--list"],
                writable,
            )
            .map_err(|err| internal(format!("reading the repository's config failed: {err}")))?;
        if let Some((key, why)) = keys
            .split(['\0', '\n'])
            .find_map(|key| refused_config_key(key).map(|why| (key, why)))
        {
            return Err(ToolError::new(
                ErrorCode::NotPermitted,
                format!(
                    "the repository's own config {context}sets {key}, which {why}; the gateway \
                     does not run repository-configured programs. Remove it or use direct_write"
                ),
            ));
        }
        Ok(())
    }

    /// Check that `source` is the clean top level of a Git repository that is safe to check out.
    /// Returns the commit HEAD points at.
    pub fn check_source(&self, source: &Path) -> Result<String, ToolError> {
        let shown = source.display();
        let top = self
            .run(source, &["rev-parse", "--show-toplevel"], &[])
            .map_err(|_| {
                invalid(format!(
                    "worktree_write needs a Git repository: {shown} is not inside one (use \
                     direct_write for a plain directory)"
                ))
            })?;
        let top = PathBuf::from(top.trim_end_matches('\n'));
        let canonical = std::fs::canonicalize(source).unwrap_or_else(|_| source.to_path_buf());
        if top != canonical {
            return Err(invalid(format!(
                "worktree_write needs the top level of the repository: give {} instead of {shown}",
                top.display()
            )));
        }
        self.check_config(source, &[], "")?;
        let head = self
            .run(source, &["rev-parse", "--verify", "HEAD^{commit}"], &[])
            .map_err(|_| {
                invalid(format!(
                    "{shown} has no commit yet; commit once before using worktree_write"
                ))
            })?;
        let status = self
            .run(
                source,
                &["status", "--porcelain=v1", "--untracked-files=all"],
                &[],
            )
            .map_err(|err| invalid(format!("git status failed in {shown}: {err}")))?;
        let dirty = status.lines().filter(|l| !l.is_empty()).count();
        if dirty > 0 {
            return Err(invalid(format!(
                "{shown} has {dirty} uncommitted or untracked change(s); worktree_write needs a \
                 clean checkout: commit or stash them first"
            )));
        }
        Ok(head.trim().to_string())
    }

    /// The directories of the source's `.git` that `git worktree add -b` writes (created here if
    /// missing), checked: real directories (no symlink anywhere below the common dir), not
    /// protected.
    fn git_dirs_written(&self, source: &Path) -> Result<Vec<PathBuf>, ToolError> {
        let common = self
            .run(
                source,
                &["rev-parse", "--path-format=absolute", "--git-common-dir"],
                &[],
            )
            .map_err(|err| internal(format!("locating the repository's git dir: {err}")))?;
        let common = std::fs::canonicalize(common.trim_end_matches('\n'))
            .map_err(|err| internal(format!("locating the repository's git dir: {err}")))?;
        // The git dir is Git internals by name; where it lies must not be protected (a `.git`
        // file can point anywhere).
        let holder = common.parent().unwrap_or(&common);
        self.policy.check(holder).map_err(|refusal| {
            ToolError::new(
                ErrorCode::NotPermitted,
                format!("the repository's git dir lies in a protected location: {refusal}"),
            )
        })?;
        let mut dirs = vec![
            common.join("worktrees"),
            common.join("refs/heads/ngw"),
            common.join("logs/refs/heads/ngw"),
        ];
        if common.join("reftable").is_dir() {
            dirs.push(common.join("reftable"));
        }
        for dir in &dirs {
            let relative = dir.strip_prefix(&common).unwrap_or(dir);
            let mut at = common.clone();
            // Whether `dir` existed before: a directory made here is a new object, no alias of a
            // protected one, and a protected identity it happens to share is a deleted entry's
            // reused inode number (seen with parallel gateways that delete their state dirs).
            let mut existed = true;
            for part in relative.components() {
                at.push(part);
                match std::fs::symlink_metadata(&at) {
                    Ok(meta) if meta.file_type().is_dir() => {}
                    Ok(_) => {
                        return Err(ToolError::new(
                            ErrorCode::NotPermitted,
                            format!(
                                "the repository's git dir has a symlink or file at {} where git \
                                 writes a new worktree; refused",
                                at.display()
                            ),
                        ));
                    }
                    Err(_) => {
                        std::fs::create_dir(&at).map_err(|err| {
                            internal(format!("preparing {}: {err}", at.display()))
                        })?;
                        existed = false;
                    }
                }
            }
            use std::os::unix::fs::MetadataExt;
            let identity = std::fs::metadata(dir).map(|m| (m.dev(), m.ino()));
            if existed
                && identity.is_ok_and(|(dev, ino)| self.policy.is_protected_identity(dev, ino))
            {
                return Err(ToolError::new(
                    ErrorCode::NotPermitted,
                    format!(
                        "the repository's git dir lies in a protected location ({}); refused",
                        dir.display()
                    ),
                ));
            }
        }
        Ok(dirs)
    }

    /// Add the session's worktree: branch `ngw/<session>` at `base_commit`, at
    /// `<worktree_dir>/<session_id>`. The config is checked again in the new worktree (its
    /// branch and git dir) before it is checked out.
    pub fn create(
        &self,
        source: &Path,
        worktree_dir: &Path,
        session_id: &str,
        base_commit: &str,
    ) -> Result<Worktree, ToolError> {
        let path = worktree_dir.join(session_id);
        let branch = format!("ngw/{}", crate::state::id_suffix(session_id));
        let mut writable = self.git_dirs_written(source)?;
        // An empty directory is where the confined git may write the worktree.
        std::fs::create_dir(&path)
            .map_err(|err| internal(format!("creating the worktree dir: {err}")))?;
        writable.push(path.clone());
        let worktree = Worktree {
            path: path.clone(),
            branch: branch.clone(),
            base_commit: base_commit.to_string(),
        };
        let path_text = path.display().to_string();
        if let Err(err) = self.run(
            source,
            &[
                "worktree",
                "add",
                "--quiet",
                "--no-checkout",
                "--no-track",
                "-b",
                &branch,
                &path_text,
                base_commit,
            ],
            &writable,
        ) {
            let _ = std::fs::remove_dir(&path);
            return Err(internal(format!(
                "the worktree could not be created: {err}"
            )));
        }
        if let Err(err) = self.check_config(&path, &writable, "on the new branch ") {
            self.discard(source, &worktree);
            return Err(err);
        }
        if let Err(err) = self.run(&path, &["reset", "--hard", "--quiet", "HEAD"], &writable) {
            self.discard(source, &worktree);
            return Err(internal(format!(
                "the worktree could not be checked out: {err}"
            )));
        }
        Ok(worktree)
    }

    /// Undo [`GitRunner::create`] for a session that was never recorded (best effort).
    pub fn discard(&self, source: &Path, worktree: &Worktree) {
        let Ok(mut writable) = self.git_dirs_written(source) else {
            return;
        };
        // `worktree remove` deletes the worktree's own directory: its parent must be writable.
        if let Some(parent) = worktree.path.parent() {
            writable.push(parent.to_path_buf());
        }
        let path = worktree.path.display().to_string();
        if let Err(err) = self.run(source, &["worktree", "remove", "--force", &path], &writable) {
            tracing::warn!("discarding worktree: {err}");
            let _ = std::fs::remove_dir_all(&worktree.path);
            let _ = self.run(source, &["worktree", "prune"], &writable);
        }
        // Deleting a branch locks `packed-refs` in the git dir itself, which stays read-only: the
        // branch was just created as a loose ref, so its files are removed directly (reftable
        // repositories write only below `reftable/`, which is writable).
        let reftable = writable.iter().any(|d| d.ends_with("reftable"));
        if reftable {
            if let Err(err) = self.run(source, &["branch", "-D", &worktree.branch], &writable) {
                tracing::warn!("discarding branch: {err}");
            }
            return;
        }
        let name = worktree.branch.trim_start_matches("ngw/");
        for dir in writable
            .iter()
            .filter(|d| d.ends_with("refs/heads/ngw") || d.ends_with("logs/refs/heads/ngw"))
        {
            let file = dir.join(name);
            if std::fs::symlink_metadata(&file).is_ok_and(|m| m.file_type().is_file())
                && let Err(err) = std::fs::remove_file(&file)
            {
                tracing::warn!("discarding branch: {err}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_keys_cover_what_the_command_line_cannot_switch_off() {
        for key in [
            "filter.lfs.smudge",
            "filter.X.Clean",
            "filter.evil.process",
            "core.worktree",
            "hook.pre-commit.command",
        ] {
            assert!(refused_config_key(key).is_some(), "{key}");
        }
        for key in [
            "filter.lfs.required",
            "core.bare",
            "user.name",
            "core.hookspath",
            "diff.x.textconv",
        ] {
            assert!(refused_config_key(key).is_none(), "{key}");
        }
    }
}
