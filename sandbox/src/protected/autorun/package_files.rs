//! The shared files whose content a write is checked for, by the name the file is read as — a
//! `package.json` and a `package.yaml` (sections git hooks run), a `pyproject.toml`,
//! `setup.cfg` or `tox.ini` (keys that make linters load code, [`lint_configs`]) — with the
//! class a change is refused as and why, in words the message shows.

use std::ffi::OsStr;

use super::js_configs;
use super::lint_configs::{self, CodeKeyChange, LintConfig};
use super::package_json::{self, HookChange};
use super::{AutorunClass, package_yaml};

/// A file whose new content is compared with its old one before it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckedFile {
    PackageJson,
    PackageYaml,
    Lint(LintConfig),
    /// A JavaScript tool's JSON, YAML or TOML config ([`js_configs`]), parsed as its dialect.
    JsConfig(js_configs::Dialect),
    /// `package.json`'s sections of those tools ([`js_configs::PACKAGE_SECTIONS`]): checked
    /// with [`Self::PackageJson`], refused as another class.
    PackageJsonTools,
    /// `package.yaml`'s sections of the same tools (Prettier 3 reads them there too): checked
    /// with [`Self::PackageYaml`], refused as another class.
    PackageYamlTools,
}

impl CheckedFile {
    /// The kind a file of this name is read as (case-insensitively), or `None`.
    pub fn of(name: &OsStr) -> Option<Self> {
        if package_json::is_package_json(name) {
            Some(Self::PackageJson)
        } else if package_yaml::is_package_yaml(name) {
            Some(Self::PackageYaml)
        } else if let Some(dialect) = js_configs::dialect(name) {
            Some(Self::JsConfig(dialect))
        } else {
            LintConfig::of(name).map(Self::Lint)
        }
    }

    /// The class a refused change belongs to (what the owner's opt-in opens).
    pub fn class(self) -> AutorunClass {
        match self {
            Self::PackageJson | Self::PackageYaml => AutorunClass::GitHooks,
            Self::Lint(_) | Self::JsConfig(_) | Self::PackageJsonTools | Self::PackageYamlTools => {
                AutorunClass::EditorConfig
            }
        }
    }

    /// This kind and the others a file of its name is checked as.
    pub fn with_companions(self) -> impl Iterator<Item = Self> {
        let companion = match self {
            Self::PackageJson => Some(Self::PackageJsonTools),
            Self::PackageYaml => Some(Self::PackageYamlTools),
            _ => None,
        };
        std::iter::once(self).chain(companion)
    }

    /// Why a write from `old` (`None`: absent) to `new` is refused, as the message says it;
    /// `None` when it is not. With `strict_hooks`, a `package.json`'s check definitions are
    /// compared too ([`package_json::changed_section`]).
    pub fn refusal(self, old: Option<&[u8]>, new: &[u8], strict_hooks: bool) -> Option<String> {
        match self {
            Self::PackageJson => Some(
                match package_json::changed_section(old, new, strict_hooks)? {
                    HookChange::Section(section) => hook_section("package.json", &section),
                    HookChange::Unreadable => "the new package.json is not a JSON object this \
                     gateway can read, so the sections git hooks run cannot be checked; write \
                     valid JSON without lone surrogate escapes"
                        .to_string(),
                },
            ),
            Self::PackageJsonTools => {
                let (section, path) = package_json::added_tool_path(old, new)?;
                Some(js_config_path(
                    &format!("package.json's \"{section}\" section"),
                    &path,
                ))
            }
            Self::PackageYamlTools => {
                let (old, new) = (
                    old.map(String::from_utf8_lossy),
                    String::from_utf8_lossy(new),
                );
                let (section, path) = js_configs::added_package_yaml_path(old.as_deref(), &new)?;
                let place = match section {
                    Some(section) => format!("package.yaml's \"{section}\" section"),
                    // No YAML this gateway reads: which section holds it cannot be told.
                    None => "package.yaml, which is no YAML this gateway reads,".to_string(),
                };
                Some(js_config_path(&place, &path))
            }
            Self::JsConfig(dialect) => {
                let (old, new) = (
                    old.map(String::from_utf8_lossy),
                    String::from_utf8_lossy(new),
                );
                let path = js_configs::added_path(dialect, old.as_deref(), &new)?;
                Some(js_config_path("this config", &path))
            }
            Self::PackageYaml => Some(match package_yaml::changed_hook_section(old, new)? {
                HookChange::Section(section) => hook_section("package.yaml", &section),
                HookChange::Unreadable => "the new package.yaml uses a form this gateway does \
                     not read (a flow mapping, an explicit, merged, aliased, tagged or escaped \
                     top-level key, a tab), so the sections git hooks run cannot be checked; \
                     write plain `key: value` top-level lines"
                    .to_string(),
            }),
            Self::Lint(kind) => {
                let file = kind.file_name();
                Some(match lint_configs::changed_code_key(kind, old, new)? {
                    CodeKeyChange::Key(key) => format!(
                        "it changes {key} in {file}, a key that makes the owner's linters or \
                         editor extensions load code (pylint's init-hook and load-plugins, \
                         mypy's plugins, flake8's local plugins); edits elsewhere in {file} \
                         stay allowed"
                    ),
                    CodeKeyChange::Unreadable => {
                        let format = match kind {
                            LintConfig::Pyproject => "TOML",
                            LintConfig::SetupCfg | LintConfig::ToxIni => "INI",
                        };
                        format!(
                            "the new {file} is no {format} this gateway can read, and it has or \
                             gains keys that make linters load code (init-hook, load-plugins, \
                             plugins), so they cannot be checked; write valid {format}"
                        )
                    }
                })
            }
        }
    }
}

fn js_config_path(place: &str, path: &str) -> String {
    format!(
        "it adds the path {path:?} to {place}: a JavaScript linter's, formatter's or compiler's \
         config loads the file a path names as its parser, plugin, preset or rule, when the \
         owner's editor opens or saves a file; package names, paths under keys that load no \
         code and other edits stay allowed"
    )
}

fn hook_section(file: &str, section: &str) -> String {
    format!("it changes {file}'s \"{section}\" section, commands a git hook runs")
}
