//! Skill contexts' shared rules: the id syntax (`personal:<name>`, `project:<name>`), the one
//! normalisation a pin is computed over (UTF-8 BOM removed, CRLF and CR to LF), the pin itself
//! (SHA-256 of the normalised file) and the instruction body (front matter dropped). The gateway
//! and `gatewayctl skill-hash` both use these, so a pin the owner computes is the one checked.

use crate::hash::sha256_hex;

/// Largest SKILL.md a session may freeze (bytes as stored on disk).
pub const MAX_SKILL_FILE_BYTES: u64 = 64 * 1024;
/// Largest total of the SKILL.md files one session freezes.
pub const MAX_SKILL_TOTAL_BYTES: u64 = 256 * 1024;
/// Most skills one session may freeze.
pub const MAX_SKILL_CONTEXTS: usize = 8;
/// Longest `<name>` of a skill id.
pub const MAX_SKILL_NAME_BYTES: usize = 100;

/// Where a skill lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillScope {
    /// `$HOME/.claude/skills/<name>/SKILL.md` of the gateway's owner.
    Personal,
    /// `<source_directory>/.claude/skills/<name>/SKILL.md` of the session.
    Project,
}

/// A syntactically valid skill id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillId {
    pub scope: SkillScope,
    /// One path segment of `[A-Za-z0-9._-]`, never `.`, `..` or containing `..`.
    pub name: String,
}

/// Why a skill id is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillIdError {
    #[error("must start with `personal:` or `project:`")]
    Scope,
    #[error("the name after the prefix is empty")]
    Empty,
    #[error("the name is longer than {MAX_SKILL_NAME_BYTES} bytes")]
    TooLong,
    #[error(
        "the name must be one path segment of letters, digits, `.`, `_` and `-` (no `/`, `..` or other path syntax)"
    )]
    NotASegment,
}

impl SkillId {
    /// Parse `personal:<name>` or `project:<name>`.
    pub fn parse(id: &str) -> Result<SkillId, SkillIdError> {
        let (scope, name) = if let Some(name) = id.strip_prefix("personal:") {
            (SkillScope::Personal, name)
        } else if let Some(name) = id.strip_prefix("project:") {
            (SkillScope::Project, name)
        } else {
            return Err(SkillIdError::Scope);
        };
        if name.is_empty() {
            return Err(SkillIdError::Empty);
        }
        if name.len() > MAX_SKILL_NAME_BYTES {
            return Err(SkillIdError::TooLong);
        }
        let segment_chars = name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !segment_chars || name == "." || name.contains("..") {
            return Err(SkillIdError::NotASegment);
        }
        Ok(SkillId {
            scope,
            name: name.to_string(),
        })
    }
}

/// The bytes a pin is computed over: a leading UTF-8 BOM removed, CRLF and lone CR turned to LF.
pub fn normalise(bytes: &[u8]) -> Vec<u8> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let mut out = Vec::with_capacity(bytes.len());
    let mut iter = bytes.iter().copied().peekable();
    while let Some(b) = iter.next() {
        if b == b'\r' {
            if iter.peek() == Some(&b'\n') {
                iter.next();
            }
            out.push(b'\n');
        } else {
            out.push(b);
        }
    }
    out
}

/// The pin of a SKILL.md: SHA-256 (lowercase hex) of its normalised bytes.
pub fn content_sha256(bytes: &[u8]) -> String {
    sha256_hex(&normalise(bytes))
}

/// Whether `hash` has the form of a pin (64 lowercase hex digits).
pub fn is_pin(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Why a SKILL.md's content cannot be frozen. Never carries the content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillFileError {
    #[error("it is {0} bytes; a SKILL.md may have at most {MAX_SKILL_FILE_BYTES} bytes (64 KiB)")]
    TooLarge(u64),
    #[error("it is not UTF-8 text")]
    NotUtf8,
    #[error("it contains a NUL byte")]
    Nul,
    #[error("its front matter opens with `---` but has no closing `---` line")]
    UnclosedFrontMatter,
}

/// A SKILL.md as a session freezes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// The pin: SHA-256 of the whole normalised file (front matter included).
    pub content_sha256: String,
    /// The instruction body: the normalised text after the front matter.
    pub instructions: String,
}

/// Check and split one SKILL.md: bounded, UTF-8 without NUL, front matter (between a first line
/// `---` and the next line `---`) dropped from the instructions but covered by the pin.
pub fn parse_skill_file(bytes: &[u8]) -> Result<SkillFile, SkillFileError> {
    if bytes.len() as u64 > MAX_SKILL_FILE_BYTES {
        return Err(SkillFileError::TooLarge(bytes.len() as u64));
    }
    let normalised = normalise(bytes);
    let content_sha256 = sha256_hex(&normalised);
    let text = String::from_utf8(normalised).map_err(|_| SkillFileError::NotUtf8)?;
    if text.contains('\0') {
        return Err(SkillFileError::Nul);
    }
    let instructions = strip_front_matter(&text)?.to_string();
    Ok(SkillFile {
        content_sha256,
        instructions,
    })
}

/// The text after a leading YAML front matter block, or all of it when there is none.
fn strip_front_matter(text: &str) -> Result<&str, SkillFileError> {
    let is_fence = |line: &str| line.trim_end_matches(['\n', ' ', '\t']) == "---";
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if is_fence(first) => {}
        _ => return Ok(text),
    }
    let mut offset = text.split_inclusive('\n').next().map_or(0, str::len);
    for line in lines {
        offset += line.len();
        if is_fence(line) {
            return Ok(&text[offset..]);
        }
    }
    Err(SkillFileError::UnclosedFrontMatter)
}

#[cfg(test)]
mod tests;
