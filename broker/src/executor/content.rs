//! The bytes a write puts in place, described as pieces of the old content and inserted bytes
//! (so an edit with few matches copies nothing before the temp file is written), and the two
//! SHA-256 hashes a write needs, with the prefix the old and new content share hashed once.
//!
//! Why: for a 4 MiB file, two full SHA-256 passes and a spliced copy cost about twice what the
//! bare durable write costs (`gateway/benches/WRITE_RESULTS.md`). Here the old bytes are hashed on
//! a second thread while the new content is computed, leaving the hash state every
//! [`CHECKPOINT`] bytes; the new content's hash starts from the last checkpoint before the first
//! changed byte, so an edit in the middle of a file hashes its second half only, on the first
//! thread, while the second finishes the old bytes.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Condvar, Mutex, MutexGuard};

use common::hash::sha256_hex;
use sha2::{Digest, Sha256};

/// Distance between two saved hash states of the old bytes.
const CHECKPOINT: usize = 64 * 1024;
/// From this size on, the old bytes are hashed on a second thread.
const PARALLEL_HASH_BYTES: usize = 256 * 1024;

/// One run of the new content.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// These bytes of the old content.
    Old(Range<usize>),
    /// These bytes of [`NewContent::inserted`].
    Inserted(Range<usize>),
}

/// The new content of a file: runs of the old content and of inserted bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewContent<'a> {
    pieces: Vec<Piece>,
    inserted: Cow<'a, [u8]>,
    len: usize,
}

impl<'a> NewContent<'a> {
    /// Exactly `bytes`, whatever the old content was.
    pub fn whole(bytes: impl Into<Cow<'a, [u8]>>) -> Self {
        let inserted = bytes.into();
        let len = inserted.len();
        Self {
            pieces: vec![Piece::Inserted(0..len)],
            inserted,
            len,
        }
    }

    /// The old content (`old_len` bytes) with each of the sorted, non-overlapping ranges `at`
    /// replaced by `with`. The caller checks that the ranges lie inside the old content.
    pub fn replaced(old_len: usize, at: &[Range<usize>], with: &'a [u8]) -> Self {
        let mut pieces = Vec::with_capacity(2 * at.len() + 1);
        let mut from = 0;
        let mut len = 0;
        for range in at {
            if range.start > from {
                pieces.push(Piece::Old(from..range.start));
                len += range.start - from;
            }
            if !with.is_empty() {
                pieces.push(Piece::Inserted(0..with.len()));
                len += with.len();
            }
            from = range.end;
        }
        if old_len > from {
            pieces.push(Piece::Old(from..old_len));
            len += old_len - from;
        }
        Self {
            pieces,
            inserted: Cow::Borrowed(with),
            len,
        }
    }

    /// Length of the new content in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the new content is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of runs (a write issues one `write` per run).
    #[cfg(test)]
    fn runs(&self) -> usize {
        self.pieces.len()
    }

    /// The new content's runs in order, as slices of `old` and of the inserted bytes. `old`
    /// must be the content the pieces were computed from.
    pub fn slices<'s>(&'s self, old: &'s [u8]) -> impl Iterator<Item = &'s [u8]> + 's {
        self.pieces.iter().map(move |piece| match piece {
            Piece::Old(range) => &old[range.clone()],
            Piece::Inserted(range) => &self.inserted[range.clone()],
        })
    }

    /// The new content as one buffer.
    #[cfg(test)]
    pub fn to_vec(&self, old: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.len);
        for slice in self.slices(old) {
            bytes.extend_from_slice(slice);
        }
        bytes
    }

    /// How many leading bytes the new content shares with `old`.
    fn unchanged_prefix(&self, old: &[u8]) -> usize {
        let mut at = 0;
        for (piece, slice) in self.pieces.iter().zip(self.slices(old)) {
            // A run of the old content at its own place is unchanged without looking.
            let same = match piece {
                Piece::Old(range) if range.start == at => slice.len(),
                _ => common_prefix_len(slice, old.get(at..).unwrap_or_default()),
            };
            at += same;
            if same < slice.len() {
                break;
            }
        }
        at
    }
}

/// Length of the common prefix of `a` and `b`, compared a block at a time.
fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 4096;
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= n && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..n]
        .iter()
        .zip(&b[at..n])
        .take_while(|(x, y)| x == y)
        .count()
}

/// Hash states of the old bytes at offsets 0, [`CHECKPOINT`], 2 × [`CHECKPOINT`], …, published
/// by the hashing thread as it goes.
struct Checkpoints {
    saved: Mutex<Saved>,
    published: Condvar,
}

#[derive(Default)]
struct Saved {
    states: Vec<Sha256>,
    /// The hashing thread has stopped (normally or by a panic): nothing more will come.
    finished: bool,
}

/// Marks the checkpoints finished however the hashing thread ends, so no waiter hangs.
struct FinishOnDrop<'c>(&'c Checkpoints);

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        self.0.lock().finished = true;
        self.0.published.notify_all();
    }
}

impl Checkpoints {
    fn new(len: usize) -> Self {
        Self {
            saved: Mutex::new(Saved {
                states: Vec::with_capacity(len / CHECKPOINT + 1),
                finished: false,
            }),
            published: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Saved> {
        // A poisoned lock only means the other thread panicked; the states stay valid.
        self.saved
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Hash all of `old`, saving the state before each [`CHECKPOINT`]-sized chunk.
    fn hash_all(&self, old: &[u8]) -> String {
        let _finish = FinishOnDrop(self);
        let mut hasher = Sha256::new();
        self.lock().states.push(hasher.clone());
        for (i, chunk) in old.chunks(CHECKPOINT).enumerate() {
            if i > 0 {
                self.lock().states.push(hasher.clone());
                self.published.notify_all();
            }
            hasher.update(chunk);
        }
        hex::encode(hasher.finalize())
    }

    /// The saved state at the last checkpoint at or before `offset`, and its offset; waits for
    /// the hashing thread to get there. `None` if it stopped first (it panicked).
    fn state_before(&self, offset: usize, old_len: usize) -> Option<(Sha256, usize)> {
        let last = old_len.saturating_sub(1) / CHECKPOINT;
        let index = (offset / CHECKPOINT).min(last);
        let mut saved = self.lock();
        while saved.states.len() <= index && !saved.finished {
            saved = self
                .published
                .wait(saved)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        saved
            .states
            .get(index)
            .map(|state| (state.clone(), index * CHECKPOINT))
    }
}

/// The SHA-256 of the new content, continuing `state`, which has hashed `old[..from]`
/// (`from` ≤ the unchanged prefix).
fn finish_new(mut state: Sha256, from: usize, content: &NewContent<'_>, old: &[u8]) -> String {
    let mut skip = from;
    for slice in content.slices(old) {
        if skip >= slice.len() {
            skip -= slice.len();
            continue;
        }
        state.update(&slice[skip..]);
        skip = 0;
    }
    hex::encode(state.finalize())
}

/// Run `compute` and return the old bytes' SHA-256 (`None`: the file is absent) and what
/// `compute` returned with the SHA-256 of the new content `content_of` finds in it. For large
/// files the old bytes are hashed on a second thread meanwhile, and the new content is hashed
/// only from the last checkpoint before its first changed byte.
pub fn hash_around<'a, T, E>(
    old: Option<&[u8]>,
    compute: impl FnOnce() -> Result<T, E>,
    content_of: impl FnOnce(&T) -> &NewContent<'a>,
) -> (Option<String>, Result<(T, String), E>) {
    let Some(old) = old else {
        let computed = compute().map(|computed| {
            let post = finish_new(Sha256::new(), 0, content_of(&computed), &[]);
            (computed, post)
        });
        return (None, computed);
    };
    let checkpoints = Checkpoints::new(old.len());
    let compute_and_hash = || {
        compute().map(|computed| {
            let content = content_of(&computed);
            let prefix = content.unchanged_prefix(old);
            let (state, from) = checkpoints
                .state_before(prefix, old.len())
                .unwrap_or((Sha256::new(), 0));
            let post = finish_new(state, from, content, old);
            (computed, post)
        })
    };
    if old.len() < PARALLEL_HASH_BYTES {
        let pre = checkpoints.hash_all(old);
        return (Some(pre), compute_and_hash());
    }
    std::thread::scope(|scope| {
        let hashing = scope.spawn(|| checkpoints.hash_all(old));
        let computed = compute_and_hash();
        // The hashing thread cannot panic short of a broken allocator; if it did, hash here.
        let pre = hashing.join().unwrap_or_else(|_| sha256_hex(old));
        (Some(pre), computed)
    })
}

#[cfg(test)]
// One replaced range is written `&[range]`: the argument is a list of ranges.
#[allow(clippy::single_range_in_vec_init)]
mod tests;
