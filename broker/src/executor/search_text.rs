//! `SearchText`: literal search of file contents under a root (or in one file) with grep-searcher.
//! Every file is opened through the path policy (no symlinks, no hard links, not protected);
//! binary files are skipped; results are `path:line: text`, sorted by path then line, bounded by
//! `max_results`, 64 KiB and the time budget.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Instant;

use common::outcome::OutcomeCode;
use common::tools::SearchTextArgs;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use sandbox::path_policy::{
    EntryKind, MAX_WALK_DEPTH, PathRefusal, WalkControl, WalkDir, WalkOptions,
};

use super::matcher::LiteralMatcher;
use super::{BoundedOutput, Done, Executor, Failure, clip_chars};

pub const DEFAULT_MAX_RESULTS: u32 = 200;
/// Longest line text shown per match, in characters.
pub const MAX_LINE_CHARS: usize = 300;
/// Most search threads.
const MAX_WORKERS: usize = 8;
/// Files handed to a search thread at a time (fewer wake-ups than one file per message).
const BATCH_FILES: usize = 32;
/// Largest buffer the searcher may grow to for one very long line.
const SEARCH_HEAP_LIMIT: usize = 64 * 1024 * 1024;

#[derive(Default)]
struct Skipped {
    binary: usize,
    symlinks: usize,
    hard_linked: usize,
    unreadable: usize,
}

pub(super) fn run(
    exec: &Executor,
    args: &SearchTextArgs,
    started: Instant,
) -> Result<Done, Failure> {
    let root = exec.root(args.path.as_ref());
    if args.query.is_empty() {
        return Err(Failure::new(
            OutcomeCode::InvalidArgument,
            &root,
            "query must not be empty",
        ));
    }
    if args.query.contains('\n') {
        return Err(Failure::new(
            OutcomeCode::InvalidArgument,
            &root,
            "query must be a single line (it contains a newline); search for one line at a time",
        ));
    }
    let case_sensitive = args.case_sensitive.unwrap_or(true);
    let max_results = args.max_results.unwrap_or(DEFAULT_MAX_RESULTS).max(1) as usize;
    let deadline = started + exec.time_budget;
    let matcher = LiteralMatcher::new(&args.query, case_sensitive);
    let mut state = State {
        matches: Vec::new(),
        limit: max_results + 1,
        skipped: Skipped::default(),
        timed_out: false,
    };
    let single_file = match exec.policy.open_dir_no_follow(&root) {
        Ok(_) => None,
        Err(PathRefusal::NotADirectory { component, .. })
            if component == sandbox::escape::path_for_display(&root) =>
        {
            Some(
                exec.policy
                    .open_file_no_follow(&root)
                    .map_err(|r| Failure::refusal(&root, r))?
                    .0,
            )
        }
        Err(refusal) => return Err(Failure::refusal(&root, refusal)),
    };
    match single_file {
        Some(file) => {
            let mut searcher = new_searcher();
            let result = search_one(&mut searcher, &matcher, file, state.limit, deadline);
            state.absorb(root.clone(), result);
        }
        None => {
            let results = search_tree(exec, &root, &matcher, state.limit, deadline)?;
            state.skipped.unreadable += results.unreadable_dirs;
            state.timed_out = results.timed_out;
            for (path, result) in results.files {
                state.absorb(path, result);
            }
        }
    }
    Ok(state.render(&args.query, case_sensitive, &root, max_results))
}

fn new_searcher() -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .heap_limit(Some(SEARCH_HEAP_LIMIT))
        .build()
}

/// What searching one file (or trying to) came to.
enum FileResult {
    /// Searched (possibly cut short by the deadline); matching lines with their numbers.
    Searched {
        lines: Vec<(u64, String)>,
        timed_out: bool,
    },
    Binary,
    Symlink,
    HardLinked,
    Unreadable,
    /// Protected, vanished or no longer a regular file: left out without comment.
    Ignored,
}

/// One file for a worker: opened relative to its directory's no-follow descriptor.
struct Job {
    seq: usize,
    dir: Arc<WalkDir>,
    name: OsString,
    path: PathBuf,
}

/// The files of a tree search in path order: every file up to the point where `limit` matches
/// were reached (a deterministic prefix), or everything finished when the time budget ran out.
struct TreeResults {
    files: Vec<(PathBuf, FileResult)>,
    unreadable_dirs: usize,
    timed_out: bool,
}

/// Collects results that arrive out of order and tracks the complete prefix in walk order.
struct Collector {
    limit: usize,
    pending: BTreeMap<usize, (PathBuf, FileResult)>,
    prefix: Vec<(PathBuf, FileResult)>,
    prefix_matches: usize,
}

impl Collector {
    /// Add the result of file `seq`; returns true once the prefix holds `limit` matches.
    fn add(&mut self, seq: usize, path: PathBuf, result: FileResult) -> bool {
        self.pending.insert(seq, (path, result));
        while let Some(next) = self.pending.remove(&self.prefix.len()) {
            if let FileResult::Searched { lines, .. } = &next.1 {
                self.prefix_matches += lines.len();
            }
            self.prefix.push(next);
        }
        self.prefix_matches >= self.limit
    }
}

/// Search every regular file under `root`: this thread walks (fd-relative, path order) and
/// feeds workers that open each file relative to its directory's descriptor and search it.
fn search_tree(
    exec: &Executor,
    root: &Path,
    matcher: &LiteralMatcher,
    limit: usize,
    deadline: Instant,
) -> Result<TreeResults, Failure> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_WORKERS);
    let stop = AtomicBool::new(false);
    let timed_out = AtomicBool::new(false);
    let mut collector = Collector {
        limit,
        pending: BTreeMap::new(),
        prefix: Vec::new(),
        prefix_matches: 0,
    };
    let (job_tx, job_rx) = mpsc::sync_channel::<Vec<Job>>(workers * 2);
    let job_rx = Mutex::new(job_rx);
    let (result_tx, result_rx) = mpsc::channel::<Vec<(usize, PathBuf, FileResult)>>();
    let walked = std::thread::scope(|scope| {
        for _ in 0..workers {
            let result_tx = result_tx.clone();
            let (job_rx, stop, timed_out) = (&job_rx, &stop, &timed_out);
            scope.spawn(move || {
                let mut searcher = new_searcher();
                loop {
                    let batch = match job_rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => break,
                    };
                    let Ok(batch) = batch else { break };
                    let mut results = Vec::with_capacity(batch.len());
                    for job in batch {
                        if stop.load(Ordering::Relaxed) {
                            break; // drain
                        }
                        let result =
                            match exec.policy.open_child_file(&job.dir, &job.name, &job.path) {
                                Ok((file, _)) => {
                                    search_one(&mut searcher, matcher, file, limit, deadline)
                                }
                                Err(refusal) => refused(&refusal),
                            };
                        if let FileResult::Searched {
                            timed_out: true, ..
                        } = result
                        {
                            timed_out.store(true, Ordering::Relaxed);
                            stop.store(true, Ordering::Relaxed);
                        }
                        results.push((job.seq, job.path, result));
                    }
                    if result_tx.send(results).is_err() {
                        break;
                    }
                }
            });
        }
        drop(result_tx);
        let mut seq = 0usize;
        let mut batch: Vec<Job> = Vec::with_capacity(BATCH_FILES);
        let mut absorb = |results: Vec<(usize, PathBuf, FileResult)>| {
            for (s, path, result) in results {
                if collector.add(s, path, result) {
                    stop.store(true, Ordering::Relaxed);
                }
            }
        };
        let options = WalkOptions::new(MAX_WALK_DEPTH);
        let walked = exec.policy.walk(root, options, |entry| {
            while let Ok(results) = result_rx.try_recv() {
                absorb(results);
            }
            if stop.load(Ordering::Relaxed) {
                return WalkControl::Stop;
            }
            if Instant::now() >= deadline {
                timed_out.store(true, Ordering::Relaxed);
                stop.store(true, Ordering::Relaxed);
                return WalkControl::Stop;
            }
            match entry.kind {
                EntryKind::File => {
                    batch.push(Job {
                        seq,
                        dir: Arc::clone(entry.parent),
                        name: entry.name.to_os_string(),
                        path: entry.path.to_path_buf(),
                    });
                    seq += 1;
                    if batch.len() == BATCH_FILES
                        && job_tx.send(std::mem::take(&mut batch)).is_err()
                    {
                        return WalkControl::Stop;
                    }
                }
                EntryKind::Symlink => {
                    absorb(vec![(seq, entry.path.to_path_buf(), FileResult::Symlink)]);
                    seq += 1;
                }
                _ => {}
            }
            WalkControl::Continue
        });
        if !batch.is_empty() && !stop.load(Ordering::Relaxed) {
            // A closed channel means the workers are gone; nothing more to collect then.
            let _ = job_tx.send(batch);
        }
        drop(job_tx);
        for results in result_rx {
            absorb(results);
        }
        walked
    });
    let stats = walked.map_err(|r| Failure::refusal(root, r))?;
    let timed_out = timed_out.load(Ordering::Relaxed);
    let mut files = collector.prefix;
    if timed_out {
        // Incomplete anyway: keep everything that finished, in path order.
        files.extend(collector.pending.into_values());
    }
    Ok(TreeResults {
        files,
        unreadable_dirs: stats.unreadable + stats.too_deep,
        timed_out,
    })
}

fn refused(refusal: &PathRefusal) -> FileResult {
    match refusal {
        PathRefusal::HardLinked { .. } => FileResult::HardLinked,
        PathRefusal::Symlink { .. } => FileResult::Symlink,
        PathRefusal::GitDir { .. }
        | PathRefusal::Protected { .. }
        | PathRefusal::NotFound { .. }
        | PathRefusal::NotAFile { .. } => FileResult::Ignored,
        _ => FileResult::Unreadable,
    }
}

/// Search one opened file, keeping at most `limit` matching lines.
fn search_one(
    searcher: &mut Searcher,
    matcher: &LiteralMatcher,
    file: File,
    limit: usize,
    deadline: Instant,
) -> FileResult {
    let mut sink = FileSink {
        lines: Vec::new(),
        room: limit,
        binary: false,
    };
    let reader = DeadlineReader { file, deadline };
    let timed_out = match searcher.search_reader(matcher, reader, &mut sink) {
        Err(err) if err.kind() == io::ErrorKind::TimedOut => true,
        Err(_) => return FileResult::Unreadable,
        Ok(()) => false,
    };
    if sink.binary {
        return FileResult::Binary;
    }
    FileResult::Searched {
        lines: sink.lines,
        timed_out,
    }
}

struct State {
    /// `(path, line number, text)` in walk order (sorted by path, then line).
    matches: Vec<(PathBuf, u64, String)>,
    /// `max_results + 1`: one extra match proves that more exist.
    limit: usize,
    skipped: Skipped,
    timed_out: bool,
}

impl State {
    /// Add one file's result (files arrive in path order).
    fn absorb(&mut self, path: PathBuf, result: FileResult) {
        match result {
            FileResult::Searched { lines, timed_out } => {
                self.timed_out |= timed_out;
                for (line, text) in lines {
                    self.matches.push((path.clone(), line, text));
                }
            }
            FileResult::Binary => self.skipped.binary += 1,
            FileResult::Symlink => self.skipped.symlinks += 1,
            FileResult::HardLinked => self.skipped.hard_linked += 1,
            FileResult::Unreadable => self.skipped.unreadable += 1,
            FileResult::Ignored => {}
        }
    }

    fn render(
        mut self,
        query: &str,
        case_sensitive: bool,
        root: &Path,
        max_results: usize,
    ) -> Done {
        // Walk order is sorted already; make the contract explicit (stable sort keeps line order).
        self.matches
            .sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let more = self.matches.len() > max_results;
        self.matches.truncate(max_results);
        // Files among the matches shown (they are sorted, so a file's matches are adjacent).
        let files_with_matches = self
            .matches
            .iter()
            .enumerate()
            .filter(|(i, m)| *i == 0 || self.matches[i - 1].0 != m.0)
            .count();
        let mode = if case_sensitive {
            "case-sensitive"
        } else {
            "case-insensitive"
        };
        let mut out = BoundedOutput::new();
        let mut shown = 0usize;
        for (path, line, text) in &self.matches {
            // The path escaped: a name with a newline cannot forge a match line.
            let shown_path = sandbox::escape::path_for_display(path);
            if !out.push_line(&format!("{shown_path}:{line}: {text}")) {
                break;
            }
            shown += 1;
        }
        let count = self.matches.len();
        let header = if count == 0 {
            format!("No matches for {query:?} ({mode}) under {}", root.display())
        } else {
            format!(
                "{count} matching line{} in {} file{} for {query:?} ({mode})",
                if count == 1 { "" } else { "s" },
                files_with_matches,
                if files_with_matches == 1 { "" } else { "s" },
            )
        };
        let mut notes = Vec::new();
        if out.full {
            notes.push(format!(
                "[truncated: output limit (64 KiB) reached; showing {shown} of {count} matches]"
            ));
        }
        if more {
            notes.push(format!(
                "[truncated: max_results {max_results} reached; more matches exist]"
            ));
        }
        if self.timed_out {
            notes.push(format!(
                "[truncated: time budget reached after {count} matches; results are incomplete]"
            ));
        }
        let s = &self.skipped;
        let mut skipped = Vec::new();
        for (n, what) in [
            (s.binary, "binary"),
            (s.symlinks, "symlinked"),
            (s.hard_linked, "hard-linked"),
            (s.unreadable, "unreadable"),
        ] {
            if n > 0 {
                skipped.push(format!("{n} {what}"));
            }
        }
        if !skipped.is_empty() {
            notes.push(format!("[skipped files: {}]", skipped.join(", ")));
        }
        let mut header = clip_chars(&header, 400);
        header.push('\n');
        let mut output = header;
        output.push_str(&out.text);
        output.push_str(&notes.join("\n"));
        if output.ends_with('\n') {
            output.pop();
        }
        Done {
            output,
            truncated: out.full || more || self.timed_out,
            path: root.display().to_string(),
            sha256: None,
        }
    }
}

/// Collects one file's matching lines; stops at `room` or at binary data.
struct FileSink {
    lines: Vec<(u64, String)>,
    room: usize,
    binary: bool,
}

impl Sink for FileSink {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let raw = String::from_utf8_lossy(mat.bytes());
        let text = raw.trim_end_matches(['\n', '\r']);
        self.lines.push((
            mat.line_number().unwrap_or(0),
            clip_chars(text, MAX_LINE_CHARS),
        ));
        Ok(self.lines.len() < self.room)
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A reader that fails with `TimedOut` once the deadline passes, so one huge file cannot overrun
/// the time budget.
struct DeadlineReader {
    file: File,
    deadline: Instant,
}

impl Read for DeadlineReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if Instant::now() >= self.deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "time budget reached",
            ));
        }
        self.file.read(buf)
    }
}
