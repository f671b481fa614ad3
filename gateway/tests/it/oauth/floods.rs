//! Floods of anonymous OAuth traffic against the real gateway (issue 24): registrations and
//! consent pages opened by strangers between ChatGPT's registration and the owner's approval. The
//! owner's flow still completes; the flood gets 429 with `Retry-After`.

use serde_json::{Value, json};

use super::*;
use crate::support::*;

/// A refusal of the limiter: 429, `temporarily_unavailable`, a `Retry-After` of a few seconds.
async fn assert_rate_limited(resp: reqwest::Response, most_seconds: u64) {
    assert_eq!(resp.status().as_u16(), 429);
    let retry_after: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=most_seconds).contains(&retry_after), "{retry_after}");
    assert_eq!(resp.headers()["cache-control"], "no-store");
    let body: Value = resp.json().await.unwrap();
    assert_oauth_error(429, &body, 429, "temporarily_unavailable");
}

async fn register_raw(gw: &GatewayProcess, name: &str) -> reqwest::Response {
    http()
        .post(format!("{}/oauth/register", gw.base_url()))
        .json(&json!({"client_name": name, "redirect_uris": [REDIRECT]}))
        .send()
        .await
        .unwrap()
}

/// The owner's approval on the page loaded before the flood, and the token exchange: `/mcp` works.
async fn owner_completes(gw: &GatewayProcess, chatgpt: &str, consent: &Consent) {
    let code = approval_code(gw);
    let (status, location, body) = decide(gw, consent, "approve", &code, None).await;
    assert_eq!(status, 303, "{body}");
    let code = query(&location.unwrap(), "code").unwrap();
    let (status, tokens) = exchange(gw, chatgpt, &code).await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"].as_str().unwrap();
    assert_eq!(mcp_status(gw, access).await, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_registration_flood_neither_evicts_chatgpt_nor_stops_the_approval() {
    let gw = gateway().await;
    let chatgpt = client_id(&gw).await;
    let consent = open_consent(&gw, &chatgpt).await;
    // 130 anonymous registrations in a burst (the red team's flood).
    let (mut created, mut limited) = (0, 0);
    for i in 0..130 {
        let resp = register_raw(&gw, &format!("stranger {i}")).await;
        if resp.status().as_u16() == 201 {
            created += 1;
        } else {
            assert_rate_limited(resp, 10).await;
            limited += 1;
        }
    }
    // The burst less ChatGPT's own registration (a token may have come back meanwhile).
    assert!((9..=11).contains(&created), "{created} registered");
    assert_eq!(created + limited, 130);
    owner_completes(&gw, &chatgpt, &consent).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_consent_page_flood_never_pushes_out_the_owners_page() {
    let gw = gateway().await;
    let chatgpt = client_id(&gw).await;
    let mut strangers = Vec::new();
    for i in 0..8 {
        let resp = register_raw(&gw, &format!("stranger {i}")).await;
        assert_eq!(resp.status().as_u16(), 201);
        let body: Value = resp.json().await.unwrap();
        strangers.push(body["client_id"].as_str().unwrap().to_string());
    }
    let flood = async |rounds: usize| {
        let mut limited = 0;
        for _ in 0..rounds {
            for stranger in &strangers {
                let resp = http()
                    .get(authorize_url(&gw, stranger, &[]))
                    .send()
                    .await
                    .unwrap();
                if resp.status().as_u16() == 429 {
                    assert_rate_limited(resp, 10).await;
                    limited += 1;
                } else {
                    assert_eq!(resp.status().as_u16(), 200);
                }
            }
        }
        limited
    };
    // Strangers' pages before the owner's page: the owner's page still opens.
    assert!(flood(15).await > 0, "the flood was never limited");
    let consent = open_consent(&gw, &chatgpt).await;
    // And after it, before the owner runs `gatewayctl oauth approve`.
    assert!(flood(20).await > 0, "the flood was never limited");
    owner_completes(&gw, &chatgpt, &consent).await;
}
