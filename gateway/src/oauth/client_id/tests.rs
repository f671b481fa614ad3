//! Unit tests of the signed client ids: round trip, every altered byte, other keys, cuts,
//! oversize, and another version.

#![allow(clippy::unwrap_used)]

use super::*;

fn chatgpt() -> SignedClient {
    SignedClient::new(
        1_733_100_000_000,
        Some("ChatGPT".into()),
        &["https://chatgpt.com/connector_platform_oauth_redirect".into()],
    )
}

#[test]
fn an_issued_id_verifies_and_gives_back_its_client() {
    let ids = ClientIds::new("server-key");
    let id = ids.issue(&chatgpt());
    assert!(id.starts_with(PREFIX));
    assert!(id.len() < 200, "{} bytes", id.len());
    let client = ids.verify(&id).unwrap();
    assert_eq!(client, chatgpt());
    assert!(client.allows_redirect("https://chatgpt.com/connector_platform_oauth_redirect"));
    assert!(!client.allows_redirect("https://chatgpt.com/connector_platform_oauth_redirect/"));
    assert!(!client.allows_redirect("https://evil.example/cb"));
    // The largest registration fits under the length bound.
    let uris: Vec<String> = (0..8)
        .map(|i| format!("https://a.example/{i}/{}", "x".repeat(1900)))
        .collect();
    let big = SignedClient::new(i64::MAX, Some("\u{10348}".repeat(100)), &uris);
    let id = ids.issue(&big);
    assert!(id.len() <= MAX_LEN, "{} bytes", id.len());
    assert_eq!(ids.verify(&id).unwrap(), big);
    // Two registrations of the same client at different times: different ids.
    let again = SignedClient {
        issued_at_ms: 1,
        ..chatgpt()
    };
    assert_ne!(ids.issue(&again), ids.issue(&chatgpt()));
}

#[test]
fn an_altered_truncated_oversized_or_foreign_id_is_refused() {
    let ids = ClientIds::new("server-key");
    let id = ids.issue(&chatgpt());
    // Each character changed in turn (payload, version and MAC alike).
    for at in PREFIX.len()..id.len() {
        let mut bytes = id.clone().into_bytes();
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(bytes).unwrap();
        let err = ids.verify(&altered).unwrap_err();
        assert!(
            matches!(err, ClientIdError::Forged | ClientIdError::Malformed),
            "{at}: {err:?}"
        );
    }
    assert_eq!(
        ClientIds::new("another-key").verify(&id),
        Err(ClientIdError::Forged)
    );
    for cut in [id.len() - 1, id.len() - 43, PREFIX.len() + 10, PREFIX.len()] {
        assert!(ids.verify(&id[..cut]).is_err(), "{cut}");
    }
    assert_eq!(
        ids.verify(&format!("{id}{}", "A".repeat(MAX_LEN))),
        Err(ClientIdError::Oversized)
    );
    for junk in ["", "ngc_", "ngc_!!!", "client_0123", "ngc_AAAA"] {
        assert_eq!(ids.verify(junk), Err(ClientIdError::Malformed), "{junk}");
    }
}

#[test]
fn an_id_of_another_version_is_refused_by_name_even_when_signed() {
    let ids = ClientIds::new("server-key");
    let future = ids.issue_version(2, &chatgpt());
    assert_eq!(ids.verify(&future), Err(ClientIdError::UnknownVersion(2)));
    assert!(
        ClientIdError::UnknownVersion(2)
            .to_string()
            .contains("register the client again")
    );
    // Unsigned, the version is never looked at.
    assert_eq!(
        ClientIds::new("other").verify(&future),
        Err(ClientIdError::Forged)
    );
}
