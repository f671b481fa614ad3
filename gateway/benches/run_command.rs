//! RunCommand confinement cost: `RunCommand ["true"]` through the broker's executor (the
//! `gateway sandbox-exec` helper with namespaces, read-only mounts, Landlock, seccomp, rlimits,
//! scratch dir create/remove, report line, group kill and reap) against a plain spawn of `true`,
//! p50/p99 over `--runs` calls each (default 200), plus the Landlock-only fallback.
//!
//! Then the copy-on-write layer: `true` with the session's layer mounted, and the second
//! `cargo test --offline` of a small crate in a session against the same up-to-date run outside
//! the sandbox (target: within 1.2x).
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

fn measure(runs: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    for _ in 0..5 {
        f(); // warm-up
    }
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort();
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
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
    let args: Vec<String> = std::env::args().collect();
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(200usize);
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
    let gateway = std::path::Path::new(env!("CARGO_BIN_EXE_gateway"));
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

/// A session executor with the copy-on-write layer, the owner's real HOME (rustup, the cargo
/// registry) and PATH, as a broker sets it up.
fn layered_executor(
    root: &std::path::Path,
    helper: &Arc<PinnedExe>,
    wd: &std::path::Path,
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
    .with_limits(sandbox::Limits {
        memory: Some(2048 << 20),
        scratch: Some(512 << 20),
        ..sandbox::Limits::default()
    })
    .with_search_path(search)
    .with_layer(4 << 30);
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
    let exec = layered_executor(root, helper, &krate);
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
