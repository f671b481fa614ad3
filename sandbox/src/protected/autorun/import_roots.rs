//! Directories on every Python's path (red team 30 N3). A `.pth` file in a site directory puts
//! the directory it names on `sys.path` of every interpreter of that environment — an editable
//! install's `src/` in the user site, ahead of the system's packages — and so does `PYTHONPATH`.
//! A module there named like one Python imports at start (`_distutils_hack`, which Debian's
//! `distutils-precedence.pth` imports; `encodings`, before `site`), like a standard-library
//! module, or like an installed package (`yaml`, `pip`) runs in the owner's unrelated Python
//! processes. Those names are `python_startup` places in such a directory; the project's own
//! packages there (any other name) stay writable: they are the work.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Modules Python imports at every start before or while `site` runs.
const AT_START: [&str; 18] = [
    "site",
    "sitecustomize",
    "usercustomize",
    "encodings",
    "codecs",
    "io",
    "abc",
    "os",
    "stat",
    "posixpath",
    "genericpath",
    "ntpath",
    "_collections_abc",
    "_sitebuiltins",
    "_distutils_hack",
    "_virtualenv",
    "warnings",
    "types",
];

/// Bytes of a `.pth` file read.
const MAX_PTH: u64 = 64 * 1024;

/// The directories on every Python's path (named by a site directory's `.pth` file, or by
/// `PYTHONPATH`), the module names that must not be shadowed there, and the `.pth` files
/// (their names) with an opaque import line.
pub(super) struct ImportRoots {
    pub dirs: Vec<PathBuf>,
    pub names: BTreeSet<String>,
    /// `.pth` files whose import line may import any module (its name built at run time): every
    /// module of every directory here may run at start.
    pub opaque: Vec<String>,
}

/// The [`ImportRoots`] of the environments `top` and this account see.
pub(super) fn import_roots(top: &Path, python_paths: &[&OsStr]) -> ImportRoots {
    let sites = super::namespaces::site_dirs(top);
    // A relative entry (`PYTHONPATH=src`) is relative to wherever the owner runs Python: read
    // against the write root, where the owner runs the project's Python (red team 33).
    let mut dirs: Vec<PathBuf> = python_paths
        .iter()
        .flat_map(|value| std::env::split_paths(value))
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| top.join(dir))
        .collect();
    let mut names: BTreeSet<String> = AT_START.iter().map(|n| n.to_string()).collect();
    let mut opaque = Vec::new();
    for site in &sites {
        let Ok(entries) = crate::look::read_dir(site) else {
            continue;
        };
        for entry in entries.flatten().take(super::namespaces::MAX_ENTRIES) {
            let file_name = entry.file_name().to_string_lossy().into_owned();
            if file_name.ends_with(".pth") {
                if let Some(text) = super::read_head(&entry.path(), MAX_PTH)
                    && read_pth(site, &text, &mut dirs, &mut names)
                {
                    opaque.push(file_name);
                }
                continue;
            }
            if let Some(name) = module_name(&file_name) {
                names.insert(name);
            }
        }
    }
    // The standard libraries: beside a site directory (`…/lib/python3.12/site-packages`), and
    // the system's and pyenv's interpreters' (Debian's site dir, `/usr/lib/python3/dist-packages`,
    // is not beside its standard library: red team 33 wrote `src/json` there).
    let mut stdlibs: Vec<PathBuf> = sites
        .iter()
        .filter_map(|s| s.parent().map(Path::to_path_buf))
        .collect();
    for (base, pattern) in [
        ("/usr/lib", "python3*"),
        ("/usr/local/lib", "python3*"),
        ("/usr/lib64", "python3*"),
    ] {
        super::namespaces::expand(Path::new(base), pattern, &mut stdlibs);
    }
    for stdlib in stdlibs
        .iter()
        .filter(|dir| crate::look::is_file(dir.join("os.py")))
    {
        for dir in [stdlib.to_path_buf(), stdlib.join("lib-dynload")] {
            let entries = super::namespaces::entry_names(&dir);
            names.extend(entries.iter().filter_map(|file| module_name(file)));
        }
    }
    dirs.sort();
    dirs.dedup();
    opaque.sort();
    opaque.dedup();
    ImportRoots {
        dirs,
        names,
        opaque,
    }
}

/// What one `.pth` file's lines do: an `import` line imports its modules at start
/// ([`super::pth_code`]), any other line names a directory (relative to the site directory)
/// put on the path. True when an import line is opaque.
fn read_pth(
    site: &Path,
    text: &str,
    dirs: &mut Vec<PathBuf>,
    names: &mut BTreeSet<String>,
) -> bool {
    let mut opaque = false;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with("import ") || line.starts_with("import\t") {
            let imports = super::pth_code::imports(line);
            names.extend(imports.names);
            opaque |= imports.opaque;
            continue;
        }
        dirs.push(site.join(line));
    }
    opaque
}

/// The module name an entry of a site or standard-library directory provides: a package
/// directory, a source or bytecode module, an extension module (`x.cpython-312-….so`).
fn module_name(file_name: &str) -> Option<String> {
    let stem = file_name.split('.').next().unwrap_or("");
    let module = file_name == stem
        || [".py", ".pyc", ".so", ".pyd"]
            .iter()
            .any(|suffix| file_name.ends_with(suffix));
    (module && super::namespaces::identifier(stem)).then(|| stem.to_lowercase())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
