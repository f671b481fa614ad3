//! The command runtime area at start (`sandbox::protected::establish_runtime_area`: an
//! unpredictable private name in `/tmp`, recorded in the state dir, never failing on a name
//! another account took) and its sweep before the listener opens: this account's areas no
//! gateway uses any more, and in this gateway's own area the dirs of sessions whose broker is
//! gone (their layers and scratch, which a broker killed mid-stop leaves) are deleted in the
//! background, after a rename that takes them out of every session's way at once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Make sure the state dir names a private runtime area of ours (commands are refused until
/// it does: the error is logged).
pub fn establish(state_dir: &Path) {
    match sandbox::protected::establish_runtime_area(state_dir) {
        Ok(area) => tracing::info!("command runtime area: {}", area.display()),
        Err(err) => tracing::error!(
            "the command runtime area could not be made ({err}); commands will be refused"
        ),
    }
}

/// The name of a session's dir in the area (what the broker makes, `broker::state`).
pub fn session_dir_name(session_id: &str) -> String {
    session_id
        .trim_start_matches("ns_")
        .chars()
        .take(12)
        .collect()
}

/// Delete, in the background, this account's orphan areas (see
/// `sandbox::protected::orphan_areas`) and, in `state_dir`'s own area, every entry but the
/// marker that is not the dir of a session in `live` (names from [`session_dir_name`]). Runs
/// before the listener opens, so no session starts meanwhile.
pub fn sweep(home: &Path, state_dir: &Path, live: &HashSet<String>) -> Vec<PathBuf> {
    let own = sandbox::protected::command_runtime_area(state_dir);
    let mut homes = vec![home.to_path_buf()];
    homes.extend(sandbox::protected::other_homes(home));
    let mut state_dirs = sandbox::protected::instances::other_state_dirs(&homes, state_dir);
    state_dirs.push(state_dir.to_path_buf());
    let mut gone = sandbox::protected::orphan_areas(&state_dirs, &own);
    gone.extend(stale_session_dirs(&own, live));
    for path in &gone {
        sandbox::layer::remove_in_background(path.clone());
    }
    gone
}

/// `area`'s entries to delete, each renamed aside first (`.discarded-<name>`: hidden from the
/// sessions that start later, and found again by the next sweep if this process exits first).
fn stale_session_dirs(area: &Path, live: &HashSet<String>) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(area) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == sandbox::protected::runtime_area::MARKER || live.contains(&name) {
            continue;
        }
        if name.starts_with(".discarded-") {
            out.push(entry.path());
            continue;
        }
        let aside = area.join(format!(".discarded-{name}"));
        match std::fs::rename(entry.path(), &aside) {
            Ok(()) => out.push(aside),
            Err(err) => tracing::warn!("setting aside {}: {err}", entry.path().display()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_dirs_of_live_sessions_and_the_marker_stay() {
        let tmp = tempfile::tempdir().unwrap();
        let area = tmp.path();
        for dir in [
            "live0000000a",
            "dead0000000b/layer/k/upper",
            ".discarded-old/x",
        ] {
            std::fs::create_dir_all(area.join(dir)).unwrap();
        }
        std::fs::write(area.join(sandbox::protected::runtime_area::MARKER), "/s").unwrap();
        let live: HashSet<String> = [session_dir_name("ns_live0000000a123")].into();
        let mut gone = stale_session_dirs(area, &live);
        gone.sort();
        assert_eq!(
            gone,
            vec![
                area.join(".discarded-dead0000000b"),
                area.join(".discarded-old")
            ]
        );
        assert!(area.join("live0000000a").is_dir());
        assert!(!area.join("dead0000000b").exists());
    }
}
