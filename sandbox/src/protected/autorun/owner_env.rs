//! The owner's environment variables that name code or configuration the owner's tools run
//! (issue 23, red teams 32 and 33): one table, [`VARS`], read both for what the gateway hands a
//! broker (started with a cleared environment, so its write rules would read nothing) and for
//! what the write rules protect, so the two cannot drift. git's own config variables
//! (`GIT_CONFIG_COUNT` with its `GIT_CONFIG_KEY_<n>` / `GIT_CONFIG_VALUE_<n>` family,
//! `GIT_CONFIG_PARAMETERS`) are read here into config entries exactly as git reads them.

use std::ffi::{OsStr, OsString};

use super::git_syntax::Entry;

/// What a variable's value names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// A config file git reads, or the directory of one (`XDG_CONFIG_HOME`): read as the
    /// account's global config.
    GitConfig,
    /// Config entries git takes from the environment (`GIT_CONFIG_COUNT`, `GIT_CONFIG_PARAMETERS`).
    GitConfigEntries,
    /// The template directory git init and clone copy into every new repository.
    GitTemplateDir,
    /// A program (path) run by itself: git's ssh, askpass, a shell's start-up file.
    File,
    /// A shell command line run (git's editor, pager, ssh command, external diff).
    Command,
    /// An input filter's command line after a leading `|`, `||` or `-` (less's `LESSOPEN`;
    /// `%s` is the file).
    InputFilter,
    /// A `:`-separated list of command lines, each tried in turn (`BROWSER`).
    CommandList,
    /// Ex commands run at vim's start (`VIMINIT`): the files `source`/`so`/`runtime` name.
    ExCommands,
    /// Code run at an interpreter's start, or a file when it starts with `@` (`LUA_INIT`).
    CodeOrAtFile,
    /// Files run by a list of paths (`LD_PRELOAD`: colons or blanks).
    FileList,
    /// A directory every file of which runs: zsh's start-up files (`ZDOTDIR`), git's
    /// `git-<cmd>` programs (`GIT_EXEC_PATH`).
    RunDir,
    /// Directories the dynamic loader searches ahead of the system's (`LD_LIBRARY_PATH`).
    LibraryPath,
    /// Directories ahead of a language's own library on its import path.
    ImportPath(Lang),
    /// Options naming files or modules loaded at every start of the language's interpreter.
    Options(Lang),
    /// Python's user base: its site directory's `.pth` files run at every start.
    PythonUserBase,
    /// Directories the shell searches for a program typed by name (`PATH`): a file there named
    /// like one of the system's programs runs in its place.
    ProgramPath,
    /// The go command's default flags (`GOFLAGS`): `-toolexec=`/`-exec=` programs it runs,
    /// `-overlay=`/`-modfile=` files it reads as source or module definition.
    GoFlags,
}

/// A language whose import path the owner's environment extends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    Python,
    Perl,
    Ruby,
    Node,
    /// The JVM's options variables: `-javaagent:<jar>`, `-agentpath:<lib>` load files.
    Java,
}

/// Every variable read, with what it names.
pub const VARS: &[(&str, Names)] = &[
    ("GIT_CONFIG_GLOBAL", Names::GitConfig),
    ("GIT_CONFIG_SYSTEM", Names::GitConfig),
    ("XDG_CONFIG_HOME", Names::GitConfig),
    ("GIT_CONFIG_COUNT", Names::GitConfigEntries),
    ("GIT_CONFIG_PARAMETERS", Names::GitConfigEntries),
    ("GIT_TEMPLATE_DIR", Names::GitTemplateDir),
    ("GIT_SSH", Names::File),
    ("GIT_ASKPASS", Names::File),
    ("SSH_ASKPASS", Names::File),
    // Red team 47b B8: `sudo -A` runs it (asking the owner's password); readline's init file
    // binds keys to macros that type commands.
    ("SUDO_ASKPASS", Names::File),
    ("INPUTRC", Names::File),
    ("BASH_ENV", Names::File),
    ("ENV", Names::File),
    ("PYTHONSTARTUP", Names::File),
    ("GIT_SSH_COMMAND", Names::Command),
    ("GIT_EDITOR", Names::Command),
    ("GIT_SEQUENCE_EDITOR", Names::Command),
    ("GIT_PAGER", Names::Command),
    ("GIT_EXTERNAL_DIFF", Names::Command),
    ("EDITOR", Names::Command),
    ("VISUAL", Names::Command),
    ("PAGER", Names::Command),
    ("MANPAGER", Names::Command),
    ("SUDO_EDITOR", Names::Command),
    ("FCEDIT", Names::Command),
    ("LESSOPEN", Names::InputFilter),
    ("LESSCLOSE", Names::InputFilter),
    ("BROWSER", Names::CommandList),
    ("VIMINIT", Names::ExCommands),
    ("EXINIT", Names::ExCommands),
    ("GVIMINIT", Names::ExCommands),
    // npm reads its `npm_config_*` variables case-insensitively; the file's keys run code
    // (`node-options`, `script-shell`, `onload-script`): the file itself.
    ("NPM_CONFIG_USERCONFIG", Names::File),
    ("npm_config_userconfig", Names::File),
    ("NPM_CONFIG_GLOBALCONFIG", Names::File),
    ("npm_config_globalconfig", Names::File),
    ("RUSTC_WRAPPER", Names::File),
    ("RUSTC_WORKSPACE_WRAPPER", Names::File),
    ("R_PROFILE_USER", Names::File),
    ("R_PROFILE", Names::File),
    ("R_ENVIRON_USER", Names::File),
    ("IRBRC", Names::File),
    ("LUA_INIT", Names::CodeOrAtFile),
    ("LUA_INIT_5_1", Names::CodeOrAtFile),
    ("LUA_INIT_5_2", Names::CodeOrAtFile),
    ("LUA_INIT_5_3", Names::CodeOrAtFile),
    ("LUA_INIT_5_4", Names::CodeOrAtFile),
    ("JAVA_TOOL_OPTIONS", Names::Options(Lang::Java)),
    ("_JAVA_OPTIONS", Names::Options(Lang::Java)),
    ("JDK_JAVA_OPTIONS", Names::Options(Lang::Java)),
    ("LD_PRELOAD", Names::FileList),
    ("ZDOTDIR", Names::RunDir),
    ("GIT_EXEC_PATH", Names::RunDir),
    ("LD_LIBRARY_PATH", Names::LibraryPath),
    ("PYTHONPATH", Names::ImportPath(Lang::Python)),
    ("PERL5LIB", Names::ImportPath(Lang::Perl)),
    ("PERLLIB", Names::ImportPath(Lang::Perl)),
    ("RUBYLIB", Names::ImportPath(Lang::Ruby)),
    // Where `NODE_OPTIONS=-r mod` finds `mod` (red team 46a).
    ("NODE_PATH", Names::ImportPath(Lang::Node)),
    ("PERL5OPT", Names::Options(Lang::Perl)),
    ("RUBYOPT", Names::Options(Lang::Ruby)),
    ("NODE_OPTIONS", Names::Options(Lang::Node)),
    ("PYTHONUSERBASE", Names::PythonUserBase),
    // Red team 39 finding 7: files whose entries run programs (a kubeconfig user's `exec`, an
    // AWS profile's `credential_process`, psql's `\!`, Mercurial's `[hooks]`, a lesskey file's
    // `LESSOPEN`, go's `GOFLAGS=-toolexec`, yarn's and npm's script shells), and directories
    // whose files run (IPython's `startup/`, Jupyter's `*_config.py`, Cargo's `config.toml`
    // wrappers).
    ("KUBECONFIG", Names::FileList),
    ("AWS_CONFIG_FILE", Names::File),
    ("PSQLRC", Names::File),
    ("HGRCPATH", Names::FileList),
    ("LESSKEYIN", Names::File),
    ("LESSKEY", Names::File),
    ("GOENV", Names::File),
    ("YARN_RC_FILENAME", Names::File),
    ("NPM_CONFIG_SCRIPT_SHELL", Names::File),
    ("npm_config_script_shell", Names::File),
    ("IPYTHONDIR", Names::RunDir),
    ("JUPYTER_CONFIG_DIR", Names::RunDir),
    ("CARGO_HOME", Names::RunDir),
    // Red team 40: docker's `cli-plugins/` and config, gpg-agent's `pinentry-program`, screen's
    // `exec`, and the file oh-my-zsh's dotenv plugin sources in every directory it enters.
    ("DOCKER_CONFIG", Names::RunDir),
    ("GNUPGHOME", Names::RunDir),
    ("SCREENRC", Names::File),
    ("ZSH_DOTENV_FILE", Names::File),
    // Its standard library (`os`, `site`, `encodings`) runs at every start: the whole dir
    // (`prefix:exec_prefix`).
    ("PYTHONHOME", Names::RunDir),
    ("PATH", Names::ProgramPath),
    // Red team 41's session: files and programs the build tools read by default (make's
    // `MAKEFILES` at every run; `GOFLAGS`' `-toolexec`, `-exec`, `-overlay`). Toolchains' homes
    // (`JAVA_HOME`, `GOROOT`, `GEM_HOME`) and compilers (`CC`) are left out: their values are
    // mostly computed (`$(go env GOROOT)`, `$(/usr/libexec/java_home)`), which would refuse
    // every write of those owners' trees (docs/design/protected-set.md).
    ("MAKEFILES", Names::FileList),
    ("GOFLAGS", Names::GoFlags),
    // Red team 43a B7: Emacs loads `site-start` and `default` from its load path at every
    // start; the XDG autostart spec runs every `autostart/*.desktop` of each config dir at
    // login. `GEM_PATH` is left out with `GEM_HOME`: RVM and its kin compute it in the scripts
    // a `.bashrc` sources, which would refuse every write of those owners' trees.
    ("EMACSLOADPATH", Names::RunDir),
    ("XDG_CONFIG_DIRS", Names::RunDir),
    // Red team 44a C2: vim's runtime (its `plugin/` and `defaults.vim` at every start), the
    // XDG data dirs (fish's `vendor_conf.d`, nvim's `site/plugin`, completions), direnv's
    // config dir (its `direnvrc`), Gradle's user home (`init.d/` at every build), Julia's
    // depot (`config/startup.jl`), Doom Emacs's dir, Python's bytecode cache (the `.pyc`
    // imported instead of the source), the files starship, ripgrep and fzf read or run, and
    // the dynamic loader's auditors.
    ("VIMRUNTIME", Names::RunDir),
    ("XDG_DATA_HOME", Names::RunDir),
    ("XDG_DATA_DIRS", Names::RunDir),
    ("DIRENV_CONFIG", Names::RunDir),
    ("GRADLE_USER_HOME", Names::RunDir),
    ("JULIA_DEPOT_PATH", Names::RunDir),
    ("DOOMDIR", Names::RunDir),
    ("PYTHONPYCACHEPREFIX", Names::RunDir),
    ("STARSHIP_CONFIG", Names::File),
    ("RIPGREP_CONFIG_PATH", Names::File),
    ("FZF_DEFAULT_COMMAND", Names::Command),
    ("LD_AUDIT", Names::FileList),
    // Red team 44a C1-B4: zsh's autoloaded functions (`fpath`, tied to `FPATH`) and
    // oh-my-zsh's custom dir (every `*.zsh` there is sourced at start).
    ("FPATH", Names::RunDir),
    ("ZSH_CUSTOM", Names::RunDir),
];

/// git's numbered config variables: a family, not a fixed list.
const GIT_KEY_PREFIXES: [&str; 2] = ["GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"];

/// The prefix a value is handed to a broker under: the broker reads the owner's values without
/// running with them (an `LD_PRELOAD`, a `BASH_ENV`, a `NODE_OPTIONS` would otherwise apply to
/// the broker and what it starts).
pub const HANDED_PREFIX: &str = "CLAUDE_TOOLS_OWNER_ENV_";

/// Most `GIT_CONFIG_KEY_<n>` read (git reads as many as `GIT_CONFIG_COUNT` says).
const MAX_GIT_COUNT: usize = 1024;

/// Whether the variable `name` is one the write rules read (handed on to brokers).
pub fn read_by_rules(name: &str) -> bool {
    VARS.iter().any(|(var, _)| *var == name)
        || GIT_KEY_PREFIXES.iter().any(|prefix| {
            name.strip_prefix(prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
}

/// Whether `name` is one of git's config variables ([`Names::GitConfigEntries`] or the
/// `GIT_CONFIG_KEY_<n>` / `GIT_CONFIG_VALUE_<n>` family), read into config entries.
pub fn is_git_config_var(name: &str) -> bool {
    matches!(name, "GIT_CONFIG_COUNT" | "GIT_CONFIG_PARAMETERS")
        || (!VARS.iter().any(|(var, _)| *var == name) && read_by_rules(name))
}

/// The environment a broker is handed: each variable [`read_by_rules`] of `vars`, under
/// [`HANDED_PREFIX`].
pub fn handed(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Vec<(OsString, OsString)> {
    vars.into_iter()
        .filter_map(|(name, value)| {
            let name = name.to_str().filter(|n| read_by_rules(n))?;
            Some((OsString::from(format!("{HANDED_PREFIX}{name}")), value))
        })
        .collect()
}

/// The owner's value of `name`: as handed to a broker, or this process's own (the gateway's).
pub fn var(name: &str) -> Option<OsString> {
    std::env::var_os(format!("{HANDED_PREFIX}{name}"))
        .or_else(|| std::env::var_os(name))
        .filter(|value| !value.is_empty())
}

/// The config entries git takes from the environment `get` gives: `GIT_CONFIG_PARAMETERS`
/// first, then `GIT_CONFIG_KEY_<n>` / `GIT_CONFIG_VALUE_<n>` for n below `GIT_CONFIG_COUNT`.
/// Where git refuses a malformed value (and runs nothing), what was read before stays read.
/// More than [`MAX_GIT_COUNT`] entries, all there, are not read: `unreadable` says so (the
/// rules then refuse the whole tree).
pub fn git_entries(
    get: impl Fn(&str) -> Option<OsString>,
    unreadable: &mut Vec<(String, String)>,
) -> Vec<Entry> {
    let mut out = Vec::new();
    if let Some(params) = get("GIT_CONFIG_PARAMETERS") {
        parameters(&params.to_string_lossy(), &mut out);
    }
    let count = get("GIT_CONFIG_COUNT")
        .and_then(|c| c.to_str().and_then(|c| c.trim().parse::<u64>().ok()))
        .unwrap_or(0);
    let mut read = 0;
    for n in 0..count.min(MAX_GIT_COUNT as u64) {
        let Some(key) = get(&format!("GIT_CONFIG_KEY_{n}")) else {
            break;
        };
        read += 1;
        let value = get(&format!("GIT_CONFIG_VALUE_{n}")).unwrap_or_default();
        out.extend(entry(
            &key.to_string_lossy(),
            Some(value.to_string_lossy().into()),
        ));
    }
    if count > MAX_GIT_COUNT as u64 && read == MAX_GIT_COUNT {
        unreadable.push((
            "GIT_CONFIG_COUNT".to_string(),
            format!("git reads more config entries from it than the {MAX_GIT_COUNT} read here"),
        ));
    }
    out
}

/// `GIT_CONFIG_PARAMETERS` as git's `parse_config_env_list` reads it: items separated by
/// blanks, each `'key=value'` (the old form), `'key'='value'`, `'key'=` or `'key'`, quoted as
/// `sq_quote` quotes (`'\''` and `'\!'` inside).
fn parameters(text: &str, out: &mut Vec<Entry>) {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    loop {
        while chars.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        if i >= chars.len() {
            return;
        }
        let Some((key, next)) = sq_dequote_step(&chars, i) else {
            return;
        };
        i = next;
        match chars.get(i) {
            None => return out.extend(old_style(&key)),
            Some(c) if c.is_whitespace() => out.extend(old_style(&key)),
            Some('=') => {
                i += 1;
                match chars.get(i) {
                    Some('\'') => {
                        let Some((value, next)) = sq_dequote_step(&chars, i) else {
                            return;
                        };
                        i = next;
                        if chars.get(i).is_some_and(|c| !c.is_whitespace()) {
                            return;
                        }
                        out.extend(entry(&key, Some(value)));
                    }
                    None => return out.extend(entry(&key, Some(String::new()))),
                    Some(c) if c.is_whitespace() => out.extend(entry(&key, Some(String::new()))),
                    Some(_) => return,
                }
            }
            Some(_) => return,
        }
    }
}

/// One single-quoted word from `start` (git's `sq_dequote_step`): the word and the index after
/// it, or `None` where git refuses it.
fn sq_dequote_step(chars: &[char], start: usize) -> Option<(String, usize)> {
    if chars.get(start) != Some(&'\'') {
        return None;
    }
    let mut word = String::new();
    let mut i = start + 1;
    loop {
        let c = *chars.get(i)?;
        i += 1;
        if c != '\'' {
            word.push(c);
            continue;
        }
        // Out of the quotes: `\'` or `\!` followed by a quote resumes them.
        match (chars.get(i), chars.get(i + 1), chars.get(i + 2)) {
            (Some('\\'), Some(q @ ('\'' | '!')), Some('\'')) => {
                word.push(*q);
                i += 3;
            }
            _ => return Some((word, i)),
        }
    }
}

/// The old form, `key=value` in one quoted word (no `=`: a bare key, a boolean).
fn old_style(item: &str) -> Option<Entry> {
    match item.split_once('=') {
        Some((key, value)) => entry(key, Some(value.to_string())),
        None => entry(item, None),
    }
}

/// A `section[.subsection].key` name as git's `git_config_parse_key` splits it: the section and
/// the key lowercased, the subsection (between the first and last dot) as written.
fn entry(name: &str, value: Option<String>) -> Option<Entry> {
    let (section, rest) = name.split_once('.')?;
    let (subsection, key) = match rest.rsplit_once('.') {
        Some((sub, key)) => (Some(sub.to_string()), key),
        None => (None, rest),
    };
    (!section.is_empty() && !key.is_empty()).then(|| Entry {
        section: section.to_lowercase(),
        subsection,
        key: key.to_lowercase(),
        value,
    })
}

/// The file names a language's options load at start (`NODE_OPTIONS=--require x`,
/// `PERL5OPT=-MFoo`, `RUBYOPT=-rfoo`), and the directories they add to its import path
/// (`-I`, `-Mlib=DIR,DIR2`): (files or module names, dirs). Java's are the files its agents
/// load (`-javaagent:<jar>[=…]`, `-agentpath:<lib>[=…]`).
pub fn option_names(lang: Lang, value: &OsStr) -> (Vec<String>, Vec<String>) {
    let value = value.to_string_lossy();
    let words: Vec<&str> = value.split_whitespace().collect();
    let (mut loads, mut dirs) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < words.len() {
        let word = words[i];
        let next = words.get(i + 1).map(|w| w.to_string());
        i += 1;
        let (load, dir): (Option<String>, Vec<String>) = match lang {
            Lang::Node => match word.split_once('=') {
                Some((flag, arg)) if NODE_LOADS.contains(&flag) => {
                    (Some(arg.to_string()), Vec::new())
                }
                _ if NODE_LOADS.contains(&word) => {
                    i += 1;
                    (next, Vec::new())
                }
                _ => (None, Vec::new()),
            },
            Lang::Java => {
                let file = ["-javaagent:", "-agentpath:"].iter().find_map(|flag| {
                    let arg = word.strip_prefix(flag)?;
                    Some(arg.split('=').next().unwrap_or("").to_string())
                });
                (file, Vec::new())
            }
            Lang::Perl | Lang::Ruby => {
                let (load, dirs, took_next) = switches(lang, word, next.as_deref());
                if took_next {
                    i += 1;
                }
                (load, dirs)
            }
            Lang::Python => (None, Vec::new()),
        };
        loads.extend(load.filter(|l| !l.is_empty()));
        dirs.extend(dir.into_iter().filter(|d| !d.is_empty()));
    }
    (loads, dirs)
}

/// What one word of `PERL5OPT` or `RUBYOPT` loads and adds to the import path, and whether it
/// took the next word as its argument. Both interpreters take a word without its dash (perl
/// reads each word of `PERL5OPT` so, ruby prepends one) and bundled switches (`-wMFoo`,
/// `-wrfoo`): the letters that take no argument are stepped over (red team 36).
fn switches(lang: Lang, word: &str, next: Option<&str>) -> (Option<String>, Vec<String>, bool) {
    let body = word.strip_prefix('-').unwrap_or(word);
    let (mut load, mut dirs, mut took_next) = (None, Vec::new(), false);
    if body.starts_with('-') {
        // A long option (`--enable=frozen-string-literal`): nothing loaded.
        return (load, dirs, took_next);
    }
    let mut argument = |rest: &str| match rest {
        "" => {
            took_next = true;
            next.map(str::to_string)
        }
        rest => Some(rest.to_string()),
    };
    for (at, c) in body.char_indices() {
        let rest = &body[at + c.len_utf8()..];
        match (lang, c) {
            (Lang::Perl, 'M' | 'm') => {
                let Some(arg) = argument(rest) else { break };
                // `-MFoo::Bar=x,y`: the module, as a path.
                let module = arg.split(['=', ' ']).next().unwrap_or("");
                // `-Mlib=DIR,DIR2` is `use lib` at start: include directories, as `-I`
                // (`-M-lib` is `no lib`).
                if module == "lib" {
                    let list = arg.split_once('=').map_or("", |(_, list)| list);
                    dirs.extend(list.split(',').map(str::to_string));
                }
                load = Some(module.trim_start_matches('-').to_string());
                break;
            }
            (Lang::Perl, 'd') => {
                // `-d:Mod`, `-dt:Mod`: `Devel::Mod`.
                if let Some(module) = rest.trim_start_matches('t').strip_prefix(':') {
                    let module = module.split(['=', ' ']).next().unwrap_or("");
                    load = Some(format!("Devel::{module}"));
                }
                break;
            }
            (Lang::Ruby, 'r') => {
                load = argument(rest);
                break;
            }
            (_, 'I') => {
                dirs.extend(argument(rest));
                break;
            }
            (Lang::Perl, 'U' | 'W' | 'w' | 't' | 'T') => {}
            (Lang::Ruby, 'd' | 'v' | 'w' | 'U' | 'y' | 'W' | '0'..='9') => {}
            _ => break,
        }
    }
    (load, dirs, took_next)
}

/// node's flags whose argument is a file or module loaded before the program.
const NODE_LOADS: [&str; 5] = [
    "--require",
    "-r",
    "--import",
    "--loader",
    "--experimental-loader",
];

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
