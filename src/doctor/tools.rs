//! The pinned tool definitions, read-only: a definition whose texts hide characters from a
//! person (`mcp::tools::lint`), and a tool whose definition changed since it was pinned.

use super::{Check, Ctx, Status, check};
use crate::journal::Reader;
use crate::text::visible;

pub(super) fn tool_definitions(ctx: &Ctx) -> Vec<Check> {
    let name = "tool definitions";
    let Ok(home) = &ctx.home else {
        return Vec::new();
    };
    if !home.db_path().exists() {
        return Vec::new();
    }
    let pins = match Reader::open(&home.db_path()).and_then(|r| r.tool_pins(None)) {
        Ok(p) => p,
        Err(e) => return vec![check(name, Status::Warn, e.to_string(), None)],
    };
    let mut out = Vec::new();
    for p in &pins {
        let at = format!("tool {}/{}", visible(&p.connector), visible(&p.tool));
        let flags = crate::mcp::tools::lint(&p.seen_definition);
        if !flags.is_empty() {
            out.push(check(
                &at,
                Status::Warn,
                format!("its definition holds characters a person would not see: {}", flags.join("; ")),
                Some("read it with `holdcall tools list`; a description that hides text may be instructions to the model"),
            ));
        }
        if p.state == crate::journal::CHANGED {
            out.push(check(
                &at,
                Status::Warn,
                "its definition changed since it was pinned; calls to it meet the drift guard".into(),
                Some("`holdcall tools list` shows what changed; `holdcall tools accept CONNECTOR TOOL` re-pins it"),
            ));
        }
    }
    if out.is_empty() {
        out.push(check(
            name,
            Status::Ok,
            format!("{} pinned, none changed or hiding characters", pins.len()),
            None,
        ));
    }
    out
}
