//! What the account's own git configuration names for every repository it has, whatever the
//! root (red team 30 N2): the global configs (and what they include), the template directory
//! `git init` / `git clone` copy into each new repository (`init.templateDir`,
//! `GIT_TEMPLATE_DIR`), and git's path spellings (`~/`, `~name/`) as git expands them.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::super::owner_env;
use super::{AutorunClass, Named, Places, Reads, Scope, Source};

/// git's compiled-in template directory (Debian's, and git's own default prefix's).
const DEFAULT_TEMPLATE_DIRS: [&str; 2] = [
    "/usr/share/git-core/templates",
    "/usr/local/share/git-core/templates",
];

/// The account's git files read for every root: its global config files and the template
/// directories given outside them (`GIT_TEMPLATE_DIR`, git's default).
#[derive(Debug, Clone, Default)]
pub struct Account {
    pub configs: Vec<PathBuf>,
    /// As written: `~` spellings expanded as in a config, a relative one refuses the tree.
    pub template_dirs: Vec<String>,
    /// Config entries git takes from the environment, read as a global config's.
    pub git_entries: Vec<super::Entry>,
    /// The owner's values of [`owner_env::VARS`] (set ones only).
    pub env: Vec<(&'static str, OsString)>,
    /// The owner's variables whose value is not read here (variable, why): every write of
    /// the tree is refused.
    pub unreadable: Vec<(String, String)>,
    /// A variable's entry built on what is not read: everything below this directory.
    pub below: Vec<(&'static str, PathBuf)>,
    /// Files the start-up files source by a relative path: in every tree.
    pub relative_sources: Vec<PathBuf>,
    /// Files the start-up files source or run by an absolute path.
    pub startup_runs: Vec<PathBuf>,
    /// Directories whose every file the start-up files name by a pattern.
    pub startup_run_dirs: Vec<PathBuf>,
    /// Files coding agents' user settings run by an absolute path
    /// ([`super::super::env_files::agents`]).
    pub agent_runs: Vec<PathBuf>,
    /// Files they run by a relative path, from the project they are opened in: in every tree.
    pub agent_relative_runs: Vec<PathBuf>,
    /// The owner's files read (and start-up files looked for) to derive this.
    pub read_files: Vec<PathBuf>,
    /// Every variable's absolute values, as the start-up files assign them: what a `$VAR` in a
    /// program git runs expands to.
    pub absolute_vars: std::collections::HashMap<String, Vec<String>>,
}

impl Account {
    /// What git reads for this process's account (the gateway's environment is the owner's).
    pub fn of_process() -> Self {
        let mut account = Self::of_env(owner_env::var);
        account.env = owner_env::VARS
            .iter()
            .filter_map(|(name, _)| owner_env::var(name).map(|value| (*name, value)))
            .collect();
        // Set in the owner's shell start-up files, where the gateway may not have seen it (a
        // service, another shell): red team 33.
        // Every home of the account: its passwd home and its other gateways' `$HOME`s hold
        // the shell files its terminals read too (red team 43a B5, B6).
        let primary = crate::protected::instances::primary_homes();
        for home in crate::protected::instances::own_homes() {
            let shell = super::super::env_files::of_shell(&home);
            account.add_assigned(if primary.contains(&home) {
                shell
            } else {
                shell.unbounded_as_unread()
            });
            account.add_agents(super::super::env_files::agents::of_agents(&home));
        }
        account
    }

    /// Add what the owner's files assign (shell start-up files, a root's `.envrc`/`.env`), one
    /// way wherever it is assigned (red team 39 finding 2): git's config variables name the
    /// files git reads and the template directory it copies, besides the entries and values.
    pub(in super::super) fn add_assigned(&mut self, assigned: super::super::env_files::Assigned) {
        for (name, value) in &assigned.env {
            match *name {
                "GIT_CONFIG_GLOBAL" | "GIT_CONFIG_SYSTEM" => {
                    self.configs.push(PathBuf::from(value))
                }
                "XDG_CONFIG_HOME" => self.configs.push(Path::new(value).join("git/config")),
                "GIT_TEMPLATE_DIR" => self
                    .template_dirs
                    .push(value.to_string_lossy().into_owned()),
                _ => {}
            }
        }
        self.git_entries.extend(assigned.git_entries);
        self.unreadable.extend(assigned.unreadable);
        self.env.extend(assigned.env);
        self.below.extend(assigned.below);
        self.relative_sources.extend(assigned.relative_sources);
        self.startup_runs.extend(assigned.runs);
        self.startup_run_dirs.extend(assigned.run_dirs);
        self.read_files.extend(assigned.read);
        for (name, values) in assigned.absolute_vars {
            let known = self.absolute_vars.entry(name).or_default();
            for value in values {
                if !known.contains(&value) {
                    known.push(value);
                }
            }
        }
    }

    /// Add what the coding agents' user settings run.
    pub(in super::super) fn add_agents(&mut self, assigned: super::super::env_files::Assigned) {
        self.agent_runs.extend(assigned.runs);
        // What their servers' environments set (`NODE_OPTIONS=--require ./x.js`) is read as
        // the owner's environment.
        self.env.extend(assigned.env);
        self.agent_relative_runs.extend(assigned.relative_sources);
        self.read_files.extend(assigned.read);
    }

    /// What git reads for an account whose environment `var` gives (the files, the template
    /// directories and git's config entries; [`Self::env`] is left empty).
    pub fn of_env(var: impl Fn(&str) -> Option<OsString>) -> Self {
        let env = |name: &str| match name {
            "HOME" => std::env::var_os(name).filter(|value| !value.is_empty()),
            _ => var(name),
        };
        let mut configs = vec![PathBuf::from("/etc/gitconfig")];
        // git reads these instead of the usual ones when set: both are read (fail closed).
        configs.extend(env("GIT_CONFIG_SYSTEM").map(PathBuf::from));
        configs.extend(env("GIT_CONFIG_GLOBAL").map(PathBuf::from));
        if let Some(home) = env("HOME") {
            let home = PathBuf::from(home);
            configs.push(home.join(".gitconfig"));
            configs.push(home.join(".config/git/config"));
        }
        if let Some(xdg) = env("XDG_CONFIG_HOME") {
            configs.push(PathBuf::from(xdg).join("git/config"));
        }
        let mut template_dirs: Vec<String> = DEFAULT_TEMPLATE_DIRS.map(String::from).to_vec();
        template_dirs.extend(env("GIT_TEMPLATE_DIR").map(|dir| dir.to_string_lossy().into_owned()));
        let mut unreadable = Vec::new();
        let git_entries = owner_env::git_entries(var, &mut unreadable);
        Self {
            configs,
            template_dirs,
            git_entries,
            unreadable,
            ..Self::default()
        }
    }
}

impl Account {
    /// The owner's values of `name` (one of [`owner_env::VARS`]): the environment's, then
    /// those its start-up files and the root's `.envrc`/`.env` assign.
    pub fn values(&self, name: &str) -> Vec<&std::ffi::OsStr> {
        self.env
            .iter()
            .filter(|(var, _)| *var == name)
            .map(|(_, value)| value.as_os_str())
            .collect()
    }
}

/// git's runtime prefix as `%(prefix)/` spells it: a distribution's git's; a system directory
/// either way (also `/usr/local`), never inside a write root.
const GIT_PREFIX: &str = "/usr";

/// Whether a path value names the same place from every repository (absolute, `~`,
/// `%(prefix)/`), not one relative to each.
fn placed_alike(value: &str) -> bool {
    value.starts_with(['/', '~']) || value.starts_with("%(prefix)/")
}

/// A path value (`core.hooksPath`, `include.path`, `init.templateDir`) as git's
/// `interpolate_path` expands it: `~` and `~/…` from `$HOME`, `~name` and `~name/…` from the
/// named account's home in `/etc/passwd`, `%(prefix)/…` from git's prefix. `None` where git
/// refuses the value ($HOME unset, no such account): git then stops at that config, and the
/// value names nothing.
pub(super) fn expand_user_path(value: &str) -> Option<PathBuf> {
    if let Some(rest) = value.strip_prefix("%(prefix)/") {
        return Some(Path::new(GIT_PREFIX).join(rest));
    }
    let Some(rest) = value.strip_prefix('~') else {
        return Some(PathBuf::from(value));
    };
    let (user, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let home = if user.is_empty() {
        std::env::var("HOME").ok()?
    } else {
        crate::protected::instances::named_account_home(user)?
    };
    Some(PathBuf::from(format!("{home}{tail}")))
}

/// A path in a command line git runs through the shell: the shell expands `~` and `~name`
/// as git does, and leaves the word as it is (a relative path) for an unknown account.
pub(super) fn expand_shell_path(value: &str) -> PathBuf {
    expand_user_path(value).unwrap_or_else(|| PathBuf::from(value))
}

impl Places<'_> {
    /// The account's global configs (and what they include) and its template directories
    /// apply to every repository of the host, also to those outside the root: a
    /// `core.hooksPath` there naming a directory by an absolute or `~` path makes it every
    /// repository's hooks directory (red team 28 B2), a program they name by such a path runs
    /// in every repository (`core.fsmonitor` at each `git status`), and a template directory is
    /// copied into every new one (its `hooks/`, its `config` as the new repository's). A
    /// relative path is relative to each repository (names nothing here); what cannot be
    /// placed refuses the tree.
    pub(super) fn account_wide(&mut self, account: &Account) {
        let mut named = Named::default();
        for config in &account.configs {
            self.read_config(config, 0, &mut named);
        }
        self.read_entries(account.git_entries.clone(), Path::new("/"), 0, &mut named);
        let mut templates = account.template_dirs.clone();
        templates.append(&mut named.template_dirs);
        templates.append(&mut self.template_dirs);
        templates.sort();
        templates.dedup();
        for value in &templates {
            self.template_dir(value, &mut named);
        }
        for value in std::mem::take(&mut named.hooks_paths) {
            if placed_alike(&value)
                && let Some(dir) = expand_user_path(&value)
            {
                self.hook_dir(&dir, &[]);
            }
        }
        for (reads, key) in std::mem::take(&mut named.programs) {
            self.account_program(reads, &key);
        }
    }

    /// A template directory: everything in it is copied into each new repository's git dir —
    /// `hooks/` its hooks (`post-checkout` runs at the clone), `config` its config (read here
    /// as a global one).
    fn template_dir(&mut self, value: &str, named: &mut Named) {
        let source = Source {
            paths: String::new(),
            tree: "the account's git configuration names a template directory by a relative \
                   path (init.templateDir, GIT_TEMPLATE_DIR)"
                .to_string(),
        };
        if !placed_alike(value) {
            let why = "git init and git clone copy it from the directory they run in";
            return self.whole_tree_as(AutorunClass::GitHooks, &source, why);
        }
        let Some(dir) = expand_user_path(value) else {
            return;
        };
        self.hook_dir(&dir.join("hooks"), &[]);
        let why = "in the template directory git init and git clone copy into every new \
                   repository's git dir (init.templateDir, GIT_TEMPLATE_DIR)";
        self.add(&dir, AutorunClass::VcsConfig, why.to_string(), Scope::Below);
        self.read_config(&dir.join("config"), 0, named);
    }

    /// A program the account's configuration runs: what it names by an absolute or `~` path.
    pub(super) fn account_program(&mut self, reads: Reads, key: &str) {
        let source = Source {
            paths: format!(
                "a program the account's git configuration runs in every repository (`{key}`)"
            ),
            tree: format!("the account's git configuration runs `{key}`"),
        };
        // Read from `/`: only absolute paths are left, and a script's relative names (relative
        // to a repository elsewhere) resolve outside the root.
        self.program_from(reads, &source, Path::new("/"), |path| {
            path.starts_with(['/', '~'])
        });
    }

    /// A program's paths `keep` keeps, read with `top` as the only place it runs from.
    pub(super) fn program_from(
        &mut self,
        reads: Reads,
        source: &Source,
        top: &Path,
        keep: impl Fn(&str) -> bool,
    ) {
        match reads {
            Reads::WholeTree(reason) => self.whole_tree(source, reason),
            Reads::Paths(paths) => {
                let kept = paths
                    .into_iter()
                    .filter(|named| keep(&named.path))
                    .collect();
                let tops = vec![top.to_path_buf()];
                let saved = std::mem::replace(&mut self.tops, tops.clone());
                self.program(Reads::Paths(kept), source, &tops, 0);
                self.tops = saved;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
