//! Where a session's commands run in the gateway's runtime area, checked before each command
//! (RT29 B3): the area the state dir records now, verified (`sandbox::protected::verified_area`:
//! not a symlink, ours, 0700, naming the state dir); when the gateway replaced an area that went,
//! the session's scratch root and layer move to the new one (a fresh layer, said in the result).
//! Nothing is made or written at an old name, which another account may hold.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{CommandSandbox, SessionLayer, lock};

/// The session's places in the runtime area as last checked.
#[derive(Debug)]
pub(super) struct Placed {
    /// Per-command scratch dirs are created below this (the session's runtime dir).
    pub(super) scratch_root: PathBuf,
    /// The session's copy-on-write layer (`None`: commands see the file system read-only).
    pub(super) layer: Option<Arc<SessionLayer>>,
    /// The area they are in, as verified at the last command (`None`: not yet).
    area: Option<sandbox::protected::VerifiedArea>,
}

/// The runtime area the session's places are in: the one `state_dir` records, the session's
/// dir in it named `session_dir`.
#[derive(Debug, Clone)]
pub(super) struct FollowArea {
    state_dir: PathBuf,
    session_dir: String,
}

/// The session's scratch root and layer now, and a note when they moved to a new area.
pub(super) type Places = (PathBuf, Option<Arc<SessionLayer>>, Option<String>);

/// How long a command waits for the gateway to replace a runtime area that went (the gateway
/// checks it every second).
pub(super) const AREA_WAIT: Duration = Duration::from_secs(4);

/// The runtime area is gone or replaced and no new one was made in time.
#[derive(Debug, thiserror::Error)]
#[error(
    "the command was not run: the gateway's private runtime area for commands was removed or \
     replaced (e.g. by a /tmp cleaner) and no new one is ready yet; retry the command in a few \
     seconds"
)]
pub struct AreaGone(pub(super) sandbox::protected::AreaError);

impl CommandSandbox {
    /// The scratch root is the dir `session_dir` in the runtime area `state_dir` records: before
    /// each command the area is checked ([`sandbox::protected::verified_area`]), and when the
    /// gateway replaced it (RT29 B3) the session's places move to the new one, with a fresh
    /// layer. Nothing is made or written at the old name.
    pub fn in_runtime_area(mut self, state_dir: &Path, session_dir: String) -> Self {
        self.follow = Some(FollowArea {
            state_dir: state_dir.to_path_buf(),
            session_dir,
        });
        self
    }

    /// The session's scratch root and layer in the runtime area as it is now, waiting up to
    /// `wait` for the gateway to replace an area that went. A state dir that records no area (an
    /// older gateway's) keeps the places the broker started with. A note when they moved.
    pub(super) fn places(&self, wait: Duration) -> Result<Places, AreaGone> {
        let current = |placed: &Placed| (placed.scratch_root.clone(), placed.layer.clone(), None);
        let Some(follow) = &self.follow else {
            return Ok(current(&lock(&self.placed)));
        };
        let deadline = Instant::now() + wait;
        let found = loop {
            match sandbox::protected::verified_area(&follow.state_dir) {
                Ok(found) => break found,
                Err(sandbox::protected::AreaError::NotRecorded) => {
                    return Ok(current(&lock(&self.placed)));
                }
                Err(err) if Instant::now() >= deadline => return Err(AreaGone(err)),
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        let mut placed = lock(&self.placed);
        let moved = match &placed.area {
            Some(area) => *area != found,
            None => placed.scratch_root.parent() != Some(found.path.as_path()),
        };
        let mut note = None;
        if moved {
            tracing::warn!(
                "the command runtime area was replaced; this session's commands now use {}",
                found.path.display()
            );
            placed.scratch_root = found.path.join(&follow.session_dir);
            if let Some(old) = placed.layer.take() {
                placed.layer = Some(Arc::new(layer_at(&placed.scratch_root, old.budget())));
                note = Some(
                    "the gateway's runtime area for commands was removed (e.g. by a /tmp \
                     cleaner) and replaced: this command started from a clean layer"
                        .to_string(),
                );
            }
        }
        placed.area = Some(found);
        Ok((placed.scratch_root.clone(), placed.layer.clone(), note))
    }

    /// The session's layer if its runtime area is still the one checked (what a broker may
    /// remove or set aside at its start and end; never in a name another account took).
    pub fn layer_in_place(&self) -> Option<Arc<SessionLayer>> {
        self.unmoved().and_then(|(_, layer)| layer)
    }

    /// The session's scratch root if its runtime area is still the one checked.
    pub fn scratch_root_in_place(&self) -> Option<PathBuf> {
        self.unmoved().map(|(root, _)| root)
    }

    /// The session's places if the area the state dir records is still the one they are in;
    /// `None` when it went or was replaced. Only looks: the move to a new area is the next
    /// command's ([`Self::places`]), which says so in its result.
    fn unmoved(&self) -> Option<(PathBuf, Option<Arc<SessionLayer>>)> {
        let placed = lock(&self.placed);
        let current = (placed.scratch_root.clone(), placed.layer.clone());
        let Some(follow) = &self.follow else {
            return Some(current);
        };
        match sandbox::protected::verified_area(&follow.state_dir) {
            Ok(found) => {
                let same = match &placed.area {
                    Some(area) => *area == found,
                    None => placed.scratch_root.parent() == Some(found.path.as_path()),
                };
                same.then_some(current)
            }
            Err(sandbox::protected::AreaError::NotRecorded) => Some(current),
            Err(_) => None,
        }
    }
}

pub(super) fn placed(scratch_root: PathBuf) -> Arc<Mutex<Placed>> {
    Arc::new(Mutex::new(Placed {
        scratch_root,
        layer: None,
        area: None,
    }))
}

/// The layer of a session whose scratch root is `scratch_root`: `<root>/layer`, its trash the
/// area's.
pub(super) fn layer_at(scratch_root: &Path, budget: u64) -> SessionLayer {
    let area = scratch_root.parent().unwrap_or(scratch_root);
    SessionLayer::new(
        scratch_root.join("layer"),
        area.join(sandbox::layer::TRASH),
        budget,
    )
}
