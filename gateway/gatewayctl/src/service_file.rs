//! `doctor`'s checks of the launchd/systemd service files: filled placeholders, the settings that
//! keep brokers alive across a gateway restart, an absolute state dir, `gateway serve`, and the
//! tunnel's https public base that ChatGPT needs.

use std::path::{Path, PathBuf};

use crate::DoctorArgs;
use crate::check::{Check, fail, ok, warn};
use crate::plist::{self, Plist};
use crate::unit::{self, Unit};

fn default_service_files(home: Option<&Path>) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Some(home) = home {
        let unit = home.join(".config/systemd/user/native-gateway.service");
        if unit.is_file() {
            found.push(unit);
        }
        if let Ok(dir) = std::fs::read_dir(home.join("Library/LaunchAgents")) {
            let mut plists: Vec<PathBuf> = dir
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension().is_some_and(|e| e == "plist")
                        && p.file_name()
                            .is_some_and(|n| n.to_string_lossy().contains("native-gateway"))
                })
                .collect();
            plists.sort();
            found.extend(plists);
        }
    }
    let system = PathBuf::from("/etc/systemd/system/native-gateway.service");
    if system.is_file() {
        found.push(system);
    }
    found
}

/// `@NAME@` placeholders left in a template.
fn placeholders(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('@') {
        let after = &rest[start + 1..];
        match after.find('@') {
            Some(end) => {
                let name = &after[..end];
                if !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                    let p = format!("@{name}@");
                    if !found.contains(&p) {
                        found.push(p);
                    }
                    rest = &after[end + 1..];
                } else {
                    rest = after;
                }
            }
            None => break,
        }
    }
    found
}

/// The service-file checks of `doctor`: the files named with `--service-file`, else the installed
/// ones.
pub(crate) fn checks(args: &DoctorArgs) -> Vec<Check> {
    let files = if args.service_file.is_empty() {
        default_service_files(args.home.as_deref())
    } else {
        args.service_file.clone()
    };
    if files.is_empty() {
        return vec![warn(
            "service file",
            "none installed (checked ~/.config/systemd/user, /etc/systemd/system, ~/Library/LaunchAgents)",
            "to run as a service see README \"Running as a service\"; or pass --service-file PATH",
        )];
    }
    let mut checks = Vec::new();
    for file in files {
        let shown = file.display().to_string();
        let text = match std::fs::read(&file) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                checks.push(fail(
                    "service file",
                    format!("{shown}: {e}"),
                    "check the path",
                ));
                continue;
            }
        };
        let holes = placeholders(&text);
        if !holes.is_empty() {
            checks.push(fail(
                "service file",
                format!("{shown}: unfilled placeholders {}", holes.join(" ")),
                "fill it with scripts/install-service",
            ));
        }
        let is_plist = file.extension().is_some_and(|e| e == "plist")
            || text.starts_with("bplist")
            || text.contains("<plist");
        if is_plist {
            checks.extend(launchd_checks(&shown, &text));
        } else {
            checks.extend(systemd_checks(&shown, &text));
        }
    }
    checks
}

fn systemd_checks(shown: &str, text: &str) -> Vec<Check> {
    let unit = Unit::parse(text);
    let mut checks = Vec::new();
    checks.push(match unit.get("Service", "KillMode") {
        Some("process") => ok("systemd KillMode", format!("{shown}: KillMode=process")),
        other => fail(
            "systemd KillMode",
            format!(
                "{shown}: KillMode={} kills the brokers when the gateway stops or restarts",
                other.unwrap_or("control-group (default)")
            ),
            "set KillMode=process in [Service]",
        ),
    });
    checks.push(match unit.env("CLAUDE_TOOLS_STATE_DIR") {
        Some(dir) if unit::is_absolute_unit_path(&dir) => ok(
            "systemd state dir",
            format!("{shown}: CLAUDE_TOOLS_STATE_DIR={dir}"),
        ),
        Some(dir) => fail(
            "systemd state dir",
            format!(
                "{shown}: CLAUDE_TOOLS_STATE_DIR={dir} is not absolute (the gateway refuses it)"
            ),
            "use an absolute path in Environment=CLAUDE_TOOLS_STATE_DIR=",
        ),
        None if unit.get("Service", "EnvironmentFile").is_some() => warn(
            "systemd state dir",
            format!(
                "{shown}: CLAUDE_TOOLS_STATE_DIR not in Environment= (maybe in EnvironmentFile=)"
            ),
            "set Environment=CLAUDE_TOOLS_STATE_DIR=/absolute/path in the unit",
        ),
        None => fail(
            "systemd state dir",
            format!("{shown}: CLAUDE_TOOLS_STATE_DIR not set (the gateway would use ./state)"),
            "add Environment=CLAUDE_TOOLS_STATE_DIR=/absolute/path to [Service]",
        ),
    });
    checks.push(match unit.get("Service", "ExecStart") {
        None => fail(
            "systemd ExecStart",
            format!("{shown}: no ExecStart="),
            "add ExecStart=/absolute/path/to/gateway serve",
        ),
        Some(line) => {
            let words = unit::exec_words(line);
            let program = words.first().map(String::as_str).unwrap_or("");
            if !program.starts_with('/') {
                warn(
                    "systemd ExecStart",
                    format!("{shown}: program {program:?} is not an absolute path"),
                    "use the gateway binary's absolute path",
                )
            } else if !words.iter().any(|w| w == "serve") {
                warn(
                    "systemd ExecStart",
                    format!("{shown}: {program} without `serve`"),
                    "run `gateway serve`",
                )
            } else {
                ok("systemd ExecStart", format!("{shown}: {program} serve"))
            }
        }
    });
    checks.push(match unit.get("Service", "Restart") {
        Some(r @ ("always" | "on-failure" | "on-abnormal")) => {
            ok("systemd Restart", format!("{shown}: Restart={r}"))
        }
        other => warn(
            "systemd Restart",
            format!("{shown}: Restart={}", other.unwrap_or("no (default)")),
            "set Restart=always",
        ),
    });
    let words = unit
        .get("Service", "ExecStart")
        .map(unit::exec_words)
        .unwrap_or_default();
    checks.push(public_base_check(
        "systemd public base",
        shown,
        PublicBase::of(&words, unit.env(PUBLIC_BASE_ENV)),
        unit.get("Service", "EnvironmentFile").is_some(),
    ));
    checks
}

fn launchd_checks(shown: &str, text: &str) -> Vec<Check> {
    let job = match plist::parse(text) {
        Ok(p) => p,
        Err(e) => {
            return vec![fail(
                "launchd plist",
                format!("{shown}: cannot read: {e}"),
                "check it with `plutil -lint FILE`",
            )];
        }
    };
    let mut checks = Vec::new();
    checks.push(match job.get("AbandonProcessGroup") {
        Some(Plist::Bool(true)) => ok(
            "launchd AbandonProcessGroup",
            format!("{shown}: true"),
        ),
        other => fail(
            "launchd AbandonProcessGroup",
            format!(
                "{shown}: {} (launchd kills the job's process group, brokers included, when the gateway exits)",
                if other.is_some() { "not true" } else { "missing" }
            ),
            "add <key>AbandonProcessGroup</key><true/>",
        ),
    });
    checks.push(match job.get("KeepAlive") {
        Some(Plist::Bool(true)) => ok("launchd KeepAlive", format!("{shown}: true")),
        Some(Plist::Dict(_)) => ok("launchd KeepAlive", format!("{shown}: conditions")),
        other => fail(
            "launchd KeepAlive",
            format!(
                "{shown}: {} (the gateway is not restarted when it exits)",
                if other.is_some() { "false" } else { "missing" }
            ),
            "add <key>KeepAlive</key><true/>",
        ),
    });
    let state_dir = job
        .get("EnvironmentVariables")
        .and_then(|env| env.get("CLAUDE_TOOLS_STATE_DIR"))
        .and_then(Plist::as_str);
    checks.push(match state_dir {
        Some(dir) if dir.starts_with('/') => ok(
            "launchd state dir",
            format!("{shown}: CLAUDE_TOOLS_STATE_DIR={dir}"),
        ),
        Some(dir) => fail(
            "launchd state dir",
            format!("{shown}: CLAUDE_TOOLS_STATE_DIR={dir} is not absolute (launchd expands neither ~ nor $HOME)"),
            "use an absolute path under EnvironmentVariables",
        ),
        None => fail(
            "launchd state dir",
            format!("{shown}: EnvironmentVariables has no CLAUDE_TOOLS_STATE_DIR"),
            "add CLAUDE_TOOLS_STATE_DIR with an absolute path to EnvironmentVariables",
        ),
    });
    let program: Vec<&str> = match job.get("ProgramArguments") {
        Some(Plist::Array(items)) => items.iter().filter_map(Plist::as_str).collect(),
        _ => Vec::new(),
    };
    checks.push(match program.first() {
        None => fail(
            "launchd ProgramArguments",
            format!("{shown}: missing"),
            "add ProgramArguments: the gateway's absolute path, then serve",
        ),
        Some(p) if !p.starts_with('/') => warn(
            "launchd ProgramArguments",
            format!("{shown}: {p:?} is not an absolute path"),
            "use the gateway binary's absolute path",
        ),
        Some(p) if !program.contains(&"serve") => warn(
            "launchd ProgramArguments",
            format!("{shown}: {p} without `serve`"),
            "add serve after the program",
        ),
        Some(p) => ok("launchd ProgramArguments", format!("{shown}: {p} serve")),
    });
    let env = job
        .get("EnvironmentVariables")
        .and_then(|env| env.get(PUBLIC_BASE_ENV))
        .and_then(Plist::as_str)
        .map(str::to_string);
    let words: Vec<String> = program.iter().map(|w| w.to_string()).collect();
    checks.push(public_base_check(
        "launchd public base",
        shown,
        PublicBase::of(&words, env),
        false,
    ));
    checks
}

/// The variable `gateway serve` reads its public base from (also `--public-base`).
const PUBLIC_BASE_ENV: &str = "CLAUDE_TOOLS_GATEWAY_PUBLIC_BASE";

/// Where a service's gateway gets its public base from, as `gateway serve` reads it: the
/// `--public-base` argument wins over the environment.
#[derive(Debug, PartialEq, Eq)]
enum PublicBase {
    Flag(String),
    Env(String),
    None,
}

impl PublicBase {
    fn of(words: &[String], env: Option<String>) -> PublicBase {
        let mut flag = None;
        let mut iter = words.iter();
        while let Some(word) = iter.next() {
            if word == "--public-base" {
                flag = iter.next().cloned();
            } else if let Some(value) = word.strip_prefix("--public-base=") {
                flag = Some(value.to_string());
            }
        }
        match (flag, env) {
            (Some(value), _) if !value.trim().is_empty() => PublicBase::Flag(value),
            (_, Some(value)) if !value.trim().is_empty() => PublicBase::Env(value),
            _ => PublicBase::None,
        }
    }
}

/// A service serves ChatGPT only through a tunnel, and a tunnel only with an https public base:
/// without one every authenticated call through it gets 403 (its Host is not accepted) and the
/// OAuth metadata points at loopback.
fn public_base_check(name: &str, shown: &str, base: PublicBase, env_file: bool) -> Check {
    const FIX: &str = "fill the file again with scripts/install-service --public-base \
                       https://YOUR-TUNNEL-HOST and reinstall it (README \"Connecting ChatGPT\")";
    let (value, source) = match base {
        PublicBase::Flag(value) => (value, "--public-base"),
        PublicBase::Env(value) => (value, PUBLIC_BASE_ENV),
        PublicBase::None if env_file => {
            return warn(
                name,
                format!(
                    "{shown}: no public base in the unit (maybe in EnvironmentFile=); without an \
                     https one ChatGPT cannot reach the gateway through a tunnel"
                ),
                FIX,
            );
        }
        PublicBase::None => {
            return warn(
                name,
                format!(
                    "{shown}: no public base: the gateway answers on loopback only; through a \
                     tunnel every call gets 403 and the OAuth metadata points at loopback"
                ),
                FIX,
            );
        }
    };
    let https = value
        .trim()
        .strip_prefix("https://")
        .is_some_and(|rest| !rest.is_empty());
    if https {
        let base = value.trim().trim_end_matches('/');
        ok(
            name,
            format!("{shown}: {source}={base} (connector URL {base}/mcp)"),
        )
    } else {
        warn(
            name,
            format!(
                "{shown}: {source}={value} is not https: ChatGPT connects only over HTTPS, \
                 through a tunnel's public address"
            ),
            FIX,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Status;

    fn words(line: &str) -> Vec<String> {
        unit::exec_words(line)
    }

    #[test]
    fn finds_the_public_base_as_the_gateway_reads_it() {
        let env = || Some("https://env.example".to_string());
        assert_eq!(
            PublicBase::of(&words("/gw serve --public-base https://a.example"), env()),
            PublicBase::Flag("https://a.example".into())
        );
        assert_eq!(
            PublicBase::of(&words("/gw serve --public-base=https://b.example"), None),
            PublicBase::Flag("https://b.example".into())
        );
        assert_eq!(
            PublicBase::of(&words("/gw serve"), env()),
            PublicBase::Env("https://env.example".into())
        );
        assert_eq!(
            PublicBase::of(&words("/gw serve"), Some(" ".into())),
            PublicBase::None
        );
        let check = |base| public_base_check("p", "f", base, false).status;
        assert_eq!(
            check(PublicBase::Env("https://x.example".into())),
            Status::Ok
        );
        assert_eq!(
            check(PublicBase::Env("http://x.example".into())),
            Status::Warn
        );
        assert_eq!(check(PublicBase::Flag("https://".into())), Status::Warn);
        assert_eq!(check(PublicBase::None), Status::Warn);
    }

    #[test]
    fn finds_placeholders() {
        assert_eq!(
            placeholders("a @GATEWAY_BIN@ b user@example.com @STATE_DIR@ @GATEWAY_BIN@"),
            vec!["@GATEWAY_BIN@", "@STATE_DIR@"]
        );
        assert!(placeholders("mail me: a@b.c").is_empty());
    }
}
