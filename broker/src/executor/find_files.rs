//! `FindFiles`: list non-directory entries under a root, sorted, never following symlinks (they are
//! listed as `path -> (symlink)`), skipping `.git`, protected paths and hard-linked files; bounded by
//! depth, count, 64 KiB and the time budget. Files after a full listing are only counted, without
//! the hard-link check, and the note says so. Paths are shown escaped where a name holds a control
//! character or invalid UTF-8 (`sandbox::escape`), so one line is always one entry.

use std::time::Instant;

use common::tools::FindFilesArgs;
use sandbox::path_policy::{EntryKind, PathRefusal, WalkControl, WalkOptions};

use super::{BoundedOutput, Done, Executor, Failure};

pub const DEFAULT_MAX_DEPTH: u32 = 8;
pub const DEFAULT_MAX_RESULTS: u32 = 1000;
/// Entries between two looks at the time budget.
const CLOCK_EVERY: usize = 64;

pub(super) fn run(
    exec: &Executor,
    args: &FindFilesArgs,
    started: Instant,
) -> Result<Done, Failure> {
    let root = exec.root(args.path.as_ref());
    let max_depth = args.max_depth.unwrap_or(DEFAULT_MAX_DEPTH).clamp(1, 64) as usize;
    let max_results = args.max_results.unwrap_or(DEFAULT_MAX_RESULTS).max(1) as usize;
    let needle = args
        .name_contains
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|s| memchr::memmem::Finder::new(s.as_bytes()));

    // The walk yields entries in path order (names sorted bytewise, depth first), which is the
    // order of `Path`'s comparison: lines are written as they come, and once the output is full
    // entries are only counted. Files are `lstat`ed (for the hard-link rule) by the walk's
    // read-ahead threads while they list each directory, so the checks below make no system
    // call; once the output is full they are no longer `lstat`ed, only counted.
    let mut out = BoundedOutput::new();
    let mut found = 0usize;
    let mut shown = 0usize;
    let mut more = false;
    let mut timed_out = false;
    let mut unreadable = 0usize;
    let mut hard_linked = 0usize;
    // Files counted after the output was full, not checked for hard links.
    let mut unchecked = 0usize;
    let options = WalkOptions {
        stat_files: true,
        ..WalkOptions::new(max_depth)
    };
    let mut visited = 0usize;
    let walked = exec.policy.walk(&root, options, |entry| {
        // The clock is read every few entries, not for each (the first entry included).
        if visited.is_multiple_of(CLOCK_EVERY) && started.elapsed() >= exec.time_budget {
            timed_out = true;
            return WalkControl::Stop;
        }
        visited += 1;
        if entry.kind == EntryKind::Dir {
            return WalkControl::Continue;
        }
        if let Some(finder) = &needle
            && finder.find(entry.name.as_encoded_bytes()).is_none()
        {
            return WalkControl::Continue;
        }
        if out.full && entry.kind == EntryKind::File {
            // Nothing more is shown: files are counted without the hard-link check, so the
            // walk stops `lstat`ing them (the one cost `find` does not have).
            if found == max_results {
                more = true;
                return WalkControl::Stop;
            }
            found += 1;
            unchecked += 1;
            return if unchecked == 1 {
                WalkControl::StopFileStats
            } else {
                WalkControl::Continue
            };
        }
        let suffix = match entry.kind {
            EntryKind::Symlink => " -> (symlink)",
            EntryKind::File => {
                match exec.policy.check_walked_file(&entry) {
                    Ok(()) => "",
                    Err(PathRefusal::HardLinked { .. }) => {
                        hard_linked += 1;
                        return WalkControl::Continue;
                    }
                    // Protected by identity, or replaced since the directory was read.
                    Err(
                        PathRefusal::Protected { .. }
                        | PathRefusal::NotFound { .. }
                        | PathRefusal::NotAFile { .. }
                        | PathRefusal::Symlink { .. },
                    ) => return WalkControl::Continue,
                    Err(_) => {
                        unreadable += 1;
                        return WalkControl::Continue;
                    }
                }
            }
            EntryKind::Fifo => " (fifo)",
            EntryKind::Socket => " (socket)",
            EntryKind::Device => " (device)",
            EntryKind::Dir | EntryKind::Other => " (other)",
        };
        if found == max_results {
            more = true;
            return WalkControl::Stop;
        }
        found += 1;
        // Escaped (`sandbox::escape`): a name with a newline cannot forge a line.
        let shown_path = sandbox::escape::path_for_display(entry.path);
        if !out.full && out.push_line(&format!("{shown_path}{suffix}")) {
            shown += 1;
        }
        WalkControl::Continue
    });
    let stats = walked.map_err(|r| Failure::refusal(&root, r))?;
    unreadable += stats.unreadable;
    let mut notes = Vec::new();
    if found == 0 && !more && !timed_out {
        notes.push(format!("(no files found under {})", root.display()));
    }
    if out.full {
        let note = if unchecked > 0 {
            format!(
                "[truncated: output limit (64 KiB) reached; showing {shown} of {found} entries found, \
                 {unchecked} of them files counted after the limit without the hard-link check]"
            )
        } else {
            format!(
                "[truncated: output limit (64 KiB) reached; showing {shown} of {found} entries found]"
            )
        };
        notes.push(note);
    }
    if more {
        notes.push(format!(
            "[truncated: showing {shown} entries; max_results {max_results} reached and more exist]"
        ));
    }
    if timed_out {
        notes.push(format!(
            "[truncated: time budget reached after {found} entries; the listing is incomplete]"
        ));
    }
    if hard_linked > 0 {
        notes.push(format!("[skipped files: {hard_linked} hard-linked]"));
    }
    if unreadable > 0 {
        notes.push(format!("[{unreadable} entries could not be read]"));
    }
    let mut output = out.text;
    output.push_str(&notes.join("\n"));
    if output.ends_with('\n') {
        output.pop();
    }
    Ok(Done {
        output,
        truncated: out.full || more || timed_out,
        path: root.display().to_string(),
        sha256: None,
    })
}
