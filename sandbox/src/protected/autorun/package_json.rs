//! `package.json` sections that name commands git hooks run (red team 23 c1 B3): lint-staged's,
//! husky 4's, commitlint's, simple-git-hooks', yorkie's, ghooks', the `pre-commit`/`pre-push`
//! packages'. The file itself stays writable (dependencies, scripts, version are the project's
//! own build, docs/design/protected-set.md); a write that adds, removes or changes one of these
//! sections is refused as `git_hooks`, like their dedicated files (`.lintstagedrc*`,
//! `.husky/`). Sections are compared as parsed JSON (the last of duplicate keys wins, as in
//! Node), so reformatting the file changes nothing; new text that is no JSON object is refused.

use std::ffi::OsStr;

/// Top-level keys whose value names commands run at a git hook.
const HOOK_SECTIONS: [&str; 11] = [
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
    let paths = HOOK_SECTIONS
        .iter()
        .map(|key| vec![*key])
        .chain(std::iter::once(vec!["config", "ghooks"]));
    for path in paths {
        if section(&old, &path) != section(&new, &path) {
            return Some(HookChange::Section(path.join(".")));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_sections_are_compared_and_ordinary_edits_are_not() {
        let old = br#"{"name":"a","version":"1.0.0","scripts":{"test":"jest"},
            "lint-staged":{"*.js":"eslint"},"config":{"ghooks":{"pre-commit":"npm test"}}}"#;
        // Dependencies, scripts, version and reformatting change no hook section.
        let edits: [&[u8]; 3] = [
            br#"{"name":"a","version":"1.1.0","scripts":{"test":"vitest"},"dependencies":{"x":"1"},
                "lint-staged":{"*.js" : "eslint"},"config":{"ghooks":{"pre-commit":"npm test"}}}"#,
            br#"{
  "lint-staged": { "*.js": "eslint" },
  "config": { "ghooks": { "pre-commit": "npm test" }, "port": 3 },
  "name": "a"
}"#,
            br#"{"lint-staged":{"*.js":"eslint"},"config":{"ghooks":{"pre-commit":"npm test"}}}"#,
        ];
        for new in edits {
            assert_eq!(changed_hook_section(Some(old), new), None);
        }
        for (new, want) in [
            (
                &br#"{"lint-staged":{"*.js":"node tools/x.js"},"config":{"ghooks":{"pre-commit":"npm test"}}}"#[..],
                "lint-staged",
            ),
            (
                br#"{"lint-staged":{"*.js":"eslint"},"config":{"ghooks":{"pre-commit":"sh x.sh"}}}"#,
                "config.ghooks",
            ),
            (
                br#"{"lint-staged":{"*.js":"eslint"},"config":{"ghooks":{"pre-commit":"npm test"}},"husky":{"hooks":{"pre-commit":"sh x.sh"}}}"#,
                "husky",
            ),
            // A duplicate key: the last one is what Node reads.
            (
                br#"{"lint-staged":{"*.js":"eslint"},"lint-staged":{"*":"sh x.sh"},"config":{"ghooks":{"pre-commit":"npm test"}}}"#,
                "lint-staged",
            ),
            // Removing a section changes what runs too (another config may take over).
            (br#"{"name":"a"}"#, "lint-staged"),
        ] {
            assert_eq!(
                changed_hook_section(Some(old), new),
                Some(HookChange::Section(want.into())),
                "{}",
                String::from_utf8_lossy(new)
            );
        }
        // A new file with a section; a file that was no JSON and now has one.
        assert_eq!(
            changed_hook_section(None, br#"{"commitlint":{"extends":["./x.js"]}}"#),
            Some(HookChange::Section("commitlint".into()))
        );
        assert_eq!(
            changed_hook_section(
                Some(b"{oops"),
                br#"{"simple-git-hooks":{"pre-commit":"x"}}"#
            ),
            Some(HookChange::Section("simple-git-hooks".into()))
        );
        assert_eq!(changed_hook_section(None, br#"{"name":"a"}"#), None);
        // Red team 24 B2: text serde_json cannot read (a lone surrogate escape, which Node
        // accepts; a truncated file; not an object) is refused whole, never taken as sectionless.
        for new in [
            &br#"{"x":"\ud800","lint-staged":{"*":"sh x.sh"}}"#[..],
            br#"{"name":"a""#,
            br#"["lint-staged"]"#,
            b"",
        ] {
            assert_eq!(
                changed_hook_section(Some(old), new),
                Some(HookChange::Unreadable),
                "{}",
                String::from_utf8_lossy(new)
            );
        }
        assert!(is_package_json(OsStr::new("Package.JSON")));
        assert!(!is_package_json(OsStr::new("package.json5")));
    }
}
