//! Gateways registered after a policy was built (red team 23i B2): the protected set's other
//! state dirs come from the instance registries (`crate::protected::instances`), and a live
//! session's broker lives longer than that list — a gateway started meanwhile was open to its
//! Read, FindFiles, SearchText and RunCommand. Before each tool call the broker re-reads the
//! registries ([`LateInstances::refresh`]: a few small files); what they list now is protected
//! by name from then on (never dropped again), and masked for every new command. A registry that
//! turns unreadable, or into something else than a file, hides nothing already seen and fails
//! nothing: any account can do that to its own registry, and failing every gateway's tool calls
//! for it would hand each account a switch that stops the others (red team 25). Which files are
//! registries (every passwd home's, every per-uid one in `/tmp`) is derived again only when
//! `/etc/passwd` or `/tmp` changed ([`RegistrySources`]), not at every call.
//!
//! The mount table too (red team 39 F1): a bind mount of a home or of a state dir made after the
//! policy was built showed the protected objects under a new path, which the session's Read and
//! commands were given. When `/proc/self/mountinfo` changed (or the registries did), the aliases
//! of the whole protected set are computed again and protected by name from then on.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use crate::protected::ProtectedSet;
use crate::protected::instances::{
    RegistrySources, read_registries, registry_files, registry_sources,
};

/// The registries a policy watches and the state dirs they added since it was built.
#[derive(Debug)]
pub(super) struct LateInstances {
    homes: Vec<PathBuf>,
    state_dir: PathBuf,
    insensitive: bool,
    seen: RwLock<Seen>,
    /// The registry files as last derived, and what from.
    files: Mutex<Option<(RegistrySources, Arc<Vec<PathBuf>>)>>,
    /// The protected set the policy was built from (the mount table's aliases of it are
    /// computed again when the table changes).
    base: Vec<PathBuf>,
}

#[derive(Debug, Default)]
struct Seen {
    /// Each registry file and a digest of its text when last read (`None`: absent, or not this
    /// account's to read): the texts themselves are not kept (red team 26 B3).
    texts: Vec<(PathBuf, Option<[u8; 32]>)>,
    /// What they added: other state dirs and their runtime areas, as listed and canonical, and
    /// the mount table's aliases of everything protected.
    paths: Arc<Vec<PathBuf>>,
    /// A digest of the mount table when the aliases were last computed.
    mounts: Option<[u8; 32]>,
    /// The same, folded like the policy's entries.
    folded: Vec<Vec<Vec<u8>>>,
    /// The start-up entries (`AUTORUN`) of the homes of gateways registered since the policy
    /// was built (red team 44a C8-B1), folded: only writes refuse them.
    write_folded: Vec<Vec<Vec<u8>>>,
}

impl LateInstances {
    /// Start from the registries as `set` read them (the policy's own entries): a registration
    /// after that read shows as a change at the first refresh.
    pub(super) fn new(set: &ProtectedSet, state_dir: PathBuf, insensitive: bool) -> Self {
        let seen = Seen {
            texts: set.registries.digests.clone(),
            mounts: mount_table().map(|text| digest(&text)),
            ..Seen::default()
        };
        Self {
            homes: set.homes.clone(),
            state_dir,
            insensitive,
            seen: RwLock::new(seen),
            files: Mutex::new(Some((
                set.registry_sources.clone(),
                Arc::new(set.registry_files.clone()),
            ))),
            base: set.paths.clone(),
        }
    }

    /// The registry files to watch now (a per-account one may appear later): derived again when
    /// their sources changed.
    fn registry_files(&self) -> Arc<Vec<PathBuf>> {
        let sources = registry_sources();
        let mut cached = self.files.lock().unwrap_or_else(|e| e.into_inner());
        match cached.as_ref() {
            Some((seen, files)) if *seen == sources => files.clone(),
            _ => {
                let files = Arc::new(registry_files(&self.homes));
                *cached = Some((sources, files.clone()));
                files
            }
        }
    }

    /// Re-read the registries; when they changed, protect what they list now too. So too the
    /// runtime areas this gateway's and the listed state dirs record now: a running gateway
    /// replaces an area that went (RT29 B3), and the new one is protected from the next call.
    pub(super) fn refresh(&self) {
        let read = read_registries(&self.registry_files(), &self.state_dir);
        let mut state_dirs = read.state_dirs.clone();
        state_dirs.push(self.state_dir.clone());
        let areas = crate::protected::recorded_areas(&state_dirs);
        let table = mount_table();
        let mounts = table.as_deref().map(digest);
        {
            let seen = self.seen.read().unwrap_or_else(|e| e.into_inner());
            if seen.texts == read.digests
                && seen.mounts == mounts
                && areas.iter().all(|a| seen.paths.contains(a))
            {
                return;
            }
        }
        // What the registries list in the read just compared, not in another one.
        let mut listed = crate::protected::other_gateway_entries(&read.state_dirs);
        // A gateway started meanwhile with another `$HOME`: that home's credential stores.
        let late_homes = crate::protected::not_yet_homes(&self.homes, read.homes.clone());
        listed.extend(crate::protected::other_homes_catalogue(&late_homes));
        let startup_entries: Vec<PathBuf> = late_homes
            .iter()
            .flat_map(|home| crate::protected::AUTORUN.iter().map(|e| home.join(e)))
            .collect();
        let mut seen = self.seen.write().unwrap_or_else(|e| e.into_inner());
        let mut paths: Vec<PathBuf> = seen.paths.as_ref().clone();
        // As listed, never followed (red team 26 B2: a symlink another account swapped in for
        // its listed dir made its target, `/usr/lib`, protected for the session's life).
        paths.extend(listed);
        paths.extend(areas);
        if let Some(table) = &table {
            let mut all = self.base.clone();
            all.extend(paths.iter().cloned());
            let parsed = crate::protected::parse_mountinfo(table);
            paths.extend(crate::protected::aliases_in(&parsed, &all));
        }
        seen.mounts = mounts;
        paths.sort();
        paths.dedup();
        seen.folded = paths
            .iter()
            .map(|p| super::folded_components(p, self.insensitive))
            .collect();
        seen.paths = Arc::new(paths);
        seen.texts = read.digests;
        for entry in &startup_entries {
            let folded = super::folded_components(entry, self.insensitive);
            if !seen.write_folded.contains(&folded) {
                seen.write_folded.push(folded);
            }
        }
    }

    /// Whether a path (folded components) is at or below a late home's start-up entry.
    pub(super) fn covers_write(&self, folded: &[Vec<u8>]) -> bool {
        let seen = self.seen.read().unwrap_or_else(|e| e.into_inner());
        seen.write_folded.iter().any(|p| folded.starts_with(p))
    }

    /// Whether a path (folded components) is in one of the late entries.
    pub(super) fn covers(&self, folded: &[Vec<u8>]) -> bool {
        let seen = self.seen.read().unwrap_or_else(|e| e.into_inner());
        seen.folded.iter().any(|p| folded.starts_with(p))
    }

    /// Whether a late entry lies at, below or above a path (folded components): a walk of it
    /// must check its entries' names.
    pub(super) fn overlaps(&self, folded: &[Vec<u8>]) -> bool {
        let seen = self.seen.read().unwrap_or_else(|e| e.into_inner());
        seen.folded
            .iter()
            .any(|p| p.starts_with(folded) || folded.starts_with(p))
    }

    /// The late entries as paths (what new commands mask too).
    pub(super) fn paths(&self) -> Arc<Vec<PathBuf>> {
        self.seen
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .paths
            .clone()
    }
}

/// This process's mount table, as bytes (Linux; `None` elsewhere or unreadable).
fn mount_table() -> Option<Vec<u8>> {
    if cfg!(any(target_os = "linux", target_os = "android")) {
        std::fs::read("/proc/self/mountinfo").ok()
    } else {
        None
    }
}

fn digest(table: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(table).into()
}

#[cfg(test)]
mod tests;
