//! Gateway configuration: the state dir and its layout, the access token, and tunables, read from
//! flags and environment once at start.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sandbox::pinned_exe::PinnedExe;

use anyhow::{Context, bail};

use crate::private_files::{private_dir, write_private_file};

/// Settled configuration of one gateway process.
#[derive(Debug, Clone)]
pub struct Config {
    pub state_dir: PathBuf,
    pub access_token: String,
    pub lease_ttl: Duration,
    /// How long `reply_and_wait` waits for the next turn (kept under ChatGPT's ~60 s limit).
    pub reply_wait: Duration,
    pub claude_bin: PathBuf,
    /// This gateway's own executable, pinned (hashed, sealed copy) at start: brokers are
    /// started from it as `<exe> broker --spec <file>`, and it is the command sandbox helper.
    pub exe: Arc<PinnedExe>,
    /// Where this gateway's executable is installed (the path it was started from): never
    /// writable by a session, although brokers and the helper run from the pinned copy.
    pub install_path: PathBuf,
    /// Per-command limits handed to every broker.
    pub command_limits: common::protocol::CommandLimits,
    /// The PATH commands search: `CLAUDE_TOOLS_COMMAND_PATH`, else this gateway's `PATH` at
    /// start, filtered (`sandbox::command::command_path`).
    pub command_path: String,
    /// Live sessions allowed at once (`CLAUDE_TOOLS_MAX_LIVE_SESSIONS`).
    pub max_live_sessions: usize,
    /// The state dir's disk budget, MiB (`CLAUDE_TOOLS_STATE_MAX_MB`).
    pub state_max_mb: u64,
    /// How long ended sessions' files are kept (`CLAUDE_TOOLS_RETENTION_DAYS`).
    pub retention: Duration,
    pub owner_home: PathBuf,
    pub extra_protected: Vec<PathBuf>,
    /// Auto-run classes sessions may write (`CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES`; none by
    /// default, an unknown class name refuses the start).
    pub autorun_allowed: sandbox::protected::autorun::AutorunAllowed,
    /// Writes refuse the definitions of the checks git hooks run (`CLAUDE_TOOLS_STRICT_HOOKS=1`;
    /// off by default, a value other than 0 or 1 refuses the start).
    pub strict_hooks: bool,
    /// This gateway's exclusive hold on its state dir (none in in-process tests).
    pub instance_lock: Option<Arc<crate::instance_lock::InstanceLock>>,
    /// Host header values accepted besides loopback.
    pub allowed_hosts: Vec<String>,
    /// Where `worktree_write` sessions get their managed worktrees (`CLAUDE_TOOLS_WORKTREE_DIR`,
    /// default `<state>/worktrees`): the one part of the state dir the tools may read.
    pub worktree_dir: PathBuf,
    /// Connection limits of the HTTP server.
    pub http: HttpLimits,
    /// The skills sessions may freeze, each pinned by hash
    /// (`CLAUDE_TOOLS_NATIVE_SKILL_ALLOWLIST_JSON`); malformed, the gateway does not start.
    pub skill_allowlist: crate::skills::SkillAllowlist,
    /// Where DeepSeek sub-sessions' model requests go, and with which key
    /// (`CLAUDE_TOOLS_DEEPSEEK_*`, `DEEPSEEK_API_KEY`); malformed, the gateway does not start.
    pub deepseek: crate::deepseek::route::DeepseekRoute,
}

/// How long HTTP clients may hold the server's resources (a slow or idle client must not hold a
/// connection forever) and how many connections it serves at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// A connection must deliver each request head within this time of being ready for one: it
    /// bounds half-sent heads and idle keep-alive connections alike
    /// (`CLAUDE_TOOLS_HTTP_HEADER_TIMEOUT_SECONDS`, default 15).
    pub header_read_timeout: Duration,
    /// A request body must arrive within this time of its head
    /// (`CLAUDE_TOOLS_HTTP_BODY_TIMEOUT_SECONDS`, default 30).
    pub body_read_timeout: Duration,
    /// Connections served at once; more get a 503 and are closed
    /// (`CLAUDE_TOOLS_HTTP_MAX_CONNECTIONS`, default 256).
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_read_timeout: Duration::from_secs(15),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 256,
        }
    }
}

/// A positive integer from the environment variable `name`, or `default` when it is unset.
fn env_positive(name: &str, default: u64) -> anyhow::Result<u64> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| *n > 0)
            .with_context(|| format!("{name} must be a positive integer, got {v:?}")),
        Err(_) => Ok(default),
    }
}

impl HttpLimits {
    /// The limits from the environment, defaults for what is unset.
    pub fn from_env() -> anyhow::Result<HttpLimits> {
        let default = HttpLimits::default();
        Ok(HttpLimits {
            header_read_timeout: Duration::from_secs(env_positive(
                "CLAUDE_TOOLS_HTTP_HEADER_TIMEOUT_SECONDS",
                default.header_read_timeout.as_secs(),
            )?),
            body_read_timeout: Duration::from_secs(env_positive(
                "CLAUDE_TOOLS_HTTP_BODY_TIMEOUT_SECONDS",
                default.body_read_timeout.as_secs(),
            )?),
            max_connections: usize::try_from(env_positive(
                "CLAUDE_TOOLS_HTTP_MAX_CONNECTIONS",
                default.max_connections as u64,
            )?)
            .unwrap_or(usize::MAX),
        })
    }
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

impl Config {
    /// Resolve configuration from the environment. `CLAUDE_TOOLS_STATE_DIR` must be absolute.
    pub fn from_env(allowed_hosts: Vec<String>) -> anyhow::Result<Config> {
        // Checked first: a malformed allowlist stops the start before anything is created.
        let skill_allowlist =
            crate::skills::SkillAllowlist::from_env().context("refusing to start")?;
        let allowed_hosts: Vec<String> = allowed_hosts
            .into_iter()
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .collect();
        if let Some(bad) = allowed_hosts
            .iter()
            .find(|h| !crate::host_guard::is_valid_entry(h))
        {
            bail!(
                "--allowed-host (CLAUDE_TOOLS_GATEWAY_ALLOWED_HOSTS): {bad:?} is not a host name, \
                 address or host:port (e.g. gw.example.net); refusing to start"
            );
        }
        let state_dir = match env_path("CLAUDE_TOOLS_STATE_DIR") {
            Some(dir) if dir.is_absolute() => dir,
            Some(dir) => bail!(
                "CLAUDE_TOOLS_STATE_DIR must be an absolute path, got {dir:?}; refusing to start"
            ),
            None => std::env::current_dir()
                .context("reading the current directory")?
                .join("state"),
        };
        private_dir(&state_dir)?;
        // Before anything in the state dir is read or created: one gateway per state dir.
        let instance_lock = crate::instance_lock::acquire(&state_dir)?;
        for sub in ["auth", "run"] {
            private_dir(&state_dir.join(sub))?;
        }
        let access_token = match std::env::var("CLAUDE_TOOLS_GATEWAY_TOKEN") {
            Ok(token) if !token.is_empty() => token,
            _ => load_or_create_token(&state_dir.join("auth").join("access-token"))?,
        };
        let lease_ttl_seconds = match std::env::var("CLAUDE_TOOLS_LEASE_TTL_SECONDS") {
            Ok(v) => v
                .parse::<u64>()
                .ok()
                .filter(|s| *s > 0)
                .context("CLAUDE_TOOLS_LEASE_TTL_SECONDS must be a positive integer")?,
            Err(_) => 1800,
        };
        let owner_home = env_path("HOME").unwrap_or_else(|| PathBuf::from("/"));
        let claude_bin = env_path("CLAUDE_BIN")
            .unwrap_or_else(|| owner_home.join(".npm-global").join("bin").join("claude"));
        let extra_protected: Vec<PathBuf> = std::env::var("CLAUDE_TOOLS_PROTECTED_PATHS")
            .unwrap_or_default()
            .split(':')
            .filter(|p| p.starts_with('/'))
            .map(PathBuf::from)
            .collect();
        let worktree_dir = match env_path("CLAUDE_TOOLS_WORKTREE_DIR") {
            Some(dir) if dir.is_absolute() => dir,
            Some(dir) => bail!(
                "CLAUDE_TOOLS_WORKTREE_DIR must be an absolute path, got {dir:?}; refusing to start"
            ),
            None => state_dir.join("worktrees"),
        };
        private_dir(&worktree_dir)?;
        // The write root of a worktree session must have no symlink component.
        let worktree_dir = std::fs::canonicalize(&worktree_dir).unwrap_or(worktree_dir);
        // The owner's toolchains: their PATH (or the one they name for commands), minus what
        // a command must not search (relative, world-writable, protected directories).
        let owner_path = std::env::var("CLAUDE_TOOLS_COMMAND_PATH")
            .ok()
            .filter(|p| !p.trim().is_empty())
            .or_else(|| std::env::var("PATH").ok());
        let protected = sandbox::path_policy::PathPolicy::new(
            owner_home.clone(),
            state_dir.clone(),
            extra_protected.clone(),
        );
        let command_path =
            sandbox::command::command_path(owner_path.as_deref(), |p| protected.is_protected(p));
        let state_max_mb = crate::state_budget::max_mb_from_env(&state_dir)?;
        let command_limits = crate::limits::command_limits_from_env(&state_dir)?;
        Ok(Config {
            worktree_dir,
            state_dir,
            access_token,
            lease_ttl: Duration::from_secs(lease_ttl_seconds),
            reply_wait: Duration::from_secs(45),
            claude_bin,
            exe: Arc::new(PinnedExe::pin_own_image().context("pinning the gateway executable")?),
            install_path: std::env::current_exe().context("locating the gateway executable")?,
            command_limits,
            command_path,
            max_live_sessions: crate::limits::max_live_sessions_from_env()?,
            state_max_mb,
            retention: crate::limits::retention_from_env()?,
            owner_home,
            extra_protected,
            autorun_allowed: autorun_allowed_from_env()?,
            strict_hooks: strict_hooks_from_env()?,
            instance_lock: Some(Arc::new(instance_lock)),
            allowed_hosts,
            http: HttpLimits::from_env()?,
            skill_allowlist,
            deepseek: crate::deepseek::route::DeepseekRoute::from_env()
                .context("refusing to start")?,
        })
    }

    /// The path policy every broker of this gateway applies: the same protected set, and the
    /// managed worktrees' subtree open.
    pub fn path_policy(&self) -> sandbox::path_policy::PathPolicy {
        sandbox::path_policy::PathPolicy::new(
            self.owner_home.clone(),
            self.state_dir.clone(),
            self.extra_protected.clone(),
        )
        .with_open_subtree(self.worktree_dir.clone())
    }

    /// The policy a start's working directory is resolved under: the same protected set with
    /// nothing open inside it, and the managed worktrees' directory protected too (a session
    /// never starts in a managed worktree, its own or another's).
    pub fn start_policy(&self) -> sandbox::path_policy::PathPolicy {
        let mut extra = self.extra_protected.clone();
        extra.push(self.worktree_dir.clone());
        sandbox::path_policy::PathPolicy::new(
            self.owner_home.clone(),
            self.state_dir.clone(),
            extra,
        )
    }

    /// The policy writes use: the same protected set, the install locations of the gateway and
    /// Claude Code refused, and inside the state dir only `own_worktree` open.
    pub fn write_policy(&self, own_worktree: Option<&Path>) -> sandbox::path_policy::PathPolicy {
        let policy = sandbox::path_policy::PathPolicy::new(
            self.owner_home.clone(),
            self.state_dir.clone(),
            self.extra_protected.clone(),
        )
        .with_write_protected(sandbox::protected::write_protected(
            &self.install_path,
            &self.claude_bin,
            &self.owner_home,
        ))
        .with_autorun_allowed(self.autorun_allowed)
        .with_strict_hooks(self.strict_hooks);
        match own_worktree {
            Some(own) => policy.with_open_subtree(own.to_path_buf()),
            None => policy,
        }
    }

    /// Where the access token lives when it is not given in the environment.
    pub fn token_file(&self) -> PathBuf {
        self.state_dir.join("auth").join("access-token")
    }
}

/// The owner's opt-in to auto-run writes, per class; a value naming an unknown class refuses the
/// start (a typo must not silently leave the owner's intent unapplied or apply more).
fn autorun_allowed_from_env() -> anyhow::Result<sandbox::protected::autorun::AutorunAllowed> {
    use sandbox::protected::autorun::{ALLOW_ENV, AutorunAllowed};
    match std::env::var(ALLOW_ENV) {
        Ok(value) => AutorunAllowed::parse(&value).map_err(|err| anyhow::anyhow!(err)),
        Err(std::env::VarError::NotPresent) => Ok(AutorunAllowed::NONE),
        Err(std::env::VarError::NotUnicode(_)) => {
            anyhow::bail!("{ALLOW_ENV} is not valid UTF-8")
        }
    }
}

/// The owner's strict-hooks mode; a value other than `0` or `1` refuses the start.
fn strict_hooks_from_env() -> anyhow::Result<bool> {
    use sandbox::protected::autorun::strict_hooks::{STRICT_HOOKS_ENV, parse};
    match std::env::var(STRICT_HOOKS_ENV) {
        Ok(value) => parse(&value).map_err(|err| anyhow::anyhow!(err)),
        Err(std::env::VarError::NotPresent) => Ok(false),
        Err(std::env::VarError::NotUnicode(_)) => {
            anyhow::bail!("{STRICT_HOOKS_ENV} is not valid UTF-8")
        }
    }
}

fn load_or_create_token(path: &Path) -> anyhow::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(token) if !token.trim().is_empty() => return Ok(token.trim().to_string()),
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
        Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
    }
    let token = common::hash::new_secret("ngw");
    write_private_file(path, token.as_bytes())?;
    Ok(token)
}

/// A per-state-dir key from which lease ids and recovery tokens are derived, so the database
/// stores only their hashes yet an idempotent replay can return them again.
pub fn load_or_create_server_key(state_dir: &Path) -> anyhow::Result<String> {
    let path = state_dir.join("auth").join("server-key");
    match std::fs::read_to_string(&path) {
        Ok(key) if key.trim().len() >= 32 => Ok(key.trim().to_string()),
        _ => {
            let key = common::hash::new_secret("key");
            write_private_file(&path, key.as_bytes())?;
            Ok(key)
        }
    }
}
