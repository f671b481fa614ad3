//! What a home's tool configuration files name by path (red team 43a B9): `~/.ssh/config`'s
//! `ProxyCommand` and `Include`, `~/.vimrc`'s `source`, nvim's `dofile`, `~/.tmux.conf`'s
//! `run-shell`, `~/.npmrc`'s `node-options=--require`, `~/.irbrc`'s `load` — programs and files
//! these tools run or load at their start, outside every sandbox. Each file has its own
//! grammar; rather than one reader per tool, every path spelled out in them is taken
//! (absolute, `~/`, `$HOME/`, `${HOME}/`, ssh's `%d/`), as the links in the same start-up
//! places are: the target of a start-up place, refused as [`super::super::AutorunClass::StartupLinks`]
//! naming the file that names it. Named files are read in turn (an `Include`d file's own
//! `ProxyCommand`), within bounds. The shell start-up files are read by their own reader, which
//! knows assignments from programs ([`super::super::env_files`]).
//!
//! A variable the owner's start-up files give an absolute value starts a path too (`$PROJ/x`:
//! the tool is started from that shell). A path with a pattern or another expansion
//! (`/p/src/*.py`, ssh's `%h`, a `$VAR` set nowhere read) is not taken:
//! such a path is a matcher (vim's `autocmd` patterns, `set path+=…/**`, a `ControlPath`
//! socket) far more often than code to run (red team 44a W1: `src/` had been closed). ssh's
//! `Include` is read by its own grammar: a pattern there names its directory whole (ssh reads
//! a file made there later too), and its relative `Include` is taken from `~/.ssh`. Not taken: a directory that exists (a
//! tool config names the project itself, or a directory a tool `cd`s into, far more often than
//! a plugin directory such as vim's `runtimepath`, and taking it would refuse every write
//! below it), a relative path (relative to wherever the tool starts, it cannot be told from a
//! word), a home or a directory above one.

use std::path::{Path, PathBuf};

/// The per-user configuration files read, relative to a home: what ssh, editors, terminal
/// multiplexers and emulators, REPLs, debuggers, package managers and cloud CLIs read at their
/// start, whose lines name programs they run or files they load.
pub(super) const NAMING_FILES: &[&str] = &[
    ".ssh/config",
    ".vimrc",
    ".vim/vimrc",
    ".gvimrc",
    ".exrc",
    ".config/nvim/init.vim",
    ".config/nvim/init.lua",
    ".tmux.conf",
    ".config/tmux/tmux.conf",
    ".screenrc",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".irbrc",
    ".pryrc",
    ".gemrc",
    ".pythonrc",
    ".pythonrc.py",
    ".pdbrc",
    ".gdbinit",
    ".config/gdb/gdbinit",
    ".lldbinit",
    ".psqlrc",
    ".sqliterc",
    ".Rprofile",
    ".emacs",
    ".emacs.el",
    ".emacs.d/init.el",
    ".emacs.d/early-init.el",
    ".config/emacs/init.el",
    ".config/emacs/early-init.el",
    ".ghci",
    ".iex.exs",
    ".perldb",
    ".inputrc",
    ".wgetrc",
    ".curlrc",
    ".hgrc",
    ".cargo/config.toml",
    ".cargo/config",
    ".kube/config",
    ".aws/config",
    ".mavenrc",
    ".gradle/gradle.properties",
    ".config/starship.toml",
    ".config/kitty/kitty.conf",
    ".wezterm.lua",
    ".config/wezterm/wezterm.lua",
    ".config/alacritty/alacritty.toml",
    ".config/alacritty/alacritty.yml",
    // Coding agents' user settings: hooks, status lines, key helpers and MCP servers are
    // commands they run at their start and on events (red team 48 F2: the owner's `claude` ran
    // the project script its `~/.claude/settings.json` SessionStart hook named).
    ".claude/settings.json",
    ".claude.json",
    ".codex/config.toml",
    ".gemini/settings.json",
    ".cursor/mcp.json",
    ".config/goose/config.yaml",
    ".config/opencode/opencode.json",
    ".config/opencode/opencode.jsonc",
    ".config/opencode/config.json",
    ".continue/config.json",
    ".continue/config.yaml",
    ".aider.conf.yml",
    // Editors' and tools' user settings naming programs (red team 48 F3): language servers,
    // version managers' `path:` and hooks, shells other than bash, zsh and fish, R's start-up
    // variables, gpg-agent's pinentry, mailcap viewers, docker CLI plugins, gh aliases.
    ".config/zed/settings.json",
    ".vscode-server/data/Machine/settings.json",
    ".tool-versions",
    ".config/mise/config.toml",
    ".mise.toml",
    ".gradle/init.gradle",
    ".gradle/init.gradle.kts",
    ".config/nushell/config.nu",
    ".config/nushell/env.nu",
    ".config/powershell/Microsoft.PowerShell_profile.ps1",
    ".config/powershell/profile.ps1",
    ".cshrc",
    ".tcshrc",
    ".login",
    ".kshrc",
    ".mkshrc",
    ".Renviron",
    ".gnupg/gpg-agent.conf",
    ".mailcap",
    ".docker/config.json",
    ".config/gh/config.yml",
    ".pam_environment",
];

/// The system's configuration files read the same way, relative to the system's root: the
/// system crontab (its lines run as any account at their times) and ssh's and vim's system-wide
/// configs (red team 48 F1).
pub(super) const SYSTEM_NAMING_FILES: &[&str] = &[
    "etc/crontab",
    "etc/anacrontab",
    "etc/ssh/ssh_config",
    "etc/vim/vimrc",
    "etc/vim/vimrc.local",
    "etc/vimrc",
    "etc/xdg/nvim/sysinit.vim",
    "etc/gitconfig",
    // Red team 49: what the loader, PAM, sshd, tmux, screen, logrotate and mail readers take
    // from the system's files (libraries preloaded into every process, a key command sshd
    // runs as root, hooks run as root).
    "etc/ld.so.preload",
    "etc/ld.so.conf",
    "etc/security/pam_env.conf",
    "etc/ssh/sshd_config",
    "etc/tmux.conf",
    "etc/screenrc",
    "etc/mailcap",
    "etc/logrotate.conf",
    "etc/inputrc",
    // Red team 51: systemd's manager defaults (`DefaultEnvironment=LD_PRELOAD=…`), the
    // kernel's core pattern, sudo's secure path.
    "etc/systemd/system.conf",
    "etc/systemd/user.conf",
    "etc/sysctl.conf",
    "etc/sudoers",
    // Scripts run as root or at every login, read for the paths they spell rather than as
    // shell start-up files: they are large programs (the shell reader fails closed on their
    // dynamic assignments, `read -r "$2"` in git-prompt, and had refused every project).
    "etc/rc.local",
    "etc/ssh/sshrc",
    "etc/X11/Xsession",
];

/// The system's directories whose every file (one level) is such a configuration: cron's
/// tables (each account's own, readable as root; `/etc/cron.d`), the scripts cron runs daily
/// and weekly, system units (`ExecStart=`), autostart entries of every desktop session, and
/// ssh's included configs.
pub(super) const SYSTEM_NAMING_DIRS: &[&str] = &[
    "etc/cron.d",
    "etc/cron.hourly",
    "etc/cron.daily",
    "etc/cron.weekly",
    "etc/cron.monthly",
    "var/spool/cron/crontabs",
    "var/spool/cron",
    "etc/systemd/system",
    "etc/systemd/user",
    "etc/xdg/autostart",
    "etc/ssh/ssh_config.d",
    "etc/ssh/sshd_config.d",
    "etc/ld.so.conf.d",
    "etc/init.d",
    "etc/bash_completion.d",
    "etc/X11/Xsession.d",
    "etc/update-motd.d",
    // Red team 51: run as root by the network scripts, modprobe, PAM (`pam_exec.so`), sudo,
    // the kernel (`core_pattern=|…`) and systemd's manager.
    "etc/network/if-up.d",
    "etc/network/if-down.d",
    "etc/network/if-pre-up.d",
    "etc/network/if-post-down.d",
    "etc/modprobe.d",
    "etc/sysctl.d",
    "etc/pam.d",
    "etc/sudoers.d",
    "etc/systemd/system.conf.d",
    "etc/systemd/user.conf.d",
    "etc/apt/apt.conf.d",
    "etc/logrotate.d",
    "etc/udev/rules.d",
    "lib/udev/rules.d",
];

/// Per-user directories whose every file (one level) is such a configuration: units and
/// autostart entries (`ExecStart=`, `Exec=`), fish's autoloaded functions, IPython's and
/// Jupyter's start-up files, Julia's `startup.jl`, window managers' and editors' configs, VS
/// Code's user settings and tasks, Gradle's init scripts (red team 44a C1-B3).
pub(super) const NAMING_DIRS: &[&str] = &[
    ".config/systemd/user",
    ".local/share/systemd/user",
    ".config/autostart",
    ".config/fish/functions",
    ".config/fish/completions",
    ".ipython/profile_default",
    ".ipython/profile_default/startup",
    ".jupyter",
    ".julia/config",
    ".config/i3",
    ".config/sway",
    ".config/hypr",
    ".config/openbox",
    ".config/plasma-workspace/env",
    ".config/plasma-workspace/shutdown",
    ".config/helix",
    ".config/lazygit",
    ".config/nvim/lua",
    ".config/nvim/plugin",
    ".vim/plugin",
    ".gradle/init.d",
    ".config/Code/User",
    ".config/VSCodium/User",
    ".config/Cursor/User",
    ".local/share/applications",
];

/// Most files read from one of [`NAMING_DIRS`]; past it, every write is refused (what the rest
/// name is not known). Desktop entries are the many: a few hundred in a full desktop's
/// `~/.local/share/applications`.
pub(super) const MAX_DIR_FILES: usize = 1024;

/// Endings a program or a loader adds to a name given without one (`--require /p/x` loads
/// `/p/x.js`, `require '/p/x'` `/p/x.rb`, emacs's `(load "/p/x")` `/p/x.el`).
pub(super) const LOADED_ENDINGS: &[&str] = &[
    ".js", ".cjs", ".mjs", ".json", ".rb", ".lua", ".vim", ".el", ".elc", ".py", ".sh",
];

/// Bytes of one file read.
const MAX_FILE: u64 = 1024 * 1024;
/// How deep named files are read in turn, and how many files are read per home; past the
/// count, every write is refused (red team 48 F5: the files past it were skipped, and the
/// project scripts the 70th `~/.ssh/config.d/*.conf` named stayed writable).
pub(super) const MAX_DEPTH: usize = 4;
pub(super) const MAX_FILES: usize = 2048;
/// Most paths taken from one file, and files taken from one directory a pattern names.
pub(super) const MAX_PER_FILE: usize = 4096;
pub(super) const MAX_PER_PATTERN: usize = 1024;

/// One path a configuration file names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Named {
    /// A file (or what does not exist yet).
    Path(PathBuf),
    /// A directory whose every file is read (ssh's `Include ~/p/ssh.d/*`): whole, a file made
    /// there later too.
    Dir(PathBuf),
    /// A directory whose files a program loads (the loader's library directories): whole, its
    /// files not read (they are libraries, and a system's hold thousands).
    Loaded(PathBuf),
}

/// Characters after which a path may begin: blanks, quotes, and the punctuation that separates
/// a value from its key or from its neighbours (`node-options=--require=/p/x.js`,
/// `dofile('/p/x.lua')`, `PATH:/p/bin`, vim's `:!/p/x`).
fn starts_after(c: char) -> bool {
    // `+` and `-` too: systemd's `ExecStart=-/p/x` and `ExecStartPre=+/p/x` (red team 49).
    c.is_whitespace() || "'\"`=([{,:;@<>|&!+-".contains(c)
}

/// Characters that end a path.
fn ends_at(c: char) -> bool {
    c.is_whitespace() || "'\"`;,)]}<>|&:".contains(c)
}

/// What makes a path's part a pattern: globs and expansions.
const WILD: [char; 6] = ['*', '?', '[', '$', '%', '{'];

/// `$NAME/…` or `${NAME}/…` at the start of `rest`: the variable's name and the length up to
/// the `/`.
fn variable_prefix(rest: &str) -> Option<(&str, usize)> {
    let after = rest.strip_prefix('$')?;
    let (name, len) = match after.strip_prefix('{') {
        Some(braced) => {
            let name = braced.split('}').next()?;
            (name, name.len() + 3)
        }
        None => {
            let len = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..len], len + 1)
        }
    };
    (super::super::shell_words::is_variable_name(name) && rest[len..].starts_with('/'))
        .then_some((name, len + 1))
}

/// The paths `text` spells out (see the module's doc), with `home` for `~/` and its kin and
/// `vars` for the absolute values the owner's start-up files give a variable (`$PROJ/x`, the
/// tool started from that shell: red team 46a); a variable without one names nothing.
pub(super) fn paths_named(
    text: &str,
    home: &Path,
    vars: &dyn Fn(&str) -> Vec<String>,
) -> Vec<Named> {
    let mut out = Vec::new();
    let mut previous: Option<char> = None;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let boundary = previous.is_none_or(starts_after);
        previous = Some(c);
        if !boundary || out.len() >= MAX_PER_FILE {
            continue;
        }
        let rest = &text[at..];
        let (bases, skip) = if rest.starts_with('/') {
            (vec![PathBuf::from("/")], 1)
        } else if let Some(prefix) = ["~/", "$HOME/", "${HOME}/", "%d/"]
            .iter()
            .find(|p| rest.starts_with(**p))
        {
            (vec![home.to_path_buf()], prefix.len())
        } else if let Some((name, len)) = variable_prefix(rest) {
            (vars(name).into_iter().map(PathBuf::from).collect(), len)
        } else {
            continue;
        };
        let token: &str = rest[skip..].split(ends_at).next().unwrap_or_default();
        // Skip what was taken (its characters begin no other path).
        let taken = skip + token.len();
        while chars.peek().is_some_and(|(next, _)| *next < at + taken) {
            previous = chars.next().map(|(_, c)| c);
        }
        // A pattern or an expansion (`*.py`, ssh's `%h`, `$VAR`): a matcher (vim's `autocmd`
        // patterns, `set path+=…/**`, a `ControlPath` socket) far more often than code to run.
        if !token.is_empty() && !token.contains(WILD) {
            out.extend(bases.iter().map(|base| Named::Path(base.join(token))));
        }
    }
    out
}

/// ssh's `Include`s: a relative path (`Include ../p/ssh.conf`, `Include config.d/*`) is taken
/// from `~/.ssh` (a user config's include), which no spelling scan sees; a pattern's directory
/// (`Include ~/p/ssh.d/*.conf`) is taken whole, since ssh reads a file made there later too.
pub(super) fn ssh_includes(text: &str, home: &Path) -> Vec<Named> {
    let base = home.join(".ssh");
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim_start();
        let Some((keyword, rest)) = line.split_once(|c: char| c.is_whitespace() || c == '=') else {
            continue;
        };
        if !keyword.eq_ignore_ascii_case("include") {
            continue;
        }
        for word in rest.trim_start_matches([' ', '\t', '=']).split_whitespace() {
            let word = word.trim_matches('"');
            let (at, relative) = if let Some(rest) = word.strip_prefix("~/") {
                (home.to_path_buf(), rest)
            } else if word.starts_with('/') {
                (PathBuf::from("/"), word)
            } else if word.is_empty() || word.starts_with(['%', '$', '~']) {
                continue;
            } else {
                (base.clone(), word)
            };
            match relative.find(['*', '?', '[']) {
                Some(cut) => {
                    let dir = relative[..cut].rsplit_once('/').map_or("", |(dir, _)| dir);
                    out.push(Named::Dir(at.join(dir)));
                }
                // An absolute or `~` file is the spelling scan's already.
                None if at == base => out.push(Named::Path(base.join(relative))),
                None => {}
            }
        }
    }
    out
}

/// systemd's drop-in directories in `dir` (`x.service.d/`): their files are read with the
/// units (red team 49: an `ExecStartPost=` in `ssh.service.d/override.conf` was not).
pub(super) fn drop_in_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = crate::look::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "d") && crate::look::is_dir(p))
        .take(MAX_DIR_FILES)
        .collect()
}

/// The system's Python configs (`/etc/python3.11/sitecustomize.py`): every Python of the system
/// runs them at its start, as any account.
pub(super) fn system_python_configs(system: &Path) -> Vec<PathBuf> {
    let Ok(entries) = crate::look::read_dir(system.join("etc")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().as_encoded_bytes().starts_with(b"python"))
        .flat_map(|e| ["sitecustomize.py", "usercustomize.py"].map(|f| e.path().join(f)))
        .take(MAX_DIR_FILES)
        .collect()
}

/// What a systemd unit runs by a path relative to its `WorkingDirectory=` (`ExecStart=/bin/sh
/// x.sh`, red team 49): each word after the program of an `Exec…=` line that is no option or
/// expansion, under each working directory the unit names.
pub(super) fn unit_relative_runs(text: &str) -> Vec<Named> {
    let dirs: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("WorkingDirectory="))
        .map(|d| d.trim().trim_start_matches(['-', '!']))
        .filter(|d| d.starts_with('/'))
        .collect();
    let mut out = Vec::new();
    for line in text.lines().filter(|_| !dirs.is_empty()) {
        let Some((key, value)) = line.trim().split_once('=') else {
            continue;
        };
        if !key.trim_end().starts_with("Exec") {
            continue;
        }
        // The exec prefixes (`-`, `@`, `:`, `+`, `!`, `!!`), then the program.
        let value = value
            .trim_start()
            .trim_start_matches(['-', '@', ':', '+', '!']);
        for word in value.split_whitespace().skip(1) {
            let word = word.trim_matches(['"', '\'']);
            if word.is_empty() || word.starts_with(['/', '-', '$', '%', '~']) {
                continue;
            }
            out.extend(
                dirs.iter()
                    .map(|dir| Named::Path(Path::new(dir).join(word))),
            );
        }
    }
    out.truncate(MAX_PER_FILE);
    out
}

/// The directories `ld.so.conf` and its included files list: the loader takes libraries from
/// each, for every program of the system (red team 49: `libc.so.6` planted in one).
pub(super) fn loader_dirs(text: &str) -> Vec<Named> {
    text.lines()
        .filter_map(|l| l.split('#').next()?.split_whitespace().next())
        .filter(|word| word.starts_with('/'))
        .map(|dir| Named::Loaded(PathBuf::from(dir)))
        .take(MAX_PER_FILE)
        .collect()
}

/// The files directly in `dir` (none when it cannot be listed); `None` when it holds more than
/// `most`: the caller fails closed, since which ones a listing gives first is the file
/// system's order (red team 48 F5).
pub(super) fn dir_files(dir: &Path, most: usize) -> Option<Vec<PathBuf>> {
    let Ok(entries) = crate::look::read_dir(dir) else {
        return Some(Vec::new());
    };
    let files: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
        .map(|e| e.path())
        .take(most + 1)
        .collect();
    (files.len() <= most).then_some(files)
}

/// The text of a named file to read in turn, if it is a regular file within the bound.
pub(super) fn text_of(path: &Path) -> Option<String> {
    super::super::read_text_head(path, MAX_FILE)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
