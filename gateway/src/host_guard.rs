//! The Host allow-list in front of every HTTP route (`/mcp` with or without credentials, the OAuth
//! endpoints, the metadata documents, unknown paths): a request whose Host is not one of ours is
//! refused with 403 before any handler, so a DNS-rebinding page can reach nothing.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

/// One allowed Host value: a host name or address, and a port when the entry names one.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Authority {
    host: String,
    port: Option<u16>,
}

impl Authority {
    /// `host`, `host:port`, `v6`, `[v6]` or `[v6]:port`, case-insensitive; None for anything
    /// else (user info, a port that is not a number, characters no host name has).
    fn parse(text: &str) -> Option<Authority> {
        let text = text.trim();
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (v6, after) = rest.split_once(']')?;
            v6.parse::<std::net::Ipv6Addr>().ok()?;
            let port = match after {
                "" => None,
                after => Some(after.strip_prefix(':')?),
            };
            (v6, port)
        } else if text.parse::<std::net::Ipv6Addr>().is_ok() {
            (text, None)
        } else {
            match text.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (text, None),
            }
        };
        let port = match port {
            Some(port) => Some(port.parse::<u16>().ok()?),
            None => None,
        };
        let name_chars = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
        let v6 = host.parse::<std::net::Ipv6Addr>().is_ok();
        if host.is_empty() || !(v6 || host.chars().all(name_chars)) {
            return None;
        }
        Some(Authority {
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

/// Whether `entry` can be an allowed Host (`host`, `host:port`, an IPv6 address); checked at start.
pub fn is_valid_entry(entry: &str) -> bool {
    Authority::parse(entry).is_some()
}

/// The Host values the gateway answers: loopback names, `--allowed-host` entries and the public
/// base's host. An entry without a port allows any port.
#[derive(Debug, Clone)]
pub struct AllowedHosts {
    entries: Arc<Vec<Authority>>,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostRefusal {
    Missing,
    Malformed,
    NotAllowed,
}

impl AllowedHosts {
    /// The loopback names plus `extra` (entries that are not a host or `host:port` are ignored:
    /// the configuration was checked at start).
    pub fn new<'a>(extra: impl IntoIterator<Item = &'a str>) -> Self {
        let entries = ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .chain(extra)
            .filter_map(Authority::parse)
            .collect();
        AllowedHosts {
            entries: Arc::new(entries),
        }
    }

    /// Whether a request with these headers (and, for HTTP/2, this URI's authority) may pass.
    pub fn check(&self, uri: &http::Uri, headers: &http::HeaderMap) -> Result<(), HostRefusal> {
        let presented = match headers.get(http::header::HOST) {
            Some(value) => {
                let text = value.to_str().map_err(|_| HostRefusal::Malformed)?;
                Authority::parse(text).ok_or(HostRefusal::Malformed)?
            }
            None => match uri.authority() {
                Some(authority) => {
                    Authority::parse(authority.as_str()).ok_or(HostRefusal::Malformed)?
                }
                None => return Err(HostRefusal::Missing),
            },
        };
        let allowed = self.entries.iter().any(|entry| {
            entry.host == presented.host && entry.port.is_none_or(|p| presented.port == Some(p))
        });
        if allowed {
            Ok(())
        } else {
            Err(HostRefusal::NotAllowed)
        }
    }
}

/// Middleware: refuse a request whose Host is not allowed, on every route.
pub async fn require_allowed_host(
    State(allowed): State<AllowedHosts>,
    req: Request,
    next: Next,
) -> Response {
    match allowed.check(req.uri(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err(refusal) => {
            tracing::warn!(?refusal, "refused a request by its Host header");
            let (status, message) = match refusal {
                HostRefusal::Missing => (
                    StatusCode::BAD_REQUEST,
                    "Bad Request: the request has no Host header",
                ),
                HostRefusal::Malformed => (
                    StatusCode::BAD_REQUEST,
                    "Bad Request: the Host header is not a host name or address",
                ),
                HostRefusal::NotAllowed => (
                    StatusCode::FORBIDDEN,
                    "Forbidden: this Host is not allowed. The owner can allow a tunnel's host with \
                     `gateway serve --public-base https://HOST` or `--allowed-host HOST`.",
                ),
            };
            let mut response = (status, message).into_response();
            response.headers_mut().insert(
                http::header::CONNECTION,
                http::HeaderValue::from_static("close"),
            );
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(allowed: &AllowedHosts, host: Option<&str>) -> Result<(), HostRefusal> {
        let mut headers = http::HeaderMap::new();
        if let Some(host) = host {
            headers.insert(
                http::header::HOST,
                http::HeaderValue::from_bytes(host.as_bytes()).unwrap(),
            );
        }
        allowed.check(&http::Uri::from_static("/mcp"), &headers)
    }

    #[test]
    fn loopback_names_and_configured_hosts_pass_on_any_port_unless_pinned() {
        let allowed = AllowedHosts::new(["gw.example.net", "pinned.example:8443"]);
        for ok in [
            "localhost",
            "localhost:8787",
            "LOCALHOST:1",
            "127.0.0.1:8787",
            "[::1]:8787",
            "[::1]",
            "gw.example.net",
            "GW.Example.NET:443",
            "pinned.example:8443",
        ] {
            assert_eq!(check(&allowed, Some(ok)), Ok(()), "{ok}");
        }
        for refused in [
            "evil.example",
            "gw.example.net.evil.example",
            "example.net",
            "pinned.example",
            "pinned.example:443",
            "127.0.0.2",
            "localhost.evil.example",
        ] {
            assert_eq!(
                check(&allowed, Some(refused)),
                Err(HostRefusal::NotAllowed),
                "{refused}"
            );
        }
    }

    #[test]
    fn missing_malformed_and_userinfo_hosts_are_refused() {
        let allowed = AllowedHosts::new([]);
        assert_eq!(check(&allowed, None), Err(HostRefusal::Missing));
        for bad in [
            "",
            "local host",
            "user@localhost",
            "localhost:port",
            "localhost:",
            "a:b:80",
            "a b:80",
        ] {
            assert!(check(&allowed, Some(bad)).is_err(), "{bad:?}");
        }
        assert_eq!(
            check(&allowed, Some("user@localhost")),
            Err(HostRefusal::Malformed)
        );
    }

    #[test]
    fn an_http2_authority_counts_when_there_is_no_host_header() {
        let allowed = AllowedHosts::new([]);
        let uri: http::Uri = "http://localhost:8787/mcp".parse().unwrap();
        assert_eq!(allowed.check(&uri, &http::HeaderMap::new()), Ok(()));
        let uri: http::Uri = "http://evil.example/mcp".parse().unwrap();
        assert_eq!(
            allowed.check(&uri, &http::HeaderMap::new()),
            Err(HostRefusal::NotAllowed)
        );
    }
}
