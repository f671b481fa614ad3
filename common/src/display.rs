//! The one display sanitiser: which characters must never reach a terminal raw (C0 and C1
//! controls, DEL, line and paragraph separators, bidi controls, zero-width and other invisible
//! format characters, Unicode tag characters) and how they are shown instead, visibly escaped
//! (`\n`, `\u{1b}`). `gatewayctl` passes everything it prints from data through it, and the
//! gateway uses the same test to refuse such characters in labels, ids and client names.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` would act on a terminal, hide text or reorder it rather than show as itself.
/// Emoji variation selectors are not in the set: they only choose a glyph's presentation.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00ad}'
                | '\u{061c}'
                | '\u{115f}'
                | '\u{1160}'
                | '\u{17b4}'
                | '\u{17b5}'
                | '\u{180b}'..='\u{180f}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{206f}'
                | '\u{3164}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{fff0}'..='\u{fffb}'
                | '\u{1bca0}'..='\u{1bca3}'
                | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0000}'..='\u{e0fff}'
        )
}

/// `text` as one line with every unsafe character escaped (newlines and tabs too): for table
/// cells and one-line values.
pub fn one_line(text: &str) -> Cow<'_, str> {
    escape(text, is_unsafe)
}

/// `text` with every unsafe character escaped except newlines and tabs: for multi-line text the
/// owner should read as text (a file's content).
pub fn multi_line(text: &str) -> Cow<'_, str> {
    escape(text, |c| c != '\n' && c != '\t' && is_unsafe(c))
}

fn escape(text: &str, unsafe_here: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&unsafe_here) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !unsafe_here(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// JSON text with every unsafe character outside the escapes JSON itself requires written as a
/// `\uXXXX` escape (surrogate pairs above the BMP): the same value, but nothing a terminal acts
/// on. `serde_json` already escapes C0; DEL, C1 and bidi controls it leaves raw. Such characters
/// occur only inside JSON strings, where the escape is valid.
pub fn json_escaped(json: &str) -> Cow<'_, str> {
    if !json.chars().any(|c| c != '\n' && is_unsafe(c)) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if c != '\n' && is_unsafe(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_characters_are_escaped_visibly() {
        assert_eq!(one_line("plain label é ✓"), "plain label é ✓");
        assert_eq!(one_line("ok \u{2714}\u{fe0f}"), "ok \u{2714}\u{fe0f}");
        assert_eq!(one_line("a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(one_line("\u{1b}]0;pwned\u{7}x"), "\\u{1b}]0;pwned\\u{7}x");
        assert_eq!(one_line("\u{9b}2J\u{7f}"), "\\u{9b}2J\\u{7f}");
        assert_eq!(one_line("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(
            one_line("a\u{2066}b\u{200b}c\u{feff}"),
            "a\\u{2066}b\\u{200b}c\\u{feff}"
        );
        assert_eq!(one_line("tag\u{e0041}"), "tag\\u{e0041}");
        assert_eq!(
            multi_line("line 1\nline\t2\u{1b}[2J"),
            "line 1\nline\t2\\u{1b}[2J"
        );
    }

    #[test]
    fn json_stays_json() {
        let value = serde_json::json!({"label": "x\u{9b}31m\u{202e}y\u{7f}\u{e0041}\u{1b}"});
        let text = serde_json::to_string(&value).unwrap();
        let escaped = json_escaped(&text);
        assert!(escaped.chars().all(|c| !is_unsafe(c)), "{escaped}");
        let back: serde_json::Value = serde_json::from_str(&escaped).unwrap();
        assert_eq!(back, value);
    }
}
