//! The owner's consent page and the authorization endpoint's error page: small, plain, accessible
//! HTML with no external assets and no script, under a strict CSP (`default-src 'none'`, the one
//! inline style allowed by its hash, forms only to this gateway and the client's redirect origin,
//! never framed).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;

/// The page's only style, allowed by its hash in the CSP.
const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:36rem;margin:2rem auto;\
padding:0 1rem;line-height:1.5;color:#111;background:#fff}\
h1{font-size:1.4rem}dt{font-weight:600}dd{margin:0 0 .6rem 0;overflow-wrap:anywhere}\
.warn{border-left:4px solid #b45309;padding:.4rem .8rem;background:#fffbeb}\
.error{border-left:4px solid #b91c1c;padding:.4rem .8rem;background:#fef2f2}\
label{display:block;font-weight:600;margin-top:1rem}\
input{font:inherit;font-size:1.2rem;letter-spacing:.1em;padding:.3rem;width:12rem}\
.actions{margin-top:1.2rem;display:flex;gap:1rem}\
button{font:inherit;padding:.5rem 1.2rem;cursor:pointer}\
button:focus,input:focus{outline:3px solid #2563eb;outline-offset:2px}";

/// HTML-escape text for element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn style_hash() -> String {
    use sha2::Digest;
    base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(STYLE.as_bytes()))
}

/// The Content-Security-Policy of a page whose forms may go to `form_origin` besides this
/// gateway (a browser applies `form-action` to the redirect after the POST too).
pub fn content_security_policy(form_origin: Option<&str>) -> String {
    let form_action = match form_origin {
        Some(origin) => format!("'self' {origin}"),
        None => "'self'".to_string(),
    };
    format!(
        "default-src 'none'; style-src 'sha256-{}'; img-src 'none'; form-action {form_action}; \
         frame-ancestors 'none'; base-uri 'none'",
        style_hash()
    )
}

/// An HTML response with the page's security headers.
pub fn html_response(status: StatusCode, body: String, form_origin: Option<&str>) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    let set = |headers: &mut http::HeaderMap, name: http::HeaderName, value: &str| {
        if let Ok(value) = http::HeaderValue::from_str(value) {
            headers.insert(name, value);
        }
    };
    set(
        headers,
        http::header::CONTENT_TYPE,
        "text/html; charset=utf-8",
    );
    set(
        headers,
        http::header::CONTENT_SECURITY_POLICY,
        &content_security_policy(form_origin),
    );
    set(headers, http::header::X_FRAME_OPTIONS, "DENY");
    set(headers, http::header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    // Not `no-referrer`: with it a browser sends `Origin: null` on the page's own form post,
    // which the decision endpoint refuses as from another site. `same-origin` still gives the
    // client's site no Referer.
    set(headers, http::header::REFERRER_POLICY, "same-origin");
    set(headers, http::header::CACHE_CONTROL, "no-store");
    response
}

fn page(title: &str, main: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title} · Native Gateway</title>\n<style>{STYLE}</style>\n</head>\n\
         <body>\n<main>\n{main}\n</main>\n</body>\n</html>\n",
        title = escape(title),
    )
}

/// What the consent page shows about one authorization request.
pub struct ConsentView<'a> {
    pub request_id: &'a str,
    pub csrf: &'a str,
    /// The page code the owner names to `gatewayctl oauth approve` (`abcd-efgh`).
    pub page_code: &'a str,
    pub client_name: &'a str,
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub redirect_host: &'a str,
    /// A message about the last attempt (a wrong approval code), shown above the form.
    pub error: Option<&'a str>,
}

/// The consent page: who asks, where the answer goes, what it allows, and the owner's approval
/// code with Approve and Deny.
pub fn consent_page(view: &ConsentView<'_>) -> String {
    let error = match view.error {
        Some(message) => format!(
            "<p class=\"error\" role=\"alert\" id=\"code-error\">{}</p>\n",
            escape(message)
        ),
        None => String::new(),
    };
    let described_by = if view.error.is_some() {
        "code-help code-error"
    } else {
        "code-help"
    };
    let main = format!(
        "<h1>Allow {name} to use this gateway?</h1>\n\
         <p class=\"warn\">Approve only if you started this connection yourself just now.</p>\n\
         <dl>\n\
         <dt>Client</dt><dd>{name} <small>({client_id})</small></dd>\n\
         <dt>Answer goes to</dt><dd><strong>{host}</strong> <small>({uri})</small></dd>\n\
         <dt>It will be able to</dt><dd>start Claude Code sessions on this computer through \
         the gateway's tools, answer their turns, read their results and stop them, until you \
         revoke it with <code>gatewayctl oauth revoke</code>.</dd>\n\
         </dl>\n\
         {error}\
         <form method=\"post\" action=\"/oauth/authorize\">\n\
         <input type=\"hidden\" name=\"request_id\" value=\"{request_id}\">\n\
         <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">\n\
         <p>Page code: <strong id=\"page-code\">{page_code}</strong></p>\n\
         <label for=\"approval_code\">Approval code</label>\n\
         <p id=\"code-help\">Keep this page open, run <code>gatewayctl oauth approve \
         {page_code}</code> on the computer running the gateway, and type the approval code it \
         prints. A code works once, for 10 minutes, and only for this page.</p>\n\
         <input id=\"approval_code\" name=\"approval_code\" type=\"text\" \
         autocomplete=\"one-time-code\" autocapitalize=\"characters\" spellcheck=\"false\" \
         maxlength=\"20\" aria-describedby=\"{described_by}\">\n\
         <div class=\"actions\">\n\
         <button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button>\n\
         <button type=\"submit\" name=\"decision\" value=\"deny\" formnovalidate>Deny</button>\n\
         </div>\n</form>",
        name = escape(view.client_name),
        client_id = escape(view.client_id),
        host = escape(view.redirect_host),
        uri = escape(view.redirect_uri),
        request_id = escape(view.request_id),
        csrf = escape(view.csrf),
        page_code = escape(view.page_code),
    );
    page(&format!("Allow {}?", view.client_name), &main)
}

/// A page that explains why the authorization cannot go on (nothing is sent to the client).
pub fn error_page(title: &str, message: &str) -> String {
    let main = format!(
        "<h1>{}</h1>\n<p role=\"alert\">{}</p>",
        escape(title),
        escape(message)
    );
    page(title, &main)
}
