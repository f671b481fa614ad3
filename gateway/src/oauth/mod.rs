//! OAuth 2.1 for the ChatGPT connector: the gateway is its own authorization server for its one
//! protected resource, `<public base>/mcp`. This module owns the auth mode, the public URLs, and the
//! shared state of the endpoints (metadata, registration, authorize + consent, token) and of the
//! owner's admin socket.
//!
//! Submodules: `metadata` (RFC 9728 and RFC 8414 documents), `registration` (RFC 7591 DCR,
//! stateless), `client_id` (the signed client ids registration issues and every endpoint checks),
//! `authorize` (the authorization endpoint and the owner's consent), `consent` (the HTML page),
//! `request_id` (the signed consent requests the page carries instead of memory), `sealed` (the
//! MAC'd encoding both kinds of id share), `token` (code exchange and refresh rotation), `store`
//! (SQLite rows, hashes only), `approvals` (the owner's approval codes, each naming one page),
//! `credentials` (token prefixes, PKCE), `throttled_warning` (warnings strangers can trigger,
//! logged once a period), `admin` (the owner-only Unix socket).
//!
//! How much of the surface strangers may take: nothing shared. Behind a tunnel every client is
//! 127.0.0.1, so nothing could be limited per address anyway. Registration stores nothing
//! (`registration`, signed client ids) and neither does opening a consent page (`request_id`,
//! signed request ids; issue 24 item 1): there is no shared resource to protect, so neither is
//! limited, and any shared bucket in front of them would be one a stranger drains to keep ChatGPT
//! out. A bucket per client id would not help either: ids are free to mint, and a stranger who
//! learned ChatGPT's id could keep ChatGPT's pages refused. Each request's cost is bounded like
//! any HTTP request's (body size and time, a few URL parses, a database read, two HMACs). What
//! remains in memory (`approvals`) grows only with the owner's `gatewayctl oauth approve` calls.

pub mod admin;
mod approvals;
mod authorize;
pub mod client_id;
mod consent;
mod credentials;
mod error;
pub mod metadata;
pub mod refresh_pace;
mod registration;
pub mod request_id;
pub mod revoked;
mod sealed;
pub mod store;
mod throttled_warning;
mod token;

#[cfg(test)]
mod at_rest_tests;
#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use axum::Router;
use axum::routing::{get, post};

pub use error::OAuthError;
pub use store::OAuthStore;

/// Which credentials the MCP endpoint accepts.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::Display,
    clap::ValueEnum,
)]
#[strum(serialize_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum AuthMode {
    /// The static token only (bearer header or capability URL `/mcp/<token>`); no OAuth endpoints.
    Token,
    /// OAuth access tokens only: the static token and the capability URL are refused.
    #[strum(serialize = "oauth")]
    #[value(name = "oauth")]
    OAuth,
    /// Both: OAuth for ChatGPT, the static token for scripts and other clients.
    Both,
}

impl AuthMode {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The static token (header or capability URL) is accepted.
    pub fn static_token(self) -> bool {
        matches!(self, AuthMode::Token | AuthMode::Both)
    }

    /// OAuth endpoints are served and OAuth access tokens accepted.
    pub fn oauth(self) -> bool {
        matches!(self, AuthMode::OAuth | AuthMode::Both)
    }
}

/// How the owner configured authentication (`--auth`, `--public-base`).
#[derive(Debug, Clone)]
pub struct AuthSettings {
    pub mode: AuthMode,
    /// `https://host[:port]` the tunnel serves this gateway at; `None`: the loopback address the
    /// gateway listens on (local clients only).
    pub public_base: Option<url::Url>,
    /// Lifetime of access tokens (`CLAUDE_TOOLS_OAUTH_ACCESS_TOKEN_TTL_SECONDS`, default 3600).
    pub access_token_ttl: Duration,
}

/// Lifetime of an access token unless configured.
pub const DEFAULT_ACCESS_TOKEN_TTL: Duration = Duration::from_secs(3600);
/// Lifetime of a refresh token; every refresh rotates it and starts a new one.
pub const REFRESH_TOKEN_TTL: Duration = Duration::from_secs(30 * 24 * 3600);
/// Lifetime of an authorization code (RFC 6749 recommends at most 10 minutes).
pub const CODE_TTL: Duration = Duration::from_secs(60);
/// The one scope: calling the gateway's MCP tools.
pub const SCOPE: &str = "mcp";

impl AuthSettings {
    /// Settings from the flags; `public_base` must be `https://host[:port]` (`http` only for a
    /// loopback host), without path, query or fragment.
    pub fn new(mode: AuthMode, public_base: Option<&str>) -> anyhow::Result<AuthSettings> {
        let public_base = public_base
            .filter(|s| !s.trim().is_empty())
            .map(parse_public_base)
            .transpose()?;
        let ttl = match std::env::var("CLAUDE_TOOLS_OAUTH_ACCESS_TOKEN_TTL_SECONDS") {
            Ok(v) => Duration::from_secs(
                v.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=86_400).contains(n))
                    .with_context(|| {
                        format!(
                            "CLAUDE_TOOLS_OAUTH_ACCESS_TOKEN_TTL_SECONDS must be 1 to 86400, got {v:?}"
                        )
                    })?,
            ),
            Err(_) => DEFAULT_ACCESS_TOKEN_TTL,
        };
        Ok(AuthSettings {
            mode,
            public_base,
            access_token_ttl: ttl,
        })
    }

    /// The issuer (also the public base) given the address the server is bound to.
    pub fn issuer(&self, bound: SocketAddr) -> String {
        match &self.public_base {
            Some(base) => base.as_str().trim_end_matches('/').to_string(),
            None => {
                let ip = if bound.ip().is_unspecified() {
                    std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
                } else {
                    bound.ip()
                };
                format!("http://{}", SocketAddr::new(ip, bound.port()))
            }
        }
    }

    /// Host header values the public base adds to the accepted ones.
    pub fn public_hosts(&self) -> Vec<String> {
        let Some(base) = &self.public_base else {
            return Vec::new();
        };
        let Some(host) = base.host_str() else {
            return Vec::new();
        };
        let mut hosts = vec![host.to_string()];
        if let Some(port) = base.port() {
            hosts.push(format!("{host}:{port}"));
        }
        hosts
    }
}

fn is_loopback_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    }
}

fn parse_public_base(text: &str) -> anyhow::Result<url::Url> {
    let url = url::Url::parse(text.trim())
        .with_context(|| format!("--public-base {text:?} is not a URL"))?;
    let Some(host) = url.host() else {
        bail!("--public-base {text:?} has no host");
    };
    match url.scheme() {
        "https" => {}
        "http" if is_loopback_host(&host) => {}
        _ => bail!("--public-base must be https://… (http only for a loopback host), got {text:?}"),
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        bail!(
            "--public-base must be an origin like https://gw.example.net, without path, query or fragment; got {text:?}"
        );
    }
    if !url.username().is_empty() || url.password().is_some() {
        bail!("--public-base must not carry credentials");
    }
    Ok(url)
}

/// The OAuth authorization server and its state, shared by the HTTP endpoints, the MCP auth layer
/// and the admin socket.
pub struct OAuth {
    pub mode: AuthMode,
    /// `https://host`: the issuer, and the base of every public URL.
    pub issuer: String,
    /// `<issuer>/mcp`: the protected resource, the audience of every access token.
    pub resource: String,
    pub access_token_ttl: Duration,
    pub store: OAuthStore,
    /// Issues and verifies the signed client ids.
    pub client_ids: client_id::ClientIds,
    /// Issues and verifies the signed consent requests and their CSRF tokens.
    pub request_ids: request_id::RequestIds,
    approvals: Mutex<approvals::Approvals>,
}

impl OAuth {
    /// The authorization server for `settings` bound at `bound`, over the state database in
    /// `state_dir` (already migrated by the gateway's store, which `ledger`
    /// holds: it chains the revocations).
    pub fn open(
        settings: &AuthSettings,
        bound: SocketAddr,
        state_dir: &std::path::Path,
        ledger: Arc<dyn revoked::Ledger>,
    ) -> anyhow::Result<Arc<OAuth>> {
        let issuer = settings.issuer(bound);
        let resource = format!("{issuer}/mcp");
        let key = crate::config::load_or_create_server_key(state_dir)?;
        let store =
            OAuthStore::open(state_dir, &key, ledger).context("opening the OAuth tables")?;
        Ok(Arc::new(OAuth {
            mode: settings.mode,
            issuer,
            resource,
            access_token_ttl: settings.access_token_ttl,
            store,
            client_ids: client_id::ClientIds::new(&key),
            request_ids: request_id::RequestIds::new(&key),
            approvals: Mutex::new(approvals::Approvals::default()),
        }))
    }

    fn approvals(&self) -> std::sync::MutexGuard<'_, approvals::Approvals> {
        self.approvals
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A new one-time approval code for the consent page the owner named by its page code, as
    /// shown to them: (approval code, page code, lifetime, the page as seen lately if it was).
    #[allow(clippy::type_complexity)]
    pub fn new_approval_code(
        &self,
        page: &str,
    ) -> Result<(String, String, Duration, Option<approvals::SeenPage>), approvals::NotAPageCode>
    {
        self.approvals()
            .new_approval_code(page, common::time::now_unix_ms())
    }

    /// The consent pages opened lately and still open, oldest first (for the owner's listings;
    /// a flood pushes pages out of this list, never out of approval).
    pub fn recent_pages(&self, now_ms: i64) -> Vec<approvals::SeenPage> {
        self.approvals().recent_pages(now_ms)
    }

    /// The client `client_id` names: a signed id this gateway issued (refused when the owner
    /// revoked it, although it verifies), or a client stored by an older gateway (schema 3 rows,
    /// looked up as before).
    pub fn resolve_client(&self, client_id: &str) -> Result<Client, ClientRefusal> {
        if client_id.starts_with(client_id::PREFIX) || client_id.len() > client_id::MAX_LEN {
            let signed = self.client_ids.verify(client_id)?;
            return match self.store.client_status(client_id)? {
                Some(store::ClientStatus::Revoked) => Err(ClientRefusal::Revoked),
                Some(store::ClientStatus::Active(_)) => Ok(Client::signed(client_id, signed, true)),
                None => Ok(Client::signed(client_id, signed, false)),
            };
        }
        match self.store.client_status(client_id)? {
            Some(store::ClientStatus::Active(row)) => Ok(Client {
                client_id: row.client_id,
                client_name: row.client_name,
                issued_at_ms: row.created_at_ms,
                stored: true,
                redirects: Redirects::Stored(row.redirect_uris),
            }),
            Some(store::ClientStatus::Revoked) => Err(ClientRefusal::Revoked),
            None => Err(ClientRefusal::Unknown),
        }
    }

    /// Where the protected resource's metadata is (the path-suffixed form of RFC 9728 §3.1).
    pub fn resource_metadata_url(&self) -> String {
        format!("{}/.well-known/oauth-protected-resource/mcp", self.issuer)
    }

    /// Whether `token` is a live access token for this resource: issued here, not expired, its
    /// grant and client not revoked, and its audience this gateway's resource.
    pub fn access_token_valid(&self, token: &str) -> Result<bool, store::OAuthStoreError> {
        if !token.starts_with(credentials::ACCESS_TOKEN_KIND) {
            return Ok(false);
        }
        self.store
            .access_token_valid(token, &self.resource, common::time::now_unix_ms())
    }
}

/// A client an endpoint may serve: verified, not revoked.
#[derive(Debug, Clone)]
pub struct Client {
    pub client_id: String,
    pub client_name: Option<String>,
    /// When it registered.
    pub issued_at_ms: i64,
    /// It has a row: the owner approved it before (or an older gateway registered it).
    pub stored: bool,
    redirects: Redirects,
}

/// Where a client's redirect URIs are known from.
#[derive(Debug, Clone)]
enum Redirects {
    /// Their hashes, in the signed id.
    Signed(client_id::SignedClient),
    /// A client an older gateway stored (schema 3), its URIs verbatim.
    Stored(Vec<String>),
}

impl Client {
    fn signed(client_id: &str, signed: client_id::SignedClient, stored: bool) -> Client {
        Client {
            client_id: client_id.to_string(),
            client_name: signed.client_name.clone(),
            issued_at_ms: signed.issued_at_ms,
            stored,
            redirects: Redirects::Signed(signed),
        }
    }

    /// Whether `uri` is exactly one of the redirect URIs the client registered.
    pub fn allows_redirect(&self, uri: &str) -> bool {
        match &self.redirects {
            Redirects::Signed(signed) => signed.allows_redirect(uri),
            Redirects::Stored(uris) => uris.iter().any(|r| r == uri),
        }
    }
}

/// Why a client id is not served.
#[derive(Debug, thiserror::Error)]
pub enum ClientRefusal {
    #[error(transparent)]
    Id(#[from] client_id::ClientIdError),
    #[error(
        "client_id was revoked by the gateway's owner; the owner must approve a new registration"
    )]
    Revoked,
    /// Not a signed id, and no stored client has it (the words the token endpoint always used).
    #[error("client_id is not a registered client of this gateway")]
    Unknown,
    #[error(transparent)]
    Store(#[from] store::OAuthStoreError),
}

impl From<ClientRefusal> for OAuthError {
    fn from(refusal: ClientRefusal) -> OAuthError {
        match refusal {
            ClientRefusal::Store(err) => err.into(),
            other => OAuthError::invalid_client(other.to_string()),
        }
    }
}

/// Largest body any OAuth endpoint reads (each bounds its own far below).
const MAX_BODY_BYTES: usize = 64 * 1024;

/// Read each request body within `timeout` and [`MAX_BODY_BYTES`] before a handler sees it, so
/// a slow or endless body cannot hold a connection (the MCP layer bounds its bodies the same way).
async fn bounded_body(
    axum::extract::State(timeout): axum::extract::State<Duration>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let (parts, body) = req.into_parts();
    let bytes =
        match tokio::time::timeout(timeout, axum::body::to_bytes(body, MAX_BODY_BYTES)).await {
            Ok(Ok(bytes)) => bytes,
            Ok(Err(_)) => {
                return OAuthError::new(
                    http::StatusCode::PAYLOAD_TOO_LARGE,
                    "invalid_request",
                    format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
                )
                .into_response();
            }
            Err(_) => {
                let mut response = OAuthError::new(
                    http::StatusCode::REQUEST_TIMEOUT,
                    "invalid_request",
                    "the request body was not received in time",
                )
                .into_response();
                response.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
                return response;
            }
        };
    next.run(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
    .await
}

/// Let browser-based MCP clients call the endpoints a client calls itself (discovery,
/// registration, token): any origin may read their answers (`*`, never with credentials), and a
/// preflight is answered. The authorization endpoint is left out: it is a page the browser
/// navigates to, and another site must not read its form.
async fn open_cors(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let any_origin = http::HeaderValue::from_static("*");
    if req.method() == http::Method::OPTIONS {
        let mut response = http::StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        headers.insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, any_origin);
        headers.insert(
            http::header::ACCESS_CONTROL_ALLOW_METHODS,
            http::HeaderValue::from_static("GET, POST"),
        );
        headers.insert(
            http::header::ACCESS_CONTROL_ALLOW_HEADERS,
            http::HeaderValue::from_static("authorization, content-type, mcp-protocol-version"),
        );
        headers.insert(
            http::header::ACCESS_CONTROL_MAX_AGE,
            http::HeaderValue::from_static("600"),
        );
        return response;
    }
    let mut response = next.run(req).await;
    response
        .headers_mut()
        .insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, any_origin);
    response
}

/// The OAuth endpoints: metadata documents, registration, authorization with the consent page,
/// and the token endpoint. Bodies must arrive within `body_timeout`.
pub fn routes(oauth: Arc<OAuth>, body_timeout: Duration) -> Router {
    let client_facing = Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            get(metadata::protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(metadata::protected_resource),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(metadata::authorization_server),
        )
        .route("/oauth/register", post(registration::register))
        .route("/oauth/token", post(token::token))
        .route_layer(axum::middleware::from_fn(open_cors));
    Router::new()
        .route(
            "/oauth/authorize",
            get(authorize::show_consent).post(authorize::decide),
        )
        .merge(client_facing)
        .layer(axum::middleware::from_fn_with_state(
            body_timeout,
            bounded_body,
        ))
        .with_state(oauth)
}
