//! The OAuth flow end to end: metadata, the full flow with rotation, reuse and revocation,
//! expiry and another resource, the auth modes, and the owner-only admin socket.

use serde_json::{Value, json};

use super::*;
use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn metadata_documents_come_from_the_public_base_only() {
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .arg("--public-base")
        .arg("https://gw.example.net")
        .spawn()
        .await
        .unwrap();
    let mut documents = serde_json::Map::new();
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
    ] {
        // Forwarded headers and a spoofed Host change nothing.
        let resp = http()
            .get(format!("{}{path}", gw.base_url()))
            .header("x-forwarded-host", "evil.example")
            .header("x-forwarded-proto", "http")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{path}");
        let doc: Value = resp.json().await.unwrap();
        assert!(!doc.to_string().contains("evil"), "{doc}");
        documents.insert(path.to_string(), doc);
    }
    assert_eq!(
        documents["/.well-known/oauth-protected-resource"],
        documents["/.well-known/oauth-protected-resource/mcp"]
    );
    insta::assert_json_snapshot!("oauth_metadata_documents", documents);

    // Browser-based clients may read what a client calls itself, never the consent page.
    for path in [
        "/oauth/register",
        "/oauth/token",
        "/.well-known/oauth-authorization-server",
    ] {
        let resp = http()
            .request(reqwest::Method::OPTIONS, format!("{}{path}", gw.base_url()))
            .header("origin", "http://localhost:6274")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 204, "{path}");
        assert_eq!(resp.headers()["access-control-allow-origin"], "*");
        assert!(
            resp.headers()
                .get("access-control-allow-credentials")
                .is_none()
        );
    }
    let (_, registered) = register(&gw, &json!({"redirect_uris": [REDIRECT]})).await;
    let resp = http()
        .post(format!("{}/oauth/register", gw.base_url()))
        .json(&json!({"redirect_uris": [REDIRECT]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["access-control-allow-origin"], "*");
    let client = registered["client_id"].as_str().unwrap();
    let resp = http()
        .get(authorize_url(&gw, client, &[]))
        .header("origin", "http://localhost:6274")
        .send()
        .await
        .unwrap();
    // (302 invalid_target: the URL names the loopback resource, this gateway's is the public one.)
    assert_eq!(resp.status().as_u16(), 302);
    assert!(resp.headers().get("access-control-allow-origin").is_none());
    let resp = http()
        .request(
            reqwest::Method::OPTIONS,
            format!("{}/oauth/authorize", gw.base_url()),
        )
        .send()
        .await
        .unwrap();
    assert!(resp.headers().get("access-control-allow-origin").is_none());

    // The 401 challenge points at the resource metadata.
    let resp = http().post(gw.url()).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    assert_eq!(
        resp.headers()["www-authenticate"],
        "Bearer resource_metadata=\"https://gw.example.net/.well-known/oauth-protected-resource/mcp\", scope=\"mcp\""
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn public_base_must_be_an_https_origin() {
    for bad in [
        "http://gw.example.net",
        "https://gw.example.net/path",
        "https://gw.example.net/?q=1",
        "ftp://gw.example.net",
        "not a url",
    ] {
        let outcome = GatewayProcess::builder(GATEWAY)
            .env("CLAUDE_BIN", tests::claude_bin())
            .arg("--public-base")
            .arg(bad)
            .run_to_exit(std::time::Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(outcome.code(), Some(2), "{bad}: {outcome:?}");
        assert!(
            outcome.stderr.contains("--public-base"),
            "{bad}: {}",
            outcome.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn full_flow_refresh_rotation_reuse_and_revocation() {
    let gw = gateway().await;
    let client = client_id(&gw).await;
    let code = authorize(&gw, &client).await;

    // Each refusal of the exchange: its error and status, nothing stored, the code still usable.
    // (parameters replaced, or removed when empty; HTTP status; OAuth error)
    type Case<'a> = (Vec<(&'a str, &'a str)>, u16, &'a str);
    let mut answers = Vec::new();
    let cases: Vec<Case> = vec![
        (vec![("client_id", "client_unknown")], 401, "invalid_client"),
        (vec![("code", "ngw_code_wrong")], 400, "invalid_grant"),
        (vec![("code_verifier", "")], 400, "invalid_request"),
        (vec![("code_verifier", "short")], 400, "invalid_request"),
        (
            vec![(
                "code_verifier",
                "x-different-verifier-of-forty-three-characters-00",
            )],
            400,
            "invalid_grant",
        ),
        (
            vec![("redirect_uri", "http://127.0.0.1:9/other")],
            400,
            "invalid_grant",
        ),
        (
            vec![("resource", "https://other.example/mcp")],
            400,
            "invalid_target",
        ),
        (vec![("scope", "admin")], 400, "invalid_scope"),
        (
            vec![("grant_type", "password")],
            400,
            "unsupported_grant_type",
        ),
    ];
    for (overrides, want_status, want_error) in cases {
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("client_id", client.as_str()),
            ("code", code.as_str()),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
        ];
        for (key, value) in &overrides {
            form.retain(|(k, _)| k != key);
            if !value.is_empty() {
                form.push((key, value));
            }
        }
        let (status, body) = token(&gw, &form).await;
        assert_oauth_error(status, &body, want_status, want_error);
        assert_eq!(
            grants_and_tokens(&gw),
            (0, 0),
            "{overrides:?} stored something"
        );
        answers
            .push(json!({"changed": format!("{overrides:?}"), "status": status, "answer": body}));
    }
    insta::assert_json_snapshot!("token_exchange_refusals", answers);
    // A parameter given twice is refused.
    let (status, body) = token(
        &gw,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client),
            ("code", &code),
            ("code", &code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
        ],
    )
    .await;
    assert_oauth_error(status, &body, 400, "invalid_request");

    let (status, tokens) = exchange(&gw, &client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 3600);
    assert_eq!(tokens["scope"], "mcp");
    let access = tokens["access_token"].as_str().unwrap().to_string();
    let refresh_1 = tokens["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(grants_and_tokens(&gw), (1, 2));
    // Only hashes are stored.
    let db = state_db(&gw);
    let stored: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM oauth_tokens WHERE token_hash IN (?1, ?2)",
            [&access, &refresh_1],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stored, 0);

    // The access token works with a real MCP client, over the header only.
    let client_mcp = tests::McpClient::connect(&gw.url(), &access).await.unwrap();
    let listed = client_mcp.list_tools().await.unwrap();
    assert_eq!(listed["tools"].as_array().unwrap().len(), 6);
    assert_eq!(
        mcp_status_url(&format!("{}/mcp/{access}", gw.base_url())).await,
        401,
        "an OAuth token is never a capability URL"
    );

    // The code is single-use: presented again it is refused and its grant revoked.
    // (Checked on a second authorization below, so this grant stays for the refresh checks.)

    // Refresh rotates; the spent refresh token presented again revokes the whole grant.
    let (status, second) = refresh(&gw, &client, &refresh_1).await;
    assert_eq!(status, 200, "{second}");
    let access_2 = second["access_token"].as_str().unwrap().to_string();
    let refresh_2 = second["refresh_token"].as_str().unwrap().to_string();
    assert_ne!(refresh_2, refresh_1);
    assert_eq!(mcp_status(&gw, &access_2).await, 200);
    let (status, body) = refresh(&gw, &client, "ngw_rt_unknown").await;
    assert_oauth_error(status, &body, 400, "invalid_grant");
    let (status, body) = refresh(&gw, "client_other", &refresh_2).await;
    assert_oauth_error(status, &body, 401, "invalid_client");
    // Those refusals rotated nothing: only the first refresh token is spent.
    assert_eq!(
        count(
            &gw,
            "SELECT COUNT(*) FROM oauth_tokens WHERE rotated_at_ms IS NOT NULL"
        ),
        1
    );
    let (status, body) = refresh(&gw, &client, &refresh_1).await;
    assert_oauth_error(status, &body, 400, "invalid_grant");
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("whole grant is revoked")
    );
    assert_eq!(mcp_status(&gw, &access).await, 401);
    assert_eq!(mcp_status(&gw, &access_2).await, 401);
    let (status, body) = refresh(&gw, &client, &refresh_2).await;
    assert_oauth_error(status, &body, 400, "invalid_grant");
    assert_eq!(
        count(
            &gw,
            "SELECT COUNT(*) FROM oauth_grants WHERE revoked_reason = 'refresh token reused'"
        ),
        1
    );

    // A second authorization: its code used twice revokes what it issued.
    let code = authorize(&gw, &client).await;
    let (status, tokens) = exchange(&gw, &client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    let access_3 = tokens["access_token"].as_str().unwrap().to_string();
    assert_eq!(mcp_status(&gw, &access_3).await, 200);
    let (status, body) = exchange(&gw, &client, &code).await;
    assert_oauth_error(status, &body, 400, "invalid_grant");
    assert_eq!(mcp_status(&gw, &access_3).await, 401);

    // A third: the owner revokes the grant; the next request is refused, its refresh too.
    let code = authorize(&gw, &client).await;
    let (_, tokens) = exchange(&gw, &client, &code).await;
    let access_4 = tokens["access_token"].as_str().unwrap().to_string();
    let refresh_4 = tokens["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(mcp_status(&gw, &access_4).await, 200);
    let grant: String = state_db(&gw)
        .query_row(
            "SELECT grant_id FROM oauth_grants WHERE revoked_at_ms IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let listed = gatewayctl_json(&gw, &["oauth", "grants"]);
    let active: Vec<&Value> = listed["grants"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["revoked_at"].is_null())
        .collect();
    assert_eq!(active.len(), 1, "{listed}");
    assert_eq!(active[0]["grant_id"], grant.as_str());
    let answer = gatewayctl_json(&gw, &["oauth", "revoke", &grant]);
    assert_eq!(answer, json!({"ok": true, "revoked": "grant", "id": grant}));
    assert_eq!(mcp_status(&gw, &access_4).await, 401);
    let (status, body) = refresh(&gw, &client, &refresh_4).await;
    assert_oauth_error(status, &body, 400, "invalid_grant");
    let answer = admin(&gw, json!({"op": "revoke", "id": "grant_nope"}));
    assert_eq!(answer["error"], "not_found");

    // Revoking the client ends its registration: authorize and token both refuse it.
    let code = authorize(&gw, &client).await;
    let answer = gatewayctl_json(&gw, &["oauth", "revoke", &client]);
    assert_eq!(answer["revoked"], "client");
    let listed = gatewayctl_json(&gw, &["oauth", "clients"]);
    assert_eq!(listed["clients"][0]["revoked"], true, "{listed}");
    assert_eq!(listed["clients"][0]["active_grants"], 0, "{listed}");
    let (status, body) = exchange(&gw, &client, &code).await;
    assert_oauth_error(status, &body, 401, "invalid_client");
    let resp = http()
        .get(authorize_url(&gw, &client, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    assert!(resp.headers().get("location").is_none());

    // The static token still works beside OAuth (--auth both, the default).
    assert_eq!(mcp_status(&gw, gw.token()).await, 200);
    assert_no_secret_in_log(&gw, &[&access, &refresh_1, &refresh_2, &code]);
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_tokens_and_tokens_for_another_resource_are_refused() {
    let state = tempfile::tempdir().unwrap();
    let spawn = |base: Option<&str>| {
        let mut builder = GatewayProcess::builder(GATEWAY)
            .env("CLAUDE_BIN", tests::claude_bin())
            .env("CLAUDE_TOOLS_OAUTH_ACCESS_TOKEN_TTL_SECONDS", "2")
            .state_dir(state.path());
        if let Some(base) = base {
            builder = builder.arg("--public-base").arg(base);
        }
        builder.spawn()
    };
    // A grant made while the gateway's public address was another one.
    let mut first = spawn(Some("http://localhost:1")).await.unwrap();
    let client = client_id(&first).await;
    let resp = http()
        .get(authorize_url(&first, &client, &[]).replace(
            &format!(
                    "resource={}",
                    url::form_urlencoded::byte_serialize(
                        format!("{}/mcp", first.base_url()).as_bytes()
                    )
                    .collect::<String>()
                ),
            "resource=http%3A%2F%2Flocalhost%3A1%2Fmcp",
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let cookie = resp.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let html = resp.text().await.unwrap();
    let consent = Consent {
        page: page_code(&html),
        request_id: hidden(&html, "request_id"),
        csrf: hidden(&html, "csrf"),
        cookie,
        html,
    };
    let code = approval_code(&first, &consent);
    let (status, location, body) = decide(&first, &consent, "approve", &code, None).await;
    assert_eq!(status, 303, "{body}");
    let code = query(&location.unwrap(), "code").unwrap();
    let (status, tokens) = exchange(&first, &client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    let old_access = tokens["access_token"].as_str().unwrap().to_string();
    let old_refresh = tokens["refresh_token"].as_str().unwrap().to_string();
    assert_eq!(tokens["expires_in"], 2);
    assert_eq!(mcp_status(&first, &old_access).await, 200);
    first.kill().await;

    // The same state under this gateway's own address: the old audience is another resource.
    let second = spawn(None).await.unwrap();
    assert_eq!(mcp_status(&second, &old_access).await, 401);
    let (status, body) = refresh(&second, &client, &old_refresh).await;
    assert_oauth_error(status, &body, 400, "invalid_target");
    assert_eq!(
        count(
            &second,
            "SELECT COUNT(*) FROM oauth_grants WHERE refreshed_at_ms IS NOT NULL"
        ),
        0
    );

    // A token of this resource expires after its lifetime.
    let code = authorize(&second, &client).await;
    let (_, tokens) = exchange(&second, &client, &code).await;
    let access = tokens["access_token"].as_str().unwrap().to_string();
    assert_eq!(mcp_status(&second, &access).await, 200);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let resp = http()
        .post(second.url())
        .header("authorization", format!("Bearer {access}"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 401);
    assert!(
        resp.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .ends_with("error=\"invalid_token\""),
    );
    // Its refresh token still gets a new one.
    let (status, body) = refresh(&second, &client, tokens["refresh_token"].as_str().unwrap()).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_modes_turn_the_static_token_or_oauth_off() {
    // --auth oauth: the static token and the capability URL are refused.
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .arg("--auth")
        .arg("oauth")
        .spawn()
        .await
        .unwrap();
    assert_eq!(mcp_status(&gw, gw.token()).await, 401);
    assert_eq!(mcp_status_url(&gw.capability_url()).await, 401);
    let client = client_id(&gw).await;
    let code = authorize(&gw, &client).await;
    let (_, tokens) = exchange(&gw, &client, &code).await;
    assert_eq!(
        mcp_status(&gw, tokens["access_token"].as_str().unwrap()).await,
        200
    );
    assert_eq!(admin(&gw, json!({"op": "status"}))["auth"], "oauth");
    let check = doctor_auth_check(&gw);
    assert_eq!(check["status"], "WARN", "{check}");
    assert_eq!(
        check["detail"],
        format!(
            "oauth: OAuth issuer {}; the static token and the capability URL are refused",
            gw.base_url()
        )
    );
    assert!(
        check["fix"]
            .as_str()
            .unwrap()
            .contains("--public-base https://")
    );
    drop(gw);

    // --auth token: no OAuth endpoints, the bare challenge, approve refused.
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("CLAUDE_TOOLS_GATEWAY_AUTH", "token")
        .spawn()
        .await
        .unwrap();
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-authorization-server",
    ] {
        let resp = http()
            .get(format!("{}{path}", gw.base_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 404, "{path}");
    }
    let resp = http().post(gw.url()).send().await.unwrap();
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    assert_eq!(mcp_status(&gw, gw.token()).await, 200);
    assert_eq!(mcp_status_url(&gw.capability_url()).await, 200);
    let answer = admin(&gw, json!({"op": "approve"}));
    assert_eq!(answer["error"], "oauth_off");
    assert_eq!(admin(&gw, json!({"op": "status"}))["auth"], "token");
    let check = doctor_auth_check(&gw);
    assert_eq!(check["status"], "OK", "{check}");
    assert_eq!(
        check["detail"],
        "token: the static token and the capability URL only; OAuth is off"
    );
    // A bad mode does not start.
    let outcome = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .arg("--auth")
        .arg("none")
        .run_to_exit(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(outcome.code(), Some(2));
}

/// The `auth mode` check of `gatewayctl doctor --json` (other checks may fail on a test host).
#[tokio::test(flavor = "multi_thread")]
async fn admin_socket_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let gw = gateway().await;
    let path = gw.state_dir().join("run/admin.sock");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(gw.state_dir().join("run"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);
    let answer = admin(&gw, json!({"op": "drop_tables"}));
    assert_eq!(answer["answer"], "refused");
    assert_eq!(answer["error"], "invalid_request");
    // A gatewayctl of another protocol version is told so, not misread.
    for line in [
        r#"{"op": "status"}"#,
        r#"{"version": 99, "request": {"op": "status"}}"#,
    ] {
        let answer = admin_line(&gw, line);
        assert_eq!(answer["error"], "version_mismatch", "{answer}");
        assert!(
            answer["message"]
                .as_str()
                .unwrap()
                .contains("use the gatewayctl built with this gateway"),
            "{answer}"
        );
    }

    // A second gateway on the same state dir does not take the socket over.
    let outcome = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .state_dir(gw.state_dir())
        .run_to_exit(std::time::Duration::from_secs(30))
        .await
        .unwrap();
    assert_ne!(outcome.code(), Some(0));
    assert!(
        outcome
            .stderr
            .contains("another gateway is serving this state dir"),
        "{}",
        outcome.stderr
    );
    assert_eq!(admin(&gw, json!({"op": "status"}))["auth"], "both");
}

/// `doctor` asks the running gateway over the admin socket which auto-run classes its sessions may
/// write and whether strict hooks are on: the gateway's own settings, not this shell's
/// environment, decide the lines.
#[tokio::test(flavor = "multi_thread")]
async fn doctor_shows_the_running_gateways_autorun_opt_in() {
    let gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("CLAUDE_TOOLS_ALLOW_AUTORUN_WRITES", "editor_config")
        .env("CLAUDE_TOOLS_STRICT_HOOKS", "1")
        .spawn()
        .await
        .unwrap();
    let status = admin(&gw, json!({"op": "status"}));
    assert_eq!(status["answer"], "status", "{status}");
    assert_eq!(status["autorun_allowed"], json!(["editor_config"]));
    let editor = doctor_check(&gw, "auto-run: editor_config");
    assert_eq!(editor["status"], "WARN", "{editor}");
    assert!(
        editor["detail"]
            .as_str()
            .unwrap()
            .ends_with("(per the running gateway)"),
        "{editor}"
    );
    let hooks = doctor_check(&gw, "auto-run: agent_config");
    assert_eq!(hooks["status"], "OK", "{hooks}");
    assert_eq!(status["strict_hooks"], true, "{status}");
    let strict = doctor_check(&gw, "auto-run: strict hooks");
    assert!(
        strict["detail"]
            .as_str()
            .unwrap()
            .starts_with("on (per the running gateway): refused to writes: the definitions"),
        "{strict}"
    );
}

/// Issue 24 item 1: registration stores nothing now, but a client an older gateway stored (a
/// schema 3 row, `client_…` id) keeps working after the upgrade: authorized, approved, tokens.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_stored_by_an_older_gateway_keeps_working() {
    let gw = gateway().await;
    let legacy = "client_5b1c0f7e2a9d4c3b8e6f1a0d2c4b6a8e";
    rusqlite::Connection::open(gw.state_dir().join("gateway.sqlite3"))
        .unwrap()
        .execute(
            "INSERT INTO oauth_clients (client_id, client_name, redirect_uris, created_at_ms)
             VALUES (?1, 'Old ChatGPT', ?2, 1)",
            rusqlite::params![legacy, json!([REDIRECT]).to_string()],
        )
        .unwrap();
    let consent = open_consent(&gw, legacy).await;
    assert!(consent.html.contains("Old ChatGPT"));
    let code = approval_code(&gw, &consent);
    let (status, location, body) = decide(&gw, &consent, "approve", &code, None).await;
    assert_eq!(status, 303, "{body}");
    let code = query(&location.unwrap(), "code").unwrap();
    let (status, tokens) = exchange(&gw, legacy, &code).await;
    assert_eq!(status, 200, "{tokens}");
    assert_eq!(
        mcp_status(&gw, tokens["access_token"].as_str().unwrap()).await,
        200
    );
    // Its row is the one it had: the approval neither copies nor changes it.
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_clients"), 1);
    let answer = gatewayctl_json(&gw, &["oauth", "revoke", legacy]);
    assert_eq!(answer["revoked"], "client");
    let (status, body) = exchange(&gw, legacy, &code).await;
    assert_oauth_error(status, &body, 401, "invalid_client");
}
