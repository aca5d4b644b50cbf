//! The management requests that change or read what is in force: policy rules and files,
//! budgets, agents, connectors. Each change is serialised (on `Shared::rows`, or for connectors
//! `Shared::connectors`), journaled in one transaction with its rows, and only then in force.
//! Must never: put a change in force that the journal did not record, or change anything while
//! the tables do not match the journal.

pub(crate) mod agent;
pub(crate) mod budget;
pub(crate) mod connector;
pub(crate) mod policy;
