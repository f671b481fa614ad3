//! The fixed environment of a command: nothing is inherited (no `LD_PRELOAD`, `BASH_ENV`, `ENV`,
//! `GIT_DIR`, `RIPGREP_CONFIG_PATH`, …) but the owner's filtered PATH; `TMPDIR` points into the
//! per-command scratch dir, `HOME` is the owner's seen through the session's copy-on-write layer
//! (without a layer: the scratch dir, with caches and build outputs); Git runs without optional
//! locks, pagers, prompts, hooks or fsmonitor.

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

/// How a command's environment is shaped.
#[derive(Debug, Clone, Copy)]
pub struct EnvShape<'a> {
    /// The owner's home: with the layer, the command's `HOME` (seen copy-on-write); without,
    /// only rustup's and cargo's homes are named in it (read-only).
    pub owner_home: Option<&'a Path>,
    /// The command runs over the session's copy-on-write layer.
    pub layered: bool,
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
    match shape.owner_home {
        Some(home) if shape.layered => {
            env.push(("HOME".into(), home.display().to_string()));
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

#[cfg(test)]
mod tests;
