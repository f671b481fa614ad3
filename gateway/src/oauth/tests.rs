//! Unit tests of the OAuth pieces that need no HTTP: PKCE, redirect URIs, registration requests,
//! the public base, the consent page's escaping and CSP,
//! and the store's one-use codes and refresh rotation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::credentials::{challenge_well_formed, pkce_matches, verifier_well_formed};
use super::registration::{check_redirect_uri, parse_registration};
use super::store::{CodeRow, OAuthStore, TokenRequest};
use super::*;

#[test]
fn pkce_s256_matches_the_rfc_7636_example() {
    // RFC 7636 appendix B.
    let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
    assert!(verifier_well_formed(verifier));
    assert!(challenge_well_formed(challenge));
    assert!(pkce_matches(verifier, challenge));
    assert!(!pkce_matches(&verifier.replace('d', "e"), challenge));
    assert!(!verifier_well_formed(&"a".repeat(42)));
    assert!(!verifier_well_formed(&"a".repeat(129)));
    assert!(!verifier_well_formed(&format!("{}+", "a".repeat(43))));
    assert!(!challenge_well_formed(&format!("{challenge}=")));
}

#[test]
fn redirect_uris_must_be_https_or_loopback_http() {
    for good in [
        "https://chatgpt.com/connector_platform_oauth_redirect",
        "http://127.0.0.1:33418/callback",
        "http://localhost/cb",
        "http://[::1]:8080/cb",
        "https://a.example/cb?x=1",
    ] {
        assert!(check_redirect_uri(good).is_ok(), "{good}");
    }
    for bad in [
        "http://a.example/cb",
        "http://127.0.0.1.evil.example/cb",
        "https://a.example/cb#f",
        "https://u:p@a.example/cb",
        "javascript:alert(1)",
        "data:text/html,hi",
        "custom-scheme://cb",
        "/relative",
        "",
    ] {
        let err = check_redirect_uri(bad).unwrap_err();
        assert_eq!(err.error, "invalid_redirect_uri", "{bad}");
    }
}

#[test]
fn registration_keeps_redirect_uris_verbatim_and_names_bounded() {
    let body = br#"{"redirect_uris": ["https://a.example/cb/"], "client_name": "  ChatGPT  "}"#;
    let client = parse_registration(body, 5).unwrap();
    assert_eq!(client.redirect_uris, ["https://a.example/cb/"]);
    assert_eq!(client.client_name.as_deref(), Some("ChatGPT"));
    assert_eq!(client.issued_at_ms, 5);
    let many = serde_json::json!({"redirect_uris": vec!["https://a.example/cb"; 9]});
    let err = parse_registration(many.to_string().as_bytes(), 0).unwrap_err();
    assert_eq!(err.error, "invalid_redirect_uri");
    // Issue 23: a name the owner reads cannot carry controls or bidi tricks, nor be long.
    for name in [
        "Chat\u{1b}[2JGPT",
        "ChatGPT\u{202e}gnp.exe",
        "Chat\u{200b}GPT",
        "Chat\u{9b}GPT",
        &"n".repeat(101),
    ] {
        let body =
            serde_json::json!({"redirect_uris": ["https://a.example/cb"], "client_name": name});
        let err = parse_registration(body.to_string().as_bytes(), 0).unwrap_err();
        assert_eq!(err.error, "invalid_client_metadata", "{name:?}");
    }
    // Red team 48 F10: the consent page shows the URI; controls and bidi marks are refused.
    for uri in [
        "https://chatgpt.com/cb?x=\u{1b}[31mRED",
        "https://chatgpt.com/cb?x=\u{202e}evil",
        "https://chatgpt.com/cb?x=a\u{7}",
        "https://chatgpt.com/cb?x=caf\u{e9}",
        "https://chatgpt.com/cb?x=a b",
    ] {
        let body = serde_json::json!({"redirect_uris": [uri]});
        let err = parse_registration(body.to_string().as_bytes(), 0).unwrap_err();
        assert_eq!(err.error, "invalid_redirect_uri", "{uri:?}");
    }
    let big = vec![b' '; registration::MAX_REGISTRATION_BYTES + 1];
    let err = parse_registration(&big, 0).unwrap_err();
    assert_eq!(err.status, http::StatusCode::PAYLOAD_TOO_LARGE);
}

#[test]
fn public_base_is_an_origin_and_the_loopback_default_follows_the_listener() {
    let settings = AuthSettings::new(AuthMode::Both, Some("https://gw.example.net/")).unwrap();
    let bound: std::net::SocketAddr = "127.0.0.1:8787".parse().unwrap();
    assert_eq!(settings.issuer(bound), "https://gw.example.net");
    assert_eq!(settings.public_hosts(), ["gw.example.net"]);
    let settings = AuthSettings::new(AuthMode::Both, Some("https://gw.example.net:8443")).unwrap();
    assert_eq!(settings.issuer(bound), "https://gw.example.net:8443");
    assert_eq!(
        settings.public_hosts(),
        ["gw.example.net", "gw.example.net:8443"]
    );
    let local = AuthSettings::new(AuthMode::Both, None).unwrap();
    assert_eq!(local.issuer(bound), "http://127.0.0.1:8787");
    let any: std::net::SocketAddr = "0.0.0.0:9000".parse().unwrap();
    assert_eq!(local.issuer(any), "http://127.0.0.1:9000");
    assert!(AuthSettings::new(AuthMode::Both, Some("http://localhost:8787")).is_ok());
    for bad in [
        "http://gw.example.net",
        "https://gw.example.net/mcp",
        "https://gw.example.net?x",
        "https://u@gw.example.net",
        "gw.example.net",
    ] {
        assert!(
            AuthSettings::new(AuthMode::Both, Some(bad)).is_err(),
            "{bad}"
        );
    }
    assert_eq!("oauth".parse::<AuthMode>().unwrap(), AuthMode::OAuth);
    assert_eq!(AuthMode::OAuth.as_str(), "oauth");
    assert!("none".parse::<AuthMode>().is_err());
    assert!(AuthMode::Both.static_token() && AuthMode::Both.oauth());
    assert!(!AuthMode::OAuth.static_token() && !AuthMode::Token.oauth());
}

#[test]
fn consent_page_escapes_what_the_client_chose() {
    let page = consent::consent_page(&consent::ConsentView {
        request_id: "req_1",
        csrf: "csrf_1",
        page_code: "abcd-2345",
        client_name: "<script>alert(1)</script>\"'&",
        client_id: "client_1",
        redirect_uri: "https://a.example/cb?x=\"><img>",
        redirect_host: "a.example",
        error: Some("<b>"),
    });
    assert!(!page.contains("<script>alert"));
    assert!(!page.contains("<img>"));
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;"));
    assert!(page.contains("&lt;b&gt;"));
    let csp = consent::content_security_policy(Some("https://chatgpt.com"));
    assert!(csp.starts_with("default-src 'none'; style-src 'sha256-"));
    assert!(csp.contains("form-action 'self' https://chatgpt.com;"));
    assert!(csp.contains("frame-ancestors 'none'"));
    assert!(!csp.contains("unsafe"));
}

#[test]
fn consent_and_error_pages_read_as_written() {
    let page = consent::consent_page(&consent::ConsentView {
        request_id: "req_0123",
        csrf: "csrf_4567",
        page_code: "abcd-2345",
        client_name: "ChatGPT",
        client_id: "client_89ab",
        redirect_uri: "https://chatgpt.com/connector_platform_oauth_redirect",
        redirect_host: "chatgpt.com",
        error: Some("That approval code is not valid (wrong, expired or already used)."),
    });
    insta::assert_snapshot!("consent_page", page);
    insta::assert_snapshot!(
        "error_page",
        consent::error_page(
            "Redirect URI mismatch",
            "redirect_uri is not one the client registered."
        )
    );
}

fn store() -> (tempfile::TempDir, OAuthStore) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = std::sync::Arc::new(crate::state::Store::open(dir.path()).unwrap());
    let key = crate::config::load_or_create_server_key(dir.path()).unwrap();
    let store = OAuthStore::open(dir.path(), &key, ledger).unwrap();
    (dir, store)
}

const RESOURCE: &str = "https://gw.example.net/mcp";
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

fn request(now_ms: i64) -> TokenRequest<'static> {
    TokenRequest {
        client_id: "client_a",
        resource: None,
        our_resource: RESOURCE,
        now_ms,
        access_ttl_ms: 3_600_000,
        refresh_ttl_ms: 86_400_000,
    }
}

fn client_a() -> Client {
    Client {
        client_id: "client_a".into(),
        client_name: None,
        issued_at_ms: 0,
        stored: false,
        redirects: Redirects::Stored(vec!["https://a.example/cb".into()]),
    }
}

fn code_row() -> CodeRow {
    CodeRow {
        client_id: "client_a".into(),
        redirect_uri: "https://a.example/cb".into(),
        code_challenge: CHALLENGE.into(),
        resource: RESOURCE.into(),
        scope: SCOPE.into(),
        expires_at_ms: 60_000,
    }
}

/// A new code for `client_a`'s request.
fn client_with_code(store: &OAuthStore) -> String {
    store.approve(&client_a(), &code_row()).unwrap()
}

#[test]
fn store_codes_expire_and_are_used_once() {
    let (_dir, store) = store();
    let h1 = client_with_code(&store);
    let err = store
        .exchange_code(&h1, "https://a.example/cb", VERIFIER, &request(60_000))
        .unwrap_err();
    assert_eq!(err.error, "invalid_grant");
    assert!(err.description.contains("expired"));
    let tokens = store
        .exchange_code(&h1, "https://a.example/cb", VERIFIER, &request(1_000))
        .unwrap();
    let access = tokens.access_token.clone();
    assert!(store.access_token_valid(&access, RESOURCE, 2_000).unwrap());
    assert!(
        !store
            .access_token_valid(&access, "https://other/mcp", 2_000)
            .unwrap()
    );
    assert!(
        !store
            .access_token_valid(&access, RESOURCE, 3_601_000)
            .unwrap()
    );
    let err = store
        .exchange_code(&h1, "https://a.example/cb", VERIFIER, &request(2_000))
        .unwrap_err();
    assert!(err.description.contains("already used"));
    assert!(!store.access_token_valid(&access, RESOURCE, 2_000).unwrap());
}

#[test]
fn store_refresh_rotates_and_a_reuse_revokes_the_grant() {
    let (_dir, store) = store();
    let h2 = client_with_code(&store);
    let first = store
        .exchange_code(&h2, "https://a.example/cb", VERIFIER, &request(1_000))
        .unwrap();
    let hash = |t: &str| t.to_string();
    let second = store
        .refresh(&hash(&first.refresh_token), &request(2_000))
        .unwrap();
    assert!(
        store
            .access_token_valid(&hash(&second.access_token), RESOURCE, 2_500)
            .unwrap()
    );
    let err = store
        .refresh(&hash(&first.refresh_token), &request(3_000))
        .unwrap_err();
    assert_eq!(err.error, "invalid_grant");
    for token in [&first.access_token, &second.access_token] {
        assert!(
            !store
                .access_token_valid(&hash(token), RESOURCE, 3_001)
                .unwrap()
        );
    }
    let err = store
        .refresh(&hash(&second.refresh_token), &request(3_002))
        .unwrap_err();
    assert!(err.description.contains("revoked"));
    // Another resource asked for at refresh: invalid_target, nothing rotated.
    let h3 = client_with_code(&store);
    let third = store
        .exchange_code(&h3, "https://a.example/cb", VERIFIER, &request(4_000))
        .unwrap();
    let mut other = request(5_000);
    other.resource = Some("https://other.example/mcp");
    let err = store
        .refresh(&hash(&third.refresh_token), &other)
        .unwrap_err();
    assert_eq!(err.error, "invalid_target");
    assert!(
        store
            .refresh(&hash(&third.refresh_token), &request(5_001))
            .is_ok()
    );
}

fn oauth_in(dir: &std::path::Path) -> std::sync::Arc<OAuth> {
    let ledger = std::sync::Arc::new(crate::state::Store::open(dir).unwrap());
    let settings = AuthSettings::new(AuthMode::Both, Some("https://gw.example.net")).unwrap();
    OAuth::open(&settings, "127.0.0.1:1".parse().unwrap(), dir, ledger).unwrap()
}

/// Issue 24 item 1: a signed id needs no row until the owner approves it; approval writes the
/// row (once, adding redirect URIs it approves later); a revocation refuses the id although it
/// still verifies; a client an older gateway stored keeps working; an altered id is refused.
#[test]
fn signed_clients_get_a_row_only_from_the_owner_and_revocation_refuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let oauth = oauth_in(dir.path());
    let registration = parse_registration(
        br#"{"redirect_uris": ["https://a.example/cb"], "client_name": "A"}"#,
        7,
    )
    .unwrap();
    let id = oauth.client_ids.issue(&registration.signed());
    let client = oauth.resolve_client(&id).unwrap();
    assert!(!client.stored);
    assert_eq!(
        (client.client_name.as_deref(), client.issued_at_ms),
        (Some("A"), 7)
    );
    assert!(client.allows_redirect("https://a.example/cb"));
    assert!(!client.allows_redirect("https://a.example/cb2"));
    assert_eq!(oauth.store.client_status(&id).unwrap(), None);
    let row = CodeRow {
        client_id: id.clone(),
        ..code_row()
    };
    oauth.store.approve(&client, &row).unwrap();
    oauth.store.approve(&client, &row).unwrap();
    let Some(store::ClientStatus::Active(stored)) = oauth.store.client_status(&id).unwrap() else {
        panic!("no row after the approval");
    };
    assert_eq!(stored.redirect_uris, ["https://a.example/cb"]);
    assert_eq!(
        (stored.client_name.as_deref(), stored.created_at_ms),
        (Some("A"), 7)
    );
    assert!(oauth.resolve_client(&id).unwrap().stored);
    // Revoked by the owner: refused at every step, and the approval writes nothing.
    oauth.store.revoke(&id, Some(&client), 9).unwrap();
    assert!(matches!(
        oauth.resolve_client(&id),
        Err(ClientRefusal::Revoked)
    ));
    let err = oauth.store.approve(&client, &row).unwrap_err();
    assert_eq!(err.error, "invalid_client");
    // An id the owner never approved can be revoked too: it gets a revoked row.
    let other = oauth.client_ids.issue(
        &parse_registration(br#"{"redirect_uris": ["https://b.example/cb"]}"#, 8)
            .unwrap()
            .signed(),
    );
    let unapproved = oauth.resolve_client(&other).unwrap();
    assert_eq!(
        oauth.store.revoke(&other, Some(&unapproved), 9).unwrap(),
        Some(common::admin::RevokedKind::Client)
    );
    assert!(matches!(
        oauth.resolve_client(&other),
        Err(ClientRefusal::Revoked)
    ));
    // A schema-3 client (stored by an older gateway) resolves from its row.
    let db = rusqlite::Connection::open(dir.path().join(crate::state::DATABASE_FILE)).unwrap();
    db.execute(
        "INSERT INTO oauth_clients (client_id, client_name, redirect_uris, created_at_ms)
         VALUES ('client_0123', 'Old', '[\"https://old.example/cb\"]', 1)",
        [],
    )
    .unwrap();
    let old = oauth.resolve_client("client_0123").unwrap();
    assert!(old.stored && old.allows_redirect("https://old.example/cb"));
    assert!(matches!(
        oauth.resolve_client("client_nope"),
        Err(ClientRefusal::Unknown)
    ));
    // Another gateway's id, or this one's altered: refused by what is wrong with it.
    let foreign = client_id::ClientIds::new("another key").issue(&registration.signed());
    assert!(matches!(
        oauth.resolve_client(&foreign),
        Err(ClientRefusal::Id(client_id::ClientIdError::Forged))
    ));
    let err = OAuthError::from(oauth.resolve_client(&id[..id.len() - 3]).unwrap_err());
    assert_eq!((err.status.as_u16(), err.error), (401, "invalid_client"));
}

/// A database writer without the server key plants rows for secrets of their own, stored as
/// the plain SHA-256 the gateway used to store (red team 27b R2): none of them is accepted.
#[test]
fn store_refuses_tokens_and_codes_planted_as_plain_sha256() {
    let (dir, store) = store();
    let code_real = client_with_code(&store);
    let real = store
        .exchange_code(
            &code_real,
            "https://a.example/cb",
            VERIFIER,
            &request(1_000),
        )
        .unwrap();
    let grant: String = {
        let db = rusqlite::Connection::open(dir.path().join(crate::state::DATABASE_FILE)).unwrap();
        let grant = db
            .query_row("SELECT grant_id FROM oauth_grants", [], |r| r.get(0))
            .unwrap();
        let sha = |t: &str| common::hash::sha256_hex(t.as_bytes());
        for (token, kind) in [("oat_planted", "access"), ("ort_planted", "refresh")] {
            db.execute(
                "INSERT INTO oauth_tokens (token_hash, kind, grant_id, audience, expires_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                rusqlite::params![sha(token), kind, grant, RESOURCE, i64::MAX],
            )
            .unwrap();
        }
        db.execute(
            "INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge,
             resource, scope, expires_at_ms) VALUES (?1, 'client_a', 'https://a.example/cb',
             ?2, ?3, ?4, ?5)",
            rusqlite::params![sha("code_planted"), CHALLENGE, RESOURCE, SCOPE, i64::MAX],
        )
        .unwrap();
        grant
    };
    assert!(!grant.is_empty());
    assert!(
        !store
            .access_token_valid("oat_planted", RESOURCE, 2_000)
            .unwrap()
    );
    let err = store.refresh("ort_planted", &request(2_000)).unwrap_err();
    assert_eq!(err.error, "invalid_grant");
    assert!(err.description.contains("not valid"), "{err:?}");
    let err = store
        .exchange_code(
            "code_planted",
            "https://a.example/cb",
            VERIFIER,
            &request(2_000),
        )
        .unwrap_err();
    assert_eq!(
        (err.error, err.description.as_str()),
        ("invalid_grant", "the authorization code is not valid")
    );
    // What the gateway itself issued still works.
    assert!(
        store
            .access_token_valid(&real.access_token, RESOURCE, 2_000)
            .unwrap()
    );
    assert!(store.refresh(&real.refresh_token, &request(2_001)).is_ok());
}

/// Schema 6: tokens and codes stored as plain SHA-256 cannot be told from planted ones; they are
/// deleted and their grants revoked with a reason that tells the owner what to do.
#[test]
fn migration_to_keyed_hashes_revokes_the_grants_of_plain_hashed_tokens() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = rusqlite::Connection::open(dir.path().join(crate::state::DATABASE_FILE)).unwrap();
        for sql in [
            common::state_schema::V1,
            common::state_schema::V2,
            common::state_schema::V3,
            common::state_schema::V4,
            common::state_schema::V5,
        ] {
            db.execute_batch(sql).unwrap();
        }
        db.pragma_update(None, "user_version", 5).unwrap();
        db.execute_batch(&format!(
            "INSERT INTO oauth_clients (client_id, redirect_uris, created_at_ms)
                 VALUES ('client_a', '[\"https://a.example/cb\"]', 1);
             INSERT INTO oauth_grants (grant_id, client_id, resource, scope, redirect_uri,
                 created_at_ms) VALUES ('grant_old', 'client_a', '{RESOURCE}', 'mcp',
                 'https://a.example/cb', 1);
             INSERT INTO oauth_tokens (token_hash, kind, grant_id, audience, expires_at_ms)
                 VALUES ('{}', 'access', 'grant_old', '{RESOURCE}', 9000000000000);",
            common::hash::sha256_hex(b"oat_old")
        ))
        .unwrap();
    }
    let (_, store) = {
        let ledger = std::sync::Arc::new(crate::state::Store::open(dir.path()).unwrap());
        let key = crate::config::load_or_create_server_key(dir.path()).unwrap();
        ((), OAuthStore::open(dir.path(), &key, ledger).unwrap())
    };
    assert!(
        !store
            .access_token_valid("oat_old", RESOURCE, 2_000)
            .unwrap()
    );
    let db = rusqlite::Connection::open(dir.path().join(crate::state::DATABASE_FILE)).unwrap();
    let (revoked, reason): (Option<i64>, String) = db
        .query_row(
            "SELECT revoked_at_ms, revoked_reason FROM oauth_grants WHERE grant_id = 'grant_old'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(revoked.is_some());
    assert_eq!(
        reason,
        "tokens stored before the keyed-hash upgrade; reconnect the client (gatewayctl oauth \
         approve)"
    );
    let tokens: i64 = db
        .query_row("SELECT COUNT(*) FROM oauth_tokens", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tokens, 0);
}

/// Red team 29 B5: a grant refreshes at most its burst, then at its pace; a refresh over it is
/// refused with 429 and Retry-After, consumes nothing and revokes nothing (the same token works
/// once the pace allows, and no reuse is detected); each refresh is charged to the state budget.
#[test]
fn store_refresh_over_the_grants_pace_is_refused_without_consuming_the_token() {
    use super::refresh_pace::{REFRESH_BURST, REFRESH_COST_BYTES, REFRESH_EVERY};
    let (dir, store) = store();
    let budget = crate::state_budget::StateBudget::new(dir.path(), 1 << 20);
    store.charge_refreshes_to(budget.clone());
    let h4 = client_with_code(&store);
    let mut tokens = store
        .exchange_code(&h4, "https://a.example/cb", VERIFIER, &request(1_000))
        .unwrap();
    let charged = budget.used_bytes();
    for _ in 0..REFRESH_BURST {
        tokens = store
            .refresh(&tokens.refresh_token, &request(2_000))
            .unwrap();
    }
    assert!(budget.used_bytes() >= charged + u64::from(REFRESH_BURST) * REFRESH_COST_BYTES);
    let err = store
        .refresh(&tokens.refresh_token, &request(2_000))
        .unwrap_err();
    assert_eq!(err.status, http::StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(err.error, "temporarily_unavailable");
    assert_eq!(err.retry_after_s, Some(REFRESH_EVERY.as_secs()));
    assert!(
        err.description.contains("still valid"),
        "{}",
        err.description
    );
    let response = axum::response::IntoResponse::into_response(err);
    assert_eq!(response.headers()[http::header::RETRY_AFTER], "6");
    // The access token of the last pair still works: nothing was revoked.
    assert!(
        store
            .access_token_valid(&tokens.access_token, RESOURCE, 2_001)
            .unwrap()
    );
    // The same refresh token, once the pace allows: rotated, no reuse.
    let later = 2_000 + REFRESH_EVERY.as_millis() as i64;
    let next = store
        .refresh(&tokens.refresh_token, &request(later))
        .unwrap();
    assert!(store.refresh(&next.refresh_token, &request(later)).is_err());
    assert!(
        store
            .access_token_valid(&next.access_token, RESOURCE, later)
            .unwrap(),
        "a paced refresh revoked the grant"
    );
}
