//! `FindFiles`: list non-directory entries under a root, sorted, never following symlinks (they are
//! listed as `path -> (symlink)`), skipping `.git`, protected paths and hard-linked files; bounded by
//! depth, count, 64 KiB and the time budget.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::PathBuf;
use std::time::Instant;

use common::tools::FindFilesArgs;

use super::{BoundedOutput, Done, Executor, Failure};

pub const DEFAULT_MAX_DEPTH: u32 = 8;
pub const DEFAULT_MAX_RESULTS: u32 = 1000;

pub(super) fn run(
    exec: &Executor,
    args: &FindFilesArgs,
    started: Instant,
) -> Result<Done, Failure> {
    let root = exec.root(args.path.as_ref());
    exec.policy
        .open_dir_no_follow(&root)
        .map_err(|r| Failure::refusal(&root, r))?;
    let max_depth = args.max_depth.unwrap_or(DEFAULT_MAX_DEPTH).clamp(1, 64) as usize;
    let max_results = args.max_results.unwrap_or(DEFAULT_MAX_RESULTS).max(1) as usize;
    let needle = args
        .name_contains
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|s| memchr::memmem::Finder::new(s.as_bytes()));

    let mut found: Vec<(PathBuf, &'static str)> = Vec::new();
    let mut more = false;
    let mut timed_out = false;
    let mut unreadable = 0usize;
    let mut hard_linked = 0usize;
    for entry in exec.walker(&root, Some(max_depth)) {
        if started.elapsed() >= exec.time_budget {
            timed_out = true;
            break;
        }
        let entry = match entry {
            Ok(entry) => entry,
            Err(_) => {
                unreadable += 1;
                continue;
            }
        };
        if entry.depth() == 0 {
            continue;
        }
        let Some(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_dir() {
            continue;
        }
        if let Some(finder) = &needle
            && finder.find(entry.file_name().as_encoded_bytes()).is_none()
        {
            continue;
        }
        let suffix = if file_type.is_symlink() {
            " -> (symlink)"
        } else if file_type.is_file() {
            match entry.metadata() {
                Ok(meta) if meta.nlink() > 1 => {
                    hard_linked += 1;
                    continue;
                }
                Ok(_) => "",
                Err(_) => {
                    unreadable += 1;
                    continue;
                }
            }
        } else if file_type.is_fifo() {
            " (fifo)"
        } else if file_type.is_socket() {
            " (socket)"
        } else {
            " (device)"
        };
        if found.len() == max_results {
            more = true;
            break;
        }
        found.push((entry.into_path(), suffix));
    }
    // Walk order is already sorted by name per directory; sorting by `Path` (component-wise)
    // gives the same order and makes it explicit.
    found.sort();

    let mut out = BoundedOutput::new();
    let mut shown = 0usize;
    for (path, suffix) in &found {
        if !out.push_line(&format!("{}{suffix}", path.display())) {
            break;
        }
        shown += 1;
    }
    let mut notes = Vec::new();
    if found.is_empty() && !more && !timed_out {
        notes.push(format!("(no files found under {})", root.display()));
    }
    if out.full {
        notes.push(format!(
            "[truncated: output limit (64 KiB) reached; showing {shown} of {} entries found]",
            found.len()
        ));
    }
    if more {
        notes.push(format!(
            "[truncated: showing {shown} entries; max_results {max_results} reached and more exist]"
        ));
    }
    if timed_out {
        notes.push(format!(
            "[truncated: time budget reached after {} entries; the listing is incomplete]",
            found.len()
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
