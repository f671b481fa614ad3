//! Targets of the links a home holds in its start-up places: every link in the home's top level
//! (dot entries), anywhere under `~/.config`, and inside every other
//! [`crate::protected::AUTORUN`] directory (`~/.local/bin/`, `~/.local/share/systemd/`...). What
//! such a link names is the owner's configuration, whatever its name (red team 26 B5:
//! `systemctl --user link`; 27 B2: a dangling one names a file a build makes; 28 B4:
//! `~/.gdbinit -> proj/gdbinit`, `~/.config/kitty -> proj/kitty`). They are the auto-run class
//! [`super::AutorunClass::StartupLinks`], refused naming the link; the owner can allow the class
//! or remove the link. Derived again when a watched directory changes ([`Derived::watched`]),
//! so a link made while a session is live is seen by its next write (red team 28 B3).

use std::path::{Path, PathBuf};

use super::link_target::{resolved, resolved_noting};

/// A link in a start-up place and where it points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupLink {
    /// What the link names: every link on the way followed, resolved as far as it exists, the
    /// rest joined as written (`..` cancelling a missing component).
    pub target: PathBuf,
    /// The link itself.
    pub link: PathBuf,
}

/// A directory's identity and change times: a link made, removed or replaced in it changes it.
pub type Stamp = (u64, u64, i64, i64, i64, i64);

/// What the homes' start-up places name, derived in one pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Derived {
    /// The start-up files and directories as their real paths (`~/.config` a link, dangling or
    /// not; `~/.zshenv -> ~/dot/zshenv`): they are start-up files under those names too.
    pub startup_paths: Vec<PathBuf>,
    /// The links and their targets.
    pub links: Vec<StartupLink>,
    /// Every directory looked in, with its stamp then.
    pub watched: Vec<(PathBuf, Option<Stamp>)>,
    /// A start-up tree too large to look at whole ([`MAX_CONFIG_ENTRIES`]): its links could not
    /// all be seen, so writes fail closed (the owner's opt-in for the class opens them).
    pub over_bound: Option<PathBuf>,
    /// Entries looked at (for `gatewayctl doctor`).
    pub looked_at: usize,
}

/// Most entries looked at under one home's `~/.config` (fail closed beyond).
pub const MAX_CONFIG_ENTRIES: usize = 65_536;
/// How deep `~/.config` is walked (fail closed beyond).
pub const MAX_CONFIG_DEPTH: usize = 16;
/// Directories under `~/.config` not looked in: Electron and Chromium applications' caches and
/// storage (`~/.config/Code/Cache`, `…/Service Worker`), large, rewritten all the time (each
/// change would derive the links again) and holding no link the owner made.
const VOLATILE: &[&str] = &[
    "Cache",
    "Code Cache",
    "GPUCache",
    "DawnCache",
    "DawnGraphiteCache",
    "DawnWebGPUCache",
    "GrShaderCache",
    "ShaderCache",
    "CachedData",
    "CachedExtensionVSIXs",
    "CachedProfilesData",
    "Crashpad",
    "blob_storage",
    "IndexedDB",
    "Local Storage",
    "Session Storage",
    "Service Worker",
    "WebStorage",
    "logs",
    "workspaceStorage",
];
/// Most entries looked at in one other start-up directory (editor plugin trees are large;
/// links sit near the top).
const MAX_LINK_SCAN: usize = 4096;

/// The stamp of the directory `dir` (not following a final link), if it exists.
pub fn stamp(dir: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(dir).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// Whether any watched directory changed since `derived` was made.
pub fn changed(derived: &Derived) -> bool {
    derived.watched.iter().any(|(dir, was)| stamp(dir) != *was)
}

/// The start-up places of each of `homes` (the owner's first) and the links in them.
pub fn derive(homes: &[PathBuf]) -> Derived {
    let mut out = Derived::default();
    for (i, home) in homes.iter().enumerate() {
        out.home(home, i == 0);
    }
    // A link to a home or a directory above one (`~/.config/app/home -> ~`) names no
    // configuration but everything: no write root is there (`unfit_write_root`), and taking it
    // would refuse every project in the home.
    let mut tops: Vec<PathBuf> = homes.to_vec();
    tops.extend(
        homes
            .iter()
            .filter_map(|home| std::fs::canonicalize(home).ok()),
    );
    out.links
        .retain(|link| !tops.iter().any(|home| home.starts_with(&link.target)));
    out.startup_paths.sort();
    out.startup_paths.dedup();
    out
}

impl Derived {
    fn watch(&mut self, dir: &Path) {
        self.watched.push((dir.to_path_buf(), stamp(dir)));
    }

    /// One home's places and links. Only the owner's `~/.config` over the bound fails closed:
    /// another account's links protect only that account's files, which are not the
    /// session's to write.
    fn home(&mut self, home: &Path, owner: bool) {
        use std::os::unix::fs::MetadataExt;
        self.watch(home);
        for entry in crate::protected::AUTORUN {
            let place = home.join(entry);
            // A start-up file that is itself a link (or lies under a linked `~/.config`) is
            // the file its real path names (the shell reads the target as `~/.zshenv`): that
            // path stays a start-up file, also before it exists.
            if let Some(real) = resolved(&place).filter(|real| *real != place) {
                let owner = std::fs::symlink_metadata(&place)
                    .ok()
                    .filter(|m| m.file_type().is_symlink())
                    .map(|m| m.uid());
                if owner.is_none_or(|owner| owned_by(&real, owner)) {
                    self.startup_paths.push(real);
                }
            }
            // `~/.config`'s places are in its walk below.
            if !Path::new(entry).starts_with(".config") {
                self.links_in(&place, MAX_LINK_SCAN, 6, None);
            }
        }
        // Every dot entry of the home's top level that is a link: the owner's configuration.
        if let Ok(entries) = std::fs::read_dir(home) {
            for entry in entries.flatten() {
                if entry.file_name().as_encoded_bytes().starts_with(b".")
                    && let Ok(meta) = entry.metadata()
                    && meta.file_type().is_symlink()
                {
                    self.link(&entry.path(), meta.uid());
                }
            }
        }
        // Everything under `~/.config` (followed when it is a link), bounded, the credential
        // stores the catalogue protects left out (browser profiles are large and hold no
        // links the owner made).
        let config = home.join(".config");
        let real = resolved(&config).unwrap_or(config);
        // A dangling `~/.config`: its target's nearest existing directory, where it appears.
        if let Some(existing) = real.ancestors().skip(1).find(|dir| dir.is_dir())
            && !real.is_dir()
        {
            self.watch(existing);
        }
        let skip: Vec<PathBuf> = crate::protected::catalogue_paths(home)
            .into_iter()
            .filter_map(|p| {
                p.strip_prefix(home.join(".config"))
                    .ok()
                    .map(|r| real.join(r))
            })
            .collect();
        if self.links_in(&real, MAX_CONFIG_ENTRIES, MAX_CONFIG_DEPTH, Some(&skip)) && owner {
            self.over_bound.get_or_insert(home.join(".config"));
        }
    }

    /// Record `link`'s target when its owner (`uid`) owns it; the directories of the links a
    /// chain goes through are watched too (`~/mid` retargeted changes the home).
    fn link(&mut self, link: &Path, uid: u32) {
        let mut chain = Vec::new();
        let target = resolved_noting(link, &mut |hop| {
            chain.extend(
                hop.parent()
                    .filter(|dir| *dir != link.parent().unwrap_or(dir))
                    .map(Path::to_path_buf),
            )
        });
        for dir in chain {
            if !self.watched.iter().any(|(seen, _)| *seen == dir) {
                self.watch(&dir);
            }
        }
        if let Some(target) = target.filter(|target| owned_by(target, uid)) {
            self.links.push(StartupLink {
                target,
                link: link.to_path_buf(),
            });
        }
    }

    /// The links inside the directory `place` (not followed when it is a link: its target is
    /// the start-up place then, by its real path), at most `max` entries `depth` deep, and
    /// every directory looked in watched. Returns whether a bound was reached with `skip`
    /// given (a walk that must be whole).
    fn links_in(
        &mut self,
        place: &Path,
        max: usize,
        max_depth: usize,
        skip: Option<&[PathBuf]>,
    ) -> bool {
        use std::os::unix::fs::MetadataExt;
        if !std::fs::symlink_metadata(place).is_ok_and(|m| m.is_dir()) {
            return false;
        }
        let mut stack = vec![(place.to_path_buf(), 0)];
        let mut seen = 0;
        while let Some((dir, depth)) = stack.pop() {
            self.watch(&dir);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                self.looked_at += 1;
                if seen > max {
                    return skip.is_some();
                }
                let Ok(meta) = entry.metadata() else {
                    continue;
                };
                let path = entry.path();
                if meta.file_type().is_symlink() {
                    self.link(&path, meta.uid());
                } else if meta.is_dir()
                    && !skip.is_some_and(|s| {
                        s.contains(&path) || VOLATILE.iter().any(|v| entry.file_name() == *v)
                    })
                {
                    if depth >= max_depth {
                        if skip.is_some() {
                            return true;
                        }
                        continue;
                    }
                    stack.push((path, depth + 1));
                }
            }
        }
        false
    }
}

/// Whether `owner` owns `target`, or, when it does not exist yet (red team 27 B2: a link to a
/// file a build makes), its nearest existing ancestor: no account protects another's files
/// through links in its own home.
fn owned_by(target: &Path, owner: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    target
        .ancestors()
        .find_map(|dir| std::fs::symlink_metadata(dir).ok())
        .is_some_and(|m| m.uid() == owner)
}

#[cfg(test)]
mod tests;
