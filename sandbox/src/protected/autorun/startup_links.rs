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

use super::link_target::{resolved, resolved_telling};

/// A link in a start-up place and where it points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupLink {
    /// What the link names: every link on the way followed, resolved as far as it exists, the
    /// rest joined as written (`..` cancelling a missing component).
    pub target: PathBuf,
    /// The link itself, or the configuration file that names the target.
    pub link: PathBuf,
    /// The target is named in `link`'s text ([`named`]), not by a symlink.
    pub named: bool,
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
    /// A start-up tree too large to look at whole ([`MAX_CONFIG_ENTRIES`],
    /// [`MAX_CONFIG_DEPTH`]): its links could not all be seen, so writes fail closed (the
    /// owner's opt-in for the class opens them).
    pub over_bound: Option<PathBuf>,
    /// A link whose target is named through a reader-dependent name (`/proc/<pid>/root/…`,
    /// `/dev/fd/…`): what it names cannot be known, so writes fail closed naming it.
    pub unknowable: Option<PathBuf>,
    /// Entries looked at (for `gatewayctl doctor`).
    pub looked_at: usize,
    /// The homes and their real paths while deriving (never walked into).
    tops: Vec<PathBuf>,
}

/// Most entries looked at in one start-up tree (`~/.config`, `~/.vim`, ...; fail closed beyond).
pub const MAX_CONFIG_ENTRIES: usize = 65_536;
/// How deep a start-up tree is walked (fail closed beyond).
pub const MAX_CONFIG_DEPTH: usize = 16;
/// Directory names not looked in inside a Chromium or Electron application's data
/// (`~/.config/Code/Cache`, `…/Default/Service Worker`): caches and storage, large, rewritten
/// all the time (each change would derive the links again) and holding no link the owner made.
/// Skipped only there ([`chromium_data`]): a `logs` or `Cache` directory elsewhere
/// (`~/.config/nvim/lua/logs/`) is the owner's (red team 30 N5). A plugin's `.git` directory
/// (vim-plug, straight.el and Doom clone whole repositories into start-up trees) is not
/// looked in either: git's objects, no link the owner made.
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
/// Start-up places that hold installed packages (editor and shell extensions, plugin packs):
/// the links the owner makes there sit at the top (`extensions/x -> ~/proj/x`,
/// `pack/dev/start/x`), deeper entries are the packages' own files, so they are walked this
/// many levels deep by design, not to the fail-closed depth (a linked package is then
/// protected whole, its inner links not looked at).
const PACKAGE_PLACES: &[(&str, usize)] = &[
    // `npm link`'s links: `bin/x`, `lib/node_modules/(@scope/)x`.
    (".npm-global", 3),
    (".vscode/extensions", 1),
    (".vscode-server/extensions", 1),
    (".local/share/gnome-shell/extensions", 1),
    (".local/share/nvim/site", 3),
    (".tmux/plugins", 1),
];

/// The stamp of the directory `dir` (not following a final link), if it exists.
pub fn stamp(dir: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = crate::look::symlink_metadata(dir).ok()?;
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
    // A link to a home or a directory above one (`~/.config/app/home -> ~`) names no
    // configuration but everything: no write root is there (`unfit_write_root`), and taking it
    // would refuse every project in the home; nor is it walked into.
    let mut tops: Vec<PathBuf> = homes.to_vec();
    tops.extend(
        homes
            .iter()
            .filter_map(|home| crate::look::canonicalize(home).ok()),
    );
    let mut out = Derived {
        tops: tops.clone(),
        ..Derived::default()
    };
    for (i, home) in homes.iter().enumerate() {
        out.home(home, i == 0);
    }
    out.links
        .retain(|link| !tops.iter().any(|home| home.starts_with(&link.target)));
    out.startup_paths.sort();
    out.startup_paths.dedup();
    out.tops.clear();
    out
}

/// How one start-up tree is walked.
#[derive(Clone, Copy)]
struct Walk {
    /// Levels below the place looked in.
    depth: usize,
    /// Whether a tree deeper than `depth` fails closed (else deeper levels are not the
    /// owner's by design: [`PACKAGE_PLACES`]).
    deeper_unchecked: bool,
    /// The home's owner: only its own links to its own directories are walked into.
    uid: u32,
}

impl Derived {
    fn watch(&mut self, dir: &Path) {
        self.watched.push((dir.to_path_buf(), stamp(dir)));
    }

    /// One home's places and links. Only the owner's trees over the bound fail closed:
    /// another account's links protect only that account's files, which are not the
    /// session's to write.
    fn home(&mut self, home: &Path, owner: bool) {
        use std::os::unix::fs::MetadataExt;
        // Another account's unknowable link protects only its own files: not kept.
        let unknowable = self.unknowable.clone();
        self.watch(home);
        let Ok(uid) = crate::look::symlink_metadata(home).map(|m| m.uid()) else {
            return;
        };
        let full = Walk {
            depth: MAX_CONFIG_DEPTH,
            deeper_unchecked: true,
            uid,
        };
        for entry in crate::protected::AUTORUN {
            let place = home.join(entry);
            // A start-up file that is itself a link (or lies under a linked `~/.config`) is
            // the file its real path names (the shell reads the target as `~/.zshenv`): that
            // path stays a start-up file, also before it exists.
            if let Some(real) = resolved(&place).filter(|real| *real != place) {
                let owner = crate::look::symlink_metadata(&place)
                    .ok()
                    .filter(|m| m.file_type().is_symlink())
                    .map(|m| m.uid());
                if owner.is_none_or(|owner| owned_by(&real, owner)) {
                    self.startup_paths.push(real);
                }
            }
            // `~/.config`'s places are in its walk below; package places are walked shallow.
            let package = PACKAGE_PLACES.iter().find(|(p, _)| p == entry);
            if Path::new(entry).starts_with(".config") {
                continue;
            }
            let walk = match package {
                Some((_, depth)) => Walk {
                    depth: *depth,
                    deeper_unchecked: false,
                    uid,
                },
                None => full,
            };
            if self.links_in(&place, &walk, &[]) && owner {
                self.over_bound.get_or_insert(place);
            }
        }
        // Every dot entry of the home's top level that is a link: the owner's configuration.
        if let Ok(entries) = crate::look::read_dir(home) {
            for entry in entries.flatten() {
                if entry.file_name().as_encoded_bytes().starts_with(b".")
                    && let Ok(meta) = crate::look::symlink_metadata(entry.path())
                    && meta.file_type().is_symlink()
                {
                    self.link(&entry.path(), meta.uid());
                }
            }
        }
        self.site_packages(home);
        self.named_in_configs(home, uid, owner);
        // Everything under `~/.config` (followed when it is a link), bounded.
        let config = home.join(".config");
        let real = resolved(&config).unwrap_or(config);
        // A dangling `~/.config`: its target's nearest existing directory, where it appears.
        if let Some(existing) = real
            .ancestors()
            .skip(1)
            .find(|dir| crate::look::is_dir(dir))
            && !crate::look::is_dir(&real)
        {
            self.watch(existing);
        }
        // Browser profiles (the catalogue's): the browser rewrites them all the time (each
        // change would derive the links again), they are large, and no link the owner made
        // is in them; the catalogue's credential stores are walked (`~/.config/gh`).
        let browsers: Vec<PathBuf> = crate::protected::CATALOGUE
            .iter()
            .filter(|e| e.category == crate::protected::Category::Browsers)
            .filter_map(|e| Path::new(e.path).strip_prefix(".config").ok())
            .map(|rest| real.join(rest))
            .collect();
        if self.links_in(&real, &full, &browsers) && owner {
            self.over_bound.get_or_insert(home.join(".config"));
        }
        if !owner {
            self.unknowable = unknowable;
        }
    }

    /// What the home's tool configuration files ([`named::NAMING_FILES`]) name by path, and
    /// what the files they name name in turn, within bounds: each file read is watched (a
    /// line added to `~/.ssh/config` is seen by the next write), each target its config's
    /// owner owns is a start-up place's target, refused naming the config file.
    fn named_in_configs(&mut self, home: &Path, uid: u32, owner: bool) {
        let system = super::system_root();
        let mut queue: Vec<(PathBuf, PathBuf, usize)> = named::NAMING_FILES
            .iter()
            .map(|file| home.join(file))
            .chain(
                named::SYSTEM_NAMING_FILES
                    .iter()
                    .map(|file| system.join(file)),
            )
            .rev()
            .map(|file| (file.clone(), file, 0))
            .collect();
        queue.extend(
            named::system_python_configs(&system)
                .into_iter()
                .map(|file| (file.clone(), file, 0)),
        );
        let mut dirs: Vec<PathBuf> = named::NAMING_DIRS
            .iter()
            .map(|dir| home.join(dir))
            .chain(named::SYSTEM_NAMING_DIRS.iter().map(|dir| system.join(dir)))
            .collect();
        let drop_ins: Vec<PathBuf> = dirs
            .iter()
            .filter(|dir| dir.to_string_lossy().contains("systemd"))
            .flat_map(|dir| named::drop_in_dirs(dir))
            .collect();
        dirs.extend(drop_ins);
        for dir in dirs {
            self.watch(&dir);
            let Some(files) = named::dir_files(&dir, named::MAX_DIR_FILES) else {
                if owner {
                    self.over_bound.get_or_insert(dir);
                }
                continue;
            };
            for file in files {
                queue.push((file.clone(), file, 0));
            }
        }
        let mut read: Vec<PathBuf> = Vec::new();
        let mut seen: std::collections::HashSet<(PathBuf, bool)> = std::collections::HashSet::new();
        let vars = super::env_files::of_shell(home).absolute_vars;
        while let Some((file, config, depth)) = queue.pop() {
            self.watch(&file);
            let real = resolved(&file).unwrap_or_else(|| file.clone());
            if real != file {
                self.watch(&real);
                // A config reached through a link (a dotfiles project's `codex/config.toml`
                // stowed as `~/.codex/config.toml`) is itself what the tool reads (red team 48
                // F2b): its target is refused as a link's.
                // Only a link the account made itself: another account's link protects
                // nothing of this one's.
                let own_link = crate::look::symlink_metadata(&file)
                    .is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == uid);
                // Dangling too: the write that makes the file makes the config (red team 51:
                // `/etc/cron.d/x -> /p/x.cron` with no `/p/x.cron` yet).
                if depth == 0 && own_link && owned_by(&real, uid) && !crate::look::is_dir(&real) {
                    self.links.push(StartupLink {
                        target: real.clone(),
                        link: file.clone(),
                        named: false,
                    });
                }
            }
            if read.contains(&real) {
                continue;
            }
            if read.len() >= named::MAX_FILES {
                if owner {
                    self.over_bound.get_or_insert(config.clone());
                }
                continue;
            }
            let Some(text) = named::text_of(&real) else {
                continue;
            };
            read.push(real);
            // (path, whether a pattern's directory: a file made there later matches too).
            let mut targets = Vec::new();
            let mut found = named::paths_named(&text, home, &|name| {
                vars.get(name).cloned().unwrap_or_default()
            });
            // Past the bound, what the rest names is not known: fail closed, as a start-up
            // tree too large to walk does (red team 44a C1-B5).
            if found.len() >= named::MAX_PER_FILE && owner {
                self.over_bound.get_or_insert(config.clone());
            }
            if config.ends_with(".ssh/config") {
                found.extend(named::ssh_includes(&text, home));
            }
            found.extend(named::unit_relative_runs(&text));
            if config.to_string_lossy().contains("ld.so.conf") {
                found.extend(named::loader_dirs(&text));
            }
            for found in found {
                match found {
                    named::Named::Path(path) => {
                        // Given without an ending, a loader may add one.
                        if path.extension().is_none() {
                            targets.extend(named::LOADED_ENDINGS.iter().map(|ending| {
                                let mut name = path.clone().into_os_string();
                                name.push(ending);
                                (PathBuf::from(name), false)
                            }));
                        }
                        targets.push((path, false));
                    }
                    named::Named::Dir(dir) => {
                        // Files added there are read by the next write.
                        self.watch(&dir);
                        let Some(files) = named::dir_files(&dir, named::MAX_PER_PATTERN) else {
                            if owner {
                                self.over_bound.get_or_insert(config.clone());
                            }
                            continue;
                        };
                        targets.extend(files.into_iter().map(|file| (file, false)));
                        targets.push((dir, true));
                    }
                    named::Named::Loaded(dir) => targets.push((dir, true)),
                }
            }
            for (target, whole_dir) in targets {
                // Each target once: the system's files name the same programs hundreds of
                // times (`/bin/sh` in every init script), each with its loader endings.
                if !seen.insert((target.clone(), whole_dir)) {
                    continue;
                }
                // A system directory's own file (or one not there) is no write root's: one
                // look, not a resolution of every component.
                if crate::protected::in_system_dir(&target)
                    && !crate::look::symlink_metadata(&target).is_ok_and(|m| m.is_symlink())
                {
                    if target.starts_with("/etc")
                        && depth < named::MAX_DEPTH
                        && crate::look::is_file(&target)
                    {
                        queue.push((target.clone(), config.clone(), depth + 1));
                    }
                    continue;
                }
                let target = resolved(&target).unwrap_or(target);
                // No write root is in a system directory: nothing there needs refusing, and
                // only `/etc`'s configs are read in turn (`/usr/bin/x` is a program).
                if crate::protected::in_system_dir(&target) {
                    if target.starts_with("/etc")
                        && depth < named::MAX_DEPTH
                        && crate::look::is_file(&target)
                    {
                        queue.push((target.clone(), config.clone(), depth + 1));
                    }
                    continue;
                }
                if (crate::look::is_dir(&target) && !whole_dir) || !owned_by(&target, uid) {
                    continue;
                }
                self.looked_at += 1;
                if depth < named::MAX_DEPTH && crate::look::is_file(&target) {
                    queue.push((target.clone(), config.clone(), depth + 1));
                }
                self.links.push(StartupLink {
                    target,
                    link: config.clone(),
                    named: true,
                });
            }
        }
    }

    /// The `.pth` files (and `sitecustomize`/`usercustomize`) of the user's site-packages
    /// (`~/.local/lib/python3.*/site-packages`): Python runs them at every start (red team 30
    /// N4), so a link among them is a start-up link. Only the top level: nothing deeper runs
    /// at start.
    fn site_packages(&mut self, home: &Path) {
        use std::os::unix::fs::MetadataExt;
        let lib = home.join(".local/lib");
        self.watch(&lib);
        let Ok(pythons) = crate::look::read_dir(&lib) else {
            return;
        };
        for python in pythons.flatten() {
            if !python.file_name().as_encoded_bytes().starts_with(b"python") {
                continue;
            }
            let site = python.path().join("site-packages");
            self.watch(&python.path());
            let real = resolved(&site).unwrap_or(site);
            self.watch(&real);
            let Ok(entries) = crate::look::read_dir(&real) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                let runs = name.ends_with(".pth")
                    || ["sitecustomize", "usercustomize"]
                        .iter()
                        .any(|m| name == *m || name.strip_suffix(".py") == Some(m));
                self.looked_at += 1;
                if runs
                    && let Ok(meta) = crate::look::symlink_metadata(entry.path())
                    && meta.file_type().is_symlink()
                {
                    self.link(&entry.path(), meta.uid());
                }
            }
        }
    }

    /// Record `link`'s target when its owner (`uid`) owns it; the directories of the links a
    /// chain goes through are watched too (`~/mid` retargeted changes the home). A target
    /// named through `/proc/<pid>/…` or `/dev/fd/…` cannot be known: noted, so writes fail
    /// closed naming the link (red team 30 N6).
    fn link(&mut self, link: &Path, uid: u32) -> Option<PathBuf> {
        let mut chain = Vec::new();
        let target = resolved_telling(link, &mut |hop| {
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
        let Ok(target) = target else {
            self.unknowable.get_or_insert(link.to_path_buf());
            return None;
        };
        let target = target.filter(|target| owned_by(target, uid))?;
        self.links.push(StartupLink {
            target: target.clone(),
            link: link.to_path_buf(),
            named: false,
        });
        Some(target)
    }

    /// The links inside the start-up tree `place` (its target when it is a link, red team 30
    /// N1), walked as `walk` says, every directory looked in watched. The owner's links to its
    /// own directories are walked into too (`~/.config/tmux -> ~/dot/tmux` holding
    /// `tmux.conf -> ~/proj/tmux.conf`), each directory once (by `(dev, ino)`), within the
    /// same bounds; the directories `skip` names are not looked in. Returns whether a bound
    /// was reached.
    fn links_in(&mut self, place: &Path, walk: &Walk, skip: &[PathBuf]) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Some(real) = resolved(place) else {
            return false;
        };
        let mut visited = std::collections::HashSet::new();
        let mut stack = vec![(real, 0)];
        let mut seen = 0;
        while let Some((dir, depth)) = stack.pop() {
            let Ok(meta) = crate::look::metadata(&dir) else {
                continue;
            };
            if !meta.is_dir() || !visited.insert((meta.dev(), meta.ino())) {
                continue;
            }
            self.watch(&dir);
            let Ok(entries) = crate::look::read_dir(&dir) else {
                continue;
            };
            let chromium = chromium_data(&dir);
            for entry in entries.flatten() {
                seen += 1;
                self.looked_at += 1;
                if seen > MAX_CONFIG_ENTRIES {
                    return true;
                }
                let Ok(meta) = crate::look::symlink_metadata(entry.path()) else {
                    continue;
                };
                let path = entry.path();
                let into = if meta.file_type().is_symlink() {
                    let target = self.link(&path, meta.uid());
                    // Only the owner's own link to its own directory, never a home or above.
                    target.filter(|target| {
                        meta.uid() == walk.uid
                            && crate::look::metadata(target)
                                .is_ok_and(|m| m.is_dir() && m.uid() == walk.uid)
                            && !self.tops.iter().any(|top| top.starts_with(target))
                    })
                } else if meta.is_dir()
                    && entry.file_name() != ".git"
                    && !skip.contains(&path)
                    && !(chromium && VOLATILE.iter().any(|v| entry.file_name() == *v))
                {
                    Some(path)
                } else {
                    None
                };
                if let Some(into) = into {
                    if depth >= walk.depth {
                        if walk.deeper_unchecked {
                            return true;
                        }
                        continue;
                    }
                    stack.push((into, depth + 1));
                }
            }
        }
        false
    }
}

/// Whether `dir` is a Chromium or Electron application's data directory or one of its
/// profiles (they hold `Local State` or `Preferences`), or a directory right below one
/// (`Code/User`): where [`VOLATILE`] names are caches.
fn chromium_data(dir: &Path) -> bool {
    dir.ancestors().take(2).any(|d| {
        crate::look::is_file(d.join("Local State")) || crate::look::is_file(d.join("Preferences"))
    })
}

/// Whether `owner` owns `target`, or, when it does not exist yet (red team 27 B2: a link to a
/// file a build makes), its nearest existing ancestor: no account protects another's files
/// through links in its own home.
fn owned_by(target: &Path, owner: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    target
        .ancestors()
        .find_map(|dir| crate::look::symlink_metadata(dir).ok())
        .is_some_and(|m| m.uid() == owner)
}

mod named;

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
