//! Unit tests: linters' and IDEs' configs that load code are refused by name (red team 34 B1,
//! B2), and a write of a shared Python project file is refused exactly when it changes a key
//! that makes a linter load code, however the file spells it.

use std::ffi::OsStr;
use std::path::Path;

use super::super::package_files::CheckedFile;
use super::super::{AutorunClass, autorun_class};
use super::*;

const PYPROJECT: &str = "[project]\nname = \"a\"\nversion = \"1.0\"\n\n[tool.ruff]\nline-length = 88\n\n[tool.pylint.main]\ninit-hook = \"import sys\"\njobs = 2\n\n[tool.mypy]\nplugins = [\"pydantic.mypy\"]\n";

fn pyproject(old: &str, new: &str) -> Option<CodeKeyChange> {
    changed_code_key(LintConfig::Pyproject, Some(old.as_bytes()), new.as_bytes())
}

fn setup_cfg(old: &str, new: &str) -> Option<CodeKeyChange> {
    changed_code_key(LintConfig::SetupCfg, Some(old.as_bytes()), new.as_bytes())
}

fn key(k: &str) -> Option<CodeKeyChange> {
    Some(CodeKeyChange::Key(k.to_string()))
}

#[test]
fn linters_and_ides_configs_that_load_code_are_refused_by_name() {
    for (path, class) in [
        ("/p/pylintrc", AutorunClass::EditorConfig),
        ("/p/.pylintrc", AutorunClass::EditorConfig),
        ("/p/sub/.PyLintRC.toml", AutorunClass::EditorConfig),
        ("/p/mypy.ini", AutorunClass::EditorConfig),
        ("/p/.mypy.ini", AutorunClass::EditorConfig),
        ("/home/u/.config/mypy/config", AutorunClass::EditorConfig),
        ("/p/.flake8", AutorunClass::EditorConfig),
        ("/p/.sqlfluff", AutorunClass::EditorConfig),
        ("/p/.rubocop.yml", AutorunClass::EditorConfig),
        ("/p/.php-cs-fixer.dist.php", AutorunClass::EditorConfig),
        ("/p/phpstan.neon.dist", AutorunClass::EditorConfig),
        ("/p/psalm.xml", AutorunClass::EditorConfig),
        ("/p/.formatter.exs", AutorunClass::EditorConfig),
        ("/p/apps/web/.credo.exs", AutorunClass::EditorConfig),
        ("/p/.ansible-lint", AutorunClass::EditorConfig),
        ("/p/.config/ansible-lint.yml", AutorunClass::EditorConfig),
        ("/p/.luacheckrc", AutorunClass::EditorConfig),
        ("/p/latexmkrc", AutorunClass::EditorConfig),
        ("/p/.latexmkrc", AutorunClass::EditorConfig),
        ("/p/.lintr", AutorunClass::EditorConfig),
        ("/p/.golangci.yml", AutorunClass::EditorConfig),
        ("/p/.tflint.hcl", AutorunClass::EditorConfig),
        ("/p/.project", AutorunClass::EditorConfig),
        ("/p/.factorypath", AutorunClass::EditorConfig),
        ("/p/.ruby-env", AutorunClass::DirectoryHooks),
        ("/p/.versions.conf", AutorunClass::DirectoryHooks),
    ] {
        assert_eq!(autorun_class(Path::new(path)), Some(class), "{path}");
    }
    // The shared files, and look-alikes, are not refused by name.
    for path in [
        "/p/pyproject.toml",
        "/p/setup.cfg",
        "/p/tox.ini",
        "/p/docs/pylintrc.md",
        "/p/src/project.py",
        "/p/.projectile",
        "/p/mypy/config.py",
        "/p/ruff.toml",
        "/p/.coveragerc",
    ] {
        assert_eq!(autorun_class(Path::new(path)), None, "{path}");
    }
}

#[test]
fn shared_files_are_checked_as_editor_config_by_their_name() {
    for (name, kind) in [
        ("pyproject.toml", LintConfig::Pyproject),
        ("PyProject.TOML", LintConfig::Pyproject),
        ("setup.cfg", LintConfig::SetupCfg),
        ("tox.ini", LintConfig::ToxIni),
    ] {
        let checked = CheckedFile::of(OsStr::new(name));
        assert_eq!(checked, Some(CheckedFile::Lint(kind)), "{name}");
        assert_eq!(
            checked.map(CheckedFile::class),
            Some(AutorunClass::EditorConfig)
        );
    }
    assert_eq!(
        CheckedFile::of(OsStr::new("package.json")).map(CheckedFile::class),
        Some(AutorunClass::GitHooks)
    );
    assert_eq!(CheckedFile::of(OsStr::new("setup.py")), None);
}

#[test]
fn pyproject_edits_elsewhere_pass_and_code_keys_are_refused() {
    // Other tools' settings, the version, an unchanged init-hook with other edits, reformatting
    // the same values: allowed.
    for new in [
        PYPROJECT.replace("line-length = 88", "line-length = 100"),
        PYPROJECT
            .replace("1.0", "1.1")
            .replace("jobs = 2", "jobs = 4"),
        PYPROJECT.replace(
            "plugins = [\"pydantic.mypy\"]",
            "plugins = [ 'pydantic.mypy' ]",
        ),
        format!("{PYPROJECT}\n[tool.black]\ntarget-version = [\"py312\"]\n"),
    ] {
        assert_eq!(pyproject(PYPROJECT, &new), None, "{new}");
    }
    assert_eq!(
        pyproject(
            PYPROJECT,
            &PYPROJECT.replace("import sys", "import os; os.system('x')")
        ),
        key("tool.pylint.main.init-hook")
    );
    assert_eq!(
        pyproject(PYPROJECT, &PYPROJECT.replace("pydantic.mypy", "./evil.py")),
        key("tool.mypy.plugins")
    );
    let plain = "[project]\nname = \"a\"\n[tool.ruff]\nline-length = 88\n";
    for (new, at) in [
        (
            format!("{plain}[tool.pylint.MASTER]\ninit-hook = \"exec(open('x').read())\"\n"),
            "tool.pylint.MASTER.init-hook",
        ),
        // pylint's keys straight under [tool.pylint], an abbreviation argparse accepts, dotted
        // and quoted spellings, a sub-table's underscore spelling.
        (
            format!("{plain}[tool.pylint]\nload-plugins = [\"evil\"]\n"),
            "tool.pylint.load-plugins",
        ),
        (
            format!("{plain}[tool.pylint.main]\nload-plug = \"evil\"\n"),
            "tool.pylint.main.load-plug",
        ),
        (
            format!("tool.pylint.main.\"init-hook\" = \"x\"\n{plain}"),
            "tool.pylint.main.init-hook",
        ),
        (
            format!("{plain}[tool.mypy]\npython_executable = \"./x.sh\"\n"),
            "tool.mypy.python_executable",
        ),
        (
            format!("{plain}[tool.sqlfluff.templater.jinja]\nlibrary_path = \"lib\"\n"),
            "tool.sqlfluff.templater.jinja.library_path",
        ),
        // Red team 35 N1: pylint `eval`s `evaluation` and imports an `output-format` reporter.
        (
            format!("{plain}[tool.pylint.reports]\nevaluation = \"__import__('os') or 10\"\n"),
            "tool.pylint.reports.evaluation",
        ),
        (
            format!("{plain}[tool.pylint.main]\noutput-format = \"pkg.rep.R\"\n"),
            "tool.pylint.main.output-format",
        ),
    ] {
        assert_eq!(pyproject(plain, &new), key(at), "{new}");
    }
    for (new, at) in [
        (
            "[pylint.reports]\nevaluation = 10.0 - error\n",
            "[pylint.reports] evaluation",
        ),
        (
            "[MAIN]\noutput-format = pkg.rep.R\n",
            "[MAIN] output-format",
        ),
    ] {
        let old = "[metadata]\nname = a\n";
        assert_eq!(setup_cfg(old, &format!("{old}{new}")), key(at), "{new}");
    }
    // A new file with such keys (the first in key order is named), and removing one, are
    // changes too.
    assert_eq!(
        changed_code_key(LintConfig::Pyproject, None, PYPROJECT.as_bytes()),
        key("tool.mypy.plugins")
    );
    assert_eq!(
        pyproject(
            PYPROJECT,
            &PYPROJECT.replace("init-hook = \"import sys\"\n", "")
        ),
        key("tool.pylint.main.init-hook")
    );
}

#[test]
fn unreadable_pyproject_fails_closed_when_it_had_or_gains_code_keys() {
    let broken = format!("{PYPROJECT}\n[tool.ruff\n");
    assert_eq!(
        pyproject(PYPROJECT, &broken),
        Some(CodeKeyChange::Unreadable)
    );
    let plain = "[project]\nname = \"a\"\n";
    // No code keys before, none gained: a broken file is the owner's business.
    assert_eq!(pyproject(plain, "[project\nname = \"a\"\n"), None);
    assert_eq!(
        pyproject(plain, "[project\n[tool.pylint]\ninit_hook = 'x'\n"),
        Some(CodeKeyChange::Unreadable)
    );
    assert_eq!(
        changed_code_key(
            LintConfig::Pyproject,
            None,
            b"\xff[tool.mypy]\nplugins = 1\n"
        ),
        Some(CodeKeyChange::Unreadable)
    );
}

const SETUP_CFG: &str = "[metadata]\nname = a\nversion = 1.0\n\n[flake8]\nmax-line-length = 100\n\n[flake8:local-plugins]\nextension =\n    X1 = checks:Plugin\npaths =\n    ./tools\n\n[mypy]\nplugins = pydantic.mypy\n\n[pylint.main]\ninit-hook = import sys\n";

#[test]
fn ini_files_are_read_as_configparser_reads_them() {
    for new in [
        SETUP_CFG.replace("version = 1.0", "version = 1.1"),
        SETUP_CFG.replace("max-line-length = 100", "max-line-length = 120"),
        SETUP_CFG.replace("[mypy]\n", "[mypy]\n# a comment\nstrict = true\n"),
        SETUP_CFG.replace("plugins = pydantic.mypy", "plugins: pydantic.mypy"),
    ] {
        assert_eq!(setup_cfg(SETUP_CFG, &new), None, "{new}");
    }
    for (new, at) in [
        // A continuation line added to the local plugins' paths, also after a comment and an
        // empty line (neither ends a value), with a tab indent.
        (
            SETUP_CFG.replace("    ./tools\n", "    ./tools\n    ./\n"),
            "[flake8:local-plugins] paths",
        ),
        (
            SETUP_CFG.replace("    ./tools\n", "    ./tools\n\n  # more\n\t./\n"),
            "[flake8:local-plugins] paths",
        ),
        (
            SETUP_CFG.replace("pydantic.mypy", "pydantic.mypy, ./evil.py"),
            "[mypy] plugins",
        ),
        (
            SETUP_CFG.replace("import sys", "import os"),
            "[pylint.main] init-hook",
        ),
        (
            format!("{SETUP_CFG}[MASTER]\nLOAD_PLUGINS = evil\n"),
            "[MASTER] load_plugins",
        ),
        // What every section inherits, and a line break only Python sees (`\r`).
        (
            format!("{SETUP_CFG}[DEFAULT]\npaths = ./\n"),
            "[DEFAULT] paths",
        ),
        (
            SETUP_CFG.replace("[flake8]\n", "[flake8]\rinit-hook = x\n"),
            "[flake8] init-hook",
        ),
    ] {
        assert_eq!(setup_cfg(SETUP_CFG, &new), key(at), "{new}");
    }
    // A value that interpolates another key makes every key of the file count.
    let interpolated = "[pylint.main]\ninit-hook = %(h)s\nh = import sys\n";
    assert_eq!(
        setup_cfg(
            interpolated,
            &interpolated.replace("import sys", "import os")
        ),
        key("[pylint.main] h")
    );
    // What configparser refuses (an option before any section, a line without a delimiter)
    // fails closed when a key is lost or gained.
    assert_eq!(
        setup_cfg(SETUP_CFG, &format!("{SETUP_CFG}not an option\n")),
        Some(CodeKeyChange::Unreadable)
    );
    assert_eq!(
        setup_cfg(
            "[metadata]\nname = a\n",
            "init-hook = x\n[metadata]\nname = a\n"
        ),
        Some(CodeKeyChange::Unreadable)
    );
    assert_eq!(
        setup_cfg("[metadata]\nname = a\n", "[metadata]\nname = a\nbroken\n"),
        None
    );
    assert_eq!(
        changed_code_key(LintConfig::ToxIni, None, b"[tox]\nenvlist = py3\n"),
        None
    );
    assert_eq!(
        changed_code_key(
            LintConfig::ToxIni,
            None,
            b"[flake8:local-plugins]\npaths = .\n"
        ),
        key("[flake8:local-plugins] paths")
    );
}
