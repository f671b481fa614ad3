//! `Read`: one UTF-8 text file opened without following symlinks, returned as numbered lines
//! (`{:>6}\t{line}`), bounded to 64 KiB; the receipt carries the SHA-256 of the whole file.

use std::io::Read;
use std::path::PathBuf;

use common::hash::sha256_hex;
use common::outcome::OutcomeCode;
use common::tools::ReadArgs;

use super::{BoundedOutput, Done, Executor, Failure};

/// Largest file `Read` loads.
pub const MAX_READ_FILE_BYTES: u64 = 256 * 1024 * 1024;
/// Lines returned when no limit is given.
pub const DEFAULT_READ_LIMIT: u64 = 2000;

pub(super) fn run(exec: &Executor, args: &ReadArgs) -> Result<Done, Failure> {
    let path = PathBuf::from(&args.file_path);
    let (file, meta) = exec
        .policy
        .open_file_no_follow(&path)
        .map_err(|r| Failure::refusal(&path, r))?;
    let too_large = |size: u64| {
        Failure::new(
            OutcomeCode::FileTooLarge,
            &path,
            format!(
                "{}: the file is {size} bytes; Read handles files up to {MAX_READ_FILE_BYTES} bytes \
                 (256 MiB). Use SearchText to find the relevant lines.",
                path.display()
            ),
        )
    };
    if meta.len() > MAX_READ_FILE_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_READ_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| {
            Failure::new(
                OutcomeCode::IoError,
                &path,
                format!("{}: read failed: {e}", path.display()),
            )
        })?;
    if bytes.len() as u64 > MAX_READ_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    let sha256 = sha256_hex(&bytes);
    if let Some(at) = memchr::memchr(0, &bytes) {
        return Err(Failure::new(
            OutcomeCode::NotUtf8,
            &path,
            format!(
                "{}: binary file (NUL byte at offset {at}); Read returns UTF-8 text only",
                path.display()
            ),
        ));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        Failure::new(
            OutcomeCode::NotUtf8,
            &path,
            format!(
                "{}: not valid UTF-8 (first invalid byte at offset {}); Read returns UTF-8 text only",
                path.display(),
                e.utf8_error().valid_up_to()
            ),
        )
    })?;
    let (output, truncated) = format_lines(&text, args.offset, args.limit);
    Ok(Done {
        output,
        truncated,
        path: path.display().to_string(),
        sha256: Some(sha256),
    })
}

/// Number the selected lines; returns the output and whether anything after it was left out.
fn format_lines(text: &str, offset: Option<u64>, limit: Option<u64>) -> (String, bool) {
    let total = count_lines(text);
    if total == 0 {
        return ("[empty file]".to_string(), false);
    }
    let first = offset.unwrap_or(1).max(1);
    let limit = limit.unwrap_or(DEFAULT_READ_LIMIT).max(1);
    if first > total {
        return (
            format!("[offset {first} is past the end of the file ({total} lines)]"),
            false,
        );
    }
    let mut out = BoundedOutput::new();
    let mut last_shown = first - 1;
    let mut partial: Option<(usize, usize)> = None;
    let wanted = text
        .split_terminator('\n')
        .enumerate()
        .skip(usize::try_from(first - 1).unwrap_or(usize::MAX))
        .take(usize::try_from(limit).unwrap_or(usize::MAX));
    for (index, line) in wanted {
        let number = index as u64 + 1;
        let entry = format!("{number:>6}\t{line}");
        if !out.push_line(&entry) {
            if last_shown < first {
                // The first line alone is over the limit: show its beginning.
                let prefix = entry.len() - line.len();
                let mut cut = entry;
                let room = common::tools::MAX_TOOL_OUTPUT_BYTES - 1024;
                common::tools::clip_utf8(&mut cut, room);
                let shown = cut.len().saturating_sub(prefix);
                out.text.push_str(&cut);
                out.text.push('\n');
                partial = Some((shown, line.len()));
                last_shown = number;
            }
            break;
        }
        last_shown = number;
    }
    let mut output = out.text;
    let truncated = partial.is_some() || last_shown < total;
    if let Some((shown, of)) = partial {
        output.push_str(&format!(
            "[truncated: line {first} is longer than the output limit; showing its first {shown} of {of} bytes]"
        ));
        if last_shown < total {
            output.push_str(&format!(
                "\n[truncated: showing lines {first}-{last_shown} of {total}]"
            ));
        }
    } else if truncated {
        output.push_str(&format!(
            "[truncated: showing lines {first}-{last_shown} of {total}]"
        ));
    } else if output.ends_with('\n') {
        output.pop();
    }
    (output, truncated)
}

/// Lines in `text`; a final line without a newline counts, a trailing newline adds none.
fn count_lines(text: &str) -> u64 {
    let newlines = memchr::memchr_iter(b'\n', text.as_bytes()).count() as u64;
    if text.is_empty() || text.ends_with('\n') {
        newlines
    } else {
        newlines + 1
    }
}

#[cfg(test)]
pub(super) fn format_lines_for_test(
    text: &str,
    offset: Option<u64>,
    limit: Option<u64>,
) -> (String, bool) {
    format_lines(text, offset, limit)
}
