//! The pinned `sandbox-exec` helper: a helper that does not report is never called a refusal, and
//! a changed helper is never executed.

use super::*;

/// A helper whose report line is missing or malformed may have run the command, unconfined: the
/// receipt says that (`confinement_unconfirmed`, status error), never "not run", and withholds
/// the output.
#[test]
fn a_helper_that_does_not_report_is_never_called_a_refusal() {
    use sandbox::pinned_exe::PinnedExe;
    for (fake, problem) in [
        ("/bin/echo", "the sandbox helper did not report"),
        ("/bin/true", "the sandbox helper ended before reporting"),
    ] {
        let helper = std::sync::Arc::new(PinnedExe::pin(Path::new(fake)).unwrap());
        let fx = fixture_with_helper(true, Some(helper));
        let out = run(&fx, &["true"]);
        assert_eq!(out.status, ToolStatus::Error, "{fake}: {out:?}");
        assert_eq!(
            out.error_code,
            Some(OutcomeCode::ConfinementUnconfirmed),
            "{fake}: {out:?}"
        );
        assert!(out.output.contains(problem), "{fake}: {}", out.output);
        assert!(out.output.contains("it may have run"), "{}", out.output);
        assert!(!out.output.contains("not run"), "{}", out.output);
        // /bin/echo printed "sandbox-exec": withheld, only counted.
        assert!(!out.output.contains("sandbox-exec"), "{}", out.output);
        assert!(out.output.contains("output is withheld"), "{}", out.output);
    }
}

/// The helper is executed from what was pinned, never from the path: a sealed copy keeps running
/// (confined) after the installed file is replaced; a helper pinned as an open file (the fallback
/// where memfds cannot be executed) whose file changed in any way — replaced by rename, which
/// drops its link count, or modified in place — is refused before anything runs.
#[test]
fn a_changed_helper_is_never_executed() {
    use sandbox::pinned_exe::PinnedExe;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let replace = |install: &Path| {
        let fake = dir.path().join("fake");
        tests::executables::write(&fake, &format!("#!/bin/sh\ntouch {}\n", marker.display()))
            .unwrap();
        std::fs::rename(&fake, install).unwrap();
    };
    let installed = |name: &str| {
        let path = dir.path().join(name);
        tests::executables::copy(Path::new(GATEWAY), &path).unwrap();
        path
    };

    let install = installed("sealed");
    let fx = fixture_with_helper(
        true,
        Some(std::sync::Arc::new(PinnedExe::pin(&install).unwrap())),
    );
    if !confinable(&fx) {
        return;
    }
    replace(&install);
    let out = run(&fx, &["true"]);
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    assert!(out.output.contains("sandbox: linux:"), "{}", out.output);

    let refused = |out: &ActionOutcome| {
        assert_eq!(out.status, ToolStatus::Rejected, "{out:?}");
        assert_eq!(out.error_code, Some(OutcomeCode::SandboxUnavailable));
        assert!(
            out.output
                .contains("the pinned executable changed since the gateway verified it"),
            "{}",
            out.output
        );
    };
    let install = installed("open-file-renamed");
    let fx = fixture_with_helper(
        true,
        Some(std::sync::Arc::new(
            PinnedExe::pin_open_file(&install).unwrap(),
        )),
    );
    replace(&install);
    refused(&run(&fx, &["true"]));

    let install = installed("open-file-modified");
    let fx = fixture_with_helper(
        true,
        Some(std::sync::Arc::new(
            PinnedExe::pin_open_file(&install).unwrap(),
        )),
    );
    std::thread::sleep(Duration::from_millis(20));
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&install)
        .unwrap();
    std::io::Write::write_all(&mut f, b"\0").unwrap();
    drop(f);
    refused(&run(&fx, &["true"]));
    assert!(!marker.exists(), "a replacement ran");

    // No verified helper at all: refused, not run.
    let fx = fixture_with_helper(true, None);
    let out = run(&fx, &["true"]);
    assert_eq!(
        out.error_code,
        Some(OutcomeCode::SandboxUnavailable),
        "{out:?}"
    );
    assert!(
        out.output.contains("no verified sandbox helper"),
        "{}",
        out.output
    );
}
