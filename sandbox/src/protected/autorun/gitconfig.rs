//! Auto-run places a repository names through git's own indirections (issue 23): the
//! directory `core.hooksPath` names (relative to the working tree's top), the targets of
//! symlinks in a hooks directory (`.git/hooks/pre-commit -> ../../scripts/pre-commit`) and the
//! hooks directory itself when it is a symlink — all `git_hooks` —, and the files
//! `include.path` / `includeIf.*.path` name (`vcs_config`: such a file can set
//! `core.fsmonitor`), and git's own files under another name (`vcs_config`: the config files it
//! reads, a `.git` or git dir reached through a link, every link in the git dir such as
//! `config -> ../gitconfig`). Git is never run: the config files (the git dir's `config` and
//! `config.worktree`, the common dir's `config` for a linked worktree, the account's global
//! configs) are parsed here as git reads them, every include followed whatever its condition
//! (fail closed), to git's depth limit. What the account's own configuration names for every
//! repository, whatever the root (its template directory, its programs), is [`account`]'s.

use std::path::{Component, Path, PathBuf};

mod account;
mod environment;

use super::AutorunClass;
pub use super::git_syntax::{Entry, parse};
use super::link_target::{Resolved, resolve};
pub use super::shell_command::Scope;
use super::shell_command::{
    Named as Reads, Reading, ScriptRunner, program_paths, python_module_places, shebang_runner,
};
pub use account::Account;
use account::{expand_shell_path, expand_user_path};

/// Git's own limit on nested includes.
const MAX_INCLUDE_DEPTH: usize = 10;

/// Most config files read for one root (a loop of includes ends here too).
const MAX_FILES: usize = 256;

/// One place: a root-relative real path (a directory covers everything below it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitPlace {
    pub at: PathBuf,
    pub class: AutorunClass,
    /// What names it, for the refusal message.
    pub why: String,
    /// What it covers.
    pub scope: Scope,
}

/// The places the repositories of `root` (real path) name: `dot_gits` are the `.git` entries
/// found inside the root (root-relative); the repository the root itself lies in is found by
/// walking up from it, as git does.
pub fn places(root: &Path, dot_gits: &[PathBuf]) -> Vec<GitPlace> {
    let account = Account::of_process();
    super::owner_files::record(&account.read_files);
    // Other paths of the root's own directory (a bind mount of the project, a FUSE mirror of
    // it: red team 46 C5-B3): the owner's files name the project by one of them.
    let aliases = crate::protected::root_aliases(root);
    places_with_aliases(root, dot_gits, &account, aliases)
}

/// [`places`] with the account's git files given.
#[cfg(test)]
pub(crate) fn places_with(root: &Path, dot_gits: &[PathBuf], account: &Account) -> Vec<GitPlace> {
    places_with_aliases(root, dot_gits, account, Vec::new())
}

/// [`places_with`], a target named under one of `aliases` (other paths of the root's
/// directory) read as the same place under the root.
pub(crate) fn places_with_aliases(
    root: &Path,
    dot_gits: &[PathBuf],
    account: &Account,
    aliases: Vec<PathBuf>,
) -> Vec<GitPlace> {
    // The owner's variables the root's `.envrc`/`.env` set, git's config ones included (red
    // team 35 N4): read for every repository below, as the account's own.
    let mut with_root = account.clone();
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    with_root.add_assigned(super::env_files::of_root(
        root,
        home.as_deref().map(Path::new),
    ));
    let account = &with_root;
    let mut repos: Vec<PathBuf> = dot_gits.iter().map(|rel| root.join(rel)).collect();
    if let Some(enclosing) = root
        .ancestors()
        .skip(1)
        .map(|dir| dir.join(".git"))
        .find(|dot_git| crate::look::symlink_metadata(dot_git).is_ok())
    {
        repos.push(enclosing);
    }
    let mut out = Places {
        root,
        aliases,
        vars: &account.absolute_vars,
        places: Vec::new(),
        tops: Vec::new(),
        read: 0,
        scripts: 0,
        template_dirs: Vec::new(),
    };
    let mut envrc_dirs = vec![root.to_path_buf()];
    for dot_git in repos {
        let Some(top) = dot_git.parent().map(Path::to_path_buf) else {
            continue;
        };
        envrc_dirs.push(top.clone());
        let Some(git_dir) = git_dir_of(&dot_git) else {
            continue;
        };
        let common = common_dir(&git_dir);
        let mut configs = vec![common.join("config"), git_dir.join("config.worktree")];
        configs.extend(account.configs.iter().cloned());
        let mut named = Named::default();
        for config in configs {
            out.read_config(&config, 0, &mut named);
        }
        // git's config from the environment (`GIT_CONFIG_COUNT`, `GIT_CONFIG_PARAMETERS`): a
        // relative include there is an error to git, a relative hooksPath each repository's.
        out.read_entries(account.git_entries.clone(), Path::new("/"), 0, &mut named);
        // Programs git runs (`core.fsmonitor` at every `git status`, a diff's `textconv`, a
        // filter's `clean`): what they name is resolved from the working tree's top, and from
        // a `core.worktree` git runs them in instead.
        let mut tops = vec![top.clone()];
        tops.extend(
            named
                .worktrees
                .iter()
                .map(|dir| git_dir.join(expand_shell_path(dir))),
        );
        out.tops.clone_from(&tops);
        for (reads, key) in named.programs {
            let source = Source {
                paths: format!("a program git's configuration runs (`{key}`)"),
                tree: format!("git's configuration runs `{key}`"),
            };
            out.program(reads, &source, &tops, 0);
        }
        // A repository's own `init.templateDir` is read as the account's (it is copied at a
        // re-init), below.
        out.template_dirs.append(&mut named.template_dirs);
        let mut hook_dirs = vec![common.join("hooks"), git_dir.join("hooks")];
        for value in named.hooks_paths {
            hook_dirs.extend(expand_user_path(&value).map(|dir| top.join(dir)));
        }
        for dir in hook_dirs {
            out.hook_dir(&dir, &tops);
        }
        // git's own files under another name (red team 24 B4's class): a `.git` that is a link
        // into the tree (a directory, or a gitfile), a git dir inside it, and every link in the
        // git and common dir (`config -> ../gitconfig`, `info -> ../meta`) name files git
        // reads as its own.
        out.add(
            &dot_git,
            AutorunClass::VcsConfig,
            OWN_FILES.to_string(),
            Scope::Below,
        );
        out.add(
            &git_dir,
            AutorunClass::VcsConfig,
            OWN_FILES.to_string(),
            Scope::Below,
        );
        for dir in [&git_dir, &common] {
            out.own_links(dir);
        }
        // lefthook's extended configs and script dirs, under names of the project's choosing.
        for top in &tops {
            let source = Source {
                paths: "a file or dir lefthook's configuration names (extends, source_dir)"
                    .to_string(),
                tree: "lefthook's configuration names files".to_string(),
            };
            out.named_by(
                top,
                super::lefthook::named_places(top),
                AutorunClass::GitHooks,
                &source,
            );
        }
    }
    // What an `.envrc` at the root or at a working tree's top sources, watches or evaluates.
    envrc_dirs.sort();
    envrc_dirs.dedup();
    let source = Source {
        paths: "a file the .envrc sources, watches or evaluates (use flake/nix/devenv): it runs \
                again at the next cd"
            .to_string(),
        tree: "the .envrc names files".to_string(),
    };
    for dir in envrc_dirs {
        let named = super::envrc::named_places(&dir);
        out.named_by(&dir, named, AutorunClass::DirectoryHooks, &source);
    }
    // What the owner's environment names to run (red teams 32, 33: [`super::owner_env`]).
    out.owner_env(account);
    // Modules named like what every Python of the account imports, in a directory a `.pth` file
    // or PYTHONPATH puts on its path.
    let roots = super::import_roots::import_roots(root, &account.values("PYTHONPATH"));
    for dir in &roots.dirs {
        if !matches!(resolve(root, Path::new("/"), dir), Resolved::Inside(_)) {
            continue;
        }
        let why = "a module named like one every Python of the account imports (at start, from \
                   the standard library, or an installed package), in a directory a .pth file \
                   or PYTHONPATH puts on every Python's path: it would run in the owner's other \
                   Python processes"
            .to_string();
        for name in &roots.names {
            // The package directory: only what Python would import from it.
            out.add(
                &dir.join(name),
                AutorunClass::PythonStartup,
                why.clone(),
                Scope::ModulesBelow,
            );
            for rel in [
                format!("{name}.py"),
                format!("{name}.pyc"),
                format!("{name}.pyw"),
            ] {
                out.add(
                    &dir.join(rel),
                    AutorunClass::PythonStartup,
                    why.clone(),
                    Scope::Below,
                );
            }
        }
        if !roots.opaque.is_empty() {
            // A `.pth` line builds the name it imports at run time: any module here may run.
            let why = format!(
                "a module in a directory on every Python's path, where {} imports a module whose \
                 name is built at run time: any module there may run at every start",
                roots.opaque.join(", ")
            );
            out.add(dir, AutorunClass::PythonStartup, why, Scope::Imports);
        }
    }
    out.account_wide(account);
    out.places
}

/// Why git's own files reached under another name are places.
const OWN_FILES: &str = "one of git's own files (its .git entry, git dir, config or a link in \
     it) under another name";

struct Places<'a> {
    root: &'a Path,
    /// Other paths of the root's directory (mount aliases).
    aliases: Vec<PathBuf>,
    /// The owner's variables with absolute values (`core.pager = $TOOLS/pager`).
    vars: &'a std::collections::HashMap<String, Vec<String>>,
    places: Vec<GitPlace>,
    /// The directories git runs this repository's values and hooks in (its working tree's top,
    /// a `core.worktree`): only there is `python -m`'s `sys.path[0]` read precisely.
    tops: Vec<PathBuf>,
    read: usize,
    /// Scripts read for what they run.
    scripts: usize,
    /// `init.templateDir` values of the repositories' own configs, read with the account's.
    template_dirs: Vec<String>,
}

/// What names a program or a script, for the refusal: the places it names (`paths`) and the
/// subject of a whole-tree refusal (`tree`).
struct Source {
    paths: String,
    tree: String,
}

impl Places<'_> {
    /// `target` (absolute) as a place when its real path lies in the root; resolved from `/`
    /// so that links on the way resolve before a `..`.
    fn add(&mut self, target: &Path, class: AutorunClass, why: String, scope: Scope) {
        let mut resolved = resolve(self.root, Path::new("/"), target);
        if !matches!(resolved, Resolved::Inside(_))
            && let Some(rest) = self
                .aliases
                .iter()
                .find_map(|alias| target.strip_prefix(alias).ok())
        {
            resolved = resolve(self.root, Path::new("/"), &self.root.join(rest));
        }
        if let Resolved::Inside(at) = resolved {
            let place = GitPlace {
                at,
                class,
                why,
                scope,
            };
            if !self.places.contains(&place) {
                self.places.push(place);
            }
        }
    }

    /// Every symlink directly in a git or common dir names a file git reads as its own.
    fn own_links(&mut self, dir: &Path) {
        let Ok(entries) = crate::look::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten().take(MAX_FILES) {
            if entry.file_type().is_ok_and(|kind| kind.is_symlink()) {
                let why = OWN_FILES.to_string();
                self.add(&entry.path(), AutorunClass::VcsConfig, why, Scope::Below);
            }
        }
    }

    /// A hooks directory (maybe a symlink) is a place, and so is every symlink's target in it
    /// and what every regular hook file in it runs (its lines read as a strict value's).
    fn hook_dir(&mut self, dir: &Path, tops: &[PathBuf]) {
        let why = "in a git hooks directory (core.hooksPath, hooks/) or what a symlink there names";
        self.add(dir, AutorunClass::GitHooks, why.to_string(), Scope::Below);
        let Ok(entries) = crate::look::read_dir(dir) else {
            return;
        };
        // husky 9 points core.hooksPath at `.husky/_`, whose runner runs `sh -e .husky/<hook>`.
        let husky_user_dir = crate::look::canonicalize(dir)
            .ok()
            .filter(|real| husky_runner(&real.join("x")))
            .and_then(|real| real.parent().map(Path::to_path_buf));
        for entry in entries.flatten().take(MAX_FILES) {
            let kind = entry.file_type();
            let is_link = kind.as_ref().is_ok_and(|kind| kind.is_symlink());
            if is_link && let Ok(target) = crate::look::read_link(entry.path()) {
                self.add(
                    &dir.join(target),
                    AutorunClass::GitHooks,
                    why.to_string(),
                    Scope::Below,
                );
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            // Git runs no `.sample` hook.
            if name.ends_with(".sample") || name.starts_with('.') {
                continue;
            }
            let shown: String = name
                .chars()
                .take(64)
                .map(|c| if c.is_control() { '?' } else { c })
                .collect();
            let source = Source {
                paths: format!("a file the git hook `{shown}` runs"),
                tree: format!("the git hook `{shown}` runs commands"),
            };
            match &husky_user_dir {
                Some(user) => {
                    let hook = user.join(&name);
                    if crate::look::is_file(&hook) {
                        self.script(&hook, ScriptRunner::Shell, &source, tops, 0);
                    }
                }
                None => self.script(&entry.path(), ScriptRunner::Shebang, &source, tops, 0),
            }
        }
    }

    /// What a value (or a script's lines) names: each path a place, a script's own loads too.
    fn program(&mut self, reads: Reads, source: &Source, tops: &[PathBuf], depth: usize) {
        match reads {
            Reads::WholeTree(reason) => self.whole_tree(source, reason),
            Reads::Paths(paths) => {
                for top in tops {
                    // A script run after a `cd` (or from another directory) runs `python -m`
                    // with that directory first on `sys.path`: not read here.
                    if !self.tops.contains(top)
                        && paths.iter().any(|named| named.scope == Scope::Imports)
                    {
                        return self.whole_tree(
                            source,
                            "python -m imports from the directory it runs in, which is not \
                             the working tree's top",
                        );
                    }
                    for named in &paths {
                        let at = top.join(expand_shell_path(&named.path));
                        let scope = named.scope;
                        self.add(&at, AutorunClass::GitHooks, source.paths.clone(), scope);
                        if scope == Scope::Imports {
                            // A directory there named like an installed namespace package is
                            // merged into it, ahead of site-packages (red team 25 B6).
                            for name in super::namespaces::namespace_names(&at) {
                                let why = format!(
                                    "{} (Python imports from there, and `{name}/` merges into \
                                     the installed namespace package `{name}`)",
                                    source.paths
                                );
                                self.add(
                                    &at.join(&name),
                                    AutorunClass::GitHooks,
                                    why,
                                    Scope::Below,
                                );
                            }
                        }
                        if let Some(runner) = named.script {
                            let from = [top.join(&named.cwd)];
                            self.script(&at, runner, source, &from, depth);
                        }
                    }
                }
            }
        }
    }

    /// The whole write root: nothing narrower can be told (not only this repository: `cd ..`
    /// reaches past its top).
    /// The places a configuration in `dir` names (relative to it) as `class`, or the whole tree
    /// when it names them in a form the reader cannot place.
    fn named_by(
        &mut self,
        dir: &Path,
        named: Result<Vec<PathBuf>, &'static str>,
        class: AutorunClass,
        source: &Source,
    ) {
        match named {
            Ok(rels) => {
                for rel in rels {
                    self.add(&dir.join(rel), class, source.paths.clone(), Scope::Below);
                }
            }
            Err(why) => self.whole_tree_as(class, source, why),
        }
    }

    fn whole_tree(&mut self, source: &Source, reason: &str) {
        self.whole_tree_as(AutorunClass::GitHooks, source, reason);
    }

    /// [`Self::whole_tree`], refused as `class`.
    fn whole_tree_as(&mut self, class: AutorunClass, source: &Source, reason: &str) {
        let why = format!(
            "in a tree where {}, whose files cannot be told: {reason}; every write there is \
             refused",
            source.tree
        );
        let root = self.root.to_path_buf();
        self.add(&root, class, why, Scope::Below);
    }

    /// What a script loads beside itself, by its runner (a script run directly: by its `#!`
    /// line; a binary, or a script not there, loads nothing: the script itself is the place):
    /// Python its directory's whole subtree (`sys.path[0]`); another interpreter anything, so
    /// the whole tree when the script is in it; a shell what its own lines name, read from
    /// `from` (where it runs).
    fn script(
        &mut self,
        at: &Path,
        runner: ScriptRunner,
        source: &Source,
        from: &[PathBuf],
        depth: usize,
    ) {
        let real = crate::look::canonicalize(at).unwrap_or_else(|_| at.to_path_buf());
        if husky_runner(&real) {
            // husky's own runner (`.husky/_/h`, `husky.sh`): it runs `$0`, the hook, itself a
            // place; the user's hook is read where the hooks directory is.
            return;
        }
        let runner = match runner {
            ScriptRunner::Shebang => {
                // The `#!` line, not a whole binary: this runs at every scan.
                let Some(head) = super::read_head(&real, 256) else {
                    return;
                };
                if head.starts_with("\u{7f}ELF") || head.contains('\0') {
                    return;
                }
                shebang_runner(head.lines().next().unwrap_or_default())
                    .unwrap_or(ScriptRunner::Shell)
            }
            runner => runner,
        };
        let Some(dir) = real.parent().map(Path::to_path_buf) else {
            return;
        };
        let inside = matches!(
            resolve(self.root, Path::new("/"), &real),
            Resolved::Inside(_)
        );
        match runner {
            ScriptRunner::Python => {
                self.add(
                    &dir,
                    AutorunClass::GitHooks,
                    source.paths.clone(),
                    Scope::Below,
                );
            }
            ScriptRunner::Interpreter if inside => {
                self.whole_tree(
                    source,
                    "an interpreter's script in the tree may load any file of it",
                );
            }
            ScriptRunner::Interpreter => {}
            // A shell loads nothing from beside its script by itself: what it sources or runs
            // is in its lines (`$(dirname "$0")` read as the script's directory).
            ScriptRunner::Shell | ScriptRunner::Shebang => {
                self.shell_lines(&real, source, from, depth);
            }
        }
    }

    /// What a shell script's own lines name, read as a strict value's (bounded, FIFO-safe).
    fn shell_lines(&mut self, script: &Path, source: &Source, from: &[PathBuf], depth: usize) {
        if depth >= MAX_SCRIPT_DEPTH || self.scripts >= MAX_SCRIPTS {
            return self.whole_tree(source, "its scripts run scripts past what is read");
        }
        self.scripts += 1;
        let Some(text) = super::read_head(script, MAX_SCRIPT_BYTES + 1) else {
            return;
        };
        if text.len() as u64 > MAX_SCRIPT_BYTES {
            return self.whole_tree(source, "a script it runs is too long to read");
        }
        if text.contains(PRE_COMMIT_MARKER) {
            // Its `exec "$INSTALL_PYTHON" -mpre_commit` computes the interpreter, but the line
            // is pre-commit's own: read as `python -m pre_commit` from where the hook runs.
            return match python_module_places("pre_commit") {
                Some(places) => self.program(Reads::Paths(places), source, from, depth + 1),
                None => self.whole_tree(source, "pre-commit's hook runs a module not read"),
            };
        }
        if generated_by_hook_manager(&text) {
            return;
        }
        let text = match script.parent() {
            Some(dir) => with_script_dir(&text, dir),
            None => text,
        };
        let reads = program_paths(&text, Reading::Strict);
        self.program(reads, source, from, depth + 1);
    }

    /// Read one config file, collecting `core.hooksPath` values and the paths of programs, and
    /// following includes (each included file is a `vcs_config` place).
    fn read_config(&mut self, file: &Path, depth: usize, named: &mut Named) {
        if depth > MAX_INCLUDE_DEPTH || self.read >= MAX_FILES {
            return;
        }
        self.read += 1;
        if depth == 0 {
            // A config file itself (the repository's, a global one) may be a link into the
            // tree (`~/.gitconfig -> ~/dotfiles/gitconfig`, `$XDG_CONFIG_HOME` inside it), or
            // missing where a Write would create it: the file git reads is a place.
            let why = "a config file git reads";
            self.add(file, AutorunClass::VcsConfig, why.to_string(), Scope::Below);
        }
        let Some(text) = super::read_text(file) else {
            return;
        };
        let dir = file.parent().unwrap_or(Path::new("/"));
        self.read_entries(parse(&text), dir, depth, named);
    }

    /// What config entries name (read from a file in `dir`, or from git's environment).
    fn read_entries(&mut self, entries: Vec<Entry>, dir: &Path, depth: usize, named: &mut Named) {
        for entry in entries {
            let Some(value) = entry.value.clone() else {
                continue;
            };
            match (entry.section.as_str(), entry.key.as_str()) {
                // An empty value makes git look for `/<hook>`: outside any root.
                ("core", "hookspath") if !value.is_empty() => named.hooks_paths.push(value),
                ("include" | "includeif", "path") => {
                    // git refuses a value it cannot expand (`~nobody/x`): nothing is included.
                    let Some(included) = expand_user_path(&value).map(|path| dir.join(path)) else {
                        continue;
                    };
                    let why = "a file git's configuration includes";
                    self.add(
                        &included,
                        AutorunClass::VcsConfig,
                        why.to_string(),
                        Scope::Below,
                    );
                    self.read_config(&included, depth + 1, named);
                }
                ("core", "worktree") => named.worktrees.push(value),
                ("init", "templatedir") if !value.is_empty() => named.template_dirs.push(value),
                // The `ext::` transport runs its command at every fetch or push of the remote
                // (or of a URL rewritten to it).
                ("remote", "url" | "pushurl") | ("url", "insteadof" | "pushinsteadof") => {
                    let url = match entry.section.as_str() {
                        "url" => entry.subsection.clone().unwrap_or_default(),
                        _ => value,
                    };
                    if let Some(command) = url.strip_prefix("ext::") {
                        let reads = program_paths(command, Reading::Strict);
                        named.programs.push((reads, key_label(&entry)));
                    }
                }
                (section, key) => {
                    let Some(reading) = names_program(section, key) else {
                        continue;
                    };
                    // `submodule.<name>.update = !cmd` runs inside the submodule, at a path
                    // `.gitmodules` (a file of the tree) gives: a relative file there cannot
                    // be placed.
                    if section == "submodule" && !value.starts_with('!') {
                        continue;
                    }
                    let mut reads = self.program_paths_with_vars(&value, reading);
                    if section == "submodule"
                        && let Reads::Paths(paths) = &reads
                        && paths.iter().any(|p| !p.path.starts_with(['/', '~']))
                    {
                        reads = Reads::WholeTree("it runs inside a submodule, from files there");
                    }
                    named.programs.push((reads, key_label(&entry)));
                }
            }
        }
    }
}

impl Places<'_> {
    /// [`program_paths`] of `value` with each `$NAME`/`${NAME}` the owner's start-up files give
    /// absolute values replaced by each of them (git runs the value with the owner's
    /// environment); one they do not give stays, and is read as before (a value built on what
    /// is not read). All the values' paths together, or the first whole-tree refusal.
    fn program_paths_with_vars(&self, value: &str, reading: Reading) -> Reads {
        let mut values = vec![value.to_string()];
        for (name, known) in self.vars {
            for spelling in [format!("${{{name}}}"), format!("${name}")] {
                if !values.iter().any(|v| v.contains(&spelling)) {
                    continue;
                }
                values = values
                    .iter()
                    .flat_map(|v| {
                        known.iter().map(|k| {
                            // `$NAME` only where the name ends (not `$NAMES`).
                            replace_variable(v, &spelling, k)
                        })
                    })
                    .take(MAX_VAR_VALUES)
                    .collect();
            }
        }
        let mut paths = Vec::new();
        for value in &values {
            match program_paths(value, reading) {
                Reads::Paths(found) => paths.extend(found),
                whole => return whole,
            }
        }
        Reads::Paths(paths)
    }
}

/// Most spellings a value with variables is read as.
const MAX_VAR_VALUES: usize = 16;

/// `text` with `spelling` (`$NAME` or `${NAME}`) replaced by `value` where it is the whole
/// variable (`$NAME` not followed by a name character).
fn replace_variable(text: &str, spelling: &str, value: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(spelling) {
        let after = &rest[at + spelling.len()..];
        let whole = spelling.ends_with('}')
            || !after.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_');
        out.push_str(&rest[..at]);
        out.push_str(if whole { value } else { spelling });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// What a repository's config files name, collected while reading them.
#[derive(Default)]
struct Named {
    hooks_paths: Vec<String>,
    /// `core.worktree` values (relative to the git dir).
    worktrees: Vec<String>,
    /// What each value git runs as a program names, with its key.
    programs: Vec<(Reads, String)>,
    /// `init.templateDir` values.
    template_dirs: Vec<String>,
}

/// Endings of key names that run a program, for keys of sections not listed by name.
const PROGRAM_KEY_SUFFIXES: [&str; 10] = [
    "command", "cmd", "path", "program", "clean", "smudge", "textconv", "driver", "helper", "tool",
];

/// Whether git runs `section.key`'s value as a program or shell command, and how it is read:
/// strictly when git runs it by itself during ordinary commands (status, diff, add, commit,
/// fetch, submodule update), literally when the owner runs it by name (an alias, a difftool).
fn names_program(section: &str, key: &str) -> Option<Reading> {
    let strict = matches!(
        (section, key),
        (
            "core",
            "fsmonitor" | "pager" | "editor" | "sshcommand" | "askpass" | "gitproxy"
        ) | ("sequence", "editor")
            | ("gpg", "program" | "defaultkeycommand")
            | ("diff", "textconv" | "command" | "external")
            | ("filter", "clean" | "smudge" | "process")
            | ("merge", "driver")
            | ("credential", "helper")
            | ("interactive", "difffilter")
            | ("pager", _)
            | ("remote", "uploadpack" | "receivepack")
            | ("uploadpack", "packobjectshook")
            | ("submodule", "update")
            | ("core", "alternaterefscommand")
            | ("trailer", "cmd" | "command")
            | ("lfs", "args")
    );
    let literal = section == "alias"
        || matches!(
            (section, key),
            (
                "difftool" | "mergetool" | "browser" | "man" | "guitool",
                "cmd"
            ) | ("mergetool" | "difftool" | "browser", "path")
                | ("sendemail", "tocmd" | "cccmd" | "sendmailcmd")
        );
    if literal {
        return Some(Reading::Literal);
    }
    // The next extension's program key (git-lfs's `lfs.extension.*.clean`,
    // `lfs.customtransfer.*.path`): any other key whose name says it runs something is read
    // as a program, strictly (a value naming no file of the tree, `true` or `meld`, names
    // nothing).
    let programmish = PROGRAM_KEY_SUFFIXES
        .iter()
        .any(|suffix| key.ends_with(suffix));
    (strict || programmish).then_some(Reading::Strict)
}

/// Most scripts (hook files and the shell scripts they and git's values run) read per root.
const MAX_SCRIPTS: usize = 128;

/// Most bytes of a script read; a longer one names the whole tree.
const MAX_SCRIPT_BYTES: u64 = 64 * 1024;

/// Scripts run by scripts, followed this deep.
const MAX_SCRIPT_DEPTH: usize = 4;

/// A file of husky's own runner: in a `_` directory of a `.husky` directory.
fn husky_runner(real: &Path) -> bool {
    let mut names = real.components().rev().skip(1);
    matches!(
        (names.next(), names.next()),
        (Some(Component::Normal(under)), Some(Component::Normal(husky)))
            if under == "_" && husky == ".husky"
    )
}

/// The line pre-commit writes into the hooks it generates.
const PRE_COMMIT_MARKER: &str = "# File generated by pre-commit: https://pre-commit.com";

/// A hook a hook manager generated, which runs only the manager, whose configuration is a
/// `git_hooks` place by name: lefthook's, husky 4's (pre-commit's: [`PRE_COMMIT_MARKER`]). What the configuration runs
/// is the project's checks (`entry: scripts/lint.sh`, `npm test`), left writable as the
/// project's own build is (docs/design/protected-set.md).
fn generated_by_hook_manager(text: &str) -> bool {
    (text.contains("call_lefthook") && text.contains("LEFTHOOK"))
        || text.contains("# Created by Husky v4")
}

/// A script's lines with `$(dirname "$0")` (and its spellings) replaced by the script's real
/// directory, when that directory needs no quoting: the common way a script names files
/// beside it, read precisely instead of as a computed path.
fn with_script_dir(text: &str, dir: &Path) -> String {
    let dir = dir.to_string_lossy();
    let plain = dir
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+@,".contains(c));
    if !plain {
        return text.to_string();
    }
    let mut out = text.to_string();
    for spelling in [
        "$(dirname -- \"$0\")",
        "$(dirname \"$0\")",
        "$(dirname -- $0)",
        "$(dirname $0)",
        "`dirname \"$0\"`",
        "`dirname $0`",
        "${0%/*}",
    ] {
        out = out.replace(spelling, &dir);
    }
    out
}

/// `section.subsection.key` for a refusal message: printable, bounded.
fn key_label(entry: &Entry) -> String {
    let mut label = entry.section.clone();
    if let Some(sub) = &entry.subsection {
        label.push('.');
        label.extend(
            sub.chars()
                .take(64)
                .map(|c| if c.is_control() { '?' } else { c }),
        );
    }
    label.push('.');
    label.push_str(&entry.key);
    label
}

/// The other checkouts of the repository `root` lies in, each joined with `root`'s path below
/// its own top: the main working tree (the common dir's parent when it is a `.git`) and every
/// linked worktree the common dir lists (`worktrees/*/gitdir`). What a write root holds
/// reaches them through a merge or a branch sync, so their auto-run places (a hook symlink into
/// one of them, a link committed with an absolute target there) are the root's too, at the
/// same relative paths.
pub fn checkouts(root: &Path) -> Vec<PathBuf> {
    let Some(dot_git) = root
        .ancestors()
        .map(|dir| dir.join(".git"))
        .find(|dot_git| crate::look::symlink_metadata(dot_git).is_ok())
    else {
        return Vec::new();
    };
    let (Some(top), Some(git_dir)) = (dot_git.parent(), git_dir_of(&dot_git)) else {
        return Vec::new();
    };
    let below = root.strip_prefix(top).unwrap_or(Path::new(""));
    let common = common_dir(&git_dir);
    let mut tops: Vec<PathBuf> = Vec::new();
    if common.file_name().is_some_and(|name| name == ".git")
        && let Some(main) = common.parent()
    {
        tops.push(main.to_path_buf());
    }
    if let Ok(entries) = crate::look::read_dir(common.join("worktrees")) {
        for entry in entries.flatten().take(MAX_FILES) {
            let Some(text) = super::read_text(&entry.path().join("gitdir")) else {
                continue;
            };
            let named = entry.path().join(text.trim());
            if let Some(linked) = named.parent() {
                tops.push(linked.to_path_buf());
            }
        }
    }
    let mut out: Vec<PathBuf> = tops
        .into_iter()
        .filter_map(|t| crate::look::canonicalize(t.join(below)).ok())
        .filter(|tree| tree != root)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The git dir a `.git` entry names: itself, or a gitfile's `gitdir:` (relative to the
/// gitfile's directory).
fn git_dir_of(dot_git: &Path) -> Option<PathBuf> {
    let meta = crate::look::metadata(dot_git).ok()?;
    let dir = if meta.is_dir() {
        dot_git.to_path_buf()
    } else {
        let text = super::read_text(dot_git)?;
        let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        dot_git.parent()?.join(named)
    };
    crate::look::canonicalize(dir).ok()
}

/// A linked worktree's common dir (its `commondir` file, relative to the git dir), else the
/// git dir itself.
fn common_dir(git_dir: &Path) -> PathBuf {
    super::read_text(&git_dir.join("commondir"))
        .and_then(|text| crate::look::canonicalize(git_dir.join(text.trim())).ok())
        .unwrap_or_else(|| git_dir.to_path_buf())
}
