//! A scripted ChatGPT: typed calls of the six `native_session_*` tools with argument names
//! exactly as in DESIGN §3. Each call returns the raw CallToolResult so tests can assert either
//! success ([`crate::tool_ok`]) or a tool error ([`crate::tool_err_code`]).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::bail;
use serde_json::{Map, Value, json};

use crate::mcp::McpClient;

/// ChatGPT as a script: an [`McpClient`] plus one method per public tool.
#[derive(Debug)]
pub struct ScriptedChatGpt {
    pub client: McpClient,
}

impl ScriptedChatGpt {
    /// Connects like ChatGPT does (initialize with 2025-06-18, bearer token).
    pub async fn connect(url: &str, token: &str) -> anyhow::Result<Self> {
        Ok(Self {
            client: McpClient::connect(url, token).await?,
        })
    }

    /// Wraps an already connected client.
    pub fn new(client: McpClient) -> Self {
        Self { client }
    }

    /// Calls any tool with the given arguments.
    pub async fn call(&self, tool: &str, args: Value) -> anyhow::Result<Value> {
        self.client.call_tool(tool, args).await
    }

    /// `native_session_start` with the required arguments only.
    pub async fn start(
        &self,
        prompt: &str,
        working_directory: impl AsRef<Path>,
        idempotency_key: &str,
    ) -> anyhow::Result<Value> {
        self.start_with(prompt, working_directory, idempotency_key, json!({}))
            .await
    }

    /// `native_session_start` with extra optional arguments merged in (e.g.
    /// `{"capability_profile": "direct_write", "wait_seconds": 0}`).
    pub async fn start_with(
        &self,
        prompt: &str,
        working_directory: impl AsRef<Path>,
        idempotency_key: &str,
        extra: Value,
    ) -> anyhow::Result<Value> {
        let args = merge(
            json!({
                "prompt": prompt,
                "working_directory": working_directory.as_ref().to_string_lossy(),
                "idempotency_key": idempotency_key,
            }),
            extra,
        )?;
        self.call("native_session_start", args).await
    }

    /// `native_session_continue` (`wait_seconds` omitted when None).
    pub async fn continue_(
        &self,
        session: &str,
        lease: &str,
        prompt: &str,
        idempotency_key: &str,
        wait_seconds: Option<u32>,
    ) -> anyhow::Result<Value> {
        let mut args = json!({
            "native_session_id": session,
            "lease_id": lease,
            "prompt": prompt,
            "idempotency_key": idempotency_key,
        });
        if let Some(w) = wait_seconds {
            args["wait_seconds"] = json!(w);
        }
        self.call("native_session_continue", args).await
    }

    /// `native_session_reply_and_wait`; `text` and `tool_calls` (an array of
    /// `{"name", "arguments"}`) are omitted when None.
    pub async fn reply(
        &self,
        session: &str,
        lease: &str,
        turn_id: &str,
        reply_id: &str,
        text: Option<&str>,
        tool_calls: Option<Value>,
    ) -> anyhow::Result<Value> {
        let mut args = json!({
            "native_session_id": session,
            "lease_id": lease,
            "turn_id": turn_id,
            "reply_id": reply_id,
        });
        if let Some(t) = text {
            args["text"] = json!(t);
        }
        if let Some(c) = tool_calls {
            args["tool_calls"] = c;
        }
        self.call("native_session_reply_and_wait", args).await
    }

    /// `native_session_status` with `wait_seconds`.
    pub async fn status(
        &self,
        session: &str,
        lease: &str,
        wait_seconds: u32,
    ) -> anyhow::Result<Value> {
        self.call(
            "native_session_status",
            json!({"native_session_id": session, "lease_id": lease, "wait_seconds": wait_seconds}),
        )
        .await
    }

    /// `native_session_recover` with `wait_seconds`.
    pub async fn recover(
        &self,
        session: &str,
        recovery_token: &str,
        recovery_id: &str,
        wait_seconds: u32,
    ) -> anyhow::Result<Value> {
        self.call(
            "native_session_recover",
            json!({
                "native_session_id": session,
                "recovery_token": recovery_token,
                "recovery_id": recovery_id,
                "wait_seconds": wait_seconds,
            }),
        )
        .await
    }

    /// `native_session_stop` (`reason` omitted when None).
    pub async fn stop(
        &self,
        session: &str,
        lease: &str,
        request_id: &str,
        reason: Option<&str>,
    ) -> anyhow::Result<Value> {
        let mut args =
            json!({"native_session_id": session, "lease_id": lease, "request_id": request_id});
        if let Some(r) = reason {
            args["reason"] = json!(r);
        }
        self.call("native_session_stop", args).await
    }

    /// Polls `native_session_status` (long-polling `wait_seconds` up to 10 s at a time) until
    /// `done(view)` holds or `deadline` passes; returns the last SessionView. A tool error fails.
    pub async fn wait_until(
        &self,
        session: &str,
        lease: &str,
        deadline: Duration,
        mut done: impl FnMut(&Value) -> bool,
    ) -> anyhow::Result<Value> {
        let end = Instant::now() + deadline;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            let wait = u32::try_from(left.as_secs().min(10)).unwrap_or(10);
            let result = self.status(session, lease, wait).await?;
            if result
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(true)
            {
                bail!("status failed while waiting: {result}");
            }
            let view = result
                .get("structuredContent")
                .cloned()
                .unwrap_or(Value::Null);
            if done(&view) {
                return Ok(view);
            }
            if Instant::now() >= end {
                bail!("condition not reached within {deadline:?}; last view: {view}");
            }
            if wait == 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// `native_session_id` of a SessionView (panics if absent).
pub fn session_id(view: &Value) -> String {
    str_field(view, "native_session_id")
}

/// `lease_id` of a SessionView (panics if absent).
pub fn lease_id(view: &Value) -> String {
    str_field(view, "lease_id")
}

fn str_field(view: &Value, name: &str) -> String {
    match view.get(name).and_then(Value::as_str) {
        Some(s) => s.to_owned(),
        None => panic!("SessionView has no string `{name}`: {view}"),
    }
}

fn merge(base: Value, extra: Value) -> anyhow::Result<Value> {
    let (Value::Object(mut b), Value::Object(e)) = (base, extra) else {
        bail!("extra arguments must be a JSON object");
    };
    let e: Map<String, Value> = e;
    b.extend(e);
    Ok(Value::Object(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_overrides_and_adds() {
        let m = merge(json!({"a": 1, "b": 2}), json!({"b": 3, "c": 4})).unwrap();
        assert_eq!(m, json!({"a": 1, "b": 3, "c": 4}));
        assert!(merge(json!({}), json!([1])).is_err());
    }

    #[test]
    fn view_fields() {
        let v = json!({"native_session_id": "s1", "lease_id": "l1"});
        assert_eq!(session_id(&v), "s1");
        assert_eq!(lease_id(&v), "l1");
    }
}
