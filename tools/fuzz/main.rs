//! `holdcall-fuzz`: every fuzz target of `holdcall::fuzzing` in one libFuzzer binary, the
//! target named by `HOLDCALL_FUZZ_TARGET`. Built and run by tools/fuzz/run (decision 0015);
//! the `fuzz` feature only.

#![no_main]

use std::sync::OnceLock;

static TARGET: OnceLock<fn(&[u8])> = OnceLock::new();

libfuzzer_sys::fuzz_target!(
    init: {
        if std::env::var_os("HOLDCALL_FUZZ_LIST").is_some() {
            let names: Vec<&str> = holdcall::fuzzing::TARGETS.iter().map(|(n, _)| *n).collect();
            println!("{}", names.join(" "));
            std::process::exit(0);
        }
        let name = std::env::var("HOLDCALL_FUZZ_TARGET").unwrap_or_default();
        let Some(f) = holdcall::fuzzing::target(&name) else {
            let names: Vec<&str> = holdcall::fuzzing::TARGETS.iter().map(|(n, _)| *n).collect();
            eprintln!("holdcall-fuzz: set HOLDCALL_FUZZ_TARGET to one of: {}", names.join(", "));
            std::process::exit(2);
        };
        if !holdcall::fuzzing::INSTRUMENTED {
            eprintln!("holdcall-fuzz: the library was built without tools/fuzz/rustc-wrap, so nothing guides the fuzzer; build it with tools/fuzz/run");
            std::process::exit(2);
        }
        let _ = TARGET.set(f);
    },
    |data: &[u8]| {
        if let Some(f) = TARGET.get() {
            f(data);
        }
    }
);
