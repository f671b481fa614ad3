//! Unit tests of the `.pth` import line reader: the real shapes in the wild stay read (never
//! opaque), escapes and concatenation are decoded, names built at run time are opaque.

use super::*;

fn names(line: &str) -> Vec<String> {
    let got = imports(line);
    assert!(!got.opaque, "opaque: {line}");
    got.names
}

/// Real `.pth` files: this machine's and the common ones in the wild.
#[test]
fn the_real_pth_shapes_are_read_and_none_is_opaque() {
    let cases: [(&str, &[&str]); 8] = [
        // setuptools' distutils-precedence.pth.
        (
            "import os; var = 'SETUPTOOLS_USE_DISTUTILS'; enabled = os.environ.get(var, 'local') == 'local'; enabled and __import__('_distutils_hack').add_shim(); ",
            &["os", "_distutils_hack"],
        ),
        // This machine's certifi CA injector (an exec string with escapes and nested quotes).
        (
            r#"import os;exec("try:\n import certifi\n _p=certifi.where(); _c='/etc/ssl/certs/x.pem'\n if os.path.isfile(_c):\n  with open(_c,'rb') as _f: _t=_f.read()\n   with open(_p,'ab') as _f: _f.write(b'\\n'+_t)\nexcept Exception: pass\n")"#,
            &["os", "certifi"],
        ),
        // A namespace package's -nspkg.pth (setuptools).
        (
            "import sys, types, os;has_mfs = sys.version_info > (3, 5);p = os.path.join(sys._getframe(1).f_locals['sitedir'], *('google',));importlib = has_mfs and __import__('importlib.util');has_mfs and __import__('importlib.machinery');m = has_mfs and sys.modules.setdefault('google', importlib.util.module_from_spec(importlib.machinery.PathFinder.find_spec('google', [os.path.dirname(p)])));m = m or sys.modules.setdefault('google', types.ModuleType('google'));mp = (m or []) and m.__dict__.setdefault('__path__',[]);(p not in mp) and mp.append(p)",
            &["sys", "types", "os", "google", "importlib"],
        ),
        // pytest-cov's pytest-cov.pth (a .format call inside the exec'd code).
        (
            r#"import os, sys;exec('if \'COV_CORE_SOURCE\' in os.environ:\n try:\n  from pytest_cov.embed import init\n  init()\n except Exception as exc:\n  sys.stderr.write(\n   "pytest-cov: Failed to setup subprocess coverage. "\n   "Environ: {0!r}\\n"\n   "Exception: {1!r}\\n".format(\n    dict((k, v) for k, v in os.environ.items() if k.startswith(\'COV_CORE\')),\n    exc\n   )\n  )\n')"#,
            &["os", "sys", "pytest_cov"],
        ),
        // coverage's a1_coverage.pth.
        ("import coverage; coverage.process_startup()", &["coverage"]),
        // virtualenv's _virtualenv.pth.
        ("import _virtualenv", &["_virtualenv"]),
        // setuptools' __editable__ finder (the name starts with `__`: not a module a root holds).
        (
            "import __editable___mypkg_0_1_finder; __editable___mypkg_0_1_finder.install()",
            &[],
        ),
        // pywin32's.
        ("import pywin32_bootstrap", &["pywin32_bootstrap"]),
    ];
    for (line, want) in cases {
        assert_eq!(
            names(line),
            want.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
            "{line}"
        );
    }
}

#[test]
fn escapes_concatenation_and_nested_exec_strings_are_decoded() {
    let line = r#"import os;exec("import sys\nimport colorama");exec("import\x20truststore");__import__("sentry"+"_sdk")"#;
    assert_eq!(
        names(line),
        ["os", "sys", "colorama", "truststore", "sentry_sdk"]
    );
    for (line, want) in [
        (r#"import os;exec('import\tA_b')"#, "a_b"),
        (r#"import os;exec("import \u0079aml")"#, "yaml"),
        (r#"import os;exec("import \171aml")"#, "yaml"),
        (r#"import os;__import__('ya' 'ml')"#, "yaml"),
        (r#"import os;exec("exec('import yaml')")"#, "yaml"),
        (r#"import os;exec('''import a\nimport yaml''')"#, "yaml"),
        (
            r#"import os;from importlib import import_module as im; import_module('yaml')"#,
            "yaml",
        ),
        (r#"import os;exec(r"import yaml")"#, "yaml"),
    ] {
        assert!(
            names(line).contains(&want.to_string()),
            "{line}: {:?}",
            names(line)
        );
    }
    // A raw string keeps `\n`: `import a\nimport b` is one (bad) name, not two imports.
    assert!(!names(r#"import os;exec(r"import a\nimport zz")"#).contains(&"zz".to_string()));
    // `from a.b import c`: `c` is a name inside `a`.
    assert_eq!(names("import os; from a.b import c, d"), ["os", "a"]);
}

#[test]
fn names_built_at_run_time_make_the_line_opaque() {
    for line in [
        "import os;__import__(chr(121)+'aml')",
        "import os;__import__(''.join(['ya','ml']))",
        "import os;__import__('%s' % 'yaml')",
        "import os;__import__('{}'.format('yaml'))",
        "import os;__import__(bytes.fromhex('79616d6c').decode())",
        "import os;exec(open('/x/boot.py').read())",
        "import importlib;getattr(importlib, 'import_module')('yaml')",
        "import os;f=__import__;f('yaml')",
        "import os;exec(f'import {os.sep}')",
        "import os;exec(base64.b64decode('aW1wb3J0IHlhbWw='))",
        "import runpy;runpy.run_path('/x/y.py')",
        "import os;exec(\"import yaml",
        // Red team 35 review: Python reads identifiers after NFKC (`ｅｘｅｃ` is `exec`), and
        // bytes given to a loader may be any code.
        "import os;ｅｘｅｃ(\"import yaml\")",
        "import pickle;pickle.loads(b'\\x80\\x04cyaml\\nload\\n.')",
    ] {
        assert!(imports(line).opaque, "{line}");
    }
}

/// Red team 35 N5: the standard library's functions that import a module by a literal name
/// (7 of 7 ran at `python3 -c pass`) name it; literals given to calls that take no module name
/// (environment lookups, paths, modes, output) and subscript keys do not.
#[test]
fn literal_module_names_given_to_any_call_are_imports() {
    for (line, want) in [
        ("import pkgutil;pkgutil.resolve_name('evil.mod:f')", "evil"),
        ("import pkgutil;pkgutil.get_data('evil', 'x.txt')", "evil"),
        ("import importlib.resources as r;r.files('evil')", "evil"),
        ("import pydoc;pydoc.locate('evil.thing')", "evil"),
        (
            "import logging.config as c;c.dictConfig({'version': 1, 'root': {'()': 'evil.f'}})",
            "evil",
        ),
        (
            "from unittest import mock;mock.patch('evil.x').start()",
            "evil",
        ),
        ("import os;help('evil')", "evil"),
    ] {
        assert!(names(line).contains(&want.to_string()), "{line}");
    }
    assert_eq!(
        names("import os;os.environ.setdefault('X', 'local');print('done');open('/p', 'rb')"),
        ["os"]
    );
    assert_eq!(
        names("import os;x = os.environ['HOME'];y = {'k': 'v'}"),
        ["os"]
    );
}
