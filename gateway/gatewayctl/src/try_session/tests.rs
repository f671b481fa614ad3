//! Unit tests of `try`: URLs shown without tokens, connect errors, the file it picks, the lines a
//! Read shows, and exit codes explained.

use super::*;

#[test]
fn a_read_counts_its_numbered_lines_not_its_notes() {
    let output = "     1\t# Demo\n     2\t\n     3\tA line\n[truncated: showing lines 1-3 of 9]";
    assert_eq!(numbered_lines(output), 3);
    assert_eq!(numbered_lines("[empty file]"), 0);
    assert_eq!(numbered_lines("    12\ttab\tinside"), 1);
}

#[test]
fn exit_codes_above_128_name_their_signal() {
    assert_eq!(explain_exit_code(0), "0");
    assert_eq!(explain_exit_code(1), "1");
    assert_eq!(explain_exit_code(128), "128");
    assert_eq!(explain_exit_code(143), "143: killed by SIGTERM (128 + 15)");
    assert_eq!(explain_exit_code(137), "137: killed by SIGKILL (128 + 9)");
    assert_eq!(explain_exit_code(255), "255");
    let stopped = render_stopped(&serde_json::json!({
        "native_session_id": "ns_1", "status": "stopped",
        "current_run": {"state": "exited"}, "terminal": {"exit_code": 143},
    }));
    assert!(
        stopped.contains(
            "(exit code 143: killed by SIGTERM (128 + 15), as native_session_stop ends it)"
        ),
        "{stopped}"
    );
}

/// The endpoint `scripts/run` serves by default.
const URL: &str = "http://127.0.0.1:8787/mcp";

#[test]
fn a_capability_url_is_printed_without_its_token() {
    assert_eq!(
        shown_url("http://127.0.0.1:8787/mcp/s3cret"),
        "http://127.0.0.1:8787/mcp/<token>"
    );
    assert_eq!(shown_url(URL), URL);
}

/// Red team 39 F7: the token goes only to the endpoint the state dir's gateway names.
#[test]
fn only_the_gateway_s_own_endpoint_is_the_same() {
    let listen = "127.0.0.1:8787";
    assert!(same_endpoint("http://127.0.0.1:8787/mcp", listen));
    for other in [
        // Red team 40: `localhost` may be `::1` first, another listener.
        "http://localhost:8787/mcp",
        "http://127.0.0.1:8788/mcp",
        "http://127.0.0.2:8787/mcp",
        "https://127.0.0.1:8787/mcp",
        "http://127.0.0.1:8787/other",
        "http://127.0.0.1:8787@evil:80/mcp",
        "http://127.0.0.1:87870/mcp",
    ] {
        assert!(!same_endpoint(other, listen), "{other}");
    }
}

/// Red team 40: a capability URL takes no other token with it, not even the environment's.
#[test]
fn a_capability_url_carries_no_other_token() {
    let none = tempfile::tempdir().unwrap();
    let url = "http://127.0.0.1:45001/mcp/anything";
    assert_eq!(token(none.path(), Some("ngw_owner"), url).unwrap(), None);
    assert_eq!(
        token(none.path(), Some("ngw_owner"), "http://127.0.0.1:45001/mcp").unwrap(),
        Some("ngw_owner".to_string())
    );
}

#[test]
fn capability_urls() {
    assert!(is_capability_url("http://127.0.0.1:8787/mcp/abc"));
    assert!(!is_capability_url("http://127.0.0.1:8787/mcp"));
    assert!(!is_capability_url("http://127.0.0.1:8787/mcp/"));
    assert!(!is_capability_url("http://127.0.0.1:8787/mcp/a/b"));
}

#[test]
fn connect_errors_say_what_to_do() {
    let refused = connect_error(
        URL,
        &CallError::Unreachable("tcp connect error: Connection refused".into()),
    );
    assert!(
        refused.to_string().contains("Start it with scripts/run"),
        "{refused}"
    );
    let unauthorized = connect_error(URL, &CallError::Unauthorized);
    assert!(
        unauthorized
            .to_string()
            .contains("refused the access token")
    );
}

#[test]
fn picks_a_readme_then_text_then_anything() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_string_lossy().to_string()
    };
    let bin = write("a.bin", b"\x00\x01");
    let notes = write("notes.txt", b"hello\n");
    let empty = write("README.md", b"");
    let big = write("big.md", &vec![b'x'; (SMALL_FILE_BYTES + 1) as usize]);
    assert_eq!(
        pick_small_text_file(&[bin.clone(), empty.clone(), big.clone(), notes.clone()]),
        Some(notes.clone())
    );
    let readme = write("README", b"read me\n");
    assert_eq!(
        pick_small_text_file(&[bin.clone(), notes, readme.clone()]),
        Some(readme)
    );
    assert_eq!(pick_small_text_file(std::slice::from_ref(&bin)), Some(bin));
    assert_eq!(pick_small_text_file(&[empty, big]), None);
}

/// Red team 23i: a name FindFiles shows escaped counts too ("listed 1 file(s)" for 2 before);
/// only plain paths are candidates to read.
#[test]
fn escaped_names_count_as_listed_files() {
    let result = serde_json::json!({"output":
        "/p/README.md\n\"/p/f\\u{1b}]0;T\\u{7}.md\"\n/p/link -> (symlink)\n(2 files)"});
    assert_eq!(listed_count(&result), 2);
    assert_eq!(listed_files(&result), vec!["/p/README.md".to_string()]);
}

/// An endpoint that is not the owner's gateway (red team 43 B5): a line feed in any field it
/// answers stays inside that field's line, escaped, and forges no line of its own.
#[test]
fn an_endpoints_fields_never_start_lines_of_their_own() {
    let forged = "x\n  runner confinement: network loopback:broker-port-only, writes none";
    let view = serde_json::json!({
        "native_session_id": forged,
        "capability_profile": forged,
        "status": forged,
        "current_run": {"generation": 1, "state": forged},
        "network_boundary": {"runner": forged, "runner_writes": forged,
            "enforced_by": forged, "commands_enforced_by": forged},
    });
    for (text, lines) in [
        (super::render_started(&view), 3),
        (super::render_settled(&view), 1),
        (super::render_stopped(&view), 3),
    ] {
        assert_eq!(text.trim_end().lines().count(), lines, "{text}");
        assert!(text.contains("x\\n  runner confinement"), "{text}");
    }
}
