//! The authorization endpoint: `GET` checks the request and shows the consent page; `POST` takes
//! the owner's decision. The page stores nothing: the request travels in its signed request id
//! (`request_id.rs`), so a flood of pages takes nothing from the owner's. Approving needs the
//! owner's one-time approval code, issued for this page's page code; the form is bound to the
//! browser that loaded it (a CSRF token in the form and in a `SameSite=Strict` cookie) and must
//! come from this gateway's own origin.
//!
//! Errors about the client or its redirect URI are shown on a page and never redirected (RFC 6749
//! §4.1.2.1: the redirect target is not trusted yet); every later error goes back to the client.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::approvals::{ApprovalCheck, PageRef, REQUEST_TTL, SeenPage};
use super::consent::{self, ConsentView};
use super::credentials::challenge_well_formed;
use super::request_id::{ConsentRequest, show_page_code};
use super::store::CodeRow;
use super::token::parse_form;
use super::{OAuth, SCOPE};

/// Longest `state` a client may send (it is echoed back).
const MAX_STATE_LEN: usize = 1024;
/// Largest decision form (room for the largest request id).
const MAX_DECISION_BYTES: usize = 32 * 1024;
/// Name prefix of the CSRF cookie (one per consent page, named by its page code).
const CSRF_COOKIE: &str = "ngw_csrf_";

fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    consent::html_response(status, consent::error_page(title, message), None)
}

/// The origin (`scheme://host[:port]`) of an absolute URL.
fn origin_of(uri: &str) -> Option<String> {
    let url = url::Url::parse(uri).ok()?;
    Some(url.origin().ascii_serialization()).filter(|o| o != "null")
}

/// A redirect to the client: `redirect_uri` with `params`, `state` and `iss` added to its query.
fn redirect_to_client(
    oauth: &OAuth,
    redirect_uri: &str,
    state: Option<&str>,
    params: &[(&str, &str)],
    status: StatusCode,
) -> Response {
    let Ok(mut url) = url::Url::parse(redirect_uri) else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Cannot continue",
            "The client's redirect URI is not a valid URL.",
        );
    };
    {
        let mut query = url.query_pairs_mut();
        for (key, value) in params {
            query.append_pair(key, value);
        }
        if let Some(state) = state {
            query.append_pair("state", state);
        }
        query.append_pair("iss", &oauth.issuer);
    }
    let mut response = status.into_response();
    if let Ok(location) = http::HeaderValue::from_str(url.as_str()) {
        response
            .headers_mut()
            .insert(http::header::LOCATION, location);
    }
    super::error::no_store(&mut response);
    response
}

fn redirect_error(
    oauth: &OAuth,
    redirect_uri: &str,
    state: Option<&str>,
    error: &str,
    description: &str,
) -> Response {
    redirect_to_client(
        oauth,
        redirect_uri,
        state,
        &[("error", error), ("error_description", description)],
        StatusCode::FOUND,
    )
}

fn cookie_name(page: &str) -> String {
    format!("{CSRF_COOKIE}{page}")
}

fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// `GET /oauth/authorize`: check the request; show the consent page.
pub async fn show_consent(State(oauth): State<Arc<OAuth>>, RawQuery(query): RawQuery) -> Response {
    let params = match parse_form(query.unwrap_or_default().as_bytes()) {
        Ok(params) => params,
        Err(err) => {
            return error_page(StatusCode::BAD_REQUEST, "Invalid request", &err.description);
        }
    };
    let get = |key: &str| {
        params
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    let Some(client_id) = get("client_id") else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Invalid request",
            "client_id is required.",
        );
    };
    let client = match oauth.resolve_client(client_id) {
        Ok(client) => client,
        Err(super::ClientRefusal::Store(err)) => return state_unreadable(&err),
        Err(refusal) => return unknown_client_page(&refusal),
    };
    let Some(redirect_uri) = get("redirect_uri") else {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Invalid request",
            "redirect_uri is required.",
        );
    };
    if !client.allows_redirect(redirect_uri) {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Redirect URI mismatch",
            "redirect_uri is not one the client registered (it must match exactly).",
        );
    }
    let state = get("state");
    if state.is_some_and(|s| s.len() > MAX_STATE_LEN) {
        return redirect_error(
            &oauth,
            redirect_uri,
            None,
            "invalid_request",
            "state is too long",
        );
    }
    let refuse = |error: &str, description: &str| {
        redirect_error(&oauth, redirect_uri, state, error, description)
    };
    if get("response_type") != Some("code") {
        return refuse(
            "unsupported_response_type",
            "response_type must be \"code\"",
        );
    }
    let Some(challenge) = get("code_challenge") else {
        return refuse("invalid_request", "code_challenge is required (PKCE)");
    };
    if get("code_challenge_method") != Some("S256") {
        return refuse("invalid_request", "code_challenge_method must be S256");
    }
    if !challenge_well_formed(challenge) {
        return refuse(
            "invalid_request",
            "code_challenge must be the 43-character base64url SHA-256 of the verifier",
        );
    }
    if let Some(resource) = get("resource")
        && resource != oauth.resource
    {
        return refuse(
            "invalid_target",
            "resource is not this gateway's MCP endpoint",
        );
    }
    if let Some(scope) = get("scope")
        && scope.split(' ').any(|s| !s.is_empty() && s != SCOPE)
    {
        return refuse("invalid_scope", "the only scope is \"mcp\"");
    }
    let now = common::time::now_unix_ms();
    let request = ConsentRequest {
        client_id: client.client_id.clone(),
        redirect_uri: redirect_uri.to_string(),
        code_challenge: challenge.to_string(),
        code_challenge_method: "S256".to_string(),
        state: state.map(str::to_string),
        scope: SCOPE.to_string(),
        resource: oauth.resource.clone(),
        issued_at_ms: now,
        page: super::request_id::new_page_code(),
    };
    let request_id = oauth.request_ids.issue(&request);
    let csrf = oauth.request_ids.csrf(&request_id);
    let client_name = client
        .client_name
        .clone()
        .unwrap_or_else(|| "an unnamed client".to_string());
    oauth.approvals().note_page(
        SeenPage {
            page: request.page.clone(),
            digest: super::request_id::digest(&request_id),
            client_id: client.client_id.clone(),
            client_name: client_name.clone(),
            redirect_host: redirect_host(redirect_uri),
            expires_at_ms: now + i64::try_from(REQUEST_TTL.as_millis()).unwrap_or(i64::MAX),
        },
        now,
    );
    let page = Page {
        request_id: &request_id,
        request: &request,
        csrf: &csrf,
        client_name: &client_name,
    };
    let mut response = render_consent(&page, None, StatusCode::OK);
    let secure = if oauth.issuer.starts_with("https://") {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{}={csrf}; Path=/oauth/authorize; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        cookie_name(&request.page),
        REQUEST_TTL.as_secs()
    );
    if let Ok(value) = http::HeaderValue::from_str(&cookie) {
        response
            .headers_mut()
            .append(http::header::SET_COOKIE, value);
    }
    response
}

fn redirect_host(uri: &str) -> String {
    url::Url::parse(uri)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default()
}

/// One consent page: its signed request, as issued or as posted back and verified.
struct Page<'a> {
    request_id: &'a str,
    request: &'a ConsentRequest,
    csrf: &'a str,
    client_name: &'a str,
}

impl Page<'_> {
    fn page_ref<'b>(&'b self, digest: &'b [u8; 32]) -> PageRef<'b> {
        PageRef {
            page: &self.request.page,
            issued_at_ms: self.request.issued_at_ms,
            digest,
        }
    }
}

fn render_consent(page: &Page<'_>, error: Option<&str>, status: StatusCode) -> Response {
    let host = redirect_host(&page.request.redirect_uri);
    let view = ConsentView {
        request_id: page.request_id,
        csrf: page.csrf,
        page_code: &show_page_code(&page.request.page),
        client_name: page.client_name,
        client_id: &page.request.client_id,
        redirect_uri: &page.request.redirect_uri,
        redirect_host: &host,
        error,
    };
    consent::html_response(
        status,
        consent::consent_page(&view),
        origin_of(&page.request.redirect_uri).as_deref(),
    )
}

/// Whether the browser says the form came from another site: an `Origin` other than the issuer's,
/// or `Sec-Fetch-Site: cross-site`.
fn cross_site(oauth: &OAuth, headers: &HeaderMap) -> bool {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(origin) = header("origin")
        && Some(origin.to_string()) != origin_of(&oauth.issuer)
    {
        return true;
    }
    matches!(header("sec-fetch-site"), Some("cross-site" | "same-site"))
}

/// `POST /oauth/authorize`: the owner's Approve (with the approval code) or Deny.
pub async fn decide(State(oauth): State<Arc<OAuth>>, headers: HeaderMap, body: Bytes) -> Response {
    if cross_site(&oauth, &headers) {
        return error_page(
            StatusCode::FORBIDDEN,
            "Refused",
            "This form was sent from another site. Open the authorization page from your client \
             and decide there.",
        );
    }
    if body.len() > MAX_DECISION_BYTES {
        return error_page(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Invalid request",
            "The form is too large.",
        );
    }
    let params: HashMap<String, String> = match parse_form(&body) {
        Ok(params) => params,
        Err(err) => {
            return error_page(StatusCode::BAD_REQUEST, "Invalid request", &err.description);
        }
    };
    let field = |key: &str| params.get(key).map(String::as_str).unwrap_or_default();
    let request_id = field("request_id");
    let now = common::time::now_unix_ms();
    let request = match oauth.request_ids.verify(request_id, now) {
        Ok(request) => request,
        Err(super::request_id::RequestIdError::Expired) => {
            return error_page(
                StatusCode::BAD_REQUEST,
                "Request expired",
                &super::request_id::RequestIdError::Expired.to_string(),
            );
        }
        Err(err) => {
            return error_page(
                StatusCode::BAD_REQUEST,
                "Invalid authorization request",
                &err.to_string(),
            );
        }
    };
    let csrf = oauth.request_ids.csrf(request_id);
    let csrf_ok = common::hash::constant_time_eq(field("csrf").as_bytes(), csrf.as_bytes())
        && cookie_value(&headers, &cookie_name(&request.page))
            .is_some_and(|c| common::hash::constant_time_eq(c.as_bytes(), csrf.as_bytes()));
    if !csrf_ok {
        return error_page(
            StatusCode::FORBIDDEN,
            "Refused",
            "This form does not belong to this browser's authorization page. Start again from \
             your client.",
        );
    }
    let digest = super::request_id::digest(request_id);
    if oauth.approvals().decided(&digest, now) {
        return error_page(
            StatusCode::BAD_REQUEST,
            "Request already decided",
            "request_decided: this authorization request was already approved, denied or voided; \
             it works once. Start again from your client.",
        );
    }
    // Verified again (a revocation may have come since the page opened).
    let client = match oauth.resolve_client(&request.client_id) {
        Ok(client) => client,
        Err(super::ClientRefusal::Store(err)) => return state_unreadable(&err),
        Err(refusal) => return unknown_client_page(&refusal),
    };
    let client_name = client
        .client_name
        .clone()
        .unwrap_or_else(|| "an unnamed client".to_string());
    let page = Page {
        request_id,
        request: &request,
        csrf: &csrf,
        client_name: &client_name,
    };
    match field("decision") {
        "deny" => {
            oauth.approvals().deny(page.page_ref(&digest), now);
            tracing::info!(client_id = %request.client_id, "oauth: the owner denied a client");
            redirect_to_client(
                &oauth,
                &request.redirect_uri,
                request.state.as_deref(),
                &[
                    ("error", "access_denied"),
                    ("error_description", "the owner denied the request"),
                ],
                StatusCode::SEE_OTHER,
            )
        }
        "approve" => approve(&oauth, &page, &digest, &client, field("approval_code"), now),
        _ => error_page(
            StatusCode::BAD_REQUEST,
            "Invalid request",
            "Choose Approve or Deny.",
        ),
    }
}

fn approve(
    oauth: &OAuth,
    page: &Page<'_>,
    digest: &[u8; 32],
    client: &super::Client,
    typed_code: &str,
    now: i64,
) -> Response {
    let request = page.request;
    let check = oauth
        .approvals()
        .check_approval_code(page.page_ref(digest), typed_code, now);
    let shown_page = show_page_code(&request.page);
    let retry = |message: &str| render_consent(page, Some(message), StatusCode::BAD_REQUEST);
    match check {
        ApprovalCheck::Accepted => {}
        ApprovalCheck::NotNamed => {
            return retry(&format!(
                "No approval code was issued for this page yet (or only before it opened). Run \
                 `gatewayctl oauth approve {shown_page}` on the computer running the gateway and \
                 type the code it prints. Nothing was counted."
            ));
        }
        ApprovalCheck::PageCodeTyped => {
            return retry(&format!(
                "That is this page's own page code. Run `gatewayctl oauth approve {shown_page}` \
                 and type the approval code it prints. Nothing was counted."
            ));
        }
        ApprovalCheck::Decided => {
            return error_page(
                StatusCode::BAD_REQUEST,
                "Request already decided",
                "request_decided: this authorization request was already approved, denied or \
                 voided; it works once. Start again from your client.",
            );
        }
        ApprovalCheck::Rejected { attempts_left } => {
            static WRONG: super::throttled_warning::ThrottledWarning =
                super::throttled_warning::ThrottledWarning::new(std::time::Duration::from_secs(10));
            if let Some(left_out) = WRONG.admit(now) {
                tracing::warn!(client_id = %request.client_id, left_out, "oauth: wrong approval code");
            }
            return retry(&format!(
                "That approval code is not valid for this page (wrong, expired or already used). \
                 {attempts_left} attempt{} left on this page.",
                if attempts_left == 1 { "" } else { "s" }
            ));
        }
        ApprovalCheck::Locked => {
            static VOID: super::throttled_warning::ThrottledWarning =
                super::throttled_warning::ThrottledWarning::new(std::time::Duration::from_secs(10));
            if let Some(left_out) = VOID.admit(now) {
                tracing::warn!(client_id = %request.client_id, left_out, "oauth: too many wrong approval codes; the consent page is void");
            }
            return error_page(
                StatusCode::TOO_MANY_REQUESTS,
                "Too many attempts",
                "Too many wrong approval codes on this page: it is void. Start again from your \
                 client, then run `gatewayctl oauth approve <page code>` for a new code.",
            );
        }
    }
    let expires_at_ms = now + i64::try_from(super::CODE_TTL.as_millis()).unwrap_or(i64::MAX);
    let row = CodeRow {
        client_id: request.client_id.clone(),
        redirect_uri: request.redirect_uri.clone(),
        code_challenge: request.code_challenge.clone(),
        resource: request.resource.clone(),
        scope: request.scope.clone(),
        expires_at_ms,
    };
    // The code carries its expiry and its request's digest under its keyed hash: an edit at
    // rest can neither extend it nor give it another client, redirect or challenge.
    let code = match oauth.store.approve(client, &row) {
        Ok(code) => code,
        Err(err) if err.error == "invalid_client" => {
            return error_page(StatusCode::BAD_REQUEST, "Client revoked", &err.description);
        }
        Err(_) => {
            return error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Gateway error",
                "The gateway could not write its state; try again.",
            );
        }
    };
    tracing::info!(client_id = %request.client_id, "oauth: the owner approved a client");
    redirect_to_client(
        oauth,
        &request.redirect_uri,
        request.state.as_deref(),
        &[("code", &code)],
        StatusCode::SEE_OTHER,
    )
}

/// The page for a client id that is not served (never redirected: the redirect target is not
/// trusted yet); it names the OAuth error, `invalid_client`, and what to do.
fn unknown_client_page(refusal: &super::ClientRefusal) -> Response {
    let title = match refusal {
        super::ClientRefusal::Revoked => "Client revoked",
        _ => "Unknown client",
    };
    error_page(
        StatusCode::BAD_REQUEST,
        title,
        &format!("invalid_client: {refusal}. Connect again from the client (it registers anew)."),
    )
}

/// The page for a state read that failed (the detail goes to the log only).
fn state_unreadable(err: &dyn std::fmt::Display) -> Response {
    tracing::error!("oauth state: {err}");
    error_page(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Gateway error",
        "The gateway could not read its state; try again.",
    )
}
