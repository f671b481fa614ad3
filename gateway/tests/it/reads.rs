//! The read tools across the whole computer with the real runner: ChatGPT lists `/`, searches a
//! tree holding a fake HOME's credential dir, reads a file with a known SHA-256 and is refused a
//! protected file — bounded, sorted answers, refusals with their code, one ledger entry per call.

use serde_json::json;

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn reads_searches_and_lists_across_root_in_a_read_only_session() {
    // A fake owner HOME with a credential dir: the gateway hands its HOME to the broker as the
    // owner's home, so `~/.ssh` here is protected.
    let tree = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tree.path()).unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(
        home.join(".ssh/id_ed25519"),
        "SSH-SECRET-7731 reads-needle\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.join("project/src")).unwrap();
    std::fs::write(
        home.join("project/src/main.rs"),
        "fn main() {}\n// reads-needle one\n",
    )
    .unwrap();
    std::fs::write(
        home.join("project/README.md"),
        "reads-needle two\nplain\nREADS-NEEDLE three\n",
    )
    .unwrap();
    std::fs::create_dir_all(home.join("project/.git")).unwrap();
    std::fs::write(home.join("project/.git/config"), "reads-needle in git\n").unwrap();
    std::os::unix::fs::symlink(home.join(".ssh"), home.join("project/ssh-link")).unwrap();
    let known = home.join("project/known.txt");
    let known_bytes = "first line\nsecond line\n";
    std::fs::write(&known, known_bytes).unwrap();

    let gw = gateway_with(&[("HOME", home.to_str().unwrap())]).await;
    let _cleanup = Cleanup(gw.state_dir().to_path_buf());
    let chat = chatgpt(&gw).await;
    let work = work_dir();
    let v = start_session(&chat, work.path(), "Look around the machine", "reads-start").await;
    let sid = session_id(&v);
    let lease = lease_id(&v);
    assert_eq!(v["capability_profile"], "read_only");

    let calls = json!([
        {"name": "FindFiles", "arguments": {"path": "/", "max_depth": 2}},
        {"name": "SearchText", "arguments": {
            "query": "reads-needle", "path": home.to_string_lossy(), "case_sensitive": false}},
        {"name": "Read", "arguments": {"file_path": known.to_string_lossy()}},
        {"name": "Read", "arguments": {"file_path": home.join(".ssh/id_ed25519").to_string_lossy()}},
        {"name": "Read", "arguments": {"file_path": "/etc/hostname"}},
        {"name": "FindFiles", "arguments": {"path": home.to_string_lossy(), "max_depth": 8}},
    ]);
    let r = chat
        .reply(
            &sid,
            &lease,
            &turn_id(&v),
            "reads-1",
            Some("Looking."),
            Some(calls),
        )
        .await
        .unwrap();
    let v = view(&r);
    assert_eq!(v["status"], "waiting_for_gpt", "{v}");
    assert_eq!(v["pending_turn"]["kind"], "tool_results");
    let results = v["pending_turn"]["tool_results"].as_array().unwrap();
    assert_eq!(results.len(), 6, "{v}");
    let output = |i: usize| results[i]["output"].as_str().unwrap().to_string();

    // 1. FindFiles over `/`: bounded, sorted, truncated flag consistent with what it says.
    assert_eq!(results[0]["status"], "ok", "{}", results[0]);
    let listing = output(0);
    assert!(listing.len() <= 64 * 1024);
    let entries: Vec<&str> = listing.lines().filter(|l| !l.starts_with('[')).collect();
    assert!(!entries.is_empty());
    assert!(entries.len() <= 1000, "default max_results");
    assert!(entries.iter().all(|l| l.starts_with('/')), "{listing}");
    let paths: Vec<std::path::PathBuf> = entries
        .iter()
        .map(|l| {
            std::path::PathBuf::from(l.split(" -> ").next().unwrap().split(" (").next().unwrap())
        })
        .collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted, "listing of / not sorted");
    assert!(
        paths.iter().all(|p| p.components().count() <= 3),
        "max_depth 2 exceeded"
    );
    let says_truncated = listing.contains("[truncated:");
    assert_eq!(results[0]["truncated"], says_truncated, "{listing}");
    assert!(!listing.contains("/.git/"));

    // 2. SearchText over the fake home: sorted `path:line: text`, protected and .git skipped.
    assert_eq!(results[1]["status"], "ok", "{}", results[1]);
    let found = output(1);
    let p = home.join("project").display().to_string();
    assert_eq!(
        found,
        format!(
            "3 matching lines in 2 files for \"reads-needle\" (case-insensitive)\n\
             {p}/README.md:1: reads-needle two\n\
             {p}/README.md:3: READS-NEEDLE three\n\
             {p}/src/main.rs:2: // reads-needle one\n\
             [skipped files: 1 symlinked]"
        )
    );
    assert_eq!(results[1]["truncated"], false);
    assert!(!found.contains("SSH-SECRET"));

    // 3. Read with the SHA-256 of the bytes read in the receipt.
    assert_eq!(results[2]["status"], "ok", "{}", results[2]);
    assert_eq!(output(2), "     1\tfirst line\n     2\tsecond line");
    assert_eq!(
        results[2]["receipt"]["sha256"],
        common::hash::sha256_hex(known_bytes.as_bytes()).as_str()
    );
    assert_eq!(
        results[2]["receipt"]["path"],
        known.to_string_lossy().as_ref()
    );

    // 4. A protected file: an error naming the code, nothing of its content.
    assert_eq!(results[3]["status"], "error", "{}", results[3]);
    assert!(output(3).contains("not_permitted"), "{}", output(3));
    assert!(!output(3).contains("SSH-SECRET"));

    // 5. A system file anyone can read.
    assert_eq!(results[4]["status"], "ok", "{}", results[4]);
    let hostname = std::fs::read("/etc/hostname").unwrap();
    assert_eq!(
        results[4]["receipt"]["sha256"],
        common::hash::sha256_hex(&hostname).as_str()
    );

    // 6. Listing the fake home: the credential dir and .git are invisible, the symlink is listed.
    assert_eq!(results[5]["status"], "ok", "{}", results[5]);
    assert_eq!(
        output(5),
        format!("{p}/README.md\n{p}/known.txt\n{p}/src/main.rs\n{p}/ssh-link -> (symlink)")
    );

    // Nothing from the protected dir reached ChatGPT anywhere in the answer.
    assert!(!r.to_string().contains("SSH-SECRET"));

    let r = chat
        .reply(&sid, &lease, &turn_id(&v), "reads-2", Some("Done."), None)
        .await
        .unwrap();
    assert_eq!(view(&r)["status"], "idle", "{}", view(&r));

    // One committed action per call in the ledger, and no unapproved call.
    let committed = count_with(
        &gw,
        "SELECT COUNT(*) FROM events WHERE session_id = ?1 AND kind = 'action_committed'",
        &sid,
    );
    assert_eq!(committed, 6);
    assert_eq!(
        count(
            &gw,
            "SELECT COUNT(*) FROM events WHERE kind = 'unapproved_call'"
        ),
        0
    );
    let r = chat
        .stop(&sid, &lease, "reads-stop", Some("done"))
        .await
        .unwrap();
    assert_eq!(view(&r)["status"], "stopped");
}
