//! What only writes refuse ([`crate::protected::write_protected`]): where the gateway and Claude
//! Code are installed and every home's start-up files, by name (as given and canonical) and by
//! `(dev, ino)`; and, the same way, the targets of links inside start-up directories, each with
//! its link, refused as their own auto-run class
//! ([`crate::protected::autorun::AutorunClass::StartupLinks`]) unless the owner allowed it.

use std::path::Path;

use super::{PathPolicy, canonical_variant, show};
use crate::protected::WriteProtected;
use crate::protected::autorun::AutorunClass;

/// A path's components, folded like the policy's names.
type Folded = Vec<Vec<u8>>;

/// The write-only entries, folded like the policy's names.
#[derive(Debug, Clone, Default)]
pub(super) struct WriteOnly {
    names: Vec<Folded>,
    identities: Vec<(u64, u64)>,
    /// Start-up link targets by name and by identity, each with its link's index in `links`.
    link_names: Vec<(Folded, usize)>,
    link_identities: Vec<((u64, u64), usize)>,
    /// The links as messages show them (`~/…` in the owner's home).
    links: Vec<String>,
}

/// Why a write is refused although reading is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteProtection {
    /// Where the gateway or Claude Code is installed, or a home's start-up file or directory.
    InstallLocation,
    /// The target of `link` (as shown), a link inside a start-up directory.
    StartupLinkTarget { link: String },
}

impl PathPolicy {
    /// Add the entries only writes refuse ([`crate::protected::write_protected`]; tests give
    /// [`crate::protected::install_locations`] alone).
    pub fn with_write_protected(mut self, set: impl Into<WriteProtected>) -> Self {
        let set = set.into();
        let mut only = std::mem::take(&mut self.write_only);
        for path in set.paths.iter().filter(|p| p.is_absolute()) {
            let (names, identity) = self.write_keys(path);
            only.names.extend(names);
            only.identities.extend(identity);
        }
        for startup in set.startup_links.iter().filter(|l| l.target.is_absolute()) {
            let index = only.links.len();
            only.links
                .push(match startup.link.strip_prefix(&self.home) {
                    Ok(rest) => format!("~/{}", show(rest)),
                    Err(_) => show(&startup.link),
                });
            let (names, identity) = self.write_keys(&startup.target);
            only.link_names
                .extend(names.into_iter().map(|name| (name, index)));
            only.link_identities
                .extend(identity.map(|identity| (identity, index)));
        }
        only.names.sort();
        only.names.dedup();
        only.identities.sort_unstable();
        only.identities.dedup();
        // The first link to a target names it.
        only.link_identities
            .sort_by_key(|(identity, index)| (*identity, *index));
        only.link_identities.dedup_by_key(|(identity, _)| *identity);
        self.write_only = only;
        self
    }

    /// `path`'s folded names (as given and canonical) and the identity of what it names now.
    fn write_keys(&self, path: &Path) -> (Vec<Folded>, Option<(u64, u64)>) {
        use std::os::unix::fs::MetadataExt;
        let identity = std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
        let mut names = vec![self.folded_components(path)];
        names.extend(canonical_variant(path).map(|c| self.folded_components(&c)));
        (names, identity)
    }

    /// Why a write to `path` (or inside it) is refused by name, if it is: an install location or
    /// start-up file first, then a start-up link's target unless the owner allowed the class.
    pub fn write_protection(&self, path: &Path) -> Option<WriteProtection> {
        let folded = self.folded_components(path);
        let only = &self.write_only;
        if only.names.iter().any(|p| folded.starts_with(p)) {
            return Some(WriteProtection::InstallLocation);
        }
        let (_, index) = only
            .link_names
            .iter()
            .find(|(name, _)| folded.starts_with(name))?;
        self.startup_link(*index)
    }

    /// [`Self::write_protection`] of the object with this `(dev, ino)`.
    pub fn write_protection_identity(&self, dev: u64, ino: u64) -> Option<WriteProtection> {
        let only = &self.write_only;
        if only.identities.binary_search(&(dev, ino)).is_ok() {
            return Some(WriteProtection::InstallLocation);
        }
        let (_, index) = only
            .link_identities
            .iter()
            .find(|(identity, _)| *identity == (dev, ino))?;
        self.startup_link(*index)
    }

    /// Whether a write to `path` is refused by [`Self::write_protection`].
    pub fn is_write_protected(&self, path: &Path) -> bool {
        self.write_protection(path).is_some()
    }

    fn startup_link(&self, index: usize) -> Option<WriteProtection> {
        self.autorun_refused_class(Some(AutorunClass::StartupLinks))?;
        Some(WriteProtection::StartupLinkTarget {
            link: self.write_only.links.get(index)?.clone(),
        })
    }
}
