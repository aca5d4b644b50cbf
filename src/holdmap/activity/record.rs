//! One activity record: the closed set of fields a recorder may send and a collector keeps
//! (`FIELDS`), how it is written, and the strict reading of a posted body.
//!
//! Must never: hold a string a caller chose (the tool is a catalog name or `unknown`, the status
//! one of four words); accept a body with a field beyond `FIELDS`, a repeated key, or a value of
//! another type, so that even a faulty sender cannot make the collector keep an argument.

use serde_json::{Value, json};

use crate::holdmap::catalog;
use crate::mcp::envelope::{one_value, unique_members};

/// Every field of a record, exactly: a posted body must have each of them and no other.
pub(crate) const FIELDS: [&str; 7] = [
    "tool",
    "status",
    "started_at_ms",
    "duration_ms",
    "request_bytes",
    "result_bytes",
    "dropped_before",
];

/// What the collector gives a tool name that is not in its catalog (a newer server's tool).
pub(crate) const UNKNOWN_TOOL: &str = "unknown";

/// The largest number a record holds: what a JSON reader in any language reads exactly.
const NUMBER_MAX: u64 = (1 << 53) - 1;

/// How one tool call ended, as far as the recorder may say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// The tool answered with a result.
    Ok,
    /// The tool answered with a tool error (`isError: true`), including refused arguments.
    ToolError,
    /// The client cancelled the call; no answer was written.
    Cancelled,
    /// The call was refused as a malformed request (a JSON-RPC error).
    ProtocolError,
}

impl Status {
    const ALL: [Status; 4] = [
        Status::Ok,
        Status::ToolError,
        Status::Cancelled,
        Status::ProtocolError,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::ToolError => "tool_error",
            Status::Cancelled => "cancelled",
            Status::ProtocolError => "protocol_error",
        }
    }
}

/// One tool call's metadata: nothing of its arguments, result, request id or error text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    /// The catalog's name for the tool (never the caller's string), or `UNKNOWN_TOOL`.
    pub(crate) tool: &'static str,
    pub(crate) status: Status,
    /// When the server began handling the call, in milliseconds since the Unix epoch.
    pub(crate) started_at_ms: u64,
    /// From the start of handling to the answer (or the cancellation), in milliseconds.
    pub(crate) duration_ms: u64,
    /// The serialised size of the request message as it arrived (bytes, no newline).
    pub(crate) request_bytes: u64,
    /// The serialised size of the answer message as written (bytes, no newline); 0 when none.
    pub(crate) result_bytes: u64,
    /// How many earlier records this server could not deliver (queue full, collector gone).
    pub(crate) dropped_before: u64,
}

impl Record {
    pub(crate) fn to_json(self) -> Value {
        json!({
            "tool": self.tool,
            "status": self.status.as_str(),
            "started_at_ms": self.started_at_ms.min(NUMBER_MAX),
            "duration_ms": self.duration_ms.min(NUMBER_MAX),
            "request_bytes": self.request_bytes.min(NUMBER_MAX),
            "result_bytes": self.result_bytes.min(NUMBER_MAX),
            "dropped_before": self.dropped_before.min(NUMBER_MAX),
        })
    }

    /// A posted body, read strictly: one JSON object with exactly `FIELDS` (keys compared by
    /// their exact bytes, none repeated), the tool a name of this holdmap's catalog (else
    /// `UNKNOWN_TOOL`), the status one of its four words, each number a whole number from 0 to
    /// 2^53 - 1. The error says which rule failed, never echoing what was sent.
    pub(crate) fn parse(body: &[u8]) -> Result<Record, String> {
        let value = match one_value(body) {
            Ok(Some(value)) => value,
            Ok(None) | Err(_) => return Err("the body is not one JSON value".to_owned()),
        };
        let members = unique_members(value)
            .ok_or("the body is not a JSON object with unique keys".to_owned())?;
        if members.len() != FIELDS.len() {
            return Err(format!(
                "a record has exactly these fields: {}",
                FIELDS.join(", ")
            ));
        }
        let raw = |field: &str| {
            members
                .iter()
                .find(|m| m.key.as_ref() == field.as_bytes())
                .map(|m| m.value)
                .ok_or(format!(
                    "a record has exactly these fields: {}",
                    FIELDS.join(", ")
                ))
        };
        let text = |field: &str| -> Result<String, String> {
            serde_json::from_slice::<String>(raw(field)?)
                .map_err(|_| format!("`{field}` must be a string"))
        };
        let number = |field: &str| -> Result<u64, String> {
            serde_json::from_slice::<u64>(raw(field)?)
                .ok()
                .filter(|n| *n <= NUMBER_MAX)
                .ok_or(format!(
                    "`{field}` must be a whole number from 0 to 2^53 - 1"
                ))
        };
        let tool = tool_name(&text("tool")?);
        let status = text("status")?;
        let status = Status::ALL
            .into_iter()
            .find(|s| s.as_str() == status)
            .ok_or("`status` must be ok, tool_error, cancelled or protocol_error".to_owned())?;
        Ok(Record {
            tool,
            status,
            started_at_ms: number("started_at_ms")?,
            duration_ms: number("duration_ms")?,
            request_bytes: number("request_bytes")?,
            result_bytes: number("result_bytes")?,
            dropped_before: number("dropped_before")?,
        })
    }
}

/// The catalog's own `&'static` spelling of `name`, or `UNKNOWN_TOOL`: a record never holds a
/// string it was sent.
pub(crate) fn tool_name(name: &str) -> &'static str {
    catalog::catalog()
        .iter()
        .map(|(def, _)| def.name)
        .find(|known| *known == name)
        .unwrap_or(UNKNOWN_TOOL)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            tool: "list_ports",
            status: Status::ToolError,
            started_at_ms: 1_780_000_000_000,
            duration_ms: 3,
            request_bytes: 120,
            result_bytes: 4000,
            dropped_before: 0,
        }
    }

    #[test]
    fn a_record_is_written_with_exactly_its_fields_and_read_back() {
        let v = sample().to_json();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut fields = FIELDS.to_vec();
        fields.sort_unstable();
        let mut keys = keys;
        keys.sort_unstable();
        assert_eq!(keys, fields);
        let body = serde_json::to_vec(&v).unwrap();
        assert!(body.len() <= crate::limits::HOLDMAP_ACTIVITY_RECORD_JSON_BYTES_MAX);
        assert_eq!(Record::parse(&body).unwrap(), sample());
    }

    #[test]
    fn a_body_with_an_extra_field_is_refused_so_no_argument_can_be_pushed() {
        let mut v = sample().to_json();
        v["arguments"] = json!({"query": "canary-XYZ"});
        let err = Record::parse(&serde_json::to_vec(&v).unwrap()).unwrap_err();
        assert!(err.contains("exactly these fields"), "{err}");
        assert!(!err.contains("canary"), "{err}");
    }

    #[test]
    fn a_body_missing_a_field_or_with_a_renamed_one_is_refused() {
        let mut v = sample().to_json();
        v.as_object_mut().unwrap().remove("dropped_before");
        assert!(Record::parse(&serde_json::to_vec(&v).unwrap()).is_err());
        v["Dropped_Before"] = json!(0);
        assert!(Record::parse(&serde_json::to_vec(&v).unwrap()).is_err());
    }

    #[test]
    fn a_body_that_repeats_a_key_is_refused() {
        let body = br#"{"tool":"list_ports","tool":"x","status":"ok","started_at_ms":1,"duration_ms":1,"request_bytes":1,"result_bytes":1}"#;
        assert!(Record::parse(body).is_err());
    }

    #[test]
    fn values_of_the_wrong_type_or_range_are_refused() {
        for (field, bad) in [
            ("status", json!("fine")),
            ("status", json!(1)),
            ("tool", json!(["list_ports"])),
            ("duration_ms", json!(-1)),
            ("duration_ms", json!(1.5)),
            ("request_bytes", json!("12")),
            ("result_bytes", json!(1u64 << 60)),
        ] {
            let mut v = sample().to_json();
            v[field] = bad.clone();
            assert!(
                Record::parse(&serde_json::to_vec(&v).unwrap()).is_err(),
                "{field} = {bad}"
            );
        }
        assert!(Record::parse(b"[1]").is_err());
        assert!(Record::parse(b"{} {}").is_err());
        assert!(Record::parse(b"").is_err());
    }

    #[test]
    fn a_tool_name_outside_the_catalog_is_kept_only_as_unknown() {
        let mut v = sample().to_json();
        v["tool"] = json!("canary-XYZ");
        let record = Record::parse(&serde_json::to_vec(&v).unwrap()).unwrap();
        assert_eq!(record.tool, UNKNOWN_TOOL);
        assert_eq!(tool_name("list_ports"), "list_ports");
    }
}
