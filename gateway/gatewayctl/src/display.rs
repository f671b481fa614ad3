//! Everything gatewayctl prints goes through [`SafeWriter`]: the one display sanitiser
//! ([`common::display`]) applied at the output itself, so no string from the state, a broker, the
//! gateway or a file reaches the owner's terminal raw — no escape sequence retitles or clears it,
//! no bidi control reorders a name. Tables and event lines also escape newlines and tabs per
//! cell ([`crate::table::Table::row`]), so a value cannot forge a row.

use std::io::Write;

/// Escapes unsafe characters in everything written through it: in text output visibly
/// (`\u{1b}`, newlines and tabs kept), in JSON output as `\uXXXX` (the value is unchanged).
pub struct SafeWriter<'a, W: Write> {
    inner: &'a mut W,
    json: bool,
    /// The start of a UTF-8 sequence split across two writes.
    pending: Vec<u8>,
}

impl<'a, W: Write> SafeWriter<'a, W> {
    pub fn new(inner: &'a mut W, json: bool) -> Self {
        SafeWriter {
            inner,
            json,
            pending: Vec::new(),
        }
    }

    fn emit(&mut self, text: &str) -> std::io::Result<()> {
        let shown = if self.json {
            common::display::json_escaped(text)
        } else {
            common::display::multi_line(text)
        };
        self.inner.write_all(shown.as_bytes())
    }
}

impl<W: Write> Write for SafeWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let bytes = std::mem::take(&mut self.pending);
        let mut rest = &bytes[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    self.emit(text)?;
                    break;
                }
                Err(err) => {
                    let (good, bad) = rest.split_at(err.valid_up_to());
                    self.emit(std::str::from_utf8(good).unwrap_or_default())?;
                    match err.error_len() {
                        // Incomplete at the end: wait for the next write.
                        None => {
                            self.pending = bad.to_vec();
                            break;
                        }
                        Some(len) => {
                            for byte in &bad[..len] {
                                write!(self.inner, "\\x{byte:02x}")?;
                            }
                            rest = &bad[len..];
                        }
                    }
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Write> Drop for SafeWriter<'_, W> {
    fn drop(&mut self) {
        for byte in std::mem::take(&mut self.pending) {
            let _ = write!(self.inner, "\\x{byte:02x}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_are_made_safe() {
        let mut out = Vec::new();
        {
            let mut w = SafeWriter::new(&mut out, false);
            write!(w, "label \u{1b}]0;x\u{7}\nnext\u{202e}").unwrap();
            // A character split across writes, and an invalid byte.
            w.write_all(&"é".as_bytes()[..1]).unwrap();
            w.write_all(&"é".as_bytes()[1..]).unwrap();
            w.write_all(b"\xff\n").unwrap();
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "label \\u{1b}]0;x\\u{7}\nnext\\u{202e}é\\xff\n"
        );
        let mut out = Vec::new();
        SafeWriter::new(&mut out, true)
            .write_all("{\"a\": \"\u{9b}x\"}\n".as_bytes())
            .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "{\"a\": \"\\u009bx\"}\n");
    }
}
