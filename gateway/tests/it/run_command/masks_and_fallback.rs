//! The Landlock-only fallback still confines; a worktree inside the masked state dir stays visible
//! and read-only; a working directory under a mask is never bound back.

use super::*;

#[test]
fn landlock_only_fallback_still_confines() {
    let fx = fixture_with(false);
    let support = sandbox::host_support();
    if support.landlock_abi.is_none() || !support.seccomp {
        let out = run(&fx, &["true"]);
        assert_eq!(
            out.error_code,
            Some(OutcomeCode::SandboxUnavailable),
            "{}",
            out.output
        );
        return;
    }
    let out = run(&fx, &["/bin/echo", "hi"]);
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    let header = out.output.lines().nth(2).unwrap();
    assert!(header.starts_with("sandbox: linux:landlock(v"), "{header}");
    assert!(!header.contains("mountns"), "{header}");
    let wd_file = fx.wd.join("existing.txt");
    let ops = write_ops(&fx.wd, &wd_file);
    let out = py(&fx, &probe_script(&ops));
    assert_all_in(&out, ops.len(), &["EROFS", "EPERM", "EACCES"]);
    let key = fx.home.join(".ssh/id_ed25519");
    let db = fx.state.join("gateway.sqlite3");
    let ops = vec![
        ("ssh_key", format!("open('{}').read()", key.display())),
        ("state_db", format!("open('{}').read()", db.display())),
        (
            "tcp",
            "socket.create_connection(('127.0.0.1', 9), timeout=2)".to_string(),
        ),
        ("kill", format!("os.kill({}, 0)", std::process::id())),
    ];
    let out = py(&fx, &probe_script(&ops));
    assert_all_in(&out, ops.len(), &["EACCES", "EPERM"]);
    assert_eq!(std::fs::read_to_string(&wd_file).unwrap(), "original");
}

/// A `worktree_write` session's working directory lives in the (masked) state dir: commands
/// still see it, read-only, while the rest of the state dir stays hidden. With namespaces it is
/// bound back over the mask; with Landlock only it is added to the readable set.
#[test]
fn a_worktree_inside_the_masked_state_dir_stays_visible_and_read_only() {
    for namespaces in [true, false] {
        let fx = fixture_with(namespaces);
        let support = sandbox::host_support();
        if !namespaces && (support.landlock_abi.is_none() || !support.seccomp) {
            continue; // landlock_only_fallback_still_confines asserts the refusal there.
        }
        if !confinable(&fx) {
            return;
        }
        let tree = fx.state.join("worktrees/ns_1");
        std::fs::create_dir_all(tree.join("src")).unwrap();
        std::fs::write(tree.join("src/lib.rs"), "fn visible() {}\n").unwrap();
        let mut commands = CommandSandbox::new(
            Some(pinned_gateway()),
            fx.scratch_root.clone(),
            &fx.home,
            &fx.state,
            &[],
        );
        if !namespaces {
            commands = commands.without_namespaces();
        }
        let other = fx.state.join("worktrees/ns_2");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("theirs.rs"), "fn theirs() {}\n").unwrap();
        // Only the session's own worktree is bound back over the state dir's mask.
        let commands = commands.with_own_worktree(Some(tree.clone()));
        let policy = PathPolicy::new(fx.home.clone(), fx.state.clone(), vec![])
            .with_open_subtree(fx.state.join("worktrees"));
        let exec = Executor::new(policy, tree.clone()).with_command_sandbox(commands);
        let run_here = |argv: &[&str]| {
            exec.execute(
                "act_tree",
                &ToolArgs::RunCommand(RunCommandArgs {
                    argv: argv.iter().map(|s| s.to_string()).collect(),
                    cwd: None,
                    timeout_seconds: None,
                    fresh_layer: false,
                }),
            )
        };
        let out = run_here(&["cat", "src/lib.rs"]);
        assert_eq!(out.status, ToolStatus::Ok, "{namespaces}: {}", out.output);
        assert!(stdout_of(&out).contains("fn visible()"), "{}", out.output);
        let out = run_here(&["cat", &other.join("theirs.rs").display().to_string()]);
        assert!(
            !out.output.contains("fn theirs()"),
            "{namespaces}: {}",
            out.output
        );
        let db = fx.state.join("gateway.sqlite3");
        let ops = vec![
            (
                "write_tree",
                format!("open('{}', 'w')", tree.join("new.txt").display()),
            ),
            ("state_db", format!("open('{}').read()", db.display())),
        ];
        let out = run_here(&["python3", "-c", &probe_script(&ops)]);
        let results = results(&out);
        assert_eq!(results.len(), 2, "{}", out.output);
        assert!(
            ["EROFS", "EACCES"].contains(&results[0].1.as_str()),
            "{namespaces}: {results:?}"
        );
        assert!(
            ["ENOENT", "EACCES"].contains(&results[1].1.as_str()),
            "{namespaces}: {results:?}"
        );
        assert!(!out.output.contains("STATE"));
        assert!(!tree.join("new.txt").exists());
    }
}

#[test]
fn a_working_directory_under_a_mask_is_never_bound_back() {
    // Issue 11, finding 1: a working directory inside the state dir (had a start let it through)
    // must not be bound back over the state dir's mask; only a session's own worktree is.
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let auth = fx.state.join("auth");
    std::fs::create_dir_all(&auth).unwrap();
    std::fs::write(auth.join("access-token"), "TOKEN-SHOULD-STAY-HIDDEN").unwrap();
    for own in [None, Some(fx.state.join("worktrees/ns_1"))] {
        let commands = CommandSandbox::new(
            Some(pinned_gateway()),
            fx.scratch_root.clone(),
            &fx.home,
            &fx.state,
            &[],
        )
        .with_own_worktree(own.clone());
        let policy = PathPolicy::new(fx.home.clone(), fx.state.clone(), vec![]);
        let exec = Executor::new(policy, auth.clone()).with_command_sandbox(commands);
        let out = exec.execute(
            "act_masked",
            &ToolArgs::RunCommand(RunCommandArgs {
                argv: vec!["sh".into(), "-c".into(), "cat * .* 2>&1; ls -a".into()],
                cwd: None,
                timeout_seconds: None,
                fresh_layer: false,
            }),
        );
        assert!(
            !out.output.contains("TOKEN-SHOULD-STAY-HIDDEN")
                && !out.output.contains("access-token"),
            "{own:?}: {}",
            out.output
        );
    }
}

/// Devices are an allow-list (`sandbox::protected::DEVICE_FILES`): with namespaces a command
/// sees a private `/dev` holding only those, the standard links, a devpts and an empty `/dev/shm`
/// of its own; with Landlock only `/dev` is unreadable but for those files. The owner's terminal
/// (a pty the test holds open), the kernel log, FUSE, block devices, virtual consoles and other
/// processes' `/dev/shm` files can be neither listed nor opened; the allowed devices, Python's
/// multiprocessing semaphores and shared memory and a pty of its own work.
#[test]
fn devices_are_an_allow_list_and_the_owners_terminals_are_hidden() {
    let pty = nix::pty::openpty(None, None).unwrap();
    let name = nix::unistd::ttyname(&pty.slave).unwrap();
    assert!(name.starts_with("/dev/pts/"), "{name:?}");
    let planted = format!("/dev/shm/ngw-test-{}", std::process::id());
    std::fs::write(&planted, "OTHER-PROCESS-SHM").unwrap();
    let hidden = [
        name.display().to_string(),
        planted.clone(),
        "/dev/kmsg".into(),
        "/dev/fuse".into(),
        "/dev/loop0".into(),
        "/dev/tty1".into(),
        "/dev/console".into(),
    ];
    for namespaces in [true, false] {
        let fx = fixture_with(namespaces);
        if !confinable(&fx) {
            continue;
        }
        let mut script = String::from(
            "import os, errno\n\
             def tryopen(p):\n    try:\n        os.close(os.open(p, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)); return 'OPENED'\n\
             \x20   except OSError as e:\n        return errno.errorcode[e.errno]\n\
             def ls(p):\n    try:\n        return sorted(os.listdir(p))\n    except OSError as e:\n        return errno.errorcode[e.errno]\n\
             print('dev', ls('/dev'))\nprint('shm', ls('/dev/shm'))\nprint('pts', ls('/dev/pts'))\n\
             open('/dev/null', 'w').write('x')\nassert len(open('/dev/urandom', 'rb').read(8)) == 8\n\
             assert open('/dev/zero', 'rb').read(4) == bytes(4)\nos.listdir('/dev/fd')\n",
        );
        for path in &hidden {
            script.push_str(&format!("print('open {path}', tryopen('{path}'))\n"));
        }
        if namespaces {
            script.push_str(
                "import multiprocessing as mp\nfrom multiprocessing import shared_memory\n\
                 lock = mp.Lock(); lock.acquire(); lock.release()\n\
                 mem = shared_memory.SharedMemory(create=True, size=4096); mem.buf[0] = 7; mem.close(); mem.unlink()\n\
                 m, s = os.openpty(); print('own pty', os.ttyname(s))\nprint('tools ok')\n",
            );
        }
        let out = py(&fx, &script);
        let stdout = stdout_of(&out);
        let context = format!("namespaces {namespaces}: {}", out.output);
        assert!(!stdout.contains("OPENED"), "{context}");
        assert!(!stdout.contains("OTHER-PROCESS-SHM"), "{context}");
        for path in &hidden {
            let refused = ["ENOENT", "EACCES"]
                .iter()
                .any(|code| stdout.contains(&format!("open {path} {code}")));
            assert!(refused, "{path}: {context}");
        }
        let number = name.file_name().unwrap().to_string_lossy().to_string();
        assert!(!stdout.contains(&format!("'{number}'")), "{context}");
        if namespaces {
            assert!(
                stdout.contains(
                    "dev ['fd', 'full', 'null', 'ptmx', 'pts', 'random', 'shm', 'stderr', \
                     'stdin', 'stdout', 'tty', 'urandom', 'zero']"
                ),
                "{context}"
            );
            assert!(stdout.contains("shm []"), "{context}");
            assert!(stdout.contains("own pty /dev/pts/0"), "{context}");
            assert!(stdout.contains("tools ok"), "{context}");
        } else {
            assert!(stdout.contains("dev EACCES"), "{context}");
        }
    }
    let _ = std::fs::remove_file(&planted);
}

/// Mounts this test made on the host, detached when it ends (even on a failed assertion).
pub(super) struct HostMounts(pub(super) Vec<PathBuf>);

impl HostMounts {
    /// `mount args… at`; these tests run as root, so a mount that fails is a broken host, never
    /// a reason to skip.
    pub(super) fn mount(&mut self, args: &[&str], at: &Path) {
        let out = std::process::Command::new("mount")
            .args(args)
            .arg(at)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mount {args:?} {}: {} (this test must run as root)",
            at.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        self.0.push(at.to_path_buf());
    }
}

impl Drop for HostMounts {
    fn drop(&mut self) {
        for at in self.0.iter().rev() {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(at)
                .status();
        }
    }
}

/// Python printing, for each path, its listing and whether a file under it reads:
/// `ls <path> <entries or ERRNO>` and `read <path> <ok or ERRNO>`.
fn pseudo_probe(listed: &[&Path], read: &[PathBuf]) -> String {
    let mut script = String::from(
        "import os, errno\n\
         def ls(p):\n    try:\n        return sorted(os.listdir(p))\n    except OSError as e:\n        return errno.errorcode[e.errno]\n\
         def rd(p):\n    try:\n        open(p, 'rb').read(); return 'ok'\n    except OSError as e:\n        return errno.errorcode[e.errno]\n",
    );
    for path in listed {
        script.push_str(&format!("print('ls {0}', ls('{0}'))\n", path.display()));
    }
    for path in read {
        script.push_str(&format!("print('read {0}', rd('{0}'))\n", path.display()));
    }
    script
}

/// Red team 23, B6: a second procfs (and a sysfs) mounted elsewhere on the host stayed visible
/// to commands, which listed every host process and read root's command line there. Every
/// kernel pseudo file system the read tools refuse is now covered in the command's mount
/// namespace, by type; only its own `/proc` (its pid namespace) is left. `/sys` too: the read
/// tools refuse sysfs, and commands get none.
#[test]
fn a_second_procfs_and_a_sysfs_elsewhere_are_empty_to_commands() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let host = tempfile::tempdir().unwrap();
    let (proc2, sys2) = (host.path().join("p2"), host.path().join("s2"));
    std::fs::create_dir_all(&proc2).unwrap();
    std::fs::create_dir_all(&sys2).unwrap();
    let mut mounts = HostMounts(Vec::new());
    mounts.mount(&["-t", "proc", "proc"], &proc2);
    mounts.mount(&["-t", "sysfs", "sysfs"], &sys2);
    let pid = std::process::id();
    // Really mounted: the test itself sees its own command line there.
    assert!(proc2.join(pid.to_string()).join("cmdline").exists());
    let script = pseudo_probe(
        &[
            &proc2,
            &sys2,
            Path::new("/sys"),
            Path::new("/sys/fs/cgroup"),
        ],
        &[
            proc2.join(format!("{pid}/cmdline")),
            proc2.join("1/cmdline"),
            sys2.join("kernel/notes"),
            PathBuf::from("/proc/self/status"),
        ],
    );
    let out = py(&fx, &script);
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    let stdout = stdout_of(&out);
    for listed in [&proc2, &sys2] {
        assert!(
            stdout.contains(&format!("ls {} []", listed.display())),
            "{}",
            out.output
        );
    }
    assert!(stdout.contains("ls /sys []"), "{}", out.output);
    assert!(
        stdout.contains("ls /sys/fs/cgroup ENOENT"),
        "{}",
        out.output
    );
    for refused in [
        proc2.join(format!("{pid}/cmdline")),
        proc2.join("1/cmdline"),
        sys2.join("kernel/notes"),
    ] {
        assert!(
            stdout.contains(&format!("read {} ENOENT", refused.display())),
            "{}",
            out.output
        );
    }
    // Its own procfs still works.
    assert!(
        stdout.contains("read /proc/self/status ok"),
        "{}",
        out.output
    );
}

/// The same with the pseudo file systems inside the project: a procfs on a directory and a
/// `/proc/<pid>/environ` bound onto a file (an owner's process holding a secret in its
/// environment). They read as empty and other commands still run, without a layer and with
/// the copy-on-write layer (which the kernel refuses over a directory holding mounts locked
/// to the command's namespace: the project is split around them, and the note names them —
/// before red team 46 every layered command was refused).
#[test]
fn pseudo_file_systems_inside_the_project_are_empty_to_commands() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    let mut secret = std::process::Command::new("sleep")
        .arg("60")
        .env("NGW_TEST_SECRET", "pseudo-fs-secret-in-env")
        .spawn()
        .unwrap();
    let (pdir, penv) = (fx.wd.join("pdir"), fx.wd.join("penv"));
    std::fs::create_dir_all(&pdir).unwrap();
    std::fs::write(&penv, "").unwrap();
    let mut mounts = HostMounts(Vec::new());
    mounts.mount(&["-t", "proc", "proc"], &pdir);
    let environ = format!("/proc/{}/environ", secret.id());
    mounts.mount(&["--bind", &environ], &penv);
    assert!(
        std::fs::read_to_string(&penv)
            .unwrap()
            .contains("pseudo-fs-secret")
    );
    let layered = CommandSandbox::new(
        Some(pinned_gateway()),
        fx.state.join("run/s2/cmd"),
        &fx.home,
        &fx.state,
        &[],
    )
    .with_layer(1 << 30);
    let layered = Executor::new(
        PathPolicy::new(fx.home.clone(), fx.state.clone(), vec![]),
        fx.wd.clone(),
    )
    .with_command_sandbox(layered)
    .with_writes(None);
    let script = pseudo_probe(&[&pdir], &[penv.clone(), pdir.join("1/cmdline")]);
    for (name, exec) in [("plain", &fx.exec), ("layered", &layered)] {
        let out = exec.execute(
            "act_pseudo",
            &ToolArgs::RunCommand(RunCommandArgs {
                argv: vec!["python3".into(), "-c".into(), script.clone()],
                cwd: None,
                timeout_seconds: None,
                fresh_layer: false,
            }),
        );
        assert_eq!(out.status, ToolStatus::Ok, "{name}: {}", out.output);
        let stdout = stdout_of(&out);
        assert!(
            !out.output.contains("pseudo-fs-secret"),
            "{name}: {}",
            out.output
        );
        assert!(
            stdout.contains(&format!("ls {} []", pdir.display())),
            "{name}: {}",
            out.output
        );
        assert!(
            stdout.contains(&format!("read {} ENOENT", pdir.join("1/cmdline").display())),
            "{name}: {}",
            out.output
        );
        // The bound file reads as empty: `/dev/null` over it.
        let penv_line = format!("read {} ok", penv.display());
        assert!(stdout.contains(&penv_line), "{name}: {}", out.output);
        // The layer goes around both mounts, and says so.
        if name == "layered" {
            for mount in [&pdir, &penv] {
                assert!(
                    out.output
                        .contains("note: mounts inside the command's copy-on-write")
                        && out.output.contains(&mount.display().to_string()),
                    "{name}: {}",
                    out.output
                );
            }
        }
        let out = exec.execute(
            "act_plain",
            &ToolArgs::RunCommand(RunCommandArgs {
                argv: vec!["cat".into(), "existing.txt".into()],
                cwd: None,
                timeout_seconds: None,
                fresh_layer: false,
            }),
        );
        assert_eq!(out.status, ToolStatus::Ok, "{name}: {}", out.output);
        assert!(
            stdout_of(&out).contains("original"),
            "{name}: {}",
            out.output
        );
    }
    drop(mounts);
    let _ = secret.kill();
    let _ = secret.wait();
}
