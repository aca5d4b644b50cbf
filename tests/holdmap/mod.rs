//! holdmap through the real binary: `holdmap mcp` driven over stdio with raw lines (the wire
//! rules), against real listeners that the tests start themselves. The Python SDK client's
//! tests of the same server are in tools/rig/test_holdmap.py.

pub(crate) mod client;
pub(crate) mod fake_agent;

mod activity;
mod agents;
mod analyzers;
mod capabilities;
mod cli;
mod flow;
mod linking;
mod needs;
mod ports;
mod stops;
mod topology;
mod wire;
