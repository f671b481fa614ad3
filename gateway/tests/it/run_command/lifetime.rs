//! No command outlives its broker (issue 24): a running command is killed and its cgroup
//! removed when the broker shuts down (every shutdown path calls `stop_running_commands`), and
//! it dies with a broker killed outright (the helper's death signal, armed by the thread that
//! supervises it, or by the reaper thread for a helper started ahead, which lives as long as
//! the broker). The "broker" is a child run of this test binary ([`broker_child`]), so that
//! killing it touches no other test's command.

use super::*;

const CHILD_ENV: &str = "NG_RUN_COMMAND_BROKER_CHILD";

fn bounded(namespaces: bool) -> Fx {
    fixture_with_limits(
        namespaces,
        sandbox::Limits {
            memory: Some(128 << 20),
            scratch: Some(64 << 20),
            memory_cgroup: true,
            ..sandbox::Limits::default()
        },
    )
}

/// The `sleep` argument naming one case's command (unique on the host).
fn marker(mode: &str) -> &'static str {
    match mode {
        "stop-ns" => "97.31",
        "stop-plain" => "97.32",
        "kill-ns" => "97.33",
        _ => "97.34",
    }
}

/// The pid of the running `sleep <marker>` (waits up to 20 s for it to start).
fn wait_for(marker: &str) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let found = processes_with(&format!("sleep {marker}"));
        if let Some(pid) = found
            .first()
            .and_then(|line| line.split(':').next())
            .and_then(|pid| pid.parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "sleep {marker} did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The command cgroup `pid` is in, where this host gives commands one.
fn command_cgroup(pid: i32) -> Option<PathBuf> {
    let parent = sandbox::linux::cgroup::parent()?;
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let name = text
        .lines()
        .filter_map(|line| line.rsplit('/').next())
        .find(|name| name.starts_with(sandbox::linux::cgroup::PREFIX))?;
    Some(parent.dir().join(name))
}

/// Not a test on its own: the "broker" started by the tests below (`CHILD_ENV` names the case).
#[test]
fn broker_child() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let fx = bounded(mode.ends_with("-ns") || mode == "kill-prepared");
    let marker = marker(&mode);
    if mode.ends_with("-ns") || mode == "kill-prepared" {
        // The next command's helper is started ahead (with namespaces): `sleep` runs in it.
        assert_eq!(run(&fx, &["true"]).status, ToolStatus::Ok);
        assert!(fx.exec.command_cleanups().wait(Duration::from_secs(10)));
        let pid = fx
            .exec
            .prepared_helper()
            .waiting()
            .expect("a prepared helper");
        println!("BROKER_CHILD_PREPARED {pid}");
        if mode == "kill-prepared" {
            // Killed by the parent test while the helper waits for a command.
            std::thread::sleep(Duration::from_secs(120));
        }
    }
    std::thread::scope(|s| {
        let command = s.spawn(|| run(&fx, &["sleep", marker]));
        wait_for(marker);
        if mode.starts_with("stop") {
            // Time for the parent test to see the command and its cgroup.
            std::thread::sleep(Duration::from_secs(2));
            let left = broker::executor::stop_running_commands(Duration::from_secs(5));
            let out = command.join().unwrap();
            println!(
                "BROKER_CHILD_STOPPED left={left} killed={}",
                out.output.contains("killed by signal 9 (SIGKILL)")
            );
        } else {
            println!("BROKER_CHILD_RUNNING");
            // Killed by the parent test.
            std::thread::sleep(Duration::from_secs(120));
        }
    });
}

fn start_broker(mode: &str) -> std::process::Child {
    let test_name = format!(
        "{}::broker_child",
        module_path!().split_once("::").map_or("", |(_, rest)| rest)
    );
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &test_name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, mode)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// A broker shutting down kills its running commands (SIGKILL to their groups), waits for them to
/// be reaped and removes their cgroups, with and without namespaces.
#[test]
fn a_broker_shutting_down_kills_its_running_commands() {
    assert!(confinable(&bounded(true)), "this host confines commands");
    for mode in ["stop-ns", "stop-plain"] {
        let marker = marker(mode);
        let broker = start_broker(mode);
        let pid = wait_for(marker);
        let cgroup = command_cgroup(pid);
        let started = Instant::now();
        let out = broker.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("BROKER_CHILD_STOPPED left=0 killed=true"),
            "{mode}: {stdout}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{mode}");
        assert_no_processes(&format!("sleep {marker}"));
        if let Some(dir) = cgroup {
            assert!(!dir.exists(), "{mode}: {} is left", dir.display());
        }
    }
}

/// A broker killed outright (SIGKILL: no shutdown path runs) takes its running command with it
/// within a few seconds: the helper's death signal, and in the namespaces the pid namespace.
#[test]
fn a_killed_broker_takes_its_running_command_with_it() {
    assert!(confinable(&bounded(true)), "this host confines commands");
    for mode in ["kill-ns", "kill-plain"] {
        let marker = marker(mode);
        let mut broker = start_broker(mode);
        wait_for(marker);
        broker.kill().unwrap();
        broker.wait().unwrap();
        assert_no_processes(&format!("sleep {marker}"));
    }
}

/// A helper started ahead and waiting for the next command dies with a broker killed outright
/// (its death signal is armed by the broker's reaper thread), its pid 1 with it.
#[test]
fn a_killed_broker_takes_its_prepared_helper_with_it() {
    assert!(confinable(&bounded(true)), "this host confines commands");
    let mut broker = start_broker("kill-prepared");
    let mut stdout = std::io::BufReader::new(broker.stdout.take().unwrap());
    let mut line = String::new();
    let pid = loop {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut stdout, &mut line).unwrap() > 0,
            "the broker ended before preparing a helper"
        );
        // (After the harness's `test … ` on the same line.)
        if let Some((_, pid)) = line.trim().split_once("BROKER_CHILD_PREPARED ") {
            break pid.to_string();
        }
    };
    // The helper forks its pid 1 once it has read its spec and entered its namespaces.
    let deadline = Instant::now() + Duration::from_secs(10);
    let children = loop {
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap();
        if !children.trim().is_empty() {
            break children;
        }
        assert!(Instant::now() < deadline, "the helper forked no pid 1");
        std::thread::sleep(Duration::from_millis(20));
    };
    broker.kill().unwrap();
    broker.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    for gone in std::iter::once(pid.as_str()).chain(children.split_whitespace()) {
        // Gone, or a zombie left for whoever reaps orphans here.
        let alive = || {
            std::fs::read_to_string(format!("/proc/{gone}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(") ")
                    .is_some_and(|(_, r)| !r.starts_with('Z'))
            })
        };
        while alive() {
            assert!(Instant::now() < deadline, "{gone} outlived its broker");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
