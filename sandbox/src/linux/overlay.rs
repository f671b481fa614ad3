//! The session's copy-on-write layer inside a command's mount namespace: each root directory gets
//! an overlay of itself (lower: the real directory, upper/work: the session's pair in the layer
//! dir), so the command may write there while the real files stay untouched. Paths go to the
//! kernel as `/proc/self/fd/N` of descriptors opened in this mount namespace: no option escaping
//! (`,` `:` `\` in a path), and roots or a layer dir hidden by a mask are still reached.
//! Also the host probe: can this kernel mount an overlay in a user namespace at all.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::spec::{LayerSpec, layer_key};

use super::{namespaces, sys};

/// `userxattr`: the overlay's own attributes in the `user.` namespace (a user namespace cannot
/// write `trusted.`). `volatile`: the overlay never syncs its upper file system — no fsync of
/// a build's outputs, and no `syncfs` of the whole disk holding the runtime area when a
/// command's mount namespace ends (that sync was most of the layer's teardown cost, and it
/// waited for every other writer's dirty pages). Safe here because a layer never outlives its
/// broker: a crash or a reboot ends the broker, and the session's layer is discarded with it
/// (a new broker starts from a fresh one), so unsynced data is never read back after a crash.
const OPTIONS: &str = "userxattr,volatile";

/// The kernel marks a `volatile` overlay's work dir (`work/incompat/volatile`) and refuses to
/// mount it again while the mark is there, so that a layer written before a crash is not used
/// after it. Within one broker's life every earlier mount ended with its namespace, not a
/// crash (see [`OPTIONS`]): the mark is removed before each mount. Absent is fine (the first
/// mount, or a layer from before `volatile`).
fn clear_volatile_mark(work: &Path) -> Result<(), String> {
    let volatile = work.join("incompat/volatile");
    let steps = [
        std::fs::remove_file(volatile.join("dirty")),
        std::fs::remove_dir(&volatile),
        std::fs::remove_dir(work.join("incompat")),
    ];
    for step in steps {
        match step {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("clearing the layer's volatile mark: {e}"));
            }
            _ => {}
        }
    }
    Ok(())
}

/// One root, opened before the masks: mounted over its own path.
pub struct OpenRoot {
    pub path: PathBuf,
    dir: File,
}

/// The layer dir and its roots, opened (in the new mount namespace) before anything is masked.
pub struct OpenLayer {
    dir: File,
    pub roots: Vec<OpenRoot>,
}

impl OpenLayer {
    pub fn open(spec: &LayerSpec) -> Result<Self, String> {
        let dir = File::open(&spec.dir).map_err(|e| format!("opening the layer: {e}"))?;
        let mut roots = Vec::new();
        for path in &spec.roots {
            let root = File::open(path)
                .map_err(|e| format!("opening layer root {}: {e}", path.display()))?;
            roots.push(OpenRoot {
                path: path.clone(),
                dir: root,
            });
        }
        Ok(Self { dir, roots })
    }

    /// Mount `root`'s overlay over its path (creating the mount point in a mask's tmpfs if a mask
    /// hid it).
    pub fn mount(&self, root: &OpenRoot) -> Result<(), String> {
        if std::fs::metadata(&root.path).is_err() {
            std::fs::create_dir_all(&root.path)
                .map_err(|e| format!("mount point for {}: {e}", root.path.display()))?;
        }
        let key = layer_key(&root.path);
        let layer = format!("/proc/self/fd/{}/{key}", self.dir.as_raw_fd());
        clear_volatile_mark(Path::new(&format!("{layer}/work/work")))?;
        let options = format!(
            "lowerdir=/proc/self/fd/{},upperdir={layer}/upper,workdir={layer}/work,{OPTIONS}",
            root.dir.as_raw_fd()
        );
        sys::mount(
            Some(Path::new("overlay")),
            &root.path,
            Some("overlay"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(&options),
        )
        .map_err(|e| {
            let mut message = format!("mounting the layer over {}: {e}", root.path.display());
            if let Some(inner) = mount_inside(&root.path) {
                message.push_str(&inner);
            }
            message
        })
    }
}

/// Why an overlay cannot be made over `root`, when a mount lies inside it: mounts the command's
/// namespace inherited are locked to it, and the kernel refuses to take a directory with locked
/// mounts below as a lower layer (it would show what they cover). Names the first such mount by
/// its path (inside the project, which the session sees anyway) and type.
fn mount_inside(root: &Path) -> Option<String> {
    let mounts = crate::protected::read_mount_table().ok()?;
    let inner = mounts
        .iter()
        .find(|m| m.mount_point != root && m.mount_point.starts_with(root))?;
    Some(format!(
        "; {} inside it is another mount (a {} file system) and a copy-on-write layer cannot \
         be made over a directory holding mounts: unmount it, or work in a directory without \
         mounts inside",
        crate::escape::path_for_display(&inner.mount_point),
        crate::escape::bytes_for_display(inner.fs_type.as_bytes()),
    ))
}

/// Whether an overlay (upper on disk, in `std::env::temp_dir()`) mounts in a new user + mount
/// namespace and takes a write: a forked child tries, in a scratch dir removed afterwards.
pub fn probe() -> bool {
    let Ok(tmp) = tempdir() else {
        return false;
    };
    let ok = probe_in(&tmp);
    remove_tree(&tmp);
    ok
}

fn probe_in(tmp: &Path) -> bool {
    for sub in ["lower", "upper", "work", "merged"] {
        if std::fs::create_dir(tmp.join(sub)).is_err() {
            return false;
        }
    }
    let options = format!(
        "lowerdir={0}/lower,upperdir={0}/upper,workdir={0}/work,{OPTIONS}",
        tmp.display()
    );
    // SAFETY: the child only enters namespaces, mounts and writes a file, then leaves with
    // _exit; glibc keeps malloc usable in a forked child (fork takes its locks).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok = namespaces::unshare_as_self(libc::CLONE_NEWUSER | libc::CLONE_NEWNS).is_ok()
            && sys::mount(
                None,
                Path::new("/"),
                None,
                libc::MS_REC | libc::MS_PRIVATE,
                None,
            )
            .is_ok()
            && sys::mount(
                Some(Path::new("overlay")),
                &tmp.join("merged"),
                Some("overlay"),
                0,
                Some(&options),
            )
            .is_ok()
            && std::fs::write(tmp.join("merged/probe"), b"x").is_ok();
        // SAFETY: leaves the forked child at once.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    if pid < 0 {
        return false;
    }
    matches!(sys::wait_child(pid), Ok(status) if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0)
        && tmp.join("upper/probe").exists()
}

fn tempdir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let name = format!(
        "ngw-overlay-probe-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let path = std::env::temp_dir().join(name);
    std::fs::DirBuilder::new().mode(0o700).create(&path)?;
    Ok(path)
}

/// Remove a tree that may hold an overlay work dir (`work/work` is mode 0, which even its owner
/// cannot list without making it readable first).
pub fn remove_tree(path: &Path) {
    crate::layer::remove(path);
}
