//! fish's side of the owner's files: `set` and its exported lists, the universal variables of
//! `fish_variables`.

use std::path::Path;

use super::super::shell_words::{self, Dialect, Word};
use super::{At, MAX_FILE, Reader};

impl Reader {
    /// fish's `set`: with `-x`/`--export` an exported list; `-a`/`-p` (`--append`,
    /// `--prepend`) add to a list (exported before, or later: read either way).
    pub(super) fn fish_set(&mut self, args: &[Word], at: At) {
        let flags = args
            .iter()
            .take_while(|w| w.literal().is_some_and(|w| w.starts_with('-')))
            .filter_map(|w| w.literal())
            .collect::<Vec<_>>();
        let short = |letter: char| {
            flags
                .iter()
                .any(|f| !f.starts_with("--") && f.contains(letter))
        };
        let long = |name: &str| flags.iter().any(|f| f == name);
        let appended = short('a') || long("--append");
        let prepended = short('p') || long("--prepend");
        let rest = &args[flags.len()..];
        let [name, values @ ..] = rest else {
            return;
        };
        let Some(name) = name.literal() else {
            return;
        };
        // Not exported (`set -l X …`, `set X …`) it is still a value later words expand (red
        // team 40: `set -l d …; set -gx PYTHONPATH $d/lib` refused every write), and `set X`
        // of a variable exported before stays exported: read either way.
        if values.is_empty() {
            return;
        }
        let elements: Vec<String> = values
            .iter()
            .flat_map(|v| shell_words::brace_expand(v, Dialect::Fish))
            .flat_map(|v| self.expand(&v, at, 0))
            .collect();
        let joiner = if name.ends_with("PATH") { ":" } else { " " };
        // Each element alone too: what reads the value as a list of its own (`PERL5LIB`'s
        // `:`) is read for every element (fail closed).
        if elements.len() > 1 && joiner == " " || appended || prepended {
            for value in &elements {
                self.assign(&name, value.clone(), at);
            }
        }
        let joined = elements.join(joiner);
        let mut whole = vec![joined.clone()];
        if appended || prepended {
            for old in self.lookup(&name, at).unwrap_or_default() {
                if old.is_empty() {
                    continue;
                }
                whole.push(if appended {
                    format!("{old}{joiner}{joined}")
                } else {
                    format!("{joined}{joiner}{old}")
                });
            }
        }
        for value in whole {
            self.assign(&name, value, at);
        }
    }

    /// fish's universal variables (`set -Ux`), kept in `fish_variables`: `SETUVAR --export
    /// NAME:value`, `\xHH` escapes, list elements separated by `\x1e`.
    pub(super) fn fish_universal(&mut self, path: &Path) {
        let Some(text) = super::super::read_head(path, MAX_FILE) else {
            return;
        };
        for line in text.lines() {
            // `--path` marks a path list (red team 40: `set -Ux PYTHONPATH` writes it), in
            // either order with `--export`.
            let words: Vec<&str> = line.split(' ').collect();
            let flags = words.iter().skip(1).take_while(|w| w.starts_with("--"));
            if words.first() != Some(&"SETUVAR") || !flags.clone().any(|f| *f == "--export") {
                continue;
            }
            let skip = 1 + flags.count();
            let rest = words[skip..].join(" ");
            let rest = rest.as_str();
            let Some((name, value)) = rest.split_once(':') else {
                continue;
            };
            let value = unescape_fish(value);
            let joiner = if name.ends_with("PATH") { ":" } else { " " };
            let elements: Vec<&str> = value.split('\u{1e}').collect();
            let at = At { dir: None };
            if elements.len() > 1 {
                for element in &elements {
                    self.assign(name, (*element).to_string(), at);
                }
            }
            self.assign(name, elements.join(joiner), at);
        }
    }
}

/// fish's `\xHH` escapes of `fish_variables` decoded.
fn unescape_fish(text: &str) -> String {
    let mut bytes = Vec::new();
    let raw = text.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\'
            && raw.get(i + 1) == Some(&b'x')
            && let Some(byte) = text
                .get(i + 2..i + 4)
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
        {
            bytes.push(byte);
            i += 4;
            continue;
        }
        bytes.push(raw[i]);
        i += 1;
    }
    String::from_utf8_lossy(&bytes).into_owned()
}
