//! The masks' targets and their survey: what exists is never hidden from the survey, other
//! accounts' symlinks are not followed.

use super::*;

/// Another account's symlink, at the last component or on the way, is not followed; this
/// account's (or root's) is; what is reached is the object itself.
#[test]
fn only_this_accounts_or_roots_symlinks_are_followed() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("f"), "x").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let me = rustix::process::geteuid().as_raw();
    // As root a symlink can be given away; otherwise this account's link is "another's"
    // to a caller that says it is someone else.
    let (link_owner, caller) = if me == 0 {
        std::os::unix::fs::lchown(&link, Some(4747), None).unwrap();
        (4747, 0)
    } else {
        (me, 4747)
    };
    assert_eq!(std::fs::symlink_metadata(&link).unwrap().uid(), link_owner);
    assert!(open(&link, caller).unwrap().is_none(), "last component");
    assert!(
        open(&link.join("f"), caller).unwrap().is_none(),
        "on the way"
    );
    // Followed when it is the caller's own.
    let fd = open(&link.join("f"), link_owner).unwrap().unwrap();
    let st = rustix::fs::fstat(&fd).unwrap();
    assert_eq!(
        st.st_ino,
        std::fs::metadata(victim.join("f")).unwrap().ino()
    );
    // No symlink: reached; missing: none; relative links and `..` resolve.
    assert!(open(&victim, caller).unwrap().is_some());
    assert!(open(&dir.path().join("missing"), caller).unwrap().is_none());
    let rel = dir.path().join("rel");
    std::os::unix::fs::symlink("victim/../victim", &rel).unwrap();
    let fd = open(&rel.join("f"), me).unwrap().unwrap();
    let st = rustix::fs::fstat(&fd).unwrap();
    assert_eq!(
        st.st_ino,
        std::fs::metadata(victim.join("f")).unwrap().ino()
    );
}

/// What the survey says cannot exist does not: for every masked path of a tree with files,
/// directories, symlinks (to directories, to files, dangling, in loops), `..`, case variants
/// and non-ASCII names, `may_exist` is true wherever `lstat` finds something, on a listed
/// file system (the temp dir, ext4 or tmpfs here) and in directories asked name by name.
#[test]
fn the_survey_never_hides_what_exists() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(home.join(".config/gh")).unwrap();
    std::fs::create_dir_all(home.join("real")).unwrap();
    std::fs::write(home.join("ID_RSA"), "k").unwrap();
    std::fs::write(home.join(".netrc"), "k").unwrap();
    std::fs::write(home.join("file"), "k").unwrap();
    symlink(home.join("real"), home.join(".aws")).unwrap();
    symlink(root.join("nowhere"), home.join(".docker")).unwrap();
    symlink("loop", home.join("loop")).unwrap();
    std::fs::write(home.join("real/credentials"), "k").unwrap();
    let few = root.join("few");
    std::fs::create_dir(&few).unwrap();
    std::fs::write(few.join("token"), "k").unwrap();
    let odd = root.join("odd");
    std::fs::create_dir(&odd).unwrap();
    std::fs::write(odd.join("\u{212a}ey"), "k").unwrap();
    std::fs::write(odd.join("key"), "k").unwrap();
    let mut masked: Vec<PathBuf> = Vec::new();
    for name in [
        "id_rsa",
        "ID_RSA",
        "Id_Rsa",
        ".netrc",
        ".NETRC",
        ".aws",
        ".docker",
        "loop",
        "file",
        ".config",
        ".ssh",
        ".gnupg",
        ".kube",
        "gone",
        "real",
        "\u{e9}t\u{e9}",
    ] {
        masked.push(home.join(name));
    }
    for name in ["gh", "hub", "gcloud", "x", "y", "z", "w", "v", "u"] {
        masked.push(home.join(".config").join(name));
    }
    for name in ["credentials", "config", "a", "b", "c", "d", "e", "f"] {
        masked.push(home.join(".aws").join(name));
        masked.push(home.join("real").join(name));
        masked.push(home.join(".docker").join(name));
        masked.push(home.join("file").join(name));
        masked.push(home.join("loop").join(name));
        masked.push(home.join(".ssh").join(name));
        masked.push(home.join(".ssh/deeper").join(name));
        masked.push(odd.join(name));
        masked.push(home.join("real/..").join(name));
    }
    masked.push(odd.join("KEY"));
    masked.push(few.join("token"));
    masked.push(few.join("other"));
    masked.push(home.join("real/.."));
    masked.push(root.join("missing/deep/er/token"));
    let mut survey = Survey::new(&masked);
    let mut hidden = 0;
    for path in &masked {
        let exists = std::fs::symlink_metadata(path).is_ok();
        let may = survey.may_exist(path);
        assert!(
            may || !exists,
            "{} exists but the survey says not",
            path.display()
        );
        hidden += usize::from(!may);
    }
    // And it does settle missing paths without asking each: most of this set.
    assert!(hidden > masked.len() / 2, "{hidden} of {}", masked.len());
    // Listed (case-insensitively): `ID_RSA` exists, so every case of it may; `.ssh` is not
    // there, nor anything below it; the directory with a non-ASCII entry is asked whole.
    let mut survey = Survey::new(&masked);
    let of = |path: PathBuf| masked.iter().find(|m| **m == path).unwrap().as_path();
    assert!(survey.may_exist(of(home.join("Id_Rsa"))));
    assert!(!survey.may_exist(of(home.join(".ssh"))));
    assert!(!survey.may_exist(of(home.join(".ssh/deeper/a"))));
    assert!(
        survey.may_exist(of(odd.join("a"))),
        "non-ASCII entry: asked"
    );
    // Few names: the directory is asked whether it is one, its names are not settled.
    assert!(survey.may_exist(of(few.join("other"))));
    assert!(!survey.may_exist(of(root.join("missing/deep/er/token"))));
}

/// A directory on a file system that is not known to list what it holds (procfs here) is
/// asked name by name, however many names it holds.
#[test]
fn other_file_systems_are_asked_name_by_name() {
    let masked: Vec<PathBuf> = (0..LIST_FROM + 2)
        .map(|i| PathBuf::from(format!("/proc/self/no-such-entry-{i}")))
        .chain(std::iter::once(PathBuf::from("/proc/self/status")))
        .collect();
    let mut survey = Survey::new(&masked);
    for path in &masked {
        assert!(survey.may_exist(path), "{}", path.display());
    }
}

/// A directory with more entries than a listing is worth is asked name by name.
#[test]
fn crowded_directories_are_asked_name_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let crowded = std::fs::canonicalize(dir.path()).unwrap();
    for i in 0..=LIST_AT_MOST {
        std::fs::write(crowded.join(format!("f{i}")), "").unwrap();
    }
    let masked: Vec<PathBuf> = (0..LIST_FROM)
        .map(|i| crowded.join(format!("missing-{i}")))
        .collect();
    let mut survey = Survey::new(&masked);
    for path in &masked {
        assert!(survey.may_exist(path), "{}", path.display());
    }
    // As many entries as that (`.` and `..` count): listed, the missing names are settled.
    for i in 0..3 {
        std::fs::remove_file(crowded.join(format!("f{i}"))).unwrap();
    }
    let mut survey = Survey::new(&masked);
    assert!(masked.iter().all(|path| !survey.may_exist(path)));
}
