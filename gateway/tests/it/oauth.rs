//! OAuth 2.1 for the connector through the real gateway: the discovery documents, registration,
//! the consent step with the owner's approval code, the token endpoint with PKCE and refresh
//! rotation, tokens on `/mcp`, revocation, the auth modes, and every refusal of the issue's "bad
//! input" list with its OAuth error, HTTP status and nothing half-stored.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;

use crate::support::*;

const VERIFIER: &str = "a-verifier-of-forty-three-or-more-characters_0123456789";
const REDIRECT: &str = "http://127.0.0.1:9/callback";

fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// One request on the owner's admin socket.
fn admin(gw: &GatewayProcess, request: Value) -> Value {
    let mut stream = UnixStream::connect(gw.state_dir().join("run/admin.sock")).unwrap();
    writeln!(stream, "{request}").unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

/// A fresh approval code, the way the owner gets one: `gatewayctl oauth approve`.
fn approval_code(gw: &GatewayProcess) -> String {
    let answer = gatewayctl_json(gw, &["oauth", "approve"]);
    assert_eq!(answer["ok"], true, "{answer}");
    answer["approval_code"].as_str().unwrap().to_string()
}

async fn register(gw: &GatewayProcess, body: &Value) -> (u16, Value) {
    let resp = http()
        .post(format!("{}/oauth/register", gw.base_url()))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

async fn client_id(gw: &GatewayProcess) -> String {
    let (status, client) = register(
        gw,
        &json!({"client_name": "Test client", "redirect_uris": [REDIRECT]}),
    )
    .await;
    assert_eq!(status, 201, "{client}");
    client["client_id"].as_str().unwrap().to_string()
}

/// A consent page loaded: its form fields and the CSRF cookie the browser would keep.
struct Consent {
    request_id: String,
    csrf: String,
    cookie: String,
    html: String,
}

fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} in {html}"))
        + marker.len();
    html[start..].split('"').next().unwrap().to_string()
}

fn authorize_url(gw: &GatewayProcess, client_id: &str, extra: &[(&str, &str)]) -> String {
    let mut url = url::Url::parse(&format!("{}/oauth/authorize", gw.base_url())).unwrap();
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", REDIRECT)
            .append_pair("code_challenge", &challenge(VERIFIER))
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", "st-1")
            .append_pair("resource", &format!("{}/mcp", gw.base_url()));
        for (k, v) in extra {
            q.append_pair(k, v);
        }
    }
    url.to_string()
}

async fn open_consent(gw: &GatewayProcess, client_id: &str) -> Consent {
    let resp = http()
        .get(authorize_url(gw, client_id, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let headers = resp.headers().clone();
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(csp.starts_with("default-src 'none'"), "{csp}");
    assert_eq!(headers["x-frame-options"], "DENY");
    let cookie = headers["set-cookie"].to_str().unwrap();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_string();
    let html = resp.text().await.unwrap();
    Consent {
        request_id: hidden(&html, "request_id"),
        csrf: hidden(&html, "csrf"),
        cookie,
        html,
    }
}

/// POST the consent form; returns (status, Location, body).
async fn decide(
    gw: &GatewayProcess,
    consent: &Consent,
    decision: &str,
    code: &str,
    origin: Option<&str>,
) -> (u16, Option<url::Url>, String) {
    let mut req = http()
        .post(format!("{}/oauth/authorize", gw.base_url()))
        .header("cookie", &consent.cookie)
        .form(&[
            ("request_id", consent.request_id.as_str()),
            ("csrf", consent.csrf.as_str()),
            ("decision", decision),
            ("approval_code", code),
        ]);
    if let Some(origin) = origin {
        req = req.header("origin", origin);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let location = resp
        .headers()
        .get("location")
        .map(|l| url::Url::parse(l.to_str().unwrap()).unwrap());
    (status, location, resp.text().await.unwrap())
}

fn query(url: &url::Url, key: &str) -> Option<String> {
    url.query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.to_string())
}

/// Register, open the consent page, approve with a fresh approval code: the authorization code.
async fn authorize(gw: &GatewayProcess, client_id: &str) -> String {
    let consent = open_consent(gw, client_id).await;
    let code = approval_code(gw);
    let (status, location, body) = decide(gw, &consent, "approve", &code, None).await;
    assert_eq!(status, 303, "{body}");
    let location = location.unwrap();
    assert!(location.as_str().starts_with(REDIRECT), "{location}");
    assert_eq!(query(&location, "state").as_deref(), Some("st-1"));
    assert_eq!(query(&location, "iss"), Some(gw.base_url()));
    query(&location, "code").unwrap()
}

async fn token(gw: &GatewayProcess, form: &[(&str, &str)]) -> (u16, Value) {
    let resp = http()
        .post(format!("{}/oauth/token", gw.base_url()))
        .form(form)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    assert_eq!(resp.headers()["cache-control"], "no-store");
    (status, resp.json().await.unwrap())
}

async fn exchange(gw: &GatewayProcess, client_id: &str, code: &str) -> (u16, Value) {
    token(
        gw,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", client_id),
            ("code", code),
            ("redirect_uri", REDIRECT),
            ("code_verifier", VERIFIER),
        ],
    )
    .await
}

async fn refresh(gw: &GatewayProcess, client_id: &str, refresh_token: &str) -> (u16, Value) {
    token(
        gw,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", client_id),
            ("refresh_token", refresh_token),
        ],
    )
    .await
}

fn assert_oauth_error(status: u16, body: &Value, want_status: u16, want_error: &str) {
    assert_eq!(status, want_status, "{body}");
    assert_eq!(body["error"], want_error, "{body}");
    assert!(
        body["error_description"]
            .as_str()
            .is_some_and(|d| !d.is_empty()),
        "{body}"
    );
}

/// `initialize` on `/mcp` with this bearer token: the HTTP status.
async fn mcp_status(gw: &GatewayProcess, token: &str) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "oauth-test", "version": "1"}}});
    http()
        .post(gw.url())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn grants_and_tokens(gw: &GatewayProcess) -> (i64, i64) {
    (
        count(gw, "SELECT COUNT(*) FROM oauth_grants"),
        count(gw, "SELECT COUNT(*) FROM oauth_tokens"),
    )
}

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
    }
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

async fn mcp_status_url(url: &str) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "oauth-test", "version": "1"}}});
    http()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn assert_no_secret_in_log(gw: &GatewayProcess, secrets: &[&str]) {
    let log = format!("{}{}", gw.stderr_log(), gw.stdout_log());
    for secret in secrets {
        assert!(!log.contains(secret), "a secret is in the gateway's log");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn approval_codes_are_single_use_short_and_attempt_limited() {
    let gw = gateway().await;
    let client = client_id(&gw).await;
    let consent = open_consent(&gw, &client).await;
    assert!(consent.html.contains("Test client"));
    assert!(consent.html.contains("127.0.0.1"));

    // No code issued yet: wrong. Then a wrong code: the page again with attempts left.
    let (status, location, body) = decide(&gw, &consent, "approve", "", None).await;
    assert_eq!(status, 400);
    assert!(location.is_none());
    assert!(body.contains("4 attempts left"), "{body}");
    let code = approval_code(&gw);
    assert!(code.len() == 9 && code.as_bytes()[4] == b'-', "{code}");
    // A code the owner just asked for restores the attempt budget.
    let (status, _, body) = decide(&gw, &consent, "approve", "AAAA-AAAA", None).await;
    assert_eq!(status, 400);
    assert!(body.contains("4 attempts left"), "{body}");
    let (status, _, body) = decide(&gw, &consent, "approve", "AAAA-AAAB", None).await;
    assert_eq!(status, 400);
    assert!(body.contains("3 attempts left"), "{body}");
    // Typed in lower case without the dash, the right code works, once.
    let typed = code.replace('-', "").to_lowercase();
    let (status, location, _) = decide(&gw, &consent, "approve", &typed, None).await;
    assert_eq!(status, 303);
    assert!(query(&location.unwrap(), "code").is_some());
    let consent = open_consent(&gw, &client).await;
    let (status, _, body) = decide(&gw, &consent, "approve", &code, None).await;
    assert_eq!(status, 400, "a spent approval code worked again");
    assert!(body.contains("not valid"), "{body}");

    // A fresh code restores the budget; five wrong attempts void every outstanding code.
    let live = approval_code(&gw);
    for left in (1..=4).rev() {
        let (status, _, body) = decide(&gw, &consent, "approve", "WRONG-CODE", None).await;
        assert_eq!(status, 400);
        let plural = if left == 1 { "" } else { "s" };
        assert!(
            body.contains(&format!("{left} attempt{plural} left")),
            "{body}"
        );
    }
    let (status, _, body) = decide(&gw, &consent, "approve", "WRONG-CODE", None).await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("Too many wrong approval codes"), "{body}");
    // The request is gone, and the code that was live is void too.
    let (status, _, body) = decide(&gw, &consent, "approve", &live, None).await;
    assert_eq!(status, 400);
    assert!(body.contains("unknown or expired"), "{body}");
    let consent = open_consent(&gw, &client).await;
    let (status, _, _) = decide(&gw, &consent, "approve", &live, None).await;
    assert_eq!(status, 429, "a voided code must not work");
    // Only a new code from the owner works again.
    let consent = open_consent(&gw, &client).await;
    let fresh = approval_code(&gw);
    let (status, _, _) = decide(&gw, &consent, "approve", &fresh, None).await;
    assert_eq!(status, 303);
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_codes"), 2);
    assert_eq!(grants_and_tokens(&gw), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn consent_form_refuses_other_sites_and_deny_answers_access_denied() {
    let gw = gateway().await;
    let client = client_id(&gw).await;
    let consent = open_consent(&gw, &client).await;
    let code = approval_code(&gw);

    // From another origin: refused, nothing spent.
    let (status, location, body) = decide(
        &gw,
        &consent,
        "approve",
        &code,
        Some("https://evil.example"),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(location.is_none());
    // Without the browser's cookie (another browser, or a cross-site post that drops it).
    let stolen = Consent {
        cookie: "ngw_csrf_other=x".into(),
        request_id: consent.request_id.clone(),
        csrf: consent.csrf.clone(),
        html: String::new(),
    };
    let (status, _, _) = decide(&gw, &stolen, "approve", &code, None).await;
    assert_eq!(status, 403);
    // With a wrong CSRF field.
    let forged = Consent {
        csrf: "csrf_forged".into(),
        cookie: consent.cookie.clone(),
        request_id: consent.request_id.clone(),
        html: String::new(),
    };
    let (status, _, _) = decide(&gw, &forged, "approve", &code, None).await;
    assert_eq!(status, 403);
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_codes"), 0);

    // Deny: back to the client with access_denied, and the request is gone.
    let (status, location, _) = decide(&gw, &consent, "deny", "", Some(&gw.base_url())).await;
    assert_eq!(status, 303);
    let location = location.unwrap();
    assert_eq!(query(&location, "error").as_deref(), Some("access_denied"));
    assert_eq!(query(&location, "state").as_deref(), Some("st-1"));
    let (status, _, _) = decide(&gw, &consent, "approve", &code, None).await;
    assert_eq!(status, 400);
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_codes"), 0);
    // The approval code was not spent by any of this.
    let consent = open_consent(&gw, &client).await;
    let (status, _, _) = decide(&gw, &consent, "approve", &code, None).await;
    assert_eq!(status, 303);
}

#[tokio::test(flavor = "multi_thread")]
async fn authorization_requests_are_checked_before_the_page() {
    let gw = gateway().await;
    let client = client_id(&gw).await;

    // Unknown client or redirect mismatch: a page, never a redirect.
    for url in [
        authorize_url(&gw, "client_unknown", &[]),
        authorize_url(&gw, &client, &[]).replace("%2Fcallback", "%2Fother"),
    ] {
        let resp = http().get(&url).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{url}");
        assert!(resp.headers().get("location").is_none(), "{url}");
        assert_eq!(resp.headers()["x-frame-options"], "DENY");
    }
    // Anything else: back to the client with the error and its state.
    let base = format!("{}/oauth/authorize", gw.base_url());
    let good = authorize_url(&gw, &client, &[]);
    let cases = [
        (
            good.replace("response_type=code", "response_type=token"),
            "unsupported_response_type",
        ),
        (
            good.replace("code_challenge_method=S256", "code_challenge_method=plain"),
            "invalid_request",
        ),
        (
            good.replace(
                &format!("code_challenge={}", challenge(VERIFIER)),
                "code_challenge=short",
            ),
            "invalid_request",
        ),
        (
            authorize_url(&gw, &client, &[("scope", "admin")]),
            "invalid_scope",
        ),
        (
            good.replace(
                "resource=http",
                "resource=https%3A%2F%2Fother.example%2Fmcp&x=http",
            ),
            "invalid_target",
        ),
    ];
    for (url, error) in cases {
        assert!(url.starts_with(&base));
        let resp = http().get(&url).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 302, "{url}");
        let location = url::Url::parse(resp.headers()["location"].to_str().unwrap()).unwrap();
        assert!(location.as_str().starts_with(REDIRECT));
        assert_eq!(query(&location, "error").as_deref(), Some(error), "{url}");
        assert_eq!(query(&location, "state").as_deref(), Some("st-1"));
    }
    // Without PKCE at all.
    let no_pkce = good
        .split('&')
        .filter(|p| !p.starts_with("code_challenge"))
        .collect::<Vec<_>>()
        .join("&");
    let resp = http().get(&no_pkce).send().await.unwrap();
    let location = url::Url::parse(resp.headers()["location"].to_str().unwrap()).unwrap();
    assert_eq!(
        query(&location, "error").as_deref(),
        Some("invalid_request")
    );
    // No scope (ChatGPT on a reconnect) is the one scope.
    let resp = http().get(&good).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn registration_refuses_bad_and_oversized_requests() {
    let gw = gateway().await;
    let cases = [
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (json!({"client_name": "x"}), "invalid_redirect_uri"),
        (
            json!({"redirect_uris": "https://a.example/cb"}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["http://a.example/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb#frag"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://user:pw@a.example/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["/relative"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["javascript:alert(1)"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": [format!("https://a.example/{}", "x".repeat(2100))]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "grant_types": ["client_credentials"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "response_types": ["token"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "client_name": "x".repeat(101)}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "client_name": "a\u{7}b"}),
            "invalid_client_metadata",
        ),
        (json!(["https://a.example/cb"]), "invalid_client_metadata"),
    ];
    for (body, error) in cases {
        let (status, answer) = register(&gw, &body).await;
        assert_oauth_error(status, &answer, 400, error);
    }
    let raw = |body: String, content_type: &'static str| {
        http()
            .post(format!("{}/oauth/register", gw.base_url()))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let resp = raw("{not json".into(), "application/json").await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["error"], "invalid_client_metadata");
    let resp = raw("{}".into(), "text/plain").await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let big = json!({"redirect_uris": ["https://a.example/cb"], "pad": "x".repeat(20_000)});
    let resp = raw(big.to_string(), "application/json").await.unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["error"], "invalid_client_metadata");
    let huge = json!({"pad": "x".repeat(200_000)});
    let resp = raw(huge.to_string(), "application/json").await.unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_clients"), 0);

    // A good one: https, and http on loopback; any requested auth method is answered "none".
    let (status, answer) = register(
        &gw,
        &json!({"redirect_uris": ["https://chatgpt.com/connector_platform_oauth_redirect",
                                  "http://localhost:3000/cb"],
                "token_endpoint_auth_method": "client_secret_post", "unknown_field": 1}),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["token_endpoint_auth_method"], "none");
    assert!(answer.get("client_secret").is_none());
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_clients"), 1);
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
        request_id: hidden(&html, "request_id"),
        csrf: hidden(&html, "csrf"),
        cookie,
        html,
    };
    let code = approval_code(&first);
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
fn doctor_auth_check(gw: &GatewayProcess) -> Value {
    use clap::Parser;
    let state = gw.state_dir().to_string_lossy().to_string();
    let argv = [
        "gatewayctl",
        "--state-dir",
        state.as_str(),
        "--json",
        "doctor",
        "--skip-host-probes",
    ];
    let mut out = Vec::new();
    let _ = gatewayctl::run(gatewayctl::Cli::parse_from(argv), &mut out);
    let report: Value = serde_json::from_slice(&out).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "auth mode")
        .cloned()
        .unwrap_or_else(|| panic!("no auth mode check in {report}"))
}

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
    assert_eq!(answer["error"], "invalid_request");
}
