//! Tests of the command cgroups: which are touched, the sweep, the counters, the gateway's
//! parent bounding all commands together.

use super::*;

#[test]
fn only_command_cgroups_are_touched() {
    assert!(is_command_cgroup(Path::new(
        "/sys/fs/cgroup/memory/x/native-gateway-cmd-0123456789abcdef"
    )));
    assert!(!is_command_cgroup(Path::new("/sys/fs/cgroup/memory/x")));
    assert!(!is_command_cgroup(Path::new(
        "/tmp/native-gateway-cmd-0123456789abcdef"
    )));
    assert!(!is_command_cgroup(Path::new(
        "/sys/fs/cgroup/../tmp/native-gateway-cmd-1"
    )));
}

/// Empty command cgroups older than a minute go, in a gateway's parent too, and then the
/// parent; younger ones (a helper's about to be joined) stay. Where this process may make none,
/// the probe says so too.
#[test]
fn orphans_are_swept_and_young_ones_kept() {
    let Some(parent) = wanted_parent() else {
        assert!(probe().is_none());
        return;
    };
    let dir = |age: &str| {
        parent
            .dir()
            .join(format!("{PREFIX}sweeptest-{age}-{}", std::process::id()))
    };
    let (old, young) = (dir("old"), dir("young"));
    std::fs::create_dir(&old).unwrap();
    std::fs::create_dir(&young).unwrap();
    // A gateway gone long ago: its parent, and an idle session's cgroup in it.
    let gone = MemoryGroup {
        gateway: MemoryGroup::key(&format!("sweep-test-{}", std::process::id())),
        bytes: 64 << 20,
        session: Some(1),
    };
    let group = ensure_group(&parent, gone.gateway, gone.bytes).unwrap();
    let session = make(&parent, 32 << 20, 64, Some(&gone)).unwrap().dir;
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(7200);
    for dir in [&old, &session, &group] {
        std::fs::File::open(dir)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    }
    sweep_orphans();
    assert!(!old.exists());
    assert!(!session.exists());
    assert!(!group.exists());
    assert!(young.exists());
    assert!(remove(&young));
    assert!(!remove(Path::new("/tmp")));
}

#[test]
fn counters_are_read_from_either_version() {
    let dir = std::env::temp_dir().join(format!("ngw-oom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
    )
    .unwrap();
    std::fs::write(dir.join("memory.limit_in_bytes"), "67108864\n").unwrap();
    std::fs::write(dir.join("memory.max_usage_in_bytes"), "1048576\n").unwrap();
    let below = MemoryCounters {
        oom_kills: 2,
        own_limit: 0,
    };
    assert_eq!(counters(&dir), below);
    // The memory+swap mark counts too, within the slack.
    std::fs::write(
        dir.join("memory.memsw.max_usage_in_bytes"),
        (67108864 - V1_SLACK).to_string(),
    )
    .unwrap();
    let reached = MemoryCounters {
        oom_kills: 2,
        own_limit: 1,
    };
    assert_eq!(counters(&dir), reached);
    std::fs::write(
        dir.join("memory.events"),
        "low 0\nhigh 0\nmax 4\noom 1\noom_kill 5\n",
    )
    .unwrap();
    let v2 = MemoryCounters {
        oom_kills: 5,
        own_limit: 1,
    };
    assert_eq!(counters(&dir), v2);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(counters(&dir), MemoryCounters::default());
}

/// The cgroup version these tests must find: `NGW_TEST_CGROUP=v2` (or `v1`) makes a host
/// without it fail loudly; unset, whatever the host has is tested (v1 here).
fn wanted_parent() -> Option<Parent> {
    let found = parent();
    match std::env::var("NGW_TEST_CGROUP").ok().as_deref() {
        Some(version @ ("v1" | "v2")) => {
            let parent = found.unwrap_or_else(|| {
                panic!("NGW_TEST_CGROUP={version}: this process may make no memory cgroup")
            });
            assert_eq!(parent.version(), version, "NGW_TEST_CGROUP: {parent:?}");
            Some(parent)
        }
        _ => found,
    }
}

/// The gateway's parent: made once with the bound of all its commands, hierarchical; a
/// session's cgroup in it is reused by its commands (same directory, counters kept), a
/// per-command one is not; the parent goes once empty, the session's cgroup with its broker.
#[test]
fn commands_of_a_gateway_share_one_bounded_parent() {
    let Some(parent) = wanted_parent() else {
        return;
    };
    let gateway = MemoryGroup::key(&format!("cgroup-test-{}", std::process::id()));
    let group = MemoryGroup {
        gateway,
        bytes: 300 << 20,
        session: Some(MemoryGroup::key("a session")),
    };
    let limit_file = match parent {
        Parent::V2 { .. } => "memory.max",
        Parent::V1 { .. } => "memory.limit_in_bytes",
    };
    let dir = ensure_group(&parent, gateway, group.bytes).unwrap();
    assert_eq!(dir, group_dir(&parent, gateway));
    let limit = |dir: &Path| std::fs::read_to_string(dir.join(limit_file)).unwrap();
    assert_eq!(limit(&dir).trim(), (300u64 << 20).to_string());
    if let Parent::V1 { .. } = parent {
        assert!(hierarchical(&dir));
    } else {
        let enabled = controllers(&dir.join("cgroup.subtree_control"));
        assert!(enabled.iter().any(|c| c == "memory"), "{enabled:?}");
    }
    // Joining would move this test process: the cgroups are made (or found) and bounded only.
    let made = |group: MemoryGroup| make(&parent, 100 << 20, 64, Some(&group)).unwrap().dir;
    let first = made(group);
    let second = made(group);
    assert_eq!(first, second);
    assert_eq!(Some(first.clone()), session_dir(&parent, &group));
    assert_eq!(limit(&first).trim(), (100u64 << 20).to_string());
    let per_command = made(MemoryGroup {
        session: None,
        ..group
    });
    assert_ne!(per_command, first);
    assert_eq!(per_command.parent(), Some(dir.as_path()));
    assert!(remove(&per_command));
    assert!(
        !remove_group(&parent, gateway),
        "the session's cgroup is left"
    );
    assert!(remove_session_at(&parent, &group));
    assert!(remove_group(&parent, gateway));
    assert!(!dir.exists());
}
