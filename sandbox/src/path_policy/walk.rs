//! The fd-relative walk of [`PathPolicy::walk`], with optional read-ahead threads.
//!
//! The visitor sees entries in path order (names sorted bytewise, depth first) on the calling
//! thread. Read-ahead threads (`WalkOptions::threads`) list directories before the visitor gets
//! there: a job opens one directory with `O_NOFOLLOW` from its parent's descriptor, reads and sorts
//! its entries, applies the name rules, `lstat`s its regular files when asked to, and queues its
//! subdirectories as further jobs. Jobs are taken in walk order (the earliest position first) and
//! at most [`READ_AHEAD`] listings wait for the visitor, so the threads stay just ahead of it; a
//! directory whose job has not started when the visitor reaches it is listed by the visitor's
//! thread itself, so the visitor never waits behind queued work; one that is being listed when the
//! visitor reaches it, the visitor does not sleep on: it lists the earliest pending directory in
//! the meantime. What is entered and yielded does not depend on the threads, only when the reads
//! happen: cold, the `lstat`s and directory reads of several directories are in flight at once
//! instead of one at a time; warm, they use the other cores. Only as many threads run at once as
//! the listings need: every one while listings sleep (on the disk), one per spare core while they
//! do not (see [`Walker::finished`]).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::*;

/// Most listings read ahead and not yet reached by the visitor (each holds a descriptor).
const READ_AHEAD: usize = 64;
/// Most read-ahead threads a walk starts.
const MAX_WALK_THREADS: usize = 8;
/// How often (in entries) a listing checks whether the walk has stopped.
const STOP_CHECK_EVERY: usize = 64;

/// Read-ahead threads for a walk on this machine: four per core, at least 4 and at most 8. More
/// threads than cores pays off cold, where they mostly wait for the disk (measured on 2 cores,
/// 100 000 files: cold 8 threads ≈ 0.32 s vs 4 ≈ 0.37 s); warm, only one per core runs at a time
/// (see [`Walker::finished`]).
pub fn default_walk_threads() -> usize {
    cores().saturating_mul(4).clamp(4, MAX_WALK_THREADS)
}

/// Cores this process may use, asked once (on Linux the question reads several cgroup files).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// How a walk runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkOptions {
    /// Deepest level yielded (1 = the root's own entries); capped at [`MAX_WALK_DEPTH`].
    pub max_depth: usize,
    /// `lstat` every regular file while its directory is listed (on a read-ahead thread when
    /// there are some); [`PathPolicy::check_walked_file`] then needs no system call.
    pub stat_files: bool,
    /// Read-ahead threads; 0 lists every directory on the visitor's thread.
    pub threads: usize,
}

impl WalkOptions {
    /// `max_depth`, no `lstat` of files, [`default_walk_threads`] read-ahead threads.
    pub fn new(max_depth: usize) -> Self {
        Self {
            max_depth,
            stat_files: false,
            threads: default_walk_threads(),
        }
    }
}

/// Kind of a directory entry, from `d_type` (or `lstat` when the file system does not say).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Fifo,
    Socket,
    Device,
    Other,
}

impl EntryKind {
    fn from_file_type(kind: FileType) -> Self {
        match kind {
            FileType::RegularFile => Self::File,
            FileType::Directory => Self::Dir,
            FileType::Symlink => Self::Symlink,
            FileType::Fifo => Self::Fifo,
            FileType::Socket => Self::Socket,
            FileType::CharacterDevice | FileType::BlockDevice => Self::Device,
            _ => Self::Other,
        }
    }
}

/// A directory of a walk: a descriptor opened with `O_NOFOLLOW` (from its parent's descriptor)
/// and the path it was reached by, used only for display and for the lexical rules.
#[derive(Debug)]
pub struct WalkDir {
    fd: OwnedFd,
    path: PathBuf,
    /// Whether entries below may be protected by name (false when no protected entry lies below).
    check_children: bool,
    /// Its device: a child on another one crossed a mount, and is checked for a pseudo file
    /// system (`super::pseudo_fs`) before the walk enters or opens it.
    dev: u64,
}

impl WalkDir {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What the file rules look at: the type, link count and identity from an `lstat`/`fstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileFacts {
    kind: FileType,
    nlink: u64,
    dev: u64,
    ino: u64,
}

impl FileFacts {
    fn of(st: &Stat) -> Self {
        let (dev, ino) = ident(st);
        Self {
            kind: FileType::from_raw_mode(st.st_mode),
            nlink: nlink(st),
            dev,
            ino,
        }
    }
}

/// One entry a walk yields. `.git` entries and entries protected by name are never yielded.
#[derive(Debug)]
pub struct WalkEntry<'a> {
    /// The directory holding the entry; open files relative to it with
    /// [`PathPolicy::open_child_file`].
    pub parent: &'a Arc<WalkDir>,
    pub name: &'a OsStr,
    pub path: &'a Path,
    pub kind: EntryKind,
    /// 1 for the root's own entries.
    pub depth: usize,
    /// The `lstat` taken while listing (regular files, with `WalkOptions::stat_files`).
    pub(crate) stat: Option<Result<FileFacts, Errno>>,
}

/// What the visitor wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkControl {
    Continue,
    Stop,
    /// Keep walking, but `lstat` no more regular files (`WalkOptions::stat_files`): the
    /// visitor only counts from now on. Listings made already keep their stats.
    StopFileStats,
}

/// What a walk left out.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WalkStats {
    /// Directories that could not be opened or read.
    pub unreadable: usize,
    /// Directories deeper than [`MAX_WALK_DEPTH`] that were not entered.
    pub too_deep: usize,
}

/// Deepest directory level a walk enters (each level holds one descriptor).
pub const MAX_WALK_DEPTH: usize = 256;

/// A listed entry. Its name lives in its listing's `names`, followed by a NUL, so that it can be
/// handed to `*at` calls as is; the visitor builds the path in one reused buffer (no allocation
/// per entry).
#[derive(Clone, Copy)]
struct Entry {
    /// Offset of the name in [`Listing::names`].
    name: usize,
    name_len: usize,
    kind: EntryKind,
    stat: Option<Result<FileFacts, Errno>>,
    /// The job listing this directory, when the walk is to enter it.
    child: Option<usize>,
}

/// A directory's entries, filtered by the name rules and sorted.
struct Listing {
    dir: Arc<WalkDir>,
    /// The entries' names, each followed by a NUL.
    names: Vec<u8>,
    entries: Vec<Entry>,
    /// Depth of `entries`.
    depth: usize,
}

impl Listing {
    fn name(&self, entry: &Entry) -> &OsStr {
        name_in(&self.names, entry)
    }
}

fn name_in<'a>(names: &'a [u8], entry: &Entry) -> &'a OsStr {
    OsStr::from_bytes(&names[entry.name..entry.name + entry.name_len])
}

/// The name of `entry` as a C string (no copy for the `*at` calls).
fn c_name<'a>(names: &'a [u8], entry: &Entry) -> Result<&'a CStr, Errno> {
    CStr::from_bytes_with_nul(&names[entry.name..=entry.name + entry.name_len])
        .map_err(|_| Errno::INVAL)
}

/// The first 8 bytes of a name as a big-endian number, zero-padded. Names hold no NUL byte, so
/// comparing keys orders names bytewise, except that names sharing their first 8 bytes compare
/// equal and must be compared whole.
fn name_key(name: &[u8]) -> u64 {
    let mut key = [0u8; 8];
    let n = name.len().min(8);
    key[..n].copy_from_slice(&name[..n]);
    u64::from_be_bytes(key)
}

/// `dir` joined with `name`, like [`Path::join`] (no separator doubled after a root `/`).
fn push_name(path: &mut Vec<u8>, name: &[u8]) {
    if path.last() != Some(&b'/') {
        path.push(b'/');
    }
    path.extend_from_slice(name);
}

/// Room for one `getdents64` call: a directory of a few hundred entries is read in one call.
#[cfg(any(target_os = "linux", target_os = "android"))]
const DIR_BUF_BYTES: usize = 32 * 1024;

/// Reusable buffer for reading directories (one per thread of a walk).
#[derive(Default)]
struct DirBuf {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    bytes: Vec<u8>,
}

/// Call `each` with the name, `d_type` and `d_ino` of every entry of the directory `fd` (`.` and
/// `..` included), reading from its current position. On Linux the entries are read with
/// `getdents64` into `buf`, straight from the walk's descriptor.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn read_dir(
    fd: &OwnedFd,
    buf: &mut DirBuf,
    mut each: impl FnMut(&CStr, FileType, u64) -> Result<(), Errno>,
) -> Result<(), Errno> {
    if buf.bytes.capacity() < DIR_BUF_BYTES {
        buf.bytes.reserve(DIR_BUF_BYTES);
    }
    let mut reader = rustix::fs::RawDir::new(fd, buf.bytes.spare_capacity_mut());
    while let Some(item) = reader.next() {
        let item = match item {
            Ok(item) => item,
            // The directory was removed while being read: no more entries (like `readdir`).
            Err(Errno::NOENT) => break,
            Err(err) => return Err(err),
        };
        each(item.file_name(), item.file_type(), item.ino())?;
    }
    Ok(())
}

/// [`read_dir`] elsewhere: through `readdir` on a duplicate of the descriptor.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn read_dir(
    fd: &OwnedFd,
    _buf: &mut DirBuf,
    mut each: impl FnMut(&CStr, FileType, u64) -> Result<(), Errno>,
) -> Result<(), Errno> {
    for item in rustix::fs::Dir::new(rustix::io::dup(fd)?)? {
        let item = item?;
        each(item.file_name(), item.file_type(), item.ino())?;
    }
    Ok(())
}

/// What listing a subdirectory came to.
enum Loaded {
    Listed(Listing),
    /// No longer a directory (e.g. swapped for a symlink) or a protected directory.
    Skipped,
    Unreadable,
}

/// Listing one subdirectory: opened relative to `parent`, never by path.
struct DirJob {
    /// Position in walk order: the indices of the entries leading to it from the root.
    key: Vec<usize>,
    parent: Arc<WalkDir>,
    name: CString,
    /// Depth of the directory's own entries.
    depth: usize,
}

/// A job not yet handed to the visitor (taken jobs leave the map: memory follows the jobs alive,
/// not the size of the tree).
enum Slot {
    Pending(DirJob),
    Running,
    Done(Loaded),
}

struct Queue {
    slots: HashMap<usize, Slot>,
    next_id: usize,
    /// Pending jobs for the read-ahead threads, earliest in walk order first (stale entries of
    /// jobs the visitor took itself are skipped).
    ready: BinaryHeap<Reverse<(Vec<usize>, usize)>>,
    /// Jobs running on a read-ahead thread or listed and not yet taken.
    ahead: usize,
    /// A read-ahead thread panicked: a running job may never finish.
    failed: bool,
    /// Read-ahead threads waiting on `work` (wake-ups are system calls: only for waiters).
    idle: usize,
    /// Read-ahead threads running a job now.
    running: usize,
    /// How many read-ahead threads may run jobs at once (see [`Walker::finished`]).
    limit: usize,
    /// Listings finished in a row without waiting.
    calm: usize,
    /// The job the visitor waits for on `done`.
    awaited: Option<usize>,
}

struct Walker<'p> {
    policy: &'p PathPolicy,
    max_depth: usize,
    /// `WalkOptions::stat_files`, until the visitor says [`WalkControl::StopFileStats`].
    stat_files: AtomicBool,
    read_ahead: bool,
    /// Read-ahead threads started.
    threads: usize,
    /// Read-ahead threads allowed to run while listings do not wait for the disk: one per core
    /// left by the visitor's thread (which lists directories too).
    cpu_threads: usize,
    queue: Mutex<Queue>,
    /// Read-ahead threads wait here for jobs and room.
    work: Condvar,
    /// The visitor waits here for a running job.
    done: Condvar,
    stop: AtomicBool,
}

impl<'p> Walker<'p> {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Stop the read-ahead threads (under the lock, so none misses the wake-up).
    fn halt(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _queue = self.lock();
        self.work.notify_all();
        self.done.notify_all();
    }

    /// Read, filter and sort the entries of `dir` (at `depth`), `lstat` its files when asked
    /// (in inode order, kinder to a cold disk than name order), and queue its subdirectories.
    fn list(
        &self,
        dir: Arc<WalkDir>,
        key: &[usize],
        depth: usize,
        buf: &mut DirBuf,
    ) -> Result<Listing, Errno> {
        let mut names = Vec::new();
        let mut entries = Vec::new();
        // `(d_ino, index)` of the files still to `lstat`.
        let mut to_stat = Vec::new();
        let stat_files = self.stat_files.load(Ordering::Relaxed);
        // The entry's path, built only when protected names may apply below `dir`.
        let mut path = Vec::new();
        read_dir(&dir.fd, buf, |c_name, d_type, ino| {
            if entries.len().is_multiple_of(STOP_CHECK_EVERY) && self.stopped() {
                return Err(Errno::INTR);
            }
            let name = OsStr::from_bytes(c_name.to_bytes());
            if name == "." || name == ".." || self.policy.is_git(name) {
                return Ok(());
            }
            if dir.check_children {
                path.clear();
                path.extend_from_slice(dir.path.as_os_str().as_bytes());
                push_name(&mut path, name.as_bytes());
                if self
                    .policy
                    .is_protected(Path::new(OsStr::from_bytes(&path)))
                {
                    return Ok(());
                }
            }
            let (kind, stat) = match d_type {
                FileType::Unknown => {
                    match rustix::fs::statat(&dir.fd, c_name, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(st) => {
                            let facts = FileFacts::of(&st);
                            let kind = EntryKind::from_file_type(facts.kind);
                            (kind, (kind == EntryKind::File).then_some(Ok(facts)))
                        }
                        Err(_) => (EntryKind::Other, None),
                    }
                }
                kind => (EntryKind::from_file_type(kind), None),
            };
            if stat_files && kind == EntryKind::File && stat.is_none() {
                to_stat.push((ino, entries.len()));
            }
            entries.push(Entry {
                name: names.len(),
                name_len: name.len(),
                kind,
                stat: stat.filter(|_| stat_files),
                child: None,
            });
            names.extend_from_slice(c_name.to_bytes_with_nul());
            Ok(())
        })?;
        to_stat.sort_unstable();
        for (n, (_, i)) in to_stat.into_iter().enumerate() {
            if n.is_multiple_of(STOP_CHECK_EVERY) {
                if self.stopped() {
                    return Err(Errno::INTR);
                }
                if !self.stat_files.load(Ordering::Relaxed) {
                    break; // The rest stay without stats: the visitor only counts them.
                }
            }
            let stat = rustix::fs::statat(
                &dir.fd,
                c_name(&names, &entries[i])?,
                AtFlags::SYMLINK_NOFOLLOW,
            );
            entries[i].stat = Some(stat.map(|st| FileFacts::of(&st)));
        }
        // Sorted through `(name_key, index)` pairs: most comparisons are then of two numbers,
        // and each entry moves once (sorting the entries themselves moved them at every step
        // and called `memcmp` for every comparison: 40 % of the walk's user-space instructions).
        let mut order: Vec<(u64, usize)> = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (name_key(name_in(&names, e).as_bytes()), i))
            .collect();
        order.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0).then_with(|| {
                name_in(&names, &entries[a.1])
                    .as_bytes()
                    .cmp(name_in(&names, &entries[b.1]).as_bytes())
            })
        });
        let mut entries: Vec<Entry> = order.into_iter().map(|(_, i)| entries[i]).collect();
        if depth < self.max_depth && entries.iter().any(|e| e.kind == EntryKind::Dir) {
            let mut queue = self.lock();
            let mut queued = 0;
            for (i, entry) in entries.iter_mut().enumerate() {
                if entry.kind != EntryKind::Dir {
                    continue;
                }
                let id = queue.next_id;
                queue.next_id += 1;
                let mut child_key = Vec::with_capacity(key.len() + 1);
                child_key.extend_from_slice(key);
                child_key.push(i);
                if self.read_ahead {
                    queue.ready.push(Reverse((child_key.clone(), id)));
                }
                let job = DirJob {
                    key: child_key,
                    parent: Arc::clone(&dir),
                    name: c_name(&names, entry)?.to_owned(),
                    depth: depth + 1,
                };
                queue.slots.insert(id, Slot::Pending(job));
                entry.child = Some(id);
                queued += 1;
            }
            let wake = if self.read_ahead {
                queue.idle.min(queued).min(queue.room())
            } else {
                0
            };
            drop(queue);
            for _ in 0..wake {
                self.work.notify_one();
            }
        }
        Ok(Listing {
            dir,
            names,
            entries,
            depth,
        })
    }

    /// Open and list the subdirectory of a job.
    fn run(&self, job: DirJob, buf: &mut DirBuf) -> Loaded {
        let mut path = job.parent.path.as_os_str().as_bytes().to_vec();
        push_name(&mut path, job.name.to_bytes());
        let path = PathBuf::from(OsString::from_vec(path));
        match self.policy.open_child_dir(&job.parent, &job.name, path) {
            Ok(Some(child)) => match self.list(Arc::new(child), &job.key, job.depth, buf) {
                Ok(listing) => Loaded::Listed(listing),
                Err(_) => Loaded::Unreadable,
            },
            Ok(None) => Loaded::Skipped,
            Err(_) => Loaded::Unreadable,
        }
    }

    /// A read-ahead thread: run the earliest pending job while fewer than [`READ_AHEAD`] wait.
    fn help(&self) {
        let _guard = PanicFlag(self);
        let mut buf = DirBuf::default();
        loop {
            let (id, job) = {
                let mut queue = self.lock();
                loop {
                    if self.stopped() {
                        return;
                    }
                    if queue.ahead < READ_AHEAD
                        && queue.room() > 0
                        && let Some(next) = queue.pop_ready()
                    {
                        queue.ahead += 1;
                        queue.running += 1;
                        break next;
                    }
                    queue.idle += 1;
                    queue = self
                        .work
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                    queue.idle -= 1;
                }
            };
            let switches = voluntary_switches();
            let loaded = self.run(job, &mut buf);
            let waited = match (switches, voluntary_switches()) {
                (Some(before), Some(after)) => after > before,
                // Not known here: run them all, as if every listing waited for the disk.
                _ => true,
            };
            let mut queue = self.lock();
            queue.slots.insert(id, Slot::Done(loaded));
            queue.running -= 1;
            let awaited = queue.awaited == Some(id);
            let wake = self.finished(&mut queue, waited);
            drop(queue);
            if awaited {
                self.done.notify_one();
            }
            for _ in 0..wake {
                self.work.notify_one();
            }
        }
    }

    /// The listing of job `id`, for the visitor: read ahead, being read (wait), or not started
    /// (list it here).
    fn take(&self, id: usize, buf: &mut DirBuf) -> Loaded {
        let mut queue = self.lock();
        loop {
            match queue.slots.remove(&id) {
                Some(Slot::Done(loaded)) => {
                    queue.awaited = None;
                    queue.ahead -= 1;
                    // Room for one more listing ahead.
                    let wake = queue.idle > 0 && queue.room() > 0 && !queue.ready.is_empty();
                    drop(queue);
                    if wake {
                        self.work.notify_one();
                    }
                    return loaded;
                }
                Some(Slot::Pending(job)) => {
                    drop(queue);
                    return self.run(job, buf);
                }
                Some(Slot::Running) => {
                    queue.slots.insert(id, Slot::Running);
                    if queue.failed {
                        return Loaded::Unreadable;
                    }
                    // List the earliest pending directory meanwhile instead of sleeping: a
                    // wake-up costs more than a listing warm, and the listing is needed anyway.
                    if queue.ahead < READ_AHEAD
                        && let Some((other, job)) = queue.pop_ready()
                    {
                        queue.ahead += 1;
                        drop(queue);
                        let loaded = self.run(job, buf);
                        queue = self.lock();
                        queue.slots.insert(other, Slot::Done(loaded));
                        continue;
                    }
                    queue.awaited = Some(id);
                    queue = self
                        .done
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                // Each job is taken once; never reached.
                None => return Loaded::Unreadable,
            }
        }
    }

    /// Yield every listed entry in path order, entering directories as their entries pass.
    fn drive(
        &self,
        root: Listing,
        visit: &mut dyn FnMut(WalkEntry<'_>) -> WalkControl,
        stats: &mut WalkStats,
        buf: &mut DirBuf,
    ) {
        // The path of the current entry: its directory's path (`stack`'s third field is its
        // length), then the name.
        let mut path = root.dir.path.as_os_str().as_bytes().to_vec();
        let mut stack = vec![(root, 0usize, path.len())];
        while let Some((listing, next, dir_len)) = stack.last_mut() {
            let Some(entry) = listing.entries.get(*next) else {
                stack.pop();
                continue;
            };
            *next += 1;
            let (kind, child, depth) = (entry.kind, entry.child, listing.depth);
            path.truncate(*dir_len);
            push_name(&mut path, listing.name(entry).as_bytes());
            let control = visit(WalkEntry {
                parent: &listing.dir,
                name: listing.name(entry),
                path: Path::new(OsStr::from_bytes(&path)),
                kind,
                depth,
                stat: entry.stat,
            });
            match control {
                WalkControl::Stop => break,
                WalkControl::StopFileStats => self.stat_files.store(false, Ordering::Relaxed),
                WalkControl::Continue => {}
            }
            if kind != EntryKind::Dir {
                continue;
            }
            if depth >= self.max_depth {
                if self.max_depth == MAX_WALK_DEPTH {
                    stats.too_deep += 1;
                }
                continue;
            }
            let Some(id) = child else { continue };
            match self.take(id, buf) {
                Loaded::Listed(listing) => stack.push((listing, 0, path.len())),
                Loaded::Skipped => {}
                Loaded::Unreadable => stats.unreadable += 1,
            }
        }
    }
}

impl Walker<'_> {
    /// Adjust how many read-ahead threads may run after one finished a listing; returns how
    /// many idle ones to wake. A listing that slept (`waited`: its thread switched out of its own
    /// accord, i.e. read the disk) lets every thread run, so that cold many directory and inode
    /// reads are in flight at once; after as many listings in a row as there are threads ran
    /// without sleeping, only one thread per spare core runs, so that warm the threads do not
    /// crowd the cores and pay for switches and wake-ups (measured on 2 cores, 100 000 files,
    /// warm: all 8 threads running ≈ 0.18 s CPU per walk, one beside the visitor ≈ 0.155 s; cold,
    /// waiting for that many calm listings kept the wall time of running them all).
    fn finished(&self, queue: &mut Queue, waited: bool) -> usize {
        if waited {
            queue.calm = 0;
            queue.limit = self.threads;
            queue.idle.min(queue.room()).min(queue.ready.len())
        } else {
            queue.calm += 1;
            if queue.calm >= self.threads {
                queue.limit = self.cpu_threads;
            }
            0
        }
    }
}

/// Voluntary context switches of the calling thread so far (Linux): a listing during which the
/// count grows slept, for the disk mostly.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn voluntary_switches() -> Option<i64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes only the struct it is given, which is plain data.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) };
    // SAFETY: all-zero bytes are a valid rusage, and getrusage filled it on success.
    (rc == 0).then(|| unsafe { usage.assume_init() }.ru_nvcsw)
}

/// Not measured elsewhere (no per-thread usage): every read-ahead thread runs.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn voluntary_switches() -> Option<i64> {
    None
}

impl Queue {
    /// How many more read-ahead threads may start a job.
    fn room(&self) -> usize {
        self.limit.saturating_sub(self.running)
    }

    /// The earliest job still pending, marked running.
    fn pop_ready(&mut self) -> Option<(usize, DirJob)> {
        while let Some(Reverse((_, id))) = self.ready.pop() {
            if let Some(slot) = self.slots.get_mut(&id)
                && let Slot::Pending(_) = slot
                && let Slot::Pending(job) = std::mem::replace(slot, Slot::Running)
            {
                return Some((id, job));
            }
        }
        None
    }
}

/// Marks the walk failed if a read-ahead thread unwinds, so the visitor never waits for it.
struct PanicFlag<'a, 'p>(&'a Walker<'p>);

impl Drop for PanicFlag<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().failed = true;
            self.0.done.notify_all();
        }
    }
}

/// Stops the read-ahead threads however the visitor's loop ends (also by a panic).
struct HaltOnDrop<'a, 'p>(&'a Walker<'p>);

impl Drop for HaltOnDrop<'_, '_> {
    fn drop(&mut self) {
        self.0.halt();
    }
}

impl PathPolicy {
    /// Walk the tree under the directory `root` (opened like [`Self::open_dir_no_follow`]) in
    /// path order (names sorted bytewise, depth first), calling `visit` on this thread for every
    /// entry at depth `1..=options.max_depth`. Directories are entered only through `O_NOFOLLOW`
    /// descriptors opened from their parent's descriptor; a directory that turns out to be a
    /// symlink, a `.git` entry (any case), an entry protected by name and a directory protected
    /// by `(dev, ino)` are neither yielded nor entered. Read-ahead threads (see the module
    /// documentation) change when directories are read, not what is yielded or in which order.
    pub fn walk(
        &self,
        root: &Path,
        options: WalkOptions,
        mut visit: impl FnMut(WalkEntry<'_>) -> WalkControl,
    ) -> Result<WalkStats, PathRefusal> {
        let (file, meta) = self.open_dir_no_follow(root)?;
        let mut stats = WalkStats::default();
        let max_depth = options.max_depth.min(MAX_WALK_DEPTH);
        if max_depth == 0 {
            return Ok(stats);
        }
        let root_dir = Arc::new(WalkDir {
            fd: OwnedFd::from(file),
            path: root.to_path_buf(),
            check_children: self.subtree_needs_checks(root),
            dev: {
                use std::os::unix::fs::MetadataExt;
                meta.dev()
            },
        });
        let mut walker = Walker {
            policy: self,
            max_depth,
            stat_files: AtomicBool::new(options.stat_files),
            read_ahead: options.threads > 0,
            threads: 0,
            cpu_threads: 0,
            queue: Mutex::new(Queue {
                slots: HashMap::new(),
                next_id: 0,
                ready: BinaryHeap::new(),
                ahead: 0,
                failed: false,
                idle: 0,
                running: 0,
                limit: 0,
                calm: 0,
                awaited: None,
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            stop: AtomicBool::new(false),
        };
        let mut buf = DirBuf::default();
        let listing = walker
            .list(root_dir, &[], 1, &mut buf)
            .map_err(|err| io_refusal(&show(root), err))?;
        // No subdirectory to read ahead: no threads.
        let threads = if listing.entries.iter().any(|e| e.child.is_some()) {
            options.threads.min(MAX_WALK_THREADS)
        } else {
            0
        };
        walker.read_ahead = threads > 0;
        walker.threads = threads;
        walker.cpu_threads = cores().saturating_sub(1).clamp(1, threads.max(1));
        walker
            .queue
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .limit = walker.cpu_threads;
        let walker = &walker;
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| walker.help());
            }
            let _halt = HaltOnDrop(walker);
            walker.drive(listing, &mut visit, &mut stats, &mut buf);
        });
        Ok(stats)
    }

    /// Open the directory `name` under `parent` without following it. `Ok(None)`: it is no
    /// longer a directory (e.g. swapped for a symlink) or it is a protected directory.
    fn open_child_dir(
        &self,
        parent: &WalkDir,
        name: &CStr,
        path: PathBuf,
    ) -> Result<Option<WalkDir>, Errno> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match rustix::fs::openat(&parent.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::LOOP | Errno::NOTDIR | Errno::NOENT) => return Ok(None),
            Err(err) => return Err(err),
        };
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory {
            return Ok(None);
        }
        let (dev, ino) = ident(&st);
        if self.is_protected_object(&fd, dev, ino) {
            return Ok(None);
        }
        if dev != parent.dev && super::pseudo_fs(&fd).is_some() {
            return Ok(None);
        }
        let check_children = parent.check_children && self.subtree_needs_checks(&path);
        Ok(Some(WalkDir {
            fd,
            path,
            check_children,
            dev,
        }))
    }

    /// Open the regular file `name` of a walked directory relative to its descriptor
    /// (`O_NOFOLLOW|O_NONBLOCK`). The fd is checked: regular file, one link, not protected. The
    /// walk has already applied the lexical rules to `path` (used for messages only).
    pub fn open_child_file(
        &self,
        parent: &WalkDir,
        name: &OsStr,
        path: &Path,
    ) -> Result<(File, u64), PathRefusal> {
        let shown = || show(path);
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let fd = match rustix::fs::openat(&parent.fd, name, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(err) => return Err(classify(&parent.fd, name, path, &shown(), err, false)),
        };
        let st = rustix::fs::fstat(&fd).map_err(|err| io_refusal(&shown(), err))?;
        self.check_opened_file(&st, path)?;
        // A file on another device than its directory is a mount point (a bind-mounted file).
        if ident(&st).0 != parent.dev
            && let Some(fs) = super::pseudo_fs(&fd)
        {
            return Err(PathRefusal::PseudoFileSystem { path: shown(), fs });
        }
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        let size = st.st_size as u64;
        Ok((File::from(fd), size))
    }

    /// `lstat` the entry `name` of a walked directory and apply the file rules to it without
    /// opening it: regular file, one link, not protected by `(dev, ino)`.
    pub fn check_child_file(
        &self,
        parent: &WalkDir,
        name: &OsStr,
        path: &Path,
    ) -> Result<(), PathRefusal> {
        match rustix::fs::statat(&parent.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => self.check_opened_file(&st, path),
            Err(err) => Err(classify(&parent.fd, name, path, &show(path), err, false)),
        }
    }

    /// [`Self::check_child_file`] for a yielded entry, using the `lstat` taken while its
    /// directory was listed (`WalkOptions::stat_files`) instead of another system call.
    pub fn check_walked_file(&self, entry: &WalkEntry<'_>) -> Result<(), PathRefusal> {
        match entry.stat {
            Some(Ok(facts)) => self.check_file_facts(facts, entry.path),
            Some(Err(err)) => Err(classify(
                &entry.parent.fd,
                entry.name,
                entry.path,
                &show(entry.path),
                err,
                false,
            )),
            None => self.check_child_file(entry.parent, entry.name, entry.path),
        }
    }

    pub(crate) fn check_opened_file(&self, st: &Stat, path: &Path) -> Result<(), PathRefusal> {
        self.check_file_facts(FileFacts::of(st), path)
    }

    /// The file rules: a regular file (not a symlink) with one link, not a protected identity.
    fn check_file_facts(&self, facts: FileFacts, path: &Path) -> Result<(), PathRefusal> {
        if facts.kind == FileType::Symlink {
            return Err(PathRefusal::Symlink {
                path: show(path),
                component: show(path),
            });
        }
        if facts.kind != FileType::RegularFile {
            return Err(PathRefusal::NotAFile {
                path: show(path),
                kind: kind_name(facts.kind),
            });
        }
        if facts.nlink != 1 {
            return Err(PathRefusal::HardLinked {
                path: show(path),
                nlink: facts.nlink,
            });
        }
        if self.is_protected_identity(facts.dev, facts.ino) {
            return Err(PathRefusal::Protected { path: show(path) });
        }
        Ok(())
    }

    /// Whether something below the directory `dir` may be protected by name: a protected entry
    /// or a host-key directory lies below (or is) it, or it is under `/proc`. When false, only
    /// the `.git` rule applies to its descendants.
    fn subtree_needs_checks(&self, dir: &Path) -> bool {
        let folded = self.folded_components(dir);
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if folded.first().is_none_or(|c| c.as_slice() == b"proc") {
            return true;
        }
        // The late entries too (red team 40: a gateway started, an alias mounted after the
        // policy was built, walked into from a parent directory, listed its token).
        self.protected
            .iter()
            .chain(self.host_key_dirs.iter())
            .any(|p| p.starts_with(&folded) || folded.starts_with(p))
            || self.late.overlaps(&folded)
    }
}
