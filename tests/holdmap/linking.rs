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

/// The patterns some symbol's own code belongs to: the symbol's path starts with the pattern
/// (`cedar_policy_core::parser::…`), or it is a method of a type there (`<rusqlite::Connection
/// as …>::…`). A pattern seen only as a type parameter of a generic function of `core` or
/// `alloc` does not count: the linker folds identical instantiations (a sort or a drop of a
/// vector of two references) under whichever name it met first, so `drop_in_place<Vec<(&SmolStr,
/// &cedar_policy_core::…)>>` can name code holdmap's own sort uses, with no line of Cedar in it.
fn found<'a>(symbols: &str, patterns: &[&'a str]) -> Vec<&'a str> {
    let names: Vec<&str> = symbols
        .lines()
        .filter_map(|l| l.splitn(3, ' ').nth(2))
        .collect();
    patterns
        .iter()
        .copied()
        .filter(|p| {
            names
                .iter()
                .any(|n| n.starts_with(p) || n.strip_prefix('<').is_some_and(|n| n.starts_with(p)))
        })
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

/// Regression: a merge of part 2's branches made the linker name a folded `core` sort helper
/// after a Cedar instantiation; that is not Cedar's code, while a Cedar function or method is.
#[test]
fn a_crate_seen_only_as_a_type_parameter_of_core_code_is_not_counted_as_linked() {
    let folded = "00000000008a9310 t core::ptr::drop_in_place<alloc::vec::Vec<(&smol_str::SmolStr,&cedar_policy_core::ast::expr::Expr)>>\n";
    assert!(found(folded, &["cedar_policy"]).is_empty());
    let own = "0000000000001000 T cedar_policy_core::parser::parse_policy\n";
    let method = "0000000000001000 t <rusqlite::Connection as core::ops::drop::Drop>::drop\n";
    assert_eq!(found(own, &["cedar_policy"]), vec!["cedar_policy"]);
    assert_eq!(found(method, &["rusqlite::"]), vec!["rusqlite::"]);
}
