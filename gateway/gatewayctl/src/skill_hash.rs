//! `skill-hash <SKILL.md>`: the pin an allowlist entry needs, computed by the gateway's own rule
//! (`common::skills`: BOM removed, CRLF and CR to LF, SHA-256), after the checks the gateway makes
//! of a skill's content. It prints the hash only, never the file.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{Context, bail};
use common::skills::{MAX_SKILL_FILE_BYTES, parse_skill_file};
use serde_json::json;

/// Print the pin of the SKILL.md at `path`.
pub fn run(path: &Path, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let meta =
        std::fs::symlink_metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if meta.file_type().is_symlink() {
        bail!(
            "{} is a symbolic link; the gateway never follows one, so pin the real file where the \
             skill is looked up",
            path.display()
        );
    }
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .with_context(|| format!("opening {}", path.display()))?
        .take(MAX_SKILL_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    let file = parse_skill_file(&bytes)
        .map_err(|e| anyhow::anyhow!("{}: the gateway would refuse it: {e}", path.display()))?;
    if json {
        return crate::write_json(
            out,
            &json!({"path": path.display().to_string(), "content_sha256": file.content_sha256}),
        );
    }
    writeln!(out, "{}", file.content_sha256)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash_of(path: &Path) -> Result<String, String> {
        let mut out = Vec::new();
        run(path, false, &mut out).map_err(|e| format!("{e:#}"))?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn prints_the_pin_the_gateway_checks_and_refuses_what_it_would_refuse() {
        let dir = tempfile::tempdir().unwrap();
        let crlf = dir.path().join("crlf.md");
        std::fs::write(&crlf, b"\xEF\xBB\xBF---\r\nname: x\r\n---\r\nBody\r\n").unwrap();
        let pin = common::hash::sha256_hex(b"---\nname: x\n---\nBody\n");
        assert_eq!(hash_of(&crlf).unwrap(), format!("{pin}\n"));
        let mut out = Vec::new();
        run(&crlf, true, &mut out).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value["content_sha256"], pin.as_str());

        let link = dir.path().join("link.md");
        std::os::unix::fs::symlink(&crlf, &link).unwrap();
        assert!(hash_of(&link).unwrap_err().contains("is a symbolic link"));
        let big = dir.path().join("big.md");
        std::fs::write(&big, vec![b'a'; MAX_SKILL_FILE_BYTES as usize + 1]).unwrap();
        let err = hash_of(&big).unwrap_err();
        assert!(err.contains("the gateway would refuse it") && err.contains("65537 bytes"));
        let open = dir.path().join("open.md");
        std::fs::write(&open, "---\nname: x\nBody SECRETBODY\n").unwrap();
        let err = hash_of(&open).unwrap_err();
        assert!(err.contains("no closing `---`") && !err.contains("SECRETBODY"));
        assert!(
            hash_of(dir.path())
                .unwrap_err()
                .contains("not a regular file")
        );
    }
}
