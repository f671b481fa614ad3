//! Unit tests of the owner's `PATH` and the other search lists read from start-up files.

// Tests make their fixtures directly.
#![allow(clippy::disallowed_methods)]

use super::tests::{entries, read, reader, values_of};
use super::*;

/// The owner's `PATH` (red team 41, found while aiming it): direnv's `PATH_add DIR…` (not
/// `NAME DIR`) and `path_add NAME DIR…`, against the `.envrc`'s directory; `$PATH` in a value
/// is the owner's own (never an empty entry, which would be the working directory); an empty
/// entry written as such is `.`; an entry built on what is not read names any directory (`/`,
/// read as programs below it, never the whole tree).
#[test]
fn the_owner_s_path_is_read_with_direnv_s_directives() {
    let dir = Path::new("/w/proj");
    let got = read(
        "PATH_add bin node_modules/.bin\npath_add PERL5LIB perl perl2\nPATH_add /opt/t\n\
         layout go\nlayout php\nlayout python3\nload_prefix tools\n",
        Some(dir),
    );
    assert_eq!(
        got,
        [
            ("PATH", "/w/proj/bin"),
            ("PATH", "/w/proj/node_modules/.bin"),
            ("PERL5LIB", "/w/proj/perl"),
            ("PERL5LIB", "/w/proj/perl2"),
            ("PATH", "/opt/t"),
            ("PATH", "/w/proj/vendor/bin"),
            ("PATH", "/w/proj/tools/bin"),
            ("LD_LIBRARY_PATH", "/w/proj/tools/lib"),
        ]
        .map(|(k, v)| (k, v.to_string()))
    );
    let home = std::env::var("HOME").unwrap();
    let got = values_of(
        "export PATH=\"$HOME/.local/bin:$PATH\"\nPATH=:/usr/bin\n",
        None,
        "PATH",
    );
    assert_eq!(got[1], ".:/usr/bin", "{got:?}");
    assert!(
        got[0].starts_with(&format!("{home}/.local/bin:")),
        "{got:?}"
    );
    assert!(!got[0].contains("::") && !got[0].ends_with(':'), "{got:?}");
    let unread = reader(
        "export PATH=\"$(go env GOPATH)/bin:$PATH\"\n",
        None,
        Dialect::Posix,
    );
    assert_eq!(unread.below, [("PATH", PathBuf::from("/"))]);
    assert!(unread.unreadable.is_empty(), "{:?}", unread.unreadable);
}

/// Red team 44a C3-B1 (and this host's own tests): a `.bashrc` with many `PATH="x:$PATH"` lines
/// — each doubling the values `PATH` may hold — past the bound had made `PATH` unread, and every
/// file named like a program anywhere refused, while the dirs of the later lines (and
/// `.profile`'s) were never read as program dirs. A search list holds every entry it may hold.
#[test]
fn many_path_lines_keep_every_entry_and_reach_no_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(tmp.path()).unwrap();
    let mut bashrc = String::new();
    for n in 0..24 {
        bashrc.push_str(&format!("export PATH=\"$HOME/b{n}:$PATH\"\n"));
    }
    bashrc.push_str("PYTHONPATH=/py1:$PYTHONPATH\nPYTHONPATH=/py2:$PYTHONPATH\n");
    std::fs::write(home.join(".bashrc"), bashrc).unwrap();
    std::fs::write(home.join(".profile"), "PATH=\"$HOME/profbin:$PATH\"\n").unwrap();
    let shell = of_shell(&home);
    let entries = entries(&shell.env, "PATH");
    for n in 0..24 {
        let want = format!("{}/b{n}", home.display());
        assert!(entries.contains(&want), "{want}: {entries:?}");
    }
    let profbin = format!("{}/profbin", home.display());
    assert!(entries.contains(&profbin), "{entries:?}");
    assert!(!entries.iter().any(|e| e.contains(MARK)), "{entries:?}");
    assert!(shell.below.is_empty(), "{:?}", shell.below);
    assert!(shell.unreadable.is_empty(), "{:?}", shell.unreadable);
}

/// Red team 44a C1-B4: zsh's `fpath` array (tied to `FPATH`, its own old value read as the
/// owner's) and oh-my-zsh's `ZSH_CUSTOM` are read as directories whose files run; the usual
/// `fpath=(dir $fpath)` makes nothing unreadable.
#[test]
fn zsh_s_fpath_and_oh_my_zsh_s_custom_dir_are_read() {
    let got = read(
        "fpath=(/p/zfuncs $fpath)\nexport ZSH_CUSTOM=/p/omz-custom\n",
        None,
    );
    assert!(
        got.iter()
            .any(|(k, v)| *k == "FPATH" && v.split(':').any(|e| e == "/p/zfuncs")),
        "{got:?}"
    );
    assert!(
        got.contains(&("ZSH_CUSTOM", "/p/omz-custom".to_string())),
        "{got:?}"
    );
    let reader = reader("fpath=(/p/zfuncs $fpath)\n", None, Dialect::Posix);
    assert!(reader.unreadable.is_empty(), "{:?}", reader.unreadable);
    assert!(reader.below.is_empty(), "{:?}", reader.below);
}
