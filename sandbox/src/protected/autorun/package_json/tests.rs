//! Tests of the package.json hook-section check.

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
