//! Unit tests of the Seatbelt profiles (on every OS): deny by default, paths as parameters never
//! profile text, the runner's one outbound rule and private writes, and the exact argv.

use super::*;
use std::path::Path;

/// The rules of a profile that allow writing.
fn write_rules(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| l.starts_with("(allow") && l.contains("file-write"))
        .collect()
}

fn spec() -> SeatbeltSpec {
    SeatbeltSpec {
        scratch: PathBuf::from("/private/var/folders/x/scratch\") (allow default"),
        session_dir: None,
        denied: vec![
            PathBuf::from("/Users/o/.ssh"),
            PathBuf::from("/Users/o/Library/Application Support/native-gateway"),
        ],
        visible: vec![PathBuf::from(
            "/Users/o/Library/Application Support/native-gateway/worktrees/ns_1",
        )],
    }
}

#[test]
fn profile_denies_by_default_and_allows_no_network() {
    let text = profile(&spec());
    assert!(text.starts_with("(version 1)\n(deny default)\n"));
    assert!(!text.contains("network"), "{text}");
    assert!(!text.contains("(allow default"));
    assert!(text.contains("(allow signal (target same-sandbox))"));
    assert!(text.contains("(allow process-info* (target same-sandbox))"));
    assert!(!text.contains("(allow signal)"));
    for forbidden in [
        "SecurityServer",
        "securityd",
        "trustd",
        "cfprefsd",
        "launchservicesd",
        "appleevent",
        "lsopen",
    ] {
        assert!(!text.contains(forbidden), "{forbidden} in {text}");
    }
    // Writes only under SCRATCH (and two device files).
    let writes = write_rules(&text);
    assert_eq!(writes.len(), 2, "{writes:?}");
    assert!(writes[0].contains("(param \"SCRATCH\")"));
    // The allow-listed devices, given back after the denials (`/dev` is masked), and no more.
    assert!(writes[1].contains("(literal \"/dev/null\")") && writes[1].contains("/dev/fd"));
    assert!(!writes[1].contains("ptmx") && !writes[1].contains("(subpath \"/dev\")"));
    assert!(text.rfind("(deny").unwrap() < text.find(writes[1]).unwrap());
    // The scratch dir lies in the denied runtime area: its allow comes after every denial.
    let scratch = text.find(writes[0]).unwrap();
    assert!(
        text.rfind("(param \"DENIED_").is_none_or(|d| d < scratch),
        "{text}"
    );
}

#[test]
fn paths_are_parameters_never_profile_text() {
    let s = spec();
    let text = profile(&s);
    assert!(!text.contains("/Users/o"));
    assert!(!text.contains("folders"));
    // Every denied path is denied after the broad read allow (last match wins).
    let allow_read = text.find("(allow file-read*)").unwrap();
    for i in 0..s.denied.len() {
        let rule = format!("(deny file-read* file-write* (subpath (param \"DENIED_{i}\")))");
        let at = text.find(&rule).unwrap();
        assert!(at > allow_read);
    }
    assert!(text.contains("(param \"KEYCHAINS\")"));
    // The worktree is readable again, after the denials, and never writable.
    let visible = text
        .find("(allow file-read* (subpath (param \"VISIBLE_0\")))")
        .unwrap();
    assert!(visible > text.find("(param \"DENIED_1\")").unwrap());
    assert!(visible < text.find("(param \"KEYCHAINS\")").unwrap());
    let params = params(&s, Path::new("/Users/o"));
    assert!(
        params
            .iter()
            .any(|(k, v)| k == "VISIBLE_0" && v.ends_with("worktrees/ns_1"))
    );
    assert!(params.contains(&("DENIED_0".into(), "/Users/o/.ssh".into())));
    assert!(params.contains(&("KEYCHAINS".into(), "/Users/o/Library/Keychains".into())));
    // Each literal in the profile stays far below the ~1 KiB SBPL string limit.
    assert!(text.lines().all(|l| l.len() < 512));
}

/// Whether the `(param "…")` names `spec`'s profile references are exactly the parameters
/// given (sandbox-exec refuses a profile naming an undefined one).
fn params_match(spec: &SeatbeltSpec) -> bool {
    let referenced: std::collections::BTreeSet<String> = profile(spec)
        .split("(param \"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect();
    let given: std::collections::BTreeSet<String> = params(spec, Path::new("/Users/o"))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    referenced == given
}

#[test]
fn the_session_dir_is_the_one_other_writable_place_and_the_project_stays_read_only() {
    let s = SeatbeltSpec {
        session_dir: Some(PathBuf::from("/private/tmp/ngw-run-501-x/abc/layer")),
        ..spec()
    };
    let text = profile(&s);
    let writes = write_rules(&text);
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(writes[0].contains("(param \"SCRATCH\")"));
    assert_eq!(
        writes[1],
        "(allow file-read* file-write* (subpath (param \"SESSION_DIR\")))"
    );
    assert!(writes[2].contains("(literal \"/dev/null\")"));
    // It lies in the denied runtime area: allowed back after every denial of the area.
    let session = text.find(writes[1]).unwrap();
    assert!(text.rfind("(param \"DENIED_").unwrap() < session);
    assert!(!text.contains("/private/tmp"));
    assert!(params_match(&s));
    assert!(params(&s, Path::new("/Users/o")).contains(&(
        "SESSION_DIR".into(),
        "/private/tmp/ngw-run-501-x/abc/layer".into()
    )));
    // Without a session dir neither the rule nor the parameter.
    let without = spec();
    assert!(!profile(&without).contains("SESSION_DIR"));
    assert!(params_match(&without));
}

fn runner_spec() -> RunnerSeatbeltSpec {
    RunnerSeatbeltSpec {
        writable: vec![
            PathBuf::from("/Users/o/state/run/abc/home"),
            PathBuf::from("/Users/o/state/run/abc/tmp"),
        ],
        denied: vec![
            PathBuf::from("/Users/o/.ssh"),
            PathBuf::from("/Users/o/state"),
        ],
        readable: vec![PathBuf::from("/Users/o/state/run/abc/mcp.json")],
        visible: vec![PathBuf::from("/Users/o/state/worktrees/ns_1")],
        broker_port: 43117,
    }
}

#[test]
fn runner_profile_has_one_outbound_rule_to_the_broker_port() {
    let text = runner_profile(&runner_spec());
    assert!(text.starts_with("(version 1)\n(deny default)\n"));
    let network: Vec<&str> = text.lines().filter(|l| l.contains("network")).collect();
    assert_eq!(
        network,
        ["(allow network-outbound (remote ip \"localhost:43117\"))"]
    );
    assert!(!text.contains("(allow default"));
    assert!(!text.contains("local ip"));
    assert!(!text.contains("/Users/o"));
    for forbidden in ["SecurityServer", "securityd", "trustd", "cfprefsd"] {
        assert!(!text.contains(forbidden), "{forbidden} in {text}");
    }
}

#[test]
fn runner_writes_only_in_its_private_dirs_even_under_the_state_dir() {
    let s = runner_spec();
    let text = runner_profile(&s);
    let writes = write_rules(&text);
    assert_eq!(writes.len(), 3, "{writes:?}");
    assert!(writes[0].contains("(param \"WRITABLE_0\")"));
    assert!(writes[1].contains("(param \"WRITABLE_1\")"));
    assert!(writes[2].contains("(literal \"/dev/null\")"));
    // Private dirs and the MCP config are allowed back after every denial (last match wins).
    let last_deny = text.rfind("(deny").unwrap();
    assert!(text.find("WRITABLE_0").unwrap() > last_deny);
    assert!(text.find("READABLE_0").unwrap() > last_deny);
    // The worktree is readable again, not writable.
    let visible = "(allow file-read* (subpath (param \"VISIBLE_0\")))";
    assert!(text.find(visible).unwrap() > last_deny);
    let args = runner_sandbox_exec_args(&s, Path::new("/Users/o"));
    assert_eq!(args[0], "-p");
    assert_eq!(args[1], text);
    assert_eq!(args.last().map(String::as_str), Some("--"));
    assert!(args.contains(&"-DVISIBLE_0=/Users/o/state/worktrees/ns_1".to_string()));
    let params = runner_params(&s, Path::new("/Users/o"));
    assert!(params.contains(&("DENIED_1".into(), "/Users/o/state".into())));
    assert!(params.contains(&("WRITABLE_0".into(), "/Users/o/state/run/abc/home".into())));
    assert!(params.contains(&(
        "READABLE_0".into(),
        "/Users/o/state/run/abc/mcp.json".into()
    )));
}

#[test]
fn sandbox_exec_argv_is_exact() {
    let s = spec();
    let args = sandbox_exec_args(
        &s,
        Path::new("/Users/o"),
        Path::new("/usr/bin/git"),
        &["status".to_string(), "--short".to_string()],
    );
    assert_eq!(args[0], "-p");
    assert_eq!(args[1], profile(&s));
    let dash = args.iter().position(|a| a == "--").unwrap();
    assert_eq!(&args[dash + 1..], ["/usr/bin/git", "status", "--short"]);
    assert!(args[2..dash].iter().all(|a| a.starts_with("-D")));
    assert!(
        args[2..dash]
            .iter()
            .any(|a| a == "-DSCRATCH=/private/var/folders/x/scratch\") (allow default")
    );
}
