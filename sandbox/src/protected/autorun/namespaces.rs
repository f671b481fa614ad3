//! Installed namespace packages (red team 25 B6). When Python imports from a directory first on
//! `sys.path` (`python -m X` from the working tree's top, `python3 < x.py`), a top-level
//! directory without `__init__` that shares its name with an installed namespace package
//! (PEP 420, or pkgutil/pkg_resources style) is merged into that package's `__path__` ahead of
//! site-packages, so `acme/util.py` runs when a tool imports `acme.util`. A directory of any
//! other name stays an ordinary directory: against an installed regular package or module of
//! its name it loses (the import system takes the first regular package anywhere on
//! `sys.path` over namespace portions found earlier), and nothing imports a name nothing
//! provides except an optional import (the known limit in docs/design/protected-set.md). So
//! the rule protects the top-level directories named like an installed namespace package —
//! not every top-level directory's modules, which would refuse `tests/`, `scripts/` and every
//! flat-layout package of each repository using pre-commit (its hook runs `python -mpre_commit`
//! from the top).
//!
//! The names are those found in the Python environments this account can see (system, user,
//! pyenv, pipx, uv tools, pre-commit's and conda's environments, the usual project venvs) and
//! widely installed namespaces (`google`, `azure`…), so a hook's environment elsewhere is still
//! covered for them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Namespaces installed with common tools and libraries (protobuf's `google`, keyring's
/// `jaraco`, Sphinx's `sphinxcontrib`…), protected whether or not a scan finds them.
const WELL_KNOWN: [&str; 24] = [
    "google",
    "azure",
    "jaraco",
    "backports",
    "sphinxcontrib",
    "zope",
    "ruamel",
    "mpl_toolkits",
    "opentelemetry",
    "nvidia",
    "oslo",
    "paste",
    "repoze",
    "flufl",
    "xstatic",
    "zc",
    "z3c",
    "plone",
    "collective",
    "keyrings",
    "ansible_collections",
    "dbt",
    "pyxb",
    "logilab",
];

/// Generic directory names some packages install by mistake without `__init__` (a stray
/// `tests/` in site-packages): no tool imports them as a namespace, and refusing a project's
/// `tests/` or `scripts/` would stop ordinary work.
const GENERIC: [&str; 18] = [
    "tests",
    "test",
    "testing",
    "docs",
    "doc",
    "examples",
    "example",
    "samples",
    "benchmarks",
    "bench",
    "scripts",
    "src",
    "build",
    "dist",
    "bin",
    "share",
    "include",
    "lib",
];

/// Where Python environments' site directories are, as patterns (`*` matches within one
/// name); `~` is the account's home. A directory holding many environments (pipx, pre-commit's
/// cache) is listed with one pattern per level.
const SITE_PATTERNS: [&str; 20] = [
    "/usr/lib/python3*/site-packages",
    "/usr/lib/python3*/dist-packages",
    "/usr/lib/python3/dist-packages",
    "/usr/lib64/python3*/site-packages",
    "/usr/local/lib/python3*/site-packages",
    "/usr/local/lib/python3*/dist-packages",
    "/opt/homebrew/lib/python3*/site-packages",
    "/Library/Frameworks/Python.framework/Versions/*/lib/python3*/site-packages",
    "~/.local/lib/python3*/site-packages",
    "~/Library/Python/*/lib/python/site-packages",
    "~/.pyenv/versions/*/lib/python3*/site-packages",
    "~/.local/share/pipx/venvs/*/lib/python3*/site-packages",
    "~/.local/pipx/venvs/*/lib/python3*/site-packages",
    "~/.local/share/uv/tools/*/lib/python3*/site-packages",
    "~/.cache/pre-commit/repo*/py_env-*/lib/python3*/site-packages",
    "~/miniconda3/lib/python3*/site-packages",
    "~/anaconda3/lib/python3*/site-packages",
    "~/miniforge3/lib/python3*/site-packages",
    "~/miniconda3/envs/*/lib/python3*/site-packages",
    "~/miniforge3/envs/*/lib/python3*/site-packages",
];

/// A project's own environments, below the directory Python imports from.
const PROJECT_SITE_PATTERNS: [&str; 4] = [
    ".venv/lib/python3*/site-packages",
    "venv/lib/python3*/site-packages",
    "env/lib/python3*/site-packages",
    ".tox/*/lib/python3*/site-packages",
];

/// Bounds: site directories read, entries read in each.
const MAX_SITES: usize = 256;
pub(super) const MAX_ENTRIES: usize = 4096;

/// The names of a directory's entries (lossy UTF-8), at most [`MAX_ENTRIES`]; none when it
/// cannot be read.
pub(super) fn entry_names(dir: &Path) -> Vec<String> {
    let Ok(entries) = crate::look::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .take(MAX_ENTRIES)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The top-level names that are namespace packages in the environments this account can
/// see, beside [`WELL_KNOWN`]; `top` is where Python imports from (its venvs are read too).
pub(super) fn namespace_names(top: &Path) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = WELL_KNOWN.iter().map(|n| n.to_string()).collect();
    for site in site_dirs(top).iter() {
        let Ok(entries) = crate::look::read_dir(site) else {
            continue;
        };
        for entry in entries.flatten().take(MAX_ENTRIES) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if identifier(&name)
                && !GENERIC.contains(&name.as_str())
                && entry.file_type().is_ok_and(|t| t.is_dir())
                && is_namespace(&entry.path())
            {
                names.insert(name.to_lowercase());
            }
        }
    }
    names
}

/// The site directories of the Python environments this account can see, and of `top`'s own
/// environments (at most [`MAX_SITES`]).
pub(super) fn site_dirs(top: &Path) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let mut sites = Vec::new();
    for pattern in SITE_PATTERNS {
        let base = match pattern.strip_prefix("~/") {
            Some(rest) => match &home {
                Some(home) => (home.clone(), rest),
                None => continue,
            },
            None => (PathBuf::from("/"), &pattern[1..]),
        };
        expand(&base.0, base.1, &mut sites);
    }
    for pattern in PROJECT_SITE_PATTERNS {
        expand(top, pattern, &mut sites);
    }
    // The owner's user base moved (red team 33): its site dir instead of `~/.local`'s.
    if let Some(base) = super::owner_env::var("PYTHONUSERBASE") {
        expand(Path::new(&base), "lib/python3*/site-packages", &mut sites);
    }
    sites.truncate(MAX_SITES);
    sites
}

/// A directory Python takes as a namespace portion: no `__init__` module, or one that extends
/// its `__path__` over `sys.path` (pkgutil's `extend_path`, pkg_resources' `declare_namespace`).
fn is_namespace(dir: &Path) -> bool {
    let init = dir.join("__init__.py");
    if !crate::look::exists(&init) {
        return !["__init__.pyc", "__init__.so"]
            .iter()
            .any(|name| crate::look::exists(dir.join(name)));
    }
    super::read_head(&init, 4096)
        .is_some_and(|text| text.contains("extend_path") || text.contains("declare_namespace"))
}

/// A name `import` takes (not `__pycache__`, not `x.dist-info`).
pub(super) fn identifier(name: &str) -> bool {
    !name.starts_with("__")
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The directories matching `pattern` (relative, `/`-separated, `*` within one name) below
/// `base`.
pub(super) fn expand(base: &Path, pattern: &str, out: &mut Vec<PathBuf>) {
    let mut level = vec![base.to_path_buf()];
    for part in pattern.split('/') {
        let mut next = Vec::new();
        for dir in &level {
            match part.split_once('*') {
                None => {
                    let path = dir.join(part);
                    if crate::look::is_dir(&path) {
                        next.push(path);
                    }
                }
                Some((prefix, suffix)) => {
                    let Ok(entries) = crate::look::read_dir(dir) else {
                        continue;
                    };
                    for entry in entries.flatten().take(MAX_ENTRIES) {
                        let name = entry.file_name().to_string_lossy().into_owned();
                        if name.len() >= prefix.len() + suffix.len()
                            && name.starts_with(prefix)
                            && name.ends_with(suffix)
                            && crate::look::is_dir(entry.path())
                        {
                            next.push(entry.path());
                        }
                    }
                }
            }
            if next.len() > MAX_SITES {
                break;
            }
        }
        level = next;
    }
    out.extend(level);
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_found_in_site_directories_and_regular_packages_are_not() {
        let top = tempfile::tempdir().unwrap();
        let site = top.path().join(".venv/lib/python3.12/site-packages");
        for dir in [
            "acme",
            "pkgutil_ns",
            "regular",
            "tests",
            "x.dist-info",
            "__pycache__",
        ] {
            std::fs::create_dir_all(site.join(dir)).unwrap();
        }
        std::fs::write(site.join("regular/__init__.py"), "").unwrap();
        std::fs::write(
            site.join("pkgutil_ns/__init__.py"),
            "__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n",
        )
        .unwrap();
        let names = namespace_names(top.path());
        assert!(
            names.contains("acme") && names.contains("pkgutil_ns"),
            "{names:?}"
        );
        assert!(names.contains("google") && names.contains("jaraco"));
        for absent in ["regular", "tests", "x.dist-info", "__pycache__"] {
            assert!(!names.contains(absent), "{absent}");
        }
    }
}
