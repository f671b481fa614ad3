//! Revocations and expiries edited in the database while the gateway is stopped (issue 27): the
//! chained revocations and the expiry each token carries decide, whatever the columns say.

use std::path::Path;

use super::store::{CodeRow, OAuthStore, TokenRequest};
use super::{Client, Redirects};
use common::admin::RevokedKind;

const RESOURCE: &str = "https://gw.example.net/mcp";
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const REDIRECT: &str = "https://a.example/cb";

/// The gateway (re)started on `dir`: the session store, then the OAuth tables.
fn open(dir: &Path) -> OAuthStore {
    let ledger = std::sync::Arc::new(crate::state::Store::open(dir).unwrap());
    let key = crate::config::load_or_create_server_key(dir).unwrap();
    OAuthStore::open(dir, &key, ledger).unwrap()
}

/// Someone who can write the database but has not the server key, the gateway stopped.
fn edit_at_rest(dir: &Path, sql: &str) {
    let conn = rusqlite::Connection::open(dir.join(crate::state::DATABASE_FILE)).unwrap();
    conn.execute_batch(sql).unwrap();
}

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

/// The client every test here approves.
fn client_a() -> Client {
    Client {
        client_id: "client_a".into(),
        client_name: None,
        issued_at_ms: 0,
        stored: false,
        redirects: Redirects::Stored(vec![REDIRECT.into()]),
    }
}

/// An authorization code of `client_a` whose row says it expires at `expires_at_ms`.
fn code_row(expires_at_ms: i64) -> CodeRow {
    CodeRow {
        client_id: "client_a".into(),
        redirect_uri: REDIRECT.into(),
        code_challenge: CHALLENGE.into(),
        resource: RESOURCE.into(),
        scope: "mcp".into(),
        expires_at_ms,
    }
}

/// A store whose one code (for `client_a`, expiring at 60 s) was edited at rest by `sql`.
fn code_edited_at_rest(sql: &str) -> (tempfile::TempDir, OAuthStore, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let code = store.approve(&client_a(), &code_row(60_000)).unwrap();
    drop(store);
    edit_at_rest(dir.path(), sql);
    let store = open(dir.path());
    (dir, store, code)
}

/// The refusal is `invalid_grant` and says `says`.
fn assert_invalid_grant(err: &super::OAuthError, says: &str) {
    assert_eq!(err.error, "invalid_grant", "{}", err.description);
    assert!(err.description.contains(says), "{}", err.description);
}

/// A grant of `client_a`: its tokens, its id and the code that made it.
struct Grant {
    access: String,
    refresh: String,
    id: String,
    code: String,
}

fn grant(store: &OAuthStore, dir: &Path) -> Grant {
    grant_at(store, dir, 1_000)
}

/// A new store with one grant (issued at 1 s) and what it holds.
fn granted() -> (tempfile::TempDir, OAuthStore, Grant) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let grant = grant(&store, dir.path());
    (dir, store, grant)
}

/// The same, issued at `at_ms`.
fn grant_at(store: &OAuthStore, dir: &Path, at_ms: i64) -> Grant {
    let client = client_a();
    let row = code_row(at_ms + 60_000);
    let code = store.approve(&client, &row).unwrap();
    let tokens = store
        .exchange_code(&code, REDIRECT, VERIFIER, &request(at_ms))
        .unwrap();
    let conn = rusqlite::Connection::open(dir.join(crate::state::DATABASE_FILE)).unwrap();
    let id: String = conn
        .query_row(
            "SELECT grant_id FROM oauth_grants ORDER BY created_at_ms DESC, rowid DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    Grant {
        access: tokens.access_token,
        refresh: tokens.refresh_token,
        id,
        code,
    }
}

fn chained_revocations(dir: &Path) -> i64 {
    let conn = rusqlite::Connection::open(dir.join(crate::state::DATABASE_FILE)).unwrap();
    conn.query_row(
        "SELECT COUNT(*) FROM events WHERE kind = ?1",
        [super::revoked::OAUTH_REVOKED],
        |r| r.get(0),
    )
    .unwrap()
}

const UNREVOKE: &str = "UPDATE oauth_grants SET revoked_at_ms = NULL, revoked_reason = NULL;
     UPDATE oauth_clients SET revoked_at_ms = NULL;
     UPDATE oauth_tokens SET rotated_at_ms = NULL;";

#[test]
fn a_grant_the_owner_revoked_stays_revoked_when_its_column_is_reset_at_rest() {
    let (
        dir,
        store,
        Grant {
            access,
            refresh,
            id: grant_id,
            ..
        },
    ) = granted();
    assert_eq!(
        store.revoke(&grant_id, None, 2_000).unwrap(),
        Some(RevokedKind::Grant)
    );
    drop(store);
    assert_eq!(chained_revocations(dir.path()), 1);
    edit_at_rest(dir.path(), UNREVOKE);
    let store = open(dir.path());
    let err = store.refresh(&refresh, &request(3_000)).unwrap_err();
    assert_invalid_grant(&err, "revoked");
    assert!(!store.access_token_valid(&access, RESOURCE, 3_000).unwrap());
}

#[test]
fn a_grant_revoked_by_refresh_token_reuse_stays_revoked_after_an_edit_at_rest() {
    let (dir, store, Grant { refresh: first, .. }) = granted();
    let second = store.refresh(&first, &request(2_000)).unwrap();
    assert!(store.refresh(&first, &request(2_500)).is_err());
    drop(store);
    edit_at_rest(dir.path(), UNREVOKE);
    let store = open(dir.path());
    for refresh in [&first, &second.refresh_token] {
        let err = store.refresh(refresh, &request(3_000)).unwrap_err();
        assert_eq!(err.error, "invalid_grant");
        assert!(err.description.contains("revoked"), "{}", err.description);
    }
    let access = &second.access_token;
    assert!(!store.access_token_valid(access, RESOURCE, 3_000).unwrap());
}

#[test]
fn a_revoked_client_stays_revoked_when_its_row_is_reset_at_rest() {
    let (
        dir,
        store,
        Grant {
            access, refresh, ..
        },
    ) = granted();
    let revoked = store.revoke("client_a", None, 2_000).unwrap();
    assert_eq!(revoked, Some(RevokedKind::Client));
    drop(store);
    edit_at_rest(dir.path(), UNREVOKE);
    let store = open(dir.path());
    let err = store.refresh(&refresh, &request(3_000)).unwrap_err();
    assert_eq!(err.error, "invalid_client");
    assert!(!store.access_token_valid(&access, RESOURCE, 3_000).unwrap());
    assert_eq!(
        store.client_status("client_a").unwrap(),
        Some(super::store::ClientStatus::Revoked)
    );
}

#[test]
fn an_expiry_pushed_later_at_rest_does_not_revive_a_token() {
    let (
        dir,
        store,
        Grant {
            access, refresh, ..
        },
    ) = granted();
    drop(store);
    edit_at_rest(
        dir.path(),
        "UPDATE oauth_tokens SET expires_at_ms = 9000000000000;",
    );
    let store = open(dir.path());
    // Live until the expiry it was issued with, whatever the column says since.
    assert!(
        store
            .access_token_valid(&access, RESOURCE, 3_600_000)
            .unwrap()
    );
    assert!(
        !store
            .access_token_valid(&access, RESOURCE, 3_601_000)
            .unwrap()
    );
    let err = store.refresh(&refresh, &request(86_401_000)).unwrap_err();
    assert_invalid_grant(&err, "expired");
    // Before its own expiry the unedited token still works.
    assert!(store.refresh(&refresh, &request(5_000)).is_ok());
}

#[test]
fn revocations_found_only_in_the_columns_are_chained_at_the_next_open() {
    let (
        dir,
        store,
        Grant {
            refresh,
            id: grant_id,
            ..
        },
    ) = granted();
    let Grant { refresh: kept, .. } = grant(&store, dir.path());
    drop(store);
    // As a gateway of before this build (or schema 6's upgrade) revoked: the column only.
    edit_at_rest(
        dir.path(),
        &format!("UPDATE oauth_grants SET revoked_at_ms = 1 WHERE grant_id = '{grant_id}';"),
    );
    drop(open(dir.path()));
    assert_eq!(chained_revocations(dir.path()), 1);
    drop(open(dir.path()));
    assert_eq!(chained_revocations(dir.path()), 1, "recorded once");
    edit_at_rest(dir.path(), UNREVOKE);
    let store = open(dir.path());
    assert!(store.refresh(&refresh, &request(3_000)).is_err());
    // The grant nobody revoked still works after the restarts.
    assert!(store.refresh(&kept, &request(3_000)).is_ok());
}

#[test]
fn a_spent_refresh_token_made_unspent_at_rest_is_a_reuse_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    // Real times: spent tokens are loaded until their own expiry.
    let now = common::time::now_unix_ms();
    let Grant { refresh: first, .. } = grant_at(&store, dir.path(), now);
    let second = store.refresh(&first, &request(now)).unwrap();
    drop(store);
    edit_at_rest(dir.path(), UNREVOKE);
    let store = open(dir.path());
    let err = store.refresh(&first, &request(now + 1_000)).unwrap_err();
    assert_invalid_grant(&err, "already used");
    // The reuse revoked the grant: the token rotated from it is refused too.
    let err = store
        .refresh(&second.refresh_token, &request(now + 2_000))
        .unwrap_err();
    assert!(err.description.contains("revoked"), "{}", err.description);
}

#[test]
fn an_authorization_code_expires_when_it_says_whatever_its_column_says() {
    // As a database writer pushed it.
    let (_dir, store, code) =
        code_edited_at_rest("UPDATE oauth_codes SET expires_at_ms = 9000000000000;");
    let err = store
        .exchange_code(&code, REDIRECT, VERIFIER, &request(60_000))
        .unwrap_err();
    assert_invalid_grant(&err, "expired");
    assert!(
        store
            .exchange_code(&code, REDIRECT, VERIFIER, &request(59_000))
            .is_ok()
    );
}

/// Red team 28 B6: a code's PKCE challenge (or redirect URI, client, resource, scope) edited at
/// rest let whoever knew the new verifier exchange an intercepted code. The code carries a
/// digest of its request under its keyed hash.
#[test]
fn an_authorization_code_whose_request_was_edited_at_rest_is_refused() {
    // The attacker's verifier and its S256 challenge.
    let verifier = "attacker-verifier-0123456789-0123456789-0123456789";
    let challenge = {
        use base64::Engine;
        use sha2::Digest;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(verifier.as_bytes()))
    };
    assert!(super::credentials::pkce_matches(verifier, &challenge));
    for (column, value, presented) in [
        ("code_challenge", challenge.as_str(), verifier),
        ("redirect_uri", "https://evil.example/cb", VERIFIER),
        ("resource", "https://evil.example/mcp", VERIFIER),
        ("scope", "admin", VERIFIER),
    ] {
        let (_dir, store, code) =
            code_edited_at_rest(&format!("UPDATE oauth_codes SET {column} = '{value}';"));
        let redirect = if column == "redirect_uri" {
            value
        } else {
            REDIRECT
        };
        let err = store
            .exchange_code(&code, redirect, presented, &request(1_000))
            .unwrap_err();
        assert_eq!(err.error, "invalid_grant", "{column}");
        assert!(
            err.description
                .contains("does not match the request it was issued for"),
            "{column}: {}",
            err.description
        );
    }
}

/// Red team 28 B5: a refresh token minted before tokens named their grant was trusted to the
/// grant its row names, an unsealed column: a revoked grant came back through a copy of its
/// row. Such a token is refused; the client authorizes again.
#[test]
fn a_refresh_token_that_names_no_grant_is_refused() {
    let (_dir, store, Grant { id, .. }) = granted();
    let legacy = store.store_refresh(&id, 9_000_000_000_000, false);
    let err = store.refresh(&legacy, &request(2_000)).unwrap_err();
    assert_invalid_grant(&err, "older version of this gateway");
}

#[test]
fn an_authorization_code_made_unused_at_rest_is_a_reuse_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let now = common::time::now_unix_ms();
    let Grant { refresh, code, .. } = grant_at(&store, dir.path(), now);
    drop(store);
    edit_at_rest(dir.path(), "UPDATE oauth_codes SET grant_id = NULL;");
    let store = open(dir.path());
    let err = store
        .exchange_code(&code, REDIRECT, VERIFIER, &request(now + 1_000))
        .unwrap_err();
    assert_invalid_grant(&err, "already used");
    // The reuse revoked the grant the code had made.
    let err = store.refresh(&refresh, &request(now + 2_000)).unwrap_err();
    assert!(err.description.contains("revoked"), "{}", err.description);
}

/// Red team 27 B1: tokens pointed at a copy of their revoked grant's row (same client, not
/// revoked) worked again; a token names the grant it was issued for inside its keyed hash.
#[test]
fn tokens_pointed_at_a_copy_of_their_revoked_grant_stay_refused() {
    let (
        dir,
        store,
        Grant {
            access,
            refresh,
            id: grant_id,
            ..
        },
    ) = granted();
    assert!(store.access_token_valid(&access, RESOURCE, 1_500).unwrap());
    store.revoke(&grant_id, None, 2_000).unwrap();
    drop(store);
    edit_at_rest(
        dir.path(),
        &format!(
            "INSERT INTO oauth_grants (grant_id, client_id, resource, scope, redirect_uri,
                 created_at_ms)
             SELECT 'grant_copy', client_id, resource, scope, redirect_uri, created_at_ms
             FROM oauth_grants WHERE grant_id = '{grant_id}';
             UPDATE oauth_tokens SET grant_id = 'grant_copy';"
        ),
    );
    let store = open(dir.path());
    assert!(!store.access_token_valid(&access, RESOURCE, 3_000).unwrap());
    let err = store.refresh(&refresh, &request(3_000)).unwrap_err();
    assert_invalid_grant(&err, "does not belong");
}

/// Red team 30 N7: after the owner moved the public address, a token's audience and its grant's
/// resource set to the new one at rest made the old tokens work again. What a grant was made
/// for is chained when it is made, and decides.
#[test]
fn tokens_of_an_old_address_stay_refused_when_their_rows_are_moved_at_rest() {
    const MOVED: &str = "https://moved.example.net/mcp";
    let (
        dir,
        store,
        Grant {
            access, refresh, ..
        },
    ) = granted();
    drop(store);
    edit_at_rest(
        dir.path(),
        &format!(
            "UPDATE oauth_tokens SET audience = '{MOVED}';
             UPDATE oauth_grants SET resource = '{MOVED}';"
        ),
    );
    let store = open(dir.path());
    assert!(!store.access_token_valid(&access, MOVED, 2_000).unwrap());
    let moved = TokenRequest {
        our_resource: MOVED,
        ..request(2_000)
    };
    let err = store.refresh(&refresh, &moved).unwrap_err();
    assert_eq!(err.error, "invalid_target", "{}", err.description);
}

/// A grant pointed at rest at a copy of its revoked client's row stays refused: the client it was
/// made for is the chained one.
#[test]
fn a_grant_pointed_at_a_copy_of_its_revoked_client_stays_refused() {
    let (
        dir,
        store,
        Grant {
            access, refresh, ..
        },
    ) = granted();
    assert_eq!(
        store.revoke("client_a", None, 2_000).unwrap(),
        Some(RevokedKind::Client)
    );
    drop(store);
    edit_at_rest(
        dir.path(),
        &format!(
            "INSERT INTO oauth_clients (client_id, client_name, redirect_uris, created_at_ms)
             SELECT 'client_copy', client_name, redirect_uris, created_at_ms
             FROM oauth_clients WHERE client_id = 'client_a';
             UPDATE oauth_grants SET client_id = 'client_copy', revoked_at_ms = NULL;
             {UNREVOKE}"
        ),
    );
    let store = open(dir.path());
    assert!(!store.access_token_valid(&access, RESOURCE, 3_000).unwrap());
    let copy = TokenRequest {
        client_id: "client_copy",
        ..request(3_000)
    };
    assert_eq!(
        store.refresh(&refresh, &copy).unwrap_err().error,
        "invalid_grant"
    );
}

/// A grant the chain does not know (made by a gateway of before grants were chained) is taken
/// from its row at the next open, once: a later edit of the row changes nothing.
#[test]
fn a_grant_made_before_grants_were_chained_is_taken_once_at_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    store.approve(&client_a(), &code_row(60_000)).unwrap();
    drop(store);
    edit_at_rest(
        dir.path(),
        &format!(
            "INSERT INTO oauth_grants (grant_id, client_id, resource, scope, redirect_uri,
                 created_at_ms)
             VALUES ('grant_old', 'client_a', '{RESOURCE}', 'mcp', '{REDIRECT}', 1000);"
        ),
    );
    let store = open(dir.path());
    let refresh = store.store_refresh("grant_old", 9_000_000_000_000, true);
    let tokens = store.refresh(&refresh, &request(2_000)).unwrap();
    drop(store);
    // The row's scope raised, its resource moved: the first taken facts hold.
    edit_at_rest(dir.path(), "UPDATE oauth_grants SET scope = 'admin';");
    let store = open(dir.path());
    let again = store
        .refresh(&tokens.refresh_token, &request(3_000))
        .unwrap();
    assert_eq!(again.scope, "mcp");
    drop(store);
    edit_at_rest(
        dir.path(),
        "UPDATE oauth_grants SET resource = 'https://other.example/mcp';
         UPDATE oauth_tokens SET audience = 'https://other.example/mcp';",
    );
    let store = open(dir.path());
    assert!(
        !store
            .access_token_valid(&again.access_token, "https://other.example/mcp", 4_000)
            .unwrap()
    );
}

/// A used code presented again is a reuse whatever its row says now (its challenge or client
/// edited at rest must not turn the reuse into a plain refusal that revokes nothing).
#[test]
fn a_used_code_whose_row_was_edited_at_rest_is_still_a_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let now = common::time::now_unix_ms();
    let Grant { refresh, code, .. } = grant_at(&store, dir.path(), now);
    drop(store);
    edit_at_rest(
        dir.path(),
        "UPDATE oauth_codes SET code_challenge = 'x', redirect_uri = 'https://b.example/cb';",
    );
    let store = open(dir.path());
    let err = store
        .exchange_code(&code, REDIRECT, VERIFIER, &request(now + 1_000))
        .unwrap_err();
    assert_invalid_grant(&err, "already used");
    let err = store.refresh(&refresh, &request(now + 2_000)).unwrap_err();
    assert_invalid_grant(&err, "revoked");
}
