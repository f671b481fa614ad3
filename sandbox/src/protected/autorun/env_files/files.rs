//! Which files the shell start-up reader reads: the account's, the system's and the
//! directories whose every file is one.

/// The account's shell start-up files, relative to its home: the shells' own (and what
/// bash-completion sources), what they run at logout, the X session's, and direnv's (its
/// `direnvrc` runs before every `.envrc` it loads, and what it exports is the owner's: red
/// team 43a B8).
pub(super) const SHELL_FILES: [&str; 18] = [
    ".bashrc",
    ".bash_completion",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".bash_logout",
    ".zshenv",
    ".zshrc",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".config/fish/config.fish",
    ".xprofile",
    ".xsessionrc",
    ".xinitrc",
    ".xsession",
    ".config/direnv/direnvrc",
    ".direnvrc",
];

/// The system's shell start-up files, relative to the system's root (`super::system_root`):
/// every login or interactive shell of every account reads them before its own, so a line there
/// that sources or runs a project file runs it as much as the account's own would (red team 48
/// F1). `/etc/environment` holds plain assignments (pam_env reads it at each login).
pub(super) const SYSTEM_SHELL_FILES: [&str; 13] = [
    "etc/environment",
    "etc/profile",
    "etc/bash.bashrc",
    "etc/bashrc",
    "etc/zshenv",
    "etc/zsh/zshenv",
    "etc/zprofile",
    "etc/zsh/zprofile",
    "etc/zshrc",
    "etc/zsh/zshrc",
    "etc/zlogin",
    "etc/zsh/zlogin",
    "etc/fish/config.fish",
];

/// The system's directories whose every file (of the ending) a shell's start-up runs:
/// `/etc/profile` sources `/etc/profile.d/*.sh`, fish reads `/etc/fish/conf.d/*.fish`.
pub(super) const SYSTEM_STARTUP_DIRS: [(&str, &str); 3] = [
    ("etc/profile.d", ".sh"),
    ("etc/fish/conf.d", ".fish"),
    ("etc/environment.d", ".conf"),
];

/// zsh's start-up files, read again in `$ZDOTDIR` when a read file sets it.
pub(super) const ZSH_FILES: [&str; 4] = [".zshenv", ".zprofile", ".zshrc", ".zlogin"];

/// Directories whose every file is a start-up file: fish's `conf.d` (`*.fish`), systemd's
/// `environment.d` (`*.conf`, assignments for the user's services and, with some display
/// managers, sessions).
pub(super) const STARTUP_DIRS: [(&str, &str); 3] = [
    (".config/fish/conf.d", ".fish"),
    (".config/environment.d", ".conf"),
    (".config/direnv/lib", ".sh"),
];
