//! The state dir as the gateway keeps it: the dir, `auth/` and `run/` at 0700, the database (and
//! its WAL files), the access token and the server key at 0600, all the user's own, and the
//! database's schema version known to this gatewayctl.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::DoctorArgs;
use crate::check::{Check, Status, fail, ok, warn};
use crate::db::{DATABASE_FILE, Db, KNOWN_SCHEMA_VERSION};

/// Check that `path` is ours and grants nothing beyond `mode`.
fn private_check(name: &str, path: &Path, want_dir: bool, mode: u32, missing: Check) -> Check {
    let shown = path.display();
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return missing,
        Err(e) => {
            return fail(
                name,
                format!("{shown}: {e}"),
                "check the path and its permissions",
            );
        }
    };
    if meta.file_type().is_symlink() {
        return warn(
            name,
            format!("{shown} is a symbolic link"),
            "point CLAUDE_TOOLS_STATE_DIR at the real directory",
        );
    }
    if want_dir != meta.is_dir() {
        let kind = if want_dir { "a directory" } else { "a file" };
        return fail(name, format!("{shown} is not {kind}"), "move it aside");
    }
    let uid = rustix::process::getuid().as_raw();
    if meta.uid() != uid {
        return fail(
            name,
            format!("{shown} is owned by uid {}, not {uid}", meta.uid()),
            format!("chown {uid} {shown}"),
        );
    }
    let actual = meta.permissions().mode() & 0o7777;
    if actual & !mode != 0 {
        return fail(
            name,
            format!("{shown}: mode {actual:04o}, want {mode:04o}"),
            format!("chmod {mode:o} {shown}"),
        );
    }
    ok(name, format!("{shown}: mode {actual:04o}, owner uid {uid}"))
}

pub(super) fn checks(state_dir: &Path, args: &DoctorArgs) -> Vec<Check> {
    let first_start = "the gateway creates it on first start";
    let mut checks = vec![private_check(
        "state dir",
        state_dir,
        true,
        0o700,
        warn(
            "state dir",
            format!("{}: does not exist yet", state_dir.display()),
            format!("start the gateway once ({first_start}), or pass --state-dir"),
        ),
    )];
    if !state_dir.is_dir() {
        return checks;
    }
    for sub in ["auth", "run"] {
        let name = format!("state dir {sub}/");
        let path = state_dir.join(sub);
        let missing = warn(&name, format!("{}: missing", path.display()), first_start);
        checks.push(private_check(&name, &path, true, 0o700, missing));
    }

    let db_path = state_dir.join(DATABASE_FILE);
    let missing = warn(
        "database",
        format!("{}: missing", db_path.display()),
        first_start,
    );
    let mut db_check = private_check("database", &db_path, false, 0o600, missing);
    if db_check.status == Status::Ok {
        match Db::open(state_dir).and_then(|db| db.schema_version()) {
            Ok(v) if v > KNOWN_SCHEMA_VERSION => {
                db_check = warn(
                    "database",
                    format!(
                        "{}: schema v{v}, newer than this gatewayctl (v{KNOWN_SCHEMA_VERSION})",
                        db_path.display()
                    ),
                    "rebuild gatewayctl from the same checkout as the gateway",
                );
            }
            Ok(v) => db_check.detail.push_str(&format!(", schema v{v}")),
            Err(e) => {
                db_check = fail(
                    "database",
                    format!("{}: {e:#}", db_path.display()),
                    "check the file; restore a backup if it is damaged",
                );
            }
        }
    }
    checks.push(db_check);
    for suffix in ["-wal", "-shm"] {
        let path = state_dir.join(format!("{DATABASE_FILE}{suffix}"));
        if path.exists() {
            let name = format!("database {suffix}");
            let skip = ok(&name, "absent");
            checks.push(private_check(&name, &path, false, 0o600, skip));
        }
    }

    let token_path = state_dir.join("auth").join("access-token");
    let token_in_env = args.token.as_deref().is_some_and(|t| !t.is_empty());
    let missing = if token_in_env {
        ok(
            "access token",
            "from CLAUDE_TOOLS_GATEWAY_TOKEN (no token file needed)",
        )
    } else {
        warn(
            "access token",
            format!("{}: missing", token_path.display()),
            first_start,
        )
    };
    let mut token_check = private_check("access token", &token_path, false, 0o600, missing);
    if token_in_env && token_path.exists() && token_check.status == Status::Ok {
        token_check
            .detail
            .push_str(" (not used: the gateway takes CLAUDE_TOOLS_GATEWAY_TOKEN)");
    }
    checks.push(token_check);
    let key_path = state_dir.join("auth").join("server-key");
    let missing = warn(
        "server key",
        format!("{}: missing", key_path.display()),
        first_start,
    );
    checks.push(private_check(
        "server key",
        &key_path,
        false,
        0o600,
        missing,
    ));
    checks
}
