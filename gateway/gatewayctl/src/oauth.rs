//! `oauth clients|grants|revoke <id>|approve`: the OAuth clients and grants of the state database
//! (read-only, as every listing), and the two actions only the running gateway may take (it is
//! the database's single writer), asked for over its owner-only admin socket
//! `<state>/run/admin.sock`. No token or code hash is ever read or printed; `approve` prints the
//! one-time approval code, which is meant for the owner's eyes.
//!
//! Registration stores nothing (the gateway signs the client id instead), so `clients` lists the
//! clients with a row — approved or revoked by the owner, or registered by an older gateway —
//! and, from the running gateway, the consent pages it saw opened lately (pages are not stored
//! either: `approve <page code>` names the one to approve).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use common::admin::{
    self, AdminAnswer, AdminCall, AdminRequest, GatewayStatus, PendingPage, RevokedKind,
};
use serde_json::{Value, json};

use crate::check::{Check, ok, warn};
use crate::db::Db;
use crate::table::{Table, time_s};
use crate::{OAuthCommand, write_json};

/// The admin socket under a state dir (as the gateway names it).
pub fn socket_path(state_dir: &Path) -> PathBuf {
    state_dir.join("run").join("admin.sock")
}

/// How long the gateway may take to answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the running gateway could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error(
        "the gateway is not running with this state dir (no admin socket at {0}); start it, \
         then try again"
    )]
    NotRunning(String),
    #[error(
        "the admin socket {path} is served by another account's process (uid {uid}), not by this \
         account's gateway: nothing was asked or sent. Check the state dir (--state-dir)"
    )]
    NotOwners { path: String, uid: u32 },
    #[error("asking the gateway over {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "the gateway's answer is not one this gatewayctl understands (update gatewayctl to the gateway's version): {0}"
    )]
    Answer(String),
    #[error("the gateway refused: {0}")]
    Refused(String),
}

/// Send one request to the running gateway's admin socket; its answer.
pub fn admin_request(state_dir: &Path, request: AdminRequest) -> Result<AdminAnswer, AdminError> {
    let path = socket_path(state_dir);
    let shown = path.display().to_string();
    let io = |source| AdminError::Io {
        path: shown.clone(),
        source,
    };
    let mut stream = match UnixStream::connect(&path) {
        Ok(stream) => stream,
        Err(err)
            if matches!(
                err.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Err(AdminError::NotRunning(shown));
        }
        Err(err) => return Err(io(err)),
    };
    // Only this account's own process is asked (red team 40: another account's socket at a
    // shared directory's `state/run/admin.sock` named its own listener, and `try` sent the
    // owner's token there).
    let peer = peer_uid(&stream).map_err(io)?;
    if peer != rustix::process::geteuid().as_raw() {
        return Err(AdminError::NotOwners {
            path: shown,
            uid: peer,
        });
    }
    stream.set_read_timeout(Some(ANSWER_TIMEOUT)).map_err(io)?;
    stream.set_write_timeout(Some(ANSWER_TIMEOUT)).map_err(io)?;
    let sent = writeln!(stream, "{}", admin::encode(&AdminCall::new(request)));
    let mut line = String::new();
    // A refusal may be written before the request is read: read it even when the write failed,
    // and report the write's error only when nothing came back.
    let read = BufReader::new(stream).read_line(&mut line);
    if line.trim().is_empty() {
        sent.map_err(io)?;
        read.map_err(io)?;
    }
    admin::decode_answer(&line)
        .map_err(|_| AdminError::Answer(common::display::one_line(line.trim()).to_string()))
}

/// The uid of the process serving a connected Unix socket.
fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    #[cfg(target_os = "linux")]
    {
        Ok(rustix::net::sockopt::socket_peercred(stream)?.uid.as_raw())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let (uid, _) = nix::unistd::getpeereid(stream).map_err(std::io::Error::from)?;
        Ok(uid.as_raw())
    }
}

/// The answer, or its refusal as the error.
pub(crate) fn expect_answer(answer: AdminAnswer) -> anyhow::Result<AdminAnswer> {
    match answer {
        AdminAnswer::Refused(refusal) => bail!(
            "the gateway refused: {} ({})",
            common::display::one_line(&refusal.message),
            refusal.error
        ),
        answer => Ok(answer),
    }
}

/// An answer as `--json` prints it: its fields and `"ok": true` (the shape scripts already read).
pub(crate) fn write_answer_json(
    out: &mut impl Write,
    answer: &impl serde::Serialize,
) -> anyhow::Result<()> {
    let mut value = serde_json::to_value(answer)?;
    if let Some(map) = value.as_object_mut() {
        map.insert("ok".into(), Value::Bool(true));
    }
    write_json(out, &value)
}

/// An answer that is not the one asked for: a gateway of another version.
pub(crate) fn unexpected(answer: &AdminAnswer) -> anyhow::Error {
    anyhow::anyhow!(
        "the gateway answered {}; update gatewayctl to the gateway's version",
        common::display::one_line(&admin::encode(answer))
    )
}

/// `oauth …`.
pub fn run(
    state_dir: &Path,
    command: &OAuthCommand,
    json: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    match command {
        OAuthCommand::Clients => clients(state_dir, json, out),
        OAuthCommand::Grants => grants(state_dir, json, out),
        OAuthCommand::Approve { page: None } => {
            let pages = waiting_pages(state_dir).unwrap_or_default();
            let mut message = String::from(
                "name the consent page to approve: gatewayctl oauth approve <page code>, with the \
                 page code its consent page shows (an approval code approves only that page)",
            );
            if !pages.is_empty() {
                // One page a line, the client's own name quoted: a name may hold `;`, `(`
                // and page-code-like words, and must not read as another entry (red team 43 B2).
                message.push_str("; pages opened lately:");
                for p in &pages {
                    message.push_str(&format!(
                        "\n  {} {} (answer goes to {})",
                        p.page_code,
                        common::display::quoted(&p.client_name),
                        common::display::one_line(&p.redirect_host)
                    ));
                }
            }
            bail!(message)
        }
        OAuthCommand::Approve { page: Some(page) } => {
            let answer = expect_answer(admin_request(
                state_dir,
                AdminRequest::Approve {
                    page: Some(page.clone()),
                },
            )?)?;
            let AdminAnswer::ApprovalCode(answer) = answer else {
                return Err(unexpected(&answer));
            };
            if json {
                return write_answer_json(out, &answer);
            }
            let code = &answer.approval_code;
            let minutes = answer.expires_in_seconds / 60;
            let page = common::display::one_line(&answer.page_code);
            writeln!(out, "Approval code: {code}")?;
            writeln!(
                out,
                "Type it on the consent page {page}. It works once, within {minutes} minutes, \
                 for that page only."
            )?;
            match answer.waiting.first() {
                Some(w) => writeln!(
                    out,
                    "That page: {} (answer goes to {})",
                    common::display::quoted(&w.client_name),
                    common::display::one_line(&w.redirect_host)
                )?,
                None => writeln!(
                    out,
                    "The gateway did not see page {page} among the pages opened lately: check \
                     that the page names the client you are connecting."
                )?,
            }
            writeln!(
                out,
                "Approve only a connection you started yourself just now."
            )?;
            Ok(())
        }
        OAuthCommand::Revoke { id } => {
            let answer = expect_answer(admin_request(
                state_dir,
                AdminRequest::Revoke { id: id.clone() },
            )?)?;
            let AdminAnswer::Revoked(answer) = answer else {
                return Err(unexpected(&answer));
            };
            if json {
                return write_answer_json(out, &answer);
            }
            let (what, effect) = match answer.revoked {
                RevokedKind::Client => ("client", "the client and all its grants are revoked"),
                RevokedKind::Grant => ("grant", "the grant is revoked"),
            };
            writeln!(
                out,
                "Revoked {what} {id}: {effect}; its tokens stop working at the next request."
            )?;
            Ok(())
        }
    }
}

/// The hosts a client's redirect URIs lead to, as the consent page shows them: parsed as URLs,
/// so an internationalised name is shown in punycode (`chatgpt.xn--cm-fmc`, never a look-alike
/// of `chatgpt.com`) and userinfo (`https://chatgpt.com@evil.example/`) is not taken for the host.
fn redirect_hosts(uris: &[String]) -> String {
    let mut hosts: Vec<String> = uris
        .iter()
        .map(|u| match url::Url::parse(u) {
            Ok(url) => match (url.host_str(), url.port()) {
                (Some(host), Some(port)) => format!("{host}:{port}"),
                (Some(host), None) => host.to_string(),
                (None, _) => "(no host)".to_string(),
            },
            Err(_) => "(not a URL)".to_string(),
        })
        .collect();
    hosts.dedup();
    hosts.join(", ")
}

/// The consent pages the running gateway saw opened lately: none when it is not running (the
/// list lives in its memory only); `Err` with the reason when it could not say.
fn waiting_pages(state_dir: &Path) -> Result<Vec<PendingPage>, String> {
    match admin_request(state_dir, AdminRequest::Pages) {
        Ok(AdminAnswer::Pages(answer)) => Ok(answer.pages),
        Ok(AdminAnswer::Refused(refusal)) => Err(format!(
            "{} ({})",
            common::display::one_line(&refusal.message),
            refusal.error
        )),
        Ok(other) => Err(unexpected(&other).to_string()),
        Err(AdminError::NotRunning(_)) => Ok(Vec::new()),
        Err(err) => Err(err.to_string()),
    }
}

fn clients(state_dir: &Path, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let db = Db::open(state_dir)?;
    let clients = db.oauth_clients()?;
    let pages = waiting_pages(state_dir);
    if json {
        let rows: Vec<Value> = clients
            .iter()
            .map(|c| {
                json!({
                    "client_id": c.client_id,
                    "client_name": c.client_name,
                    "redirect_uris": c.redirect_uris,
                    "registered_at": common::time::rfc3339_ms(c.created_at_ms),
                    "active_grants": c.active_grants,
                    "revoked": c.revoked_at_ms.is_some(),
                })
            })
            .collect();
        let (pages, pages_error) = match pages {
            Ok(pages) => (Some(pages), None),
            Err(why) => (None, Some(why)),
        };
        let mut answer = json!({"clients": rows, "consent_pages": pages});
        if let Some(why) = pages_error {
            answer["consent_pages_error"] = Value::String(why);
        }
        return write_json(out, &answer);
    }
    if clients.is_empty() {
        writeln!(out, "no OAuth clients approved")?;
    } else {
        let mut table = Table::new(&[
            "CLIENT",
            "NAME",
            "REDIRECT TO",
            "REGISTERED",
            "GRANTS",
            "STATUS",
        ]);
        for c in &clients {
            table.row(vec![
                c.client_id.clone(),
                c.client_name.clone().unwrap_or_else(|| "-".into()),
                redirect_hosts(&c.redirect_uris),
                time_s(c.created_at_ms),
                c.active_grants.to_string(),
                if c.revoked_at_ms.is_some() {
                    "revoked".into()
                } else {
                    "registered".into()
                },
            ]);
        }
        table.write(out).context("writing the table")?;
    }
    match pages {
        Ok(pages) if pages.is_empty() => {}
        Ok(pages) => {
            writeln!(
                out,
                "\nconsent pages opened lately (approve one: `gatewayctl oauth approve <page>`):"
            )?;
            let mut table = Table::new(&["PAGE", "CLIENT", "NAME", "REDIRECT TO", "OPEN FOR"]);
            for p in &pages {
                table.row(vec![
                    p.page_code.clone(),
                    p.client_id.clone(),
                    p.client_name.clone(),
                    p.redirect_host.clone(),
                    format!("{} s", p.expires_in_seconds),
                ]);
            }
            table.write(out).context("writing the table")?;
        }
        Err(why) => writeln!(out, "\nconsent pages: unknown ({why})")?,
    }
    Ok(())
}

fn grants(state_dir: &Path, json: bool, out: &mut impl Write) -> anyhow::Result<()> {
    let db = Db::open(state_dir)?;
    let grants = db.oauth_grants()?;
    if json {
        let rows: Vec<Value> = grants
            .iter()
            .map(|g| {
                json!({
                    "grant_id": g.grant_id,
                    "client_id": g.client_id,
                    "client_name": g.client_name,
                    "resource": g.resource,
                    "scope": g.scope,
                    "approved_at": common::time::rfc3339_ms(g.created_at_ms),
                    "refreshed_at": g.refreshed_at_ms.map(common::time::rfc3339_ms),
                    "revoked_at": g.revoked_at_ms.map(common::time::rfc3339_ms),
                    "revoked_reason": g.revoked_reason,
                })
            })
            .collect();
        return write_json(out, &json!({"grants": rows}));
    }
    if grants.is_empty() {
        writeln!(out, "no OAuth grants")?;
        return Ok(());
    }
    let mut table = Table::new(&[
        "GRANT",
        "CLIENT",
        "NAME",
        "APPROVED",
        "LAST REFRESH",
        "STATUS",
    ]);
    for g in &grants {
        table.row(vec![
            g.grant_id.clone(),
            g.client_id.clone(),
            g.client_name.clone().unwrap_or_else(|| "-".into()),
            time_s(g.created_at_ms),
            g.refreshed_at_ms.map(time_s).unwrap_or_else(|| "-".into()),
            match (&g.revoked_at_ms, &g.revoked_reason) {
                (None, _) => "active".into(),
                (Some(_), Some(reason)) => format!("revoked: {reason}"),
                (Some(_), None) => "revoked".into(),
            },
        ]);
    }
    table.write(out).context("writing the table")?;
    Ok(())
}

/// `doctor`'s check of the running gateway's auth mode, asked over its admin socket (only the
/// running process knows its flags).
pub(crate) fn auth_check(state_dir: &Path) -> Check {
    const NAME: &str = "auth mode";
    match gateway_status(state_dir) {
        Err(AdminError::NotRunning(_)) => ok(
            NAME,
            "gateway not running with this state dir; it starts with --auth both (OAuth and the \
             static token) unless --auth or CLAUDE_TOOLS_GATEWAY_AUTH says otherwise",
        ),
        Err(err) => warn(
            NAME,
            format!("could not ask the running gateway: {err}"),
            "run gatewayctl as the user the gateway runs as",
        ),
        Ok(status) => match status.auth.as_str() {
            "token" => ok(
                NAME,
                "token: the static token and the capability URL only; OAuth is off",
            ),
            mode @ ("oauth" | "both") => {
                let issuer = status.issuer.as_deref().unwrap_or("?");
                let rest = if mode == "both" {
                    "; the static token and the capability URL also work"
                } else {
                    "; the static token and the capability URL are refused"
                };
                let fix = issuer.starts_with("http://").then_some(
                    "ChatGPT needs HTTPS: start the gateway with --public-base https://<tunnel host>",
                );
                match fix {
                    Some(fix) => warn(NAME, format!("{mode}: OAuth issuer {issuer}{rest}"), fix),
                    None => ok(NAME, format!("{mode}: OAuth issuer {issuer}{rest}")),
                }
            }
            other => warn(
                NAME,
                format!(
                    "the gateway runs with an auth mode this gatewayctl does not know: {}",
                    common::display::one_line(other)
                ),
                "update gatewayctl to the gateway's version",
            ),
        },
    }
}

/// The running gateway's status (auth mode, OAuth issuer, auto-run classes it allows).
pub(crate) fn gateway_status(state_dir: &Path) -> Result<GatewayStatus, AdminError> {
    match admin_request(state_dir, AdminRequest::Status)? {
        AdminAnswer::Status(status) => Ok(*status),
        // A refusal is the gateway's answer, not another version's (red team 45 F2).
        AdminAnswer::Refused(refusal) => Err(AdminError::Refused(format!(
            "{} ({})",
            common::display::one_line(&refusal.message),
            refusal.error
        ))),
        other => Err(AdminError::Answer(admin::encode(&other))),
    }
}
