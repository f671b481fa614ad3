//! DeepSeek egress benchmark: what the gateway's path adds to one model request of a sub-session,
//! beside a direct loopback request to the same upstream measured in the same run.
//!
//! - Direct: an HTTP client posts the request to a local Anthropic-compatible upstream (a fake
//!   DeepSeek answering a small streamed message) and reads the whole answer.
//! - Egress: the request takes the sub-session's path from its broker on: a link frame over a Unix
//!   socket (the real codec, `BrokerToGateway::EgressRequest`), the ledger's durable record that
//!   it is leaving (a SQLite transaction, `synchronous=FULL`, as the gateway writes it), the
//!   gateway's `deepseek::egress::forward` (parse, route to the explicit model id, add the key,
//!   post to the same upstream, read and check the answer), the ledger's record of the answer,
//!   and the answer back as a frame. The runner → broker hop is
//!   left out: it is a loopback request the runner makes either way, in place of the direct one.
//!
//! The request is sized like a real Claude Code main-loop request (system prompt, our tool
//! schemas, a few turns: about 40 KB). Both paths alternate, so drift hits both alike.
//!
//! Run: `cargo bench -p gateway --bench deepseek_egress [-- --requests N --save]`. `--save` writes
//! the table to `gateway/benches/DEEPSEEK_EGRESS_RESULTS.md`. Timing never fails the bench.

use std::time::{Duration, Instant};

use common::codec::{decode, encode, frame_codec};
use common::protocol::{BrokerToGateway, EgressResponse, GatewayToBroker};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_util::codec::Framed;

const DEFAULT_REQUESTS: usize = 2000;
const WARMUP: usize = 100;
const SSE_ANSWER: &str = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"deepseek-flash\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"done\"}}\n\nevent: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";

/// A main-loop request about the size of a real one.
fn realistic_request() -> String {
    let tools: Vec<Value> = common::tools::LogicalTool::offered(
        common::tools::CapabilityProfile::WorktreeWrite,
        common::tools::SubagentPolicy::None,
    )
    .into_iter()
    .map(|t| json!({"name": t.runner_name(), "description": t.description(), "input_schema": t.input_schema()}))
    .collect();
    let filler = "The sub-session reads the worktree and edits one file at a time. ".repeat(180);
    let mut messages =
        vec![json!({"role": "user", "content": "Rename the helper and update its callers."})];
    for n in 0..6 {
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("toolu_{n}"), "name": "mcp__gw__Read", "input": {"file_path": format!("/w/src/file{n}.rs")}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("toolu_{n}"), "content": &filler[..2500]}]}));
    }
    json!({
        "model": "claude-sonnet-4-5-20250929",
        "max_tokens": 32000,
        "stream": true,
        "system": [{"type": "text", "text": filler}],
        "tools": tools,
        "messages": messages,
    })
    .to_string()
}

async fn upstream() -> anyhow::Result<String> {
    let app = axum::Router::new().route(
        "/anthropic/v1/messages",
        axum::routing::post(|_body: String| async {
            ([("content-type", "text/event-stream")], SSE_ANSWER)
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(format!("http://{addr}/anthropic"))
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let requests = args
        .iter()
        .position(|a| a == "--requests")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(DEFAULT_REQUESTS);
    let save = args.iter().any(|a| a == "--save");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (direct, egress) = runtime.block_on(measure(requests))?;
    let report = table(&direct, &egress, requests);
    println!("{report}");
    if save {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/benches/DEEPSEEK_EGRESS_RESULTS.md"
        );
        std::fs::write(path, report)?;
        println!("saved to {path}");
    }
    Ok(())
}

async fn measure(requests: usize) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let base = upstream().await?;
    let body = realistic_request();
    let direct_client = reqwest::Client::builder().no_proxy().build()?;
    let mut route = gateway::deepseek::route::DeepseekRoute::from_env()?;
    route.base_url = gateway::deepseek::route::check_base_url(&base)?;
    route.api_key = Some(gateway::deepseek::route::ApiKey::new("sk-bench".into()));
    let egress_client = gateway::deepseek::egress::client()
        .ok_or_else(|| anyhow::anyhow!("the egress's HTTP client could not start"))?;

    // The gateway's end of a broker link: frames in, the ledger, `forward`, frames out.
    let state_dir = tempfile::tempdir()?;
    let store = gateway::state::Store::open(state_dir.path())?;
    let (broker_end, gateway_end) = tokio::net::UnixStream::pair()?;
    tokio::spawn(async move {
        let _state_dir = state_dir;
        let mut framed = Framed::new(gateway_end, frame_codec());
        while let Some(Ok(frame)) = framed.next().await {
            let Ok(BrokerToGateway::EgressRequest { request_id, body }) = decode(&frame) else {
                continue;
            };
            let request_sha256 = common::hash::sha256_hex(body.as_bytes());
            let sent = gateway::state::LedgerEvent::DeepseekRequestSent {
                request_sha256: request_sha256.clone(),
                resent: false,
            };
            if store.write(|tx| tx.record("ds_bench", &sent)).is_err() {
                break;
            }
            let (response, record) =
                gateway::deepseek::egress::forward(&egress_client, &route, request_id, &body).await;
            let answered = gateway::state::LedgerEvent::DeepseekRequest {
                request_sha256,
                requested_model: record.requested_model,
                sent_model: record.sent_model,
                status: record.status,
                duration_ms: record.duration_ms,
                error: record.error,
            };
            if store.write(|tx| tx.record("ds_bench", &answered)).is_err() {
                break;
            }
            let Ok(bytes) = encode(&GatewayToBroker::EgressResponse(response)) else {
                break;
            };
            if framed.send(bytes).await.is_err() {
                break;
            }
        }
    });
    let mut broker = Framed::new(broker_end, frame_codec());

    let url = format!("{base}/v1/messages");
    let mut direct = Vec::with_capacity(requests);
    let mut egress = Vec::with_capacity(requests);
    for n in 0..(WARMUP + requests) {
        let started = Instant::now();
        let answer = direct_client
            .post(&url)
            .header("content-type", "application/json")
            .header("x-api-key", "sk-bench")
            .body(body.clone())
            .send()
            .await?
            .text()
            .await?;
        let direct_ms = started.elapsed().as_secs_f64() * 1000.0;
        anyhow::ensure!(answer == SSE_ANSWER, "direct answer differs");

        let started = Instant::now();
        let request = BrokerToGateway::EgressRequest {
            request_id: n as u64,
            body: body.clone(),
        };
        broker.send(encode(&request)?).await?;
        let frame = tokio::time::timeout(Duration::from_secs(10), broker.next())
            .await?
            .ok_or_else(|| anyhow::anyhow!("link closed"))??;
        let GatewayToBroker::EgressResponse(EgressResponse {
            status,
            body: answer,
            ..
        }) = decode(&frame)?
        else {
            anyhow::bail!("not an egress response");
        };
        let egress_ms = started.elapsed().as_secs_f64() * 1000.0;
        anyhow::ensure!(
            status == 200 && answer == SSE_ANSWER,
            "egress answer differs: {status}"
        );
        if n >= WARMUP {
            direct.push(direct_ms);
            egress.push(egress_ms);
        }
    }
    direct.sort_by(f64::total_cmp);
    egress.sort_by(f64::total_cmp);
    Ok((direct, egress))
}

fn table(direct: &[f64], egress: &[f64], requests: usize) -> String {
    let row = |name: &str, s: &[f64]| {
        format!(
            "| {name} | {:.3} | {:.3} | {:.3} |\n",
            quantile(s, 0.5),
            quantile(s, 0.9),
            quantile(s, 0.99)
        )
    };
    let added = quantile(egress, 0.5) - quantile(direct, 0.5);
    let ratio = quantile(egress, 0.5) / quantile(direct, 0.5);
    let size = realistic_request().len();
    format!(
        "# DeepSeek egress: added latency per model request\n\n\
         `cargo bench -p gateway --bench deepseek_egress -- --save` ({requests} requests of \
         {size} bytes each path, alternating, after {WARMUP} warm-up; 2 cores).\n\n\
         | path | p50 ms | p90 ms | p99 ms |\n|---|---|---|---|\n{}{}\n\
         **Added at p50: {added:.3} ms** (egress / direct = {ratio:.2}×; target ≤ 2 ms).\n\n\
         The egress path is the link frame over a Unix socket, the ledger's two durable records \
         (the request leaving, its answer), the gateway's route, key and answer check, and the \
         same upstream request; the direct path is that upstream request alone.\n",
        row("direct loopback request", direct),
        row("through the gateway egress", egress),
    )
}
