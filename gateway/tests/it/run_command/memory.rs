//! A command's memory across all its processes and shared mappings (issue 24 item 5): where the
//! host gives commands a memory cgroup, a shared `/dev/zero` mapping or several processes beyond
//! the command's bound are killed with `memory_limit_exceeded`, naming the variable; without one,
//! a writable `/dev/zero` is refused. memfd and shared anonymous memory are refused everywhere.
//! The cgroup is gone once the command has ended.

use super::*;

const MEMORY_MB: u64 = 128;
const SCRATCH_MB: u64 = 64;

/// `cgroup: false` exercises the fallback of hosts that give commands no memory cgroup.
fn bounded_fixture(namespaces: bool, cgroup: bool) -> Fx {
    fixture_with_limits(
        namespaces,
        sandbox::Limits {
            memory: Some(MEMORY_MB << 20),
            scratch: Some(SCRATCH_MB << 20),
            memory_cgroup: cgroup,
            ..sandbox::Limits::default()
        },
    )
}

/// Maps 1 GiB of `/dev/zero` shared and writable, and touches every page: no rlimit counts it.
const SHARED_ZERO: &str = "import mmap, os\ntry:\n    fd = os.open('/dev/zero', os.O_RDWR)\nexcept OSError as e:\n    print('open refused', e.errno)\n    raise SystemExit(3)\nm = mmap.mmap(fd, 1 << 30, flags=mmap.MAP_SHARED)\nfor i in range(0, len(m), 4096): m[i] = 1\nprint('touched')";

/// Four processes of 100 MiB each (each under the 128 MiB per-process limit) alive together.
fn processes(count: usize, mib: usize) -> String {
    format!(
        "import os, sys, time\nkids = []\nfor _ in range({count}):\n    pid = os.fork()\n    if pid == 0:\n        b = bytearray({mib} << 20)\n        for j in range(0, len(b), 4096): b[j] = 1\n        time.sleep(2)\n        os._exit(0)\n    kids.append(pid)\ncodes = [os.waitpid(p, 0)[1] for p in kids]\nprint('children', codes)\nsys.exit(1 if any(codes) else 0)"
    )
}

fn assert_memory_bound(out: &ActionOutcome) {
    let bound = MEMORY_MB + SCRATCH_MB;
    assert_eq!(out.status, ToolStatus::Error, "{}", out.output);
    assert_eq!(
        out.error_code,
        Some(OutcomeCode::MemoryLimitExceeded),
        "{}",
        out.output
    );
    assert!(
        out.output.contains(&format!(
            "note: the command went over its memory bound: its processes together may use \
             {bound} MiB (CLAUDE_TOOLS_COMMAND_MEMORY_MB plus the scratch quota), and the \
             kernel killed it"
        )),
        "{}",
        out.output
    );
    assert!(
        out.output.contains(&format!(
            "limits: memory {MEMORY_MB} MiB per process and {bound} MiB for all its processes \
             together"
        )),
        "{}",
        out.output
    );
    assert!(!out.output.contains("touched\n"), "{}", out.output);
}

/// With a memory cgroup (root here, or a delegated v2 subtree) a shared `/dev/zero` mapping and
/// several processes beyond the command's bound are killed; without one (the fallback), the
/// shared mapping is refused at `open` and the per-process limit is all that bounds the rest.
#[test]
fn shared_zero_and_many_processes_are_bounded_per_command() {
    let host = sandbox::host_support().memory_cgroup.is_some();
    for (namespaces, cgroup) in [(true, host), (false, host), (true, false), (false, false)] {
        let fx = bounded_fixture(namespaces, cgroup);
        assert!(confinable(&fx), "this host confines commands");
        let out = py(&fx, SHARED_ZERO);
        if cgroup {
            assert_memory_bound(&out);
            assert!(out.output.contains("+memcg"), "{}", out.output);
        } else {
            assert_eq!(out.receipt.exit_code, Some(3), "{}", out.output);
            assert!(
                stdout_of(&out).contains("open refused 13"),
                "{}",
                out.output
            );
            assert!(!out.output.contains("+memcg"), "{}", out.output);
        }
        let out = py(&fx, &processes(4, 100));
        if cgroup {
            assert_memory_bound(&out);
        } else {
            assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
            assert!(
                out.output.contains("limits: memory 128 MiB per process,"),
                "{}",
                out.output
            );
        }
        // Within the bound, several processes work.
        let out = py(&fx, &processes(2, 40));
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        assert!(
            stdout_of(&out).contains("children [0, 0]"),
            "{}",
            out.output
        );
    }
}

/// memfd and shared anonymous memory are refused outright (seccomp), with or without a cgroup.
#[test]
fn memfd_and_shared_anonymous_memory_are_refused() {
    for namespaces in [true, false] {
        let fx = bounded_fixture(namespaces, true);
        assert!(confinable(&fx), "this host confines commands");
        let out = py(
            &fx,
            "import mmap, os\nfor name, make in [('memfd', lambda: os.memfd_create('x')), ('shared', lambda: mmap.mmap(-1, 1 << 30, flags=mmap.MAP_SHARED))]:\n    try:\n        make()\n        print(name, 'made')\n    except OSError as e:\n        print(name, e.errno)",
        );
        assert!(
            stdout_of(&out).contains("memfd 1\nshared 1\n"),
            "{}",
            out.output
        );
    }
}

/// What `RLIMIT_DATA` does not count, in the no-cgroup fallback and with namespaces alike: an
/// anonymous `MAP_GROWSDOWN` mapping and System V message queues, semaphores and shared memory
/// are refused (seccomp, `EPERM`), and the stack's hard limit is the memory limit, so a command
/// cannot raise its soft limit past it.
const RLIMIT_BYPASSES: &str = "import ctypes, resource\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.mmap.restype = ctypes.c_void_p\nlibc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]\np = libc.mmap(None, 1 << 30, 3, 0x22 | 0x100, -1, 0)\nprint('growsdown', 'mapped' if p != ctypes.c_void_p(-1).value else ctypes.get_errno())\nprint('stack hard', resource.getrlimit(resource.RLIMIT_STACK)[1] >> 20)\ntry:\n    resource.setrlimit(resource.RLIMIT_STACK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n    print('stack raised')\nexcept (ValueError, OSError):\n    print('stack refused')\nfor name, call in [('msgget', lambda: libc.msgget(0, 0o1600)), ('semget', lambda: libc.semget(0, 1, 0o1600)), ('shmget', lambda: libc.shmget(0, 4096, 0o1600))]:\n    r = call()\n    print(name, 'made' if r >= 0 else ctypes.get_errno())";

#[test]
fn growsdown_raised_stacks_and_sysv_ipc_are_refused_without_a_cgroup() {
    for namespaces in [true, false] {
        let fx = bounded_fixture(namespaces, false);
        assert!(confinable(&fx), "this host confines commands");
        let out = py(&fx, RLIMIT_BYPASSES);
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        assert_eq!(
            stdout_of(&out),
            format!(
                "growsdown 1\nstack hard {MEMORY_MB}\nstack refused\nmsgget 1\nsemget 1\nshmget 1\n"
            ),
            "{}",
            out.output
        );
    }
}

/// The command's cgroup is removed when it ends, and a command runs with a high
/// `oom_score_adj` (the OOM killer's first pick).
#[test]
fn the_command_cgroup_is_removed_when_it_ends() {
    let fx = bounded_fixture(true, true);
    assert!(confinable(&fx), "this host confines commands");
    let out = run(
        &fx,
        &[
            "sh",
            "-c",
            "cat /proc/self/oom_score_adj; cat /proc/self/cgroup",
        ],
    );
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    let printed = stdout_of(&out);
    assert!(printed.starts_with("1000\n"), "{}", out.output);
    let named: Vec<&str> = printed
        .lines()
        .filter(|line| line.contains(":memory:") || line.starts_with("0::"))
        .filter_map(|line| line.rsplit('/').next())
        .filter(|name| name.starts_with(sandbox::linux::cgroup::PREFIX))
        .collect();
    match sandbox::linux::cgroup::parent() {
        Some(parent) => {
            assert_eq!(named.len(), 1, "{}", out.output);
            let dir = parent.dir().join(named[0]);
            assert!(!dir.exists(), "{} is left", dir.display());
        }
        None => assert!(
            named.is_empty() || sandbox::host_support().root,
            "{printed}"
        ),
    }
}

/// Real tools work under both bounds: the memory cgroup and the fallback's read-only
/// `/dev/zero` (V8's reservations, Python, make and a C build with its temp files). cargo, npm
/// and make in projects under the real gateway, whose commands get the cgroup here, are
/// `projects.rs`.
#[test]
fn real_tools_work_under_either_bound() {
    for cgroup in [true, false] {
        let fx = bounded_fixture(true, cgroup);
        assert!(confinable(&fx), "this host confines commands");
        let out = run(
            &fx,
            &[
                "node",
                "-e",
                "const a = []; for (let i = 0; i < 40; i++) a.push(Buffer.alloc(1 << 20, 1)); console.log('node', a.length)",
            ],
        );
        assert!(stdout_of(&out).contains("node 40"), "{}", out.output);
        let out = py(
            &fx,
            "import sqlite3, zlib, os\nc = sqlite3.connect(os.path.join(os.environ['TMPDIR'], 'x.db'))\nc.execute('create table t(x)')\nc.executemany('insert into t values (?)', [(zlib.compress(b'x' * 1000),)] * 1000)\nprint('python', c.execute('select count(*) from t').fetchone()[0])",
        );
        assert!(stdout_of(&out).contains("python 1000"), "{}", out.output);
        let out = run(
            &fx,
            &[
                "sh",
                "-c",
                "cd \"$TMPDIR\" && printf '#include <stdio.h>\\nint main(void){return 0;}\\n' > m.c && printf 'm: m.c\\n\\tcc -O1 -o m m.c\\n' > Makefile && make -s && test -s m && echo built",
            ],
        );
        assert!(stdout_of(&out).contains("built"), "{}", out.output);
    }
}

fn oom_score_adj(pid: i32) -> i32 {
    std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// End to end with the real runner: one session's commands go over the memory bound (a shared
/// `/dev/zero` mapping, four processes, a memfd) and each gets a result naming the bound and the
/// variable; the gateway and another session keep working, and the OOM killer's order is set
/// (commands 1000, runners 900, the gateway and brokers at most 0).
#[tokio::test(flavor = "multi_thread")]
async fn a_command_over_its_bound_leaves_the_gateway_and_other_sessions_working() {
    let gw = gateway_with(&[
        ("CLAUDE_TOOLS_COMMAND_MEMORY_MB", "128"),
        ("CLAUDE_TOOLS_COMMAND_SCRATCH_MB", "64"),
    ])
    .await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let (one, two) = (work_dir(), work_dir());
    let a = start_session(&chat, one.path(), "Run the memory attacks", "mem-a").await;
    let b = start_session(&chat, two.path(), "Run echo", "mem-b").await;
    let cgroup = sandbox::host_support().memory_cgroup.is_some();
    let commands = a["network_boundary"]["commands"].as_str().unwrap();
    let said = if cgroup {
        "memory: bounded per command across all its processes and shared mappings"
    } else {
        "memory: per process only (RLIMIT_DATA"
    };
    assert!(commands.contains(said), "{commands}");
    let calls = json!([
        {"name": "RunCommand", "arguments": {"argv": ["python3", "-c", SHARED_ZERO]}},
        {"name": "RunCommand", "arguments": {"argv": ["python3", "-c", processes(4, 100)]}},
        {"name": "RunCommand", "arguments": {"argv": ["python3", "-c", "import os\nos.memfd_create('x')"]}},
        {"name": "RunCommand", "arguments": {"argv": ["sh", "-c", "cat /proc/self/oom_score_adj"]}},
    ]);
    let (sid_a, lease_a) = (session_id(&a), lease_id(&a));
    let r = chat
        .reply(
            &sid_a,
            &lease_a,
            &turn_id(&a),
            "mem-a-1",
            Some("Trying."),
            Some(calls),
        )
        .await
        .unwrap();
    let v = view(&r);
    let results = v["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 4, "{v}");
    let output = |i: usize| results[i]["output"].as_str().unwrap();
    let bound = "note: the command went over its memory bound: its processes together may use 192 \
                 MiB (CLAUDE_TOOLS_COMMAND_MEMORY_MB plus the scratch quota), and the kernel \
                 killed it";
    if cgroup {
        for i in [0, 1] {
            assert_eq!(results[i]["status"], "error", "{v}");
            assert!(output(i).contains(bound), "{}", output(i));
        }
    } else {
        assert!(output(0).contains("open refused 13"), "{}", output(0));
    }
    assert_eq!(results[2]["status"], "error", "{v}");
    assert!(
        output(2).contains("PermissionError: [Errno 1] Operation not permitted"),
        "{}",
        output(2)
    );
    assert!(
        output(3).contains("--- stdout ---\n1000\n"),
        "{}",
        output(3)
    );

    // The other session, and the gateway, are untouched.
    let calls = json!([{"name": "RunCommand", "arguments": {"argv": ["/bin/echo", "still here"]}}]);
    let (sid_b, lease_b) = (session_id(&b), lease_id(&b));
    let r = chat
        .reply(
            &sid_b,
            &lease_b,
            &turn_id(&b),
            "mem-b-1",
            Some("Echo."),
            Some(calls),
        )
        .await
        .unwrap();
    let vb = view(&r);
    let echoed = &vb["pending_turn"]["tool_results"][0];
    assert_eq!(echoed["status"], "ok", "{vb}");
    assert!(
        echoed["output"].as_str().unwrap().contains("still here"),
        "{vb}"
    );
    let gateway_pid = i32::try_from(gw.pid().unwrap()).unwrap();
    // -500 where it may lower itself (CAP_SYS_RESOURCE, which this container's root lacks).
    assert!(oom_score_adj(gateway_pid) <= 0);
    let mut runners = 0;
    for (pid, args) in tests::processes::processes_naming(&gw.state_dir().to_string_lossy()) {
        if args.iter().any(|a| a == "broker") {
            assert!(oom_score_adj(pid) <= 0, "broker {args:?}");
        } else {
            runners += 1;
            assert_eq!(oom_score_adj(pid), 900, "runner {args:?}");
        }
    }
    assert!(runners >= 2, "{runners}");
    for (sid, lease, v, key) in [
        (&sid_a, &lease_a, &v, "mem-a-2"),
        (&sid_b, &lease_b, &vb, "mem-b-2"),
    ] {
        let r = chat
            .reply(sid, lease, &turn_id(v), key, Some("Done."), None)
            .await
            .unwrap();
        assert_eq!(view(&r)["status"], "idle", "{r}");
    }
}
