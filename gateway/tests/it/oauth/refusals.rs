//! Refusals before any token: approval codes (single use, attempt limit), the consent form
//! against other sites, authorization requests, and registration requests.

use serde_json::{Value, json};

use super::*;
use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn approval_codes_name_one_page_and_are_single_use_and_attempt_limited() {
    let gw = gateway().await;
    let client = client_id(&gw).await;
    let consent = open_consent(&gw, &client).await;
    assert!(consent.html.contains("Test client"));
    assert!(consent.html.contains("127.0.0.1"));
    assert!(
        consent
            .html
            .contains(&format!("gatewayctl oauth approve {}", consent.page)),
        "{}",
        consent.html
    );

    // Without a page code: the owner is told to name one, and sees the pages opened lately.
    let err = gatewayctl_text(&gw, &["oauth", "approve"]).unwrap_err();
    assert_eq!(
        err,
        format!(
            "name the consent page to approve: gatewayctl oauth approve <page code>, with the \
             page code its consent page shows (an approval code approves only that page); pages \
             opened lately:\n  {} \"Test client\" (answer goes to 127.0.0.1)",
            consent.page
        )
    );
    // Red team 43 B2: a client's own name that mimics the list (its separators, a made-up
    // page code, another host) stays one quoted name on its page's own line.
    let forged = "ChatGPT (answer goes to chatgpt.com); qq7x-k2m9 \"Unknown\" client";
    let (status, hostile) = register(
        &gw,
        &json!({"client_name": forged, "redirect_uris": [REDIRECT]}),
    )
    .await;
    assert_eq!(status, 201, "{hostile}");
    let second = open_consent(&gw, hostile["client_id"].as_str().unwrap()).await;
    let err = gatewayctl_text(&gw, &["oauth", "approve"]).unwrap_err();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert_eq!(
        lines[2],
        format!(
            "  {} \"ChatGPT (answer goes to chatgpt.com); qq7x-k2m9 \\\"Unknown\\\" client\" \
             (answer goes to 127.0.0.1)",
            second.page
        )
    );
    let err = gatewayctl_text(&gw, &["oauth", "approve", "ABCD-EFG0"]).unwrap_err();
    assert_eq!(
        err,
        "the gateway refused: \"ABCD-EFG0\" is not a page code: a consent page shows its page code \
         as 8 letters and digits (like abcd-2345); name that one (invalid_request)"
    );
    // Typed before any code names the page: said so, nothing counted.
    let (status, _, body) = decide(&gw, &consent, "approve", "AAAA-AAAA", None).await;
    assert_eq!(status, 400);
    assert!(
        body.contains("No approval code was issued for this page yet")
            && body.contains("Nothing was counted"),
        "{body}"
    );
    // What the owner reads: the code, how long it works, and the page it approves.
    let printed =
        gatewayctl_text(&gw, &["oauth", "approve", &consent.page.to_uppercase()]).unwrap();
    let shown = printed
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("Approval code: "))
        .unwrap()
        .to_string();
    insta::assert_snapshot!(
        "gatewayctl_oauth_approve",
        printed
            .replace(&shown, "[CODE]")
            .replace(&consent.page, "[PAGE]")
    );
    // Revoking what does not exist says so, and names the id.
    let err = gatewayctl_text(&gw, &["oauth", "revoke", "grant_nope"]).unwrap_err();
    assert_eq!(
        err,
        "the gateway refused: no OAuth client or grant has the id \"grant_nope\" (not_found)"
    );

    // An empty code, then a wrong one: the page again, with the attempts left on it.
    let (status, location, body) = decide(&gw, &consent, "approve", "", None).await;
    assert_eq!(status, 400);
    assert!(location.is_none());
    assert!(body.contains("4 attempts left on this page"), "{body}");
    let code = approval_code(&gw, &consent);
    assert!(code.len() == 9 && code.as_bytes()[4] == b'-', "{code}");
    // A new code does not restore the page's attempts.
    let (status, _, body) = decide(&gw, &consent, "approve", "AAAA-AAAA", None).await;
    assert_eq!(status, 400);
    assert!(body.contains("3 attempts left"), "{body}");
    // The page's own page code typed by mistake: said so, not counted.
    let (status, _, body) = decide(&gw, &consent, "approve", &consent.page, None).await;
    assert_eq!(status, 400);
    assert!(
        body.contains("That is this page&#39;s own page code"),
        "{body}"
    );
    // Typed in lower case without the dash, the right code works, once.
    let typed = code.replace('-', "").to_lowercase();
    let (status, location, _) = decide(&gw, &consent, "approve", &typed, None).await;
    assert_eq!(status, 303);
    assert!(query(&location.unwrap(), "code").is_some());
    // Another page of the same client: the spent code names another page.
    let next = open_consent(&gw, &client).await;
    let (status, _, body) = decide(&gw, &next, "approve", &code, None).await;
    assert_eq!(status, 400, "a spent approval code worked again");
    assert!(
        body.contains("No approval code was issued for this page"),
        "{body}"
    );

    // A stranger's page: wrong codes typed there count nothing and spend nothing (red-team O-2,
    // O-4: no code names it), and the owner's code still approves the owner's page.
    let owners = open_consent(&gw, &client).await;
    let strangers = open_consent(&gw, &client).await;
    let live = approval_code(&gw, &owners);
    for _ in 0..10 {
        let (status, _, body) = decide(&gw, &strangers, "approve", &live, None).await;
        assert_eq!(status, 400);
        assert!(body.contains("Nothing was counted"), "{body}");
    }
    let (status, _, _) = decide(&gw, &owners, "approve", &live, None).await;
    assert_eq!(status, 303);
    // Five wrong codes on a page a code names void it: the right code no longer works.
    let guessed = open_consent(&gw, &client).await;
    let right = approval_code(&gw, &guessed);
    for left in (1..=4).rev() {
        let (status, _, body) = decide(&gw, &guessed, "approve", "WRONG-CODE", None).await;
        assert_eq!(status, 400);
        let plural = if left == 1 { "" } else { "s" };
        assert!(
            body.contains(&format!("{left} attempt{plural} left")),
            "{body}"
        );
    }
    let (status, _, body) = decide(&gw, &guessed, "approve", "WRONG-CODE", None).await;
    assert_eq!(status, 429, "{body}");
    assert!(
        body.contains("Too many wrong approval codes on this page"),
        "{body}"
    );
    let (status, _, body) = decide(&gw, &guessed, "approve", &right, None).await;
    assert_eq!(status, 400);
    assert!(body.contains("request_decided"), "{body}");
    // A page opened after a code was issued is not approved by it; the named page still is.
    let first = open_consent(&gw, &client).await;
    let issued = approval_code(&gw, &first);
    let after = open_consent(&gw, &client).await;
    let (status, _, body) = decide(&gw, &after, "approve", &issued, None).await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("No approval code was issued for this page yet"),
        "{body}"
    );
    let (status, _, _) = decide(&gw, &first, "approve", &issued, None).await;
    assert_eq!(status, 303);
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_codes"), 3);
    assert_eq!(grants_and_tokens(&gw), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn consent_form_refuses_other_sites_and_deny_answers_access_denied() {
    let gw = gateway().await;
    let client = client_id(&gw).await;
    let consent = open_consent(&gw, &client).await;
    let code = approval_code(&gw, &consent);

    // From another origin: refused, nothing spent.
    let (status, location, body) = decide(
        &gw,
        &consent,
        "approve",
        &code,
        Some("https://evil.example"),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(location.is_none());
    // Without the browser's cookie (another browser, or a cross-site post that drops it).
    let stolen = Consent {
        cookie: "ngw_csrf_other=x".into(),
        page: consent.page.clone(),
        request_id: consent.request_id.clone(),
        csrf: consent.csrf.clone(),
        html: String::new(),
    };
    let (status, _, _) = decide(&gw, &stolen, "approve", &code, None).await;
    assert_eq!(status, 403);
    // With the cookie of another page (the CSRF token is per page).
    let other = open_consent(&gw, &client).await;
    let crossed = Consent {
        cookie: other.cookie.clone(),
        csrf: other.csrf.clone(),
        page: consent.page.clone(),
        request_id: consent.request_id.clone(),
        html: String::new(),
    };
    let (status, _, _) = decide(&gw, &crossed, "approve", &code, None).await;
    assert_eq!(status, 403);
    // With a wrong CSRF field.
    let forged = Consent {
        csrf: "csrf_forged".into(),
        page: consent.page.clone(),
        cookie: consent.cookie.clone(),
        request_id: consent.request_id.clone(),
        html: String::new(),
    };
    let (status, _, _) = decide(&gw, &forged, "approve", &code, None).await;
    assert_eq!(status, 403);
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_codes"), 0);

    // Deny: back to the client with access_denied, and the request is decided.
    let (status, location, _) = decide(&gw, &consent, "deny", "", Some(&gw.base_url())).await;
    assert_eq!(status, 303);
    let location = location.unwrap();
    assert_eq!(query(&location, "error").as_deref(), Some("access_denied"));
    assert_eq!(query(&location, "state").as_deref(), Some("st-1"));
    let (status, _, body) = decide(&gw, &consent, "approve", &code, None).await;
    assert_eq!(status, 400);
    assert!(body.contains("request_decided"), "{body}");
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_codes"), 0);
    // The other page takes its own code.
    let own = approval_code(&gw, &other);
    let (status, _, _) = decide(&gw, &other, "approve", &own, None).await;
    assert_eq!(status, 303);
}

/// The request id is the page's whole state: one altered, cut, signed by another gateway, of
/// another format version, too long, or past its 10 minutes is refused on a page that names
/// what is wrong, and an approved one cannot be used again.
#[tokio::test(flavor = "multi_thread")]
async fn forged_altered_expired_and_replayed_request_ids_are_refused_by_name() {
    use gateway::oauth::request_id::{ConsentRequest, RequestIds};
    let gw = gateway().await;
    let client = client_id(&gw).await;
    let consent = open_consent(&gw, &client).await;
    let code = approval_code(&gw, &consent);
    let with_id = |request_id: String| Consent {
        request_id,
        page: consent.page.clone(),
        csrf: consent.csrf.clone(),
        cookie: consent.cookie.clone(),
        html: String::new(),
    };
    let refused = async |page: &Consent, title: &str, reason: &str| {
        let (status, location, body) = decide(&gw, page, "approve", &code, None).await;
        assert_eq!(status, 400, "{body}");
        assert!(location.is_none());
        assert!(
            body.contains(title) && body.contains(reason),
            "{reason}: {body}"
        );
    };
    let id = &consent.request_id;
    let mid = id.len() / 2;
    let flipped = if id.as_bytes()[mid] == b'A' { "B" } else { "A" };
    let altered = format!("{}{flipped}{}", &id[..mid], &id[mid + 1..]);
    refused(
        &with_id(altered),
        "Invalid authorization request",
        "request_forged: the request id was not issued by this gateway or was altered",
    )
    .await;
    refused(
        &with_id(id[..40].to_string()),
        "Invalid authorization request",
        "request_malformed",
    )
    .await;
    refused(
        &with_id("req_0123".into()),
        "Invalid authorization request",
        "request_malformed: the request id is not one this gateway issued",
    )
    .await;
    refused(
        &with_id(format!("ngr_{}", "A".repeat(25_000))),
        "Invalid authorization request",
        "request_oversized",
    )
    .await;
    // Signed by another gateway, of another version, or expired (signed with this gateway's
    // key, as an id of 11 minutes ago would be).
    let key = std::fs::read_to_string(gw.state_dir().join("auth/server-key")).unwrap();
    let ours = RequestIds::new(key.trim());
    let request = |issued_at_ms: i64| ConsentRequest {
        client_id: client.clone(),
        redirect_uri: REDIRECT.into(),
        code_challenge: challenge(VERIFIER),
        code_challenge_method: "S256".into(),
        state: Some("st-1".into()),
        scope: "mcp".into(),
        resource: format!("{}/mcp", gw.base_url()),
        issued_at_ms,
        page: consent.page.replace('-', ""),
    };
    let now = common::time::now_unix_ms();
    let foreign = RequestIds::new("another gateway's key").issue(&request(now));
    refused(
        &with_id(foreign),
        "Invalid authorization request",
        "request_forged",
    )
    .await;
    refused(
        &with_id(ours.issue_version(2, &request(now))),
        "Invalid authorization request",
        "request_version: the request id was issued in format version 2",
    )
    .await;
    let expired = ours.issue(&request(now - 11 * 60 * 1000));
    let expired_page = Consent {
        csrf: ours.csrf(&expired),
        cookie: format!(
            "ngw_csrf_{}={}",
            consent.page.replace('-', ""),
            ours.csrf(&expired)
        ),
        ..with_id(expired)
    };
    refused(
        &expired_page,
        "Request expired",
        "request_expired: this authorization request expired (a consent page lasts 10 minutes)",
    )
    .await;
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_codes"), 0);
    // The real one is approved once; replayed, it is refused (approve and deny alike).
    let (status, _, body) = decide(&gw, &consent, "approve", &code, None).await;
    assert_eq!(status, 303, "{body}");
    for decision in ["approve", "deny"] {
        let (status, location, body) = decide(&gw, &consent, decision, &code, None).await;
        assert_eq!(status, 400, "{body}");
        assert!(location.is_none());
        assert!(
            body.contains("Request already decided")
                && body
                    .contains("request_decided: this authorization request was already approved"),
            "{body}"
        );
    }
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_codes"), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn authorization_requests_are_checked_before_the_page() {
    let gw = gateway().await;
    let client = client_id(&gw).await;

    // Unknown client or redirect mismatch: a page, never a redirect.
    for url in [
        authorize_url(&gw, "client_unknown", &[]),
        authorize_url(&gw, &client, &[]).replace("%2Fcallback", "%2Fother"),
    ] {
        let resp = http().get(&url).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{url}");
        assert!(resp.headers().get("location").is_none(), "{url}");
        assert_eq!(resp.headers()["x-frame-options"], "DENY");
    }
    // Anything else: back to the client with the error and its state.
    let base = format!("{}/oauth/authorize", gw.base_url());
    let good = authorize_url(&gw, &client, &[]);
    let cases = [
        (
            good.replace("response_type=code", "response_type=token"),
            "unsupported_response_type",
        ),
        (
            good.replace("code_challenge_method=S256", "code_challenge_method=plain"),
            "invalid_request",
        ),
        (
            good.replace(
                &format!("code_challenge={}", challenge(VERIFIER)),
                "code_challenge=short",
            ),
            "invalid_request",
        ),
        (
            authorize_url(&gw, &client, &[("scope", "admin")]),
            "invalid_scope",
        ),
        (
            good.replace(
                "resource=http",
                "resource=https%3A%2F%2Fother.example%2Fmcp&x=http",
            ),
            "invalid_target",
        ),
    ];
    for (url, error) in cases {
        assert!(url.starts_with(&base));
        let resp = http().get(&url).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 302, "{url}");
        let location = url::Url::parse(resp.headers()["location"].to_str().unwrap()).unwrap();
        assert!(location.as_str().starts_with(REDIRECT));
        assert_eq!(query(&location, "error").as_deref(), Some(error), "{url}");
        assert_eq!(query(&location, "state").as_deref(), Some("st-1"));
    }
    // No refusal left a code or a grant behind.
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_codes"), 0);
    assert_eq!(grants_and_tokens(&gw), (0, 0));
    // Without PKCE at all.
    let no_pkce = good
        .split('&')
        .filter(|p| !p.starts_with("code_challenge"))
        .collect::<Vec<_>>()
        .join("&");
    let resp = http().get(&no_pkce).send().await.unwrap();
    let location = url::Url::parse(resp.headers()["location"].to_str().unwrap()).unwrap();
    assert_eq!(
        query(&location, "error").as_deref(),
        Some("invalid_request")
    );
    // No scope (ChatGPT on a reconnect) is the one scope.
    let resp = http().get(&good).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn registration_refuses_bad_and_oversized_requests() {
    let gw = gateway().await;
    let cases = [
        (json!({"redirect_uris": []}), "invalid_redirect_uri"),
        (json!({"client_name": "x"}), "invalid_redirect_uri"),
        (
            json!({"redirect_uris": "https://a.example/cb"}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["http://a.example/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb#frag"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://user:pw@a.example/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["/relative"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["javascript:alert(1)"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": [format!("https://a.example/{}", "x".repeat(2100))]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "grant_types": ["client_credentials"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "response_types": ["token"]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "client_name": "x".repeat(101)}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": ["https://a.example/cb"], "client_name": "a\u{7}b"}),
            "invalid_client_metadata",
        ),
        (json!(["https://a.example/cb"]), "invalid_client_metadata"),
    ];
    for (body, error) in cases {
        let (status, answer) = register(&gw, &body).await;
        assert_oauth_error(status, &answer, 400, error);
    }
    let raw = |body: String, content_type: &'static str| {
        http()
            .post(format!("{}/oauth/register", gw.base_url()))
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let resp = raw("{not json".into(), "application/json").await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["error"], "invalid_client_metadata");
    let resp = raw("{}".into(), "text/plain").await.unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let big = json!({"redirect_uris": ["https://a.example/cb"], "pad": "x".repeat(20_000)});
    let resp = raw(big.to_string(), "application/json").await.unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["error"], "invalid_client_metadata");
    let huge = json!({"pad": "x".repeat(200_000)});
    let resp = raw(huge.to_string(), "application/json").await.unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_clients"), 0);

    // A good one: https, and http on loopback; any requested auth method is answered "none".
    let (status, answer) = register(
        &gw,
        &json!({"redirect_uris": ["https://chatgpt.com/connector_platform_oauth_redirect",
                                  "http://localhost:3000/cb"],
                "token_endpoint_auth_method": "client_secret_post", "unknown_field": 1}),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["token_endpoint_auth_method"], "none");
    assert!(answer.get("client_secret").is_none());
    assert!(answer["client_id"].as_str().unwrap().starts_with("ngc_"));
    // Registration stores nothing: the id is signed; a row comes with the owner's approval.
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_clients"), 0);
}

/// Issue 24 item 1: a client id is accepted only as this gateway signed it and only while the
/// owner has not revoked it. Each altered id (one character changed in its payload or its MAC,
/// signed under another key, cut short, grown past any issued id) is refused at the token
/// endpoint with `invalid_client` and the description of what is wrong, and on the consent step
/// with a page (never a redirect) naming `invalid_client`; nothing is stored.
#[tokio::test(flavor = "multi_thread")]
async fn forged_altered_and_revoked_client_ids_are_refused_as_invalid_client() {
    use gateway::oauth::client_id::{ClientIdError, ClientIds, SignedClient};
    let gw = gateway().await;
    let id = client_id(&gw).await;
    let flip = |at: usize| {
        let mut bytes = id.clone().into_bytes();
        bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
        String::from_utf8(bytes).unwrap()
    };
    // The largest length at most `at` whose base64url part (after `ngc_`) is one past a group.
    let cut = |at: usize| (4..=at).rev().find(|l| (l - 4) % 4 == 1).unwrap();
    let foreign = ClientIds::new("another gateway's key").issue(&SignedClient::new(
        0,
        Some("Test client".into()),
        &[REDIRECT.to_string()],
    ));
    let forged = ClientIdError::Forged.to_string();
    let malformed = ClientIdError::Malformed.to_string();
    let cases = [
        (flip(10), forged.clone()),
        (flip(id.len() / 2), forged.clone()),
        (flip(id.len() - 2), forged.clone()),
        (foreign, forged.clone()),
        // Cut where no base64url text can end (one character past a whole group): malformed
        // whatever the id's length. A cut at a decodable length is a forged id (its MAC fails).
        (id[..cut(id.len() - 1)].to_string(), malformed.clone()),
        (id[..cut(id.len() / 2)].to_string(), malformed.clone()),
        ("ngc_".to_string(), malformed),
        (
            format!("{id}{}", "A".repeat(1200)),
            ClientIdError::Oversized.to_string(),
        ),
    ];
    for (bad, description) in &cases {
        let (status, body) = exchange(&gw, bad, "ngw_code_whatever").await;
        assert_oauth_error(status, &body, 401, "invalid_client");
        assert_eq!(body["error_description"], description.as_str(), "{bad}");
        let resp = http()
            .get(authorize_url(&gw, bad, &[]))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 400, "{bad}");
        assert!(resp.headers().get("location").is_none());
        let page = resp.text().await.unwrap();
        assert!(page.contains("Unknown client"), "{page}");
        assert!(page.contains("invalid_client: client_id"), "{page}");
    }
    assert_eq!(count(&gw, "SELECT COUNT(*) FROM oauth_clients"), 0);

    // Revoked after its approval: its tokens stop, and the id is refused although it verifies.
    let code = authorize(&gw, &id).await;
    let (status, tokens) = exchange(&gw, &id, &code).await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"].as_str().unwrap();
    let answer = gatewayctl_json(&gw, &["oauth", "revoke", &id]);
    assert_eq!(answer["revoked"], "client", "{answer}");
    assert_eq!(mcp_status(&gw, access).await, 401);
    let revoked = "client_id was revoked by the gateway's owner; the owner must approve a new \
                   registration";
    let (status, body) = refresh(&gw, &id, tokens["refresh_token"].as_str().unwrap()).await;
    assert_oauth_error(status, &body, 401, "invalid_client");
    assert_eq!(body["error_description"], revoked);
    let resp = http()
        .get(authorize_url(&gw, &id, &[]))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    assert!(resp.text().await.unwrap().contains("Client revoked"));

    // Revoked before any approval (a stranger's id the owner saw on a page): refused too.
    let never = client_id(&gw).await;
    let answer = gatewayctl_json(&gw, &["oauth", "revoke", &never]);
    assert_eq!(answer["revoked"], "client", "{answer}");
    let (status, body) = exchange(&gw, &never, "ngw_code_whatever").await;
    assert_oauth_error(status, &body, 401, "invalid_client");
    assert_eq!(body["error_description"], revoked);
    // A page opened before the revocation cannot be approved after it.
    let other = client_id(&gw).await;
    let consent = open_consent(&gw, &other).await;
    let code = approval_code(&gw, &consent);
    gatewayctl_json(&gw, &["oauth", "revoke", &other]);
    let (status, location, body) = decide(&gw, &consent, "approve", &code, None).await;
    assert_eq!(status, 400, "{body}");
    assert!(location.is_none());
    assert!(body.contains("revoked"), "{body}");
    assert_eq!(
        count_with(
            &gw,
            "SELECT COUNT(*) FROM oauth_codes WHERE client_id = ?1",
            &other
        ),
        0
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_body_cannot_hold_an_oauth_endpoint() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gw = gateway_with(&[("CLAUDE_TOOLS_HTTP_BODY_TIMEOUT_SECONDS", "1")]).await;
    for path in ["/oauth/token", "/oauth/register", "/oauth/authorize"] {
        let mut tcp = tokio::net::TcpStream::connect(gw.addr()).await.unwrap();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ngrant_type="
        );
        tcp.write_all(head.as_bytes()).await.unwrap();
        let started = std::time::Instant::now();
        let mut answer = Vec::new();
        tokio::time::timeout(
            std::time::Duration::from_secs(10),
            tcp.read_to_end(&mut answer),
        )
        .await
        .expect("the connection was held")
        .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408"), "{path}: {answer}");
        assert!(answer.contains("\"error\":\"invalid_request\""), "{answer}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}

/// Issue 23, item 3: the admin socket answers only the owner's unconfined processes. A process
/// of the same uid under `no_new_privs` (as every runner and command is) or in another network
/// namespace (a broker's) is refused, whatever it asks; the owner's own request still works.
#[tokio::test]
async fn the_admin_socket_refuses_sandboxed_peers() {
    let gw = gateway().await;
    let socket = gw.state_dir().join("run/admin.sock");
    // The gateway may answer and close before the request is sent: read whatever it said.
    let client = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({socket:?})\n\
         try:\n    s.sendall(b'{{\"op\": \"approve\"}}\\n')\nexcept OSError:\n    pass\n\
         print(s.makefile().readline())\n"
    );
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .expect("python3");
    let root = rustix::process::geteuid().is_root();
    let mut wrappers = vec![vec!["setpriv", "--no-new-privs"]];
    if root {
        wrappers.push(vec!["unshare", "--net"]);
    }
    for wrapper in wrappers {
        let out = std::process::Command::new(wrapper[0])
            .args(&wrapper[1..])
            .args([python, "-c", &client])
            .output()
            .unwrap();
        assert!(out.status.success(), "{wrapper:?}: {out:?}");
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(answer["error"], "forbidden", "{wrapper:?}: {answer}");
        assert!(
            answer["message"].as_str().unwrap().contains("unconfined"),
            "{answer}"
        );
    }
    assert_eq!(admin(&gw, json!({"op": "status"}))["answer"], "status");
}

/// Red team 27b R2 against the real gateway: a database writer plants an access token, a refresh
/// token and an authorization code of their own, stored as the plain SHA-256 the gateway used
/// to store, under a real grant. `/mcp` answers 401 to the token, the token endpoint
/// `invalid_grant` to the others; the tokens the gateway issued keep working.
#[tokio::test(flavor = "multi_thread")]
async fn tokens_and_codes_planted_by_a_database_writer_are_refused() {
    let gw = gateway().await;
    let client = client_id(&gw).await;
    let code = authorize(&gw, &client).await;
    let (status, tokens) = exchange(&gw, &client, &code).await;
    assert_eq!(status, 200, "{tokens}");
    let real = tokens["access_token"].as_str().unwrap().to_string();
    let sha = |t: &str| common::hash::sha256_hex(t.as_bytes());
    let (access, refresh_token, planted_code) =
        ("ngw_at_planted", "ngw_rt_planted", "ngw_code_planted");
    {
        let db = rusqlite::Connection::open(gw.state_dir().join("gateway.sqlite3")).unwrap();
        let (grant, audience): (String, String) = db
            .query_row(
                "SELECT grant_id, audience FROM oauth_tokens LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        for (token, kind) in [(access, "access"), (refresh_token, "refresh")] {
            db.execute(
                "INSERT INTO oauth_tokens (token_hash, kind, grant_id, audience, expires_at_ms)
                 VALUES (?1, ?2, ?3, ?4, 9000000000000)",
                rusqlite::params![sha(token), kind, grant, audience],
            )
            .unwrap();
        }
        db.execute(
            "INSERT INTO oauth_codes (code_hash, client_id, redirect_uri, code_challenge,
             resource, scope, expires_at_ms) VALUES (?1, ?2, ?3, ?4, ?5, 'mcp', 9000000000000)",
            rusqlite::params![
                sha(planted_code),
                client,
                REDIRECT,
                challenge(VERIFIER),
                audience
            ],
        )
        .unwrap();
    }
    assert_eq!(mcp_status(&gw, access).await, 401);
    let (status, body) = refresh(&gw, &client, refresh_token).await;
    assert_oauth_error(status, &body, 400, "invalid_grant");
    let (status, body) = exchange(&gw, &client, planted_code).await;
    assert_oauth_error(status, &body, 400, "invalid_grant");
    assert_eq!(
        body["error_description"], "the authorization code is not valid",
        "{body}"
    );
    assert_eq!(mcp_status(&gw, &real).await, 200);
}
