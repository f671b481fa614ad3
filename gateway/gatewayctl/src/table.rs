//! Plain-text tables and the small formatters the readable output shares.

use std::io::Write;

use serde_json::Value;

/// A left-aligned table with an upper-case header, columns two spaces apart.
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Each cell is shown on one line with unsafe characters escaped
    /// ([`common::display::one_line`]): a value cannot forge a row or act on the terminal. A
    /// cell holding the column separator (two spaces) is quoted
    /// ([`common::display::quoted`]): a client named `ChatGPT    chatgpt.com    2 active
    /// grant(s)` cannot forge columns (red teams 43 and 45).
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(
            cells
                .into_iter()
                .map(|cell| {
                    if cell.contains("  ") || cell.starts_with('"') {
                        common::display::quoted(&cell)
                    } else {
                        common::display::one_line(&cell).into_owned()
                    }
                })
                .collect(),
        );
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let line = |cells: &[String]| {
            let mut text = String::new();
            for (i, cell) in cells.iter().enumerate() {
                if i + 1 == cells.len() {
                    text.push_str(cell);
                } else {
                    let width = widths.get(i).copied().unwrap_or(0);
                    text.push_str(&format!("{cell:<width$}  "));
                }
            }
            text.trim_end().to_string()
        };
        writeln!(out, "{}", line(&self.headers))?;
        for row in &self.rows {
            writeln!(out, "{}", line(row))?;
        }
        Ok(())
    }
}

/// RFC 3339 UTC time to the second, for tables.
pub fn time_s(unix_ms: i64) -> String {
    let full = common::time::rfc3339_ms(unix_ms);
    match (full.find('.'), full.strip_suffix('Z')) {
        (Some(dot), Some(_)) => format!("{}Z", &full[..dot]),
        _ => full,
    }
}

/// RFC 3339 UTC time with milliseconds, for JSON.
pub fn time_ms(unix_ms: i64) -> String {
    common::time::rfc3339_ms(unix_ms)
}

/// `1d02h`, `3h04m`, `5m06s`, `7s`.
pub fn duration(seconds: u64) -> String {
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    if d > 0 {
        format!("{d}d{h:02}h")
    } else if h > 0 {
        format!("{h}h{m:02}m")
    } else if m > 0 {
        format!("{m}m{s:02}s")
    } else {
        format!("{s}s")
    }
}

/// KiB as `12.3 MiB` / `512 KiB`.
pub fn kib(kib: u64) -> String {
    if kib >= 1024 * 1024 {
        format!("{:.1} GiB", kib as f64 / (1024.0 * 1024.0))
    } else if kib >= 1024 {
        format!("{:.1} MiB", kib as f64 / 1024.0)
    } else {
        format!("{kib} KiB")
    }
}

/// At most `max` characters, with `…` when cut.
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Compact one-line JSON, clipped.
pub fn summary(value: &Value, max: usize) -> String {
    match value {
        Value::Object(map) if map.is_empty() => String::new(),
        Value::Null => String::new(),
        other => clip(&other.to_string(), max),
    }
}

/// `-` for nothing.
pub fn or_dash(value: Option<&str>) -> String {
    match value {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(duration(7), "7s");
        assert_eq!(duration(366), "6m06s");
        assert_eq!(duration(3 * 3600 + 240), "3h04m");
        assert_eq!(duration(2 * 86_400 + 3600), "2d01h");
        assert_eq!(kib(512), "512 KiB");
        assert_eq!(kib(2048), "2.0 MiB");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(time_s(1_795_978_369_662), "2026-11-29T18:52:49Z");
        assert_eq!(time_ms(1_795_978_369_662), "2026-11-29T18:52:49.662Z");
    }

    /// A cell holding the column separator is quoted, so it forges no column; one starting
    /// with a quote is quoted too, so a quoted-looking value cannot pass for one.
    #[test]
    fn a_cell_with_the_column_separator_is_quoted() {
        let mut table = Table::new(&["name", "redirect to"]);
        table.row(vec!["ChatGPT    chatgpt.com".into(), "evil.example".into()]);
        table.row(vec!["\"x\"".into(), "a b".into()]);
        let mut out = Vec::new();
        table.write(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("\"ChatGPT    chatgpt.com\"  evil.example"),
            "{text}"
        );
        assert!(text.contains(r#""\"x\"""#), "{text}");
        assert!(text.contains("a b"), "{text}");
    }
}
