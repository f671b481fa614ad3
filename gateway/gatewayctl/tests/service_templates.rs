//! The shipped service templates, filled by `scripts/install-service --public-base`, as the
//! service managers and `doctor` read them: the plist is well-formed XML (a strict XML 1.0 parser
//! reads it) and both files carry the tunnel's public base and allowed host. A non-https base is
//! refused, and a file without a public base makes `doctor` warn.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use gatewayctl::plist::{self, Plist};
use gatewayctl::unit::{self, Unit};
use gatewayctl::{Command, DoctorArgs};
use support::*;

const PUBLIC_BASE: &str = "https://Gw.Example.net/";
const FILLED_BASE: &str = "https://gw.example.net";
const FILLED_HOST: &str = "gw.example.net";

/// Run scripts/install-service with `args` and a fixture's paths; its output file and result.
fn install_service(dir: &Path, kind: &str, args: &[&str]) -> (PathBuf, Output) {
    let out = dir.join(format!("service{kind}"));
    let output = std::process::Command::new(repo_root().join("scripts/install-service"))
        .arg(kind)
        .args(args)
        .arg("--out")
        .arg(&out)
        .env("CLAUDE_TOOLS_STATE_DIR", dir.join("state"))
        .env("GATEWAY_BIN", "/opt/native-gateway/bin/gateway")
        .env("CLAUDE_BIN", "/opt/claude/bin/claude")
        .env("HOME", dir)
        .env_remove("CLAUDE_TOOLS_GATEWAY_PUBLIC_BASE")
        .output()
        .unwrap();
    (out, output)
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The `<key>`/value pairs of a `<dict>` element, as a strict XML parser sees them.
fn dict_entries<'a>(dict: roxmltree::Node<'a, 'a>) -> Vec<(String, roxmltree::Node<'a, 'a>)> {
    let elements: Vec<_> = dict.children().filter(|n| n.is_element()).collect();
    elements
        .chunks(2)
        .map(|pair| {
            assert_eq!(pair[0].tag_name().name(), "key", "{pair:?}");
            (pair[0].text().unwrap_or_default().to_string(), pair[1])
        })
        .collect()
}

#[test]
fn the_filled_plist_is_well_formed_xml_with_the_public_base() {
    let dir = tempfile::tempdir().unwrap();
    let (path, output) = install_service(dir.path(), "--launchd", &["--public-base", PUBLIC_BASE]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = std::fs::read_to_string(&path).unwrap();

    // A strict XML 1.0 parser (it refuses `--` inside a comment, as launchd's does).
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(&text, options)
        .unwrap_or_else(|e| panic!("the filled plist is not well-formed XML: {e}\n{text}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "plist");
    let job = root.children().find(|n| n.is_element()).unwrap();
    assert_eq!(job.tag_name().name(), "dict");
    let env = dict_entries(job)
        .into_iter()
        .find(|(k, _)| k == "EnvironmentVariables")
        .map(|(_, v)| v)
        .expect("EnvironmentVariables");
    let env: Vec<(String, String)> = dict_entries(env)
        .into_iter()
        .map(|(k, v)| {
            assert_eq!(v.tag_name().name(), "string", "{k}");
            (k, v.text().unwrap_or_default().to_string())
        })
        .collect();
    let var = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    assert_eq!(var("CLAUDE_TOOLS_GATEWAY_PUBLIC_BASE"), Some(FILLED_BASE));
    assert_eq!(var("CLAUDE_TOOLS_GATEWAY_ALLOWED_HOSTS"), Some(FILLED_HOST));

    // doctor's own reader agrees.
    let job = plist::parse(&text).unwrap();
    let env = job.get("EnvironmentVariables").unwrap();
    assert_eq!(
        env.get("CLAUDE_TOOLS_GATEWAY_PUBLIC_BASE")
            .and_then(Plist::as_str),
        Some(FILLED_BASE)
    );
    assert_eq!(
        env.get("CLAUDE_TOOLS_GATEWAY_ALLOWED_HOSTS")
            .and_then(Plist::as_str),
        Some(FILLED_HOST)
    );
}

#[test]
fn the_template_itself_is_well_formed_xml() {
    let text = std::fs::read_to_string(repo_root().join("scripts/native-gateway.plist")).unwrap();
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    if let Err(e) = roxmltree::Document::parse_with_options(&text, options) {
        panic!("scripts/native-gateway.plist is not well-formed XML: {e}");
    }
}

#[test]
fn the_filled_unit_carries_the_public_base_and_allowed_host() {
    let dir = tempfile::tempdir().unwrap();
    let (path, output) = install_service(dir.path(), "--systemd", &["--public-base", PUBLIC_BASE]);
    assert!(output.status.success(), "{}", stderr(&output));
    let unit = Unit::parse(&std::fs::read_to_string(&path).unwrap());
    assert_eq!(
        unit.env("CLAUDE_TOOLS_GATEWAY_PUBLIC_BASE").as_deref(),
        Some(FILLED_BASE)
    );
    assert_eq!(
        unit.env("CLAUDE_TOOLS_GATEWAY_ALLOWED_HOSTS").as_deref(),
        Some(FILLED_HOST)
    );
    let exec = unit::exec_words(unit.get("Service", "ExecStart").unwrap());
    assert_eq!(exec[..2], ["/opt/native-gateway/bin/gateway", "serve"]);
    // The check line it prints runs the release gatewayctl, not a debug `cargo run`.
    let err = stderr(&output);
    assert!(err.contains("target/release/gatewayctl' doctor"), "{err}");
    assert!(!err.contains("cargo run"), "{err}");
}

#[test]
fn a_port_other_than_443_is_kept_in_both_hosts() {
    let dir = tempfile::tempdir().unwrap();
    let (path, output) = install_service(
        dir.path(),
        "--systemd",
        &["--public-base", "https://gw.example.net:8443"],
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let unit = Unit::parse(&std::fs::read_to_string(&path).unwrap());
    assert_eq!(
        unit.env("CLAUDE_TOOLS_GATEWAY_ALLOWED_HOSTS").as_deref(),
        Some("gw.example.net,gw.example.net:8443")
    );
}

#[test]
fn a_base_that_is_not_an_https_origin_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (base, says) in [
        ("http://gw.example.net", "must be https://HOST, not http"),
        ("gw.example.net", "must be an https origin"),
        ("https://gw.example.net/mcp", "without path"),
        ("https://user@gw.example.net", "without path, query or user"),
    ] {
        for kind in ["--systemd", "--launchd"] {
            let (path, output) = install_service(dir.path(), kind, &["--public-base", base]);
            assert_eq!(output.status.code(), Some(2), "{base}");
            assert!(
                stderr(&output).contains(says),
                "{base}: {}",
                stderr(&output)
            );
            assert!(!path.exists(), "{base}: a file was written");
        }
    }
}

#[test]
fn doctor_warns_on_a_service_file_without_a_public_base() {
    let f = Fixture::new();
    let (unit, output) = install_service(f.dir.path(), "--systemd", &[]);
    assert!(output.status.success());
    assert!(
        stderr(&output).contains("warning: no --public-base"),
        "{}",
        stderr(&output)
    );
    let (plist, _) = install_service(f.dir.path(), "--launchd", &[]);
    // Without a public base the plist is still well-formed and complete.
    assert!(plist::parse(&std::fs::read_to_string(&plist).unwrap()).is_ok());
    let (out, result) = f.run(
        false,
        Command::Doctor(DoctorArgs {
            service_file: vec![unit, plist],
            claude_bin: Some(PathBuf::from("/bin/true")),
            checkout: Some(f.dir.path().to_path_buf()),
            home: Some(f.dir.path().to_path_buf()),
            token: None,
            skip_host_probes: true,
        }),
    );
    let _ = result;
    for kind in ["systemd", "launchd"] {
        let line = out
            .lines()
            .find(|l| l.contains(&format!("{kind} public base")))
            .unwrap_or_else(|| panic!("no {kind} public base check:\n{out}"));
        assert!(
            line.starts_with("WARN") && line.contains("no public base"),
            "{line}"
        );
    }
    assert!(
        out.contains("fix: fill the file again with scripts/install-service --public-base"),
        "{out}"
    );
}
