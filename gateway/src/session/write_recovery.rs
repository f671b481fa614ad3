//! Resolution of writes a broker left `prepared` when it died (DESIGN §5, §6): once the broker
//! that prepared a write is verifiably gone, the real file decides — new content: `committed`;
//! old content: `not_applied` (reported, never retried); anything else: `indeterminate`, and the
//! session stops with `recovery_required`. Nothing is ever written again here.

use std::path::Path;

use broker::executor::write::{self, CrashResolution};
use common::outcome::OutcomeCode;
use common::tools::{ActionOutcome, Receipt, ToolStatus};
use sandbox::write_path::WriteRoot;

use super::Gateway;
use crate::state::{ActionRecord, ActionState, LedgerEvent, StoreError};

impl Gateway {
    /// Resolve the session's `prepared` writes from the real files, if the broker that prepared
    /// them is gone (a live broker finishes them itself and reports). Returns how many were
    /// resolved.
    pub fn resolve_prepared_writes(&self, session_id: &str) -> usize {
        let loaded = self.store.read(|tx| {
            let session = tx.session(session_id)?;
            let prepared = tx.prepared_actions(session_id)?;
            Ok::<_, StoreError>((session, prepared))
        });
        let Ok((Some(session), prepared)) = loaded else {
            return 0;
        };
        // A broker that may still run (same boot, pid, start time) owns its writes.
        let broker_may_be_alive = session
            .broker
            .as_ref()
            .is_some_and(|b| self.host.is_alive(b));
        if prepared.is_empty() || broker_may_be_alive {
            return 0;
        }
        let own_worktree = (session.profile == common::tools::CapabilityProfile::WorktreeWrite)
            .then(|| Path::new(&session.working_directory));
        // Settling only hashes the file and removes our temp file: a write the broker prepared
        // under the opt-in of its start is settled even if the owner withdrew it since.
        let policy = self
            .config
            .write_policy(own_worktree)
            .with_autorun_allowed(sandbox::protected::autorun::AutorunAllowed::all());
        let root = WriteRoot::open(&policy, Path::new(&session.working_directory));
        let mut resolved = 0;
        for action in prepared {
            let Some(intent) = action.prepared.clone() else {
                continue;
            };
            let resolution = match &root {
                Ok(root) => write::recover_prepared(&policy, root, &intent),
                Err(_) => CrashResolution::Indeterminate,
            };
            if self
                .record_resolution(&session.id, action, resolution)
                .is_ok()
            {
                resolved += 1;
            }
        }
        resolved
    }

    fn record_resolution(
        &self,
        session_id: &str,
        action: ActionRecord,
        resolution: CrashResolution,
    ) -> Result<(), StoreError> {
        let Some((action, event)) = settle_after_crash(action, resolution) else {
            return Ok(());
        };
        let session = self.store.write(|tx| {
            let Some(mut session) = tx.session(session_id)? else {
                return Ok::<_, StoreError>(None);
            };
            // Only a write still `prepared` is resolved: a late report from the broker wins.
            if tx.action(&action.action_id)?.map(|a| a.state) != Some(ActionState::Prepared) {
                return Ok(None);
            }
            tx.put_action(&action)?;
            if action.state == ActionState::Indeterminate && !session.status.is_terminal() {
                session.write_indeterminate(&action);
                self.commit(tx, &mut session, &event)?;
                Ok(Some(session))
            } else {
                tx.record(&session.id, &event)?;
                Ok(None)
            }
        })?;
        if let Some(session) = session {
            self.notify(&session);
        }
        Ok(())
    }
}

/// What a prepared write's crash resolution makes of its action: its final state and outcome
/// (with a receipt of what the file holds), and the ledger event; `None` for an action that was
/// never prepared.
pub(crate) fn settle_after_crash(
    mut action: ActionRecord,
    resolution: CrashResolution,
) -> Option<(ActionRecord, LedgerEvent)> {
    let intent = action.prepared.clone()?;
    let path = intent.path.clone();
    let (state, status, code, text) = match resolution {
        CrashResolution::Committed => (
            ActionState::Committed,
            ToolStatus::Ok,
            None,
            format!(
                "{path}: the write completed before its broker stopped (found the new content \
                 on disk after the crash)"
            ),
        ),
        CrashResolution::NotApplied => (
            ActionState::NotApplied,
            ToolStatus::Error,
            Some(OutcomeCode::NotApplied),
            format!(
                "not_applied: {path}: the broker stopped before the write replaced the file; \
                 the file is unchanged and the write was not retried"
            ),
        ),
        CrashResolution::Indeterminate => (
            ActionState::Indeterminate,
            ToolStatus::Error,
            Some(OutcomeCode::Indeterminate),
            format!(
                "indeterminate: {path}: after a crash the file holds neither the old nor the \
                 new content; nothing more is written in this session"
            ),
        ),
    };
    action.state = state;
    action.outcome = Some(ActionOutcome {
        status,
        output: text,
        truncated: false,
        error_code: code,
        receipt: Receipt {
            action_id: action.action_id.clone(),
            path: Some(path.clone()),
            pre_sha256: intent.pre_sha256.clone(),
            post_sha256: (state == ActionState::Committed).then(|| intent.post_sha256.clone()),
            ..Receipt::default()
        },
    });
    let event = LedgerEvent::WriteResolvedAfterCrash {
        action_id: action.action_id.clone(),
        path,
        resolution: state,
        pre_sha256: intent.pre_sha256,
        post_sha256: intent.post_sha256,
        receipt: action.outcome.as_ref().map(|o| o.receipt.clone()),
    };
    Some((action, event))
}
