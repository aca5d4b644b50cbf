//! The fuzz targets (feature `fuzz` only): each a function over arbitrary bytes that drives one
//! parser of the library the way the product does and checks what must hold of its answer.
//! tools/fuzz/main.rs runs one of them under libFuzzer, picked by `HOLDCALL_FUZZ_TARGET`.
//!
//! Owns: the glue only. Must never: do I/O, start processes, open a database or a socket, or
//! sleep — each target runs millions of times. A target panics only when a property fails:
//! that panic is the finding, and libFuzzer keeps the input that caused it.

#![allow(clippy::panic)]

/// One target: its name (the corpus folder's too) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, in the order tools/fuzz/run runs them.
pub const TARGETS: &[Target] = &[("classify", classify)];

/// The target called `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Whether this library was compiled by tools/fuzz/rustc-wrap (with coverage instrumentation).
pub const INSTRUMENTED: bool = cfg!(fuzzing);

fn classify(data: &[u8]) {
    let _ = crate::relay::classify::classify_client_line(data);
}
