//! A stdio MCP server built with the official Rust SDK (`rmcp`), for the protocol-version tests
//! (`tests/versions.rs`). Not part of Holdcall: a test fixture, built by `cargo test`.
//!
//! It speaks every revision rmcp 3.11 knows: `initialize` for 2024-11-05 … 2025-11-25, and
//! `server/discover` plus per-request `_meta` for 2026-07-28. Tools:
//! - `echo {text}` says the text back;
//! - `delete_file {path}` pretends to delete (the tests deny it, so it must never run);
//! - `confirm {}` needs the user: before 2026-07-28 it sends the client an `elicitation/create`
//!   request and waits for the answer; from 2026-07-28 it answers `resultType: "input_required"`
//!   and completes when the client retries with `inputResponses`.
//!
//! Usage: `fixture_rmcp --record FILE`. Every byte read from stdin is appended to `FILE`, every
//! byte written to stdout to `FILE.out`, each before it is acted on or sent, so a test that has
//! seen an answer can compare both directions byte for byte.

// A fixture fails loudly.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::fs::File;
use std::io::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
    ElicitRequestParams, ErrorData, InputRequest, InputRequests, InputRequiredResult,
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

#[derive(Clone)]
struct Fixture;

fn tool(name: &'static str, description: &'static str, properties: Value) -> Tool {
    let schema = json!({"type": "object", "properties": properties});
    let Value::Object(schema) = schema else {
        unreachable!()
    };
    Tool::new(name, description, Arc::new(schema))
}

fn text(t: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(t)])
}

fn confirm_form() -> ElicitRequestParams {
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: "Really?".to_string(),
        requested_schema: serde_json::from_value(json!({
            "type": "object",
            "properties": {"sure": {"type": "boolean"}},
            "required": ["sure"]
        }))
        .unwrap(),
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            rmcp::model::Implementation::new("holdcall-fixture-rmcp", "1"),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![
            tool(
                "echo",
                "Says the text back.",
                json!({"text": {"type": "string"}}),
            ),
            tool(
                "delete_file",
                "Pretends to delete a file.",
                json!({"path": {"type": "string"}}),
            ),
            tool("confirm", "Asks the user to confirm.", json!({})),
        ]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arg = |k: &str| {
            request
                .arguments
                .as_ref()
                .and_then(|a| a.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        match request.name.as_ref() {
            "echo" => Ok(text(format!("Echo: {}", arg("text"))).into()),
            "delete_file" => Ok(text(format!("pretended to delete {}", arg("path"))).into()),
            "confirm" => {
                let stateless = context
                    .protocol_version()
                    .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
                if stateless {
                    match request.input_responses {
                        None => {
                            let mut asks = InputRequests::new();
                            asks.insert(
                                "sure".to_string(),
                                InputRequest::Elicitation(ElicitRequest::new(confirm_form())),
                            );
                            Ok(
                                InputRequiredResult::new(Some(asks), Some("confirm-1".into()))
                                    .into(),
                            )
                        }
                        Some(answers) => {
                            let action = answers
                                .get("sure")
                                .and_then(|a| a.get("action"))
                                .and_then(Value::as_str)
                                .unwrap_or("none")
                                .to_string();
                            Ok(text(format!("Confirmed: {action}")).into())
                        }
                    }
                } else {
                    let answer = context
                        .peer
                        .create_elicitation(confirm_form())
                        .await
                        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
                    Ok(text(format!("Confirmed: {:?}", answer.action)).into())
                }
            }
            other => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                "no tool named {other}"
            ))])
            .into()),
        }
    }
}

/// stdin, with every byte read appended to a file first.
struct TeeIn {
    inner: tokio::io::Stdin,
    log: File,
}

impl AsyncRead for TeeIn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let fresh = buf.filled().get(before..).unwrap_or_default().to_vec();
            self.log.write_all(&fresh)?;
            self.log.flush()?;
        }
        polled
    }
}

/// stdout, written synchronously, with every byte logged to a file before it is written.
struct TeeOut {
    log: File,
}

impl AsyncWrite for TeeOut {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.log.write_all(buf)?;
        self.log.flush()?;
        let mut out = std::io::stdout().lock();
        out.write_all(buf)?;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(std::io::stdout().lock().flush())
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_flush(cx)
    }
}

fn append(path: &str) -> File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let record = match args.as_slice() {
        [_, flag, file] if flag == "--record" => file.clone(),
        _ => panic!("usage: fixture_rmcp --record FILE"),
    };
    let transport = (
        TeeIn {
            inner: tokio::io::stdin(),
            log: append(&record),
        },
        TeeOut {
            log: append(&format!("{record}.out")),
        },
    );
    // A client that leaves before its first request ends the fixture quietly.
    if let Ok(service) = Fixture.serve(transport).await {
        let _ = service.waiting().await;
    }
}
