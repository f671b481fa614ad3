//! The keys of shared Python project files that make the owner's linters load code (red team
//! 34 B1). `pyproject.toml`, `setup.cfg` and `tox.ini` are mostly the owner's work (build
//! metadata, other tools' settings) and stay writable, but pylint `exec`s `init-hook`, `eval`s
//! `evaluation`, imports `load-plugins`, an `output-format` reporter and allow-listed extensions, mypy imports `plugins` (a module or a
//! `.py` path) and runs `python_executable`, flake8 imports what `[flake8:local-plugins]` names
//! from its `paths`, sqlfluff's jinja templater imports `library_path` — when the owner lints,
//! or an editor extension does on open or save. A write that adds, removes or changes one of
//! those keys is refused as `editor_config`, like the tools' dedicated files (`.pylintrc`,
//! `mypy.ini`, `.flake8`, `.sqlfluff`). `pyproject.toml` is read with the `toml` crate, the INI
//! files as Python's `configparser` reads them; new text the reader cannot read fails closed
//! when the old file had such a key or the new one gains text that looks like one.

use std::ffi::OsStr;

/// A shared file some linter reads code-naming keys from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LintConfig {
    Pyproject,
    SetupCfg,
    ToxIni,
}

impl LintConfig {
    /// The kind a file of this name is read as (case-insensitively, as the other auto-run
    /// names), or `None`.
    pub fn of(name: &OsStr) -> Option<Self> {
        match super::fold(name).as_str() {
            "pyproject.toml" => Some(Self::Pyproject),
            "setup.cfg" => Some(Self::SetupCfg),
            "tox.ini" => Some(Self::ToxIni),
            _ => None,
        }
    }

    /// The file's name as the documentation spells it.
    pub fn file_name(self) -> &'static str {
        match self {
            Self::Pyproject => "pyproject.toml",
            Self::SetupCfg => "setup.cfg",
            Self::ToxIni => "tox.ini",
        }
    }
}

/// Why a write of such a file is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeKeyChange {
    /// This key differs, by where it is (`tool.pylint.main.init-hook`, `[mypy] plugins`).
    Key(String),
    /// The new text is none this reader can read, and the old one had such a key or the new one
    /// has more text that looks like one.
    Unreadable,
}

/// pylint's options that run or import code; argparse takes any unambiguous prefix of an
/// option, so a key that is a prefix of one (3 characters at least) counts too. `evaluation` is
/// `eval`ed for every scored run and `output-format` imports a reporter named `module.Class`
/// (red team 35 N1: both ran from pyproject.toml, setup.cfg and tox.ini).
const PYLINT_KEYS: [&str; 7] = [
    "init-hook",
    "load-plugins",
    "extension-pkg-allow-list",
    "extension-pkg-whitelist",
    "unsafe-load-any-extension",
    "evaluation",
    "output-format",
];

/// Keys other tools import or run what they name by: mypy's `plugins` and
/// `python_executable` (run to find its search path), sqlfluff's jinja `library_path`.
const EXACT_KEYS: [&str; 3] = ["plugins", "python-executable", "library-path"];

/// flake8's section of project-local plugins: every key of it names code (`paths`, `extension`,
/// `report`).
const FLAKE8_LOCAL: &str = "flake8:local-plugins";

/// Text that looks like such a key, for text the reader cannot read.
const LOOKALIKES: [&str; 8] = [
    "init-h",
    "load-pl",
    "extension-pkg",
    "plugins",
    "python-exe",
    "library-path",
    "evaluation",
    "output-format",
];

/// One key naming code: where it is and its value as written.
type CodeKey = (String, String);

/// The first code-naming key whose value differs between the file's old text (`None`: absent)
/// and the new one; see the module rules for text this reader cannot read.
pub fn changed_code_key(kind: LintConfig, old: Option<&[u8]>, new: &[u8]) -> Option<CodeKeyChange> {
    let read = |bytes: &[u8]| {
        let text = std::str::from_utf8(bytes).ok()?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        match kind {
            LintConfig::Pyproject => pyproject_keys(text),
            LintConfig::SetupCfg | LintConfig::ToxIni => ini_keys(text),
        }
    };
    let before = old.map(read);
    let Some(after) = read(new) else {
        let had_keys = matches!(&before, Some(Some(keys)) if !keys.is_empty());
        let gains = lookalikes(new) > old.map_or(0, lookalikes);
        return (had_keys || gains).then_some(CodeKeyChange::Unreadable);
    };
    let before = before.flatten().unwrap_or_default();
    if before == after {
        return None;
    }
    let at = before
        .iter()
        .zip(&after)
        .position(|(b, a)| b != a)
        .unwrap_or(before.len().min(after.len()));
    let (key, _) = after.get(at).or(before.get(at))?;
    Some(CodeKeyChange::Key(key.clone()))
}

/// A key as the tools compare it: lower case, `_` read as `-`.
fn normal(key: &str) -> String {
    key.trim().to_lowercase().replace('_', "-")
}

/// Whether a key (normalised) is one of pylint's code options or a prefix of one.
fn is_pylint_key(key: &str) -> bool {
    key.chars().count() >= 3 && PYLINT_KEYS.iter().any(|option| option.starts_with(key))
}

fn is_code_key(key: &str) -> bool {
    is_pylint_key(key) || EXACT_KEYS.contains(&key)
}

/// How often text that looks like a code-naming key occurs in `bytes`.
fn lookalikes(bytes: &[u8]) -> usize {
    let text = normal(&String::from_utf8_lossy(bytes));
    LOOKALIKES
        .iter()
        .map(|token| text.matches(token).count())
        .sum()
}

/// `pyproject.toml`'s code-naming keys: every pylint code option below `[tool.pylint]` (pylint
/// reads its keys and those of its sub-tables), mypy's below `[tool.mypy]`, sqlfluff's below
/// `[tool.sqlfluff]`, in key order; `None` when the text is no TOML.
fn pyproject_keys(text: &str) -> Option<Vec<CodeKey>> {
    let doc: toml::Table = text.parse().ok()?;
    let mut out = Vec::new();
    for (name, value) in &doc {
        if normal(name) != "tool" {
            continue;
        }
        let Some(tools) = value.as_table() else {
            continue;
        };
        for (tool, value) in tools {
            let tool_name = normal(tool);
            if ["pylint", "mypy", "sqlfluff"].contains(&tool_name.as_str()) {
                collect_toml(value, &format!("tool.{tool}"), &mut out);
            }
        }
    }
    Some(out)
}

/// The code-naming keys at and below a TOML value, with their dotted paths.
fn collect_toml(value: &toml::Value, path: &str, out: &mut Vec<CodeKey>) {
    match value {
        toml::Value::Table(table) => {
            for (key, value) in table {
                let here = format!("{path}.{key}");
                if is_code_key(&normal(key)) {
                    out.push((
                        here.clone(),
                        serde_json::to_string(value).unwrap_or_default(),
                    ));
                }
                collect_toml(value, &here, out);
            }
        }
        toml::Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                collect_toml(item, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// One option of an INI file as `configparser` reads it.
struct IniEntry {
    section: String,
    key: String,
    value: String,
}

/// An INI file's code-naming keys: pylint's code options, `plugins`, `python_executable` and
/// `library_path` in any section, every key of `[flake8:local-plugins]` and of `[DEFAULT]`
/// (whose keys every section inherits), and, when such a value interpolates (`%(x)s`, pylint's
/// parser expands it), every key of the file. `None` when `configparser` would refuse the text.
fn ini_keys(text: &str) -> Option<Vec<CodeKey>> {
    let entries = ini_entries(text)?;
    let is_code = |e: &IniEntry| {
        let section = e.section.trim().to_lowercase();
        section == FLAKE8_LOCAL || e.section == "DEFAULT" || is_code_key(&normal(&e.key))
    };
    let interpolates = entries.iter().any(|e| is_code(e) && e.value.contains('%'));
    Some(
        entries
            .iter()
            .filter(|e| interpolates || is_code(e))
            .map(|e| (format!("[{}] {}", e.section, e.key), e.value.clone()))
            .collect(),
    )
}

/// Python's `str.isspace()`: Unicode white space and the four ASCII separators.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The options of an INI text in order, read as `configparser.RawConfigParser` reads them:
/// lines split at `\n`, `\r\n` and `\r` (universal newlines); full-line `#`/`;` comments and
/// empty lines skipped (empty lines do not end a value); a line indented deeper than its
/// option's line continues the value; `[header]` up to the last `]`; `key = value` or
/// `key: value` at the first delimiter, the key lower-cased. `None` where `configparser`
/// raises: an option before any section, a line without a delimiter, an empty key.
fn ini_entries(text: &str) -> Option<Vec<IniEntry>> {
    let mut out: Vec<IniEntry> = Vec::new();
    let mut section: Option<String> = None;
    // The indent of the current option's line; `None` when no option can continue.
    let mut option_indent: Option<usize> = None;
    let lines = text.split('\n').flat_map(|l| l.split('\r'));
    for line in lines {
        let value = line.trim_matches(is_py_space);
        if value.is_empty() || value.starts_with(['#', ';']) {
            continue;
        }
        let indent = line.chars().take_while(|c| is_py_space(*c)).count();
        if let Some(level) = option_indent
            && indent > level
            && let Some(entry) = out.last_mut()
        {
            entry.value.push('\n');
            entry.value.push_str(value);
            continue;
        }
        if let Some(rest) = value.strip_prefix('[')
            && let Some(end) = rest.rfind(']')
            && end > 0
        {
            section = Some(rest[..end].to_string());
            option_indent = None;
            continue;
        }
        let section = section.clone()?;
        let at = value.find(['=', ':'])?;
        let key = value[..at].trim_end_matches(is_py_space).to_lowercase();
        if key.is_empty() {
            return None;
        }
        out.push(IniEntry {
            section,
            key,
            value: value[at + 1..].trim_matches(is_py_space).to_string(),
        });
        option_indent = Some(indent);
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
