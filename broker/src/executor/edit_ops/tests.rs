//! Unit tests of the pure edit operations: Edit match counting, Write, and NotebookEdit on real
//! nbformat 4 JSON (replace/insert/delete by id, other cells and outputs preserved, invalid input
//! refused).

use super::*;
use serde_json::json;

#[test]
fn edit_replaces_exactly_one_match() {
    let old = b"a = 1\nb = 2\n";
    let done = apply_edit(old, "b = 2", "b = 3", false).unwrap();
    assert_eq!(done.content.to_vec(old), b"a = 1\nb = 3\n");
    assert_eq!(done.summary, "replaced 1 occurrence");
}

#[test]
fn edit_refuses_several_matches_with_the_count_unless_replace_all() {
    let err = apply_edit(b"x x x", "x", "y", false).unwrap_err();
    assert_eq!(err.code, OutcomeCode::MultipleMatches);
    assert!(err.message.contains("3 times"), "{}", err.message);
    let done = apply_edit(b"x x x", "x", "y", true).unwrap();
    assert_eq!(done.content.to_vec(b"x x x"), b"y y y");
    assert_eq!(done.summary, "replaced 3 occurrences");
}

#[test]
fn edit_refuses_no_match_empty_identical_and_binary() {
    assert_eq!(
        apply_edit(b"abc", "zz", "y", false).unwrap_err().code,
        OutcomeCode::NoMatch
    );
    assert_eq!(
        apply_edit(b"abc", "", "y", false).unwrap_err().code,
        OutcomeCode::InvalidArgument
    );
    assert_eq!(
        apply_edit(b"abc", "a", "a", false).unwrap_err().code,
        OutcomeCode::InvalidArgument
    );
    let err = apply_edit(b"ab\xffc", "a", "b", false).unwrap_err();
    assert_eq!(err.code, OutcomeCode::InvalidArgument);
    assert!(err.message.contains("UTF-8"));
}

#[test]
fn edit_keeps_crlf_and_unicode() {
    let old = "é\r\nß\r\n".as_bytes();
    let done = apply_edit(old, "ß", "ss", false).unwrap();
    assert_eq!(done.content.to_vec(old), "é\r\nss\r\n".as_bytes());
}

#[test]
fn write_content() {
    let done = apply_write(None, "hello\n").unwrap();
    assert_eq!(done.content.to_vec(b""), b"hello\n");
    assert!(done.summary.starts_with("created"));
    let emptied = apply_write(Some(b"x"), "").unwrap();
    assert_eq!(emptied.content.to_vec(b"x"), b"");
}

fn notebook() -> Vec<u8> {
    let nb = json!({
        "cells": [
            {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Title\n", "text"]},
            {"cell_type": "code", "execution_count": 3, "id": "calc", "metadata": {"tags": ["x"]},
             "outputs": [{"output_type": "stream", "name": "stdout", "text": ["42\n"]}],
             "source": "print(6*7)"},
            {"cell_type": "code", "execution_count": 4, "id": "plot", "metadata": {},
             "outputs": [{"output_type": "execute_result", "data": {"text/plain": ["1"]},
                          "execution_count": 4, "metadata": {}}],
             "source": ["1"]}
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5
    });
    let mut out = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, fmt);
    nb.serialize(&mut ser).unwrap();
    out.push(b'\n');
    out
}

fn edit(
    cell_id: Option<&str>,
    mode: NotebookEditMode,
    src: Option<&str>,
    kind: Option<CellType>,
) -> NotebookEdit {
    NotebookEdit {
        cell_id: cell_id.map(str::to_string),
        mode,
        new_source: src.map(str::to_string),
        cell_type: kind,
    }
}

fn parse(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn notebook_replace_by_id_keeps_other_cells_and_metadata() {
    let before = parse(&notebook());
    let done = apply_notebook_edit(
        &notebook(),
        &edit(
            Some("calc"),
            NotebookEditMode::Replace,
            Some("x = 1\nprint(x)"),
            None,
        ),
        "new",
    )
    .unwrap();
    let after = parse(&whole(&done));
    assert_eq!(after["cells"][1]["source"], json!(["x = 1\n", "print(x)"]));
    assert_eq!(after["cells"][1]["outputs"], json!([]));
    assert_eq!(after["cells"][1]["execution_count"], Value::Null);
    assert_eq!(after["cells"][1]["metadata"], json!({"tags": ["x"]}));
    assert_eq!(after["cells"][0], before["cells"][0]);
    assert_eq!(after["cells"][2], before["cells"][2], "other outputs kept");
    assert_eq!(after["metadata"], before["metadata"]);
    // Jupyter's layout: one-space indent, final newline.
    let text = String::from_utf8(whole(&done)).unwrap();
    assert!(text.starts_with("{\n \"cells\": [\n  {"), "{text}");
    assert!(text.ends_with("}\n"));
}

#[test]
fn notebook_replace_can_change_the_cell_type() {
    let done = apply_notebook_edit(
        &notebook(),
        &edit(
            Some("calc"),
            NotebookEditMode::Replace,
            Some("*now text*"),
            Some(CellType::Markdown),
        ),
        "new",
    )
    .unwrap();
    let cell = &parse(&whole(&done))["cells"][1];
    assert_eq!(cell["cell_type"], "markdown");
    assert!(cell.get("outputs").is_none() && cell.get("execution_count").is_none());
}

#[test]
fn notebook_insert_after_a_cell_or_at_the_top() {
    let done = apply_notebook_edit(
        &notebook(),
        &edit(
            Some("intro"),
            NotebookEditMode::Insert,
            Some("y = 2\n"),
            Some(CellType::Code),
        ),
        "calc",
    )
    .unwrap();
    let after = parse(&whole(&done));
    let cells = after["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    assert_eq!(cells[1]["id"], "calc-1", "taken id made unique");
    assert_eq!(cells[1]["source"], json!(["y = 2\n"]));
    assert_eq!(cells[1]["outputs"], json!([]));
    assert_eq!(cells[2]["id"], "calc");
    assert_eq!(done.summary, "inserted cell calc-1 at position 1");

    let done = apply_notebook_edit(
        &notebook(),
        &edit(
            None,
            NotebookEditMode::Insert,
            Some("top"),
            Some(CellType::Markdown),
        ),
        "n1",
    )
    .unwrap();
    let after = parse(&whole(&done));
    assert_eq!(after["cells"][0]["id"], "n1");
    assert_eq!(after["cells"][0]["cell_type"], "markdown");
    assert!(after["cells"][0].get("outputs").is_none());
    assert_eq!(after["cells"][1]["id"], "intro");
}

#[test]
fn notebook_delete_by_id() {
    let before = parse(&notebook());
    let done = apply_notebook_edit(
        &notebook(),
        &edit(Some("calc"), NotebookEditMode::Delete, None, None),
        "x",
    )
    .unwrap();
    let after = parse(&whole(&done));
    assert_eq!(
        after["cells"],
        json!([before["cells"][0], before["cells"][2]])
    );
}

#[test]
fn notebook_argument_errors() {
    let nb = notebook();
    for (e, code) in [
        (
            edit(Some("nope"), NotebookEditMode::Delete, None, None),
            OutcomeCode::CellNotFound,
        ),
        (
            edit(None, NotebookEditMode::Delete, None, None),
            OutcomeCode::InvalidArgument,
        ),
        (
            edit(Some("calc"), NotebookEditMode::Replace, None, None),
            OutcomeCode::InvalidArgument,
        ),
        (
            edit(None, NotebookEditMode::Insert, Some("x"), None),
            OutcomeCode::InvalidArgument,
        ),
    ] {
        assert_eq!(
            apply_notebook_edit(&nb, &e, "n").unwrap_err().code,
            code,
            "{e:?}"
        );
    }
}

#[test]
fn invalid_notebooks_are_refused() {
    let e = edit(
        None,
        NotebookEditMode::Insert,
        Some("x"),
        Some(CellType::Code),
    );
    let bad: Vec<Vec<u8>> = vec![
        b"not json".to_vec(),
        b"[]".to_vec(),
        b"\xff".to_vec(),
        json!({"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "cells": []})
            .to_string()
            .into_bytes(),
        json!({"nbformat": 4, "metadata": {}, "cells": []})
            .to_string()
            .into_bytes(),
        json!({"nbformat": 4, "nbformat_minor": 5, "cells": []})
            .to_string()
            .into_bytes(),
        json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": {}})
            .to_string()
            .into_bytes(),
        json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
               "cells": [{"cell_type": "widget", "id": "a", "metadata": {}, "source": ""}]})
        .to_string()
        .into_bytes(),
        json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
               "cells": [{"cell_type": "code", "id": "a", "metadata": {}, "source": ""}]})
        .to_string()
        .into_bytes(),
        json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
               "cells": [{"cell_type": "raw", "metadata": {}, "source": ""}]})
        .to_string()
        .into_bytes(),
        json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
               "cells": [{"cell_type": "raw", "id": "a", "metadata": {}, "source": [1]}]})
        .to_string()
        .into_bytes(),
        json!({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
               "cells": [{"cell_type": "raw", "id": "a", "metadata": {}, "source": ""},
                         {"cell_type": "raw", "id": "a", "metadata": {}, "source": ""}]})
        .to_string()
        .into_bytes(),
    ];
    for nb in bad {
        let err = apply_notebook_edit(&nb, &e, "n").unwrap_err();
        assert_eq!(
            err.code,
            OutcomeCode::InvalidNotebook,
            "{}",
            String::from_utf8_lossy(&nb)
        );
    }
}

#[test]
fn old_notebooks_without_ids_get_no_id_and_compact_stays_compact() {
    let nb = json!({"nbformat": 4, "nbformat_minor": 2, "metadata": {},
                    "cells": [{"cell_type": "raw", "metadata": {}, "source": "r"}]})
    .to_string();
    let done = apply_notebook_edit(
        nb.as_bytes(),
        &edit(
            None,
            NotebookEditMode::Insert,
            Some("m"),
            Some(CellType::Markdown),
        ),
        "n",
    )
    .unwrap();
    let text = String::from_utf8(whole(&done)).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    let after: Value = serde_json::from_str(&text).unwrap();
    assert!(after["cells"][0].get("id").is_none());
    assert_eq!(done.summary, "inserted a cell at position 0");
}

/// The bytes of a notebook edit (always whole new content, independent of the old bytes).
fn whole(done: &Computed<'_>) -> Vec<u8> {
    done.content.to_vec(&[])
}

#[test]
fn replace_all_gives_the_same_bytes_as_runs_or_as_one_buffer() {
    for n in [MAX_SPLICED_MATCHES, MAX_SPLICED_MATCHES + 1, 10_000] {
        let old = "ab,".repeat(n);
        let done = apply_edit(old.as_bytes(), "b", "XYZ", true).unwrap();
        assert_eq!(
            done.content.to_vec(old.as_bytes()),
            old.replace('b', "XYZ").as_bytes()
        );
        assert_eq!(done.summary, format!("replaced {n} occurrences"));
    }
    // The size is checked before anything is built.
    let old = "b".repeat(1000);
    let huge = "x".repeat(MAX_EDIT_FILE_BYTES / 999);
    assert_eq!(
        apply_edit(old.as_bytes(), "b", &huge, true)
            .unwrap_err()
            .code,
        OutcomeCode::TooLarge
    );
}
