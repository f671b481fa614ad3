//! How paths are shown in listings and messages so that one line is always one path: a path with
//! a control character (newline!), a line/paragraph separator, a bidi control, invalid UTF-8, a
//! backslash or a leading double quote is shown as a double-quoted string with escapes (`\n`,
//! `\t`, `\r`, `\\`, `\"`, `\u{…}`, `\xNN` for a byte that is not UTF-8); every other path is
//! shown as is. A shown path that starts with `"` is therefore always the escaped form.

use std::borrow::Cow;
use std::fmt::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Characters that force the quoted form.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || c == '\\'
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}' | '\u{feff}'
        )
}

/// `path` as one unambiguous line (see the module documentation).
pub fn path_for_display(path: &Path) -> Cow<'_, str> {
    bytes_for_display(path.as_os_str().as_bytes())
}

/// [`path_for_display`] for raw bytes.
pub fn bytes_for_display(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.starts_with('"') && !text.chars().any(needs_escape) => {
            Cow::Borrowed(text)
        }
        _ => Cow::Owned(quoted(bytes)),
    }
}

fn quoted(mut bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 8);
    out.push('"');
    while !bytes.is_empty() {
        let (valid, rest) = match std::str::from_utf8(bytes) {
            Ok(text) => (text, &[][..]),
            Err(err) => {
                let (good, bad) = bytes.split_at(err.valid_up_to());
                // Safety of the unwrap-free path: `good` is valid by construction.
                (std::str::from_utf8(good).unwrap_or_default(), bad)
            }
        };
        for c in valid.chars() {
            match c {
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                c if needs_escape(c) => {
                    let _ = write!(out, "\\u{{{:x}}}", c as u32);
                }
                c => out.push(c),
            }
        }
        if let Some((bad, after)) = rest.split_first() {
            let _ = write!(out, "\\x{bad:02x}");
            bytes = after;
        } else {
            bytes = rest;
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    fn shown(bytes: &[u8]) -> String {
        path_for_display(Path::new(OsStr::from_bytes(bytes))).into_owned()
    }

    #[test]
    fn plain_paths_are_unchanged() {
        assert_eq!(shown(b"/home/me/src/main.rs"), "/home/me/src/main.rs");
        assert_eq!(shown("/tmp/é ü 漢字 x".as_bytes()), "/tmp/é ü 漢字 x");
        assert_eq!(shown(b"/a/b\"c"), "/a/b\"c");
    }

    #[test]
    fn a_newline_cannot_forge_a_line() {
        let out = shown(b"/w/evil\n/etc/x");
        assert_eq!(out, r#""/w/evil\n/etc/x""#);
        assert!(!out.contains('\n'));
    }

    #[test]
    fn controls_separators_bidi_and_invalid_bytes_are_escaped() {
        assert_eq!(shown(b"/w/a\tb\rc"), r#""/w/a\tb\rc""#);
        assert_eq!(shown(b"/w/\x1b[31mred"), r#""/w/\u{1b}[31mred""#);
        assert_eq!(shown("/w/a\u{2028}b".as_bytes()), r#""/w/a\u{2028}b""#);
        assert_eq!(
            shown("/w/\u{202e}txt.exe".as_bytes()),
            r#""/w/\u{202e}txt.exe""#
        );
        assert_eq!(shown("/w/\u{85}nel".as_bytes()), r#""/w/\u{85}nel""#);
        assert_eq!(shown(b"/w/\xff\xfeok"), r#""/w/\xff\xfeok""#);
        assert_eq!(shown(b"/w/ok\xc3"), r#""/w/ok\xc3""#);
    }

    #[test]
    fn backslashes_and_leading_quotes_force_the_quoted_form() {
        // A literal backslash-n name must not read like an escaped newline.
        assert_eq!(shown(b"/w/a\\nb"), r#""/w/a\\nb""#);
        assert_eq!(shown(b"\"/w/x\""), r#""\"/w/x\"""#);
        assert_ne!(shown(b"/w/a\\nb"), shown(b"/w/a\nb"));
    }
}
