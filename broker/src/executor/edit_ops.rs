//! The pure content transformations of the write tools: `Edit` (exact string replacement with
//! match counting), `Write` (whole content) and `NotebookEdit` (one cell of an nbformat 4 notebook,
//! addressed by cell id). No I/O and nothing is ever executed; the durable write happens in
//! `write`.
//!
//! Notebook rules: the file must be a UTF-8 JSON object with `nbformat: 4`, an integer
//! `nbformat_minor`, a `metadata` object and a `cells` array whose cells have a known `cell_type`
//! (`code`, `markdown`, `raw`), a string or string-array `source`, a `metadata` object, and for
//! code cells an `outputs` array; cell ids must be unique. Anything else is refused
//! (`invalid_notebook`). Other cells, notebook metadata and other cells' outputs are kept as they
//! are; a replaced code cell loses its outputs and execution count (they described the old
//! source). The notebook is written back with the indentation it had (Jupyter's default is one
//! space) and a final newline.

use common::outcome::OutcomeCode;
use serde::Serialize;
use serde_json::{Map, Value};

pub use super::content::NewContent;

/// Largest file an edit reads or writes, in bytes.
pub const MAX_EDIT_FILE_BYTES: usize = 32 * 1024 * 1024;
/// Up to this many matches, an `Edit`'s new content is runs of the old bytes around them (at
/// most `2 × MAX + 1` runs, one `write` each); more are spliced into one buffer.
pub const MAX_SPLICED_MATCHES: usize = 8;

/// Why an edit cannot be computed. `code` is stable; nothing was prepared or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct EditError {
    pub code: OutcomeCode,
    pub message: String,
}

impl EditError {
    pub fn new(code: OutcomeCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

/// New content and a one-line summary of what changed. The content may borrow the tool's
/// arguments and refer to runs of the old bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Computed<'a> {
    pub content: NewContent<'a>,
    pub summary: String,
}

/// `Edit`: replace `old` with `new` in `current` (UTF-8). Exactly one match is required unless
/// `replace_all`; zero matches is `no_match`, several without `replace_all` is
/// `multiple_matches` with the count.
pub fn apply_edit<'a>(
    current: &[u8],
    old: &str,
    new: &'a str,
    replace_all: bool,
) -> Result<Computed<'a>, EditError> {
    if old.is_empty() {
        return Err(EditError::new(
            OutcomeCode::InvalidArgument,
            "old_string must not be empty (use Write to create or replace a whole file)",
        ));
    }
    if old == new {
        return Err(EditError::new(
            OutcomeCode::InvalidArgument,
            "old_string and new_string are identical; nothing to change",
        ));
    }
    let text = std::str::from_utf8(current).map_err(|err| {
        EditError::new(
            OutcomeCode::InvalidArgument,
            format!(
                "the file is not valid UTF-8 (at byte {}); Edit only changes text files",
                err.valid_up_to()
            ),
        )
    })?;
    // SIMD substring search over the bytes (a valid UTF-8 needle in valid UTF-8 text only
    // matches on character boundaries); non-overlapping, left to right, like `str::matches`.
    let finder = memchr::memmem::Finder::new(old.as_bytes());
    // Counted first, without keeping the positions: a one-byte needle in a 32 MiB file has
    // millions of matches, and the size check must come before anything is built.
    let n = finder.find_iter(text.as_bytes()).count();
    if n == 0 {
        return Err(EditError::new(
            OutcomeCode::NoMatch,
            "old_string was not found in the file (it must match exactly, including whitespace)",
        ));
    }
    if n > 1 && !replace_all {
        return Err(EditError::new(
            OutcomeCode::MultipleMatches,
            format!(
                "old_string occurs {n} times; give more context so that it matches exactly once, or set replace_all"
            ),
        ));
    }
    let size = (current.len() - n * old.len()).saturating_add(n.saturating_mul(new.len()));
    check_size(size)?;
    let matches = finder
        .find_iter(text.as_bytes())
        .map(|start| start..start + old.len());
    let content = if n <= MAX_SPLICED_MATCHES {
        // The new content refers to the old bytes around the matches: nothing is copied here.
        NewContent::replaced(current.len(), &matches.collect::<Vec<_>>(), new.as_bytes())
    } else {
        // Many matches: one flat buffer is smaller than a run per match.
        let mut bytes = Vec::with_capacity(size);
        let mut from = 0;
        for at in matches {
            bytes.extend_from_slice(&current[from..at.start]);
            bytes.extend_from_slice(new.as_bytes());
            from = at.end;
        }
        bytes.extend_from_slice(&current[from..]);
        NewContent::whole(bytes)
    };
    Ok(Computed {
        content,
        summary: format!("replaced {n} occurrence{}", if n == 1 { "" } else { "s" }),
    })
}

/// `Write`: the new content, whatever was there.
pub fn apply_write<'a>(
    current: Option<&[u8]>,
    content: &'a str,
) -> Result<Computed<'a>, EditError> {
    check_size(content.len())?;
    let summary = match current {
        None => format!("created the file ({} bytes)", content.len()),
        Some(_) => format!("wrote {} bytes", content.len()),
    };
    Ok(Computed {
        content: NewContent::whole(content.as_bytes()),
        summary,
    })
}

fn check_size(len: usize) -> Result<(), EditError> {
    if len > MAX_EDIT_FILE_BYTES {
        return Err(EditError::new(
            OutcomeCode::TooLarge,
            format!("the new content is {len} bytes; at most {MAX_EDIT_FILE_BYTES} are written"),
        ));
    }
    Ok(())
}

pub use common::tools::{CellType, NotebookEditMode};

/// One `NotebookEdit` (the arguments besides the path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotebookEdit {
    /// The cell to replace or delete, or to insert after (`None`: insert at the top).
    pub cell_id: Option<String>,
    pub mode: NotebookEditMode,
    pub new_source: Option<String>,
    pub cell_type: Option<CellType>,
}

/// `NotebookEdit` on the bytes of an nbformat 4 notebook. `new_id` is the id given to an inserted
/// cell (made unique by a suffix if it is taken) when the notebook has cell ids (minor >= 5).
pub fn apply_notebook_edit(
    current: &[u8],
    edit: &NotebookEdit,
    new_id: &str,
) -> Result<Computed<'static>, EditError> {
    let text =
        std::str::from_utf8(current).map_err(|_| invalid("the notebook is not valid UTF-8"))?;
    let mut notebook: Value =
        serde_json::from_str(text).map_err(|err| invalid(format!("not valid JSON: {err}")))?;
    let minor = validate(&notebook)?;
    let indent = detect_indent(text);
    let Some(cells) = notebook.get_mut("cells").and_then(Value::as_array_mut) else {
        return Err(invalid("`cells` must be an array"));
    };
    let position = match &edit.cell_id {
        Some(id) => Some(
            cells
                .iter()
                .position(|c| c.get("id").and_then(Value::as_str) == Some(id.as_str()))
                .ok_or_else(|| {
                    EditError::new(OutcomeCode::CellNotFound, format!("no cell has id {id:?}"))
                })?,
        ),
        None => None,
    };
    let summary = match edit.mode {
        NotebookEditMode::Replace => {
            let (Some(index), Some(source)) = (position, edit.new_source.as_deref()) else {
                return Err(EditError::new(
                    OutcomeCode::InvalidArgument,
                    "replace needs cell_id and new_source",
                ));
            };
            let Some(cell) = cells.get_mut(index).and_then(Value::as_object_mut) else {
                return Err(invalid("a cell is not an object"));
            };
            cell.insert("source".into(), source_lines(source));
            if let Some(kind) = edit.cell_type {
                cell.insert("cell_type".into(), Value::from(kind.as_str()));
            }
            let is_code = cell.get("cell_type").and_then(Value::as_str) == Some("code");
            if is_code {
                cell.insert("outputs".into(), Value::Array(Vec::new()));
                cell.insert("execution_count".into(), Value::Null);
            } else {
                cell.remove("outputs");
                cell.remove("execution_count");
            }
            format!(
                "replaced cell {}",
                edit.cell_id.as_deref().unwrap_or_default()
            )
        }
        NotebookEditMode::Insert => {
            let (Some(source), Some(kind)) = (edit.new_source.as_deref(), edit.cell_type) else {
                return Err(EditError::new(
                    OutcomeCode::InvalidArgument,
                    "insert needs new_source and cell_type",
                ));
            };
            let mut cell = Map::new();
            cell.insert("cell_type".into(), Value::from(kind.as_str()));
            let mut id = None;
            if minor >= 5 {
                let unique = unique_id(cells, new_id);
                cell.insert("id".into(), Value::from(unique.clone()));
                id = Some(unique);
            }
            cell.insert("metadata".into(), Value::Object(Map::new()));
            cell.insert("source".into(), source_lines(source));
            if kind == CellType::Code {
                cell.insert("execution_count".into(), Value::Null);
                cell.insert("outputs".into(), Value::Array(Vec::new()));
            }
            let at = position.map_or(0, |i| i + 1);
            cells.insert(at, Value::Object(cell));
            match id {
                Some(id) => format!("inserted cell {id} at position {at}"),
                None => format!("inserted a cell at position {at}"),
            }
        }
        NotebookEditMode::Delete => {
            let Some(index) = position else {
                return Err(EditError::new(
                    OutcomeCode::InvalidArgument,
                    "delete needs cell_id",
                ));
            };
            cells.remove(index);
            format!(
                "deleted cell {}",
                edit.cell_id.as_deref().unwrap_or_default()
            )
        }
    };
    let bytes = serialize(&notebook, indent)?;
    check_size(bytes.len())?;
    Ok(Computed {
        content: NewContent::whole(bytes),
        summary,
    })
}

fn invalid(message: impl Into<String>) -> EditError {
    EditError::new(
        OutcomeCode::InvalidNotebook,
        format!("not an nbformat 4 notebook: {}", message.into()),
    )
}

/// Check the notebook's structure; returns `nbformat_minor`.
fn validate(notebook: &Value) -> Result<u64, EditError> {
    let Some(top) = notebook.as_object() else {
        return Err(invalid("the top level must be an object"));
    };
    if top.get("nbformat").and_then(Value::as_u64) != Some(4) {
        return Err(invalid("`nbformat` must be 4"));
    }
    let Some(minor) = top.get("nbformat_minor").and_then(Value::as_u64) else {
        return Err(invalid("`nbformat_minor` must be a non-negative integer"));
    };
    if !top.get("metadata").is_some_and(Value::is_object) {
        return Err(invalid("`metadata` must be an object"));
    }
    let Some(cells) = top.get("cells").and_then(Value::as_array) else {
        return Err(invalid("`cells` must be an array"));
    };
    let mut ids = std::collections::BTreeSet::new();
    for (i, cell) in cells.iter().enumerate() {
        let Some(cell) = cell.as_object() else {
            return Err(invalid(format!("cell {i} is not an object")));
        };
        let kind = cell.get("cell_type").and_then(Value::as_str);
        if !matches!(kind, Some("code" | "markdown" | "raw")) {
            return Err(invalid(format!("cell {i} has no known cell_type")));
        }
        let source_ok = match cell.get("source") {
            Some(Value::String(_)) => true,
            Some(Value::Array(lines)) => lines.iter().all(Value::is_string),
            _ => false,
        };
        if !source_ok {
            return Err(invalid(format!(
                "cell {i}: `source` must be a string or an array of strings"
            )));
        }
        if !cell.get("metadata").is_some_and(Value::is_object) {
            return Err(invalid(format!("cell {i}: `metadata` must be an object")));
        }
        if kind == Some("code") && !cell.get("outputs").is_some_and(Value::is_array) {
            return Err(invalid(format!(
                "code cell {i}: `outputs` must be an array"
            )));
        }
        match cell.get("id") {
            Some(Value::String(id)) if !ids.insert(id.clone()) => {
                return Err(invalid(format!("cell id {id:?} is not unique")));
            }
            Some(Value::String(_)) => {}
            Some(_) => return Err(invalid(format!("cell {i}: `id` must be a string"))),
            None if minor >= 5 => {
                return Err(invalid(format!("cell {i} has no id (nbformat 4.{minor})")));
            }
            None => {}
        }
    }
    Ok(minor)
}

/// Source as Jupyter stores it: lines, each keeping its `\n`.
fn source_lines(source: &str) -> Value {
    Value::Array(
        source
            .split_inclusive('\n')
            .map(|line| Value::from(line.to_string()))
            .collect(),
    )
}

fn unique_id(cells: &[Value], wanted: &str) -> String {
    let taken = |id: &str| {
        cells
            .iter()
            .any(|c| c.get("id").and_then(Value::as_str) == Some(id))
    };
    let mut id = wanted.to_string();
    let mut n = 1;
    while taken(&id) {
        id = format!("{wanted}-{n}");
        n += 1;
    }
    id
}

/// Indentation of the original file: the leading spaces of its second line (`None`: compact).
fn detect_indent(text: &str) -> Option<usize> {
    let (_, rest) = text.split_once('\n')?;
    let spaces = rest.bytes().take_while(|b| *b == b' ').count();
    Some(spaces.max(1))
}

fn serialize(notebook: &Value, indent: Option<usize>) -> Result<Vec<u8>, EditError> {
    let mut out = Vec::new();
    let result = match indent {
        Some(width) => {
            let spaces = vec![b' '; width];
            let formatter = serde_json::ser::PrettyFormatter::with_indent(&spaces);
            let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
            notebook.serialize(&mut ser)
        }
        None => serde_json::to_writer(&mut out, notebook),
    };
    result.map_err(|err| {
        EditError::new(
            OutcomeCode::Internal,
            format!("serializing the notebook: {err}"),
        )
    })?;
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests;
