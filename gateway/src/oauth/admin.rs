//! The owner's admin socket, `<state>/run/admin.sock`: how `gatewayctl` asks the running gateway
//! for what only the database's single writer may do (an approval code, a revocation) and what
//! only the running process knows (its auth mode and public base). Unix socket, mode 0600 in a
//! 0700 dir; each peer's uid must be the gateway's own, and the peer no more confined than the
//! gateway (a runner's or command's process is refused). One JSON request line, one JSON answer
//! line.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use common::admin::{
    self, AdminAnswer, AdminErrorCode, AdminRequest, ApprovalCode, GatewayStatus,
    MAX_REQUEST_BYTES, PendingPage, Pruned, PrunedSession, Revoked, WaitingPage, WaitingPages,
};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

use super::{AuthMode, OAuth};

/// The socket's path under a state dir (where the instance lock also looks for a running gateway).
pub use crate::instance_lock::admin_socket_path as socket_path;

/// How long a peer may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What the admin socket serves: the auth mode always, OAuth when it is on.
#[derive(Clone)]
pub struct Admin {
    pub mode: AuthMode,
    pub oauth: Option<Arc<OAuth>>,
    /// The auto-run classes sessions may write (`gatewayctl doctor` shows them).
    pub autorun_allowed: sandbox::protected::autorun::AutorunAllowed,
    /// Whether strict hooks are on (`gatewayctl doctor` shows it).
    pub strict_hooks: bool,
    /// The sessions, for `prune` (the gateway is the state dir's single writer).
    pub gateway: Arc<crate::session::Gateway>,
    /// Where the MCP endpoint listens (`gatewayctl try` sends the token nowhere else).
    pub listen: Option<std::net::SocketAddr>,
}

impl Admin {
    /// The answer to one request.
    pub fn answer(&self, request: AdminRequest) -> AdminAnswer {
        match request {
            AdminRequest::Status => AdminAnswer::Status(Box::new(GatewayStatus {
                auth: self.mode.as_str().to_string(),
                issuer: self.oauth.as_ref().map(|o| o.issuer.clone()),
                resource: self.oauth.as_ref().map(|o| o.resource.clone()),
                autorun_allowed: self
                    .autorun_allowed
                    .names()
                    .into_iter()
                    .map(String::from)
                    .collect(),
                strict_hooks: self.strict_hooks,
                listen: self.listen.map(|addr| addr.to_string()),
                confinement: Some(common::admin::Confinement::of_boundary(
                    &sandbox::boundary::network_boundary(),
                )),
            })),
            AdminRequest::Approve { page } => match &self.oauth {
                None => oauth_off(),
                Some(oauth) => approve(oauth, page.as_deref()),
            },
            AdminRequest::Pages => match &self.oauth {
                None => oauth_off(),
                Some(oauth) => {
                    let now = common::time::now_unix_ms();
                    AdminAnswer::Pages(WaitingPages {
                        pages: oauth
                            .recent_pages(now)
                            .into_iter()
                            .map(|p| PendingPage {
                                page_code: super::request_id::show_page_code(&p.page),
                                client_id: p.client_id,
                                client_name: p.client_name,
                                redirect_host: p.redirect_host,
                                expires_in_seconds: u64::try_from(
                                    (p.expires_at_ms - now).max(0) / 1000,
                                )
                                .unwrap_or(0),
                            })
                            .collect(),
                    })
                }
            },
            AdminRequest::Prune {
                older_than_seconds,
                dry_run,
            } => {
                let older_than =
                    older_than_seconds.map_or(self.gateway.config.retention, Duration::from_secs);
                match crate::prune::prune(&self.gateway, older_than, dry_run) {
                    Ok(report) => AdminAnswer::Pruned(Pruned {
                        dry_run: report.dry_run,
                        older_than_seconds: older_than.as_secs(),
                        bytes: report.bytes,
                        content_bytes: report.content_bytes,
                        database_bytes: report.database_bytes,
                        sessions: report
                            .sessions
                            .into_iter()
                            .map(|s| PrunedSession {
                                session_id: s.session_id,
                                bytes: s.bytes,
                                content_bytes: s.content_bytes,
                            })
                            .collect(),
                    }),
                    Err(err) => {
                        tracing::error!("prune: {err:#}");
                        AdminAnswer::refused(
                            AdminErrorCode::Internal,
                            "the gateway could not prune its state (reading or writing it failed); see \
                             its log",
                        )
                    }
                }
            }
            AdminRequest::Revoke { id } => match &self.oauth {
                None => oauth_off(),
                Some(oauth) => match oauth.store.revoke(
                    &id,
                    oauth.resolve_client(&id).ok().as_ref(),
                    common::time::now_unix_ms(),
                ) {
                    Ok(Some(revoked)) => {
                        tracing::info!(id = %id, kind = ?revoked, "oauth: revoked by the owner");
                        AdminAnswer::Revoked(Revoked { revoked, id })
                    }
                    Ok(None) => AdminAnswer::refused(
                        AdminErrorCode::NotFound,
                        format!("no OAuth client or grant has the id {id:?}"),
                    ),
                    Err(err) => AdminAnswer::refused(AdminErrorCode::Internal, err.description),
                },
            },
        }
    }
}

/// An approval code for the page the owner named, or why not.
fn approve(oauth: &OAuth, page: Option<&str>) -> AdminAnswer {
    let Some(page) = page.filter(|p| !p.trim().is_empty()) else {
        return AdminAnswer::refused(
            AdminErrorCode::InvalidRequest,
            "name the consent page to approve: run `gatewayctl oauth approve <page code>` with the \
             page code its consent page shows (an approval code approves only that page)",
        );
    };
    match oauth.new_approval_code(page) {
        Ok((code, page, ttl, seen)) => {
            tracing::info!("oauth: the owner asked for an approval code");
            AdminAnswer::ApprovalCode(ApprovalCode {
                approval_code: code,
                expires_in_seconds: ttl.as_secs(),
                page_code: super::request_id::show_page_code(&page),
                waiting: seen
                    .into_iter()
                    .map(|p| WaitingPage {
                        client_name: p.client_name,
                        redirect_host: p.redirect_host,
                    })
                    .collect(),
            })
        }
        Err(super::approvals::NotAPageCode) => AdminAnswer::refused(
            AdminErrorCode::InvalidRequest,
            format!(
                "{:?} is not a page code: a consent page shows its page code as 8 letters and \
                 digits (like abcd-2345); name that one",
                common::display::one_line(page)
            ),
        ),
    }
}

/// Whether the peer is no more confined than the gateway itself (Linux; issue 23): in the
/// gateway's network namespace, with no seccomp filter and no `no_new_privs` the gateway does not
/// have. Every runner (and each process it starts) lives in its broker's namespace under its own
/// seccomp filter and `no_new_privs`, as does every command, so an admin request from any of
/// them is refused even if it reached the socket (the runner's seccomp filter already denies it
/// UNIX sockets). Unknown (no pid, `/proc` unreadable: a non-dumpable peer) is refused too; a
/// peer whose namespace the gateway may not look at (the gateway in a user namespace) is judged
/// by its seccomp filters and `no_new_privs` alone.
#[cfg(target_os = "linux")]
fn peer_is_unconfined(pid: Option<i32>) -> Result<(), String> {
    let pid = pid.filter(|p| *p > 0).ok_or("has no known process id")?;
    let status = |who: &str| -> Result<(u64, u64), String> {
        let text = std::fs::read_to_string(format!("/proc/{who}/status"))
            .map_err(|_| "cannot be inspected".to_string())?;
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        // `Seccomp_filters` (5.9+) counts filters; older kernels: `Seccomp` mode 2 counts as one.
        let filters = field("Seccomp_filters:")
            .or_else(|| field("Seccomp:").map(|mode| u64::from(mode == 2)))
            .ok_or("cannot be inspected")?;
        let nnp = field("NoNewPrivs:").ok_or("cannot be inspected")?;
        Ok((filters, nnp))
    };
    let netns = |who: &str| std::fs::read_link(format!("/proc/{who}/ns/net"));
    let peer = pid.to_string();
    let (own_filters, own_nnp) = status("self")?;
    let (filters, nnp) = status(&peer)?;
    let own_netns = netns("self").map_err(|_| "cannot be inspected".to_string())?;
    match netns(&peer) {
        Ok(theirs) if theirs != own_netns => {
            return Err("is in another network namespace (a session's runner or command)".into());
        }
        Ok(_) => {}
        // A gateway in a user namespace (a rootless container, `unshare -U`) may not look into
        // a process outside it (red team 43b B3: the owner's gatewayctl was refused as
        // "another network namespace" and could neither revoke nor approve). Every runner and
        // command runs under the broker's seccomp filter and `no_new_privs`, checked below;
        // only an outside process the gateway cannot inspect is let through on that alone.
        Err(err) if err.kind() == std::io::ErrorKind::PermissionDenied => {}
        Err(_) => return Err("cannot be inspected".into()),
    }
    if filters > own_filters || nnp > own_nnp {
        return Err("runs under a sandbox (seccomp or no_new_privs) the gateway does not".into());
    }
    Ok(())
}

/// Elsewhere the runner's Seatbelt profile denies connecting to Unix sockets.
#[cfg(not(target_os = "linux"))]
fn peer_is_unconfined(_pid: Option<i32>) -> Result<(), String> {
    Ok(())
}

fn oauth_off() -> AdminAnswer {
    AdminAnswer::refused(
        AdminErrorCode::OauthOff,
        "OAuth is off on this gateway (--auth token); start it with --auth both or --auth oauth",
    )
}

/// Bind the socket (replacing a stale one) with mode 0600. A socket that still answers belongs
/// to another gateway serving this state dir: refused rather than taken over.
pub fn bind(state_dir: &Path) -> anyhow::Result<UnixListener> {
    let path = socket_path(state_dir);
    match std::fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(&path).is_ok() {
                anyhow::bail!(
                    "another gateway is serving this state dir (its admin socket {} answers); \
                     stop it first",
                    path.display()
                );
            }
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
        Ok(_) => anyhow::bail!(
            "{} exists and is not a socket; refusing to replace it",
            path.display()
        ),
        Err(_) => {}
    }
    let listener =
        UnixListener::bind(&path).with_context(|| format!("binding {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("restricting {}", path.display()))?;
    Ok(listener)
}

/// Serve the socket until `shutdown`, then remove it.
pub async fn serve(
    listener: UnixListener,
    admin: Admin,
    path: PathBuf,
    shutdown: CancellationToken,
) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!("admin socket: accepting: {err}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        let admin = admin.clone();
        tokio::spawn(async move {
            if let Err(err) = handle(stream, &admin).await {
                tracing::debug!("admin socket: {err:#}");
            }
        });
    }
    let _ = std::fs::remove_file(&path);
}

fn line_of(answer: &AdminAnswer) -> String {
    format!("{}\n", admin::encode(answer))
}

async fn handle(stream: UnixStream, admin: &Admin) -> anyhow::Result<()> {
    let peer = stream
        .peer_cred()
        .context("reading the peer's credentials")?;
    let own = nix::unistd::geteuid().as_raw();
    let (read, mut write) = stream.into_split();
    // The request is read before any refusal is written: a client that writes its request
    // after the gateway closed saw a broken pipe instead of the refusal (red team 43b B3).
    let mut line = String::new();
    let mut reader = BufReader::new(tokio::io::AsyncReadExt::take(read, MAX_REQUEST_BYTES));
    tokio::time::timeout(REQUEST_TIMEOUT, reader.read_line(&mut line))
        .await
        .context("no request in time")??;
    if peer.uid() != own {
        let answer = AdminAnswer::refused(
            AdminErrorCode::Forbidden,
            "only the gateway's own user may use this socket",
        );
        write.write_all(line_of(&answer).as_bytes()).await?;
        anyhow::bail!("refused a peer with uid {}", peer.uid());
    }
    if let Err(why) = peer_is_unconfined(peer.pid()) {
        let answer = AdminAnswer::refused(
            AdminErrorCode::Forbidden,
            format!(
                "the admin socket serves only the owner's unconfined processes (run gatewayctl \
                 from an ordinary shell); this one {why}"
            ),
        );
        write.write_all(line_of(&answer).as_bytes()).await?;
        tracing::warn!("admin socket: refused a confined peer: it {why}");
        anyhow::bail!("refused a confined peer: it {why}");
    }
    let answer = match admin::decode_call(line.trim()) {
        Ok(request) => admin.answer(request),
        Err(refusal) => refusal,
    };
    write.write_all(line_of(&answer).as_bytes()).await?;
    write.shutdown().await?;
    Ok(())
}
