//! The OAuth error answer of the JSON endpoints (RFC 6749 §5.2, RFC 7591 §3.2.2): a stable `error`
//! code, a description for people, the HTTP status, and `Cache-Control: no-store`; and how the
//! OAuth tables fail (`OAuthStoreError`).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// One refusal of a JSON OAuth endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}: {description}")]
pub struct OAuthError {
    pub status: StatusCode,
    /// The registered OAuth error code (`invalid_grant`, `invalid_client`, …).
    pub error: &'static str,
    pub description: String,
    /// Seconds for a `Retry-After` header (a 429).
    pub retry_after_s: Option<u64>,
}

impl OAuthError {
    pub fn new(status: StatusCode, error: &'static str, description: impl Into<String>) -> Self {
        OAuthError {
            status,
            error,
            description: description.into(),
            retry_after_s: None,
        }
    }

    /// A refresh over its grant's pace: 429 with `Retry-After`; the refresh token stays valid.
    pub fn refresh_too_often(retry_after_s: u64) -> Self {
        OAuthError {
            retry_after_s: Some(retry_after_s),
            ..Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "temporarily_unavailable",
                format!(
                    "this grant refreshed its tokens more than {} times in {} s; the refresh \
                     token is still valid: send it again after {retry_after_s} s",
                    super::refresh_pace::REFRESH_BURST,
                    super::refresh_pace::REFRESH_EVERY.as_secs()
                        * u64::from(super::refresh_pace::REFRESH_BURST),
                ),
            )
        }
    }

    pub fn invalid_request(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", description)
    }

    pub fn invalid_grant(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_grant", description)
    }

    pub fn invalid_client(description: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "invalid_client", description)
    }

    pub fn invalid_target(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_target", description)
    }

    /// The state database failed: said without any detail (paths stay private).
    pub fn server_error() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "the gateway could not read or write its state; try again",
        )
    }
}

impl From<OAuthStoreError> for OAuthError {
    fn from(err: OAuthStoreError) -> Self {
        tracing::error!("oauth state: {err}");
        OAuthError::server_error()
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({
            "error": self.error,
            "error_description": self.description,
        });
        let mut response = (self.status, axum::Json(body)).into_response();
        no_store(&mut response);
        if let Some(seconds) = self.retry_after_s {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, http::HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            // RFC 6749 §5.2: a 401 from the token endpoint names the scheme the client may use.
            response.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Basic realm=\"native-gateway\""),
            );
        }
        response
    }
}

/// Mark a response that carries or concerns credentials as never to be cached.
pub fn no_store(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    headers.insert(
        http::header::PRAGMA,
        http::HeaderValue::from_static("no-cache"),
    );
}

/// Failures of the OAuth tables (the endpoints answer `server_error` without detail).
#[derive(Debug, thiserror::Error)]
pub enum OAuthStoreError {
    #[error("state database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("state record is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// Reading or appending the chained revocations failed.
    #[error("ledger: {0}")]
    Ledger(#[from] crate::state::StoreError),
}
