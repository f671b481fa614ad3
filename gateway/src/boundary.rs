//! The runner confinement every broker is told to establish (in full, or it does not start the
//! runner) and its public description, `network_boundary` in the SessionView: both from one
//! probe of the host, `sandbox::boundary`, which `gatewayctl doctor` uses too.

use common::protocol::RunnerConfinement;

use crate::state::NetworkBoundary;

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

/// `network_boundary` for a session started now on this host. The probe's description is
/// typed here; should it ever not fit, the view says the confinement is unknown and degraded
/// rather than claiming any.
pub fn network_boundary() -> NetworkBoundary {
    let described = sandbox::boundary::network_boundary();
    serde_json::from_value(described).unwrap_or_else(|err| {
        tracing::error!("network_boundary does not fit its record: {err}");
        let unknown = "unknown: the gateway could not describe this host's confinement";
        NetworkBoundary {
            runner: unknown.into(),
            runner_writes: unknown.into(),
            commands: unknown.into(),
            enforced_by: "unknown".into(),
            commands_enforced_by: "unknown".into(),
            degraded: true,
        }
    })
}

#[cfg(test)]
mod tests {
    /// The sandbox's description and the typed record must say the same fields: a field added
    /// on one side only fails here, not silently in a SessionView.
    #[test]
    fn the_host_description_fits_the_record_exactly() {
        let described = sandbox::boundary::network_boundary();
        let typed = super::network_boundary();
        assert_eq!(serde_json::to_value(&typed).unwrap(), described);
    }
}
