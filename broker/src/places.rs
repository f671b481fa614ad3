//! Where a session's own directories are, from its spec: its managed worktree (the one part of
//! the state dir its writes and commands may reach) and the root of its commands' scratch dirs.

use std::path::{Path, PathBuf};

use common::protocol::BrokerSpec;

/// Per-session root of the commands' scratch dirs: in the gateway's command runtime area
/// ([`sandbox::protected::command_runtime_area`]: 0700, protected like the state dir, in `/tmp` so
/// a command's HOME reveals no state path), so no other session reaches it with Read (refused)
/// or RunCommand (masked); each command's own scratch is bound back for it alone.
/// Its name is the session id's first 12 characters after `ns_` (the gateway's sweep at start
/// keeps the names of sessions whose broker is alive: `gateway::runtime_area`).
/// Where it is at the broker's start: the executor checks the area before each command and
/// follows the gateway to a new one (`CommandSandbox::in_runtime_area`).
pub(crate) fn command_scratch_root(state_dir: &str, session_id: &str) -> PathBuf {
    sandbox::protected::command_runtime_area(Path::new(state_dir))
        .join(session_dir_name(session_id))
}

pub(crate) use sandbox::protected::session_dir_name;

/// The session's own managed worktree: a `worktree_write` session's working directory, which
/// the gateway made at `<worktree_dir>/<session_id>`. Anything else is not one.
pub fn own_worktree(spec: &BrokerSpec) -> Option<PathBuf> {
    if spec.profile != common::tools::CapabilityProfile::WorktreeWrite {
        return None;
    }
    // A DeepSeek sub-session works in its delegating session's worktree.
    let owner = spec
        .delegation
        .as_ref()
        .map_or(&spec.session_id, |d| &d.parent_session_id);
    let expected = PathBuf::from(spec.worktree_dir.as_ref()?).join(owner);
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    let wd = canonical(Path::new(&spec.working_directory))?;
    (canonical(&expected)? == wd).then_some(wd)
}
