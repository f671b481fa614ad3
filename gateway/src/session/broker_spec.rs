//! What a session hands the broker host to start its broker: the session's part of the broker's
//! spec, taken from its record here, so `brokers/` never sees a session record.

use crate::brokers::SessionSpec;
use crate::state::{SessionRecord, WorkspaceKind};

impl SessionRecord {
    /// The facts of this session its broker is started with.
    pub(super) fn broker_spec(&self) -> SessionSpec {
        SessionSpec {
            session_id: self.id.clone(),
            claude_session_id: self.claude_session_id.clone(),
            profile: self.profile,
            subagent_policy: self.subagent_policy,
            working_directory: self.working_directory.clone(),
            working_directory_identity: self.workspace_identity.map(|w| w.working_directory),
            // What a managed worktree holds reaches its source directory at a merge.
            merge_target: (self.workspace.kind == WorkspaceKind::Worktree)
                .then(|| self.source_directory.clone()),
            delegation: self
                .delegation
                .as_ref()
                .map(|d| common::protocol::DelegationSpec {
                    parent_session_id: d.parent_session_id.clone(),
                    runner_model: d.runner_model.clone(),
                }),
        }
    }
}
