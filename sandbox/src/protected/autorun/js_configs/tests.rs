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

/// The words of a text no parser read: `./`, `../`, `/`, `~/` (and Windows' `.\`) at a token's
/// start, quoted or bare; a URL and a comment's `//` are none; quoted strings are decoded.
#[test]
fn path_like_tokens() {
    let found =
        textual_paths("a: ./x\nb: \"../y\"\n# /abs\nc: 'https://h/p' // note\nd: [~/z, .\\w]\n");
    let found: Vec<&str> = found.iter().map(String::as_str).collect();
    assert_eq!(found, ["../y", "./x", ".\\w", "/abs", "~/z"]);
    let found = textual_paths(r#"'\x2e/a' "\u002e/b" "\ud83d\ude00" "\/c" "\q" file:///d"#);
    let found: Vec<&str> = found.iter().map(String::as_str).collect();
    assert_eq!(found, ["./a", "./b", "/c", "file:///d"]);
    assert!(is_js_config(OsStr::new(".babelrc")));
    assert!(!is_js_config(OsStr::new("tsconfig.json")));
}

/// The first rule's bypasses (an outside red team): escapes the tools' parsers decode, a `..` segment in a bare name, `file:` URLs,
/// object keys naming resolvers, loader keys nested in `overrides`, `env` and SWC's plugins,
/// YAML aliases and TOML are all seen.
#[test]
fn decoded_and_nested_paths_under_loader_keys_are_refused() {
    for (name, text, path) in [
        (
            ".eslintrc.json",
            r#"{"parser":"\/opt\/p\/evil.js"}"#,
            "/opt/p/evil.js",
        ),
        (
            ".eslintrc.json",
            r#"{"parser":"\u002fopt/e.js"}"#,
            "/opt/e.js",
        ),
        (
            ".prettierrc.json",
            r#"{"plugins":["\u002e/evil.js"]}"#,
            "./evil.js",
        ),
        (".eslintrc.yml", "parser: \"\\x2e/evil.js\"\n", "./evil.js"),
        // Red team 50: a loader's prefix, JSON5's `\x` escapes, a scoped traversal, YAML's
        // `\x2f`.
        (
            ".babelrc",
            r#"{"plugins": ["module:./evil.js"]}"#,
            "module:./evil.js",
        ),
        (".babelrc", r#"{"plugins": ['\x2e/evil.js']}"#, "./evil.js"),
        (
            ".prettierrc.json5",
            r#"{plugins: ['\x2e/evil.js']}"#,
            "./evil.js",
        ),
        (
            ".stylelintrc.json",
            r#"{"plugins": ["@s/y/../../../evil.js"]}"#,
            "@s/y/../../../evil.js",
        ),
        (
            ".markdownlint.yaml",
            "customRules:\n  - \"\\x2fopt/p/evil.js\"\n",
            "/opt/p/evil.js",
        ),
        (".prettierrc", "plugins: [\"\\x2e/evil.js\"]\n", "./evil.js"),
        (
            ".eslintrc.json",
            r#"{"parser": "y/../../evil.js"}"#,
            "y/../../evil.js",
        ),
        (
            ".prettierrc",
            r#"{"plugins": ["y/../../e.js"]}"#,
            "y/../../e.js",
        ),
        (
            ".eslintrc.json",
            r#"{"extends": ["y/../../e.js"]}"#,
            "y/../../e.js",
        ),
        (
            ".babelrc",
            r#"{"presets": [["y/../../e.js", {}]]}"#,
            "y/../../e.js",
        ),
        (
            ".markdownlint-cli2.jsonc",
            r#"{"customRules": ["y/../e.js"]}"#,
            "y/../e.js",
        ),
        (
            ".swcrc",
            r#"{"jsc": {"experimental": {"plugins": [["y/../../e.wasm", {}]]}}}"#,
            "y/../../e.wasm",
        ),
        (
            ".prettierrc.json",
            r#"{"plugins": ["file:///p/e.mjs"]}"#,
            "file:///p/e.mjs",
        ),
        (
            ".prettierrc.toml",
            "plugins = [\"./evil.js\"]\n",
            "./evil.js",
        ),
        (
            ".eslintrc.json",
            r#"{"settings": {"import/resolver": {"./r.js": {}}}}"#,
            "./r.js",
        ),
        (
            ".eslintrc.json",
            r#"{"overrides": [{"files": ["*.ts"], "parser": "./e.js"}]}"#,
            "./e.js",
        ),
        (
            ".babelrc",
            "{env: {test: {plugins: ['./e.js',],},},}",
            "./e.js",
        ),
        (".eslintrc.yml", "x: &p ./e.js\nparser: *p\n", "./e.js"),
        (
            ".babelrc",
            r#"{"plugins": ["y/%2e%2e/e.js"]}"#,
            "y/%2e%2e/e.js",
        ),
        (".eslintrc", "// c\nparser: \"./e.js\" /* c */\n", "./e.js"),
        (
            ".eslintrc.json",
            r#"{"\u0070lugins": ["./e.js"]}"#,
            "./e.js",
        ),
        (
            ".prettierrc.yaml",
            "base: &b [./e.js]\nplugins: *b\n",
            "./e.js",
        ),
    ] {
        let why = refusal(name, Some("{}"), text).unwrap_or_else(|| panic!("{name}: {text}"));
        assert!(
            why.contains(&format!("it adds the path {path:?}")) && why.ends_with("[editor_config]"),
            "{name}: {why}"
        );
    }
    let pkg = r#"{"name": "x", "babel": {"plugins": ["\u002e/e.js"]}}"#;
    let why = refusal("package.json", Some(r#"{"name": "x"}"#), pkg).unwrap();
    assert!(
        why.contains(r#"the path "./e.js" to package.json's "babel""#),
        "{why}"
    );
}

/// Prettier 3 and the others read `package.yaml`'s sections too; hpack's own keys and paths
/// stay the project's.
#[test]
fn package_yaml_tool_sections_are_checked() {
    let old = "name: x\nsource-dirs: src\n";
    for (section, text) in [
        ("prettier", "prettier:\n  plugins: [\"./evil.js\"]\n"),
        ("eslintConfig", "eslintConfig: {parser: \"\\x2e/e.js\"}\n"),
    ] {
        let why = refusal("package.yaml", Some(old), &format!("{old}{text}")).unwrap();
        assert!(
            why.contains(&format!("package.yaml's \"{section}\" section"))
                && why.ends_with("[editor_config]"),
            "{why}"
        );
    }
    let hpack = "name: x\nsource-dirs: ./src\nmain: ../app/Main.hs\nprettier: {semi: false}\n";
    assert_eq!(refusal("package.yaml", Some(old), hpack), None);
    let plugins = "name: x\nprettier:\n  plugins: [prettier-plugin-tailwindcss]\n";
    assert_eq!(refusal("package.yaml", Some(old), plugins), None);
}

/// Paths under keys that load no code, package names and paths the old file named stay
/// allowed.
#[test]
fn data_paths_and_package_names_are_allowed() {
    for (name, text) in [
        (
            ".eslintrc.json",
            r#"{"parserOptions": {"project": "./tsconfig.json", "tsconfigRootDir": "."},
            "ignorePatterns": ["./dist/", "/build/"]}"#,
        ),
        (
            ".eslintrc.yml",
            "parserOptions:\n  project: ./tsconfig.json\nignorePatterns: [/build/]\nparser: ~\n",
        ),
        (
            ".prettierrc.json",
            r#"{"$schema": "./node_modules/prettier/schema.json",
            "overrides": [{"files": "./src/**/*.js", "options": {"semi": false}}]}"#,
        ),
        (
            ".babelrc",
            "{ignore: ['./dist'], only: ['./src'], overrides: [{include: './a', exclude: '../b'}]}",
        ),
        (
            ".markdownlint-cli2.jsonc",
            r#"{"globs": ["./docs/**/*.md"], "ignores": ["./x"], "files": ["/r.md"]}"#,
        ),
        (
            ".prettierrc",
            r#"{"plugins": ["prettier-plugin-tailwindcss"]}"#,
        ),
        (
            ".eslintrc.json",
            r#"{"extends": ["eslint:recommended", "plugin:react/recommended"],
            "plugins": ["@scope/pkg"], "parser": "@typescript-eslint/parser"}"#,
        ),
    ] {
        assert_eq!(refusal(name, Some("{}"), text), None, "{name}: {text}");
        assert_eq!(refusal(name, None, text), None, "{name} created");
    }
    let old = r#"{"parser": "./p.js", "plugins": ["y/../q.js"]}"#;
    let new = r#"{"plugins": ["y/../q.js"], "parser": "\u002e/p.js", "rules": {"semi": 1}}"#;
    assert_eq!(refusal(".eslintrc.json", Some(old), new), None);
    for path in [
        "C:\\x.js",
        "d:/x",
        "..",
        ".",
        "~x",
        "#x",
        "data:text/javascript,1",
        " ./x",
    ] {
        assert!(is_path(path), "{path}");
    }
    for name in [
        "eslint:recommended",
        "@scope/pkg",
        "https://h/p",
        "a..b",
        ".x",
        "x/..",
    ] {
        assert_eq!(is_path(name), name == "x/..", "{name}");
    }
}

/// New text its dialect's parser cannot read is looked at word by word, escapes decoded; alias
/// bombs and deep nesting are such text, and read without exhausting memory or the stack.
#[test]
fn unparseable_new_text_is_read_word_by_word() {
    let why = refusal(".eslintrc.json", Some("{}"), r#"{"parser": "\/opt\/e.js""#).unwrap();
    assert!(why.contains(r#"the path "/opt/e.js""#), "{why}");
    // Data paths too, then, unless the old text had them.
    let old = r#"{"ignorePatterns": ["./dist/"]}"#;
    assert!(
        refusal(
            ".eslintrc.json",
            Some("{}"),
            r#"{"ignorePatterns": ["./dist/"]"#
        )
        .is_some()
    );
    assert_eq!(
        refusal(
            ".eslintrc.json",
            Some(old),
            r#"{"ignorePatterns": ["./dist/"],"#
        ),
        None
    );
    let mut bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n".to_string();
    for level in 1..12 {
        let prev = format!("*a{}", level - 1);
        let items = [prev.as_str(); 10].join(", ");
        bomb.push_str(&format!("a{level}: &a{level} [{items}]\n"));
    }
    assert_eq!(refusal(".eslintrc.yml", Some("{}"), &bomb), None);
    let with_path = format!("{bomb}parser: ./e.js\n");
    assert!(refusal(".eslintrc.yml", Some("{}"), &with_path).is_some());
    let deep = format!(
        "{{\"plugins\": {}\"./e.js\"{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    for name in [".babelrc", ".eslintrc", ".eslintrc.yaml"] {
        assert!(refusal(name, Some("{}"), &deep).is_some(), "{name}");
    }
    let deep = format!(
        "plugins = {}\"./e.js\"{}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert!(refusal(".prettierrc.toml", Some(""), &deep).is_some());
}
