//! `package.json` sections that name commands git hooks run (red team 23 c1 B3): lint-staged's,
//! husky 4's, commitlint's, simple-git-hooks', yorkie's, ghooks', the `pre-commit`/`pre-push`
//! packages'. The file itself stays writable (dependencies, scripts, version are the project's
//! own build, docs/design/protected-set.md); a write that adds, removes or changes one of these
//! sections is refused as `git_hooks`, like their dedicated files (`.lintstagedrc*`,
//! `.husky/`). Sections are compared as parsed JSON (the last of duplicate keys wins, as in
//! Node), so reformatting the file changes nothing; new text that is no JSON object is refused.

use std::ffi::OsStr;

/// Top-level keys whose value names commands run at a git hook.
pub(super) const HOOK_SECTIONS: [&str; 11] = [
    "lint-staged",
    "nano-staged",
    "husky",
    "commitlint",
    "simple-git-hooks",
    "pre-commit",
    "precommit",
    "pre-push",
    "prepush",
    "gitHooks",
    "ghooks",
];

/// Whether a file of this name is read as a `package.json` (case-insensitively, as a
/// case-insensitive file system opens it).
pub fn is_package_json(name: &OsStr) -> bool {
    super::fold(name) == "package.json"
}

/// Why a write of a `package.json` is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookChange {
    /// This hook section differs, by its JSON path (`lint-staged`, `config.ghooks`).
    Section(String),
    /// The new text is no JSON object this reader can parse (red team 24 B2: a lone surrogate
    /// escape stopped the parser while Node still read the sections): fail closed.
    Unreadable,
}

/// The first hook section whose value differs between the file's old text (`None`: absent)
/// and the new one; new text that does not parse as a JSON object is refused whole.
pub fn changed_hook_section(old: Option<&[u8]>, new: &[u8]) -> Option<HookChange> {
    changed_section(old, new, false)
}

/// [`changed_hook_section`], and with `strict_hooks` also the sections the checks a hook runs
/// read as their definition ([`super::strict_hooks::PACKAGE_SECTIONS`]: `scripts`, …).
pub fn changed_section(old: Option<&[u8]>, new: &[u8], strict_hooks: bool) -> Option<HookChange> {
    let parse = |bytes: Option<&[u8]>| {
        bytes
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
            .filter(serde_json::Value::is_object)
    };
    let (old, new) = (parse(old), parse(Some(new)));
    if new.is_none() {
        return Some(HookChange::Unreadable);
    }
    let section = |doc: &Option<serde_json::Value>, path: &[&str]| {
        let mut at = doc.as_ref()?;
        for key in path {
            at = at.get(key)?;
        }
        Some(at.clone())
    };
    let strict: &[&str] = if strict_hooks {
        &super::strict_hooks::PACKAGE_SECTIONS
    } else {
        &[]
    };
    let paths = HOOK_SECTIONS
        .iter()
        .chain(strict)
        .map(|key| vec![*key])
        .chain(std::iter::once(vec!["config", "ghooks"]));
    for path in paths {
        if section(&old, &path) != section(&new, &path) {
            return Some(HookChange::Section(path.join(".")));
        }
    }
    None
}

/// The first section of the JavaScript tools' configs in `package.json`
/// ([`super::js_configs::PACKAGE_SECTIONS`]) whose new value names a path under a loader key
/// its old one did not, with that path (red team 48 F7). Unreadable JSON is
/// [`changed_section`]'s to refuse.
pub fn added_tool_path(old: Option<&[u8]>, new: &[u8]) -> Option<(&'static str, String)> {
    let parse = |bytes: &[u8]| serde_json::from_slice::<serde_json::Value>(bytes).ok();
    let (old, new) = (old.and_then(parse), parse(new)?);
    super::js_configs::PACKAGE_SECTIONS
        .into_iter()
        .find_map(|section| {
            let before = old.as_ref().and_then(|d| d.get(section));
            let added = super::js_configs::added_section_path(before, new.get(section)?)?;
            Some((section, added))
        })
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
