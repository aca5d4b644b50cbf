//! The issue's rule that holdmap "must not link the relay, the daemon, Cedar, SQLite, axum or
//! the keyring into its code paths", checked on the binary itself: its symbol table (`nm`) names
//! none of Holdcall's own subsystems and none of their crates. The `holdcall` binary, built from
//! the same library, is the negative control: the same check finds every one of them there, so
//! a check that could not see a symbol would fail here rather than pass.
//!
//! It holds because `src/holdmap/` imports only the shared layers (tests/layering.rs) and the
//! linker drops what nothing reaches; this test is what notices if that ever stops being true.

use std::process::Command;

/// What must not be in holdmap: Holdcall's own subsystems and the crates only they use.
const FORBIDDEN: &[&str] = &[
    "sqlite3_",
    "rusqlite::",
    "cedar_policy",
    "axum::",
    "hyper::",
    "keyring::",
    "holdcall::relay::",
    "holdcall::daemon::",
    "holdcall::ipc::",
    "holdcall::policy::",
    "holdcall::journal::",
    "holdcall::console::",
    "holdcall::vault::",
];

fn symbols(binary: &str) -> String {
    let out = Command::new("nm")
        .args(["-C", binary])
        .output()
        .unwrap_or_else(|e| panic!("cannot run nm ({e}): install binutils (tools/test does)"));
    assert!(
        out.status.success(),
        "nm {binary} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn found<'a>(symbols: &str, patterns: &[&'a str]) -> Vec<&'a str> {
    patterns
        .iter()
        .copied()
        .filter(|p| symbols.contains(p))
        .collect()
}

#[test]
fn the_holdmap_binary_links_none_of_holdcalls_own_subsystems_nor_their_crates() {
    let holdmap = symbols(crate::holdmap::client::holdmap_binary());
    assert!(
        holdmap.contains("holdcall::holdmap::"),
        "the symbol table shows no holdmap code at all: is the binary stripped?"
    );
    assert_eq!(
        found(&holdmap, FORBIDDEN),
        Vec::<&str>::new(),
        "linked into holdmap"
    );
}

#[test]
fn the_same_check_finds_every_one_of_them_in_the_holdcall_binary() {
    let holdcall = symbols(env!("CARGO_BIN_EXE_holdcall"));
    assert_eq!(found(&holdcall, FORBIDDEN), FORBIDDEN.to_vec());
}
