//! `doctor`'s lines about auto-run places (`sandbox::protected::autorun`): each class, what it
//! holds, and whether the running gateway lets sessions write it (asked over the admin socket:
//! only the running process knows its environment; without a running gateway, this shell's
//! `CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES` says what a start would do).

use std::path::Path;

use sandbox::protected::autorun::{ALLOW_ENV, AutorunAllowed, AutorunClass};

use crate::check::{Check, ok, warn};

/// One check per class: refused (the default) is OK, allowed is a warning naming the opt-in.
pub(crate) fn checks(state_dir: &Path) -> Vec<Check> {
    let (allowed, source) = match crate::oauth::gateway_status(state_dir) {
        Ok(status) => (
            AutorunAllowed::from_names(status.autorun_allowed.iter().map(String::as_str)),
            "the running gateway",
        ),
        Err(_) => match AutorunAllowed::parse(&std::env::var(ALLOW_ENV).unwrap_or_default()) {
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
