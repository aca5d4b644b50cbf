//! Checkpoints a live journal from outside the daemon, as the daemon's own auto-checkpoint would
//! after about 1,000 pages of -wal: the power-loss model (tests/power.rs) runs it under the fault
//! shim midway, so its images cover the database file's own sync and a -wal that starts over,
//! without writing the thousands of entries an auto-checkpoint needs. Not part of Holdcall: a
//! test fixture, built by `cargo test`. It must never write an entry or change a table.
//!
//! Usage: `fixture_checkpoint DB SYNCHRONOUS` (SYNCHRONOUS 1 = NORMAL, 2 = FULL, as the
//! daemon's durability sets it). Runs `PRAGMA wal_checkpoint(RESTART)` and prints its three
//! numbers (busy, -wal frames, frames checkpointed).

// A fixture fails loudly.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (db, synchronous) = match args.as_slice() {
        [_, db, s] => (db, s.parse::<i64>().expect("SYNCHRONOUS is 1 or 2")),
        _ => panic!("usage: fixture_checkpoint DB SYNCHRONOUS"),
    };
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(20))
        .unwrap();
    conn.pragma_update(None, "synchronous", synchronous)
        .unwrap();
    let (busy, frames, done): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    println!("{busy} {frames} {done}");
}
