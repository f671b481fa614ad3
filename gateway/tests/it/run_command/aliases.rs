//! Red team 39 F1: the protected set under mount aliases made, or filled, after a session
//! started. A bind mount of the directory holding the owner's home and state dir, made after
//! the policy was built, and a credential file made after that, are refused to Read and
//! hidden from commands under the alias, as at their own paths; a walk (FindFiles,
//! SearchText) from the alias's top or above it skips them (red team 40).

use super::masks_and_fallback::HostMounts;
use super::*;

fn read(fx: &Fx, path: &Path) -> ActionOutcome {
    fx.exec.execute(
        "act_read",
        &ToolArgs::Read(common::tools::ReadArgs {
            file_path: path.display().to_string(),
            offset: None,
            limit: None,
        }),
    )
}

#[test]
fn aliases_mounted_and_secrets_made_after_the_start_stay_protected() {
    let fx = fixture();
    if !confinable(&fx) {
        return;
    }
    // Built (and used once) before the alias exists.
    assert_eq!(run(&fx, &["true"]).status, ToolStatus::Ok);
    let top = fx.home.parent().unwrap().to_path_buf();
    let host = tempfile::tempdir().unwrap();
    let alias = std::fs::canonicalize(host.path()).unwrap().join("alias");
    std::fs::create_dir_all(&alias).unwrap();
    let mut mounts = HostMounts(Vec::new());
    mounts.mount(&["--bind", top.to_str().unwrap()], &alias);
    std::fs::create_dir_all(fx.home.join(".aws")).unwrap();
    std::fs::write(fx.home.join(".aws/credentials"), "AWS SECRET").unwrap();
    let names = [
        "home/.ssh/id_ed25519",
        "home/.aws/credentials",
        "state/gateway.sqlite3",
    ];
    for name in names {
        let aliased = alias.join(name);
        assert!(aliased.exists(), "{}", aliased.display());
        let out = read(&fx, &aliased);
        assert_eq!(
            out.error_code,
            Some(OutcomeCode::NotPermitted),
            "{name}: {}",
            out.output
        );
        assert!(
            out.output.contains("protected location"),
            "{name}: {}",
            out.output
        );
        let out = run(&fx, &["cat", aliased.to_str().unwrap()]);
        for secret in ["PRIVATE KEY", "AWS SECRET", "STATE"] {
            assert!(!stdout_of(&out).contains(secret), "{name}: {}", out.output);
        }
    }
    // Red team 40: walked into from the alias's top (and from above it), nothing of them is
    // listed or searched.
    for top in [alias.clone(), alias.parent().unwrap().to_path_buf()] {
        let found = fx.exec.execute(
            "act_find",
            &ToolArgs::FindFiles(common::tools::FindFilesArgs {
                path: Some(top.display().to_string()),
                name_contains: None,
                max_depth: None,
                max_results: None,
            }),
        );
        for name in ["id_ed25519", "credentials", "gateway.sqlite3"] {
            assert!(!found.output.contains(name), "{name}: {}", found.output);
        }
        assert!(found.output.contains("existing.txt"), "{}", found.output);
        for secret in ["PRIVATE KEY", "AWS SECRET", "STATE"] {
            let searched = fx.exec.execute(
                "act_search",
                &ToolArgs::SearchText(common::tools::SearchTextArgs {
                    query: secret.into(),
                    path: Some(top.display().to_string()),
                    case_sensitive: None,
                    max_results: None,
                }),
            );
            assert!(
                !searched.output.contains(&format!(": {secret}")),
                "{secret}: {}",
                searched.output
            );
        }
    }
    // The project's own files stay readable under the alias.
    let out = read(&fx, &alias.join("work/existing.txt"));
    assert_eq!(out.status, ToolStatus::Ok, "{}", out.output);
}
