//! The protected set: ONE rule set from which the read tools' path policy, the start validation of
//! working directories, the write policy and the command/runner sandboxes (mount masks, Landlock
//! read roots, Seatbelt denials) are all derived.
//!
//! It holds: the catalogue of credential stores and system secrets ([`CATALOGUE`], home-relative
//! and absolute, by category, for Linux and macOS); private SSH host keys (`/etc/ssh/ssh_host_*`
//! not ending in `.pub`, a pattern, expanded to the files present for the sandboxes); the
//! gateway's state dir and the owner's extra entries; and, on Linux, every other place the mount
//! table shows the same file-system objects under (a bind mount of `~/.ssh`, of the state dir or
//! of a directory above them), found in `/proc/self/mountinfo` when the set is built.
//! [`install_locations`] adds the write-only entries: where the gateway and Claude Code are
//! installed.

// Every look at the owner's files goes through `crate::look` (sandbox/clippy.toml).
#![deny(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

/// What kind of secret a catalogue entry holds (shown by `gatewayctl doctor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    SshAndGpg,
    CloudClis,
    ContainersAndKubernetes,
    PackageRegistries,
    GitCredentials,
    Tunnels,
    ModelClis,
    PasswordsAndTokens,
    Browsers,
    ShellHistories,
    SystemAccounts,
    SystemPrivateKeys,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SshAndGpg => "ssh and gpg keys",
            Self::CloudClis => "cloud CLIs",
            Self::ContainersAndKubernetes => "containers and Kubernetes",
            Self::PackageRegistries => "package registries",
            Self::GitCredentials => "git credential stores",
            Self::Tunnels => "tunnels and VPNs",
            Self::ModelClis => "model CLIs",
            Self::PasswordsAndTokens => "password managers, database and vault tokens",
            Self::Browsers => "browser profiles (cookies, saved logins)",
            Self::ShellHistories => "shell and REPL histories",
            Self::SystemAccounts => "system account secrets",
            Self::SystemPrivateKeys => "system private keys",
        }
    }
}

/// Where a catalogue path is anchored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// Relative to the owner's home directory.
    Home,
    /// Absolute.
    Root,
}

/// One catalogue entry: a file or directory (everything below a directory is protected too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub anchor: Anchor,
    pub path: &'static str,
    pub category: Category,
}

const fn h(path: &'static str, category: Category) -> Entry {
    Entry {
        anchor: Anchor::Home,
        path,
        category,
    }
}

const fn r(path: &'static str, category: Category) -> Entry {
    Entry {
        anchor: Anchor::Root,
        path,
        category,
    }
}

use Category::*;

/// The built-in protected entries (owner extras are added at run time, never removed from these).
/// Paths that do not exist on a host cost nothing: the sandboxes mask only what exists.
pub const CATALOGUE: &[Entry] = &[
    // SSH and GPG.
    h(".ssh", SshAndGpg),
    h(".gnupg", SshAndGpg),
    // Cloud CLIs.
    h(".aws", CloudClis),
    h(".config/gcloud", CloudClis),
    h(".azure", CloudClis),
    h(".oci", CloudClis),
    h(".config/doctl", CloudClis),
    h("Library/Application Support/doctl", CloudClis),
    h(".config/hcloud", CloudClis),
    h(".aliyun", CloudClis),
    h(".bluemix", CloudClis),
    h(".config/linode-cli", CloudClis),
    h(".config/scw", CloudClis),
    h(".s3cfg", CloudClis),
    h(".boto", CloudClis),
    h(".config/rclone", CloudClis),
    h(".terraform.d/credentials.tfrc.json", CloudClis),
    h(".terraformrc", CloudClis),
    h(".tsh", CloudClis),
    h(".wrangler", CloudClis),
    h(".config/.wrangler", CloudClis),
    h(".databrickscfg", CloudClis),
    h(".snowsql", CloudClis),
    h(".dbt/profiles.yml", CloudClis),
    h(".circleci/cli.yml", CloudClis),
    h(".sentryclirc", CloudClis),
    h(".config/stripe", CloudClis),
    h(".vercel", CloudClis),
    h(".config/configstore/firebase-tools.json", CloudClis),
    h(".config/sops/age", PasswordsAndTokens),
    h("Library/Application Support/sops/age", PasswordsAndTokens),
    h(".config/nix/nix.conf", PackageRegistries),
    h(".local/share/containers/auth.json", ContainersAndKubernetes),
    h(".claude/settings.json", ModelClis),
    h(".claude/settings.local.json", ModelClis),
    h(".cursor/mcp.json", ModelClis),
    h(".local/share/jupyter/runtime", PasswordsAndTokens),
    h(".pulumi/credentials.json", CloudClis),
    h(".fly", CloudClis),
    h(".config/heroku", CloudClis),
    h(".local/share/com.vercel.cli", CloudClis),
    h("Library/Application Support/com.vercel.cli", CloudClis),
    h(".netlify", CloudClis),
    h(".config/netlify", CloudClis),
    // Containers and Kubernetes.
    h(".docker", ContainersAndKubernetes),
    h(".kube", ContainersAndKubernetes),
    h(".config/containers/auth.json", ContainersAndKubernetes),
    h(".minikube", ContainersAndKubernetes),
    h(".config/helm/repositories.yaml", ContainersAndKubernetes),
    h(".talos", ContainersAndKubernetes),
    r("/etc/kubernetes/admin.conf", ContainersAndKubernetes),
    r("/etc/kubernetes/pki", ContainersAndKubernetes),
    r("/etc/rancher/k3s/k3s.yaml", ContainersAndKubernetes),
    r("/var/lib/rancher/k3s/server/token", ContainersAndKubernetes),
    r("/var/lib/kubelet/pki", ContainersAndKubernetes),
    r("/run/containers/0/auth.json", ContainersAndKubernetes),
    // Package registries.
    h(".npmrc", PackageRegistries),
    h(".yarnrc.yml", PackageRegistries),
    h(".pypirc", PackageRegistries),
    h(".config/pip/pip.conf", PackageRegistries),
    h(".pip/pip.conf", PackageRegistries),
    h(".cargo/credentials", PackageRegistries),
    h(".cargo/credentials.toml", PackageRegistries),
    h(".gem/credentials", PackageRegistries),
    h(".local/share/gem/credentials", PackageRegistries),
    h(".m2/settings.xml", PackageRegistries),
    h(".m2/settings-security.xml", PackageRegistries),
    h(".gradle/gradle.properties", PackageRegistries),
    h(".nuget/NuGet/NuGet.Config", PackageRegistries),
    h(".config/NuGet/NuGet.Config", PackageRegistries),
    h(".composer/auth.json", PackageRegistries),
    h(".config/composer/auth.json", PackageRegistries),
    h(".bundle/config", PackageRegistries),
    // Git credential stores and forge CLIs.
    h(".git-credentials", GitCredentials),
    h(".config/git/credentials", GitCredentials),
    h(".config/gh", GitCredentials),
    h(".config/glab-cli", GitCredentials),
    h("Library/Application Support/glab-cli", GitCredentials),
    h(".config/hub", GitCredentials),
    h(".config/tea", GitCredentials),
    h(".gcm", GitCredentials),
    // Tunnels and VPNs.
    h(".cloudflared", Tunnels),
    h(".ngrok2", Tunnels),
    h(".config/ngrok", Tunnels),
    h("Library/Application Support/ngrok", Tunnels),
    r("/etc/cloudflared", Tunnels),
    r("/usr/local/etc/cloudflared", Tunnels),
    r("/var/lib/tailscale", Tunnels),
    r("/etc/wireguard", Tunnels),
    r("/etc/openvpn", Tunnels),
    r("/var/lib/zerotier-one/identity.secret", Tunnels),
    r("/etc/NetworkManager/system-connections", Tunnels),
    r("/etc/ipsec.secrets", Tunnels),
    r("/etc/ipsec.d/private", Tunnels),
    // Model CLIs. The runner has a private HOME, so the owner's Claude Code login is never needed.
    h(".claude/.credentials.json", ModelClis),
    h(".claude.json", ModelClis),
    h(".config/claude", ModelClis),
    h(".codex/auth.json", ModelClis),
    h(".gemini/oauth_creds.json", ModelClis),
    h(".gemini/google_accounts.json", ModelClis),
    h(".gemini/.env", ModelClis),
    h(".config/github-copilot", ModelClis),
    h(".config/io.datasette.llm/keys.json", ModelClis),
    h(
        "Library/Application Support/io.datasette.llm/keys.json",
        ModelClis,
    ),
    h(".ollama/id_ed25519", ModelClis),
    h(".cache/huggingface/token", ModelClis),
    h(".huggingface/token", ModelClis),
    h(".kaggle/kaggle.json", ModelClis),
    h(".aider.conf.yml", ModelClis),
    h(".config/openai", ModelClis),
    // Password managers, database password files, vault tokens, keychains.
    h(".netrc", PasswordsAndTokens),
    h(".authinfo", PasswordsAndTokens),
    h(".authinfo.gpg", PasswordsAndTokens),
    h(".pgpass", PasswordsAndTokens),
    h(".my.cnf", PasswordsAndTokens),
    h(".mylogin.cnf", PasswordsAndTokens),
    h(".vault-token", PasswordsAndTokens),
    h(".password-store", PasswordsAndTokens),
    h(".local/share/keyrings", PasswordsAndTokens),
    h(".local/share/kwalletd", PasswordsAndTokens),
    h(".pki", PasswordsAndTokens),
    h(".config/op", PasswordsAndTokens),
    h(".op", PasswordsAndTokens),
    h(".config/Bitwarden CLI", PasswordsAndTokens),
    h(
        "Library/Application Support/Bitwarden CLI",
        PasswordsAndTokens,
    ),
    h("Library/Keychains", PasswordsAndTokens),
    h(
        "Library/Group Containers/2BUA8C4S2C.com.1password",
        PasswordsAndTokens,
    ),
    r("/Library/Keychains", PasswordsAndTokens),
    r("/etc/mysql/debian.cnf", PasswordsAndTokens),
    // Browser profiles.
    h(".mozilla", Browsers),
    h(".config/google-chrome", Browsers),
    h(".config/chromium", Browsers),
    h(".config/BraveSoftware", Browsers),
    h("Library/Application Support/Google/Chrome", Browsers),
    h("Library/Application Support/Firefox", Browsers),
    h("Library/Cookies", Browsers),
    // Shell and REPL histories (commands typed with passwords and tokens in them).
    h(".bash_history", ShellHistories),
    h(".zsh_history", ShellHistories),
    h(".zhistory", ShellHistories),
    h(".histfile", ShellHistories),
    h(".sh_history", ShellHistories),
    h(".history", ShellHistories),
    h(".bash_sessions", ShellHistories),
    h(".zsh_sessions", ShellHistories),
    h(".local/share/fish/fish_history", ShellHistories),
    h(".python_history", ShellHistories),
    h(".node_repl_history", ShellHistories),
    h(".psql_history", ShellHistories),
    h(".mysql_history", ShellHistories),
    h(".sqlite_history", ShellHistories),
    h(".rediscli_history", ShellHistories),
    h(".irb_history", ShellHistories),
    h(".lesshst", ShellHistories),
    // System account secrets.
    r("/etc/shadow", SystemAccounts),
    r("/etc/shadow-", SystemAccounts),
    r("/etc/gshadow", SystemAccounts),
    r("/etc/gshadow-", SystemAccounts),
    r("/etc/sudoers", SystemAccounts),
    r("/etc/sudoers.d", SystemAccounts),
    r("/etc/security/opasswd", SystemAccounts),
    r("/etc/master.passwd", SystemAccounts),
    r("/etc/spwd.db", SystemAccounts),
    r("/var/db/sudo", SystemAccounts),
    r("/var/db/dslocal/nodes/Default/users", SystemAccounts),
    r("/etc/krb5.keytab", SystemAccounts),
    r("/var/lib/sss/secrets", SystemAccounts),
    // System private keys (the SSH host keys are a pattern, see `SSH_HOST_KEY_DIRS`).
    r("/etc/ssl/private", SystemPrivateKeys),
    r("/etc/pki/tls/private", SystemPrivateKeys),
    r("/etc/pki/CA/private", SystemPrivateKeys),
    r("/etc/letsencrypt", SystemPrivateKeys),
    r("/var/db/SystemKey", SystemPrivateKeys),
];

/// Directories whose `ssh_host_*` entries not ending in `.pub` are private host keys.
pub const SSH_HOST_KEY_DIRS: &[&str] = &["/etc/ssh"];

/// The catalogue's paths for `home` (home-relative entries joined to it), in catalogue order.
pub fn catalogue_paths(home: &Path) -> Vec<PathBuf> {
    CATALOGUE
        .iter()
        .map(|e| match e.anchor {
            Anchor::Home => home.join(e.path),
            Anchor::Root => PathBuf::from(e.path),
        })
        .collect()
}

/// Whether `name` (in a host-key directory) is a private SSH host key.
pub fn is_host_key_name(name: &[u8]) -> bool {
    name.starts_with(b"ssh_host_") && !name.ends_with(b".pub")
}

/// The private SSH host keys present now (the pattern expanded, for the sandboxes' masks).
pub fn host_key_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in SSH_HOST_KEY_DIRS {
        let Ok(entries) = crate::look::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            use std::os::unix::ffi::OsStrExt;
            if is_host_key_name(entry.file_name().as_bytes()) {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    out
}

/// Commands and the runner see `/dev` by allow-list, not by deny-list: the owner's terminals
/// (`/dev/pts`: keystrokes), input, sound and video devices, GPUs, USB, other processes' shared
/// memory in `/dev/shm`... are all readable to the owner's uid, and a host may have any. `/dev`
/// itself is in the masks ([`crate::masked_paths`]); with namespaces the helper mounts a
/// private `/dev` holding only these device nodes (bound from the host's), the [`DEVICE_LINKS`],
/// a private devpts (`/dev/pts`, `/dev/ptmx`) and a private empty tmpfs `/dev/shm`; with
/// Landlock only, `/dev` is outside the readable set and these files are allowed back.
pub const DEVICE_FILES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The symlinks of the private `/dev` (name, target).
pub const DEVICE_LINKS: &[(&str, &str)] = &[
    ("/dev/fd", "/proc/self/fd"),
    ("/dev/stdin", "/proc/self/fd/0"),
    ("/dev/stdout", "/proc/self/fd/1"),
    ("/dev/stderr", "/proc/self/fd/2"),
    ("/dev/ptmx", "pts/ptmx"),
];

/// The device tree, masked as a whole (see [`DEVICE_FILES`]).
pub const DEVICE_DIR: &str = "/dev";

/// The home directories of the host's other accounts (from `/etc/passwd`) that exist: a gateway
/// running as root reaches them, and their credential stores are no less secret than the
/// owner's. `/` and top-level system directories ([`NOT_HOMES`]: `/bin`, `/var`...) used as
/// service accounts' homes are skipped: the catalogue's entries under them mean nothing.
///
/// Also the `$HOME` of every gateway the registries list (red team 43a B5): a gateway of this
/// account started with another `$HOME` makes that directory an account's home to every other
/// gateway — its keys, start-up files and links protected as the passwd homes' are.
pub fn other_homes(owner_home: &Path) -> Vec<PathBuf> {
    let mut homes = other_homes_in(owner_home, instances::passwd_text().as_deref());
    let mut all = vec![owner_home.to_path_buf()];
    all.extend(homes.iter().cloned());
    let registered = instances::registered_homes(&all);
    homes.extend(not_yet_homes(&all, registered));
    homes.sort();
    homes.dedup();
    homes
}

/// Those of `candidates` that are none of `homes` (as given or canonical).
pub(crate) fn not_yet_homes(homes: &[PathBuf], candidates: Vec<PathBuf>) -> Vec<PathBuf> {
    let known: Vec<PathBuf> = homes
        .iter()
        .flat_map(|h| {
            [
                h.clone(),
                crate::look::canonicalize(h).unwrap_or_else(|_| h.clone()),
            ]
        })
        .collect();
    candidates
        .into_iter()
        .filter(|home| !known.contains(home))
        .collect()
}

/// Top-level directories that are no one's home, though `/etc/passwd` gives them to service
/// accounts (`sync:…:/bin`, `nobody:…:/nonexistent`): the catalogue's entries under them mean
/// nothing. A home directly under `/` otherwise counts (`/data`, `/workspace`, `/root`).
const NOT_HOMES: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr",
    "/var",
    "/etc",
    "/dev",
    "/proc",
    "/sys",
    "/run",
    "/tmp",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/boot",
    "/opt",
    "/srv",
    "/mnt",
    "/media",
    "/snap",
    "/nonexistent",
];

/// [`other_homes`] with `/etc/passwd`'s text given.
fn other_homes_in(owner_home: &Path, passwd: Option<&str>) -> Vec<PathBuf> {
    let Some(passwd) = passwd else {
        return Vec::new();
    };
    let owner = crate::look::canonicalize(owner_home).unwrap_or_else(|_| owner_home.to_path_buf());
    let mut out: Vec<PathBuf> = passwd
        .lines()
        .filter_map(|line| line.split(':').nth(5))
        .map(PathBuf::from)
        .filter(|home| {
            home.is_absolute()
                && home.parent().is_some()
                && !NOT_HOMES.iter().any(|not| home == Path::new(not))
                && crate::look::is_dir(home)
        })
        .filter(|home| *home != owner && home != owner_home)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The catalogue's home-anchored entries under every other account's home.
pub(crate) fn other_homes_catalogue(homes: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for home in homes {
        out.extend(
            CATALOGUE
                .iter()
                .filter(|e| e.anchor == Anchor::Home)
                .map(|e| home.join(e.path)),
        );
    }
    out
}

/// Files and directories in a home that run code later, outside every sandbox, when changed:
/// shell and session start-up files, autostart and service definitions, per-user executables,
/// tool configs that name programs. Sessions never write them (in any account's home), whatever
/// their write root; reading them stays allowed.
pub const AUTORUN: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    // Sourced by the usual `.bashrc` (Debian's sources `.bash_aliases`; bash-completion reads
    // the others): red team 27 B3.
    ".bash_aliases",
    ".bash_completion",
    ".bashrc.d",
    ".local/share/bash-completion",
    // IPython runs every file in a profile's startup dir at each start.
    ".ipython",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".cshrc",
    ".tcshrc",
    ".inputrc",
    ".xinitrc",
    ".xprofile",
    ".xsession",
    ".xsessionrc",
    ".pam_environment",
    ".config/fish",
    ".config/autostart",
    // systemd-tmpfiles --user runs at login and may write any of the owner's files; Podman's
    // quadlets become user units; multiplexer and window manager configs run commands at their
    // start (red team 27 B3).
    ".config/user-tmpfiles.d",
    ".config/containers/systemd",
    ".config/tmux",
    ".config/plasma-workspace",
    ".config/i3",
    ".config/sway",
    ".config/hypr",
    ".config/openbox",
    ".config/systemd",
    ".config/environment.d",
    ".config/git",
    ".gitconfig",
    ".local/bin",
    ".local/share/systemd",
    ".cargo/config",
    ".cargo/config.toml",
    ".cargo/bin",
    ".npm-global",
    ".npmrc",
    ".yarnrc",
    ".pip",
    ".config/pip",
    ".pythonrc",
    ".vimrc",
    ".vim",
    ".config/nvim",
    ".emacs",
    ".emacs.d",
    ".tmux.conf",
    ".screenrc",
    // Read at every start of their tool (red team 30 N4): zsh frameworks' trees, Gradle's
    // init scripts, Jupyter's and sbt's configuration and global plugins, Maven's user
    // extensions, Jupyter kernel definitions (their `argv` runs), and plugins and extensions
    // that tmux, GNOME Shell, Neovim, VS Code and its server load at start. Caches and
    // package stores (`~/.cargo/registry`, `~/.npm`, `~/.gradle/caches`) are not start-up
    // places: walking them would fail closed on their size.
    ".oh-my-zsh",
    ".zsh",
    ".zshrc.d",
    // xmonad compiles and runs `xmonad.hs` at login; Hammerspoon runs `init.lua` at start.
    ".xmonad",
    ".hammerspoon",
    ".gradle/init.d",
    ".gradle/init.gradle",
    ".gradle/init.gradle.kts",
    ".jupyter",
    ".local/share/jupyter/kernels",
    ".sbt/1.0",
    ".m2/extensions.xml",
    ".tmux/plugins",
    ".local/share/gnome-shell/extensions",
    ".local/share/nvim/site",
    ".vscode/extensions",
    ".vscode-server/extensions",
    ".ssh",
    ".gnupg",
    "bin",
    "Library/LaunchAgents",
];

/// What sessions never write although they may read it ([`write_protected`]).
#[derive(Debug, Clone, Default)]
pub struct WriteProtected {
    /// Where the gateway and Claude Code are installed ([`install_locations`]) and the
    /// [`AUTORUN`] entries of every account's home as named: never written.
    pub paths: Vec<PathBuf>,
    /// The homes whose start-up places [`Self::derived`] comes from (derived again when they
    /// change; none: a fixed set).
    pub homes: Vec<PathBuf>,
    /// What those start-up places are under their real paths and the links in them
    /// ([`autorun::startup_links`]): the links' targets are an auto-run class of their own
    /// ([`autorun::AutorunClass::StartupLinks`]), whose refusal names the link.
    pub derived: autorun::startup_links::Derived,
}

impl From<Vec<PathBuf>> for WriteProtected {
    fn from(paths: Vec<PathBuf>) -> Self {
        Self {
            paths,
            ..Self::default()
        }
    }
}

/// What sessions never write although they may read it: where the gateway and Claude Code are
/// installed ([`install_locations`]), the [`AUTORUN`] entries of every account's home, and what
/// the links in those homes' start-up places name ([`autorun::startup_links`]).
pub fn write_protected(exe: &Path, claude_bin: &Path, owner_home: &Path) -> WriteProtected {
    let mut paths = install_locations(exe, claude_bin);
    let mut homes = vec![owner_home.to_path_buf()];
    homes.extend(other_homes(owner_home));
    for home in &homes {
        paths.extend(AUTORUN.iter().map(|entry| home.join(entry)));
    }
    WriteProtected {
        paths,
        derived: autorun::startup_links::derive(&homes),
        homes,
    }
}

/// Why `root` (canonical) cannot be a `direct_write` root, if it cannot: the whole file system,
/// an account's home or a directory above one (its start-up files, keys and every project in
/// it), or a system directory whose files run as or for other programs.
pub fn unfit_write_root(root: &Path, owner_home: &Path) -> Option<&'static str> {
    // Under every path of it: a bind mount or mirror of HOME or of `~/.config` as the root
    // wrote the home's real start-up files (red team 47b B15).
    if is_hung_mount(root) {
        return Some(
            "is on a FUSE mount that does not answer (its daemon stopped or its remote gone); \
             start that mount again or choose another directory",
        );
    }
    // A hung alias here is one whose claimed source holds the root or lies in it (red team
    // 49: a stopped bindfs of an unrelated directory on `/etc/profile.d` had refused every
    // project as "a system directory").
    let (hung, answering): (Vec<PathBuf>, Vec<PathBuf>) = root_aliases(root)
        .into_iter()
        .partition(|alias| is_hung_mount(alias));
    if !hung.is_empty() {
        return Some(
            "is mirrored by a FUSE mount that does not answer (its daemon stopped), where its \
             files could show in any directory; unmount it (fusermount -u) or start it again",
        );
    }
    std::iter::once(root.to_path_buf())
        .chain(answering)
        .find_map(|path| unfit_write_root_at(&path, owner_home))
}

/// System directories: no write root is in one (their files run as or for other programs).
const SYSTEM_DIRS: &[&str] = &[
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/boot",
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var/lib",
    "/var/spool",
    "/var/run",
    "/System",
    "/Library",
    "/Applications",
    "/private/etc",
    "/private/var/db",
];

/// Whether `path` is in a system directory ([`SYSTEM_DIRS`]), where no write root is.
pub(crate) fn in_system_dir(path: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|dir| path.starts_with(dir))
}

/// [`unfit_write_root`] for one path of the root.
fn unfit_write_root_at(root: &Path, owner_home: &Path) -> Option<&'static str> {
    if root == Path::new("/") {
        return Some("is the whole file system; choose the project's own directory");
    }
    let mut homes = vec![owner_home.to_path_buf()];
    if let Ok(canonical) = crate::look::canonicalize(owner_home) {
        homes.push(canonical);
    }
    homes.extend(other_homes(owner_home));
    if homes.iter().any(|home| home.starts_with(root)) {
        return Some(
            "is a home directory or contains one (start-up files, keys, other projects; the \
             $HOME any gateway of the account was started with counts as one, while its state \
             dir exists); choose the project's own directory",
        );
    }
    // A home's hidden directories hold tools' state and code (`~/.local`, `~/.pyenv`,
    // `~/.cargo`...), where a planted file (a Python `.pth`, a shim) runs later, unconfined.
    let in_hidden_dir = homes.iter().any(|home| {
        root.strip_prefix(home)
            .ok()
            .and_then(|rest| rest.components().next())
            .is_some_and(|first| first.as_os_str().as_encoded_bytes().starts_with(b"."))
    });
    if in_hidden_dir {
        return Some(
            "is inside a hidden directory of a home (tools' state and code that runs later); \
             choose the project's own directory",
        );
    }
    if in_system_dir(root) {
        return Some("is a system directory; choose the project's own directory");
    }
    if ["/tmp", "/var/tmp", "/dev/shm"]
        .iter()
        .any(|shared| root == Path::new(shared))
    {
        return Some("is a directory shared by every account; choose the project's own directory");
    }
    // Root's override of permissions is not the session's: a root gateway writes only in
    // directories of its own account (another account's files, state or gateway stay theirs).
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::geteuid().as_raw();
    if crate::look::symlink_metadata(root).is_ok_and(|meta| meta.uid() != uid) {
        return Some(
            "belongs to another account; a session writes only in directories of the account \
             the gateway runs as",
        );
    }
    None
}

/// Where `exe` (the gateway) and `claude_bin` (Claude Code) are installed: each as given, its
/// real file, and its package directory (the gateway's: the directory holding the real file;
/// Claude Code's: the nearest ancestor of the real file with a `package.json`, else its
/// directory). Sessions never write there.
pub fn install_locations(exe: &Path, claude_bin: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (program, npm) in [(exe, false), (claude_bin, true)] {
        if !program.is_absolute() {
            continue;
        }
        out.push(program.to_path_buf());
        let Ok(real) = crate::look::canonicalize(program) else {
            continue;
        };
        let package = if npm {
            real.ancestors()
                .skip(1)
                .take(6)
                .find(|dir| crate::look::is_file(dir.join("package.json")))
                .or_else(|| real.parent())
                .map(Path::to_path_buf)
        } else {
            real.parent().map(Path::to_path_buf)
        };
        if npm {
            // Also the `node_modules` holding the package (a new sibling package or a planted
            // dependency would run inside Claude Code) and the directory of the link the
            // gateway starts (`node_modules/.bin`, `~/.npm-global/bin`).
            if let Some(modules) = real.ancestors().find(|dir| dir.ends_with("node_modules")) {
                out.push(modules.to_path_buf());
            }
            if let Some(dir) = program.parent() {
                out.push(dir.to_path_buf());
            }
        }
        out.push(real);
        // Never a whole system directory root: `/`, or a top-level one like `/usr`.
        if let Some(package) = package.filter(|p| p.components().count() > 2) {
            out.push(package);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// One row of the catalogue as `gatewayctl doctor` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub category: &'static str,
    pub path: PathBuf,
    pub present: bool,
}

/// The catalogue for `home`, with whether each entry exists here, plus the host keys present.
pub fn rows(home: &Path) -> Vec<Row> {
    let mut rows: Vec<Row> = CATALOGUE
        .iter()
        .zip(catalogue_paths(home))
        .map(|(e, path)| Row {
            category: e.category.as_str(),
            present: crate::look::symlink_metadata(&path).is_ok(),
            path,
        })
        .collect();
    for dir in SSH_HOST_KEY_DIRS {
        rows.push(Row {
            category: SystemPrivateKeys.as_str(),
            path: Path::new(dir).join("ssh_host_*  (not *.pub)"),
            present: !host_key_files().is_empty(),
        });
    }
    rows
}

pub mod autorun;
pub mod instances;
mod mounts;
pub mod pseudo_fs;
pub use mounts::{
    MountLine, aliases_in, found_hung_elsewhere, hung_mounts, is_hung_mount,
    judge_fuse_mounts_once, mount_aliases, parse_mountinfo, read_mount_table, root_aliases,
};
pub mod runtime_area;
mod set;

pub use runtime_area::{
    AreaError, VerifiedArea, command_runtime_area, establish_runtime_area, legacy_runtime_area,
    orphan_areas, recorded_areas, replace_runtime_area, runtime_area_names, session_dir_name,
    verified_area, verify_area,
};
pub(crate) use set::other_gateway_entries;
pub use set::{ProtectedSet, protected_set};

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
