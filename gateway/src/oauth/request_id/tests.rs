//! Unit tests of the signed consent requests: round trip, every altered byte, other keys and the
//! other kind of sealed id, cuts, oversize, another version, expiry, CSRF tokens, page codes.

#![allow(clippy::unwrap_used)]

use super::*;

const NOW: i64 = 1_733_100_000_000;

fn request(state: Option<&str>) -> ConsentRequest {
    ConsentRequest {
        client_id: "ngc_AQ".into(),
        redirect_uri: "https://chatgpt.com/connector_platform_oauth_redirect".into(),
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM".into(),
        code_challenge_method: "S256".into(),
        state: state.map(str::to_string),
        scope: "mcp".into(),
        resource: "https://gw.example.net/mcp".into(),
        issued_at_ms: NOW,
        page: new_page_code(),
    }
}

#[test]
fn an_issued_request_verifies_until_it_expires() {
    let ids = RequestIds::new("server-key");
    let wanted = request(Some("st-1"));
    let id = ids.issue(&wanted);
    assert!(id.starts_with(PREFIX));
    assert_eq!(ids.verify(&id, NOW).unwrap(), wanted);
    let ttl = i64::try_from(crate::oauth::request_id::REQUEST_TTL.as_millis()).unwrap();
    assert_eq!(ids.verify(&id, NOW + ttl - 1).unwrap(), wanted);
    assert_eq!(ids.verify(&id, NOW + ttl), Err(RequestIdError::Expired));
    // Two pages of the same request: different ids, page codes and CSRF tokens.
    let again = ids.issue(&request(Some("st-1")));
    assert_ne!(again, id);
    assert_ne!(ids.csrf(&again), ids.csrf(&id));
    // The largest request fits under the length bound (`state` of 1024 control characters).
    let big = ConsentRequest {
        client_id: "c".repeat(crate::oauth::client_id::MAX_LEN),
        redirect_uri: format!("https://a.example/{}", "\\".repeat(1980)),
        ..request(Some(&"\u{1}".repeat(1024)))
    };
    let big_id = ids.issue(&big);
    assert!(big_id.len() <= MAX_LEN, "{} bytes", big_id.len());
    assert_eq!(ids.verify(&big_id, NOW).unwrap(), big);
}

#[test]
fn altered_cut_foreign_oversized_and_other_versions_are_refused_by_name() {
    let ids = RequestIds::new("server-key");
    let id = ids.issue(&request(None));
    // Every byte of the encoded id changed in turn.
    for i in PREFIX.len()..id.len() {
        let mut bytes = id.clone().into_bytes();
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(bytes).unwrap();
        let err = ids.verify(&altered, NOW).unwrap_err();
        assert!(
            matches!(err, RequestIdError::Forged | RequestIdError::Malformed),
            "byte {i}: {err:?}"
        );
    }
    // Cut short: a character less is not base64 any more, a byte less does not verify.
    assert!(matches!(
        ids.verify(&id[..id.len() - 1], NOW),
        Err(RequestIdError::Malformed | RequestIdError::Forged)
    ));
    let engine = &base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut bytes = engine.decode(&id[PREFIX.len()..]).unwrap();
    bytes.pop();
    let cut = format!("{PREFIX}{}", engine.encode(&bytes));
    assert_eq!(ids.verify(&cut, NOW), Err(RequestIdError::Forged));
    assert_eq!(ids.verify("ngr_AAAA", NOW), Err(RequestIdError::Malformed));
    assert_eq!(ids.verify("req_x", NOW), Err(RequestIdError::Malformed));
    assert_eq!(
        RequestIds::new("another-key").verify(&id, NOW),
        Err(RequestIdError::Forged)
    );
    assert_eq!(
        ids.verify(&"A".repeat(MAX_LEN + 1), NOW),
        Err(RequestIdError::Oversized)
    );
    assert_eq!(
        ids.verify(&ids.issue_version(2, &request(None)), NOW),
        Err(RequestIdError::UnknownVersion(2))
    );
    // A client id sealed under the same key is not a request id (its own label).
    let client = crate::oauth::client_id::ClientIds::new("server-key")
        .issue(&crate::oauth::client_id::SignedClient::new(NOW, None, &[]));
    let as_request = format!("{PREFIX}{}", client.trim_start_matches("ngc_"));
    assert_eq!(ids.verify(&as_request, NOW), Err(RequestIdError::Forged));
    // The CSRF token depends on the key.
    assert_ne!(RequestIds::new("another-key").csrf(&id), ids.csrf(&id));
}

#[test]
fn page_codes_parse_in_any_case_with_or_without_the_dash() {
    let code = new_page_code();
    assert_eq!(code.len(), PAGE_CODE_LEN);
    let shown = show_page_code(&code);
    assert_eq!(shown.len(), PAGE_CODE_LEN + 1);
    assert_eq!(parse_page_code(&shown).as_deref(), Some(code.as_str()));
    assert_eq!(
        parse_page_code(&format!(" {} ", shown.to_uppercase())).as_deref(),
        Some(code.as_str())
    );
    for bad in [
        "",
        "abcd-234",
        "abcd-23456",
        "abcd-234l",
        "abcd-2340",
        "ABCD-EFGH-",
    ] {
        assert_eq!(
            parse_page_code(bad).filter(|_| bad.len() != 10),
            None,
            "{bad}"
        );
    }
}
