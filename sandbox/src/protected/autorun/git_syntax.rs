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
    // git skips a UTF-8 byte order mark (read as a first line, it hid the first header: review).
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
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

/// The white space of git's `isspace` (`sane_ctype`): ASCII only, CR included.
fn git_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
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
    // git's `isspace` (SP, HT, LF, CR) separates the name from its subsection: a lone CR there
    // (`[includeIf\r"gitdir:/"]`) still opens an include to git.
    while chars.get(i).copied().is_some_and(git_space) {
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
        if git_space(c) && !quote {
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

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<(String, Option<String>, String, Option<String>)> {
        parse(text)
            .into_iter()
            .map(|e| (e.section, e.subsection, e.key, e.value))
            .collect()
    }

    /// The whole-diff review: git's white space is ASCII with CR (a lone CR between an
    /// `includeIf` and its subsection still opens an include to git), a byte order mark is
    /// skipped, and a value keeps a trailing non-ASCII space (git trims only its own).
    #[test]
    fn cr_between_name_and_subsection_bom_and_ascii_space_read_as_git_reads_them() {
        let include = |text: &str| {
            read(text).into_iter().any(|(s, sub, k, v)| {
                s == "includeif"
                    && sub.as_deref() == Some("gitdir:/")
                    && k == "path"
                    && v.as_deref() == Some("/x/evil")
            })
        };
        assert!(include("[includeIf\r\"gitdir:/\"]\npath=/x/evil\n"));
        assert!(include(
            "\u{feff}[includeIf \"gitdir:/\"]\n\tpath = /x/evil\r\n"
        ));
        let value = read("[core]\nhooksPath = /h\u{2028}\n");
        assert_eq!(value[0].3.as_deref(), Some("/h\u{2028}"));
        let bom = read("\u{feff}[core]\nhooksPath = /h\n");
        assert_eq!(bom[0].0, "core");
    }
}
