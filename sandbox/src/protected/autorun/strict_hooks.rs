//! The owner's opt-in "strict hooks" mode (red team 24 B1): a git hook that runs the project's
//! own checks (`npm test`, `make lint`, `npx eslint .`) runs, at the owner's next commit, what
//! a session wrote into the checks' definitions. By default those files stay writable (they are
//! the work, docs/design/protected-set.md); with [`STRICT_HOOKS_ENV`]` = 1` the bounded list
//! here is refused as `git_hooks`, by name at any depth (a monorepo's packages run their own),
//! under every name a file is reachable as, and package.json's definition sections are compared
//! like its hook sections.

/// The env var that turns strict hooks on (`1`; `0` or unset: off), read at gateway start.
pub const STRICT_HOOKS_ENV: &str = "CLAUDE_TOOLS_STRICT_HOOKS";

/// package.json sections a hook's `npm test`/`npm run`, ESLint, Prettier and Jest read as
/// their definition (compared under strict hooks only).
pub const PACKAGE_SECTIONS: [&str; 4] = ["scripts", "eslintConfig", "prettier", "jest"];

/// What the list holds, for messages and `gatewayctl doctor`.
pub const DEFINITIONS: &str = "the definitions of the checks a git hook runs: package.json's \
     scripts, eslintConfig, prettier and jest sections, Makefile/GNUmakefile/makefile, \
     justfile, Taskfile.yml/.yaml, ESLint's eslint.config.* and .eslintrc*, Prettier's \
     .prettierrc* and prettier.config.*, jest.config.*, vitest.config.*, vite.config.*, \
     .mocharc.*, pytest's conftest.py and pytest.ini, tox.ini, noxfile.py, and the configs \
     editor extensions load as code when a file opens: Stylelint's .stylelintrc* and \
     stylelint.config.*, markdownlint-cli2's .markdownlint-cli2.* and .markdownlint.*, \
     tailwind.config.*, postcss.config.* and .postcssrc*, babel.config.* and .babelrc*, \
     svelte.config.*, astro.config.*, playwright.config.*, uno.config.*, windi.config.*, \
     panda.config.*, graphql.config.*, .graphqlrc* and apollo.config.*";

/// Parse the owner's value: `1`/`0`, empty or unset is off; anything else refuses the start.
pub fn parse(value: &str) -> Result<bool, String> {
    match value.trim() {
        "1" => Ok(true),
        "0" | "" => Ok(false),
        other => Err(format!(
            "{STRICT_HOOKS_ENV}: {:?} is neither 1 (on) nor 0 (off)",
            other.chars().take(16).collect::<String>()
        )),
    }
}

/// Whether a file of this name defines checks a hook runs (case-insensitively, as the other
/// auto-run names).
pub fn defines_checks(name: &std::ffi::OsStr) -> bool {
    let name = super::fold(name);
    const EXACT: [&str; 16] = [
        "makefile",
        "gnumakefile",
        "justfile",
        ".justfile",
        "taskfile.yml",
        "taskfile.yaml",
        ".eslintrc",
        ".prettierrc",
        "conftest.py",
        "pytest.ini",
        "tox.ini",
        "noxfile.py",
        ".stylelintrc",
        ".postcssrc",
        ".babelrc",
        ".graphqlrc",
    ];
    const PREFIXES: [&str; 27] = [
        "eslint.config.",
        ".eslintrc.",
        ".prettierrc.",
        "prettier.config.",
        "jest.config.",
        "vitest.config.",
        "vite.config.",
        ".mocharc.",
        "vitest.workspace.",
        // Loaded (JavaScript configs: run) by editor extensions on open (red team 28).
        ".stylelintrc.",
        "stylelint.config.",
        ".markdownlint-cli2.",
        ".markdownlint.",
        "tailwind.config.",
        "postcss.config.",
        ".postcssrc.",
        // Red team 30 N8: loaded by their editor extensions or language servers too.
        "babel.config.",
        ".babelrc.",
        "svelte.config.",
        "astro.config.",
        "playwright.config.",
        "uno.config.",
        "windi.config.",
        "panda.config.",
        "graphql.config.",
        ".graphqlrc.",
        "apollo.config.",
    ];
    EXACT.contains(&name.as_str()) || PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn the_list_is_bounded_and_the_value_strict() {
        for name in [
            "Makefile",
            "GNUmakefile",
            "eslint.config.mjs",
            ".eslintrc.json",
            "conftest.py",
            "jest.config.ts",
            "tailwind.config.js",
            ".stylelintrc.cjs",
            ".markdownlint-cli2.mjs",
            "postcss.config.mjs",
            "svelte.config.js",
            ".babelrc.json",
            "Taskfile.yml",
        ] {
            assert!(defines_checks(OsStr::new(name)), "{name}");
        }
        for name in [
            "Makefile.md",
            "src.mk",
            "package.json",
            "main.rs",
            "eslint.md",
        ] {
            assert!(!defines_checks(OsStr::new(name)), "{name}");
        }
        assert_eq!(parse("1"), Ok(true));
        assert_eq!(parse(""), Ok(false));
        assert_eq!(parse(" 0 "), Ok(false));
        assert!(parse("yes").unwrap_err().contains(STRICT_HOOKS_ENV));
    }
}
