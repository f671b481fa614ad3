//! `connector-url --public-base https://host`: the capability URL `https://host/mcp/<token>` for a
//! ChatGPT connector that cannot send headers. The URL is a secret; the command says so on stderr.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, bail};
use serde_json::json;

use crate::{ConnectorArgs, write_json};

/// The warning printed with the URL.
pub const WARNING: &str = "this URL contains the gateway's access token: anyone who has it can drive sessions. \
Paste it only into the ChatGPT connector settings; do not share or log it.";

/// Check a public base URL and return it without a trailing slash. HTTPS is required unless the
/// host is loopback.
pub fn normalize_base(base: &str) -> anyhow::Result<String> {
    let base = base.trim().trim_end_matches('/');
    let (scheme, rest) = base
        .split_once("://")
        .context("the public base must be a URL like https://host")?;
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') {
        bail!("the public base must name a host (no user info): {base}");
    }
    if rest.contains(['?', '#']) {
        bail!("the public base must not carry a query or fragment: {base}");
    }
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match scheme.to_ascii_lowercase().as_str() {
        "https" => {}
        "http" if loopback => {}
        "http" => bail!(
            "refusing a plain http base for a non-loopback host ({host}): the token would cross \
             the network in clear text; use https"
        ),
        other => bail!("unsupported scheme {other:?}; use https"),
    }
    Ok(base.to_string())
}

fn token(state_dir: &Path, args: &ConnectorArgs) -> anyhow::Result<String> {
    if let Some(token) = args.token.as_deref().filter(|t| !t.is_empty()) {
        return Ok(token.to_string());
    }
    let path = state_dir.join("auth").join("access-token");
    let token = std::fs::read_to_string(&path)
        .with_context(|| format!("reading the access token from {}", path.display()))?;
    let token = token.trim();
    if token.is_empty() {
        bail!("{} is empty", path.display());
    }
    Ok(token.to_string())
}

/// `connector-url`.
pub fn run(
    state_dir: &Path,
    args: &ConnectorArgs,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let base = normalize_base(&args.public_base)?;
    let token = token(state_dir, args)?;
    if token.contains(['/', '?', '#', ' ']) {
        bail!("the access token has characters that cannot go in a URL path");
    }
    let url = format!("{base}/mcp/{token}");
    if json {
        return write_json(out, &json!({"url": url, "warning": WARNING}));
    }
    eprintln!("gatewayctl: warning: {WARNING}");
    writeln!(out, "{url}")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases() {
        assert_eq!(
            normalize_base("https://gw.example.net/").unwrap(),
            "https://gw.example.net"
        );
        assert!(normalize_base("http://127.0.0.1:8787").is_ok());
        assert!(normalize_base("http://localhost:8787").is_ok());
        assert!(normalize_base("http://[::1]:8787").is_ok());
        assert!(normalize_base("http://gw.example.net").is_err());
        assert!(normalize_base("http://127.0.0.1.evil.net").is_err());
        assert!(normalize_base("ftp://gw.example.net").is_err());
        assert!(normalize_base("gw.example.net").is_err());
        assert!(normalize_base("https://user@gw.example.net").is_err());
    }
}
