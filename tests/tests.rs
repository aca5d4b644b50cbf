//! Every integration test of Holdcall, in one test binary (as ripgrep does): one link after a
//! change to src/ instead of one per file. Each file beside this one is a module holding the
//! tests of one subject, run as `cargo test --test tests FILE::` (e.g. `relay::`); `common`
//! holds what they share (a private home, the real binary, a relay in front of the demo
//! server). The tests of every file run in parallel threads of this one process: nothing here
//! may change the process's environment or current directory, and a test that loads the
//! machine on purpose takes it alone (`common::alone`).

// Test code fails loudly: an unwrap or an index here is an assertion.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

mod agents;
mod approval;
mod bench_decisions;
mod budgets;
mod cli;
mod connectors;
mod console;
mod crash;
mod daemon_lifecycle;
mod derived_connector;
mod failclosed;
mod faults;
mod full_disk;
mod holdmap;
mod hostile;
mod identity;
mod init;
mod integrity;
mod journal_tamper;
mod layering;
mod minimal_env;
mod other_home;
mod pins;
mod policy_cli;
mod policy_examples;
mod policy_files;
mod power;
mod relay;
mod rendering;
mod rmcp_client;
mod shim_selftest;
mod versions;
