//! The three prompts (`diagnose_port`, `prepare_dev_server`, `inspect_agents`): instructions
//! only, never a tool run; caller values are embedded as one line of JSON data, never as
//! instruction lines.

use serde_json::{Map, Value};

/// `prompts/list`'s `prompts` array.
pub(crate) fn list() -> Value {
    Value::Array(Vec::new())
}

/// `prompts/get`'s result for `params`, or the -32602 message.
pub(crate) fn get(_params: &Map<String, Value>) -> Result<Value, String> {
    Err("no prompts yet".to_owned())
}
