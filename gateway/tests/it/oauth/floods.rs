//! Floods of anonymous OAuth traffic against the real gateway (issue 24): registrations and
//! consent pages opened by strangers before, during and after ChatGPT's registration and the
//! owner's approval. Registration stores and counts nothing (issue 24 item 1), so no number of
//! registrations refuses ChatGPT's; consent pages are limited per client and by a cap that
//! refuses, never evicts, so the owner's waiting page survives, and the owner's flow completes.

use std::time::{Duration, Instant};

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

/// A stranger's registration: its client id (it must succeed: nothing limits registration).
async fn stranger(gw: &GatewayProcess, i: usize) -> String {
    let resp = register_raw(gw, &format!("stranger {i}")).await;
    assert_eq!(resp.status().as_u16(), 201);
    let body: Value = resp.json().await.unwrap();
    body["client_id"].as_str().unwrap().to_string()
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
    // 130 anonymous registrations in a burst (the red team's flood): all answered, none stored.
    for i in 0..130 {
        stranger(&gw, i).await;
    }
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_clients"), 0);
    // What the owner sees: no client approved yet, and ChatGPT's page waiting.
    let listed = gatewayctl_json(&gw, &["oauth", "clients"]);
    assert_eq!(listed["clients"], json!([]), "{listed}");
    let pages = listed["consent_pages"].as_array().unwrap();
    assert_eq!(pages.len(), 1, "{listed}");
    assert_eq!(pages[0]["client_id"], chatgpt.as_str());
    assert_eq!(pages[0]["client_name"], "Test client");
    assert_eq!(pages[0]["redirect_host"], "127.0.0.1");
    let text = gatewayctl_text(&gw, &["oauth", "clients"]).unwrap();
    assert!(
        text.starts_with("no OAuth clients approved\n\nconsent pages waiting for")
            && text.contains("Test client"),
        "{text}"
    );
    owner_completes(&gw, &chatgpt, &consent).await;
    // The owner's approval wrote ChatGPT's row, and only that one.
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_clients"), 1);
    assert_eq!(
        count_with(
            &gw,
            "SELECT COUNT(*) FROM oauth_clients WHERE client_id = ?1",
            &chatgpt
        ),
        1
    );
}

/// The stranger of outside red team O1: one registration every 10 s kept the old global bucket
/// empty. Here the stranger spends the old burst and then registers at that rate and a hundred
/// times above it; each of ChatGPT's registrations in between succeeds at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_stranger_at_the_old_limits_rate_or_far_above_never_refuses_chatgpt() {
    let gw = gateway().await;
    for i in 0..10 {
        stranger(&gw, i).await;
    }
    for (round, pause) in [Duration::from_secs(10), Duration::from_millis(100)]
        .into_iter()
        .enumerate()
    {
        for i in 0..3 {
            stranger(&gw, 100 * round + i).await;
            let (status, answer) = register(
                &gw,
                &json!({"client_name": "ChatGPT", "redirect_uris": [REDIRECT]}),
            )
            .await;
            assert_eq!(status, 201, "{answer}");
            tokio::time::sleep(pause / 10).await;
        }
    }
    let chatgpt = client_id(&gw).await;
    let consent = open_consent(&gw, &chatgpt).await;
    owner_completes(&gw, &chatgpt, &consent).await;
}

/// Issue 24 item 1's measure: N = 500 registrations as fast as 8 connections send them, ChatGPT
/// registering 20 times in the middle of it, then the owner's approval and ChatGPT's tokens. The
/// owner's success rate and the flood's throughput are printed (`--nocapture`).
#[tokio::test(flavor = "multi_thread")]
async fn chatgpt_registers_in_the_middle_of_a_flood_of_500_and_gets_tokens() {
    const FLOOD: usize = 500;
    const WORKERS: usize = 8;
    let gw = std::sync::Arc::new(gateway().await);
    let started = Instant::now();
    let mut flood = tokio::task::JoinSet::new();
    for worker in 0..WORKERS {
        let gw = gw.clone();
        flood.spawn(async move {
            let mut statuses = Vec::new();
            for i in (worker..FLOOD).step_by(WORKERS) {
                statuses.push(register_raw(&gw, &format!("stranger {i}")).await.status());
            }
            statuses
        });
    }
    // ChatGPT's registrations while the flood runs.
    let mut chatgpt_ids = Vec::new();
    let mut chatgpt_refused = 0;
    for _ in 0..20 {
        let (status, answer) = register(
            &gw,
            &json!({"client_name": "ChatGPT", "redirect_uris": [REDIRECT]}),
        )
        .await;
        match status {
            201 => chatgpt_ids.push(answer["client_id"].as_str().unwrap().to_string()),
            _ => chatgpt_refused += 1,
        }
    }
    let during = flood.len();
    let mut created = 0;
    while let Some(statuses) = flood.join_next().await {
        created += statuses
            .unwrap()
            .iter()
            .filter(|s| s.as_u16() == 201)
            .count();
    }
    let elapsed = started.elapsed();
    assert!(during > 0, "the flood was over before ChatGPT registered");
    eprintln!(
        "registration flood: {created}/{FLOOD} strangers' registrations answered 201 in {:.2} s \
         ({:.0}/s); ChatGPT: {}/20 registrations succeeded during the flood",
        elapsed.as_secs_f64(),
        FLOOD as f64 / elapsed.as_secs_f64(),
        chatgpt_ids.len()
    );
    assert_eq!((created, chatgpt_refused), (FLOOD, 0));
    // The last of ChatGPT's registrations is the one it uses: approved, tokens issued.
    let chatgpt = chatgpt_ids.last().unwrap();
    let consent = open_consent(&gw, chatgpt).await;
    owner_completes(&gw, chatgpt, &consent).await;
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_clients"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_consent_page_flood_never_pushes_out_the_owners_page() {
    let gw = gateway().await;
    let chatgpt = client_id(&gw).await;
    let mut strangers = Vec::new();
    for i in 0..8 {
        strangers.push(stranger(&gw, i).await);
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

/// Client ids are free to mint, so a stranger opens pages under hundreds of them, past the cap
/// of pages of clients without a row: the page ChatGPT opened before stays and is approved; a
/// new client's page is refused with 429 while the cap is full (nothing is pushed out), and a
/// client the owner approved before (a reconnect) still opens its page.
#[tokio::test(flavor = "multi_thread")]
async fn pages_under_hundreds_of_minted_ids_never_push_out_the_owners_page() {
    let gw = gateway().await;
    // ChatGPT connected once already (its row exists), then a new connection starts.
    let approved = client_id(&gw).await;
    owner_completes(&gw, &approved, &open_consent(&gw, &approved).await).await;
    let chatgpt = client_id(&gw).await;
    let consent = open_consent(&gw, &chatgpt).await;
    let mut opened = 0;
    let mut refused = 0;
    let mut i = 0;
    // 10 pages each under 110 minted ids: more than the 1000 the cap keeps.
    while i < 110 {
        let id = stranger(&gw, i).await;
        for _ in 0..10 {
            let resp = http()
                .get(authorize_url(&gw, &id, &[]))
                .send()
                .await
                .unwrap();
            if resp.status().as_u16() == 429 {
                assert_rate_limited(resp, 600).await;
                refused += 1;
            } else {
                assert_eq!(resp.status().as_u16(), 200);
                opened += 1;
            }
        }
        i += 1;
    }
    assert_eq!(opened, 999, "the cap less the owner's page");
    assert_eq!(refused, 1100 - 999);
    // The approved client reconnects in the middle of the flood: its page opens.
    let reconnect = open_consent(&gw, &approved).await;
    // Both of the owner's pages are approved with one code, and tokens issued.
    owner_completes(&gw, &chatgpt, &consent).await;
    owner_completes(&gw, &approved, &reconnect).await;
}
