//! RunCommand confinement cost: `RunCommand ["true"]` through the broker's executor (the
//! `gateway sandbox-exec` helper with namespaces, read-only mounts, Landlock, seccomp, rlimits,
//! scratch dir create/remove, report line, group kill and reap) against a plain spawn of `true`,
//! p50/p99 over `--runs` calls each (default 200), plus the Landlock-only fallback.
//!
//! Then the copy-on-write layer: `true` with the session's layer mounted, and the second
//! `cargo test --offline` of a small crate in a session against the same up-to-date run outside
//! the sandbox (target: within 1.2x).
//!
//! `--breakdown`: the default path interleaved with a plain spawn, and the p50 of each phase
//! (build with `--features sandbox/timing`), each command's helper started when it comes and
//! started ahead (issue 26) in one run; `--dying N`: memory cgroups left by N commands.
//!
//! `--gap-ms N` (default 20): the pause between two commands, outside the timed region — in a
//! session the model's turn lies between them, which is when the next command's helper is
//! started ahead; `--gap-ms 0` measures back-to-back commands, each then waiting for it.
//!
//! Run: `cargo bench -p gateway --bench run_command [-- --runs N]`. Target: ≤ 20 ms p50 added.
//! Figures are recorded in `gateway/benches/RUN_COMMAND_RESULTS.md`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use broker::executor::{CommandSandbox, Executor};
use common::tools::{RunCommandArgs, ToolArgs, ToolStatus};
use sandbox::path_policy::PathPolicy;
use sandbox::pinned_exe::PinnedExe;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// The value after `name` on the command line, if it parses.
fn arg<T: std::str::FromStr>(name: &str) -> Option<T> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1)?.parse().ok()
}

/// The pause between two timed commands (`--gap-ms`).
fn gap() -> Duration {
    static GAP: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *GAP.get_or_init(|| Duration::from_millis(arg("--gap-ms").unwrap_or(20)))
}

fn measure(runs: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..5 {
        f(); // warm-up
    }
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            std::thread::sleep(gap());
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort();
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
}

/// The gateway binary run as the helper: this build's, or `RUN_COMMAND_GATEWAY` (a saved build,
/// to measure before and after in one session with the saved bench binary of the same build).
fn gateway_exe() -> std::path::PathBuf {
    std::env::var_os("RUN_COMMAND_GATEWAY")
        .map_or_else(|| env!("CARGO_BIN_EXE_gateway").into(), Into::into)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn executor(
    root: &std::path::Path,
    helper: &Arc<PinnedExe>,
    namespaces: bool,
    cgroup: bool,
) -> Executor {
    let wd = root.join("work");
    let home = root.join("home");
    let state = root.join("state");
    for d in [&wd, &home, &state] {
        std::fs::create_dir_all(d).unwrap();
    }
    let mut commands = CommandSandbox::new(
        Some(helper.clone()),
        state.join("run/bench/cmd"),
        &home,
        &state,
        &[],
    );
    if !namespaces {
        commands = commands.without_namespaces();
    }
    // The limits a broker sets (host-sized memory and scratch quota: the scratch dir is a tmpfs).
    commands = commands.with_limits(sandbox::Limits {
        root_pids_cgroup: cgroup,
        memory_cgroup: cgroup,
        memory: Some(2048 << 20),
        scratch: Some(512 << 20),
        ..sandbox::Limits::default()
    });
    Executor::new(PathPolicy::new(home, state.clone(), vec![]), wd).with_command_sandbox(commands)
}

fn main() {
    let runs = arg("--runs").unwrap_or(200usize);
    if std::env::args().any(|a| a == "--breakdown") {
        breakdown(runs);
        return;
    }
    if let Some(n) = arg("--dying") {
        dying_cgroups(n);
        return;
    }
    let support = sandbox::host_support();
    println!("host: {support:?}");
    println!("enforced_by: {}", support.enforced_by());
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let true_args = ToolArgs::RunCommand(RunCommandArgs {
        argv: vec!["true".into()],
        cwd: None,
        timeout_seconds: None,
        fresh_layer: false,
    });

    let (plain50, plain99) = measure(runs, || {
        let status = std::process::Command::new("/bin/true").status().unwrap();
        assert!(status.success());
    });
    println!(
        "plain spawn of true          p50 {:7.2} ms  p99 {:7.2} ms",
        ms(plain50),
        ms(plain99)
    );
    let gateway = gateway_exe();
    let gateway = gateway.as_path();
    let started = Instant::now();
    let sealed = Arc::new(PinnedExe::pin(gateway).unwrap());
    println!(
        "pinning the gateway binary ({} bytes, {}): {:.1} ms",
        sealed.size(),
        sealed.pinning_name(),
        ms(started.elapsed())
    );
    // Executing the installed file itself, as before pinning (plus one fstat per command).
    let open_file = Arc::new(PinnedExe::pin_open_file(gateway).unwrap());
    let mut rows = vec![("plain spawn".to_string(), plain50, plain99)];
    for (label, helper, namespaces, cgroup) in [
        ("RunCommand (namespaces)", &sealed, true, true),
        (
            "RunCommand (namespaces, helper from file)",
            &open_file,
            true,
            true,
        ),
        ("RunCommand (Landlock only)", &sealed, false, true),
        ("RunCommand (namespaces, no cgroup)", &sealed, true, false),
        (
            "RunCommand (namespaces, no cgroup, helper from file)",
            &open_file,
            true,
            false,
        ),
        (
            "RunCommand (Landlock only, no cgroup)",
            &sealed,
            false,
            false,
        ),
    ] {
        if !cgroup && !support.root {
            continue; // the cgroup is only used as root
        }
        let exec = executor(
            &root.join(label.replace([' ', ',', '(', ')'], "_")),
            helper,
            namespaces,
            cgroup,
        );
        let check = exec.execute("bench", &true_args);
        if check.status != ToolStatus::Ok {
            println!("{label}: not measured: {}", check.output);
            continue;
        }
        println!("  {}", check.output.lines().nth(2).unwrap_or(""));
        let (p50, p99) = measure(runs, || {
            let out = exec.execute("bench", &true_args);
            assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        });
        println!(
            "{label:<52} p50 {:7.2} ms  p99 {:7.2} ms  (added p50 {:+.2} ms, {:.1}x plain)",
            ms(p50),
            ms(p99),
            ms(p50) - ms(plain50),
            ms(p50) / ms(plain50)
        );
        rows.push((label.to_string(), p50, p99));
    }
    println!("\n| path | p50 ms | p99 ms | added p50 ms | p50 / plain |\n|---|---|---|---|---|");
    for (label, p50, p99) in &rows {
        println!(
            "| {label} | {:.2} | {:.2} | {:+.2} | {:.1}x |",
            ms(*p50),
            ms(*p99),
            ms(*p50) - ms(plain50),
            ms(*p50) / ms(plain50)
        );
    }
    layer_figures(&root, &sealed, runs, plain50);
}

/// The phases of one RunCommand in order, as the helper and the broker stamp them (the `timing`
/// feature), each named by what ends at it.
const PHASES: &[(&str, &str)] = &[
    ("run", "broker: RunCommand starts"),
    ("checked", "broker: cwd, argv policy, host support"),
    ("settled", "broker: the previous command's cleanup awaited"),
    ("scratch", "broker: layer turn, scratch dir made"),
    (
        "helper",
        "spawn: fork+exec of the helper, its start-up, spec written",
    ),
    ("spec", "helper: spec read and parsed, fds closed"),
    ("memcg", "helper: memory cgroup made/joined"),
    ("pidscg", "helper: pids cgroup (root)"),
    ("unshare", "helper: unshare + uid/gid maps"),
    ("fork", "helper: fork into the pid namespace"),
    (
        "command_spec",
        "prepared helper: the command's spec read and checked, mount namespace entered",
    ),
    ("mounts_layer", "mounts: / private, descriptors, layer"),
    ("mounts_masks", "mounts: protected-set masks"),
    ("mounts_dev", "mounts: private /dev"),
    ("mounts_binds", "mounts: visible binds, scratch tmpfs"),
    (
        "mounts_pseudo",
        "mounts: fresh /proc, other pseudo file systems covered",
    ),
    ("mounts", "mounts: read-only remount"),
    ("rlimits", "confine: cwd, rlimits"),
    ("landlock", "confine: caps, nnp, Landlock"),
    ("seccomp_built", "confine: seccomp compiled"),
    ("exec", "confine: seccomp applied, argv/env"),
    (
        "waited",
        "command: report, execve, runs, exits, pid ns torn down",
    ),
    (
        "exited",
        "broker: end told (or helper reaped), pipes drained, group killed",
    ),
    (
        "released",
        "broker: OOM read; cgroups released (or handed to the reaper)",
    ),
    ("cleaned", "broker: scratch removed, layer turn finished"),
];

/// Every `phase=ns` stamp in a command's output (the broker's note, the helper's stderr lines).
fn stamps(output: &str) -> std::collections::HashMap<String, u64> {
    output
        .lines()
        .filter_map(|line| {
            line.strip_prefix("note: timing: ")
                .or_else(|| line.strip_prefix(sandbox::timing::PREFIX))
        })
        .flat_map(|rest| rest.split_whitespace())
        .filter_map(|word| {
            let (name, ns) = word.split_once('=')?;
            Some((name.to_string(), ns.parse().ok()?))
        })
        .collect()
}

/// `--breakdown`: the default path (namespaces, the limits a broker sets: memory cgroup in the
/// session's cgroup, pids cgroup as root) interleaved with a plain spawn of `true`, p50 of each,
/// and the p50 of every phase (needs `--features sandbox/timing`).
fn breakdown(runs: usize) {
    let gateway = gateway_exe();
    let gateway = gateway.as_path();
    let helper = Arc::new(PinnedExe::pin(gateway).unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let wd = root.join("work");
    std::fs::create_dir_all(&wd).unwrap();
    let group = sandbox::MemoryGroup {
        gateway: sandbox::MemoryGroup::key(&root.display().to_string()),
        bytes: 4 << 30,
        session: Some(1),
    };
    let limits = sandbox::Limits {
        memory: Some(2048 << 20),
        scratch: Some(512 << 20),
        group: Some(group),
        ..sandbox::Limits::default()
    };
    for layer in [false, true] {
        for ahead in [false, true] {
            println!(
                "\n## RunCommand [\"true\"], namespaces{}, memory cgroup in the session's cgroup, \
                 helper started {}, {} ms between commands",
                if layer { " + the session's layer" } else { "" },
                if ahead { "ahead" } else { "per command" },
                gap().as_millis()
            );
            let exec = layered_executor(
                &root.join(format!("l{layer}{ahead}")),
                &helper,
                &wd,
                limits,
                layer,
                ahead,
            );
            breakdown_of(&exec, runs);
            if let Some(layer) = exec.command_layer() {
                layer.discard();
            }
        }
    }
    #[cfg(target_os = "linux")]
    {
        sandbox::linux::cgroup::remove_session(&group);
        if let Some(parent) = sandbox::linux::cgroup::parent() {
            sandbox::linux::cgroup::remove_group(&parent, group.gateway);
        }
    }
}

fn breakdown_of(exec: &Executor, runs: usize) {
    let args = ToolArgs::RunCommand(RunCommandArgs {
        argv: vec!["true".into()],
        cwd: None,
        timeout_seconds: None,
        fresh_layer: false,
    });
    let first = exec.execute("bench", &args);
    assert_eq!(first.status, ToolStatus::Ok, "{}", first.output);
    println!("  {}", first.output.lines().nth(2).unwrap_or(""));
    let (mut plain, mut sandboxed) = (Vec::new(), Vec::new());
    let mut phases: Vec<Vec<f64>> = vec![Vec::new(); PHASES.len()];
    let mut missing = 0;
    for i in 0..runs + 5 {
        std::thread::sleep(gap());
        let t = Instant::now();
        assert!(
            std::process::Command::new("/bin/true")
                .status()
                .unwrap()
                .success()
        );
        let p = t.elapsed();
        let t = Instant::now();
        let out = exec.execute("bench", &args);
        let r = t.elapsed();
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        if i < 5 {
            continue; // warm-up
        }
        plain.push(p);
        sandboxed.push(r);
        let found = stamps(&out.output);
        let mut last: Option<u64> = None;
        for (k, (name, _)) in PHASES.iter().enumerate() {
            match (found.get(*name), last) {
                (Some(now), Some(before)) => {
                    phases[k].push((*now as f64 - before as f64) / 1e6);
                    last = Some(*now);
                }
                (Some(now), None) => last = Some(*now),
                (None, _) => missing += 1,
            }
        }
    }
    plain.sort();
    sandboxed.sort();
    let (p50, s50) = (percentile(&plain, 0.5), percentile(&sandboxed, 0.5));
    println!(
        "interleaved, {runs} runs: plain p50 {:.2} ms p99 {:.2} ms; RunCommand p50 {:.2} ms p99 {:.2} ms; added p50 {:+.2} ms ({:.1}x)",
        ms(p50),
        ms(percentile(&plain, 0.99)),
        ms(s50),
        ms(percentile(&sandboxed, 0.99)),
        ms(s50) - ms(p50),
        ms(s50) / ms(p50)
    );
    if missing > 0 && phases.iter().all(Vec::is_empty) {
        println!("no phase stamps: build with --features sandbox/timing");
        return;
    }
    println!("\n| phase (ends at) | p50 ms | p90 ms |\n|---|---|---|");
    let mut total = 0.0;
    for (k, (name, what)) in PHASES.iter().enumerate().skip(1) {
        let samples = &mut phases[k];
        if samples.is_empty() {
            continue;
        }
        samples.sort_by(f64::total_cmp);
        let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
        total += at(0.5);
        println!("| {what} (`{name}`) | {:.3} | {:.3} |", at(0.5), at(0.9));
    }
    println!("| sum of the p50s | {total:.2} | |");
}

/// Memory cgroups on the host (`/proc/cgroups`: live and dying ones alike).
fn memory_cgroups() -> i64 {
    std::fs::read_to_string("/proc/cgroups")
        .unwrap()
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            (fields.first() == Some(&"memory")).then(|| fields[2].parse().unwrap())
        })
        .unwrap_or(-1)
}

/// `--dying N`: N commands of one session, each writing a new file into the session's layer
/// (its page cache stays charged to the command's memory cgroup), with one cgroup per command
/// and with the session's reused; how many memory cgroups the host has before and after (a
/// removed cgroup whose pages are still cached lingers as a dying one).
fn dying_cgroups(n: usize) {
    let gateway = gateway_exe();
    let gateway = gateway.as_path();
    let helper = Arc::new(PinnedExe::pin(gateway).unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    for (label, session) in [
        ("the session's cgroup", Some(7)),
        ("a cgroup per command", None),
    ] {
        let wd = root.join(format!("wd-{}", session.is_some()));
        std::fs::create_dir_all(&wd).unwrap();
        let limits = sandbox::Limits {
            memory: Some(512 << 20),
            scratch: Some(64 << 20),
            group: Some(sandbox::MemoryGroup {
                gateway: sandbox::MemoryGroup::key(&root.display().to_string()),
                bytes: 4 << 30,
                session,
            }),
            ..sandbox::Limits::default()
        };
        let exec = layered_executor(
            &root.join(label.replace(' ', "-")),
            &helper,
            &wd,
            limits,
            true,
            true,
        );
        let before = memory_cgroups();
        for i in 0..n {
            let out = exec.execute(
                "bench",
                &ToolArgs::RunCommand(RunCommandArgs {
                    argv: vec![
                        "sh".into(),
                        "-c".into(),
                        format!("head -c 65536 /dev/urandom > f{i}"),
                    ],
                    cwd: None,
                    timeout_seconds: None,
                    fresh_layer: false,
                }),
            );
            assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
        }
        std::thread::sleep(Duration::from_secs(2));
        let after = memory_cgroups();
        exec.command_layer().unwrap().discard();
        std::thread::sleep(Duration::from_secs(3));
        println!(
            "{n} commands, {label}: memory cgroups {before} -> {after} ({:+}); {} once the layer \
             is discarded",
            after - before,
            memory_cgroups()
        );
        #[cfg(target_os = "linux")]
        if let Some(group) = limits.group {
            sandbox::linux::cgroup::remove_session(&group);
            if let Some(parent) = sandbox::linux::cgroup::parent() {
                sandbox::linux::cgroup::remove_group(&parent, group.gateway);
            }
        }
    }
}

/// A session executor with the copy-on-write layer, the owner's real HOME (rustup, the cargo
/// registry) and PATH, as a broker sets it up.
fn layered_executor(
    root: &std::path::Path,
    helper: &Arc<PinnedExe>,
    wd: &std::path::Path,
    limits: sandbox::Limits,
    layer: bool,
    ahead: bool,
) -> Executor {
    let state = root.join("layer-state");
    std::fs::create_dir_all(&state).unwrap();
    let home = std::path::PathBuf::from(std::env::var("HOME").unwrap());
    let policy = PathPolicy::new(home.clone(), state.clone(), vec![]);
    let search = sandbox::command::command_path(std::env::var("PATH").ok().as_deref(), |p| {
        policy.is_protected(p)
    });
    let commands = CommandSandbox::new(
        Some(helper.clone()),
        state.join("run/bench/cmd"),
        &home,
        &state,
        &[],
    )
    .with_limits(limits)
    .with_search_path(search);
    let commands = if layer {
        commands.with_layer(4 << 30)
    } else {
        commands
    };
    let commands = if ahead {
        commands
    } else {
        commands.started_per_command()
    };
    Executor::new(policy, wd.to_path_buf()).with_command_sandbox(commands)
}

fn layer_figures(root: &std::path::Path, helper: &Arc<PinnedExe>, runs: usize, plain50: Duration) {
    let args = |argv: &[&str]| {
        ToolArgs::RunCommand(RunCommandArgs {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            cwd: None,
            timeout_seconds: Some(600),
            fresh_layer: false,
        })
    };
    // A small crate without Cargo.lock, no dependencies, a few tests.
    let krate = root.join("crate");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"benchcrate\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    let mut lib = String::new();
    for i in 0..50 {
        lib.push_str(&format!(
            "pub fn f{i}(x: u64) -> u64 {{ x.wrapping_mul({i}) ^ {i} }}\n#[test]\nfn t{i}() {{ assert_eq!(f{i}(1), 1u64.wrapping_mul({i}) ^ {i}); }}\n"
        ));
    }
    std::fs::write(krate.join("src/lib.rs"), lib).unwrap();
    let limits = sandbox::Limits {
        memory: Some(2048 << 20),
        scratch: Some(512 << 20),
        ..sandbox::Limits::default()
    };
    let exec = layered_executor(root, helper, &krate, limits, true, true);
    let truth = exec.execute("bench", &args(&["true"]));
    if truth.status != ToolStatus::Ok {
        println!("layer: not measured: {}", truth.output);
        return;
    }
    println!("  {}", truth.output.lines().nth(2).unwrap_or(""));
    let (p50, p99) = measure(runs, || {
        let out = exec.execute("bench", &args(&["true"]));
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    });
    println!(
        "RunCommand (namespaces + layer) true                  p50 {:7.2} ms  p99 {:7.2} ms  (added p50 {:+.2} ms)",
        ms(p50),
        ms(p99),
        ms(p50) - ms(plain50)
    );
    let cargo_runs = runs.clamp(3, 10);
    let first = Instant::now();
    let out = exec.execute("bench", &args(&["cargo", "test", "--offline", "-q"]));
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    println!(
        "first cargo test in the session (cold): {:.0} ms",
        ms(first.elapsed())
    );
    let (in50, in99) = measure(cargo_runs, || {
        let out = exec.execute("bench", &args(&["cargo", "test", "--offline", "-q"]));
        assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
    });
    // The same up-to-date run outside the sandbox, on a copy with its own (warm) target dir.
    let outside = root.join("crate-outside");
    std::fs::create_dir_all(outside.join("src")).unwrap();
    for f in ["Cargo.toml", "src/lib.rs"] {
        std::fs::copy(krate.join(f), outside.join(f)).unwrap();
    }
    let cargo = |dir: &std::path::Path| {
        let status = std::process::Command::new("cargo")
            .args(["test", "--offline", "-q"])
            .current_dir(dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success());
    };
    cargo(&outside);
    let (out50, out99) = measure(cargo_runs, || cargo(&outside));
    println!(
        "second cargo test: in the session p50 {:.0} ms p99 {:.0} ms; outside p50 {:.0} ms p99 {:.0} ms; ratio {:.2}x",
        ms(in50),
        ms(in99),
        ms(out50),
        ms(out99),
        ms(in50) / ms(out50)
    );
    assert!(
        !krate.join("target").exists(),
        "the layer leaked into the real crate"
    );
    exec.command_layer().unwrap().discard();
}
