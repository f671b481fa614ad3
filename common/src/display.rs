//! The one display sanitiser: which characters must never reach a terminal raw and how they
//! are shown instead, visibly escaped (`\n`, `\u{1b}`). Unsafe: C0 and C1 controls, DEL, line
//! and paragraph separators, every format character (Cf: bidi controls, zero-width characters,
//! Unicode tags), spaces other than U+0020 (no-break, ideographic: they pass for a space or
//! for nothing), private-use and unassigned code points, invisible fillers (Hangul fillers,
//! the braille blank U+2800, the combining grapheme joiner U+034F), and combining marks with
//! no visible character to sit on (at the start, after a space or an escape) or stacked beyond
//! [`MAX_MARKS`] on one (variation selectors
//! count as marks, so one after an emoji stays). `gatewayctl` passes everything it prints from
//! data through it, and the gateway uses the same test ([`is_plain`]) to refuse such
//! characters in labels, stop reasons and client names.

use std::borrow::Cow;
use std::fmt::Write;

use unicode_general_category::{GeneralCategory, get_general_category};

/// Most combining marks (variation selectors included) one character may carry: real scripts
/// stack up to three; more draws over the neighbouring rows.
pub const MAX_MARKS: usize = 3;

/// Whether `c` would act on a terminal, hide text, pass for a plain space or reorder it rather
/// than show as itself, wherever it stands. Combining marks depend on what precedes them:
/// see [`is_plain`].
pub fn is_unsafe(c: char) -> bool {
    if c.is_control() {
        return true;
    }
    match get_general_category(c) {
        GeneralCategory::Format
        | GeneralCategory::LineSeparator
        | GeneralCategory::ParagraphSeparator
        | GeneralCategory::PrivateUse
        | GeneralCategory::Unassigned
        | GeneralCategory::Surrogate => return true,
        GeneralCategory::SpaceSeparator => return c != ' ',
        _ => {}
    }
    matches!(
        c,
        '\u{034f}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{17b4}'
            | '\u{17b5}'
            | '\u{180b}'..='\u{180f}'
            | '\u{2800}'
            | '\u{3164}'
            | '\u{ffa0}'
            | '\u{fff0}'..='\u{fffb}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0000}'..='\u{e0fff}'
    )
}

/// Whether `c` is a combining mark (non-spacing or enclosing; variation selectors are
/// non-spacing marks).
fn is_mark(c: char) -> bool {
    matches!(
        get_general_category(c),
        GeneralCategory::NonspacingMark | GeneralCategory::EnclosingMark
    )
}

/// The combining marks seen since the last character shown as itself.
#[derive(Default)]
struct Marks {
    run: usize,
    base: bool,
}

impl Marks {
    /// Whether `c`, at this point of the text, must be escaped (`unsafe_char` decides for
    /// everything but a mark's position).
    fn escape(&mut self, c: char, unsafe_char: &impl Fn(char) -> bool) -> bool {
        if unsafe_char(c) {
            *self = Self::default();
            return true;
        }
        if is_mark(c) {
            self.run += 1;
            return !self.base || self.run > MAX_MARKS;
        }
        // A mark needs a visible character to sit on: not a space, tab or line break.
        *self = Self {
            run: 0,
            base: !c.is_whitespace(),
        };
        false
    }
}

/// Whether `text` is shown as itself on one line: nothing in it is unsafe ([`is_unsafe`], line
/// breaks and tabs included), and every combining mark sits on a character, at most
/// [`MAX_MARKS`] on one. The rule of free text the owner reads (labels, stop reasons, client
/// names).
pub fn is_plain(text: &str) -> bool {
    let mut marks = Marks::default();
    !text.chars().any(|c| marks.escape(c, &is_unsafe))
}

/// `text` as one line with every unsafe character escaped (newlines and tabs too): for table
/// cells and one-line values.
pub fn one_line(text: &str) -> Cow<'_, str> {
    escape(text, is_unsafe)
}

/// `text` as [`one_line`], in double quotes (`"` and `\` inside escaped): free text someone else
/// named (an OAuth client's name) where the text around it carries the structure — a list
/// joined by separators, `(answer goes to …)` — so that no part of it reads as that structure
/// (red team 43 B2 named a client `ChatGPT (answer goes to chatgpt.com); qq7x-k2m9 …`).
pub fn quoted(text: &str) -> String {
    format!(
        "\"{}\"",
        one_line(&text.replace('\\', "\\\\").replace('"', "\\\""))
    )
}

/// `text` with every unsafe character escaped except newlines and tabs: for multi-line text the
/// owner should read as text (a file's content).
pub fn multi_line(text: &str) -> Cow<'_, str> {
    escape(text, |c| c != '\n' && c != '\t' && is_unsafe(c))
}

fn escape(text: &str, unsafe_here: impl Fn(char) -> bool) -> Cow<'_, str> {
    let mut marks = Marks::default();
    if !text.chars().any(|c| marks.escape(c, &unsafe_here)) {
        return Cow::Borrowed(text);
    }
    let mut marks = Marks::default();
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !marks.escape(c, &unsafe_here) {
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
    let unsafe_here = |c: char| c != '\n' && is_unsafe(c);
    let mut marks = Marks::default();
    if !json.chars().any(|c| marks.escape(c, &unsafe_here)) {
        return Cow::Borrowed(json);
    }
    let mut marks = Marks::default();
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if marks.escape(c, &unsafe_here) {
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
    fn invisible_spacing_and_stacked_characters_are_escaped() {
        // Invisible or blank-looking characters, and spaces that are not U+0020.
        for c in [
            '\u{034f}', '\u{2800}', '\u{3000}', '\u{00a0}', '\u{2007}', '\u{e000}', '\u{0378}',
            '\u{180e}', '\u{0600}',
        ] {
            assert!(is_unsafe(c), "{c:?}");
            let text = format!("a{c}b");
            assert!(!is_plain(&text), "{c:?}");
            assert_eq!(one_line(&text), format!("a\\u{{{:x}}}b", c as u32));
        }
        // Marks: on a character, up to three; none alone at the start or after an escape.
        assert!(is_plain("Vie\u{323}\u{302}t ok"));
        assert!(is_plain("ok \u{2714}\u{fe0f}"));
        assert!(is_plain("e\u{301}\u{302}\u{303}"));
        assert_eq!(
            one_line("e\u{301}\u{302}\u{303}\u{304}\u{305}"),
            "e\u{301}\u{302}\u{303}\\u{304}\\u{305}"
        );
        assert_eq!(one_line("\u{fe0f}x"), "\\u{fe0f}x");
        assert_eq!(one_line("\u{301}x"), "\\u{301}x");
        assert_eq!(one_line("\u{1b}\u{301}"), "\\u{1b}\\u{301}");
        assert_eq!(one_line("a \u{fe0f}"), "a \\u{fe0f}");
        assert!(!is_plain("a\nb"));
        assert_eq!(multi_line("a\nb"), "a\nb");
        assert!(is_plain("plain label é ✓ 日本語 emoji 🦀"));
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
