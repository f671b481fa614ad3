//! The token endpoint (RFC 6749 §3.2 with OAuth 2.1's rules): `authorization_code` with PKCE S256
//! and `refresh_token` with rotation, for public clients. Form parameters are read strictly: each
//! at most once, the body bounded.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::json;

use super::credentials::verifier_well_formed;
use super::store::TokenRequest;
use super::{OAuth, OAuthError};

/// Largest token request.
const MAX_TOKEN_REQUEST_BYTES: usize = 16 * 1024;

/// Form parameters, each present at most once (RFC 6749 §3.2).
pub fn parse_form(bytes: &[u8]) -> Result<HashMap<String, String>, OAuthError> {
    let mut params = HashMap::new();
    for (key, value) in url::form_urlencoded::parse(bytes) {
        if params.insert(key.to_string(), value.to_string()).is_some() {
            return Err(OAuthError::invalid_request(format!(
                "parameter {key} is given more than once"
            )));
        }
    }
    Ok(params)
}

fn required<'a>(params: &'a HashMap<String, String>, key: &str) -> Result<&'a str, OAuthError> {
    params
        .get(key)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| OAuthError::invalid_request(format!("{key} is required")))
}

/// The client id of a public client: the `client_id` parameter, or the user name of an HTTP Basic
/// `Authorization` header (clients that default to `client_secret_basic` send it there).
fn client_id(headers: &HeaderMap, params: &HashMap<String, String>) -> Result<String, OAuthError> {
    let from_basic = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("basic"))
        .and_then(|(_, b64)| {
            base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .ok()
        })
        .and_then(|raw| String::from_utf8(raw).ok())
        .and_then(|pair| pair.split_once(':').map(|(id, _)| id.to_string()))
        .map(|id| {
            url::form_urlencoded::parse(format!("x={id}").as_bytes())
                .next()
                .map(|(_, v)| v.to_string())
                .unwrap_or(id)
        });
    match (from_basic, params.get("client_id")) {
        (Some(a), Some(b)) if &a != b => Err(OAuthError::invalid_request(
            "client_id differs between the Authorization header and the body",
        )),
        (Some(id), _) => Ok(id),
        (None, Some(id)) if !id.is_empty() => Ok(id.clone()),
        _ => Err(OAuthError::invalid_client("client_id is required")),
    }
}

/// `POST /oauth/token`.
pub async fn token(
    State(oauth): State<Arc<OAuth>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, OAuthError> {
    let form = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form {
        return Err(OAuthError::invalid_request(
            "the token request must be sent as application/x-www-form-urlencoded",
        ));
    }
    if body.len() > MAX_TOKEN_REQUEST_BYTES {
        return Err(OAuthError::invalid_request(format!(
            "the token request is larger than {MAX_TOKEN_REQUEST_BYTES} bytes"
        )));
    }
    let params = parse_form(&body)?;
    let grant_type = required(&params, "grant_type")?;
    let client_id = client_id(&headers, &params)?;
    // A signed id is checked (MAC, then revocation) before anything else is looked up; the store
    // checks the client's row again inside the exchange's transaction.
    oauth.resolve_client(&client_id)?;
    let resource = params.get("resource").map(String::as_str);
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let request = TokenRequest {
        client_id: &client_id,
        resource,
        our_resource: &oauth.resource,
        now_ms: common::time::now_unix_ms(),
        access_ttl_ms: ms(oauth.access_token_ttl),
        refresh_ttl_ms: ms(super::REFRESH_TOKEN_TTL),
    };
    if let Some(scope) = params.get("scope")
        && scope.split(' ').any(|s| !s.is_empty() && s != super::SCOPE)
    {
        return Err(OAuthError::new(
            http::StatusCode::BAD_REQUEST,
            "invalid_scope",
            format!("the only scope is {:?}", super::SCOPE),
        ));
    }
    let tokens = match grant_type {
        "authorization_code" => {
            let code = required(&params, "code")?;
            let redirect_uri = required(&params, "redirect_uri")?;
            let verifier = required(&params, "code_verifier")?;
            if !verifier_well_formed(verifier) {
                return Err(OAuthError::invalid_request(
                    "code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~",
                ));
            }
            oauth
                .store
                .exchange_code(code, redirect_uri, verifier, &request)?
        }
        "refresh_token" => {
            let refresh = required(&params, "refresh_token")?;
            oauth.store.refresh(refresh, &request)?
        }
        other => {
            return Err(OAuthError::new(
                http::StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                format!(
                    "grant_type {other:?} is not supported (authorization_code, refresh_token)"
                ),
            ));
        }
    };
    tracing::info!(client_id = %client_id, grant_type, "oauth: tokens issued");
    let mut response = axum::Json(json!({
        "access_token": tokens.access_token,
        "token_type": "Bearer",
        "expires_in": tokens.expires_in_s,
        "refresh_token": tokens.refresh_token,
        "scope": tokens.scope,
    }))
    .into_response();
    super::error::no_store(&mut response);
    Ok(response)
}
