//! Whether the owner's shell start-up files changed since the write rules read them (red team
//! 44a C1-B6): a live session's write policy rescans its root when they did, not only when its
//! last scan is ten seconds old, so a line the owner adds to `~/.bashrc` (`source
//! ~/p/tools/env.sh`, perhaps at the model's request) protects that file from the next write.
//! One record per process (a broker's write rules read the account's files once per scan).

use std::path::PathBuf;
use std::sync::Mutex;

use super::startup_links::{Stamp, stamp};

/// The files last read (or looked for) and their stamps then, under a generation that moves
/// whenever any of them changes.
#[derive(Debug, Default)]
struct Watched {
    generation: u64,
    files: Vec<(PathBuf, Option<Stamp>)>,
}

impl Watched {
    fn record(&mut self, files: &[PathBuf]) -> u64 {
        let stamped: Vec<(PathBuf, Option<Stamp>)> =
            files.iter().map(|f| (f.clone(), stamp(f))).collect();
        if self.files != stamped {
            self.generation += 1;
            self.files = stamped;
        }
        self.generation
    }

    fn generation(&mut self) -> u64 {
        if self.files.iter().any(|(file, was)| stamp(file) != *was) {
            self.generation += 1;
            for (file, was) in &mut self.files {
                *was = stamp(file);
            }
        }
        self.generation
    }
}

static WATCHED: Mutex<Watched> = Mutex::new(Watched {
    generation: 0,
    files: Vec::new(),
});

/// Note `files` as what the rules were just derived from; the generation they belong to.
pub(super) fn record(files: &[PathBuf]) -> u64 {
    WATCHED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .record(files)
}

/// The current generation: the files noted last are stamped again (one `lstat` each), and a
/// change moves it.
pub fn generation() -> u64 {
    WATCHED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .generation()
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // tests make their fixtures directly
mod tests {
    use super::*;

    #[test]
    fn a_change_to_a_noted_file_moves_the_generation() {
        let dir = tempfile::tempdir().unwrap();
        let (rc, later) = (dir.path().join(".bashrc"), dir.path().join(".profile"));
        std::fs::write(&rc, "x\n").unwrap();
        let mut watched = Watched::default();
        let first = watched.record(&[rc.clone(), later.clone()]);
        assert_eq!(watched.generation(), first);
        assert_eq!(watched.record(&[rc.clone(), later.clone()]), first);
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&rc, "source /p/tools/env.sh\n").unwrap();
        let second = watched.generation();
        assert_ne!(second, first);
        assert_eq!(watched.generation(), second, "stable until the next change");
        std::fs::write(&later, "PATH=/x:$PATH\n").unwrap();
        assert_ne!(watched.generation(), second, "a file made later counts too");
    }
}
