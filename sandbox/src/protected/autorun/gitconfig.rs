//! Auto-run places a repository names through git's own indirections (issue 23): the
//! directory `core.hooksPath` names (relative to the working tree's top), the targets of
//! symlinks in a hooks directory (`.git/hooks/pre-commit -> ../../scripts/pre-commit`) and the
//! hooks directory itself when it is a symlink — all `git_hooks` —, and the files
//! `include.path` / `includeIf.*.path` name (`vcs_config`: such a file can set
//! `core.fsmonitor`). Git is never run: the config files (the git dir's `config` and
//! `config.worktree`, the common dir's `config` for a linked worktree, the account's global
//! configs) are parsed here as git reads them, every include followed whatever its condition
//! (fail closed), to git's depth limit.

use std::path::{Path, PathBuf};

use super::AutorunClass;
use super::link_target::{Resolved, resolve};
pub use super::shell_command::Scope;
use super::shell_command::{Named as Reads, Reading, ScriptRunner, program_paths};

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
    let mut repos: Vec<PathBuf> = dot_gits.iter().map(|rel| root.join(rel)).collect();
    if let Some(enclosing) = root
        .ancestors()
        .skip(1)
        .map(|dir| dir.join(".git"))
        .find(|dot_git| std::fs::symlink_metadata(dot_git).is_ok())
    {
        repos.push(enclosing);
    }
    let mut out = Places {
        root,
        places: Vec::new(),
        read: 0,
    };
    let globals = global_configs();
    for dot_git in repos {
        let Some(top) = dot_git.parent().map(Path::to_path_buf) else {
            continue;
        };
        let Some(git_dir) = git_dir_of(&dot_git) else {
            continue;
        };
        let common = common_dir(&git_dir);
        let mut configs = vec![common.join("config"), git_dir.join("config.worktree")];
        configs.extend(globals.iter().cloned());
        let mut named = Named::default();
        for config in configs {
            out.read_config(&config, 0, &mut named);
        }
        // Programs git runs (`core.fsmonitor` at every `git status`, a diff's `textconv`, a
        // filter's `clean`): what they name is resolved from the working tree's top, and from
        // a `core.worktree` git runs them in instead.
        let mut tops = vec![top.clone()];
        tops.extend(
            named
                .worktrees
                .iter()
                .map(|dir| git_dir.join(expand_home(dir))),
        );
        for (reads, key) in named.programs {
            match reads {
                Reads::WholeTree(reason) => {
                    // The whole write root, not only this repository: `cd ..` reaches past
                    // its top.
                    let why = format!(
                        "in a tree where git's configuration runs `{key}`, whose files cannot \
                         be told: {reason}; every write there is refused"
                    );
                    let root = out.root.to_path_buf();
                    out.add(&root, AutorunClass::GitHooks, why, Scope::Below);
                }
                Reads::Paths(paths) => {
                    let why = format!("a program git's configuration runs (`{key}`)");
                    for top in &tops {
                        for named in &paths {
                            let at = top.join(expand_home(&named.path));
                            out.add(&at, AutorunClass::GitHooks, why.clone(), named.scope);
                            if let Some((dir, scope)) =
                                named.script.and_then(|r| script_dir(&at, r))
                            {
                                out.add(&dir, AutorunClass::GitHooks, why.clone(), scope);
                            }
                        }
                    }
                }
            }
        }
        let hooks_paths = named.hooks_paths;
        let mut hook_dirs = vec![common.join("hooks"), git_dir.join("hooks")];
        for value in hooks_paths {
            hook_dirs.push(top.join(expand_home(&value)));
        }
        for dir in hook_dirs {
            out.hook_dir(&dir);
        }
    }
    out.places
}

struct Places<'a> {
    root: &'a Path,
    places: Vec<GitPlace>,
    read: usize,
}

impl Places<'_> {
    /// `target` (absolute) as a place when its real path lies in the root; resolved from `/`
    /// so that links on the way resolve before a `..`.
    fn add(&mut self, target: &Path, class: AutorunClass, why: String, scope: Scope) {
        if let Resolved::Inside(at) = resolve(self.root, Path::new("/"), target) {
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

    /// A hooks directory (maybe a symlink) is a place, and so is every symlink's target in it.
    fn hook_dir(&mut self, dir: &Path) {
        let why = "in a git hooks directory (core.hooksPath, hooks/) or what a symlink there names";
        self.add(dir, AutorunClass::GitHooks, why.to_string(), Scope::Below);
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let is_link = entry.file_type().is_ok_and(|kind| kind.is_symlink());
            if is_link && let Ok(target) = std::fs::read_link(entry.path()) {
                self.add(
                    &dir.join(target),
                    AutorunClass::GitHooks,
                    why.to_string(),
                    Scope::Below,
                );
            }
        }
    }

    /// Read one config file, collecting `core.hooksPath` values and the paths of programs, and
    /// following includes (each included file is a `vcs_config` place).
    fn read_config(&mut self, file: &Path, depth: usize, named: &mut Named) {
        if depth > MAX_INCLUDE_DEPTH || self.read >= MAX_FILES {
            return;
        }
        self.read += 1;
        let Some(text) = super::read_text(file) else {
            return;
        };
        let dir = file.parent().unwrap_or(Path::new("/"));
        for entry in parse(&text) {
            let Some(value) = entry.value.clone() else {
                continue;
            };
            match (entry.section.as_str(), entry.key.as_str()) {
                // An empty value makes git look for `/<hook>`: outside any root.
                ("core", "hookspath") if !value.is_empty() => named.hooks_paths.push(value),
                ("include" | "includeif", "path") => {
                    let included = dir.join(expand_home(&value));
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
                    let mut reads = program_paths(&value, reading);
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

/// What a repository's config files name, collected while reading them.
#[derive(Default)]
struct Named {
    hooks_paths: Vec<String>,
    /// `core.worktree` values (relative to the git dir).
    worktrees: Vec<String>,
    /// What each value git runs as a program names, with its key.
    programs: Vec<(Reads, String)>,
}

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
    if strict {
        Some(Reading::Strict)
    } else {
        literal.then_some(Reading::Literal)
    }
}

/// The directory a script loads from (its real one, links resolved) and what of it: Python
/// imports modules from there, a shell or another interpreter sources or requires files there;
/// a script run directly says which by its `#!` line (a binary, or a script not there yet,
/// loads nothing: the script itself is the place).
fn script_dir(script: &Path, runner: ScriptRunner) -> Option<(PathBuf, Scope)> {
    let real = std::fs::canonicalize(script).unwrap_or_else(|_| script.to_path_buf());
    let dir = real.parent()?.to_path_buf();
    let scope = match runner {
        ScriptRunner::Python => Scope::Imports,
        ScriptRunner::Other => Scope::Below,
        ScriptRunner::Shebang => {
            // The `#!` line, not a whole binary: this runs at every scan.
            let text = super::read_head(&real, 256)?;
            let first = text.lines().next().unwrap_or_default();
            if text.starts_with("\u{7f}ELF") {
                return None;
            } else if first.starts_with("#!") && first.contains("python") {
                Scope::Imports
            } else {
                Scope::Below
            }
        }
    };
    Some((dir, scope))
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
        .find(|dot_git| std::fs::symlink_metadata(dot_git).is_ok())
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
    if let Ok(entries) = std::fs::read_dir(common.join("worktrees")) {
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
        .filter_map(|t| std::fs::canonicalize(t.join(below)).ok())
        .filter(|tree| tree != root)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The git dir a `.git` entry names: itself, or a gitfile's `gitdir:` (relative to the
/// gitfile's directory).
fn git_dir_of(dot_git: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(dot_git).ok()?;
    let dir = if meta.is_dir() {
        dot_git.to_path_buf()
    } else {
        let text = super::read_text(dot_git)?;
        let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        dot_git.parent()?.join(named)
    };
    std::fs::canonicalize(dir).ok()
}

/// A linked worktree's common dir (its `commondir` file, relative to the git dir), else the
/// git dir itself.
fn common_dir(git_dir: &Path) -> PathBuf {
    super::read_text(&git_dir.join("commondir"))
        .and_then(|text| std::fs::canonicalize(git_dir.join(text.trim())).ok())
        .unwrap_or_else(|| git_dir.to_path_buf())
}

/// The account's global config files git reads.
fn global_configs() -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("/etc/gitconfig")];
    if let Some(home) = std::env::var_os("HOME").filter(|home| !home.is_empty()) {
        let home = PathBuf::from(home);
        out.push(home.join(".gitconfig"));
        out.push(home.join(".config/git/config"));
    }
    if let Some(xdg) = std::env::var_os("XDG_CONFIG_HOME").filter(|xdg| !xdg.is_empty()) {
        out.push(PathBuf::from(xdg).join("git/config"));
    }
    out
}

/// `~/x` as git expands it (another account's `~user/` is left as is).
fn expand_home(value: &str) -> PathBuf {
    match (value.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(value),
    }
}

/// One `key = value` of a config file; section and key lower-cased, the subsection as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub section: String,
    pub subsection: Option<String>,
    pub key: String,
    /// `None` for a bare key (a boolean true).
    pub value: Option<String>,
}

/// Parse a config file's text as git does (`config.c`): `[section]`, `[section "sub"]`,
/// `[section.sub]`, a key on the header's line, `;`/`#` comments, quotes, escapes and line
/// continuations. A malformed line is skipped (git refuses the whole file: nothing from it
/// runs, so reading more than git would only refuses more).
pub fn parse(text: &str) -> Vec<Entry> {
    let chars: Vec<char> = text.replace("\r\n", "\n").chars().collect();
    let mut i = 0;
    let mut section = String::new();
    let mut subsection = None;
    let mut out = Vec::new();
    let skip_line = |i: &mut usize| {
        while *i < chars.len() && chars[*i] != '\n' {
            *i += 1;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '#' || c == ';' {
            skip_line(&mut i);
        } else if c == '[' {
            match header(&chars, i + 1) {
                Some((name, sub, next)) => {
                    section = name;
                    subsection = sub;
                    i = next;
                }
                None => skip_line(&mut i),
            }
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '-') {
                i += 1;
            }
            let key: String = chars[start..i].iter().collect::<String>().to_lowercase();
            while i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
                i += 1;
            }
            let value = match chars.get(i) {
                Some('=') => {
                    let (value, next) = value(&chars, i + 1);
                    i = next;
                    match value {
                        Some(value) => Some(value),
                        None => continue,
                    }
                }
                None | Some('\n' | '#' | ';') => {
                    skip_line(&mut i);
                    None
                }
                Some(_) => {
                    skip_line(&mut i);
                    continue;
                }
            };
            out.push(Entry {
                section: section.clone(),
                subsection: subsection.clone(),
                key,
                value,
            });
        } else {
            skip_line(&mut i);
        }
    }
    out
}

/// A section header after `[`: its name, subsection and the index after `]`.
fn header(chars: &[char], mut i: usize) -> Option<(String, Option<String>, usize)> {
    let start = i;
    while i < chars.len()
        && (chars[i].is_ascii_alphanumeric() || chars[i] == '-' || chars[i] == '.')
    {
        i += 1;
    }
    let name: String = chars[start..i].iter().collect::<String>().to_lowercase();
    if chars.get(i) == Some(&']') {
        return Some(match name.split_once('.') {
            Some((section, sub)) => (section.to_string(), Some(sub.to_string()), i + 1),
            None => (name, None, i + 1),
        });
    }
    while chars.get(i).is_some_and(|c| *c == ' ' || *c == '\t') {
        i += 1;
    }
    if chars.get(i) != Some(&'"') {
        return None;
    }
    i += 1;
    let mut sub = String::new();
    loop {
        match *chars.get(i)? {
            '"' => break,
            '\n' => return None,
            '\\' => {
                sub.push(*chars.get(i + 1)?);
                i += 2;
            }
            c => {
                sub.push(c);
                i += 1;
            }
        }
    }
    (chars.get(i + 1) == Some(&']')).then(|| (name, Some(sub), i + 2))
}

/// A value after `=`, as git's `parse_value`: `None` when malformed (an open quote at the end
/// of the line, an unknown escape), and the index of the line's end.
fn value(chars: &[char], mut i: usize) -> (Option<String>, usize) {
    let mut out = String::new();
    let (mut quote, mut comment, mut space) = (false, false, 0);
    loop {
        let Some(&c) = chars.get(i) else {
            return ((!quote).then_some(out), i);
        };
        i += 1;
        if c == '\n' {
            return ((!quote).then_some(out), i);
        }
        if comment {
            continue;
        }
        if c.is_whitespace() && !quote {
            if !out.is_empty() {
                space += 1;
            }
            continue;
        }
        if !quote && (c == ';' || c == '#') {
            comment = true;
            continue;
        }
        for _ in 0..space {
            out.push(' ');
        }
        space = 0;
        match c {
            '\\' => {
                let escaped = match chars.get(i) {
                    Some('\n') => None,
                    Some('t') => Some('\t'),
                    Some('b') => Some('\u{8}'),
                    Some('n') => Some('\n'),
                    Some(c @ ('\\' | '"')) => Some(*c),
                    _ => {
                        while i < chars.len() && chars[i] != '\n' {
                            i += 1;
                        }
                        return (None, i);
                    }
                };
                i += 1;
                out.extend(escaped);
            }
            '"' => quote = !quote,
            c => out.push(c),
        }
    }
}
