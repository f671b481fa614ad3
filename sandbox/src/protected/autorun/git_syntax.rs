//! git's configuration file syntax, read as git's `config.c` reads it: [`Entry`] and [`parse`].
//! A leaf: the account's and repositories' readers (`gitconfig`) and the owner's environment
//! (`owner_env`, git's `GIT_CONFIG_*` entries) both build on it.

/// One `key = value` of a config file; section and key lower-cased, the subsection as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub section: String,
    pub subsection: Option<String>,
    pub key: String,
    /// `None` for a bare key (a boolean true).
    pub value: Option<String>,
}

/// Parse a config file's text as git does (`config.c`): `[section]`, `[section "sub"]`,
/// `[section.sub]`, a key on the header's line, `;`/`#` comments, quotes, escapes and line
/// continuations. A malformed line is skipped (git refuses the whole file: nothing from it
/// runs, so reading more than git would only refuses more).
pub fn parse(text: &str) -> Vec<Entry> {
    let chars: Vec<char> = text.replace("\r\n", "\n").chars().collect();
    let mut i = 0;
    let mut section = String::new();
    let mut subsection = None;
    let mut out = Vec::new();
    let skip_line = |i: &mut usize| {
        while *i < chars.len() && chars[*i] != '\n' {
            *i += 1;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '#' || c == ';' {
            skip_line(&mut i);
        } else if c == '[' {
            match header(&chars, i + 1) {
                Some((name, sub, next)) => {
                    section = name;
                    subsection = sub;
                    i = next;
                }
                None => skip_line(&mut i),
            }
        } else if c.is_ascii_alphabetic() {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '-') {
                i += 1;
            }
            let key: String = chars[start..i].iter().collect::<String>().to_lowercase();
            while i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
                i += 1;
            }
            let value = match chars.get(i) {
                Some('=') => {
                    let (value, next) = value(&chars, i + 1);
                    i = next;
                    match value {
                        Some(value) => Some(value),
                        None => continue,
                    }
                }
                None | Some('\n' | '#' | ';') => {
                    skip_line(&mut i);
                    None
                }
                Some(_) => {
                    skip_line(&mut i);
                    continue;
                }
            };
            out.push(Entry {
                section: section.clone(),
                subsection: subsection.clone(),
                key,
                value,
            });
        } else {
            skip_line(&mut i);
        }
    }
    out
}

/// A section header after `[`: its name, subsection and the index after `]`.
fn header(chars: &[char], mut i: usize) -> Option<(String, Option<String>, usize)> {
    let start = i;
    while i < chars.len()
        && (chars[i].is_ascii_alphanumeric() || chars[i] == '-' || chars[i] == '.')
    {
        i += 1;
    }
    let name: String = chars[start..i].iter().collect::<String>().to_lowercase();
    if chars.get(i) == Some(&']') {
        return Some(match name.split_once('.') {
            Some((section, sub)) => (section.to_string(), Some(sub.to_string()), i + 1),
            None => (name, None, i + 1),
        });
    }
    while chars.get(i).is_some_and(|c| *c == ' ' || *c == '\t') {
        i += 1;
    }
    if chars.get(i) != Some(&'"') {
        return None;
    }
    i += 1;
    let mut sub = String::new();
    loop {
        match *chars.get(i)? {
            '"' => break,
            '\n' => return None,
            '\\' => {
                sub.push(*chars.get(i + 1)?);
                i += 2;
            }
            c => {
                sub.push(c);
                i += 1;
            }
        }
    }
    (chars.get(i + 1) == Some(&']')).then(|| (name, Some(sub), i + 2))
}

/// A value after `=`, as git's `parse_value`: `None` when malformed (an open quote at the end
/// of the line, an unknown escape), and the index of the line's end.
fn value(chars: &[char], mut i: usize) -> (Option<String>, usize) {
    let mut out = String::new();
    let (mut quote, mut comment, mut space) = (false, false, 0);
    loop {
        let Some(&c) = chars.get(i) else {
            return ((!quote).then_some(out), i);
        };
        i += 1;
        if c == '\n' {
            return ((!quote).then_some(out), i);
        }
        if comment {
            continue;
        }
        if c.is_whitespace() && !quote {
            if !out.is_empty() {
                space += 1;
            }
            continue;
        }
        if !quote && (c == ';' || c == '#') {
            comment = true;
            continue;
        }
        for _ in 0..space {
            out.push(' ');
        }
        space = 0;
        match c {
            '\\' => {
                let escaped = match chars.get(i) {
                    Some('\n') => None,
                    Some('t') => Some('\t'),
                    Some('b') => Some('\u{8}'),
                    Some('n') => Some('\n'),
                    Some(c @ ('\\' | '"')) => Some(*c),
                    _ => {
                        while i < chars.len() && chars[i] != '\n' {
                            i += 1;
                        }
                        return (None, i);
                    }
                };
                i += 1;
                out.extend(escaped);
            }
            '"' => quote = !quote,
            c => out.push(c),
        }
    }
}
