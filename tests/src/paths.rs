//! Paths of the workspace, its fixtures and the pinned Claude Code binary.

use std::path::PathBuf;

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(PathBuf::from).unwrap_or(here)
}

/// `tests/fixtures` of the workspace.
pub fn fixtures_dir() -> PathBuf {
    workspace_root().join("tests").join("fixtures")
}

/// The real, pinned Claude Code binary: env `CLAUDE_BIN` if set, else the copy that
/// `scripts/install-claude-code` puts under `.tools/claude-code`.
///
/// Panics when the binary is missing: tests that need the real runner must never skip silently.
pub fn claude_bin() -> PathBuf {
    let (path, source) = match std::env::var_os("CLAUDE_BIN") {
        Some(p) if !p.is_empty() => (PathBuf::from(p), "env CLAUDE_BIN"),
        _ => (
            workspace_root()
                .join(".tools")
                .join("claude-code")
                .join("node_modules")
                .join(".bin")
                .join("claude"),
            "default location",
        ),
    };
    if !path.is_file() {
        panic!(
            "Claude Code binary not found at {} ({source}); run scripts/install-claude-code \
             (or scripts/test, which does it) and/or set CLAUDE_BIN",
            path.display()
        );
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_root_holds_the_workspace_manifest() {
        assert!(workspace_root().join("Cargo.toml").is_file());
        assert!(workspace_root().join("tests").join("Cargo.toml").is_file());
    }
}
