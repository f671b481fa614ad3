//! A minimal reader of systemd unit files: sections, `Key=Value` assignments (later ones win, an
//! empty one resets), line continuations, and the quoting of `Environment=` and `ExecStart=`.

/// A parsed unit file.
#[derive(Debug, Clone, Default)]
pub struct Unit {
    /// `(section, key, value)` in file order.
    entries: Vec<(String, String, String)>,
}

impl Unit {
    pub fn parse(text: &str) -> Unit {
        let mut entries = Vec::new();
        let mut section = String::new();
        let mut pending = String::new();
        for raw in text.lines() {
            let line = raw.trim();
            if pending.is_empty() && (line.starts_with('#') || line.starts_with(';')) {
                continue;
            }
            if let Some(cont) = line.strip_suffix('\\') {
                pending.push_str(cont);
                pending.push(' ');
                continue;
            }
            let line = if pending.is_empty() {
                line.to_string()
            } else {
                let joined = format!("{pending}{line}");
                pending.clear();
                joined
            };
            if line.is_empty() {
                continue;
            }
            if line.starts_with('[') && line.ends_with(']') {
                section = line[1..line.len() - 1].trim().to_string();
                continue;
            }
            if let Some((key, value)) = line.split_once('=') {
                entries.push((
                    section.clone(),
                    key.trim().to_string(),
                    value.trim().to_string(),
                ));
            }
        }
        Unit { entries }
    }

    /// The effective value of `key` in `section`: the last assignment, `None` if unset or reset.
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|(s, k, _)| s == section && k == key)
            .map(|(_, _, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    /// All assignments of `key` in `section` since the last reset, in order.
    pub fn all(&self, section: &str, key: &str) -> Vec<&str> {
        let mut out = Vec::new();
        for (s, k, v) in &self.entries {
            if s == section && k == key {
                if v.is_empty() {
                    out.clear();
                } else {
                    out.push(v.as_str());
                }
            }
        }
        out
    }

    /// The `Environment=` variables of `[Service]` (later assignments win).
    pub fn environment(&self) -> Vec<(String, String)> {
        let mut vars: Vec<(String, String)> = Vec::new();
        for line in self.all("Service", "Environment") {
            for word in split_words(line) {
                if let Some((name, value)) = word.split_once('=') {
                    vars.retain(|(n, _)| n != name);
                    vars.push((name.to_string(), value.to_string()));
                }
            }
        }
        vars
    }

    pub fn env(&self, name: &str) -> Option<String> {
        self.environment()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }
}

/// Split a systemd command line or environment list into words, honouring double and single
/// quotes and backslash escapes.
pub fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (_, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                in_word = true;
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The program and arguments of an `ExecStart=` line, without its `@-:+!` prefixes.
pub fn exec_words(line: &str) -> Vec<String> {
    let mut words = split_words(line);
    if let Some(first) = words.first_mut() {
        *first = first
            .trim_start_matches(['@', '-', ':', '+', '!'])
            .to_string();
    }
    words
}

/// A path systemd will see as absolute: `/…`, or a specifier that expands to an absolute path.
pub fn is_absolute_unit_path(path: &str) -> bool {
    path.starts_with('/')
        || ["%h", "%S", "%C", "%L", "%t", "%E", "%T", "%V"]
            .iter()
            .any(|spec| path.starts_with(spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        let unit = Unit::parse(
            "[Unit]\nDescription=x\n# KillMode=none\n[Service]\nKillMode=control-group\n\
             KillMode=process\nEnvironment=\"A=b c\" D=e\nEnvironment=D=f \\\n  G=h\n\
             ExecStart=-/opt/gw serve --listen 127.0.0.1:8787\n",
        );
        assert_eq!(unit.get("Service", "KillMode"), Some("process"));
        assert_eq!(unit.env("A").as_deref(), Some("b c"));
        assert_eq!(unit.env("D").as_deref(), Some("f"));
        assert_eq!(unit.env("G").as_deref(), Some("h"));
        assert_eq!(
            exec_words(unit.get("Service", "ExecStart").unwrap()),
            vec!["/opt/gw", "serve", "--listen", "127.0.0.1:8787"]
        );
        let reset =
            Unit::parse("[Service]\nKillMode=process\nKillMode=\nEnvironment=A=1\nEnvironment=\n");
        assert_eq!(reset.get("Service", "KillMode"), None);
        assert!(reset.environment().is_empty());
        assert!(is_absolute_unit_path("%h/state"));
        assert!(!is_absolute_unit_path("state"));
    }
}
