//! Red team 29 B5 through the real gateway: the connected client refreshed 4210 times in 30 s
//! with the state budget full, each refresh storing ~1.8 KiB. A grant now refreshes at most its
//! burst (10), then one per 6 s; one over that pace is refused with 429, `Retry-After` and
//! `temporarily_unavailable`, consuming and revoking nothing: the same refresh token is refused
//! the same way (never taken for a reuse) and works once the pace allows.

use serde_json::Value;

use super::*;

/// A refresh: status, `Retry-After` (seconds) and body.
async fn refresh_paced(
    gw: &GatewayProcess,
    client: &str,
    token: &str,
) -> (u16, Option<u64>, Value) {
    let resp = http()
        .post(format!("{}/oauth/token", gw.base_url()))
        .form(&[
            ("grant_type", "refresh_token"),
            ("client_id", client),
            ("refresh_token", token),
        ])
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().parse().unwrap());
    (status, retry_after, resp.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn refreshes_over_a_grants_pace_are_refused_429_and_the_token_stays_valid() {
    let gw = gateway().await;
    let client = client_id(&gw).await;
    let code = authorize(&gw, &client).await;
    let (status, tokens) = exchange(&gw, &client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    let (_, rows_before) = grants_and_tokens(&gw);
    let mut refresh_token = tokens["refresh_token"].as_str().unwrap().to_string();
    let mut access_token = tokens["access_token"].as_str().unwrap().to_string();
    let mut refreshed = 0;
    let (retry_after, refused) = loop {
        let (status, retry_after, body) = refresh_paced(&gw, &client, &refresh_token).await;
        if status != 200 {
            break (retry_after, (status, body));
        }
        refreshed += 1;
        assert!(refreshed <= 12, "no pace: {refreshed} refreshes at once");
        refresh_token = body["refresh_token"].as_str().unwrap().to_string();
        access_token = body["access_token"].as_str().unwrap().to_string();
    };
    assert!(
        (10..=11).contains(&refreshed),
        "{refreshed} refreshes before the pace"
    );
    assert_oauth_error(refused.0, &refused.1, 429, "temporarily_unavailable");
    let description = refused.1["error_description"].as_str().unwrap();
    assert!(description.contains("still valid"), "{description}");
    let retry_after = retry_after.expect("a Retry-After header");
    assert!((1..=6).contains(&retry_after), "Retry-After: {retry_after}");
    // What the refused refresh stored: nothing (two rows per refresh that went through).
    let (grants, rows) = grants_and_tokens(&gw);
    assert_eq!(
        rows,
        rows_before + 2 * refreshed,
        "a refused refresh stored rows"
    );
    // The same token again: the same refusal, not a reuse (which would revoke the grant).
    let (status, _, body) = refresh_paced(&gw, &client, &refresh_token).await;
    assert_oauth_error(status, &body, 429, "temporarily_unavailable");
    assert_eq!(
        mcp_status(&gw, &access_token).await,
        200,
        "the grant was revoked"
    );
    // Once the pace allows, the same token rotates.
    tokio::time::sleep(std::time::Duration::from_secs(retry_after)).await;
    let (status, _, body) = refresh_paced(&gw, &client, &refresh_token).await;
    assert_eq!(status, 200, "{body}");
    let access = body["access_token"].as_str().unwrap();
    assert_eq!(mcp_status(&gw, access).await, 200);
    assert_eq!(grants_and_tokens(&gw).0, grants);
}
