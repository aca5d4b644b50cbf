//! Holdcall: a local MCP firewall.
pub mod limits;
pub mod frame;
pub mod journal;
pub mod policy;
