//! What only writes refuse ([`crate::protected::write_protected`]): where the gateway and Claude
//! Code are installed and every home's start-up files, by name (as given and canonical) and by
//! `(dev, ino)`; and, the same way, the targets of the links in the homes' start-up places,
//! each with its link, refused as their own auto-run class
//! ([`crate::protected::autorun::AutorunClass::StartupLinks`]) unless the owner allowed it.
//! The homes' part is derived again when a directory it was looked for in changed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use super::{PathPolicy, canonical_variant, show};
use crate::protected::WriteProtected;
use crate::protected::autorun::AutorunClass;
use crate::protected::autorun::startup_links::{self, Derived};

/// A path's components, folded like the policy's names.
type Folded = Vec<Vec<u8>>;

/// The write-only entries, folded like the policy's names.
#[derive(Debug, Clone, Default)]
pub(super) struct WriteOnly {
    /// Install locations and start-up entries as named: fixed.
    fixed: Keys,
    /// What the homes' start-up places name now: shared by every clone of the policy, derived
    /// again when a watched directory changed ([`PathPolicy::refresh_write_protected`]).
    startup: Arc<Startup>,
}

#[derive(Debug, Default)]
struct Startup {
    homes: Vec<PathBuf>,
    derived: Mutex<Derived>,
    keys: RwLock<Keys>,
}

#[derive(Debug, Clone, Default)]
struct Keys {
    names: Vec<Folded>,
    identities: Vec<(u64, u64)>,
    /// Start-up link targets by name and by identity, each with its link's index in `links`.
    link_names: Vec<(Folded, usize)>,
    link_identities: Vec<((u64, u64), usize)>,
    /// The links (or configuration files naming the targets: true) as messages show them
    /// (`~/…` in the owner's home).
    links: Vec<(String, bool)>,
    /// A start-up tree too large to see every link in (as shown): every write refused.
    over_bound: Option<String>,
    /// A start-up link whose target is named through `/proc/<pid>/…` (as shown): every write
    /// refused.
    unknowable: Option<String>,
}

/// Why a write is refused although reading is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteProtection {
    /// Where the gateway or Claude Code is installed, or a home's start-up file or directory.
    InstallLocation,
    /// The target of `link` (as shown), a link in a start-up place of a home.
    StartupLinkTarget { link: String },
    /// What `file` (as shown), a tool's configuration file in a home, names by path: a
    /// program it runs or a file it loads.
    StartupNamed { file: String },
    /// `place` (as shown), a start-up tree, is too large to see every link in.
    StartupLinksUnchecked { place: String },
    /// `link` (as shown), a start-up link, names its target through a name whose meaning
    /// depends on the reading process (`/proc/<pid>/root/…`).
    StartupLinkUnknowable { link: String },
}

impl PathPolicy {
    /// Add the entries only writes refuse ([`crate::protected::write_protected`]; tests give
    /// [`crate::protected::install_locations`] alone).
    pub fn with_write_protected(mut self, set: impl Into<WriteProtected>) -> Self {
        let set = set.into();
        let mut fixed = Keys::default();
        for path in set.paths.iter().filter(|p| p.is_absolute()) {
            self.add_keys(&mut fixed, path);
        }
        fixed.names.sort();
        fixed.names.dedup();
        fixed.identities.sort_unstable();
        fixed.identities.dedup();
        let keys = self.startup_keys(&set.derived);
        self.write_only = WriteOnly {
            fixed,
            startup: Arc::new(Startup {
                homes: set.homes,
                derived: Mutex::new(set.derived),
                keys: RwLock::new(keys),
            }),
        };
        self
    }

    /// Derive the homes' start-up links again when a directory they were looked for in
    /// changed (else one `lstat` per watched directory): a link the owner made while the
    /// session is live is refused from the next write on (red team 28 B3).
    pub fn refresh_write_protected(&self) {
        let startup = &self.write_only.startup;
        if startup.homes.is_empty() {
            return;
        }
        let mut derived = startup.derived.lock().unwrap_or_else(|e| e.into_inner());
        if !startup_links::changed(&derived) {
            return;
        }
        *derived = startup_links::derive(&startup.homes);
        let keys = self.startup_keys(&derived);
        *startup.keys.write().unwrap_or_else(|e| e.into_inner()) = keys;
    }

    /// The keys of what `derived` names.
    fn startup_keys(&self, derived: &Derived) -> Keys {
        let mut keys = Keys::default();
        for path in derived.startup_paths.iter().filter(|p| p.is_absolute()) {
            self.add_keys(&mut keys, path);
        }
        let shown = |path: &Path| match path.strip_prefix(&self.home) {
            Ok(rest) => format!("~/{}", show(rest)),
            Err(_) => show(path),
        };
        // The mount table: a target is also written through every other path of it (a bind
        // mount or FUSE mirror of the project, red team 46 C5-B3).
        let mounts = crate::protected::read_mount_table().unwrap_or_default();
        for startup in derived.links.iter().filter(|l| l.target.is_absolute()) {
            let index = keys.links.len();
            keys.links.push((shown(&startup.link), startup.named));
            let (names, identity) = self.write_keys(&startup.target);
            keys.link_names
                .extend(names.into_iter().map(|name| (name, index)));
            keys.link_identities
                .extend(identity.map(|identity| (identity, index)));
            if mounts.len() > 1 {
                let target = std::slice::from_ref(&startup.target);
                for alias in crate::protected::aliases_in(&mounts, target) {
                    let (names, _) = self.write_keys(&alias);
                    keys.link_names
                        .extend(names.into_iter().map(|name| (name, index)));
                }
            }
        }
        keys.over_bound = derived.over_bound.as_deref().map(shown);
        keys.unknowable = derived.unknowable.as_deref().map(shown);
        keys.names.sort();
        keys.names.dedup();
        keys.identities.sort_unstable();
        keys.identities.dedup();
        // The first link to a target names it.
        keys.link_identities
            .sort_by_key(|(identity, index)| (*identity, *index));
        keys.link_identities.dedup_by_key(|(identity, _)| *identity);
        keys
    }

    fn add_keys(&self, keys: &mut Keys, path: &Path) {
        let (names, identity) = self.write_keys(path);
        keys.names.extend(names);
        keys.identities.extend(identity);
    }

    /// `path`'s folded names (as given and canonical) and the identity of what it names now.
    fn write_keys(&self, path: &Path) -> (Vec<Folded>, Option<(u64, u64)>) {
        use std::os::unix::fs::MetadataExt;
        // A hung FUSE mirror's path by its name alone: a `stat` of it never returns.
        let identity = (!crate::protected::is_hung_mount(path))
            .then(|| std::fs::metadata(path).ok())
            .flatten()
            .map(|m| (m.dev(), m.ino()));
        let mut names = vec![self.folded_components(path)];
        names.extend(canonical_variant(path).map(|c| self.folded_components(&c)));
        (names, identity)
    }

    /// Why a write to `path` (or inside it) is refused by name, if it is: an install location or
    /// start-up file first, then a start-up link's target unless the owner allowed the class.
    pub fn write_protection(&self, path: &Path) -> Option<WriteProtection> {
        let folded = self.folded_components(path);
        let by_name = |keys: &Keys| keys.names.iter().any(|p| folded.starts_with(p));
        if by_name(&self.write_only.fixed) {
            return Some(WriteProtection::InstallLocation);
        }
        let keys = self.startup_keys_now();
        if by_name(&keys) || self.late.covers_write(&folded) {
            return Some(WriteProtection::InstallLocation);
        }
        let found = keys
            .link_names
            .iter()
            .find(|(name, _)| folded.starts_with(name))
            .map(|(_, index)| *index);
        self.startup_link(&keys, found)
    }

    /// [`Self::write_protection`] of the object with this `(dev, ino)`.
    pub fn write_protection_identity(&self, dev: u64, ino: u64) -> Option<WriteProtection> {
        let by_identity = |keys: &Keys| keys.identities.binary_search(&(dev, ino)).is_ok();
        if by_identity(&self.write_only.fixed) {
            return Some(WriteProtection::InstallLocation);
        }
        let keys = self.startup_keys_now();
        if by_identity(&keys) {
            return Some(WriteProtection::InstallLocation);
        }
        let found = keys
            .link_identities
            .iter()
            .find(|(identity, _)| *identity == (dev, ino))
            .map(|(_, index)| *index);
        self.startup_link(&keys, found)
    }

    fn startup_keys_now(&self) -> std::sync::RwLockReadGuard<'_, Keys> {
        self.write_only
            .startup
            .keys
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a write to `path` is refused by [`Self::write_protection`].
    pub fn is_write_protected(&self, path: &Path) -> bool {
        self.write_protection(path).is_some()
    }

    /// The refusal for the link at `index` (or, when a start-up tree was too large to see
    /// every link in, for any path), unless the owner allowed the class.
    fn startup_link(&self, keys: &Keys, index: Option<usize>) -> Option<WriteProtection> {
        self.autorun_refused_class(Some(AutorunClass::StartupLinks))?;
        if let Some((link, named)) = index.and_then(|index| keys.links.get(index)) {
            let link = link.clone();
            return Some(match named {
                true => WriteProtection::StartupNamed { file: link },
                false => WriteProtection::StartupLinkTarget { link },
            });
        }
        if let Some(link) = keys.unknowable.clone() {
            return Some(WriteProtection::StartupLinkUnknowable { link });
        }
        let place = keys.over_bound.clone()?;
        Some(WriteProtection::StartupLinksUnchecked { place })
    }
}
