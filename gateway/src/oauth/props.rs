//! Property tests of OAuth parameter parsing: client registration and the signed client id it
//! issues, the authorize query and the token form (one parser), redirect URIs and PKCE. No panic
//! on any input, refusals are typed `OAuthError`s with a 4xx status, what is accepted meets the
//! rules the refusals enforce, and every issued client id verifies back to its registration.
//! `PROPTEST_CASES` sets the number of cases.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::client_id::ClientIds;
use super::credentials::{challenge_well_formed, pkce_matches, verifier_well_formed};
use super::registration::{check_redirect_uri, parse_registration};
use super::token::parse_form;

fn redirect_uri() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("https://chatgpt.com/connector_platform_oauth_redirect".to_string()),
        Just("http://127.0.0.1:8080/cb".to_string()),
        Just("http://[::1]/cb".to_string()),
        Just("http://example.com/cb".to_string()),
        Just("https://user:pw@example.com/".to_string()),
        Just("https://example.com/#frag".to_string()),
        "(https?|ftp|javascript)://[a-z0-9.:@\\[\\]-]{0,30}(/[ -~]{0,30})?",
        ".{0,60}",
    ]
}

fn registration() -> impl Strategy<Value = Value> {
    let strings = |s: BoxedStrategy<String>| prop::collection::vec(s, 0..4);
    (
        strings(redirect_uri().boxed()),
        strings(
            prop_oneof![
                Just("authorization_code".to_string()),
                Just("refresh_token".to_string()),
                ".{0,12}"
            ]
            .boxed(),
        ),
        strings(prop_oneof![Just("code".to_string()), ".{0,8}"].boxed()),
        prop_oneof![
            Just(Value::Null),
            ".{0,80}".prop_map(Value::String),
            Just(json!(5))
        ],
        any::<bool>(),
    )
        .prop_map(|(uris, grants, types, name, extra)| {
            let mut body = json!({"redirect_uris": uris, "grant_types": grants,
                                  "response_types": types, "client_name": name});
            if extra {
                body["token_endpoint_auth_method"] = json!("none");
                body["redirect_uris"] = json!("not a list");
            }
            body
        })
}

proptest! {
    /// Any query string or form body: parameters or a typed refusal; what is accepted
    /// re-encodes to the same parameters.
    #[test]
    fn forms_and_queries_round_trip(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        match parse_form(&bytes) {
            Ok(params) => {
                let mut serializer = url::form_urlencoded::Serializer::new(String::new());
                for (k, v) in &params {
                    serializer.append_pair(k, v);
                }
                let again = parse_form(serializer.finish().as_bytes()).unwrap_or_default();
                prop_assert_eq!(again, params);
            }
            Err(err) => prop_assert!(err.status.is_client_error()),
        }
    }

    /// Well-formed pairs with repeated keys: a repeated key is always refused.
    #[test]
    fn repeated_parameters_are_refused(pairs in prop::collection::vec(("[a-c]", ".{0,10}"), 0..6)) {
        let mut serializer = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in &pairs {
            serializer.append_pair(k, v);
        }
        let mut keys: Vec<&String> = pairs.iter().map(|(k, _)| k).collect();
        keys.sort();
        let repeated = keys.windows(2).any(|w| w[0] == w[1]);
        prop_assert_eq!(parse_form(serializer.finish().as_bytes()).is_err(), repeated);
    }

    /// Any redirect URI: accepted only if https, or http to a loopback host, without fragment
    /// or credentials.
    #[test]
    fn redirect_uris_are_checked(uri in redirect_uri()) {
        if check_redirect_uri(&uri).is_ok() {
            let parsed = url::Url::parse(&uri).unwrap();
            prop_assert!(parsed.scheme() == "https" || parsed.scheme() == "http");
            prop_assert!(parsed.fragment().is_none());
            prop_assert!(parsed.username().is_empty() && parsed.password().is_none());
        }
    }

    /// Any registration body (bytes, or JSON shaped like one): a client whose every redirect URI
    /// passes the check, or a 4xx refusal.
    #[test]
    fn registrations_never_panic(body in registration(), bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        match parse_registration(body.to_string().as_bytes(), 1) {
            Ok(registration) => {
                for uri in body["redirect_uris"].as_array().into_iter().flatten() {
                    prop_assert!(check_redirect_uri(uri.as_str().unwrap_or("")).is_ok());
                }
                // Round trip: the id verifies to what was registered, and allows exactly its
                // redirect URIs.
                let ids = ClientIds::new("server-key");
                let id = ids.issue(&registration.signed());
                prop_assert!(id.len() <= super::client_id::MAX_LEN);
                let signed = ids.verify(&id);
                prop_assert_eq!(signed.as_ref().ok(), Some(&registration.signed()));
                for uri in &registration.redirect_uris {
                    prop_assert!(signed.as_ref().is_ok_and(|s| s.allows_redirect(uri)));
                }
                prop_assert!(ClientIds::new("another key").verify(&id).is_err());
            }
            Err(err) => prop_assert!(err.status.is_client_error()),
        }
        if let Err(err) = parse_registration(&bytes, 1) {
            prop_assert!(err.status.is_client_error());
        }
    }

    /// Any text as a client id: refused with a typed error, never a panic, unless issued here.
    #[test]
    fn client_ids_never_panic(id in prop_oneof![".{0,80}", "ngc_[A-Za-z0-9_-]{0,300}"]) {
        prop_assert!(ClientIds::new("server-key").verify(&id).is_err());
    }

    /// PKCE: the S256 challenge of any well-formed verifier is well-formed and matches it only.
    #[test]
    fn pkce_matches_only_its_verifier(verifier in "[A-Za-z0-9._~-]{43,128}", other in ".{0,130}") {
        use base64::Engine;
        use sha2::Digest;
        prop_assert!(verifier_well_formed(&verifier));
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(verifier.as_bytes()));
        prop_assert!(challenge_well_formed(&challenge));
        prop_assert!(pkce_matches(&verifier, &challenge));
        if other != verifier {
            prop_assert!(!pkce_matches(&other, &challenge));
        }
        let _ = verifier_well_formed(&other);
        let _ = challenge_well_formed(&other);
    }
}
