//! Resource limits: memory beyond the limit is refused (shared memory outright), and scratch files
//! together are bounded by the quota.

use super::*;

fn limited_fixture(namespaces: bool, memory_mb: u64, scratch_mb: u64) -> Fx {
    fixture_with_limits(
        namespaces,
        sandbox::Limits {
            memory: Some(memory_mb << 20),
            scratch: Some(scratch_mb << 20),
            ..sandbox::Limits::default()
        },
    )
}

/// A command that allocates and touches more than its memory limit fails (the allocation is
/// refused), and the result names the limit; shared memory, which `RLIMIT_DATA` does not count,
/// is refused outright. Within the limit, allocation works.
#[test]
fn memory_beyond_the_limit_is_refused() {
    for namespaces in [true, false] {
        let fx = limited_fixture(namespaces, 256, 64);
        if !confinable(&fx) {
            return;
        }
        let out = py(
            &fx,
            "b = bytearray(512 * 1024 * 1024)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('allocated')",
        );
        assert_eq!(out.status, ToolStatus::Error, "{}", out.output);
        assert_eq!(
            out.error_code,
            Some(OutcomeCode::NonzeroExit),
            "{}",
            out.output
        );
        assert!(!out.output.contains("allocated\n"), "{}", out.output);
        assert!(out.output.contains("MemoryError"), "{}", out.output);
        assert!(
            out.output.contains("limits: memory 256 MiB per process"),
            "{}",
            out.output
        );
        assert!(
            out.output.contains(
                "note: the command reported running out of memory; each of its processes may \
                 allocate at most 256 MiB"
            ),
            "{}",
            out.output
        );
        // Raw mappings: a private one is refused at the mapping (ENOMEM); a shared anonymous
        // one, which RLIMIT_DATA would not count, is refused outright (EPERM).
        let out = py(
            &fx,
            "import mmap\nfor name, flags in [('private', mmap.MAP_PRIVATE), ('shared', mmap.MAP_SHARED)]:\n    try:\n        m = mmap.mmap(-1, 512 << 20, flags=flags)\n        print(name, 'mapped')\n    except OSError as e:\n        print(name, e.errno)",
        );
        assert!(
            stdout_of(&out).contains("private 12\nshared 1\n"),
            "{}",
            out.output
        );
        let out = run(
            &fx,
            &[
                "python3",
                "-c",
                &probe_script(&[
                    ("memfd", "os.memfd_create('x')".into()),
                    (
                        "shmget",
                        "ctypes.CDLL(None, use_errno=True).shmget(0, 1 << 30, 0o1600) >= 0 or (_ for _ in ()).throw(OSError(ctypes.get_errno(), 'shmget'))".into(),
                    ),
                ]),
            ],
        );
        assert_all_in(&out, 2, &["EPERM"]);
        let out = py(&fx, "b = bytearray(64 * 1024 * 1024)\nprint('ok', len(b))");
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    }
}

/// All of a command's scratch files together are bounded by the quota (a private tmpfs): writing
/// past it fails with ENOSPC, though each file stays under the per-file limit. Without namespaces
/// there is no quota, and the result says so.
#[test]
fn scratch_beyond_the_quota_fails_with_enospc() {
    let fx = limited_fixture(true, 1024, 64);
    if !confinable(&fx) {
        return;
    }
    let code = "import os, errno\nfor i in range(4):\n    try:\n        with open(os.path.join(os.environ['TMPDIR'], f'f{i}'), 'wb') as f:\n            f.write(b'x' * (24 << 20))\n        print(i, 'ok')\n    except OSError as e:\n        print(i, errno.errorcode[e.errno])";
    let out = py(&fx, code);
    let printed = stdout_of(&out);
    assert!(printed.contains("0 ok\n1 ok\n2 ENOSPC"), "{}", out.output);
    assert!(
        out.output.contains("limits: memory 1024 MiB per process"),
        "{}",
        out.output
    );
    assert!(
        out.output.contains(", scratch 64 MiB in total\n"),
        "{}",
        out.output
    );
    // HOME is there too, inside the same quota, and nothing of it reaches the host's scratch dir.
    let out = run(
        &fx,
        &["sh", "-c", "echo hi > \"$HOME/x\" && cat \"$HOME/x\""],
    );
    assert!(stdout_of(&out).contains("hi"), "{}", out.output);
    let left: Vec<_> = walk_files(&fx.scratch_root);
    assert!(left.is_empty(), "{left:?}");

    let fx = limited_fixture(false, 1024, 64);
    let out = run(&fx, &["true"]);
    assert!(
        out.output.contains("scratch per file only"),
        "{}",
        out.output
    );
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk_files(&path));
        } else {
            out.push(path);
        }
    }
    out
}
