//! The places the owner's environment names ([`owner_env::VARS`], red teams 32 and 33): a
//! program git or a shell runs, a directory of start-up files or programs, the modules a
//! language's options load, and — in a directory ahead of a language's own library on its
//! import path — the modules named like that library's (`strict.pm` on `PERL5LIB` runs in every
//! Perl of the owner's). git's config variables, `PYTHONPATH` and `PYTHONUSERBASE` are read
//! where the account's git config and Python's import roots are.
//!
//! A relative value is relative to wherever the owner runs the tool: it is read against the
//! write root, where the owner runs the project's tools (as `PYTHONPATH=src`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::super::owner_env::{self, Lang, Names};
use super::super::shell_command::{Named as Reads, Reading, program_paths};
use super::{Account, AutorunClass, Places, Scope};

/// Where the system's Perl and Ruby keep their own libraries (patterns as
/// [`super::super::namespaces::expand`] takes them, from `/`).
const LIBRARY_DIRS: [(Lang, &str); 10] = [
    (Lang::Perl, "usr/share/perl/5*"),
    (Lang::Perl, "usr/lib/*/perl/5*"),
    (Lang::Perl, "usr/lib/*/perl-base"),
    (Lang::Perl, "usr/share/perl5"),
    (Lang::Perl, "usr/lib64/perl5"),
    (Lang::Perl, "usr/local/share/perl/5*"),
    (Lang::Ruby, "usr/lib/ruby/3*"),
    (Lang::Ruby, "usr/lib/ruby/2*"),
    (Lang::Ruby, "usr/lib/ruby/vendor_ruby"),
    (Lang::Ruby, "usr/share/ruby"),
];

/// Modules each interpreter loads at start or nearly every program loads, whether or not a
/// scan finds its library (`rubygems` at every `ruby`).
const ALWAYS: [(Lang, &str); 12] = [
    (Lang::Perl, "strict"),
    (Lang::Perl, "warnings"),
    (Lang::Perl, "vars"),
    (Lang::Perl, "Exporter"),
    (Lang::Perl, "Carp"),
    (Lang::Perl, "lib"),
    (Lang::Perl, "constant"),
    (Lang::Ruby, "rubygems"),
    (Lang::Ruby, "bundler"),
    (Lang::Ruby, "did_you_mean"),
    (Lang::Ruby, "error_highlight"),
    (Lang::Ruby, "syntax_suggest"),
];

impl Places<'_> {
    /// The places the owner's environment names.
    pub(super) fn owner_env(&mut self, account: &Account) {
        for (name, why) in &account.unreadable {
            let source = super::Source {
                paths: String::new(),
                tree: format!("the owner's environment sets {name}"),
            };
            self.whole_tree_as(class_of(name), &source, why);
        }
        for (name, dir) in &account.below {
            let dir = self.root.join(dir);
            if *name == "PATH" {
                self.programs(&dir, Scope::ProgramsBelow, name);
                continue;
            }
            // At or above the root (`$HOME/c${USER:0:0}/src` leaves `$HOME`, red team 40): the
            // part not read may name any directory of the tree.
            let real = crate::look::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
            if self.root.starts_with(&real) || self.root.starts_with(&dir) {
                let source = super::Source {
                    paths: String::new(),
                    tree: format!("the owner's environment sets {name}"),
                };
                let why = "an entry below a directory holding this tree is built on a part the \
                           gateway does not read";
                self.whole_tree_as(class_of(name), &source, why);
                continue;
            }
            let why = format!(
                "below a directory the owner's environment puts on a path ({name}) with a part \
                 the gateway does not read: any file there may be what it names"
            );
            self.add(&dir, class_of(name), why, Scope::Below);
        }
        for rel in &account.relative_sources {
            let why = "a file the owner's shell start-up files source by a relative path: it \
                       runs from wherever the shell is (a cd or chpwd function, \
                       `. \"$PWD/.localrc\"`)";
            self.add(
                &self.root.join(rel),
                AutorunClass::ShellStartup,
                why.to_string(),
                Scope::AtAnyDepth,
            );
        }
        for file in &account.startup_runs {
            // A directory (`. "$PROJECT"` naming the tree) runs nothing.
            if crate::look::is_dir(file) {
                continue;
            }
            let why = "a file the owner's shell start-up files (or direnv's direnvrc) source \
                       or run: it runs in the owner's shell, outside every sandbox";
            self.add(
                file,
                AutorunClass::ShellStartup,
                why.to_string(),
                Scope::Below,
            );
        }
        let agents = "a file a coding agent's user settings run (a hook, status line, key helper \
                      or MCP server, ~/.claude/settings.json and its kin): it runs outside every \
                      sandbox in the projects the owner opens the agent in";
        for file in &account.agent_runs {
            if !crate::look::is_dir(file) {
                self.add(
                    file,
                    AutorunClass::StartupLinks,
                    agents.to_string(),
                    Scope::Below,
                );
            }
        }
        for rel in &account.agent_relative_runs {
            self.add(
                &self.root.join(rel),
                AutorunClass::StartupLinks,
                agents.to_string(),
                Scope::AtAnyDepth,
            );
        }
        for dir in &account.startup_run_dirs {
            let why = "a directory whose files the owner's shell start-up files source or run by \
                       a pattern (a file made there later matches too): they run in the owner's \
                       shell, outside every sandbox";
            self.add(
                dir,
                AutorunClass::ShellStartup,
                why.to_string(),
                Scope::Below,
            );
        }
        let mut import_dirs: Vec<(Lang, PathBuf)> = Vec::new();
        let mut loads: Vec<(Lang, String)> = Vec::new();
        for (name, value) in &account.env {
            let Some((_, names)) = owner_env::VARS.iter().find(|(var, _)| var == name) else {
                continue;
            };
            let class = class_of(name);
            let why = |what: &str| format!("{what} the owner's environment names ({name})");
            match *names {
                // `ENV=production` (an application's setting, common in `.env`): no file.
                Names::File if *name == "ENV" && !value.to_string_lossy().contains('/') => {}
                Names::File => {
                    let file = self.root.join(value);
                    self.add(
                        &file,
                        class,
                        why("a program or start-up file"),
                        Scope::Below,
                    );
                }
                Names::FileList => {
                    let what = match *name {
                        "LD_PRELOAD" => "a library preloaded into every program",
                        _ => "a file the owner's tool reads at every run",
                    };
                    for file in value.to_string_lossy().split([':', ' ', '\t']) {
                        if !file.is_empty() {
                            let file = self.root.join(file);
                            self.add(&file, class, why(what), Scope::Below);
                        }
                    }
                }
                Names::Command => {
                    let reads = program_paths(&value.to_string_lossy(), Reading::Strict);
                    self.env_program(reads, name);
                }
                Names::InputFilter => {
                    // `|cmd %s`, `||cmd %s` (also for empty output), `-cmd` (also on stdin).
                    let line = value.to_string_lossy();
                    let line = line
                        .trim_start()
                        .trim_start_matches(['|', '-'])
                        .trim_start();
                    // The distributions' own filter (`| /usr/bin/lesspipe %s`, set by
                    // Debian's default `.bashrc`) is a system script the tree cannot change:
                    // its path alone is read, not its lines, which no strict reading follows
                    // (every write would be refused). What both lesspipes run from the home,
                    // `~/.lessfilter`, is a place instead.
                    let reads = match program_paths(line, Reading::Strict) {
                        Reads::Paths(paths) => Reads::Paths(
                            paths
                                .into_iter()
                                .map(|mut named| {
                                    let path = Path::new(&named.path);
                                    if path.is_absolute() && !path.starts_with(self.root) {
                                        named.script = None;
                                    }
                                    named
                                })
                                .collect(),
                        ),
                        whole => whole,
                    };
                    self.env_program(reads, name);
                    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
                        let filter = Path::new(&home).join(".lessfilter");
                        self.add(
                            &filter,
                            class,
                            why("the filter lesspipe runs"),
                            Scope::Below,
                        );
                    }
                }
                Names::CommandList => {
                    for line in value.to_string_lossy().split(':') {
                        if !line.trim().is_empty() {
                            let reads = program_paths(line, Reading::Strict);
                            self.env_program(reads, name);
                        }
                    }
                }
                Names::ExCommands => {
                    for file in ex_sourced(&value.to_string_lossy()) {
                        let file = self.root.join(file);
                        self.add(
                            &file,
                            class,
                            why("a file vim sources at start"),
                            Scope::Below,
                        );
                    }
                }
                Names::CodeOrAtFile => {
                    if let Some(file) = value.to_string_lossy().strip_prefix('@') {
                        let file = self.root.join(file);
                        self.add(&file, class, why("a file run at every start"), Scope::Below);
                    }
                }
                Names::Options(Lang::Java) => {
                    // Agents by path, relative ones from where the JVM starts (the root).
                    for file in owner_env::option_names(Lang::Java, value).0 {
                        let file = self.root.join(file);
                        self.add(&file, class, why("an agent every JVM loads"), Scope::Below);
                    }
                }
                // Also every other tool's configuration (nvim's `init.lua`, direnv's
                // `direnvrc`, fish's `config.fish`): the whole directory (red team 39 #7).
                Names::GitConfig if *name == "XDG_CONFIG_HOME" => {
                    let dir = self.root.join(value);
                    let what = "the directory of the owner's tools' configuration";
                    self.add(&dir, class, why(what), Scope::Below);
                }
                Names::RunDir => {
                    for dir in std::env::split_paths(value).filter(|d| !d.as_os_str().is_empty()) {
                        let dir = self.root.join(dir);
                        self.add(
                            &dir,
                            class,
                            why("a directory whose files run"),
                            Scope::Below,
                        );
                    }
                }
                Names::LibraryPath => {
                    // The system's libraries by their file names (the loader looks a library
                    // up by its exact name): the project's own libraries there stay writable.
                    let why = why(
                        "a library named like one of the system's, in a directory the \
                                   dynamic loader searches first",
                    );
                    let names = system_libraries();
                    for dir in std::env::split_paths(value).filter(|d| !d.as_os_str().is_empty()) {
                        let dir = self.root.join(dir);
                        for name in &names {
                            self.add(&dir.join(name), class, why.clone(), Scope::Below);
                        }
                    }
                }
                Names::GoFlags => {
                    for flag in value.to_string_lossy().split_whitespace() {
                        let Some((key, arg)) = flag.trim_start_matches('-').split_once('=') else {
                            continue;
                        };
                        match key {
                            "toolexec" | "exec" => {
                                let reads = program_paths(arg, Reading::Strict);
                                self.env_program(reads, name);
                            }
                            "overlay" | "modfile" => {
                                let file = self.root.join(arg);
                                let what = "a file the go command reads as source";
                                self.add(&file, class, why(what), Scope::Below);
                            }
                            _ => {}
                        }
                    }
                }
                Names::ProgramPath => {
                    for dir in std::env::split_paths(value) {
                        // Relative (`bin`, `.`, an empty entry): searched from wherever the
                        // shell is, so below every directory of the tree.
                        if dir.is_absolute() {
                            self.programs(&dir, Scope::Programs, name);
                        } else {
                            self.programs(self.root, Scope::ProgramsBelow, name);
                        }
                    }
                }
                Names::ImportPath(lang @ (Lang::Perl | Lang::Ruby | Lang::Node)) => {
                    let dirs = std::env::split_paths(value).filter(|d| !d.as_os_str().is_empty());
                    import_dirs.extend(dirs.map(|dir| (lang, self.root.join(dir))));
                }
                Names::Options(lang) => {
                    let (named, dirs) = owner_env::option_names(lang, value);
                    import_dirs.extend(dirs.iter().map(|dir| (lang, self.root.join(dir))));
                    for load in named {
                        if load.contains('/') {
                            // A file by path (`--require ./x.js`, `-r/opt/x.rb`); a bare
                            // node name is an installed package (`installed_packages`).
                            let file = self.root.join(load.trim_start_matches("file://"));
                            // ruby's `-r/p/x` loads `/p/x.rb` (red team 44a C2-B3), node's
                            // `--require /p/x` `/p/x.js`: each name it may load.
                            let mut files = vec![file.clone()];
                            let suffixes: &[&str] = match lang {
                                Lang::Ruby => &[".rb", ".so"],
                                Lang::Node => &[".js", ".cjs", ".mjs", ".json", ".node"],
                                _ => &[],
                            };
                            files.extend(suffixes.iter().map(|suffix| {
                                let mut name = file.clone().into_os_string();
                                name.push(suffix);
                                PathBuf::from(name)
                            }));
                            for file in files {
                                self.add(
                                    &file,
                                    class,
                                    why("a file loaded at every start"),
                                    Scope::Below,
                                );
                            }
                        }
                        loads.push((lang, load));
                    }
                }
                _ => {}
            }
        }
        for (lang, dir) in import_dirs {
            let why = format!(
                "a module named like one of {}'s own library or one its options load, in a \
                 directory the owner's environment puts ahead of that library: it would run in \
                 the owner's other programs",
                lang_name(lang)
            );
            for module in library_names(lang).into_iter().chain(
                loads
                    .iter()
                    .filter(|(l, _)| *l == lang)
                    .map(|(_, m)| m.clone()),
            ) {
                for rel in module_files(lang, &module) {
                    self.add(
                        &dir.join(rel),
                        AutorunClass::ShellStartup,
                        why.clone(),
                        Scope::Below,
                    );
                }
            }
        }
    }
}

impl Places<'_> {
    /// A directory of the owner's `PATH` (`scope`: its files, or every file below it): files
    /// there named like the system's programs. One at or above the root covers the tree.
    fn programs(&mut self, dir: &Path, scope: Scope, name: &str) {
        let real = crate::look::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let (dir, scope) = if self.root.starts_with(&real) || self.root.starts_with(dir) {
            let scope = match scope {
                Scope::Programs if self.root != real && self.root != dir => return,
                scope => scope,
            };
            (self.root.to_path_buf(), scope)
        } else {
            (dir.to_path_buf(), scope)
        };
        let why = format!(
            "a file named like one of the system's programs, in a directory the owner's \
             environment puts on the search path for commands ({name}): it would run in that \
             program's place"
        );
        self.add(&dir, AutorunClass::ShellStartup, why, scope);
    }

    /// A command line the owner's environment names (`$EDITOR`, `$LESSOPEN`): what it names by
    /// an absolute or `~` path, and by a relative one with a `/` against the root, where the
    /// owner runs the project's tools (`LESSOPEN="|bin/f %s"`, red team 36).
    fn env_program(&mut self, reads: Reads, name: &str) {
        let source = super::Source {
            paths: format!("a program the owner's environment runs (`${name}`)"),
            tree: format!("the owner's environment runs `${name}`"),
        };
        // A relative word without a `/` (`--paging=always`) is no path the owner wrote.
        let root = self.root.to_path_buf();
        self.program_from(reads, &source, &root, |path| {
            path.starts_with('~') || path.contains('/')
        });
    }
}

/// The class a variable's places are refused as.
fn class_of(name: &str) -> AutorunClass {
    match name {
        n if n.starts_with("GIT_") || n == "SSH_ASKPASS" => AutorunClass::GitHooks,
        "EDITOR" | "VISUAL" | "PAGER" => AutorunClass::GitHooks,
        "VIMINIT" | "EXINIT" | "GVIMINIT" | "VIMRUNTIME" | "DOOMDIR" | "EMACSLOADPATH" => {
            AutorunClass::EditorConfig
        }
        "GRADLE_USER_HOME" => AutorunClass::ToolchainConfig,
        n if n.to_ascii_uppercase().starts_with("NPM_CONFIG_") || n.starts_with("RUSTC_") => {
            AutorunClass::ToolchainConfig
        }
        "GOFLAGS" | "MAKEFILES" => AutorunClass::ToolchainConfig,
        n if n.starts_with("PYTHON") => AutorunClass::PythonStartup,
        _ => AutorunClass::ShellStartup,
    }
}

/// The files Ex commands `source` (`so`, `sou`…, `source!`) or `runtime` (`ru`…, from
/// `~/.vim` and `~/.config/nvim`) at vim's start; commands separated by `|`, `~`/`$HOME`
/// expanded.
fn ex_sourced(commands: &str) -> Vec<PathBuf> {
    let home = std::env::var("HOME").ok().filter(|h| !h.is_empty());
    let expand = |word: &str| match &home {
        Some(home) if word == "~" || word.starts_with("~/") => format!("{home}{}", &word[1..]),
        Some(home) => word.replace("${HOME}", home).replace("$HOME", home),
        None => word.to_string(),
    };
    let mut out = Vec::new();
    for command in commands.split('|') {
        let mut words = command.trim().trim_start_matches(':').split_whitespace();
        let Some(verb) = words.next().map(|v| v.trim_end_matches('!')) else {
            continue;
        };
        let is = |full: &str, min: usize| verb.len() >= min && full.starts_with(verb);
        if is("source", 2) {
            out.extend(words.map(|w| PathBuf::from(expand(w))));
        } else if is("runtime", 2) {
            let words: Vec<&str> = words
                .filter(|w| !["ALL", "START", "OPT", "PACK"].contains(w))
                .collect();
            for base in ["~/.vim", "~/.config/nvim"] {
                out.extend(words.iter().map(|w| Path::new(&expand(base)).join(w)));
            }
        }
    }
    out
}

fn lang_name(lang: Lang) -> &'static str {
    match lang {
        Lang::Perl => "Perl",
        Lang::Ruby => "Ruby",
        Lang::Node => "Node",
        Lang::Python => "Python",
        Lang::Java => "Java",
    }
}

/// Where the system's shared libraries are.
const SYSTEM_LIBRARY_DIRS: [&str; 6] = [
    "/lib",
    "/usr/lib",
    "/lib64",
    "/usr/lib64",
    "/usr/local/lib",
    "/usr/lib/x86_64-linux-gnu",
];

/// The file names of the system's shared libraries (`libc.so.6`), in its library dirs and
/// their multiarch subdirectories (`/usr/lib/aarch64-linux-gnu`).
fn system_libraries() -> Vec<String> {
    let mut dirs: Vec<PathBuf> = SYSTEM_LIBRARY_DIRS.iter().map(PathBuf::from).collect();
    super::super::namespaces::expand(Path::new("/usr/lib"), "*-linux-gnu*", &mut dirs);
    let mut names = Vec::new();
    for dir in dirs {
        let entries = super::super::namespaces::entry_names(&dir);
        names.extend(entries.into_iter().filter(|name| name.contains(".so")));
    }
    names.sort();
    names.dedup();
    names
}

/// The top-level module names of `lang`'s own library on this system, with [`ALWAYS`].
fn library_names(lang: Lang) -> Vec<String> {
    let mut dirs = Vec::new();
    for (_, pattern) in LIBRARY_DIRS.iter().filter(|(l, _)| *l == lang) {
        super::super::namespaces::expand(Path::new("/"), pattern, &mut dirs);
    }
    let mut names: Vec<String> = ALWAYS
        .iter()
        .filter(|(l, _)| *l == lang)
        .map(|(_, n)| n.to_string())
        .collect();
    for dir in dirs {
        for file in super::super::namespaces::entry_names(&dir) {
            let stem = file
                .strip_suffix(".pm")
                .or_else(|| file.strip_suffix(".rb"))
                .or_else(|| file.strip_suffix(".so"))
                .unwrap_or(&file);
            if !stem.is_empty()
                && stem
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                names.push(stem.to_string());
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// The files a module name is loaded from, relative to a directory on the import path
/// (`Foo::Bar` → `Foo/Bar.pm`; Ruby's `foo/bar` → `foo/bar.rb`); a top-level name also
/// names its directory.
fn module_files(lang: Lang, module: &str) -> Vec<PathBuf> {
    let rel = match lang {
        Lang::Perl => module.replace("::", "/"),
        _ => module.to_string(),
    };
    if rel.is_empty()
        || rel.starts_with('/')
        || Path::new(&rel)
            .components()
            .any(|c| c.as_os_str() == OsStr::new(".."))
    {
        return Vec::new();
    }
    let mut out = match lang {
        Lang::Perl => vec![PathBuf::from(format!("{rel}.pm"))],
        Lang::Ruby => vec![
            PathBuf::from(format!("{rel}.rb")),
            PathBuf::from(format!("{rel}.so")),
        ],
        Lang::Node => [".js", ".cjs", ".mjs", ".json", ".node"]
            .iter()
            .map(|ending| PathBuf::from(format!("{rel}{ending}")))
            .collect(),
        _ => Vec::new(),
    };
    if !rel.contains('/') {
        out.push(PathBuf::from(&rel));
    }
    out
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
