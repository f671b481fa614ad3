//! `doctor`: checks of the Claude Code binary (`claude`), the state dir's modes and owner
//! (`state_dir`), the user it runs as (root is warned about) and this host's sandbox support and
//! the confinement a session started now would get (`host`), what RunCommand gets (`commands`),
//! the protected set (`protected`), and the launchd/systemd service files (`service_file`). Each
//! check is OK, WARN or FAIL with a one-line fix; any FAIL makes the command fail.

mod claude;
mod commands;
mod host;
mod probe;
mod protected;
mod state_dir;

use std::io::Write;
use std::path::Path;

use serde_json::json;

use crate::check::Status;
use crate::{DoctorArgs, Reported, write_json};

/// `doctor`.
pub fn run(
    state_dir: &Path,
    args: &DoctorArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let mut checks = claude::checks(args);
    checks.extend(state_dir::checks(state_dir, args));
    if !args.skip_host_probes {
        checks.push(host::user_check(rustix::process::geteuid().as_raw()));
        checks.push(host::userns_check());
        checks.push(host::landlock_check());
        checks.push(host::seccomp_check());
        // The running gateway's own report, asked once: what its sessions get.
        let running = crate::oauth::gateway_status(state_dir);
        let reported = running.as_ref().ok().and_then(|s| s.confinement.as_ref());
        checks.push(host::runner_check(&running));
        checks.push(commands::layer_check(reported));
        checks.push(commands::memory_check());
        checks.extend(commands::path_checks(state_dir, args.home.as_deref()));
        checks.extend(protected::checks(state_dir, args.home.as_deref()));
    }
    checks.extend(crate::service_file::checks(args));
    checks.push(crate::oauth::auth_check(state_dir));
    checks.extend(crate::autorun::checks(state_dir));

    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    let (oks, warns, fails) = (count(Status::Ok), count(Status::Warn), count(Status::Fail));
    if json {
        write_json(
            out,
            &json!({
                "checks": checks,
                "summary": {"ok": oks, "warn": warns, "fail": fails},
            }),
        )?;
    } else {
        let width = checks.iter().map(|c| c.name.len()).max().unwrap_or(0);
        for c in &checks {
            writeln!(
                out,
                "{:<4}  {:<width$}  {}",
                c.status.as_str(),
                c.name,
                c.detail
            )?;
            if let Some(fix) = &c.fix {
                writeln!(out, "{:<4}  {:<width$}  fix: {fix}", "", "")?;
            }
        }
        writeln!(out)?;
        writeln!(out, "{oks} ok, {warns} warn, {fails} fail")?;
    }
    if fails > 0 {
        return Err(Reported(format!("doctor: {fails} check(s) failed")).into());
    }
    Ok(())
}
