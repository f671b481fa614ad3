//! `package.yaml`'s hook sections (red team 25 B4): lint-staged and commitlint read
//! `package.yaml` as they read `package.json`, and it is also Haskell's hpack package file, so
//! refusing it whole would stop ordinary Haskell work. A write that adds, removes or changes a
//! top-level hook section ([`super::package_json`]'s keys) is refused as `git_hooks`; other edits
//! stay allowed. No YAML parser is trusted here: the reader takes a section as its top-level key
//! line and the indented lines under it, and fails closed (refuses the write when anything
//! changed) on what could spell a top-level key another way — a flow mapping, an explicit `?`
//! key, a merge key, an alias, a tag, an escape in a quoted key, a tab at a line's start — or a
//! hook section that holds an alias (its value may come from another section).

use super::package_json::{HOOK_SECTIONS, HookChange};

/// Whether a file of this name is read as a `package.yaml` (case-insensitively).
pub fn is_package_yaml(name: &std::ffi::OsStr) -> bool {
    super::fold(name) == "package.yaml"
}

/// The top-level sections of a document, by key, as their lines; `None` when the text uses
/// a form of key this reader does not follow.
fn sections(text: &str) -> Option<Vec<(String, Vec<&str>)>> {
    let mut out: Vec<(String, Vec<&str>)> = Vec::new();
    for line in text.trim_start_matches('\u{feff}').lines() {
        let line = line.trim_end();
        let content = line.trim_start();
        if content.is_empty() || content.starts_with('#') {
            if let Some((_, lines)) = out.last_mut() {
                lines.push(line);
            }
            continue;
        }
        if line.starts_with('\t') {
            return None;
        }
        if line.starts_with([' ', '-']) || line == "---" || line == "..." || line.starts_with('%') {
            // A section's own lines, a document marker, a directive.
            if let Some((_, lines)) = out.last_mut() {
                lines.push(line);
            }
            continue;
        }
        if line.starts_with(['{', '[', '?', '<', '&', '*', '!', '|', '>', '@', '`']) {
            return None;
        }
        let key = top_level_key(line)?;
        out.push((key, vec![line]));
    }
    Some(out)
}

/// The key of a top-level `key: value` line, quotes removed; `None` for a quoted key with an
/// escape or a line without a key.
fn top_level_key(line: &str) -> Option<String> {
    let (key, quoted) = match line.chars().next()? {
        quote @ ('"' | '\'') => {
            let rest = &line[1..];
            let end = rest.find(quote)?;
            let key = &rest[..end];
            if key.contains('\\') {
                return None;
            }
            (key.to_string(), true)
        }
        _ => (line.split(':').next()?.trim_end().to_string(), false),
    };
    if !quoted && !line.contains(':') {
        return None;
    }
    Some(key)
}

/// The first hook section whose lines differ between the old text (`None`: absent) and the
/// new one; [`HookChange::Unreadable`] when the new text is not UTF-8 or uses a form the
/// reader does not follow and differs from the old.
pub fn changed_hook_section(old: Option<&[u8]>, new: &[u8]) -> Option<HookChange> {
    let Ok(new_text) = std::str::from_utf8(new) else {
        return Some(HookChange::Unreadable);
    };
    let old_text = old.and_then(|o| std::str::from_utf8(o).ok()).unwrap_or("");
    let unchanged = old.is_some_and(|o| o == new);
    let (Some(old_sections), Some(new_sections)) = (sections(old_text), sections(new_text)) else {
        return (!unchanged).then_some(HookChange::Unreadable);
    };
    let hook_keys = HOOK_SECTIONS
        .iter()
        .copied()
        .chain(std::iter::once("config"));
    for key in hook_keys {
        let pick = |all: &Vec<(String, Vec<&str>)>| -> Vec<String> {
            all.iter()
                .filter(|(k, _)| k == key)
                .flat_map(|(_, l)| l.iter().map(|s| s.to_string()))
                .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .collect()
        };
        let (before, after) = (pick(&old_sections), pick(&new_sections));
        // An alias in a hook section takes its value from wherever the anchor is.
        if after.iter().any(|l| has_alias(l)) && !unchanged {
            return Some(HookChange::Section(key.to_string()));
        }
        if before != after {
            return Some(HookChange::Section(key.to_string()));
        }
    }
    None
}

/// Whether a line holds an alias (`*name` where a value or key starts; a quoted glob such as
/// `"*.js"` is none: an unquoted `*` there would be an alias too).
fn has_alias(line: &str) -> bool {
    let bytes = line.as_bytes();
    bytes.iter().enumerate().any(|(i, b)| {
        *b == b'*' && (i == 0 || matches!(bytes[i - 1], b' ' | b'[' | b'{' | b',' | b':'))
    })
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
