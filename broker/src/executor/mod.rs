//! Executor of the logical tools: runs one approved action against the file system under the
//! [`PathPolicy`] and produces a bounded [`ActionOutcome`] with a receipt. Blocking; callers run
//! it on `spawn_blocking`.
//!
//! Reads: `read`, `find_files`, `search_text`. Commands: `run_command`. Writes: `edit_ops` (the
//! pure Edit/Write/NotebookEdit transformations), `write` (the durable compare-and-swap write
//! with its `prepared` journal callback, crash resolution and temp-file cleanup) and `failpoint`
//! (crash and error injection for tests and the `failpoints` feature).

mod content;
pub mod edit_ops;
pub mod failpoint;
mod find_files;
mod matcher;
mod read;
mod run_command;
mod search_text;
pub mod write;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::outcome::OutcomeCode;
use common::protocol::WriteEnd;
use common::tools::{
    ActionOutcome, MAX_TOOL_OUTPUT_BYTES, Receipt, ToolArgs, ToolStatus, clip_utf8,
};
use sandbox::path_policy::{PathPolicy, PathRefusal};
use sandbox::write_path::{WriteRefusal, WriteRoot};

#[cfg(target_os = "linux")]
pub use run_command::run_confined;
pub use run_command::{
    CommandCleanups, CommandError, CommandSandbox, ConfinedRun, PreparedHelper, ReportProblem,
    SCRATCH_MOUNT_POINT, stop_running_commands,
};

/// Default wall-clock budget of one `FindFiles`/`SearchText` walk.
pub const DEFAULT_TIME_BUDGET: Duration = Duration::from_secs(10);

/// Bytes kept free at the end of an output for the truncation/footer note.
const NOTE_RESERVE: usize = 512;

/// Runs read-only actions. Cheap to share behind an `Arc`.
#[derive(Debug, Clone)]
pub struct Executor {
    policy: Arc<PathPolicy>,
    /// The policy writes use: the same protected set, but only this session's own managed
    /// worktree open inside the state dir, and the install locations refused.
    write_policy: Arc<PathPolicy>,
    working_directory: PathBuf,
    time_budget: Duration,
    /// How `RunCommand` is confined.
    commands: CommandSandbox,
    /// Where writes may go: the working directory held open, or why it could not be opened
    /// (`None`: this session has no write profile, every write is refused).
    write_root: Option<Arc<Result<WriteRoot, WriteRefusal>>>,
}

/// One executed action, and for a write that reached `prepared`, how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Executed {
    pub outcome: ActionOutcome,
    pub write: Option<WriteEnd>,
}

/// A journal for executors without a gateway: every write is refused before anything happens.
pub struct NoJournal;

impl write::WriteJournal for NoJournal {
    fn prepared(&mut self, _prepared: &write::PreparedWrite) -> Result<(), write::JournalError> {
        Err(write::JournalError::NoGateway)
    }
}

impl Executor {
    pub fn new(policy: PathPolicy, working_directory: PathBuf) -> Self {
        let policy = Arc::new(policy);
        Self {
            commands: CommandSandbox::from_policy(&policy),
            write_policy: policy.clone(),
            policy,
            working_directory,
            time_budget: DEFAULT_TIME_BUDGET,
            write_root: None,
        }
    }

    /// Allow writes below the working directory (the write profiles). The root is opened now,
    /// without following symlinks, and must be the directory `expected` names (device, inode)
    /// when given; if that fails every write says why.
    pub fn with_writes(mut self, expected: Option<(u64, u64)>) -> Self {
        let root = WriteRoot::open(&self.write_policy, &self.working_directory)
            .and_then(|root| root.expecting(expected));
        self.write_root = Some(Arc::new(root));
        self
    }

    /// The policy writes use (call before [`Self::with_writes`]); by default the read policy.
    pub fn with_write_policy(mut self, policy: PathPolicy) -> Self {
        self.write_policy = Arc::new(policy);
        self
    }

    /// Override the wall-clock budget of `FindFiles`/`SearchText` (default 10 s).
    pub fn with_time_budget(mut self, budget: Duration) -> Self {
        self.time_budget = budget;
        self
    }

    pub fn policy(&self) -> &PathPolicy {
        &self.policy
    }

    pub fn working_directory(&self) -> &Path {
        &self.working_directory
    }

    /// Execute one action that writes nothing (a write is refused). Never panics; every failure
    /// is an `Error` outcome with a stable code.
    pub fn execute(&self, action_id: &str, args: &ToolArgs) -> ActionOutcome {
        self.execute_with_journal(action_id, args, &mut NoJournal)
            .outcome
    }

    /// Execute one action; a write records its intent through `journal` before it happens.
    pub fn execute_with_journal(
        &self,
        action_id: &str,
        args: &ToolArgs,
        journal: &mut dyn write::WriteJournal,
    ) -> Executed {
        let started = Instant::now();
        // A gateway registered since the last call is protected before this one runs.
        self.policy.refresh_instances();
        let mut write = |op: write::WriteOp, expected: &Option<String>| {
            self.write(action_id, &op, expected.as_deref(), journal, started)
        };
        let result = match args {
            ToolArgs::Read(a) => read::run(self, a),
            ToolArgs::FindFiles(a) => find_files::run(self, a, started),
            ToolArgs::SearchText(a) => search_text::run(self, a, started),
            ToolArgs::RunCommand(a) => {
                return Executed {
                    outcome: run_command::run(self, action_id, a, started),
                    write: None,
                };
            }
            ToolArgs::Edit(a) => return write(a.into(), &a.expected_sha256),
            ToolArgs::Write(a) => return write(a.into(), &a.expected_sha256),
            ToolArgs::NotebookEdit(a) => return write(a.into(), &a.expected_sha256),
        };
        Executed {
            outcome: finish(action_id, result, started),
            write: None,
        }
    }

    /// Run one write through the durable protocol.
    fn write(
        &self,
        action_id: &str,
        op: &write::WriteOp,
        expected: Option<&str>,
        journal: &mut dyn write::WriteJournal,
        started: Instant,
    ) -> Executed {
        let root = match self.write_root.as_deref() {
            Some(Ok(root)) => root,
            refused => {
                let message = match refused {
                    Some(Err(refusal)) => {
                        format!("the working directory cannot be written: {refusal}")
                    }
                    _ => "this session's capability profile does not allow writes".into(),
                };
                let failure =
                    Failure::new(OutcomeCode::NotPermitted, Path::new(op.path()), message);
                return Executed {
                    outcome: finish(action_id, Err(failure), started),
                    write: None,
                };
            }
        };
        // Whatever the outcome, the next command must see the real file, not a layer copy made
        // by an earlier command (a refused write changed nothing, and forgetting costs little).
        if let Some(layer) = self.commands.layer() {
            layer.note_written(Path::new(op.path()));
        }
        match write::run_write(&self.write_policy, root, action_id, op, expected, journal) {
            Ok(receipt) => {
                let (pre, post) = (receipt.pre_sha256.clone(), receipt.post_sha256.clone());
                let before = pre.as_deref().unwrap_or("absent (new file)");
                let done = Done {
                    output: format!(
                        "{}: {} ({} bytes written; sha256 before {before}, after {post})",
                        receipt.path, receipt.summary, receipt.bytes_written
                    ),
                    truncated: false,
                    path: receipt.path,
                    sha256: None,
                };
                let mut outcome = finish(action_id, Ok(done), started);
                outcome.receipt.pre_sha256 = pre;
                outcome.receipt.post_sha256 = Some(post);
                Executed {
                    outcome,
                    write: Some(WriteEnd::Committed),
                }
            }
            Err(failure) => {
                let write_end = match failure.disposition {
                    write::Disposition::NotPrepared => None,
                    write::Disposition::NotApplied => Some(WriteEnd::NotApplied),
                    write::Disposition::Indeterminate => Some(WriteEnd::Indeterminate),
                };
                let failure = Failure {
                    code: failure.code,
                    message: failure.message,
                    path: Some(failure.path),
                };
                Executed {
                    outcome: finish(action_id, Err(failure), started),
                    write: write_end,
                }
            }
        }
    }
    /// The root of a walk: the given absolute path, else the working directory.
    fn root(&self, path: Option<&String>) -> PathBuf {
        path.map(PathBuf::from)
            .unwrap_or_else(|| self.working_directory.clone())
    }
}

/// The outcome of a finished (non-command) action.
fn finish(action_id: &str, result: Result<Done, Failure>, started: Instant) -> ActionOutcome {
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match result {
        Ok(done) => {
            let mut output = done.output;
            let clipped = clip_utf8(&mut output, MAX_TOOL_OUTPUT_BYTES);
            ActionOutcome {
                status: ToolStatus::Ok,
                output,
                truncated: done.truncated || clipped,
                error_code: None,
                receipt: Receipt {
                    action_id: action_id.to_string(),
                    path: Some(done.path),
                    sha256: done.sha256,
                    duration_ms,
                    ..Receipt::default()
                },
            }
        }
        Err(failure) => {
            // The code leads so that the model sees it (tool results carry no separate code).
            let mut output = format!("{}: {}", failure.code, failure.message);
            clip_utf8(&mut output, MAX_TOOL_OUTPUT_BYTES);
            ActionOutcome {
                status: ToolStatus::Error,
                output,
                truncated: false,
                error_code: Some(failure.code),
                receipt: Receipt {
                    action_id: action_id.to_string(),
                    path: failure.path,
                    duration_ms,
                    ..Receipt::default()
                },
            }
        }
    }
}

/// A successful action before it becomes an [`ActionOutcome`].
struct Done {
    output: String,
    truncated: bool,
    path: String,
    sha256: Option<String>,
}

/// A failed action: stable code, message for the model, and the path it concerned.
#[derive(Debug)]
struct Failure {
    code: OutcomeCode,
    message: String,
    path: Option<String>,
}

impl Failure {
    fn new(code: OutcomeCode, path: &Path, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            path: Some(path.display().to_string()),
        }
    }

    fn refusal(path: &Path, refusal: PathRefusal) -> Self {
        Self::new(refusal.code(), path, refusal.to_string())
    }
}

/// Output under construction that never exceeds the 64 KiB limit (less room for a final note).
struct BoundedOutput {
    text: String,
    full: bool,
}

impl BoundedOutput {
    fn new() -> Self {
        Self {
            text: String::new(),
            full: false,
        }
    }

    /// Append `line` and a newline if it fits; otherwise mark the output full and return false.
    fn push_line(&mut self, line: &str) -> bool {
        if self.full || self.text.len() + line.len() + 1 > MAX_TOOL_OUTPUT_BYTES - NOTE_RESERVE {
            self.full = true;
            return false;
        }
        self.text.push_str(line);
        self.text.push('\n');
        true
    }
}

/// Shorten `text` to `max` characters, marking the cut with `…`.
fn clip_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}
