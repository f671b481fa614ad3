//! The fixed environment of a command: nothing is inherited (no `LD_PRELOAD`, `BASH_ENV`, `ENV`,
//! `GIT_DIR`, `RIPGREP_CONFIG_PATH`, …) but the owner's filtered PATH; `TMPDIR` points into the
//! per-command scratch dir, `HOME` is the owner's seen through the session's copy-on-write layer
//! (macOS: the owner's, read-only, with well-known build outputs and caches redirected into the
//! session's writable dir; without either: the scratch dir, with caches and build outputs); Git
//! runs without optional locks, pagers, prompts, hooks or fsmonitor.

use std::path::Path;

/// Subdirectories of the scratch dir the broker creates (`HOME`, `TMPDIR`); the XDG and build
/// directories under `home` are created by the tools that want them (each mkdir costs).
pub const SCRATCH_DIRS: &[&str] = &["home", "tmp"];

/// Git configuration forced through `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`
/// (command-line scope: above the repository's own config). `diff.external` and textconv drivers
/// cannot be switched off this way (an empty `diff.external` makes `git diff` fail); if a hostile
/// repository configures them they run inside the same sandbox.
pub const GIT_OVERRIDES: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("credential.helper", ""),
    ("sequence.editor", "true"),
    ("pager.branch", "false"),
    ("pager.log", "false"),
    ("pager.diff", "false"),
    ("pager.show", "false"),
    ("color.ui", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("protocol.allow", "never"),
];

/// macOS, where no copy-on-write layer exists: the variables that send build outputs and caches
/// tools would write into the project (or a read-only HOME) to `<session dir>/<sub>`, kept across
/// the session's commands. `CACHE_DIR` is find-cache-dir's (`node_modules/.cache`: babel-loader,
/// terser, ava, nyc…); `NGW_BUILD_DIR` is offered for the rest (`cmake -B "$NGW_BUILD_DIR"`).
/// Not redirected: `CARGO_HOME`, `RUSTUP_HOME` and Go's module cache stay the owner's, read-only
/// (cargo treats a read-only package cache as such), and `TMPDIR` (so `GOTMPDIR` and pytest's
/// `basetemp`) stays the per-command scratch dir.
pub const SESSION_DIR_REDIRECTS: &[(&str, &str)] = &[
    ("CARGO_TARGET_DIR", "cargo-target"),
    ("GOCACHE", "go-build"),
    ("PYTHONPYCACHEPREFIX", "pycache"),
    ("MYPY_CACHE_DIR", "mypy-cache"),
    ("RUFF_CACHE_DIR", "ruff-cache"),
    ("npm_config_cache", "npm-cache"),
    ("CACHE_DIR", "node-cache"),
    ("XDG_CACHE_HOME", "cache"),
    ("CLANG_MODULE_CACHE_PATH", "clang-module-cache"),
    ("NGW_BUILD_DIR", "build"),
];

/// pytest's cache (`.pytest_cache` in the rootdir, for `--lf`/`--ff`) goes to
/// `<session dir>/pytest-cache` through `PYTEST_ADDOPTS`.
pub const PYTEST_CACHE: &str = "pytest-cache";

/// The subdirectories of the session dir the broker makes before a command.
pub fn session_subdirs() -> impl Iterator<Item = &'static str> {
    SESSION_DIR_REDIRECTS
        .iter()
        .map(|(_, sub)| *sub)
        .chain([PYTEST_CACHE])
}

/// Where a command's writes outlive it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes<'a> {
    /// Linux: the session's copy-on-write layer over HOME and the project.
    Layer,
    /// macOS: the session's writable dir, with [`SESSION_DIR_REDIRECTS`] pointing into it.
    SessionDir(&'a Path),
    /// Nowhere: only the per-command scratch dir is writable.
    ScratchOnly,
}

/// How a command's environment is shaped.
#[derive(Debug, Clone, Copy)]
pub struct EnvShape<'a> {
    /// The owner's home: with the layer, the command's `HOME` (seen copy-on-write); with the
    /// session dir, its `HOME` read-only; otherwise only rustup's and cargo's homes are named in
    /// it (read-only).
    pub owner_home: Option<&'a Path>,
    /// Where writes outlive the command.
    pub writes: Writes<'a>,
    /// The search path (the owner's, filtered: [`crate::command::command_path`]).
    pub path: &'a str,
}

/// The complete environment for a command whose scratch dir is `scratch`. With the layer, HOME
/// is the owner's (tool state such as `~/.cargo/registry` and caches are written into the layer,
/// and build outputs stay where the project puts them, so the next command is incremental);
/// without it, HOME, caches and build outputs point into the scratch dir.
pub fn command_env(scratch: &Path, shape: EnvShape<'_>) -> Vec<(String, String)> {
    let s = |sub: &str| scratch.join(sub).display().to_string();
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), shape.path.into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("LC_ALL".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
        ("NO_COLOR".into(), "1".into()),
        ("TMPDIR".into(), s("tmp")),
        ("TMP".into(), s("tmp")),
        ("TEMP".into(), s("tmp")),
    ];
    match (shape.owner_home, shape.writes) {
        (Some(home), Writes::Layer) => {
            env.push(("HOME".into(), home.display().to_string()));
        }
        (home, Writes::SessionDir(dir)) => {
            // HOME-relative toolchains (pyenv, asdf, mise, nvm) and the owner's tool config keep
            // working; whatever a tool writes there unasked fails (HOME is read-only).
            let home = home.map_or_else(|| s("home"), |h| h.display().to_string());
            env.push(("HOME".into(), home));
            for (var, sub) in SESSION_DIR_REDIRECTS {
                env.push(((*var).into(), dir.join(sub).display().to_string()));
            }
            let cache = dir.join(PYTEST_CACHE).display().to_string();
            env.push((
                "PYTEST_ADDOPTS".into(),
                format!("-o cache_dir={}", shell_quote(&cache)),
            ));
        }
        _ => env.extend([
            ("HOME".into(), s("home")),
            ("XDG_CACHE_HOME".into(), s("home/.cache")),
            ("XDG_CONFIG_HOME".into(), s("home/.config")),
            ("XDG_DATA_HOME".into(), s("home/.local/share")),
            ("XDG_STATE_HOME".into(), s("home/.local/state")),
            ("CARGO_TARGET_DIR".into(), s("tmp/cargo-target")),
            ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
            ("PYTHONPYCACHEPREFIX".into(), s("home/.cache/pycache")),
            ("npm_config_cache".into(), s("home/.cache/npm")),
        ]),
    }
    env.extend([
        ("GIT_OPTIONAL_LOCKS".into(), "0".into()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()),
        ("GIT_TERMINAL_PROMPT".into(), "0".into()),
        ("GIT_PAGER".into(), "cat".into()),
        ("GIT_EDITOR".into(), "true".into()),
        ("GIT_ASKPASS".into(), "true".into()),
        ("PAGER".into(), "cat".into()),
    ]);
    env.push(("GIT_CONFIG_COUNT".into(), GIT_OVERRIDES.len().to_string()));
    for (i, (key, value)) in GIT_OVERRIDES.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}"), (*key).into()));
        env.push((format!("GIT_CONFIG_VALUE_{i}"), (*value).into()));
    }
    if let Some(home) = shape.owner_home {
        for (var, dir) in [("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")] {
            let path = home.join(dir);
            if path.is_dir() {
                env.push((var.into(), path.display().to_string()));
            }
        }
    }
    env
}

/// `text` as one POSIX shell word (pytest splits `PYTEST_ADDOPTS` with `shlex`).
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests;
