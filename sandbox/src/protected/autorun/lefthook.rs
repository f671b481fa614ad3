//! What lefthook's configuration names under names of the project's choosing (red team 25 B4:
//! an `extends:` target, `config/hooks-extra.yml`, was written): its `extends:` files and its
//! `source_dir`/`source_dir_local` script dirs, read from the configs at a working tree's top
//! (whose own names are refused by [`super::hook_managers`]). No YAML parser is trusted: the
//! keys are read as plain top-level lines (`key: value`, a block or flow list); a config that
//! mentions them in any other form, or a TOML one that mentions them, names the whole tree.

use std::path::{Path, PathBuf};

/// lefthook's config names at the top (`.config/` too), by format.
const CONFIG_STEMS: [&str; 4] = ["lefthook", ".lefthook", "lefthook-local", ".lefthook-local"];

/// The keys whose values are files or dirs lefthook runs or loads.
const KEYS: [&str; 3] = ["extends", "source_dir", "source_dir_local"];

/// The files and dirs (relative to `top`) lefthook's configs there name; `Err` (why) when a
/// config names them in a form not read here.
pub(super) fn named_places(top: &Path) -> Result<Vec<PathBuf>, &'static str> {
    let mut out = Vec::new();
    for dir in [top.to_path_buf(), top.join(".config")] {
        for stem in CONFIG_STEMS {
            for ext in ["yml", "yaml", "json", "jsonc", "toml"] {
                let Some(text) = super::read_head(&dir.join(format!("{stem}.{ext}")), 1 << 20)
                else {
                    continue;
                };
                let values = match ext {
                    "json" | "jsonc" => json_values(&text)?,
                    "toml" if KEYS.iter().any(|k| text.contains(k)) => {
                        return Err("a lefthook TOML config names extended files or script dirs");
                    }
                    "toml" => Vec::new(),
                    _ => yaml_values(&text)?,
                };
                for value in values {
                    out.push(place_of(&value)?);
                }
            }
        }
    }
    Ok(out)
}

/// A value as a place: a glob names the directory above its first pattern.
fn place_of(value: &str) -> Result<PathBuf, &'static str> {
    let mut path = PathBuf::new();
    for part in value.split('/') {
        if part.contains(['*', '?', '[', '{']) {
            break;
        }
        path.push(part);
    }
    if path.as_os_str().is_empty() || value.contains("..") || value.starts_with('$') {
        return Err("lefthook's config names files by a pattern or a path the reader cannot place");
    }
    Ok(path)
}

fn json_values(text: &str) -> Result<Vec<String>, &'static str> {
    if !KEYS.iter().any(|k| text.contains(k)) {
        return Ok(Vec::new());
    }
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|_| "a lefthook JSON config cannot be read")?;
    let mut out = Vec::new();
    for key in KEYS {
        match doc.get(key) {
            None => {}
            Some(serde_json::Value::String(s)) => out.push(s.clone()),
            Some(serde_json::Value::Array(items)) => {
                for item in items {
                    out.push(
                        item.as_str()
                            .ok_or("lefthook's extends holds a non-string")?
                            .into(),
                    );
                }
            }
            Some(_) => return Err("a lefthook JSON config names files in a form not read"),
        }
    }
    Ok(out)
}

/// The keys' values from top-level `key: value` lines and `- item` or `[a, b]` lists.
fn yaml_values(text: &str) -> Result<Vec<String>, &'static str> {
    if !KEYS.iter().any(|k| text.contains(k)) {
        return Ok(Vec::new());
    }
    let unquote = |v: &str| {
        let v = v.split(" #").next().unwrap_or("").trim();
        v.trim_matches(|c| c == '"' || c == '\'').to_string()
    };
    let mut out = Vec::new();
    let mut found = 0;
    let mut in_list = false;
    for line in text.lines() {
        if in_list {
            let item = line.trim_start();
            if line.starts_with([' ', '-']) && item.starts_with('-') {
                out.push(unquote(&item[1..]));
                continue;
            }
            if item.is_empty() || item.starts_with('#') {
                continue;
            }
            in_list = false;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if !KEYS.contains(&key) {
            continue;
        }
        found += 1;
        let value = value.split(" #").next().unwrap_or("").trim();
        if value.is_empty() {
            in_list = true;
        } else if let Some(items) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
            out.extend(items.split(',').map(unquote).filter(|s| !s.is_empty()));
        } else if value.starts_with(['&', '*', '!', '{', '|', '>']) {
            return Err("lefthook's config names files in a YAML form not read");
        } else {
            out.push(unquote(value));
        }
    }
    // Mentioned elsewhere than at a top-level key line (a flow mapping, a merge, an anchor).
    let mentions = KEYS
        .iter()
        .map(|k| text.matches(&format!("{k}:")).count())
        .sum::<usize>();
    if mentions != found {
        return Err("lefthook's config names files in a YAML form not read");
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests {
    use super::*;

    #[test]
    fn extends_and_source_dirs_are_read_and_odd_forms_fail() {
        let top = tempfile::tempdir().unwrap();
        let put = |name: &str, text: &str| std::fs::write(top.path().join(name), text).unwrap();
        put(
            "lefthook.yml",
            "extends:\n  - config/hooks-extra.yml\n  - 'ci/*.yml'\nsource_dir: tools/lh/\n\
             pre-commit:\n  commands:\n    x:\n      run: npm test\n",
        );
        put(
            "lefthook-local.yml",
            "extends: [local/a.yml, \"b.yml\"]\nsource_dir_local: .lh-local # mine\n",
        );
        let got = named_places(top.path()).unwrap();
        let want: Vec<PathBuf> = [
            "config/hooks-extra.yml",
            "ci",
            "tools/lh",
            "local/a.yml",
            "b.yml",
            ".lh-local",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(got, want);
        for odd in [
            "{extends: [x.yml]}\n",
            "base: &b\n  - x.yml\nextends: *b\n",
            "extends: '*.yml'\n",
            "extends:\n  - ../outside.yml\n",
        ] {
            put("lefthook.yml", odd);
            assert!(named_places(top.path()).is_err(), "{odd}");
        }
        std::fs::remove_file(top.path().join("lefthook.yml")).unwrap();
        std::fs::remove_file(top.path().join("lefthook-local.yml")).unwrap();
        put("lefthook.toml", "source_dir = 'x'\n");
        assert!(named_places(top.path()).is_err());
        std::fs::remove_file(top.path().join("lefthook.toml")).unwrap();
        put(
            ".lefthook.json",
            "{\"extends\": [\"cfg/x.yml\"], \"source_dir\": \"s\"}",
        );
        assert_eq!(
            named_places(top.path()).unwrap(),
            vec![PathBuf::from("cfg/x.yml"), PathBuf::from("s")]
        );
    }
}
