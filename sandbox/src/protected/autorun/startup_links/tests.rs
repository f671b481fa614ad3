//! Unit tests of the start-up links (red team 28 B3, B4): every form of link a home's start-up
//! places hold (chains, `..` after a missing part, a dangling or linked `~/.config` with
//! missing levels below it), links made after the policy was built, any dot link of the home
//! and any link under `~/.config`, and the bound of the walk.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::path_policy::{PathPolicy, WriteProtection};
use crate::protected::write_protected;

struct Home {
    _dir: tempfile::TempDir,
    tmp: PathBuf,
    home: PathBuf,
    project: PathBuf,
}

fn home() -> Home {
    let dir = tempfile::tempdir().unwrap();
    let tmp = std::fs::canonicalize(dir.path()).unwrap();
    let (home, project) = (tmp.join("home"), tmp.join("project"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&project).unwrap();
    Home {
        _dir: dir,
        tmp,
        home,
        project,
    }
}

impl Home {
    fn policy(&self) -> PathPolicy {
        let got = write_protected(
            Path::new("/nonexistent/gateway"),
            Path::new("/nonexistent/claude"),
            &self.home,
        );
        PathPolicy::new(self.home.clone(), self.tmp.join("state"), vec![]).with_write_protected(got)
    }

    /// `rel` (home-relative, its directories made) holding `text`.
    fn write(&self, rel: &str, text: String) {
        let at = self.home.join(rel);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, text).unwrap();
    }

    /// `link` (home-relative, its directories made) pointing at `target`.
    fn link(&self, link: &str, target: impl AsRef<Path>) {
        let at = self.home.join(link);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        symlink(target, at).unwrap();
    }
}

fn named(link: &str) -> Option<WriteProtection> {
    Some(WriteProtection::StartupLinkTarget {
        link: format!("~/{link}"),
    })
}

const STARTUP: Option<WriteProtection> = Some(WriteProtection::InstallLocation);

#[test]
fn chains_and_dot_dot_after_a_missing_part_are_resolved() {
    let h = home();
    let p = &h.project;
    // autostart/chain.desktop -> ~/mid -> project/build/chain.desktop (dangling at the end).
    symlink(p.join("build/chain.desktop"), h.home.join("mid")).unwrap();
    h.link(".config/autostart/chain.desktop", h.home.join("mid"));
    // A start-up file through a chain stays a start-up file.
    symlink(p.join("aliases"), h.home.join("mid3")).unwrap();
    h.link(".bash_aliases", "mid3");
    // `..` after a missing component cancels it.
    h.link(".config/autostart/dd.desktop", p.join("gen/../dd.desktop"));
    // Relative, through a linked directory, then `..`.
    symlink(p.join("deep/er"), h.home.join("dirlink")).unwrap();
    h.link(
        ".config/autostart/rel.desktop",
        "../../dirlink/../up.desktop",
    );
    // Relative, two missing levels cancelled by two `..`.
    let two = "../../../../project/gen2/sub/../../dd2.service";
    h.link(".config/systemd/user/dd2.service", two);
    let policy = h.policy();
    let dd2 = named(".config/systemd/user/dd2.service");
    assert_eq!(policy.write_protection(&p.join("dd2.service")), dd2);
    assert_eq!(policy.write_protection(&p.join("gen2/sub/keep")), None);
    let chain = named(".config/autostart/chain.desktop");
    assert_eq!(
        policy.write_protection(&p.join("build/chain.desktop")),
        chain
    );
    assert_eq!(policy.write_protection(&p.join("aliases")), STARTUP);
    let dd = named(".config/autostart/dd.desktop");
    assert_eq!(policy.write_protection(&p.join("dd.desktop")), dd);
    assert_eq!(policy.write_protection(&p.join("gen/keep")), None);
    // `dirlink/..` is `project/deep`, as the kernel resolves it.
    let rel = named(".config/autostart/rel.desktop");
    assert_eq!(policy.write_protection(&p.join("deep/up.desktop")), rel);
    assert_eq!(policy.write_protection(&p.join("ordinary.rs")), None);
}

#[test]
fn a_dangling_or_linked_config_dir_keeps_its_places_at_every_depth() {
    let h = home();
    // Dangling: ~/.config -> ~/dot/config (nothing there yet).
    symlink(h.home.join("dot/config"), h.home.join(".config")).unwrap();
    // Linked, existing but empty: ~/.local/share/systemd two levels missing below.
    std::fs::create_dir_all(h.tmp.join("share")).unwrap();
    std::fs::create_dir_all(h.home.join(".local")).unwrap();
    symlink(h.tmp.join("share"), h.home.join(".local/share")).unwrap();
    let policy = h.policy();
    for file in [
        "dot/config/autostart/x.desktop",
        "dot/config/systemd/user/x.service",
        "dot/config/environment.d/x.conf",
        "dot/config/containers/systemd/x.container",
        "dot/config/containers/systemd/deeper/x.container",
    ] {
        assert_eq!(
            policy.write_protection(&h.home.join(file)),
            STARTUP,
            "{file}"
        );
    }
    let unit = h.tmp.join("share/systemd/user/x.service");
    assert_eq!(policy.write_protection(&unit), STARTUP);
    assert_eq!(policy.write_protection(&h.home.join("dot/notes.txt")), None);
    // `~/.config` itself is a dot link of the home: all of its target is the owner's
    // configuration, also what no start-up place names (`kitty/kitty.conf`).
    let kitty = h.home.join("dot/config/kitty/kitty.conf");
    assert_eq!(policy.write_protection(&kitty), named(".config"));
}

#[test]
fn a_link_made_after_the_policy_is_seen_at_the_next_refresh() {
    let h = home();
    let p = &h.project;
    std::fs::create_dir_all(h.home.join(".config/autostart")).unwrap();
    std::fs::create_dir_all(h.home.join("dot")).unwrap();
    let policy = h.policy();
    let late = p.join("late.desktop");
    assert_eq!(policy.write_protection(&late), None);
    h.link(".config/autostart/late.desktop", &late);
    h.link(".gdbinit", p.join("gdbinit"));
    h.link(".config/kitty/kitty.conf", p.join("kitty.conf"));
    // Not before the refresh: the policy is what it was built from.
    assert_eq!(policy.write_protection(&late), None);
    // Every clone shares the refresh (the executor holds one, the broker another).
    let clone = policy.clone();
    policy.refresh_write_protected();
    let autostart = named(".config/autostart/late.desktop");
    assert_eq!(clone.write_protection(&late), autostart);
    assert_eq!(
        clone.write_protection(&p.join("gdbinit")),
        named(".gdbinit")
    );
    let kitty = named(".config/kitty/kitty.conf");
    assert_eq!(clone.write_protection(&p.join("kitty.conf")), kitty);
    // A late `~/.config` link: its start-up places count under the target's name.
    std::fs::rename(h.home.join(".config"), h.home.join("old-config")).unwrap();
    symlink(h.home.join("dot/config"), h.home.join(".config")).unwrap();
    policy.refresh_write_protected();
    let unit = h.home.join("dot/config/systemd/user/x.service");
    assert_eq!(policy.write_protection(&unit), STARTUP);
    // A removed link protects nothing any more.
    std::fs::remove_file(h.home.join(".gdbinit")).unwrap();
    policy.refresh_write_protected();
    assert_eq!(policy.write_protection(&p.join("gdbinit")), None);
}

/// Red team 28 B4's names, and others: any dot link of the home, any link under `~/.config`.
#[test]
fn any_dot_link_of_the_home_and_any_link_under_config_protects_its_target() {
    let h = home();
    let p = &h.project;
    let dot_files = [
        ".gdbinit",
        ".lldbinit",
        ".pdbrc",
        ".irbrc",
        ".pryrc",
        ".ghci",
        ".Rprofile",
        ".psqlrc",
        ".sqliterc",
        ".hgrc",
        ".direnvrc",
        ".huskyrc",
        ".wezterm.lua",
        ".mailcap",
        ".xbindkeysrc",
        ".someday-new-tool-rc",
    ];
    for name in dot_files {
        h.link(name, p.join(name.trim_start_matches('.')));
    }
    let config = [
        "direnv/direnvrc",
        "husky/init.sh",
        "starship.toml",
        "wezterm",
        "kitty",
        "alacritty",
        "zellij",
        "lazygit",
        "helix/languages.toml",
        "zed",
        "Code/User/settings.json",
        "vim/vimrc",
        "emacs/init.el",
        "doom",
        "nushell",
        "xonsh",
        "elvish",
        "powershell",
        "hg/hgrc",
        "jj",
        "yazi",
        "mpv/scripts",
        "mimeapps.list",
        "labwc",
        "niri",
        "river",
        "qtile",
        "awesome",
        "bspwm",
        "herbstluftwm",
        "lxsession",
        "a/b/c/d/e/f/g/deep.conf",
    ];
    for (i, rel) in config.iter().enumerate() {
        h.link(&format!(".config/{rel}"), p.join(format!("c{i}")));
    }
    // Not the owner's configuration: a plain (not dot) entry of the home, and a link in
    // `~/.local/share` outside its start-up places.
    h.link("proj-shortcut", p.join("shortcut"));
    h.link(".local/share/recently-used/x", p.join("recent"));
    // A link to the home or above it names everything, no configuration: not taken.
    h.link(".config/app/home", &h.home);
    h.link(".config/app/top", "/");
    let policy = h.policy();
    for name in dot_files {
        let target = p.join(name.trim_start_matches('.'));
        assert_eq!(policy.write_protection(&target), named(name), "{name}");
    }
    for (i, rel) in config.iter().enumerate() {
        let target = p.join(format!("c{i}/x"));
        let link = named(&format!(".config/{rel}"));
        assert_eq!(policy.write_protection(&target), link, "{rel}");
    }
    assert_eq!(policy.write_protection(&p.join("shortcut")), None);
    assert_eq!(policy.write_protection(&p.join("recent")), None);
    assert_eq!(policy.write_protection(&h.home.join("work/a.rs")), None);
}

#[test]
fn a_config_tree_deeper_than_the_bound_fails_closed_until_the_owner_opts_in() {
    let h = home();
    let mut deep = h.home.join(".config");
    for level in 0..=super::MAX_CONFIG_DEPTH + 1 {
        deep.push(format!("l{level}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    // Caches are not looked in: as deep, no refusal.
    let cache = h
        .home
        .join(".config/Code/Cache")
        .join(deep.strip_prefix(&h.home).unwrap());
    std::fs::create_dir_all(cache).unwrap();
    // (Electron's data directory: it holds `Preferences`.)
    std::fs::write(h.home.join(".config/Code/Preferences"), "{}").unwrap();
    let policy = h.policy();
    let unchecked = Some(WriteProtection::StartupLinksUnchecked {
        place: "~/.config".to_string(),
    });
    assert_eq!(policy.write_protection(&h.project.join("a.rs")), unchecked);
    // A write's refusal says why and the ways out.
    let refusal = crate::write_path::WriteRoot::open(&policy, &h.project).unwrap_err();
    assert_eq!(refusal.code(), common::outcome::OutcomeCode::NotPermitted);
    let message = refusal.to_string();
    assert!(
        message.contains("could not be checked against the links in ~/.config"),
        "{message}"
    );
    assert!(
        message.contains("CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES=startup_links"),
        "{message}"
    );
    let allowed = crate::protected::autorun::AutorunAllowed::parse("startup_links").unwrap();
    let opened = policy.clone().with_autorun_allowed(allowed);
    assert_eq!(opened.write_protection(&h.project.join("a.rs")), None);
    // Only the owner's home fails closed: another account's links protect only its files.
    let other = super::derive(&[h.tmp.join("elsewhere"), h.home.clone()]);
    assert_eq!(other.over_bound, None);
    // Within the bound again: derived again at the next refresh, nothing refused.
    std::fs::remove_dir_all(h.home.join(".config/l0")).unwrap();
    policy.refresh_write_protected();
    assert_eq!(policy.write_protection(&h.project.join("a.rs")), None);
}

/// A chain through a link outside the home: retargeting that link is seen at the next refresh
/// (its directory is watched too).
#[test]
fn a_chain_retargeted_outside_the_home_is_followed_again() {
    let h = home();
    let elsewhere = h.tmp.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    symlink(h.project.join("first.desktop"), elsewhere.join("mid")).unwrap();
    h.link(".config/autostart/x.desktop", elsewhere.join("mid"));
    let policy = h.policy();
    let x = named(".config/autostart/x.desktop");
    assert_eq!(policy.write_protection(&h.project.join("first.desktop")), x);
    std::fs::remove_file(elsewhere.join("mid")).unwrap();
    symlink(h.project.join("second.desktop"), elsewhere.join("mid")).unwrap();
    policy.refresh_write_protected();
    assert_eq!(
        policy.write_protection(&h.project.join("second.desktop")),
        x
    );
    assert_eq!(
        policy.write_protection(&h.project.join("first.desktop")),
        None
    );
}

/// Red team 30 N1: a start-up directory that is a link (`~/.config/tmux -> ~/dot/tmux`,
/// `~/.local/bin -> ~/dot/bin`) is walked into, its links seen, cycles walked once, and a
/// link made there later seen at the next refresh.
#[test]
fn links_inside_a_linked_startup_directory_protect_their_targets() {
    let h = home();
    let p = &h.project;
    let dot = h.home.join("dot");
    let linked = [
        (".config/tmux", "tmux", "tmux.conf"),
        (".config/autostart", "autostart", "x.desktop"),
        (".config/systemd/user", "user", "x.service"),
        (".config/nvim", "nvim", "init.lua"),
        (".config/app/deeper", "deeper", "app.conf"),
        (".local/bin", "lbin", "tool"),
        ("bin", "bin", "tool2"),
        (".vim", "vim", "vimrc"),
    ];
    for (place, dir, file) in linked {
        std::fs::create_dir_all(dot.join(dir)).unwrap();
        symlink(p.join(file), dot.join(dir).join(file)).unwrap();
        h.link(place, dot.join(dir));
    }
    // Relative, from the linked directory's real place; a chain of two linked directories.
    symlink(
        "../../../project/y.desktop",
        dot.join("autostart/y.desktop"),
    )
    .unwrap();
    std::fs::create_dir_all(dot.join("inner")).unwrap();
    symlink(dot.join("inner"), dot.join("tmux/plugins")).unwrap();
    symlink(p.join("inner.tmux"), dot.join("inner/inner.tmux")).unwrap();
    // A cycle and a link to the home are walked once / not at all: no bound reached.
    symlink(dot.join("tmux"), dot.join("tmux/again")).unwrap();
    symlink(&h.home, dot.join("nvim/home")).unwrap();
    let policy = h.policy();
    for (place, dir, file) in linked {
        // Named by the link in the linked directory, or by the config name the tool reads
        // through it (`~/.config/tmux/tmux.conf`): either is the owner's start-up file.
        let got = policy.write_protection(&p.join(file));
        assert!(
            matches!(&got, Some(WriteProtection::StartupLinkTarget { link })
                if *link == format!("~/dot/{dir}/{file}") || link.ends_with(&format!("/{file}"))),
            "{place}: {got:?}"
        );
    }
    let y = policy.write_protection(&p.join("y.desktop"));
    assert!(
        matches!(&y, Some(WriteProtection::StartupLinkTarget { link }) if link.ends_with("autostart/y.desktop")),
        "{y:?}"
    );
    let inner = Some(WriteProtection::StartupLinkTarget {
        link: "~/dot/inner/inner.tmux".to_string(),
    });
    assert_eq!(policy.write_protection(&p.join("inner.tmux")), inner);
    assert_eq!(policy.write_protection(&p.join("ordinary.rs")), None);
    // A link made later in the linked-to directory.
    symlink(p.join("late.conf"), dot.join("tmux/late.conf")).unwrap();
    policy.refresh_write_protected();
    let late = Some(WriteProtection::StartupLinkTarget {
        link: "~/dot/tmux/late.conf".to_string(),
    });
    assert_eq!(policy.write_protection(&p.join("late.conf")), late);
}

/// Red team 30 N4: start-up places of tools beyond the shells' (stow links file by file), and
/// the user site-packages' `.pth` files; caches and package stores are not walked.
#[test]
fn links_in_the_tools_startup_places_and_site_packages_protect_their_targets() {
    let h = home();
    let p = &h.project;
    let places = [
        ".oh-my-zsh/custom/x.zsh",
        ".gradle/init.d/x.gradle",
        ".jupyter/jupyter_server_config.py",
        ".sbt/1.0/global.sbt",
        ".tmux/plugins/x",
        ".vscode/extensions/x",
        ".local/share/gnome-shell/extensions/x",
        ".local/share/nvim/site/pack/dev/start/x",
        ".local/share/jupyter/kernels/x",
        ".ipython/profile_default/startup/x.py",
        ".local/lib/python3.11/site-packages/x.pth",
        ".local/lib/python3.12/site-packages/usercustomize.py",
    ];
    for (i, place) in places.iter().enumerate() {
        h.link(place, p.join(format!("t{i}")));
    }
    // Not start-up links: a package linked into site-packages (it runs when imported, not
    // at start), a link in a cache, a link deep inside an installed extension (its own).
    h.link(".local/lib/python3.11/site-packages/pkg", p.join("pkg"));
    h.link(".cargo/registry/src/x", p.join("crate"));
    h.link(".vscode/extensions/y/node_modules/z/dep", p.join("dep"));
    let policy = h.policy();
    for (i, place) in places.iter().enumerate() {
        let target = p.join(format!("t{i}"));
        assert_eq!(policy.write_protection(&target), named(place), "{place}");
    }
    for free in ["pkg", "crate", "dep"] {
        assert_eq!(policy.write_protection(&p.join(free)), None, "{free}");
    }
    // A `.pth` link made later is seen at the next refresh.
    h.link(
        ".local/lib/python3.11/site-packages/late.pth",
        p.join("late"),
    );
    policy.refresh_write_protected();
    let late = named(".local/lib/python3.11/site-packages/late.pth");
    assert_eq!(policy.write_protection(&p.join("late")), late);
}

/// Red team 30 N5: every start-up tree fails closed past the bound (not only `~/.config`),
/// and `~/.config`'s credential stores and `logs` directories are looked in.
#[test]
fn every_startup_tree_fails_closed_past_the_bound_and_config_skips_only_caches() {
    let h = home();
    let p = &h.project;
    h.link(".config/gh/config.yml", p.join("gh.yml"));
    h.link(".config/nvim/lua/logs/init.lua", p.join("init.lua"));
    // A `Cache` directory outside Electron's data is the owner's too.
    h.link(".config/tool/Cache/hook.sh", p.join("hook.sh"));
    let policy = h.policy();
    let gh = named(".config/gh/config.yml");
    assert_eq!(policy.write_protection(&p.join("gh.yml")), gh);
    let logs = named(".config/nvim/lua/logs/init.lua");
    assert_eq!(policy.write_protection(&p.join("init.lua")), logs);
    let cache = named(".config/tool/Cache/hook.sh");
    assert_eq!(policy.write_protection(&p.join("hook.sh")), cache);
    assert_eq!(policy.write_protection(&p.join("a.rs")), None);
    let mut deep = h.home.join(".vim");
    for level in 0..=super::MAX_CONFIG_DEPTH + 1 {
        deep.push(format!("l{level}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    policy.refresh_write_protected();
    let unchecked = Some(WriteProtection::StartupLinksUnchecked {
        place: "~/.vim".to_string(),
    });
    assert_eq!(policy.write_protection(&p.join("a.rs")), unchecked);
    // Package stores are walked only as deep as the owner's links sit, by design, and a
    // plugin's `.git` not at all: as deep, no refusal.
    std::fs::remove_dir_all(h.home.join(".vim/l0")).unwrap();
    let rel = deep.strip_prefix(h.home.join(".vim")).unwrap();
    for store in [
        ".vscode/extensions",
        ".npm-global/lib",
        ".vim/plugged/x/.git",
        ".config/google-chrome/Default",
    ] {
        std::fs::create_dir_all(h.home.join(store).join(rel)).unwrap();
    }
    h.link(".npm-global/lib/node_modules/@me/tool", p.join("tool"));
    policy.refresh_write_protected();
    assert_eq!(policy.write_protection(&p.join("a.rs")), None);
    let tool = named(".npm-global/lib/node_modules/@me/tool");
    assert_eq!(policy.write_protection(&p.join("tool/cli.js")), tool);
}

/// Red team 30 N6: `/proc/self/root/…` and `/proc/thread-self/root/…` are `/…`; any other
/// `/proc` or `/dev/fd` target refuses every write, naming the link.
#[test]
fn proc_self_root_targets_resolve_and_other_proc_targets_fail_closed() {
    let h = home();
    let p = &h.project;
    let via =
        |prefix: &str, path: &Path| PathBuf::from(prefix).join(path.strip_prefix("/").unwrap());
    // `~/.config -> /proc/self/root/<home>/dot/config`, its links under the real path.
    symlink(
        via("/proc/self/root", &h.home.join("dot/config")),
        h.home.join(".config"),
    )
    .unwrap();
    h.link(
        "dot/config/autostart/a.desktop",
        via("/proc/self/root", &p.join("a.desktop")),
    );
    let b = via("/proc/thread-self/root", &p.join("gen/b.desktop"));
    h.link("dot/config/autostart/b.desktop", b);
    let policy = h.policy();
    let got = policy.write_protection(&p.join("a.desktop"));
    assert!(
        matches!(&got, Some(WriteProtection::StartupLinkTarget { link }) if link.ends_with("autostart/a.desktop")),
        "{got:?}"
    );
    let b = policy.write_protection(&p.join("gen/b.desktop"));
    assert!(
        matches!(&b, Some(WriteProtection::StartupLinkTarget { link }) if link.ends_with("autostart/b.desktop")),
        "{b:?}"
    );
    let unit = h.home.join("dot/config/systemd/user/x.service");
    assert_eq!(policy.write_protection(&unit), STARTUP);
    assert_eq!(policy.write_protection(&p.join("a.rs")), None);
    for (name, target) in [
        (".pdbrc", "/proc/1/root/etc/pdbrc"),
        (".psqlrc", "/dev/fd/7"),
    ] {
        h.link(name, target);
        policy.refresh_write_protected();
        let unknowable = Some(WriteProtection::StartupLinkUnknowable {
            link: format!("~/{name}"),
        });
        assert_eq!(
            policy.write_protection(&p.join("a.rs")),
            unknowable,
            "{name}"
        );
        let refusal = crate::write_path::WriteRoot::open(&policy, p).unwrap_err();
        let message = refusal.to_string();
        assert!(
            message.contains(&format!("start-up link ~/{name}")),
            "{message}"
        );
        std::fs::remove_file(h.home.join(name)).unwrap();
    }
    policy.refresh_write_protected();
    assert_eq!(policy.write_protection(&p.join("a.rs")), None);
}

fn named_in(file: &str) -> Option<WriteProtection> {
    Some(WriteProtection::StartupNamed {
        file: format!("~/{file}"),
    })
}

/// Red team 43a B9: what the home's tool configuration files name by path — ssh's
/// `ProxyCommand` and `Include` (and what the included file names in turn), vim's `source`,
/// nvim's `dofile`, tmux's `run-shell`, npm's `node-options`, irb's `load` — is refused naming
/// the file that names it; a line added while the policy is live is seen by the next write. The
/// project itself, a directory a config names, data beside the named files and a relative name
/// stay writable.
#[test]
fn what_tool_configs_name_by_path_is_refused_naming_the_config() {
    let h = home();
    let p = h.project.to_string_lossy().into_owned();
    let write = |rel: &str, text: String| h.write(rel, text);
    std::fs::create_dir_all(h.project.join("tools/ssh.d")).unwrap();
    std::fs::write(h.project.join("tools/ssh.d/a.conf"), "").unwrap();
    // A pattern outside an Include names nothing (a socket, a matcher).
    std::fs::write(h.project.join("cm-me@host"), "").unwrap();
    std::fs::write(h.project.join("README.md"), "").unwrap();
    std::fs::write(
        h.project.join("tools/ssh.conf"),
        format!("Host x\n  LocalCommand {p}/tools/local.sh\n"),
    )
    .unwrap();
    write(
        ".ssh/config",
        format!(
            "Host *\n  ProxyCommand {p}/tools/proxy.sh %h %p\nInclude {p}/tools/ssh.conf\n\
             Include {p}/tools/ssh.d/*.conf\nInclude ../../project/tools/rel.conf\n\
             ControlPath {p}/cm-%r@%h:%p\n"
        ),
    );
    write(
        ".vimrc",
        format!("source {p}/tools/vimrc.vim\nset path+={p}\n"),
    );
    write(
        ".config/nvim/init.lua",
        format!("dofile('{p}/tools/init2.lua')\n"),
    );
    write(".tmux.conf", format!("run-shell '{p}/tools/tmux-x.sh'\n"));
    write(
        ".npmrc",
        format!("node-options=--require {p}/tools/npmreq.js\n"),
    );
    write(".irbrc", "load '~/../project/tools/irb.rb'\n".to_string());
    let policy = h.policy();
    let refused = |rel: &str| policy.write_protection(&h.project.join(rel));
    for (rel, config) in [
        ("tools/proxy.sh", ".ssh/config"),
        ("tools/ssh.conf", ".ssh/config"),
        ("tools/local.sh", ".ssh/config"),
        ("tools/ssh.d/a.conf", ".ssh/config"),
        ("tools/rel.conf", ".ssh/config"),
        ("tools/vimrc.vim", ".vimrc"),
        ("tools/init2.lua", ".config/nvim/init.lua"),
        ("tools/tmux-x.sh", ".tmux.conf"),
        ("tools/npmreq.js", ".npmrc"),
        ("tools/irb.rb", ".irbrc"),
    ] {
        assert_eq!(refused(rel), named_in(config), "{rel}");
    }
    // A file made later where a pattern looks.
    assert_eq!(refused("tools/ssh.d/new.conf"), named_in(".ssh/config"));
    for rel in [
        "src/app.py",
        "tools/other.sh",
        "README.md",
        "tools/x/y.sh",
        "cm-me@host",
    ] {
        assert_eq!(refused(rel), None, "{rel}");
    }
    // Added while the policy is live.
    write(".tmux.conf", format!("run-shell '{p}/tools/later.sh'\n"));
    policy.refresh_write_protected();
    assert_eq!(refused("tools/later.sh"), named_in(".tmux.conf"));
    assert_eq!(refused("tools/tmux-x.sh"), None, "no longer named");
}

/// Red team 44a C1-B2, B3, B5: the files of per-user config dirs (a user unit's `ExecStart=`, an
/// autostart entry's `Exec=`, a fish function) are read like the config files; a name given
/// without an ending names what a loader adds (`--require /p/x` loads `/p/x.js`); a config
/// naming more paths than are read fails closed.
#[test]
fn config_dirs_endings_and_the_bound() {
    let h = home();
    let p = h.project.to_string_lossy().into_owned();
    let write = |rel: &str, text: String| h.write(rel, text);
    write(
        ".config/systemd/user/x.service",
        format!("[Service]\nExecStart={p}/tools/svc.sh\n"),
    );
    write(
        ".config/autostart/x.desktop",
        format!("[Desktop Entry]\nExec={p}/tools/auto.sh\n"),
    );
    write(
        ".config/fish/functions/deploy.fish",
        format!("function deploy\n  {p}/tools/deploy.fish.sh\nend\n"),
    );
    write(
        ".npmrc",
        format!("node-options=--require {p}/tools/npmreq\n"),
    );
    let policy = h.policy();
    let refused = |rel: &str| policy.write_protection(&h.project.join(rel));
    for (rel, config) in [
        ("tools/svc.sh", ".config/systemd/user/x.service"),
        ("tools/auto.sh", ".config/autostart/x.desktop"),
        ("tools/deploy.fish.sh", ".config/fish/functions/deploy.fish"),
        ("tools/npmreq", ".npmrc"),
        ("tools/npmreq.js", ".npmrc"),
    ] {
        assert_eq!(refused(rel), named_in(config), "{rel}");
    }
    assert_eq!(refused("tools/npmreq.txt"), None);
    // Past the bound: every write is refused, naming the config.
    let many: String = (0..5000)
        .map(|n| format!("IdentityFile /k/{n}\n"))
        .collect();
    write(".ssh/config", many);
    policy.refresh_write_protected();
    assert_eq!(
        refused("src/main.rs"),
        Some(WriteProtection::StartupLinksUnchecked {
            place: "~/.ssh/config".to_string()
        })
    );
}

/// Red team 48 F5: past 64 files of an `Include` pattern (or 128 files a home) the reader
/// skipped the rest in the file system's order, and what they named stayed writable. Now 70
/// included files' targets are all refused, and a pattern or directory holding more files than
/// are read fails closed, naming the config or the directory.
#[test]
fn many_included_files_are_all_read_and_past_the_bound_fail_closed() {
    let h = home();
    let p = h.project.to_string_lossy().into_owned();
    h.write(".ssh/config", format!("Include {p}/ssh.d/*.conf\n"));
    std::fs::create_dir_all(h.project.join("ssh.d")).unwrap();
    for n in 0..70 {
        std::fs::write(
            h.project.join(format!("ssh.d/{n}.conf")),
            format!("Host h{n}\n  ProxyCommand {p}/bin/proxy{n}.sh %h\n"),
        )
        .unwrap();
    }
    let policy = h.policy();
    let refused = |rel: &str| policy.write_protection(&h.project.join(rel));
    for n in 0..70 {
        assert_eq!(
            refused(&format!("bin/proxy{n}.sh")),
            named_in(".ssh/config"),
            "{n}"
        );
    }
    assert_eq!(refused("src/main.rs"), None);
    for n in 70..1100 {
        std::fs::write(h.project.join(format!("ssh.d/{n}.conf")), "").unwrap();
    }
    policy.refresh_write_protected();
    let unchecked = |place: &str| {
        Some(WriteProtection::StartupLinksUnchecked {
            place: place.to_string(),
        })
    };
    assert_eq!(refused("src/main.rs"), unchecked("~/.ssh/config"));
    // A per-user config dir (desktop entries) holding more files than are read.
    let h = home();
    for n in 0..1100 {
        h.write(
            &format!(".local/share/applications/{n}.desktop"),
            String::new(),
        );
    }
    let policy = h.policy();
    assert_eq!(
        policy.write_protection(&h.project.join("src/main.rs")),
        unchecked("~/.local/share/applications")
    );
}

/// Red team 48 F1, F2, F3: coding agents' user settings (a `~/.claude/settings.json` hook, a
/// Codex `notify`, an MCP server's command), other user configs naming programs, and the
/// system's schedulers and units (the system crontab, an account's own table, `/etc/cron.d`, a
/// system unit's `ExecStart=`) name project files that then run unconfined: refused, naming the
/// file. The system's root is a tmp dir on this test's thread.
#[test]
fn agents_settings_and_the_systems_schedulers_name_their_programs() {
    let h = home();
    let p = h.project.to_string_lossy().into_owned();
    let system = h.tmp.join("sys");
    let sys_write = |rel: &str, text: String| write_under(&system, rel, text);
    h.write(
        ".claude/settings.json",
        format!(
            r#"{{"hooks":{{"SessionStart":[{{"hooks":[{{"type":"command","command":"{p}/hooks/start.sh"}}]}}]}}}}"#
        ),
    );
    h.write(
        ".codex/config.toml",
        format!("notify = [\"{p}/bin/notify.py\"]\n"),
    );
    h.write(
        ".claude.json",
        format!(r#"{{"mcpServers":{{"x":{{"command":"{p}/bin/mcp.js"}}}}}}"#),
    );
    h.write(".tool-versions", format!("nodejs path:{p}/node\n"));
    sys_write("etc/crontab", format!("* * * * * root {p}/cron/every.sh\n"));
    sys_write(
        "var/spool/cron/crontabs/root",
        format!("@daily {p}/cron/mine.sh\n"),
    );
    sys_write("etc/cron.d/proj", format!("0 1 * * * root {p}/cron/d.sh\n"));
    sys_write(
        "etc/systemd/system/proj.service",
        format!("[Service]\nExecStart={p}/bin/serve\n"),
    );
    // Stowed from a dotfiles project: the config file itself is refused as the link's target.
    std::fs::create_dir_all(h.project.join("dot")).unwrap();
    std::fs::write(h.project.join("dot/gemini.json"), "{}").unwrap();
    h.link(".gemini/settings.json", h.project.join("dot/gemini.json"));
    super::super::TEST_SYSTEM_ROOT.with(|root| *root.borrow_mut() = Some(system.clone()));
    let policy = h.policy();
    let refused = |rel: &str| policy.write_protection(&h.project.join(rel));
    assert_eq!(refused("dot/gemini.json"), named(".gemini/settings.json"));
    for (rel, config) in [
        ("hooks/start.sh", ".claude/settings.json"),
        ("bin/notify.py", ".codex/config.toml"),
        ("bin/mcp.js", ".claude.json"),
        ("node", ".tool-versions"),
    ] {
        std::fs::create_dir_all(h.project.join(rel).parent().unwrap()).unwrap();
        assert_eq!(refused(rel), named_in(config), "{rel}");
    }
    for (rel, config) in [
        ("cron/every.sh", "etc/crontab"),
        ("cron/mine.sh", "var/spool/cron/crontabs/root"),
        ("cron/d.sh", "etc/cron.d/proj"),
        ("bin/serve", "etc/systemd/system/proj.service"),
    ] {
        let file = system.join(config).display().to_string();
        assert_eq!(
            refused(rel),
            Some(WriteProtection::StartupNamed { file }),
            "{rel}"
        );
    }
    assert_eq!(refused("src/main.rs"), None);
}

/// Red team 47a (availability): a program a tool config names (`ProxyCommand /bin/bash …`,
/// vim's `:!/usr/bin/git`) is not read as a config in turn: its bytes spelled thousands of
/// "paths" and, past the bound, every write of the owner was refused.
#[test]
fn programs_a_tool_config_names_are_not_read_as_configs() {
    let h = home();
    let bash = std::fs::canonicalize("/bin/bash").unwrap();
    std::fs::create_dir_all(h.home.join(".ssh")).unwrap();
    std::fs::write(
        h.home.join(".ssh/config"),
        format!("Host *\n  ProxyCommand {} -c 'nc %h %p'\n", bash.display()),
    )
    .unwrap();
    std::fs::write(
        h.home.join(".vimrc"),
        format!("nnoremap x :!{}\n", bash.display()),
    )
    .unwrap();
    let derived = super::derive(std::slice::from_ref(&h.home));
    // Only the program itself (and the endings a loader adds) is named: nothing its bytes
    // spell.
    let named: Vec<&PathBuf> = derived
        .links
        .iter()
        .filter(|l| {
            l.named
                && !l
                    .target
                    .to_string_lossy()
                    .starts_with(&*bash.to_string_lossy())
        })
        .map(|l| &l.target)
        .collect();
    assert!(named.is_empty(), "read as a config: {named:?}");
    assert_eq!(derived.over_bound, None);
    assert_eq!(h.policy().write_protection(&h.project.join("a.rs")), None);
}

/// Red team 47b B13: a tool config with a Latin-1 byte (an accented comment) is text: what it
/// names is still a start-up target (the binary check had read it as absent).
#[test]
fn a_latin1_tool_config_still_names_its_files() {
    let h = home();
    let plug = h.project.join("plug.vim");
    let mut text = b"\" vimrc de Jos\xe9\nsource ".to_vec();
    text.extend_from_slice(plug.to_string_lossy().as_bytes());
    text.push(b'\n');
    std::fs::write(h.home.join(".vimrc"), text).unwrap();
    let derived = super::derive(std::slice::from_ref(&h.home));
    assert!(
        derived.links.iter().any(|l| l.named && l.target == plug),
        "{:?}",
        derived.links
    );
}

/// Red team 49: systemd's exec prefixes, drop-ins and working directories, and the system's
/// loader, PAM, sshd, tmux, udev, logrotate, apt and Python configs name programs too.
#[test]
fn the_systems_units_loader_and_daemons_name_their_programs() {
    let h = home();
    let p = h.project.to_string_lossy().into_owned();
    let system = h.tmp.join("sys");
    let sys_write = |rel: &str, text: String| write_under(&system, rel, text);
    sys_write(
        "etc/systemd/system/rt.service",
        format!("[Service]\nExecStart=-{p}/sd/dash.sh\nExecStartPre=+{p}/sd/plus.sh\n"),
    );
    sys_write(
        "etc/systemd/system/ssh.service.d/override.conf",
        format!("[Service]\nExecStartPost={p}/sd/dropin.sh\n"),
    );
    sys_write(
        "etc/systemd/system/rel.service",
        format!("[Service]\nWorkingDirectory={p}\nExecStart=/bin/sh sd/rel.sh\n"),
    );
    sys_write("etc/ld.so.preload", format!("{p}/lib/pre.so\n"));
    // A system's library directory holds thousands of files: listed, never read (the first
    // cut failed closed on `/usr/lib/x86_64-linux-gnu`).
    let libs = h.tmp.join("usr-lib");
    std::fs::create_dir_all(&libs).unwrap();
    for i in 0..1100 {
        std::fs::write(libs.join(format!("lib{i}.so")), "").unwrap();
    }
    sys_write(
        "etc/ld.so.conf.d/zz.conf",
        format!("# dirs\n{p}/libdir\n{}\n", libs.display()),
    );
    sys_write(
        "etc/security/pam_env.conf",
        format!("LD_PRELOAD DEFAULT={p}/lib/pam.so\n"),
    );
    sys_write(
        "etc/ssh/sshd_config",
        format!("AuthorizedKeysCommand {p}/bin/keys\n"),
    );
    sys_write(
        "etc/udev/rules.d/99.rules",
        format!("RUN+=\"{p}/bin/udev\"\n"),
    );
    sys_write("etc/tmux.conf", format!("run-shell {p}/bin/tmux.sh\n"));
    sys_write(
        "etc/pam.d/common-session",
        format!("session optional pam_exec.so {p}/bin/pam.sh\n"),
    );
    sys_write(
        "etc/sysctl.d/99-x.conf",
        format!("kernel.core_pattern=|{p}/bin/core.sh\n"),
    );
    // A completion script is a large program: read for its paths (git-prompt's dynamic
    // `read` had made the shell reader refuse every project).
    sys_write(
        "etc/bash_completion.d/git-prompt",
        format!("__e() {{ read -r \"$2\" <\"$1\"; }}\n. {p}/bin/comp.sh\n"),
    );
    sys_write(
        "etc/python3.11/sitecustomize.py",
        format!("exec(open('{p}/py/site.py').read())\n"),
    );
    std::fs::create_dir_all(h.project.join("libdir")).unwrap();
    // A link in a system directory into the project makes the project file the config.
    // Dangling: the write makes the file (red team 51).
    std::fs::create_dir_all(h.project.join("cron")).unwrap();
    std::fs::create_dir_all(system.join("etc/cron.d")).unwrap();
    std::os::unix::fs::symlink(h.project.join("cron/tab"), system.join("etc/cron.d/link")).unwrap();
    super::super::TEST_SYSTEM_ROOT.with(|root| *root.borrow_mut() = Some(system.clone()));
    let policy = h.policy();
    let refused = |rel: &str| policy.write_protection(&h.project.join(rel));
    for (rel, config) in [
        ("sd/dash.sh", "etc/systemd/system/rt.service"),
        ("sd/plus.sh", "etc/systemd/system/rt.service"),
        (
            "sd/dropin.sh",
            "etc/systemd/system/ssh.service.d/override.conf",
        ),
        ("sd/rel.sh", "etc/systemd/system/rel.service"),
        ("lib/pre.so", "etc/ld.so.preload"),
        ("libdir/libc.so.6", "etc/ld.so.conf.d/zz.conf"),
        ("lib/pam.so", "etc/security/pam_env.conf"),
        ("bin/keys", "etc/ssh/sshd_config"),
        ("bin/udev", "etc/udev/rules.d/99.rules"),
        ("bin/tmux.sh", "etc/tmux.conf"),
        ("bin/pam.sh", "etc/pam.d/common-session"),
        ("bin/core.sh", "etc/sysctl.d/99-x.conf"),
        ("bin/comp.sh", "etc/bash_completion.d/git-prompt"),
        ("py/site.py", "etc/python3.11/sitecustomize.py"),
    ] {
        let file = system.join(config).display().to_string();
        assert_eq!(
            refused(rel),
            Some(WriteProtection::StartupNamed { file }),
            "{rel}"
        );
    }
    assert_eq!(
        refused("cron/tab"),
        Some(WriteProtection::StartupLinkTarget {
            link: system.join("etc/cron.d/link").display().to_string()
        })
    );
    assert_eq!(refused("src/main.rs"), None);
    assert_eq!(refused("sd/other.sh"), None);
}

/// Write `text` at `rel` under `root`, making its directories.
fn write_under(root: &Path, rel: &str, text: String) {
    let at = root.join(rel);
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::write(at, text).unwrap();
}
