//! Read tools benchmark: the executor's `SearchText` and `FindFiles`, called in-process, against
//! `rg` and `find` on the same large generated tree, measured in the same run, warm and cold cache.
//!
//! Run: `cargo bench -p gateway --bench read_tools [-- --dir DIR --files N --runs N --keep]`
//! (or `scripts/bench-reads`; `--only search|find` runs one pair; `--warm-only` leaves the
//! machine's caches alone, for a machine others are measuring on). Needs `rg` (ripgrep) on
//! `PATH`: `apt-get install ripgrep`, `brew install ripgrep` or `cargo install ripgrep`; the bench
//! fails when it is missing.
//!
//! The tree: `--files` text files of 2–20 KiB (default 100 000, ≈1.07 GiB), one in 50 binary (a
//! NUL byte up front), one in 25 with a line containing the needle, a `.git` directory in every
//! top-level directory (files with the needle; both tools skip them), and a few symlinks (neither
//! tool follows them). It is generated in a directory of its own, `DIR/native-gateway-read-bench`
//! (`--dir DIR`, default `/work/.bench-reads`, else one in the temp dir), marked as the bench's
//! before anything is written into it. The bench deletes only that directory (at the end unless
//! `--keep`; a kept tree is reused when its marker matches) and refuses to touch one it did not
//! mark: nothing else in `DIR` is changed or removed, so `--dir` may name any existing directory.
//!
//! Like for like:
//! - SearchText (`max_results` 100 000, time budget 10 min, so it searches every file) vs
//!   `rg -F --no-ignore --hidden --no-follow -g '!.git' -n --no-heading --color never`: both read
//!   every non-binary file; the match counts must agree. `rg` runs multi-threaded and unsorted.
//! - FindFiles (`max_depth` 64, `max_results` unbounded) vs
//!   `find -P DIR -name .git -prune -o ! -type d -print`: the entry counts must agree. FindFiles
//!   `lstat`s the regular files it shows (it skips hard-linked ones; files after its 64 KiB
//!   listing are only counted) where plain `find` reads only directories; a second reference adds
//!   `-links 1`, which `lstat`s every file.
//!
//! Cold cache: `sync; echo 3 > /proc/sys/vm/drop_caches` before every cold run (needs root; the
//! bench says so and reports warm figures only when it cannot).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use broker::executor::Executor;
use common::tools::{ActionOutcome, FindFilesArgs, SearchTextArgs, ToolArgs, ToolStatus};
use sandbox::path_policy::PathPolicy;

const NEEDLE: &str = "Qz7NeedleQz7";
const DEFAULT_FILES: usize = 100_000;
const FILES_PER_DIR: usize = 100;
const DIRS_PER_TOP: usize = 10;
const GIT_FILES_PER_TOP: usize = 30;
const MARKER: &str = ".bench-tree-v1";
/// The marker's text starts with this; the rest says what tree it is (or `generating`).
const MARKER_PREFIX: &str = "native-gateway read_tools bench tree: ";
/// The bench's own directory under `--dir`.
const OWN_DIR: &str = "native-gateway-read-bench";
const SEARCH_TARGET: f64 = 1.5;
const FIND_TARGET: f64 = 1.2;

struct Options {
    dir: PathBuf,
    files: usize,
    runs: usize,
    keep: bool,
    /// `search`, `find` or both (`None`).
    only: Option<String>,
    warm_only: bool,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("read_tools: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn options() -> anyhow::Result<Options> {
    let default_parent = if Path::new("/work").is_dir() {
        PathBuf::from("/work")
    } else {
        std::env::temp_dir()
    };
    let mut opts = Options {
        dir: default_parent.join(".bench-reads"),
        files: DEFAULT_FILES,
        runs: 3,
        keep: false,
        only: None,
        warm_only: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--dir" => opts.dir = PathBuf::from(args.next().context("--dir needs a value")?),
            "--files" => opts.files = args.next().context("--files needs a value")?.parse()?,
            "--runs" => opts.runs = args.next().context("--runs needs a value")?.parse()?,
            "--keep" => opts.keep = true,
            "--warm-only" => opts.warm_only = true,
            "--only" => opts.only = Some(args.next().context("--only needs search or find")?),
            "--bench" => {} // passed by `cargo bench`
            other => bail!("unknown argument {other:?}"),
        }
    }
    opts.runs = opts.runs.max(1);
    Ok(opts)
}

fn run() -> anyhow::Result<()> {
    let opts = options()?;
    let rg = which("rg").context(
        "ripgrep (`rg`) is not on PATH; this benchmark compares against it and cannot run \
         without it. Install it: `apt-get update && apt-get install -y ripgrep` (Debian/Ubuntu), \
         `brew install ripgrep` (macOS) or `cargo install ripgrep`",
    )?;
    let find = which("find").context("`find` is not on PATH")?;
    println!("rg: {} ({})", rg.display(), tool_version(&rg));
    println!("find: {} ({})", find.display(), tool_version(&find));

    let own = BenchDir::open(&opts)?;
    let tree = own.path.join("tree");
    let marker = format!("{MARKER_PREFIX}files={} needle={NEEDLE}", opts.files);
    if own.marker.as_deref() == Some(marker.as_str()) {
        println!("reusing the tree at {}", tree.display());
    } else {
        check_free_space(&opts)?;
        own.recreate()?;
        let t = Instant::now();
        let stats = generate(&tree, opts.files)?;
        std::fs::write(own.path.join(MARKER), &marker)?;
        println!(
            "generated {} files ({} binary, {} with the needle, {} in .git), {:.2} GiB, in {:.1} s",
            stats.files,
            stats.binary,
            stats.needle_files,
            stats.git_files,
            stats.bytes as f64 / (1u64 << 30) as f64,
            t.elapsed().as_secs_f64()
        );
    }
    let result = measure(&opts, &tree, &rg, &find);
    if opts.keep {
        println!("kept {}", own.path.display());
    } else {
        own.remove()?;
    }
    result
}

/// The bench's own directory, `DIR/native-gateway-read-bench`: the only thing it ever deletes.
/// `DIR` itself (`--dir`) is never removed, except when this run created it and it is empty again
/// at the end. An existing own directory is the bench's only when it holds the bench's marker
/// (written before the first generated file, so an interrupted run is recognised too); otherwise
/// the bench refuses to touch it.
struct BenchDir {
    /// `--dir`, created by this run when it was missing.
    parent: PathBuf,
    created_parent: bool,
    /// `parent/OWN_DIR`.
    path: PathBuf,
    /// The marker's text when the own directory exists and is the bench's.
    marker: Option<String>,
}

impl BenchDir {
    fn open(opts: &Options) -> anyhow::Result<Self> {
        let parent = opts.dir.clone();
        let created_parent = !parent.exists();
        if created_parent {
            std::fs::create_dir_all(&parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        } else if !parent.is_dir() {
            bail!("--dir {} is not a directory", parent.display());
        }
        let path = parent.join(OWN_DIR);
        let marker = match std::fs::symlink_metadata(&path) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => None,
            Err(err) => {
                return Err(err).with_context(|| format!("inspecting {}", path.display()));
            }
            Ok(meta) if !meta.is_dir() => bail!(
                "{} exists and is not a directory this bench made; move it away or pick another \
                 --dir",
                path.display()
            ),
            Ok(_) => match std::fs::read_to_string(path.join(MARKER)) {
                Ok(m) if m.starts_with(MARKER_PREFIX) => Some(m),
                _ => bail!(
                    "{} exists but holds no marker of this bench ({MARKER}), so it was not made \
                     by it; the bench deletes only what it generated: move it away or pick \
                     another --dir",
                    path.display()
                ),
            },
        };
        println!("bench directory: {}", path.display());
        Ok(Self {
            parent,
            created_parent,
            path,
            marker,
        })
    }

    /// Removes a stale tree of the bench (marker checked in `open`) and starts a fresh one, marked
    /// as the bench's before anything else is written into it.
    fn recreate(&self) -> anyhow::Result<()> {
        if self.marker.is_some() {
            std::fs::remove_dir_all(&self.path)
                .with_context(|| format!("removing the old tree {}", self.path.display()))?;
        }
        std::fs::create_dir(&self.path)
            .with_context(|| format!("creating {}", self.path.display()))?;
        std::fs::write(self.path.join(MARKER), format!("{MARKER_PREFIX}generating"))
            .with_context(|| format!("marking {}", self.path.display()))?;
        Ok(())
    }

    fn remove(&self) -> anyhow::Result<()> {
        std::fs::remove_dir_all(&self.path)
            .with_context(|| format!("removing {}", self.path.display()))?;
        println!("removed {}", self.path.display());
        if self.created_parent && std::fs::remove_dir(&self.parent).is_ok() {
            println!("removed {} (created by this run)", self.parent.display());
        }
        Ok(())
    }
}

fn measure(opts: &Options, tree: &Path, rg: &Path, find: &Path) -> anyhow::Result<()> {
    // A policy with a home and state dir outside the tree: nothing in the tree is protected.
    let scratch = tempfile::tempdir()?;
    let policy = PathPolicy::new(
        scratch.path().join("home"),
        scratch.path().join("state"),
        vec![],
    );
    let exec = Executor::new(policy, tree.to_path_buf()).with_time_budget(Duration::from_secs(600));
    let tree_str = tree.display().to_string();

    let search = || -> anyhow::Result<u64> {
        let out = exec.execute(
            "bench-search",
            &ToolArgs::SearchText(SearchTextArgs {
                query: NEEDLE.to_string(),
                path: Some(tree_str.clone()),
                case_sensitive: None,
                max_results: Some(100_000),
            }),
        );
        search_count(&out)
    };
    let rg_search = || -> anyhow::Result<u64> {
        let out = Command::new(rg)
            .args([
                "-F",
                "--no-ignore",
                "--hidden",
                "--no-follow",
                "-g",
                "!.git",
                "-n",
                "--no-heading",
                "--color",
                "never",
                "--no-messages",
                NEEDLE,
            ])
            .arg(tree)
            .stderr(Stdio::inherit())
            .output()?;
        Ok(count_lines(&out.stdout))
    };
    let list = || -> anyhow::Result<u64> {
        let out = exec.execute(
            "bench-find",
            &ToolArgs::FindFiles(FindFilesArgs {
                path: Some(tree_str.clone()),
                name_contains: None,
                max_depth: Some(64),
                max_results: Some(u32::MAX),
            }),
        );
        find_count(&out)
    };
    let find_list = || -> anyhow::Result<u64> {
        let out = Command::new(find)
            .arg("-P")
            .arg(tree)
            .args(["-name", ".git", "-prune", "-o", "!", "-type", "d", "-print"])
            .stderr(Stdio::inherit())
            .output()?;
        Ok(count_lines(&out.stdout))
    };

    // `find` that also looks at each file's link count, as FindFiles must (it skips hard links).
    let find_links_list = || -> anyhow::Result<u64> {
        let out = Command::new(find)
            .arg("-P")
            .arg(tree)
            .args([
                "-name", ".git", "-prune", "-o", "!", "-type", "d", "-links", "1", "-print",
            ])
            .stderr(Stdio::inherit())
            .output()?;
        Ok(count_lines(&out.stdout))
    };

    // Correctness first (also warms the cache).
    let (ours, theirs) = (search()?, rg_search()?);
    println!("SearchText matches: {ours}; rg: {theirs}");
    if ours != theirs {
        bail!("SearchText found {ours} matching lines but rg found {theirs}");
    }
    let (ours, theirs) = (list()?, find_list()?);
    println!("FindFiles entries: {ours}; find: {theirs}");
    if ours != theirs {
        bail!("FindFiles listed {ours} entries but find listed {theirs}");
    }

    let cold_ok = !opts.warm_only && drop_caches().is_ok();
    let mut rows = Vec::new();
    for cache in ["warm", "cold"] {
        if cache == "cold" && !cold_ok {
            if opts.warm_only {
                println!("cold cache: not measured (--warm-only)");
            } else {
                println!(
                    "cold cache: not measured (cannot write /proc/sys/vm/drop_caches; run as root)"
                );
            }
            continue;
        }
        let runs: [(&str, &dyn Fn() -> anyhow::Result<u64>); 5] = [
            ("search", &search),
            ("search", &rg_search),
            ("find", &list),
            ("find", &find_list),
            ("find", &find_links_list),
        ];
        let mut times: [Vec<f64>; 5] = Default::default();
        let mut cpu: [Vec<f64>; 5] = Default::default();
        let load_before = load_average();
        for _ in 0..opts.runs {
            for (i, (tool, f)) in runs.iter().enumerate() {
                if opts.only.as_deref().is_some_and(|o| o != *tool) {
                    times[i].push(f64::NAN);
                    cpu[i].push(f64::NAN);
                    continue;
                }
                if cache == "cold" {
                    drop_caches()?;
                }
                let c = cpu_seconds();
                let t = Instant::now();
                f()?;
                times[i].push(t.elapsed().as_secs_f64());
                // Ours run in this process (all its threads), the references are children.
                let used = cpu_seconds();
                cpu[i].push((used.0 - c.0) + (used.1 - c.1));
            }
        }
        println!(
            "{cache}: load average (1 min) {load_before} before, {} after",
            load_average()
        );
        let med: Vec<f64> = times.iter_mut().map(|v| median(v)).collect();
        let cpu: Vec<f64> = cpu.iter_mut().map(|v| median(v)).collect();
        rows.push((
            cache,
            "SearchText",
            "rg",
            [med[0], med[1], cpu[0], cpu[1]],
            SEARCH_TARGET,
        ));
        rows.push((
            cache,
            "FindFiles",
            "find",
            [med[2], med[3], cpu[2], cpu[3]],
            FIND_TARGET,
        ));
        rows.push((
            cache,
            "FindFiles",
            "find -links 1",
            [med[2], med[4], cpu[2], cpu[4]],
            FIND_TARGET,
        ));
    }

    println!();
    println!(
        "| cache | tool | ours (s) | reference | reference (s) | ratio | target | met | CPU ours / reference (s) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (cache, tool, reference, [ours, theirs, ours_cpu, their_cpu], target) in rows {
        if ours.is_nan() {
            continue;
        }
        let ratio = ours / theirs;
        println!(
            "| {cache} | {tool} | {ours:.3} | {reference} | {theirs:.3} | {ratio:.2}× | ≤ {target}× | {} | {ours_cpu:.3} / {their_cpu:.3} |",
            if ratio <= target { "yes" } else { "no" }
        );
    }
    println!(
        "(median of {} runs each; CPU = user + system time, all threads)",
        opts.runs
    );
    Ok(())
}

/// CPU time (user + system, seconds) used so far by this process (all its threads) and by its
/// waited-for children.
fn cpu_seconds() -> (f64, f64) {
    let used = |who| {
        // SAFETY: getrusage only writes the struct it is given, which is plain data.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid, writable rusage.
        if unsafe { libc::getrusage(who, &mut usage) } != 0 {
            return f64::NAN;
        }
        let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        secs(usage.ru_utime) + secs(usage.ru_stime)
    };
    (used(libc::RUSAGE_SELF), used(libc::RUSAGE_CHILDREN))
}

/// The 1-minute load average (other work on the machine skews wall-clock ratios).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

fn search_count(out: &ActionOutcome) -> anyhow::Result<u64> {
    if out.status != ToolStatus::Ok {
        bail!("SearchText failed: {}", out.output);
    }
    if out.output.contains("time budget") || out.output.contains("max_results") {
        bail!(
            "SearchText did not finish the search: {}",
            tail(&out.output)
        );
    }
    let first = out.output.lines().next().unwrap_or_default();
    if first.starts_with("No matches") {
        return Ok(0);
    }
    first
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("unexpected SearchText header {first:?}"))
}

fn find_count(out: &ActionOutcome) -> anyhow::Result<u64> {
    if out.status != ToolStatus::Ok {
        bail!("FindFiles failed: {}", out.output);
    }
    if out.output.contains("time budget") || out.output.contains("max_results") {
        bail!("FindFiles did not finish: {}", tail(&out.output));
    }
    // "[truncated: output limit (64 KiB) reached; showing X of N entries found…]"
    if let Some(line) = out.output.lines().find(|l| l.contains(" entries found")) {
        let n = line
            .split(" entries found")
            .next()
            .unwrap_or_default()
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("unexpected FindFiles note {line:?}"))?;
        return Ok(n);
    }
    Ok(out.output.lines().filter(|l| !l.starts_with('[')).count() as u64)
}

fn tail(s: &str) -> &str {
    let mut start = s.len().saturating_sub(400);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

fn count_lines(bytes: &[u8]) -> u64 {
    memchr_count(bytes, b'\n')
}

fn memchr_count(bytes: &[u8], byte: u8) -> u64 {
    bytes.iter().filter(|b| **b == byte).count() as u64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn drop_caches() -> anyhow::Result<()> {
    let status = Command::new("sync").status()?;
    if !status.success() {
        bail!("sync failed");
    }
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").context("writing drop_caches")?;
    Ok(())
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn tool_version(bin: &Path) -> String {
    Command::new(bin)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "version unknown".into())
}

fn check_free_space(opts: &Options) -> anyhow::Result<()> {
    let parent = opts.dir.as_path();
    let st = rustix::fs::statvfs(parent).context("statvfs")?;
    let free = st.f_bavail * st.f_frsize;
    let need = (opts.files as u64) * 16 * 1024 + (1 << 30);
    println!(
        "free space under {}: {:.1} GiB (need about {:.1} GiB)",
        parent.display(),
        free as f64 / (1u64 << 30) as f64,
        need as f64 / (1u64 << 30) as f64
    );
    if free < need {
        bail!("not enough free disk space under {}", parent.display());
    }
    Ok(())
}

#[derive(Default)]
struct TreeStats {
    files: usize,
    binary: usize,
    needle_files: usize,
    git_files: usize,
    bytes: u64,
}

/// xorshift64*: deterministic, good enough for file sizes and offsets.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A few MiB of word-like text lines that file contents are cut from.
fn text_pool(rng: &mut Rng) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "alpha", "beta", "gamma", "delta", "fn", "let", "match", "struct", "impl", "return",
        "self", "value", "error", "result", "path", "file", "line", "buffer", "search", "index",
        "node", "tree", "walk", "open", "read", "write", "close", "token", "session", "turn",
        "the", "of", "and", "to", "in", "is", "for", "on", "with", "as",
    ];
    let mut pool = Vec::with_capacity(9 << 20);
    while pool.len() < 8 << 20 {
        let words = 4 + rng.below(16);
        for i in 0..words {
            if i > 0 {
                pool.push(b' ');
            }
            pool.extend_from_slice(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes());
        }
        pool.push(b'\n');
    }
    pool
}

fn generate(tree: &Path, files: usize) -> anyhow::Result<TreeStats> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pool = text_pool(&mut rng);
    let mut stats = TreeStats::default();
    let per_top = FILES_PER_DIR * DIRS_PER_TOP;
    let tops = files.div_ceil(per_top);
    let mut written = 0usize;
    for top in 0..tops {
        let top_dir = tree.join(format!("d{top:03}"));
        let git = top_dir.join(".git/objects");
        std::fs::create_dir_all(&git)?;
        for g in 0..GIT_FILES_PER_TOP {
            std::fs::write(git.join(format!("obj{g}")), format!("x {NEEDLE} y\n"))?;
            stats.git_files += 1;
        }
        for sub in 0..DIRS_PER_TOP {
            let dir = top_dir.join(format!("s{sub:02}")).join("src");
            std::fs::create_dir_all(&dir)?;
            for i in 0..FILES_PER_DIR {
                if written == files {
                    break;
                }
                written += 1;
                let size = 2048 + rng.below(18 * 1024) as usize;
                let start = rng.below((pool.len() - size) as u64) as usize;
                let mut content = Vec::with_capacity(size + 64);
                let binary = written.is_multiple_of(50);
                if binary {
                    content.extend_from_slice(b"\x7fELF\0\0\0\x01");
                    stats.binary += 1;
                }
                content.extend_from_slice(&pool[start..start + size]);
                if written.is_multiple_of(25) {
                    content.extend_from_slice(format!("\nfound {NEEDLE} here\n").as_bytes());
                    if !binary {
                        stats.needle_files += 1;
                    }
                }
                let name = if i % 10 == 0 {
                    format!(".hidden{i:03}.txt")
                } else {
                    format!("f{i:03}.rs")
                };
                let mut f = std::io::BufWriter::new(std::fs::File::create(dir.join(name))?);
                f.write_all(&content)?;
                f.flush()?;
                stats.files += 1;
                stats.bytes += content.len() as u64;
            }
            if sub == 0 {
                // Symlinks: one to a file, one to a directory outside the subtree. Not followed.
                std::os::unix::fs::symlink(dir.join("f001.rs"), dir.join("link-file.rs"))?;
                std::os::unix::fs::symlink(&top_dir, dir.join("link-dir"))?;
            }
        }
    }
    Ok(stats)
}
