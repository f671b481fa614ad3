//! Tests of `boundary`.

use super::*;

fn plan(netns: bool, abi: Option<i32>, seccomp: bool) -> RunnerLayers {
    RunnerLayers {
        network_namespace: netns,
        landlock_abi: abi,
        seccomp,
        seatbelt: false,
    }
}

#[test]
fn seatbelt_confinement_is_described_as_such() {
    let seatbelt = RunnerLayers {
        seatbelt: true,
        ..RunnerLayers::default()
    };
    let b = describe_runner(&seatbelt, "macos");
    assert_eq!(b.network, "loopback:broker-port-only");
    assert_eq!(b.enforced_by, "macos:seatbelt");
    assert!(!b.degraded);
}

#[test]
fn full_confinement_is_not_degraded() {
    let b = describe_runner(&plan(true, Some(6), true), "linux");
    assert_eq!(b.network, "loopback:broker-port-only");
    assert_eq!(b.writes, "private-dirs-only");
    assert_eq!(b.enforced_by, "linux:netns+landlock(v6)+seccomp+nnp+caps");
    assert!(!b.degraded);
}

#[test]
fn missing_layers_are_said_plainly() {
    let old_landlock = describe_runner(&plan(true, Some(3), true), "linux");
    assert!(old_landlock.degraded);
    assert!(old_landlock.network.starts_with("loopback-only"));
    assert_eq!(old_landlock.writes, "private-dirs-only");

    let no_netns = describe_runner(&plan(false, Some(6), true), "linux");
    assert!(no_netns.degraded);
    assert!(no_netns.network.starts_with("degraded"));

    let nothing = describe_runner(&plan(false, None, false), "macos");
    assert!(nothing.degraded);
    assert!(nothing.network.starts_with("unconfined"));
    assert!(nothing.writes.starts_with("unconfined"));
    assert_eq!(nothing.enforced_by, "macos:none");

    let no_seccomp = describe_runner(&plan(true, Some(6), false), "linux");
    assert!(no_seccomp.degraded);
}

fn host(os: &str) -> crate::HostSupport {
    crate::HostSupport {
        os: os.into(),
        namespaces: os == "linux",
        landlock_abi: (os == "linux").then_some(6),
        seccomp: os == "linux",
        seatbelt: os == "macos",
        root: false,
        overlay: os == "linux",
        memory_cgroup: None,
        pids_cgroup: false,
    }
}

#[test]
fn commands_say_where_their_writes_go_on_each_host() {
    let linux = commands_text(&host("linux"), "none");
    assert!(
        linux.contains("writes go to the session's copy-on-write layer"),
        "{linux}"
    );
    let no_overlay = commands_text(
        &crate::HostSupport {
            overlay: false,
            ..host("linux")
        },
        "none",
    );
    assert!(
        no_overlay.contains("writes: read-only file system"),
        "{no_overlay}"
    );
    let macos = commands_text(&host("macos"), "none");
    for words in [
        "the project and HOME read-only (macOS has no copy-on-write layer)",
        "writable dir private to the session, kept across its commands",
        "fresh_layer",
        "CLAUDE_TOOLS_COMMAND_LAYER_MB",
        "CARGO_TARGET_DIR",
        "NGW_BUILD_DIR",
        "make building build/",
        "memory: not bounded by the sandbox on this OS",
    ] {
        assert!(macos.contains(words), "{words}: {macos}");
    }
    let none = commands_text(
        &crate::HostSupport {
            seatbelt: false,
            ..host("macos")
        },
        "refused",
    );
    assert_eq!(none, "refused");
}

#[test]
fn commands_and_runner_name_the_same_enforced_landlock_abi() {
    // A 6.18 kernel offers v7; the sandboxes enforce (and the helper reports) v6.
    let host = crate::HostSupport {
        os: "linux".into(),
        namespaces: true,
        landlock_abi: Some(7),
        seccomp: true,
        seatbelt: false,
        root: false,
        overlay: true,
        memory_cgroup: Some("v1".into()),
        pids_cgroup: false,
    };
    assert_eq!(
        host.enforced_landlock_abi(),
        Some(crate::spec::MAX_LANDLOCK_ABI)
    );
    assert!(
        host.enforced_by().contains("landlock(v6)"),
        "{}",
        host.enforced_by()
    );
    let runner = describe_runner(&plan(true, host.enforced_landlock_abi(), true), "linux");
    assert!(runner.enforced_by.contains("landlock(v6)"));
}

/// Red team 23i B4: as root, commands get a pids cgroup; the view's text and a command's receipt
/// are one function of what the helper enforces, so they name the same layers in one order.
#[test]
fn the_view_and_a_commands_receipt_describe_commands_alike() {
    let root = crate::HostSupport {
        root: true,
        pids_cgroup: true,
        memory_cgroup: Some("v2".into()),
        ..host("linux")
    };
    let view = root.enforced_by();
    assert_eq!(
        view,
        "linux:userns+mountns+netns+pidns+landlock(v6)+seccomp+nnp+caps+rlimits+pids-cgroup+memcg+overlay"
    );
    // What the helper reports for such a command (its memory cgroup's size, its masks, the
    // scratch quota do not show in the text).
    let receipt = crate::spec::Enforced {
        masked: 12,
        memory_limit_mb: Some(2048),
        memory_cgroup_mb: Some(2304),
        scratch_quota_mb: Some(256),
        layer_roots: 3,
        ..root.expected_enforced()
    };
    assert_eq!(receipt.summary(), view);
    assert!(!host("linux").enforced_by().contains("pids-cgroup"));
}
