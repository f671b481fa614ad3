//! The state dir's owner-only directories and files (the token, the server key, broker specs,
//! skill snapshots) through the one helper, `sandbox::private_fs`, with the path in the error.

use std::path::Path;

use anyhow::Context as _;
use sandbox::private_fs::{OpenDir, ensure_private_dir_with};

/// Create `dir` (and parents) 0700, and insist it is a private directory of ours (no symlink;
/// one made 0755 by hand is narrowed to 0700).
pub fn private_dir(dir: &Path) -> anyhow::Result<()> {
    // Every refusal names the directory already.
    Ok(ensure_private_dir_with(dir, OpenDir::Restrict)?)
}

/// Write a private file (0600) holding `contents`, durably: the file and then its directory entry
/// are synced, so a crash right after leaves either no file or the whole one.
pub fn write_private_file(path: &Path, contents: &[u8]) -> anyhow::Result<()> {
    sandbox::private_fs::write_private_file(path, contents)
        .with_context(|| format!("writing {}", path.display()))
}
