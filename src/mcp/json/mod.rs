//! JSON as RFC 8259 bytes: the strict scanner (`scan`) and the one string-escape decoder
//! (`escape`). No serde: spans of the input, never a re-serialised value.
//!
//! Owns: what a valid JSON value, string and key are, and what a string decodes to. Must never:
//! accept what another reader could read differently, or recurse on the input's nesting.

pub(crate) mod escape;
pub(crate) mod scan;
