//! The runner confinement every broker is told to establish (in full, or it does not start the
//! runner) and its public description, `network_boundary` in the SessionView: both from one
//! probe of the host, `sandbox::boundary`, which `gatewayctl doctor` uses too.

use common::protocol::RunnerConfinement;
use serde_json::Value;

/// The runner confinement this host supports; brokers must establish all of it.
pub fn runner_confinement() -> RunnerConfinement {
    let layers = sandbox::boundary::runner_layers();
    RunnerConfinement {
        network_namespace: layers.network_namespace,
        landlock_abi: layers.landlock_abi,
        seccomp: layers.seccomp,
        seatbelt: layers.seatbelt,
    }
}

/// `network_boundary` for a session started now on this host.
pub fn network_boundary() -> Value {
    sandbox::boundary::network_boundary()
}
