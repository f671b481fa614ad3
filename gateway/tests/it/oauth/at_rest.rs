//! Issue 27 against the real gateway: with it stopped, a database writer (no server key) undoes
//! the owner's `gatewayctl oauth revoke` and a reuse detection's revocation, makes every spent
//! refresh token unspent and pushes every token's expiry later. After the restart the revoked grants' refresh tokens get `invalid_grant`
//! (the chained revocations decide), the expired access token 401 (the expiry the token carries
//! decides), a spent refresh token made unspent is a reuse, an untouched grant keeps working,
//! and `gatewayctl verify` passes.

use serde_json::{Value, json};

use super::*;
use crate::support::*;

/// A port free now, so a restarted gateway keeps the same resource (its audience is its address).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread")]
async fn revocations_and_expiries_undone_at_rest_stay_in_force_after_a_restart() {
    let mut gw = GatewayProcess::builder(GATEWAY)
        .env("CLAUDE_BIN", tests::claude_bin())
        .env("CLAUDE_TOOLS_OAUTH_ACCESS_TOKEN_TTL_SECONDS", "2")
        .listen(format!("127.0.0.1:{}", free_port()))
        .spawn()
        .await
        .unwrap();
    let client = client_id(&gw).await;
    let grant_of = |gw: &GatewayProcess| -> String {
        state_db(gw)
            .query_row(
                "SELECT grant_id FROM oauth_grants ORDER BY rowid DESC LIMIT 1",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    let text = |v: &Value, k: &str| v[k].as_str().unwrap().to_string();

    // Grant A: revoked by the owner.
    let code = authorize(&gw, &client).await;
    let (status, a) = exchange(&gw, &client, &code).await;
    assert_eq!(status, 200, "{a}");
    let grant_a = grant_of(&gw);
    let answer = gatewayctl_json(&gw, &["oauth", "revoke", &grant_a]);
    assert_eq!(
        answer,
        json!({"ok": true, "revoked": "grant", "id": grant_a})
    );
    // Grant B: revoked by the gateway when a spent refresh token came back.
    let code = authorize(&gw, &client).await;
    let (_, b) = exchange(&gw, &client, &code).await;
    let (status, b2) = refresh(&gw, &client, &text(&b, "refresh_token")).await;
    assert_eq!(status, 200, "{b2}");
    let (status, body) = refresh(&gw, &client, &text(&b, "refresh_token")).await;
    assert_oauth_error(status, &body, 400, "invalid_grant");
    // Grant D: refreshed once, its first refresh token spent.
    let code = authorize(&gw, &client).await;
    let (_, d) = exchange(&gw, &client, &code).await;
    let (status, d2) = refresh(&gw, &client, &text(&d, "refresh_token")).await;
    assert_eq!(status, 200, "{d2}");
    // Grant C: nobody revokes it.
    let code = authorize(&gw, &client).await;
    let (_, c) = exchange(&gw, &client, &code).await;
    assert_eq!(mcp_status(&gw, &text(&c, "access_token")).await, 200);
    let revoked_events = "SELECT COUNT(*) FROM events WHERE kind = 'oauth_revoked'";
    assert_eq!(count(&gw, revoked_events), 2);

    gw.kill().await;
    {
        let db = rusqlite::Connection::open(gw.state_dir().join("gateway.sqlite3")).unwrap();
        db.execute_batch(
            "UPDATE oauth_grants SET revoked_at_ms = NULL, revoked_reason = NULL;
             UPDATE oauth_tokens SET rotated_at_ms = NULL, expires_at_ms = 9000000000000;",
        )
        .unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    gw.start().await.unwrap();

    for (refresh_token, what) in [
        (text(&a, "refresh_token"), "revoked by the owner"),
        (text(&b, "refresh_token"), "reused"),
        (text(&b2, "refresh_token"), "rotated from a reused one"),
    ] {
        let (status, body) = refresh(&gw, &client, &refresh_token).await;
        assert_oauth_error(status, &body, 400, "invalid_grant");
        assert_eq!(
            body["error_description"],
            "the grant of this refresh token was revoked: authorize again",
            "{what}: {body}"
        );
    }
    for access in [&a, &b2, &c] {
        assert_eq!(mcp_status(&gw, &text(access, "access_token")).await, 401);
    }
    // The grant nobody revoked refreshes and its new token is served.
    let (status, c2) = refresh(&gw, &client, &text(&c, "refresh_token")).await;
    assert_eq!(status, 200, "{c2}");
    assert_eq!(mcp_status(&gw, &text(&c2, "access_token")).await, 200);
    assert_eq!(count(&gw, revoked_events), 2, "nothing chained twice");
    // The owner's listing shows what the gateway enforces, not the edited columns.
    let listed = gatewayctl_json(&gw, &["oauth", "grants"]);
    let revoked_at = |id: &str| {
        let grants = listed["grants"].as_array().unwrap();
        grants.iter().find(|g| g["grant_id"] == id).unwrap()["revoked_at"].clone()
    };
    assert!(!revoked_at(&grant_a).is_null(), "{listed}");
    // D's spent refresh token, made unspent at rest, is still a reuse: the grant is revoked.
    let (status, body) = refresh(&gw, &client, &text(&d, "refresh_token")).await;
    assert_oauth_error(status, &body, 400, "invalid_grant");
    assert_eq!(
        body["error_description"],
        "the refresh token was already used; the whole grant is revoked: authorize again",
        "{body}"
    );
    let (status, body) = refresh(&gw, &client, &text(&d2, "refresh_token")).await;
    assert_oauth_error(status, &body, 400, "invalid_grant");
    let verify = gatewayctl_json(&gw, &["verify"]);
    assert_eq!(verify["ok"], true, "{verify}");
}
