//! Unit tests of the coding agents' settings read as commands.

use std::path::{Path, PathBuf};

use super::*;

fn home_with(files: &[(&str, String)]) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(tmp.path()).unwrap();
    for (rel, text) in files {
        let path = home.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    (tmp, home)
}

/// Red team 49: every spelling the agents run — escaped, relative, through the project
/// variable, after a `cd`, an MCP server's `cwd` and `-m` — names its file.
#[test]
fn agents_commands_name_their_files_however_spelled() {
    let p = "/w/p";
    let claude = format!(
        r#"{{
  // the owner's comment, and trailing commas
  "hooks": {{"SessionStart": [{{"hooks": [
    {{"type": "command", "command": "\"$CLAUDE_PROJECT_DIR\"/scripts/h_projdir.sh"}},
    {{"type": "command", "command": "./scripts/h_rel.sh"}},
    {{"type": "command", "command": "node scripts/h_node.js"}},
    {{"type": "command", "command": "\/w\/p\/h_jsonesc.sh"}},
    {{"type": "command", "command": "\u002fw/p/h_uesc.sh",}},
    {{"type": "command", "command": "cd \"$CLAUDE_PROJECT_DIR\" && make -f x.mk"}},
    {{"type": "command", "command": "uv run tools/u.py"}},
    {{"type": "command", "command": "deno run --allow-all tools/d.ts"}},
    {{"type": "command", "command": "bun run tools/b.ts"}},
    {{"type": "command", "command": "poetry run python tools/q.py"}},
  ]}}]}},
  "statusLine": {{"type": "command", "command": "bash -c 'cd {p} && ./h_status.sh'"}},
  "apiKeyHelper": "{p}/key.sh",
  "model": "./not-a-command",
}}"#
    );
    let claude_json = format!(
        r#"{{"projects": {{"{p}": {{"mcpServers": {{
  "x": {{"command": "node", "args": ["scripts/m_projrel.js"]}},
  "y": {{"command": "python3", "args": ["-m", "m_pymod"], "cwd": "{p}"}},
  "e": {{"command": "node", "args": ["srv.js"], "env": {{"NODE_OPTIONS": "--require ./c4.js"}}}}
}}}}}}}}"#
    );
    let codex = format!(
        "notify = [\"bash\", \"-c\", \"cd {p} && sh c_notify.sh\"]\n\
         [mcp_servers.y]\ncommand = \"node\"\nargs = [\"c_rel.js\"]\ncwd = \"{p}\"\n"
    );
    let qwen = format!(
        r#"{{"mcpServers": {{"q": {{"command": "{p}/qwen.sh"}}}}, "tools": {{"discoveryCommand": "./disc.sh"}}}}"#
    );
    let broken = r#"{"mcpServers": {"z": {"command": "\/w\/p\/broken.sh" "#.to_string();
    let goose = "extensions:\n  x:\n    type: stdio\n    cmd: \"\\x2fw/p/goose.sh\"\n".to_string();
    let aider = "test-cmd: ./scripts/test.sh\n".to_string();
    let (_tmp, home) = home_with(&[
        (".claude/settings.json", claude),
        (".claude.json", claude_json),
        (".codex/config.toml", codex),
        (".qwen/settings.json", qwen),
        (".kiro/settings/mcp.json", broken),
        (".config/goose/config.yaml", goose),
        (".aider.conf.yml", aider),
    ]);
    let got = of_agents(&home);
    let runs: Vec<PathBuf> = got.runs.iter().map(|r| normal(r)).collect();
    for want in [
        "h_jsonesc.sh",
        "h_uesc.sh",
        "h_status.sh",
        "key.sh",
        "m_pymod.py",
        "c_notify.sh",
        "c_rel.js",
        "qwen.sh",
        "broken.sh",
        "goose.sh",
    ] {
        assert!(runs.contains(&Path::new(p).join(want)), "{want}: {runs:?}");
    }
    for want in [
        "scripts/h_projdir.sh",
        "scripts/h_rel.sh",
        "scripts/h_node.js",
        "scripts/m_projrel.js",
        "scripts/test.sh",
        "x.mk",
        "tools/u.py",
        "tools/d.ts",
        "tools/b.ts",
        "tools/q.py",
        "disc.sh",
    ] {
        assert!(
            got.relative_sources.contains(&PathBuf::from(want)),
            "{want}: {:?}",
            got.relative_sources
        );
    }
    assert!(
        got.env
            .iter()
            .any(|(name, value)| *name == "NODE_OPTIONS" && value == "--require ./c4.js"),
        "{:?}",
        got.env
    );
    let everything = format!("{:?}{:?}", got.runs, got.relative_sources);
    assert!(!everything.contains("not-a-command"), "{everything}");
    assert!(
        !got.relative_sources.contains(&PathBuf::from("run")),
        "{everything}"
    );
}

/// `/w/p/./x` as `/w/p/x` (the places resolve the same way).
fn normal(path: &Path) -> PathBuf {
    path.components().collect()
}
