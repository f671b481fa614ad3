//! `doctor`'s lines about auto-run places (`sandbox::protected::autorun`): each class, what it
//! holds, and whether the running gateway lets sessions write it (asked over the admin socket:
//! only the running process knows its environment; without a running gateway, this shell's
//! `CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES` says what a start would do), and whether strict hooks
//! (`CLAUDE_TOOLS_STRICT_HOOKS`) are on.

use std::path::Path;

use sandbox::protected::autorun::{ALLOW_ENV, AutorunAllowed, AutorunClass};

use crate::check::{Check, ok, warn};

/// One check per class: refused (the default) is OK, allowed is a warning naming the opt-in;
/// then whether strict hooks are on.
pub(crate) fn checks(state_dir: &Path) -> Vec<Check> {
    let status = crate::oauth::gateway_status(state_dir).ok();
    let mut out = classes(status.as_ref());
    out.push(strict_hooks(status.as_ref()));
    out
}

/// The owner's strict-hooks mode (`CLAUDE_TOOLS_STRICT_HOOKS`): either state is OK (off is the
/// documented default); the detail says what it means.
fn strict_hooks(status: Option<&common::admin::GatewayStatus>) -> Check {
    use sandbox::protected::autorun::strict_hooks::{DEFINITIONS, STRICT_HOOKS_ENV, parse};
    let name = "auto-run: strict hooks";
    let (on, source) = match status {
        Some(status) => (status.strict_hooks, "the running gateway"),
        None => match parse(&std::env::var(STRICT_HOOKS_ENV).unwrap_or_default()) {
            Ok(on) => (on, "this shell's environment (gateway not running)"),
            Err(err) => {
                let fix = format!("fix {STRICT_HOOKS_ENV}: a gateway refuses to start with it");
                return warn(name, err, fix);
            }
        },
    };
    if on {
        ok(
            name,
            format!("on (per {source}): refused to writes: {DEFINITIONS}"),
        )
    } else {
        ok(
            name,
            format!(
                "off (per {source}): a git hook that runs the project's checks runs what \
                 sessions write into their definitions; {STRICT_HOOKS_ENV}=1 refuses {DEFINITIONS}"
            ),
        )
    }
}

/// One check per auto-run class.
fn classes(status: Option<&common::admin::GatewayStatus>) -> Vec<Check> {
    let (allowed, source) = match status {
        Some(status) => (
            AutorunAllowed::from_names(status.autorun_allowed.iter().map(String::as_str)),
            "the running gateway",
        ),
        None => match AutorunAllowed::parse(&std::env::var(ALLOW_ENV).unwrap_or_default()) {
            Ok(allowed) => (allowed, "this shell's environment (gateway not running)"),
            Err(err) => {
                return vec![warn(
                    "auto-run places",
                    err,
                    format!("fix {ALLOW_ENV}: a gateway refuses to start with it"),
                )];
            }
        },
    };
    AutorunClass::ALL
        .into_iter()
        .map(|class| {
            let name = format!("auto-run: {}", class.name());
            if allowed.allows(class) {
                warn(
                    &name,
                    format!("sessions MAY write {} (per {source})", class.places()),
                    format!(
                        "remove {} from {ALLOW_ENV} unless editing them is the task",
                        class.name()
                    ),
                )
            } else {
                ok(&name, format!("refused to writes: {}", class.places()))
            }
        })
        .collect()
}
