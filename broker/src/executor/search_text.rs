//! `SearchText`: literal search of file contents under a root (or in one file) with grep-searcher.
//! Every file is opened through the path policy (no symlinks, no hard links, not protected);
//! binary files are skipped; results are `path:line: text`, sorted by path then line, bounded by
//! `max_results`, 64 KiB and the time budget.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use common::tools::SearchTextArgs;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use sandbox::path_policy::PathRefusal;

use super::matcher::LiteralMatcher;
use super::{BoundedOutput, Done, Executor, Failure, clip_chars};

pub const DEFAULT_MAX_RESULTS: u32 = 200;
/// Longest line text shown per match, in characters.
pub const MAX_LINE_CHARS: usize = 300;
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
            "invalid_argument",
            &root,
            "query must not be empty",
        ));
    }
    if args.query.contains('\n') {
        return Err(Failure::new(
            "invalid_argument",
            &root,
            "query must be a single line (it contains a newline); search for one line at a time",
        ));
    }
    let case_sensitive = args.case_sensitive.unwrap_or(true);
    let max_results = args.max_results.unwrap_or(DEFAULT_MAX_RESULTS).max(1) as usize;
    let deadline = started + exec.time_budget;
    let matcher = LiteralMatcher::new(&args.query, case_sensitive);
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .heap_limit(Some(SEARCH_HEAP_LIMIT))
        .build();

    let mut state = State {
        matches: Vec::new(),
        files_with_matches: 0,
        limit: max_results + 1,
        skipped: Skipped::default(),
        timed_out: false,
    };
    let single_file = match exec.policy.open_dir_no_follow(&root) {
        Ok(_) => None,
        Err(PathRefusal::NotADirectory { component, .. })
            if component == root.display().to_string() =>
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
        Some(file) => state.search_file(&mut searcher, &matcher, &root, file, deadline),
        None => {
            for entry in exec.walker(&root, None) {
                if Instant::now() >= deadline {
                    state.timed_out = true;
                    break;
                }
                if state.matches.len() >= state.limit {
                    break;
                }
                let entry = match entry {
                    Ok(entry) => entry,
                    Err(_) => {
                        state.skipped.unreadable += 1;
                        continue;
                    }
                };
                let Some(file_type) = entry.file_type() else {
                    continue;
                };
                if file_type.is_symlink() {
                    state.skipped.symlinks += 1;
                    continue;
                }
                if !file_type.is_file() {
                    continue;
                }
                let path = entry.path();
                match exec.policy.open_file_no_follow(path) {
                    Ok((file, _)) => {
                        state.search_file(&mut searcher, &matcher, path, file, deadline)
                    }
                    Err(PathRefusal::HardLinked { .. }) => state.skipped.hard_linked += 1,
                    Err(PathRefusal::Symlink { .. }) => state.skipped.symlinks += 1,
                    // Protected, vanished or non-regular by now: skipped without comment.
                    Err(PathRefusal::GitDir { .. } | PathRefusal::Protected { .. }) => {}
                    Err(PathRefusal::NotFound { .. } | PathRefusal::NotAFile { .. }) => {}
                    Err(_) => state.skipped.unreadable += 1,
                }
                if state.timed_out {
                    break;
                }
            }
        }
    }
    Ok(state.render(&args.query, case_sensitive, &root, max_results))
}

struct State {
    /// `(path, line number, text)` in walk order (sorted by path, then line).
    matches: Vec<(PathBuf, u64, String)>,
    files_with_matches: usize,
    /// `max_results + 1`: one extra match proves that more exist.
    limit: usize,
    skipped: Skipped,
    timed_out: bool,
}

impl State {
    fn search_file(
        &mut self,
        searcher: &mut Searcher,
        matcher: &LiteralMatcher,
        path: &Path,
        file: File,
        deadline: Instant,
    ) {
        let mut sink = FileSink {
            lines: Vec::new(),
            room: self.limit.saturating_sub(self.matches.len()),
            binary: false,
        };
        let reader = DeadlineReader { file, deadline };
        let result = searcher.search_reader(matcher, reader, &mut sink);
        match result {
            Err(err) if err.kind() == io::ErrorKind::TimedOut => {
                self.timed_out = true;
            }
            Err(_) => {
                self.skipped.unreadable += 1;
                return;
            }
            Ok(()) => {}
        }
        if sink.binary {
            self.skipped.binary += 1;
            return;
        }
        if !sink.lines.is_empty() {
            self.files_with_matches += 1;
        }
        for (line, text) in sink.lines {
            self.matches.push((path.to_path_buf(), line, text));
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
        let mode = if case_sensitive {
            "case-sensitive"
        } else {
            "case-insensitive"
        };
        let mut out = BoundedOutput::new();
        let mut shown = 0usize;
        for (path, line, text) in &self.matches {
            if !out.push_line(&format!("{}:{line}: {text}", path.display())) {
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
                self.files_with_matches,
                if self.files_with_matches == 1 {
                    ""
                } else {
                    "s"
                },
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
