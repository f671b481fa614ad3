//! What a set of start-up or project files assigns, as the rest of `autorun` takes it: the
//! table's variables, git's config entries, what was not read, runs and files read.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;

use super::super::git_syntax::Entry;
use super::super::owner_env;
use super::{MARK, NOT_READ, Reader};

/// What a set of files assigns.
#[derive(Debug, Default)]
pub(in crate::protected::autorun) struct Assigned {
    /// The table's variables ([`owner_env::VARS`]), in the order assigned.
    pub env: Vec<(&'static str, OsString)>,
    /// The config entries git's config variables assigned there give.
    pub git_entries: Vec<Entry>,
    /// Variables assigned a value not read here, with why: the whole tree is refused.
    pub unreadable: Vec<(String, String)>,
    /// A variable's entry built on what is not read: everything below its literal directory
    /// part is protected.
    pub below: Vec<(&'static str, PathBuf)>,
    /// Files a shell start-up file sources by a relative path (from wherever the shell is).
    pub relative_sources: Vec<PathBuf>,
    /// Every file read, and every start-up file looked for: a change to any of them changes
    /// what the rules derive ([`super::owner_files`]).
    pub read: Vec<PathBuf>,
    /// Files a shell start-up file sources or runs by an absolute path (after `~`, `$HOME` and
    /// its variables are expanded): a program on a line of its own, in `PROMPT_COMMAND`, a
    /// trap or an alias, or a script given to a shell or an interpreter (red team 43a B1).
    pub runs: Vec<PathBuf>,
    /// Programs they run by a bare name (found on `PATH`): program names
    /// ([`super::super::programs`]).
    pub bare_runs: Vec<String>,
    /// Directories a start-up file's command names by a pattern (`for f in /p/rc.d/*.sh; do .
    /// "$f"; done`): a file made there later matches too, so every file below is a run.
    pub run_dirs: Vec<PathBuf>,
    /// Every variable's absolute values, as the files assign them: what `$PROJ/x` in a tool's
    /// config started from that shell names (red team 46a).
    pub absolute_vars: HashMap<String, Vec<String>>,
}

impl Assigned {
    /// Without the refusal of a home past the reader's bounds: for a home the account's
    /// terminals are not known to use (another gateway's `$HOME`), its files past the bounds
    /// go unread instead (red team 48 F6, 49: a stopped test gateway's home refused every
    /// write of every gateway of the account; decision in docs/decisions.md).
    pub(in crate::protected::autorun) fn unbounded_as_unread(mut self) -> Self {
        self.unreadable.retain(|(_, why)| why != super::PAST_BOUNDS);
        self
    }

    /// What `reader` read, git's assignments read into config entries.
    pub(super) fn new(reader: Reader) -> Self {
        let absolute_vars = reader
            .vars
            .iter()
            .map(|(name, values)| {
                let values: Vec<String> = values
                    .iter()
                    .filter(|v| v.starts_with('/') && !v.contains(MARK))
                    .cloned()
                    .collect();
                (name.clone(), values)
            })
            .filter(|(_, values)| !values.is_empty())
            .collect();
        let mut unreadable = reader.unreadable;
        let git = reader.git;
        let mut git_entries = owner_env::git_entries(
            |name| {
                git.iter()
                    .rev()
                    .find(|(var, _)| var == name)
                    .map(|(_, value)| OsString::from(value))
                    .filter(|value| !value.is_empty())
            },
            &mut unreadable,
        );
        // An entry built on what is not read (`GIT_CONFIG_VALUE_0=$(…)`) may name anything.
        git_entries.retain(|entry| {
            let marked = [
                Some(&entry.key),
                entry.subsection.as_ref(),
                entry.value.as_ref(),
            ]
            .into_iter()
            .flatten()
            .any(|text| text.contains(MARK));
            if marked {
                unreadable.push((
                    format!(
                        "GIT_CONFIG ({}.{})",
                        entry.section,
                        entry.key.replace(MARK, "?")
                    ),
                    NOT_READ.to_string(),
                ));
            }
            !marked
        });
        Self {
            env: reader.out,
            git_entries,
            unreadable,
            below: reader.below,
            relative_sources: reader.relative_sources,
            runs: reader.runs,
            bare_runs: reader
                .bare_runs
                .into_iter()
                .filter(|name| !reader.defined.contains(name))
                .collect(),
            run_dirs: reader.run_dirs,
            read: reader.read,
            absolute_vars,
        }
    }
}
