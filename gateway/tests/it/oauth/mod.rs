//! OAuth 2.1 for the connector through the real gateway: the discovery documents, registration,
//! the consent step with the owner's approval code, the token endpoint with PKCE and refresh
//! rotation, tokens on `/mcp`, revocation, the auth modes, and every refusal of the issue's "bad
//! input" list with its OAuth error, HTTP status and nothing half-stored. This file holds the
//! client side the tests share.

// Revocations and expiries edited while the gateway is stopped (issue 27).
mod at_rest;
// The flow end to end, rotation, reuse, revocation, expiry, auth modes, the admin socket.
mod flow;
// Registration and consent-page floods: the owner still gets through (issue 24).
mod floods;
// Each refusal of the consent step, authorization and registration.
mod refusals;
// How often a grant may refresh: 429 with Retry-After, the token kept (red team 29 B5).
mod refresh_pace;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;

use base64::Engine;
use serde_json::{Value, json};
use sha2::Digest;

use crate::support::*;

pub(super) const VERIFIER: &str = "a-verifier-of-forty-three-or-more-characters_0123456789";
pub(super) const REDIRECT: &str = "http://127.0.0.1:9/callback";

pub(super) fn challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier))
}

pub(super) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// One request on the owner's admin socket, in the protocol version this build speaks.
pub(super) fn admin(gw: &GatewayProcess, request: Value) -> Value {
    admin_line(
        gw,
        &json!({"version": common::admin::ADMIN_PROTOCOL_VERSION, "request": request}).to_string(),
    )
}

/// One raw line on the owner's admin socket; its answer.
pub(super) fn admin_line(gw: &GatewayProcess, line: &str) -> Value {
    let mut stream = UnixStream::connect(gw.state_dir().join("run/admin.sock")).unwrap();
    writeln!(stream, "{line}").unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap()
}

/// A fresh approval code for the consent page, the way the owner gets one: `gatewayctl oauth
/// approve <page code>` with the page code the page shows.
pub(super) fn approval_code(gw: &GatewayProcess, consent: &Consent) -> String {
    let answer = gatewayctl_json(gw, &["oauth", "approve", &consent.page]);
    assert_eq!(answer["ok"], true, "{answer}");
    assert_eq!(answer["page_code"], consent.page.as_str(), "{answer}");
    answer["approval_code"].as_str().unwrap().to_string()
}

pub(super) async fn register(gw: &GatewayProcess, body: &Value) -> (u16, Value) {
    let resp = http()
        .post(format!("{}/oauth/register", gw.base_url()))
        .json(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

pub(super) async fn client_id(gw: &GatewayProcess) -> String {
    let (status, client) = register(
        gw,
        &json!({"client_name": "Test client", "redirect_uris": [REDIRECT]}),
    )
    .await;
    assert_eq!(status, 201, "{client}");
    client["client_id"].as_str().unwrap().to_string()
}

/// A consent page loaded: its form fields and the CSRF cookie the browser would keep.
pub(super) struct Consent {
    /// The page code the page shows (`abcd-2345`).
    pub(super) page: String,
    pub(super) request_id: String,
    pub(super) csrf: String,
    pub(super) cookie: String,
    pub(super) html: String,
}

pub(super) fn hidden(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no {name} in {html}"))
        + marker.len();
    html[start..].split('"').next().unwrap().to_string()
}

/// The page code a consent page shows.
pub(super) fn page_code(html: &str) -> String {
    let marker = "<strong id=\"page-code\">";
    let start = html
        .find(marker)
        .unwrap_or_else(|| panic!("no page code in {html}"))
        + marker.len();
    html[start..].split('<').next().unwrap().to_string()
}

pub(super) fn authorize_url(
    gw: &GatewayProcess,
    client_id: &str,
    extra: &[(&str, &str)],
) -> String {
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

pub(super) async fn open_consent(gw: &GatewayProcess, client_id: &str) -> Consent {
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
        page: page_code(&html),
        request_id: hidden(&html, "request_id"),
        csrf: hidden(&html, "csrf"),
        cookie,
        html,
    }
}

/// POST the consent form; returns (status, Location, body).
pub(super) async fn decide(
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

pub(super) fn query(url: &url::Url, key: &str) -> Option<String> {
    url.query_pairs()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.to_string())
}

/// Register, open the consent page, approve with a fresh approval code: the authorization code.
pub(super) async fn authorize(gw: &GatewayProcess, client_id: &str) -> String {
    let consent = open_consent(gw, client_id).await;
    let code = approval_code(gw, &consent);
    let (status, location, body) = decide(gw, &consent, "approve", &code, None).await;
    assert_eq!(status, 303, "{body}");
    let location = location.unwrap();
    assert!(location.as_str().starts_with(REDIRECT), "{location}");
    assert_eq!(query(&location, "state").as_deref(), Some("st-1"));
    assert_eq!(query(&location, "iss"), Some(gw.base_url()));
    query(&location, "code").unwrap()
}

pub(super) async fn token(gw: &GatewayProcess, form: &[(&str, &str)]) -> (u16, Value) {
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

pub(super) async fn exchange(gw: &GatewayProcess, client_id: &str, code: &str) -> (u16, Value) {
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

pub(super) async fn refresh(
    gw: &GatewayProcess,
    client_id: &str,
    refresh_token: &str,
) -> (u16, Value) {
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

pub(super) fn assert_oauth_error(status: u16, body: &Value, want_status: u16, want_error: &str) {
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
pub(super) async fn mcp_status(gw: &GatewayProcess, token: &str) -> u16 {
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

pub(super) fn grants_and_tokens(gw: &GatewayProcess) -> (i64, i64) {
    (
        count(gw, "SELECT COUNT(*) FROM oauth_grants"),
        count(gw, "SELECT COUNT(*) FROM oauth_tokens"),
    )
}

pub(super) async fn mcp_status_url(url: &str) -> u16 {
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

pub(super) fn assert_no_secret_in_log(gw: &GatewayProcess, secrets: &[&str]) {
    let log = format!("{}{}", gw.stderr_log(), gw.stdout_log());
    for secret in secrets {
        assert!(!log.contains(secret), "a secret is in the gateway's log");
    }
}

pub(super) fn doctor_auth_check(gw: &GatewayProcess) -> Value {
    doctor_check(gw, "auth mode")
}

/// One check of `gatewayctl doctor --json` by name.
pub(super) fn doctor_check(gw: &GatewayProcess, name: &str) -> Value {
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
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name} check in {report}"))
}

/// `gatewayctl <args>` as the owner reads it (no `--json`): its output, or its error.
pub(super) fn gatewayctl_text(gw: &GatewayProcess, args: &[&str]) -> Result<String, String> {
    use clap::Parser;
    let state = gw.state_dir().to_string_lossy().to_string();
    let mut argv = vec!["gatewayctl", "--state-dir", state.as_str()];
    argv.extend_from_slice(args);
    let mut out = Vec::new();
    gatewayctl::run(gatewayctl::Cli::parse_from(argv), &mut out).map_err(|e| format!("{e:#}"))?;
    Ok(String::from_utf8(out).unwrap())
}
