//! Checks on `native_session_start` input that need the filesystem or configuration.

use std::path::{Path, PathBuf};

use sandbox::path_policy::WorkingDirRefusal;

use common::tools::{CapabilityProfile, SubagentPolicy};

use crate::error::{ErrorCode, ToolError};
use crate::service::{Gateway, StartRequest};

/// Refuse a start that this gateway cannot honour, before anything is created.
/// Returns the working directory resolved by identity (canonical), which the session uses.
pub fn start(gateway: &Gateway, req: &StartRequest) -> Result<PathBuf, ToolError> {
    if req.prompt.trim().is_empty() {
        return Err(ToolError::invalid("prompt must not be empty"));
    }
    if req.prompt.len() > 786_432 {
        return Err(ToolError::invalid(
            "prompt is larger than 768 KiB; shorten it",
        ));
    }
    if req.idempotency_key.is_empty() || req.idempotency_key.len() > 200 {
        return Err(ToolError::invalid(
            "idempotency_key must be 1 to 200 characters",
        ));
    }
    let dir = Path::new(&req.working_directory);
    if !dir.is_absolute() {
        return Err(ToolError::invalid(format!(
            "working_directory must be an absolute path, got {:?}",
            req.working_directory
        )));
    }
    if dir
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(ToolError::invalid(
            "working_directory must not contain `..` segments",
        ));
    }
    // Every profile: resolved by identity (canonical, opened without following anything, every
    // component's device and inode checked against the protected set and its mount aliases).
    let resolved = match gateway.config.start_policy().resolve_working_directory(dir) {
        Ok(resolved) => resolved,
        Err(refusal @ (WorkingDirRefusal::NotFound | WorkingDirRefusal::NotADirectory)) => {
            return Err(ToolError::invalid(format!(
                "{refusal} ({:?})",
                req.working_directory
            )));
        }
        Err(refusal) if refusal.code() == "not_permitted" => {
            return Err(ToolError::new(ErrorCode::NotPermitted, refusal.to_string()));
        }
        Err(refusal) => return Err(ToolError::invalid(refusal.to_string())),
    };
    if std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.file_type().is_symlink()) {
        return Err(ToolError::invalid(
            "working_directory is a symlink; give the real directory path",
        ));
    }
    if req.capability_profile == CapabilityProfile::DirectWrite {
        // The write root must itself be writable under the write policy: not protected, not an
        // install location, no `.git` or symlink component (the broker opens it the same way).
        if let Some(reason) =
            sandbox::protected::unfit_write_root(&resolved, &gateway.config.owner_home)
        {
            return Err(ToolError::new(
                ErrorCode::NotPermitted,
                format!("direct_write cannot use this working_directory: it {reason}"),
            ));
        }
        let policy = gateway.config.write_policy(None);
        if let Err(refusal) = sandbox::write_path::WriteRoot::open(&policy, &resolved) {
            return Err(ToolError::new(
                ErrorCode::NotPermitted,
                format!("direct_write cannot write in this working_directory: {refusal}"),
            ));
        }
    }
    if req.subagent_policy != SubagentPolicy::None {
        return Err(ToolError::new(
            ErrorCode::NotPermitted,
            "subagent_policy deepseek_explicit (DeepSeek sub-sessions) is not available in this \
             build; use none",
        ));
    }
    if req.skill_contexts.len() > 8 {
        return Err(ToolError::invalid(
            "skill_contexts holds at most 8 items; send 8 or fewer (skills are not available in \
             this build yet, so omit them)",
        ));
    }
    if !req.skill_contexts.is_empty() {
        return Err(ToolError::new(
            ErrorCode::NotPermitted,
            "skill_contexts are not available in this build yet; start without them",
        ));
    }
    if req.wait_seconds > 50 {
        return Err(ToolError::invalid("wait_seconds must be between 0 and 50"));
    }
    Ok(resolved)
}
