//! The DeepSeek route: where a sub-session's model requests go (the configured base URL, checked
//! at start), which DeepSeek model answers which Claude family (fixed, no fallback), and the key,
//! which lives only in this process.

use std::time::Duration;

use anyhow::{Context, bail};

/// DeepSeek's public Anthropic-compatible endpoint.
pub const DEFAULT_BASE_URL: &str = "https://api.deepseek.com/anthropic";
/// The tiers' model ids as DeepSeek's docs name them.
pub const DEFAULT_FLASH_MODEL: &str = "deepseek-flash";
pub const DEFAULT_PRO_MODEL: &str = "deepseek-v4-pro";
/// How long one upstream request may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The API key, never shown: `Debug` prints a placeholder.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: String) -> ApiKey {
        ApiKey(key)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// The DeepSeek route of this gateway.
#[derive(Debug, Clone)]
pub struct DeepseekRoute {
    /// `…/v1/messages` is appended. TLS, or plain HTTP to a loopback address (tests).
    pub base_url: url::Url,
    pub flash_model: String,
    pub pro_model: String,
    /// `DEEPSEEK_API_KEY`; without it a sub-session start fails with a clear message.
    pub api_key: Option<ApiKey>,
    pub timeout: Duration,
}

/// Which tier a Claude model family maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Flash,
    Pro,
}

impl DeepseekRoute {
    /// From `CLAUDE_TOOLS_DEEPSEEK_BASE_URL`, `CLAUDE_TOOLS_DEEPSEEK_FLASH_MODEL`,
    /// `CLAUDE_TOOLS_DEEPSEEK_PRO_MODEL`, `CLAUDE_TOOLS_DEEPSEEK_TIMEOUT_SECONDS` and
    /// `DEEPSEEK_API_KEY`. A malformed value stops the gateway at start.
    pub fn from_env() -> anyhow::Result<DeepseekRoute> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let base = var("CLAUDE_TOOLS_DEEPSEEK_BASE_URL").unwrap_or(DEFAULT_BASE_URL.into());
        // The refusal never repeats the value: it may hold credentials.
        let base_url = check_base_url(&base).context("CLAUDE_TOOLS_DEEPSEEK_BASE_URL")?;
        let model = |name: &str, default: &str| -> anyhow::Result<String> {
            let value = var(name).unwrap_or(default.into());
            let ok = value.len() <= 128
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._:/".contains(&b));
            if !ok {
                bail!(
                    "{name} must be a model id ([A-Za-z0-9-._:/], at most 128 bytes), got {value:?}"
                );
            }
            Ok(value)
        };
        let timeout = match var("CLAUDE_TOOLS_DEEPSEEK_TIMEOUT_SECONDS") {
            None => DEFAULT_TIMEOUT,
            Some(v) => Duration::from_secs(
                v.trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=3600).contains(n))
                    .with_context(|| {
                        format!(
                            "CLAUDE_TOOLS_DEEPSEEK_TIMEOUT_SECONDS must be 1 to 3600, got {v:?}"
                        )
                    })?,
            ),
        };
        Ok(DeepseekRoute {
            base_url,
            flash_model: model("CLAUDE_TOOLS_DEEPSEEK_FLASH_MODEL", DEFAULT_FLASH_MODEL)?,
            pro_model: model("CLAUDE_TOOLS_DEEPSEEK_PRO_MODEL", DEFAULT_PRO_MODEL)?,
            api_key: std::env::var("DEEPSEEK_API_KEY")
                .ok()
                .filter(|k| !k.trim().is_empty())
                .map(ApiKey),
            timeout,
        })
    }

    /// A route to `base_url` with the default models (tests).
    #[cfg(test)]
    pub fn for_tests(base_url: &str, api_key: Option<&str>) -> DeepseekRoute {
        DeepseekRoute {
            base_url: check_base_url(base_url).expect("a valid test base URL"),
            flash_model: DEFAULT_FLASH_MODEL.into(),
            pro_model: DEFAULT_PRO_MODEL.into(),
            api_key: api_key.map(|k| ApiKey(k.to_string())),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The tier of a Claude model name: Sonnet and Opus → Flash, Fable → Pro, anything else
    /// none (that request fails; nothing falls back).
    pub fn tier(requested: &str) -> Option<Tier> {
        let name = requested.to_ascii_lowercase();
        if name.contains("fable") {
            Some(Tier::Pro)
        } else if name.contains("sonnet") || name.contains("opus") {
            Some(Tier::Flash)
        } else {
            None
        }
    }

    /// The explicit DeepSeek model id for a requested Claude model.
    pub fn model_for(&self, requested: &str) -> Option<&str> {
        Self::tier(requested).map(|tier| match tier {
            Tier::Flash => self.flash_model.as_str(),
            Tier::Pro => self.pro_model.as_str(),
        })
    }

    /// What the SessionView shows as `deepseek_route`.
    pub fn describe(&self) -> String {
        format!(
            "sonnet,opus->{}; fable->{}; via {}; no fallback",
            self.flash_model,
            self.pro_model,
            self.public_endpoint()
        )
    }

    /// The endpoint without anything private (no path query, no credentials: none are allowed).
    pub fn public_endpoint(&self) -> String {
        self.base_url.as_str().trim_end_matches('/').to_string()
    }

    /// Where model requests are posted.
    pub fn messages_url(&self) -> String {
        format!("{}/v1/messages", self.public_endpoint())
    }
}

/// TLS, or plain HTTP only to a loopback address; no credentials, query or fragment.
pub fn check_base_url(text: &str) -> anyhow::Result<url::Url> {
    let url = url::Url::parse(text.trim()).context("not a URL")?;
    if !url.username().is_empty() || url.password().is_some() {
        bail!("must not carry credentials");
    }
    if url.query().is_some() || url.fragment().is_some() {
        bail!("must not have a query or fragment");
    }
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        // A name is resolved at request time; only a literal loopback address is sure.
        Some(url::Host::Domain(_)) => false,
        None => bail!("has no host"),
    };
    match url.scheme() {
        "https" => Ok(url),
        "http" if loopback => Ok(url),
        "http" => {
            bail!("plain http is allowed only to a literal loopback address (tests); use https")
        }
        other => bail!("scheme {other:?} is not https"),
    }
}
