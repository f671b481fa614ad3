//! The discovery documents: Protected Resource Metadata (RFC 9728) for `/mcp`, and this
//! authorization server's metadata (RFC 8414). Both are built from the configured public base only,
//! never from the request's Host or X-Forwarded headers.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{OAuth, SCOPE};

/// RFC 9728 metadata of the protected resource `<issuer>/mcp`.
pub fn protected_resource_document(oauth: &OAuth) -> Value {
    json!({
        "resource": oauth.resource,
        "authorization_servers": [oauth.issuer],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": "Native Gateway",
    })
}

/// RFC 8414 metadata of the authorization server. Public clients only (PKCE S256, no client
/// secret); clients register with RFC 7591. Client ID Metadata Documents are not supported (the
/// gateway fetches nothing from the network; docs/design/oauth.md says why), so the flag is false
/// and clients fall back to registration.
pub fn authorization_server_document(oauth: &OAuth) -> Value {
    let base = &oauth.issuer;
    json!({
        "issuer": base,
        "authorization_endpoint": format!("{base}/oauth/authorize"),
        "token_endpoint": format!("{base}/oauth/token"),
        "registration_endpoint": format!("{base}/oauth/register"),
        "scopes_supported": [SCOPE],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["none"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": false,
    })
}

pub async fn protected_resource(State(oauth): State<Arc<OAuth>>) -> Response {
    axum::Json(protected_resource_document(&oauth)).into_response()
}

pub async fn authorization_server(State(oauth): State<Arc<OAuth>>) -> Response {
    axum::Json(authorization_server_document(&oauth)).into_response()
}
