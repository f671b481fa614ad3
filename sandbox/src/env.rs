//! The fixed environment of a command: nothing is inherited (no `LD_PRELOAD`, `BASH_ENV`, `ENV`,
//! `GIT_DIR`, `RIPGREP_CONFIG_PATH`, …); `HOME`, `TMPDIR` and caches point into the per-command
//! scratch dir; Git runs without optional locks, pagers, prompts, hooks or fsmonitor.

use std::path::Path;

use crate::command::FIXED_PATH;

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

/// The complete environment for a command whose scratch dir is `scratch`. `owner_home` is used
/// only to let Rust toolchains installed by rustup find themselves (read-only).
pub fn command_env(scratch: &Path, owner_home: Option<&Path>) -> Vec<(String, String)> {
    let s = |sub: &str| scratch.join(sub).display().to_string();
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), FIXED_PATH.into()),
        ("LANG".into(), "C.UTF-8".into()),
        ("LC_ALL".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
        ("NO_COLOR".into(), "1".into()),
        ("HOME".into(), s("home")),
        ("TMPDIR".into(), s("tmp")),
        ("TMP".into(), s("tmp")),
        ("TEMP".into(), s("tmp")),
        ("XDG_CACHE_HOME".into(), s("home/.cache")),
        ("XDG_CONFIG_HOME".into(), s("home/.config")),
        ("XDG_DATA_HOME".into(), s("home/.local/share")),
        ("XDG_STATE_HOME".into(), s("home/.local/state")),
        ("CARGO_TARGET_DIR".into(), s("tmp/cargo-target")),
        ("PYTHONDONTWRITEBYTECODE".into(), "1".into()),
        ("PYTHONPYCACHEPREFIX".into(), s("home/.cache/pycache")),
        ("npm_config_cache".into(), s("home/.cache/npm")),
        ("GIT_OPTIONAL_LOCKS".into(), "0".into()),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()),
        ("GIT_TERMINAL_PROMPT".into(), "0".into()),
        ("GIT_PAGER".into(), "cat".into()),
        ("GIT_EDITOR".into(), "true".into()),
        ("GIT_ASKPASS".into(), "true".into()),
        ("PAGER".into(), "cat".into()),
    ];
    env.push(("GIT_CONFIG_COUNT".into(), GIT_OVERRIDES.len().to_string()));
    for (i, (key, value)) in GIT_OVERRIDES.iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}"), (*key).into()));
        env.push((format!("GIT_CONFIG_VALUE_{i}"), (*value).into()));
    }
    if let Some(home) = owner_home {
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
mod tests {
    use super::*;

    #[test]
    fn env_is_fixed_and_points_into_scratch() {
        let env = command_env(Path::new("/s"), None);
        let get = |k: &str| {
            env.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("PATH"), Some(FIXED_PATH));
        assert_eq!(get("HOME"), Some("/s/home"));
        assert_eq!(get("TMPDIR"), Some("/s/tmp"));
        assert_eq!(get("XDG_CACHE_HOME"), Some("/s/home/.cache"));
        assert_eq!(get("CARGO_TARGET_DIR"), Some("/s/tmp/cargo-target"));
        assert_eq!(get("LANG"), Some("C.UTF-8"));
        assert_eq!(get("GIT_OPTIONAL_LOCKS"), Some("0"));
        assert_eq!(get("GIT_CONFIG_NOSYSTEM"), Some("1"));
        assert_eq!(get("GIT_TERMINAL_PROMPT"), Some("0"));
        assert_eq!(get("GIT_PAGER"), Some("cat"));
        assert_eq!(get("PAGER"), Some("cat"));
        for bad in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "BASH_ENV",
            "ENV",
            "GIT_DIR",
            "GIT_CONFIG_PARAMETERS",
            "RIPGREP_CONFIG_PATH",
            "NODE_OPTIONS",
            "PYTHONSTARTUP",
        ] {
            assert_eq!(get(bad), None, "{bad}");
        }
        let count: usize = get("GIT_CONFIG_COUNT").unwrap().parse().unwrap();
        let pairs: Vec<(&str, &str)> = (0..count)
            .map(|i| {
                (
                    get(&format!("GIT_CONFIG_KEY_{i}")).unwrap(),
                    get(&format!("GIT_CONFIG_VALUE_{i}")).unwrap(),
                )
            })
            .collect();
        assert!(pairs.contains(&("core.fsmonitor", "false")));
        assert!(pairs.contains(&("core.hooksPath", "/dev/null")));
        assert!(pairs.contains(&("core.pager", "cat")));
        // Every scratch path the env names lies in a directory the broker creates.
        for (_, value) in &env {
            if let Some(sub) = value.strip_prefix("/s/") {
                let top = sub.split('/').next().unwrap();
                assert!(SCRATCH_DIRS.contains(&top), "{sub}");
            }
        }
    }
}
