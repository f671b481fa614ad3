//! Tests of the package.yaml hook-section check (red team 25 B4).

use super::*;

const HPACK: &str = "name: app\nversion: 0.1.0\ndependencies:\n  - base\n\
    lint-staged:\n  \"*.hs\": ormolu --mode inplace\nexecutables:\n  app:\n    main: Main.hs\n";

#[test]
fn ordinary_hpack_edits_are_allowed_and_hook_sections_are_not() {
    let old = Some(HPACK.as_bytes());
    for new in [
        HPACK.replace("0.1.0", "0.2.0"),
        HPACK.replace("  - base\n", "  - base\n  - text\n"),
        HPACK.replace("main: Main.hs", "main: App.hs"),
        // Comments and blank lines inside a section change nothing it runs.
        HPACK.replace("lint-staged:\n", "lint-staged:\n  # formatter\n\n"),
    ] {
        assert_eq!(changed_hook_section(old, new.as_bytes()), None, "{new}");
    }
    // A brand-new hpack file without hook sections.
    assert_eq!(
        changed_hook_section(None, b"name: x\nlibrary:\n  source-dirs: src\n"),
        None
    );
    for (new, want) in [
        (
            HPACK.replace("ormolu --mode inplace", "sh tools/x.sh"),
            "lint-staged",
        ),
        (
            HPACK.replace("lint-staged:\n  \"*.hs\": ormolu --mode inplace\n", ""),
            "lint-staged",
        ),
        (
            format!("{HPACK}commitlint:\n  extends: ./tools/cl.js\n"),
            "commitlint",
        ),
        (
            format!("{HPACK}'nano-staged':\n  '*': sh x\n"),
            "nano-staged",
        ),
        (
            format!("{HPACK}\"simple-git-hooks\" :\n  pre-commit: sh x\n"),
            "simple-git-hooks",
        ),
        (
            format!("{HPACK}config:\n  ghooks:\n    pre-commit: sh x\n"),
            "config",
        ),
        (format!("{HPACK}husky:\n- x\n"), "husky"),
        // An alias takes the section's value from another section.
        (
            format!(
                "x: &cmds\n  '*': sh x\n{}",
                HPACK.replace(
                    "lint-staged:\n  \"*.hs\": ormolu --mode inplace\n",
                    "lint-staged: *cmds\n"
                )
            ),
            "lint-staged",
        ),
    ] {
        assert_eq!(
            changed_hook_section(old, new.as_bytes()),
            Some(HookChange::Section(want.to_string())),
            "{new}"
        );
    }
}

#[test]
fn keys_spelled_another_way_are_refused_when_the_file_changes() {
    let old = Some(HPACK.as_bytes());
    for extra in [
        "{lint-staged: {'*': sh x}}\n",
        "? lint-staged\n: {'*': sh x}\n",
        "<<: {lint-staged: {'*': sh x}}\n",
        "*anchor : x\n",
        "!!str lint-staged: x\n",
        "\"lint\\x2dstaged\": x\n",
        "\tlint-staged: x\n",
    ] {
        let new = format!("{HPACK}{extra}");
        assert_eq!(
            changed_hook_section(old, new.as_bytes()),
            Some(HookChange::Unreadable),
            "{extra}"
        );
    }
    assert_eq!(
        changed_hook_section(old, &[0xff, 0xfe]),
        Some(HookChange::Unreadable)
    );
    // Unchanged text is never refused, whatever it holds.
    let odd = format!("{HPACK}? x\n");
    assert_eq!(
        changed_hook_section(Some(odd.as_bytes()), odd.as_bytes()),
        None
    );
    assert!(is_package_yaml(std::ffi::OsStr::new("Package.YAML")));
    assert!(!is_package_yaml(std::ffi::OsStr::new("package.yml")));
}
