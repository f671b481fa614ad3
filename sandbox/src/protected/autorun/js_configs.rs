//! The JSON and YAML configs of the JavaScript linters, formatters and compilers the owner's
//! editor extensions run on open or save (red team 48 F7): ESLint's `"parser": "./x.js"`,
//! Prettier's and Stylelint's `plugins`, Stylelint's `customSyntax`, markdownlint's
//! `customRules`, Babel's `plugins` and `presets` load the project file a path names,
//! unconfined, though the file itself is data. Their code forms (`.eslintrc.js`, …) are
//! `editor_config` whole; these stay writable, but a write that adds a path under a key that
//! loads code is refused, like pylint's `load-plugins`. The same holds for `package.json`'s and
//! `package.yaml`'s sections of these tools (`eslintConfig`, `prettier`, `stylelint`, `babel`,
//! `markdownlint`; Prettier 3 reads `package.yaml` too).
//!
//! The config is parsed as its tool parses it (JSON5, a superset of the JSON and JSONC the
//! others read; YAML; TOML), so escapes are decoded (`"\/opt\/x.js"`, `"\u002e/x.js"`,
//! `"\x2e/x.js"` are the paths the tool loads), and only the strings at any depth under a
//! loader key ([`LOADER_KEYS`], a `settings` key ending `/resolver`; object keys there too) are
//! looked at, found wherever they nest (`overrides[]`, Babel's `env`, SWC's
//! `jsc.experimental.plugins`). Data paths elsewhere (`parserOptions.project`,
//! `ignorePatterns`, `$schema`, `overrides[].files`, Babel's `ignore`) stay allowed. A value is
//! a path ([`is_path`]) when it is relative or absolute, a `file:` or `data:` URL, a package
//! import (`#x`), or has a `..` segment anywhere: Node normalises `y/../../x.js` into the
//! project as soon as any `node_modules/` exists. A package name (`"prettier-plugin-x"`,
//! `eslint:recommended`, `@scope/pkg`) loads from `node_modules`, an installed-packages place
//! already. New text its dialect's parser cannot read is looked at word by word instead (every
//! quoted string, escapes decoded, and bare word): any path-like one it adds is refused.

mod yaml;

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

/// `package.json`'s (and `package.yaml`'s) sections these tools read as their config.
pub const PACKAGE_SECTIONS: [&str; 5] = [
    "eslintConfig",
    "prettier",
    "stylelint",
    "babel",
    "markdownlint",
];

/// Keys whose value (at any depth, object keys included) names code the tool loads: parsers,
/// plugins, shared configs, presets, custom rules and syntaxes, processors, resolvers,
/// formatters, and the places bare names are resolved from (markdownlint-cli2's
/// `modulePaths`, Stylelint's `configBasedir`, Prettier 2's `pluginSearchDirs`,
/// `@babel/eslint-parser`'s `babelOptions.configFile`, a JavaScript Babel config).
const LOADER_KEYS: [&str; 17] = [
    "parser",
    "plugins",
    "extends",
    "presets",
    "customRules",
    "customSyntax",
    "processor",
    "processors",
    "resolver",
    "markdownItPlugins",
    "outputFormatters",
    "formatter",
    "require",
    "modulePaths",
    "configBasedir",
    "pluginSearchDirs",
    "configFile",
];

/// How deep a config's lists and maps may nest: its parsers and walks recurse, and a deeper
/// text is read word by word instead of overflowing the stack.
const MAX_DEPTH: usize = 128;

/// How a config's text is parsed, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// JSON, JSONC or JSON5 (`.json`, `.jsonc`, `.json5`, `.babelrc`, `.swcrc`).
    Json,
    /// `.yml`, `.yaml`.
    Yaml,
    /// A name without extension (`.eslintrc`, `.prettierrc`, `.stylelintrc`): its tool reads
    /// YAML (ESLint after stripping `//` and `/* */` comments), and JSON is YAML too.
    YamlOrJson,
    /// `.prettierrc.toml`.
    Toml,
}

/// A parsed config: strings, lists, maps with their keys as nodes; numbers, booleans and nulls
/// name nothing.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Str(String),
    List(Vec<Node>),
    Map(Vec<(Node, Node)>),
    Other,
}

impl Node {
    fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Self::Str(s) => Value::String(s.clone()),
            Self::List(items) => Value::Array(items.iter().map(Self::to_json).collect()),
            Self::Map(entries) => Value::Object(
                entries
                    .iter()
                    .filter_map(|(k, v)| match k {
                        Self::Str(key) => Some((key.clone(), v.to_json())),
                        _ => None,
                    })
                    .collect(),
            ),
            Self::Other => Value::Null,
        }
    }

    fn from_json(value: &serde_json::Value) -> Self {
        use serde_json::Value;
        match value {
            Value::String(s) => Self::Str(s.clone()),
            Value::Array(items) => Self::List(items.iter().map(Self::from_json).collect()),
            Value::Object(map) => Self::Map(
                map.iter()
                    .map(|(k, v)| (Self::Str(k.clone()), Self::from_json(v)))
                    .collect(),
            ),
            Value::Null | Value::Bool(_) | Value::Number(_) => Self::Other,
        }
    }

    fn from_toml(value: &toml::Value) -> Self {
        use toml::Value;
        match value {
            Value::String(s) => Self::Str(s.clone()),
            Value::Array(items) => Self::List(items.iter().map(Self::from_toml).collect()),
            Value::Table(table) => Self::Map(
                table
                    .iter()
                    .map(|(k, v)| (Self::Str(k.clone()), Self::from_toml(v)))
                    .collect(),
            ),
            Value::Integer(_) | Value::Float(_) | Value::Boolean(_) | Value::Datetime(_) => {
                Self::Other
            }
        }
    }

    /// A config the tool would take: a map, or nothing at all (an empty file). A bare scalar
    /// root means the parser read the text otherwise than the tool does (YAML takes almost any
    /// text as one plain string), so it counts as unparseable.
    fn is_config(&self) -> bool {
        matches!(self, Self::Map(_) | Self::Other)
    }

    /// The value of top-level key `key` (every one, duplicates kept).
    fn sections<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        let entries = match self {
            Self::Map(entries) => entries.as_slice(),
            _ => &[],
        };
        entries
            .iter()
            .filter(move |(k, _)| matches!(k, Self::Str(k) if k == key))
            .map(|(_, v)| v)
    }
}

/// Whether a file of this name is such a config.
pub fn is_js_config(name: &OsStr) -> bool {
    dialect(name).is_some()
}

/// How a file of this name is parsed, when it is such a config.
pub fn dialect(name: &OsStr) -> Option<Dialect> {
    let name = super::fold(name);
    if !NAMES.contains(&name.as_str()) {
        return None;
    }
    Some(if name.ends_with(".yml") || name.ends_with(".yaml") {
        Dialect::Yaml
    } else if name.ends_with(".toml") {
        Dialect::Toml
    } else if matches!(name.as_str(), ".eslintrc" | ".prettierrc" | ".stylelintrc") {
        Dialect::YamlOrJson
    } else {
        Dialect::Json
    })
}

/// The first path under a loader key that `new` names and `old` (`None`: absent) did not.
/// When `new` does not parse, every path-like word of the two texts is compared instead.
pub fn added_path(dialect: Dialect, old: Option<&str>, new: &str) -> Option<String> {
    let Some(after) = parse(dialect, new) else {
        return first_added(&textual_paths(old.unwrap_or_default()), textual_paths(new));
    };
    // An old text that does not parse vouches for nothing.
    let before = old
        .and_then(|old| parse(dialect, old))
        .map(|docs| loaded_paths(docs.iter()))
        .unwrap_or_default();
    first_added(&before, loaded_paths(after.iter()))
}

/// [`added_path`] for a section of `package.json` (its old value, `None`: absent).
pub fn added_section_path(
    old: Option<&serde_json::Value>,
    new: &serde_json::Value,
) -> Option<String> {
    let before = old
        .map(|old| loaded_paths(std::iter::once(&Node::from_json(old))))
        .unwrap_or_default();
    first_added(
        &before,
        loaded_paths(std::iter::once(&Node::from_json(new))),
    )
}

/// The first of `package.yaml`'s [`PACKAGE_SECTIONS`] whose new value names a path under a
/// loader key its old one did not, with that path; the section is `None` when the new text is
/// no YAML this reader parses and a path-like word was added anywhere in it.
pub fn added_package_yaml_path(
    old: Option<&str>,
    new: &str,
) -> Option<(Option<&'static str>, String)> {
    let Some(after) = parse(Dialect::Yaml, new) else {
        let added = first_added(&textual_paths(old.unwrap_or_default()), textual_paths(new))?;
        return Some((None, added));
    };
    let before = old.and_then(|old| parse(Dialect::Yaml, old));
    PACKAGE_SECTIONS.into_iter().find_map(|section| {
        let paths = |docs: &[Node]| loaded_paths(docs.iter().flat_map(|d| d.sections(section)));
        let before = before.as_deref().map(paths).unwrap_or_default();
        Some((Some(section), first_added(&before, paths(&after))?))
    })
}

fn first_added(before: &BTreeSet<String>, after: BTreeSet<String>) -> Option<String> {
    after.into_iter().find(|path| !before.contains(path))
}

/// The documents of a config's text, or `None` when it is no config this dialect's parser
/// reads.
fn parse(dialect: Dialect, text: &str) -> Option<Vec<Node>> {
    let text = text.trim_start_matches('\u{feff}');
    let docs = match dialect {
        Dialect::Json => vec![json5_node(text)?],
        Dialect::Toml => vec![Node::from_toml(&toml::Value::Table(text.parse().ok()?))],
        Dialect::Yaml => yaml::documents(text)?,
        Dialect::YamlOrJson => {
            // Every reading the tools may take, together: ESLint strips comments before its
            // YAML parser, Prettier and Stylelint do not; JSON5 for a file that is JSON5 only.
            let readings: Vec<Vec<Node>> = [
                yaml::documents(&strip_comments(text)),
                yaml::documents(text),
                json5_node(text).map(|node| vec![node]),
            ]
            .into_iter()
            .flatten()
            .filter(|docs| docs.iter().all(Node::is_config))
            .collect();
            if readings.is_empty() {
                return None;
            }
            readings.into_iter().flatten().collect()
        }
    };
    docs.iter().all(Node::is_config).then_some(docs)
}

/// `text` as JSON5, when it nests no deeper than [`MAX_DEPTH`] (the json5 crate recurses
/// without a bound of its own).
fn json5_node(text: &str) -> Option<Node> {
    json5_value(text).map(|v| Node::from_json(&v))
}

/// `text` as JSON5 (JSON with comments and trailing commas: what the agents' settings are
/// too), within the nesting bound.
pub(super) fn json5_value(text: &str) -> Option<serde_json::Value> {
    if json5_depth(text) > MAX_DEPTH {
        return None;
    }
    json5::from_str(text).ok()
}

/// `text`'s first YAML document as a JSON value (maps keep their string keys; aliases
/// resolved, within the same bounds as the configs'), for the agents' YAML settings.
pub(super) fn yaml_value(text: &str) -> Option<serde_json::Value> {
    yaml::documents(text)?.first().map(Node::to_json)
}

/// How deep `text`'s brackets nest, outside JSON5 strings (either quote, backslash escapes)
/// and comments. In any valid prefix of JSON5 this is the parser's own depth.
fn json5_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => {
                while let Some(q) = chars.next() {
                    if q == '\\' {
                        chars.next();
                    } else if q == c {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => while chars.next_if(|&n| n != '\n').is_some() {},
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for n in chars.by_ref() {
                    if last == '*' && n == '/' {
                        break;
                    }
                    last = n;
                }
            }
            '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// `text` with `//` and `/* */` comments outside double-quoted strings blanked, as
/// strip-json-comments (ESLint's) does.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                out.extend(chars.next());
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                // To the line's end, which stays.
                while chars.peek().is_some_and(|&n| n != '\n') {
                    chars.next();
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for n in chars.by_ref() {
                    if last == '*' && n == '/' {
                        break;
                    }
                    // Lines stay where they were, so YAML's indentation holds.
                    if n == '\n' {
                        out.push('\n');
                    }
                    last = n;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

/// Every path (by [`is_path`]) under a loader key of these documents.
fn loaded_paths<'a>(docs: impl Iterator<Item = &'a Node>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for doc in docs {
        collect(doc, false, &mut out);
    }
    out
}

/// Walks `node`, `loads` when it sits under a loader key: then every string and object key
/// counts; elsewhere only loader keys are looked for, at any depth.
fn collect(node: &Node, loads: bool, out: &mut BTreeSet<String>) {
    match node {
        Node::Str(value) => {
            if loads && is_path(value) {
                out.insert(value.clone());
            }
        }
        Node::List(items) => items.iter().for_each(|item| collect(item, loads, out)),
        Node::Map(entries) => {
            for (key, value) in entries {
                let key_loads = matches!(key, Node::Str(k) if is_loader_key(k));
                collect(key, loads, out);
                collect(value, loads || key_loads, out);
            }
        }
        Node::Other => {}
    }
}

/// A loader key, or an ESLint `settings` key naming a resolver (`import/resolver`).
fn is_loader_key(key: &str) -> bool {
    LOADER_KEYS.contains(&key) || key.ends_with("/resolver")
}

/// Whether a value a loader key holds names a file rather than an installed package: it starts
/// `./`, `../`, `/`, `\`, `~`, `#` (a package import, which the project's `package.json` maps
/// to a file), `.\`, `..\`, is `.` or `..`, has a `..` segment anywhere (split at `/` and `\`),
/// is a `file:` or `data:` URL (any case) or a Windows absolute path. The same holds after
/// `%2e` is decoded, as a URL resolver does.
pub fn is_path(value: &str) -> bool {
    let decoded = value.replace("%2e", ".").replace("%2E", ".");
    [value, decoded.as_str()].into_iter().any(|value| {
        let value = value.trim();
        let lower = value.to_ascii_lowercase();
        let bytes = value.as_bytes();
        value.starts_with(['/', '\\', '~', '#'])
            || ["./", "../", ".\\", "..\\"]
                .iter()
                .any(|s| value.starts_with(s))
            || value == "."
            || value == ".."
            || value
                .split(['/', '\\'])
                .any(|segment| segment.trim() == "..")
            || lower.starts_with("file:")
            || lower.starts_with("data:")
            || (bytes.len() >= 3
                && bytes[0].is_ascii_alphabetic()
                && bytes[1] == b':'
                && matches!(bytes[2], b'/' | b'\\'))
            // A loader's prefix before a path (Babel's `module:./x.js`, red team 50;
            // `npm:`, `node:`): the rest decides.
            || value.split_once(':').is_some_and(|(prefix, rest)| {
                prefix.len() > 1
                    && !prefix.eq_ignore_ascii_case("http")
                    && !prefix.eq_ignore_ascii_case("https")
                    && prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && is_path(rest)
            })
    })
}

/// Every path-like word of a text no parser read: quoted strings (either quote, escapes
/// decoded as JSON5 and YAML decode them) and the words between, split at blanks, JSON/YAML
/// punctuation and a `:` that ends a key. A bare word starting `//` is a comment.
fn textual_paths(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut keep = |token: &str, quoted: bool| {
        let token = token.trim();
        if (quoted || !token.starts_with("//")) && is_path(token) {
            out.insert(token.to_string());
        }
    };
    let mut chars = text.chars().peekable();
    let mut word = String::new();
    while let Some(c) = chars.next() {
        if c == '"' || c == '\'' {
            keep(&std::mem::take(&mut word), false);
            let mut quoted = String::new();
            while let Some(q) = chars.next() {
                if q == '\\' {
                    decode_escape(&mut chars, &mut quoted);
                    continue;
                }
                if q == c {
                    break;
                }
                quoted.push(q);
            }
            keep(&quoted, true);
        } else if c.is_whitespace()
            || "[]{},=#".contains(c)
            || (c == ':' && chars.peek().is_none_or(|n| n.is_whitespace()))
        {
            keep(&std::mem::take(&mut word), false);
        } else {
            word.push(c);
        }
    }
    keep(&word, false);
    out
}

/// Decodes the escape after a backslash into `out`: `\xXX`, `\uXXXX` (surrogate pairs
/// joined), `\UXXXXXXXX`, and any other `\c` as `c` itself (`\/`, `\'`, `\"`), which is what
/// JSON5 does; a malformed escape keeps its characters.
fn decode_escape(chars: &mut std::iter::Peekable<std::str::Chars>, out: &mut String) {
    let hex = |chars: &mut std::iter::Peekable<std::str::Chars>, len: usize| {
        let mut digits = String::new();
        while digits.len() < len && chars.peek().is_some_and(char::is_ascii_hexdigit) {
            digits.extend(chars.next());
        }
        (digits.len() == len)
            .then(|| u32::from_str_radix(&digits, 16).ok())
            .flatten()
            .ok_or(digits)
    };
    let Some(kind) = chars.next() else { return };
    let len = match kind {
        'x' => 2,
        'u' => 4,
        'U' => 8,
        other => {
            out.push(other);
            return;
        }
    };
    match hex(chars, len) {
        Ok(high @ 0xd800..=0xdbff) if kind == 'u' => {
            // A surrogate pair spells one character as two escapes.
            let mut ahead = chars.clone();
            let low = (ahead.next() == Some('\\') && ahead.next() == Some('u'))
                .then(|| hex(&mut ahead, 4).ok())
                .flatten()
                .filter(|low| (0xdc00..=0xdfff).contains(low));
            match low {
                Some(low) => {
                    *chars = ahead;
                    let code = 0x10000 + ((high - 0xd800) << 10) + (low - 0xdc00);
                    out.extend(char::from_u32(code));
                }
                None => out.push(char::REPLACEMENT_CHARACTER),
            }
        }
        Ok(code) => out.push(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER)),
        Err(digits) => {
            out.push(kind);
            out.push_str(&digits);
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
