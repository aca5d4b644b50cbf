//! The fuzz targets (feature `fuzz` only): each a function over arbitrary bytes that drives one
//! parser of the library the way the product does and checks what must hold of its answer.
//! tools/fuzz/main.rs runs one of them under libFuzzer, picked by `HOLDCALL_FUZZ_TARGET`
//! (docs/faults.md, "Fuzzing"; decision 0015).
//!
//! Owns: the glue only. Must never: do I/O, start processes, open a database or a socket, or
//! sleep — each target runs millions of times. A target panics only when a property fails:
//! that panic is the finding, and libFuzzer keeps the input that caused it.

#![allow(clippy::panic)]

use std::path::PathBuf;

use crate::mcp::envelope::{Message, inspect_server_line, one_value};
use crate::relay::classify::{ClientFrame, classify_client_line};

/// One target: its name (the corpus folder's too) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, in the order tools/fuzz/run runs them.
pub const TARGETS: &[Target] = &[
    ("classify", classify),
    ("server-line", server_line),
    ("socket", socket),
    ("context", context),
    ("journal", journal),
    ("config", config),
    ("holdmap", holdmap),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Whether this library was compiled by tools/fuzz/rustc-wrap (with coverage instrumentation).
pub const INSTRUMENTED: bool = cfg!(fuzzing);

/// Whether `part` lies inside `whole` (the relay echoes raw bytes, never copies).
fn within(whole: &[u8], part: &[u8]) -> bool {
    let (w, p) = (whole.as_ptr() as usize, part.as_ptr() as usize);
    p >= w && p + part.len() <= w + whole.len()
}

/// How a standard, permissive reader (serde_json, as a server written in it reads the line)
/// sees one message: its `method` and, for a call, its `params.name`.
fn standard_reading(v: &serde_json::Value) -> (Option<&str>, Option<&str>) {
    let method = v.get("method").and_then(serde_json::Value::as_str);
    let name = v
        .get("params")
        .and_then(|p| p.get("name"))
        .and_then(serde_json::Value::as_str);
    (method, name)
}

/// The client-line classifier. Beyond not panicking: every raw slice it hands out lies in the
/// line; a line (or batch) it forwards unexamined is not a `tools/call` to a standard reader;
/// a call both read names the same tool.
fn classify(data: &[u8]) {
    let frame = classify_client_line(data);
    let standard = serde_json::from_slice::<serde_json::Value>(data).ok();
    match &frame {
        ClientFrame::Forward(Message { id, params, .. }) => {
            for part in [id, params].into_iter().flatten() {
                assert!(within(data, part), "a forwarded slice is not in the line");
            }
            if let Some(v) = &standard {
                let (method, _) = standard_reading(v);
                assert!(
                    method != Some("tools/call"),
                    "forwarded unexamined, but a standard reader sees a tools/call"
                );
            }
        }
        ClientFrame::ToolCall(call) => {
            for part in [&call.id, &call.arguments, &call.request_state]
                .into_iter()
                .flatten()
            {
                assert!(within(data, part), "a call's slice is not in the line");
            }
            // The relay may decide more than a standard reader sees (it folds the case of
            // keys: `"METHOD"` is read as `method`), never less: where the standard reader
            // sees a call and a tool name, it is the name the relay decides on.
            if let Some(v) = &standard
                && let (Some("tools/call"), Some(name)) = standard_reading(v)
            {
                assert_eq!(
                    name, call.name,
                    "the relay decides on a tool name a standard reader does not read"
                );
            }
        }
        ClientFrame::BatchForward => {
            if let Some(serde_json::Value::Array(items)) = &standard {
                for item in items {
                    assert!(
                        standard_reading(item).0 != Some("tools/call"),
                        "a batch forwarded unexamined holds a tools/call"
                    );
                }
            }
        }
        _ => {}
    }
}

/// The relay's reading of a server line: the envelope, the protocol negotiation, the outcome of
/// a call, a `tools/list` answer's definitions (canonical form and hash) and hide-denied's
/// rewrite. Canonical forms are fixed points; a rewritten listing no longer lists the tools
/// it was told to drop and is still one JSON value.
fn server_line(data: &[u8]) {
    let msg = inspect_server_line(data);
    let mut negotiation = crate::mcp::version::Negotiation::default();
    negotiation.on_server(&msg);
    let _ = negotiation.version();
    let Some(result) = msg.result else {
        return;
    };
    let _ = crate::mcp::envelope::result_is_error(result);
    let _ = crate::mcp::envelope::input_required_state(result);
    let Some(listing) = crate::mcp::tools::read_listing(result) else {
        return;
    };
    for tool in &listing.tools {
        assert_eq!(
            tool.hash,
            crate::ids::sha256_hex(tool.canonical.as_bytes()),
            "a definition's hash is not its canonical text's"
        );
        let again = crate::mcp::tools::definition(tool.canonical.as_bytes());
        assert_eq!(
            again.as_ref().map(|d| d.canonical.as_str()),
            Some(tool.canonical.as_str()),
            "the canonical form of a canonical definition differs from it"
        );
        let _ = crate::mcp::tools::lint(&tool.canonical);
    }
    let drop: Vec<String> = listing
        .tools
        .iter()
        .take(1)
        .map(|t| t.name.clone())
        .collect();
    if let Some(out) = crate::mcp::tools::without_tools(data, &drop) {
        assert!(
            matches!(one_value(&out), Ok(Some(_))),
            "hide-denied made a line that is not one JSON value"
        );
        let left = inspect_server_line(&out)
            .result
            .and_then(crate::mcp::tools::read_listing);
        if let Some(left) = left {
            assert!(
                !left.tools.iter().any(|t| drop.contains(&t.name)),
                "hide-denied left a tool it was told to take out"
            );
        }
    }
}

/// The daemon's reading of one socket line (hello, session and manage requests).
fn socket(data: &[u8]) {
    let _ = crate::ipc::Incoming::read(data);
}

/// The Cedar context built from a call's raw arguments. The first byte says whether the relay
/// omitted the arguments. Readable or not, the arguments always make a context (unreadable
/// ones an empty record, which the policy wrapper keeps from deciding).
fn context(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let Some(clock) = crate::policy::context::Clock::parse("2026-12-03T12:00:00+01:00") else {
        return;
    };
    let arguments = (flags & 2 == 0).then_some(text);
    let ctx = crate::policy::context::CallContext::from_call(arguments, flags & 1 == 1, clock);
    if let Err(e) = ctx.to_cedar() {
        panic!("arguments made no Cedar context: {e}");
    }
}

/// Journal decoding (see `journal::fuzzing`).
fn journal(data: &[u8]) {
    crate::journal::fuzzing::journal(data);
}

/// The client-config readers: the first byte picks one of the files Holdcall reads (each with
/// its format and layout: Claude, Cursor, VS Code, Windsurf, Codex's TOML, Gemini …), the rest
/// is its text.
fn config(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let places = crate::clients::Places {
        home: PathBuf::from("/fuzz/home"),
        config_dir: PathBuf::from("/fuzz/home/.config"),
        codex_home: PathBuf::from("/fuzz/home/.codex"),
        project: PathBuf::from("/fuzz/project"),
    };
    let files = places.files();
    let Some(spec) = files.get(usize::from(pick) % files.len().max(1)) else {
        return;
    };
    let _ = crate::clients::entries_of(spec, text, &["PATH"]);
}

/// `holdmap mcp`'s request handling: every answer is one line of JSON.
fn holdmap(data: &[u8]) {
    for answer in crate::holdmap::answers_for_fuzzing(data) {
        let Some((last, body)) = answer.split_last() else {
            panic!("holdmap wrote an empty answer");
        };
        assert_eq!(*last, b'\n', "an answer does not end its line");
        assert!(!body.contains(&b'\n'), "an answer spans several lines");
        assert!(
            serde_json::from_slice::<serde_json::Value>(body).is_ok(),
            "an answer is not JSON"
        );
    }
}
