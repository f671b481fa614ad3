//! Unit tests of the directories on every Python's path and the names refused there.

use super::*;

/// Whether a write to `rel` touches one of `places` (its path and what its scope covers).
fn reached(places: &[super::super::gitconfig::GitPlace], rel: &str) -> bool {
    places
        .iter()
        .any(|p| match Path::new(rel).strip_prefix(&p.at) {
            Err(_) => false,
            Ok(below) => p.scope.reaches(
                &below
                    .iter()
                    .map(|c| c.to_string_lossy().into_owned())
                    .collect::<Vec<_>>(),
            ),
        })
}

#[test]
fn pth_files_name_directories_and_modules_imported_at_start() {
    let site = Path::new("/s");
    let mut dirs = Vec::new();
    let mut names = BTreeSet::new();
    read_pth(
        site,
        "# comment\n/home/o/proj/src\nrel/dir\nimport _distutils_hack, os.path; x()\n\
         import os; exec('import certifi; from truststore import x; __import__(\\'zz\\')')\n\
         import os;exec(\"import sys\\nimport colorama\");exec(\"import\\x20sentry\")\n",
        &mut dirs,
        &mut names,
    );
    assert_eq!(
        dirs,
        [
            PathBuf::from("/home/o/proj/src"),
            PathBuf::from("/s/rel/dir")
        ]
    );
    let want = [
        "_distutils_hack",
        "os",
        "certifi",
        "truststore",
        "zz",
        "sys",
        "colorama",
        "sentry",
    ];
    assert_eq!(
        names,
        want.iter().map(|n| n.to_string()).collect::<BTreeSet<_>>()
    );
    for (entry, want) in [
        ("yaml", Some("yaml")),
        ("six.py", Some("six")),
        ("_yaml.cpython-312-x86_64-linux-gnu.so", Some("_yaml")),
        ("PyYAML-6.0.dist-info", None),
        ("__pycache__", None),
        ("README.txt", None),
    ] {
        assert_eq!(module_name(entry).as_deref(), want, "{entry}");
    }
}

/// Red team 30 N3: an editable install's `.pth` puts `src/` on the path of every Python of
/// the environment; what shadows a module imported at start or an installed one there is a
/// place, the project's own package is not.
#[test]
fn an_editable_installs_source_dir_refuses_only_shadowing_modules() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let site = root.join(".venv/lib/python3.12/site-packages");
    std::fs::create_dir_all(site.join("yaml")).unwrap();
    std::fs::create_dir_all(root.join("src/mypkg")).unwrap();
    std::fs::write(
        site.join("__editable__.mypkg-0.1.pth"),
        format!("{}\n", root.join("src").display()),
    )
    .unwrap();
    let account = super::super::gitconfig::Account::default();
    let places = super::super::gitconfig::places_with(&root, &[], &account);
    let placed = |rel: &str| places.iter().any(|p| Path::new(rel).starts_with(&p.at));
    for rel in [
        "src/_distutils_hack.py",
        "src/yaml/__init__.py",
        "src/encodings/x.py",
    ] {
        assert!(placed(rel), "{rel}: {places:?}");
    }
    for rel in [
        "src/mypkg/__init__.py",
        "src/mypkg/core.py",
        "src/helpers.py",
    ] {
        assert!(!placed(rel), "{rel}");
    }
}

/// Red team 33 `pthparse`: a `.pth` line that builds the name it imports at run time may import
/// any module of a directory on the path: every module there (and a package's `__init__`) is a
/// place, naming the `.pth` file; the package's other modules stay writable. The real shapes
/// (distutils-precedence, an `-nspkg.pth`) beside it leave the project's own package writable.
#[test]
fn an_opaque_pth_line_protects_every_module_of_the_import_roots() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let site = root.join(".venv/lib/python3.12/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::create_dir_all(root.join("src/mypkg")).unwrap();
    let editable = format!("{}\n", root.join("src").display());
    std::fs::write(site.join("__editable__.mypkg-0.1.pth"), editable).unwrap();
    let precedence = "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, \
                      'local') == 'local'; enabled and __import__('_distutils_hack').add_shim(); \n";
    std::fs::write(site.join("distutils-precedence.pth"), precedence).unwrap();
    let account = super::super::gitconfig::Account::default();
    let placed = reached;
    let places = super::super::gitconfig::places_with(&root, &[], &account);
    for rel in ["src/mypkg/__init__.py", "src/helpers.py"] {
        assert!(!placed(&places, rel), "{rel}: {places:?}");
    }
    std::fs::write(
        site.join("zz.pth"),
        "import os;__import__(chr(121)+'aml')\n",
    )
    .unwrap();
    let places = super::super::gitconfig::places_with(&root, &[], &account);
    for rel in [
        "src/mypkg/__init__.py",
        "src/helpers.py",
        "src/_distutils_hack.py",
    ] {
        assert!(placed(&places, rel), "{rel}: {places:?}");
    }
    assert!(!placed(&places, "src/mypkg/core.py"), "{places:?}");
    assert!(
        places.iter().any(|p| p.why.contains("zz.pth")),
        "{places:?}"
    );
}

/// Red team 43 W1: a directory named like a module every Python imports, in a directory on the
/// path, refuses only what Python would import from it — module files at any depth and
/// `__pycache__/` — not a web site's `site/index.html` or `encodings/README.md`.
#[test]
fn a_directory_named_like_a_module_refuses_only_its_modules() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let site = root.join(".venv/lib/python3.12/site-packages");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::create_dir_all(root.join("src")).unwrap();
    let editable = format!("{}\n", root.join("src").display());
    std::fs::write(site.join("__editable__.app-0.1.pth"), editable).unwrap();
    let account = super::super::gitconfig::Account::default();
    let places = super::super::gitconfig::places_with(&root, &[], &account);
    let placed = |rel: &str| reached(&places, rel);
    for rel in [
        "src/site/__init__.py",
        "src/site.py",
        "src/encodings/deep/x.py",
        "src/encodings/codec.cpython-312-x86_64-linux-gnu.so",
        "src/encodings/__pycache__/notes.txt",
    ] {
        assert!(placed(rel), "{rel}: {places:?}");
    }
    for rel in [
        "src/site/index.html",
        "src/site/css/app.css",
        "src/encodings/README.md",
        "src/app.js",
    ] {
        assert!(!placed(rel), "{rel}");
    }
}
