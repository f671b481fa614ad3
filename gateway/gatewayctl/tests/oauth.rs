//! `gatewayctl oauth`: the clients and grants tables (snapshotted) from a state database of
//! schema v3, a database from before v3 listed as empty, and `approve`/`revoke` refused with a
//! clear message when no gateway is running (the real gateway's answers are tested by the
//! gateway's `it` OAuth tests, which drive these commands in process).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use gatewayctl::{Command, OAuthCommand};
use rusqlite::{Connection, params};
use support::*;

/// The fixture's database brought to schema v3 with two clients and three grants.
fn with_oauth_rows(f: &Fixture) {
    let conn = Connection::open(f.state.join("gateway.sqlite3")).unwrap();
    conn.execute_batch(common::state_schema::V2).unwrap();
    conn.execute_batch(common::state_schema::V3).unwrap();
    conn.pragma_update(None, "user_version", 3).unwrap();
    let client = |id: &str, name: Option<&str>, uris: &str, at: i64, revoked: Option<i64>| {
        conn.execute(
            "INSERT INTO oauth_clients (client_id, client_name, redirect_uris, created_at_ms, revoked_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, name, uris, at, revoked],
        )
        .unwrap();
    };
    client(
        "client_5b1c0f7e2a9d4c3b8e6f1a0d2c4b6a8e",
        Some("ChatGPT"),
        r#"["https://chatgpt.com/connector_platform_oauth_redirect"]"#,
        T0,
        None,
    );
    client(
        "client_0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a",
        None,
        r#"["http://127.0.0.1:33418/callback","http://localhost:33418/callback"]"#,
        T0 + 60_000,
        Some(T0 + 120_000),
    );
    let grant =
        |id: &str, client: &str, at: i64, refreshed: Option<i64>, revoked: Option<(i64, &str)>| {
            conn.execute(
                "INSERT INTO oauth_grants (grant_id, client_id, resource, scope, redirect_uri,
             created_at_ms, refreshed_at_ms, revoked_at_ms, revoked_reason)
             VALUES (?1, ?2, 'https://gw.example.net/mcp', 'mcp', 'https://x/cb', ?3, ?4, ?5, ?6)",
                params![
                    id,
                    client,
                    at,
                    refreshed,
                    revoked.map(|r| r.0),
                    revoked.map(|r| r.1)
                ],
            )
            .unwrap();
        };
    grant(
        "grant_1f2e3d4c5b6a79880123456789abcdef",
        "client_5b1c0f7e2a9d4c3b8e6f1a0d2c4b6a8e",
        T0 + 1_000,
        Some(T0 + 3_600_000),
        None,
    );
    grant(
        "grant_2a3b4c5d6e7f80910123456789abcdef",
        "client_5b1c0f7e2a9d4c3b8e6f1a0d2c4b6a8e",
        T0 + 2_000,
        None,
        Some((T0 + 5_000, "refresh token reused")),
    );
    grant(
        "grant_3c4d5e6f7a8b9c0d0123456789abcdef",
        "client_0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a",
        T0 + 61_000,
        None,
        Some((T0 + 120_000, "client revoked by the owner")),
    );
    // A token row: its hash must never show in any output.
    conn.execute(
        "INSERT INTO oauth_tokens (token_hash, kind, grant_id, audience, expires_at_ms)
         VALUES ('feedface', 'access', 'grant_1f2e3d4c5b6a79880123456789abcdef', 'a', ?1)",
        [FUTURE],
    )
    .unwrap();
}

#[test]
fn clients_and_grants_tables() {
    let f = Fixture::new();
    with_oauth_rows(&f);
    let clients = f.ok(false, Command::OAuth(OAuthCommand::Clients));
    insta::assert_snapshot!("oauth_clients_table", clients);
    let grants = f.ok(false, Command::OAuth(OAuthCommand::Grants));
    insta::assert_snapshot!("oauth_grants_table", grants);
    let clients_json = f.json(Command::OAuth(OAuthCommand::Clients));
    insta::assert_json_snapshot!("oauth_clients_json", clients_json);
    let grants_json = f.json(Command::OAuth(OAuthCommand::Grants));
    insta::assert_json_snapshot!("oauth_grants_json", grants_json);
    for out in [
        &clients,
        &grants,
        &clients_json.to_string(),
        &grants_json.to_string(),
    ] {
        assert!(!out.contains("feedface"), "a token hash was printed");
    }
}

#[test]
fn a_database_before_v3_lists_no_oauth_rows() {
    let f = Fixture::new();
    assert_eq!(
        f.ok(false, Command::OAuth(OAuthCommand::Clients)),
        "no OAuth clients approved\n"
    );
    assert_eq!(
        f.ok(false, Command::OAuth(OAuthCommand::Grants)),
        "no OAuth grants\n"
    );
    assert_eq!(
        f.json(Command::OAuth(OAuthCommand::Grants)),
        serde_json::json!({"grants": []})
    );
}

#[test]
fn approve_and_revoke_need_the_running_gateway() {
    let f = Fixture::new();
    for command in [
        OAuthCommand::Approve {
            page: Some("abcd-2345".into()),
        },
        OAuthCommand::Revoke {
            id: "grant_1".into(),
        },
    ] {
        let (out, result) = f.run(false, Command::OAuth(command));
        let err = result.unwrap_err();
        assert!(out.is_empty(), "{out}");
        assert!(
            err.starts_with("the gateway is not running with this state dir (no admin socket at ")
                && err.ends_with("run/admin.sock); start it, then try again"),
            "{err}"
        );
    }
    // Without a page code: told to name one (no gateway to list pages from).
    let (out, result) = f.run(false, Command::OAuth(OAuthCommand::Approve { page: None }));
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        result.unwrap_err(),
        "name the consent page to approve: gatewayctl oauth approve <page code>, with the page \
         code its consent page shows (an approval code approves only that page)"
    );
}

#[test]
fn redirect_hosts_are_shown_as_the_consent_page_shows_them() {
    let f = Fixture::new();
    with_oauth_rows(&f);
    let conn = Connection::open(f.state.join("gateway.sqlite3")).unwrap();
    conn.execute(
        "INSERT INTO oauth_clients (client_id, client_name, redirect_uris, created_at_ms)
         VALUES ('client_look_alike', 'x', ?1, ?2)",
        params![
            "[\"https://chatgpt.c\u{043e}m/cb\",\"https://chatgpt.com@evil.example/cb\",\"nonsense\"]",
            T0 + 200_000
        ],
    )
    .unwrap();
    let table = f.ok(false, Command::OAuth(OAuthCommand::Clients));
    let row = table
        .lines()
        .find(|l| l.contains("client_look_alike"))
        .unwrap();
    // A Cyrillic "о" shows as punycode, userinfo is not the host, junk says so.
    assert!(
        row.contains("chatgpt.xn--cm-fmc, evil.example, (not a URL)"),
        "{row}"
    );
    assert!(
        !row.contains('\u{043e}') && !row.contains("chatgpt.com"),
        "{row}"
    );
}
