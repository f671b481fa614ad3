//! What a `.pth` file's `import` line imports (red team 33 `pthparse`). `site` runs such a line
//! as Python at every interpreter start, so it is read as Python tokens: string literals
//! decoded as Python decodes them (`\n`, `\t`, `\xNN`, `\uNNNN`, octal; raw strings left raw),
//! adjacent and `+`-joined literals concatenated, the code an `exec`/`eval`/`compile` string
//! holds read again as code. A module name that cannot be read statically — an import
//! function given anything but a literal (`__import__(chr(115)+…)`, `exec(open(f).read())`,
//! `.format`/`%` on the name), an f-string, an import function reached by name
//! (`getattr(importlib, 'import_module')`), a loader by path (`run_path`, `exec_module`) —
//! makes the line *opaque*: it may import any module. So does a name Python would read after
//! NFKC (`ｅｘｅｃ` is `exec`: any non-ASCII identifier) and a bytes literal given to a call
//! that may load it (`pickle.loads(b…)`).
//! A string literal that reads as a dotted module name (`pkg.mod`, `pkg.mod:attr`) given to any
//! call but a few that take none (`os.environ.get`, `setdefault`, `write`…) counts as imported:
//! the standard library has many functions that import by name (`pkgutil.resolve_name`,
//! `pydoc.locate`, `importlib.resources.files`, `logging.config.dictConfig`, `mock.patch`; red
//! team 35 N5).

/// Functions whose first argument is a module name.
const IMPORTERS: [&str; 5] = [
    "__import__",
    "import_module",
    "find_spec",
    "run_module",
    "find_module",
];

/// Functions whose first argument is code.
const EXECUTORS: [&str; 3] = ["exec", "eval", "compile"];

/// Names that load code by a path or reach an import function indirectly.
const INDIRECT: [&str; 8] = [
    "getattr",
    "run_path",
    "exec_module",
    "load_module",
    "spec_from_file_location",
    "SourceFileLoader",
    "__builtins__",
    "builtins",
];

/// Calls whose string arguments name no module (environment lookups, string and list methods,
/// output): their literals are not counted as imports.
const NAMES_NO_MODULE: [&str; 17] = [
    "get",
    "open",
    "getenv",
    "setdefault",
    "startswith",
    "endswith",
    "split",
    "rsplit",
    "strip",
    "replace",
    "write",
    "print",
    "append",
    "insert",
    "extend",
    "isfile",
    "isdir",
];

/// How deep `exec` strings are read inside each other.
const MAX_DEPTH: usize = 4;

/// What one `import` line imports.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Imports {
    /// Top-level module names (lowercased, as the rules compare them).
    pub names: Vec<String>,
    /// Whether the line may import a module whose name is not read statically.
    pub opaque: bool,
}

/// The modules a line of Python code imports.
pub(super) fn imports(line: &str) -> Imports {
    let mut out = Imports::default();
    read(line, 0, &mut out);
    let mut seen = std::collections::HashSet::new();
    out.names.retain(|name| seen.insert(name.clone()));
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    /// A string literal (after concatenation); `exact` is false for an f-string.
    Str {
        text: String,
        exact: bool,
    },
    Op(char),
    /// A bytes literal: data a loader may turn into code (`pickle.loads(b"…")`).
    Bytes,
}

fn read(code: &str, depth: usize, out: &mut Imports) {
    let Some(toks) = tokens(code) else {
        out.opaque = true;
        return;
    };
    let toks = concatenated(toks);
    let callees = callees(&toks);
    let name_at = |i: usize| match toks.get(i) {
        Some(Tok::Name(n)) => Some(n.as_str()),
        _ => None,
    };
    let mut i = 0;
    while i < toks.len() {
        let tok = &toks[i];
        i += 1;
        match tok {
            Tok::Name(n) if n == "import" => {
                // `import a.b as c, d`: each first name of a dotted name after a comma.
                while let Some(first) = name_at(i) {
                    out.names.extend(top(first));
                    i = past_dotted(&toks, i);
                    if name_at(i) == Some("as") {
                        i += 2;
                    }
                    if toks.get(i) != Some(&Tok::Op(',')) {
                        break;
                    }
                    i += 1;
                }
            }
            Tok::Name(n) if n == "from" => {
                // `from a.b import c, d`: `a`; `c` and `d` are names inside it (`from .
                // import x` names none), skipped with their `import`.
                if let Some(first) = name_at(i) {
                    out.names.extend(top(first));
                }
                let mut j = i;
                while toks.get(j) == Some(&Tok::Op('.')) {
                    j += 1;
                }
                if name_at(j).is_some() {
                    j = past_dotted(&toks, j);
                }
                if name_at(j) == Some("import") {
                    i = j + 1;
                    while matches!(toks.get(i), Some(Tok::Name(_) | Tok::Op(',' | '(' | ')'))) {
                        i += 1;
                    }
                }
            }
            Tok::Name(n)
                if EXECUTORS.contains(&n.as_str())
                    && toks.get(i.wrapping_sub(2)) == Some(&Tok::Op('.')) =>
            {
                // A method of that name (`re.compile`): not the builtin.
            }
            Tok::Name(n) if IMPORTERS.contains(&n.as_str()) || EXECUTORS.contains(&n.as_str()) => {
                if toks.get(i) != Some(&Tok::Op('(')) {
                    // The function passed around or renamed: its argument is not seen.
                    out.opaque = true;
                    continue;
                }
                match (toks.get(i + 1), toks.get(i + 2)) {
                    (Some(Tok::Str { text, exact: true }), Some(Tok::Op(')' | ','))) => {
                        if !EXECUTORS.contains(&n.as_str()) {
                            out.names.extend(top(text));
                        } else if depth >= MAX_DEPTH {
                            out.opaque = true;
                        } else {
                            read(text, depth + 1, out);
                        }
                    }
                    _ => out.opaque = true,
                }
            }
            Tok::Name(n) if INDIRECT.contains(&n.as_str()) || !n.is_ascii() => out.opaque = true,
            // Bytes given to a loader (`pickle.loads`, `marshal.loads`) may be any code; written
            // out (`f.write(b"\n")`) they are data.
            Tok::Bytes
                if callees[i - 1]
                    .as_deref()
                    .is_some_and(|c| !NAMES_NO_MODULE.contains(&c)) =>
            {
                out.opaque = true
            }
            Tok::Str { text, .. }
                if IMPORTERS.contains(&text.as_str()) || EXECUTORS.contains(&text.as_str()) =>
            {
                out.opaque = true
            }
            Tok::Str { text, exact: true } => {
                let given_to = callees[i - 1].as_deref();
                // An import or exec function's own argument is read above.
                let read_above = |c: &str| IMPORTERS.contains(&c) || EXECUTORS.contains(&c);
                if given_to.is_some_and(|c| !NAMES_NO_MODULE.contains(&c) && !read_above(c)) {
                    out.names.extend(module_named(text));
                }
            }
            _ => {}
        }
    }
}

/// For each token, the function of the innermost call whose arguments hold it (a tuple, list or
/// dict inside a call's arguments is still given to that call; a subscript's key, `x['k']`, is
/// not).
fn callees(toks: &[Tok]) -> Vec<Option<String>> {
    // Per open bracket: `Some(name)` a call, `Some("")` a subscript (hides the call around it),
    // `None` a grouping, tuple, list or dict (shows it).
    let mut open: Vec<Option<String>> = Vec::new();
    let mut out = Vec::with_capacity(toks.len());
    for (i, tok) in toks.iter().enumerate() {
        let before = i.checked_sub(1).and_then(|j| toks.get(j));
        match tok {
            Tok::Op('(') => open.push(match before {
                Some(Tok::Name(n)) => Some(n.clone()),
                _ => None,
            }),
            Tok::Op('[') if matches!(before, Some(Tok::Name(_) | Tok::Op(')' | ']'))) => {
                open.push(Some(String::new()))
            }
            Tok::Op('[' | '{') => open.push(None),
            Tok::Op(')' | ']' | '}') => {
                open.pop();
            }
            _ => {}
        }
        let callee = open.iter().rev().find_map(|c| c.clone());
        out.push(callee.filter(|c| !c.is_empty()));
    }
    out
}

/// The top-level module a string names when it reads as a dotted module name, optionally with
/// an attribute after a colon (`pkg.mod`, `pkg.mod:func`).
fn module_named(text: &str) -> Option<String> {
    let module = text.split_once(':').map_or(text, |(module, _)| module);
    let dotted = !module.is_empty() && module.split('.').all(super::namespaces::identifier);
    dotted.then(|| top(module)).flatten()
}

/// The index past the dotted name starting at `i` (a name).
fn past_dotted(toks: &[Tok], mut i: usize) -> usize {
    i += 1;
    while toks.get(i) == Some(&Tok::Op('.')) && matches!(toks.get(i + 1), Some(Tok::Name(_))) {
        i += 2;
    }
    i
}

/// The top-level module of a dotted name (`a.b` → `a`); a relative one (`.x`) names none.
fn top(dotted: &str) -> Option<String> {
    let first = dotted.split('.').next()?;
    super::namespaces::identifier(first).then(|| first.to_lowercase())
}

/// Adjacent literals (`"a" "b"`) and `+`-joined ones (`"a" + "b"`) as one.
fn concatenated(toks: Vec<Tok>) -> Vec<Tok> {
    let mut out: Vec<Tok> = Vec::with_capacity(toks.len());
    for tok in toks {
        if let Tok::Str { text, exact } = &tok {
            let joined = match out.as_slice() {
                [.., Tok::Str { .. }] => Some(out.len() - 1),
                [.., Tok::Str { .. }, Tok::Op('+')] => {
                    out.pop();
                    Some(out.len() - 1)
                }
                _ => None,
            };
            if let Some(at) = joined
                && let Tok::Str {
                    text: left,
                    exact: left_exact,
                } = &mut out[at]
            {
                left.push_str(text);
                *left_exact &= *exact;
                continue;
            }
        }
        out.push(tok);
    }
    out
}

/// The tokens of `code`, or `None` where a string literal does not end.
fn tokens(code: &str) -> Option<Vec<Tok>> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let prefix = word.to_lowercase();
            if matches!(chars.get(i), Some('\'' | '"'))
                && prefix.len() <= 2
                && prefix.chars().all(|p| "rbuft".contains(p))
            {
                let (text, next) = literal(&chars, i, prefix.contains('r'))?;
                i = next;
                let exact = !prefix.contains('f') && !prefix.contains('t');
                if prefix.contains('b') {
                    out.push(Tok::Bytes);
                } else {
                    out.push(Tok::Str { text, exact });
                }
            } else {
                out.push(Tok::Name(word));
            }
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c == '\'' || c == '"' {
            let (text, next) = literal(&chars, i, false)?;
            i = next;
            out.push(Tok::Str { text, exact: true });
        } else {
            out.push(Tok::Op(c));
            i += 1;
        }
    }
    Some(out)
}

/// The string literal opening at `start` (its quote), decoded, and the index after it.
fn literal(chars: &[char], start: usize, raw: bool) -> Option<(String, usize)> {
    let quote = chars[start];
    let triple = chars.get(start + 1) == Some(&quote) && chars.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    let mut text = String::new();
    loop {
        let c = *chars.get(i)?;
        if c == quote && (!triple || chars[i..].starts_with(&[quote, quote, quote])) {
            return Some((text, i + if triple { 3 } else { 1 }));
        }
        if c == '\n' && !triple {
            return None;
        }
        if c != '\\' {
            text.push(c);
            i += 1;
            continue;
        }
        let next = *chars.get(i + 1)?;
        i += 2;
        if raw {
            text.push('\\');
            text.push(next);
            continue;
        }
        let hex = |i: usize, n: usize| -> Option<char> {
            let digits: String = chars.get(i..i + n)?.iter().collect();
            char::from_u32(u32::from_str_radix(&digits, 16).ok()?)
        };
        match next {
            'n' => text.push('\n'),
            't' => text.push('\t'),
            'r' => text.push('\r'),
            'a' => text.push('\x07'),
            'b' => text.push('\x08'),
            'f' => text.push('\x0c'),
            'v' => text.push('\x0b'),
            '\n' => {}
            'x' | 'u' | 'U' => {
                let n = match next {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                text.push(hex(i, n)?);
                i += n;
            }
            '0'..='7' => {
                let mut value = next.to_digit(8)?;
                for _ in 0..2 {
                    match chars.get(i).and_then(|d| d.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            i += 1;
                        }
                        None => break,
                    }
                }
                text.push(char::from_u32(value)?);
            }
            // `\N{NAME}`: a character by its Unicode name, not decoded here.
            'N' => return None,
            '\\' | '\'' | '"' => text.push(next),
            other => {
                text.push('\\');
                text.push(other);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
