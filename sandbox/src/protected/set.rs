//! The protected set as paths, derived in one pass ([`protected_set`]): `/etc/passwd` is read
//! once for the other homes and the registries' list, and each instance registry once for the
//! other gateways' entries, which the set also returns apart ([`ProtectedSet::name_only`]) so
//! that no caller derives them a second time.

use std::path::{Path, PathBuf};

use super::instances::{self, RegistryRead, RegistrySources};
use super::{
    catalogue_paths, host_key_files, mount_aliases, other_homes_catalogue, other_homes_in,
    runtime_area,
};

/// One derivation of the protected set.
#[derive(Debug, Clone)]
pub struct ProtectedSet {
    /// The whole set: the catalogue under the owner's home and every other account's, the state
    /// dir and its command runtime area, other gateways' state dirs and runtime areas and the
    /// registries listing them, the owner's extras, the SSH host keys present, and every
    /// mount-table alias of those that exist (Linux). Both spellings of the home are the
    /// caller's business.
    pub paths: Vec<PathBuf>,
    /// The entries of `paths` protected by name only, never by `(dev, ino)` and never
    /// canonicalized: other gateways' state dirs and runtime areas. They come and go (a
    /// gateway's state dir may be deleted while a policy lives, and its inode number then
    /// reused by any new directory, which an identity would wrongly refuse), and another
    /// account's symlink at such a name must not protect its target (red team 26 B2); an alias
    /// of one through a mount is still in the set by name (the mount-table aliases).
    pub name_only: Vec<PathBuf>,
    /// The homes the set covers, the owner's first.
    pub(crate) homes: Vec<PathBuf>,
    /// What the registries' list was derived from, taken before it was.
    pub(crate) registry_sources: RegistrySources,
    /// The registry files, and what this derivation read in them.
    pub(crate) registry_files: Vec<PathBuf>,
    pub(crate) registries: RegistryRead,
}

impl ProtectedSet {
    /// Whether `path` is one of [`Self::name_only`] or below one.
    pub fn is_name_only(&self, path: &Path) -> bool {
        self.name_only.iter().any(|n| path.starts_with(n))
    }
}

/// The whole protected set under `home` for the gateway of `state_dir`, with the owner's
/// `extra` entries (relative ones ignored). The read policy, the command masks and the runner's
/// Landlock/Seatbelt rules all derive from it.
pub fn protected_set(home: &Path, state_dir: &Path, extra: &[PathBuf]) -> ProtectedSet {
    // Stamped before `/etc/passwd` is read: a change from now on shows at the next comparison.
    let registry_sources = instances::registry_sources();
    let passwd = instances::passwd_text();
    let mut homes = vec![home.to_path_buf()];
    homes.extend(other_homes_in(home, passwd.as_deref()));
    let registry_files = instances::registry_files_with(&homes, passwd.as_deref());
    let registries = instances::read_registries(&registry_files, state_dir);
    let name_only = other_gateway_entries(&registries.state_dirs);
    // Other gateways' `$HOME`s are accounts' homes too (red team 43a B5).
    homes.extend(super::not_yet_homes(&homes, registries.homes.clone()));

    let mut paths = catalogue_paths(home);
    paths.extend(other_homes_catalogue(&homes[1..]));
    paths.push(state_dir.to_path_buf());
    paths.extend(runtime_area::runtime_area_names(state_dir));
    paths.extend(name_only.iter().cloned());
    paths.extend(registry_files.iter().cloned());
    paths.extend(extra.iter().filter(|p| p.is_absolute()).cloned());
    paths.extend(host_key_files());
    let aliases = mount_aliases(&paths);
    paths.extend(aliases);
    ProtectedSet {
        paths,
        name_only,
        homes,
        registry_sources,
        registry_files,
        registries,
    }
}

/// Other gateways' entries: each listed state dir and the names of its command runtime area.
pub(crate) fn other_gateway_entries(state_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for other in state_dirs {
        out.extend(runtime_area::runtime_area_names(other));
        out.push(other.clone());
    }
    out
}
