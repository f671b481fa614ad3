//! The facts a session starts with (profile, subagent policy, directories, workspace, skills: its
//! `session_started` event), held in memory as this gateway wrote them or found them checked at
//! open. Every load of a session takes them from here, never from a row edited since: a profile
//! changed in the database while the gateway runs does not change the tools it offers (red team
//! 27b), and a session row inserted behind its back is refused.

use std::collections::HashMap;
use std::sync::Mutex;

use common::tools::{CapabilityProfile, SubagentPolicy};

use super::error::StoreError;
use super::parts::{SkillSnapshotEntry, Workspace};
use super::records::SessionRecord;

/// One session's fixed facts.
#[derive(Debug, Clone)]
struct Facts {
    profile: CapabilityProfile,
    subagent_policy: SubagentPolicy,
    source_directory: String,
    working_directory: String,
    workspace: Workspace,
    skill_snapshot: Vec<SkillSnapshotEntry>,
}

/// Every session's fixed facts, by id.
#[derive(Debug, Default)]
pub(super) struct Fixed(Mutex<HashMap<String, Facts>>);

impl Fixed {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Facts>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Remember a session's facts the first time the gateway writes or (at open, after the
    /// check) reads it; later writes never change them.
    pub(super) fn learn(&self, session: &SessionRecord) {
        self.map()
            .entry(session.id.clone())
            .or_insert_with(|| Facts {
                profile: session.profile,
                subagent_policy: session.subagent_policy,
                source_directory: session.source_directory.clone(),
                working_directory: session.working_directory.clone(),
                workspace: session.workspace.clone(),
                skill_snapshot: session.skill_snapshot.clone(),
            });
    }

    /// `session` as loaded, with its fixed facts put back; a session this gateway never wrote
    /// nor checked is refused.
    pub(super) fn apply(&self, mut session: SessionRecord) -> Result<SessionRecord, StoreError> {
        let map = self.map();
        let Some(facts) = map.get(&session.id) else {
            return Err(StoreError::LedgerBroken(format!(
                "session {} was added to the database outside the gateway",
                common::display::one_line(&session.id)
            )));
        };
        session.profile = facts.profile;
        session.subagent_policy = facts.subagent_policy;
        session.source_directory.clone_from(&facts.source_directory);
        session
            .working_directory
            .clone_from(&facts.working_directory);
        session.workspace = facts.workspace.clone();
        session.skill_snapshot.clone_from(&facts.skill_snapshot);
        Ok(session)
    }
}
