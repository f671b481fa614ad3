//! Stable codes of tool outcomes and refusals: the one vocabulary of the sandbox's refusals,
//! the broker's failures and [`crate::tools::ActionOutcome::error_code`]. On the wire (and in
//! stored outcomes) each is its `snake_case` name; the documented list is the table in
//! `docs/design/mcp-surface.md`, and a test keeps both equal. A code is never renamed or removed:
//! stored outcomes of older versions carry it.

use serde::{Deserialize, Serialize};

/// Why a tool call did not end `ok`, or why a path, command or write was refused.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantArray,
)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum OutcomeCode {
    /// The kernel killed the command when all the gateway's commands together reached their
    /// bound (the gateway's parent memory cgroup).
    AllCommandsMemoryExceeded,
    /// A NotebookEdit names a cell id the notebook does not have.
    CellNotFound,
    /// RunCommand's helper gave no valid report: the command may have run, confinement unknown.
    ConfinementUnconfirmed,
    /// The file or its directory changed while a write was prepared; nothing was written.
    Conflict,
    /// Read's file is over its size limit.
    FileTooLarge,
    /// After a crash a prepared write's file holds neither the old nor the new content.
    Indeterminate,
    /// The executor could not do what it was asked for a reason of its own.
    Internal,
    /// The arguments are malformed (relative path, `..`, empty query, bad cwd, …).
    InvalidArgument,
    /// NotebookEdit's file is not a notebook it can edit.
    InvalidNotebook,
    /// An I/O error, or a command whose exit status is unknown.
    IoError,
    /// The gateway did not record a write's intent; nothing was written.
    JournalFailed,
    /// The command was killed by a signal.
    KilledBySignal,
    /// The session's copy-on-write layer is over its budget.
    LayerOverBudget,
    /// The kernel killed the command at its memory cgroup's bound.
    MemoryLimitExceeded,
    /// Edit's `old_string` occurs more than once and `replace_all` is not set.
    MultipleMatches,
    /// Edit's `old_string` does not occur.
    NoMatch,
    /// The file system is full (or over quota).
    NoSpace,
    /// The command exited with a non-zero status.
    NonzeroExit,
    /// A path that must be a directory is not one.
    NotADirectory,
    /// A path that must be a regular file is not one.
    NotAFile,
    /// The broker stopped before a prepared write replaced its file; it was not retried.
    NotApplied,
    /// The path, executable or working directory does not exist.
    NotFound,
    /// Refused by policy: protected, outside the root, a symlink, the deny list, the profile, ….
    NotPermitted,
    /// Read's file is not UTF-8 text.
    NotUtf8,
    /// The operating system denied access.
    PermissionDenied,
    /// The file system is read-only.
    ReadOnlyFileSystem,
    /// This host cannot confine the command (or the helper failed before running it).
    SandboxUnavailable,
    /// A write's `expected_sha256` is not the file's hash.
    Sha256Mismatch,
    /// The disk has no room for a full copy-on-write layer of the session's budget.
    StorageFull,
    /// A DeepSeek sub-session's control call failed.
    SubagentFailed,
    /// The command ran past its timeout and was killed.
    Timeout,
    /// An edit's result would be over the size limit.
    TooLarge,
}

impl OutcomeCode {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl std::fmt::Display for OutcomeCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The codes a design note documents: the first column (backticks dropped) of the first table
/// under `heading`. How the tests hold a code enum against its documented list.
pub fn documented_codes(note: &str, heading: &str) -> Vec<String> {
    let Some((_, section)) = note.split_once(heading) else {
        return Vec::new();
    };
    section
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .skip(2)
        .filter_map(|row| row.split('|').nth(1))
        .map(|cell| cell.trim().trim_matches('`').to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use strum::VariantArray;

    #[test]
    fn every_code_round_trips_by_its_one_name() {
        for &code in OutcomeCode::VARIANTS {
            let wire = serde_json::to_value(code).unwrap();
            assert_eq!(wire, serde_json::Value::from(code.as_str()));
            assert_eq!(serde_json::from_value::<OutcomeCode>(wire).unwrap(), code);
            assert_eq!(code.as_str().parse::<OutcomeCode>().unwrap(), code);
            assert_eq!(code.to_string(), code.as_str());
        }
        assert!(serde_json::from_str::<OutcomeCode>("\"no_such_code\"").is_err());
    }

    #[test]
    fn the_codes_are_the_documented_list() {
        let mut ours: Vec<&str> = OutcomeCode::VARIANTS.iter().map(|c| c.as_str()).collect();
        ours.sort_unstable();
        let note = include_str!("../../docs/design/mcp-surface.md");
        let mut doc = documented_codes(note, "## Outcome codes");
        doc.sort_unstable();
        assert_eq!(
            ours, doc,
            "every outcome code is documented in docs/design/mcp-surface.md (## Outcome codes), \
             and only those"
        );
    }
}
