//! The runner's confinement as the broker establishes it: the broker's own loopback-only network
//! namespace (entered at start, before any thread), then, per launch, the runner's Landlock
//! domain and seccomp filter, checked against what the gateway asked for
//! ([`RunnerConfinement`]). Fail closed: whatever was asked for and cannot be established stops
//! the launch, so the runner never runs less confined than `network_boundary` says.

use std::path::Path;

use anyhow::bail;
use common::protocol::{BrokerSpec, RunnerConfinement};

/// The broker's network isolation, decided once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkIsolation {
    /// In its own network namespace with only loopback up.
    Loopback,
    /// Still in the host's network namespace (why, for the broker log).
    Host(String),
}

/// Enter a loopback-only network namespace. Call in the broker process before any thread exists.
pub fn enter_network_namespace() -> NetworkIsolation {
    #[cfg(target_os = "linux")]
    {
        match sandbox::linux::runner::enter_loopback_namespace() {
            Ok(_) => NetworkIsolation::Loopback,
            Err(err) => NetworkIsolation::Host(err.to_string()),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        NetworkIsolation::Host("network namespaces exist only on Linux".into())
    }
}

/// The runner's confinement, ready to apply in its child.
pub struct Prepared {
    #[cfg(target_os = "linux")]
    inner: Option<sandbox::linux::runner::PreparedRunner>,
    /// macOS: the `sandbox-exec` arguments to put before the runner's program.
    #[cfg(target_os = "macos")]
    seatbelt: Option<Vec<String>>,
}

impl Prepared {
    /// The program to execute and the arguments that go before the runner's own: `sandbox-exec`
    /// and its profile on macOS when Seatbelt was asked for, else the runner itself.
    pub fn program(&self, runner: &Path) -> (std::path::PathBuf, Vec<std::ffi::OsString>) {
        #[cfg(target_os = "macos")]
        if let Some(args) = &self.seatbelt {
            let mut prefix: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            prefix.push(runner.as_os_str().to_owned());
            return (sandbox::seatbelt::SANDBOX_EXEC.into(), prefix);
        }
        (runner.to_path_buf(), Vec::new())
    }

    /// Apply in the runner's child between fork and exec (async-signal-safe).
    pub fn apply_in_child(&self) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        if let Some(inner) = &self.inner {
            return inner.apply_in_child();
        }
        Ok(())
    }
}

/// Check that `isolation` is what `spec` asks for, and build the runner's Landlock and seccomp
/// layers: writes only under `writable`, reads everywhere except the protected set (with
/// `readable_files` allowed back), TCP connect only to `port`.
pub fn prepare(
    spec: &BrokerSpec,
    isolation: &NetworkIsolation,
    port: u16,
    writable: &[&Path],
    readable_files: &[&Path],
) -> anyhow::Result<Prepared> {
    let wanted: RunnerConfinement = spec.runner_confinement;
    if wanted.network_namespace
        && let NetworkIsolation::Host(why) = isolation
    {
        bail!("the runner's network namespace could not be set up ({why}); refusing to start it");
    }
    #[cfg(target_os = "linux")]
    {
        if wanted.landlock_abi.is_none() && !wanted.seccomp {
            return Ok(Prepared { inner: None });
        }
        let masked = sandbox::masked_paths(
            Path::new(&spec.owner_home),
            Path::new(&spec.state_dir),
            &spec
                .extra_protected
                .iter()
                .map(std::path::PathBuf::from)
                .collect::<Vec<_>>(),
        );
        // A worktree session works in the (protected) state dir: its worktree is readable again.
        let visible = sandbox::visible_under_masks(
            &masked,
            Path::new(&spec.working_directory),
            crate::places::own_worktree(spec).as_deref(),
        );
        let policy = sandbox::linux::runner::RunnerPolicy {
            masked: &masked,
            visible: &visible,
            writable,
            readable_files,
            broker_port: port,
            landlock_abi: wanted.landlock_abi,
            seccomp: wanted.seccomp,
        };
        let inner = sandbox::linux::runner::prepare(&policy)?;
        if inner.landlock_abi() != wanted.landlock_abi {
            bail!("the runner's Landlock domain is not the one asked for; refusing to start it");
        }
        Ok(Prepared { inner: Some(inner) })
    }
    #[cfg(target_os = "macos")]
    {
        if wanted.landlock_abi.is_some() || wanted.seccomp {
            bail!("Landlock and seccomp exist only on Linux; refusing to start the runner");
        }
        if !wanted.seatbelt {
            return Ok(Prepared { seatbelt: None });
        }
        if !Path::new(sandbox::seatbelt::SANDBOX_EXEC).exists() {
            bail!("sandbox-exec is missing; refusing to start the runner unconfined");
        }
        // Seatbelt matches real paths: give both spellings (`/var` is `/private/var`).
        let both = |paths: Vec<std::path::PathBuf>| -> Vec<std::path::PathBuf> {
            paths
                .into_iter()
                .flat_map(|p| {
                    let canonical = std::fs::canonicalize(&p).ok();
                    std::iter::once(p).chain(canonical)
                })
                .collect()
        };
        let home = Path::new(&spec.owner_home);
        let extra: Vec<std::path::PathBuf> = spec
            .extra_protected
            .iter()
            .map(std::path::PathBuf::from)
            .collect();
        let denied = both(sandbox::masked_paths(
            home,
            Path::new(&spec.state_dir),
            &extra,
        ));
        let visible = both(sandbox::visible_under_masks(
            &denied,
            Path::new(&spec.working_directory),
            crate::places::own_worktree(spec).as_deref(),
        ));
        let profile = sandbox::seatbelt::RunnerSeatbeltSpec {
            writable: both(writable.iter().map(|p| p.to_path_buf()).collect()),
            denied,
            readable: both(readable_files.iter().map(|p| p.to_path_buf()).collect()),
            visible,
            broker_port: port,
        };
        Ok(Prepared {
            seatbelt: Some(sandbox::seatbelt::runner_sandbox_exec_args(&profile, home)),
        })
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = (port, writable, readable_files);
        if wanted.landlock_abi.is_some() || wanted.seccomp || wanted.seatbelt {
            bail!("this OS has no runner confinement; refusing to start the runner");
        }
        Ok(Prepared {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_promised_namespace_that_is_missing_stops_the_launch() {
        let dir = tempfile::tempdir().unwrap();
        let state = crate::test_support::state(dir.path());
        let mut spec = state.spec.clone();
        spec.runner_confinement.network_namespace = true;
        let host = NetworkIsolation::Host("refused".into());
        let err = prepare(&spec, &host, 9, &[dir.path()], &[])
            .err()
            .expect("must refuse");
        assert!(err.to_string().contains("refusing to start"), "{err}");
        // Nothing promised: nothing to establish, the launch may go on.
        spec.runner_confinement = RunnerConfinement::default();
        assert!(prepare(&spec, &host, 9, &[dir.path()], &[]).is_ok());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_landlock_domain_that_cannot_be_built_stops_the_launch() {
        let dir = tempfile::tempdir().unwrap();
        let state = crate::test_support::state(dir.path());
        let mut spec = state.spec.clone();
        spec.runner_confinement.landlock_abi = Some(1);
        // A private dir that does not exist cannot be granted: fail closed, not a narrower domain.
        let missing = dir.path().join("missing");
        assert!(
            prepare(
                &spec,
                &NetworkIsolation::Loopback,
                9,
                &[missing.as_path()],
                &[]
            )
            .is_err()
        );
    }
}
