//! `prune`: ask the running gateway to remove ended sessions' files (runner HOME, transcript)
//! and database content (turns, replies, tool arguments and outcomes, recorded answers)
//! untouched for an age; each session's summary and ledger stay. The gateway does it (the state
//! dir's single writer, and the one that knows which sessions are live), and says how many bytes
//! of files and of database it freed.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};

use crate::PruneArgs;
use common::admin::{AdminAnswer, AdminRequest};

use crate::oauth::{admin_request, expect_answer, unexpected, write_answer_json};

/// `14d`, `12h`, `30m`, `45s` (or a bare number of seconds): seconds.
pub fn parse_duration(text: &str) -> anyhow::Result<u64> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&text[..i], c),
        _ => (text, 's'),
    };
    let n: u64 = number
        .parse()
        .with_context(|| format!("--older-than {text:?}: use a number with d, h, m or s (14d)"))?;
    let unit = match unit {
        'd' => 86_400,
        'h' => 3600,
        'm' => 60,
        's' => 1,
        _ => bail!("--older-than {text:?}: the unit must be d, h, m or s (14d)"),
    };
    Ok(n.saturating_mul(unit))
}

/// `prune [--older-than DURATION] [--dry-run]`.
pub fn run(
    state_dir: &Path,
    args: &PruneArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let older_than = args.older_than.as_deref().map(parse_duration).transpose()?;
    let answer = expect_answer(admin_request(
        state_dir,
        AdminRequest::Prune {
            older_than_seconds: older_than,
            dry_run: args.dry_run,
        },
    )?)?;
    let AdminAnswer::Pruned(answer) = answer else {
        return Err(unexpected(&answer));
    };
    if json {
        return write_answer_json(out, &answer);
    }
    let sessions = &answer.sessions;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let days = answer.older_than_seconds as f64 / 86_400.0;
    let (verb, shrink) = if args.dry_run {
        ("Would remove", String::new())
    } else {
        (
            "Removed",
            format!(
                "; the database file shrank by {:.1} MiB",
                mib(answer.database_bytes)
            ),
        )
    };
    writeln!(
        out,
        "{verb} what {} ended session{} untouched for {days:.1} days left: {:.1} MiB of files \
         and {:.1} MiB of database content{shrink}. Their summaries and ledgers stay.",
        sessions.len(),
        if sessions.len() == 1 { "" } else { "s" },
        mib(answer.bytes),
        mib(answer.content_bytes),
    )?;
    for s in sessions {
        writeln!(
            out,
            "  {}  files {:.1} MiB, database {:.1} MiB",
            common::display::one_line(&s.session_id),
            mib(s.bytes),
            mib(s.content_bytes)
        )?;
    }
    Ok(())
}
