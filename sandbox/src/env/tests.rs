//! The command environment: fixed, with and without the layer.

use super::*;
use crate::command::FIXED_PATH;

fn lookup<'a>(env: &'a [(String, String)], key: &str) -> Option<&'a str> {
    env.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

#[test]
fn with_the_layer_home_is_the_owners_and_builds_stay_in_the_project() {
    let home = Path::new("/home/o");
    let shape = EnvShape {
        owner_home: Some(home),
        writes: Writes::Layer,
        path: "/home/o/.cargo/bin:/usr/bin",
    };
    let env = command_env(Path::new("/s"), shape);
    let get = |k: &str| lookup(&env, k);
    assert_eq!(get("HOME"), Some("/home/o"));
    assert_eq!(get("PATH"), Some("/home/o/.cargo/bin:/usr/bin"));
    assert_eq!(get("TMPDIR"), Some("/s/tmp"));
    assert_eq!(get("GIT_OPTIONAL_LOCKS"), Some("0"));
    for absent in ["CARGO_TARGET_DIR", "XDG_CACHE_HOME", "npm_config_cache"] {
        assert_eq!(get(absent), None, "{absent}");
    }
}

#[test]
fn env_is_fixed_and_points_into_scratch() {
    let shape = EnvShape {
        owner_home: None,
        writes: Writes::ScratchOnly,
        path: FIXED_PATH,
    };
    let env = command_env(Path::new("/s"), shape);
    let get = |k: &str| lookup(&env, k);
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

#[test]
fn with_the_session_dir_builds_and_caches_go_there_and_home_is_the_owners() {
    let home = Path::new("/Users/o");
    let dir = Path::new("/private/tmp/ngw-run-501-x/abc/layer");
    let shape = EnvShape {
        owner_home: Some(home),
        writes: Writes::SessionDir(dir),
        path: "/Users/o/.cargo/bin:/usr/bin",
    };
    let env = command_env(Path::new("/s"), shape);
    let get = |k: &str| lookup(&env, k);
    assert_eq!(get("HOME"), Some("/Users/o"));
    assert_eq!(get("TMPDIR"), Some("/s/tmp"));
    let at = |sub: &str| format!("{}/{sub}", dir.display());
    assert_eq!(get("CARGO_TARGET_DIR"), Some(at("cargo-target").as_str()));
    assert_eq!(get("GOCACHE"), Some(at("go-build").as_str()));
    assert_eq!(get("PYTHONPYCACHEPREFIX"), Some(at("pycache").as_str()));
    assert_eq!(get("npm_config_cache"), Some(at("npm-cache").as_str()));
    assert_eq!(get("CACHE_DIR"), Some(at("node-cache").as_str()));
    assert_eq!(get("XDG_CACHE_HOME"), Some(at("cache").as_str()));
    assert_eq!(get("NGW_BUILD_DIR"), Some(at("build").as_str()));
    assert_eq!(
        get("PYTEST_ADDOPTS"),
        Some(format!("-o cache_dir='{}'", at("pytest-cache")).as_str())
    );
    // Bytecode is written (into the prefix), so the next run reuses it; the owner's tool homes
    // and config stay where they are, read-only.
    for absent in [
        "PYTHONDONTWRITEBYTECODE",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
    ] {
        assert_eq!(get(absent), None, "{absent}");
    }
    // Every path the env names in the session dir is one the broker makes.
    let subdirs: Vec<&str> = session_subdirs().collect();
    for (key, value) in &env {
        let value = value
            .trim_start_matches("-o cache_dir='")
            .trim_end_matches('\'');
        if let Some(sub) = value.strip_prefix(&format!("{}/", dir.display())) {
            assert!(subdirs.contains(&sub), "{key}={sub}");
        }
    }
}

#[test]
fn the_pytest_cache_path_stays_one_shell_word() {
    assert_eq!(shell_quote("/a b/c"), "'/a b/c'");
    assert_eq!(shell_quote("/it's"), "'/it'\\''s'");
}
