//! Classification of client lines: calls, forwards, repeated and disguised keys and methods,
//! framing, nesting, batches, and random input against serde_json.

use std::borrow::Cow;

use super::*;
use crate::ids::sha256_hex;
use crate::limits::JSON_DEPTH_MAX;
use crate::mcp::envelope::{inspect_server_line, request_state_key};
use crate::relay::refusal::{
    DENIED_BY_POLICY, DENIED_DISGUISED_METHOD, disguised_method_refusal, refusal,
};

fn call<'f, 'a>(frame: &'f ClientFrame<'a>) -> &'f ToolCall<'a> {
    match frame {
        ClientFrame::ToolCall(call) => call,
        other => panic!("expected a tool call, got {other:?}"),
    }
}

fn forwarded<'a>(frame: ClientFrame<'a>) -> Message<'a> {
    match frame {
        ClientFrame::Forward(message) => message,
        other => panic!("expected a forward, got {other:?}"),
    }
}

fn unreadable_call(line: &[u8]) -> (Option<&[u8]>, Anomaly) {
    match classify_client_line(line) {
        ClientFrame::UnreadableCall { id, anomaly } => (id, anomaly),
        other => panic!("expected an unreadable call, got {other:?}"),
    }
}

mod batches;
mod calls;
mod framing;
mod keys;
mod robustness;
mod unreadable;
