//! Unit tests of the JavaScript tools' JSON and YAML configs (red team 48 F7).

use std::ffi::OsStr;

use super::super::package_files::CheckedFile;
use super::*;

/// The first refusal of the kinds a file of this name is checked as, with its class.
fn refusal(name: &str, old: Option<&str>, new: &str) -> Option<String> {
    let kind = CheckedFile::of(OsStr::new(name)).expect("a checked file");
    kind.with_companions().find_map(|kind| {
        let why = kind.refusal(old.map(str::as_bytes), new.as_bytes(), false)?;
        Some(format!("{why} [{}]", kind.class().name()))
    })
}

/// A relative or absolute path a config names (a parser, a plugin, a custom syntax or rule, a
/// preset) is refused when it is added or changed, in JSON (with comments and trailing commas),
/// YAML and `package.json`'s sections; package names, a `$schema` URL, rule edits and paths the
/// old file named already stay allowed.
#[test]
fn a_path_added_to_a_js_tools_config_is_refused_and_other_edits_are_not() {
    for (name, text) in [
        (
            ".eslintrc.json",
            r#"{"root": true, "parser": "./evil-parser.js"}"#,
        ),
        (
            ".eslintrc",
            "// eslint\n{\"plugins\": ['../x/plugin.js',],}",
        ),
        (".eslintrc.yml", "root: true\nparser: ./evil.js\n"),
        (".prettierrc", r#"{"plugins": ["./p.mjs"]}"#),
        (".prettierrc.yaml", "plugins:\n  - ./p.cjs\n"),
        (
            ".stylelintrc.json",
            r#"{"customSyntax": "/opt/p/syntax.js"}"#,
        ),
        (
            ".markdownlint-cli2.jsonc",
            r#"{"customRules": ["./rules/r.js"]}"#,
        ),
        (".babelrc", r#"{"presets": ["~/p/preset.js"]}"#),
        (".ESLINTRC.JSON", r#"{"parser": "./x.js"}"#),
    ] {
        let why = refusal(name, Some("{}"), text).unwrap_or_else(|| panic!("{name}: {text}"));
        assert!(
            why.contains("it adds the path") && why.ends_with("[editor_config]"),
            "{why}"
        );
        assert!(refusal(name, None, text).is_some(), "{name} created");
    }
    let before = r#"{"$schema": "https://json.schemastore.org/eslintrc", "parser": "./p.js",
        "plugins": ["react"], "rules": {"semi": "error"}}"#;
    for after in [
        r#"{"$schema": "https://json.schemastore.org/eslintrc", "parser": "./p.js",
        "plugins": ["react", "@scope/eslint-plugin-x"], "rules": {"semi": "off"}}"#,
        r#"{"parser": "./p.js"}"#,
    ] {
        assert_eq!(
            refusal(".eslintrc.json", Some(before), after),
            None,
            "{after}"
        );
    }
    assert!(refusal(".eslintrc.json", Some(before), r#"{"parser": "./q.js"}"#).is_some());
    // package.json: the tools' sections only; `main`, `bin` and scripts are other rules'.
    let pkg = |prettier: &str| {
        format!(r#"{{"name": "x", "main": "./index.js", "prettier": {prettier}}}"#)
    };
    let old = pkg(r#"{"semi": false}"#);
    assert_eq!(
        refusal("package.json", Some(&old), &pkg(r#"{"semi": true}"#)),
        None
    );
    let why = refusal(
        "package.json",
        Some(&old),
        &pkg(r#"{"plugins": ["./x.js"]}"#),
    )
    .unwrap();
    assert!(why.contains("package.json's \"prettier\" section"), "{why}");
    assert!(why.ends_with("[editor_config]"), "{why}");
    assert_eq!(
        refusal("package.json", None, r#"{"main": "./index.js"}"#),
        None
    );
}

/// What counts as a path: `./`, `../`, `/`, `~/` (and Windows' `.\`) at a token's start, quoted
/// or bare; a URL's rest after its colon and a comment's `//` do not.
#[test]
fn path_like_tokens() {
    let found = paths_in("a: ./x\nb: \"../y\"\n# /abs\nc: 'https://h/p' // note\nd: [~/z, .\\w]\n");
    let found: Vec<&str> = found.iter().map(String::as_str).collect();
    assert_eq!(found, ["../y", "./x", ".\\w", "/abs", "~/z"]);
    assert!(is_js_config(OsStr::new(".babelrc")));
    assert!(!is_js_config(OsStr::new("tsconfig.json")));
}
