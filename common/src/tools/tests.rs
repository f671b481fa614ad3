//! Unit tests of the logical tools: what each profile offers, and argument parsing and validation
//! (unknown fields, relative paths, RunCommand and write arguments, UTF-8 clipping).

use super::*;
use serde_json::json;

#[test]
fn read_only_offers_only_read_tools() {
    let offered = LogicalTool::offered(CapabilityProfile::ReadOnly, SubagentPolicy::None);
    assert_eq!(
        offered,
        vec![
            LogicalTool::Read,
            LogicalTool::FindFiles,
            LogicalTool::SearchText,
            LogicalTool::RunCommand
        ]
    );
    assert!(!LogicalTool::Edit.permitted(CapabilityProfile::ReadOnly, SubagentPolicy::None));
    assert!(LogicalTool::Edit.permitted(CapabilityProfile::DirectWrite, SubagentPolicy::None));
    assert!(!LogicalTool::DeepseekSubagentStart.permitted(
        CapabilityProfile::DirectWrite,
        SubagentPolicy::DeepseekExplicit
    ));
}

#[test]
fn refusals_are_typed_by_what_is_wrong() {
    let err = LogicalTool::Read
        .parse_args(&json!({"file_path": "x"}))
        .unwrap_err();
    assert!(
        matches!(&err, ArgsError::NotAbsolute { field: "file_path", got } if got == "x"),
        "{err:?}"
    );
    let err = LogicalTool::Read.parse_args(&json!([])).unwrap_err();
    assert!(matches!(err, ArgsError::NotAnObject), "{err:?}");
    let err = LogicalTool::RunCommand
        .parse_args(&json!({"argv": ["a", "b\0"]}))
        .unwrap_err();
    assert!(matches!(err, ArgsError::ArgvNul(1)), "{err:?}");
    let err = LogicalTool::DeepseekSubagentGet
        .parse_args(&json!({}))
        .unwrap_err();
    assert!(err.to_string().contains("subsession_id"), "{err}");
    for task in ["", "  \n"] {
        let err = LogicalTool::DeepseekSubagentStart
            .parse_args(&json!({ "task": task }))
            .unwrap_err();
        assert_eq!(err.to_string(), "task must not be empty");
    }
    let big = "x".repeat(common_task_limit() + 1);
    let err = LogicalTool::DeepseekSubagentStart
        .parse_args(&json!({ "task": big }))
        .unwrap_err();
    assert!(
        err.to_string().starts_with("task is larger than 32768"),
        "{err}"
    );
    assert!(
        LogicalTool::DeepseekSubagentStart
            .parse_args(&json!({ "task": "x".repeat(common_task_limit()) }))
            .is_ok()
    );
}

fn common_task_limit() -> usize {
    crate::tools::MAX_DEEPSEEK_TASK_BYTES
}

#[test]
fn parse_args_refuses_unknown_fields_and_relative_paths() {
    let err = LogicalTool::Read
        .parse_args(&json!({"file_path": "/x", "bogus": 1}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field"), "{err}");
    let err = LogicalTool::Read
        .parse_args(&json!({"file_path": "x"}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("absolute"), "{err}");
    let err = LogicalTool::SearchText
        .parse_args(&json!({"query": ""}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("empty"), "{err}");
    assert!(
        LogicalTool::Read
            .parse_args(&json!({"file_path": "/etc/hostname", "limit": 3}))
            .is_ok()
    );
}

#[test]
fn run_command_args_are_validated() {
    let ok = LogicalTool::RunCommand
        .parse_args(&json!({"argv": ["git", "status"], "cwd": "sub", "timeout_seconds": 600}))
        .unwrap();
    let ParsedArgs::Executor(ToolArgs::RunCommand(args)) = ok else {
        panic!("wrong variant")
    };
    assert_eq!(args.timeout(), std::time::Duration::from_secs(600));
    let default = LogicalTool::RunCommand
        .parse_args(&json!({"argv": ["true"]}))
        .unwrap();
    let ParsedArgs::Executor(ToolArgs::RunCommand(default)) = default else {
        panic!("wrong variant")
    };
    assert_eq!(default.timeout(), std::time::Duration::from_secs(120));
    for (bad, needle) in [
        (json!({"argv": []}), "between 1 and 4096"),
        (json!({"argv": [""]}), "must not be empty"),
        (json!({"argv": ["a\u{0}b"]}), "NUL"),
        (
            json!({"argv": ["true"], "timeout_seconds": 0}),
            "timeout_seconds",
        ),
        (
            json!({"argv": ["true"], "timeout_seconds": 601}),
            "timeout_seconds",
        ),
        (json!({"argv": ["true"], "cwd": ""}), "cwd"),
        (json!({"argv": "true"}), "invalid type"),
        (json!({"argv": ["true"], "shell": true}), "unknown field"),
    ] {
        let err = LogicalTool::RunCommand
            .parse_args(&bad)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{bad}: {err}");
    }
    let too_many: Vec<String> = (0..4097).map(|i| i.to_string()).collect();
    let err = LogicalTool::RunCommand
        .parse_args(&json!({ "argv": too_many }))
        .unwrap_err()
        .to_string();
    assert!(err.contains("4097"), "{err}");
    let schema = LogicalTool::RunCommand.input_schema();
    assert_eq!(schema["required"], json!(["argv"]));
    assert_eq!(schema["properties"]["argv"]["maxItems"], json!(4096));
    assert_eq!(schema["properties"]["argv"]["minItems"], json!(1));
}

#[test]
fn write_args_are_validated() {
    let sha = "a".repeat(64);
    let edit = LogicalTool::Edit
        .parse_args(
            &json!({"file_path": "/w/a.txt", "old_string": "x", "new_string": "y",
            "replace_all": true, "expected_sha256": sha}),
        )
        .unwrap();
    assert!(matches!(
        edit,
        ParsedArgs::Executor(ToolArgs::Edit(EditArgs {
            replace_all: Some(true),
            ..
        }))
    ));
    let nb = LogicalTool::NotebookEdit
        .parse_args(
            &json!({"notebook_path": "/w/n.ipynb", "edit_mode": "insert",
            "new_source": "print(1)", "cell_type": "code"}),
        )
        .unwrap();
    assert!(matches!(
        nb,
        ParsedArgs::Executor(ToolArgs::NotebookEdit(NotebookEditArgs {
            edit_mode: NotebookEditMode::Insert,
            cell_type: Some(CellType::Code),
            ..
        }))
    ));
    for (tool, bad, needle) in [
        (
            LogicalTool::Edit,
            json!({"file_path": "/w/a", "old_string": "", "new_string": "y"}),
            "old_string must not be empty",
        ),
        (
            LogicalTool::Edit,
            json!({"file_path": "/w/a", "old_string": "y", "new_string": "y"}),
            "identical",
        ),
        (
            LogicalTool::Edit,
            json!({"file_path": "a", "old_string": "x", "new_string": "y"}),
            "absolute",
        ),
        (
            LogicalTool::Edit,
            json!({"file_path": "/w/a", "old_string": "x", "new_string": "y", "expected_sha256": "abc"}),
            "64 hex digits",
        ),
        (
            LogicalTool::Write,
            json!({"file_path": "/w/a"}),
            "missing field `content`",
        ),
        (
            LogicalTool::Write,
            json!({"file_path": "/w/a", "content": "x".repeat(MAX_WRITE_ARGUMENT_BYTES + 1)}),
            "split the change",
        ),
        (
            LogicalTool::Write,
            json!({"file_path": "/w/a", "content": "x", "mode": 511}),
            "unknown field",
        ),
        (
            LogicalTool::NotebookEdit,
            json!({"notebook_path": "/w/n", "edit_mode": "replace", "new_source": "x"}),
            "replace needs cell_id",
        ),
        (
            LogicalTool::NotebookEdit,
            json!({"notebook_path": "/w/n", "edit_mode": "delete"}),
            "delete needs cell_id",
        ),
        (
            LogicalTool::NotebookEdit,
            json!({"notebook_path": "/w/n", "edit_mode": "insert"}),
            "insert needs new_source",
        ),
        (
            LogicalTool::NotebookEdit,
            json!({"notebook_path": "/w/n", "edit_mode": "execute"}),
            "unknown variant",
        ),
    ] {
        let err = tool.parse_args(&bad).unwrap_err().to_string();
        assert!(err.contains(needle), "{bad}: {err}");
    }
    let schema = LogicalTool::NotebookEdit.input_schema();
    assert_eq!(schema["required"], json!(["notebook_path", "edit_mode"]));
    assert_eq!(
        LogicalTool::Edit.input_schema()["required"],
        json!(["file_path", "old_string", "new_string"])
    );
    assert!(LogicalTool::Write.writes() && !LogicalTool::RunCommand.writes());
    assert_eq!(
        LogicalTool::offered(CapabilityProfile::WorktreeWrite, SubagentPolicy::None).len(),
        7
    );
}

#[test]
fn clip_utf8_respects_char_boundaries() {
    let mut s = "aé".repeat(3);
    assert!(clip_utf8(&mut s, 4));
    assert_eq!(s, "aéa");
}

/// `as_str` (strum) and the wire name (serde) are one name for every variant.
#[test]
fn enum_names_match_their_serde_names() {
    fn wire<T: serde::Serialize>(value: T) -> String {
        serde_json::to_value(value)
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    }
    for p in [
        CapabilityProfile::ReadOnly,
        CapabilityProfile::DirectWrite,
        CapabilityProfile::WorktreeWrite,
    ] {
        assert_eq!(p.as_str(), wire(p));
        assert_eq!(p.as_str().parse::<CapabilityProfile>().unwrap(), p);
    }
    for p in [SubagentPolicy::None, SubagentPolicy::DeepseekExplicit] {
        assert_eq!(p.as_str(), wire(p));
    }
    for c in [CellType::Code, CellType::Markdown, CellType::Raw] {
        assert_eq!(c.as_str(), wire(c));
    }
    use crate::protocol::WriteEnd;
    for w in [
        WriteEnd::Committed,
        WriteEnd::NotApplied,
        WriteEnd::Indeterminate,
    ] {
        assert_eq!(w.as_str(), wire(w));
    }
}

#[test]
fn arguments_parse_by_who_carries_the_call_out() {
    for tool in LogicalTool::ALL {
        let valid = match tool {
            LogicalTool::Read => json!({"file_path": "/x"}),
            LogicalTool::FindFiles => json!({}),
            LogicalTool::SearchText => json!({"query": "q"}),
            LogicalTool::RunCommand => json!({"argv": ["true"]}),
            LogicalTool::Edit => json!({"file_path": "/x", "old_string": "a", "new_string": "b"}),
            LogicalTool::Write => json!({"file_path": "/x", "content": ""}),
            LogicalTool::NotebookEdit => {
                json!({"notebook_path": "/x.ipynb", "edit_mode": "insert", "new_source": "s"})
            }
            LogicalTool::DeepseekSubagentStart => json!({"task": "t"}),
            LogicalTool::DeepseekSubagentGet | LogicalTool::DeepseekSubagentStop => {
                json!({"subsession_id": "ds_1"})
            }
        };
        let parsed = tool.parse_args(&valid).unwrap();
        assert_eq!(
            matches!(parsed, ParsedArgs::Gateway(_)),
            tool.executed_by_gateway(),
            "{tool:?}: {parsed:?}"
        );
    }
}
