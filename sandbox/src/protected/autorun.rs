//! Auto-run places: files and directories that some tool executes (or loads as configuration that
//! names programs) merely because the owner opens or uses a project later — Claude Code's
//! `.claude/` and `.mcp.json`, editor task and config dirs, `.envrc`, Python start-up files in
//! `site-packages`, git hook managers, shell start-up files. The write policy refuses them in
//! both write profiles unless the owner allowed their class at gateway start
//! (`CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES`); reading them stays allowed.
//!
//! Matching is by name components of the whole (absolute) path, case- and Unicode-insensitively
//! on every platform (a case-insensitive file system — macOS, ext4 casefold, vfat — opens
//! `.VSCode` as `.vscode`; refusing the variant elsewhere costs nothing real). A directory class
//! matches at any depth (a subproject's `.claude/`), a file class by its own name (anywhere, or
//! below a `site-packages` directory for Python's start-up files).

use std::ffi::OsStr;
use std::path::{Component, Path};

/// The env var naming the classes the owner allows sessions to write (comma-separated class
/// names, or `all`), read once at gateway start.
pub const ALLOW_ENV: &str = "CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES";

/// One class of auto-run places. The owner's opt-in is per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AutorunClass {
    /// Coding agents' project configuration: hooks, MCP servers, commands, sub-agents.
    AgentConfig,
    /// Editor and IDE project configuration: tasks that run on folder open, interpreter paths.
    EditorConfig,
    /// Files a shell runs on entering the directory (direnv, mise).
    DirectoryHooks,
    /// Python start-up files in an environment's `site-packages`.
    PythonStartup,
    /// Git hook managers' hook files and configs (`.git/hooks` itself is refused as `.git`).
    GitHooks,
    /// Shell start-up files.
    ShellStartup,
}

impl AutorunClass {
    pub const ALL: [Self; 6] = [
        Self::AgentConfig,
        Self::EditorConfig,
        Self::DirectoryHooks,
        Self::PythonStartup,
        Self::GitHooks,
        Self::ShellStartup,
    ];

    /// The class's name in messages and in [`ALLOW_ENV`].
    pub fn name(self) -> &'static str {
        match self {
            Self::AgentConfig => "agent_config",
            Self::EditorConfig => "editor_config",
            Self::DirectoryHooks => "directory_hooks",
            Self::PythonStartup => "python_startup",
            Self::GitHooks => "git_hooks",
            Self::ShellStartup => "shell_startup",
        }
    }

    /// What the class holds, for messages and `gatewayctl doctor`.
    pub fn places(self) -> &'static str {
        match self {
            Self::AgentConfig => {
                "coding agents' project configuration: Claude Code's .claude/ and .mcp.json, \
                 .cursor/, .gemini/, .codex/, .kiro/, .continue/, .aider.conf.yml"
            }
            Self::EditorConfig => {
                "editor and IDE configuration: .vscode/, .idea/, .zed/, .fleet/, .devcontainer/, \
                 .devcontainer.json, .nvim.lua, .nvimrc, .exrc"
            }
            Self::DirectoryHooks => {
                "directory-entry hooks: .envrc, mise.toml, .mise.toml, mise.local.toml, \
                 .mise.local.toml"
            }
            Self::PythonStartup => {
                "Python start-up files: *.pth, sitecustomize.*, usercustomize.* below \
                 site-packages or dist-packages, and pyvenv.cfg"
            }
            Self::GitHooks => {
                "git hooks: .git/hooks, .husky/, .githooks/, .pre-commit-config.yaml, \
                 lefthook.yml, .lefthook.yml"
            }
            Self::ShellStartup => {
                "shell start-up files: .bashrc, .bash_profile, .bash_login, .bash_logout, \
                 .profile, .zshrc, .zshenv, .zprofile, .zlogin, .zlogout, .kshrc, .cshrc, \
                 .tcshrc"
            }
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// Directories every entry below which is an auto-run place, by class.
const DIRS: &[(&str, AutorunClass)] = &[
    (".claude", AutorunClass::AgentConfig),
    (".cursor", AutorunClass::AgentConfig),
    (".gemini", AutorunClass::AgentConfig),
    (".codex", AutorunClass::AgentConfig),
    (".kiro", AutorunClass::AgentConfig),
    (".continue", AutorunClass::AgentConfig),
    (".vscode", AutorunClass::EditorConfig),
    (".idea", AutorunClass::EditorConfig),
    (".zed", AutorunClass::EditorConfig),
    (".fleet", AutorunClass::EditorConfig),
    (".devcontainer", AutorunClass::EditorConfig),
    (".husky", AutorunClass::GitHooks),
    (".githooks", AutorunClass::GitHooks),
];

/// File names that are auto-run places wherever they are, by class.
const FILES: &[(&str, AutorunClass)] = &[
    (".mcp.json", AutorunClass::AgentConfig),
    (".aider.conf.yml", AutorunClass::AgentConfig),
    (".devcontainer.json", AutorunClass::EditorConfig),
    (".nvim.lua", AutorunClass::EditorConfig),
    (".nvimrc", AutorunClass::EditorConfig),
    (".exrc", AutorunClass::EditorConfig),
    (".envrc", AutorunClass::DirectoryHooks),
    ("mise.toml", AutorunClass::DirectoryHooks),
    (".mise.toml", AutorunClass::DirectoryHooks),
    ("mise.local.toml", AutorunClass::DirectoryHooks),
    (".mise.local.toml", AutorunClass::DirectoryHooks),
    ("pyvenv.cfg", AutorunClass::PythonStartup),
    (".pre-commit-config.yaml", AutorunClass::GitHooks),
    ("lefthook.yml", AutorunClass::GitHooks),
    (".lefthook.yml", AutorunClass::GitHooks),
    (".bashrc", AutorunClass::ShellStartup),
    (".bash_profile", AutorunClass::ShellStartup),
    (".bash_login", AutorunClass::ShellStartup),
    (".bash_logout", AutorunClass::ShellStartup),
    (".profile", AutorunClass::ShellStartup),
    (".zshrc", AutorunClass::ShellStartup),
    (".zshenv", AutorunClass::ShellStartup),
    (".zprofile", AutorunClass::ShellStartup),
    (".zlogin", AutorunClass::ShellStartup),
    (".zlogout", AutorunClass::ShellStartup),
    (".kshrc", AutorunClass::ShellStartup),
    (".cshrc", AutorunClass::ShellStartup),
    (".tcshrc", AutorunClass::ShellStartup),
];

/// Directories whose Python start-up files run with every interpreter of the environment.
const SITE_DIRS: &[&str] = &["site-packages", "dist-packages"];

/// The class of the auto-run place `path` is, or lies inside; `None` for an ordinary path.
/// `.git` components are not matched here: the write policy refuses all of `.git` first.
pub fn autorun_class(path: &Path) -> Option<AutorunClass> {
    let names: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(fold(name)),
            _ => None,
        })
        .collect();
    let (last, dirs) = names.split_last()?;
    for dir in dirs {
        if let Some((_, class)) = DIRS.iter().find(|(name, _)| dir == name) {
            return Some(*class);
        }
    }
    // The final component may itself be one of the directories (Write never targets a
    // directory, but the check is also asked about roots).
    if let Some((_, class)) = DIRS
        .iter()
        .chain(FILES.iter())
        .find(|(name, _)| last == name)
    {
        return Some(*class);
    }
    // Python's start-up files below the first `site-packages` (at any depth: fail closed).
    let site = names
        .iter()
        .position(|dir| SITE_DIRS.contains(&dir.as_str()));
    if let Some(site) = site
        && site + 1 < names.len()
        && names[site + 1..].iter().any(|name| is_python_startup(name))
    {
        return Some(AutorunClass::PythonStartup);
    }
    None
}

/// `*.pth`, and `sitecustomize`/`usercustomize` as a module, package or compiled file.
fn is_python_startup(name: &str) -> bool {
    if name.ends_with(".pth") {
        return true;
    }
    ["sitecustomize", "usercustomize"].iter().any(|module| {
        name.strip_prefix(module)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
    })
}

/// Comparison key of a name: case- and normalisation-insensitive, as on a case-insensitive file
/// system (the same folding the macOS path policy uses).
fn fold(name: &OsStr) -> String {
    use std::os::unix::ffi::OsStrExt;
    String::from_utf8_lossy(&crate::path_policy::fold_insensitive(name.as_bytes())).into_owned()
}

/// The classes the owner allowed sessions to write. The default allows none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AutorunAllowed(u8);

impl AutorunAllowed {
    /// Nothing allowed (the default).
    pub const NONE: Self = Self(0);

    pub fn all() -> Self {
        Self(AutorunClass::ALL.iter().fold(0, |acc, c| acc | c.bit()))
    }

    pub fn allows(self, class: AutorunClass) -> bool {
        self.0 & class.bit() != 0
    }

    /// The allowed classes, in [`AutorunClass::ALL`] order.
    pub fn classes(self) -> Vec<AutorunClass> {
        AutorunClass::ALL
            .into_iter()
            .filter(|c| self.allows(*c))
            .collect()
    }

    /// The classes' names, as [`Self::parse`] reads them (empty: none).
    pub fn names(self) -> Vec<&'static str> {
        self.classes().into_iter().map(AutorunClass::name).collect()
    }

    /// Parse the owner's value: comma-separated class names, or `all`; empty means none. An
    /// unknown name is an error (the gateway refuses to start rather than guess).
    pub fn parse(value: &str) -> Result<Self, String> {
        let mut out = Self::NONE;
        for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if item == "all" {
                out = Self::all();
                continue;
            }
            match AutorunClass::ALL.iter().find(|c| c.name() == item) {
                Some(class) => out.0 |= class.bit(),
                None => {
                    let known: Vec<&str> = AutorunClass::ALL.iter().map(|c| c.name()).collect();
                    return Err(format!(
                        "{ALLOW_ENV}: unknown class {item:?}; use `all` or a comma-separated \
                         list of {}",
                        known.join(", ")
                    ));
                }
            }
        }
        Ok(out)
    }

    /// From names as stored in a broker spec (unknown names are ignored: a newer gateway's
    /// class a broker does not know is refused, never allowed by accident).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let mut out = Self::NONE;
        for name in names {
            if name == "all" {
                return Self::all();
            }
            if let Some(class) = AutorunClass::ALL.iter().find(|c| c.name() == name) {
                out.0 |= class.bit();
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
