//! Executables that tests write and then run, written by a child process.
//!
//! A test binary runs its tests on many threads. A file this process holds open for writing is
//! inherited by any child another thread forks in that instant (until the child's exec closes
//! it), and the kernel refuses to exec a file open for writing: ETXTBSY, "Text file busy", a
//! failure that depends on timing alone. A file written by a child `sh` that has exited is never
//! open in this process, so no race is left.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// Write `contents` to `path` (replaced if present) and make it executable (0755).
pub fn write(path: &Path, contents: &str) -> anyhow::Result<()> {
    let mut child = Command::new("/bin/sh")
        .args(["-c", "cat > \"$1\" && chmod 755 \"$1\"", "sh"])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .context("spawning /bin/sh to write an executable")?;
    let mut stdin = child.stdin.take().context("no piped stdin")?;
    stdin.write_all(contents.as_bytes())?;
    drop(stdin);
    let status = child.wait()?;
    if !status.success() {
        bail!("writing {} failed: {status}", path.display());
    }
    Ok(())
}

/// Copy the executable `from` to `to` (replaced if present), mode 0755.
pub fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    let status = Command::new("/bin/sh")
        .args(["-c", "cp -- \"$1\" \"$2\" && chmod 755 \"$2\"", "sh"])
        .arg(from)
        .arg(to)
        .status()
        .context("spawning /bin/sh to copy an executable")?;
    if !status.success() {
        bail!(
            "copying {} to {} failed: {status}",
            from.display(),
            to.display()
        );
    }
    Ok(())
}
