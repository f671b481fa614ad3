//! How the reader follows Python: its options as its own parser reads them, a script (its
//! directory first on `sys.path`), `python -m MODULE` from the top (what shadows an import
//! there), and a program read from standard input (red team 25 B5).

use super::lexer::Word;
use super::{Collector, NamedPath, Scope, ScriptRunner};

/// Endings of files Python imports as a module (`x.cpython-312-x86_64-linux-gnu.so` ends in
/// `.so`); `.pyo` and `.pyw` too, for old and Windows interpreters.
pub(super) const MODULE_SUFFIXES: [&str; 6] = [".py", ".pyc", ".pyo", ".pyw", ".so", ".pyd"];

/// Whether a write to `below` (folded names under a directory first on `sys.path`) changes
/// what Python imports from there: a top-level module file, anything in `__pycache__/`, a
/// package's `__init__` file. A directory without an `__init__` is at most a namespace
/// package: the import system keeps searching `sys.path` past a namespace portion and takes
/// the first regular package or module of that name anywhere after it, so such a directory
/// never shadows an installed regular module; it is merged into an installed *namespace*
/// package of its name, which the hook reader protects by name ([`super::namespaces`], red
/// team 25 B6), and otherwise imported only for a name nothing installed provides (an
/// optional import a tool tries and catches), the known limit in
/// docs/design/protected-set.md. `.pth` files are read only in site directories, never
/// from the working directory.
pub(in crate::protected::autorun) fn imports_reach(below: &[String]) -> bool {
    match below {
        [first, ..] if first == "__pycache__" => true,
        [name] => module_file(name),
        [_, init] => init.starts_with("__init__.") && module_file(init),
        _ => false,
    }
}

/// Whether a file name is a module Python imports ([`MODULE_SUFFIXES`]).
fn module_file(name: &str) -> bool {
    MODULE_SUFFIXES.iter().any(|suffix| name.ends_with(suffix))
}

/// Whether a write to `below` (folded names under a directory named like a module every Python
/// imports) is code such a package would run: a module file at any depth, or anything in a
/// `__pycache__/` (red team 43 W1: `site/index.html` and `test/app.test.js` were refused
/// whole under a PYTHONPATH of the project's top).
pub(in crate::protected::autorun) fn modules_below_reach(below: &[String]) -> bool {
    below.iter().any(|part| part == "__pycache__")
        || below.last().is_some_and(|name| module_file(name))
}

/// What `python -m MODULE` run from the working tree's top (the path `""`, first on
/// `sys.path`) may import from the tree: what shadows any import there ([`Scope::Imports`]),
/// and the whole subtree of MODULE's top-level package (`a.b` → `a/`, its modules and data)
/// and its module file (`a.py`). `None` when MODULE is not a dotted name of identifiers.
pub(in crate::protected::autorun) fn python_module_places(module: &str) -> Option<Vec<NamedPath>> {
    let identifier = |part: &str| {
        part.chars().next().is_some_and(|c| !c.is_ascii_digit())
            && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !module.split('.').all(identifier) {
        return None;
    }
    let first = module.split('.').next().unwrap_or(module);
    let place = |path: String, scope: Scope| NamedPath {
        path,
        cwd: String::new(),
        scope,
        script: None,
    };
    Some(vec![
        place(String::new(), Scope::Imports),
        place(first.to_string(), Scope::Below),
        place(format!("{first}.py"), Scope::Below),
    ])
}

impl Collector {
    /// `python [options] (SCRIPT | -m MODULE | -c CODE) args`, short options run together as
    /// Python's own parser reads them (`-IBm mod`, `-mmod`, `-Wignore`).
    pub(super) fn python(&mut self, args: &[Word], depth: usize) {
        let mut isolated = false;
        let mut i = 0;
        while let Some(word) = args.get(i) {
            let text = word.text.as_str();
            i += 1;
            if text == "--" {
                break;
            }
            if text == "-" {
                self.python_stdin(isolated);
                return self.arguments(&args[i.min(args.len())..], depth);
            }
            if let Some(long) = text.strip_prefix("--") {
                match long {
                    "version" | "help" | "help-all" | "help-env" | "help-xoptions" => return,
                    _ if long.starts_with("check-hash-based-pycs") => {
                        if !long.contains('=') {
                            i += 1;
                        }
                    }
                    _ => return self.fail("Python's option is not one the reader knows"),
                }
                continue;
            }
            let Some(letters) = text.strip_prefix('-') else {
                i -= 1;
                break;
            };
            for (at, letter) in letters.char_indices() {
                match letter {
                    'I' | 'P' => isolated = true,
                    'b' | 'B' | 'd' | 'E' | 'i' | 'O' | 'q' | 's' | 'S' | 'u' | 'v' | 'x' | 'R'
                    | 'h' | 'V' => {}
                    'W' | 'X' => {
                        if at + 1 == letters.len() {
                            i += 1;
                        }
                        break;
                    }
                    'm' => {
                        let attached = &letters[at + 1..];
                        let module = if attached.is_empty() {
                            i += 1;
                            args.get(i - 1).map(|word| word.text.as_str())
                        } else {
                            Some(attached)
                        };
                        let Some(module) = module else {
                            return self.fail("python -m names no module");
                        };
                        // `-I`/`-P` leave the working directory off `sys.path`.
                        if !isolated {
                            self.python_module(module);
                        }
                        return self.arguments(&args[i.min(args.len())..], depth);
                    }
                    'c' => return self.fail("Python runs inline code, which may load any file"),
                    _ => return self.fail("Python's option is not one the reader knows"),
                }
            }
        }
        let Some((script, script_args)) = args[i.min(args.len())..].split_first() else {
            return self.python_stdin(isolated);
        };
        if isolated {
            if let Some(script) = self.descriptor_script(script) {
                self.push(&script.text, None);
            }
        } else {
            self.script(script, ScriptRunner::Python);
        }
        self.arguments(script_args, depth);
    }

    /// Python running its program from standard input (`python3 < ci/chk.py`, `python3 -
    /// < x`): the working directory, not the file's, is first on `sys.path` (without `-I`/`-P`),
    /// and the program is the project's own script, importing the project's modules from there
    /// (`import helpers.h`, a namespace directory): as for a script, whose directory's whole
    /// subtree is a place, the working directory's whole subtree is (red team 25 B5: the whole
    /// tree when it runs from the top). Input from a pipe, the hook's own input or another
    /// descriptor is code nobody can read here: the whole tree too.
    fn python_stdin(&mut self, isolated: bool) {
        let Some(file) = self.stdin.take() else {
            return self.fail("Python reads its program from standard input, which is not a file");
        };
        self.push(&file.text, None);
        if isolated {
            return;
        }
        match self.cwd.clone() {
            Some(cwd) => self.out.push(NamedPath {
                path: cwd.clone(),
                cwd,
                scope: Scope::Below,
                script: None,
            }),
            None => self.fail("it runs from a directory the reader lost"),
        }
    }

    /// A script named as a descriptor (`/dev/stdin`, `/dev/fd/0`, `/proc/self/fd/0`): the
    /// runner opens what standard input is, and Python and Node resolve the link to the file's
    /// own directory, so it is that file when standard input is one; any other descriptor or
    /// device holds code nobody can read here (`None`, having failed).
    pub(super) fn descriptor_script(&mut self, word: &Word) -> Option<Word> {
        let text = word.text.as_str();
        if !text.starts_with("/dev/") && !text.starts_with("/proc/") {
            return Some(word.clone());
        }
        let stdin = matches!(
            text,
            "/dev/stdin" | "/dev/fd/0" | "/proc/self/fd/0" | "/proc/thread-self/fd/0"
        );
        match self.stdin.take() {
            Some(file) if stdin => Some(file),
            _ => {
                self.fail(
                    "it runs a script from a descriptor or device, whose content is unknown here",
                );
                None
            }
        }
    }

    /// `python -m MODULE` without `-I`/`-P`: the working directory is first on `sys.path`, read
    /// precisely only when it is the top (where git runs the value), else the whole tree.
    fn python_module(&mut self, module: &str) {
        if self.cwd.as_deref() != Some("") {
            return self.fail(
                "python -m imports from the directory it runs in, which is not the working tree's top",
            );
        }
        match python_module_places(module) {
            // The owner's own command (an alias) names the module it spells out, not what
            // shadows its imports, as it names a script without its directory.
            Some(places) if self.literal => self
                .out
                .extend(places.into_iter().filter(|p| p.scope != Scope::Imports)),
            Some(places) => self.out.extend(places),
            None => self.fail("python -m names a module the reader cannot read"),
        }
    }
}
