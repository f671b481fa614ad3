//! The JSON and YAML configs of the JavaScript linters, formatters and compilers the owner's
//! editor extensions run on open or save (red team 48 F7): ESLint's `"parser": "./x.js"`,
//! Prettier's and Stylelint's `plugins`, Stylelint's `customSyntax`, markdownlint's
//! `customRules`, Babel's `plugins` and `presets` load the project file a relative path names,
//! unconfined, though the file itself is data. Their code forms (`.eslintrc.js`, …) are
//! `editor_config` whole; these stay writable, but a write that adds or changes a path the
//! config names (a string starting `./`, `../`, `/` or `~/`) is refused, like pylint's
//! `load-plugins`. A package name (`"plugins": ["prettier-plugin-x"]`) loads from
//! `node_modules`, an installed-packages place already, and is not a path here. The same holds
//! for `package.json`'s sections of these tools (`eslintConfig`, `prettier`, `stylelint`,
//! `babel`, `markdownlint`). No parser is trusted with these files' dialects (comments,
//! trailing commas, YAML): every quoted string and bare word of the text is looked at.

use std::collections::BTreeSet;
use std::ffi::OsStr;

/// The configs read this way, by name (folded as the other auto-run names).
const NAMES: [&str; 24] = [
    ".eslintrc",
    ".eslintrc.json",
    ".eslintrc.yml",
    ".eslintrc.yaml",
    ".prettierrc",
    ".prettierrc.json",
    ".prettierrc.json5",
    ".prettierrc.yml",
    ".prettierrc.yaml",
    ".prettierrc.toml",
    ".stylelintrc",
    ".stylelintrc.json",
    ".stylelintrc.yml",
    ".stylelintrc.yaml",
    ".markdownlint.json",
    ".markdownlint.jsonc",
    ".markdownlint.yaml",
    ".markdownlint.yml",
    ".markdownlint-cli2.jsonc",
    ".markdownlint-cli2.yaml",
    ".babelrc",
    ".babelrc.json",
    "babel.config.json",
    ".swcrc",
];

/// `package.json`'s sections these tools read as their config.
pub const PACKAGE_SECTIONS: [&str; 5] = [
    "eslintConfig",
    "prettier",
    "stylelint",
    "babel",
    "markdownlint",
];

/// Whether a file of this name is such a config.
pub fn is_js_config(name: &OsStr) -> bool {
    NAMES.contains(&super::fold(name).as_str())
}

/// The first path `new` names that `old` (`None`: absent) did not.
pub fn added_path(old: Option<&str>, new: &str) -> Option<String> {
    let before = paths_in(old.unwrap_or_default());
    paths_in(new)
        .into_iter()
        .find(|path| !before.contains(path))
}

/// Every path-like token of `text`: quoted strings (either quote, backslash escapes kept as
/// written) and the words between quotes, split at blanks and JSON/YAML punctuation.
fn paths_in(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut keep = |token: &str| {
        let token = token.trim();
        // `//`: a URL's rest (`https://…` split at its colon), a comment.
        if token.starts_with("//") {
            return;
        }
        if ["./", "../", "/", "~/", ".\\", "..\\"]
            .iter()
            .any(|start| token.starts_with(start))
            || token == "."
            || token == ".."
        {
            out.insert(token.to_string());
        }
    };
    let mut chars = text.chars().peekable();
    let mut word = String::new();
    while let Some(c) = chars.next() {
        if c == '"' || c == '\'' {
            keep(&std::mem::take(&mut word));
            let mut quoted = String::new();
            while let Some(q) = chars.next() {
                if q == '\\' {
                    if let Some(escaped) = chars.next() {
                        quoted.push(q);
                        quoted.push(escaped);
                    }
                    continue;
                }
                if q == c {
                    break;
                }
                quoted.push(q);
            }
            keep(&quoted);
        } else if c.is_whitespace() || "[]{},:=#".contains(c) {
            keep(&std::mem::take(&mut word));
        } else {
            word.push(c);
        }
    }
    keep(&word);
    out
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
