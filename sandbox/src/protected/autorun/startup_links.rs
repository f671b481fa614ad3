//! Targets of the links inside a home's start-up directories (the [`crate::protected::AUTORUN`]
//! places: `~/.config/autostart/`, `~/.config/systemd/`, `~/.local/bin/`...): what a link there
//! names runs at login or shell start as if it were in the place (red team 26 B5: `systemctl
//! --user link` leaves `~/.config/systemd/user/x.service -> ~/proj/x.service`, and a session
//! wrote the target; red team 27 B2: a dangling one names a file a build makes later). They are
//! the auto-run class [`super::AutorunClass::StartupLinks`], refused naming the link; the
//! owner can allow the class or remove the link.

use std::path::{Path, PathBuf};

/// A link inside a start-up directory and where it points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupLink {
    /// What the link names: resolved as far as it exists, the rest joined as written.
    pub target: PathBuf,
    /// The link itself, inside the start-up directory.
    pub link: PathBuf,
}

/// The links inside every [`crate::protected::AUTORUN`] directory of each of `homes`.
pub fn of_homes(homes: &[PathBuf]) -> Vec<StartupLink> {
    homes
        .iter()
        .flat_map(|home| {
            crate::protected::AUTORUN
                .iter()
                .flat_map(move |entry| links_out_of(&home.join(entry)))
        })
        .collect()
}

/// Where the symlink `link` (owned by `owner`) points, when what it names there — or, for a
/// target that does not exist yet (red team 27 B2: a link to a file a build makes, or one
/// deleted meanwhile), its nearest existing ancestor — is `owner`'s too. The target is resolved
/// as far as it exists and the rest joined as written, so a later Write that creates it is
/// refused.
pub(crate) fn link_target(link: &Path, owner: u32) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(target) = std::fs::canonicalize(link) {
        return std::fs::metadata(&target)
            .is_ok_and(|m| m.uid() == owner)
            .then_some(target);
    }
    let written = std::fs::read_link(link).ok()?;
    let mut target = link.parent()?.join(written);
    let mut missing = Vec::new();
    // Up to the nearest ancestor that exists; `..` and links above it resolve there.
    let base = loop {
        match std::fs::canonicalize(&target) {
            Ok(base) => break base,
            Err(_) => {
                missing.push(target.file_name()?.to_os_string());
                target = target.parent()?.to_path_buf();
            }
        }
    };
    if !std::fs::metadata(&base).is_ok_and(|m| m.uid() == owner) {
        return None;
    }
    let rest: PathBuf = missing.iter().rev().collect();
    Some(base.join(rest))
}

/// Most entries [`links_out_of`] looks at in one start-up place (editor plugin trees are large;
/// links sit near the top).
const MAX_LINK_SCAN: usize = 4096;

/// The links inside the start-up directory `place` (a file there is followed by its own
/// canonical name already) and their targets. A target counts only when its owner also owns the
/// link, so no account protects another's files through links in its own home.
fn links_out_of(place: &Path) -> Vec<StartupLink> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    if !std::fs::symlink_metadata(place).is_ok_and(|m| m.is_dir()) {
        return out;
    }
    let mut stack = vec![(place.to_path_buf(), 0)];
    let mut seen = 0;
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_LINK_SCAN {
                return out;
            }
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let path = entry.path();
            if meta.file_type().is_symlink() {
                if let Some(target) = link_target(&path, meta.uid()) {
                    out.push(StartupLink { target, link: path });
                }
            } else if meta.is_dir() && depth < 6 {
                stack.push((path, depth + 1));
            }
        }
    }
    out
}
