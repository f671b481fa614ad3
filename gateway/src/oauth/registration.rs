//! Dynamic Client Registration (RFC 7591), the way ChatGPT registers itself: public clients only
//! (no secret: PKCE proves the client), `https` redirect URIs (or `http` on a loopback host),
//! matched exactly. Registering grants nothing: every authorization still needs the owner's
//! approval code.
//!
//! Registration is stateless (issue 24 item 1): the answer's `client_id` is signed under the
//! server key and carries the client (`client_id.rs`), and nothing is stored or counted, so a
//! stranger's flood of registrations spends nothing another registration needs. Its cost per
//! request is bounded by the body (at most [`MAX_REGISTRATION_BYTES`], read within the body
//! timeout), at most [`MAX_REDIRECT_URIS`] URL parses, and one HMAC. The client's row is written
//! only when the owner approves it (`store::OAuthStore::approve`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::client_id::SignedClient;
use super::{OAuth, OAuthError};

/// Largest registration request.
pub const MAX_REGISTRATION_BYTES: usize = 16 * 1024;
/// Redirect URIs one client may register.
pub const MAX_REDIRECT_URIS: usize = 8;
/// Longest redirect URI.
const MAX_REDIRECT_URI_LEN: usize = 2000;
/// Longest client name (in characters).
const MAX_CLIENT_NAME_CHARS: usize = 100;

fn invalid_metadata(description: impl Into<String>) -> OAuthError {
    OAuthError::new(
        StatusCode::BAD_REQUEST,
        "invalid_client_metadata",
        description,
    )
}

fn invalid_redirect(description: impl Into<String>) -> OAuthError {
    OAuthError::new(StatusCode::BAD_REQUEST, "invalid_redirect_uri", description)
}

/// A redirect URI a client may register: absolute, `https` (or `http` to a loopback host), no
/// fragment, no credentials, not too long.
pub fn check_redirect_uri(uri: &str) -> Result<(), OAuthError> {
    if uri.len() > MAX_REDIRECT_URI_LEN {
        return Err(invalid_redirect(format!(
            "a redirect URI is longer than {MAX_REDIRECT_URI_LEN} bytes"
        )));
    }
    // Shown to the owner on the consent page, and kept verbatim: nothing that could disguise
    // it there (red team 48 F10: ESC, BEL and a right-to-left override reached the page).
    if !uri.is_ascii() || uri.chars().any(|c| c.is_ascii_control() || c == ' ') {
        return Err(invalid_redirect(
            "a redirect URI must be printable ASCII without spaces (percent-encode the rest)",
        ));
    }
    let parsed = url::Url::parse(uri)
        .map_err(|_| invalid_redirect("a redirect URI is not an absolute URL"))?;
    let Some(host) = parsed.host() else {
        return Err(invalid_redirect("a redirect URI has no host"));
    };
    match parsed.scheme() {
        "https" => {}
        "http" if super::is_loopback_host(&host) => {}
        _ => {
            return Err(invalid_redirect(
                "a redirect URI must be https:// (http:// only to localhost, 127.0.0.1 or [::1])",
            ));
        }
    }
    if parsed.fragment().is_some() {
        return Err(invalid_redirect("a redirect URI must not have a fragment"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(invalid_redirect(
            "a redirect URI must not carry credentials",
        ));
    }
    Ok(())
}

fn string_list(body: &Value, key: &str) -> Result<Option<Vec<String>>, OAuthError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| invalid_metadata(format!("{key} must be an array of strings")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(_) => Err(invalid_metadata(format!(
            "{key} must be an array of strings"
        ))),
    }
}

/// A registration request, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    pub client_name: Option<String>,
    /// Kept verbatim: matched byte for byte.
    pub redirect_uris: Vec<String>,
    pub issued_at_ms: i64,
}

impl Registration {
    /// What the signed client id carries.
    pub fn signed(&self) -> SignedClient {
        SignedClient::new(
            self.issued_at_ms,
            self.client_name.clone(),
            &self.redirect_uris,
        )
    }
}

/// The client a registration request describes, validated.
pub fn parse_registration(bytes: &[u8], now_ms: i64) -> Result<Registration, OAuthError> {
    if bytes.len() > MAX_REGISTRATION_BYTES {
        return Err(too_large());
    }
    let body: Value = serde_json::from_slice(bytes)
        .map_err(|_| invalid_metadata("the registration request is not JSON"))?;
    if !body.is_object() {
        return Err(invalid_metadata(
            "the registration request must be a JSON object",
        ));
    }
    let redirect_uris = string_list(&body, "redirect_uris")?.unwrap_or_default();
    if redirect_uris.is_empty() {
        return Err(invalid_redirect("redirect_uris must name at least one URI"));
    }
    if redirect_uris.len() > MAX_REDIRECT_URIS {
        return Err(invalid_redirect(format!(
            "at most {MAX_REDIRECT_URIS} redirect_uris may be registered"
        )));
    }
    for uri in &redirect_uris {
        check_redirect_uri(uri)?;
    }
    let grants = string_list(&body, "grant_types")?.unwrap_or_default();
    if let Some(other) = grants
        .iter()
        .find(|g| !matches!(g.as_str(), "authorization_code" | "refresh_token"))
    {
        return Err(invalid_metadata(format!(
            "grant type {other:?} is not supported (authorization_code, refresh_token)"
        )));
    }
    let response_types = string_list(&body, "response_types")?.unwrap_or_default();
    if response_types.iter().any(|t| t != "code") {
        return Err(invalid_metadata(
            "only the response type \"code\" is supported",
        ));
    }
    let client_name = match body.get("client_name") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => {
            let name = name.trim();
            if name.chars().count() > MAX_CLIENT_NAME_CHARS {
                return Err(invalid_metadata(format!(
                    "client_name is longer than {MAX_CLIENT_NAME_CHARS} characters"
                )));
            }
            // The owner reads the name on the consent page and in `gatewayctl oauth clients`:
            // no control, bidi or invisible format character may disguise it.
            if !common::display::is_plain(name) {
                return Err(invalid_metadata(
                    "client_name must be plain text on one line (no control, bidi, format or \
                     invisible characters, no spaces other than U+0020, no stacked combining \
                     marks)",
                ));
            }
            (!name.is_empty()).then(|| name.to_string())
        }
        Some(_) => return Err(invalid_metadata("client_name must be a string")),
    };
    // `token_endpoint_auth_method` is answered with "none" whatever was asked (RFC 7591 §3.2.1
    // lets the server replace a requested value): every client here is public and uses PKCE.
    Ok(Registration {
        client_name,
        redirect_uris,
        issued_at_ms: now_ms,
    })
}

fn too_large() -> OAuthError {
    OAuthError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_client_metadata",
        format!("the registration request is larger than {MAX_REGISTRATION_BYTES} bytes"),
    )
}

/// `POST /oauth/register`.
pub async fn register(
    State(oauth): State<Arc<OAuth>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OAuthError> {
    let json = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json {
        return Err(invalid_metadata(
            "the registration request must be sent as application/json",
        ));
    }
    let client = parse_registration(&body, common::time::now_unix_ms())?;
    let client_id = oauth.client_ids.issue(&client.signed());
    // Debug only: a flood of registrations must not fill the log either.
    tracing::debug!(
        client_id = %client_id,
        "oauth: client registered (stored nowhere; it still needs the owner's approval)"
    );
    let mut answer = json!({
        "client_id": client_id,
        "client_id_issued_at": client.issued_at_ms / 1000,
        "redirect_uris": client.redirect_uris,
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        "scope": super::SCOPE,
    });
    if let Some(name) = &client.client_name {
        answer["client_name"] = Value::String(name.clone());
    }
    let mut response = (StatusCode::CREATED, axum::Json(answer)).into_response();
    super::error::no_store(&mut response);
    Ok(response)
}
