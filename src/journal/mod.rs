//! The journal: Holdcall's append-only, hash-chained record of every decision, kept in SQLite.
//!
//! This module owns the database file and everything in it: the schema (`meta`, `journal`,
//! `policies`, `budgets`, `agents`, `connectors`), opening it safely (mode 0600, WAL,
//! `synchronous` chosen by [`Durability`](crate::config::Durability) and read back), the canonical
//! encoding v1 and the hash chain (normative text: `docs/journal-format.md`), appending entries
//! through the single writer [`Journal`], the tables of what is in force (each change committed
//! with its entry), the read-only [`Reader`] with its queries, and [`Reader::verify`]. It also
//! owns the machine id file, because that id seeds the chain.
//!
//! It must never update or delete an entry, never report a write as done before its transaction
//! has committed, never swallow a write error, never let a [`Reader`] create or migrate a
//! database, and never hash anything other than the exact strings it stores. It records
//! decisions and never makes one, and it talks to no socket. Only the daemon writes through a
//! [`Journal`] (from its single writer thread, `daemon::writer`, after `Journal::open` at start);
//! everyone else reads through a [`Reader`].
//!
//! Where things are: `encoding` (the entry, its bytes, the hashes), `schema` (tables, migration,
//! pragmas), `row` (an entry row read strictly), `files` (0600 files and the machine id),
//! `writer` (the [`Journal`] and its appends), `tables` (policies, budgets, agents, connectors
//! and their changes), `in_force` (what is in force, checked against the journal), `reader`
//! (the [`Reader`]), `verify` (the chain walk), `error` ([`JournalError`]).

mod encoding;
mod error;
mod files;
#[cfg(feature = "fuzz")]
pub(crate) mod fuzzing;
mod in_force;
mod pins;
mod reader;
mod row;
mod schema;
mod tables;
mod verify;
mod writer;

#[cfg(test)]
mod tests;

pub use encoding::{Entry, Fields, Kind, SCHEMA_VERSION, encode, entry_hash, genesis};
pub use error::JournalError;
pub(crate) use files::journal_has_entries;
pub use files::load_or_create_machine_id;
pub(crate) use in_force::InForce;
pub(crate) use pins::{Accepted, CHANGED, ListingRecorded, PinRow};
pub use reader::{LogFilter, Reader};
pub use tables::NewPolicy;
pub(crate) use tables::{AgentChange, BudgetChange, ConnectorChange, ConnectorRow, PolicyRow};
pub(crate) use verify::{ChainState, VerifyReport};
pub use writer::Journal;
