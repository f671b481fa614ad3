//! Coding agents' user settings read as the commands they hold (red team 49): hooks, status
//! lines, key helpers, notifiers and MCP servers are shell lines or programs with arguments that
//! the agent runs unconfined, in whatever project the owner opens it, with that project as
//! their working directory. The spelling scan of tool configs (`startup_links::named`) took only
//! literal absolute paths from their text, and missed JSON escapes (`"\/p\/x.sh"`,
//! `"\u002fp/x.sh"`), the documented `"$CLAUDE_PROJECT_DIR"/scripts/x.sh`, relative commands
//! (`./x.sh`, `node x.js`), `cd /p && ./x` and an MCP server's `cwd`. Here each file is parsed
//! (JSON with comments, TOML, YAML), every command found is made a shell line (`cd CWD && PROGRAM
//! ARGS…`, the project-dir variables as `.`), and the lines go through the shell start-up
//! reader: absolute runs name files, runs by a relative path name files at every depth of
//! every tree (the project the agent is opened in may be any of them).

use std::path::Path;

use serde_json::Value;

use super::{Assigned, MARK, Reader};

/// A settings file's format.
#[derive(Clone, Copy)]
pub(in crate::protected::autorun) enum Format {
    /// JSON with comments and trailing commas (JSON5).
    Json,
    Toml,
    Yaml,
}

use Format::{Json, Toml, Yaml};

/// The agents' user settings files, relative to a home, and their formats.
pub(in crate::protected::autorun) const AGENT_FILES: &[(&str, Format)] = &[
    (".claude/settings.json", Json),
    (".claude/settings.local.json", Json),
    (".claude.json", Json),
    (".codex/config.toml", Toml),
    (".gemini/settings.json", Json),
    (".qwen/settings.json", Json),
    (".cursor/mcp.json", Json),
    (".codeium/windsurf/mcp_config.json", Json),
    (".kiro/settings/mcp.json", Json),
    (".aws/amazonq/mcp.json", Json),
    (".factory/mcp.json", Json),
    (".config/Claude/claude_desktop_config.json", Json),
    (".config/amp/settings.json", Json),
    (".config/crush/crush.json", Json),
    (".config/opencode/opencode.json", Json),
    (".config/opencode/opencode.jsonc", Json),
    (".config/opencode/config.json", Json),
    (".continue/config.json", Json),
    (".config/zed/settings.json", Json),
    (".config/Code/User/mcp.json", Json),
    (".config/Code/User/settings.json", Json),
    (".config/Cursor/User/settings.json", Json),
    (".continue/config.yaml", Yaml),
    (".aider.conf.yml", Yaml),
    (".config/goose/config.yaml", Yaml),
];

/// Keys whose string value is a shell line the agent runs.
const LINE_KEYS: &[&str] = &[
    "apiKeyHelper",
    "awsAuthRefresh",
    "awsCredentialExport",
    "otelHeadersHelper",
    "toolDiscoveryCommand",
    "toolCallCommand",
    "discoveryCommand",
    "callCommand",
    // aider runs these after every edit.
    "lint-cmd",
    "test-cmd",
];

/// Keys whose array value is a program and its arguments (Codex's `notify`).
const ARGV_KEYS: &[&str] = &["notify"];

/// Variables that name the project the agent runs in (its working directory for hooks).
const PROJECT_VARS: &[&str] = &[
    "${CLAUDE_PROJECT_DIR}",
    "$CLAUDE_PROJECT_DIR",
    "${workspaceFolder}",
    "${GEMINI_PROJECT_DIR}",
    "$GEMINI_PROJECT_DIR",
];

/// Most lines taken from one home's agent settings.
const MAX_LINES: usize = 4096;

/// What the agents' user settings under `home` run, read as shell lines.
pub(in crate::protected::autorun) fn of_agents(home: &Path) -> Assigned {
    let mut reader = Reader {
        home: Some(home.to_string_lossy().into_owned()),
        ..Reader::default()
    };
    for (file, format) in AGENT_FILES {
        let path = home.join(file);
        let Some(text) = super::super::read_head(&path, super::MAX_FILE) else {
            continue;
        };
        reader.read.push(path);
        let mut lines = Vec::new();
        match parse(&text, *format) {
            Some(value) => command_lines(&value, &mut lines),
            // Not readable as its format: the agent does not run it either, but its strings
            // may still be read by another version: every quoted string is a line.
            None => lines.extend(quoted_strings(&text)),
        }
        for line in lines.into_iter().take(MAX_LINES) {
            // Each runs on its own, from the project (no `cd` carries over).
            reader.shell_cwd = None;
            reader.code(&project_dir_as_here(&line), super::At { dir: None }, 0);
        }
    }
    Assigned::new(reader)
}

/// The document in its format.
fn parse(text: &str, format: Format) -> Option<Value> {
    use crate::protected::autorun::js_configs::{json5_value, yaml_value};
    match format {
        Format::Json => json5_value(text),
        Format::Toml => serde_json::to_value(toml::from_str::<toml::Value>(text).ok()?).ok(),
        Format::Yaml => yaml_value(text),
    }
}

/// Every command `value` holds, as a shell line.
fn command_lines(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            // `{"command": …, "args": […], "cwd": …}` (MCP servers, hooks, status lines) and
            // goose's `cmd`.
            for key in ["command", "cmd"] {
                let Some(command) = map.get(key) else {
                    continue;
                };
                let args: Vec<String> = match map.get("args") {
                    Some(Value::Array(args)) => args.iter().filter_map(string_of).collect(),
                    _ => Vec::new(),
                };
                let line = match command {
                    // A hook's or status line's command is a shell line; with arguments, an
                    // MCP server's is a program.
                    Value::String(line) if args.is_empty() => line.clone(),
                    Value::String(program) => {
                        argv_line(std::iter::once(program.clone()).chain(args))
                    }
                    Value::Array(argv) => argv_line(argv.iter().filter_map(string_of).chain(args)),
                    _ => continue,
                };
                // Its environment first (`"env": {"NODE_OPTIONS": "--require ./x.js"}`).
                let exports: String = match map.get("env") {
                    Some(Value::Object(env)) => env
                        .iter()
                        .filter(|(name, _)| {
                            crate::protected::autorun::shell_words::is_variable_name(name)
                        })
                        .filter_map(|(name, value)| {
                            Some(format!("export {name}={}; ", quote(value.as_str()?)))
                        })
                        .collect(),
                    _ => String::new(),
                };
                match map.get("cwd").and_then(Value::as_str) {
                    Some(cwd) => out.push(format!("{exports}cd {} && {line}", quote(cwd))),
                    None => out.push(format!("{exports}{line}")),
                }
            }
            for (key, child) in map {
                match child {
                    Value::String(line) if LINE_KEYS.contains(&key.as_str()) => {
                        out.push(line.clone());
                    }
                    Value::Array(argv) if ARGV_KEYS.contains(&key.as_str()) => {
                        out.push(argv_line(argv.iter().filter_map(string_of)));
                    }
                    _ => command_lines(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| command_lines(item, out)),
        _ => {}
    }
}

fn string_of(value: &Value) -> Option<String> {
    value.as_str().map(str::to_string)
}

/// A program and its arguments as one shell line, each word quoted.
fn argv_line(words: impl Iterator<Item = String>) -> String {
    words.map(|w| quote(&w)).collect::<Vec<_>>().join(" ")
}

/// `word` single-quoted for a POSIX shell (a project-dir variable stays expandable: it is
/// replaced before the line is read).
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

/// The line with the variables naming the project (the agent's working directory) as `.`;
/// a quoted one (`"$CLAUDE_PROJECT_DIR"/x`) too.
fn project_dir_as_here(line: &str) -> String {
    let mut line = line.to_string();
    for var in PROJECT_VARS {
        for spelled in [format!("\"{var}\""), format!("'{var}'"), var.to_string()] {
            line = line.replace(&spelled, ".");
        }
    }
    // A reader's mark never comes from the owner's text.
    line.replace(MARK, "")
}

/// The strings of a document that does not parse, decoded as JSON strings where they can be.
fn quoted_strings(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let mut end = None;
        let mut escaped = false;
        for (i, c) in after.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let Some(end) = end else { break };
        let raw = &after[..end];
        let decoded = serde_json::from_str::<String>(&format!("\"{raw}\""))
            .unwrap_or_else(|_| raw.to_string());
        out.push(decoded);
        rest = &after[end + 1..];
    }
    out
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests;
