//! Claude Code as the gateway finds it (`CLAUDE_BIN`, else `$HOME/.npm-global/bin/claude`) and the
//! copy `scripts/run` installed: each an executable whose `--version` answers, at the version
//! `scripts/install-claude-code` pins.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::probe::{first_line, run_with_timeout};
use crate::DoctorArgs;
use crate::check::{Check, fail, ok, warn};

const VERSION_TIMEOUT: Duration = Duration::from_secs(15);

/// `scripts/install-claude-code`, whose `CLAUDE_CODE_VERSION` default is the one pin of the
/// Claude Code version (the turn bridge is tested against it).
const INSTALL_CLAUDE_CODE: &str = include_str!("../../../../scripts/install-claude-code");

/// The Claude Code version `scripts/install-claude-code` installs.
pub fn pinned_claude_code_version() -> Option<&'static str> {
    INSTALL_CLAUDE_CODE.lines().find_map(|line| {
        line.trim()
            .strip_prefix("CLAUDE_CODE_VERSION=\"${CLAUDE_CODE_VERSION:-")?
            .strip_suffix("}\"")
    })
}

/// Where `scripts/run` (through `scripts/install-claude-code`) installs Claude Code in a checkout.
fn scripts_run_claude(checkout: &Path) -> PathBuf {
    checkout.join(".tools/claude-code/node_modules/.bin/claude")
}

/// The checkout gatewayctl was built in (an ancestor of its binary holding
/// `scripts/install-claude-code`), else the current directory.
fn default_checkout() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .find(|dir| dir.join("scripts/install-claude-code").is_file())
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok())
}

/// Claude Code as the gateway finds it (`CLAUDE_BIN`, else `$HOME/.npm-global/bin/claude`), and
/// the copy `scripts/run` installed, which it passes as `CLAUDE_BIN` when none is set.
pub(super) fn checks(args: &DoctorArgs) -> Vec<Check> {
    const NAME: &str = "claude code";
    const RUN_NAME: &str = "claude code (scripts/run)";
    const FIX: &str = "run scripts/install-claude-code and set CLAUDE_BIN to the path it prints";
    if let Some(bin) = args
        .claude_bin
        .as_ref()
        .filter(|b| !b.as_os_str().is_empty())
    {
        return vec![claude_binary_check(NAME, bin)];
    }
    let installed = args
        .checkout
        .clone()
        .or_else(default_checkout)
        .map(|dir| scripts_run_claude(&dir))
        .filter(|p| p.is_file());
    let Some(home) = &args.home else {
        return vec![fail(NAME, "CLAUDE_BIN and HOME are both unset", FIX)];
    };
    let default = home.join(".npm-global").join("bin").join("claude");
    match installed {
        _ if default.exists() => {
            let mut checks = vec![claude_binary_check(NAME, &default)];
            if let Some(installed) = installed {
                checks.push(claude_binary_check(RUN_NAME, &installed));
            }
            checks
        }
        Some(installed) => vec![
            warn(
                NAME,
                format!(
                    "CLAUDE_BIN is unset and {} does not exist: scripts/run uses the copy it \
                     installed, but `gateway serve` started any other way (a service) finds none",
                    default.display()
                ),
                format!("export CLAUDE_BIN={}", installed.display()),
            ),
            claude_binary_check(RUN_NAME, &installed),
        ],
        None => vec![fail(
            NAME,
            format!(
                "{}: not found, CLAUDE_BIN is unset, and scripts/run has installed none",
                default.display()
            ),
            FIX,
        )],
    }
}

fn claude_binary_check(name: &str, path: &Path) -> Check {
    const FIX: &str = "run scripts/install-claude-code and set CLAUDE_BIN to the path it prints";
    let shown = path.display();
    let Ok(meta) = std::fs::metadata(path) else {
        return fail(name, format!("{shown}: not found"), FIX);
    };
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return fail(name, format!("{shown}: not an executable file"), FIX);
    }
    match run_with_timeout(Command::new(path).arg("--version"), VERSION_TIMEOUT) {
        Ok((true, out, _)) if !first_line(&out).is_empty() => {
            let line = first_line(&out);
            let version = line.split_whitespace().next().unwrap_or("");
            match pinned_claude_code_version() {
                Some(pinned) if version != pinned => warn(
                    name,
                    format!("{shown}: {line}, not the pinned {pinned}"),
                    format!(
                        "the gateway is tested with Claude Code {pinned}: {FIX} \
                         (scripts/install-claude-code holds the pin)"
                    ),
                ),
                _ => ok(name, format!("{shown}: {line}")),
            }
        }
        Ok((_, out, err)) => fail(
            name,
            format!(
                "{shown} --version failed: {}",
                crate::table::clip(
                    first_line(if err.trim().is_empty() { &out } else { &err }),
                    120
                )
            ),
            FIX,
        ),
        Err(e) => fail(name, format!("{shown} --version: {e}"), FIX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_comes_from_install_claude_code() {
        let pinned =
            pinned_claude_code_version().expect("CLAUDE_CODE_VERSION default in the script");
        assert!(
            pinned.split('.').count() == 3 && pinned.split('.').all(|p| p.parse::<u32>().is_ok()),
            "{pinned}"
        );
    }
}
