//! What the OAuth credentials look like: the prefixes of tokens and codes (a leaked value says
//! what it is) and PKCE S256 (RFC 7636): the verifier and challenge formats and the check. Shared
//! by the authorization endpoint, the token endpoint and the store.

use base64::Engine;

/// Prefix of access tokens (a leaked value says what it is).
pub const ACCESS_TOKEN_KIND: &str = "ngw_at";
/// Prefix of refresh tokens.
pub const REFRESH_TOKEN_KIND: &str = "ngw_rt";
/// Prefix of authorization codes.
pub const CODE_KIND: &str = "ngw_code";

/// A PKCE verifier as RFC 7636 §4.1 defines it: 43 to 128 unreserved characters.
pub fn verifier_well_formed(verifier: &str) -> bool {
    (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// A S256 code challenge: base64url (no padding) of a SHA-256, 43 characters.
pub fn challenge_well_formed(challenge: &str) -> bool {
    challenge.len() == 43
        && challenge
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// `BASE64URL(SHA256(verifier)) == challenge`, compared in constant time.
pub fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(verifier.as_bytes());
    let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest);
    common::hash::constant_time_eq(computed.as_bytes(), challenge.as_bytes())
}
